#!/usr/bin/env bash
# make test-dist: `make dist` for every platform with a throwaway key, for a registry on
# loopback; the registry test (e2e/tests/release.rs) on that output; then what cannot run
# natively here runs under emulation and must render the bundled example (the test chart
# rendered by Helm 3, post-rendered with examples/styrmin.yaml) byte for byte like the amd64
# build:
#
#   linux-arm64: the three binaries (--version) and the post-renderer, under qemu-aarch64
#   the arm64 image: its entrypoint (--version) and its post-renderer, from its unpacked
#     layer, under qemu-aarch64; the amd64 image's the same way, natively
#   windows-amd64: the post-renderer under wine64 (with a shim of bcryptprimitives.dll for a
#     Wine that lacks it, scripts/release/wine/bcryptprimitives.c)
#   darwin-*: built only (nothing runs Mach-O binaries here); checked to be Mach-O files of
#     the right architecture when `file` is installed
#
# Prints how long `make dist` took. Environment: TARGET_DIR (default <repo>/target).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TARGET_DIR="${TARGET_DIR:-$ROOT/target}"
export PATH="$ROOT/.tools/bin:$PATH"
QEMU=/usr/bin/qemu-aarch64-static
WINE=/usr/lib/wine/wine64

die() {
    echo "test-dist: error: $*" >&2
    exit 1
}
say() { echo "test-dist: $*" >&2; }

# shellcheck source=../lib/workspace.sh
. "$ROOT/scripts/lib/workspace.sh"
VERSION="$(workspace_field "$ROOT" version)"
work="$(mktemp -d "${TMPDIR:-/tmp}/styrmin-test-dist.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# ---- a throwaway key, a loopback address, the release ---------------------------------------
export GNUPGHOME="$work/gnupg"
mkdir -m 0700 "$GNUPGHOME"
gpg --batch --quiet --passphrase '' --quick-gen-key 'Styrmin dist test <dist@styrmin.test>' rsa3072 sign never
gpg --batch --export-secret-keys >"$work/secring.gpg"
gpg --batch --export >"$work/pubring.gpg"
port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
registry="127.0.0.1:$port"
dist="$TARGET_DIR/dist-test/$VERSION"

start=$SECONDS
REGISTRY="$registry" SIGNING_KEY='Styrmin dist test' SIGNING_KEYRING="$work/secring.gpg" \
    DIST_DIR="$dist" "$ROOT/scripts/release/dist.sh"
seconds=$((SECONDS - start))
say "make dist took ${seconds}s"

# ---- the registry test on every platform's artifacts ----------------------------------------
E2E_DIST_DIR="$dist" E2E_DIST_REGISTRY="$registry" E2E_DIST_KEYRING="$work/pubring.gpg" \
    cargo test --release --locked -p styrmin-e2e --test release

# ---- the builds that do not run here natively -----------------------------------------------
for platform in linux-amd64 linux-arm64 windows-amd64 darwin-amd64 darwin-arm64; do
    tar -xzf "$dist/styrmin-$VERSION-$platform.tar.gz" -C "$work"
done
bin() { echo "$work/styrmin-$VERSION-$1/$2"; }

"$ROOT/.tools/bin/helm3" template web "$ROOT/e2e/tests/data/charts/styrmin-e2e" \
    >"$work/rendered.yaml"
config="$ROOT/examples/styrmin.yaml"
"$(bin linux-amd64 styrmin-postrender)" --config "$config" <"$work/rendered.yaml" >"$work/amd64.yaml"
cmp -s "$work/rendered.yaml" "$work/amd64.yaml" && die "the post-renderer changed nothing in the example"

# Runs <label> with the example on stdin; its output must be the amd64 build's.
same_render() {
    local label="$1"
    shift
    "$@" <"$work/rendered.yaml" >"$work/$label.yaml" || die "$label: the post-renderer failed"
    cmp "$work/amd64.yaml" "$work/$label.yaml" || die "$label renders the example otherwise than linux-amd64"
    say "$label renders the example byte for byte like linux-amd64"
}
same_version() {
    local label="$1" program="$2"
    shift 2
    [[ "$("$@" --version)" == "$program $VERSION" ]] || die "$label: $program --version is not '$program $VERSION'"
}

