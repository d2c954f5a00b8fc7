#!/usr/bin/env bash
# Build the container image of styrmin-webhook (with styrmin-postrender beside it) from the
# release binaries, without a Docker daemon and without pulling a base image.
#
# The image is one layer: the two binaries in /usr/local/bin, the shared libraries `ldd` names
# for them (glibc, libgcc_s) with the dynamic loader, /etc/passwd and /etc/group with the
# non-root user 65532 (`nonroot`, as in distroless), /home/nonroot and /tmp. No CA bundle: the
# webhook talks to nothing but the API server, whose CA comes with the ServiceAccount token.
#
# Written (IMAGE_DIR, default target/image):
#   styrmin-webhook-VERSION.oci.tar     OCI archive: podman load, kind load image-archive,
#                                       docker load (Docker 25+), skopeo copy oci-archive:...
#   styrmin-webhook-VERSION.docker.tar  the same image as a docker-archive, for older Docker
#                                       (written by skopeo; skipped with a note if it is missing)
#   styrmin-webhook-VERSION.digest      the manifest digest, sha256:...
#
# Reproducible: the same binaries, version, revision and SOURCE_DATE_EPOCH give the same
# digest. Every timestamp is SOURCE_DATE_EPOCH (default: the commit time of HEAD), files are
# archived in name order with numeric owners and fixed modes, gzip writes no name or time.
#
# Environment: SOURCE_DATE_EPOCH, TARGET_DIR (default <repo>/target), RELEASE_DIR (where the
# binaries are, default TARGET_DIR/release), IMAGE_DIR (default TARGET_DIR/image), IMAGE_NAME
# (default styrmin-webhook), SKOPEO (default skopeo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TARGET_DIR="${TARGET_DIR:-$ROOT/target}"
RELEASE_DIR="${RELEASE_DIR:-$TARGET_DIR/release}"
IMAGE_NAME="${IMAGE_NAME:-styrmin-webhook}"
SKOPEO="${SKOPEO:-skopeo}"
BINARIES=(styrmin-webhook styrmin-postrender)
# The user the chart and the Dockerfile run the webhook as.
USER_ID=65532

die() {
    echo "build-image: error: $*" >&2
    exit 1
}

for tool in tar gzip sha256sum ldd; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done

# [workspace.package] version in Cargo.toml: the version the binaries print.
VERSION="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml")"
[[ -n "$VERSION" ]] || die "no [workspace.package] version in $ROOT/Cargo.toml"
LICENSE="$(sed -n '/^\[workspace.package\]/,/^\[/s/^license = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml")"
SOURCE_URL="$(sed -n '/^\[workspace.package\]/,/^\[/s/^repository = "\(.*\)"$/\1/p' "$ROOT/Cargo.toml")"
REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
    SOURCE_DATE_EPOCH="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)"
fi
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH must be seconds since 1970, not '$SOURCE_DATE_EPOCH'"
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

case "$(uname -m)" in
    x86_64) ARCH=amd64 ;;
    aarch64) ARCH=arm64 ;;
    *) die "unsupported machine $(uname -m)" ;;
esac

for bin in "${BINARIES[@]}"; do
    [[ -x "$RELEASE_DIR/$bin" ]] || die "$RELEASE_DIR/$bin is missing: run make build"
done

OUT="${IMAGE_DIR:-$TARGET_DIR/image}"
mkdir -p "$OUT"
work="$(mktemp -d "$OUT/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
rootfs="$work/rootfs"
umask 022

# ---- the root filesystem ----------------------------------------------------------------
mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/home/nonroot" "$rootfs/tmp"
for bin in "${BINARIES[@]}"; do
    install -m 0755 "$RELEASE_DIR/$bin" "$rootfs/usr/local/bin/$bin"
done

# Every shared library and the loader, at the path the binary asks for (`ldd` resolves
# symlinks of the search path; the file itself is copied, not the link). A static binary
# needs none (ldd then fails and names none).
libs="$(
    for bin in "${BINARIES[@]}"; do
        { ldd "$RELEASE_DIR/$bin" 2>/dev/null || true; } | awk '
            $2 == "=>" && $3 ~ /^\// { print $3 }
            $2 == "=>" && $3 == "not" { print "missing:" $1 }
            $1 ~ /^\// { print $1 }'
    done | sort -u
)"
while read -r lib; do
    [[ -n "$lib" ]] || continue
    [[ "$lib" != missing:* ]] || die "${lib#missing:}, which the binaries need, is not installed"
    [[ -f "$lib" ]] || die "$lib (from ldd) is not a file"
    mkdir -p "$rootfs$(dirname "$lib")"
    install -m 0755 "$lib" "$rootfs$lib"
done <<<"$libs"

printf '%s\n' \
    'root:x:0:0:root:/root:/sbin/nologin' \
    'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
    "nonroot:x:$USER_ID:$USER_ID:nonroot:/home/nonroot:/sbin/nologin" >"$rootfs/etc/passwd"
