"""The Array API standard's names in ``nums_cloud.numpy`` (as NumPy 2's namespace holds
them beside NumPy's own): ``__array_api_version__``, ``__array_namespace_info__``, the
dtype functions, and the standard's function names.

Each is lazy where the engine has the operation or it is built from the engine's
operations exactly (``pow``); the standard's names the engine's table
holds (``concat``, ``flip``, ``acos``, sorting, searching, sets, ...) are its. The rest —
functions the engine has no kernel for (``linalg.eigh``, ...) — compute their
arguments and apply NumPy's function in this process, and say so in their
docstrings (``EAGER`` lists them): correct, but not lazy and not distributed."""

import builtins

import numpy as np

from . import _array
from .. import _native
from ._array import BlockArray, asarray, call, dtype_name

__array_api_version__ = "2023.12"

_DTYPES = _array._DTYPES

# The standard's names that compute with NumPy in this process (no engine kernel).
EAGER = []

__all__ = [
    "__array_api_version__", "__array_namespace_info__", "EAGER",
    # data types and their functions
    "isdtype", "result_type", "can_cast", "finfo", "iinfo",
    # creation (meshgrid, tril and triu are the engine's, NumPy's signatures)
    "from_dlpack",
    # elementwise
    "pow",
    # (acos ... atanh, atan2, the bitwise functions and shifts, cosh, sinh, hypot, log2,
    # log10, logaddexp, nextafter, round, signbit, trunc, positive: the engine's, under
    # the same names in its table)
    # indexing, manipulation
    # (matrix_transpose and vecdot are the engine's)
    # (concat, flip, moveaxis, permute_dims, roll, unstack, astype, broadcast_to,
    # broadcast_arrays, matmul, take, repeat, searchsorted, searching, sets, sorting and cumulative functions are the
    # engine's: its table)
]


class _Info:
    """The namespace's inspection utilities (``__array_namespace_info__()``)."""

    def capabilities(self):
        """What the namespace supports: boolean indexing and data-dependent shapes (a
        mask, ``nonzero``: computed first), up to 32 dimensions."""
        return {"boolean indexing": True, "data-dependent shapes": True,
                "max dimensions": 32}

    def default_device(self):
        """The default device: ``"cpu"``."""
        return "cpu"

    def default_dtypes(self, *, device=None):
        """The default dtypes: float64, complex128, int64 for integers and indices."""
        return {k: np.dtype(v) for k, v in _native.default_dtypes()}

    def devices(self):
        """The devices arrays may be on: ``["cpu"]``."""
        return ["cpu"]

    def dtypes(self, *, device=None, kind=None):
        """The namespace's dtypes, by name (of ``kind`` when given, as ``isdtype``
        reads it)."""
        if kind is None:
            return dict(_DTYPES)
        return {n: d for n, d in _DTYPES.items() if isdtype(d, kind)}


def __array_namespace_info__():
    """The namespace's inspection utilities: capabilities, devices, dtypes."""
    return _Info()


def isdtype(dtype, kind):
    """Returns a boolean indicating whether a provided dtype is of a specified data type
    ``kind`` (a dtype, a kind's name, or a tuple of those): the engine's kinds."""
    if isinstance(kind, tuple):
        return builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        return _native.isdtype(dtype_name(dtype), kind)
    return dtype_name(dtype) == dtype_name(kind)


def _promotable(a):
    """``a`` as the engine's ``result_type`` takes it: arrays and NumPy scalars as they
    are (their dtype is strong), Python numbers as they are (weak, NEP 50), NumPy arrays
    and dtype-likes as dtype names."""
    if isinstance(a, BlockArray):
        return a._a
    if isinstance(a, (builtins.bool, builtins.int, builtins.float, complex, np.generic)):
        return a
    if isinstance(a, np.ndarray):
        return dtype_name(a.dtype)
    return dtype_name(a)


