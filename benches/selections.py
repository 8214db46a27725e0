"""Selections and order statistics past the walls the driver once had (issue 41): a mask,
an index array, a median and percentiles along axis 0, and a unique, each at a size the
driver could not hold as positions (16,777,216) or one invocation could not sort, side by
side with NumPy in memory on the same stored values.

    PYTHONPATH=python .venv/bin/python benches/selections.py [--rows 100000000]

(`--rows 10000000` for a quick look.) X is ``rows x 4`` float64 (100M rows: 3.2 GB), K is
``2 * rows`` int64 (200M: 1.6 GB), written once by a setup job into the file store under
.cache/peers/ and read in place (the setup is not timed). Each nums-cloud row is one job
run under ``memory_mb = 512`` with 2 local workers: its wall time, the functions' peak
memory (every invocation within memory_mb, checked) beside the plan's projection, and
the driver's peak RSS. NumPy
reads the same arrays into memory first (not timed) and its answers must equal
nums-cloud's: a wrong answer fails the run.
"""
import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import zarr

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import peers  # noqa: E402
from nums import run_measured  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MiB = 1 << 20
QS = (1, 25, 50, 75, 99)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000_000)
    ap.add_argument("--nums", default=str(ROOT / "target" / "debug" / "nums-cloud"))
    ap.add_argument("--cache", default=str(ROOT / ".cache" / "peers"))
    ap.add_argument("--memory-mb", type=int, default=512)
    a = ap.parse_args()
    n, m = a.rows, a.memory_mb
    cache = Path(a.cache)
    store = peers.Store("file", cache, f"selections-{n}")
    bin_ = Path(a.nums)
    block = m * MiB // 16 // 32  # rows of 4 float64: the default block of memory_mb / 16
    # Written under the memory_mb the work runs with, so that K is in its default blocks.
    text = (f'name = "{store.prefix}"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = {m}\n'
            f'[arrays]\nX = {{ random = "normal", shape = [{n}, 4], block = [{block}, 4], seed = 41 }}\n'
            f'K = "random.default_rng(42).integers(0, {n // 100}, {2 * n})"\n'
            f'[outputs]\nX = "{store.url("X")}"\nK = "{store.url("K")}"\n')
    peers.write_inputs(store, bin_, cache, text, f"setup-selections-{n}")
    jobs = cache / "jobs" / f"selections-{n}"
    shutil.rmtree(jobs, ignore_errors=True)
    jobs.mkdir(parents=True)
    head = (f'{store.storage_toml}[compute]\nbackend = "local"\nworkers = 2\nmemory_mb = {m}\n'
            f'[arrays]\nX = {{ load = "{store.url("X")}" }}\nK = {{ load = "{store.url("K")}" }}\n')

    def nums(name, arrays, outputs):
        body = "".join(f'{k} = "{v}"\n' for k, v in arrays.items())
        outs = "".join(f'{k} = "{jobs / (k + ".npy")}"\n' for k in outputs)
        path = jobs / f"{name}.toml"
        path.write_text(f'name = "sel-{name}-{n}"\n{head}{body}[outputs]\n{outs}')
        stats = jobs / f"{name}.stats.json"
        p, secs, rss = run_measured([str(bin_), "run", str(path), "--quiet", "--stats", str(stats)])
        if p.returncode != 0:
            raise RuntimeError(f"{name} failed:\n{p.stderr[-3000:]}")
        import json
        st = json.loads(stats.read_text())
        assert st["peak_memory_bytes"] <= st["memory_limit_bytes"], f"{name}: an invocation over memory_mb"
        note = (f"{st['tasks']:,} tasks, functions' peak {st['peak_memory_bytes'] / MiB:.0f} of {m} MiB "
                f"(projected {st['projected_peak_memory_bytes'] / MiB:.0f}), "
                f"driver RSS {rss:.0f} MB")
        return secs, note, [np.load(jobs / (k + ".npy")) for k in outputs]

    rows = []
    peers.log("NumPy: reading X and K into memory (not timed)")
    x = zarr.open_array(store.zarr_store("X"), mode="r")[...]
    k = zarr.open_array(store.zarr_store("K"), mode="r")[...]

    def numpy(f):
        t = time.perf_counter()
        out = f()
        return time.perf_counter() - t, out

    work = [
        ("mask: X[X[:, 0] > 0] (half the rows), column sums",
         {"s": "sum(X[X[:, 0] > 0], axis=0)"}, lambda: x[x[:, 0] > 0].sum(axis=0)),
        (f"index array of {n // 2:,} (every other row), column sums",
         {"s": f"sum(X[arange(0, {n}, 2)], axis=0)"}, lambda: x[np.arange(0, n, 2)].sum(axis=0)),
        ("median and percentiles along axis 0",
         {"med": "median(X, axis=0)", "p": f"percentile(X, {list(QS)}, axis=0)"},
         lambda: (np.median(x, axis=0), np.percentile(x, QS, axis=0))),
        (f"unique with counts of {2 * n:,} int64",
         {"u": "unique(K, return_counts=True)[0]", "c": "unique(K, return_counts=True)[1]"},
         lambda: np.unique(k, return_counts=True)),
    ]
    for i, (what, arrays, ref) in enumerate(work):
        peers.log(f"nums-cloud: {what}")
        secs, note, got = nums(f"w{i}", arrays, list(arrays))
        nsecs, want = numpy(ref)
        want = list(want) if isinstance(want, tuple) else [want]
        for g, w in zip(got, want):
            assert np.allclose(g, w, rtol=1e-9, atol=0) if g.dtype.kind == "f" else np.array_equal(g, w), what
        rows.append((what, secs, nsecs, note))

    print(f"\nX: {n:,} x 4 float64 ({n * 32 / 1e9:.1f} GB), K: {2 * n:,} int64; "
          f"memory_mb = {m}, 2 local workers, file store\n")
    print("| work | nums-cloud s | NumPy s (in memory) | ratio | nums-cloud run |\n|---|---|---|---|---|")
    for what, s_, ns, note in rows:
        print(f"| {what} | {s_:.1f} | {ns:.1f} | {s_ / ns:.1f}x | {note} |")


if __name__ == "__main__":
    main()
