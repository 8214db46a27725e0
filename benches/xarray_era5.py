"""xarray ERA5-like benchmark (issue 44): climatology, anomalies and a rechunk of a
4-variable time x lat x lon dataset on xarray over NumPy, Dask, Cubed (cubed-xarray) and
nums-cloud (its chunk manager, nums_cloud.xarray), side by side in one run.

    PYTHONPATH=python .cache/peers-venv/bin/python benches/xarray_era5.py \\
        [--size small|base] [--repeat 3] [--systems numpy,dask,cubed,nums] [--only clim,anom,rechunk]

The dataset: four float32 variables (t2m, msl, u10, v10: a seasonal and latitudinal
cycle plus noise), 6-hourly, `small` = 1 year on a 2.5 degree grid (245 MB), `base` = 2
years on a 1 degree grid (3.0 GB). It is written ONCE with zarr-python as a Zarr v3
store (bytes + zstd, zarr's default codecs; dimension names and CF time attributes, as
xarray writes them) in time-contiguous chunks (124 steps = one month, all latitudes, a
quarter of the longitudes) under .cache/era5/ and reused by later runs while its
description is unchanged.

The workloads (the same xarray code for every system; only how the store is opened
differs):
- clim: `ds.groupby("time.month").mean()`, computed to memory.
- anom: `ds.groupby("time.month") - clim` (clim re-chunked to one chunk along month, as
  docs/guide.md advises for nums-cloud; done for every chunked system alike), written to
  a Zarr v3 store in the input's chunks.
- rechunk: `ds.chunk(time=-1, lat=..., lon=...)` (space-contiguous) written to a Zarr v3
  store in those chunks. On nums-cloud this is the chunk manager's `rechunk`, the
  engine's `block`: each output block gathers the input blocks it overlaps, and only
  where that would pass a quarter of `memory_mb` (since merge-prog's 1f00442) goes
  through an intermediate grid (rechunker's two-stage plan). At `memory_mb` 2048 both
  sizes stay direct (an output block overlaps 12 input blocks of 1.3 MB small, 24 of
  8 MB base). Dask (distributed) plans it as a P2P shuffle; Cubed's is multistage,
  bounded by `allowed_mem`.

Rules of fairness (also in BENCHMARKS.md):
- Every system opens the same store with `xr.open_zarr(..., chunks={})` (the store's own
  chunks): Dask arrays, Cubed arrays (`chunked_array_type="cubed"`), nums-cloud arrays
  (`chunked_array_type="nums-cloud"`: its functions read the Zarr chunks in place). NumPy:
  `xr.open_zarr(..., chunks=None).load()`, and its time includes that read. On the file
  store every system reads the same files, from the page cache after the first run.
- flox is not installed in the benchmark's venv: every system runs xarray's own groupby
  (flox would take over Dask's and Cubed's, and compute nums-cloud's in the driver).
- Each run is a fresh child process (no system keeps blocks from an earlier run in
  memory: not Dask's workers, not nums-cloud's memory tier). Setting a system up is not
  timed and is printed apart: Dask's `LocalCluster(n_workers=2, threads_per_worker=1)`
  started and its workers' imports warmed; nums-cloud's session
  (`nums_cloud.init(workers=2, memory_mb=...)`) with its 2 function processes started by
  a small compute. Cubed uses its `processes` executor with 2 workers, which starts its
  processes inside each compute (so Cubed's times include that). NumPy is single process
  (its reductions are single-threaded).
- Timed: opening the store, building the xarray graph, computing, and writing the
  results (to memory for clim, to Zarr for anom and rechunk).
- Peak memory: the sum of the resident set sizes (RSS) of the child's process tree (the
  child, Dask's nanny and worker processes, Cubed's executor processes, nums-cloud's
  function processes), sampled with psutil every 0.1 s during the timed part, the largest
  sum kept. Shared pages (the libraries every process maps) count once per process.
- Bytes read: the tree's `read_chars` (Linux `rchar`: bytes returned by read system calls,
  from the page cache or the disk) over the timed part, sampled with the memory (a
  process that ends between samples loses its last 0.1 s), beside the input store's size;
  for nums-cloud also its session's `counts()["bytes_read"]` (what its functions read
  from the store). `rchar` also counts what a process reads that is not the store
  (Python modules a worker imports late, /proc).
- Each system runs each workload `--repeat` times, interleaved; the best time is kept
  with that run's memory and bytes. Before each run the benchmark waits (up to
  `--quiet-wait` s) until the machine is at least 85% idle (benches/peers.py's rule).
- Every run's result is checked against the reference (NumPy's first run, or Dask's when
  NumPy is not among the systems) before its time is kept: clim and anom with
  `np.testing.assert_allclose(rtol=1e-5, atol=1e-5 x max|ref|)` (float32 sums in other
  orders; for anom max|input|, as an anomaly's rounding error is its climatology's), the
  rechunked store equal to the input exactly. A wrong answer fails the
  benchmark (exit 1, "WRONG" in the table).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from peers import wait_quiet  # noqa: E402  (the peers benchmark's idle wait)

VARS = ("t2m", "msl", "u10", "v10")
# years of 6-hourly steps, grid spacing in degrees; the space-contiguous chunks of rechunk
SIZES = {
    "small": dict(years=1, deg=2.5, rechunk=(8, 36)),
    "base": dict(years=2, deg=1.0, rechunk=(16, 45)),
}
WORKLOADS = {
    "clim": "climatology: groupby('time.month').mean()",
    "anom": "anomalies: groupby('time.month') - clim, to Zarr",
    "rechunk": "rechunk time-contiguous -> space-contiguous, to Zarr",
}
SYSTEMS = ("numpy", "dask", "cubed", "nums")


def log(*a):
    print(*a, file=sys.stderr, flush=True)


def geometry(size):
    s = SIZES[size]
    nlat = int(round(180 / s["deg"])) + 1
    nlon = int(round(360 / s["deg"]))
    nt = int(round(365.25 * s["years"])) * 4
    return dict(nt=nt, nlat=nlat, nlon=nlon, chunks=(124, nlat, nlon // 4),
                rechunk=(nt,) + s["rechunk"])


# ---------------------------------------------------------------------------------------
# The dataset, written once

def ensure_dataset(size, cache):
    """The Zarr v3 store of `size` under `cache` (written unless a marker says the same
    description wrote it). Returns (path, seconds to write or None if reused)."""
    import zarr

    g = geometry(size)
    path = cache / f"era5-{size}.zarr"
    desc = json.dumps({"vars": VARS, **g, "seed": 44, "version": 1}, sort_keys=True)
    marker = cache / f"era5-{size}.json"
    if path.exists() and marker.exists() and marker.read_text() == desc:
        log(f"dataset: reusing {path}")
        return path, None
    log(f"dataset: writing {path} ({stored_size(g) / 1e9:.2f} GB of float32)")
    t0 = time.perf_counter()
    shutil.rmtree(path, ignore_errors=True)
    marker.unlink(missing_ok=True)
    nt, nlat, nlon = g["nt"], g["nlat"], g["nlon"]
    root = zarr.open_group(path, mode="w", zarr_format=3)
    lat = np.linspace(90, -90, nlat)
    lon = np.arange(nlon) * (360 / nlon)
    coords = {
        "time": (np.arange(nt, dtype="int64") * 6, ("time",),
                 {"units": "hours since 2000-01-01", "calendar": "proleptic_gregorian"}),
        "lat": (lat, ("lat",), {"units": "degrees_north"}),
        "lon": (lon, ("lon",), {"units": "degrees_east"}),
    }
    for name, (values, dims, attrs) in coords.items():
        a = root.create_array(name, shape=values.shape, dtype=values.dtype,
                              chunks=values.shape, dimension_names=dims, attributes=attrs)
        a[...] = values
    arrays = {v: root.create_array(v, shape=(nt, nlat, nlon), dtype="float32",
                                   chunks=g["chunks"], dimension_names=("time", "lat", "lon"))
              for v in VARS}
    rng = np.random.default_rng(44)
    coslat = np.cos(np.deg2rad(lat))[:, None]
    wave = np.sin(np.deg2rad(lon) * 3)[None, :]
    base = {"t2m": (250 + 40 * coslat + 2 * wave, 8 * (1 - coslat) + 2, 3.0),
            "msl": (101325 - 800 * coslat + 300 * wave, 600.0, 400.0),
            "u10": (8 * np.sin(np.deg2rad(2 * lat))[:, None] + 0 * wave, 2.0, 4.0),
            "v10": (0.5 * wave + 0 * coslat, 1.0, 3.0)}
    step = g["chunks"][0]
    for t0_ in range(0, nt, step):
        t1_ = min(t0_ + step, nt)
        phase = 2 * np.pi * (np.arange(t0_, t1_) / 4 % 365.25) / 365.25
        season = np.cos(phase)[:, None, None]
        for v in VARS:
            mean, amp, noise = base[v]
            x = mean[None] + amp * season + noise * rng.standard_normal(
                (t1_ - t0_, nlat, nlon), dtype=np.float32)
            arrays[v][t0_:t1_] = x.astype(np.float32)
    marker.write_text(desc)
    return path, time.perf_counter() - t0


def stored_size(g):
    return len(VARS) * g["nt"] * g["nlat"] * g["nlon"] * 4


def dir_bytes(path):
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# ---------------------------------------------------------------------------------------
# One run, in a child process: set the system up, run one workload timed, report JSON

class Sampler:
    """The child's process tree, sampled every `every` s: the largest sum of RSS, and
    each process' last `read_chars`/`write_chars` (for the bytes read and written)."""

    def __init__(self, every=0.1):
        import psutil

        self.psutil, self.every = psutil, every
        self.me = psutil.Process()
        self.first, self.last = {}, {}
        self.peak = 0
        self._stop = threading.Event()
        self._sample(first=True)
        self._t = threading.Thread(target=self._loop, daemon=True)
        self._t.start()

    def _sample(self, first=False):
        rss = 0
        try:
            procs = [self.me] + self.me.children(recursive=True)
        except self.psutil.Error:
            return
        for p in procs:
            try:
                with p.oneshot():
                    m = p.memory_info().rss
                    io = p.io_counters()
            except self.psutil.Error:
                continue
            rss += m
            key = (p.pid, p.create_time())
            now = (io.read_chars, io.write_chars)
            if first:
                self.first[key] = now
            self.last[key] = now
        self.peak = max(self.peak, rss)

    def _loop(self):
        while not self._stop.wait(self.every):
            self._sample()

    def stop(self):
        self._stop.set()
        self._t.join()
        self._sample()
        read = sum(v[0] - self.first.get(k, (0, 0))[0] for k, v in self.last.items())
        written = sum(v[1] - self.first.get(k, (0, 0))[1] for k, v in self.last.items())
        return {"peak_rss": self.peak, "read_chars": read, "write_chars": written}


