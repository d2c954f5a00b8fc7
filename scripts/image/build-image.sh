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
#   styrmin-webhook-VERSION.digest      the digest of what the tag names: the image manifest, or
#                                       with several platforms the image index, sha256:...
#
# Several platforms (IMAGE_PLATFORMS="amd64=DIR arm64=DIR", each DIR holding that platform's
# static binaries) give one multi-arch image: an OCI image index with one manifest per
# platform, which the archive's index.json names by the tag. A registry serves each node the
# manifest of its architecture. A binary for another architecture than the host's must be
# static: ldd cannot read it, so no library would be copied.
#
# Reproducible: the same binaries, version, revision and SOURCE_DATE_EPOCH give the same
# digest. Every timestamp is SOURCE_DATE_EPOCH (default: the commit time of HEAD), files are
# archived in name order with numeric owners and fixed modes, gzip writes no name or time.
#
# Environment: SOURCE_DATE_EPOCH, TARGET_DIR (default <repo>/target), RELEASE_DIR (where the
# binaries are, default TARGET_DIR/release), IMAGE_PLATFORMS (default: the host's architecture
# with RELEASE_DIR), IMAGE_DIR (default TARGET_DIR/image), IMAGE_NAME (default
# styrmin-webhook), SKOPEO (default skopeo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
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
# shellcheck source=../lib/workspace.sh
. "$ROOT/scripts/lib/workspace.sh"
VERSION="$(workspace_field "$ROOT" version)"
[[ -n "$VERSION" ]] || die "no [workspace.package] version in $ROOT/Cargo.toml"
LICENSE="$(workspace_field "$ROOT" license)"
SOURCE_URL="$(workspace_field "$ROOT" repository)"
REVISION="$(git -C "$ROOT" rev-parse HEAD 2>/dev/null || echo unknown)"
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
    SOURCE_DATE_EPOCH="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)"
fi
[[ "$SOURCE_DATE_EPOCH" =~ ^[0-9]+$ ]] || die "SOURCE_DATE_EPOCH must be seconds since 1970, not '$SOURCE_DATE_EPOCH'"
CREATED="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"

case "$(uname -m)" in
    x86_64) HOST_ARCH=amd64 ;;
    aarch64) HOST_ARCH=arm64 ;;
    *) die "unsupported machine $(uname -m)" ;;