def result_type(*arrays_and_dtypes):
    """Returns the dtype that results from applying type promotion rules (NumPy 2's, the
    engine's) to the arguments."""
    return np.dtype(_native.result_type(*(_promotable(a) for a in arrays_and_dtypes)))


def can_cast(from_, to, /):
    """Determines if one data type can be cast to another (NumPy's "safe" casting, the
    engine's)."""
    f = from_.dtype if isinstance(from_, BlockArray) else from_
    return _native.can_cast(dtype_name(f), dtype_name(to))


class _FInfo:
    """Machine limits of a floating-point dtype, as the standard gives them: Python
    numbers (NumPy's ``finfo`` gives NumPy scalars), ``dtype`` the real dtype."""

    __slots__ = ("bits", "eps", "max", "min", "smallest_normal", "dtype")

    def __init__(self, f):
        self.bits = int(f.bits)
        self.eps, self.max, self.min = float(f.eps), float(f.max), float(f.min)
        self.smallest_normal = float(f.smallest_normal)
        self.dtype = f.dtype

    def __repr__(self):
        return (f"finfo(bits={self.bits}, eps={self.eps}, max={self.max}, min={self.min}, "
                f"smallest_normal={self.smallest_normal}, dtype={self.dtype})")


def finfo(type, /):
    """Machine limits for floating-point data types (Python numbers, as the standard
    says)."""
    return _FInfo(np.finfo(type.dtype if isinstance(type, BlockArray) else type))


def iinfo(type, /):
    """Machine limits for integer data types."""
    return np.iinfo(type.dtype if isinstance(type, BlockArray) else type)


def from_dlpack(x, /, *, device=None, copy=None):
    """An array of a DLPack-capable object's values (through NumPy)."""
    return asarray(np.from_dlpack(x))


def _eager(name, numpy_f=None, doc=None):
    """A function computed by NumPy in this process on its arguments' values: the
    engine has no kernel for it."""
    f_np = numpy_f or getattr(np, name)

    def f(*args, **kwargs):
        s = _array._session_of(*args)
        out = f_np(*_array._computed(args), **_array._computed(kwargs))
        return _wrap_values(out, s)

    f.__name__ = f.__qualname__ = name
    summary = (doc or (f_np.__doc__ or "").strip().split("\n\n")[0]
               if doc or getattr(f_np, "__doc__", None) else f"NumPy's ``{name}``.")
    lines = [ln.strip() for ln in summary.splitlines() if ln.strip()]
    if lines and lines[0].startswith(name + "("):
        lines = lines[1:]
    f.__doc__ = (" ".join(lines) or f"NumPy's ``{name}``.") + (
        "\n\nnums-cloud: computed by NumPy in this process on the arguments' values (the "
        "engine has no kernel for it): not lazy.")
    f._engine = True
    EAGER.append(name)
    return f


def _wrap_values(out, s):
    if isinstance(out, tuple):
        t = type(out)
        vals = [_wrap_values(v, s) for v in out]
        return t(*vals) if hasattr(out, "_fields") else tuple(vals)
    if isinstance(out, np.ndarray) or isinstance(out, np.generic):
        return _array.asarray(np.asarray(out), session=s)
    return out


# Elementwise functions built from the engine's, exactly.
def pow(x1, x2, /):
    """First array elements raised to powers from second array, element-wise."""
    return call("power", (x1, x2), {})


# The standard's asarray (eye's n_cols, reshape's order, clip's min/max and expand_dims'
# default axis are the engine's).
__all__ += ["asarray"]


_asarray = asarray


def asarray(obj, /, dtype=None, *, device=None, copy=None):  # noqa: F811
    """Convert the input to an array (nums-cloud arrays as they are, or with ``copy=True``
    a new array of the same node, which an in-place change of the other leaves; anything
    NumPy makes an array of as an input of those values)."""
    _array.check_device(device)
    r = _asarray(obj, dtype)
    return r.copy() if copy and r is obj else r


asarray._engine = True
