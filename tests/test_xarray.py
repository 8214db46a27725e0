"""xarray on nums-cloud (nums_cloud.xarray, xarray's chunk manager): Datasets written to
Zarr v2 and v3 by xarray's to_zarr and by zarr-python, in chunks other than nums-cloud's
default, opened with chunked_array_type="nums-cloud", and xarray's own operations on them
(mean, std, quantile, groupby, resample, rolling, where, arithmetic, to_zarr and region
writes) equal to xarray on NumPy; each checked to have run on the engine (the session's
block tasks grew), not in NumPy. What the engine cannot run (a Python function) is refused
by name."""
import re
import shutil

import numpy as np
import pandas as pd
import pytest

xr = pytest.importorskip("xarray")
zarr = pytest.importorskip("zarr")

import nums_cloud  # noqa: E402
import nums_cloud.numpy as nps  # noqa: E402
import nums_cloud.xarray  # noqa: E402,F401  (registers "nums-cloud" without an install)

# Zarr chunks: 25 along time (120 long: a ragged last chunk), 3 along lat.
ZARR_CHUNKS = (25, 3, 8)


def dataset():
    rng = np.random.default_rng(44)
    time = pd.date_range("2000-01-01", periods=120, freq="5D")
    shape = (120, 6, 8)
    return xr.Dataset(
        {"t2m": (("time", "lat", "lon"), 280 + 10 * rng.standard_normal(shape)),
         "u": (("time", "lat", "lon"), rng.standard_normal(shape).astype(np.float32))},
        coords={"time": time, "lat": np.linspace(-50.0, 50.0, 6),
                "lon": np.arange(8.0) * 45})


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    """The dataset as Zarr v2 and v3 stores written by xarray, and a v3 one written by
    zarr-python (arrays with dimension names, coordinates beside them)."""
    root = tmp_path_factory.mktemp("zarr")
    ds = dataset()
    enc = {v: {"chunks": ZARR_CHUNKS} for v in ds.data_vars}
    out = {}
    for fmt in (2, 3):
        path = root / f"xarray-v{fmt}.zarr"
        ds.to_zarr(path, zarr_format=fmt, encoding=enc, consolidated=False)
        out[f"xarray-v{fmt}"] = path
    path = root / "zarr-python-v3.zarr"
    g = zarr.open_group(path, mode="w", zarr_format=3)
    for name, var in ds.variables.items():
        if name == "time":
            continue
        a = g.create_array(name, shape=var.shape, dtype=var.dtype,
                           chunks=ZARR_CHUNKS if var.ndim == 3 else var.shape,
                           dimension_names=var.dims)
        a[...] = var.values
    t = g.create_array("time", shape=(120,), dtype="int64", dimension_names=("time",),
                       attributes={"units": "days since 2000-01-01",
                                   "calendar": "proleptic_gregorian"})
    t[...] = np.arange(120) * 5
    out["zarr-python-v3"] = path
    return out


def open_nums(path):
    return xr.open_zarr(path, chunked_array_type="nums-cloud", consolidated=False)


def on_engine(session, f):
    """``f()`` computed, and the block tasks it sent (the work ran on nums-cloud)."""
    before = session.counts()["tasks"]
    r = f()
    r = r.compute()
    return r, session.counts()["tasks"] - before


OPERATIONS = {
    "mean": lambda d: d.mean("time"),
    "std": lambda d: d.std(["lat", "lon"]),
    # xarray's quantile asks for one chunk along its dimension (apply_ufunc's rule)
    "quantile": lambda d: d.chunk(time=-1).quantile([0.1, 0.5, 0.9], dim="time"),
    "groupby-month-mean": lambda d: d.groupby("time.month").mean(),
    "resample-mean": lambda d: d.resample(time="MS").mean(),
    "rolling-mean": lambda d: d.rolling(time=3).mean(),
    "where": lambda d: d.where(d.t2m > 280),
    "arithmetic": lambda d: (d - d.mean("time")) * 2 + d / 3,
    "anomalies": lambda d: d.groupby("time.month") - d.groupby("time.month").mean(),
}


