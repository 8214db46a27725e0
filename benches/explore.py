"""Interactive speed (issue 42): the steps of exploring a persisted 3M x 21 float64 array
(500 MB), side by side with NumPy (in memory) and Dask (the same array persisted in
Dask's memory, threaded scheduler, 2 workers), each row's ratio printed.

    NUMS_CLOUD_BIN=$PWD/target/debug/nums-cloud PYTHONPATH=python \\
        .cache/dask-venv/bin/python benches/explore.py [--rows 3000000] [--tier-mb MiB]

The array: column 0 a 0/1 label, columns 1-20 normal, loaded from a .npy file and
persisted (``persist()``: kept in this process's memory tier when it fits). Every step's
answer is fetched to NumPy and checked against NumPy's. ``--tier-mb`` sets the memory
tier (default: the session's, a quarter of the machine's memory); ``--tier-mb 0`` is the
store path (every step reads the persisted blocks back from the store, as before issue
42); a tier of a quarter of the array evicts as it goes. Dask runs when it is importable
(``dask[array]``); scikit-learn's ``cross_val_score`` when scikit-learn is.
"""
import argparse
import atexit
import shutil
import statistics
import tempfile
import time

import numpy as np


def best(f, reps):
    ts, out = [], None
    for _ in range(reps):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return min(ts), out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=3_000_000)
    ap.add_argument("--tier-mb", type=float, default=None)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--skip", default="", help="comma-separated steps to leave out")
    a = ap.parse_args()
    skip = {s.strip() for s in a.skip.split(",") if s.strip()}

    import nums_cloud
    import nums_cloud.numpy as nps

    rng = np.random.default_rng(0)
    Xn = rng.standard_normal((a.rows, 21))
    Xn[:, 0] = (Xn[:, 1] + rng.standard_normal(a.rows) > 0).astype(np.float64)
    tmp = tempfile.mkdtemp(prefix="nums-explore-")
    atexit.register(shutil.rmtree, tmp, True)  # ~0.5 GB a run: never left behind
    np.save(f"{tmp}/x.npy", Xn)

    s = nums_cloud.init(storage=f"file://{tmp}/store", workers=2, progress=False,
                        memory_tier_mb=a.tier_mb)
    t0 = time.perf_counter()
    X = nps.load(f"{tmp}/x.npy")
    X.persist()
    t_load = time.perf_counter() - t0

    try:
        import dask
        import dask.array as da
        dask.config.set(scheduler="threads", num_workers=2)
        dX = da.from_array(Xn, chunks=(500_000, 21)).persist()
    except ImportError:
        da = None

    steps = [
        ("mean per column",
         lambda: X.mean(axis=0).get(),
         lambda: Xn.mean(axis=0),
         lambda: dX.mean(axis=0).compute()),
        ("min",
         lambda: float(X.min().get()),
         lambda: float(Xn.min()),
         lambda: float(dX.min().compute())),
        ("histogram",
         lambda: nps.histogram(X[:, 1], bins=50)[0].get(),
         lambda: np.histogram(Xn[:, 1], bins=50)[0],
         lambda: da.histogram(dX[:, 1], bins=50,
                              range=(float(dX[:, 1].min()), float(dX[:, 1].max())))[0]
         .compute()),
        ("median",
         lambda: float(nps.median(X[:, 1]).get()),
         lambda: float(np.median(Xn[:, 1])),
         lambda: float(da.median(dX[:, 1], axis=0).compute())),
        ("unique with counts",
         lambda: [v.get() for v in nps.unique(X[:, 0], return_counts=True)],
         lambda: list(np.unique(Xn[:, 0], return_counts=True)),
         lambda: list(da.compute(*da.unique(dX[:, 0], return_counts=True)))),
        ("corrcoef",
         lambda: nps.corrcoef(X[:, 1:], rowvar=False).get(),
         lambda: np.corrcoef(Xn[:, 1:], rowvar=False),
         lambda: da.corrcoef(dX[:, 1:], rowvar=False).compute()),
        ("row filter + get",
         lambda: X[X[:, 1] > 1].get(),
         lambda: Xn[Xn[:, 1] > 1],
         lambda: dX[dX[:, 1] > 1].compute()),
        ("sort a column",
         lambda: nps.sort(X[:, 2]).get(),
         lambda: np.sort(Xn[:, 2]),
         None),  # Dask has no sort (dask/dask#4368)
        ("normalise (x - mean) / std",
         lambda: ((X - X.mean(axis=0)) / X.std(axis=0)).get(),
         lambda: (Xn - Xn.mean(axis=0)) / Xn.std(axis=0),
         lambda: ((dX - dX.mean(axis=0)) / dX.std(axis=0)).compute()),
        ("percentile, 20 columns",
         lambda: nps.percentile(X[:, 1:], [5, 50, 95], axis=0).get(),
         lambda: np.percentile(Xn[:, 1:], [5, 50, 95], axis=0),
         None),  # Dask's percentile is 1-D and approximate
    ]

    rows = []
    for name, nc, ref, dk in steps:
        # "percentile, 20 columns" is named by its first part (--skip splits at commas).
        if name in skip or name.split(",")[0] in skip:
            continue
        t_np, want = best(ref, a.reps)
        t_nc, got = best(nc, a.reps)
        for g, w in zip(got if isinstance(got, list) else [got],
                        want if isinstance(want, list) else [want]):
            np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=name)
        t_dk = None
        if da is not None and dk is not None:
            t_dk, _ = best(dk, a.reps)
        rows.append((name, t_nc, t_np, t_dk))

    # A 1,000-element op, end to end: a new scalar each time (nothing reused).
    v = nps.asarray(np.arange(1000.0))
    v.get()
    ts = []
    for i in range(200):
        t = time.perf_counter()
        (v * float(i)).get()
        ts.append(time.perf_counter() - t)
    t_small = statistics.median(ts)
    vn = np.arange(1000.0)
    ts = []
    for i in range(2000):
        t = time.perf_counter()
        vn * float(i)
        ts.append(time.perf_counter() - t)
    t_small_np = statistics.median(ts)
    t_small_dk = None
    if da is not None:
        dv = da.from_array(vn, chunks=1000).persist()
        ts = []
        for i in range(200):
            t = time.perf_counter()
            (dv * float(i)).compute()
            ts.append(time.perf_counter() - t)
        t_small_dk = statistics.median(ts)
    rows.append(("1,000-element op (median)", t_small, t_small_np, t_small_dk))

    cv = None
    if "cross_val_score" not in skip:
        try:
            from sklearn.linear_model import LogisticRegression as SkLR
            from sklearn.model_selection import cross_val_score
            from nums_cloud.models import LogisticRegression
            t = time.perf_counter()
            ours = cross_val_score(LogisticRegression(), X[:, 1:], X[:, 0], cv=3)
            t_cv = time.perf_counter() - t
            t = time.perf_counter()
            theirs = cross_val_score(SkLR(), Xn[:, 1:], Xn[:, 0], cv=3)
            t_sk = time.perf_counter() - t
            np.testing.assert_allclose(ours, theirs, atol=2e-3)
            cv = (t_cv, t_sk)
        except ImportError:
            pass

    tier = nums_cloud.memory_tier()
    mb = a.rows * 21 * 8 / 2**20
    print(f"{a.rows:,} x 21 float64 ({mb:.0f} MiB), 2 workers; load + persist {t_load:.2f} s; "
          f"memory tier {tier['budget'] / 2**20:.0f} MiB (holds {tier['bytes'] / 2**20:.0f}, "
          f"{tier['hits']} hits, {tier['misses']} misses, {tier['evicted']} evicted)")
    print(f"{'step':28} {'nums-cloud':>11} {'NumPy':>9} {'Dask':>9} {'x NumPy':>8} "
          f"{'x Dask':>7}")
    for name, t_nc, t_np, t_dk in rows:
        unit = (1e3, "ms") if "1,000" in name else (1, "s")
        f = lambda t: f"{t * unit[0]:8.3f}{unit[1]}" if unit[1] == "ms" else f"{t:9.3f}s"
        dk = f(t_dk) if t_dk is not None else ""
        rd = f"{t_nc / t_dk:7.2f}" if t_dk else ""
        print(f"{name:28} {f(t_nc):>11} {f(t_np):>9} {dk:>9} {t_nc / t_np:8.1f} {rd:>7}")
    if cv:
        print(f"{'cross_val_score(cv=3)':28} {cv[0]:10.3f}s {'':9} {'':9} "
              f"{'':8} (scikit-learn {cv[1]:.3f} s: x{cv[0] / cv[1]:.2f})")
    s.close()


if __name__ == "__main__":
    main()
