"""``nums_cloud.numpy.linalg``: NumPy's ``np.linalg`` over nums-cloud arrays, by TSQR,
blocked Cholesky and blocked LU (the README's factorizations). Lazy: each returns
arrays (NumPy's named tuples for several) that compute on demand."""

from . import _array
from ._table import _LINALG, _numpy_doc
from ._table import FUNCTIONS as _fn  # the table's functions
from .._errors import LinAlgError  # noqa: F401  (nums_cloud.numpy.linalg.LinAlgError)

__all__ = ["qr", "svd", "svdvals", "lstsq", "norm", "cholesky", "solve", "inv", "det",
           "slogdet", "matrix_norm", "vector_norm", "matmul", "matrix_transpose",
           "outer", "trace", "tensordot", "vecdot", "diagonal", "cross", "matrix_power",
           "matrix_rank", "pinv", "eigh", "eigvalsh", "LinAlgError"]

_call = _array.call


def _per_matrix(f):
    """``f`` (of one matrix: the engine factors 2-D matrices) over a stack of matrices
    too, as NumPy's: ``f`` of each matrix of the stack, stacked (each field of a named
    tuple). A graph node per matrix: meant for small stacks."""
    import functools
    import math

    @functools.wraps(f)
    def g(a, *args, **kwargs):
        a = _array.asarray(a)
        if a.ndim <= 2:
            return f(a, *args, **kwargs)
        batch, n = a.shape[:-2], math.prod(a.shape[:-2])
        if n == 0:
            # No matrices: the result's shapes and dtypes from one matrix's (nothing runs).
            one = f(_fn.zeros(a.shape[-2:], dtype=a.dtype), *args, **kwargs)
            parts = one if isinstance(one, tuple) else (one,)
            empty = [_fn.zeros(batch + p.shape, dtype=p.dtype) for p in parts]
            return type(one)(*empty) if isinstance(one, tuple) else empty[0]
        flat = a.reshape((n,) + a.shape[-2:])
        results = [f(flat[i], *args, **kwargs) for i in range(n)]
        if not isinstance(results[0], tuple):
            return _fn.stack(results).reshape(batch + results[0].shape)
        fields = [_fn.stack([r[j] for r in results]).reshape(batch + results[0][j].shape)
                  for j in range(len(results[0]))]
        return type(results[0])(*fields)

    return g


def _doc(name, note):
    def deco(f):
        f.__doc__ = _numpy_doc(name, note)
        f._engine = True
        return f
    return deco

@_doc("qr", "lazy; rows >= columns by TSQR (Q computed only when used), a wide matrix in "
            "one task: ``(Q, R)``; ``mode`` \"reduced\", \"complete\" (Q m x m: one task) or "
            "\"r\".")
def qr(a, mode="reduced"):
    return _call("qr", (a,), {"mode": mode})

@_doc("svd", "lazy; ``full_matrices=False``: the reduced SVD by TSQR then the SVD of R; "
             "True (NumPy's default) of a non-square matrix: gesdd of the whole matrix in "
             "one task: ``(U, S, Vh)``.")
def svd(a, full_matrices=True, compute_uv=True, hermitian=False):
    kw = {"full_matrices": full_matrices}
    if not compute_uv:
        kw["compute_uv"] = False
    if hermitian:
        kw["hermitian"] = True
    return _call("svd", (a,), kw)

@_doc("lstsq", "lazy; rows >= columns (TSQR of ``[a | b]``): ``(x, residuals, rank, s)``.")
def lstsq(a, b, rcond=None):
    return _call("lstsq", (a, b), {} if rcond is None else {"rcond": rcond})

norm = _LINALG["norm"]


solve = _LINALG["solve"]  # stacks, b broadcast against them: the engine's

# Stacks of matrices, a matrix at a time.
for _name in ("svdvals", "inv", "det", "slogdet"):
    globals()[_name] = _per_matrix(_LINALG[_name])
del _name
qr, svd = _per_matrix(qr), _per_matrix(svd)

@_doc("cholesky", "lazy; one block: one task, more: blocked Cholesky. ``upper=True``: "
                  "the conjugate transpose of the lower factor.")
def cholesky(a, /, *, upper=False):
    lower = _per_matrix(_LINALG["cholesky"])(a)
    if not upper:
        return lower
    return _fn.conj(lower.mT) if lower.dtype.kind == "c" else lower.mT


def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Computes the matrix norm of a matrix (or a stack of matrices) ``x``.

    nums-cloud: lazy (``norm`` over the last two axes)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)  # noqa: F821

