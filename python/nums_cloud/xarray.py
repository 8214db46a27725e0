"""xarray on nums-cloud: a chunk manager (xarray's ``ChunkManagerEntrypoint``) whose chunked
arrays are ``nums_cloud.numpy`` arrays.

    import xarray as xr
    import nums_cloud.xarray  # noqa: F401  (registers "nums-cloud" without an install)

    ds = xr.open_zarr("era5.zarr", chunked_array_type="nums-cloud")
    clim = ds.groupby("time.month").mean().compute()

xarray finds chunk managers through the ``xarray.chunkmanagers`` entry point, which an
installed ``nums-cloud`` declares (python/pyproject.toml). Entry points are read from
installed distributions' metadata only, so a package on ``PYTHONPATH`` (a checkout, the
function processes' path) is not found so: importing this module registers the manager
itself (:func:`register`). ``chunked_array_type=NumsCloudManager()`` works in any case.

What runs where: xarray's operations call the arrays' NumPy and Array API protocols,
which build lazy nodes of the engine's graph (``mean``, ``std``, ``quantile``, ``where``,
arithmetic, indexing, concatenation); ``compute`` runs them in one plan. The chunk
manager's hooks that take a Python function (``reduction``, ``scan``, ``map_blocks``,
``blockwise``) accept only functions the engine has (NumPy's reductions, cumulative
functions and elementwise ufuncs, or ``nums_cloud.numpy``'s of those names) and refuse
others, naming them: the functions run Rust kernels, not Python. ``apply_gufunc`` calls its function once on the whole lazy arrays
(what a generalized ufunc means, block by block), with NumPy's fallback refused
(:func:`nums_cloud.numpy._array.lazy_only`): a function built from the engine's
functions runs on the engine, one that would compute values in this process is refused.

A variable read from a Zarr v3 array (``open_zarr``; a local folder, or S3 through
zarr's obstore store) is read by the functions from the store itself
(``nums_cloud.numpy.load``), its CF masking and scaling done by the engine; other
sources (Zarr v2, netCDF, other decodings) are read by xarray in this process and handed
over as an input.
"""

import functools
import itertools
import math
import numbers
import operator

import numpy as np
from xarray.namedarray.parallelcompat import ChunkManagerEntrypoint

from . import numpy as nps
from .numpy import _array
from .numpy._array import BlockArray

__all__ = ["NumsCloudManager", "register", "NAME"]

#: The name xarray knows the manager by: ``chunked_array_type="nums-cloud"``.
NAME = "nums-cloud"


def _block_shape(chunks):
    """The block shape of normalized (regular) chunks."""
    return tuple(max(c[0], 1) if c else 1 for c in chunks)


def _regular(runs, n, axis):
    """The block length of one axis' run of chunk lengths: nums-cloud's blocks are regular
    (all one length but the last, which may be shorter); ValueError for others."""
    runs = tuple(int(c) for c in runs)
    if sum(runs) != n:
        raise ValueError(f"chunks {runs} along axis {axis} add up to {sum(runs)}, not the "
                         f"axis' length {n}")
    if not runs or n == 0:
        return n
    b = runs[0]
    if any(c != b for c in runs[:-1]) or runs[-1] > b:
        raise ValueError(f"chunks {runs} along axis {axis}: nums-cloud's blocks are "
                         "regular (one length, the last block may be shorter); give one "
                         "length per axis")
    return b


