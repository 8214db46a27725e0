"""What users see of a run, end to end with the real binary: verbosity (-q, -v, RUST_LOG),
the local function processes' logs (removed after success, listed after a failure), the
per-invocation --stats records and the timeline SVG."""
import json
import os
import re
import sys
import subprocess
from pathlib import Path

import numpy as np

from nums import BIN, assert_close, job_text, run


X = np.random.default_rng(3).normal(size=(400, 30))


def small_job(tmp_path, name="obs", compute=None):
    """G = X.T @ X and the column means of X, over 4 row blocks of X (a .npy)."""
    np.save(tmp_path / "X.npy", X)
    arrays = {"X": {"load": "X.npy", "block": [100, 30]}, "G": "X.T @ X", "m": "mean(X, axis=0)"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"G": "G.npy", "m": "m.npy"}, name=name, compute=compute))
    return job


def check_outputs(tmp_path):
    assert_close(np.load(tmp_path / "G.npy"), X.T @ X)
    assert_close(np.load(tmp_path / "m.npy"), X.mean(axis=0))


def isolated_tmp(tmp_path):
    d = tmp_path / "systmp"
    d.mkdir(exist_ok=True)
    return d


def test_verbosity_flags_and_rust_log(tmp_path):
    job = small_job(tmp_path)
    tmp = isolated_tmp(tmp_path)
    env = {"TMPDIR": str(tmp)}
    quiet = run(job, "-q", env=env)
    assert quiet.stderr == "", quiet.stderr
    assert "finished in" in quiet.stdout
    loud = run(job, "-v", env=env)
    assert "DEBUG nums_cloud::dispatch: invocation 0: done in" in loud.stderr, loud.stderr
    assert "stage main:" in loud.stderr
    plain = run(job, env=env)
    assert "DEBUG" not in plain.stderr and "debug:" not in plain.stderr, plain.stderr
    # RUST_LOG wins over the default (the stage runner says when a stage starts).
    filtered = run(job, env={**env, "RUST_LOG": "nums_cloud::stage=debug"})
    assert "stage main:" in filtered.stderr and "invocation 0: done" not in filtered.stderr, filtered.stderr
    # The answers are right whatever the verbosity.
    check_outputs(tmp_path)
    # A successful run leaves no function logs behind.
    assert [p.name for p in tmp.iterdir()] == [], list(tmp.iterdir())


# A function process that writes to its log, takes one invocation and fails it with an
# error nums-cloud does not retry.
FAILING_FUNCTION = """
import json, os, sys, urllib.request
print("hello from the failing function", file=sys.stderr, flush=True)
api = os.environ["AWS_LAMBDA_RUNTIME_API"]
r = urllib.request.urlopen(f"http://{api}/2018-06-01/runtime/invocation/next")
rid = r.headers["Lambda-Runtime-Aws-Request-Id"]
r.read()
body = json.dumps({"errorType": "KernelError", "errorMessage": "deliberate failure"}).encode()
urllib.request.urlopen(urllib.request.Request(
    f"http://{api}/2018-06-01/runtime/invocation/{rid}/error", data=body, method="POST")).read()
import time; time.sleep(30)
"""


def test_failed_run_lists_its_function_logs(tmp_path):
    job = small_job(tmp_path, name="fails")
    tmp = isolated_tmp(tmp_path)
    script = tmp_path / "failing.py"
    script.write_text(FAILING_FUNCTION)
    stats = tmp_path / "stats.json"
    p = run(job, "--stats", str(stats), check=False,
            env={"TMPDIR": str(tmp), "NUMS_CLOUD_FUNCTION": f"{sys.executable} {script}"})
    assert p.returncode == 1, p.stderr
    assert "deliberate failure" in p.stderr and "function logs (kept):" in p.stderr, p.stderr
    listed = [Path(l.strip()) for l in p.stderr.split("function logs (kept):")[1].splitlines() if l.strip()]
    assert listed and all(l.parent.parent == tmp and l.parent.name.startswith("nums-cloud-") for l in listed), listed
    assert any("hello from the failing function" in l.read_text() for l in listed)
    report = json.loads(stats.read_text())
    assert report["status"] == "failed" and [Path(l) for l in report["function_logs"]] == listed
    failed = [i for i in report["timeline"] if i["status"] == "failed"]
    assert failed and all("deliberate failure" in i["error"] for i in failed), report["timeline"]


