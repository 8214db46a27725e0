#!/usr/bin/env bash
# Usage: scripts/bench.sh BENCH [ARGS...]   (BENCH: store_throughput | lshs | peers)
# (peers is scripts/bench_peers.sh: NumPy, Dask and nums-cloud on the same data.)
# Runs a benchmark from benches/ against a real Garage S3 server, started here on
# 127.0.0.1 and stopped at the end. Extra arguments go to the benchmark.
set -euo pipefail
cd "$(dirname "$0")/.."
[ "${1:-}" = peers ] && { shift; exec bash scripts/bench_peers.sh "$@"; }
bash scripts/setup.sh
bench="$1"
shift
cargo build --release -p nums-benches -p nums-cloud --quiet
env_file=$(mktemp)
.venv/bin/python tests/garage.py > "$env_file" &
garage_pid=$!
trap 'kill $garage_pid 2>/dev/null; wait $garage_pid 2>/dev/null; rm -f "$env_file"' EXIT
for _ in $(seq 100); do grep -q AWS_EC2 "$env_file" 2>/dev/null && break; sleep 0.2; done
# shellcheck disable=SC1090
source "$env_file"
"./target/release/$bench" --url "s3://$NUMS_S3_BUCKET/bench" --endpoint "$NUMS_S3_ENDPOINT" "$@"