class NumsCloudManager(ChunkManagerEntrypoint):
    """xarray's chunk manager for nums-cloud arrays (``chunked_array_type="nums-cloud"``)."""

    available = True

    def __init__(self):
        self.array_cls = BlockArray

    def chunks(self, data):
        return data.chunks

    def normalize_chunks(self, chunks, shape=None, limit=None, dtype=None,
                         previous_chunks=None):
        """Chunks as a tuple of tuples of block lengths, regular along each axis. Per axis:
        an int, ``-1`` or ``None`` (the whole axis), ``"auto"`` (the previous chunking
        where there is one, e.g. a Zarr array's own, else the engine's default block), or
        a run of lengths that is regular."""
        if shape is None:
            if isinstance(chunks, tuple) and all(isinstance(c, tuple) for c in chunks):
                shape = tuple(sum(c) for c in chunks)
            else:
                raise ValueError(f"normalize_chunks({chunks!r}) needs the array's shape")
        shape = tuple(int(n) for n in shape)
        ndim = len(shape)
        if isinstance(chunks, dict):
            chunks = tuple(chunks.get(i, chunks.get(i - ndim, "auto")) for i in range(ndim))
        elif not isinstance(chunks, (tuple, list)):
            chunks = (chunks,) * ndim
        if len(chunks) != ndim:
            raise ValueError(f"chunks {chunks!r} name {len(chunks)} axes; the array has "
                             f"{ndim} (shape {shape})")
        default = None
        out = []
        for i, (c, n) in enumerate(zip(chunks, shape)):
            if c is None or (isinstance(c, numbers.Integral) and c == -1):
                b = n
            elif isinstance(c, str):
                if c != "auto":
                    raise ValueError(f"chunks {c!r} along axis {i}: nums-cloud takes a "
                                     "block length, -1, None or 'auto' (no byte sizes)")
                if previous_chunks is not None and previous_chunks[i]:
                    prev = previous_chunks[i]
                    b = prev if isinstance(prev, numbers.Integral) else _regular(prev, n, i)
                else:
                    if default is None:
                        default = nps.zeros(shape, dtype=dtype or np.float64).block_shape
                    b = default[i]
            elif isinstance(c, numbers.Integral):
                if c < 1 and n:
                    raise ValueError(f"chunks {c!r} along axis {i}: a block length is 1 or "
                                     "more (or -1 for the whole axis)")
                b = int(c)
            else:
                b = _regular(c, n, i)
            out.append(_array._runs(n, min(b, n) if n else b))
        return tuple(out)

    def from_array(self, data, chunks, **kwargs):
        """A nums-cloud array of ``data`` in blocks of ``chunks``: a Zarr v3 array under
        xarray's lazy wrappers is loaded in place (the functions read its chunks); any
        other array-like is read here and handed over."""
        if isinstance(data, BlockArray):
            x = data
        else:
            x = _zarr_source(data)
            if x is None:
                if np.dtype(data.dtype).kind in "USOMm":
                    # Strings, objects, dates: dtypes the engine lacks stay NumPy's (a
                    # station-name or valid-time coordinate chunked with its dataset).
                    return np.asarray(data)
                x = _read_here(data, _zarr_chunks(data))
        chunks = self.normalize_chunks(chunks, x.shape, dtype=x.dtype,
                                       previous_chunks=_zarr_chunks(data))
        return _reblock(x, chunks)

    def rechunk(self, data, chunks, **kwargs):
        """The same values in blocks of ``chunks`` (the engine's re-blocking)."""
        chunks = self.normalize_chunks(chunks, data.shape, dtype=data.dtype,
                                       previous_chunks=data.chunks)
        return _reblock(data, chunks)

    def compute(self, *data, **kwargs):
        """The values of the nums-cloud arrays among ``data`` (computed in one plan per
        session), others passed through."""
        out = list(data)
        by_session = {}
        for i, d in enumerate(data):
            if isinstance(d, BlockArray):
                by_session.setdefault(id(d._s), []).append(i)
        for idx in by_session.values():
            arrs = [data[i] for i in idx]
            vals = arrs[0]._s.compute_many([a._a for a in arrs])
            for i, a, v in zip(idx, arrs, vals):
                a._keep(v)
                out[i] = v
        return tuple(out)

    def persist(self, *data, **kwargs):
        """Computes the nums-cloud arrays among ``data`` and keeps them (in this
        process's memory tier or the session's store: ``nums_cloud.persist``)."""
        for d in data:
            if isinstance(d, BlockArray):
                d._s.persist(d._a)
        return data

    @property
    def array_api(self):
        return _ARRAY_API

    def apply_gufunc(self, func, signature, *args, axes=None, axis=None, keepdims=False,
                     output_dtypes=None, output_sizes=None, vectorize=None,
                     allow_rechunk=False, meta=None, **kwargs):
        """``func`` called once on the whole lazy arrays (xarray's ``apply_ufunc`` has
        moved the core dimensions last): for a generalized ufunc that is what calling it
        block by block computes. ``func`` must be built from functions the engine has
        (NumPy's, dispatched to ``nums_cloud.numpy``); one that would compute values in
        this process (a NumPy function the engine lacks, ``np.asarray``) is refused,
        naming it, as is ``vectorize=True`` (a Python loop over elements)."""
        name = _name(func)
        if vectorize:
            raise NotImplementedError(
                f"apply_gufunc({name}, vectorize=True): np.vectorize runs a Python function "
                "per element, which nums-cloud's functions (Rust kernels) cannot run")
        if axes is not None or axis is not None or keepdims:
            raise NotImplementedError(f"apply_gufunc({name}): axes=, axis= and keepdims= "
                                      "are not supported (xarray does not pass them)")
        with _array.lazy_only(f"apply_gufunc's function {name}"):
            out = _constants_as_lists(func)(*args, **kwargs)
        n_out = signature.split("->")[1].count("(") if "->" in signature else 1
        outs = out if n_out > 1 else (out,)
        if n_out > 1 and (not isinstance(out, tuple) or len(out) != n_out):
            raise ValueError(f"apply_gufunc({name}): signature {signature!r} has {n_out} "
                             f"outputs; the function returned {type(out).__name__}")
        dtypes = output_dtypes
        if dtypes is not None and not isinstance(dtypes, (list, tuple)):
            dtypes = [dtypes]
        res = []
        for i, o in enumerate(outs):
            if not isinstance(o, BlockArray):
                raise NotImplementedError(
                    f"apply_gufunc's function {name} returned a {type(o).__name__}, not a "
                    "nums-cloud array: it computed in this process")
            res.append(_as(o, None if dtypes is None else dtypes[i]))
        return tuple(res) if n_out > 1 else res[0]

    def map_blocks(self, func, *args, dtype=None, chunks=None, drop_axis=None,
                   new_axis=None, **kwargs):
        """``func`` on every block: for NumPy's elementwise ufuncs that the engine has
        (on the whole lazy arrays, which is the same); other functions are refused,
        naming them."""
        _elementwise_only("map_blocks", func)
        if chunks is not None or drop_axis or new_axis is not None:
            raise NotImplementedError(f"map_blocks({_name(func)}): chunks=, drop_axis= and "
                                      "new_axis= change the block structure; an elementwise "
                                      "function does not")
        with _array.lazy_only(f"map_blocks' function {_name(func)}"):
            out = func(*args, **kwargs)
        return _as(out, dtype)

    def blockwise(self, func, out_ind, *args, dtype=None, adjust_chunks=None,
                  new_axes=None, align_arrays=True, **kwargs):
        """Dask's ``blockwise`` for NumPy's elementwise ufuncs that the engine has, over
        arrays indexed as the output (or broadcast to its last axes); other functions
        and index patterns are refused, naming them."""
        _elementwise_only("blockwise", func)
        out_ind = tuple(out_ind)
        arrays = args[::2]
        for a, ind in zip(arrays, args[1::2]):
            if ind is not None and tuple(ind) != out_ind[len(out_ind) - len(tuple(ind)):]:
                raise NotImplementedError(
                    f"blockwise({_name(func)}): index {tuple(ind)} of an argument against "
                    f"the output's {out_ind}: only elementwise patterns run on nums-cloud")
        if adjust_chunks or new_axes:
            raise NotImplementedError(f"blockwise({_name(func)}): adjust_chunks= and "
                                      "new_axes= are not supported")
        with _array.lazy_only(f"blockwise's function {_name(func)}"):
            out = func(*arrays, **kwargs)
        return _as(out, dtype)

    def reduction(self, arr, func, combine_func=None, aggregate_func=None, axis=None,
                  dtype=None, keepdims=False):
        """A tree reduction whose functions are one of NumPy's reductions that the
        engine has (``np.sum``, ``np.nanmax``, ...), or xarray's ``nanfirst``/``nanlast``:
        the engine's; other functions are refused, naming them."""
        first_last = _first_or_last(func)
        if first_last is not None and all(f is None or _first_or_last(f) == first_last
                                          for f in (combine_func, aggregate_func)):
            # xarray's first()/last() (skipping NaN): the engine's argmax and a gather.
            out = _first_non_nan(arr, axis, last=first_last == "nanlast")
            return _as(out, dtype)
        name = _REDUCTIONS.get(func)
        same = all(f is None or f is func for f in (combine_func, aggregate_func))
        if name is None or not same:
            raise NotImplementedError(
                f"reduction({_name(func)}, combine={_name(combine_func)}, "
                f"aggregate={_name(aggregate_func)}): nums-cloud reduces with the engine's "
                f"reductions ({', '.join(sorted(set(_REDUCTIONS.values())))}), not Python "
                "functions")
        out = getattr(nps, name)(arr, axis=axis, keepdims=keepdims)
        return _as(out, dtype)

    def scan(self, func, binop, ident, arr, axis=None, dtype=None, **kwargs):
        """A cumulative reduction along ``axis`` whose function is one the engine has
        (``np.cumsum``, ``np.cumprod``, their ``nan`` forms); others (xarray's ``push``
        for ``ffill``) are refused, naming them."""
        name = _SCANS.get(func)
        if name is None:
            raise NotImplementedError(
                f"scan({_name(func)}): nums-cloud's cumulative functions are the engine's "
                f"({', '.join(sorted(_SCANS.values()))}), not Python functions")
        out = getattr(nps, name)(arr, axis=axis)
        return _as(out, dtype)

    def unify_chunks(self, *args, **kwargs):
        """Dask's ``unify_chunks`` over (array, index) pairs: arrays whose shared indices
        are blocked differently are re-blocked to the first one's blocks."""
        arrays, inds = list(args[::2]), [tuple(i) if i is not None else None
                                         for i in args[1::2]]
        chunks = {}
        for a, ind in zip(arrays, inds):
            if ind is None or not isinstance(a, BlockArray):
                continue
            for i, c in zip(ind, a.chunks):
                chunks.setdefault(i, c)
        out = []
        for a, ind in zip(arrays, inds):
            if ind is not None and isinstance(a, BlockArray):
                a = _reblock(a, tuple(chunks[i] for i in ind))
            out.append(a)
        return chunks, out

    def store(self, sources, targets, lock=None, compute=True, flush=True, regions=None,
              **kwargs):
        """Writes each source into its target (a zarr array, or anything NumPy-style
        assignment writes to), at ``regions`` when given: a region of whole chunks of a
        zarr array the session reaches is written by the functions themselves
        (:func:`_write_in_place`); anything else is computed and kept first (one plan
        per array), then written block by block from this process."""
        if not compute:
            raise NotImplementedError("store(compute=False): nums-cloud writes at once "
                                      "(to_zarr(compute=False) is not supported)")
        if isinstance(sources, BlockArray):
            sources, targets = [sources], [targets]
            regions = [regions] if regions is not None and not isinstance(regions, list) \
                else regions
        regions = regions if regions is not None else [None] * len(sources)
        for src, tgt, region in zip(sources, targets, regions):
            _store_one(src, tgt, region)