def child(args):
    """`--child SYSTEM WORKLOAD`: one timed run; prints one JSON line on stdout."""
    import xarray as xr

    system, workload = args.child
    src = Path(args.store)
    out = Path(args.out)
    g = geometry(args.size)
    setup = {}
    t0 = time.perf_counter()
    open_kw = dict(consolidated=False)
    # xarray's .chunk() takes the default chunk manager (Dask's) unless told: name each.
    chunk_kw = {}
    session = client = cluster = None
    if system == "dask":
        from distributed import Client, LocalCluster

        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        client.wait_for_workers(2)
        client.run(lambda: __import__("xarray") and __import__("zarr") and __import__("dask.array"))
        open_kw.update(chunks={})
        chunk_kw = dict(chunked_array_type="dask")
        setup["note"] = "LocalCluster(n_workers=2, threads_per_worker=1)"
    elif system == "cubed":
        import cubed
        import cubed_xarray  # noqa: F401

        spec = cubed.Spec(work_dir=str(out / "cubed-work"), allowed_mem=args.cubed_mem,
                          executor_name="processes", executor_options={"max_workers": 2})
        chunk_kw = dict(chunked_array_type="cubed", from_array_kwargs={"spec": spec})
        open_kw.update(chunks={}, **chunk_kw)
        setup["note"] = f"processes executor, 2 workers, allowed_mem {args.cubed_mem}"
    elif system == "nums":
        import nums_cloud
        import nums_cloud.numpy as nps
        import nums_cloud.xarray  # noqa: F401  (registers "nums-cloud")

        extra = {} if args.nums_in_process_mb is None else {"in_process_mb": args.nums_in_process_mb}
        nums_cloud.init(storage=str(Path(args.cache) / "nums-store"), workers=2,
                        memory_mb=args.memory_mb, progress=False, **extra)
        session = nums_cloud.session()
        # A compute over 16 MiB goes to the function processes: starts them (not timed).
        float(nps.ones((4096, 1024)).sum())
        chunk_kw = dict(chunked_array_type="nums-cloud")
        open_kw.update(chunks={}, **chunk_kw)
        st = session.settings()
        setup["note"] = (f"workers=2, memory_mb={args.memory_mb}, backend {st['backend']}, "
                         f"in_process_bytes {st['in_process_bytes']:,}, memory_tier_bytes "
                         f"{st['memory_tier_bytes']:,}")
    setup["seconds"] = time.perf_counter() - t0

    counts0 = session.counts() if session is not None else None
    sampler = Sampler()
    t0 = time.perf_counter()
    if system == "numpy":
        ds = xr.open_zarr(src, chunks=None, **open_kw).load()
    else:
        ds = xr.open_zarr(src, **open_kw)
    if workload == "clim":
        clim = ds.groupby("time.month").mean().compute()
        for v in VARS:
            np.save(out / f"{v}.npy", clim[v].values)
    elif workload == "anom":
        clim = ds.groupby("time.month").mean()
        if system != "numpy":
            clim = clim.chunk(month=-1, **chunk_kw)
        anom = ds.groupby("time.month") - clim
        if system != "numpy":
            # Written in the input's chunks: Dask's and Cubed's anomalies come out in
            # others (the groupby's indexing), which to_zarr refuses against them.
            anom = anom.chunk(dict(zip(("time", "lat", "lon"), g["chunks"])), **chunk_kw)
        backed(anom, system)
        write_zarr(anom, out / "anom.zarr", g["chunks"])
    else:
        if system == "numpy":
            re = ds
        else:
            re = ds.chunk(dict(zip(("time", "lat", "lon"), g["rechunk"])), **chunk_kw)
        backed(re, system)
        write_zarr(re, out / "rechunk.zarr", g["rechunk"])
    seconds = time.perf_counter() - t0
    res = {"seconds": seconds, "setup": setup, **sampler.stop()}
    if session is not None:
        c = session.counts()
        res["nums"] = {k: c[k] - counts0[k] for k in c}
    if client is not None:
        client.close()
        cluster.close()
    print(json.dumps(res), flush=True)


