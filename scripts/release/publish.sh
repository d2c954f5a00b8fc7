#!/usr/bin/env bash
# make publish REGISTRY=host[:port][/path]: pushes what `make dist` wrote (DIST_DIR, default
# target/dist/VERSION/) to an OCI registry, digests unchanged:
#
#   REGISTRY/styrmin-webhook:VERSION                the image index (skopeo copy --all)
#   oci://REGISTRY/charts/styrmin-webhook:VERSION   the chart with its .prov (helm push)
#   oci://REGISTRY/helm-plugins/styrmin:VERSION     the Helm 4 plugin with its .prov: an OCI
#                                                   artifact of type
#                                                   application/vnd.helm.plugin.v1+json, one
#                                                   layer per file, as `helm plugin install
#                                                   oci://...` reads it (skopeo copy)
#
# REGISTRY must be the one `make dist` pinned the chart's image to. Credentials: with
# REGISTRY_USERNAME and REGISTRY_PASSWORD set, skopeo and helm log in first; otherwise their own
# earlier logins are used. Plain HTTP (REGISTRY_PLAIN_HTTP=1) is the default for 127.0.0.1 and
# localhost only.
#
# Environment: REGISTRY (required), DIST_DIR, REGISTRY_USERNAME, REGISTRY_PASSWORD,
# REGISTRY_PLAIN_HTTP, SKOPEO (default skopeo), HELM (default .tools/bin/helm4).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SKOPEO="${SKOPEO:-skopeo}"
HELM="${HELM:-$ROOT/.tools/bin/helm4}"

die() {
    echo "publish: error: $*" >&2
    exit 1
}
say() { echo "publish: $*" >&2; }

# shellcheck source=../lib/workspace.sh
. "$ROOT/scripts/lib/workspace.sh"
VERSION="$(workspace_field "$ROOT" version)"
[[ -n "$VERSION" ]] || die "no [workspace.package] version in $ROOT/Cargo.toml"
[[ -n "${REGISTRY:-}" ]] || die "REGISTRY is not set (host[:port][/path], e.g. ghcr.io/styrmin)"
[[ "$REGISTRY" =~ ^[a-z0-9.-]+(:[0-9]+)?(/[a-z0-9._/-]+)?$ ]] ||
    die "REGISTRY '$REGISTRY' is not host[:port][/path] in lower case"
DIST="${DIST_DIR:-$ROOT/target/dist/$VERSION}"
command -v "$SKOPEO" >/dev/null || die "skopeo is missing: run make tools"
[[ -x "$HELM" ]] || die "$HELM is missing: run make tools"

image="$DIST/styrmin-webhook-$VERSION.oci.tar"
chart="$DIST/styrmin-webhook-$VERSION.tgz"
plugin="$DIST/styrmin-$VERSION.tgz"
for file in "$image" "$DIST/styrmin-webhook-$VERSION.digest" "$chart" "$chart.prov" \
    "$plugin" "$plugin.prov" "$DIST/SHA256SUMS"; do
    [[ -f "$file" ]] || die "$file is missing: run make dist"
done
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || die "$DIST/SHA256SUMS does not match the files"
digest="$(cat "$DIST/styrmin-webhook-$VERSION.digest")"

# The chart points to REGISTRY/styrmin-webhook: pushing it anywhere else would publish a
# chart whose image is not there.
pinned="$(tar -xzOf "$chart" styrmin-webhook/values.yaml | sed -n 's/^  repository: //p')"
[[ "$pinned" == "$REGISTRY/styrmin-webhook" ]] ||
    die "the chart's image is $pinned, not $REGISTRY/styrmin-webhook: run make dist REGISTRY=$REGISTRY"

host="${REGISTRY%%/*}"
if [[ -z "${REGISTRY_PLAIN_HTTP:-}" ]]; then
    case "${host%%:*}" in
        127.0.0.1 | localhost) REGISTRY_PLAIN_HTTP=1 ;;
        *) REGISTRY_PLAIN_HTTP=0 ;;
    esac
fi
skopeo_flags=(--insecure-policy)
dest_flags=()
helm_flags=()
if [[ "$REGISTRY_PLAIN_HTTP" == 1 ]]; then
    dest_flags+=(--dest-tls-verify=false)
    helm_flags+=(--plain-http)
