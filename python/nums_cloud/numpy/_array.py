"""``BlockArray``: a lazy array of a nums-cloud session, with NumPy's operators, indexing,
attributes and methods. Operations add nodes to the session's graph at once (shapes and
dtypes checked as NumPy checks them: a refused operation raises there); values are
computed by ``get()``, ``np.asarray(x)``, ``float(x)`` and the like, and stay in the
session's store for later expressions."""

import contextlib
import contextvars
import itertools
import operator

import numpy as np

from .. import _native, _session

__all__ = ["BlockArray", "asarray", "array", "to_native_arg"]

#: The most bytes of values an array keeps once fetched (larger ones are read from the
#: store at each use, in their blocks).
KEEP_BYTES = 256 << 20

#: An index of a lazy array at most this large computes the whole array once, not
#: itself: ``[float(y[i]) for i in range(len(y))]`` is one compute.
SMALL_BYTES = 8 << 20

# NumPy's dtypes for the engine's dtype names (its list), and back.
_DTYPES = {name: np.dtype(name) for name in _native.dtypes()}
_SUPPORTED = frozenset(_DTYPES.values())

#: ``nums_cloud.numpy``: the namespace built on these arrays, which hands itself here
#: (:func:`set_namespace`) as it is imported. The arrays' protocols dispatch to it:
#: NumPy's ``__array_ufunc__`` and ``__array_function__``, the Array API's
#: ``__array_namespace__``.
_namespace = None


#: What refuses NumPy's fallback now (see :func:`lazy_only`), or None.
_LAZY_ONLY = contextvars.ContextVar("nums_cloud_lazy_only", default=None)


@contextlib.contextmanager
def lazy_only(what):
    """Within it, computing an array's values in this process (NumPy's fallback for a
    function the engine lacks, ``np.asarray(x)``, ``float(x)``, ``x.compute()``) raises
    NotImplementedError naming ``what``: for callers that hand a function lazy arrays
    and must know that it ran on the engine (xarray's ``apply_gufunc``)."""
    token = _LAZY_ONLY.set(what)
    try:
        yield
    finally:
        _LAZY_ONLY.reset(token)


def _refuse_values(how):
    what = _LAZY_ONLY.get()
    if what is not None:
        raise NotImplementedError(
            f"{what} would compute values in this process ({how}): nums-cloud runs only "
            "functions its engine has")


def set_namespace(module):
    """Makes ``module`` the namespace the arrays' protocols dispatch to."""
    global _namespace
    _namespace = module


def dtype_name(dtype):
    """The engine's name of a dtype-like (``np.float32``, ``"int64"``, ``float``,
    ``nps.float64``): NumPy reads the Python object, the engine the name (TypeError for
    a dtype nums-cloud does not have)."""
    if isinstance(dtype, str) and dtype in _DTYPES:
        return dtype
    try:
        d = np.dtype(dtype)
    except TypeError:
        raise TypeError(f"data type {dtype!r} not understood") from None
    return _native.dtype_name(str(d))


def _engine_values(a):
    """A NumPy array in a dtype nums-cloud has: NumPy's own where it is one, float16 as
    float32 (the dtype NumPy would promote it to); TypeError for the others (strings,
    objects, dates)."""
    d = a.dtype
    if d in _SUPPORTED:
        return a
    if d.kind == "f" and d.itemsize < 4:
        return a.astype(np.float32)
    _native.dtype_name(str(d))  # the engine's TypeError
    raise TypeError(f"nums-cloud has no dtype {d}")


def asarray(obj, dtype=None, *, session=None):
    """``obj`` as a nums-cloud array: an array of nums-cloud as it is (converted when
    ``dtype`` differs), anything NumPy makes an array of (NumPy arrays, lists, scalars)
    as an input of those values."""
    if isinstance(obj, BlockArray):
        if dtype is not None and dtype_name(dtype) != obj._a.dtype:
            return obj.astype(dtype)
        return obj
    s = session if session is not None else _session.session()._native
    a = np.asarray(obj, dtype=None if dtype is None else dtype_name(dtype))
    a = _engine_values(a)
    return BlockArray(s.from_numpy(a), s)


def array(obj, dtype=None, copy=True, ndmin=0):
    """Create an array (NumPy's ``np.array``): from a NumPy array, a list, a scalar or a
    nums-cloud array (with ``copy``, a new array of its node: an in-place change of one
    leaves the other). ``ndmin`` prepends axes of length 1."""
    a = asarray(obj, dtype)
    if ndmin > a.ndim:
        a = a.reshape((1,) * (ndmin - a.ndim) + a.shape)
    elif copy and a is obj:
        a = a.copy()
    return a


