"""Parquet inputs: a file's numeric columns read as one array by the functions, each task
fetching the footer and the column chunks of its rows' row groups; compared with pyarrow's
reading of the same file (NumPy's promotion of the columns), on the file store with
blocks that cut row groups and columns, and from Garage; nulls, strings and a file that is
not Parquet refused by name."""
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from nums import job_text, run
from test_import import s3_put


def table(n, seed=0):
    rng = np.random.default_rng(seed)
    return pa.table({
        "i32": pa.array(rng.integers(-2**31, 2**31, n), pa.int32()),
        "i64": pa.array(rng.integers(-2**62, 2**62, n), pa.int64()),
        "f32": pa.array(rng.normal(size=n).astype(np.float32)),
        "f64": pa.array(rng.normal(size=n)),
        "b": pa.array(rng.random(n) < 0.5),
    })


def as_numpy(t, cols=None):
    """The columns side by side as NumPy promotes them (what nums-cloud must give)."""
    cols = cols or t.column_names
    return np.column_stack([t.column(c).to_numpy() for c in cols])


def load(tmp_path, src, block=None, name="P", **keys):
    arr = {"load": str(src), **keys}
    if block:
        arr["block"] = block
    job = tmp_path / "job.toml"
    job.write_text(job_text({name: arr}, {name: str(tmp_path / "out.npy")}))
    return run(job, check=False)


@pytest.mark.parametrize("compression", ["snappy", "zstd", "gzip", "lz4", "none"])
def test_mixed_columns_round_trip_with_blocks_across_row_groups(tmp_path, compression):
    t = table(250)
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=37, compression=compression)
    p = load(tmp_path, tmp_path / "t.parquet", block=[40, 2])
    assert p.returncode == 0, p.stderr
    got, want = np.load(tmp_path / "out.npy"), as_numpy(t)
    assert got.dtype == np.float64 and want.dtype == np.float64
    np.testing.assert_array_equal(got, want)


def test_int_columns_are_exact_int64_and_one_column_is_1d(tmp_path):
    big = np.array([2**53 + 1, -(2**62) - 3, 7, 2**63 - 1], dtype=np.int64)
    pq.write_table(pa.table({"a": big, "b": pa.array([1, 2, 3, 4], pa.int32()),
                             "c": [True, False, True, True]}), tmp_path / "i.parquet", row_group_size=3)
    assert load(tmp_path, tmp_path / "i.parquet", block=[3, 2]).returncode == 0
    got = np.load(tmp_path / "out.npy")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.column_stack([big, [1, 2, 3, 4], [1, 0, 1, 1]]))
    pq.write_table(pa.table({"x": np.arange(10.0, dtype=np.float32)}), tmp_path / "one.parquet",
                   row_group_size=4)
    assert load(tmp_path, tmp_path / "one.parquet", block=[3]).returncode == 0
    got = np.load(tmp_path / "out.npy")
    assert got.shape == (10,) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.arange(10.0, dtype=np.float32))


def test_every_int_and_float_width_keeps_its_dtype(tmp_path):
    """Parquet's int8 ... uint64 and float columns are those dtypes (uint64 past int64
    exactly); columns of several types are NumPy's promotion of them (int8 with uint8 is
    int16, int64 with uint64 float64). Parquet has no complex type."""
    rng = np.random.default_rng(3)
    cols = {}
    for t in ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"):
        info = np.iinfo(t)
        cols[t] = rng.integers(info.min, info.max, size=9, dtype=t, endpoint=True)
        cols[t][:2] = [info.min, info.max]
    cols["float32"] = rng.normal(size=9).astype(np.float32)
    for t, a in cols.items():
        pq.write_table(pa.table({"x": a}), tmp_path / f"{t}.parquet", row_group_size=4)
        assert load(tmp_path, tmp_path / f"{t}.parquet", block=[3]).returncode == 0, t
        got = np.load(tmp_path / "out.npy")
        assert got.dtype == a.dtype, t
        np.testing.assert_array_equal(got, a, err_msg=t)
    for pair in (("int8", "uint8"), ("uint16", "int32"), ("int64", "uint64"), ("uint32", "float32")):
        t = pa.table({c: cols[c] for c in pair})
        pq.write_table(t, tmp_path / "mixed.parquet", row_group_size=4)
        assert load(tmp_path, tmp_path / "mixed.parquet", block=[4, 1]).returncode == 0, pair
        got, want = np.load(tmp_path / "out.npy"), np.column_stack([cols[c] for c in pair])
        assert got.dtype == want.dtype, pair
        np.testing.assert_array_equal(got, want, err_msg=str(pair))


