#!/usr/bin/env bash
# Store throughput on a real Garage S3 server (started here on 127.0.0.1, stopped at the
# end): nums-cloud blocks against raw objects, side by side. Extra args go to the bench.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo build --release -p nums-benches --quiet
env_file=$(mktemp)
.venv/bin/python tests/garage.py > "$env_file" &
garage_pid=$!
trap 'kill $garage_pid 2>/dev/null; wait $garage_pid 2>/dev/null; rm -f "$env_file"' EXIT
for _ in $(seq 100); do grep -q AWS_EC2 "$env_file" 2>/dev/null && break; sleep 0.2; done
# shellcheck disable=SC1090
source "$env_file"
./target/release/store_throughput --url "s3://$NUMS_S3_BUCKET/bench" --endpoint "$NUMS_S3_ENDPOINT" "$@"
