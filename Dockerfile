# syntax=docker/dockerfile:1
# spiderd's container image (docs/operations.md, "Docker").
#   docker build -t spiderd .
#   docker run -p 6800:6800 spiderd
# Configuration: SPIDERD_* variables (docs/configuration.md, e.g.
# SPIDERD_STORE, SPIDERD_NODE_NAME), or files in /etc/spiderd/conf.d/.

# ---- build: the Makefile's own build, with the image's paths compiled in ----
FROM debian:12 AS build
ENV DEBIAN_FRONTEND=noninteractive
# The build half of the Makefile's DEB_PKGS (its servers, browsers and test
# tools are not needed here).
RUN apt-get update && apt-get install -y --no-install-recommends \
      build-essential cmake ninja-build pkg-config make ca-certificates \
      libuv1-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev libinih-dev \
      libzip-dev libarchive-dev libicu-dev libcmocka-dev libpq-dev libhiredis-dev \
      libcurl4-openssl-dev libssl-dev libgnutls28-dev zlib1g-dev python3 nodejs npm \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
# Configured first, so `make build` (which configures only when
# build/build.ninja is missing) keeps these paths; DEB_PKGS= because the
# packages are in already.
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      -DCMAKE_INSTALL_PREFIX=/usr \
      -DSPIDERD_UI_DIR=/usr/share/spiderd/ui \
      -DSPIDERD_PYTHONDIR=/usr/lib/spiderd/python \
      -DSPIDERD_DEFAULT_PYTHON=/usr/bin/python3 \
    && make build BUILD=build DEB_PKGS= \
    && DESTDIR=/out cmake --install build

# ---- runtime ----
FROM debian:12-slim
ENV DEBIAN_FRONTEND=noninteractive
# The libraries spiderd links (and dlopens: ICU, libcurl, libcrypto, libpq, libarchive), and the
# Scrapy that runs crawls.
RUN apt-get update && apt-get install -y --no-install-recommends \
      libuv1 libmicrohttpd12 libjansson4 libsqlite3-0 libinih1 libzip4 zlib1g libarchive13 \
      libicu72 libpq5 libhiredis0.14 libcurl4 libssl3 ca-certificates \
      python3 python3-scrapy \
    && rm -rf /var/lib/apt/lists/* \
    && groupadd --system --gid 10001 spiderd \
    && useradd --system --uid 10001 --gid spiderd --home-dir /var/lib/spiderd \
         --shell /usr/sbin/nologin spiderd \
    && install -d -o spiderd -g spiderd -m 0750 /var/lib/spiderd /var/log/spiderd \
    && install -d -m 0755 /etc/spiderd/conf.d
COPY --from=build /out/ /
# The packaged config binds 127.0.0.1; in a container the port must be
# reachable from outside it, and so spiderd refuses to serve it without
# authentication: give it a login (-e SPIDERD_USERNAME=admin
# -e SPIDERD_PASSWORD=..., or a [scrapyd] username/password drop-in in
# /etc/spiderd/conf.d), or accept the risk with `serve --insecure`.
ENV SPIDERD_CONFIG_FILES=/etc/spiderd/scrapyd.conf:/etc/spiderd/conf.d \
    SPIDERD_BIND_ADDRESS=0.0.0.0 \
    SPIDERD_HTTP_PORT=6800 \
    HOME=/var/lib/spiderd
USER spiderd:spiderd
WORKDIR /var/lib/spiderd
VOLUME ["/var/lib/spiderd"]
EXPOSE 6800
# SIGTERM: a drain (drain_grace: no new jobs, crawls may end), then a
# graceful stop (crawls get SIGTERM, then shutdown_grace); give `docker stop`
# the time for both (docker stop -t 90, stop_grace_period).
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=5s --start-period=20s --retries=3 \
  CMD ["python3", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('SPIDERD_HTTP_PORT', '6800'), timeout=4)"]
ENTRYPOINT ["/usr/bin/spiderd"]
CMD ["serve"]