# What this process reads of an array the functions cannot (an Icechunk repository's
# store, a Zarr codec the engine lacks, any other backend) is handed over this many bytes
# at a time, so that a variable of any size passes through its memory a slab at a time.
_SLAB_BYTES = 64 << 20


def _read_here(data, chunks=None):
    """``data`` read by this process and handed to the engine in slabs of whole rows
    (of the source's chunks along the first axis, when known), joined in the engine."""
    shape = tuple(int(n) for n in data.shape)
    row = np.dtype(data.dtype).itemsize * math.prod(shape[1:])
    # (Values already in memory, a NumPy-backed dataset's, are handed over whole.)
    if isinstance(data, np.ndarray) or not shape or shape[0] * row <= _SLAB_BYTES:
        return nps.asarray(np.asarray(data))
    rows = max(1, _SLAB_BYTES // max(row, 1))
    c = int(chunks[0]) if chunks else 0
    if 0 < c <= rows:
        rows -= rows % c
    rest = (slice(None),) * (len(shape) - 1)
    pieces = [nps.asarray(np.asarray(data[(slice(i, min(i + rows, shape[0])),) + rest]))
              for i in range(0, shape[0], rows)]
    return pieces[0] if len(pieces) == 1 else nps.concatenate(pieces, axis=0)


def _reblock(x, chunks):
    b = _block_shape(chunks)
    if x.ndim == 0 or tuple(x.block_shape) == b:
        return x
    return x.block(b)


def _as(x, dtype):
    """``x`` in ``dtype`` when one is asked for (a hook's ``dtype=``)."""
    return x if dtype is None or x.dtype == np.dtype(dtype) else x.astype(dtype)


def _first_or_last(func):
    """"nanfirst" or "nanlast" when ``func`` is xarray's wrapper of its ``nputils``
    function of that name (what ``first()``/``last()`` hand a chunk manager), else None."""
    op = getattr(func, "keywords", {}).get("op") if isinstance(func, functools.partial) else None
    name = getattr(op, "__name__", None)
    if name in ("nanfirst", "nanlast") and getattr(op, "__module__", "").startswith("xarray."):
        return name
    return None


def _first_non_nan(arr, axis, last=False):
    """The first (last) value along ``axis`` that is not NaN, NaN where all are
    (xarray's ``nputils.nanfirst``/``nanlast``)."""
    if isinstance(axis, tuple):
        (axis,) = axis
    axis = operator.index(axis) % arr.ndim
    ok = ~nps.isnan(arr) if arr.dtype.kind in "fc" else nps.ones(arr.shape, dtype=bool)
    if last:
        ok = nps.flip(ok, axis=axis)
    i = nps.argmax(ok, axis=axis, keepdims=True)
    if last:
        i = (arr.shape[axis] - 1) - i
    return nps.squeeze(nps.take_along_axis(arr, i, axis=axis), axis=axis)


def _name(func):
    if func is None:
        return "None"
    return getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)


