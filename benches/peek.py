"""Compute only what is asked (issue 41): what a user peeking at a large lazy array waits
for, side by side with Dask when it is installed (scripts/bench_peers.sh's venv).

    PYTHONPATH=python .venv/bin/python benches/peek.py [--rows 20000000]

On a lazy ``rows x 16`` float64 random array (20M rows: 2.5 GB, never made):
- ``X[:2, :2].get()`` and ``(X * 2 + 1)[:2, :2].get()``: a peek;
- ``str(X)``: NumPy's summary (the four corners);
- ``[float(v) for v in X[:1000, 0]]``: a loop over elements (one compute);
- ``plt.hist(x)`` (``np.histogram`` when matplotlib is absent) of a computed
  1M-element array, against NumPy's on the same values;
each with its wall time and the block tasks it ran. Dask: ``da.random`` in 500,000-row
chunks, ``.compute()`` of the same peek.
"""
import argparse
import tempfile
import time


def timed(f, reps=5):
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        best = min(best, time.perf_counter() - t)
    return best, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=20_000_000)
    a = ap.parse_args()

    import numpy as np

    import nums_cloud
    import nums_cloud.numpy as nps

    s = nums_cloud.init(storage=f"file://{tempfile.mkdtemp(prefix='nums-peek-')}",
                        workers=2, progress=False)
    x = nps.random.default_rng(1).standard_normal((a.rows, 16))

    def tasks_of(f):
        before = s.counts()["tasks"]
        f()
        return s.counts()["tasks"] - before

    rows = []

    def row(what, f, reps=5):
        n = tasks_of(f)
        t, _ = timed(f, reps)
        rows.append((what, t, n))

    row("X[:2, :2].get()", lambda: x[:2, :2].get())
    row("(X * 2 + 1)[:2, :2].get()", lambda: (x * 2 + 1)[:2, :2].get())
    row("str(X)", lambda: str(x))
    row("[float(v) for v in X[:1000, 0]]", lambda: [float(v) for v in x[:1000, 0]])

    h = nps.random.default_rng(2).standard_normal(1_000_000)
    hv = h.get()
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        def hist(v):
            plt.hist(v, bins=50)
            plt.close("all")
        name = "plt.hist(x), 1M computed"
    except ImportError:
        def hist(v):
            # What plt.hist does first: the values as NumPy's (to_numpy), then NumPy's.
            np.histogram(v.to_numpy() if hasattr(v, "to_numpy") else v, bins=50)
        name = "np.histogram(x.to_numpy()), 1M computed"
    t_np, _ = timed(lambda: hist(hv))
    n = tasks_of(lambda: hist(h))
    t_nc, _ = timed(lambda: hist(h))
    rows.append((name, t_nc, n))

    dask_t = {}
    try:
        import dask.array as da
        d = da.random.default_rng(1).standard_normal((a.rows, 16), chunks=(500_000, 16))
        dask_t["X[:2, :2].get()"] = timed(lambda: d[:2, :2].compute())[0]
        dask_t["(X * 2 + 1)[:2, :2].get()"] = timed(lambda: (d * 2 + 1)[:2, :2].compute())[0]
        dask_t["str(X)"] = timed(lambda: str(d), 3)[0]
    except ImportError:
        pass

    print(f"lazy {a.rows:,} x 16 float64 ({a.rows * 16 * 8 / 1e9:.1f} GB), 2 workers")
    print(f"{'step':38} {'nums-cloud':>11} {'tasks':>6} {'NumPy':>9} {'Dask':>9}")
    for what, t, n in rows:
        ref = f"{t_np * 1e3:7.1f}ms" if what.endswith("computed") else ""
        dk = f"{dask_t[what] * 1e3:7.1f}ms" if what in dask_t else ""
        print(f"{what:38} {t * 1e3:9.1f}ms {n:6} {ref:>9} {dk:>9}")
    s.close()


if __name__ == "__main__":
    main()
