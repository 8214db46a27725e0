"""What users see of a run, end to end with the real binary: verbosity (-q, -v, RUST_LOG),
the local function processes' logs (removed after success, listed after a failure), the
per-invocation --stats records and the timeline SVG."""
import json
import sys
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
    # RUST_LOG wins over the default.
    filtered = run(job, env={**env, "RUST_LOG": "nums_cloud::run=debug"})
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
