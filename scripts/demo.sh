#!/usr/bin/env bash
# make demo: the post-renderer on a bundled example, and what it does to every Ingress.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="$ROOT/target/release/styrmin-postrender"
HELM3="$ROOT/.tools/bin/helm3"
CHART="$ROOT/e2e/tests/data/charts/styrmin-e2e"
RENDERED="$ROOT/postrender/tests/data/rendered/umbrella-mix.helm3-postrenderer-stdin.yaml"

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

for config in examples/styrmin.yaml examples/styrmin-dedicated.yaml; do
    say "styrmin-postrender explain --config $config"
    "$BIN" explain --config "$ROOT/$config"
done

say "What the post-renderer changes in a real umbrella chart render ($(basename "$RENDERED")), dedicated ingress"
say "(a diff of each Ingress, before -> after; every other document is byte-for-byte the same)"
"$BIN" check --config "$ROOT/examples/styrmin-dedicated.yaml" <"$RENDERED" || true

say "Real Helm 3: helm template with --post-renderer, on the test chart (subchart, sub-subchart, List, hook)"
if [[ -x "$HELM3" ]]; then
    work="$(mktemp -d)"
    trap 'rm -rf "$work"' EXIT
    export HELM_CONFIG_HOME="$work/config" HELM_CACHE_HOME="$work/cache" HELM_DATA_HOME="$work/data" HELM_PLUGINS="$work/plugins"
    "$HELM3" template web "$CHART" >"$work/before.yaml"
    "$HELM3" template web "$CHART" --post-renderer "$BIN" --post-renderer-args "--config=$ROOT/examples/styrmin.yaml" \
        --post-renderer-args "--report=$work/report.txt" >"$work/after.yaml"
    diff -u --label "helm3 template (chart as written)" --label "helm3 template --post-renderer styrmin-postrender" \
        "$work/before.yaml" "$work/after.yaml" || true
    say "the report file (--report), for Helm users who never see a post-renderer's stderr"
    cat "$work/report.txt"
else
    echo "(run 'make tools' to fetch Helm 3/4 and kubectl for this part)"
fi
