# Shared by scripts/*: finds the Swift toolchain and installs the Debian packages billingd
# builds against when they are missing. Sourced, not run.

billingd_find_swift() {
    if ! command -v swift >/dev/null 2>&1; then
        for candidate in /opt/swift/usr/bin /usr/share/swift/usr/bin; do
            if [ -x "$candidate/swift" ]; then export PATH="$candidate:$PATH"; break; fi
        done
    fi
    if ! command -v swift >/dev/null 2>&1; then
        echo "billingd: no Swift toolchain found (swift 6.2 or newer is needed on PATH, or in /opt/swift)." >&2
        exit 1
    fi
}

# billingd_swift ARGS... — runs swift with a fixed, minimal environment. Some packages' manifests
# read the environment (Hummingbird's does), so a changed variable — a new setting for billingd —
# would re-evaluate them and rebuild those packages (21 s instead of 1 s on the next run).
billingd_swift() {
    env -i HOME="${HOME:-/root}" PATH="$PATH" TMPDIR="${TMPDIR:-/tmp}" LANG=C.UTF-8 swift "$@"
}

# billingd_ensure_packages PKG... — installs the named Debian packages that are not installed.
billingd_ensure_packages() {
    local missing=()
    for package in "$@"; do
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "billingd: installing ${missing[*]}" >&2
        local sudo=""
        [ "$(id -u)" -eq 0 ] || sudo="sudo"
        $sudo apt-get update -qq
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
}

# The system libraries billingd links: SQLite (GRDB), libcurl (Stripe API), OpenSSL headers; and
# git, which SwiftPM needs to check out the package dependencies.
billingd_build_packages=(libsqlite3-dev libcurl4-openssl-dev libzstd-dev libssl-dev pkg-config ca-certificates git)
