"""``nums_cloud.numpy``: NumPy's API (and NumS's) over nums-cloud's lazy block arrays.

``import nums_cloud.numpy as nps`` and write NumPy: ``nps.random.rand(10**6, 8)``,
``x.T @ x``, ``nps.linalg.qr(x)``, ``x.sum(axis=0).get()``. Every function of the
engine's table is here under NumPy's name, with NumPy's parameters; arrays are lazy
(:class:`BlockArray`) and compute on ``.get()`` (a NumPy array back, without a copy),
``np.asarray(x)``, ``float(x)`` and the like, in this process when the work is small and
on the session's backend (local function processes or AWS Lambda) when it is not
(``nums_cloud.explain(x)`` says which). The session is ``nums_cloud.init``'s, or the
embedded default (a store under the user's cache folder and local functions).

It is also an Array API namespace (``__array_api_version__``, ``__array_namespace_info__``,
the standard's function names and dtype objects), as NumPy 2's namespace is.
"""

import builtins as _builtins
import sys as _sys

import numpy as _np

from .. import _session
from . import _array
from ._array import BlockArray, asarray, array
from ._table import _GENERATED, _LINALG, _TABLE, _engine, _numpy_doc  # noqa: F401

# The protocols of the arrays (NumPy's ufuncs and functions, the Array API's
# ``__array_namespace__``) dispatch to this namespace, which is built on them.
_array.set_namespace(_sys.modules[__name__])

# Dtypes: NumPy's own objects, so that ``x.dtype == nps.float64`` and
# ``x.dtype == np.float64`` both hold.
float64 = _np.float64
float32 = _np.float32
int8, int16, int32, int64 = _np.int8, _np.int16, _np.int32, _np.int64
uint8, uint16, uint32, uint64 = _np.uint8, _np.uint16, _np.uint32, _np.uint64
complex64, complex128 = _np.complex64, _np.complex128
bool_ = _np.bool_
bool = _np.bool_  # noqa: A001 (NumPy 2's and the Array API's name)
# NumS's names: ``nps.int`` and ``nps.float`` are the default integer and float dtypes.
int = _np.int64  # noqa: A001
float = _np.float64  # noqa: A001
dtype = _np.dtype

pi = _np.pi
e = _np.e
inf = _np.inf
nan = _np.nan
newaxis = None

ndarray = BlockArray


# The engine's function table, under NumPy's names (``_table``); the hand-written
# functions below and ``_api``'s names replace some of them.
globals().update(_GENERATED)

# NumPy's ufuncs that the engine has (``np.exp(x)``, ``np_array * x`` reach it).
_UFUNCS = {
    "add": "add", "subtract": "subtract", "multiply": "multiply", "divide": "divide",
    "true_divide": "divide", "power": "power", "floor_divide": "floor_divide",
    "remainder": "remainder", "maximum": "maximum", "minimum": "minimum",
    "equal": "equal", "not_equal": "not_equal", "less": "less", "less_equal": "less_equal",
    "greater": "greater", "greater_equal": "greater_equal", "logical_and": "logical_and",
    "logical_or": "logical_or", "logical_xor": "logical_xor", "logical_not": "logical_not",
    "negative": "negative", "absolute": "abs", "sign": "sign", "square": "square",
    "sqrt": "sqrt", "exp": "exp", "expm1": "expm1", "log": "log", "log1p": "log1p",
    "floor": "floor", "ceil": "ceil", "sin": "sin", "cos": "cos", "tan": "tan",
    "tanh": "tanh", "isnan": "isnan", "isfinite": "isfinite", "isinf": "isinf",
    "matmul": "matmul",
}
# NumPy's other ufuncs, by their own names, where the engine's table has them
# (``np.int64(3) & x`` is bitwise_and).
_ENGINE_NAMES = {n for _family, name, aliases, _p, _s, _a in _TABLE if _family != "models"
                 for n in (name, *aliases)}
