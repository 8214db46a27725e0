"""A logistic regression fit from Python against the CLI's run of the same job (issue 25,
item 6): the Python package must cost nothing on top of the engine (target: within 5%).

    pip install ./python && cargo build --release -p nums-cloud
    python benches/python_fit.py [--rows 16000000] [--repeat 2]

X (rows x 32 float64: 4.1 GB at 16M rows, row blocks of 500,000) and labels y drawn from a
known logistic model are written once by a nums-cloud setup job as Zarr arrays in the
file store (under .cache/python-fit/), and both sides read those same arrays in place:
- CLI: ``nums-cloud run`` of a job ``w = logistic_regression(X, y, solver='newton',
  C=1e10, tol=1e-8)``, the whole process timed (release build, target/release);
- Python: ``LogisticRegression(solver="newton", C=1e10, tol=1e-8).fit(nps.load(X),
  nps.load(y))`` in a session on the same store, the fit timed (the package's release
  build; its function processes are ``python -m nums_cloud._function``).
Both: local backend, 2 workers, memory_mb 2048, LSHS. The runs alternate, ``--repeat``
times each; the best of each is compared, and the coefficients must agree (1e-6).
- scikit-learn (when installed): ``LogisticRegression(C=1e10, tol=1e-8, solver=
  "newton-cholesky")`` on the same X and y read whole into memory (the read not timed;
  left out past ``--sklearn-max-gb``); its coefficients must agree as well (1e-4).
"""
import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
D = 32


def setup_text(root, rows, block):
    return (f'name = "data-{rows}"\n[storage]\nurl = "{root}"\n'
            f"[compute]\nworkers = 2\nmemory_mb = 2048\n[arrays]\n"
            f'X = {{ random = "normal", shape = [{rows}, {D}], block = [{block}, {D}], seed = 11 }}\n'
            f'wt = {{ random = "normal", shape = [{D}], seed = 12 }}\n'
            f'u = {{ random = "uniform", shape = [{rows}], block = [{block}], seed = 13 }}\n'
            f'y = {{ expr = "sigmoid(X @ (wt * 0.3) + 0.25) > u", dtype = "float64", block = [{block}] }}\n'
            f'[outputs]\nX = "{root}/data-{rows}/X"\ny = "{root}/data-{rows}/y"\n')


def fit_text(root, rows, out):
    return (f'name = "python-fit-cli"\n[storage]\nurl = "{root}"\n'
            f'[compute]\nbackend = "local"\nworkers = 2\nmemory_mb = 2048\nscheduler = "lshs"\n'
            f'[arrays]\nX = {{ load = "{root}/data-{rows}/X" }}\ny = {{ load = "{root}/data-{rows}/y" }}\n'
            f"w = \"logistic_regression(X, y, solver='newton', C=1e10, tol=1e-8)\"\n"
            f'[outputs]\nw = "{out}"\n')


def run(bin_, path, text):
    path.write_text(text)
    t = time.perf_counter()
    p = subprocess.run([str(bin_), "run", str(path), "--quiet", "--stats", str(path.with_suffix(".json"))],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"nums-cloud run {path} failed:\n{p.stderr[-3000:]}")
    return seconds, json.loads(path.with_suffix(".json").read_text())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=16_000_000)
    ap.add_argument("--block", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--sklearn-max-gb", type=float, default=6.0)
    a = ap.parse_args()

    import nums_cloud
    import nums_cloud.numpy as nps
    from nums_cloud.models import LogisticRegression

    cache = ROOT / ".cache" / "python-fit"
    cache.mkdir(parents=True, exist_ok=True)
    root = f"file://{cache / 'store'}"
    marker = cache / f"data-{a.rows}.done"
    if not marker.exists():
        s, _ = run(a.bin, cache / "setup.toml", setup_text(root, a.rows, a.block))
        marker.write_text(f"{s:.1f}\n")
        print(f"setup: X and y written in {s:.1f} s")

    cli, py = [], []
    for _ in range(a.repeat):
        out = cache / "w.npy"
        s, stats = run(a.bin, cache / "fit.toml", fit_text(root, a.rows, out))
        w_cli = np.load(out)
        cli.append(s)
        print(f"CLI:    {s:7.1f} s  ({stats['invocations']} invocations)")

        sess = nums_cloud.init(storage=root, workers=2, memory_mb=2048, progress=False)
        X = nps.load(f"{root}/data-{a.rows}/X")
        y = nps.load(f"{root}/data-{a.rows}/y")
        t = time.perf_counter()
        m = LogisticRegression(solver="newton", C=1e10, tol=1e-8).fit(X, y)
        s = time.perf_counter() - t
        py.append(s)
        print(f"Python: {s:7.1f} s  ({sess.counts()['invocations']} invocations, {m.n_iter_[0]} iterations)")
        w_py = np.concatenate([m.coef_[0], m.intercept_])
        np.testing.assert_allclose(w_py, w_cli, rtol=1e-6, atol=1e-9)
        sess.close()

    gb = a.rows * D * 8 / 1e9
    sk = None
    try:
        from sklearn.linear_model import LogisticRegression as SkLR
    except ImportError:
        print("(scikit-learn is not installed: its column is left out)")
        SkLR = None
    if SkLR is not None and gb <= a.sklearn_max_gb:
        sess = nums_cloud.init(storage=root, workers=2, memory_mb=2048, progress=False)
        Xv = nps.load(f"{root}/data-{a.rows}/X").get()
        yv = nps.load(f"{root}/data-{a.rows}/y").get()
        sess.close()
        t = time.perf_counter()
        m = SkLR(C=1e10, tol=1e-8, solver="newton-cholesky", max_iter=100).fit(Xv, yv)
        sk = time.perf_counter() - t
        print(f"scikit-learn: {sk:7.1f} s  ({m.n_iter_[0]} iterations)")
        np.testing.assert_allclose(np.concatenate([m.coef_[0], m.intercept_]), w_cli,
                                   rtol=1e-4, atol=1e-6)
        del Xv, yv

    b_cli, b_py = min(cli), min(py)
    sk_cols = f" {sk:.1f} | {b_py / sk:.2f} |" if sk is not None else " - | - |"
    print("\n| X | CLI `nums-cloud run` s | Python `fit` s | Python / CLI | scikit-learn s "
          "| Python / scikit-learn |")
    print("|---|---|---|---|---|---|")
    print(f"| {a.rows:,} x {D} ({gb:.2f} GB) | {b_cli:.1f} | {b_py:.1f} | {b_py / b_cli:.3f} |"
          + sk_cols)


if __name__ == "__main__":
    main()
