#!/usr/bin/env bash
# Usage: scripts/setup.sh [build|test]   (default: test)
# Installs what nums-cloud's build (build) or build and tests (test) need, into caches outside the checkout (or
# git-ignored folders), so later runs skip the work: OpenBLAS (Debian), Garage (crates.io,
# the S3 server of the tests), and a Python venv with NumPy, zarr and pytest (PyPI).
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${NUMS_CACHE:-$HOME/.cache/nums-cloud}"
GARAGE_VERSION=2.5.0
mkdir -p "$CACHE"

if ! dpkg -s libopenblas-dev >/dev/null 2>&1 || ! command -v pkg-config >/dev/null; then
  echo "setup: installing OpenBLAS (apt)"
  apt-get update -qq
  apt-get install -y -qq libopenblas-dev pkg-config >/dev/null
fi

[ "${1:-test}" = build ] && exit 0

GARAGE="$CACHE/garage-$GARAGE_VERSION/bin/garage"
if [ ! -x "$GARAGE" ]; then
  echo "setup: building Garage $GARAGE_VERSION (about 7 minutes, once)"
  cargo install "garage@$GARAGE_VERSION" --locked --root "$CACHE/garage-$GARAGE_VERSION" --quiet
fi

if ! .venv/bin/python -c "import numpy, zarr, pytest" >/dev/null 2>&1; then
  echo "setup: creating .venv (numpy, zarr, pytest)"
  python3 -m venv .venv
  .venv/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
fi
echo "setup: ok (garage $GARAGE, python .venv)"
