"""The wheel a user installs (issue 43, item 8): scripts/wheel.sh builds the abi3 wheel with
maturin and auditwheel, and it installs into a fresh venv on a PATH with no Rust toolchain,
then computes from there with nothing of this checkout on the path.

The wheel is built in the tests' own profile (`scripts/wheel.sh --dev`: test.sh's build
reused, only the binding crate linked again); the release wheel is the same script without
`--dev`. What is checked is the packaging: the tag, the libraries carried, the import from
site-packages, the function processes it starts, the results against NumPy; and the
deployment it carries (issue 43, item 7): the Lambda zip and infra/'s Terraform, which
`python -m nums_cloud deploy` writes to a folder and applies with terraform (here a
stand-in program, tests/nums.py: no AWS account), and whose outputs `init(infra=...)` takes.
"""
import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from nums import fake_terraform, terraform_calls

REPO = Path(__file__).resolve().parent.parent
ZIP = "nums_cloud/_lambda/bootstrap-x86_64.zip"


@pytest.fixture(scope="module")
def wheel():
    out = subprocess.run(["bash", str(REPO / "scripts" / "wheel.sh"), "--dev"], cwd=REPO,
                         capture_output=True, text=True, timeout=1800)
    assert out.returncode == 0, f"scripts/wheel.sh --dev failed:\n{out.stderr[-4000:]}"
    path = Path(out.stdout.strip().splitlines()[-1])
    return path if path.is_absolute() else REPO / path


def test_the_wheel_is_abi3_manylinux_and_carries_its_libraries(wheel):
    name = wheel.name
    assert name.startswith("nums_cloud-") and "-cp39-abi3-" in name, name
    assert "manylinux" in name, f"auditwheel did not tag {name} manylinux"
    files = zipfile.ZipFile(wheel).namelist()
    assert "nums_cloud/_native.abi3.so" in files
    assert "nums_cloud/numpy/__init__.py" in files and "nums_cloud/py.typed" in files
    libs = [f for f in files if f.startswith("nums_cloud.libs/")]
    # OpenBLAS travels with the wheel: the machine installing it need not have it.
    assert any("openblas" in f for f in libs), libs
    assert not any(f.endswith("_native.abi3.so") and f != "nums_cloud/_native.abi3.so" for f in files)
    assert len(files) == len(set(files)), "a file packed twice"


def test_the_wheel_carries_the_lambda_zip_and_the_terraform(wheel):
    with zipfile.ZipFile(wheel) as w:
        files = set(w.namelist())
        boot = zipfile.ZipFile(io.BytesIO(w.read(ZIP)))
        assert boot.namelist() == ["bootstrap"]
        assert (boot.getinfo("bootstrap").external_attr >> 16) & 0o777 == 0o755
        tf = sorted((REPO / "infra").rglob("*.tf"))
        assert len(tf) >= 5
        for f in tf:
            name = f"nums_cloud/_lambda/infra/{f.relative_to(REPO / 'infra')}"
            assert name in files and w.read(name) == f.read_bytes(), name
        sizes = {i.filename: (i.file_size, i.compress_size) for i in w.infolist()}
    print(f"\nwheel {wheel.stat().st_size} B; {ZIP}: {sizes[ZIP][1]} B packed; "
          f"bootstrap {boot.getinfo('bootstrap').file_size} B")


SESSION = r"""
import shutil, sys, tempfile
import numpy as np
import nums_cloud, nums_cloud.numpy as nps
assert shutil.which("cargo") is None and shutil.which("rustc") is None
assert "site-packages" in nums_cloud.__file__, nums_cloud.__file__
tmp = tempfile.mkdtemp()
# Nothing in this process: the session's local function processes run every compute.
nums_cloud.init(storage=f"file://{tmp}/store", workers=2, progress=False, in_process_mb=0)
rng = np.random.default_rng(1)
a = rng.standard_normal((300_000, 2))
x = nps.array(a)
got = ((x - x.mean(axis=0)) ** 2).sum(axis=0).get()
want = ((a - a.mean(axis=0)) ** 2).sum(axis=0)
np.testing.assert_allclose(got, want, rtol=1e-12)
q, r = np.linalg.qr(a[:2000])
np.testing.assert_allclose(np.abs(nps.linalg.qr(nps.array(a[:2000]))[1].get()), np.abs(r), rtol=1e-9, atol=1e-9)
# Function processes of this venv ran work (python -m nums_cloud._function from site-packages).
c = nums_cloud.session().counts()
assert c["invocations"] > c["in_process"], c
print("ok")
"""


@pytest.fixture(scope="module")
def venv(wheel, tmp_path_factory):
    """A fresh venv with the wheel installed: its python and an environment in which no
    cargo, rustc, terraform, AWS setting or this checkout can be found."""
    home = tmp_path_factory.mktemp("home")
    venv = home / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(home),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
           # Were anything to call AWS, it would reach a closed port here.
           "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_EC2_METADATA_DISABLED": "true"}
    inst = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], env=env,
                          cwd=home, capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stderr[-4000:]
    return py, env


