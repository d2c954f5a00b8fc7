#!/usr/bin/env bash
# make dist-tools: what `make dist` and `make test-dist` need beyond `make tools`.
#
#   the standard library of each release target for the pinned toolchain (rustup target add):
#     x86_64/aarch64-unknown-linux-musl, x86_64/aarch64-apple-darwin, x86_64-pc-windows-gnu
#   zig and cargo-zigbuild (PyPI wheels ziglang, cargo-zigbuild) in .tools/: the linker and C
#     compiler of every target, with the musl, mingw and macOS stubs zig ships
#   cargo-cyclonedx (crates.io, cargo install) in .tools/bin: the SBOMs
#   qemu-user-static (Debian): runs the arm64 binaries and image entrypoint (make test-dist)
#   wine64 (Debian): runs the Windows build (make test-dist)
#
# Idempotent: what is there at the pinned version is not fetched again.
# Environment: TOOLS_DIR (default <repo>/.tools), CARGO (default cargo).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$ROOT/.tools}"
BIN="$TOOLS_DIR/bin"
CACHE="$TOOLS_DIR/cache"
CARGO="${CARGO:-cargo}"

TARGETS=(x86_64-unknown-linux-musl aarch64-unknown-linux-musl x86_64-apple-darwin
    aarch64-apple-darwin x86_64-pc-windows-gnu)
ZIG_VERSION="0.17.1"
ZIGBUILD_VERSION="0.24.1"
CYCLONEDX_VERSION="0.5.9"

die() {
    echo "install-dist-tools: error: $*" >&2
    exit 1
}

# ---- the targets' standard libraries, for the toolchain rust-toolchain.toml pins ----------
command -v rustup >/dev/null || die "rustup is needed to add the release targets"
installed="$(cd "$ROOT" && rustup target list --installed)"
missing=()
for target in "${TARGETS[@]}"; do
    grep -qx "$target" <<<"$installed" || missing+=("$target")
done
if ((${#missing[@]} > 0)); then
    (cd "$ROOT" && rustup target add "${missing[@]}") ||
        die "rustup target add ${missing[*]} failed (the Rust distribution server must be reachable)"
fi

# ---- zig and cargo-zigbuild from their PyPI wheels ------------------------------------------
# A wheel is a zip: the files are taken out of it, no Python environment is made.
wheel() {
    local name="$1" version="$2" file
    file="$(ls "$CACHE"/"${name//-/_}"-"$version"-*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$file" ]]; then
        mkdir -p "$CACHE"
        echo "install-dist-tools: fetching $name==$version from PyPI" >&2
        python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$CACHE" "$name==$version" ||
            die "pip download $name==$version failed"
        file="$(ls "$CACHE"/"${name//-/_}"-"$version"-*.whl | head -n 1)"
    fi
    echo "$file"
}
mkdir -p "$BIN"
if [[ "$("$BIN/zig" version 2>/dev/null || true)" != "$ZIG_VERSION" ]]; then
    rm -rf "$TOOLS_DIR/zig"
    python3 -m zipfile -e "$(wheel ziglang "$ZIG_VERSION")" "$TOOLS_DIR/zig" || die "cannot extract ziglang"
    chmod +x "$TOOLS_DIR/zig/ziglang/zig"
    ln -sf ../zig/ziglang/zig "$BIN/zig"
fi
if [[ "$("$BIN/cargo-zigbuild" --version 2>/dev/null || true)" != "cargo-zigbuild $ZIGBUILD_VERSION" ]]; then
    work="$(mktemp -d)"
    python3 -m zipfile -e "$(wheel cargo-zigbuild "$ZIGBUILD_VERSION")" "$work" ||
        die "cannot extract cargo-zigbuild"
    install -m 0755 "$work/cargo_zigbuild-$ZIGBUILD_VERSION.data/scripts/cargo-zigbuild" "$BIN/cargo-zigbuild"
    rm -rf "$work"
fi

# ---- cargo-cyclonedx from crates.io ----------------------------------------------------------
if [[ "$("$BIN/cargo-cyclonedx" cyclonedx --version 2>/dev/null || true)" != "cargo-cyclonedx-cyclonedx $CYCLONEDX_VERSION" ]]; then
    "$CARGO" install --force --locked --root "$TOOLS_DIR" --version "$CYCLONEDX_VERSION" cargo-cyclonedx ||
        die "cargo install cargo-cyclonedx failed"
fi

# ---- qemu user emulation and wine (Debian) ---------------------------------------------------
missing=()
[[ -x /usr/bin/qemu-aarch64-static ]] || missing+=(qemu-user-static)
[[ -x /usr/lib/wine/wine64 ]] || missing+=(wine64)
if ((${#missing[@]} > 0)); then
    command -v apt-get >/dev/null || die "${missing[*]} missing and there is no apt-get"
    sudo=()
    [[ "$(id -u)" == 0 ]] || sudo=(sudo)
    "${sudo[@]}" apt-get update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" ||
        die "apt-get install ${missing[*]} failed"
fi

echo "install-dist-tools: targets ${TARGETS[*]}"
echo "install-dist-tools: zig $("$BIN/zig" version), $("$BIN/cargo-zigbuild" --version)"
echo "install-dist-tools: $("$BIN/cargo-cyclonedx" cyclonedx --version)"
echo "install-dist-tools: $(/usr/bin/qemu-aarch64-static --version | head -n 1)"
echo "install-dist-tools: $(/usr/lib/wine/wine64 --version)"
