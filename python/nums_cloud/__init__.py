"""nums-cloud: NumPy-like arrays far larger than one machine, computed by serverless
functions (AWS Lambda, or local function processes) over Zarr blocks in S3-compatible
storage, and small ones in this process.

``import nums_cloud.numpy as nps`` for the arrays (NumPy's and NumS's API),
``from nums_cloud.models import LogisticRegression`` for scikit-learn's estimators
(``nums_cloud.preprocessing.StandardScaler`` to scale their X), ``nums_cloud.init(...)`` for where they are stored and how they compute,
``nums_cloud.deploy(folder)`` (``python -m nums_cloud deploy``) to deploy on AWS Lambda.

This module imports no more than it must: the local backend's function processes import
it too (``python -m nums_cloud._function``)."""

from ._native import IN_PROCESS_BYTES, __version__
from ._arrays import explain, persist
from ._session import ENVIRONMENT, Session, close, init, memory_tier, session, settings

__all__ = ["init", "session", "settings", "close", "explain", "persist", "memory_tier",
           "read_csv", "read", "write", "Session", "ENVIRONMENT", "IN_PROCESS_BYTES", "RunError",
           "StoreError", "PlanError", "LinAlgError", "deploy", "DeployError", "__version__"]

_ERRORS = ("RunError", "StoreError", "PlanError", "LinAlgError")


def __getattr__(name):
    # The exceptions import NumPy (LinAlgError), deploy subprocess and zipfile: loaded when
    # first named.
    if name in _ERRORS:
        from . import _errors

        return getattr(_errors, name)
    if name in ("deploy", "DeployError"):
        from . import _deploy

        return getattr(_deploy, name)
    raise AttributeError(f"module 'nums_cloud' has no attribute {name!r}")


def read_csv(filename, has_header=False, delimiter=",", usecols=None, **kwargs):
    """Read a CSV file of numbers into an array, in parallel (NumS's ``nums.read_csv``;
    see ``nums_cloud.numpy.read_csv``, whose ``header`` and ``dtype`` it takes too)."""
    from .numpy import read_csv

    return read_csv(filename, has_header=has_header, delimiter=delimiter, usecols=usecols,
                    **kwargs)


def _nps(filename):
    """NumS's ``.nps`` names (its own format, a folder of blocks): here a folder holding a
    Zarr v3 array, ``<name>.nps/array``."""
    name = str(filename)
    return name.rstrip("/") + "/array" if name.rstrip("/").endswith(".nps") else name


def read(filename):
    """Read an array written by :func:`write` (NumS's ``nums.read``: a ``.nps`` name
    too), or any ``.npy``, ``.csv``, ``.parquet`` file or Zarr array
    (``nums_cloud.numpy.load``)."""
    from .numpy import load

    return load(_nps(filename))


def write(filename, x):
    """Write ``x`` to ``filename`` (NumS's ``nums.write``): a Zarr v3 array for a folder,
    an ``s3://`` path or NumS's ``.nps`` name (a folder holding the Zarr array), a
    ``.npy``, ``.csv`` or ``.parquet`` file by its suffix. Computed first if it is not.
    Returns ``x``."""
    from .numpy import save

    save(_nps(filename), x)
    return x
