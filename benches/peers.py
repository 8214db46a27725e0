"""Peers benchmark (issue 10 item 3): five array workloads on NumPy, Dask and nums-cloud
(optionally Cubed) on the same machine, from the same Zarr inputs, in one run; prints
seconds and ratios side by side.

    bash scripts/bench_peers.sh [--size base|4x] [--store file|garage] [--repeat 3] [--cubed]

Rules of fairness (also in BENCHMARKS.md):
- Inputs are written ONCE, in nums-cloud's own encoding (Zarr v3, bytes + zstd), by a
  nums-cloud setup job whose `[outputs]` are Zarr arrays inside the store the benchmark
  jobs use, so nums-cloud reads them in place (no import). File store: they are kept in a
  cache folder and reused by later runs while the setup job is unchanged. Garage: the
  server is started fresh for the run, so the setup job runs once at the start.
- Every system reads those same Zarr arrays: nums-cloud jobs `load` them in place; Dask
  with `da.from_zarr` (one Dask chunk per Zarr chunk); NumPy reads them fully into memory
  with zarr-python and its time includes that read (the split is printed too); Cubed with
  `cubed.from_zarr`. On the file store all of them read the same files (from the page
  cache after the first pass, for every system alike).
- Dask: `distributed.LocalCluster(n_workers=2, threads_per_worker=1)` (distributed limits
  each worker's BLAS to one thread), started before timing; its start time is printed
  separately. A timed Dask run opens the arrays, builds the graph and computes every
  result of the workload in one `dask.compute` (shared inputs are read once per graph),
  ending with NumPy arrays in the client.
- nums-cloud: 2 workers, local backend, the same store; the whole `nums-cloud run`
  process is timed (it starts the function processes, plans, runs, and writes the
  results as .npy files for the caller); its `--stats` wall_seconds, function compute and
  store I/O seconds and store bytes read are printed too.
- NumPy and Dask use `einsum(..., optimize=True)` (Dask's default is False); NumPy's BLAS
  uses every core.
- Each system runs each workload `--repeat` times, interleaved (NumPy, Dask, nums-cloud,
  NumPy, ...); the best time is reported (the machine is shared; the best run is the one
  least disturbed). Before each run the benchmark waits (up to `--quiet-wait` s) until
  the machine is at least 85% idle, and prints how idle it was. Every run's result is checked against NumPy's with
  `np.testing.assert_allclose` (rtol 1e-8, atol 1e-8 x max|result|) before its time is
  kept: a wrong answer fails the benchmark (exit status 1, "WRONG" in the table).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import zarr

ROOT = Path(__file__).resolve().parent.parent


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# Inputs and workloads

# The input arrays of each size, as nums-cloud array definitions of the setup job. The 4x
# size has 4 times the data of each workload with the same block size (4 times the blocks).
SIZES = {
    "base": dict(n=2_000_000, d=32, xb=250_000, ti=256, tj=256, tk=256, tb=64, rank=32,
                 m=4096, mb=1024, u=8192, ub=1024),
    "4x": dict(n=8_000_000, d=32, xb=250_000, ti=512, tj=512, tk=256, tb=32, rank=32,
               m=8192, mb=1024, u=16384, ub=512),
}
# The base size's data in other blocks (issue 28: "for any reasonable block shape"): X in
# 4 row blocks of 128 MB, T in 8 blocks, A and B in 2048 x 2048 blocks, U and V in 2048-row
# blocks (128 MB each).
SIZES["blocks"] = dict(SIZES["base"], xb=500_000, tb=32, mb=2048, ub=2048)


def setup_arrays(s):
    """The setup job's [arrays] (stored inputs and helpers) and the names it stores."""
    arrays = f"""X = {{ random = "normal", shape = [{s['n']}, {s['d']}], block = [{s['xb']}, {s['d']}], seed = 1 }}
wt = {{ random = "normal", shape = [{s['d']}], seed = 2 }}
y = {{ expr = "X @ wt > 0", dtype = "float64", block = [{s['xb']}] }}
w0 = {{ random = "normal", shape = [{s['d']}], seed = 3 }}
w = "w0 * 0.25"
T = {{ random = "normal", shape = [{s['ti']}, {s['tj']}, {s['tk']}], block = [{s['tb']}, {s['tj']}, {s['tk']}], seed = 4 }}
KB = {{ random = "normal", shape = [{s['tj']}, {s['rank']}], seed = 5 }}
KC = {{ random = "normal", shape = [{s['tk']}, {s['rank']}], seed = 6 }}
A = {{ random = "normal", shape = [{s['m']}, {s['m']}], block = [{s['mb']}, {s['mb']}], seed = 7 }}
B = {{ random = "normal", shape = [{s['m']}, {s['m']}], block = [{s['mb']}, {s['mb']}], seed = 8 }}
U = {{ random = "normal", shape = [{s['u']}, {s['u']}], block = [{s['ub']}, {s['u']}], seed = 9 }}
V = {{ random = "normal", shape = [{s['u']}, {s['u']}], block = [{s['ub']}, {s['u']}], seed = 10 }}
"""
    return arrays, ["X", "y", "w", "T", "KB", "KC", "A", "B", "U", "V"]


