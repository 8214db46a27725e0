#!/usr/bin/env bash
# The whole test suite: installs what it needs (scripts/setup.sh), then checks format and
# lints, runs the Rust unit and doc tests, and the end-to-end tests (pytest) that run the
# real binary on the file store and on a real Garage S3 server started on 127.0.0.1.
set -euo pipefail
export CARGO_INCREMENTAL=0  # incremental caches only grow the target of a one-off build
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo build --workspace --quiet
cargo test --workspace --quiet
.venv/bin/pytest -q tests
