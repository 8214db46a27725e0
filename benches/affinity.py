"""Slot affinity (issue 42, item 2): repeated passes over a persisted array on local
function processes, with the processes' memory tier and LSHS's placement by it
(``function_tier_percent=50``, the default) against today's store path
(``function_tier_percent=0``: no tier in the processes, every plan as before). Computes are
forced onto the backend (``in_process_mb=0``, no tier in this process). Prints each pass
kind's median seconds, the store bytes read and the blocks served from memory, and the
ratio, side by side in one run.

    python benches/affinity.py [--rows 3000000] [--cols 21] [--passes 5] [--workers 2]
"""
import argparse
import statistics
import tempfile
import time

import numpy as np

import nums_cloud
import nums_cloud.numpy as nps


def run(percent, a, args, store):
    s = nums_cloud.init(storage=f"file://{store}/p{percent}", workers=args.workers,
                        memory_mb=args.memory_mb, progress=False, in_process_mb=0,
                        memory_tier_mb=0, function_tier_percent=percent)
    x = nums_cloud.persist(nps.array(a).block(args.rows // 16, a.shape[1]) * 1.0)
    passes = {
        "mean per column": lambda: x.mean(axis=0).get(),
        "min": lambda: x.min(axis=0).get(),
        "normalise, sum": lambda: ((x - x.mean(axis=0)) / x.std(axis=0)).sum(axis=0).get(),
    }
    out = {}
    for name, f in passes.items():
        f()  # the first pass: blocks met once
        ts, read, hits = [], 0, 0
        for _ in range(args.passes):
            c0 = s.counts()
            t = time.perf_counter()
            f()
            ts.append(time.perf_counter() - t)
            c1 = s.counts()
            read += c1["bytes_read"] - c0["bytes_read"]
            hits += c1["memory_hits"] - c0["memory_hits"]
        out[name] = (statistics.median(ts), read / args.passes, hits / args.passes)
    s.close()
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--rows", type=int, default=3_000_000)
    p.add_argument("--cols", type=int, default=21)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--memory-mb", type=int, default=2048)
    args = p.parse_args()
    a = np.random.default_rng(0).standard_normal((args.rows, args.cols))
    with tempfile.TemporaryDirectory() as store:
        off = run(0, a, args, store)
        on = run(50, a, args, store)
    print(f"{args.rows} x {args.cols} float64 ({a.nbytes / 1e6:.0f} MB) in 16 blocks, "
          f"{args.workers} workers of {args.memory_mb} MB; median of {args.passes} passes")
    print(f"{'pass':<18}{'off s':>8}{'on s':>8}{'off/on':>8}{'off MB read':>13}"
          f"{'on MB read':>12}{'on hits':>9}")
    for k in off:
        (t0, r0, _), (t1, r1, h1) = off[k], on[k]
        print(f"{k:<18}{t0:>8.3f}{t1:>8.3f}{t0 / t1:>8.2f}{r0 / 1e6:>13.1f}{r1 / 1e6:>12.1f}"
              f"{h1:>9.0f}")


if __name__ == "__main__":
    main()