def sigmoid(xp, z):
    return 1 / (1 + xp.exp(-z))


def newton(xp, a):
    X, y, w = a["X"], a["y"], a["w"]
    mu = sigmoid(xp, X @ w)
    return {"g": X.T @ (mu - y), "H": X.T @ (X * (mu * (1 - mu))[:, None])}


def mttkrp(xp, a):
    if hasattr(xp, "einsum"):
        return {"M": xp.einsum("ijk,jf,kf->if", a["T"], a["KB"], a["KC"], optimize=True)}
    # Cubed has no einsum: T contracted with KC over k, times KB, summed over j.
    tc = xp.tensordot(a["T"], a["KC"], axes=([2], [0]))
    return {"M": xp.sum(tc * a["KB"][None, :, :], axis=1)}


@dataclass
class Workload:
    key: str
    title: str
    inputs: list
    nums: str  # the nums-cloud job's arrays after the loads, and its [outputs]
    fn: object  # fn(xp, arrays) -> {output name: array}; the same code for every system


WORKLOADS = [
    Workload("newton", "logistic regression Newton step", ["X", "y", "w"],
             'mu = "sigmoid(X @ w)"\ng = "X.T @ (mu - y)"\n'
             'H = "X.T @ (X * (mu * (1 - mu))[:, None])"\n[outputs]\ng = "g.npy"\nH = "H.npy"\n',
             newton),
    Workload("gram", "X.T @ X", ["X"], 'G = "X.T @ X"\n[outputs]\nG = "G.npy"\n',
             lambda xp, a: {"G": a["X"].T @ a["X"]}),
    Workload("mttkrp", 'MTTKRP einsum("ijk,jf,kf->if")', ["T", "KB", "KC"],
             "M = 'einsum(\"ijk,jf,kf->if\", T, KB, KC)'\n[outputs]\nM = \"M.npy\"\n", mttkrp),
    Workload("matmul", "A @ B", ["A", "B"], 'C = "A @ B"\n[outputs]\nC = "C.npy"\n',
             lambda xp, a: {"C": a["A"] @ a["B"]}),
    Workload("mean", "mean(U * V, axis=0)", ["U", "V"],
             'm = "mean(U * V, axis=0)"\n[outputs]\nm = "m.npy"\n',
             lambda xp, a: {"m": xp.mean(a["U"] * a["V"], axis=0)}),
]


def size_label(key, s):
    def mb(b):
        return f"{b / 1e6:,.0f} MB"
    return {
        "newton": f"X {s['n']:,} x {s['d']} ({mb(s['n'] * s['d'] * 8)}, {s['n'] // s['xb']} row blocks)",
        "gram": f"X {s['n']:,} x {s['d']}",
        "mttkrp": f"T {s['ti']}x{s['tj']}x{s['tk']} ({mb(s['ti'] * s['tj'] * s['tk'] * 8)}, "
                  f"{s['ti'] // s['tb']} blocks), rank {s['rank']}",
        "matmul": f"{s['m']}^2 in {s['mb']}^2 blocks",
        "mean": f"2 x {s['u']}^2 ({s['u'] // s['ub']} row blocks each)",
    }[key]


# ---------------------------------------------------------------------------------------
# The store: where the inputs are, for nums-cloud (a URL) and for zarr-python (a store)

