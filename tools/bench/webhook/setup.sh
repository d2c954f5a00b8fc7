# Sourced by the webhook benchmarks: a release build of the webhook, the certificates tool and
# the bench examples; a scratch folder with a serving certificate; every process a benchmark
# starts (PIDS) stopped, and the scratch folder removed, on exit.
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
cargo build --release --locked -p styrmin-webhook -p styrmin-certs -p styrmin-webhook-bench --bins >&2
BIN=target/release
WORK=$(mktemp -d)
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT
"$BIN/styrmin-certs" --out-dir "$WORK/certs" --no-webhook-config 2>/dev/null
