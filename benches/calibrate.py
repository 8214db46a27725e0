"""Calibrates and validates the cost model (driver/src/cost.rs) on this machine: runs the
peers workloads (benches/peers.py's inputs and jobs), a Newton and an L-BFGS logistic
regression (their passes), a CSV imported and fitted (benches/csv_fit.py's job, on a
CSV of 250,000 rows x 21) and the quick-start job with `--stats`, each once warm and then
`--repeat` times, joins each invocation with its planned batch (`plan --json`: bytes in
and out, flops, bytes streamed and made, element-function evaluations, tasks), fits the
model's rates, and prints per stage the measured wall time (median and range) next to
the projection of the model as compiled and of the fitted rates.

    bash scripts/bench_peers.sh --script benches/calibrate.py [--size base] [--store garage]
    .cache/peers-venv/bin/python benches/calibrate.py --refit .cache/peers/calibrate-*/results.json

Two fits. Per invocation, as cost.rs adds them (least squares): store I/O seconds (the
functions' measured wait) = first_read / first_read_bps + (bytes_in - first_read) / read_bps
+ bytes_out / write_bps; kernel seconds =
flops / flops + streamed / stream_bps + evals / evals_per_s + made / touch_bps + parsed /
parse_bps + tasks * task_s; the invoke overhead is send-to-answer minus the handler's seconds. Then, from
those, the rates whose projected stage walls are nearest the measured ones (the log
ratio): what `plan` prints. Copy the second column into `LOCAL` (file store) or
`LOCAL_S3` (`--store garage`) in driver/src/cost.rs, rebuild, run this again to see the
compiled model's error, and state it as the model's `error_band`.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import peers  # noqa: E402


def plan_and_run(bin_, job):
    """Rows of the main stage's invocations (or, for a fit's job, of its passes': every
    stage `<fit>-<kind>[-<k>]` joined with the planned batches of `kind`)."""
    plan = json.loads(subprocess.run([str(bin_), "plan", "--json", str(job)], check=True,
                                     capture_output=True, text=True).stdout)
    stats_path = job.with_suffix(".stats.json")
    p = subprocess.run([str(bin_), "run", str(job), "--quiet", "--stats", str(stats_path)],
                       capture_output=True, text=True, cwd=job.parent)
    if p.returncode != 0:
        raise RuntimeError(f"{job}: {p.stderr[-2000:]}")
    stats = json.loads(stats_path.read_text())
    sched = next(s for s in plan["schedulers"] if s["scheduler"] == stats["scheduler"])
    planned = {"main": sched["batches"]}
    for f in sched.get("fits", []):
        for st in f["stages"]:
            planned[f"{f['stage']}-{st['stage']}"] = st["batches"]
    kind = lambda stage: stage if stage in planned else stage.rsplit("-", 1)[0]  # noqa: E731
    fits = any(kind(i["stage"]) != "main" and kind(i["stage"]) in planned for i in stats["timeline"])
    rows = []
    for inv in stats["timeline"]:
        k = kind(inv["stage"])
        if k not in planned or (fits and k == "main") or inv["status"] != "ok" or inv["backup"]:
            continue
        b = planned[k][inv["batch"]]
        rows.append(dict(work_of(b), io_s=inv["io_seconds"], compute_s=inv["compute_seconds"],
                         handler_s=inv["function_seconds"], total_s=inv["end"] - inv["start"]))
    main = [i for i in stats["timeline"] if i["stage"] == "main"]
    measured = max(i["end"] for i in main) - min(i["start"] for i in main) if main else 0.0
    return rows, measured, stats["projected_main_seconds"], plan, stats


def work_of(b):
    """A planned batch (`plan --json`) as `batch_s` takes it."""
    return {"bytes_in": b["bytes_in"], "first_read": b.get("first_read_bytes", 0),
            "bytes_out": b["bytes_out"], "flops": b["flops"],
            "streamed": b["streamed_bytes"], "made": b["made_bytes"], "evals": b["evals"],
            "parsed": b.get("parsed_bytes", 0), "tasks": b["tasks"]}


def batch_s(b, r):
    """cost.rs's `batch_seconds`: invoke overhead, store I/O wait, kernels."""
    first = min(b["first_read"], b["bytes_in"])
    io = first / r["first_read_bps"] + (b["bytes_in"] - first) / r["read_bps"] + b["bytes_out"] / r["write_bps"]
    comp = (b["flops"] / r["flops"] + b["streamed"] / r["stream_bps"] + b["evals"] / r["evals_per_s"]
            + b["made"] / r["touch_bps"] + b["parsed"] / r["parse_bps"] + b["tasks"] * r["task_s"])
    return r["invoke_s"] + io + comp


