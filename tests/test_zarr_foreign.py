"""Zarr arrays written by other tools (zarr-python, Zarr v2 and v3) read where they are, in
their own chunks: zstd, blosc, gzip and no compression; C and F order (v2's `order`, v3's
`transpose` codec); fill values and chunks never written; int, float, bool and complex
dtypes. Job files, the Python package and an `s3://` array on Garage; sums, slices and
matmul equal NumPy's on what zarr-python reads; the job's store never holds a copy; an
input whose chunks are written again while a run reads it fails the run; what nums-cloud
writes opens in zarr-python."""
import os
import signal
import subprocess
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from nums import BIN, assert_close, job_text, run

zarr = pytest.importorskip("zarr")
numcodecs = pytest.importorskip("numcodecs")

SHAPE, CHUNKS = (50, 23), (7, 5)  # ragged at both edges; not nums-cloud's default blocks


def compressor(fmt, name):
    if name == "none":
        return None
    if fmt == 2:
        return {"zstd": numcodecs.Zstd(level=3), "blosc": numcodecs.Blosc(cname="lz4", shuffle=1),
                "gzip": numcodecs.GZip(level=2)}[name]
    return {"zstd": zarr.codecs.ZstdCodec(level=3), "blosc": zarr.codecs.BloscCodec(cname="lz4"),
            "gzip": zarr.codecs.GzipCodec(level=2)}[name]


def values(dtype, seed):
    r = np.random.default_rng(seed)
    x = r.normal(size=SHAPE) * 10
    if dtype == "bool":
        return x > 0
    if np.dtype(dtype).kind == "c":
        return (x + 1j * r.normal(size=SHAPE)).astype(dtype)
    return x.astype(dtype)


def fill_for(dtype):
    return {"bool": True, "int32": -7, "int64": 5, "float32": -1.5, "float64": np.nan,
            "complex128": 1 + 2j}[dtype]