def backed(ds, system):
    """Refuses a dataset whose variables are not `system`'s arrays (a step that fell back
    to another chunk manager, or to NumPy, would measure something else)."""
    want = {"numpy": "numpy", "dask": "dask", "cubed": "cubed", "nums": "nums_cloud"}[system]
    for v in VARS:
        mod = type(ds[v].data).__module__.split(".")[0]
        if mod != want:
            raise TypeError(f"{system}: variable {v} is a {type(ds[v].data).__module__}."
                            f"{type(ds[v].data).__name__}, not a {want} array")


def write_zarr(ds, path, chunks):
    """`ds`'s data variables to a Zarr v3 store at `path` in `chunks` (the source's
    encoding dropped, so that only these chunks apply)."""
    ds = ds.drop_vars([c for c in ds.coords if c not in ds.dims])
    for v in ds.variables.values():
        v.encoding = {}
    enc = {v: {"chunks": chunks} for v in VARS}
    ds.to_zarr(path, mode="w", zarr_format=3, consolidated=False, encoding=enc)


# ---------------------------------------------------------------------------------------
# Checking a run's result against the reference

def check(workload, got, ref, src, size):
    """Raise AssertionError if run folder `got` differs from the reference `ref`."""
    import zarr

    if workload == "clim":
        for v in VARS:
            g, r = np.load(got / f"{v}.npy"), np.load(ref / f"{v}.npy")
            close(g, r, f"clim {v}")
        return
    if workload == "anom":
        a, b = zarr.open_group(got / "anom.zarr", mode="r"), zarr.open_group(ref / "anom.zarr", mode="r")
        s = zarr.open_group(src, mode="r")
        for v in VARS:
            x, y = a[v], b[v]
            if x.shape != y.shape:
                raise AssertionError(f"anom {v}: shape {x.shape}, the reference's {y.shape}")
            # An anomaly cancels the mean: its rounding error is the climatology's, relative
            # to the input's magnitude (t2m ~ 290), not to the anomaly's.
            scale = 0.0
            step = y.chunks[0]
            for t in range(0, y.shape[0], step):
                scale = max(scale, float(np.abs(s[v][t:t + step]).max()))
            for t in range(0, y.shape[0], step):
                close(x[t:t + step], y[t:t + step], f"anom {v} steps {t}:{t + step}", scale)
        return
    a, s = zarr.open_group(got / "rechunk.zarr", mode="r"), zarr.open_group(src, mode="r")
    want = geometry(size)["rechunk"]
    for v in VARS:
        x, y = a[v], s[v]
        if x.shape != y.shape or tuple(x.chunks) != want:
            raise AssertionError(f"rechunk {v}: shape {x.shape} chunks {x.chunks}; want "
                                 f"{y.shape} in {want}")
        step = want[1]
        for i in range(0, y.shape[1], step):
            if not np.array_equal(x[:, i:i + step], y[:, i:i + step]):
                raise AssertionError(f"rechunk {v}: lat {i}:{i + step} differs from the input")


