"""A CSV to a fitted logistic regression, end to end (issue 28): nums-cloud's `run` of a job
that loads the CSV, fits and writes the coefficients, against pandas.read_csv +
scikit-learn on the same two cores.

    python benches/csv_fit.py [--rows 1000000] [--features 20] [--bin target/release/nums-cloud]

The CSV (HIGGS's layout: the 0/1 label first, then the features, no header, every value
as np.savetxt writes it by default, `%.18e`) is written once into .cache/csv-fit/ and read
from the page cache by both sides (a first untimed read warms it).
- nums-cloud: `D = { load = "data.csv" }`, `X = "D[:, 1:]"`, `y = "D[:, 0]"`,
  `w = "logistic_regression(X, y)"` (lbfgs, C = 1, tol = 1e-4: scikit-learn's defaults),
  output `w` to a .npy; local backend, 2 workers, memory_mb 2048; a fresh store each run
  (an import is otherwise reused), the whole process timed, and its `--stats` stages.
- pandas + scikit-learn: `pd.read_csv(path, header=None)`, `LogisticRegression().fit`,
  `np.save` of `[coef..., intercept]`, each step timed.
Every measurement starts after `sync` (the previous run's store writes flushed), so the
order of `--bin`s does not favour the first.
The coefficients must agree (1e-3, relative to the largest: both stop at tol 1e-4).
Needs pandas and scikit-learn (benches/peers-requirements.txt's pins) in the Python that
runs it.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def make_csv(path, rows, features):
    rng = np.random.default_rng(28)
    wt = rng.normal(size=features) * 0.3
    tmp = path.with_suffix(".part")
    with open(tmp, "wb") as f:
        for r in range(0, rows, 100_000):
            n = min(100_000, rows - r)
            x = rng.normal(size=(n, features))
            y = (1 / (1 + np.exp(-(x @ wt + 0.25))) > rng.uniform(size=n)).astype(np.float64)
            np.savetxt(f, np.column_stack([y, x]), delimiter=",")
    tmp.rename(path)


def warm(path):
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass


def job(csv):
    return (f'name = "csvfit"\n[storage]\nurl = "file://store"\n'
            f'[compute]\nbackend = "local"\nworkers = 2\nmemory_mb = 2048\n'
            f'[arrays]\nD = {{ load = "{csv}" }}\nX = "D[:, 1:]"\ny = "D[:, 0]"\n'
            f'w = "logistic_regression(X, y)"\n[outputs]\nw = "w.npy"\n')


def run_nums(bin_, work, csv):
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    (work / "job.toml").write_text(job(csv))
    # The previous run's writes flushed first: without it the second binary of a round ran
    # while the first one's ~320 MB of store files were still being written back, and took
    # about 1 s longer at load 4-7 whichever binary it was.
    os.sync()
    t = time.perf_counter()
    p = subprocess.run([str(bin_), "run", str(work / "job.toml"), "--quiet", "--stats", str(work / "stats.json")],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if p.returncode:
        sys.exit(f"nums-cloud failed:\n{p.stderr[-3000:]}")
    return seconds, json.loads((work / "stats.json").read_text()), np.load(work / "w.npy")


def stages(stats):
    """Wall seconds per stage of the run's timeline (first start to last end)."""
    span = {}
    for r in stats.get("timeline", []):
        st = r.get("stage", "?")
        if st.startswith("fit") and not st.endswith(("-X", "-y", "-check")):
            st = st.split("-")[0] + "-passes"
        a, b = span.get(st, (r["start"], r["end"]))
        span[st] = (min(a, r["start"]), max(b, r["end"]))
    return {k: b - a for k, (a, b) in span.items()}


def run_pandas(csv, out):
    import pandas as pd
    from sklearn.linear_model import LogisticRegression
    os.sync()  # as before a nums-cloud run
    t0 = time.perf_counter()
    df = pd.read_csv(csv, header=None)
    x, y = df.iloc[:, 1:].to_numpy(), df.iloc[:, 0].to_numpy()
    t1 = time.perf_counter()
    m = LogisticRegression().fit(x, y)
    t2 = time.perf_counter()
    w = np.concatenate([m.coef_[0], m.intercept_])
    np.save(out, w)
    t3 = time.perf_counter()
    return t3 - t0, (t1 - t0, t2 - t1, t3 - t2), w


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--features", type=int, default=20)
    ap.add_argument("--bin", action="append", help="nums-cloud binaries to compare (default: target/release)")
    ap.add_argument("--repeat", type=int, default=1)
    a = ap.parse_args()
    cache = ROOT / ".cache" / "csv-fit"
    cache.mkdir(parents=True, exist_ok=True)
    csv = cache / f"data-{a.rows}x{a.features + 1}.csv"
    if not csv.exists():
        make_csv(csv, a.rows, a.features)
    warm(csv)
    bins = a.bin or [str(ROOT / "target" / "release" / "nums-cloud")]
    print(f"{csv.name}: {csv.stat().st_size / 1e6:.0f} MB; load {os.getloadavg()[0]:.2f}")
    results = []
    for _ in range(a.repeat):
        ps, (pr, pf, pe), pw = run_pandas(csv, cache / "w-sklearn.npy")
        print(f"pandas+sklearn: {ps:.2f} s (read_csv {pr:.2f}, fit {pf:.2f}, save {pe:.3f})")
        for b in bins:
            ns, stats, nw = run_nums(b, cache / "run", csv)
            scale = np.abs(pw).max()
            assert np.abs(nw - pw).max() <= 1e-3 * scale, (nw, pw)
            st = ", ".join(f"{k} {v:.2f}" for k, v in stages(stats).items())
            print(f"nums-cloud {b}: {ns:.2f} s = {ns / ps:.2f}x ({st}); load {os.getloadavg()[0]:.2f}")
            results.append((b, ns, ps))


if __name__ == "__main__":
    main()
