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
# The Python package (python/), built once by the line above (the workspace member
# nums-cloud-python), in the profile and target folder of every other test: no second
# build of the driver. Its extension module is linked into python/nums_cloud, and
# tests/conftest.py puts python/ first on the path of the tests and of the function
# processes they start (`pip install ./python` makes a release wheel instead, with maturin).
# Its Python dependencies (NumPy; scikit-learn and pyarrow for its tests) are the venv's,
# from tests/requirements.txt (scripts/setup.sh).
ln -sfn ../../target/debug/libnums_cloud_native.so python/nums_cloud/_native.abi3.so
cargo test --workspace --quiet
.venv/bin/pytest -q tests
