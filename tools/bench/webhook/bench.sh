#!/usr/bin/env bash
# make bench-webhook: styrmin-webhook against a floor server (tools/bench/src/bin/floor.rs), both
# over TLS on loopback, with a ~3 KB Ingress AdmissionReview, at 500 and 2,000 requests/s (16
# connections) and then as fast as they go (50 connections), in ROUNDS interleaved rounds;
# 10,000 deployments in the webhook's view. Prints a markdown table and the ratios per round.
# With WARN=1 (the default) a second webhook serves the same view in `enforcement_mode: warn`
# (no patch, an admission warning instead) and runs in every round too: warn / enforce p99.
# Then the memory of `--source kubernetes` with the audit (memory-kubernetes.sh), and `plan`
# with 10,000 Ingresses (plan.sh).
# Load generator: tools/bench/src/bin/loadgen.rs (ours: oha takes many minutes to build from source).
set -euo pipefail
SECONDS_PER_RUN=${SECONDS_PER_RUN:-10}
CONNECTIONS=${CONNECTIONS:-16}
MAX_CONNECTIONS=${MAX_CONNECTIONS:-50}
ROUNDS=${ROUNDS:-3}
WARN=${WARN:-1}
# shellcheck source=tools/bench/webhook/setup.sh
source "$(dirname "$0")/setup.sh"
{
  echo "cluster: {ingress_class: traefik}"
  echo "environments:"
  for e in $(seq 0 19); do echo "  env$e: {ingress_class: nginx}"; done
  echo "  stage: {ingress_class: haproxy}"
  echo "deployments:"
  echo "  web2: {environment: stage}"
  for i in $(seq 3 10001); do echo "  app$i: {environment: env$((i % 20)), ingress_class: c$i}"; done
} > "$WORK/policy.yaml"
DEPLOYMENTS=$(grep -c '^  [a-z0-9]*: {environment' "$WORK/policy.yaml")
# The same view in warn mode: one field at the cluster level.
sed 's/^cluster: {ingress_class: traefik}$/cluster: {ingress_class: traefik, enforcement_mode: warn}/' \
  "$WORK/policy.yaml" > "$WORK/policy-warn.yaml"

"$BIN/styrmin-webhook" --listen 127.0.0.1:18443 --metrics-listen 127.0.0.1:18440 \
  --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" --policy-file "$WORK/policy.yaml" \
  2> "$WORK/webhook.log" &
WEBHOOK_PID=$!; PIDS+=("$WEBHOOK_PID")
"$BIN/floor" 127.0.0.1:18444 "$WORK/certs/tls.crt" "$WORK/certs/tls.key" 2> "$WORK/floor.log" &
PIDS+=("$!")
TARGETS="floor:18444 webhook:18443"
if [ "$WARN" = 1 ]; then
  "$BIN/styrmin-webhook" --listen 127.0.0.1:18445 --metrics-listen 127.0.0.1:18446 \
    --tls-cert "$WORK/certs/tls.crt" --tls-key "$WORK/certs/tls.key" --policy-file "$WORK/policy-warn.yaml" \
    2> "$WORK/webhook-warn.log" &
  PIDS+=("$!")
  TARGETS+=" webhook-warn:18445"
fi
for port in 18443 18444 18445; do
  [ "$port" = 18445 ] && [ "$WARN" != 1 ] && continue
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null && break; sleep 0.1; done
done

BODY=webhook/tests/data/admission/crafted__ingress-v1-create__bench-3kb.json
run() { # server port rate
  local connections=$CONNECTIONS
  [ "$3" = 0 ] && connections=$MAX_CONNECTIONS
  "$BIN/loadgen" --addr "127.0.0.1:$2" --ca "$WORK/certs/ca.crt" --body "$BODY" \
    --rate "$3" --seconds "$SECONDS_PER_RUN" --connections "$connections"
}
# Warm up both, then measure: every round runs each rate on the floor and then the webhook,
# so that both see the same machine.
run floor 18444 0 >/dev/null 2>&1 || true
run webhook 18443 0 >/dev/null 2>&1 || true
[ "$WARN" = 1 ] && { run webhook-warn 18445 0 >/dev/null 2>&1 || true; }

