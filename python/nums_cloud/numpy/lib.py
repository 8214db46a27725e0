"""``nums_cloud.numpy.lib``: the part of NumPy's ``np.lib`` that array libraries reach
through an array's namespace (xarray's ``rolling`` calls
``xp.lib.stride_tricks.sliding_window_view``)."""

import operator
import types

from ._array import asarray
from ._table import FUNCTIONS

__all__ = ["stride_tricks"]


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    """NumPy's ``np.lib.stride_tricks.sliding_window_view``: the windows of ``x`` along
    ``axis`` as new last axes, lazily. Built from the engine's slicing and ``stack``
    (one shifted slice per window position), so the windows are copies, not views,
    whose values are NumPy's; ``writeable=True`` is refused (arrays are never changed
    in place)."""
    if writeable:
        raise ValueError("sliding_window_view(writeable=True): nums-cloud arrays are not "
                         "changed in place")
    x = asarray(x)
    ws = (window_shape,) if not isinstance(window_shape, (tuple, list)) else window_shape
    ws = tuple(operator.index(w) for w in ws)
    if axis is None:
        axes = tuple(range(x.ndim))
    else:
        axes = (axis,) if not isinstance(axis, (tuple, list)) else tuple(axis)
    if len(ws) != len(axes):
        raise ValueError(f"sliding_window_view: window_shape {tuple(ws)} has "
                         f"{len(ws)} lengths for {len(axes)} axes (axis={axis!r})")
    if any(w < 0 for w in ws):
        raise ValueError("`window_shape` cannot contain negative values")
    axes = tuple(a + x.ndim if a < 0 else a for a in axes)
    if any(a < 0 or a >= x.ndim for a in axes):
        raise ValueError(f"axis {axis!r} is out of bounds for array of dimension {x.ndim}")
    y = x
    for a, w in zip(axes, ws):
        n = y.shape[a]
        if w > n:
            raise ValueError("window shape cannot be larger than input array shape")
        m = n - w + 1

        def shifted(i, a=a, m=m, nd=y.ndim):
            return y[(slice(None),) * a + (slice(i, i + m),) + (slice(None),) * (nd - a - 1)]

        y = FUNCTIONS.stack([shifted(i) for i in range(w)], axis=-1)
    return y


stride_tricks = types.SimpleNamespace(sliding_window_view=sliding_window_view)
