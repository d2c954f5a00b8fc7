#!/usr/bin/env bash
# make dist: everything a release publishes, for the workspace version, in DIST_DIR
# (default target/dist/VERSION/). docs/releasing.md says how a release is cut and verified.
#
#   styrmin-VERSION-PLATFORM.tar.gz     per platform: the binaries, LICENSE, README.md,
#                                       CHANGELOG.md and the Helm 4 plugin folder (helm-plugin/)
#                                       wired to the post-renderer next to it
#   PROGRAM-VERSION-PLATFORM.cdx.json   CycloneDX SBOM of each program on each platform: the
#                                       crates it links for that target (cargo-cyclonedx)
#   styrmin-webhook-VERSION.oci.tar     the image: an OCI image index, one manifest per linux
#   styrmin-webhook-VERSION.digest      platform (scripts/image/build-image.sh), and its digest
#   styrmin-webhook-VERSION.tgz(.prov)  the chart, its image pinned by that digest in REGISTRY;
#                                       signed (helm package --sign)
#   styrmin-VERSION.tgz(.prov)          the Helm 4 plugin, signed (helm plugin package --sign)
#   SHA256SUMS                          of every file above
#
# Platforms: linux-amd64 and linux-arm64 (all three programs, static, musl), darwin-amd64,
# darwin-arm64 and windows-amd64 (the post-renderer). Every target is built by the pinned
# toolchain with its own standard library (rustup target add) and linked by zig through
# cargo-zigbuild: one linker and C compiler (for ring) for all five, with the libc and macOS
# stubs zig ships. scripts/install/install-dist-tools.sh installs them.
#
# DIST_PLATFORMS=native (the registry test in make test) builds nothing: it packs the host's
# `make build` binaries (target/release) as linux-<arch> (dynamically linked, a test build, not a release) and
# an image of that one architecture.
#
# Environment: REGISTRY (where the chart's image points, default ghcr.io/styrmin; host[:port]
# with an optional path), SIGNING_KEY (the name of the release key, required),
# SIGNING_KEYRING (the secret keyring holding it, default ~/.gnupg/secring.gpg; GnuPG 2 keeps
# keys elsewhere: `gpg --export-secret-keys KEY >secring.gpg`), SIGNING_PASSPHRASE_FILE
# (optional), RELEASE_TAG (when set, must be vVERSION), DIST_PLATFORMS (all or native), DIST_SBOM (1 or 0, default 1), DIST_DIR,
# SOURCE_DATE_EPOCH (default: the commit time of HEAD), CARGO, HELM (default .tools/bin/helm4).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET_DIR="${TARGET_DIR:-$ROOT/target}"
TOOLS="$ROOT/.tools/bin"
CARGO="${CARGO:-cargo}"
HELM="${HELM:-$TOOLS/helm4}"
REGISTRY="${REGISTRY:-ghcr.io/styrmin}"
DIST_PLATFORMS="${DIST_PLATFORMS:-all}"
DIST_SBOM="${DIST_SBOM:-1}"
SIGNING_KEYRING="${SIGNING_KEYRING:-$HOME/.gnupg/secring.gpg}"
LINUX_PROGRAMS=(styrmin-webhook styrmin-postrender styrmin-certs)
# Laptops and CI runners run the post-renderer only.
DESKTOP_PROGRAMS=(styrmin-postrender)

die() {
    echo "dist: error: $*" >&2
    exit 1
}
say() { echo "dist: $*" >&2; }

# shellcheck source=../lib/workspace.sh
. "$ROOT/scripts/lib/workspace.sh"
VERSION="$(workspace_field "$ROOT" version)"
[[ -n "$VERSION" ]] || die "no [workspace.package] version in $ROOT/Cargo.toml"
# A release CI passes the tag it runs for: it must name this version.
[[ -z "${RELEASE_TAG:-}" || "$RELEASE_TAG" == "v$VERSION" ]] ||
    die "the tag $RELEASE_TAG is not v$VERSION, the workspace version"
if [[ -z "${SOURCE_DATE_EPOCH:-}" ]]; then
    SOURCE_DATE_EPOCH="$(git -C "$ROOT" log -1 --format=%ct 2>/dev/null || echo 0)"
fi
export SOURCE_DATE_EPOCH
[[ -n "${SIGNING_KEY:-}" ]] || die "SIGNING_KEY is not set: the name of the PGP key that signs the chart and the plugin"
[[ -f "$SIGNING_KEYRING" ]] || die "SIGNING_KEYRING $SIGNING_KEYRING is not a file (a secret keyring: gpg --export-secret-keys KEY >secring.gpg)"
[[ "$REGISTRY" =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
    die "REGISTRY '$REGISTRY' is not host[:port][/path] in lower case"
[[ -x "$HELM" ]] || die "$HELM is missing: run make tools"
for tool in tar gzip sha256sum; do
    command -v "$tool" >/dev/null || die "$tool is needed"
done

case "$(uname -m)" in
    x86_64) HOST_ARCH=amd64 ;;
    aarch64) HOST_ARCH=arm64 ;;
    *) die "unsupported machine $(uname -m)" ;;
