"""FFT along a chunked axis (issue 44): a 1-D float64 array of several times `memory_mb`,
stored in blocks, transformed by nums-cloud's four-step FFT across blocks (no task holds
the axis; every invocation within `memory_mb`), against NumPy's `np.fft.fft` in memory and
Dask, whose `da.fft.fft` needs the axis in one chunk (a rechunk to one chunk first: the
whole axis in one worker). Then a 2-D `fft2` of a square array in ragged blocks.

    .cache/peers-venv/bin/python benches/fft_peers.py --size 2e25

(`scripts/bench_peers.sh` makes that venv; this needs numpy, zarr and dask[distributed] of
benches/peers-requirements.txt.) Inputs are written once by a nums-cloud setup job into the
file store under .cache/peers/ and read in place; nums-cloud's spectra stay in the store (Zarr
arrays), are read back and compared with NumPy's (within 1e-10 of the largest magnitude): a
wrong answer fails the run.
"""
import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
# n: the 1-D length (its complex spectrum is 16 n bytes); side: the 2-D array's side, in
# blocks of `block2` (ragged: the side is not a multiple).
SIZES = {
    "smoke": dict(memory_mb=128, n=1 << 20, block=1 << 17, side=1000, block2=300),
    "2e24": dict(memory_mb=128, n=1 << 24, block=1 << 20, side=3000, block2=700),
    "2e25": dict(memory_mb=256, n=1 << 25, block=1 << 21, side=6000, block2=1400),
}


def close(got, want, what):
    err = np.max(np.abs(got - want)) / max(np.max(np.abs(want)), 1e-300)
    assert err <= 1e-10, f"{what}: nums-cloud's spectrum is {err:.2e} off NumPy's"
    return err


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="2e25")
    ap.add_argument("--nums", default=str(ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "peers"))
    ap.add_argument("--skip-dask", action="store_true")
    args = ap.parse_args()
    s = SIZES[args.size]
    cache = Path(args.cache)
    store = peers.Store("file", cache, f"fft-{args.size}")
    bin_ = Path(args.nums)
    n, m, side = s["n"], s["memory_mb"], s["side"]
    text = (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = 2048\n'
            f'[arrays]\nX = {{ random = "normal", shape = [{n}], block = [{s["block"]}], seed = 44 }}\n'
            f'Y = {{ random = "normal", shape = [{side}, {side}], block = [{s["block2"]}, {s["block2"]}], '
            f'seed = 45 }}\n'
            f'[outputs]\nX = "{store.url("X")}"\nY = "{store.url("Y")}"\n')
    peers.write_inputs(store, bin_, cache, text, f"setup-fft-{args.size}")
    jobs = cache / "jobs" / f"fft-{args.size}"
    shutil.rmtree(jobs, ignore_errors=True)
    head = (f'{store.storage_toml}[compute]\nbackend = "local"\nworkers = 2\nmemory_mb = {m}\n'
            f'[arrays]\nX = {{ load = "{store.url("X")}" }}\nY = {{ load = "{store.url("Y")}" }}\n')
    rows = []

    def nums(work, expr, name):
        secs, stats = peers.nums_run(bin_, jobs, name, f'name = "{name}-{args.size}"\n{head}'
                                     f'f = "{expr}"\n[outputs]\nf = "{store.root}/{name}-{args.size}/f"\n')
        peak = stats["peak_memory_bytes"]
        assert peak <= stats["memory_limit_bytes"], "an invocation over memory_mb"
        rows.append((work, "nums-cloud", secs, f"{stats['invocations']} invocations, {stats['tasks']:,} tasks, "
                     f"peak {peak / MiB:.0f} of {m} MiB"))
        return zarr.open_array(zarr.storage.LocalStore(store.dir / f"{name}-{args.size}" / "f", read_only=True),
                               mode="r")

    peers.log(f"nums-cloud: fft of {n:,} float64 ({n * 8 / 1e9:.2f} GB) under memory_mb = {m}")
    f1 = nums(f"fft, {n:,} float64", "fft.fft(X)", "fft")
    peers.log(f"nums-cloud: fft2 of {side} x {side} float64 in blocks of {s['block2']}")
    f2 = nums(f"fft2, {side} x {side}", "fft.fft2(Y)", "fft2")

    t0 = time.perf_counter()
    x = zarr.open_array(store.zarr_store("X"), mode="r")[...]
    t1 = time.perf_counter()
    ref1 = np.fft.fft(x)
    t2 = time.perf_counter()
    rows.append((f"fft, {n:,} float64", "NumPy", t2 - t0, f"read {t1 - t0:.1f} s + np.fft.fft {t2 - t1:.1f} s, "
                 f"{(x.nbytes + ref1.nbytes) / MiB:,.0f} MiB in memory"))
    err1 = close(f1[...], ref1, "fft")
    y = zarr.open_array(store.zarr_store("Y"), mode="r")[...]
    t0 = time.perf_counter()
    ref2 = np.fft.fft2(y)
    rows.append((f"fft2, {side} x {side}", "NumPy", time.perf_counter() - t0, "in memory (read not counted)"))
    err2 = close(f2[...], ref2, "fft2")

    if not args.skip_dask:
        import dask.array as da
        client, cluster = peers.dask_cluster()
        try:
            arr = da.from_zarr(zarr.open_array(store.zarr_store("X"), mode="r"))
            t0 = time.perf_counter()
            try:
                d = da.fft.fft(arr.rechunk(n)).compute()
                note = "rechunk to one chunk, then fft: the whole axis in one worker"
                close(d, ref1, "Dask's fft")
                del d
            except Exception as e:  # noqa: BLE001 - the figure is that it failed
                note = f"failed: {type(e).__name__}: {str(e)[:80]}"
            rows.append((f"fft, {n:,} float64", "Dask", time.perf_counter() - t0, note))
            arr2 = da.from_zarr(zarr.open_array(store.zarr_store("Y"), mode="r"))
            t0 = time.perf_counter()
            d = da.fft.fft2(arr2.rechunk((side, side))).compute()
            close(d, ref2, "Dask's fft2")
            rows.append((f"fft2, {side} x {side}", "Dask", time.perf_counter() - t0,
                         "rechunk to one chunk, then fft2"))
        finally:
            client.close()
            cluster.close()

    print(f"\nmemory_mb = {m}, 2 workers, file store; largest difference from NumPy "
          f"{err1:.1e} (fft), {err2:.1e} (fft2) of the largest magnitude\n")
    print("| work | system | seconds | notes |\n|---|---|---|---|")
    for w, sys_, sec, note in rows:
        print(f"| {w} | {sys_} | {sec:.2f} | {note} |")
    (jobs / "result.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
