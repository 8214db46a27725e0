"""Reading CSV files through the Python package as pandas and NumPy read them (issue 43):
usecols by header name in pandas' order, pandas' ``header``, the file's first bad line
when blocks are parsed in parallel, a slice of a fresh read that parses only its blocks,
dtypes per column, ``genfromtxt`` against NumPy's, and names that never leak the
engine's: Parquet columns as read (else ``c0, c1, ...``), errors naming what the user
wrote."""
import re

import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps


def write(path, text):
    path.write_text(text)
    return str(path)


# No engine's node id (`n12`) in a message the user sees.
INTERNAL = re.compile(r"\bn\d+\b")


def test_usecols_by_name_in_the_files_order_as_pandas(session, tmp_path):
    f = write(tmp_path / "l.csv", "f1,label,f2\n0.5,1,2\n1.5,0,4\n2.5,1,8\n")
    a = np.loadtxt(f, delimiter=",", skiprows=1)
    # pandas keeps usecols in the file's order, each column once.
    np.testing.assert_array_equal(nps.read_csv(f, header=0, usecols=["label", "f1"]).get(), a[:, [0, 1]])
    np.testing.assert_array_equal(nps.read_csv(f, header=0, usecols=[2, 0, 0]).get(), a[:, [0, 2]])
    np.testing.assert_array_equal(nps.read_csv(f, has_header=True, usecols=["f2"]).get(), a[:, 2])
    # loadtxt and genfromtxt keep the order given.
    np.testing.assert_array_equal(nps.loadtxt(f, skiprows=1, usecols=["f2", "f1"]).get(), a[:, [2, 0]])
    # pandas refuses names mixed with numbers; a name needs a header line; an unknown
    # name says which there are.
    with pytest.raises(ValueError, match="all column names or all column numbers"):
        nps.read_csv(f, header=0, usecols=["label", 0])
    with pytest.raises(ValueError, match="without a header line"):
        nps.read_csv(f, usecols=["label"])
    with pytest.raises(ValueError, match='no column "zz".*"f1", "label", "f2"'):
        nps.read_csv(f, header=0, usecols=["zz"])
    try:
        import pandas as pd
    except ImportError:
        return
    np.testing.assert_array_equal(nps.read_csv(f, header=0, usecols=["label", "f1"]).get(),
                                  pd.read_csv(f, usecols=["label", "f1"]).to_numpy(float))


def test_header_as_pandas_takes_it(session, tmp_path):
    h = write(tmp_path / "h.csv", "a,b\n1,2\n3,4\n5,6\n")
    n = write(tmp_path / "n.csv", "1,2\n3,4\n")
    # header=0: the first line names the columns; header=None: no line does.
    assert nps.read_csv(h, header=0).shape == (3, 2)
    np.testing.assert_array_equal(nps.read_csv(n, header=None).get(), [[1.0, 2.0], [3.0, 4.0]])
    with pytest.raises(nums_cloud.RunError, match='"a" is not a number'):
        nps.read_csv(h, header=None).get()
    # pandas' refusals, and values nums-cloud cannot honour, said at once.
    with pytest.raises(TypeError, match="Passing a bool to header is invalid"):
        nps.read_csv(h, header=True)
    with pytest.raises(ValueError, match="header=1"):
        nps.read_csv(h, header=1)
    with pytest.raises(ValueError, match="disagree"):
        nps.read_csv(h, has_header=True, header=None)


def many_blocks_csv(tmp_path, bad):
    """A CSV of 60,000 rows of 3 columns (1.4 MB as float64: blocks of 15,000 rows on 4
    workers) and a header, with a malformed field on each line (1-based, the header
    line 1) of `bad`."""
    rows = np.arange(180_000, dtype=np.float64).reshape(60_000, 3)
    lines = ["a,b,c"] + [f"{r[0]:.0f},{r[1]:.0f},{r[2]:.0f}" for r in rows]
    for line in bad:
        lines[line - 1] = "1,x2,3"
    return write(tmp_path / "bad.csv", "\n".join(lines) + "\n"), rows


def test_the_files_first_bad_line_is_reported_and_a_slice_parses_only_its_blocks(tmp_path):
    # Functions processes, four at once: blocks are parsed in parallel.
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=4, memory_mb=512,
                        progress=False, in_process_mb=0)
    try:
        # Bad lines in the second, third and last blocks: the last block is the smallest
        # and may well fail first.
        f, rows = many_blocks_csv(tmp_path, [59_990, 30_002, 20_000])
        x = nps.read_csv(f, header=0)
        assert x.block_shape[0] < x.shape[0] // 3
        with pytest.raises(nums_cloud.RunError) as e:
            x.get()
        text = str(e.value)
        assert "bad.csv:20000: column 2: \"x2\" is not a number" in text, text
        assert "30002" not in text and "59990" not in text, text
        # The error names what the user wrote, never the engine's nodes or store keys.
        assert "read_csv(\"" in text and not INTERNAL.search(text), text
        # The first rows are in the first block, which has no bad line: only it is read.
        np.testing.assert_array_equal(x[:2].get(), rows[:2])
    finally:
        s.close()