@pytest.mark.parametrize("store", ["xarray-v2", "xarray-v3", "zarr-python-v3"])
@pytest.mark.parametrize("op", list(OPERATIONS))
def test_operations_equal_xarray_on_numpy(session, stores, store, op):
    ds = xr.open_zarr(stores[store], consolidated=False).load()
    nc = open_nums(stores[store])
    for v in nc.data_vars.values():
        assert isinstance(v.data, nps.ndarray), v.name
        # Zarr's own chunking, not nums-cloud's default
        assert v.chunks == ((25,) * 4 + (20,), (3, 3), (8,)), v.chunks
    got, tasks = on_engine(session, lambda: OPERATIONS[op](nc))
    assert tasks > 0, f"{op} sent no block task: it did not run on nums-cloud"
    want = OPERATIONS[op](ds)
    # float32 (u) rounds differently where NumPy sums pairwise
    xr.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    for name, v in want.data_vars.items():
        assert got[name].dtype == v.dtype, (name, got[name].dtype, v.dtype)


# More of xarray's operations (the guide's list), on one store.
MORE = {
    "count-skipna": lambda d: d.where(d.t2m > 280).count("time"),
    "mean-skipna": lambda d: d.where(d.t2m > 280).mean("time"),
    "median": lambda d: d.median("time"),
    "var-ddof": lambda d: d.var("time", ddof=1),
    "max-argmax": lambda d: d.t2m.max("lat") + d.t2m.argmax("time"),
    "fillna-clip-round": lambda d: d.where(d.t2m > 280).fillna(0).clip(-1, 300).round(2),
    "groupby-median": lambda d: d.groupby("time.month").median(),
    "groupby-std": lambda d: d.groupby("time.season").std(),
    "groupby-quantile": lambda d: d.chunk(time=-1).groupby("time.season").quantile(0.5),
    "groupby_bins": lambda d: d.t2m.groupby_bins("lat", [-60, -10, 10, 60]).mean(),
    "resample-max": lambda d: d.resample(time="QS").max(),
    "rolling-std-center": lambda d: d.rolling(time=5, center=True).std(),
    "rolling-sum-min-periods": lambda d: d.rolling(lat=2, min_periods=1).sum(),
    "coarsen": lambda d: d.coarsen(time=10, boundary="trim").mean(),
    "cumsum-diff": lambda d: d.cumsum("time").diff("time"),
    "polyfit": lambda d: d.t2m.polyfit("lat", 1).polyfit_coefficients,
    "corr": lambda d: xr.corr(d.t2m, d.u, dim="time"),
    "integrate": lambda d: d.integrate("lat"),
    "shift-roll-pad": lambda d: (d.shift(time=2) + d.roll(time=3)
                                 + d.pad(time=(1, 0)).isel(time=slice(1, None))),
    "concat-sortby-isel": lambda d: (xr.concat([d, d], dim="time")
                                     .sortby("lat", ascending=False).isel(time=[3, 1, 150])),
    "stack-transpose": lambda d: d.transpose("lon", "lat", "time").stack(p=("lat", "lon")),
    "ufunc": lambda d: np.exp(abs(d.u)) + np.sqrt(d.t2m),
    "map_blocks": lambda d: xr.map_blocks(lambda b: b * 2 - 1, d),
    # einsum with `...` (xarray's dot)
    "weighted-mean": lambda d: d.weighted(np.cos(np.deg2rad(d.lat))).mean(("lat", "lon")),
    "dot": lambda d: xr.dot(d.t2m, d.u.astype("float64"), dim="lon"),
    # gradient at coordinates
    "differentiate": lambda d: d.differentiate("lat"),
    # first()/last() skipping NaN: xarray's nanfirst/nanlast reductions
    "groupby-first-last": lambda d: (d.where(d.t2m > 280).groupby("time.month").first()
                                     - d.where(d.t2m > 285).resample(time="MS").last()
                                     .groupby("time.month").first()),
}