[[ -x "$QEMU" ]] || die "$QEMU is missing: run make dist-tools"
for program in styrmin-webhook styrmin-postrender styrmin-certs; do
    same_version "linux-arm64 (qemu)" "$program" "$QEMU" "$(bin linux-arm64 "$program")"
done
same_render "linux-arm64 (qemu)" "$QEMU" "$(bin linux-arm64 styrmin-postrender)" --config "$config"

# The image: each platform's layer unpacked, its entrypoint run from it.
mkdir -p "$work/image"
tar -xf "$dist/styrmin-webhook-$VERSION.oci.tar" -C "$work/image"
index="$(cut -d: -f2 "$dist/styrmin-webhook-$VERSION.digest")"
python3 - "$work/image" "$index" >"$work/layers" <<'EOF'
import json, sys
layout, index = sys.argv[1], sys.argv[2]
blob = lambda d: json.load(open(f"{layout}/blobs/sha256/{d.split(':')[-1]}"))
for m in blob(index)["manifests"]:
    manifest = blob(m["digest"])
    config = blob(manifest["config"]["digest"])
    (layer,) = manifest["layers"]
    print(m["platform"]["architecture"], config["architecture"],
          layer["digest"].split(":")[1], " ".join(config["config"]["Entrypoint"]))
EOF
while read -r arch config_arch layer entrypoint; do
    [[ "$arch" == "$config_arch" ]] || die "the index says $arch, the config $config_arch"
    rootfs="$work/rootfs-$arch"
    mkdir -p "$rootfs"
    tar -xzf "$work/image/blobs/sha256/$layer" -C "$rootfs"
    runner=()
    how=native
    [[ "$arch" == arm64 ]] && runner=("$QEMU") && how=qemu
    same_version "image $arch" styrmin-webhook "${runner[@]}" "$rootfs$entrypoint"
    same_render "image $arch ($how)" "${runner[@]}" "$rootfs/usr/local/bin/styrmin-postrender" --config "$config"
done <"$work/layers"
[[ "$(cut -d' ' -f1 "$work/layers" | sort | tr '\n' ' ')" == "amd64 arm64 " ]] ||
    die "the image index does not hold amd64 and arm64"

# Windows, under wine: a prefix of its own, made on first use.
if [[ -x "$WINE" ]] && WINEPREFIX="$work/wine" WINEDEBUG=-all "$WINE" wineboot --init >/dev/null 2>&1; then
    exe="$(bin windows-amd64 styrmin-postrender.exe)"
    # Rust's standard library takes ProcessPrng from bcryptprimitives.dll (Windows 10 and
    # later); Wine releases before 9 lack the DLL. A shim of it, built by zig from
    # scripts/release/wine/bcryptprimitives.c, goes beside the program only for such a Wine.
    if [[ ! -e "$work/wine/drive_c/windows/system32/bcryptprimitives.dll" ]]; then
        say "this Wine has no bcryptprimitives.dll: the program runs with the shim of it"
        "$ROOT/.tools/zig/ziglang/zig" cc -target x86_64-windows-gnu -shared -O2 \
            -o "$(dirname "$exe")/bcryptprimitives.dll" "$ROOT/scripts/release/wine/bcryptprimitives.c" -ladvapi32
    fi
    same_version "windows-amd64 (wine)" styrmin-postrender env WINEPREFIX="$work/wine" WINEDEBUG=-all "$WINE" "$exe"
    same_render "windows-amd64 (wine)" env WINEPREFIX="$work/wine" WINEDEBUG=-all "$WINE" "$exe" \
        --config "Z:${config//\//\\}"
else
    die "wine64 does not run here: run make dist-tools"
fi

if command -v file >/dev/null; then
    file -b "$(bin darwin-amd64 styrmin-postrender)" | grep -q 'Mach-O 64-bit x86_64 executable' ||
        die "darwin-amd64 is not a Mach-O x86_64 executable"
    file -b "$(bin darwin-arm64 styrmin-postrender)" | grep -q 'Mach-O 64-bit arm64 executable' ||
        die "darwin-arm64 is not a Mach-O arm64 executable"
fi
say "darwin-amd64, darwin-arm64: built only (no macOS here to run them)"
say "sizes:"
(cd "$dist" && ls -l --block-size=1 | awk 'NR > 1 { printf "  %12s %s\n", $5, $9 }') >&2
say "make dist took ${seconds}s; all checks passed"