def test_dtype_per_column_promotes_to_one_dtype(session, tmp_path):
    f = write(tmp_path / "d.csv", "label,x\n1,0.5\n0,1.5\n1,2.5\n")
    lab = nps.read_csv(f, header=0, usecols=["label"], dtype={"label": "int64"})
    assert lab.dtype == np.int64
    np.testing.assert_array_equal(lab.get(), [1, 0, 1])
    # One array, one dtype: NumPy's promotion of the kept columns' (float64 unnamed).
    both = nps.read_csv(f, header=0, dtype={"label": "int64"})
    assert both.dtype == np.float64
    np.testing.assert_array_equal(both.get(), np.loadtxt(f, delimiter=",", skiprows=1))
    small = nps.read_csv(f, header=0, usecols=[0], dtype={0: np.int8, "x": "float32"})
    assert small.dtype == np.int8
    assert nps.read_csv(f, header=0, dtype={"label": "int32", "x": "float32"}).dtype == np.float64
    assert nps.read_csv(f, header=0, dtype="float32").dtype == np.float32
    # Each column parses as its own dtype, then takes the array's: an int column refuses
    # 0.5 (as pandas), a float32 one rounds once.
    with pytest.raises(nums_cloud.RunError, match=r'"0.5" is not an integer'):
        nps.read_csv(f, header=0, dtype="int64").get()
    with pytest.raises(nums_cloud.RunError, match=r"d.csv:2: column 2: \"0.5\" is not an integer \(its column's dtype is int64\)"):
        nps.read_csv(f, header=0, dtype={"x": "int64"}).get()
    np.testing.assert_array_equal(nps.read_csv(f, header=0, dtype={"x": np.float32}).get()[:, 1],
                                  np.float32([0.5, 1.5, 2.5]).astype(np.float64))
    tenth = write(tmp_path / "t.csv", "a,b\n0.1,1\n")
    assert nps.read_csv(tenth, header=0, dtype={"a": "float32"}).get()[0, 0] == np.float64(np.float32(0.1))
    with pytest.raises(TypeError, match="float16"):
        nps.read_csv(f, header=0, dtype={"x": "float16"})


def test_genfromtxt_as_numpys_on_a_file_with_blanks(session, tmp_path):
    f = write(tmp_path / "g.csv", "a,b,c\n1.5,,3\n,NA,-0.25\n4,5,\n7,8,9\n")
    for kw in ({}, {"usecols": (2, 0)}, {"filling_values": -1.0}, {"usecols": [1], "filling_values": 0}):
        got = nps.genfromtxt(f, delimiter=",", skip_header=1, **kw).get()
        want = np.genfromtxt(f, delimiter=",", skip_header=1, missing_values=["", "NA"], **kw)
        np.testing.assert_array_equal(got, want, err_msg=str(kw))
    with pytest.raises(ValueError, match="delimiter"):
        nps.genfromtxt(f)


def test_parquet_columns_are_named_as_read_or_c0(session, tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    f = write(tmp_path / "p.csv", "price,qty,id\n2.5,4,1\n0.5,10,2\n")
    x = nps.read_csv(f, header=0, usecols=["qty", "price"])
    nps.save(tmp_path / "x.parquet", x)
    t = pq.read_table(tmp_path / "x.parquet")
    assert t.column_names == ["price", "qty"]
    np.testing.assert_array_equal(np.column_stack([c.to_numpy() for c in t.columns]), x.get())
    # Computed column for column, as pandas keeps names; else c0, c1, ...
    kept = {
        "x * 2": (x * 2, ["price", "qty"]),
        "centred": ((x - x.mean(axis=0)) / x.std(axis=0), ["price", "qty"]),
        "rows": (x[x[:, 1] > 5], ["price", "qty"]),
        "sorted": (nps.sort(x, axis=0).astype(np.float32), ["price", "qty"]),
        "picked": (x[:, [1, 0, 1]], ["qty", "price", "qty.1"]),
        "sliced": (x[:, 1:], ["qty"]),
        "column": (x[:, 0], ["price"]),
        "joined": (nps.concatenate([x, x * 0]), ["price", "qty"]),
        "side by side": (nps.concatenate([x[:, 1:], x], axis=1), ["qty", "price", "qty.1"]),
        "changed": (x.at[0, 1].set(7.0), ["price", "qty"]),
        "transposed": (x.T, ["c0", "c1"]),
        "product": (x @ nps.ones((2, 2)), ["c0", "c1"]),
    }
    for what, (y, names) in kept.items():
        nps.save(tmp_path / "y.parquet", y)
        assert pq.read_table(tmp_path / "y.parquet").column_names == names, what
    nps.save(tmp_path / "z.parquet", nps.ones((3, 4)))
    assert pq.read_table(tmp_path / "z.parquet").column_names == ["c0", "c1", "c2", "c3"]
    # Read back: the names a Parquet file's columns have.
    nps.save(tmp_path / "w.parquet", nps.load(tmp_path / "x.parquet"))
    assert pq.read_table(tmp_path / "w.parquet").column_names == ["price", "qty"]


def test_an_error_names_the_users_expression_not_a_node(session, tmp_path):
    f = write(tmp_path / "e.csv", "a,b\n1,2\n3,oops\n")
    x = nps.read_csv(f, header=0)
    with pytest.raises(nums_cloud.RunError) as e:
        (x * 2).sum().get()
    text = str(e.value)
    assert "e.csv:3: column 2" in text and "read_csv(\"" in text, text
    assert not INTERNAL.search(text), text


def test_the_day_two_example_runs_and_equals_pandas_numpy_and_scikit_learn(tmp_path):
    """examples/day_two.py, a new user's notebook-like session (a CSV with blanks and a
    text column, exploration, a fit with string labels and class weights, model selection,
    saving), runs end to end; each of its steps checks itself against the references."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo / "python")}
    p = subprocess.run([sys.executable, str(repo / "examples" / "day_two.py"), str(tmp_path)],
                       capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "DIFFERS" not in p.stdout and p.stdout.count("ok ") == 18, p.stdout
    assert "every step equals pandas, NumPy and scikit-learn" in p.stdout, p.stdout
