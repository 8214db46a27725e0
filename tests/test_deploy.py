"""Cloud deployment, tested with real parts and no AWS account:

- infra/: every .tf file parses (python-hcl2) and states the security properties the
  deployment promises; checkov finds no failed check (skips carry their reason inline).
- `nums-cloud package` builds the Lambda zip once; its `bootstrap` links nothing Amazon
  Linux 2023 lacks, and serves a job under the local Lambda-compatible endpoint through the
  lambda backend's own code path (aws-sdk-lambda pointed there by AWS_ENDPOINT_URL_LAMBDA).
- Confinement: the packaged function refuses a batch that names an array outside the job
  prefix, or another store than its deployment's, and writes nothing.
- Throttling: an endpoint that answers 429 TooManyRequestsException is backed off from and
  the job completes, the retries counted in --stats; a 4xx is not retried.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import hcl2
import numpy as np
import pytest

from nums import BIN, REPO, assert_close, job_text, run, snapshot

INFRA = REPO / "infra"
MODULE = INFRA / "modules" / "nums-cloud"
TF_FILES = sorted(INFRA.rglob("*.tf"))


# ------------------------------------------------------------------ Terraform

def norm(x):
    """checkov's python-hcl2 (bc-python-hcl2) wraps every attribute value, and every block,
    in a list: unwrap the one-element lists, drop its line markers."""
    if isinstance(x, dict):
        return {k: norm(v[0] if isinstance(v, list) and len(v) == 1 else v)
                for k, v in x.items() if not k.startswith("__")}
    if isinstance(x, list):
        return [norm(v) for v in x]
    return x


def load_tf(path):
    """A .tf file as python-hcl2 parses it; top-level kinds (resource, variable, ...) stay lists."""
    with open(path) as f:
        doc = hcl2.load(f)
    return {kind: [norm(b) for b in blocks] for kind, blocks in doc.items()}


def module():
    """The module's blocks by kind: resources[type][name], data[type][name], ..."""
    out = {"resource": {}, "data": {}, "variable": {}, "output": {}, "locals": {}}
    for path in sorted(MODULE.glob("*.tf")):
        doc = load_tf(path)
        for kind in ("resource", "data"):
            for block in doc.get(kind, []):
                for typ, named in block.items():
                    for name, body in named.items():
                        out[kind].setdefault(typ, {})[name] = body
        for kind in ("variable", "output"):
            for block in doc.get(kind, []):
                out[kind].update(block)
        for block in doc.get("locals", []):
            out["locals"].update(block)
    return out


def one(v):
    """python-hcl2 wraps nested blocks in lists."""
    return v[0] if isinstance(v, list) and len(v) == 1 else v


def statements(policy_doc):
    st = policy_doc["statement"]
    return [st] if isinstance(st, dict) else st


def actions(stmt):
    return set(stmt["actions"])


def test_every_tf_file_parses():
    assert len(TF_FILES) >= 5, TF_FILES
    for path in TF_FILES:
        doc = load_tf(path)
        assert doc, f"{path} parsed to nothing"


def test_bucket_is_private_encrypted_and_tls_only():
    m = module()
    r = m["resource"]
    pab = r["aws_s3_bucket_public_access_block"]["data"]
    for k in ("block_public_acls", "block_public_policy", "ignore_public_acls", "restrict_public_buckets"):
        assert pab[k] is True, k
    sse = one(one(r["aws_s3_bucket_server_side_encryption_configuration"]["data"]["rule"])[
        "apply_server_side_encryption_by_default"])
    assert sse["sse_algorithm"] in ("AES256", "aws:kms")
    deny = statements(m["data"]["aws_iam_policy_document"]["bucket"])
    tls = [s for s in deny if s.get("effect") == "Deny"]
    assert len(tls) == 1
    cond = one(tls[0]["condition"])
    assert (cond["test"], cond["variable"], cond["values"]) == ("Bool", "aws:SecureTransport", ["false"])
    assert tls[0]["actions"] == ["s3:*"]
    assert len(tls[0]["resources"]) == 2  # the bucket and its objects
    assert "aws_s3_bucket_policy" in r


