"""`nums-cloud ls show get put rm` end to end, on the file store and on Garage: round trips
equal to NumPy's reading of the same file, clear errors and exit code 1 for arrays that do
not exist or paths outside the store."""
import json
import os
import subprocess

import numpy as np
import pytest

from nums import BIN


def cli(*args, cwd, env=None, check=True, input=None):
    p = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **(env or {})}, input=input)
    if check and p.returncode != 0:
        raise AssertionError(f"nums-cloud {' '.join(args)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


@pytest.fixture(params=["file", "garage"])
def where(request, tmp_path):
    """(store arguments, environment) for the file store or a real S3 server."""
    if request.param == "file":
        return [], {}
    g = request.getfixturevalue("garage")
    return ["--storage", f"s3://{g.bucket}/cli-{tmp_path.name}", "--endpoint", g.endpoint], g.env()


def test_put_ls_show_get_rm_round_trip(tmp_path, where):
    store, env = where
    rng = np.random.default_rng(3)
    a = rng.normal(size=(1000, 7))
    np.save(tmp_path / "a.npy", a)
    np.savetxt(tmp_path / "b.csv", np.arange(12.0).reshape(4, 3), delimiter=",")
    cli("put", "a.npy", "data/A", "--block", "300,4", *store, cwd=tmp_path, env=env)
    cli("put", "b.csv", "data/B", *store, cwd=tmp_path, env=env)
    ls = json.loads(cli("ls", "data", "--json", *store, cwd=tmp_path, env=env).stdout)
    by = {i["path"]: i for i in ls}
    assert set(by) == {"data/A", "data/B"}
    assert by["data/A"]["shape"] == [1000, 7] and by["data/A"]["block"] == [300, 4]
    assert by["data/A"]["dtype"] == "float64" and by["data/A"]["job"] == "data"
    assert by["data/A"]["stored_bytes"] > 0 and by["data/A"]["compression_ratio"] > 0.9
    table = cli("ls", *store, cwd=tmp_path, env=env).stdout
    assert "data/A" in table and "(1000, 7)" in table
    show = cli("show", "data/A", *store, cwd=tmp_path, env=env).stdout
    assert "array([[" in show and "..." in show and "shape=(1000, 7)" in show
    assert f"{a[0, 0]:.8f}"[:6] in show
    cli("get", "data/A", "back.npy", *store, cwd=tmp_path, env=env)
    assert np.array_equal(np.load(tmp_path / "back.npy"), a)
    cli("get", "data/A", "back.csv", *store, cwd=tmp_path, env=env)
    assert np.array_equal(np.loadtxt(tmp_path / "back.csv", delimiter=","), a)
    cli("get", "data/B", "b.npy", *store, cwd=tmp_path, env=env)
    assert np.array_equal(np.load(tmp_path / "b.npy"), np.arange(12.0).reshape(4, 3))
    # rm asks; "no" keeps everything.
    p = cli("rm", "data/A", *store, cwd=tmp_path, env=env, check=False, input="n\n")
    assert p.returncode == 1 and "nothing deleted" in p.stderr
    cli("rm", "data/A", "--yes", *store, cwd=tmp_path, env=env)
    ls = json.loads(cli("ls", "--json", *store, cwd=tmp_path, env=env).stdout)
    assert [i["path"] for i in ls] == ["data/B"]
    cli("rm", "--job", "data", "--yes", *store, cwd=tmp_path, env=env)
    assert json.loads(cli("ls", "--json", *store, cwd=tmp_path, env=env).stdout) == []


def test_clear_errors(tmp_path):
    p = cli("get", "nope/X", "x.npy", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "no array nope/X in store" in p.stderr, p.stderr
    assert not (tmp_path / "x.npy").exists()
    for bad in ["../etc", "/abs/path", "a/../../b", "a/./b"]:
        p = cli("rm", bad, "--yes", cwd=tmp_path, check=False)
        assert p.returncode == 1 and "not an array path in the store" in p.stderr, (bad, p.stderr)
    p = cli("put", "missing.npy", "d/X", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "no such file" in p.stderr
    np.save(tmp_path / "a.npy", np.ones(3))
    p = cli("put", "a.npy", "X", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "JOB/NAME" in p.stderr
    cli("put", "a.npy", "d/X", cwd=tmp_path)
    p = cli("get", "d/X", "x.txt", cwd=tmp_path, check=False)
    assert p.returncode == 1 and ".npy, .csv or .parquet" in p.stderr


def test_put_reads_a_csv_with_the_job_file_options(tmp_path):
    """put --header --delimiter --usecols --dtype: the `load` keys of a job file, with the
    same errors (an unknown column lists the header)."""
    (tmp_path / "t.tsv.csv").write_text("a\tb\tc\n1\t2\t3\n4\t5\t9007199254740993\n")
    cli("put", "t.tsv.csv", "d/T", "--header", "--delimiter", "\t", "--usecols", "c,0",
        "--dtype", "int64", cwd=tmp_path)
    cli("get", "d/T", "t.npy", cwd=tmp_path)
    got = np.load(tmp_path / "t.npy")
    assert got.dtype == np.int64 and got.tolist() == [[3, 1], [9007199254740993, 4]]
    cli("put", "t.tsv.csv", "d/U", "--header", "--delimiter", "\t", "--usecols=-2", cwd=tmp_path)
    cli("get", "d/U", "u.npy", cwd=tmp_path)
    assert np.load(tmp_path / "u.npy").tolist() == [2.0, 5.0]
    p = cli("put", "t.tsv.csv", "d/V", "--header", "--delimiter", "\t", "--usecols", "zz",
            cwd=tmp_path, check=False)
    assert p.returncode == 1 and 'no column "zz"' in p.stderr and '"a", "b", "c"' in p.stderr, p.stderr


def test_every_dtype_put_ls_show_get(tmp_path, where):
    """Arrays of every dtype go in and out in their dtype: `ls` names it, `show` prints the
    values as NumPy would (ints exactly, complex as re+imj, the dtype named unless it is
    the default of its kind), `get` writes the same .npy and CSV."""
    from test_import import every_dtype_inputs
    store, env = where
    arrays = every_dtype_inputs(np.random.default_rng(8))
    for d, a in arrays.items():
        np.save(tmp_path / f"{d}.npy", a)
        cli("put", f"{d}.npy", f"dt/{d}", "--block", "3,2", *store, cwd=tmp_path, env=env)
    ls = {i["path"]: i for i in json.loads(cli("ls", "dt", "--json", *store, cwd=tmp_path, env=env).stdout)}
    for d, a in arrays.items():
        assert ls[f"dt/{d}"]["dtype"] == d, ls
        cli("get", f"dt/{d}", f"out_{d}.npy", *store, cwd=tmp_path, env=env)
        got = np.load(tmp_path / f"out_{d}.npy")
        assert got.dtype == a.dtype and got.tobytes() == a.tobytes(), d
        shown = cli("show", f"dt/{d}", *store, cwd=tmp_path, env=env).stdout
        default = d in ("bool", "int64", "float64", "complex128")
        assert (f"dtype={d}" in shown) != default, shown
        if d.startswith(("int", "uint")):
            assert str(int(a[-1, -1])) in shown and str(int(a[0, 0])) in shown, shown
    shown = cli("show", "dt/complex64", *store, cwd=tmp_path, env=env).stdout
    z = arrays["complex64"][1, 0]
    assert f"{z.real:.8f}"[:6] in shown and "j" in shown, shown