def test_stats_records_every_invocation_and_the_timeline_draws_them(tmp_path):
    import xml.etree.ElementTree as ET
    job = small_job(tmp_path, name="tl")
    svg = tmp_path / "run.svg"
    p = run(job, "--stats", "-", "--timeline", str(svg))
    report = json.loads(p.stdout)  # --stats -: standard output is the JSON alone
    assert "finished in" in p.stderr  # and the summary went to standard error
    check_outputs(tmp_path)
    tl = report["timeline"]
    assert len(tl) == report["invocations"] > 1 and report["retries"] == report["backups"] == 0
    assert sum(i["tasks"] for i in tl) == report["tasks"]
    assert sum(i["bytes_read"] for i in tl) == report["s3_bytes_read"]
    assert sum(i["bytes_written"] for i in tl) == report["s3_bytes_written"]
    assert max(i["peak_memory_bytes"] for i in tl) == report["peak_memory_bytes"]
    # Each invocation beside its plan's projection: the largest is the run's.
    assert max(i["projected_peak_memory_bytes"] for i in tl) == report["projected_peak_memory_bytes"]
    assert all(i["projected_seconds"] > 0 for i in tl), tl
    assert sorted(i["batch"] for i in tl) == list(range(len(tl)))
    for i in tl:
        assert i["status"] == "ok" and i["attempt"] == 1 and not i["backup"] and i["stage"] == "main"
        assert 0 <= i["start"] < i["end"] <= report["wall_seconds"], i
        assert 0 <= i["slot"] < report["workers"], i
        assert i["compute_seconds"] + i["io_seconds"] <= i["function_seconds"] * 1.01 + 1e-3, i
        assert i["function_seconds"] <= i["end"] - i["start"] + 1e-3, i
    for a in tl:
        for b in tl:
            if a is not b and a["slot"] == b["slot"]:
                assert a["end"] <= b["start"] or b["end"] <= a["start"], (a, b)

    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.parse(svg).getroot()
    lanes = root.findall(".//s:g[@class='lane']", ns)
    assert sorted(int(g.get("data-slot")) for g in lanes) == sorted({i["slot"] for i in tl})
    bars = [r for r in root.iter("{http://www.w3.org/2000/svg}rect") if r.get("class") == "invocation"]
    assert sorted(int(r.get("data-batch")) for r in bars) == sorted(i["batch"] for i in tl)
    for g in lanes:  # each invocation in its own slot's lane
        slot = int(g.get("data-slot"))
        got = sorted(int(r.get("data-batch")) for r in g.findall("s:rect[@class='invocation']", ns))
        assert got == sorted(i["batch"] for i in tl if i["slot"] == slot)
    texts = ["".join(t.itertext()) for t in root.iter("{http://www.w3.org/2000/svg}text")]
    assert "time since the run started (seconds)" in texts
    assert any(t.startswith("peak memory of each invocation (MiB)") for t in texts)
    assert "memory_mb = 512 MiB" in texts and "slot 0" in texts
    assert any(re.fullmatch(r"0(\.0+)? s", t) for t in texts)  # the time axis starts at 0 s
    assert any(f"{len(tl)} invocations" in t for t in texts)
    peaks = root.findall(".//s:line[@class='peak']", ns)
    assert len(peaks) == len(tl)

    # `nums-cloud timeline` draws the same picture from the stats file.
    stats = tmp_path / "stats.json"
    stats.write_text(p.stdout)
    again = tmp_path / "again.svg"
    q = subprocess.run([BIN, "timeline", str(stats), str(again)], capture_output=True, text=True)
    assert q.returncode == 0, q.stderr
    assert again.read_text() == svg.read_text()
    # A file that is not a stats file is refused by name.
    (tmp_path / "bad.json").write_text('{"job": "x"}')
    q = subprocess.run([BIN, "timeline", str(tmp_path / "bad.json"), str(again)], capture_output=True, text=True)
    assert q.returncode == 1 and "bad.json: not a nums-cloud --stats file" in q.stderr, q.stderr