_UFUNCS.update((n, n) for n in (
    "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift", "invert",
    "arctan2", "hypot", "exp2", "log2", "log10", "sinh", "cosh", "arcsin", "arccos",
    "arctan", "arcsinh", "arccosh", "arctanh", "trunc", "rint", "conjugate", "positive",
    "copysign", "nextafter", "signbit", "float_power", "fmax", "fmin", "cbrt",
    "reciprocal", "deg2rad", "rad2deg", "degrees", "radians", "heaviside", "logaddexp",
    "logaddexp2", "fmod") if n in _ENGINE_NAMES)

@_engine
def copy(a):
    """Return an array copy of the given object (a new array of the same node: an
    in-place change of one leaves the other)."""
    return asarray(a).copy()


@_engine
def shape(a):
    """Return the shape of an array."""
    return asarray(a).shape


@_engine
def ndim(a):
    """Return the number of dimensions of an array."""
    return asarray(a).ndim


@_engine
def size(a, axis=None):
    """Return the number of elements along a given axis."""
    a = asarray(a)
    return a.size if axis is None else a.shape[axis]


def get(*arrays):
    """The values of ``arrays`` (NumS's ``nps.get``), computed in one plan: a NumPy array
    for one array, a tuple for several."""
    if not arrays:
        raise TypeError("get() needs at least one array")
    arrs = [asarray(a) for a in arrays]
    vals = arrs[0]._s.compute_many([a._a for a in arrs])
    for a, v in zip(arrs, vals):
        a._keep(v)
    vals = [v[()] if v.ndim == 0 else v for v in vals]
    return vals[0] if len(vals) == 1 else tuple(vals)


# ``header`` not given: NumS's ``has_header`` decides.
_NO_HEADER_ARG = object()


def _csv_header(has_header, header):
    """Whether the first line names the columns: ``header`` as pandas takes it (0: the
    first line, None: no names), else NumS's ``has_header``."""
    if header is _NO_HEADER_ARG:
        return _builtins.bool(has_header)
    if isinstance(header, (_builtins.bool, _np.bool_)):
        raise TypeError("Passing a bool to header is invalid. Use header=None for no header "
                        "or header=0 for column names (as pandas.read_csv)")
    if header is None:
        if has_header:
            raise ValueError("has_header=True and header=None disagree: the first line "
                             "names the columns with header=0, none do with header=None")
        return False
    if header == "infer" or (isinstance(header, (_builtins.int, _np.integer)) and header == 0):
        return True
    raise ValueError(f"header={header!r}: nums-cloud reads column names from the first line "
                     "only: header=0 (the first line names the columns, as pandas' "
                     "header=0) or header=None (no line does)")


def _csv(filename, call, header, delimiter, usecols, pandas_usecols, dtype):
    """The engine's CSV read (``_native.Session.read_csv``) of NumPy's or pandas'
    arguments: ``usecols`` one column or several, by number or header name; ``dtype`` one
    dtype or a dict of column to dtype."""
    if delimiter is None or len(str(delimiter)) != 1:
        raise ValueError(f"delimiter={delimiter!r}: nums-cloud reads fields separated by "
                         "one character, such as delimiter=','")
    if usecols is not None and isinstance(usecols, (str, _builtins.int, _np.integer)):
        usecols = [usecols]
    cols = None if usecols is None else [
        c if isinstance(c, str) else _builtins.int(c) for c in usecols]
    one, per = None, []
    if isinstance(dtype, dict):
        per = [(c if isinstance(c, str) else _builtins.int(c), _array.dtype_name(d))
               for c, d in dtype.items()]
    elif dtype is not None:
        one = _array.dtype_name(dtype)
    s = _session.session()._native
    return BlockArray(s.read_csv(str(filename), header, str(delimiter), cols, pandas_usecols,
                                 one, per, call), s)