esac

# platform -> the Rust target it is built for ("" = the host's `make build`).
declare -A TARGET_OF
case "$DIST_PLATFORMS" in
    all)
        TARGET_OF=(
            [linux-amd64]=x86_64-unknown-linux-musl
            [linux-arm64]=aarch64-unknown-linux-musl
            [darwin-amd64]=x86_64-apple-darwin
            [darwin-arm64]=aarch64-apple-darwin
            [windows-amd64]=x86_64-pc-windows-gnu
        )
        ;;
    native) TARGET_OF=(["linux-$HOST_ARCH"]="") ;;
    *) die "DIST_PLATFORMS is '$DIST_PLATFORMS', not all or native" ;;
esac
mapfile -t PLATFORMS < <(printf '%s\n' "${!TARGET_OF[@]}" | sort)

programs_of() {
    case "$1" in
        linux-*) echo "${LINUX_PROGRAMS[@]}" ;;
        *) echo "${DESKTOP_PROGRAMS[@]}" ;;
    esac
}
exe_suffix() { [[ "$1" == windows-* ]] && echo .exe || true; }
binary_dir() {
    local target="${TARGET_OF[$1]}"
    if [[ -z "$target" ]]; then echo "$TARGET_DIR/release"; else echo "$TARGET_DIR/$target/release"; fi
}

DIST="${DIST_DIR:-$TARGET_DIR/dist/$VERSION}"
mkdir -p "$DIST"
DIST="$(cd "$DIST" && pwd)"
# What an earlier run left (another set of platforms, say) must not be listed in SHA256SUMS.
rm -f "$DIST"/styrmin-* "$DIST/SHA256SUMS"
work="$(mktemp -d "${TMPDIR:-/tmp}/styrmin-dist.XXXXXX")"
trap 'rm -rf "$work"' EXIT
umask 022
tar_flags=(--format=ustar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --numeric-owner --owner=0 --group=0)

# ---- the binaries -------------------------------------------------------------------------
for platform in "${PLATFORMS[@]}"; do
    target="${TARGET_OF[$platform]}"
    read -r -a programs <<<"$(programs_of "$platform")"
    if [[ -z "$target" ]]; then
        # Not built here: the registry test runs this inside `cargo test`, after `make build`.
        for program in "${programs[@]}"; do
            [[ -x "$TARGET_DIR/release/$program" ]] ||
                die "$TARGET_DIR/release/$program is missing: run make build"
        done
        continue
    fi
    command -v cargo-zigbuild >/dev/null || die "cargo-zigbuild is missing: run make dist-tools"
    say "$platform: cargo zigbuild --target $target"
    # Symbols stripped: the archives are for running, not debugging.
    CARGO_PROFILE_RELEASE_STRIP=symbols "$CARGO" zigbuild --release --locked --target "$target" \
        "${programs[@]/#/--bin=}" ||
        die "building $target failed (is its standard library installed? rustup target add $target)"
done

# The SBOM of each program for the platform's target, <program>-VERSION-<platform>.cdx.json:
# the crates it links, build dependencies left out. cargo-cyclonedx writes one file per binary
# of the workspace next to its Cargo.toml; those are moved out or removed.
write_sboms() {
    local platform="$1" program target
    shift
    command -v cargo-cyclonedx >/dev/null || die "cargo-cyclonedx is missing: run make dist-tools"
    target="${TARGET_OF[$platform]:-$(rustc -vV | sed -n 's/^host: //p')}"
    remove_sboms
    "$CARGO" cyclonedx --manifest-path "$ROOT/Cargo.toml" --describe binaries --format json \
        --spec-version 1.5 --target "$target" --no-build-deps -q ||
        die "cargo cyclonedx --target $target failed"
    for program in "$@"; do
        mv -f "$ROOT/${PACKAGE_DIR[$program]}/${program}_bin.cdx.json" \
            "$DIST/$program-$VERSION-$platform.cdx.json" ||
            die "cargo cyclonedx wrote no SBOM for $program"
    done
    remove_sboms
}
remove_sboms() {
    find "$ROOT" -path "$TARGET_DIR" -prune -o -path "$ROOT/.tools" -prune -o \
        -name '*_bin.cdx.json' -type f -exec rm -f {} +
}
declare -A PACKAGE_DIR=([styrmin-webhook]=webhook [styrmin-postrender]=postrender [styrmin-certs]=certs)

