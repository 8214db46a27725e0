"""Helpers for end-to-end tests: write a job, run the real nums-cloud binary, read results."""
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
BIN = os.environ.get("NUMS_CLOUD_BIN", str(REPO / "target" / "debug" / "nums-cloud"))


def toml_value(v):
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + " }"
    return repr(v)


def run_measured(cmd, env=None):
    """Runs `cmd`, polling its peak RSS (VmHWM in /proc) until it exits; returns the
    CompletedProcess, its wall seconds and its peak RSS in MB."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env={**os.environ, **(env or {})})
    peak_kb = 0
    while p.poll() is None:
        try:
            with open(f"/proc/{p.pid}/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        peak_kb = max(peak_kb, int(line.split()[1]))
        except (FileNotFoundError, ProcessLookupError):
            pass
        time.sleep(0.02)
    out, err = p.communicate()
    done = subprocess.CompletedProcess(cmd, p.returncode, out, err)
    return done, time.perf_counter() - t0, peak_kb / 1024


def job_text(arrays, outputs, name="t", storage=None, compute=None):
    lines = [f"name = {json.dumps(name)}"]
    if storage:
        lines.append("[storage]")
        lines += [f"{k} = {toml_value(v)}" for k, v in storage.items()]
    lines.append("[compute]")
    compute = {"workers": 2, "memory_mb": 512, **(compute or {})}
    lines += [f"{k} = {toml_value(v)}" for k, v in compute.items()]
    lines.append("[arrays]")
    lines += [f"{k} = {toml_value(v)}" for k, v in arrays.items()]
    lines.append("[outputs]")
    lines += [f"{k} = {toml_value(v)}" for k, v in outputs.items()]
    return "\n".join(lines) + "\n"


def run(job_path, *args, env=None, check=True):
    """Runs `nums-cloud run job_path`; returns the CompletedProcess."""
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([BIN, "run", str(job_path), *args], capture_output=True, text=True, env=e, timeout=300)
    if check and p.returncode != 0:
        raise AssertionError(f"nums-cloud failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def assert_close(got, want, rtol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype or (got.dtype.kind == "f" and want.dtype.kind in "fiu"), f"dtype {got.dtype} != {want.dtype}"
    if want.dtype == bool:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-12 * max(1.0, float(np.max(np.abs(want))) if want.size else 1.0))


def snapshot(folder):
    """Every file under folder with its size and bytes' hash: to prove nothing changed."""
    import hashlib
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        if p.is_file():
            out[str(p.relative_to(folder))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


# A stand-in for the terraform binary (the test machines have no AWS account): a real
# program that logs each call (arguments, folder, the AWS variables it was given, the
# variables file it would read) to $FAKE_TF_LOG, asks before an apply without
# -auto-approve as terraform does (and logs the answer), and answers `output -json` with
# what infra/examples/basic outputs for those variables.
FAKE_TERRAFORM = r'''
import json, os, sys
from pathlib import Path
tfvars = Path("terraform.tfvars.json")
v = json.loads(tfvars.read_text()) if tfvars.is_file() else None
answer = None
if sys.argv[1:2] == ["apply"] and "-auto-approve" not in sys.argv:
    sys.stdout.write("Do you want to perform these actions?\n  Enter a value: ")
    sys.stdout.flush()
    answer = sys.stdin.readline().strip()
with open(os.environ["FAKE_TF_LOG"], "a") as f:
    f.write(json.dumps({"argv": sys.argv[1:], "cwd": os.getcwd(), "tfvars": v,
                        "answer": answer, "tty": sys.stdin.isatty(),
                        "AWS_PROFILE": os.environ.get("AWS_PROFILE"),
                        "AWS_REGION": os.environ.get("AWS_REGION")}) + "\n")
if answer not in (None, "yes"):
    print("Apply cancelled.")
    sys.exit(1)
if sys.argv[1:2] == ["output"]:
    bucket = v.get("bucket_name") or "nums-cloud-123456789012-" + v["region"]
    out = {"function_name": "nums-cloud", "bucket": bucket, "region": v["region"],
           "storage_url": f"s3://{bucket}/jobs", "memory_mb": v.get("memory_mb", 2048),
           "reserved_concurrency": 20,
           "driver_policy_arn": "arn:aws:iam::123456789012:policy/nums-cloud-driver"}
    if v.get("profile"):
        out["profile"] = v["profile"]
    print(json.dumps({k: {"sensitive": False, "type": "number" if isinstance(x, int) else "string",
                          "value": x} for k, x in out.items()}))
'''


def fake_terraform(folder, python=None):
    """Writes FAKE_TERRAFORM as `folder/terraform` (run by `python`); returns the folder."""
    import sys
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tf = folder / "terraform"
    tf.write_text(f"#!{python or sys.executable}\n{FAKE_TERRAFORM}")
    tf.chmod(0o755)
    return folder


def terraform_calls(log):
    """The calls FAKE_TERRAFORM logged."""
    return [json.loads(line) for line in Path(log).read_text().splitlines()]