def read_csv(filename, has_header=False, delimiter=",", usecols=None, header=_NO_HEADER_ARG,
             dtype=None):
    """Read a CSV file of numbers into an array, in parallel by the functions (NumS's
    ``nums.read_csv``, with pandas' ``header``, ``usecols`` and ``dtype``). Local or
    ``s3://``.

    ``#`` comments and blank lines are skipped; missing values (an empty field, ``NA``,
    ``null``, ...) are NaN as pandas reads them (in a float column; an error in an int or
    bool one).

    Parameters
    ----------
    has_header : bool
        NumS's: the first line names the columns (default: it is data).
    header : {0, None}, optional
        pandas': 0, the first line names the columns; None, no line does. Given, it
        decides; other values (a bool, a later line) are refused.
    usecols : list of int or list of str, optional
        The columns kept, by number (negative from the end) or by header name, not
        both (as pandas); kept in the file's order, each once, as pandas keeps them.
    dtype : dtype or dict, optional
        The array's dtype (default float64), or a dtype per column (by name or number),
        as pandas takes it: each column's fields parse as its dtype (an int64 column
        refuses ``0.5`` and a missing value), and as an array has one dtype, the result's
        is NumPy's promotion of the kept columns' (float64 for those not named).
    """
    head = _csv_header(has_header, header)
    return _csv(filename, "read_csv", head, delimiter, usecols, True, dtype)


def loadtxt(fname, dtype=float, delimiter=",", skiprows=0, usecols=None):
    """Load data from a text file (NumPy's ``loadtxt`` for numeric CSV files; see
    :func:`read_csv`): ``usecols`` kept in the order given. ``skiprows`` may be 0 or 1 (a
    header line)."""
    if skiprows not in (0, 1):
        raise ValueError("nums-cloud's loadtxt skips at most one header line")
    return _csv(fname, "loadtxt", skiprows == 1, delimiter, usecols, False, dtype)


def genfromtxt(fname, dtype=float, delimiter=None, skip_header=0, usecols=None,
               filling_values=None):
    """Load data from a text file, with missing values handled as specified (NumPy's
    ``genfromtxt`` for numeric CSV files; see :func:`read_csv`): a missing value (an empty
    field, ``NA``, ``null``, ...) is NaN, or ``filling_values`` when given (a field that
    reads ``nan`` is filled too). ``delimiter`` must be given (one character: NumPy's
    default splits at any whitespace, which nums-cloud does not read); ``skip_header`` 0 or
    1 (a header line); ``usecols`` kept in the order given."""
    if skip_header not in (0, 1):
        raise ValueError("nums-cloud's genfromtxt skips at most one header line")
    x = _csv(fname, "genfromtxt", skip_header == 1, delimiter, usecols, False, dtype)
    if filling_values is None:
        return x
    return where(isnan(x), filling_values, x)  # noqa: F821 (the engine's, generated)


def load(file):
    """Load an array from a ``.npy``, ``.csv`` or ``.parquet`` file or a Zarr v2 or v3 array
    (a folder or an ``s3://`` URL); its metadata is read now, its values by the first
    compute that needs them (in parallel, block by block). A Zarr array, nums-cloud's or
    another tool's (zarr-python, xarray; zstd, blosc, gzip or no compression, C or F
    order), is read in place in its own chunks, never copied."""
    s = _session.session()._native
    return BlockArray(s.load(str(file)), s)


def save(file, arr):
    """Save an array to a ``.npy``, ``.csv`` or ``.parquet`` file, or as a Zarr v3 array (a
    folder, or ``s3://bucket/path``; ``.npy`` on S3 too, of at most 5 MiB): computed first
    if it is not (NumPy's ``np.save(file, arr)`` order)."""
    a = asarray(arr)
    a._s.save(a._a, str(file))


from . import fft, lib, linalg, random  # noqa: E402  (they use the table above)
from ._api import *  # noqa: E402,F401,F403  (the Array API's names)
from ._api import __array_api_version__, __array_namespace_info__  # noqa: E402,F401