declare -A RESULT
for round in $(seq "$ROUNDS"); do
  for rate in 500 2000 0; do
    for target in $TARGETS; do
      name=${target%%:*}; port=${target##*:}
      RESULT[$round:$name:$rate]=$(run "$name" "$port" "$rate")
      echo "round $round $name rate=$rate ${RESULT[$round:$name:$rate]}" >&2
    done
  done
done
RSS_KB=$(awk '/^VmRSS/ {print $2}' "/proc/$WEBHOOK_PID/status")
HWM_KB=$(awk '/^VmHWM/ {print $2}' "/proc/$WEBHOOK_PID/status")

field() { sed -E "s/.*\"$2\":([^,}]*).*/\1/" <<<"$1"; }
fmt() { awk -v v="$1" -v d="$2" 'BEGIN { printf "%.*f", d, v }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
median() { tr ' ' '\n' | grep . | sort -g | awk '{ v[NR] = $1 } END { printf "%.2f", (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
echo
echo "| round | server | offered rate (req/s) | connections | p50 (ms) | p99 (ms) | throughput (req/s) | errors |"
echo "|---|---|---|---|---|---|---|---|"
P99_RATIOS=""; MAX_RATIOS=""; WARN_P99_RATIOS=""; WARN_MAX_RATIOS=""
NAMES="floor webhook"; [ "$WARN" = 1 ] && NAMES+=" webhook-warn"
for round in $(seq "$ROUNDS"); do
  for rate in 500 2000 0; do
    for name in $NAMES; do
      r=${RESULT[$round:$name:$rate]}
      label=$rate; connections=$CONNECTIONS
      [ "$rate" = 0 ] && label=max && connections=$MAX_CONNECTIONS
      echo "| $round | $name | $label | $connections | $(fmt "$(field "$r" p50_ms)" 3) | $(fmt "$(field "$r" p99_ms)" 3) | $(fmt "$(field "$r" throughput)" 0) | $(field "$r" errors) |"
    done
  done
  P99_RATIOS+=" $(ratio "$(field "${RESULT[$round:webhook:2000]}" p99_ms)" "$(field "${RESULT[$round:floor:2000]}" p99_ms)")"
  MAX_RATIOS+=" $(ratio "$(field "${RESULT[$round:webhook:0]}" throughput)" "$(field "${RESULT[$round:floor:0]}" throughput)")"
  if [ "$WARN" = 1 ]; then
    WARN_P99_RATIOS+=" $(ratio "$(field "${RESULT[$round:webhook-warn:2000]}" p99_ms)" "$(field "${RESULT[$round:webhook:2000]}" p99_ms)")"
    WARN_MAX_RATIOS+=" $(ratio "$(field "${RESULT[$round:webhook-warn:0]}" throughput)" "$(field "${RESULT[$round:webhook:0]}" throughput)")"
  fi
done
echo
echo "- p99 at 2,000 req/s, webhook / floor, per round:$P99_RATIOS; median $(median <<<"$P99_RATIOS") (target <= 1.2)"
echo "- max throughput, webhook / floor, per round:$MAX_RATIOS; median $(median <<<"$MAX_RATIOS") (target >= 0.9)"
if [ "$WARN" = 1 ]; then
  echo "- p99 at 2,000 req/s, warn / enforce, per round:$WARN_P99_RATIOS; median $(median <<<"$WARN_P99_RATIOS") (within noise: as the floor's own spread)"
  echo "- max throughput, warn / enforce, per round:$WARN_MAX_RATIOS; median $(median <<<"$WARN_MAX_RATIOS")"
fi
echo "- webhook memory with $DEPLOYMENTS deployments in the view: RSS $((RSS_KB / 1024)) MiB now, peak $((HWM_KB / 1024)) MiB (target < 50 MB)"
echo "- $ROUNDS rounds, $SECONDS_PER_RUN s per run, $CONNECTIONS keep-alive connections at a fixed rate and $MAX_CONNECTIONS at the maximum, TLS on loopback, $(nproc) cores shared by the servers and the load generator"
tools/bench/webhook/memory-kubernetes.sh
tools/bench/webhook/plan.sh