def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Computes the vector norm of a vector (or batch of vectors) ``x``.

    nums-cloud: lazy."""
    x = _array.asarray(x)
    if axis is None:
        r = norm(x.ravel(), ord=ord, axis=0)  # noqa: F821
        # keepdims: every one of x's axes, of length 1.
        return r.reshape((1,) * x.ndim) if keepdims else r
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)  # noqa: F821

def matmul(x1, x2, /):
    """Matrix product of two arrays (``x1 @ x2``; stacks broadcast as NumPy's).

    nums-cloud: lazy (the engine's ``matmul``)."""
    return _call("matmul", (x1, x2), {})

def matrix_transpose(x, /):
    """Transposes a matrix (or a stack of matrices) ``x`` (the engine's
    ``matrix_transpose``)."""
    return _call("matrix_transpose", (x,), {})

def outer(x1, x2, /):
    """Computes the outer product of two vectors."""
    return _call("outer", (x1, x2), {})

def trace(x, /, *, offset=0, dtype=None):
    """Returns the sum along the specified diagonals of a matrix."""
    return _call("trace", (x,), {"offset": offset, "axis1": -2, "axis2": -1})

def tensordot(x1, x2, /, *, axes=2):
    """Returns a tensor contraction of ``x1`` and ``x2`` over specific axes."""
    return _call("tensordot", (x1, x2), {"axes": axes})

def vecdot(x1, x2, /, *, axis=-1):
    """Computes the (vector) dot product of two arrays along ``axis`` (the engine's
    ``vecdot``)."""
    return _call("vecdot", (x1, x2), {"axis": axis})



def diagonal(x, /, *, offset=0):
    """Returns the specified diagonals of a matrix (or a stack of matrices) ``x``.

    nums-cloud: lazy (the engine's ``diagonal`` of the last two axes)."""
    return _call("diagonal", (x,), {"offset": offset, "axis1": -2, "axis2": -1})


def cross(x1, x2, /, *, axis=-1):
    """Returns the cross product of 3-element vectors (``x1`` and ``x2`` broadcast
    against each other, their vectors along ``axis``).

    nums-cloud: lazy (products and differences of the vectors' components)."""
    x1, x2 = _array.asarray(x1), _array.asarray(x2)
    if not -min(x1.ndim, x2.ndim) <= axis < min(x1.ndim, x2.ndim):
        raise ValueError(f"cross: axis {axis} is out of bounds for arrays of shapes "
                         f"{x1.shape} and {x2.shape}")
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise ValueError(f"cross: x1 of shape {x1.shape} and x2 of shape {x2.shape} must "
                         f"have 3 elements along axis {axis}")
    a = [_call("take", (x1, [i]), {"axis": axis}) for i in range(3)]
    b = [_call("take", (x2, [i]), {"axis": axis}) for i in range(3)]
    parts = [a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]]
    # NumPy's: a non-negative axis counts in each operand's own axes and the result's.
    return _call("concat", (parts,), {"axis": axis})


@_doc("matrix_power", "lazy: products by repeated squaring (``matmul``); a negative "
                      "``n`` of the inverse (``inv``).")
def matrix_power(a, n, /):
    import operator

    a = _array.asarray(a)
    n = operator.index(n)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise LinAlgError(f"matrix_power: a of shape {a.shape} is not a square matrix (or "
                          "a stack of them)")
    if n == 0:
        eye = _call("eye", (a.shape[-1],), {"dtype": a.dtype})
        return _call("broadcast_to", (eye, a.shape), {})
    if n < 0:
        a, n = inv(a), -n  # noqa: F821
    result, power = None, a
    while True:
        if n & 1:
            result = power if result is None else result @ power
        n >>= 1
        if not n:
            return result
        power = power @ power


def _tolerance(s, shape, dtype, rtol):
    """The singular values at most ``rtol`` times the largest are zero (NumPy 2's rule;
    ``rtol`` by default ``max(M, N)`` times the dtype's eps)."""
    import numpy as np

    if rtol is None:
        rtol = max(shape[-2:]) * np.finfo(dtype).eps
    elif isinstance(rtol, _array.BlockArray) and rtol.ndim:
        rtol = rtol.reshape(rtol.shape + (1,))
    return s.max(axis=-1, keepdims=True) * rtol


@_doc("matrix_rank", "lazy: the singular values (``svdvals``) above the tolerance.")
def matrix_rank(x, /, *, rtol=None):
    x = _array.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"matrix_rank: x of shape {x.shape} is not a matrix")
    s = svdvals(x if x.shape[-2] >= x.shape[-1] else x.mT)  # noqa: F821
    return (s > _tolerance(s, x.shape, x.dtype, rtol)).sum(axis=-1)


@_doc("pinv", "lazy: from the reduced SVD (``svd``), the singular values at most "
              "``rtol`` times the largest taken as zero.")
def pinv(x, /, *, rtol=None):
    x = _array.asarray(x)
    if x.ndim < 2:
        raise ValueError(f"pinv: x of shape {x.shape} is not a matrix")
    if x.shape[-2] < x.shape[-1]:  # TSQR takes rows >= columns: pinv(x) = pinv(x^T)^T
        return pinv(x.mT, rtol=rtol).mT
    u, s, vh = svd(x, full_matrices=False)
    keep = s > _tolerance(s, x.shape, x.dtype, rtol)
    s_inv = _fn.where(keep, 1 / _fn.where(keep, s, 1), 0)
    v, uh = (vh.mT, u.mT) if x.dtype.kind != "c" else (_fn.conj(vh.mT), _fn.conj(u.mT))
    return v @ (s_inv.reshape(s_inv.shape + (1,)) * uh)


def _eager_linalg(name):
    import numpy as np

    from . import _api

    f = _api._eager(name, getattr(np.linalg, name))
    _api.EAGER[-1] = "linalg." + name
    return f


# Without a kernel (the engine has no eigensolver): NumPy's, on the values.
eigh = _eager_linalg("eigh")
eigvalsh = _eager_linalg("eigvalsh")
