"""Calibrates and validates the cost model (driver/src/cost.rs) on this machine: runs the
peers workloads (benches/peers.py's inputs and jobs) and the quick-start job with
`--stats`, joins each invocation with its planned batch (`plan --json`: bytes in and out,
flops, bytes streamed), fits the model's rates by least squares, and prints, per job, the
main stage's measured wall time next to the projection of the model as compiled (the
`projected_main_seconds` of --stats) and of the fitted rates.

    bash scripts/bench_peers.sh --script benches/calibrate.py [--size base] [--store garage]

Fitted per invocation, as cost.rs adds them: store I/O seconds (the functions' measured
wait) = bytes_in / read_bps + bytes_out / write_bps; kernel seconds = flops / flops +
streamed / stream_bps + tasks * task_s; and the invoke overhead (send to answer minus the
handler's seconds).
Copy the printed rates into `LOCAL` (file store) or `LOCAL_S3` (`--store garage`) in
driver/src/cost.rs, rebuild, and run this again to
see the compiled model's error (the target: within 25% on every job).
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402


def plan_and_run(bin_, job):
    plan = json.loads(subprocess.run([str(bin_), "plan", "--json", str(job)], check=True,
                                     capture_output=True, text=True).stdout)
    stats_path = job.with_suffix(".stats.json")
    p = subprocess.run([str(bin_), "run", str(job), "--quiet", "--stats", str(stats_path)],
                       capture_output=True, text=True, cwd=job.parent)
    if p.returncode != 0:
        raise RuntimeError(f"{job}: {p.stderr[-2000:]}")
    stats = json.loads(stats_path.read_text())
    sched = next(s for s in plan["schedulers"] if s["scheduler"] == stats["scheduler"])
    rows = []
    for inv in stats["timeline"]:
        if inv["stage"] != "main" or inv["status"] != "ok" or inv["backup"]:
            continue
        b = sched["batches"][inv["batch"]]
        rows.append({"bytes_in": b["bytes_in"], "bytes_out": b["bytes_out"], "flops": b["flops"],
                     "streamed": b["streamed_bytes"], "tasks": b["tasks"], "io_s": inv["io_seconds"],
                     "compute_s": inv["compute_seconds"], "handler_s": inv["function_seconds"],
                     "total_s": inv["end"] - inv["start"]})
    main = [i for i in stats["timeline"] if i["stage"] == "main"]
    measured = max(i["end"] for i in main) - min(i["start"] for i in main)
    return rows, measured, stats["projected_main_seconds"], plan, stats


def batch_s(b, r):
    """cost.rs's `batch_seconds`: invoke overhead, store I/O wait, kernels."""
    io = b["bytes_in"] / r["read_bps"] + b["bytes_out"] / r["write_bps"]
    comp = b["flops"] / r["flops"] + b["streamed"] / r["stream_bps"] + b["tasks"] * r["task_s"]
    return r["invoke_s"] + io + comp


def fit(rows):
    """Non-negative least squares of what the functions measure: store I/O seconds against
    bytes read and written, kernel seconds against flops, bytes streamed and tasks; the
    invoke overhead is the median of send-to-answer minus handler seconds."""
    from scipy.optimize import nnls  # scipy comes with scikit-learn in the benchmark venv
    inv = lambda x: float("inf") if x <= 0 else 1 / x  # noqa: E731
    a = np.array([[r["bytes_in"], r["bytes_out"]] for r in rows], float)
    io = nnls(a, np.array([r["io_s"] for r in rows]))[0]
    a = np.array([[r["flops"], r["streamed"], r["tasks"]] for r in rows], float)
    comp = nnls(a, np.array([r["compute_s"] for r in rows]))[0]
    return {"read_bps": inv(io[0]), "write_bps": inv(io[1]), "flops": inv(comp[0]),
            "stream_bps": inv(comp[1]), "task_s": float(comp[2]),
            "invoke_s": float(np.median([r["total_s"] - r["handler_s"] for r in rows]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(peers.SIZES), default="base")
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--store", choices=["file", "garage"], default="file",
                    help="garage: the inputs in a Garage bucket (scripts/bench_peers.sh starts it)")
    ap.add_argument("--nums", default=str(peers.ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--cache", default=str(peers.ROOT / ".cache" / "peers"))
    args = ap.parse_args()
    bin_ = Path(args.nums)
    cache = Path(args.cache).resolve()
    cache.mkdir(parents=True, exist_ok=True)
    store = peers.Store(args.store, cache, args.size)
    peers.ensure_inputs(argparse.Namespace(size=args.size), store, bin_, cache)
    work = Path(tempfile.mkdtemp(prefix="calibrate-", dir=cache))
    jobs = []
    for w in peers.WORKLOADS:
        d = work / w.key
        d.mkdir()
        job = d / "job.toml"
        job.write_text(peers.nums_job(w, store, 2, args.memory_mb, args.size))
        jobs.append((w.key, job))
    quick = work / "quickstart"
    quick.mkdir()
    (quick / "job.toml").write_text((peers.ROOT / "examples" / "quickstart.toml").read_text())
    jobs.append(("quickstart", quick / "job.toml"))

    results, all_rows = [], []
    for key, job in jobs:
        peers.wait_quiet(60)
        plan_and_run(bin_, job)  # warm: inputs in the page cache, as every later run has them
        peers.wait_quiet(60)
        rows, measured, projected, plan, stats = plan_and_run(bin_, job)
        peers.log(f"{key}: {len(rows)} invocations, main stage {measured:.2f} s, projected {projected:.2f} s")
        results.append((key, rows, measured, projected, plan, stats))
        all_rows += rows
    rates = fit(all_rows)
    print("\nFitted rates (all jobs' invocations):")
    for k, v in rates.items():
        print(f"  {k:11s} {v:.4g}")

    # The projection with the fitted rates: the same simulation as cost.rs, per job (the
    # compiled model's figure is --stats' projected_main_seconds).
    def seconds(b):
        w = {"bytes_in": b["bytes_in"], "bytes_out": b["bytes_out"], "flops": b["flops"],
             "streamed": b["streamed_bytes"], "tasks": b["tasks"]}
        return batch_s(w, rates)

    print("\n| job | invocations | measured main stage s | compiled model s | error | fitted rates s | error |")
    print("|---|---|---|---|---|---|---|")
    for key, rows, measured, projected, plan, stats in results:
        sched = next(s for s in plan["schedulers"] if s["scheduler"] == stats["scheduler"])
        fitted = simulate(sched["batches"], plan["workers"], seconds)
        print(f"| {key} | {len(rows)} | {measured:.2f} | {projected:.2f} | {projected / measured - 1:+.0%} | "
              f"{fitted:.2f} | {fitted / measured - 1:+.0%} |")


def simulate(batches, workers, seconds):
    """List scheduling in plan order once dependencies are done (cost.rs's `project`,
    without cold starts)."""
    import heapq
    n = len(batches)
    waiting = [len(b["after"]) for b in batches]
    dependents = [[] for _ in range(n)]
    for i, b in enumerate(batches):
        for d in b["after"]:
            dependents[d].append(i)
    ready = [i for i in range(n) if waiting[i] == 0]
    heapq.heapify(ready)
    running, free, now = [], workers, 0.0
    while ready or running:
        while ready and free:
            b = heapq.heappop(ready)
            free -= 1
            heapq.heappush(running, (now + seconds(batches[b]), b))
        now, b = heapq.heappop(running)
        free += 1
        for d in dependents[b]:
            waiting[d] -= 1
            if waiting[d] == 0:
                heapq.heappush(ready, d)
    return now


if __name__ == "__main__":
    main()
