"""``nums_cloud.numpy.linalg``: NumPy's ``np.linalg`` over nums-cloud arrays, by TSQR,
blocked Cholesky and blocked LU (the README's factorizations). Lazy: each returns
arrays (NumPy's named tuples for several) that compute on demand."""

from . import _LINALG, _array, _numpy_doc
from .._errors import LinAlgError  # noqa: F401  (nums_cloud.numpy.linalg.LinAlgError)

__all__ = ["qr", "svd", "svdvals", "lstsq", "norm", "cholesky", "solve", "inv", "det",
           "slogdet", "matrix_norm", "vector_norm", "matmul", "matrix_transpose",
           "outer", "trace", "tensordot", "vecdot", "LinAlgError"]

_call = _array.call

def _doc(name, note):
    def deco(f):
        f.__doc__ = _numpy_doc(name, note)
        f._engine = True
        return f
    return deco

@_doc("qr", "lazy; rows >= columns (TSQR): ``(Q, R)``, Q computed only when used; "
            "``mode`` \"reduced\" or \"r\".")
def qr(a, mode="reduced"):
    return _call("qr", (a,), {"mode": mode})

@_doc("svd", "lazy; the reduced SVD (``full_matrices=False``, nums-cloud's default: "
             "True is refused) by TSQR then the SVD of R: ``(U, S, Vh)``.")
def svd(a, full_matrices=False, compute_uv=True, hermitian=False):
    kw = {"full_matrices": full_matrices}
    if not compute_uv:
        kw["compute_uv"] = False
    if hermitian:
        kw["hermitian"] = True
    return _call("svd", (a,), kw)

@_doc("lstsq", "lazy; rows >= columns (TSQR of ``[a | b]``): ``(x, residuals, rank, s)``.")
def lstsq(a, b, rcond=None):
    return _call("lstsq", (a, b), {} if rcond is None else {"rcond": rcond})

for _name in ("svdvals", "norm", "cholesky", "solve", "inv", "det", "slogdet"):
    globals()[_name] = _LINALG[_name]
del _name

def matrix_norm(x, /, *, keepdims=False, ord="fro"):
    """Computes the matrix norm of a matrix (or a stack of matrices) ``x``.

    nums-cloud: lazy (``norm`` over the last two axes)."""
    return norm(x, ord=ord, axis=(-2, -1), keepdims=keepdims)  # noqa: F821

def vector_norm(x, /, *, axis=None, keepdims=False, ord=2):
    """Computes the vector norm of a vector (or batch of vectors) ``x``.

    nums-cloud: lazy."""
    x = _array.asarray(x)
    if axis is None:
        x = x.ravel()
        r = norm(x, ord=ord, axis=0)  # noqa: F821
        return r.reshape((1,) * x.ndim) if keepdims else r
    return norm(x, ord=ord, axis=axis, keepdims=keepdims)  # noqa: F821

def matmul(x1, x2, /):
    """Matrix product of two arrays (``x1 @ x2``)."""
    return _call("matmul", (x1, x2), {})

def matrix_transpose(x, /):
    """Transposes a matrix (or a stack of matrices) ``x``."""
    return _array.asarray(x).mT

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
    """Computes the (vector) dot product of two arrays along ``axis`` (the namespace's
    ``vecdot``)."""
    from ._api import vecdot as f

    return f(x1, x2, axis=axis)

