#!/usr/bin/env bash
# Usage: scripts/paused.sh COMMAND [ARGS...]
# Runs COMMAND with every process at nice 19 stopped (SIGSTOP every 2 s, SIGCONT at the
# end): benchmark figures on a machine whose other work (builds, tests) runs at nice 19.
set -uo pipefail
stop_nice19() { ps -eo pid=,ni= | awk '$2==19{print $1}'; }
( while true; do for p in $(stop_nice19); do kill -STOP "$p" 2>/dev/null; done; sleep 2; done ) &
loop=$!
trap 'kill $loop 2>/dev/null; for p in $(stop_nice19); do kill -CONT "$p" 2>/dev/null; done' EXIT
sleep 3  # let stopped work leave the run queue
"$@"
