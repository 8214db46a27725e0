"""Import benchmark (issue 13): a `.npy`, a CSV and a Parquet file of about 4 GB each
imported into the store by nums-cloud (a job that loads the file: the functions read and
parse their blocks' byte ranges in parallel), against reading the same bytes raw and
against Dask writing the same data to Zarr, from local files and from Garage (S3); the
nums-cloud driver's peak RSS for each.

    bash scripts/bench_peers.sh --script benches/import_peers.py [--size base|small] [--store file|garage]

The files are generated once into .cache/import/ (the CSV repeats one 1 MiB piece of
random rows, so it is quick to write; its values parse like any other), and with
`--store garage` uploaded to the bucket once per Garage start. Raw: the file's bytes read
in 64 MiB pieces (local), or with s3fs (Garage). Dask (LocalCluster, 2 processes x 1
thread): the `.npy`'s rows read from a memory map by delayed tasks, `dd.read_csv(...)` and
`dd.read_parquet(...)` `.to_dask_array(lengths=True)`, each `.to_zarr` into a local folder
with zstd (Dask has no ranged `.npy` reader for S3: that cell is empty). Every import is
checked: the stored array's sum equals the file's.
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import nums  # noqa: E402
import peers  # noqa: E402

SIZES = {
    # 4 GiB of float64 in the .npy; the CSV and Parquet hold about as many bytes.
    "base": dict(rows=16_777_216, cols=32),
    "small": dict(rows=1_048_576, cols=32),
}


def make_files(d, s):
    """x.npy, x.csv and x.parquet in folder d (kept across runs); returns their paths and
    the sums of their values (the check)."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    d.mkdir(parents=True, exist_ok=True)
    rows, cols = s["rows"], s["cols"]
    step = 1 << 19
    rng = np.random.default_rng(31)
    npy, csv, pqt = d / "x.npy", d / "x.csv", d / "x.parquet"
    sums = {}
    if not npy.exists():
        peers.log(f"files: writing {npy}")
        a = np.lib.format.open_memmap(str(npy) + ".tmp", mode="w+", dtype=np.float64, shape=(rows, cols))
        for r in range(0, rows, step):
            a[r:r + step] = rng.normal(size=(min(step, rows - r), cols))
        a.flush()
        del a
        os.rename(str(npy) + ".tmp", npy)
    if not pqt.exists():
        peers.log(f"files: writing {pqt}")
        a = np.load(npy, mmap_mode="r")
        schema = pa.schema([(f"c{j}", pa.float64()) for j in range(cols)])
        with pq.ParquetWriter(str(pqt) + ".tmp", schema, compression="snappy") as w:
            for r in range(0, rows, step):
                part = np.asarray(a[r:r + step])
                w.write_table(pa.table([part[:, j] for j in range(cols)], schema=schema),
                              row_group_size=step)
        os.rename(str(pqt) + ".tmp", pqt)
    piece_rows = 2048
    piece = np.round(np.random.default_rng(32).normal(size=(piece_rows, cols)), 6)
    text = "".join(",".join(repr(float(v)) for v in row) + "\n" for row in piece).encode()
    reps = max(1, npy.stat().st_size // len(text))
    if not csv.exists():
        peers.log(f"files: writing {csv}")
        with open(str(csv) + ".tmp", "wb") as f:
            for _ in range(reps):
                f.write(text)
        os.rename(str(csv) + ".tmp", csv)
    a = np.load(npy, mmap_mode="r")
    sums["npy"] = sums["parquet"] = float(sum(np.asarray(a[r:r + step]).sum() for r in range(0, rows, step)))
    sums["csv"] = float(piece.sum() * reps)
    return {"npy": npy, "csv": csv, "parquet": pqt}, sums


def s3fs_fs():
    import s3fs
    e = os.environ
    return s3fs.S3FileSystem(endpoint_url=e["NUMS_S3_ENDPOINT"], key=e["AWS_ACCESS_KEY_ID"],
                             secret=e["AWS_SECRET_ACCESS_KEY"],
                             client_kwargs={"region_name": e.get("AWS_REGION", "garage")},
                             config_kwargs={"s3": {"addressing_style": "path"}})


def raw_read(src, store):
    """Seconds to read every byte of the file (local: 64 MiB reads; S3: s3fs)."""
    t0 = time.perf_counter()
    if store.kind == "file":
        with open(src, "rb", buffering=0) as f:
            while f.read(64 << 20):
                pass
    else:
        with s3fs_fs().open(src[len("s3://"):], "rb", block_size=64 << 20) as f:
            while f.read(64 << 20):
                pass
    return time.perf_counter() - t0


def nums_import(bin_, store, src, fmt, job_dir):
    """(seconds, driver peak RSS MB, stats) of a job that loads `src` into the store."""
    name = f"import-{fmt}"
    text = (f'name = "{name}"\n{store.storage_toml}[compute]\nbackend = "local"\nworkers = 2\n'
            f'[arrays]\nX = {{ load = "{src}" }}\ns = "sum(X)"\n'
            f'[outputs]\nX = "{store.root}/{name}/X"\ns = "s.npy"\n')
    job_dir.mkdir(parents=True, exist_ok=True)
    path, stats = job_dir / f"{name}.toml", job_dir / f"{name}.stats.json"
    path.write_text(text)
    p, seconds, peak = nums.run_measured([str(bin_), "run", str(path), "--quiet", "--stats", str(stats)])
    if p.returncode != 0:
        raise RuntimeError(f"nums-cloud run {path} failed:\n{p.stderr[-3000:]}")
    return seconds, peak, float(np.load(job_dir / "s.npy")), json.loads(stats.read_text())


def dask_import(src, fmt, store, out_dir, s):
    """Seconds for Dask to read the file and write it to a local Zarr (zstd)."""
    import dask.array as da
    import dask.dataframe as dd
    import zarr
    opts = None if store.kind == "file" else {
        "endpoint_url": os.environ["NUMS_S3_ENDPOINT"], "key": os.environ["AWS_ACCESS_KEY_ID"],
        "secret": os.environ["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"region_name": os.environ.get("AWS_REGION", "garage")},
        "config_kwargs": {"s3": {"addressing_style": "path"}}}
    shutil.rmtree(out_dir, ignore_errors=True)
    t0 = time.perf_counter()
    if fmt == "npy":
        if store.kind != "file":
            return None, None
        import dask

        def rows_of(path, r0, r1):
            return np.asarray(np.load(path, mmap_mode="r")[r0:r1])

        step = 1 << 19
        x = da.concatenate([
            da.from_delayed(dask.delayed(rows_of)(src, r, min(r + step, s["rows"])),
                            shape=(min(r + step, s["rows"]) - r, s["cols"]), dtype=np.float64)
            for r in range(0, s["rows"], step)])
    elif fmt == "csv":
        x = dd.read_csv(src, header=None, blocksize="64MB", storage_options=opts).to_dask_array(lengths=True)
    else:
        x = dd.read_parquet(src, storage_options=opts).to_dask_array(lengths=True)
    codec = zarr.codecs.ZstdCodec(level=1)
    x.to_zarr(str(out_dir), compressors=[codec])
    seconds = time.perf_counter() - t0
    total = float(da.from_zarr(str(out_dir)).sum().compute())
    return seconds, total


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(SIZES), default="base")
    ap.add_argument("--store", choices=["file", "garage"], default="file")
    ap.add_argument("--only", default="npy,csv,parquet")
    ap.add_argument("--nums", default=str(peers.ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(peers.ROOT / ".cache" / "import"))
    ap.add_argument("--quiet-wait", type=float, default=60)
    args = ap.parse_args()
    s = SIZES[args.size]
    cache = Path(args.cache).resolve()
    files, sums = make_files(cache / f"files-{args.size}", s)
    store = peers.Store(args.store, cache, args.size)
    if store.kind == "file":
        store.dir.mkdir(parents=True, exist_ok=True)
        srcs = {k: str(v) for k, v in files.items()}
    else:
        fs = s3fs_fs()
        bucket = os.environ["NUMS_S3_BUCKET"]
        srcs = {}
        for k, v in files.items():
            if k not in args.only.split(","):
                continue
            key = f"{bucket}/import-files-{args.size}/{v.name}"
            if not fs.exists(key) or fs.size(key) != v.stat().st_size:
                peers.log(f"files: uploading {v.name} to Garage")
                # Parts of 64 MiB, two at a time (s3fs's default concurrency stalled on
                # Garage with a 4 GB file).
                fs.put_file(str(v), key, chunksize=64 << 20, max_concurrency=2)
            srcs[k] = f"s3://{key}"
    job_dir = Path(tempfile.mkdtemp(prefix="import-jobs-", dir=cache))
    client, cluster = peers.dask_cluster()
    rows, failed = [], False
    for fmt in args.only.split(","):
        src = srcs[fmt]
        size = files[fmt].stat().st_size
        peers.log(f"== {fmt} ({size / 1e9:.2f} GB, {args.store})")
        peers.wait_quiet(args.quiet_wait)
        raw = raw_read(src, store)
        peers.log(f"   raw {raw:.2f} s")
        peers.wait_quiet(args.quiet_wait)
        ns, rss, total, stats = nums_import(Path(args.nums), store, src, fmt, job_dir / fmt)
        ok = abs(total - sums[fmt]) <= 1e-6 * max(1.0, abs(sums[fmt])) + 1e-3
        failed |= not ok
        peers.log(f"   nums-cloud {ns:.2f} s, driver peak RSS {rss:.0f} MB{'' if ok else ' WRONG SUM'}")
        peers.wait_quiet(args.quiet_wait)
        try:
            dsec, dtotal = dask_import(src, fmt, store, job_dir / f"dask-{fmt}.zarr", s)
            if dtotal is not None and abs(dtotal - sums[fmt]) > 1e-6 * max(1.0, abs(sums[fmt])) + 1e-3:
                peers.log(f"   dask: WRONG SUM {dtotal} vs {sums[fmt]}")
        except Exception as e:  # noqa: BLE001 (reported in the table)
            peers.log(f"   dask failed: {e}")
            dsec = None
        peers.log(f"   dask {peers.fmt(dsec)} s")
        shutil.rmtree(job_dir / f"dask-{fmt}.zarr", ignore_errors=True)
        rows.append((fmt, size, raw, ns, rss, dsec, stats))
    client.close()
    cluster.close()
    mb = lambda b, t: f"{b / 1e6 / t:,.0f}" if t else "-"  # noqa: E731
    print(f"\nImport benchmark, size {args.size} ({s['rows']:,} x {s['cols']} float64), store {args.store}; "
          f"2 workers, memory_mb 2048; nums-cloud {peers.ROOT.name} release build\n")
    print("| file | GB | raw read s (MB/s) | nums-cloud s (MB/s) | driver peak RSS MB | Dask to Zarr s | nums/raw | nums/Dask |")
    print("|---|---|---|---|---|---|---|---|")
    for fmt, size, raw, ns, rss, dsec, stats in rows:
        print(f"| {fmt} | {size / 1e9:.2f} | {raw:.2f} ({mb(size, raw)}) | {ns:.2f} ({mb(size, ns)}) | {rss:.0f} "
              f"| {peers.fmt(dsec)} | {ns / raw:.2f}x "
              f"| {peers.fmt(ns / dsec if dsec else None)}{'x' if dsec else ''} |")
    shutil.rmtree(job_dir, ignore_errors=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