def mask_job(tmp_path):
    np.save(tmp_path / "X.npy", X)
    arrays = {"X": {"load": "X.npy", "block": [100, 30]}, "P": "X[X[:, 0] > 0]", "s": "sum(P, axis=0)"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"s": "s.npy"}, name="masked"))
    return job


def cli(*args):
    p = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout


def test_plan_and_check_json_say_a_masked_plan_is_provisional(tmp_path):
    job = mask_job(tmp_path)
    plan = json.loads(cli("plan", "--json", job))
    assert [s["scheduler"] for s in plan["schedulers"]] == ["lshs", "naive"]
    assert plan["memory_mb"] == 512 and plan["workers"] == 2
    assert "array P indexes with a boolean mask" in plan["provisional"]
    for s in plan["schedulers"]:
        assert s["invocations"] == len(s["batches"]) > 0
        assert sum(b["tasks"] for b in s["batches"]) == s["tasks"]
        assert sum(b["bytes_in"] for b in s["batches"]) == s["store_bytes_read"]
        assert max(b["projected_peak_bytes"] for b in s["batches"]) == s["projected_peak_memory_bytes"]
        assert all(d < i for i, b in enumerate(s["batches"]) for d in b["after"])
    # The text says the same numbers, and that it is provisional.
    text = cli("plan", job)
    lshs = plan["schedulers"][0]
    assert "invocations" in text and str(lshs["invocations"]) in text.split("invocations", 1)[1].splitlines()[0]
    assert "provisional: array P indexes with a boolean mask" in text
    check = json.loads(cli("check", "--json", job))
    assert check["ok"] is True and check["arrays"] == 3 and check["outputs"] == 1
    assert "boolean mask" in check["provisional"]
    assert "provisional plan:" in cli("check", job)
    # A job without masks is not provisional.
    plain = small_job(tmp_path, name="plain")
    assert "provisional" not in json.loads(cli("plan", "--json", plain))
    assert json.loads(cli("check", "--json", plain))["provisional"] is None
    assert "provisional" not in cli("plan", plain)


def test_plan_needs_no_credentials_and_projects_wall_time(tmp_path):
    """A Lambda job on S3 with no AWS credentials anywhere: `plan` plans it (nothing stored
    is read) and projects its wall time and cost by the lambda cost model, and draws the
    projected timeline; `check` refuses it in one line naming storage.url."""
    import xml.etree.ElementTree as ET
    job = tmp_path / "big.toml"
    job.write_text(job_text(
        {"U": {"random": "normal", "shape": [40000, 40000], "block": [4000, 4000], "seed": 1},
         "V": {"random": "normal", "shape": [40000, 40000], "block": [4000, 4000], "seed": 2},
         "m": "mean(U * V, axis=0)"},
        {"m": "m.npy"}, name="big", storage={"url": "s3://no-such-bucket/x"},
        compute={"backend": "lambda", "workers": 100, "memory_mb": 2048}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_EC2_METADATA_DISABLED="true")
    svg = tmp_path / "projected.svg"
    p = subprocess.run([BIN, "plan", "--json", str(job), "--timeline", str(svg)],
                       capture_output=True, text=True, timeout=120, env=env)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)
    lshs, naive = plan["schedulers"]
    for s in (lshs, naive):
        assert s["cost_model"] == "lambda"
        assert s["projected_wall_seconds"] > 0 and s["estimated_cost_usd"] > 0
    # At least a Lambda cold start (0.3 s) and the making of a 128 MB block; naive writes
    # every product block to S3 and reads it back (at about 0.1 GB/s), LSHS does not.
    assert 0.4 < lshs["projected_wall_seconds"] < naive["projected_wall_seconds"]
    assert naive["projected_wall_seconds"] > 128e6 / 90e6
    root = ET.parse(svg).getroot()
    assert "projected by the lambda cost model" in "".join(root.itertext())
    text = subprocess.run([BIN, "plan", str(job)], capture_output=True, text=True, timeout=120, env=env)
    assert text.returncode == 0 and "cost model lambda" in text.stdout
    assert "projected wall time" in text.stdout
    # check proves the store takes writes: it cannot here, and says so in one line.
    c = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=120, env=env)
    assert c.returncode != 0 and "storage.url" in c.stderr, c.stderr
    assert len(c.stderr.strip().splitlines()) <= 2, c.stderr