def _session_of(*args):
    """The native session of the first nums-cloud array among ``args`` (lists searched),
    else the current one."""
    for a in args:
        if isinstance(a, BlockArray):
            return a._s
        if isinstance(a, (list, tuple)):
            for x in a:
                if isinstance(x, BlockArray):
                    return x._s
    return _session.session()._native


def to_native_arg(v, s):
    """A Python value as the native layer takes it: nums-cloud arrays as their nodes,
    NumPy arrays as inputs, NumPy scalars as they are (the native layer keeps their
    dtype), dtypes as names, tuples and lists item by item."""
    t = type(v)
    if t is BlockArray:
        return v._a
    if t in (int, float, bool, complex, str) or v is None or v is Ellipsis or t is slice:
        return v
    if isinstance(v, np.ndarray):
        return asarray(v, session=s)._a
    if isinstance(v, np.generic):
        # The native layer keeps its dtype (NEP 50: np.int32(-1) promotes as int32).
        return v
    if isinstance(v, (list, tuple)):
        return t(to_native_arg(x, s) for x in v) if t in (list, tuple) else list(
            to_native_arg(x, s) for x in v)
    if isinstance(v, (np.dtype, type)):
        return dtype_name(v)
    if isinstance(v, BlockArray):
        return v._a
    if hasattr(v, "__index__"):
        return operator.index(v)
    if isinstance(v, float):
        return float(v)
    return v


def wrap(v, s):
    """A value of the native layer as Python's: arrays as :class:`BlockArray`, tuples
    (with field names: NumPy's named tuples) item by item, numbers as they are."""
    if isinstance(v, _native.Array):
        return BlockArray(v, s)
    if isinstance(v, tuple) and len(v) == 2 and (v[0] is None or isinstance(v[0], tuple)):
        names, values = v
        values = tuple(wrap(x, s) for x in values)
        if names is None:
            return values
        return _named_tuple(names)(*values)
    return v


_NAMED = {}


def _named_tuple(names):
    import collections

    t = _NAMED.get(names)
    if t is None:
        t = _NAMED[names] = collections.namedtuple("Result", names, rename=True)
    return t


def check_device(device):
    """The standard's ``device=``: nums-cloud's one device is ``"cpu"``."""
    if device not in (None, "cpu"):
        raise ValueError(f"nums-cloud arrays are on device 'cpu', not {device!r}")


def call(name, args, kwargs):
    """``name(*args, **kwargs)`` of the engine's function table, in the session of the
    first array argument (else the current one). The standard's ``device=`` is taken
    (``"cpu"``) and its ``copy=`` ignored (a result is a new array)."""
    if kwargs and ("device" in kwargs or "copy" in kwargs):
        kwargs = dict(kwargs)
        check_device(kwargs.pop("device", None))
        kwargs.pop("copy", None)
    s = _session_of(*args)
    a = [to_native_arg(x, s) for x in args]
    kw = {k: to_native_arg(v, s) for k, v in kwargs.items()} if kwargs else None
    return wrap(s.call(name, a, kw), s)


def _operand(o, s):
    """The other side of an operator, or NotImplemented."""
    t = type(o)
    if t is BlockArray:
        return o._a
    if t is float or t is int or t is bool or t is complex:
        return o
    if isinstance(o, np.generic):
        return o  # its dtype kept (NEP 50), see to_native_arg
    if isinstance(o, (np.ndarray, list, tuple)):
        return asarray(o, session=s)._a
    if isinstance(o, BlockArray):
        return o._a
    if isinstance(o, (int, float, complex)):
        return o
    return NotImplemented


def _binary(sym, doc):
    def f(self, o):
        n = _operand(o, self._s)
        if n is NotImplemented:
            return NotImplemented
        return BlockArray(self._a.op(sym, n), self._s)

    def r(self, o):
        n = _operand(o, self._s)
        if n is NotImplemented:
            return NotImplemented
        return BlockArray(self._a.rop(sym, n), self._s)

    f.__doc__ = f"Return self{sym}value. {doc}"
    r.__doc__ = f"Return value{sym}self. {doc}"
    return f, r