def test_lifecycle_expires_intermediates_by_the_tag_the_store_writes():
    m = module()
    rules = [one(x) for x in m["resource"]["aws_s3_bucket_lifecycle_configuration"]["data"]["rule"]]
    tagged = [x for x in rules if "tag" in one(x["filter"] or [{}])]
    assert len(tagged) == 1
    tag = one(one(tagged[0]["filter"])["tag"])
    # The tag pair lives in the Rust store (one source of truth); the module must match it.
    src = (REPO / "layout" / "src" / "store" / "mod.rs").read_text()
    key, value = re.search(r'INTERMEDIATE_TAG: \(&str, &str\) = \("([^"]+)", "([^"]+)"\)', src).groups()
    tf_locals = m["locals"]["intermediate_tag"]
    assert (tf_locals["key"], tf_locals["value"]) == (key, value)
    assert tag["key"] == "${local.intermediate_tag.key}" and tag["value"] == "${local.intermediate_tag.value}"
    assert one(tagged[0]["expiration"])["days"] == "${var.intermediate_expiry_days}"
    assert tagged[0]["status"] == "Enabled"


def test_function_role_is_least_privilege():
    m = module()
    st = statements(m["data"]["aws_iam_policy_document"]["function"])
    by_sid = {s["sid"]: s for s in st}
    assert set(by_sid) == {"JobObjects", "ListJobPrefix", "OwnLogs"}
    assert actions(by_sid["JobObjects"]) == {"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"}
    assert by_sid["JobObjects"]["resources"] == ["${local.objects_arn}"]
    assert m["locals"]["objects_arn"] == "${aws_s3_bucket.data.arn}/${var.prefix}/*"
    assert actions(by_sid["ListJobPrefix"]) == {"s3:ListBucket"}
    assert by_sid["ListJobPrefix"]["resources"] == ["${aws_s3_bucket.data.arn}"]
    cond = one(by_sid["ListJobPrefix"]["condition"])
    assert (cond["test"], cond["variable"], cond["values"]) == ("StringLike", "s3:prefix", ["${local.list_prefix}"])
    assert m["locals"]["list_prefix"] == "${var.prefix}/*"
    assert actions(by_sid["OwnLogs"]) == {"logs:CreateLogStream", "logs:PutLogEvents"}
    assert by_sid["OwnLogs"]["resources"] == ["${aws_cloudwatch_log_group.function.arn}:*"]
    for s in st:
        assert s.get("effect", "Allow") == "Allow"
    # The role is the function's only one, assumable by Lambda alone.
    assume = statements(m["data"]["aws_iam_policy_document"]["assume"])
    assert [actions(s) for s in assume] == [{"sts:AssumeRole"}]
    assert one(assume[0]["principals"])["identifiers"] == ["lambda.amazonaws.com"]


def test_driver_policy_is_least_privilege():
    st = statements(module()["data"]["aws_iam_policy_document"]["driver"])
    by_sid = {s["sid"]: s for s in st}
    assert actions(by_sid["InvokeFunction"]) == {"lambda:InvokeFunction"}
    assert by_sid["InvokeFunction"]["resources"] == ["${aws_lambda_function.batch.arn}"]
    assert actions(by_sid["JobObjects"]) == {"s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"}
    assert by_sid["JobObjects"]["resources"] == ["${local.objects_arn}"]
    assert one(by_sid["ListJobPrefix"]["condition"])["variable"] == "s3:prefix"


def test_no_wildcard_grants_anywhere():
    """No Allow statement in any policy has a '*' in an action or a bare '*' resource."""
    m = module()
    for name, doc in m["data"]["aws_iam_policy_document"].items():
        for s in statements(doc):
            if s.get("effect", "Allow") != "Allow":
                continue
            for a in s["actions"]:
                assert "*" not in a, (name, a)
            for res in s.get("resources", []):
                assert res != "*", (name, res)


def test_function_and_logs_settings():
    m = module()
    fn = m["resource"]["aws_lambda_function"]["batch"]
    assert fn["runtime"] == "provided.al2023"
    assert fn["handler"] == "bootstrap"
    assert fn["architectures"] == ["${var.architecture}"]
    assert fn["memory_size"] == "${var.memory_mb}"
    assert fn["timeout"] == "${var.timeout_seconds}"
    assert fn["reserved_concurrent_executions"] == "${var.reserved_concurrency}"
    assert fn["filename"] == "${var.zip_path}"
    env = one(fn["environment"])["variables"]
    assert env["NUMS_ALLOWED_STORE"] == "s3://${aws_s3_bucket.data.id}/${var.prefix}"
    lg = m["resource"]["aws_cloudwatch_log_group"]["function"]
    assert lg["retention_in_days"] == "${var.log_retention_days}"
    assert m["variable"]["log_retention_days"]["default"] > 0
    assert one(fn["logging_config"])["log_group"] == "${aws_cloudwatch_log_group.function.name}"
    for v in ("memory_mb", "timeout_seconds", "architecture", "reserved_concurrency", "zip_path", "prefix"):
        assert v in m["variable"], v