fi
work="$(mktemp -d "${TMPDIR:-/tmp}/styrmin-publish.XXXXXX")"
trap 'rm -rf "$work"' EXIT

if [[ -n "${REGISTRY_USERNAME:-}" ]]; then
    [[ -n "${REGISTRY_PASSWORD:-}" ]] || die "REGISTRY_USERNAME is set but REGISTRY_PASSWORD is not"
    tls=()
    [[ "$REGISTRY_PLAIN_HTTP" == 1 ]] && tls=(--tls-verify=false)
    printf '%s' "$REGISTRY_PASSWORD" |
        "$SKOPEO" login "${tls[@]}" --username "$REGISTRY_USERNAME" --password-stdin "$host" >&2
    printf '%s' "$REGISTRY_PASSWORD" |
        "$HELM" registry login "${helm_flags[@]/--plain-http/--insecure}" \
            --username "$REGISTRY_USERNAME" --password-stdin "$host" >&2
fi

# ---- the image index ------------------------------------------------------------------------
say "image -> $REGISTRY/styrmin-webhook:$VERSION ($digest)"
"$SKOPEO" "${skopeo_flags[@]}" copy --all --preserve-digests --quiet "${dest_flags[@]}" \
    "oci-archive:$image:$VERSION" "docker://$REGISTRY/styrmin-webhook:$VERSION" ||
    die "skopeo could not push the image to $REGISTRY"

# ---- the chart and its provenance -------------------------------------------------------------
say "chart -> oci://$REGISTRY/charts/styrmin-webhook:$VERSION"
"$HELM" push "${helm_flags[@]}" "$chart" "oci://$REGISTRY/charts" >&2 ||
    die "helm push of $chart failed"

# ---- the plugin and its provenance, as an OCI artifact ---------------------------------------
# The layout a registry client (oras) writes for two files: an empty config, one
# uncompressed layer per file titled by its name; Helm finds NAME-VERSION.tgz and its .prov
# by those titles.
layout="$work/plugin"
blobs="$layout/blobs/sha256"
mkdir -p "$blobs"
add_blob() {
    local hex
    hex="$(sha256sum "$1" | cut -d' ' -f1)"
    cp "$1" "$blobs/$hex"
    echo "$hex"
}
descriptor() {
    local hex size
    hex="$(add_blob "$1")"
    size="$(stat -c %s "$blobs/$hex")"
    printf '{"mediaType":"application/vnd.oci.image.layer.v1.tar","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.title":"%s"}}' \
        "$hex" "$size" "$(basename "$1")"
}
printf '{}' >"$work/empty.json"
empty="$(add_blob "$work/empty.json")"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","artifactType":"application/vnd.helm.plugin.v1+json","config":{"mediaType":"application/vnd.oci.empty.v1+json","digest":"sha256:%s","size":2},"layers":[%s,%s]}' \
    "$empty" "$(descriptor "$plugin")" "$(descriptor "$plugin.prov")" >"$work/manifest.json"
manifest="$(add_blob "$work/manifest.json")"
printf '{"schemaVersion":2,"manifests":[{"mediaType":"application/vnd.oci.image.manifest.v1+json","digest":"sha256:%s","size":%s,"annotations":{"org.opencontainers.image.ref.name":"%s"}}]}' \
    "$manifest" "$(stat -c %s "$blobs/$manifest")" "$VERSION" >"$layout/index.json"
printf '{"imageLayoutVersion":"1.0.0"}' >"$layout/oci-layout"
say "plugin -> oci://$REGISTRY/helm-plugins/styrmin:$VERSION (sha256:$manifest)"
"$SKOPEO" "${skopeo_flags[@]}" copy --preserve-digests --quiet "${dest_flags[@]}" \
    "oci:$layout:$VERSION" "docker://$REGISTRY/helm-plugins/styrmin:$VERSION" ||
    die "skopeo could not push the plugin to $REGISTRY"

echo "publish: helm install styrmin-webhook oci://$REGISTRY/charts/styrmin-webhook --version $VERSION --verify"
echo "publish: helm plugin install oci://$REGISTRY/helm-plugins/styrmin:$VERSION"