class Store:
    def __init__(self, kind, cache, size):
        self.kind = kind
        if kind == "file":
            self.dir = cache / f"store-{size}"
            self.root = f"file://{self.dir}"
            self.storage_toml = f'[storage]\nurl = "{self.root}"\n'
            self.storage_options = None
        else:
            env = os.environ
            missing = [k for k in ("NUMS_S3_ENDPOINT", "NUMS_S3_BUCKET", "AWS_ACCESS_KEY_ID",
                                   "AWS_SECRET_ACCESS_KEY") if k not in env]
            if missing:
                sys.exit(f"--store garage needs {', '.join(missing)} (scripts/bench_peers.sh sets them)")
            self.endpoint = env["NUMS_S3_ENDPOINT"]
            self.root = f"s3://{env['NUMS_S3_BUCKET']}/peers"
            self.storage_toml = f'[storage]\nurl = "{self.root}"\nendpoint = "{self.endpoint}"\n'
            self.storage_options = {
                "endpoint_url": self.endpoint, "key": env["AWS_ACCESS_KEY_ID"],
                "secret": env["AWS_SECRET_ACCESS_KEY"],
                "client_kwargs": {"region_name": env.get("AWS_REGION", "garage")},
                "config_kwargs": {"s3": {"addressing_style": "path"}},
            }
        self.prefix = f"peers-data-{size}"

    def url(self, name):
        return f"{self.root}/{self.prefix}/{name}"

    def zarr_store(self, name):
        """A read-only zarr-python store for one input array (what NumPy, Dask and Cubed open)."""
        if self.kind == "file":
            return zarr.storage.LocalStore(self.dir / self.prefix / name, read_only=True)
        return zarr.storage.FsspecStore.from_url(self.url(name), storage_options=self.storage_options,
                                                 read_only=True)

    def stored_bytes(self, name):
        """Bytes of the array as stored (compressed chunks and metadata)."""
        if self.kind == "file":
            return sum(p.stat().st_size for p in (self.dir / self.prefix / name).rglob("*") if p.is_file())
        import s3fs
        fs = s3fs.S3FileSystem(**{k: v for k, v in self.storage_options.items()})
        return fs.du(self.url(name)[len("s3://"):])


# ---------------------------------------------------------------------------------------
# Running nums-cloud

def dask_cluster():
    """A LocalCluster of 2 processes x 1 thread (the peers' Dask), and its client, ready."""
    from distributed import Client, LocalCluster
    cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = Client(cluster)
    client.wait_for_workers(2)
    return client, cluster


def nums_run(bin_, job_dir, name, text):
    """Run one job; the process's wall time and its --stats JSON."""
    job_dir.mkdir(parents=True, exist_ok=True)
    path = job_dir / f"{name}.toml"
    path.write_text(text)
    stats = job_dir / f"{name}.stats.json"
    t0 = time.perf_counter()
    p = subprocess.run([str(bin_), "run", str(path), "--quiet", "--stats", str(stats)],
                       capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"nums-cloud run {path} failed ({p.returncode}):\n{p.stderr[-3000:]}")
    return seconds, json.loads(stats.read_text())


def ensure_inputs(args, store, bin_, cache):
    """Write the inputs once with a nums-cloud setup job (file store: reuse them when the
    setup job is unchanged). Returns the setup job's seconds, or None if reused."""
    arrays, names = setup_arrays(SIZES[args.size])
    outputs = "".join(f'{n} = "{store.url(n)}"\n' for n in names)
    text = (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\n'
            f"[arrays]\n{arrays}[outputs]\n{outputs}")
    return write_inputs(store, bin_, cache, text, f"setup-{args.size}")


def write_inputs(store, bin_, cache, text, job):
    """Runs the setup job `text` (named `job`) unless, on the file store, the same job
    already wrote its outputs (a marker holds its text). The setup job's seconds, or None
    if reused. Shared by the peers, fit and linear-algebra benchmarks."""
    if store.kind == "file":
        marker = store.dir / f"{store.prefix}.toml"
        if marker.exists() and marker.read_text() == text:
            log(f"inputs: reusing {store.dir / store.prefix}")
            return None
        shutil.rmtree(store.dir / store.prefix, ignore_errors=True)
        marker.unlink(missing_ok=True)
    log(f"inputs: writing them with a nums-cloud setup job into {store.root}/{store.prefix}")
    seconds, _ = nums_run(bin_, cache / "jobs", job, text)
    if store.kind == "file":
        marker.write_text(text)
    return seconds


