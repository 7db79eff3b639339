# syntax=docker/dockerfile:1
#
# watchmux's container image: a release build on the official Rust image, run from distroless.
#
#   docker build -t REGISTRY/watchmux:TAG . && docker push REGISTRY/watchmux:TAG
#
# then name that image in the overlay you deploy (README, "Deploying").
#
# Runtime: gcr.io/distroless/cc-debian12, the glibc build as the builder makes it (both
# Debian 12), rather than a static musl build on scratch: musl's allocator is slow under the
# proxy's many threads, and the image still needs CA certificates (the upstream's TLS is
# verified against the system's roots unless a kubeconfig names its CA), which distroless has.
# It holds the binary, glibc, libgcc and the certificates: no shell, no package manager.
#
# Non-root: distroless's `nonroot` user (65532). The root filesystem may be read-only:
# watchmux writes nothing but cache.persist_dir, which the deployment mounts as a volume
# (deploy/overlays/edge). The binary is /watchmux, which the sidecar's exec probes call.

ARG RUST_VERSION=1.95

FROM rust:${RUST_VERSION}-bookworm AS build
WORKDIR /src
COPY . .
# Cargo's registry and the target directory are cache mounts: a rebuild recompiles only what
# changed. The binary leaves the cache mount by copy.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p watchmux \
 && cp target/release/watchmux /watchmux

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /watchmux /watchmux
USER 65532:65532
ENTRYPOINT ["/watchmux"]
CMD ["serve", "--config", "/etc/watchmux/config.toml"]
