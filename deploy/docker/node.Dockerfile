# topofit-node image: the device plugin and topology publisher for GPU nodes.  Build from
# the repository root:
#   docker build -f deploy/docker/node.Dockerfile -t registry.example.com/topofit/node:0.1.0 .
# Stage 1 builds with meson; stage 2 holds build/plugin/topofit-node and its shared
# libraries.  The image's user is unprivileged; the DaemonSet overrides it with root (and
# no capabilities) only because the kubelet's device-plugin directory is root-owned.
FROM debian:bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends build-essential pkg-config meson ninja-build \
        libgrpc-dev libprotobuf-c-dev protobuf-c-compiler protobuf-compiler \
        libcjson-dev libcurl4-openssl-dev libyaml-dev libhwloc-dev libmicrohttpd-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY . .
RUN meson setup build --buildtype=release -Dwerror=false \
 && ninja -C build plugin/topofit-node

FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
        libgrpc29 libprotobuf-c1 libcjson1 libcurl4 libyaml-0-2 libhwloc15 \
 && rm -rf /var/lib/apt/lists/*
COPY --from=build /src/build/plugin/topofit-node /usr/local/bin/topofit-node
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/topofit-node"]
