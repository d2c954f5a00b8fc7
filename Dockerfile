# styrmin-webhook as a container image: built in a Rust image, run on distroless/cc (glibc,
# no shell) as the non-root user 65532, the UID the manifests run it as
# (manifests/base/deployment.yaml; a test checks both).
#   docker build -t styrmin-webhook:0.1.0 .
# The builder compiles exactly what `make build` compiles (`cargo build --release`, the
# toolchain of rust-toolchain.toml) and copies the same path, target/release/styrmin-webhook.

FROM docker.io/library/rust:1.95.0-bookworm AS build
WORKDIR /src
COPY . .
RUN cargo build --release --locked --bin styrmin-webhook \
 && install -D -m 0755 target/release/styrmin-webhook /out/styrmin-webhook

FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/styrmin-webhook /usr/local/bin/styrmin-webhook
USER 65532:65532
EXPOSE 8443 9090
ENTRYPOINT ["/usr/local/bin/styrmin-webhook"]