def nums_job(w, store, workers, memory_mb, size):
    loads = "".join(f'{n} = {{ load = "{store.url(n)}" }}\n' for n in w.inputs)
    return (f'name = "peers-{w.key}-{size}"\n{store.storage_toml}[compute]\nbackend = "local"\n'
            f"workers = {workers}\nmemory_mb = {memory_mb}\n[arrays]\n{loads}{w.nums}")


# ---------------------------------------------------------------------------------------
# The systems: each returns (seconds, {output: ndarray}, details)

def run_numpy(w, store):
    t0 = time.perf_counter()
    a = {n: zarr.open_array(store.zarr_store(n), mode="r")[...] for n in w.inputs}
    t1 = time.perf_counter()
    out = w.fn(np, a)
    t2 = time.perf_counter()
    return t2 - t0, out, {"read_s": t1 - t0, "compute_s": t2 - t1}


def run_dask(w, store, client):
    import dask
    import dask.array as da
    t0 = time.perf_counter()
    a = {n: da.from_zarr(zarr.open_array(store.zarr_store(n), mode="r")) for n in w.inputs}
    lazy = w.fn(da, a)
    values = dask.compute(*lazy.values())
    t1 = time.perf_counter()
    return t1 - t0, dict(zip(lazy, values)), {"chunks": {n: a[n].numblocks for n in w.inputs}}


def run_cubed(w, store, spec):
    import cubed
    t0 = time.perf_counter()
    a = {n: cubed.from_zarr(store.zarr_store(n), spec=spec) for n in w.inputs}
    lazy = w.fn(cubed, a)
    values = cubed.compute(*lazy.values())
    t1 = time.perf_counter()
    return t1 - t0, {k: np.asarray(v) for k, v in zip(lazy, values)}, {}


def run_nums(w, store, bin_, job_dir, args, input_bytes):
    d = job_dir / w.key
    shutil.rmtree(d, ignore_errors=True)
    seconds, stats = nums_run(bin_, d, f"peers-{w.key}", nums_job(w, store, 2, args.memory_mb, args.size))
    # An input the driver imported (copied into the job's prefix) instead of reading it in
    # place would make this a different benchmark: refuse it.
    if stats.get("driver_bytes_written", 0) > input_bytes / 2:
        raise RuntimeError(f"nums-cloud wrote {stats['driver_bytes_written']:,} bytes itself: its inputs were "
                           f"imported, not read in place (stale inputs? remove {store.root}/{store.prefix})")
    out = {p.stem: np.load(p) for p in sorted(d.glob("*.npy"))}
    stats = {k: v for k, v in stats.items() if k != "timeline"} | {"main_stage_s": main_stage_seconds(stats)}
    return seconds, out, stats


def main_stage_seconds(stats):
    """The main stage's span, from its first send to its last answer (what the cost
    model's `projected_main_seconds` projects)."""
    main = [i for i in stats.get("timeline", []) if i["stage"] == "main"]
    return max(i["end"] for i in main) - min(i["start"] for i in main) if main else None


def idle_fraction(seconds):
    """The machine's idle share of CPU time over the next `seconds` (Linux /proc/stat)."""
    def sample():
        with open("/proc/stat") as f:
            v = [int(x) for x in f.readline().split()[1:]]
        # idle + iowait + niced (work at nice 19 yields the cores to the benchmark), total
        return v[1] + v[3] + v[4], sum(v)
    try:
        i0, t0 = sample()
        time.sleep(seconds)
        i1, t1 = sample()
    except OSError:
        return None
    return (i1 - i0) / max(t1 - t0, 1)


def wait_quiet(max_wait):
    """Wait (up to max_wait s) until other processes leave the cores alone: the machine
    at least 85% idle over 2 s. Returns the last idle share measured."""
    deadline = time.monotonic() + max_wait
    while True:
        idle = idle_fraction(2.0)
        if idle is None or idle >= 0.85 or time.monotonic() >= deadline:
            return idle


def check(name, got, ref):
    """Raise AssertionError if got differs from NumPy's reference outputs."""
    if set(got) != set(ref):
        raise AssertionError(f"{name}: outputs {sorted(got)} != {sorted(ref)}")
    for k in ref:
        g, r = np.asarray(got[k]), np.asarray(ref[k])
        if g.shape != r.shape:
            raise AssertionError(f"{name}: {k} has shape {g.shape}, NumPy's {r.shape}")
        scale = float(np.max(np.abs(r))) if r.size else 1.0
        np.testing.assert_allclose(g, r, rtol=1e-8, atol=1e-8 * scale, err_msg=f"{name}: {k}")


