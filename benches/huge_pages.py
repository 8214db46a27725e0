"""Transparent huge pages for blocks (issue 42): the exploration steps that are bound by
memory, with the functions' allocator asking for huge pages (the default) and without
(`NUMS_CLOUD_HUGE_PAGES=0`), side by side in one run, with NumPy's time.

    NUMS_CLOUD_BIN=$PWD/target/release/nums-cloud PYTHONPATH=python \\
        bash scripts/paused.sh .cache/peers-venv/bin/python benches/huge_pages.py [--rows 3000000] [--rounds 2]

Each setting runs in a fresh child process (the allocator reads the setting once), in
alternating rounds; each step's best of 3 per child, the best over the rounds kept. The
array: 3M x 21 float64 (500 MB), loaded from .npy and persisted (in the memory tier).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def child(rows):
    import numpy as np

    import nums_cloud
    import nums_cloud.numpy as nps

    def best(f, r=3):
        ts = []
        for _ in range(r):
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
        return min(ts)

    tmp = tempfile.mkdtemp(prefix="nums-hp-")
    try:
        rng = np.random.default_rng(0)
        Xn = rng.standard_normal((rows, 21))
        np.save(f"{tmp}/x.npy", Xn)
        nums_cloud.init(storage=f"file://{tmp}/store", workers=2, progress=False)
        X = nps.load(f"{tmp}/x.npy")
        X.persist()
        steps = {
            "mean per column": (lambda: X.mean(axis=0).get(), lambda: Xn.mean(axis=0)),
            "min": (lambda: float(X.min().get()), lambda: float(Xn.min())),
            "row filter + get": (lambda: X[X[:, 1] > 1].get(), lambda: Xn[Xn[:, 1] > 1]),
            "sort a column": (lambda: nps.sort(X[:, 2]).get(), lambda: np.sort(Xn[:, 2])),
            "normalise": (lambda: ((X - X.mean(axis=0)) / X.std(axis=0)).get(),
                          lambda: (Xn - Xn.mean(axis=0)) / Xn.std(axis=0)),
        }
        out = {k: (best(f), best(g)) for k, (f, g) in steps.items()}
    finally:
        shutil.rmtree(tmp, True)
    print(json.dumps(out))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--child", action="store_true")
    a = ap.parse_args()
    if a.child:
        child(a.rows)
        return
    best = {}
    for _ in range(a.rounds):
        for setting in ("1", "0"):
            env = dict(os.environ, NUMS_CLOUD_HUGE_PAGES=setting)
            p = subprocess.run([sys.executable, __file__, "--child", "--rows", str(a.rows)],
                               env=env, check=True, capture_output=True, text=True)
            for step, (t, t_np) in json.loads(p.stdout.splitlines()[-1]).items():
                b = best.setdefault(step, {"1": float("inf"), "0": float("inf"), "np": float("inf")})
                b[setting] = min(b[setting], t)
                b["np"] = min(b["np"], t_np)
    print(f"{a.rows:,} x 21 float64, best of 3 x {a.rounds} rounds (seconds)\n")
    print("| step | huge pages | 4 KiB pages | ratio | NumPy | huge pages / NumPy |")
    print("|---|---|---|---|---|---|")
    for step, b in best.items():
        print(f"| {step} | {b['1']:.3f} | {b['0']:.3f} | {b['1'] / b['0']:.2f} | {b['np']:.3f} "
              f"| {b['1'] / b['np']:.2f} |")


if __name__ == "__main__":
    main()