# ---- one archive per platform, with its SBOMs -------------------------------------------
for platform in "${PLATFORMS[@]}"; do
    read -r -a programs <<<"$(programs_of "$platform")"
    exe="$(exe_suffix "$platform")"
    name="styrmin-$VERSION-$platform"
    stage="$work/archives/$name"
    mkdir -p "$stage/helm-plugin"
    for program in "${programs[@]}"; do
        install -m 0755 "$(binary_dir "$platform")/$program$exe" "$stage/$program$exe"
    done
    install -m 0644 "$ROOT/LICENSE" "$ROOT/README.md" "$ROOT/CHANGELOG.md" "$stage/"
    install -m 0644 "$ROOT/postrender/helm-plugin/plugin.yaml" "$stage/helm-plugin/"
    install -m 0755 "$ROOT/postrender/helm-plugin/styrmin-postrender.sh" "$stage/helm-plugin/"
    if [[ -z "$exe" ]]; then
        # The plugin's script runs bin/styrmin-postrender next to it: the archive's binary.
        mkdir -p "$stage/helm-plugin/bin"
        ln -s ../../styrmin-postrender "$stage/helm-plugin/bin/styrmin-postrender"
    fi
    tar -cf "$work/$name.tar" "${tar_flags[@]}" -C "$work/archives" "$name"
    gzip -n -9 -c "$work/$name.tar" >"$DIST/$name.tar.gz"
    say "$DIST/$name.tar.gz"

    if [[ "$DIST_SBOM" == 1 ]]; then
        write_sboms "$platform" "${programs[@]}"
    fi
done

# ---- the image: one manifest per linux platform, under one index --------------------------
image_platforms=""
for platform in "${PLATFORMS[@]}"; do
    [[ "$platform" == linux-* ]] && image_platforms+="${platform#linux-}=$(binary_dir "$platform") "
done
IMAGE_PLATFORMS="$image_platforms" IMAGE_DIR="$work/image" TARGET_DIR="$TARGET_DIR" \
    "$ROOT/scripts/image/build-image.sh" >&2
image="styrmin-webhook-$VERSION"
mv -f "$work/image/$image.oci.tar" "$work/image/$image.digest" "$DIST/"
digest="$(cat "$DIST/$image.digest")"
[[ "$digest" =~ ^sha256:[0-9a-f]{64}$ ]] || die "build-image.sh wrote no digest"

# ---- the chart, its image pinned by digest in REGISTRY; signed ------------------------------
sign_flags=(--sign --key "$SIGNING_KEY" --keyring "$SIGNING_KEYRING")
[[ -n "${SIGNING_PASSPHRASE_FILE:-}" ]] && sign_flags+=(--passphrase-file "$SIGNING_PASSPHRASE_FILE")
helm_home=(env HELM_CONFIG_HOME="$work/helm/config" HELM_CACHE_HOME="$work/helm/cache"
    HELM_DATA_HOME="$work/helm/data")
chart="$work/chart/styrmin-webhook"
mkdir -p "$work/chart"
cp -R "$ROOT/charts/styrmin-webhook" "$chart"
# The defaults of values.yaml change in place, so its comments (the chart's docs) stay.
sed -i -e "s|^  repository: styrmin-webhook\$|  repository: $REGISTRY/styrmin-webhook|" \
    -e "s|^  digest: \"\"\$|  digest: \"$digest\"|" "$chart/values.yaml"
grep -qx "  repository: $REGISTRY/styrmin-webhook" "$chart/values.yaml" &&
    grep -qx "  digest: \"$digest\"" "$chart/values.yaml" ||
    die "charts/styrmin-webhook/values.yaml has no image.repository or image.digest line to set"
"${helm_home[@]}" "$HELM" package "${sign_flags[@]}" --destination "$DIST" "$chart" >&2 ||
    die "helm package --sign failed (is '$SIGNING_KEY' in $SIGNING_KEYRING?)"

# ---- the Helm 4 plugin; signed ----------------------------------------------------------------
plugin="$work/plugin/styrmin"
mkdir -p "$plugin"
install -m 0644 "$ROOT/postrender/helm-plugin/plugin.yaml" "$plugin/"
install -m 0755 "$ROOT/postrender/helm-plugin/styrmin-postrender.sh" "$plugin/"
"${helm_home[@]}" "$HELM" plugin package "${sign_flags[@]}" --destination "$DIST" "$plugin" >&2 ||
    die "helm plugin package --sign failed (is '$SIGNING_KEY' in $SIGNING_KEYRING?)"

# ---- checksums ------------------------------------------------------------------------------
(
    cd "$DIST"
    find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort |
        xargs -d '\n' sha256sum -- >"$work/SHA256SUMS"
)
mv -f "$work/SHA256SUMS" "$DIST/SHA256SUMS"
say "$DIST: $(wc -l <"$DIST/SHA256SUMS") files, image $REGISTRY/styrmin-webhook@$digest"