def close(g, r, what, scale=None):
    g, r = np.asarray(g), np.asarray(r)
    if g.shape != r.shape:
        raise AssertionError(f"{what}: shape {g.shape}, the reference's {r.shape}")
    scale = float(np.abs(r).max()) if scale is None else scale
    np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5 * scale, err_msg=what)


# ---------------------------------------------------------------------------------------

def run_child(args, system, workload, out):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "python"), env.get("PYTHONPATH")]))
    cmd = [sys.executable, __file__, "--child", system, workload, "--size", args.size,
           "--store", str(args.store_path), "--out", str(out), "--cache", str(args.cache),
           "--memory-mb", str(args.memory_mb), "--cubed-mem", args.cubed_mem]
    if args.nums_in_process_mb is not None:
        cmd += ["--nums-in-process-mb", str(args.nums_in_process_mb)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(f"{system} {workload} failed ({p.returncode}):\n{p.stderr[-4000:]}")
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="small")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each system per workload; the best is kept")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma-separated: numpy,dask,cubed,nums (the reference: numpy, else dask)")
    ap.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    ap.add_argument("--memory-mb", type=int, default=2048, help="nums-cloud memory_mb per invocation")
    ap.add_argument("--cubed-mem", default="2GB", help="Cubed's allowed_mem per task")
    ap.add_argument("--nums-in-process-mb", type=float,
                    help="nums-cloud's in_process_mb (default: the engine's; 0 sends every compute "
                         "to the function processes)")
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "era5"))
    ap.add_argument("--timeout", type=float, default=3600, help="seconds one run may take")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--quiet-wait", type=float, default=120,
                    help="before each run wait up to this many seconds for the machine to be 85%% idle (0: no wait)")
    ap.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--store", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        return child(args)

    systems = [s for s in args.systems.split(",") if s]
    if set(systems) - set(SYSTEMS):
        sys.exit(f"--systems: unknown {sorted(set(systems) - set(SYSTEMS))}")
    systems = [s for s in SYSTEMS if s in systems]  # the reference runs first
    ref_system = "numpy" if "numpy" in systems else "dask" if "dask" in systems else None
    if ref_system is None:
        sys.exit("--systems: numpy or dask is needed as the reference")
    workloads = [w for w in args.only.split(",") if w]
    if set(workloads) - set(WORKLOADS):
        sys.exit(f"--only: unknown workloads {sorted(set(workloads) - set(WORKLOADS))}")
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    args.cache = cache
    args.store_path, write_s = ensure_dataset(args.size, cache)
    input_bytes = dir_bytes(args.store_path)
    g = geometry(args.size)
    load_start = os.getloadavg()
    runs_dir = Path(tempfile.mkdtemp(prefix=f"runs-{args.size}-", dir=cache))

    results, failed = [], False
    for w in workloads:
        log(f"\n== {w}: {WORKLOADS[w]} ({args.size}: {g['nt']} x {g['nlat']} x {g['nlon']} "
            f"x {len(VARS)} float32, chunks {g['chunks']})")
        ref = None
        best, runs, errors = {}, {s: [] for s in systems}, {}
        for r in range(args.repeat):
            for s in systems:
                if s in errors or (s != ref_system and ref is None):
                    continue
                out = runs_dir / f"{w}-{s}-{r}"
                out.mkdir()
                idle = wait_quiet(args.quiet_wait) if args.quiet_wait > 0 else None
                try:
                    res = run_child(args, s, w, out)
                    if ref is None:
                        ref = out
                    else:
                        check(w, out, ref, args.store_path, args.size)
                except AssertionError as e:
                    log(f"   {s}: WRONG ANSWER\n{str(e)[-3000:]}")
                    errors[s], failed = "WRONG", True
                    continue
                except Exception as e:
                    log(f"   {s}: FAILED\n{str(e)[-4000:] or traceback.format_exc()[-3000:]}")
                    errors[s] = "failed"
                    failed = failed or s != "cubed"  # the optional peer may fail alone
                    continue
                finally:
                    if out != ref:
                        shutil.rmtree(out, ignore_errors=True)
                res["idle_before"] = idle
                runs[s].append(res)
                log(f"   run {r + 1} {s:6s} {res['seconds']:8.2f} s  peak {res['peak_rss'] / 2**20:7,.0f} MiB"
                    f"  read {res['read_chars'] / 1e6:9,.1f} MB"
                    + (f"  (machine {idle:.0%} idle before)" if idle is not None else ""))
                if s not in best or res["seconds"] < best[s]["seconds"]:
                    best[s] = res
        if ref is not None:
            shutil.rmtree(ref, ignore_errors=True)
        results.append({"workload": w, "best": best, "runs": runs, "errors": errors})
    shutil.rmtree(runs_dir, ignore_errors=True)
    report(args, systems, ref_system, results, g, input_bytes, write_s, load_start)
    if args.json:
        Path(args.json).write_text(json.dumps({
            "size": args.size, "geometry": g, "input_bytes": input_bytes, "repeat": args.repeat,
            "systems": systems, "reference": ref_system, "results": results}, indent=1))
    if failed:
        print("\nFAILED: a system gave a wrong answer or failed (see above); its time is not reported")
        sys.exit(1)