@pytest.mark.parametrize("op", list(MORE))
def test_more_operations_equal_xarray_on_numpy(session, stores, op):
    ds = xr.open_zarr(stores["xarray-v3"], consolidated=False).load()
    got, tasks = on_engine(session, lambda: MORE[op](open_nums(stores["xarray-v3"])))
    assert tasks > 0, f"{op} sent no block task: it did not run on nums-cloud"
    xr.testing.assert_allclose(got, MORE[op](ds), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("fmt", [2, 3])
def test_to_zarr_of_a_result_and_a_region_write_read_back(session, stores, tmp_path, fmt):
    ds = xr.open_zarr(stores[f"xarray-v{fmt}"], consolidated=False).load()
    nc = open_nums(stores[f"xarray-v{fmt}"])
    anom = (nc.t2m - nc.t2m.mean("time")).to_dataset(name="anom")
    out = tmp_path / "anom.zarr"
    before = session.counts()["tasks"]
    anom.to_zarr(out, zarr_format=fmt, consolidated=False)
    assert session.counts()["tasks"] > before
    want = (ds.t2m - ds.t2m.mean("time")).to_dataset(name="anom")
    back = xr.open_zarr(out, consolidated=False).load()
    xr.testing.assert_allclose(back, want)
    # A region (whole Zarr chunks along time) written again, from other values.
    region = slice(50, 100)
    part = (nc.t2m * 0 - 1).isel(time=region).to_dataset(name="anom").drop_vars(["lat", "lon"])
    part.to_zarr(out, region={"time": region}, consolidated=False)
    back = xr.open_zarr(out, consolidated=False).load()
    want.anom[dict(time=region)] = -1.0
    xr.testing.assert_allclose(back, want)


def _no_copy_through_this_process(monkeypatch):
    """Fails a store that would copy its values through this process (persisting the
    source, then assigning it block by block) instead of the functions writing the
    target's chunks."""
    def refuse(self):
        raise AssertionError("store copied the values through this process")
    monkeypatch.setattr(nps.ndarray, "persist", refuse)


@pytest.mark.parametrize("fmt,order,codec", [(2, "F", "blosc"), (2, "C", "zlib"),
                                             (3, "C", "gzip"), (3, "C", None)])
def test_store_writes_whole_chunks_by_the_functions(session, tmp_path, monkeypatch, fmt,
                                                    order, codec):
    """A region of whole chunks (ragged at the array's end) of a zarr-python array in
    other chunks than the source's, another dtype, any codec and order: written by the
    functions, read back by zarr-python as NumPy assigns it; the rest keeps its fill."""
    import numcodecs

    kw = {"compressors": {"blosc": numcodecs.Blosc(cname="zstd"), "zlib": numcodecs.Zlib(),
                          "gzip": zarr.codecs.GzipCodec(), None: None}[codec]}
    if fmt == 2:
        kw["order"] = order
    z = zarr.create_array(tmp_path / "t.zarr", shape=(100, 30), chunks=(20, 7),
                          dtype="float32", fill_value=-9.0, zarr_format=fmt, **kw)
    xn = np.arange(100 * 30, dtype=np.float64).reshape(100, 30) / 7
    src = nps.asarray(xn).block((33, 11)) * 2
    want = np.full((100, 30), -9.0, dtype=np.float32)
    want[40:] = (xn * 2)[40:]
    _no_copy_through_this_process(monkeypatch)
    before = session.counts()["tasks"]
    nums_cloud.xarray.NumsCloudManager().store(
        src[40:], z, regions=(slice(40, 100), slice(0, 30)))
    assert session.counts()["tasks"] > before
    back = zarr.open_array(tmp_path / "t.zarr", mode="r")
    np.testing.assert_array_equal(back[...], want)


def test_a_region_not_of_whole_chunks_is_copied_and_refused_by_the_engine(session, tmp_path):
    z = zarr.create_array(tmp_path / "t.zarr", shape=(100,), chunks=(20,), dtype="float64",
                          fill_value=0.0, zarr_format=3)
    src = nps.arange(50.0)
    # Not whole chunks: the chunk manager copies it through this process (no two tasks
    # write one chunk), as NumPy assigns it.
    nums_cloud.xarray.NumsCloudManager().store(src, z, regions=(slice(10, 60),))
    want = np.zeros(100)
    want[10:60] = np.arange(50.0)
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "t.zarr", mode="r")[...], want)
    # The engine itself refuses it, naming the chunks.
    with pytest.raises(Exception, match=r"not whole chunks of \[20\]"):
        session._native.write_zarr(src._a, str(tmp_path / "t.zarr"), [10])
    with pytest.raises(Exception, match=r"outside the array's shape \[100\]"):
        session._native.write_zarr(src._a, str(tmp_path / "t.zarr"), [60])
    np.testing.assert_array_equal(zarr.open_array(tmp_path / "t.zarr", mode="r")[...], want)


