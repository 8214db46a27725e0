"""A fit's projection by `plan` against its measured run (issue 27): logistic regression
by L-BFGS and by Newton on one X and y stored in the job's store (file store, read in
place), each planned (`plan --json`: the fit's stages, each kind planned once, and the
passes assumed) and run (`run --stats`: one record per invocation, stage `fit<N>-...`).

    cargo build --release -p nums-cloud
    .venv/bin/python benches/fit_projection.py [--rows 2000000] [--cols 32] [--block 250000]

Prints, per kind of pass, the projected wall time of one pass against the median
measured one (a stage's wall time: its first invocation's start to its last one's end),
and per fit the passes assumed against those run, and the fit's projected wall time
(passes as assumed, and as run) against its measured stages' sum.
"""
import argparse
import json
import statistics
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def nums(bin_, *args, cwd):
    p = subprocess.run([str(bin_), *map(str, args)], cwd=cwd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"nums-cloud {' '.join(map(str, args))}:\n{p.stderr}")
    return p.stdout


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bin", default=str(REPO / "target" / "release" / "nums-cloud"))
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--cols", type=int, default=32)
    ap.add_argument("--block", type=int, default=250_000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--solvers", default="lbfgs,newton")
    a = ap.parse_args()
    a.bin = Path(a.bin).resolve()  # the jobs run in a folder of their own
    work = Path(tempfile.mkdtemp(prefix="nums-fit-projection-"))
    compute = f"[compute]\nworkers = {a.workers}\nmemory_mb = {a.memory_mb}\n"
    (work / "setup.toml").write_text(
        f'name = "setup"\n{compute}[arrays]\n'
        f'X = {{ random = "normal", shape = [{a.rows}, {a.cols}], seed = 1, block = [{a.block}, {a.cols}] }}\n'
        f'v = {{ random = "normal", shape = [{a.cols}], seed = 2 }}\n'
        f'noise = {{ random = "normal", shape = [{a.rows}], seed = 3, block = [{a.block}] }}\n'
        f'y = "((X @ v) / 4 + noise > 0) * 1.0"\n'
        f'[outputs]\nX = "nums-data/setup/X"\ny = "nums-data/setup/y"\n')
    nums(a.bin, "run", "setup.toml", "--quiet", cwd=work)
    print(f"X: {a.rows:,} x {a.cols} float64 ({a.rows * a.cols * 8 / 1e9:.2f} GB) in blocks of "
          f"{a.block:,} rows, stored (file store, read in place); {a.workers} workers, "
          f"memory_mb = {a.memory_mb}\n")
    rows = []
    for solver in a.solvers.split(","):
        job = work / f"fit_{solver}.toml"
        job.write_text(
            f'name = "fit_{solver}"\n{compute}[arrays]\n'
            f'X = {{ load = "nums-data/setup/X" }}\ny = {{ load = "nums-data/setup/y" }}\n'
            f'w = "logistic_regression(X, y, solver=\'{solver}\')"\n[outputs]\nw = "w_{solver}.npy"\n')
        plan = json.loads(nums(a.bin, "plan", "--json", job, cwd=work))
        sched = next(s for s in plan["schedulers"] if s["scheduler"] == "lshs")
        (fit,) = sched["fits"]
        projected = {s["stage"]: s for s in fit["stages"]}
        nums(a.bin, "run", job, "--quiet", "--stats", work / f"{solver}.json", cwd=work)
        stats = json.loads((work / f"{solver}.json").read_text())
        stages = {}
        for i in stats["timeline"]:
            if i["stage"].startswith(fit["stage"] + "-"):
                stages.setdefault(i["stage"], []).append(i)
        measured = {}  # kind -> [wall of each run]
        invocations = {}
        for name, recs in stages.items():
            kind = name[len(fit["stage"]) + 1:].rsplit("-", 1)[0] if name.count("-") > 1 else name[len(fit["stage"]) + 1:]
            measured.setdefault(kind, []).append(max(r["end"] for r in recs) - min(r["start"] for r in recs))
            invocations.setdefault(kind, set()).add(len(recs))
        print(f"{solver}: {fit['why']}")
        print("| pass | times run | invocations planned / run | projected s each | measured s each (median) | error |")
        print("|---|---|---|---|---|---|")
        as_run = 0.0
        for kind, walls in measured.items():
            p = projected[kind]
            med = statistics.median(walls)
            as_run += p["projected_wall_seconds"] * len(walls)
            err = (p["projected_wall_seconds"] - med) / med
            print(f"| {p['what']} | {len(walls)} | {p['invocations']} / {'/'.join(map(str, sorted(invocations[kind])))} "
                  f"| {p['projected_wall_seconds']:.3f} | {med:.3f} | {err:+.0%} |")
        total = sum(sum(w) for w in measured.values())
        passes_run = sum(len(w) for k, w in measured.items() if k not in ("X", "y"))
        rows.append((solver, fit["passes_assumed"], passes_run, fit["assumed"]["wall_seconds"], as_run, total))
        print()
    print("| solver | passes assumed | passes run | projected s (assumed) | projected s (as run) | measured s (stages' sum) | error as run | error assumed |")
    print("|---|---|---|---|---|---|---|---|")
    for solver, assumed, run, p_assumed, p_run, total in rows:
        print(f"| {solver} | {assumed} | {run} | {p_assumed:.2f} | {p_run:.2f} | {total:.2f} "
              f"| {(p_run - total) / total:+.0%} | {(p_assumed - total) / total:+.0%} |")


if __name__ == "__main__":
    main()
