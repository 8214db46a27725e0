"""Fit benchmark (issue 12): logistic regression fitted to convergence on one X in the
store, by nums-cloud (Newton with LSHS and with the naive scheduler, L-BFGS with LSHS),
Dask-ML (Newton and L-BFGS on a LocalCluster) and scikit-learn in memory; prints seconds,
store traffic and ratios side by side, in one run.

    bash scripts/bench_fit.sh [--rows 16000000] [--store file|garage]

Rules (as benches/peers.py, whose store and runner this reuses):
- X (rows x 32 float64; 4.1 GB at the default 16M rows) and y (labels drawn from a known
  logistic model) are written ONCE by a nums-cloud setup job as Zarr arrays in nums-cloud's
  encoding, and every system reads those same arrays: nums-cloud jobs `load` them in
  place, Dask-ML opens them with `da.from_zarr` (one chunk per block), scikit-learn reads
  them whole into memory with zarr-python (its time includes that read; the split is
  printed).
- The same problem for all: unpenalised in effect (C = 1e10; Dask-ML's Newton ignores the
  penalty), intercept fitted, tol 1e-8 where the solver takes one. Every system's
  coefficients are checked against scikit-learn's (relative 1e-4 of the largest
  coefficient); a wrong answer fails the benchmark.
- nums-cloud: 2 workers, local backend, memory_mb 2048; the whole `nums-cloud run` process
  is timed. Dask: LocalCluster(n_workers=2, threads_per_worker=1), started before timing.
- One run each (a fit is long); the machine is waited on to be 85% idle before each.
"""
import argparse
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import ROOT, Store, log, nums_run, wait_quiet, write_inputs  # noqa: E402

C = 1e10
D = 32


def setup_text(store, rows, block):
    names = ["X", "y"]
    outputs = "".join(f'{n} = "{store.url(n)}"\n' for n in names)
    return (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = 2048\n'
            f"[arrays]\n"
            f'X = {{ random = "normal", shape = [{rows}, {D}], block = [{block}, {D}], seed = 11 }}\n'
            f'wt = {{ random = "normal", shape = [{D}], seed = 12 }}\n'
            f'u = {{ random = "uniform", shape = [{rows}], block = [{block}], seed = 13 }}\n'
            f'y = {{ expr = "sigmoid(X @ (wt * 0.3) + 0.25) > u", dtype = "float64", block = [{block}] }}\n'
            f"[outputs]\n{outputs}")


def run_nums(store, bin_, job_dir, solver, scheduler, memory_mb):
    name = f"fit-{solver}-{scheduler}"
    d = job_dir / name
    shutil.rmtree(d, ignore_errors=True)
    text = (f'name = "{name}"\n{store.storage_toml}[compute]\nbackend = "local"\nworkers = 2\n'
            f'memory_mb = {memory_mb}\nscheduler = "{scheduler}"\n[arrays]\n'
            f'X = {{ load = "{store.url("X")}" }}\ny = {{ load = "{store.url("y")}" }}\n'
            f"w = \"logistic_regression(X, y, solver='{solver}', C={C:g}, tol=1e-8, max_iter=200)\"\n"
            f'[outputs]\nw = "w.npy"\n')
    sec, stats = nums_run(bin_, d, name, text)
    theta = np.load(d / "w.npy")
    fit = stats["fits"][0]
    passes = fit["passes"]
    return sec, theta, {
        "iterations": fit["n_iter"], "converged": fit["converged"], "passes": len(passes),
        "read_gb": stats["s3_bytes_read"] / 1e9, "written_mb": stats["s3_bytes_written"] / 1e6,
        "peak_intermediate_mb": stats["peak_intermediate_bytes"] / 1e6,
        "invocations": stats["invocations"], "compute_s": stats["compute_seconds"],
        "io_s": stats["io_seconds"]}


def run_dask(store, client, solver):
    import dask.array as da
    from dask_ml.linear_model import LogisticRegression
    t0 = time.perf_counter()
    X = da.from_zarr(zarr.open_array(store.zarr_store("X"), mode="r"))
    y = da.from_zarr(zarr.open_array(store.zarr_store("y"), mode="r"))
    m = LogisticRegression(solver=solver, C=C, tol=1e-8, max_iter=200).fit(X, y)
    sec = time.perf_counter() - t0
    return sec, np.append(np.ravel(m.coef_), m.intercept_), {"chunks": X.numblocks}


def read_all(store):
    t0 = time.perf_counter()
    X = zarr.open_array(store.zarr_store("X"), mode="r")[...]
    y = zarr.open_array(store.zarr_store("y"), mode="r")[...]
    return X, y, time.perf_counter() - t0


