"""Linear-algebra benchmark (issue 11): TSQR's R and lstsq of a tall-skinny X, and blocked
Cholesky and solve (blocked LU) of an SPD matrix, by nums-cloud (LSHS and naive), NumPy in memory and Dask, on
the same Zarr inputs in one run; prints seconds, ratios and nums-cloud's store traffic.

    bash scripts/bench_peers.sh --script benches/linalg_peers.py [--size base|mid|small] [--only solve]

Rules as benches/peers.py (whose store, runner and checks this reuses): inputs written
once by a nums-cloud setup job in nums-cloud's encoding and read in place by nums-cloud,
with `da.from_zarr` by Dask (LocalCluster, 2 processes x 1 thread), and whole by NumPy
(its time includes the read; NumPy's BLAS and LAPACK use both cores). Every result is
checked against NumPy's (R up to the sign of each row); a wrong answer fails the run.
"""
import argparse
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

SIZES = {
    # X about 4 GB (3.9M x 128 float64) in 31 row blocks; S 8192^2 in 1024^2 blocks.
    "base": dict(n=3_906_250, d=128, xb=125_000, m=8192, mb=1024),
    "small": dict(n=200_000, d=64, xb=25_000, m=1024, mb=256),
    # For quick iterations on the square solvers: S 4096^2 in 1024^2 blocks.
    "mid": dict(n=1_000_000, d=64, xb=125_000, m=4096, mb=1024),
}


def setup_text(store, s, names):
    """The setup job of the inputs `names` (of X, y, S) only: solve alone need not make X."""
    names = [n for n in ["X", "y", "S"] if n in names]
    outputs = "".join(f'{n} = "{store.url(n)}"\n' for n in names)
    arrays = ""
    if "X" in names or "y" in names:
        arrays += (f'X = {{ random = "normal", shape = [{s["n"]}, {s["d"]}], block = [{s["xb"]}, {s["d"]}], seed = 21 }}\n'
                   f'wt = {{ random = "normal", shape = [{s["d"]}], seed = 22 }}\n'
                   f'e = {{ random = "normal", shape = [{s["n"]}], block = [{s["xb"]}], seed = 23 }}\n'
                   f'y = {{ expr = "X @ wt + 0.1 * e", block = [{s["xb"]}] }}\n')
    if "S" in names:
        arrays += (f'G = {{ random = "normal", shape = [{s["m"]}, {s["m"]}], block = [{s["mb"]}, {s["mb"]}], seed = 24 }}\n'
                   f'S = {{ expr = "G @ G.T + {s["m"]} * eye({s["m"]})", block = [{s["mb"]}, {s["mb"]}] }}\n')
    return (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = 2048\n'
            f"[arrays]\n{arrays}[outputs]\n{outputs}")


WORK = {
    "qr": (["X"], "R = \"np.linalg.qr(X, mode='r')\"\n[outputs]\nR = \"R.npy\"\n"),
    "lstsq": (["X", "y"], 'b = "np.linalg.lstsq(X, y)[0]"\n[outputs]\nb = "b.npy"\n'),
    "cholesky": (["S"], 'L = "np.linalg.cholesky(S)"\n[outputs]\nL = "L.npy"\n'),
    # A general solve (blocked LU with partial pivoting) of 16 right-hand sides.
    "solve": (["S"], 'x = "np.linalg.solve(S, S[:, :16] + 1.0)"\n[outputs]\nx = "x.npy"\n'),
}


def numpy_fn(key, a):
    if key == "qr":
        return {"R": np.linalg.qr(a["X"], mode="r")}
    if key == "lstsq":
        return {"b": np.linalg.lstsq(a["X"], a["y"], rcond=None)[0]}
    if key == "solve":
        return {"x": np.linalg.solve(a["S"], a["S"][:, :16] + 1.0)}
    return {"L": np.linalg.cholesky(a["S"])}


def dask_fn(key, a):
    import dask.array as da
    if key == "qr":
        return {"R": da.linalg.tsqr(a["X"])[1]}
    if key == "lstsq":
        return {"b": da.linalg.lstsq(a["X"], a["y"])[0]}
    if key == "solve":
        return {"x": da.linalg.solve(a["S"], a["S"][:, :16] + 1.0)}
    return {"L": da.linalg.cholesky(a["S"], lower=True)}