esac
read -r -a PLATFORMS <<<"${IMAGE_PLATFORMS:-$HOST_ARCH=$RELEASE_DIR}"
((${#PLATFORMS[@]} > 0)) || die "IMAGE_PLATFORMS names no platform"
for platform in "${PLATFORMS[@]}"; do
    arch="${platform%%=*}" dir="${platform#*=}"
    [[ "$platform" == *=* && "$arch" =~ ^(amd64|arm64)$ ]] ||
        die "IMAGE_PLATFORMS: '$platform' is not amd64=DIR or arm64=DIR"
    for bin in "${BINARIES[@]}"; do
        [[ -x "$dir/$bin" ]] || die "$dir/$bin is missing: run make build (or make dist)"
        if [[ "$arch" != "$HOST_ARCH" ]] && command -v readelf >/dev/null &&
            readelf -l "$dir/$bin" | grep -q 'program interpreter'; then
            die "$dir/$bin ($arch) is dynamically linked: an image for another architecture takes static binaries"
        fi
    done
done

OUT="${IMAGE_DIR:-$TARGET_DIR/image}"
mkdir -p "$OUT"
work="$(mktemp -d "$OUT/.build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 022
blobs="$work/layout/blobs/sha256"
mkdir -p "$blobs"
tar_flags=(--format=ustar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner)

# Move <file> into the layout's blobs; print its sha256 hex.
add_blob() {
    local hex
    hex="$(sha256sum "$1" | cut -d' ' -f1)"
    mv -f "$1" "$blobs/$hex"
    echo "$hex"
}
size_of() { stat -c %s "$blobs/$1"; }

labels="$(printf '"org.opencontainers.image.%s":"%s",' \
    title "$IMAGE_NAME" \
    description "Styrmin ingress enforcement: the admission webhook and the Helm post-renderer" \
    version "$VERSION" \
    revision "$REVISION" \
    created "$CREATED" \
    licenses "$LICENSE" \
    source "$SOURCE_URL")"
labels="{${labels%,}}"

# The image of one platform from the binaries in <dir>: its layer, config and manifest go
# into the layout's blobs; sets MANIFEST (hex), LAYER_BYTES and UNPACKED_BYTES.
build_platform() {
    local arch="$1" dir="$2"
    local rootfs="$work/rootfs-$arch"

    # ---- the root filesystem ----------------------------------------------------------------
    mkdir -p "$rootfs/usr/local/bin" "$rootfs/etc" "$rootfs/home/nonroot" "$rootfs/tmp"
    for bin in "${BINARIES[@]}"; do
        install -m 0755 "$dir/$bin" "$rootfs/usr/local/bin/$bin"
    done

    # Every shared library and the loader, at the path the binary asks for (`ldd` resolves
    # symlinks of the search path; the file itself is copied, not the link). A static binary
    # needs none (ldd then fails and names none).
    libs="$(
        for bin in "${BINARIES[@]}"; do
            { ldd "$dir/$bin" 2>/dev/null || true; } | awk '
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
    (
        cd "$rootfs"
        tar -cf "$work/layer.tar" "${tar_flags[@]}" --owner=0 --group=0 \
            --exclude=./home/nonroot ./
        tar -rf "$work/layer.tar" "${tar_flags[@]}" --owner="$USER_ID" --group="$USER_ID" \
            --no-recursion ./home/nonroot
    )
    gzip -n -9 -c "$work/layer.tar" >"$work/layer.tar.gz"

    local diff_id layer config
    diff_id="$(sha256sum "$work/layer.tar" | cut -d' ' -f1)"
    UNPACKED_BYTES="$(stat -c %s "$work/layer.tar")"
    rm -f "$work/layer.tar"
    layer="$(add_blob "$work/layer.tar.gz")"
    LAYER_BYTES="$(size_of "$layer")"

    printf '%s' "{\"architecture\":\"$arch\",\"os\":\"linux\",\"created\":\"$CREATED\",\
\"config\":{\"User\":\"$USER_ID:$USER_ID\",\
\"ExposedPorts\":{\"8443/tcp\":{},\"9090/tcp\":{}},\
\"Env\":[\"PATH=/usr/local/bin:/usr/bin:/bin\"],\
\"Entrypoint\":[\"/usr/local/bin/styrmin-webhook\"],\
\"WorkingDir\":\"/\",\"Labels\":$labels},\
\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[\"sha256:$diff_id\"]},\
\"history\":[{\"created\":\"$CREATED\",\"created_by\":\"scripts/image/build-image.sh\"}]}" >"$work/config.json"
    config="$(add_blob "$work/config.json")"

    printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"config\":{\"mediaType\":\"application/vnd.oci.image.config.v1+json\",\
\"digest\":\"sha256:$config\",\"size\":$(size_of "$config")},\
\"layers\":[{\"mediaType\":\"application/vnd.oci.image.layer.v1.tar+gzip\",\
\"digest\":\"sha256:$layer\",\"size\":$(size_of "$layer")}],\
\"annotations\":{\"org.opencontainers.image.version\":\"$VERSION\",\
\"org.opencontainers.image.created\":\"$CREATED\"}}" >"$work/manifest.json"
    MANIFEST="$(add_blob "$work/manifest.json")"
}

# ---- one manifest per platform; several are listed by an image index ---------------------
if ((${#PLATFORMS[@]} == 1)); then
    build_platform "${PLATFORMS[0]%%=*}" "${PLATFORMS[0]#*=}"
    top_type=application/vnd.oci.image.manifest.v1+json
    top="$MANIFEST"
else
    entries=""
    for platform in "${PLATFORMS[@]}"; do
        arch="${platform%%=*}"
        build_platform "$arch" "${platform#*=}"
        echo "build-image: $arch: compressed layer $LAYER_BYTES bytes, unpacked $UNPACKED_BYTES bytes"
        entries+="{\"mediaType\":\"application/vnd.oci.image.manifest.v1+json\",\
\"digest\":\"sha256:$MANIFEST\",\"size\":$(size_of "$MANIFEST"),\
\"platform\":{\"architecture\":\"$arch\",\"os\":\"linux\"}},"
    done
    printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[${entries%,}],\
\"annotations\":{\"org.opencontainers.image.version\":\"$VERSION\",\
\"org.opencontainers.image.created\":\"$CREATED\"}}" >"$work/image-index.json"
    top_type=application/vnd.oci.image.index.v1+json
    top="$(add_blob "$work/image-index.json")"
fi

# The ref name is the tag (skopeo, podman); containerd (kind, Docker 25+) reads the full name.
printf '%s' "{\"schemaVersion\":2,\"mediaType\":\"application/vnd.oci.image.index.v1+json\",\
\"manifests\":[{\"mediaType\":\"$top_type\",\
\"digest\":\"sha256:$top\",\"size\":$(size_of "$top"),\
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
echo "sha256:$top" >"$OUT/$IMAGE_NAME-$VERSION.digest"

if ((${#PLATFORMS[@]} > 1)); then
    # A docker-archive holds one platform's image; the registry or the OCI archive hold them all.
    rm -f "$docker"
elif command -v "$SKOPEO" >/dev/null; then
    rm -f "$docker"
    "$SKOPEO" --insecure-policy copy --quiet "oci-archive:$oci" \
        "docker-archive:$work/image.docker.tar:$IMAGE_NAME:$VERSION" ||
        die "skopeo could not convert $oci to a docker-archive"
    mv -f "$work/image.docker.tar" "$docker"
else
    rm -f "$docker"
    echo "build-image: note: no skopeo, so no docker-archive (Docker 25+ loads the OCI archive)" >&2
fi

echo "build-image: $oci"
[[ -f "$docker" ]] && echo "build-image: $docker"
echo "build-image: $IMAGE_NAME:$VERSION@sha256:$top"
if ((${#PLATFORMS[@]} == 1)); then
    echo "build-image: compressed layer $LAYER_BYTES bytes, unpacked $UNPACKED_BYTES bytes"
fi
