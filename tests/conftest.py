import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
# The Python package of this checkout (python/, its extension linked there by
# scripts/test.sh), for the tests and the function processes their sessions start
# (`python -m nums_cloud._function`), whatever else the venv has on its path.
_PACKAGE = str(Path(__file__).resolve().parent.parent / "python")
sys.path.insert(0, _PACKAGE)
os.environ["PYTHONPATH"] = os.pathsep.join(
    p for p in (_PACKAGE, os.environ.get("PYTHONPATH")) if p)
from garage import Garage  # noqa: E402


@pytest.fixture(scope="session")
def garage():
    """One real Garage S3 server on 127.0.0.1 for the whole session, stopped at the end."""
    try:
        server = Garage()
    except FileNotFoundError as e:
        pytest.fail(f"{e} (or set NUMS_GARAGE_BIN)", pytrace=False)
    with server as g:
        yield g


@pytest.fixture
def session(tmp_path):
    """A session of the package in this checkout, storing under the test's folder: 2
    workers of 512 MB (the tests' common one; a module's own fixture overrides it)."""
    import nums_cloud

    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=512,
                        progress=False)
    yield s
    s.close()
