import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
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
