# billingd container image. Not built by the project's CI (no Docker engine there): the build
# steps match scripts/install; the runtime libraries are those `ldd` lists for a binary built
# with --static-swift-stdlib.
#
#   docker build -t billingd .
#   docker run -d --name billingd -p 127.0.0.1:8080:8080 --env-file billingd.env \
#       -v billingd-data:/var/lib/billingd --stop-timeout 30 billingd

# ---- build ----
FROM swift:6.2-bookworm AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        libsqlite3-dev libcurl4-openssl-dev libzstd-dev libssl-dev pkg-config \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src

# Dependencies first, so that this layer is reused until the manifest changes. Package.resolved
# is not committed; when the build context has one, its exact versions are used.
COPY Package.swift Package.resolved* ./
RUN if [ -f Package.resolved ]; then swift package resolve --force-resolved-versions; \
    else swift package resolve; fi

# SwiftPM checks every target of the manifest, the test targets included, before building.
COPY Sources ./Sources
COPY Tests ./Tests
# The Swift runtime and Foundation are linked in: the runtime image needs no Swift toolchain.
RUN swift build -c release --product billingd --static-swift-stdlib \
    && install -D -m 0755 "$(swift build -c release --show-bin-path)/billingd" /out/billingd

# ---- runtime ----
FROM debian:bookworm-slim
# What the binary links besides glibc: libsqlite3-0 (the ledger), libzstd1 (its stored bodies),
# libcurl4 (Foundation's networking), libstdc++6 and libgcc-s1 (the latter always in the base image); plus
# ca-certificates for TLS to Stripe. curl is for the HEALTHCHECK: it adds only its small binary
# to the libcurl4 needed anyway and checks a real HTTP status, where a bash /dev/tcp probe would
# hand-parse the response.
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates curl libcurl4 libsqlite3-0 libzstd1 libstdc++6 \
    && rm -rf /var/lib/apt/lists/*

# A fixed uid/gid, so that a bind-mounted data directory can be prepared for it:
#   chown 10001:10001 /srv/billingd-data
RUN groupadd --system --gid 10001 billingd \
    && useradd --system --uid 10001 --gid billingd --home-dir /var/lib/billingd --no-create-home \
        --shell /usr/sbin/nologin billingd \
    && install -d -m 0750 -o billingd -g billingd /var/lib/billingd

COPY --from=build /out/billingd /usr/local/bin/billingd

USER 10001:10001
WORKDIR /var/lib/billingd
# Listen on all interfaces of the container (publish the port on loopback or a private network:
# billingd speaks plain HTTP and belongs behind a TLS-terminating proxy).
ENV BILLINGD_HOST=0.0.0.0 \
    BILLINGD_DATABASE=/var/lib/billingd/billingd.sqlite3
# The ledger. Keep it on a volume: it is the only state, and what `billingd backup` copies.
VOLUME ["/var/lib/billingd"]
EXPOSE 8080

# /healthz answers while the process runs (use /readyz from an orchestrator to know whether the
# ledger accepts writes). It assumes BILLINGD_HOST is 0.0.0.0 or 127.0.0.1.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
    CMD curl -fsS --max-time 3 -o /dev/null "http://127.0.0.1:${BILLINGD_PORT:-8080}/healthz" || exit 1

# On SIGTERM billingd stops accepting, finishes in-flight deliveries and closes the database.
# Docker's default grace is 10 s; `docker run --stop-timeout 30` matches the systemd unit.
STOPSIGNAL SIGTERM
ENTRYPOINT ["billingd"]
CMD ["serve"]
