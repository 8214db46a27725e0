"""Import throughput of `.npy` and CSV inputs on the file store: `nums-cloud run` of a job
that only imports (the functions range-read and parse, the driver reads the header or
indexes the CSV's rows), against reading the same bytes raw and against NumPy reading the
file whole (np.load; np.loadtxt for CSV), with the driver's peak RSS, side by side.

    .venv/bin/python benches/import_throughput.py [--mib 400] [--bin target/debug/nums-cloud]
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import nums  # noqa: E402
from nums import job_text  # noqa: E402


def run_measured(bin_, job):
    p, seconds, peak = nums.run_measured([bin_, "run", str(job), "--quiet"])
    if p.returncode:
        raise SystemExit(p.stderr)
    return seconds, peak


def raw_read(path):
    t = time.monotonic()
    with open(path, "rb") as f:
        while f.read(8 << 20):
            pass
    return time.monotonic() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=400)
    ap.add_argument("--bin", default=str(Path(__file__).resolve().parent.parent / "target/debug/nums-cloud"))
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="nums-import-bench-"))
    cols = 32
    rows = (a.mib << 20) // (8 * cols)
    npy = tmp / "x.npy"
    m = np.lib.format.open_memmap(npy, mode="w+", dtype=np.float64, shape=(rows, cols))
    for r in range(0, rows, 1 << 16):
        n = min(1 << 16, rows - r)
        m[r:r + n] = np.random.default_rng(r).normal(size=(n, cols))
    m.flush()
    del m
    chunk = np.round(np.random.default_rng(1).normal(size=(4096, 8)), 6)
    text = "".join(",".join(repr(float(x)) for x in row) + "\n" for row in chunk).encode()
    csv = tmp / "x.csv"
    with open(csv, "wb") as f:
        for _ in range((a.mib << 20) // len(text) + 1):
            f.write(text)
    print(f"{'input':6} {'MiB':>6} {'raw MB/s':>9} {'nums MB/s':>10} {'ratio':>6} {'numpy MB/s':>11} {'nums/numpy':>11} {'driver RSS MB':>14}")
    for path in (npy, csv):
        size = os.path.getsize(path) / 1e6
        job = tmp / f"{path.suffix[1:]}.toml"
        job.write_text(job_text({"X": {"load": str(path)}}, {}, name=path.suffix[1:],
                                storage={"url": f"file://{tmp / 'store'}"},
                                compute={"workers": a.workers, "memory_mb": 1024}))
        raw_read(path)
        raw = raw_read(path)  # warm: the page cache, as the import reads it
        secs, peak = run_measured(a.bin, job)
        t = time.monotonic()
        if path.suffix == ".npy":
            np.load(path)
            numpy = time.monotonic() - t
        else:
            # np.loadtxt of a 32 MB prefix, scaled: the whole file would take minutes.
            head = tmp / "head.csv"
            with open(path, "rb") as f, open(head, "wb") as g:
                g.write(f.read(32 << 20).rsplit(b"\n", 1)[0] + b"\n")
            t = time.monotonic()
            np.loadtxt(head, delimiter=",")
            numpy = (time.monotonic() - t) * os.path.getsize(path) / os.path.getsize(head)
        print(f"{path.suffix[1:]:6} {size / 1.048576:6.0f} {size / raw:9.0f} {size / secs:10.0f} {raw / secs:6.2f} "
              f"{size / numpy:11.0f} {numpy / secs:11.2f} {peak:14.0f}")


if __name__ == "__main__":
    main()