def _constants_as_lists(func):
    """``func`` with the NumPy arrays among its bound keywords (xarray's ``apply_ufunc``
    binds ``kwargs=`` with ``functools.partial``: quantile's ``q``) as lists, which NumPy
    reads alike and the engine takes as constants (it takes no array for ``q``)."""
    if not isinstance(func, functools.partial) or not any(
            isinstance(v, np.ndarray) for v in func.keywords.values()):
        return func
    kw = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in func.keywords.items()}
    return functools.partial(func.func, *func.args, **kw)


def _elementwise_only(hook, func):
    """Refuses a function that is not an elementwise function the engine has: NumPy's
    ufunc, or ``nums_cloud.numpy``'s function, of a name in its ufunc table."""
    name = getattr(func, "__name__", None)
    ufunc = isinstance(func, np.ufunc) and name in nps._UFUNCS
    ours = name in nps._UFUNCS.values() and getattr(nps, name, None) is func
    if not (ufunc or ours):
        raise NotImplementedError(
            f"{hook}({_name(func)}): nums-cloud runs the engine's functions (Rust kernels), "
            "not Python functions; NumPy's elementwise ufuncs that the engine has run "
            "block by block")


# NumPy's reductions and cumulative functions (and nums_cloud.numpy's of those names) as
# the engine names them.
_REDUCTIONS = {getattr(mod, n): n for mod in (np, nps) for n in (
    "sum", "prod", "min", "max", "mean", "std", "var", "any", "all", "nansum", "nanprod",
    "nanmin", "nanmax", "nanmean", "nanstd", "nanvar", "argmin", "argmax", "nanargmin",
    "nanargmax", "count_nonzero", "median", "nanmedian")}