def test_outputs_are_what_nums_cloud_reads():
    m = module()
    for o in ("function_name", "bucket", "region", "storage_url", "driver_policy_arn", "driver_policy_json"):
        assert o in m["output"], o
    example = load_tf(INFRA / "examples" / "basic" / "main.tf")
    outs = {k for block in example["output"] for k in block}
    # profile: what nums_cloud.init(infra=...) takes for AWS_PROFILE (tests/test_python_deploy.py).
    assert {"function_name", "bucket", "region", "storage_url", "profile"} <= outs
    mod = one(example["module"])["nums_cloud"]
    assert mod["source"] == "../../modules/nums-cloud"


def test_module_is_current_with_the_aws_provider_it_allows():
    """AWS provider 6 is the current major: both files allow it and only it, and nothing uses
    what 6.0 deprecated (a data source's region is `.region`; `.name` warns and will go)."""
    for path in (MODULE / "versions.tf", INFRA / "examples" / "basic" / "main.tf"):
        tf = one(load_tf(path)["terraform"])
        assert tf["required_providers"]["aws"]["version"] == ">= 6.0, < 7.0", path
    for path in TF_FILES:
        text = path.read_text()
        assert not re.search(r"data\.aws_region\.\w+\.name\b", text), path


def test_every_checkov_skip_has_a_reason():
    for path in TF_FILES:
        for line in path.read_text().splitlines():
            if "checkov:skip" in line:
                assert re.search(r"checkov:skip=CKV2?_AWS_\d+:\S.{20,}", line), f"{path}: {line.strip()}"