def bar_frames(tmp_path, job):
    """Runs `job` on a terminal (a pty) with --stats: the progress bar's frames as
    (position, total, bytes moved) in block tasks, the report, and the notes on the line
    under the bar."""
    import pty
    stats = tmp_path / "stats.json"
    pid, fd = pty.fork()
    if pid == 0:  # the child: the real binary on a terminal
        os.chdir(tmp_path)
        os.execv(BIN, [BIN, "run", str(job), "--stats", str(stats)])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    _, status = os.waitpid(pid, 0)
    text = out.decode(errors="replace")
    assert os.waitstatus_to_exitcode(status) == 0, text
    frames = re.findall(r"(\d+)/(\d+) tasks, ([^\r\n\x1b]*?) moved, ETA ", text)
    assert frames, text
    assert all(int(p) <= int(n) for p, n, _ in frames), frames
    notes = re.findall(r"\s{2}(\w+: pass [^\r\n\x1b]*?)\s*\x1b", text)
    return frames, json.loads(stats.read_text()), notes


def test_progress_bar_total_covers_every_stage(tmp_path):
    """Under a terminal the bar's total counts the stage that counts the mask's selection
    per block and the main stage, in block tasks: it ends at N/N with N the tasks the run
    made, and shows bytes moved and an ETA."""
    frames, report, _ = bar_frames(tmp_path, mask_job(tmp_path))
    stages = {i["stage"] for i in report["timeline"]}
    assert "main" in stages and any(s.startswith("values-") for s in stages), stages
    last_pos, last_len, moved = frames[-1]
    assert int(last_pos) == int(last_len) == report["tasks"], (frames, report["tasks"])
    assert moved.endswith("B"), frames
    P = X[X[:, 0] > 0]
    assert_close(np.load(tmp_path / "s.npy"), P.sum(axis=0))


def test_progress_bar_counts_a_fits_passes(tmp_path):
    """The bar counts every task of a model's fit with the rest of the run: its total
    starts at the run `plan` projects (the fit's passes as assumed) and ends at the tasks
    run; a line under it says the pass, the iteration, the loss and the gradient."""
    y = (X[:, :5] @ np.array([1.0, -2.0, 0.5, 0.0, 1.0]) > 0).astype(np.float64)
    np.save(tmp_path / "X.npy", X[:, :5])
    np.save(tmp_path / "y.npy", y)
    arrays = {"X": {"load": "X.npy", "block": [100, 5]}, "y": {"load": "y.npy", "block": [100]},
              "w": "logistic_regression(X, y, solver='lbfgs', C=1.0, tol=1e-8)"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"w": "w.npy"}, name="fitbar"))
    planned = json.loads(cli("plan", "--json", job))["schedulers"][0]["run"]["tasks"]
    frames, report, notes = bar_frames(tmp_path, job)
    passes = sum(len(f["passes"]) for f in report["fits"])
    assert passes >= 3 and report["invocations"] > passes, report["fits"]
    last_pos, last_len, _ = frames[-1]
    assert int(last_pos) == int(last_len) == report["tasks"], frames[-3:]
    # Until the fit ends, the total is the run as planned: never the tasks so far.
    totals = [int(n) for p, n, _ in frames if int(p) > 0]
    assert totals[0] == planned, (planned, frames[:5])
    assert any(re.match(r"w: pass \d+ of \d+ assumed, iteration \d+: loss \S+, largest gradient \S+ \(tol 1e-8\)$", n)
               for n in notes), notes