_SCANS = {getattr(mod, n): n for mod in (np, nps)
          for n in ("cumsum", "cumprod", "nancumsum", "nancumprod")}


def _store_one(src, target, region):
    if not isinstance(src, BlockArray):
        target[region if region is not None else ...] = np.asarray(src)
        return
    offset = [0] * src.ndim
    if region is not None:
        region = tuple(region)
        for i, r in enumerate(region[:src.ndim]):
            if isinstance(r, slice):
                start, _, step = r.indices(target.shape[i])
                if step != 1:
                    raise ValueError(f"store: region {region} has a step; regions are "
                                     "contiguous")
                offset[i] = start
    if _write_in_place(src, target, offset):
        return
    src.persist()
    starts = [np.cumsum((0,) + c[:-1]) for c in src.chunks]
    for idx in itertools.product(*(range(len(c)) for c in src.chunks)):
        sl = tuple(slice(int(starts[a][i]), int(starts[a][i]) + src.chunks[a][i])
                   for a, i in enumerate(idx))
        v = src[sl].compute() if src.ndim else src.compute()
        target[tuple(slice(s.start + o, s.stop + o) for s, o in zip(sl, offset))] = v


def _write_in_place(src, target, offset):
    """Writes ``src`` into the zarr array ``target`` from ``offset`` by the engine's
    functions (each chunk encoded with the target's codecs and put where it goes: no
    copy in the session's store, no pass of this process over the values) when the
    session reaches its store (:func:`_zarr_url`), the array is not sharded and the region
    is whole chunks; False (nothing written) otherwise."""
    shape, chunks = tuple(getattr(target, "shape", ())), getattr(target, "chunks", None)
    if (src.ndim == 0 or chunks is None or len(shape) != src.ndim
            or getattr(target, "shards", None) is not None):
        return False
    try:
        np.dtype(target.dtype)
    except TypeError:
        return False
    for o, n, c, length in zip(offset, src.shape, chunks, shape):
        if o % c or ((o + n) % c and o + n != length):
            return False
    url = _zarr_url(target, src._s)
    if url is None or _engine_array(url) is None:
        return False
    src._s.write_zarr(src._a, url, [int(o) for o in offset])
    return True