def test_chunk_and_rechunk_a_numpy_dataset(session):
    ds = dataset()
    nc = ds.chunk({"time": 30, "lat": -1}, chunked_array_type="nums-cloud")
    assert isinstance(nc.t2m.data, nps.ndarray)
    assert nc.t2m.chunks == ((30,) * 4, (6,), nc.t2m.chunks[2])
    re = nc.chunk({"time": 50, "lon": 4})
    assert re.t2m.chunks == ((50, 50, 20), (6,), (4, 4))
    got, tasks = on_engine(session, lambda: (re - nc).sum())
    assert tasks > 0
    xr.testing.assert_allclose(got, (ds - ds).sum())
    with pytest.raises(ValueError, match="regular"):
        nc.chunk({"time": (60, 30, 30)})


def test_rows_to_columns_goes_through_grids_within_memory(tmp_path):
    """Rows to columns of a 64 MB array at memory_mb = 128 (a task reads at most 32 MB of
    blocks, and a column block would read them all): through two grids whose blocks go
    geometrically from rows to columns (3 x 512 tasks), not one grid of 16,384 small
    blocks; the values as NumPy's."""
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=128,
                        progress=False, in_process_mb=0, memory_tier_mb=0)
    try:
        n = 4096
        a = np.random.default_rng(0).standard_normal((n, n)).astype(np.float32)
        x = nps.asarray(a).block((8, n)) + np.float32(1)
        x.persist()
        y = x.block((n, 8)) * np.float32(2)
        tasks = int(re.search(r"of (\d+) tasks", nums_cloud.explain(y)).group(1))
        assert 1024 < tasks < 4096, tasks  # one grid: 16,384 tasks and more
        y.persist()
        np.testing.assert_array_equal(y.get(), (a + np.float32(1)) * np.float32(2))
    finally:
        nums_cloud.close()


@pytest.mark.parametrize("store", ["xarray-v3", "zarr-python-v3"])
def test_zarr_v3_variables_are_read_by_the_functions(tmp_path, stores, store):
    """A variable of a Zarr v3 array is loaded in place, not read into this process at
    open: with every compute on the function processes, they read the store's chunks
    themselves. A write to the store after open makes the next compute refuse (never a mix
    of old and new chunks); opened again, the new values are what it computes."""
    path = tmp_path / "copy.zarr"
    shutil.copytree(stores[store], path)
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=256,
                        progress=False, in_process_mb=0, memory_tier_mb=0)
    try:
        nc = open_nums(path)
        z = zarr.open_array(path / "t2m", mode="r+")
        before = s.counts()
        got = nc.t2m.mean(["lat", "lon"]).compute()
        after = s.counts()
        assert after["invocations"] > before["invocations"]
        assert after["in_process"] == before["in_process"]
        assert after["bytes_read"] - before["bytes_read"] >= z.nbytes // 2
        want = xr.open_zarr(path, consolidated=False).t2m.load().mean(["lat", "lon"])
        xr.testing.assert_allclose(got, want)
        z[...] = z[...] + 1.0
        with pytest.raises(Exception, match="changed while this compute read it"):
            nc.t2m.mean(["lat", "lon"]).compute()
        got = open_nums(path).t2m.mean(["lat", "lon"]).compute()
        xr.testing.assert_allclose(got, want + 1.0)
    finally:
        nums_cloud.close()