def write(path, fmt, codec, order, dtype, seed=0):
    """A (50, 23) array in (7, 5) chunks, of which the rows from 28 on are never written
    (their chunks read as the fill value); returns what zarr-python reads."""
    kw = {"zarr_format": fmt, "compressors": compressor(fmt, codec), "fill_value": fill_for(dtype)}
    if fmt == 2:
        kw["order"] = order
    elif order == "F":
        kw["filters"] = [zarr.codecs.TransposeCodec(order=(1, 0))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        z = zarr.create_array(str(path), shape=SHAPE, chunks=CHUNKS, dtype=dtype, **kw)
        z[:28] = values(dtype, seed)[:28]
        return z[:]


# One array per codec, order and dtype: every codec in both orders, every dtype.
CASES = [("zstd", "C", "float64"), ("blosc", "F", "float32"), ("gzip", "C", "int32"),
         ("none", "F", "complex128"), ("zstd", "F", "int64"), ("blosc", "C", "bool"),
         ("gzip", "F", "float64"), ("none", "C", "float64")]


def chunk_files(folder):
    return sorted(str(p.relative_to(folder)) for p in Path(folder).rglob("*") if p.is_file())


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_job_reads_foreign_zarr_arrays_in_place_in_their_own_chunks(tmp_path, fmt):
    arrays, outputs, want, read = {}, {}, {}, {}
    for i, (codec, order, dtype) in enumerate(CASES):
        a = read[i] = write(tmp_path / f"in{i}.zarr", fmt, codec, order, dtype, seed=i)
        n = f"Z{i}"
        arrays[n] = {"load": f"in{i}.zarr"}
        if dtype == "bool":
            arrays[f"S{i}"] = f"sum({n}, axis=0)"
            want[f"S{i}"] = a.sum(axis=0)
        else:
            # float64 fill values are NaN: nansum, as NumPy's.
            s = "nansum" if np.issubdtype(a.dtype, np.floating) else "sum"
            arrays[f"S{i}"] = f"{s}({n}, axis=1)"
            want[f"S{i}"] = getattr(np, s)(a, axis=1)
        arrays[f"T{i}"] = f"{n}[3:45:2, 4:]"
        want[f"T{i}"] = a[3:45:2, 4:]
        outputs[f"S{i}"] = f"S{i}.npy"
        outputs[f"T{i}"] = f"T{i}.npy"
    # A matmul across two arrays' own (7, 5) chunks, and one read in blocks the job gives.
    arrays["M"] = "nan_to_num(Z0[:23, :]) @ Z1.T"
    want["M"] = np.nan_to_num(read[0][:23]) @ read[1].T
    arrays["R"] = {"load": "in2.zarr", "block": [20, 23]}
    arrays["RS"] = "sum(R * 2, axis=0)"
    want["RS"] = (read[2] * 2).sum(axis=0)
    outputs.update({"M": "M.npy", "RS": "RS.npy"})
    if fmt == 3:
        # Sharded: its shards (14, 10) are the blocks, their inner (7, 5) chunks decoded
        # by the sharding codec, those never written its fill value.
        z = zarr.create_array(str(tmp_path / "sh.zarr"), shape=SHAPE, chunks=CHUNKS, shards=(14, 10),
                              dtype="float64", fill_value=0.5)
        z[:20] = values("float64", 9)[:20]
        arrays.update({"SH": {"load": "sh.zarr"}, "SHS": "sum(SH, axis=0)"})
        want["SHS"] = z[:].sum(axis=0)
        outputs["SHS"] = "SHS.npy"
    before = {i: chunk_files(tmp_path / f"in{i}.zarr") for i in range(len(CASES))}
    (tmp_path / "job.toml").write_text(job_text(arrays, outputs, storage={"url": f"file://{tmp_path / 'store'}"}))
    run(tmp_path / "job.toml")
    for k, w in want.items():
        got = np.load(tmp_path / f"{k}.npy")
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(got, w, rtol=1e-5 if w.dtype in (np.float32, np.complex64) else 1e-10,
                                       equal_nan=True, err_msg=k)
        else:
            np.testing.assert_array_equal(got, w, err_msg=k)
        assert got.shape == w.shape, k
    # Read in place: no array in the job's store (no import, every output a file), and
    # the inputs untouched.
    assert not list((tmp_path / "store").rglob("zarr.json"))
    assert not list((tmp_path / "store").rglob("_inputs"))
    assert {i: chunk_files(tmp_path / f"in{i}.zarr") for i in range(len(CASES))} == before


def test_the_python_package_reads_foreign_zarr_in_place(tmp_path):
    import nums_cloud
    import nums_cloud.numpy as nps

    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=512, progress=False)
    try:
        loaded = []
        for fmt, (codec, order, dtype) in [(2, ("blosc", "F", "float64")), (3, ("gzip", "F", "complex128")),
                                          (2, ("none", "C", "int32")), (3, ("zstd", "C", "bool"))]:
            a = write(tmp_path / f"p{fmt}{codec}.zarr", fmt, codec, order, dtype, seed=fmt)
            x = nps.load(tmp_path / f"p{fmt}{codec}.zarr")
            loaded.append((x, a))
            assert x.shape == SHAPE and x.dtype == a.dtype
            if a.dtype.kind == "f":
                np.testing.assert_allclose(float(nps.nansum(x)), np.nansum(a), rtol=1e-12)
            else:
                np.testing.assert_allclose(nps.sum(x, axis=0).get(), a.sum(axis=0), rtol=1e-12)
            np.testing.assert_array_equal(x[5:33:3, 2:19].get(), a[5:33:3, 2:19])
            if a.dtype.kind != "b":
                b = np.nan_to_num(a)
                y = nps.nan_to_num(x)
                np.testing.assert_allclose((y.T @ y).get(), b.T @ b, rtol=1e-10)
        # No copy of an input in the session's store: no stored array of the inputs' shape.
        import json
        shapes = [json.loads(p.read_text()).get("shape") for p in (tmp_path / "store").rglob("zarr.json")]
        assert list(SHAPE) not in shapes, shapes
        for x, a in loaded:
            np.testing.assert_array_equal(x.get(), a)
        # A chunk written again after the load: a compute refuses what it would read.
        x = nps.load(tmp_path / "p2blosc.zarr")
        zarr.open_array(str(tmp_path / "p2blosc.zarr"), mode="r+")[:7, :5] = 3.0
        with pytest.raises(Exception, match="changed while this compute read it"):
            float((x * 2).sum())
        np.testing.assert_allclose(float(nps.nansum(nps.load(tmp_path / "p2blosc.zarr"))),
                                   np.nansum(zarr.open_array(str(tmp_path / "p2blosc.zarr"), mode="r")[:]))
    finally:
        s.close()


