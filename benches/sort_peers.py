"""Sorting benchmark (issue 26): a float64 array of ten times `memory_mb` sorted by
nums-cloud's sample sort (every invocation within `memory_mb`), against NumPy's `np.sort`
in memory and Dask, which has no sort (dask/dask#4368): its nearest are a rechunk to one
chunk then `np.sort` (the whole array in one worker: not bounded in memory) and `topk`
(the k largest, not a sort). Then the median and percentiles of the same data: nums-cloud
and NumPy exactly, Dask's `percentile` approximately (per-chunk percentiles merged).

    .cache/peers-venv/bin/python benches/sort_peers.py --size 10x128

(`scripts/bench_peers.sh` makes that venv; this needs only numpy, zarr and dask[distributed]
of benches/peers-requirements.txt.) Inputs are written once by a nums-cloud setup job into
the file store under .cache/peers/ and read in place; nums-cloud's sorted array stays in
the store (a Zarr array), read back and compared with NumPy's; a wrong answer fails.
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
# Ten times memory_mb of float64, in blocks of memory_mb / 16 (the default block).
SIZES = {
    f"10x{m}": dict(memory_mb=m, n=10 * m * MiB // 8, block=m * MiB // 16 // 8) for m in (128, 256, 512)
}
# A quick check of the script itself (a quarter of memory_mb: sorted by the sample sort all
# the same, since one task sorts at most half an invocation).
SIZES["smoke"] = dict(memory_mb=128, n=4_000_000, block=1 << 20)
QS = (1, 25, 50, 75, 99)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="10x512")
    ap.add_argument("--nums", default=str(ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "peers"))
    ap.add_argument("--skip-dask-sort", action="store_true", help="leave out Dask's one-chunk sort")
    args = ap.parse_args()
    s = SIZES[args.size]
    cache = Path(args.cache)
    store = peers.Store("file", cache, f"sort-{args.size}")
    bin_ = Path(args.nums)
    n, m = s["n"], s["memory_mb"]
    text = (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = 2048\n'
            f'[arrays]\nX = {{ random = "normal", shape = [{n}], block = [{s["block"]}], seed = 26 }}\n'
            f'[outputs]\nX = "{store.url("X")}"\n')
    peers.write_inputs(store, bin_, cache, text, f"setup-sort-{args.size}")
    jobs = cache / "jobs" / f"sort-{args.size}"
    shutil.rmtree(jobs, ignore_errors=True)
    head = (f'{store.storage_toml}[compute]\nbackend = "local"\nworkers = 2\nmemory_mb = {m}\n'
            f'[arrays]\nX = {{ load = "{store.url("X")}" }}\n')
    rows = []

    # nums-cloud: the sort (kept in the store), then the order statistics.
    peers.log(f"nums-cloud: sort of {n:,} float64 ({n * 8 / 1e9:.2f} GB) under memory_mb = {m}")
    sorted_url = f"{store.root}/sort-{args.size}/s"
    secs, stats = peers.nums_run(bin_, jobs, "sort", f'name = "sort-{args.size}"\n{head}'
                                 f's = "sort(X)"\n[outputs]\ns = "{sorted_url}"\n')
    stages = sorted({i["stage"] for i in stats.get("timeline", [])})
    peak = stats["peak_memory_bytes"]
    assert peak <= stats["memory_limit_bytes"], "an invocation over memory_mb"
    rows.append(("sort", "nums-cloud", secs, f"{stats['invocations']} invocations, {stats['tasks']:,} tasks, "
                 f"peak {peak / MiB:.0f} of {m} MiB; stages {', '.join(stages)}"))
    secs_q, stats_q = peers.nums_run(bin_, jobs, "quantiles", f'name = "quantiles-{args.size}"\n{head}'
                                     f'med = "median(X)"\np = "percentile(X, {QS})"\n'
                                     f'[outputs]\nmed = "{jobs / "med.npy"}"\np = "{jobs / "p.npy"}"\n')
    rows.append(("median + percentiles", "nums-cloud", secs_q,
                 f"{stats_q['invocations']} invocations, peak {stats_q['peak_memory_bytes'] / MiB:.0f} of {m} MiB"))
    nums_med, nums_p = np.load(jobs / "med.npy"), np.load(jobs / "p.npy")

    # NumPy in memory.
    t0 = time.perf_counter()
    x = zarr.open_array(store.zarr_store("X"), mode="r")[...]
    t1 = time.perf_counter()
    ref = np.sort(x)
    t2 = time.perf_counter()
    rows.append(("sort", "NumPy", t2 - t0, f"read {t1 - t0:.1f} s + np.sort {t2 - t1:.1f} s, "
                 f"{2 * x.nbytes / MiB:,.0f} MiB in memory"))
    got = zarr.open_array(zarr.storage.LocalStore(store.dir / f"sort-{args.size}" / "s", read_only=True),
                          mode="r")[...]
    assert np.array_equal(got, ref), "nums-cloud's sort differs from NumPy's"
    del got
    t0 = time.perf_counter()
    ref_med, ref_p = np.median(x), np.percentile(x, QS)
    t1 = time.perf_counter()
    rows.append(("median + percentiles", "NumPy", t1 - t0, "in memory (read not counted)"))
    assert nums_med == ref_med and np.array_equal(nums_p, ref_p), (nums_med, ref_med, nums_p, ref_p)

    # Dask: no sort; its nearest, and its approximate percentile.
    import dask.array as da
    client, cluster = peers.dask_cluster()
    try:
        arr = da.from_zarr(zarr.open_array(store.zarr_store("X"), mode="r"))
        t0 = time.perf_counter()
        top = arr.topk(1000).compute()
        rows.append(("topk(1000) (not a sort)", "Dask", time.perf_counter() - t0,
                     f"{arr.numblocks[0]} chunks"))
        assert np.array_equal(top, ref[::-1][:1000])
        if not args.skip_dask_sort:
            t0 = time.perf_counter()
            try:
                d = arr.rechunk(n).map_blocks(np.sort).compute()
                ok = np.array_equal(d, ref)
                note = "rechunk to one chunk, then np.sort: the whole array in one worker" + ("" if ok else " (WRONG)")
                del d
            except Exception as e:  # noqa: BLE001 - the figure is that it failed
                note = f"failed: {type(e).__name__}: {str(e)[:80]}"
            rows.append(("sort", "Dask", time.perf_counter() - t0, note))
        t0 = time.perf_counter()
        dp = da.percentile(arr, QS).compute()
        err = np.max(np.abs(dp - ref_p))
        rows.append(("percentiles (approximate)", "Dask", time.perf_counter() - t0,
                     f"largest error {err:.2e} (values' spread 1)"))
    finally:
        client.close()
        cluster.close()

    print(f"\n{n:,} float64 ({n * 8 / 1e9:.2f} GB), memory_mb = {m}, 2 workers, file store\n")
    print("| work | system | seconds | notes |\n|---|---|---|---|")
    for w, sys_, sec, note in rows:
        print(f"| {w} | {sys_} | {sec:.1f} | {note} |")
    (jobs / "result.json").write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