def test_python_functions_are_refused_by_name(session, stores):
    nc = open_nums(stores["xarray-v3"])
    # a reduction with a Python function the engine does not have
    from xarray.namedarray.parallelcompat import guess_chunkmanager

    def my_python_mode(a, axis=None, keepdims=False):
        return a

    with pytest.raises(NotImplementedError, match="my_python_mode"):
        guess_chunkmanager("nums-cloud").reduction(nc.t2m.data, func=my_python_mode, axis=0)
    # apply_ufunc with a function that would compute values in this process
    with pytest.raises(NotImplementedError, match="np_sort_in_python"):
        def np_sort_in_python(a):
            return np.asarray(a).copy()
        xr.apply_ufunc(np_sort_in_python, nc.t2m, dask="parallelized",
                       output_dtypes=[np.float64]).compute()
    # a function built from NumPy's that the engine has runs on it
    got = xr.apply_ufunc(lambda a: np.exp(a / 300.0), nc.t2m, dask="parallelized",
                         output_dtypes=[np.float64]).compute()
    want = np.exp(xr.open_zarr(stores["xarray-v3"], consolidated=False).t2m.load() / 300.0)
    xr.testing.assert_allclose(got, want)


def test_manager_is_registered_and_chunks_normalize():
    from xarray.namedarray.parallelcompat import guess_chunkmanager

    m = guess_chunkmanager("nums-cloud")
    assert isinstance(m, nums_cloud.xarray.NumsCloudManager)
    assert m.normalize_chunks((4, -1, "auto"), shape=(10, 3, 7), dtype=np.float64,
                              previous_chunks=((5, 5), (3,), (2, 2, 2, 1))) == (
        (4, 4, 2), (3,), (2, 2, 2, 1))
    assert m.normalize_chunks(((3, 3, 1),)) == ((3, 3, 1),)
    with pytest.raises(ValueError, match="regular"):
        m.normalize_chunks(((2, 3),), shape=(5,))


def test_a_zarr_store_on_s3_is_read_in_place_and_written(garage, monkeypatch):
    """A dataset on S3 (Garage), opened through zarr's obstore store: its variables are
    loaded in place from the bucket by an S3 session at the same endpoint, and a result
    written back to the bucket by to_zarr reads back as xarray on NumPy computes it."""
    obstore = pytest.importorskip("obstore")
    from zarr.storage import ObjectStore

    for k, v in garage.env().items():
        monkeypatch.setenv(k, v)

    def bucket(prefix):
        return ObjectStore(obstore.store.S3Store(
            garage.bucket, prefix=prefix, endpoint=garage.endpoint, region=garage.region,
            client_options={"allow_http": True}))

    ds = dataset()
    ds.to_zarr(bucket("xarray/in.zarr"), zarr_format=3, consolidated=False,
               encoding={v: {"chunks": ZARR_CHUNKS} for v in ds.data_vars})
    s = nums_cloud.init(storage=f"s3://{garage.bucket}/xarray/session",
                        endpoint=garage.endpoint, workers=2, memory_mb=256, progress=False)
    try:
        # in place: values written to the bucket after to_zarr are what the compute reads
        z = zarr.open_array(bucket("xarray/in.zarr"), path="t2m", mode="r+")
        z[...] = z[...] + 1.0
        ds["t2m"] = ds.t2m + 1.0
        nc = xr.open_zarr(bucket("xarray/in.zarr"), chunked_array_type="nums-cloud",
                          consolidated=False)
        anom = nc.groupby("time.month") - nc.groupby("time.month").mean()
        before = s.counts()["tasks"]
        anom.to_zarr(bucket("xarray/anom.zarr"), zarr_format=3, consolidated=False)
        assert s.counts()["tasks"] > before
        back = xr.open_zarr(bucket("xarray/anom.zarr"), consolidated=False).load()
        want = ds.groupby("time.month") - ds.groupby("time.month").mean()
        xr.testing.assert_allclose(back, want, rtol=1e-5, atol=1e-5)
    finally:
        nums_cloud.close()


def test_sliding_window_view_equals_numpys(session):
    """xarray's rolling reaches nums_cloud.numpy.lib.stride_tricks.sliding_window_view
    through the arrays' namespace: NumPy's windows, built lazily on the engine."""
    from nums_cloud.numpy.lib import stride_tricks

    v = np.arange(7 * 5 * 4, dtype=np.float64).reshape(7, 5, 4)
    x = nps.array(v).block((3, 2, 4))
    for window, axis in [(3, 0), ((2, 2), (0, 2)), (5, -2), ((1, 2, 3), None)]:
        got = stride_tricks.sliding_window_view(x, window, axis=axis)
        want = np.lib.stride_tricks.sliding_window_view(v, window, axis=axis)
        assert got.shape == want.shape
        np.testing.assert_array_equal(got.get(), want)
    with pytest.raises(ValueError, match="larger"):
        stride_tricks.sliding_window_view(x, 8, axis=0)


