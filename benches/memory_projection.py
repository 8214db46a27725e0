"""The planner's memory projection against the functions' measured peaks, per kind of task:
for each job, each main-stage invocation's measured peak resident memory (`run --stats`,
its timeline) beside its batch's projected peak (`plan --json`, the scheduler the run
used), and the invocation whose measured peak comes closest to its projection. A
projection under its measured peak is a plan that could be killed at `memory_mb`.

    cargo build --workspace
    python3 benches/memory_projection.py              # all cases, ~2 minutes
    python3 benches/memory_projection.py --case sum    # one

Uses target/debug/nums-cloud (NUMS_CLOUD_BIN to change) and a temporary folder.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BIN = os.environ.get("NUMS_CLOUD_BIN", str(REPO / "target" / "debug" / "nums-cloud"))
sys.path.insert(0, str(REPO / "tests"))
from nums import job_text  # noqa: E402

MIB = 1 << 20
VERBOSE = False


def run(d, name, arrays, outputs, compute):
    path = d / f"{name}.toml"
    path.write_text(job_text(arrays, outputs, name=name, compute=compute))
    p = subprocess.run([BIN, "plan", str(path), "--json"], capture_output=True, text=True, cwd=d)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    stats = d / f"{name}.json"
    p = subprocess.run([BIN, "run", str(path), "--stats", str(stats)], capture_output=True, text=True, cwd=d)
    assert p.returncode == 0, p.stderr
    return plan, json.loads(stats.read_text())


def compare(plan, stats):
    """(invocations, max measured, its projection, least projected/measured) of the main stage."""
    sched = next(s for s in plan["schedulers"] if s["scheduler"] == stats["scheduler"])
    projected = [b["projected_peak_bytes"] for b in sched["batches"]]
    rows = [(i["peak_memory_bytes"], projected[i["batch"]]) for i in stats["timeline"]
            if i["stage"] == "main" and i["status"] == "ok"]
    assert rows, "no main-stage invocation"
    if VERBOSE:
        for i in stats["timeline"]:
            if i["stage"] == "main":
                print(f"  batch {i['batch']} slot {i['slot']} tasks {i['tasks']}: measured "
                      f"{i['peak_memory_bytes'] / MIB:.1f} MiB, projected {projected[i['batch']] / MIB:.1f}")
    top = max(rows)
    tight = min(rows, key=lambda r: r[1] / r[0])
    return len(rows), top, tight


def cases(d):
    """Each case: (name, what, setup jobs, measured job)."""
    csv = d / "higgs.csv"
    if not csv.exists():
        rng = np.random.default_rng(1)
        np.savetxt(csv, rng.normal(size=(200_000, 21)), delimiter=",", fmt="%.18e")
    return {
        "sum": ("sum of 2,000 blocks of 128 KiB, one task (naive, 512 MB)",
                [("mk_s", {"S": {"random": "normal", "shape": [1_024_000, 32], "seed": 1, "block": [512, 32]}},
                  {"S": "nums-data/mk_s/S"}, {"memory_mb": 512})],
                ({"S": {"load": "nums-data/mk_s/S"}, "s": "sum(S, axis=0)"}, {"s": "s.npy"},
                 {"memory_mb": 512, "scheduler": "naive"})),
        "rechunk": ("128 KiB blocks re-blocked into 32 MiB ones (256 inputs a task)",
                    [("mk_s", None, None, None)],
                    ({"S": {"load": "nums-data/mk_s/S", "block": [131_072, 32]}, "t": "sum(S * 2, axis=0)"},
                     {"t": "t.npy"}, {"memory_mb": 512})),
        "large": ("2 inputs of 128 MB added (few large)",
                  [("mk_ab", {"A": {"random": "uniform", "shape": [4000, 4000], "seed": 2, "block": [4000, 4000]},
                              "B": {"random": "uniform", "shape": [4000, 4000], "seed": 3, "block": [4000, 4000]}},
                    {"A": "nums-data/mk_ab/A", "B": "nums-data/mk_ab/B"}, {"memory_mb": 1536})],
                  ({"A": {"load": "nums-data/mk_ab/A"}, "B": {"load": "nums-data/mk_ab/B"}, "C": "A + B"}, {"C": "nums-data/large/C"},
                   {"memory_mb": 1536})),
        "matmul": ("A @ B, 2048^2 in 128^2 blocks (32 inputs a task) and an einsum",
                   [],
                   ({"A": {"random": "normal", "shape": [2048, 2048], "seed": 4, "block": [128, 128]},
                     "B": {"random": "normal", "shape": [2048, 2048], "seed": 5, "block": [128, 128]},
                     "C": "A @ B", "ps": "einsum('ij,ij->j', A, B)"}, {"C": "C.npy", "ps": "ps.npy"},
                    {"memory_mb": 256})),
        "linalg": ("qr (TSQR) of 400,000 x 64, solve and cholesky of 2048^2 (workspace)",
                   [],
                   ({"X": {"random": "normal", "shape": [400_000, 64], "seed": 6, "block": [5_000, 64]},
                     "R": "qr(X, mode='r')",
                     "M": {"random": "normal", "shape": [2048, 2048], "seed": 7, "block": [512, 512]},
                     "S": "M.T @ M + 2048 * eye(2048)",
                     "x": "solve(S, M[:, 0])", "L": "cholesky(S)"},
                    {"R": "R.npy", "x": "x.npy", "L": "L.npy"}, {"memory_mb": 256})),
        "csv": ("CSV import, 200,000 x 21 (the fit benchmark's layout)",
                [],
                ({"D": {"load": str(csv)}, "m": "mean(D, axis=0)"}, {"m": "m.npy", "D": "nums-data/csv/D"},
                 {"memory_mb": 256})),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--case", action="append")
    ap.add_argument("--verbose", action="store_true", help="every invocation's figures")
    args = ap.parse_args()
    global VERBOSE
    VERBOSE = args.verbose
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR")) as tmp:
        d = Path(tmp)
        all_cases = cases(d)
        made = {}
        print(f"load {load:.1f}\n")
        print("| case | invocations | largest measured peak (MiB) | its projection (MiB) | closest: projected / measured |")
        print("|---|---|---|---|---|")
        for name in args.case or list(all_cases):
            what, setup, (arrays, outputs, compute) = all_cases[name]
            for s in setup:
                if s[0] not in made:
                    job = next(j for c in all_cases.values() for j in c[1] if j[0] == s[0] and j[1])
                    run(d, *job)
                    made[s[0]] = True
            plan, stats = run(d, name, arrays, outputs, {"workers": 2, **compute})
            n, (peak, proj), (tp, tproj) = compare(plan, stats)
            print(f"| {what} | {n} | {peak / MIB:.0f} | {proj / MIB:.0f} | "
                  f"{tproj / tp:.2f} ({tproj / MIB:.0f} / {tp / MIB:.0f}) |", flush=True)


if __name__ == "__main__":
    main()