def test_nulls_strings_and_non_parquet_are_refused_by_name(tmp_path):
    pq.write_table(pa.table({"a": [1.0, None, 3.0], "b": [1.0, 2.0, 3.0]}), tmp_path / "n.parquet")
    p = load(tmp_path, tmp_path / "n.parquet")
    assert p.returncode != 0 and 'column "a" has a null at row 1' in p.stderr, p.stderr
    assert not (tmp_path / "out.npy").exists()
    pq.write_table(pa.table({"a": [1.0, 2.0], "name": ["x", "y"]}), tmp_path / "s.parquet")
    p = load(tmp_path, tmp_path / "s.parquet")
    assert p.returncode != 0 and 'column "name" holds BYTE_ARRAY values, not numbers' in p.stderr, p.stderr
    assert "job.toml:" in p.stderr and "arrays.P.load" in p.stderr, p.stderr
    (tmp_path / "fake.parquet").write_bytes(b"not a parquet file at all")
    p = load(tmp_path, tmp_path / "fake.parquet")
    assert p.returncode != 0 and "is not a Parquet file" in p.stderr, p.stderr


def test_usecols_picks_columns_by_name_or_index_and_dtype_converts(tmp_path):
    """`usecols` (names or indices, negative from the end, in any order) keeps the columns
    it names, so a string column left out does not matter; `dtype` converts as astype."""
    t = table(250, seed=2).append_column("label", pa.array([f"r{i}" for i in range(250)]))
    pq.write_table(t, tmp_path / "t.parquet", row_group_size=37)
    p = load(tmp_path, tmp_path / "t.parquet", block=[40, 2], usecols=["f64", "i32", -4])
    assert p.returncode == 0, p.stderr
    got = np.load(tmp_path / "out.npy")
    np.testing.assert_array_equal(got, as_numpy(t, ["f64", "i32", "f32"]))
    assert got.dtype == np.float64
    # Ints only: int64, exact; one column: 1-D.
    assert load(tmp_path, tmp_path / "t.parquet", usecols=["i64", "b"]).returncode == 0
    got = np.load(tmp_path / "out.npy")
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, as_numpy(t, ["i64", "b"]).astype(np.int64))
    assert load(tmp_path, tmp_path / "t.parquet", usecols=[3], dtype="float32", block=[50]).returncode == 0
    got = np.load(tmp_path / "out.npy")
    assert got.shape == (250,) and got.dtype == np.float32
    np.testing.assert_array_equal(got, t.column("f64").to_numpy().astype(np.float32))
    # Refused by check, naming the key: a column the file lacks, a string column kept, a
    # CSV-only key.
    for keys, words in (({"usecols": ["nope"]}, 'no column "nope" in the columns of'),
                        ({"usecols": [9]}, "column 9 is out of range"),
                        ({"usecols": ["f64", "label"]}, 'column "label" holds BYTE_ARRAY values'),
                        ({"header": True}, "does not apply here")):
        p = load(tmp_path, tmp_path / "t.parquet", **keys)
        assert p.returncode != 0 and words in p.stderr, (keys, p.stderr)
        assert "arrays.P." in p.stderr, p.stderr
    # The whole file, with its string column: the error says how to leave it out.
    p = load(tmp_path, tmp_path / "t.parquet")
    assert p.returncode != 0 and "usecols" in p.stderr, p.stderr


def test_parquet_from_garage(garage, tmp_path):
    t = table(3000, seed=5)
    pq.write_table(t, tmp_path / "g.parquet", row_group_size=700)
    s3_put(garage, "inputs/g.parquet", (tmp_path / "g.parquet").read_bytes())
    job = tmp_path / "job.toml"
    job.write_text(job_text({"G": {"load": f"s3://{garage.bucket}/inputs/g.parquet", "block": [1000, 5]},
                             "s": "sum(G, axis=0)"},
                            {"G": str(tmp_path / "G.npy"), "s": str(tmp_path / "s.npy")},
                            storage={"url": f"s3://{garage.bucket}/pq", "endpoint": garage.endpoint}))
    run(job, env=garage.env())
    want = as_numpy(t)
    np.testing.assert_array_equal(np.load(tmp_path / "G.npy"), want)
    np.testing.assert_allclose(np.load(tmp_path / "s.npy"), want.sum(axis=0), rtol=1e-12)
