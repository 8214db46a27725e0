#!/usr/bin/env bash
# Usage: scripts/setup.sh [build|test]   (default: test)
# Installs what nums-cloud's build (build) or build and tests (test) need, into caches outside the checkout (or
# git-ignored folders), so later runs skip the work: OpenBLAS (Debian), Garage (crates.io,
# the S3 server of the tests), and a Python venv with NumPy, zarr and pytest (PyPI).
# Idempotent; exports nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${NUMS_CACHE:-$HOME/.cache/nums-cloud}"
GARAGE_VERSION=2.5.0
mkdir -p "$CACHE"

SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO=sudo

# OpenBLAS (BLAS and LAPACK), and the static Fortran runtime its LAPACK needs in the
# statically linked Lambda bootstrap (nums-cloud package).
if ! dpkg -s libopenblas-dev libgfortran-12-dev >/dev/null 2>&1 || ! command -v pkg-config >/dev/null; then
  echo "setup: installing OpenBLAS, the Fortran runtime and pkg-config (apt)"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libopenblas-dev libgfortran-12-dev pkg-config >/dev/null
fi

[ "${1:-test}" = build ] && { echo "setup: ok (build)"; exit 0; }

GARAGE="$CACHE/garage-$GARAGE_VERSION/bin/garage"
if [ ! -x "$GARAGE" ]; then
  echo "setup: building Garage $GARAGE_VERSION from crates.io (about 7 minutes, once)"
  cargo install "garage@$GARAGE_VERSION" --locked --root "$CACHE/garage-$GARAGE_VERSION" --quiet
fi

# The venv is (re)filled when the packages do not import or tests/requirements.txt changed
# since the last install (a copy is kept in .venv).
if ! cmp -s tests/requirements.txt .venv/nums-requirements.txt \
   || ! .venv/bin/python -c "import numpy, zarr, pytest, hcl2" >/dev/null 2>&1; then
  echo "setup: filling .venv (numpy, zarr, pytest, checkov from PyPI)"
  if ! python3 -m venv .venv; then
    echo "setup: python3 -m venv failed; on Debian/Ubuntu install python3-venv" >&2
    exit 1
  fi
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r tests/requirements.txt
  cp tests/requirements.txt .venv/nums-requirements.txt
fi
echo "setup: ok (garage $GARAGE, python .venv)"