def run_sklearn(store, solver):
    from sklearn.linear_model import LogisticRegression
    X, y, read_s = read_all(store)
    t0 = time.perf_counter()
    m = LogisticRegression(solver=solver, C=C, tol=1e-8, max_iter=1000).fit(X, y)
    fit_s = time.perf_counter() - t0
    return read_s + fit_s, np.append(np.ravel(m.coef_), m.intercept_), {
        "read_s": read_s, "compute_s": fit_s, "iterations": int(np.max(m.n_iter_))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=16_000_000)
    ap.add_argument("--block", type=int, default=500_000, help="rows per block of X")
    ap.add_argument("--store", choices=["file", "garage"], default="file")
    ap.add_argument("--systems", default="sklearn,nums,dask")
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--nums", default=str(ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "fit"))
    ap.add_argument("--quiet-wait", type=float, default=120)
    args = ap.parse_args()
    systems = args.systems.split(",")
    bin_ = Path(args.nums)
    if not bin_.is_file():
        sys.exit(f"{bin_} not found: cargo build --release -p nums-cloud")
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    store = Store(args.store, cache, f"{args.rows}x{D}-{args.block}")
    job_dir = Path(tempfile.mkdtemp(prefix="fit-jobs-", dir=cache))
    setup_s = write_inputs(store, bin_, cache, setup_text(store, args.rows, args.block), "fit-setup")
    input_bytes = sum(store.stored_bytes(n) for n in ("X", "y"))

    runs = []  # (label, solver family, seconds, theta, details)
    client = cluster = None
    cluster_s = None
    plan = []
    if "sklearn" in systems:
        plan += [("scikit-learn lbfgs", lambda: run_sklearn(store, "lbfgs")),
                 ("scikit-learn newton-cholesky", lambda: run_sklearn(store, "newton-cholesky"))]
    if "nums" in systems:
        plan += [("nums-cloud newton lshs", lambda: run_nums(store, bin_, job_dir, "newton", "lshs", args.memory_mb)),
                 ("nums-cloud newton naive", lambda: run_nums(store, bin_, job_dir, "newton", "naive", args.memory_mb)),
                 ("nums-cloud lbfgs lshs", lambda: run_nums(store, bin_, job_dir, "lbfgs", "lshs", args.memory_mb))]
    if "dask" in systems:
        from distributed import Client, LocalCluster
        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        client.wait_for_workers(2)
        client.run(lambda: __import__("zarr") and __import__("dask.array") and __import__("dask_glm"))
        cluster_s = time.perf_counter() - t0
        plan += [("Dask-ML newton", lambda: run_dask(store, client, "newton")),
                 ("Dask-ML lbfgs", lambda: run_dask(store, client, "lbfgs"))]

    failed = False
    ref = None
    for label, fn in plan:
        idle = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
        log(f"== {label}" + (f" (machine {idle:.0%} idle before)" if idle is not None else ""))
        try:
            sec, theta, det = fn()
        except Exception:
            log(f"   FAILED\n{traceback.format_exc()[-3000:]}")
            runs.append((label, None, None, {"error": "failed"}))
            failed = True
            continue
        if ref is None:
            ref = theta  # scikit-learn's lbfgs when it runs, else the first system's
        err = float(np.max(np.abs(theta - ref)) / np.max(np.abs(ref)))
        det["rel_err"] = err
        if err > 1e-4:
            log(f"   WRONG: coefficients differ from the reference by {err:.2e} (relative)")
            det["error"] = "WRONG"
            failed = True
        log(f"   {sec:.1f} s {det}")
        runs.append((label, sec, theta, det))

    if client is not None:
        client.close()
        cluster.close()
    shutil.rmtree(job_dir, ignore_errors=True)

    secs = {label: sec for label, sec, _, det in runs if sec is not None and "error" not in det}
    base = secs.get("nums-cloud newton lshs")
    print(f"\nFit benchmark: X {args.rows:,} x {D} float64 ({args.rows * D * 8 / 1e9:.1f} GB, blocks of "
          f"{args.block:,} rows), store {args.store} ({input_bytes / 1e9:.2f} GB stored); {os.cpu_count()} cores")
    if setup_s is not None:
        print(f"inputs written by the nums-cloud setup job in {setup_s:.1f} s")
    if cluster_s is not None:
        print(f"Dask LocalCluster(n_workers=2, threads_per_worker=1) started in {cluster_s:.2f} s (not timed)")
    print("\n| system | seconds | / nums-cloud newton lshs | iterations | store read GB | store written MB "
          "| peak intermediate MB | max rel. coef. diff |")
    print("|---|---|---|---|---|---|---|---|")
    for label, sec, _, det in runs:
        if sec is None or "error" in det:
            print(f"| {label} | {det.get('error', 'failed')} | | | | | | |")
            continue
        cells = [label, f"{sec:.1f}", f"{sec / base:.2f}x" if base else "-", str(det.get("iterations", "-"))]
        if "read_gb" in det:
            cells += [f"{det['read_gb']:.1f}", f"{det['written_mb']:.1f}", f"{det['peak_intermediate_mb']:.1f}"]
        else:
            cells += ["-", "-", "-"]
        cells.append(f"{det['rel_err']:.1e}")
        print("| " + " | ".join(cells) + " |")
    for label, sec, _, det in runs:
        if "read_s" in det and sec is not None:
            print(f"\n{label}: read {det['read_s']:.1f} s + fit {det['compute_s']:.1f} s")
    if failed:
        print("\nFAILED: a system gave a wrong answer or failed (see above)")
        sys.exit(1)


if __name__ == "__main__":
    main()