printf '%s\n' \
    'root:x:0:' \
    'nobody:x:65534:' \
    "nonroot:x:$USER_ID:" >"$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"
chmod 0700 "$rootfs/home/nonroot"
chmod 1777 "$rootfs/tmp"

# ---- the layer: one tar, every entry at SOURCE_DATE_EPOCH, root-owned but for the home ----
tar_flags=(--format=ustar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner)
(
    cd "$rootfs"
    tar -cf "$work/layer.tar" "${tar_flags[@]}" --owner=0 --group=0 \
        --exclude=./home/nonroot ./
    tar -rf "$work/layer.tar" "${tar_flags[@]}" --owner="$USER_ID" --group="$USER_ID" \
        --no-recursion ./home/nonroot
)
gzip -n -9 -c "$work/layer.tar" >"$work/layer.tar.gz"

blobs="$work/layout/blobs/sha256"
mkdir -p "$blobs"
# Move <file> into the layout's blobs; print its sha256 hex.
add_blob() {
    local hex
    hex="$(sha256sum "$1" | cut -d' ' -f1)"
    mv -f "$1" "$blobs/$hex"
    echo "$hex"
}
size_of() { stat -c %s "$blobs/$1"; }

diff_id="$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
layer="$(add_blob "$work/layer.tar.gz")"

labels="$(printf '"org.opencontainers.image.%s":"%s",' \
    title "$IMAGE_NAME" \
    description "Styrmin ingress enforcement: the admission webhook and the Helm post-renderer" \
    version "$VERSION" \
    revision "$REVISION" \
    created "$CREATED" \
    licenses "$LICENSE" \
    source "$SOURCE_URL")"
labels="{${labels%,}}"

printf '%s' "{\"architecture\":\"$ARCH\",\"os\":\"linux\",\"created\":\"$CREATED\",\
\"config\":{\"User\":\"$USER_ID:$USER_ID\",\
\"ExposedPorts\":{\"8443/tcp\":{},\"9090/tcp\":{}},\
\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\"],\
\"Entrypoint\":[\"/usr/local/bin/styrmin-webhook\"],\
\"WorkingDir\":\"/\",\"Labels\":$labels},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]},\
\"history\":[{\"created\":\"$CREATED\",\"created_by\":\"scripts/build-image.sh\"}]}" >"$work/config.json"
config="$(add_blob "$work/config.json")"

printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\
\"digest\":\"sha256:$config\",\"size\":$(size_of "$config")},\
\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\
\"digest\":\"sha256:$layer\",\"size\":$(size_of "$layer")}],\
\"annotations\":{\"org.opencontainers.image.version\":\"$VERSION\",\
\"org.opencontainers.image.created\":\"$CREATED\"}}" >"$work/manifest.json"
manifest="$(add_blob "$work/manifest.json")"

# The ref name is the tag (skopeo, podman); containerd (kind, Docker 25+) reads the full name.
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"digest\":\"sha256:$manifest\",\"size\":$(size_of "$manifest"),\
\"annotations\":{\"org.opencontainers.image.ref.name\":\"$VERSION\",\
\"io.containerd.image.name\":\"docker.io/library/$IMAGE_NAME:$VERSION\"}}]}" >"$work/layout/index.json"
printf '%s' '{"imageLayoutVersion":"1.0.0"}' >"$work/layout/oci-layout"

# ---- the archives -----------------------------------------------------------------------
oci="$OUT/$IMAGE_NAME-$VERSION.oci.tar"
docker="$OUT/$IMAGE_NAME-$VERSION.docker.tar"
find "$work/layout" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +
chmod 0644 "$work/layout/index.json" "$work/layout/oci-layout" "$blobs"/*
tar -cf "$work/image.oci.tar" "${tar_flags[@]}" --owner=0 --group=0 \
    -C "$work/layout" oci-layout index.json blobs
mv -f "$work/image.oci.tar" "$oci"
echo "sha256:$manifest" >"$OUT/$IMAGE_NAME-$VERSION.digest"

if command -v "$SKOPEO" >/dev/null; then
    rm -f "$docker"
    "$SKOPEO" --insecure-policy copy --quiet "oci-archive:$oci" \
        "docker-archive:$work/image.docker.tar:$IMAGE_NAME:$VERSION" ||
        die "skopeo could not convert $oci to a docker-archive"
    mv -f "$work/image.docker.tar" "$docker"
else
    rm -f "$docker"
    echo "build-image: note: no skopeo, so no docker-archive (Docker 25+ loads the OCI archive)" >&2
fi

layer_bytes="$(size_of "$layer")"
unpacked_bytes="$(stat -c %s "$work/layer.tar")"
echo "build-image: $oci"
[[ -f "$docker" ]] && echo "build-image: $docker"
echo "build-image: $IMAGE_NAME:$VERSION@sha256:$manifest"
echo "build-image: compressed layer $layer_bytes bytes, unpacked $unpacked_bytes bytes"