def _engine_array(url):
    """The Zarr array at ``url`` as the engine reads it (its metadata only), or None when
    the engine cannot (a codec it has no reader for, LZ4 or BZ2): this process then reads
    or writes it as xarray does."""
    try:
        return nps.load(url)
    except ValueError:
        return None


# --- Zarr sources ---------------------------------------------------------------------------

def _walk(data):
    """The zarr array under xarray's lazy wrappers of a variable read whole from it, with
    the decoding functions xarray applies to its values, innermost first; ``(None, ())``
    for anything else (a selection, another backend)."""
    from xarray.backends.zarr import ZarrArrayWrapper
    from xarray.coding.common import _ElementwiseFunctionArray
    from xarray.core import indexing

    decoders = []
    for _ in range(32):
        if isinstance(data, ZarrArrayWrapper):
            return data._array, tuple(reversed(decoders))
        if isinstance(data, indexing.LazilyIndexedArray):
            if any(not (isinstance(k, slice) and k == slice(None)) for k in data.key.tuple):
                return None, ()
        elif isinstance(data, _ElementwiseFunctionArray):
            decoders.append((data.func, data.dtype))
        elif not isinstance(data, (indexing.ImplicitToExplicitIndexingAdapter,
                                   indexing.CopyOnWriteArray, indexing.MemoryCachedArray)):
            return None, ()
        data = data.array
    return None, ()