def test_an_s3_foreign_zarr_array_on_garage_is_read_in_place(garage, tmp_path):
    from test_import import s3_get, s3_put

    b = garage.bucket
    want = {}
    for fmt in (2, 3):
        local = tmp_path / f"g{fmt}.zarr"
        want[fmt] = write(local, fmt, "blosc" if fmt == 2 else "zstd", "F", "float64", seed=fmt)
        for p in Path(local).rglob("*"):
            if p.is_file():
                s3_put(garage, f"foreign-{tmp_path.name}/g{fmt}.zarr/{p.relative_to(local)}", p.read_bytes())
    arrays = {"A": {"load": f"s3://{b}/foreign-{tmp_path.name}/g2.zarr"},
              "B": {"load": f"s3://{b}/foreign-{tmp_path.name}/g3.zarr"},
              "S": "nansum(A, axis=0) + nansum(B, axis=0)", "T": "B[10:40, 3:9]"}
    prefix = f"zjob-{tmp_path.name}"
    (tmp_path / "job.toml").write_text(job_text(arrays, {"S": "S.npy", "T": "T.npy"},
                                                storage={"url": f"s3://{b}/{prefix}", "endpoint": garage.endpoint}))
    run(tmp_path / "job.toml", env=garage.env())
    assert_close(np.load(tmp_path / "S.npy"), np.nansum(want[2], axis=0) + np.nansum(want[3], axis=0))
    np.testing.assert_array_equal(np.load(tmp_path / "T.npy"), want[3][10:40, 3:9])
    # Nothing imported into the job's prefix.
    for name in ("A", "B"):
        assert s3_get(garage, f"{prefix}/t/{name}/zarr.json") is None


def test_foreign_chunks_written_again_while_a_run_reads_them_fail_the_run(tmp_path):
    """zarr-python writes a chunk again (the metadata unchanged) while a run reads the
    array: the run fails saying the input changed, never a mix of old and new chunks."""
    z = zarr.create_array(str(tmp_path / "f.zarr"), shape=(400 * 7, 4), chunks=(7, 4), dtype="float64",
                          compressors=zarr.codecs.GzipCodec(), fill_value=0.0)
    z[:] = 1.0
    (tmp_path / "r.toml").write_text(job_text({"Y": {"load": "f.zarr"}, "S": "Y + 0"}, {"S": "S.npy"},
                                              name="reader", compute={"scheduler": "naive", "workers": 1}))
    env = {**os.environ, "NUMS_FAULT_SIGNAL_AFTER_BATCHES": "%d:10" % signal.SIGSTOP}
    p = subprocess.Popen([BIN, "run", str(tmp_path / "r.toml")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    try:
        t = time.time()
        while open(f"/proc/{p.pid}/stat").read().split(") ")[1][0] != "T":
            assert p.poll() is None and time.time() - t < 60, "the reader did not stop"
            time.sleep(0.01)
        z[-7:] = 2.0  # the last chunk, not read yet
    finally:
        p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    assert p.returncode == 1 and "changed while this run read it" in err, err
    assert not (tmp_path / "S.npy").exists()


@pytest.mark.parametrize("fmt", [2, 3])
def test_zarr_outputs_open_in_zarr_python(tmp_path, fmt):
    """An output computed from a foreign array, written as Zarr (a folder), opens in
    zarr-python with the values NumPy gives."""
    a = write(tmp_path / "in.zarr", fmt, "blosc", "F", "float32", seed=3)
    arrays = {"X": {"load": "in.zarr"}, "Y": "X * 2 + 1", "X2": "X"}
    run_dir = tmp_path
    (run_dir / "job.toml").write_text(job_text(arrays, {"Y": "out/Y.zarr", "X2": "out/X.zarr"}))
    run(run_dir / "job.toml")
    y = zarr.open_array(str(tmp_path / "out" / "Y.zarr"), mode="r")
    assert y.dtype == np.float32 and y.shape == SHAPE
    np.testing.assert_allclose(y[:], a * 2 + 1, rtol=1e-6)
    np.testing.assert_array_equal(zarr.open_array(str(tmp_path / "out" / "X.zarr"), mode="r")[:], a)
