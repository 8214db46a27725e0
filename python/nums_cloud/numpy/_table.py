"""The engine's function table as Python functions under NumPy's names, with NumPy's
signatures and docstrings: what ``nums_cloud.numpy`` holds (``_GENERATED``) and
``nums_cloud.numpy.linalg`` wraps (``_LINALG``) and ``nums_cloud.numpy.fft`` holds
(``_FFT``). Below both, above the arrays."""

import builtins as _builtins
import inspect as _inspect
import types as _types

import numpy as _np

from .. import _native
from . import _array


def _numpy_doc(name, note):
    """NumPy's summary of ``name`` (its first paragraph), then what nums-cloud does."""
    f = (getattr(_np, name, None) or getattr(_np.linalg, name, None)
         or getattr(_np.fft, name, None))
    text = ""
    if f is not None and f.__doc__:
        lines = _inspect.cleandoc(f.__doc__).splitlines()
        # A ufunc's docstring starts with its signature and a blank line.
        if lines and "(" in lines[0] and lines[0].startswith(name):
            lines = lines[1:]
        para = []
        for line in lines:
            if not line.strip():
                if para:
                    break
                continue
            para.append(line.strip())
        text = " ".join(para)
    if not text:
        text = f"NumPy's ``{name}``."
    return f"{text}\n\nnums-cloud: {note}"


def _engine(f):
    """Marks ``f`` as taking nums-cloud arrays lazily (NumPy's ``__array_function__``
    hands it NumPy's calls of the same name)."""
    f._engine = True
    return f


def _signature(name, family, params, star):
    """The signature of the table's ``name``: its parameters (NumPy's, in the table's
    order) with the kinds and defaults NumPy's function of that name gives them, so that
    ``inspect.signature`` reads NumPy's (the standard's positional-only ``x, /`` of the
    elementwise functions, its keyword-only ``stable``, ``*xi`` of ``meshgrid``). A
    parameter NumPy does not have is positional-or-keyword (keyword-only after one) and
    defaults to NumPy's "no value" after a parameter with a default. ``None`` when the
    kinds would not make a signature (the function then shows ``*args, **kwargs``)."""
    P = _inspect.Parameter
    home = {"linalg": _np.linalg, "fft": _np.fft}.get(family, _np)
    try:
        theirs = _inspect.signature(getattr(home, name)).parameters
    except (AttributeError, TypeError, ValueError):
        theirs = {}
    out = []
    for i, p in enumerate(params):
        q = theirs.get(p)
        if star and i == len(params) - 1:
            q = P(p, P.VAR_POSITIONAL)
        elif q is not None:
            q = q.replace(annotation=P.empty)
        else:
            kind = P.KEYWORD_ONLY if out and out[-1].kind == P.KEYWORD_ONLY else P.POSITIONAL_OR_KEYWORD
            later = _builtins.any(o.default is not P.empty for o in out)
            q = P(p, kind, default=_np._NoValue if later else P.empty)
        out.append(q)
    # The standard's device= is every function's (_array.call takes "cpu").
    if "device" in theirs and "device" not in params:
        out.append(theirs["device"].replace(annotation=P.empty))
    try:
        return _inspect.Signature(out)
    except ValueError:  # NumPy's kinds out of the table's order
        return None


def _array_likes(params, star, arrays, args, kwargs):
    """``args`` and ``kwargs`` with a list (or tuple) given for one of the engine's
    array_like parameters (``arrays``, the table's) as an array of its values, as NumPy
    reads it (``exp([1, 2])``); the others as they are (shapes, axes, sequences of
    arrays)."""
    s = None

    def conv(v):
        nonlocal s
        if not isinstance(v, (list, tuple)):
            return v
        if s is None:
            s = _array._session_of(*args, *kwargs.values())
        return _array.asarray(v, session=s)

    n = len(params)
    args = tuple(conv(v) if (params[n - 1] if star and i >= n - 1 else
                            params[i] if i < n else None) in arrays else v
                 for i, v in enumerate(args))
    kwargs = {k: conv(v) if k in arrays else v for k, v in kwargs.items()}
    return args, kwargs


# The table's functions whose NumPy result is a Python bool, not an array: computed.
_PYTHON_BOOL = frozenset({"allclose", "array_equal"})
# The table's functions NumPy calls to change their first argument in place: the engine
# returns the new array, which the argument becomes (``x[key] = v``'s rule); None back.
_IN_PLACE = frozenset({"put", "place", "putmask", "put_along_axis"})


def _changed_in_place(name, target, new):
    if isinstance(target, _array.BlockArray):
        target._become(new)
    elif isinstance(target, _np.ndarray):
        target[...] = new.get()
    else:
        raise TypeError(f"{name}() argument 1 must be an array, not {type(target).__name__}")


def _defined(name, family, params, star, arrays=()):
    arrays = frozenset(arrays)
    to_bool = name in _PYTHON_BOOL
    in_place = name in _IN_PLACE

    def f(*args, **kwargs):
        if arrays:
            args, kwargs = _array_likes(params, star, arrays, args, kwargs)
        r = _array.call(name, args, kwargs)
        if in_place:
            target = args[0] if args else kwargs[params[0]]
            _changed_in_place(name, target, r)
            return None
        return bool(r) if to_bool else r

    f.__name__ = f.__qualname__ = name
    f.__module__ = __package__  # nums_cloud.numpy, where the namespace holds it
    sig = _signature(name, family, params, star)
    if sig is not None:
        f.__signature__ = sig
    text = ", ".join(("*" if star and i == len(params) - 1 else "") + p
                     for i, p in enumerate(params))
    f.__doc__ = _numpy_doc(name, f"lazy; the engine's ``{name}({text})`` (NumPy's "
                                 "parameters; see the README's function table).")
    return _engine(f)


# The engine's function table, under NumPy's names (the models are in nums_cloud.models,
# the factorizations in nums_cloud.numpy.linalg).
_TABLE = _native.functions()
_LINALG = {}
_FFT = {}  # nums_cloud.numpy.fft's
# Every name of the table as generated here: the guard test holds the namespace to these
# (a hand-written stand-in decides in Python what the engine decides).
_GENERATED = {}
for _family, _name, _aliases, _params, _star, _arrays in _TABLE:
    if _family == "models":
        continue
    _f = _defined(_name, _family, _params, _star, _arrays)
    if _family == "linalg":
        _LINALG[_name] = _f
        continue
    if _family == "fft":
        _f.__module__ = __package__ + ".fft"
        _FFT[_name] = _f
        continue
    for _n in (_name, *_aliases):
        _GENERATED[_n] = _f
del _family, _name, _aliases, _params, _star, _arrays, _f, _n

#: The table's functions by attribute (``FUNCTIONS.zeros``), for the modules below the
#: namespace (``linalg``, ``_api``): the same objects ``nums_cloud.numpy`` holds.
FUNCTIONS = _types.SimpleNamespace(**_GENERATED)
