# styrmin-webhook (and styrmin-postrender, for an Argo CD sidecar or CI) as a container image:
# built in a Rust image, run on distroless/cc (glibc, no shell) as the non-root user 65532, the
# UID the manifests run it as (manifests/base/deployment.yaml; a test checks both).
#   docker build -t styrmin-webhook:0.1.0 .
# The builder compiles exactly what `make build` compiles (`cargo build --release`, the
# toolchain of rust-toolchain.toml) and copies the same paths, target/release/styrmin-*.
# `make image` builds the same image without Docker or a base image (docs/image.md): the same
# paths, user, entrypoint, ports and labels (e2e/tests/image.rs compares them).

FROM docker.io/library/rust:1.95.0-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin styrmin-webhook --bin styrmin-postrender \
 && install -D -m 0755 target/release/styrmin-webhook /out/styrmin-webhook \
 && install -D -m 0755 target/release/styrmin-postrender /out/styrmin-postrender

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/styrmin-webhook /usr/local/bin/styrmin-webhook
COPY --from=build /out/styrmin-postrender /usr/local/bin/styrmin-postrender
LABEL org.opencontainers.image.title="styrmin-webhook"
LABEL org.opencontainers.image.description="Styrmin ingress enforcement: the admission webhook and the Helm post-renderer"
LABEL org.opencontainers.image.version="0.1.0"
LABEL org.opencontainers.image.licenses="Apache-2.0"
LABEL org.opencontainers.image.source="https://github.com/styrmin/ingress-enforcement"
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/styrmin-webhook"]