def test_the_wheel_installs_and_computes_in_a_fresh_venv_without_rust(venv, tmp_path):
    py, env = venv
    run = subprocess.run([str(py), "-c", SESSION], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-4000:]}"
    assert run.stdout.startswith("ok"), run.stdout
    assert os.path.getsize(next((py.parent.parent / "lib").glob("**/nums_cloud/_native.abi3.so"))) > 0


INIT = r"""
import json, os, sys
import nums_cloud
assert "site-packages" in nums_cloud.__file__, nums_cloud.__file__
s = nums_cloud.init(infra=sys.argv[1], progress=False)
print(json.dumps({"settings": s.settings(), "AWS_REGION": os.environ.get("AWS_REGION"),
                  "AWS_PROFILE": os.environ.get("AWS_PROFILE")}))
"""


def test_deploy_from_the_installed_wheel(wheel, venv, tmp_path):
    py, env = venv
    (tmp_path / "aws-config").write_text("[profile analyst]\nregion = eu-central-1\n")
    log = tmp_path / "tf.log"
    bin_dir = fake_terraform(tmp_path / "bin")
    aws = {"AWS_PROFILE": "analyst", "AWS_CONFIG_FILE": str(tmp_path / "aws-config")}
    with_tf = dict(env, PATH=f"{bin_dir}:{env['PATH']}", FAKE_TF_LOG=str(log), **aws)

    def deploy(folder, *args, env):
        return subprocess.run([str(py), "-m", "nums_cloud", "deploy", str(folder), "--yes", *args],
                              env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)

    # The profile from AWS_PROFILE, its region from the AWS config file.
    folder = tmp_path / "deployment"
    p = deploy(folder, env=with_tf)
    assert p.returncode == 0, p.stderr
    calls = terraform_calls(log)
    assert [c["argv"][0] for c in calls] == ["init", "apply", "output"]
    assert "-auto-approve" in calls[1]["argv"]
    assert {(c["cwd"], c["AWS_PROFILE"], c["AWS_REGION"]) for c in calls} == {
        (str(folder), "analyst", "eu-central-1")}
    assert calls[1]["tfvars"] == {"region": "eu-central-1", "profile": "analyst",
                                  "architecture": "x86_64", "zip_path": "bootstrap-x86_64.zip"}
    # The wheel's zip and module, byte for byte.
    with zipfile.ZipFile(wheel) as w:
        assert (folder / "bootstrap-x86_64.zip").read_bytes() == w.read(ZIP)
    module = REPO / "infra" / "modules" / "nums-cloud"
    for tf in module.glob("*.tf"):
        assert (folder / "modules" / "nums-cloud" / tf.name).read_bytes() == tf.read_bytes()
    assert '"./modules/nums-cloud"' in (folder / "main.tf").read_text()
    out = folder / "terraform-output.json"
    assert json.loads(out.read_text())["region"]["value"] == "eu-central-1"
    assert f"nums_cloud.init(infra={str(out)!r})" in p.stdout

    # Arguments win over the environment.
    log.unlink()
    p = deploy(tmp_path / "second", "--region", "ap-south-1", "--profile", "ops",
               "--bucket", "my-bucket", "--memory-mb", "4096",
               env=dict(with_tf, AWS_REGION="us-west-2"))
    assert p.returncode == 0, p.stderr
    calls = terraform_calls(log)
    assert {(c["AWS_PROFILE"], c["AWS_REGION"]) for c in calls} == {("ops", "ap-south-1")}
    assert calls[-1]["tfvars"]["bucket_name"] == "my-bucket" and calls[-1]["tfvars"]["memory_mb"] == 4096
    second = tmp_path / "second" / "terraform-output.json"

    # init(infra=...) in the venv takes that file: the deployment, its region and profile.
    run = subprocess.run([str(py), "-c", INIT, str(second)], env=env, cwd=tmp_path,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-4000:]
    got = json.loads(run.stdout)
    s = got["settings"]
    assert (s["backend"], s["function"], s["storage"], s["memory_mb"]) == (
        "lambda", "nums-cloud", "s3://my-bucket/jobs", 4096)
    assert (got["AWS_REGION"], got["AWS_PROFILE"]) == ("ap-south-1", "ops")

    # No terraform on the PATH: a clear error, and the folder ready to apply by hand.
    p = deploy(tmp_path / "by-hand", env=dict(env, FAKE_TF_LOG=str(log), **aws))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert "terraform is not on the PATH: install Terraform" in p.stderr
    assert f"{tmp_path / 'by-hand'} holds the deployment" in p.stderr
    assert {f.name for f in (tmp_path / "by-hand").iterdir()} == {
        "main.tf", "modules", "bootstrap-x86_64.zip", "terraform.tfvars.json"}
