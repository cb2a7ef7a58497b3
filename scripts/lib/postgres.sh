# A throwaway PostgreSQL for the tests: installs Debian's server when missing, creates a cluster
# in a temporary directory, serves it on a Unix socket in that directory only (no TCP), creates
# the database the tests use and exports its URL as BILLINGD_TEST_DATABASE_URL. Stopped and
# removed when the calling script exits, whether it passed or failed. Sourced, not run; needs
# scripts/lib/setup.sh first (billingd_ensure_packages).

# Debian's server package; its binaries land in /usr/lib/postgresql/VERSION/bin, off PATH.
billingd_postgres_packages=(postgresql)

# The directory of the throwaway cluster (socket, data, log) while one runs.
billingd_test_postgres_dir=""

# billingd_postgres_bin — the newest installed server's bin directory (15 on Debian 12).
billingd_postgres_bin() {
    local bin
    bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
    if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
        echo "billingd: no PostgreSQL server found in /usr/lib/postgresql/*/bin (Debian's postgresql package)." >&2
        return 1
    fi
    echo "$bin"
}

# billingd_as_postgres CMD... — runs CMD as the cluster's owner: the postgres user when this
# script runs as root (initdb and the server refuse root), else the current user.
billingd_as_postgres() {
    if [ "$(id -u)" -eq 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# billingd_start_test_postgres — starts the throwaway cluster and exports
# BILLINGD_TEST_DATABASE_URL; registers billingd_stop_test_postgres to run on exit.
billingd_start_test_postgres() {
    local started
    started=$(date +%s%N)
    billingd_ensure_packages "${billingd_postgres_packages[@]}"
    local bin
    bin=$(billingd_postgres_bin) || return 1

    billingd_test_postgres_dir=$(mktemp -d /tmp/billingd-pg.XXXXXX)
    trap billingd_stop_test_postgres EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
    if [ "$(id -u)" -eq 0 ]; then chown postgres: "$billingd_test_postgres_dir"; fi
    chmod 700 "$billingd_test_postgres_dir"

    local dir=$billingd_test_postgres_dir
    # trust: only this directory's owner (and root) can reach the socket, mode 700.
    if ! billingd_as_postgres "$bin/initdb" --pgdata="$dir/data" --username=postgres --auth=trust \
        --encoding=UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1; then
        echo "billingd: initdb failed for the test database:" >&2
        cat "$dir/initdb.log" >&2
        return 1
    fi
    # No TCP (listen_addresses empty), the socket in the cluster's own directory. fsync is off:
    # nothing in this cluster outlives the run, and CREATE DATABASE per test would otherwise
    # wait on the disk other engineers' builds share. The store's own durability setting
    # (synchronous_commit) is what the tests check, and it is untouched. A benchmark sets
    # BILLINGD_TEST_POSTGRES_DURABLE=1 to keep PostgreSQL's defaults (fsync on), as in production.
    local durability="-c fsync=off -c full_page_writes=off"
    # It also has autovacuum look every second rather than every minute: billingd's prepared
    # statements keep the plans PostgreSQL made while the tables were empty until their first
    # ANALYZE, and a run lasts seconds, not the hours a ledger runs (see the README's figures).
    if [ "${BILLINGD_TEST_POSTGRES_DURABLE:-0}" = 1 ]; then durability="-c autovacuum_naptime=1"; fi
    # Each test creates its own database and migrates it in one transaction, dozens at once: the
    # migrations' locks (a table, index, trigger or function each) share one lock table of
    # max_locks_per_transaction × max_connections entries, which PostgreSQL's default of 64 per
    # connection overflows ("out of shared memory"). One ledger migrating at a time never does.
    local options="-c listen_addresses='' -c unix_socket_directories='$dir' $durability -c max_connections=300 -c max_locks_per_transaction=256"
    # BILLINGD_TEST_POSTGRES_OPTIONS adds server options (scripts/bench-ingest loads pg_stat_statements).
    if [ -n "${BILLINGD_TEST_POSTGRES_OPTIONS:-}" ]; then options="$options $BILLINGD_TEST_POSTGRES_OPTIONS"; fi
    if ! billingd_as_postgres "$bin/pg_ctl" --pgdata="$dir/data" --log="$dir/server.log" --wait --timeout=60 \
        -o "$options" start >/dev/null; then
        echo "billingd: the test database did not start:" >&2
        cat "$dir/server.log" >&2
        return 1
    fi
    if ! billingd_as_postgres "$bin/createdb" --host="$dir" --username=postgres billingd_test; then
        echo "billingd: could not create the test database:" >&2
        cat "$dir/server.log" >&2
        return 1
    fi
    export BILLINGD_TEST_DATABASE_URL="postgres://postgres@/billingd_test?host=$dir&sslmode=disable"
    # How PostgresRestartTests stop and start this server. Only scripts/test's run of that suite,
    # alone, is given them, since every other PostgreSQL test shares the server.
    local as_owner=""
    if [ "$(id -u)" -eq 0 ]; then as_owner="runuser -u postgres --"; fi
    billingd_test_postgres_stop="$as_owner $bin/pg_ctl --pgdata=$dir/data --mode=fast --wait --timeout=60 stop"
    billingd_test_postgres_start="$as_owner $bin/pg_ctl --pgdata=$dir/data --log=$dir/server.log --wait --timeout=60 -o \"$options\" start"
    local elapsed=$((($(date +%s%N) - started) / 1000000))
    echo "billingd: test PostgreSQL $("$bin/postgres" --version | awk '{print $3}') on $dir (ready in $elapsed ms)" >&2
}

# billingd_stop_test_postgres — stops the throwaway cluster (fast: sessions are cut) and removes
# its directory; does nothing when none runs.
billingd_stop_test_postgres() {
    local dir=$billingd_test_postgres_dir
    [ -n "$dir" ] || return 0
    billingd_test_postgres_dir=""
    if [ -f "$dir/data/postmaster.pid" ]; then
        local bin
        bin=$(billingd_postgres_bin) &&
            billingd_as_postgres "$bin/pg_ctl" --pgdata="$dir/data" --mode=fast --wait --timeout=60 stop >/dev/null 2>&1 ||
            echo "billingd: could not stop the test PostgreSQL in $dir; see $dir/server.log" >&2
    fi
    [ -f "$dir/data/postmaster.pid" ] || rm -rf "$dir"
}