def same(key, got, ref):
    if key == "qr":  # R is unique up to the sign of each row
        got = {"R": np.abs(got["R"])}
        ref = {"R": np.abs(ref["R"])}
    peers.check(key, got, ref)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="base")
    ap.add_argument("--only", default="qr,lstsq,cholesky,solve")
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--nums", default=str(peers.ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(peers.ROOT / ".cache" / "linalg"))
    ap.add_argument("--quiet-wait", type=float, default=120)
    args = ap.parse_args()
    s = SIZES[args.size]
    bin_ = Path(args.nums)
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    store = peers.Store("file", cache, args.size)
    needed = {n for key in args.only.split(",") for n in WORK[key][0]}
    peers.write_inputs(store, bin_, cache, setup_text(store, s, needed), f"linalg-setup-{args.size}")
    job_dir = Path(tempfile.mkdtemp(prefix="linalg-jobs-", dir=cache))

    client, cluster = peers.dask_cluster()

    rows, failed = [], False
    for key in args.only.split(","):
        inputs, nums_text = WORK[key]
        res = {}
        peers.log(f"== {key}")
        # NumPy first: its result is the reference.
        peers.wait_quiet(args.quiet_wait)
        t0 = time.perf_counter()
        a = {n: zarr.open_array(store.zarr_store(n), mode="r")[...] for n in inputs}
        t1 = time.perf_counter()
        ref = numpy_fn(key, a)
        res["numpy"] = (time.perf_counter() - t0, {"read_s": t1 - t0})
        del a
        peers.log(f"   numpy {res['numpy'][0]:.2f} s (read {t1 - t0:.2f} s)")
        for system in ["dask", "lshs", "naive"]:
            peers.wait_quiet(args.quiet_wait)
            try:
                if system == "dask":
                    import dask
                    t0 = time.perf_counter()
                    lazy = dask_fn(key, {n: __import__("dask.array").array.from_zarr(
                        zarr.open_array(store.zarr_store(n), mode="r")) for n in inputs})
                    got = dict(zip(lazy, dask.compute(*lazy.values())))
                    res[system] = (time.perf_counter() - t0, {})
                else:
                    loads = "".join(f'{n} = {{ load = "{store.url(n)}" }}\n' for n in inputs)
                    jt = (f'name = "linalg-{key}-{system}"\n{store.storage_toml}[compute]\nbackend = "local"\n'
                          f'workers = 2\nmemory_mb = {args.memory_mb}\nscheduler = "{system}"\n[arrays]\n'
                          f"{loads}{nums_text}")
                    d = job_dir / f"{key}-{system}"
                    sec, stats = peers.nums_run(bin_, d, "job", jt)
                    got = {p.stem: np.load(p) for p in d.glob("*.npy")}
                    res[system] = (sec, stats)
                same(key, got, ref)
                peers.log(f"   {system} {res[system][0]:.2f} s")
            except AssertionError as e:
                peers.log(f"   {system}: WRONG\n{e}")
                res[system] = ("WRONG", {})
                failed = True
            except Exception:
                peers.log(f"   {system}: FAILED\n{traceback.format_exc()[-3000:]}")
                res[system] = ("failed", {})
                failed = True
        rows.append((key, res))
    client.close()
    cluster.close()
    shutil.rmtree(job_dir, ignore_errors=True)

    def sec(v):
        return v[0] if isinstance(v[0], float) else None

    print(f"\nLinear-algebra benchmark, size {args.size}: X {s['n']:,} x {s['d']} "
          f"({s['n'] * s['d'] * 8 / 1e9:.1f} GB, {s['n'] // s['xb']} row blocks), "
          f"S {s['m']}^2 ({s['m'] // s['mb']}^2 blocks); 2 workers, memory_mb {args.memory_mb}\n")
    print("| workload | NumPy s (read s) | Dask s | nums-cloud LSHS s | naive s | LSHS/NumPy | LSHS/Dask "
          "| LSHS store read / written MB | naive store read / written MB |")
    print("|---|---|---|---|---|---|---|---|---|")
    for key, res in rows:
        n, d, l, v = (sec(res[k]) for k in ("numpy", "dask", "lshs", "naive"))

        def cell(k):
            x = res[k][0]
            return f"{x:.2f}" if isinstance(x, float) else x

        def traffic(k):
            st = res[k][1]
            return f"{st['s3_bytes_read'] / 1e6:,.0f} / {st['s3_bytes_written'] / 1e6:,.0f}" if "s3_bytes_read" in st else "-"
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"  # noqa: E731
        print(f"| {key} | {cell('numpy')} ({res['numpy'][1]['read_s']:.2f}) | {cell('dask')} | {cell('lshs')} | "
              f"{cell('naive')} | {ratio(l, n)} | {ratio(l, d)} | {traffic('lshs')} | {traffic('naive')} |")
    if failed:
        print("\nFAILED: a system gave a wrong answer or failed (see above)")
        sys.exit(1)


if __name__ == "__main__":
    main()