def test_cf_encoded_variables_are_decoded_by_the_engine(session, tmp_path):
    """Packed integers (scale_factor, add_offset, _FillValue) and floats with a fill value
    other than NaN, as CMIP-style stores hold them: loaded in place and decoded by the
    engine, identical to xarray's own decoding."""
    rng = np.random.default_rng(7)
    v = 280 + 10 * rng.standard_normal((40, 6, 8))
    v[3, 2, :] = np.nan
    ds = xr.Dataset({n: (("t", "y", "x"), v) for n in ("packed", "packed32", "fill")})
    path = tmp_path / "cf.zarr"
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding={
        "packed": {"dtype": "int16", "scale_factor": 0.01, "add_offset": 280.0,
                   "_FillValue": -32767, "chunks": (10, 6, 8)},
        "packed32": {"dtype": "int16", "scale_factor": np.float32(0.01),
                     "add_offset": np.float32(280.0), "_FillValue": -32767,
                     "chunks": (10, 3, 8)},
        "fill": {"dtype": "float32", "_FillValue": 1e20, "chunks": (10, 6, 4)}})
    for name in ("packed", "fill"):
        z = zarr.open_array(path / name, mode="r+")
        z[5:9] = z[5:9] + (3 if z.dtype.kind == "i" else 3.0)
    nc = open_nums(path)
    want = xr.open_zarr(path, consolidated=False).load()
    assert want.fill.dtype == np.float32
    got, tasks = on_engine(session, lambda: nc)
    assert tasks > 0
    xr.testing.assert_identical(got, want)


def test_hooks_run_the_engines_functions_and_refuse_others(session):
    """reduction, scan, map_blocks and blockwise with NumPy's functions the engine has
    (or nums_cloud.numpy's), against NumPy; a Python function is refused by name."""
    m = nums_cloud.xarray.NumsCloudManager()
    v = np.arange(30.0).reshape(5, 6) - 7
    x = nps.array(v).block((2, 4))
    assert x.chunks == ((2, 2, 1), (4, 2))
    np.testing.assert_array_equal(
        m.reduction(x, np.nansum, aggregate_func=np.nansum, axis=1, dtype=np.float32).get(),
        np.nansum(v, axis=1).astype(np.float32))
    np.testing.assert_array_equal(m.reduction(x, nps.max, axis=0, keepdims=True).get(),
                                  v.max(axis=0, keepdims=True))
    np.testing.assert_array_equal(m.scan(np.cumsum, np.add, 0, x, axis=0).get(),
                                  np.cumsum(v, axis=0))
    np.testing.assert_array_equal(m.map_blocks(np.abs, x).get(), np.abs(v))
    np.testing.assert_array_equal(m.blockwise(np.multiply, "ij", x, "ij", nps.arange(6.0), "j",
                                              ).get(), v * np.arange(6.0))
    chunks, (a, b) = m.unify_chunks(x, "ij", nps.array(v).block((5, 3)), "ij")
    assert a.chunks == b.chunks == ((2, 2, 1), (4, 2)) and chunks == {"i": (2, 2, 1),
                                                                      "j": (4, 2)}
    for call, name in ((lambda: m.reduction(x, lambda b, axis, keepdims: b), "lambda"),
                       (lambda: m.scan(np.maximum.accumulate, np.maximum, 0, x, axis=0),
                        "accumulate"),
                       (lambda: m.map_blocks(np.cumsum, x), "cumsum"),
                       (lambda: m.blockwise(np.add, "ij", x, "ji", x, "ij"), "add")):
        with pytest.raises(NotImplementedError, match=name):
            call()