def test_checkov_reports_no_failed_check():
    checkov = Path(sys.executable).with_name("checkov")
    env = dict(os.environ, BC_SKIP_MAPPING="TRUE", CHECKOV_RUN_SCA_PACKAGE_SCAN_V2="false")
    p = subprocess.run(
        [str(checkov), "-d", str(INFRA), "--framework", "terraform", "--download-external-modules", "false",
         "--skip-download", "--quiet", "--compact", "-o", "json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    reports = json.loads(p.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failed = [(c["check_id"], c["resource"], c["file_path"]) for r in reports
              for c in r.get("results", {}).get("failed_checks", [])]
    assert failed == [], failed
    summary = reports[0]["summary"]
    assert summary["passed"] >= 40, summary
    skipped = [c for r in reports for c in r.get("results", {}).get("skipped_checks", [])]
    for c in skipped:
        assert len(c.get("check_result", {}).get("suppress_comment", "")) > 20, c["check_id"]


@pytest.mark.skipif(shutil.which("terraform") is None, reason="terraform is not installed (not in the registries CI reaches)")
def test_terraform_fmt_is_clean():
    p = subprocess.run(["terraform", "fmt", "-check", "-recursive", "-diff", str(INFRA)],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stdout + p.stderr


# ------------------------------------------------------------------ the packaged function

# Libraries every provided.al2023 environment has (glibc and libgcc); anything else would
# have to travel in the zip.
AL2023_LIBS = {"libc.so.6", "libm.so.6", "libgcc_s.so.1", "libpthread.so.0", "libdl.so.2",
               "librt.so.1", "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1"}
AL2023_GLIBC = (2, 34)


@pytest.fixture(scope="session")
def packaged(tmp_path_factory):
    """`nums-cloud package` once per session: the zip and its unzipped bootstrap."""
    out = tmp_path_factory.mktemp("lambda")
    t = time.monotonic()
    # lambda-check: the deployment binary linked the same way, without the fat-LTO build's
    # quarter hour; what these tests check does not depend on optimisation.
    p = subprocess.run([BIN, "package", "--arch", "x86_64", "--out", str(out), "--profile", "lambda-check"],
                       capture_output=True, text=True, timeout=2400, cwd=REPO)
    assert p.returncode == 0, p.stdout + p.stderr[-5000:]
    seconds = time.monotonic() - t
    zpath = out / "bootstrap-x86_64.zip"
    assert str(zpath) in p.stdout
    with zipfile.ZipFile(zpath) as z:
        assert z.namelist() == ["bootstrap"]
        info = z.getinfo("bootstrap")
        assert (info.external_attr >> 16) & 0o777 == 0o755
        z.extract("bootstrap", out / "unzipped")
    boot = out / "unzipped" / "bootstrap"
    boot.chmod(0o755)
    print(f"\npackage: {zpath.stat().st_size} B zip, {boot.stat().st_size} B bootstrap, {seconds:.0f} s")
    return zpath, boot


def test_bootstrap_needs_only_what_al2023_has(packaged):
    _, boot = packaged
    dyn = subprocess.run(["readelf", "-d", str(boot)], capture_output=True, text=True, check=True).stdout
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", dyn))
    assert needed and needed <= AL2023_LIBS, needed - AL2023_LIBS
    syms = subprocess.run(["objdump", "-T", str(boot)], capture_output=True, text=True, check=True).stdout
    versions = {tuple(int(x) for x in v.split(".")) for v in re.findall(r"GLIBC_(\d+\.\d+(?:\.\d+)?)", syms)}
    assert max(versions) <= AL2023_GLIBC, sorted(versions)[-3:]
    assert "cblas_dgemm" not in syms  # BLAS is inside the binary, not looked up at load time


class Endpoint:
    """`nums-cloud endpoint`: the local Lambda-compatible endpoint, with `command` as the
    function process, on 127.0.0.1; stopped (with its function processes) on exit."""

    def __init__(self, command, function="nums-pkg", workers=2, memory_mb=1024, env=None):
        args = [BIN, "endpoint", "--function", function, "--workers", str(workers),
                "--memory-mb", str(memory_mb), "--timeout-seconds", "120", "--command", *command]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=dict(os.environ, **(env or {})))
        line = self.proc.stdout.readline().strip()
        if not line.startswith("http://127.0.0.1:"):
            self.stop()
            raise AssertionError(f"endpoint did not start: {line!r} {self.proc.stderr.read()}")
        self.url = line
        self.function = function

    def invoke(self, payload):
        req = urllib.request.Request(f"{self.url}/2015-03-31/functions/{self.function}/invocations",
                                     data=json.dumps(payload).encode(), method="POST")
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.headers.get("X-Amz-Function-Error"), json.loads(r.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


def lambda_env(endpoint_url):
    """The lambda backend's AWS chain, pointed at a local endpoint with throwaway keys."""
    return {"AWS_ENDPOINT_URL_LAMBDA": endpoint_url, "AWS_ACCESS_KEY_ID": "test",
            "AWS_SECRET_ACCESS_KEY": "test", "AWS_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


rng = np.random.default_rng(5)
X = rng.normal(size=(7, 5))
W = rng.normal(size=(5, 4))


def numpy_job(tmp, function, name="pkg"):
    np.save(tmp / "x.npy", X)
    np.save(tmp / "w.npy", W)
    job = tmp / "job.toml"
    job.write_text(job_text(
        {"X": {"load": "x.npy", "block": [3, 4]}, "W": {"load": "w.npy", "block": [4, 3]},
         "Y": "exp(X @ W) + sum(X, axis=0) @ W", "s": "sum(X * X, axis=1)"},
        {"Y": "out/y.npy", "s": "out/s.npy"},
        name=name, storage={"url": "file://data"},
        compute={"backend": "lambda", "function": function, "workers": 2, "memory_mb": 1024}))
    want = {"Y": np.exp(X @ W) + X.sum(axis=0) @ W, "s": (X * X).sum(axis=1)}
    return job, want


def test_packaged_bootstrap_serves_a_job_through_the_lambda_backend(packaged, tmp_path):
    _, boot = packaged
    with Endpoint([str(boot)]) as ep:
        job, want = numpy_job(tmp_path, ep.function)
        t = time.monotonic()
        run(job, "--stats", str(tmp_path / "stats.json"), "--quiet", env=lambda_env(ep.url))
        print(f"\nlambda backend + packaged bootstrap: {time.monotonic() - t:.2f} s")
    assert_close(np.load(tmp_path / "out" / "y.npy"), want["Y"])
    assert_close(np.load(tmp_path / "out" / "s.npy"), want["s"])
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["backend"] == "lambda" and stats["invocations"] >= 1
    assert stats["retries"] == 0 and stats["peak_memory_bytes"] > 0


def meta(shape, block):
    return {"shape": shape, "block": block, "dtype": "float64"}


def fill_batch(store_url, arrays):
    """A batch that fills each array's only block with 1.0."""
    return {"inline": {
        "store": {"url": store_url}, "job_prefix": "job",
        "arrays": [{"path": p, "meta": meta([4], [4])} for p in arrays],
        "tasks": [{"kernel": "fill", "value": 1.0, "inputs": [], "output": {"array": i, "index": [0]}}
                  for i in range(len(arrays))]}}


def test_packaged_function_refuses_keys_outside_the_job_prefix(packaged, tmp_path):
    _, boot = packaged
    data = tmp_path / "data"
    data.mkdir()
    url = data.as_uri() + "/"
    allowed = {"NUMS_ALLOWED_STORE": url}
    with Endpoint([str(boot)], workers=1, env=allowed) as ep:
        before = snapshot(data)
        for bad in (["job/a", "other/x"], ["job/a", "job/../x"], ["/x"]):
            status, ferr, body = ep.invoke(fill_batch(url, bad))
            assert (status, ferr, body["errorType"]) == (200, "Unhandled", "OutsideJobPrefix"), (bad, body)
            assert "outside the job prefix" in body["errorMessage"]
        # A staged batch outside the prefix, and another store than the deployment's.
        status, ferr, body = ep.invoke({"stored": {"store": {"url": url}, "job_prefix": "job", "key": "other/b.json"}})
        assert body["errorType"] == "OutsideJobPrefix", body
        other = (tmp_path / "other").as_uri() + "/"
        status, ferr, body = ep.invoke(fill_batch(other, ["job/a"]))
        assert body["errorType"] == "OutsideJobPrefix", body
        assert not (tmp_path / "other").exists()
        assert snapshot(data) == before == {}
        # The control: the same batch inside the prefix runs and writes.
        status, ferr, body = ep.invoke(fill_batch(url, ["job/a", "job/x"]))
        assert ferr is None and body["tasks"] == 2, body
        assert any(k.startswith("job/x/") for k in snapshot(data))


# ------------------------------------------------------------------ throttling

class ThrottlingProxy:
    """A real HTTP endpoint on 127.0.0.1 in front of a Lambda-compatible one: it answers
    the first `throttle` invokes as Lambda does when throttled (429
    TooManyRequestsException), then forwards every invoke, answer and all."""

    def __init__(self, upstream, throttle):
        self.upstream, self.left, self.requests, self.bodies = upstream, throttle, 0, []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                with proxy.lock:
                    proxy.requests += 1
                    proxy.bodies.append(body)
                    throttled = proxy.left > 0
                    proxy.left -= throttled
                if throttled:
                    msg = json.dumps({"Type": "User", "message": "Rate Exceeded.",
                                      "Reason": "ReservedFunctionConcurrentInvocationLimitExceeded"}).encode()
                    self.send_response(429)
                    self.send_header("x-amzn-ErrorType", "TooManyRequestsException")
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(msg)))
                    self.end_headers()
                    self.wfile.write(msg)
                    return
                req = urllib.request.Request(proxy.upstream + self.path, data=body, method="POST")
                try:
                    with urllib.request.urlopen(req, timeout=120) as r:
                        status, headers, out = r.status, r.headers, r.read()
                except urllib.error.HTTPError as e:
                    status, headers, out = e.code, e.headers, e.read()
                try:
                    self.send_response(status)
                    for k in ("X-Amz-Function-Error", "X-Amz-Executed-Version", "x-amzn-ErrorType", "Content-Type"):
                        if headers.get(k):
                            self.send_header(k, headers[k])
                    self.send_header("Content-Length", str(len(out)))
                    self.end_headers()
                    self.wfile.write(out)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the driver stopped waiting (a job that failed on another batch)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def test_throttled_invocations_are_backed_off_and_the_job_completes(tmp_path):
    # The driver's own function loop: this test is about the dispatcher, not the zip.
    with Endpoint([BIN, "function"]) as ep, ThrottlingProxy(ep.url, throttle=3) as proxy:
        job, want = numpy_job(tmp_path, ep.function, name="throttled")
        t = time.monotonic()
        run(job, "--stats", str(tmp_path / "stats.json"), "--quiet", env=lambda_env(proxy.url))
        seconds = time.monotonic() - t
    assert_close(np.load(tmp_path / "out" / "y.npy"), want["Y"])
    assert_close(np.load(tmp_path / "out" / "s.npy"), want["s"])
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert stats["throttled"] == 3, stats
    assert stats["retries"] == 3, stats
    assert proxy.requests == stats["invocations"] + 3
    assert seconds < 60


def test_a_client_error_is_not_retried(tmp_path):
    with Endpoint([BIN, "function"]) as ep, ThrottlingProxy(ep.url, throttle=0) as proxy:
        job, _ = numpy_job(tmp_path, "no-such-function", name="notfound")
        p = run(job, "--quiet", env=lambda_env(proxy.url), check=False)
    assert p.returncode != 0
    assert "ResourceNotFoundException" in p.stderr and "after 1 attempt:" in p.stderr, p.stderr
    # Every batch sent at most once (the first batches may have been in flight together).
    assert 1 <= proxy.requests == len(set(proxy.bodies)) <= 2