# ---------------------------------------------------------------------------------------

def fmt(v, spec=".2f", missing="-"):
    return missing if v is None else format(v, spec)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="base")
    ap.add_argument("--store", choices=["file", "garage"], default="file")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each system per workload; the best is kept")
    ap.add_argument("--only", default=",".join(w.key for w in WORKLOADS), help="comma-separated workloads")
    ap.add_argument("--systems", default="dask,nums", help="comma-separated: dask,nums,cubed (NumPy always runs)")
    ap.add_argument("--cubed", action="store_true", help="also run Cubed (single-machine executor)")
    ap.add_argument("--memory-mb", type=int, default=2048, help="nums-cloud memory_mb per invocation")
    ap.add_argument("--nums", default=str(ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "peers"))
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--quiet-wait", type=float, default=120,
                    help="before each run wait up to this many seconds for the machine to be 85%% idle (0: no wait)")
    args = ap.parse_args()
    # NumPy always runs: its result is the reference every other system is checked against.
    systems = ["numpy"] + [x for x in args.systems.split(",") if x != "numpy"]
    if args.cubed and "cubed" not in systems:
        systems.append("cubed")
    if set(systems) - {"numpy", "dask", "nums", "cubed"}:
        sys.exit(f"--systems: unknown {sorted(set(systems) - {'numpy', 'dask', 'nums', 'cubed'})}")
    only = args.only.split(",")
    unknown = set(only) - {w.key for w in WORKLOADS}
    if unknown:
        sys.exit(f"--only: unknown workloads {sorted(unknown)}")
    workloads = [w for w in WORKLOADS if w.key in only]
    bin_ = Path(args.nums)
    if not bin_.is_file():
        sys.exit(f"{bin_} not found: cargo build --release -p nums-cloud")
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    store = Store(args.store, cache, args.size)
    job_dir = Path(tempfile.mkdtemp(prefix="peers-jobs-", dir=cache))
    s = SIZES[args.size]

    setup_s = ensure_inputs(args, store, bin_, cache)
    load_start = os.getloadavg()

    client = cluster = spec = None
    cluster_s = cubed_note = None
    if "dask" in systems:
        from distributed import Client, LocalCluster
        t0 = time.perf_counter()
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        client.wait_for_workers(2)
        # Warm the workers (imports) so the first timed run does not pay for them.
        client.run(lambda: __import__("zarr") and __import__("dask.array"))
        cluster_s = time.perf_counter() - t0
    if "cubed" in systems:
        try:
            import cubed
            spec = cubed.Spec(work_dir=str(job_dir / "cubed"), allowed_mem="4GB",
                              executor_name="processes", executor_options={"max_workers": 2})
        except Exception as e:  # optional peer: note why and go on without it
            cubed_note = f"Cubed skipped: {type(e).__name__}: {e}"
            systems.remove("cubed")

    results = []
    failed = False
    for w in workloads:
        log(f"\n== {w.key}: {w.title}, {size_label(w.key, s)}")
        input_bytes = sum(store.stored_bytes(n) for n in w.inputs)
        best = {}
        runs = {k: [] for k in systems}
        errors = {}
        ref = None
        for r in range(args.repeat):
            for sysname in systems:
                if sysname in errors or (sysname != "numpy" and ref is None):
                    continue
                idle = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
                try:
                    if sysname == "numpy":
                        sec, out, det = run_numpy(w, store)
                        if ref is None:
                            ref = out
                    elif sysname == "dask":
                        sec, out, det = run_dask(w, store, client)
                    elif sysname == "cubed":
                        sec, out, det = run_cubed(w, store, spec)
                    else:
                        sec, out, det = run_nums(w, store, bin_, job_dir, args, input_bytes)
                    check(sysname, out, ref)
                except AssertionError as e:
                    log(f"   {sysname}: WRONG ANSWER\n{e}")
                    errors[sysname] = "WRONG"
                    failed = True
                    continue
                except Exception as e:
                    log(f"   {sysname}: FAILED\n{traceback.format_exc()[-3000:]}")
                    errors[sysname] = "failed"
                    if sysname != "cubed":  # the optional peer may fail without failing the benchmark
                        failed = True
                    continue
                del out
                runs[sysname].append({"seconds": sec, "idle_before": idle, **det})
                log(f"   run {r + 1} {sysname:6s} {sec:8.2f} s" + (f"  (machine {idle:.0%} idle before)" if idle is not None else ""))
                if sysname not in best or sec < best[sysname]["seconds"]:
                    best[sysname] = {"seconds": sec, "idle_before": idle, **det}
        ref = None
        results.append({"workload": w.key, "title": w.title, "size": size_label(w.key, s),
                        "input_bytes": input_bytes, "best": best, "runs": runs, "errors": errors})

    if client is not None:
        client.close()
        cluster.close()
    shutil.rmtree(job_dir, ignore_errors=True)

    # ---- the tables
    def sec(res, k):
        return res["best"].get(k, {}).get("seconds")

    def cell(res, k):
        return res["errors"].get(k) or fmt(sec(res, k))

    def ratio(a, b):
        return f"{a / b:.2f}x" if a is not None and b else "-"

    print(f"\nPeers benchmark: size {args.size}, store {args.store}, best of {args.repeat} runs; "
          f"{os.cpu_count()} cores; load average {load_start[0]:.1f} at the start, "
          f"{os.getloadavg()[0]:.1f} at the end (other processes share the cores if above ~2)")
    if setup_s is not None:
        print(f"inputs written by the nums-cloud setup job in {setup_s:.1f} s")
    if cluster_s is not None:
        print(f"Dask LocalCluster(n_workers=2, threads_per_worker=1) started in {cluster_s:.2f} s (not timed below)")
    if cubed_note:
        print(cubed_note)
    idles = [r["idle_before"] for res in results for rs in res["runs"].values() for r in rs
             if r.get("idle_before") is not None]
    if idles:
        print(f"machine idle before each run (over 2 s; waited up to {args.quiet_wait:.0f} s for 85%): "
              f"min {min(idles):.0%}, median {sorted(idles)[len(idles) // 2]:.0%}")
    cub = "cubed" in systems
    print()
    print("| workload | size | NumPy s | Dask s | " + ("Cubed s | " if cub else "")
          + "nums-cloud s | nums/Dask | nums/NumPy | store read / input bytes |")
    print("|---|---|---|---|" + ("---|" if cub else "") + "---|---|---|---|")
    for res in results:
        n = res["best"].get("nums", {})
        readx = (n["s3_bytes_read"] / res["input_bytes"]) if n else None
        print(f"| {res['title']} | {res['size']} | {cell(res, 'numpy')} | {cell(res, 'dask')} | "
              + (f"{cell(res, 'cubed')} | " if cub else "")
              + f"{cell(res, 'nums')} | {ratio(sec(res, 'nums'), sec(res, 'dask'))} | "
              f"{ratio(sec(res, 'nums'), sec(res, 'numpy'))} | "
              + (f"{n['s3_bytes_read'] / 1e6:,.0f} / {res['input_bytes'] / 1e6:,.0f} MB = {readx:.2f}x |"
                 if n else "- |"))
    print("\nnums-cloud details (best run; from --stats) and NumPy's split:\n")
    print("| workload | process s | stats wall s | main stage s | projected s (cost model) | function s "
          "| compute s | store I/O s | invocations | store written MB | peak MiB | NumPy read s | NumPy compute s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for res in results:
        n, p = res["best"].get("nums"), res["best"].get("numpy", {})
        if n is None:
            continue
        proj = n.get("projected_main_seconds")
        print(f"| {res['workload']} | {n['seconds']:.2f} | {n['wall_seconds']:.2f} | {fmt(n.get('main_stage_s'))} | "
              f"{fmt(proj)}" + (f" ({proj / n['main_stage_s'] - 1:+.0%})" if proj and n.get('main_stage_s') else "")
              + f" | {n['function_seconds']:.2f} | "
              f"{n['compute_seconds']:.2f} | {n['io_seconds']:.2f} | {n['invocations']} | "
              f"{n['s3_bytes_written'] / 1e6:,.1f} | {n['peak_memory_bytes'] / 2**20:,.0f} | "
              f"{fmt(p.get('read_s'))} | {fmt(p.get('compute_s'))} |")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "size": args.size, "store": args.store, "repeat": args.repeat, "setup_seconds": setup_s,
            "dask_cluster_seconds": cluster_s, "cubed_note": cubed_note, "results": results}, indent=1))
    if failed:
        print("\nFAILED: a system gave a wrong answer or failed (see above); its time is not reported")
        sys.exit(1)


if __name__ == "__main__":
    main()