def progress_lines(stderr):
    """The progress lines `NUMS_CLOUD_PROGRESS=1` writes to a pipe, as (stage, done,
    total, moved, eta)."""
    return re.findall(r"^progress: (.+?): (\d+)/(\d+) tasks, (.+?) moved, ETA (\S+(?: \S+)?)", stderr, re.M)


def test_progress_is_forced_to_a_pipe_by_the_environment(tmp_path):
    """`NUMS_CLOUD_PROGRESS=1` writes the progress to standard error when it is a pipe: a
    line at each stage's start (named as people say it: the mask's `values`, `main`),
    now and then between, and at the end, in block tasks of the plan's total; the last at
    N/N with N the tasks the run made, with the bytes moved. Without it a pipe gets none."""
    job = mask_job(tmp_path)
    stats = tmp_path / "stats.json"
    p = run(job, "--stats", stats, env={"NUMS_CLOUD_PROGRESS": "1"})
    report = json.loads(stats.read_text())
    lines = progress_lines(p.stderr)
    assert lines, p.stderr
    stages = [l[0] for l in lines]
    assert "values" in stages and "main" in stages, stages
    assert stages.index("values") < stages.index("main"), stages
    stage, done, total, moved, eta = lines[-1]
    assert int(done) == int(total) == report["tasks"], (lines, report["tasks"])
    assert moved.endswith("B") and moved != "0 B", lines[-1]
    assert all(int(d) <= int(t) for _, d, t, _, _ in lines), lines
    assert [int(d) for _, d, _, _, _ in lines] == sorted(int(d) for _, d, _, _, _ in lines), lines
    # Off: the default on a pipe, and with the variable at 0.
    for env in ({}, {"NUMS_CLOUD_PROGRESS": "0"}):
        quiet = run(job, env=env)
        assert "progress:" not in quiet.stderr, quiet.stderr


def test_one_set_of_function_processes_serves_every_stage_of_a_run(tmp_path):
    """A run that counts a large CSV's rows in the functions, fits a model and runs its main
    stage starts its local function processes once: `workers` of them, for every stage."""
    rng = np.random.default_rng(11)
    n = 500_000
    Xc = rng.normal(size=(n, 2))
    yc = (Xc @ np.array([1.0, -2.0]) + rng.normal(size=n) > 0).astype(np.float64)
    csv = tmp_path / "d.csv"
    np.savetxt(csv, np.c_[Xc, yc], delimiter=",", fmt="%.6f")
    assert csv.stat().st_size > 3 * (4 << 20)  # counted by the functions: 4 pieces or more
    starts = tmp_path / "starts"
    wrapper = tmp_path / "function.sh"
    wrapper.write_text(f"#!/bin/sh\necho $$ >> {starts}\nexec {BIN} function\n")
    wrapper.chmod(0o755)
    arrays = {"X": {"load": "d.csv", "usecols": [0, 1], "block": [125_000, 2]},
              "y": {"load": "d.csv", "usecols": [2], "block": [125_000]},
              "w": "logistic_regression(X, y, solver='lbfgs', tol=1e-6)",
              "s": "sum(X @ w[:-1] + w[-1] > 0)"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"s": "s.npy"}, name="one", compute={"workers": 2}))
    stats = tmp_path / "stats.json"
    run(job, "--stats", stats, env={"NUMS_CLOUD_FUNCTION": str(wrapper), "TMPDIR": str(isolated_tmp(tmp_path))})
    assert len(starts.read_text().split()) == 2, starts.read_text()
    report = json.loads(stats.read_text())
    stages = {i["stage"] for i in report["timeline"]}
    assert {"csv-count", "main"} <= stages and any(re.fullmatch(r"fit\d+-grad\d+-\d+", s) for s in stages), stages
    assert len(report["timeline"]) == report["invocations"]


