#!/usr/bin/env bash
# `styrmin-webhook plan` on a cluster of N StyrminDeployments and N Ingresses (the stand-in API
# server tools/bench/src/bin/bench_apiserver.rs), proposing a new class for all 20 environments:
# wall time and peak memory (/usr/bin/time -v). The baseline, in the same run and interleaved,
# is `styrmin-webhook audit` on the same cluster (the same lists, one judgement per Ingress).
# Target: plan under 5 s and 64 MB with N = 10,000. Called by bench.sh; runs alone too.
set -euo pipefail
N=${N:-10000}
ROUNDS=${ROUNDS:-3}
# shellcheck source=tools/bench/webhook/setup.sh
source "$(dirname "$0")/setup.sh"
API=18480
"$BIN/bench_apiserver" "127.0.0.1:$API" "$N" 2>/dev/null &
PIDS+=("$!")
cat > "$WORK/kubeconfig" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "http://127.0.0.1:$API"}}]
users: [{name: bench, user: {}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
KUBECONFIG
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$API) 2>/dev/null && break; sleep 0.1; done
for e in $(seq 0 19); do
  printf -- '---\napiVersion: styrmin.io/v1alpha1\nkind: StyrminEnvironment\nmetadata: {name: env%s}\nspec: {ingressClass: haproxy, enforcementMode: enforce}\n' "$e"
done > "$WORK/proposal.yaml"

# one COMMAND... -> "seconds max_rss_kib exit_code"
one() {
  local code=0
  /usr/bin/time -v -o "$WORK/time" "$@" > "$WORK/out" 2> "$WORK/err" || code=$?
  [ "$code" -le 1 ] || { echo "$* exited $code" >&2; cat "$WORK/err" >&2; exit 1; }
  local wall rss
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, t, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + t[i]; print s}' "$WORK/time")
  rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time")
  echo "$wall $rss $code"
}
PLAN=(); AUDIT=()
one "$BIN/styrmin-webhook" audit --kubeconfig "$WORK/kubeconfig" >/dev/null # warm-up
for round in $(seq "$ROUNDS"); do
  AUDIT+=("$(one "$BIN/styrmin-webhook" audit -o json --kubeconfig "$WORK/kubeconfig")")
  PLAN+=("$(one "$BIN/styrmin-webhook" plan -o json --kubeconfig "$WORK/kubeconfig" -f "$WORK/proposal.yaml")")
  echo "round $round audit ${AUDIT[-1]} plan ${PLAN[-1]}" >&2
done
INGRESSES=$(grep -o '"namespace"' "$WORK/out" | wc -l)
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
line=""
for round in $(seq 0 $((ROUNDS - 1))); do
  read -r pw pr _ <<<"${PLAN[$round]}"; read -r aw ar _ <<<"${AUDIT[$round]}"
  line+=" plan ${pw} s / $(mib "$pr") MiB (audit ${aw} s / $(mib "$ar") MiB);"
done
echo "- plan with $N StyrminDeployments and $INGRESSES planned Ingresses, per round:$line target < 5 s and < 64 MB; $ROUNDS rounds interleaved with the audit of the same cluster"
worst=0
for r in "${PLAN[@]}"; do read -r _ rss _ <<<"$r"; [ "$rss" -gt "$worst" ] && worst=$rss; done
if [ "$worst" -ge $((64 * 1000 * 1000 / 1024)) ]; then echo "plan peak memory over 64 MB" >&2; exit 1; fi
