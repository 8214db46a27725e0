#!/usr/bin/env bash
# Usage: scripts/bench_fit.sh [--store file|garage] [ARGS...]
# The fit benchmark (benches/fit.py): logistic regression to convergence by nums-cloud
# (Newton LSHS and naive, L-BFGS), Dask-ML and scikit-learn on the same Zarr X and y.
# Uses the peers benchmark's venv (.cache/peers-venv, benches/peers-requirements.txt) and
# its Garage set-up; inputs are generated once into .cache/fit/ (file store).
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/bench_peers.sh --script benches/fit.py "$@"