def _decoded(x, func, dtype):
    """``x`` decoded as xarray's CF decoding ``func`` decodes it, by the engine: a mask of
    fill values (``_FillValue``, ``missing_value``) or a scale and offset, each step cast
    to ``dtype`` as NumPy's in-place operations cast; None for another function."""
    from xarray.coding import variables as cf

    if not isinstance(func, functools.partial) or func.args or np.dtype(dtype).kind not in "fc":
        return None
    kw = func.keywords
    if func.func is cf._apply_mask and set(kw) == {"encoded_fill_values",
                                                    "decoded_fill_value", "dtype"}:
        x = x.astype(dtype)
        masked = None
        for fv in kw["encoded_fill_values"]:
            hit = x == fv
            masked = hit if masked is None else masked | hit
        if masked is not None:
            x = nps.where(masked, kw["decoded_fill_value"], x)
    elif func.func is cf._scale_offset_decoding and set(kw) == {"scale_factor", "add_offset",
                                                                 "dtype"}:
        x = x.astype(dtype)
        for k, op in (("scale_factor", operator.mul), ("add_offset", operator.add)):
            if kw[k] is not None:
                x = op(x, kw[k]).astype(dtype)
    else:
        return None
    return x if x.dtype == np.dtype(dtype) else x.astype(dtype)


def _zarr_url(z, session):
    """A URL the session's ``load`` reads for a zarr-python array, or None: a local
    folder (zarr's ``LocalStore``), or an S3 bucket through obstore (zarr's
    ``ObjectStore`` over an ``S3Store``) at the session's own endpoint (the session reads
    with its endpoint and the standard AWS credential chain)."""
    try:
        sp = z.store_path
        store, path = sp.store, sp.path
    except AttributeError:
        return None
    kind = type(store).__name__
    if kind == "LocalStore":
        from pathlib import Path

        return str(Path(store.root) / path) if path else str(store.root)
    inner = getattr(store, "store", None)
    if kind == "ObjectStore" and type(inner).__name__ == "S3Store":
        config = inner.config
        if (config.get("endpoint") or None) != (session.settings().get("endpoint") or None):
            return None
        parts = [p.strip("/") for p in (inner.prefix or "", path) if p and p.strip("/")]
        return "/".join([f"s3://{config['bucket']}"] + parts)
    return None


def _zarr_source(data):
    """``data`` loaded in place when it is a whole Zarr v3 array the session reads
    (decoded by the engine as xarray decodes it), else None."""
    from . import _session

    z, decoders = _walk(data)
    if z is None or getattr(getattr(z, "metadata", None), "zarr_format", None) != 3:
        return None
    url = _zarr_url(z, _session.session())
    x = None if url is None else _engine_array(url)
    if x is None:
        return None
    for func, dtype in decoders:
        x = _decoded(x, func, dtype)
        if x is None:
            return None
    if x.shape != tuple(data.shape) or x.dtype != data.dtype:
        return None
    return x


def _zarr_chunks(data):
    z, _ = _walk(data)
    return None if z is None else tuple(z.chunks)


# --- the Array API namespace xarray asks for (``full`` with ``chunks=``) --------------------

class _ArrayAPI:
    """``nums_cloud.numpy``, whose creation functions also take Dask's ``chunks=``."""

    def __getattr__(self, name):
        f = getattr(nps, name)
        if name in ("full", "zeros", "ones", "empty", "arange", "full_like", "zeros_like",
                    "ones_like", "empty_like", "linspace"):
            def created(*args, chunks=None, **kwargs):
                x = f(*args, **kwargs)
                if chunks is None:
                    return x
                return _reblock(x, _MANAGER.normalize_chunks(chunks, x.shape, dtype=x.dtype))

            return created
        return f


_ARRAY_API = _ArrayAPI()
_MANAGER = NumsCloudManager()


def register():
    """Makes the manager known to xarray as ``"nums-cloud"`` in this process, for a package
    that is not installed (entry points come from installed metadata only). Idempotent."""
    from importlib.metadata import entry_points

    from xarray.namedarray.parallelcompat import list_chunkmanagers

    if entry_points(group="xarray.chunkmanagers", name=NAME):
        return  # installed: xarray loads it from the entry point (importing this module)
    managers = list_chunkmanagers()  # xarray's cached dict: what it looks names up in
    if NAME not in managers:
        managers[NAME] = _MANAGER


register()
