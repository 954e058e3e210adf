# topofit-extender image.  Build from the repository root:
#   docker build -f deploy/docker/extender.Dockerfile -t registry.example.com/topofit/extender:0.1.0 .
# Stage 1 builds with meson exactly as scripts/setup + `meson setup build` do; stage 2 holds
# the one binary (build/extender/topofit-extender) and its shared libraries, run as an
# unprivileged numeric user so runAsNonRoot can verify it.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config meson ninja-build \
        libmicrohttpd-dev libcjson-dev libcurl4-openssl-dev libyaml-dev libhwloc-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup build --buildtype=release -Dwerror=false \
 && ninja -C build extender/topofit-extender

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
        libmicrohttpd12 libgnutls30 libcjson1 libcurl4 libyaml-0-2 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/extender/topofit-extender /usr/local/bin/topofit-extender
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/usr/local/bin/topofit-extender"]