@pytest.mark.parametrize("fmt", [2, 3])
def test_codecs_the_engine_lacks_are_read_and_written_by_this_process(session, tmp_path, fmt):
    """A Zarr variable in a codec the engine has no reader for (LZ4, BZ2) is opened by
    xarray's own reading in this process, and written by it block by block, as the guide
    says: never an error where zarr-python reads and writes it."""
    import numcodecs
    import numcodecs.zarr3 as nz3

    v = np.arange(1.0, 121.0).reshape(20, 6)  # no 0.0: v2's default fill value
    comp = {"compressors": [nz3.LZ4()]} if fmt == 3 else {"compressor": numcodecs.LZ4()}
    src = tmp_path / "lz4.zarr"
    g = zarr.open_group(src, mode="w", zarr_format=fmt)
    a = g.create_array("v", shape=v.shape, chunks=(7, 6), dtype="f8",
                       dimension_names=("t", "x") if fmt == 3 else None,
                       attributes={} if fmt == 3 else {"_ARRAY_DIMENSIONS": ["t", "x"]},
                       **comp)
    a[...] = v
    ds = xr.open_zarr(src, consolidated=False, chunked_array_type="nums-cloud")
    assert isinstance(ds.v.data, nums_cloud.numpy.BlockArray)
    np.testing.assert_array_equal(ds.v.sum("t").values, v.sum(0))
    out = tmp_path / "out.zarr"
    enc = {"v": {"chunks": (7, 6),
                 "compressors": [nz3.BZ2() if fmt == 3 else numcodecs.BZ2()]}}
    (ds * 2).to_zarr(out, zarr_format=fmt, consolidated=False, encoding=enc)
    np.testing.assert_array_equal(zarr.open_array(out / "v", mode="r")[...], v * 2)


def test_string_and_date_coordinates_stay_numpy_when_a_dataset_is_chunked(session):
    """A non-index coordinate of strings or dates (a dtype the engine lacks) is left a
    NumPy array by ``.chunk()``; the numeric variables are the engine's, and a groupby
    over the string coordinate equals xarray's on NumPy."""
    ds = xr.Dataset({"a": ("t", np.arange(8.0))},
                    coords={"station": ("t", list("abcabcab")),
                            "valid": ("t", pd.date_range("2001-01-01", periods=8))})
    nc = ds.chunk({"t": 3}, chunked_array_type="nums-cloud")
    assert isinstance(nc.a.data, nps.BlockArray)
    assert isinstance(nc.station.data, np.ndarray) and isinstance(nc.valid.data, np.ndarray)
    xr.testing.assert_identical(nc.groupby("station").mean().compute(),
                                ds.groupby("station").mean())


def test_an_icechunk_repository_is_read_in_slabs_and_written_by_this_process(
        session, tmp_path, monkeypatch):
    """A Dataset in an Icechunk repository (a store the functions cannot reach: its chunks
    are named by its manifests) is read by this process and handed to the engine a slab of
    whole source chunks at a time, computed there, and its results committed back to the
    repository, equal to xarray on NumPy."""
    import icechunk  # tests/requirements.txt installs it
    import nums_cloud.xarray as nx

    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "ic")))
    ds = dataset()
    w = repo.writable_session("main")
    ds.to_zarr(w.store, zarr_format=3, consolidated=False,
               encoding={v: {"chunks": ZARR_CHUNKS} for v in ds.data_vars})
    w.commit("the dataset")
    # Slabs of 2 source chunks along time (48 KB each of t2m), so that the slab path runs.
    monkeypatch.setattr(nx, "_SLAB_BYTES", 2 * 25 * 6 * 8 * 8)
    got = xr.open_zarr(repo.readonly_session("main").store, consolidated=False,
                       chunked_array_type="nums-cloud")
    assert isinstance(got.t2m.data, nps.BlockArray)
    assert got.t2m.chunks[0] == (25, 25, 25, 25, 20)
    clim, n = on_engine(session, lambda: got.groupby("time.month").mean().compute())
    assert n > 0
    xr.testing.assert_allclose(clim, ds.groupby("time.month").mean())
    w = repo.writable_session("main")
    (got - got.mean("time")).to_zarr(w.store, group="anomalies", zarr_format=3,
                                     consolidated=False)
    w.commit("anomalies")
    back = xr.open_zarr(repo.readonly_session("main").store, group="anomalies",
                        consolidated=False, chunks=None)
    # (float32 means differ from NumPy's in the last bits: the engine sums in another order)
    xr.testing.assert_allclose(back, ds - ds.mean("time"), atol=1e-6)
