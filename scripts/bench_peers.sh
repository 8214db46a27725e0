#!/usr/bin/env bash
# Usage: scripts/bench_peers.sh [--size base|4x] [--store file|garage] [ARGS...]
#   (also: scripts/bench.sh peers ...)
# The peers benchmark (benches/peers.py): NumPy, Dask and nums-cloud (optionally Cubed,
# --cubed) on the same Zarr inputs, one table. Builds the release binary, makes the
# benchmark's own venv (.cache/peers-venv, from benches/peers-requirements.txt), and with
# --store garage starts Garage on 127.0.0.1 for the run. Inputs are generated once into
# .cache/peers/ and reused (file store). Other arguments go to benches/peers.py (--help).
set -euo pipefail
cd "$(dirname "$0")/.."
# `--script FILE` first runs another benchmark of the same venv (scripts/bench_fit.sh).
script=benches/peers.py
if [ "${1:-}" = --script ]; then script="$2"; shift 2; fi
store=file
prev=""
for a in "$@"; do
  [ "$prev" = --store ] && store="$a"
  case "$a" in --store=*) store="${a#--store=}" ;; esac
  prev="$a"
done

if [ "$store" = garage ]; then bash scripts/setup.sh; else bash scripts/setup.sh build; fi
cargo build --release -p nums-cloud --quiet

venv=.cache/peers-venv
if ! cmp -s benches/peers-requirements.txt "$venv/peers-requirements.txt" \
   || ! "$venv/bin/python" -c "import numpy, zarr, dask, distributed, s3fs, cubed, dask_ml, sklearn" >/dev/null 2>&1; then
  echo "bench_peers: filling $venv (benches/peers-requirements.txt from PyPI)"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r benches/peers-requirements.txt
  cp benches/peers-requirements.txt "$venv/peers-requirements.txt"
fi

if [ "$store" = garage ]; then
  env_file=$(mktemp)
  "$venv/bin/python" tests/garage.py > "$env_file" &
  garage_pid=$!
  trap 'kill $garage_pid 2>/dev/null; wait $garage_pid 2>/dev/null; rm -f "$env_file"' EXIT
  for _ in $(seq 300); do grep -q AWS_EC2 "$env_file" 2>/dev/null && break; sleep 0.2; done
  grep -q AWS_EC2 "$env_file" || { echo "bench_peers: Garage did not start" >&2; exit 1; }
  # shellcheck disable=SC1090
  source "$env_file"
fi
"$venv/bin/python" "$script" "$@"
