"""The wheel a user installs (issue 43, item 8): scripts/wheel.sh builds the abi3 wheel with
maturin and auditwheel, and it installs into a fresh venv on a PATH with no Rust toolchain,
then computes from there with nothing of this checkout on the path.

The wheel is built in the tests' own profile (`scripts/wheel.sh --dev`: test.sh's build
reused, only the binding crate linked again); the release wheel is the same script without
`--dev`. What is checked is the packaging: the tag, the libraries carried, the import from
site-packages, the function processes it starts, the results against NumPy.
"""
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


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


def test_the_wheel_installs_and_computes_in_a_fresh_venv_without_rust(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    # No cargo, rustc or this checkout anywhere the install or the session could find them.
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "HOME": str(tmp_path),
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip")}
    inst = subprocess.run([str(py), "-m", "pip", "install", "--quiet", str(wheel)], env=env,
                          cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert inst.returncode == 0, inst.stderr[-4000:]
    run = subprocess.run([str(py), "-c", SESSION], env=env, cwd=tmp_path, capture_output=True,
                         text=True, timeout=600)
    assert run.returncode == 0, f"stdout:\n{run.stdout[-2000:]}\nstderr:\n{run.stderr[-4000:]}"
    assert run.stdout.startswith("ok"), run.stdout
    assert os.path.getsize(next((venv / "lib").glob("**/nums_cloud/_native.abi3.so"))) > 0