def fit(rows):
    """Non-negative least squares of what the functions measure: store I/O seconds against
    bytes read and written, kernel seconds against flops, bytes streamed, evaluations, bytes
    made, CSV text parsed and tasks; the
    invoke overhead is the median of send-to-answer minus handler seconds."""
    from scipy.optimize import nnls  # scipy comes with scikit-learn in the benchmark venv
    inv = lambda x: float("inf") if x <= 0 else 1 / x  # noqa: E731
    a = np.array([[r["bytes_in"] - r.get("first_read", 0), r.get("first_read", 0), r["bytes_out"]] for r in rows],
                 float)
    io = nnls(a, np.array([r["io_s"] for r in rows]))[0]
    a = np.array([[r["flops"], r["streamed"], r["evals"], r["made"], r.get("parsed", 0), r["tasks"]]
                  for r in rows], float)
    comp = nnls(a, np.array([r["compute_s"] for r in rows]))[0]
    return {"read_bps": inv(io[0]), "first_read_bps": inv(io[1]), "write_bps": inv(io[2]), "flops": inv(comp[0]),
            "stream_bps": inv(comp[1]), "evals_per_s": inv(comp[2]), "touch_bps": inv(comp[3]),
            "parse_bps": inv(comp[4]), "task_s": float(comp[5]),
            "invoke_s": float(np.median([r["total_s"] - r["handler_s"] for r in rows]))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", choices=sorted(peers.SIZES), default="base")
    ap.add_argument("--memory-mb", type=int, default=2048)
    ap.add_argument("--store", choices=["file", "garage"], default="file",
                    help="garage: the inputs in a Garage bucket (scripts/bench_peers.sh starts it)")
    ap.add_argument("--nums", default=str(peers.ROOT / "target" / "release" / "nums-cloud"))
    ap.add_argument("--repeat", type=int, default=3, help="measured runs of each job (after a warm one)")
    ap.add_argument("--cache", default=str(peers.ROOT / ".cache" / "peers"))
    ap.add_argument("--refit", metavar="RESULTS_JSON", nargs="+",
                    help="fit again the measurements of earlier runs (their results.json, e.g. of two sizes "
                         "together), running nothing")
    args = ap.parse_args()
    if args.refit:
        results = [r for f in args.refit for r in json.loads(Path(f).read_text())]
        report(results, [r for _, rows, *_ in results for r in rows],
               len(results) // len({k for k, *_ in results}))
        return
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
    # A fit's passes, each solver (small blocks, many tasks per invocation: what the peers'
    # large blocks leave the per-task rates unsure of).
    fit_store = f"{store.root}/fit-setup"  # the setup job's own prefix in the store
    rows_n = {"base": 2_000_000}.get(args.size, 8_000_000)
    if not (store.kind == "file" and Path(store.dir, "fit-setup", "X").exists()):
        setup = work / "fit-setup.toml"
        setup.write_text(
            f'name = "fit-setup"\n{store.storage_toml}[compute]\nworkers = 2\n[arrays]\n'
            f'X = {{ random = "normal", shape = [{rows_n}, 32], seed = 1, block = [250000, 32] }}\n'
            f'v = {{ random = "normal", shape = [32], seed = 2 }}\n'
            f'noise = {{ random = "normal", shape = [{rows_n}], seed = 3, block = [250000] }}\n'
            f'y = "((X @ v) / 4 + noise > 0) * 1.0"\n'
            f'[outputs]\nX = "{fit_store}/X"\ny = "{fit_store}/y"\n')
        subprocess.run([str(bin_), "run", str(setup), "--quiet"], check=True, cwd=work)
    for solver in ("newton", "lbfgs"):
        d = work / f"fit-{solver}"
        d.mkdir()
        (d / "job.toml").write_text(
            f'name = "fit-{solver}"\n{store.storage_toml}[compute]\nworkers = 2\n'
            f'memory_mb = {args.memory_mb}\n[arrays]\n'
            f'X = {{ load = "{fit_store}/X" }}\ny = {{ load = "{fit_store}/y" }}\n'
            f'w = "logistic_regression(X, y, solver=\'{solver}\')"\n'
            f'[outputs]\nw = "w.npy"\n')
        jobs.append((f"fit-{solver}", d / "job.toml"))
    # A solve (blocked LU with partial pivoting): LAPACK panels and a chain of dependent
    # invocations, which the peers' one-stage plans do not have.
    m = {"base": 4096}.get(args.size, 8192)
    if not (store.kind == "file" and Path(store.dir, "solve-setup", "S").exists()):
        setup = work / "solve-setup.toml"
        setup.write_text(
            f'name = "solve-setup"\n{store.storage_toml}[compute]\nworkers = 2\n[arrays]\n'
            f'S = {{ random = "normal", shape = [{m}, {m}], seed = 4, block = [1024, 1024] }}\n'
            f'[outputs]\nS = "{store.root}/solve-setup/S"\n')
        subprocess.run([str(bin_), "run", str(setup), "--quiet"], check=True, cwd=work)
    d = work / "solve"
    d.mkdir()
    (d / "job.toml").write_text(
        f'name = "solve"\n{store.storage_toml}[compute]\nworkers = 2\nmemory_mb = {args.memory_mb}\n'
        f'[arrays]\nS = {{ load = "{store.root}/solve-setup/S" }}\n'
        f'x = "np.linalg.solve(S, S[:, :16] + 1.0)"\n[outputs]\nx = "x.npy"\n')
    jobs.append(("solve", d / "job.toml"))
    # A CSV imported and fitted: the only calibration job that parses text (parse_bps). Its
    # store is the job's folder, emptied before each run (an import is otherwise reused).
    if store.kind == "file":
        import csv_fit
        csv = cache / "calibrate-250000x21.csv"
        if not csv.exists():
            csv_fit.make_csv(csv, 250_000, 20)
        d = work / "csv-fit"
        d.mkdir()
        (d / "job.toml").write_text(csv_fit.job(csv))
        jobs.append(("csv-fit", d / "job.toml"))
    quick = work / "quickstart"
    quick.mkdir()
    (quick / "job.toml").write_text((peers.ROOT / "examples" / "quickstart.toml").read_text())
    jobs.append(("quickstart", quick / "job.toml"))

    results, all_rows = [], []
    for key, job in jobs:
        fresh = lambda: shutil.rmtree(job.parent / "store", ignore_errors=True) if key == "csv-fit" else None  # noqa: E731
        peers.wait_quiet(60)
        fresh()
        plan_and_run(bin_, job)  # warm: inputs in the page cache, as every later run has them
        for _ in range(args.repeat):
            peers.wait_quiet(60)
            fresh()
            rows, measured, projected, plan, stats = plan_and_run(bin_, job)
            peers.log(f"{key}: {len(rows)} invocations, main stage {measured:.2f} s, projected "
                      f"{projected:.2f} s" if measured else f"{key}: {len(rows)} invocations of its fit's passes")
            # Another size's stages keep their own labels when results of two sizes are
            # fitted together (--refit).
            label = key if args.size == "base" else f"{key}@{args.size}"
            results.append((label, rows, measured, projected, plan, stats))
            all_rows += rows
    (work / "results.json").write_text(json.dumps(results))
    report(results, all_rows, args.repeat)


def report(results, all_rows, repeat):
    per_invocation = fit(all_rows)
    rates = fit_walls(results, per_invocation)
    print("\nFitted rates: per invocation (least squares of the functions' measured seconds), "
          "then to the stages' wall times (least squares of the log ratio, from the first):")
    for k, v in rates.items():
        print(f"  {k:11s} {per_invocation[k]:10.4g} {v:10.4g}")

    # The projection with the fitted rates: the same simulation as cost.rs, per job (the
    # compiled model's figure is --stats' projected_main_seconds).
    def seconds(b):
        return batch_s(work_of(b), rates)

    print(f"\n| job: stage | invocations | measured s (median of {repeat}; range) | compiled model s "
          "| error | fitted rates s | error |")
    print("|---|---|---|---|---|---|---|")
    table = {}  # label -> (invocations, [measured], compiled, fitted), in the jobs' order
    for key, rows, measured, projected, plan, stats in results:
        for label, n, m, compiled, batches in stages(key, measured, projected, plan, stats):
            fitted = simulate(batches, plan["workers"], seconds)
            table.setdefault(label, (n, [], compiled, fitted))[1].append(m)
    for label, (n, ms, compiled, fitted) in table.items():
        m = float(np.median(ms))
        print(f"| {label} | {n} | {m:.3f} ({min(ms):.3f}-{max(ms):.3f}) | {compiled:.3f} | "
              f"{compiled / m - 1:+.0%} | {fitted:.3f} | {fitted / m - 1:+.0%} |")


def stages(key, measured, projected, plan, stats):
    """What a job's rows compare: its main stage, or each kind of a fit's passes (the
    median wall time of its runs: first start to last end)."""
    sched = next(s for s in plan["schedulers"] if s["scheduler"] == stats["scheduler"])
    if not sched.get("fits"):
        yield f"{key}: main", len(sched["batches"]), measured, projected, sched["batches"]
        return
    for f in sched["fits"]:
        for st in f["stages"]:
            name = f"{f['stage']}-{st['stage']}"
            walls = {}
            for i in stats["timeline"]:
                if i["stage"] == name or i["stage"].rsplit("-", 1)[0] == name:
                    a, b = walls.get(i["stage"], (i["start"], i["end"]))
                    walls[i["stage"]] = (min(a, i["start"]), max(b, i["end"]))
            if walls:
                m = float(np.median([b - a for a, b in walls.values()]))
                yield (f"{key}: {st['stage']} (x{len(walls)})", st["invocations"], m,
                       st["projected_wall_seconds"], st["batches"])


def fit_walls(results, start):
    """The rates whose projected stage walls (`simulate`) are nearest the measured ones, each
    stage's error counted as a ratio (a 0.1 s stage weighs as a 1.5 s one): what `plan`
    prints is a stage's wall time, which holds what the functions do not measure (the
    driver's turn-around between dependent invocations, a stage's first sends)."""
    from scipy.optimize import minimize
    keys = ["read_bps", "first_read_bps", "write_bps", "flops", "stream_bps", "evals_per_s", "touch_bps", "parse_bps",
            "task_s", "invoke_s"]
    # A rate the per-invocation fit left unbounded starts at a value of its order.
    x0 = np.log([min(start[k], 1e11) if k != "stream_bps" else min(start[k], 2e10) for k in keys])
    cases = []  # (batches, workers, measured medians' label)
    measured = {}
    for key, rows, m, projected, plan, stats in results:
        for label, n, wall, compiled, batches in stages(key, m, projected, plan, stats):
            measured.setdefault(label, []).append(wall)
            if len(measured[label]) == 1:
                cases.append((label, batches, plan["workers"]))
    target = {k: float(np.median(v)) for k, v in measured.items()}

    def loss(x):
        r = dict(zip(keys, np.exp(x)))
        err = [np.log(simulate(batches, w, lambda b: batch_s(work_of(b), r)) / target[label])
               for label, batches, w in cases]
        return float(np.sum(np.square(err))) + 1e-3 * float(np.sum(np.square(x - x0)))

    best = minimize(loss, x0, method="Powell", options={"maxiter": 20000, "xtol": 1e-4, "ftol": 1e-8})
    return dict(zip(keys, map(float, np.exp(best.x))))


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
