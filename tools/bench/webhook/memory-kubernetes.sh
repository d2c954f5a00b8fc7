#!/usr/bin/env bash
# The webhook's memory with `--source kubernetes` and the audit: N StyrminDeployments, N
# Ingresses (with the labels, annotations and managed fields a Helm install gives them), N
# namespaces and N/10 service aliases, listed from a stand-in API server
# (tools/bench/src/bin/bench_apiserver.rs). The baseline, in the same run, is the same webhook
# with N=0. Target: < 64 MB with N = 10,000. Called by bench.sh; runs alone too.
set -euo pipefail
N=${N:-10000}
# shellcheck source=tools/bench/webhook/setup.sh
source "$(dirname "$0")/setup.sh"

# measure N API_PORT METRICS_PORT -> "rss_kib peak_kib ingresses seconds_to_audit"
measure() {
  local n=$1 api=$2 metrics=$3
  "$BIN/bench_apiserver" "127.0.0.1:$api" "$n" 2>/dev/null &
  local api_pid=$!; PIDS+=("$api_pid")
  cat > "$WORK/kubeconfig-$n" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters: [{name: bench, cluster: {server: "http://127.0.0.1:$api"}}]
users: [{name: bench, user: {}}]
contexts: [{name: bench, context: {cluster: bench, user: bench}}]
current-context: bench
KUBECONFIG
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$api) 2>/dev/null && break; sleep 0.1; done
  local started=$SECONDS
  KUBECONFIG="$WORK/kubeconfig-$n" "$BIN/styrmin-webhook" --source kubernetes \
    --listen "127.0.0.1:$((metrics + 1))" --metrics-listen "127.0.0.1:$metrics" \
    --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" 2> "$WORK/webhook-$n.log" &
  local pid=$!; PIDS+=("$pid")
  local audit=""
  for _ in $(seq 600); do
    audit=$(curl -sf "http://127.0.0.1:$metrics/debug/audit" 2>/dev/null || true)
    grep -q '"state": "complete"' <<<"$audit" && break
    sleep 0.2
  done
  grep -q '"state": "complete"' <<<"$audit" || { echo "no complete audit with N=$n" >&2; cat "$WORK/webhook-$n.log" >&2; exit 1; }
  local seconds=$((SECONDS - started))
  sleep 2 # a few audit rounds and watch reconnects
  local rss hwm ingresses
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")
  hwm=$(awk '/^VmHWM/ {print $2}' "/proc/$pid/status")
  ingresses=$(curl -sf "http://127.0.0.1:$metrics/metrics" | awk '/^styrmin_webhook_audit_ingresses / {print $2}')
  kill "$pid" "$api_pid" 2>/dev/null || true
  echo "$rss $hwm $ingresses $seconds"
}

read -r BASE_RSS BASE_HWM _ _ <<<"$(measure 0 18460 18462)"
read -r RSS HWM INGRESSES SECS <<<"$(measure "$N" 18470 18472)"
mib() { awk -v k="$1" 'BEGIN { printf "%.1f", k / 1024 }'; }
echo "- --source kubernetes with the audit, $N StyrminDeployments + $INGRESSES Ingresses + $N namespaces + $((N / 10)) aliases: RSS $(mib "$RSS") MiB, peak $(mib "$HWM") MiB (target < 64 MB); baseline with none: RSS $(mib "$BASE_RSS") MiB, peak $(mib "$BASE_HWM") MiB; ready and audited in ${SECS} s"
if [ "$HWM" -ge $((64 * 1000 * 1000 / 1024)) ]; then echo "peak memory over 64 MB" >&2; exit 1; fi
