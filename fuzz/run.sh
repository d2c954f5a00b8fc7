#!/usr/bin/env bash
# Builds the fuzz targets and runs each for SECONDS (default 600), one at a time, at the
# lowest priority. Usage: fuzz/run.sh [SECONDS] [TARGET...]
# cargo fuzz needs nightly flags; on the pinned stable toolchain RUSTC_BOOTSTRAP=1 allows them.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(rendered_stream postrender_config admission_review policy_file deep_nesting)
export RUSTC_BOOTSTRAP=1
./seed.sh
# No sanitizer: the project forbids unsafe code; debug assertions (overflow checks) on.
flags=(-s none --debug-assertions)
nice -n 19 cargo fuzz build "${flags[@]}"
mkdir -p logs
for t in "${targets[@]}"; do
  dict=()
  [ "$t" = admission_review ] || dict=(-dict=yaml.dict)
  echo "== $t: ${seconds}s"
  nice -n 19 cargo fuzz run "${flags[@]}" "$t" -- -max_total_time="$seconds" -max_len=65536 \
    -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 "${dict[@]}" > "logs/$t.log" 2>&1 \
    || { echo "$t: FAILED (fuzz/logs/$t.log, fuzz/artifacts/$t/)"; tail -n 40 "logs/$t.log"; exit 1; }
  grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb|^#[0-9]+ +DONE' "logs/$t.log" || true
done