def report(args, systems, ref_system, results, g, input_bytes, write_s, load_start):
    names = {"numpy": "NumPy", "dask": "Dask", "cubed": "Cubed", "nums": "nums-cloud"}
    print(f"\nxarray ERA5-like benchmark: size {args.size} ({g['nt']} x {g['nlat']} x {g['nlon']} "
          f"x {len(VARS)} float32 = {stored_size(g) / 1e6:,.0f} MB; store {input_bytes / 1e6:,.0f} MB "
          f"in chunks {g['chunks']}), best of {args.repeat}; {os.cpu_count()} cores; load average "
          f"{load_start[0]:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; reference: "
          f"{names[ref_system]}")
    if write_s is not None:
        print(f"dataset written by zarr-python in {write_s:.1f} s")
    for s in systems:
        setups = [r["setup"] for res in results for r in res["runs"][s] if r.get("setup")]
        if setups and setups[0].get("note"):
            secs = [x["seconds"] for x in setups]
            print(f"{names[s]}: {setups[0]['note']}; set up in {min(secs):.2f}-{max(secs):.2f} s (not timed)")
    idles = [r["idle_before"] for res in results for rs in res["runs"].values() for r in rs
             if r.get("idle_before") is not None]
    if idles:
        print(f"machine idle before each run (over 2 s; waited up to {args.quiet_wait:.0f} s for 85%): "
              f"min {min(idles):.0%}, median {sorted(idles)[len(idles) // 2]:.0%}")
    print("\n| workload | system | seconds | peak RSS MiB (tree) | read MB (rchar) | written MB (wchar) "
          "| store bytes read (nums-cloud counts) |")
    print("|---|---|---|---|---|---|---|")
    for res in results:
        for s in systems:
            b = res["best"].get(s)
            if b is None:
                print(f"| {res['workload']} | {names[s]} | {res['errors'].get(s, '-')} | | | | |")
                continue
            n = b.get("nums")
            print(f"| {res['workload']} | {names[s]} | {b['seconds']:.2f} | {b['peak_rss'] / 2**20:,.0f} | "
                  f"{b['read_chars'] / 1e6:,.1f} | {b['write_chars'] / 1e6:,.1f} | "
                  + (f"{n['bytes_read'] / 1e6:,.1f} MB ({n['bytes_read'] / input_bytes:.2f}x the store; "
                     f"{n['invocations']} invocations, {n['in_process']} of them in this process, "
                     f"{n['tasks']} tasks) |" if n else "- |"))
    print(f"\ninput store: {input_bytes / 1e6:,.1f} MB")

    def ratio(res, a, b, key):
        x, y = res["best"].get(a), res["best"].get(b)
        return f"{x[key] / y[key]:.2f}x" if x and y and y[key] else "-"

    others = [s for s in ("dask", "cubed", "numpy") if s in systems]
    if "nums" in systems and others:
        print("\n| workload | " + " | ".join(f"nums/{names[o]} time | nums/{names[o]} peak" for o in others) + " |")
        print("|---|" + "---|---|" * len(others))
        for res in results:
            print(f"| {res['workload']} | " + " | ".join(
                f"{ratio(res, 'nums', o, 'seconds')} | {ratio(res, 'nums', o, 'peak_rss')}" for o in others) + " |")


if __name__ == "__main__":
    main()
