#!/usr/bin/env bash
# Builds nums-cloud and runs the quick-start job on the embedded default: a local folder
# store (examples/nums-data) and local function processes. No services to start.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh build
cargo build --release -p nums-cloud --quiet
exec ./target/release/nums-cloud run examples/quickstart.toml "$@"