class BlockArray:
    """A lazy array of a nums-cloud session, split into blocks stored as Zarr arrays.

    It behaves as a NumPy array does: operators (reflected ones too), indexing and
    slicing, ``.T``, ``.shape``, ``.dtype``, ``.sum(axis=...)`` and the other methods, with
    NumPy's broadcasting and dtype rules, checked when the operation is written. Nothing
    runs until its values are asked for: ``x.get()`` (NumS's name), ``x.compute()``,
    ``np.asarray(x)``, ``float(x)``, ``int(x)``, ``bool(x)``. A computed array stays in the
    session's store, and later expressions read it in place.

    Made by the functions of ``nums_cloud.numpy`` (``nps.array``, ``nps.zeros``,
    ``nps.random.rand``, ``nps.read_csv``, ...), never directly."""

    __slots__ = ("_a", "_s", "_v", "_of", "__weakref__")
    # NumPy defers to these operators when a NumPy array is on the left.
    __array_priority__ = 1000

    def __init__(self, a, s, values=None):
        self._a = a
        self._s = s
        # Its values once fetched (read-only): element access, iteration, ``np.asarray``
        # and printing read them here instead of computing again. An in-place change
        # (``_become``) drops them with the node.
        self._v = values
        # (array, its node, key) when it is a basic index of a small array: its values
        # are then that array's, computed once for every element a loop asks for (while
        # that array keeps the node).
        self._of = None

    # Attributes, from the graph (nothing runs).
    @property
    def shape(self):
        """Tuple of array dimensions."""
        return self._a.shape

    @property
    def dtype(self):
        """Data-type of the array's elements (a NumPy dtype)."""
        return _DTYPES[self._a.dtype]

    @property
    def ndim(self):
        """Number of array dimensions."""
        return self._a.ndim

    @property
    def size(self):
        """Number of elements in the array."""
        return self._a.size

    @property
    def itemsize(self):
        """Length of one array element in bytes."""
        return self.dtype.itemsize

    @property
    def nbytes(self):
        """Total bytes consumed by the elements of the array."""
        return self.size * self.dtype.itemsize

    @property
    def block_shape(self):
        """The shape of its blocks (the last ones along each axis may be smaller)."""
        return self._a.blocks

    @property
    def chunks(self):
        """Its blocks' lengths along each axis (Dask's ``chunks``, which xarray reads to
        know a chunked array): each a run of ``block_shape``'s length, the last one
        shorter where the axis does not divide evenly."""
        return tuple(_runs(n, b) for n, b in zip(self._a.shape, self._a.blocks))

    @property
    def computed(self):
        """Whether its values are in the session's store (computed, or read in place)."""
        return self._a.computed

    @property
    def T(self):
        """View of the transposed array (axes reversed)."""
        return BlockArray(self._a.T, self._s)

    @property
    def mT(self):
        """The transpose of each matrix in a stack (the last two axes swapped)."""
        if self.ndim < 2:
            raise ValueError("matrix transpose with ndim < 2 is undefined")
        return self.swapaxes(-1, -2)

    @property
    def real(self):
        """The real part (the array itself for real dtypes), lazily: the engine's ``real``."""
        return self._call("real")

    @property
    def imag(self):
        """The imaginary part (zeros for real dtypes), lazily: the engine's ``imag``."""
        return self._call("imag")

    def conj(self):
        """The complex conjugate, lazily: the engine's ``conj``."""
        return self._call("conj")

    conjugate = conj

    @property
    def device(self):
        """The device the array is on: ``"cpu"`` (its session's functions)."""
        return "cpu"

    def to_device(self, device, /, *, stream=None):
        """The array on ``device``; nums-cloud has one, ``"cpu"``."""
        if device != "cpu":
            raise ValueError(f"nums-cloud arrays are on device 'cpu', not {device!r}")
        return self

    def __array_namespace__(self, *, api_version=None):
        """The Array API namespace of the array: ``nums_cloud.numpy``."""
        if api_version not in (None, "2021.12", "2022.12", "2023.12", "2024.12"):
            raise ValueError(f"unsupported Array API version {api_version!r}")
        return _namespace

    # DLPack: the computed values, as NumPy exports them (read-only, on the CPU).
    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        """Exports the array's values (computed first) as a DLPack capsule: NumPy's
        export of them, read-only (a copy for a consumer that asks for one, or that
        cannot be told: DLPack before 1.0)."""
        kw = {"stream": stream}
        for k, v in (("max_version", max_version), ("dl_device", dl_device), ("copy", copy)):
            if v is not None:
                kw[k] = v
        v = self._values()
        if not v.flags.writeable and (max_version is None or max_version[0] < 1):
            # A consumer of DLPack before 1.0 cannot be told the buffer is read-only (it
            # may write to it): it gets a copy, never the values kept with the array.
            v = v.copy()
        return v.__dlpack__(**kw)

    def __dlpack_device__(self):
        """The device the values are on: the CPU (DLPack's kDLCPU, 1)."""
        return (1, 0)

    # Values: computed on demand, once per array.
    def _values(self):
        """Its values, read-only: computed the first time and kept with the array when at
        most ``KEEP_BYTES`` (larger ones are computed, then read from the store, again)."""
        if self._v is None and self._of is not None:
            of, node, key = self._of
            if of._a is not node:
                # ``of`` was changed in place since: its values are not this array's.
                self._of = None
                return self._values()
            v = _frozen(of._values()[key])
            if v.shape == self.shape and v.dtype == self.dtype:
                self._v = v
        if self._v is None:
            _refuse_values("its values asked for")
            v = self._a.compute()
            if v.nbytes > KEEP_BYTES:
                return v
            self._v = _frozen(v)
        return self._v

    def _keep(self, v):
        """Keeps a copy of values computed for it elsewhere (``nps.get`` of several
        arrays, whose caller owns ``v``)."""
        if self._v is None and v.nbytes <= KEEP_BYTES:
            self._v = _frozen(v.copy())

    def compute(self):
        """Computes the array (and what it needs that is not stored yet) and returns its
        values as a NumPy array of the caller's own: the engine's buffer, not a copy (the
        array keeps a copy of small values, and hands out copies of values it keeps)."""
        if self._v is not None:
            return self._v.copy()
        _refuse_values("compute()")
        v = self._a.compute()
        if v.nbytes <= SMALL_BYTES:
            self._v = _frozen(v.copy())
        return v

    def get(self):
        """The array's values (NumS's ``get``): a NumPy array, or a NumPy scalar for a
        0-d array."""
        v = self.compute()
        return v[()] if v.ndim == 0 else v

    def to_numpy(self, dtype=None, copy=False):
        """The values as a NumPy array (pandas' and xarray's name, which matplotlib and
        seaborn look for): computed once, then read from memory."""
        v = self._values()
        if dtype is not None and v.dtype != np.dtype(dtype):
            return v.astype(dtype)
        return v.copy() if copy or not v.flags.writeable else v

    def persist(self):
        """Computes it now and keeps it in the session's store (as every compute does);
        returns it."""
        self._s.persist(self._a)
        return self

    def __array__(self, dtype=None, copy=None):
        # NumPy 2's protocol: without copy=True, the kept values themselves (read-only).
        _refuse_values("np.asarray of an array")
        v = self._values()
        if dtype is not None and v.dtype != np.dtype(dtype):
            return v.astype(dtype)
        return v.copy() if copy else v

    def _scalar(self, kind):
        _refuse_values(f"{kind}() of an array")
        if self.size != 1:
            if kind == "bool":
                raise ValueError("The truth value of an array with more than one element is "
                                 "ambiguous. Use a.any() or a.all()")
            raise TypeError("only length-1 arrays can be converted to Python scalars")
        return self._values().reshape(()).item()

    def __float__(self):
        return float(self._scalar("float"))

    def __int__(self):
        return int(self._scalar("int"))

    def __bool__(self):
        return bool(self._scalar("bool"))

    def __complex__(self):
        return complex(self._scalar("complex"))

    def __index__(self):
        if self.dtype.kind not in "iub" or self.ndim != 0:
            raise TypeError("only integer scalar arrays can be converted to a scalar index")
        return int(self._scalar("int"))

    def item(self, *args):
        """The element as a Python scalar (the only one, or at ``args``)."""
        if args:
            return self[args if len(args) > 1 else args[0]].item()
        return self._scalar("scalar")

    def tolist(self):
        """The values as nested Python lists."""
        return self._values().tolist()

    def __len__(self):
        if self.ndim == 0:
            raise TypeError("len() of unsized object")
        return self.shape[0]

    def __iter__(self):
        # One compute for the whole array, then each element from its values.
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        v = _frozen(self._values())
        a, s = self._a, self._s
        for i in range(self.shape[0]):
            yield BlockArray(a.index([i]), s, _frozen(v[i]))

    def _summary(self):
        """What NumPy prints of it: the whole when small, else its edges (``edgeitems``
        of each end of every axis, from the edge blocks only) in an array of the same
        ndim whose middle NumPy replaces with ``...``."""
        opts = np.get_printoptions()
        if self._v is not None or self.size <= opts["threshold"]:
            return self._values(), {}
        e = opts["edgeitems"]
        cut = [n > 2 * e for n in self.shape]
        # Each corner of the edges: per axis the first e, or the last e, where it is cut.
        corners, keys = [], []
        for pick in itertools.product(*[(0, 1) if c else (0,) for c in cut]):
            key = tuple(slice(None) if not c else (slice(None, e) if p == 0 else slice(-e, None))
                        for c, p in zip(cut, pick))
            keys.append(pick)
            corners.append(self[key])
        vals = dict(zip(keys, _namespace.get(*corners) if len(corners) > 1
                        else (_namespace.get(*corners),)))
        # Assembled with one element between the edges, which NumPy shows as `...`.
        shape = tuple(2 * e + 1 if c else n for c, n in zip(cut, self.shape))
        out = np.empty(shape, self.dtype)
        for pick, v in vals.items():
            key = tuple(slice(None) if not c else (slice(None, e) if p == 0 else slice(-e, None))
                        for c, p in zip(cut, pick))
            out[key] = v
        # The middle: any shown value (it is never printed, nor sizes the columns).
        mid = tuple(slice(e, e + 1) if c else slice(None) for c in cut)
        out[mid] = out[tuple(slice(0, 1) if c else slice(None) for c in cut)]
        return out, {"threshold": 0, "edgeitems": e}

    def __repr__(self):
        a = self._a
        if self._v is None and not a.computed:
            return (f"BlockArray(shape={a.shape}, dtype={a.dtype}, blocks={a.blocks}, "
                    f"lazy: {a.label})")
        v, opts = self._summary()
        with np.printoptions(**opts):
            text = np.array_repr(v)
        if opts:
            # NumPy 2 says the shape of a summarised array: the array's, not the edges'.
            text = text.replace(f"shape={v.shape}", f"shape={self.shape}")
        return "BlockArray" + text[len("array"):]

    def __str__(self):
        v, opts = self._summary()
        with np.printoptions(**opts):
            return np.array2string(v) if v.ndim else str(v[()])

    def _repr_html_(self):
        """Jupyter's view: shape, dtype, blocks, bytes, and the block grid, without
        computing anything."""
        from . import _html
        return _html.summary(self)

    def __format__(self, spec):
        if self.ndim == 0:
            return format(self.get(), spec)
        return format(str(self), spec)

    __hash__ = None

    def __getitem__(self, key):
        s = self._s
        if _zero_d_bool(key):
            # NumPy's 0-d mask: a new axis of length 1 (True) or 0 (False).
            lifted = self[None]
            return lifted if bool(key) else lifted[0:0]
        if isinstance(key, (BlockArray, np.ndarray)) and key.dtype == np.bool_ and key.ndim:
            ks, xs = key.shape, self.shape
            # NumPy's: a mask's axes match the array's first ones (IndexError if not),
            # or are empty (so is the result).
            if key.ndim > self.ndim or any(k not in (n, 0) for k, n in zip(ks, xs)):
                raise IndexError(f"boolean index of shape {ks} does not match the array's "
                                 f"shape {xs}")
            if 0 in ks:
                return self[0:0].reshape((0,) + xs[key.ndim:])
        if type(key) is not tuple:
            key = (key,)
        items, masked = _index_items(key, s)
        if masked:
            # A mask's or an index array's counts per block decide the shape: computed
            # first (errors such as an index out of bounds raised here, as NumPy's).
            return BlockArray(self._a.index_masked(items), s)
        r = BlockArray(self._a.index(items), s)
        if self._v is not None and all(_basic(k) for k in key):
            # Basic indexing of kept values: NumPy's view of them is the answer.
            v = _frozen(self._v[tuple(k.item() if isinstance(k, np.generic) else k
                                      for k in key)])
            if v.shape == r.shape and v.dtype == r.dtype:
                r._v = v
        elif not self._a.computed and self.nbytes <= SMALL_BYTES and all(_basic(k) for k in key):
            # An element of a small lazy array: a loop over its elements computes it once.
            r._of = (self, self._a,
                     tuple(k.item() if isinstance(k, np.generic) else k for k in key))
        return r

    def __setitem__(self, key, value):
        """NumPy's ``x[key] = value``: the array becomes the engine's new version
        (``x.at[key].set(value)``), sharing the blocks the key does not touch. As with
        Dask, an array made from it before (a slice too: nums-cloud has no views) keeps
        the values it had."""
        self._become(self.at[key].set(value))

    @property
    def at(self):
        """JAX's ``x.at[key].set(value)``: the new array NumPy's ``y = x.copy(); y[key] =
        value`` leaves, ``x`` unchanged (the job files' assignment)."""
        return _At(self)

    def _become(self, new):
        """Takes ``new``'s node (an in-place change); its kept values go."""
        if new._s is not self._s:
            raise ValueError("an array of another session cannot be assigned into this one")
        self._a = new._a
        self._v = None
        self._of = None

    # Methods, as NumPy's.
    def astype(self, dtype, copy=True):
        """Copy of the array, cast to a specified type."""
        return BlockArray(self._a.call("astype", [dtype_name(dtype)]), self._s)

    def reshape(self, *shape, order="C", copy=None):
        """Gives a new shape to an array without changing its data (``order``: the
        engine's, "C", "F" or "A")."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        kw = None if order == "C" else {"order": order}
        return BlockArray(
            self._a.call("reshape", [tuple(operator.index(d) for d in shape)], kw), self._s)

    def transpose(self, *axes):
        """Returns an array with axes transposed."""
        if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], int)):
            axes = axes[0]
        elif not axes:
            axes = None
        return self._call("transpose", axes)

    def block(self, *shape):
        """The same values in blocks of ``shape`` (the last ones along each axis may be
        smaller): nums-cloud's re-blocking."""
        if len(shape) == 1 and not isinstance(shape[0], int):
            shape = tuple(shape[0])
        return BlockArray(self._a.block(list(shape)), self._s)

    def named(self, name):
        """Names the array for error messages (``X`` instead of the expression that made
        it); returns it."""
        return BlockArray(self._a.named(name), self._s)

    def _call(self, name, *args, **kwargs):
        s = self._s
        a = [to_native_arg(x, s) for x in args]
        kw = {k: to_native_arg(v, s) for k, v in kwargs.items()} if kwargs else None
        return wrap(self._a.call(name, a, kw), s)

    def flatten(self, order="C"):
        """A copy of the array collapsed into one dimension."""
        return self._call("ravel")

    def ravel(self, order="C"):
        """Return a flattened array."""
        return self._call("ravel")

    def squeeze(self, axis=None):
        """Remove axes of length one."""
        return self._call("squeeze", axis)

    def swapaxes(self, axis1, axis2):
        """Return a view of the array with ``axis1`` and ``axis2`` interchanged."""
        return self._call("swapaxes", axis1, axis2)

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        """Return the sum of the array elements over the given axis."""
        return _reduce(self, "sum", axis, keepdims, dtype=dtype, out=out)

    def prod(self, axis=None, dtype=None, out=None, keepdims=False):
        """Return the product of the array elements over the given axis."""
        return _reduce(self, "prod", axis, keepdims, dtype=dtype, out=out)

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        """Returns the average of the array elements along given axis."""
        return _reduce(self, "mean", axis, keepdims, dtype=dtype, out=out)

    def std(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        """Returns the standard deviation of the array elements along given axis."""
        return _reduce(self, "std", axis, keepdims, dtype=dtype, out=out, ddof=ddof)

    def var(self, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
        """Returns the variance of the array elements, along given axis."""
        return _reduce(self, "var", axis, keepdims, dtype=dtype, out=out, ddof=ddof)

    def min(self, axis=None, out=None, keepdims=False):
        """Return the minimum along a given axis."""
        return _reduce(self, "min", axis, keepdims, out=out)

    def max(self, axis=None, out=None, keepdims=False):
        """Return the maximum along a given axis."""
        return _reduce(self, "max", axis, keepdims, out=out)

    def all(self, axis=None, out=None, keepdims=False):
        """Returns True if all elements evaluate to True."""
        return _reduce(self, "all", axis, keepdims, out=out)

    def any(self, axis=None, out=None, keepdims=False):
        """Returns True if any of the elements of ``a`` evaluate to True."""
        return _reduce(self, "any", axis, keepdims, out=out)

    def argmin(self, axis=None, out=None, keepdims=False):
        """Return indices of the minimum values along the given axis."""
        return _reduce(self, "argmin", axis, keepdims, out=out)

    def argmax(self, axis=None, out=None, keepdims=False):
        """Return indices of the maximum values along the given axis."""
        return _reduce(self, "argmax", axis, keepdims, out=out)

    def dot(self, b):
        """Dot product of two arrays (``np.dot``)."""
        return self._call("dot", b)

    def clip(self, min=None, max=None):
        """Return an array whose values are limited to ``[min, max]``."""
        return self._call("clip", min, max)

    def trace(self, offset=0, axis1=0, axis2=1):
        """Return the sum along diagonals of the array."""
        return self._call("trace", offset, axis1, axis2)

    def round(self, decimals=0, out=None):
        """Return ``a`` with each element rounded to the given number of decimals."""
        return self._call("round", decimals=decimals, out=out)

    def cumsum(self, axis=None, dtype=None, out=None):
        """Return the cumulative sum of the elements along the given axis."""
        return self._call("cumsum", axis=axis, dtype=dtype, out=out)

    def cumprod(self, axis=None, dtype=None, out=None):
        """Return the cumulative product of the elements along the given axis."""
        return self._call("cumprod", axis=axis, dtype=dtype, out=out)

    def argsort(self, axis=-1, kind=None, order=None, *, stable=None):
        """Returns the indices that would sort this array (stable)."""
        return self._call("argsort", axis=axis, kind=kind, order=order, stable=stable)

    def sort(self, axis=-1, kind=None, order=None):
        """Sort an array in place (the array becomes ``nps.sort(a, axis)``)."""
        self._become(self._call("sort", axis=axis, kind=kind, order=order))

    def nonzero(self):
        """Return the indices of the elements that are non-zero (a tuple of arrays)."""
        return self._call("nonzero")

    def repeat(self, repeats, axis=None):
        """Repeat elements of an array."""
        return self._call("repeat", repeats, axis)

    def searchsorted(self, v, side="left", sorter=None):
        """Find indices where elements of v should be inserted to maintain order."""
        return self._call("searchsorted", v, side=side, sorter=sorter)

    def diagonal(self, offset=0, axis1=0, axis2=1):
        """Return specified diagonals."""
        return self._call("diagonal", offset, axis1, axis2)

    def take(self, indices, axis=None, out=None, mode=None):
        """Return an array formed from the elements of ``a`` at the given indices."""
        return self._call("take", indices, axis=axis, out=out, mode=mode)

    def copy(self):
        """A copy: a new array of the same node (nothing is copied until one of them is
        changed in place, and then only the blocks the change touches are made)."""
        return BlockArray(self._a, self._s, self._v)

    def __copy__(self):
        return self.copy()

    def __deepcopy__(self, memo):
        return self.copy()

    def __reduce__(self):
        # Pickled as its values (a lazy node belongs to one session of one process).
        return (asarray, (self.get(),))

    # Operators (a NumPy array on the left defers to these: __array_priority__ and
    # __array_ufunc__).
    __add__, __radd__ = _binary("+", "Elementwise addition.")
    __sub__, __rsub__ = _binary("-", "Elementwise subtraction.")
    __mul__, __rmul__ = _binary("*", "Elementwise multiplication.")
    __truediv__, __rtruediv__ = _binary("/", "Elementwise true division.")
    __floordiv__, __rfloordiv__ = _binary("//", "Elementwise floor division.")
    __mod__, __rmod__ = _binary("%", "Elementwise remainder (Python's signs).")
    __pow__, __rpow__ = _binary("**", "Elementwise power.")
    __matmul__, __rmatmul__ = _binary(
        "@", "Matrix product (the engine's: stacks broadcast as NumPy's).")
    __and__, __rand__ = _binary("&", "Elementwise and (logical of bools, bitwise of ints).")
    __or__, __ror__ = _binary("|", "Elementwise or (logical of bools, bitwise of ints).")
    __xor__, __rxor__ = _binary("^", "Elementwise xor (logical of bools, bitwise of ints).")
    __lshift__, __rlshift__ = _binary("<<", "Elementwise left shift of ints.")
    __rshift__, __rrshift__ = _binary(">>", "Elementwise right shift of ints.")
    __lt__, _ = _binary("<", "Elementwise comparison (bool).")
    __le__, _ = _binary("<=", "Elementwise comparison (bool).")
    __gt__, _ = _binary(">", "Elementwise comparison (bool).")
    __ge__, _ = _binary(">=", "Elementwise comparison (bool).")
    __eq__, _ = _binary("==", "Elementwise comparison (bool).")
    __ne__, _ = _binary("!=", "Elementwise comparison (bool).")
    del _

    def __divmod__(self, o):
        return self // o, self % o

    def __rdivmod__(self, o):
        return o // self, o % self

    def __neg__(self):
        """-self"""
        return BlockArray(self._a.unary("-"), self._s)

    def __pos__(self):
        """+self"""
        return BlockArray(self._a.unary("+"), self._s)

    def __invert__(self):
        """~self: logical not of a bool array, bitwise not of an int one."""
        return BlockArray(self._a.unary("~"), self._s)

    def __abs__(self):
        """abs(self)"""
        return self._call("abs")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        """NumPy's ufuncs on nums-cloud arrays (``np.exp(x)``, ``np_array + x``): the
        engine's function of the same name, lazily; NotImplemented for the others."""
        name = _namespace._UFUNCS.get(ufunc.__name__)
        if method != "__call__" or name is None or kwargs:
            return NotImplemented
        return call(name, inputs, {})

    def __array_function__(self, func, types, args, kwargs):
        """NumPy's functions on nums-cloud arrays (``np.sum(x)``, ``np.concatenate``):
        ``nums_cloud.numpy``'s function of the same name, lazily; NumPy's own on the
        computed values for the others."""
        f = getattr(_namespace, func.__name__, None)
        if f is not None and func.__module__.startswith("numpy") and callable(f) \
                and getattr(f, "_engine", False):
            return f(*args, **kwargs)
        _refuse_values(f"NumPy's {func.__name__}, which the engine does not have")
        return func._implementation(*_computed(args), **_computed(kwargs))


def _runs(n, b):
    """``n`` split into blocks of ``b`` (the last one shorter): one axis of ``chunks``."""
    if n == 0 or b == 0:
        return (0,) if n == 0 else (n,)
    return (b,) * (n // b) + ((n % b,) if n % b else ())


def _index_items(key, s):
    """The engine's items of an index tuple (integer lists as lists, arrays and masks as
    their nodes) and whether one is an array (its values decide the selection)."""
    masked = False
    items = []
    for k in key:
        if isinstance(k, (BlockArray, np.ndarray, list)):
            if isinstance(k, list) and not all(type(i) is bool for i in k):
                # An integer list: the engine's fancy index (``x[[0, 2, 5]]``).
                items.append([operator.index(i) for i in k])
                continue
            k = asarray(k, session=s) if not isinstance(k, BlockArray) else k
            if k.dtype == np.bool_:
                masked = True
                items.append(k._a)
                continue
            if k.dtype.kind not in "iu":
                raise IndexError("arrays used as indices must be of integer (or "
                                 "boolean) type")
            # An integer array of any shape and length: gathered by the engine (how
            # many of its indices fall in each block is what is computed first).
            masked = True
            items.append(k._a)
        elif isinstance(k, np.generic):
            items.append(k.item())
        else:
            items.append(k)
    return items, masked


class _At:
    """``x.at``: ``x.at[key].set(value)``."""

    __slots__ = ("_x",)

    def __init__(self, x):
        self._x = x

    def __getitem__(self, key):
        return _AtKey(self._x, key)


class _AtKey:
    __slots__ = ("_x", "_key")

    def __init__(self, x, key):
        self._x, self._key = x, key

    def set(self, value):
        """The new array: ``x``'s values with ``value`` (broadcast, cast to x's dtype) at
        the key."""
        x, key = self._x, self._key
        s = x._s
        if type(key) is not tuple:
            key = (key,)
        items, _ = _index_items(key, s)
        if isinstance(value, (np.ndarray, list, tuple)):
            value = asarray(value, session=s)
        if isinstance(value, BlockArray):
            value = value._a
        return BlockArray(x._a.set(items, value), s)


def _frozen(v):
    """``v`` as a read-only NumPy array (a scalar as a 0-d one): values an array keeps."""
    v = np.asarray(v)
    v.flags.writeable = False
    return v


def _basic(k):
    """Whether an index item is NumPy's basic indexing (no array, no mask)."""
    return (k is None or k is Ellipsis or isinstance(k, slice)
            or (isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))))


def _zero_d_bool(key):
    """Whether ``key`` is one boolean scalar (Python's, NumPy's, or a 0-d bool array)."""
    if type(key) is bool or isinstance(key, np.bool_):
        return True
    return isinstance(key, (BlockArray, np.ndarray)) and key.ndim == 0 and key.dtype == np.bool_


def _computed(v):
    """``v`` with nums-cloud arrays replaced by their values (NumPy's fallback)."""
    if isinstance(v, BlockArray):
        return v.compute()
    if isinstance(v, dict):
        return {k: _computed(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return type(v)(_computed(x) for x in v)
    return v


def _reduce(x, name, axis, keepdims, dtype=None, out=None, **kw):
    if out is not None:
        raise TypeError(f"{name}: out= is not supported (nums-cloud arrays are not "
                        "changed in place)")
    kwargs = {"axis": axis}
    if keepdims:
        kwargs["keepdims"] = True
    if dtype is not None:
        kwargs["dtype"] = dtype  # the engine computes in it (NumPy's wrap in narrow ints)
    kwargs.update(kw)
    return x._call(name, **kwargs)
