"""Small-op latency from Python (issue 25, item 4): what an interactive user waits for.

    pip install ./python                      # a release build of the package
    python benches/python_latency.py [--storage file:///tmp/nums-latency] [--n 1000]

Measures, on one session (2 workers, 2048 MB) of the file store:
- building an expression: microseconds per operation (``y = y + 1.0``, 10,000 times;
  no job text, no files: each operation adds its nodes to the session's graph);
- a 1,000-element elementwise operation computed end to end (``(x * k).get()``, ``x``
  computed before, a new ``k`` each time): in this process (the default for small work),
  the same in a session that holds 20,000 other operations (a compute should cost what it
  computes, not the session's graph), and on the local function processes
  (``in_process_mb=0``), median and 90th percentile of 200 (50 on the processes);
- the same with NumPy, and with Dask (``da.from_array(x, chunks=n) * k``, threaded
  scheduler) when Dask is installed, for reference.
"""
import argparse
import statistics
import tempfile
import time


def percentiles(ts):
    ts = sorted(ts)
    return statistics.median(ts), ts[int(0.9 * (len(ts) - 1))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--storage", default=None)
    ap.add_argument("--n", type=int, default=1000)
    a = ap.parse_args()

    import numpy as np

    import nums_cloud
    import nums_cloud.numpy as nps

    storage = a.storage or f"file://{tempfile.mkdtemp(prefix='nums-latency-')}"
    rows = []

    nums_cloud.init(storage=storage, workers=2, memory_mb=2048, progress=False)
    x = nps.arange(float(a.n))
    x.get()
    t = time.perf_counter()
    y = x
    for _ in range(10_000):
        y = y + 1.0
    build_us = (time.perf_counter() - t) / 10_000 * 1e6
    print(f"building: {build_us:.1f} µs per operation")

    for where, mb, reps, grow in (("in this process", None, 200, 0),
                                  ("in this process, 20,000 other operations in the session", None, 200, 20_000),
                                  ("local function processes", 0, 50, 0)):
        s = nums_cloud.init(storage=storage, workers=2, memory_mb=2048, progress=False,
                            in_process_mb=mb)
        x = nps.arange(float(a.n))
        x.get()
        y = nps.arange(10.0)
        for _ in range(grow):
            y = y + 1.0  # nodes of the session's graph the computes below do not need
        (x * 0.5).get()  # the first compute starts the function processes
        assert nums_cloud.explain(x * 2.0).place == ("in-process" if mb is None else "local")
        ts = []
        for k in range(reps):
            z = x * float(k)
            t = time.perf_counter()
            z.get()
            ts.append(time.perf_counter() - t)
        med, p90 = percentiles(ts)
        rows.append((f"nums-cloud, {where}", med, p90))
        s.close()

    v = np.arange(float(a.n))
    ts = []
    for k in range(200):
        t = time.perf_counter()
        _ = v * float(k)
        ts.append(time.perf_counter() - t)
    rows.append(("NumPy", *percentiles(ts)))
    try:
        import dask
        import dask.array as da

        d = da.from_array(v, chunks=a.n)
        ts = []
        with dask.config.set(scheduler="threads"):
            for k in range(200):
                z = d * float(k)
                t = time.perf_counter()
                z.compute()
                ts.append(time.perf_counter() - t)
        rows.append((f"Dask {dask.__version__} (threads)", *percentiles(ts)))
    except ImportError:
        print("(Dask is not installed: its row is left out)")

    numpy_med = next(med for name, med, _ in rows if name == "NumPy")
    print(f"\n{a.n:,}-element elementwise operation, computed end to end:\n")
    print("| system | median ms | p90 ms | median / NumPy's |")
    print("|---|---|---|---|")
    for name, med, p90 in rows:
        print(f"| {name} | {med * 1e3:.3f} | {p90 * 1e3:.3f} | {med / numpy_med:,.0f} |")
    print(f"\nbuilding an expression: {build_us:.1f} µs per operation")


if __name__ == "__main__":
    main()