def test_plan_svg_has_axes_values_and_both_schedulers_visible(tmp_path):
    import xml.etree.ElementTree as ET
    job = small_job(tmp_path, name="plansvg")
    svg = tmp_path / "plan.svg"
    cli("plan", job, "--svg", svg)
    plan = json.loads(cli("plan", "--json", job))
    ns = {"s": "http://www.w3.org/2000/svg"}
    root = ET.parse(svg).getroot()
    panels = root.findall(".//s:g[@class='plan']", ns)
    assert [g.get("data-scheduler") for g in panels] == ["lshs", "naive"]
    for g, sched in zip(panels, plan["schedulers"]):
        peaks = g.findall(".//s:line[@class='peak']", ns)
        assert len(peaks) == sched["invocations"]
        loads = g.findall(".//s:rect[@class='load']", ns)
        assert len(loads) == 2 * len(sched["loads"])
        # Each plan on its own scale: its longest bar fills most of its 170 px.
        assert max(float(r.get("width")) for r in loads) > 0.5 * 170, [r.get("width") for r in loads]
        texts = ["".join(t.itertext()) for t in g.iter("{http://www.w3.org/2000/svg}text")]
        unit = next(t for t in texts if t.startswith("store bytes per slot ("))[len("store bytes per slot ("):-1]
        assert unit in ("B", "kB", "MB", "GB"), texts
        assert "projected peak memory of each invocation (MiB), by slot, against memory_mb" in texts
        assert "memory_mb = 512 MiB" in texts and "slot 0" in texts
        assert any(t.startswith(f"{sched['scheduler']}, main stage: {sched['invocations']} invocations") for t in texts)
        values = [t for t in texts if t.startswith(("in ", "out "))]  # values on bars, in the axis' unit
        assert len(values) == len(loads) and all(t.endswith(f" {unit}") for t in values), (unit, values)


def test_shell_completions(tmp_path):
    bash = cli("completions", "bash")
    assert "timeline" in bash and "--stats" in bash and "completions" in bash
    p = subprocess.run(["bash", "-c", f"source <({BIN} completions bash) && complete -p nums-cloud"],
                       capture_output=True, text=True)
    assert p.returncode == 0 and "nums-cloud" in p.stdout, p.stderr
    assert "#compdef nums-cloud" in cli("completions", "zsh")
    assert "complete -c nums-cloud" in cli("completions", "fish")
    p = subprocess.run([BIN, "completions", "tcsh"], capture_output=True, text=True)
    assert p.returncode == 2 and "tcsh" in p.stderr


def test_a_lambda_failure_names_its_log_group_and_request_id(tmp_path):
    """The lambda backend (against the local Lambda-compatible endpoint): a failed
    invocation's error says where its logs are on AWS: the log group and request id."""
    from test_deploy import Endpoint, lambda_env
    job = small_job(tmp_path, name="lambdafail")
    text = job.read_text().replace("[compute]", '[compute]\nbackend = "lambda"\nfunction = "nums-obs"')
    job.write_text(text)
    script = tmp_path / "failing.py"
    script.write_text(FAILING_FUNCTION)
    with Endpoint([sys.executable, str(script)], function="nums-obs") as ep:
        p = run(job, check=False, env=lambda_env(ep.url))
    assert p.returncode == 1, p.stderr
    assert "deliberate failure (logs: CloudWatch log group /aws/lambda/nums-obs, request id " in p.stderr, p.stderr
    rid = p.stderr.split("request id ", 1)[1].split(")")[0]
    assert rid.endswith("-local") and rid != "unknown", rid
