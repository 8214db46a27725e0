"""What a user sees (issue 27), end to end with the real binary: errors that lead with their
cause and name files that exist, no panic on a closed pipe, `ls` and `show` that say why
they find nothing, I/O without surprises, numbers in human units, and the pictures."""
import json
import os
import re
import subprocess

import numpy as np
import pytest

from nums import BIN, job_text, run


def cli(*args, cwd, check=True, env=None):
    p = subprocess.run([BIN, *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"nums-cloud {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


FIRST = """name = "first"
[compute]
memory_mb = 512
[arrays]
X = { random = "normal", shape = [4000, 16], seed = 1 }
G = "X.T @ X / 4000"
m = "mean(X, axis=0)"
[outputs]
G = "out/G.npy"
m = "out/m.npy"
"""


@pytest.fixture
def first(tmp_path):
    """The guide's first job, run once (its outputs are files; the store keeps nothing)."""
    (tmp_path / "job.toml").write_text(FIRST)
    run(tmp_path / "job.toml")
    return tmp_path


# Item 5: errors.

def closed_pipe(args, cwd):
    """Runs nums-cloud with its standard output a pipe whose reader is gone before it
    writes: every write fails with EPIPE. Returns (exit code, standard error)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([BIN, *map(str, args)], cwd=cwd, stdout=w, stderr=subprocess.PIPE,
                           text=True, timeout=120)
    finally:
        os.close(w)
    return p.returncode, p.stderr


def test_a_closed_pipe_is_a_quiet_exit_never_a_panic(first):
    """`plan --json | head -c 400`, `show | head -1` and the like: the reader going away is
    no error of nums-cloud's (as for ripgrep): exit 0, nothing on standard error."""
    cli("put", "out/G.npy", "data/G", cwd=first)
    for args in (["plan", "--json", "job.toml"], ["plan", "job.toml"], ["check", "job.toml"],
                 ["check", "--json", "job.toml"], ["ls"], ["ls", "--json"], ["show", "data/G"],
                 ["show", "--json", "data/G"], ["completions", "bash"], ["run", "job.toml"],
                 ["run", "job.toml", "--stats", "-"], ["--help"]):
        code, err = closed_pipe(args, first)
        assert "panicked" not in err and "Broken pipe" not in err, (args, err)
        assert code == 0 and err == "", (args, code, err)


def test_a_data_error_leads_with_the_cause_and_the_resume_advice_follows(tmp_path):
    """The first line of a failed run's error is the data error (array, file, line); what
    to do about the run's state comes after, on a line of its own."""
    (tmp_path / "bad.csv").write_text("1,2\n3,4\n5,x\n")
    (tmp_path / "job.toml").write_text(job_text({"A": {"load": "bad.csv"}, "s": "sum(A)"}, {"s": "s.npy"},
                                                name="bad"))
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode == 1
    lines = p.stderr.strip().splitlines()
    assert re.match(r'error: array A: .*bad\.csv:3: column 2: "x" is not a number$', lines[0]), p.stderr
    assert any("--resume" in l and str(tmp_path / "job.toml") in l for l in lines[1:]), p.stderr
    assert "after 1 attempt)" in p.stderr, p.stderr
    # A model's refused labels, the same way.
    rng = np.random.default_rng(1)
    np.save(tmp_path / "X.npy", rng.normal(size=(200, 3)))
    np.save(tmp_path / "y.npy", rng.integers(0, 3, 200).astype(np.float64))
    (tmp_path / "fit.toml").write_text(job_text(
        {"X": {"load": "X.npy"}, "y": {"load": "y.npy"}, "w": "logistic_regression(X, y)"}, {"w": "w.npy"},
        name="errs_labels"))
    p = run(tmp_path / "fit.toml", check=False)
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith("error: array `w`") and "labels other than 0 and 1" in lines[0], p.stderr
    assert "--resume" not in lines[0] and any("--resume" in l for l in lines[1:]), p.stderr


def test_an_array_may_take_a_functions_name(tmp_path):
    """Every function the language gains would otherwise break the job files whose arrays
    have its name (the quick-start's `positive` did when np.positive came): a call
    `sum(...)` is the function, a bare `sum` the array, as in NumPy's Python."""
    X = np.random.default_rng(27).normal(size=(40, 3))
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"load": "X.npy"}, "positive": "positive(X) * (X > 0)", "sum": "sum(positive, axis=0)",
         "sort": "sort(sum)", "total": "sum(sort) + sum[0] + sort.sum()"},
        {"positive": "positive.npy", "sum": "sum.npy", "sort": "sort.npy", "total": "total.npy"},
        name="names"))
    cli("check", "job.toml", cwd=tmp_path)
    run(tmp_path / "job.toml")
    positive = np.positive(X) * (X > 0)
    s = np.sum(positive, axis=0)
    want = {"positive": positive, "sum": s, "sort": np.sort(s), "total": np.sum(np.sort(s)) * 2 + s[0]}
    for name, w in want.items():
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), w, rtol=1e-12, err_msg=name)


def test_put_errors_name_the_command_and_the_files_that_exist(tmp_path):
    """`put`'s job is made up: its errors name the file put and the flag, never a job file
    that does not exist."""
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    (tmp_path / "b.csv").write_text("1,2\n3,x\n")
    for args, words in ((["a.csv", "misc/A", "--usecols", "5"], "--usecols: column 5 is out of range"),
                        (["a.csv", "misc/A", "--dtype", "float16"], "--dtype: nums-cloud has no dtype"),
                        (["a.csv", "misc/A", "--block", "0,1"], "--block: block sizes must be positive"),
                        (["b.csv", "misc/B"], '"x" is not a number')):
        p = cli("put", *args, cwd=tmp_path, check=False)
        assert p.returncode == 1, p
        assert words in p.stderr and str(tmp_path / args[0]) in p.stderr, p.stderr
        assert ".toml" not in p.stderr, p.stderr


def test_ls_and_show_that_find_nothing_say_why(first):
    """After a first job whose outputs went to files, `ls` and `show` say so, and what to
    try (`--keep`, an output path in the store)."""
    p = cli("ls", cwd=first)
    assert p.stdout == "", p.stdout
    assert "no arrays" in p.stderr and "--keep" in p.stderr and "[outputs]" in p.stderr, p.stderr
    assert json.loads(cli("ls", "--json", cwd=first).stdout) == []
    p = cli("show", "first/G", cwd=first, check=False)
    assert p.returncode == 1
    assert "no array first/G" in p.stderr and "--keep" in p.stderr, p.stderr
    # A name under another path: pointed at.
    cli("put", "out/G.npy", "data/G", cwd=first)
    p = cli("show", "first/G", cwd=first, check=False)
    assert "data/G" in p.stderr, p.stderr
    p = cli("ls", "nothere", cwd=first)
    assert "no arrays under nothere/" in p.stderr and "data/G" in p.stderr, p.stderr
    p = cli("ls", "--storage", "file://absent", cwd=first)
    assert "does not exist" in p.stderr, p.stderr


# Item 4: I/O without surprises.

def test_parquet_and_csv_outputs_name_their_columns(tmp_path):
    """A .parquet output (and `get FILE.parquet`) is read back by pyarrow with NumPy's
    values; a CSV output has a header line when the job asks for one, or when its input
    had one; columns keep the input's names, or are named after the array."""
    import pyarrow.parquet as pq
    rng = np.random.default_rng(4)
    a = rng.normal(size=(300, 3))
    with open(tmp_path / "in.csv", "w") as f:
        f.write("price,qty,size\n")
        np.savetxt(f, a, delimiter=",")
    (tmp_path / "job.toml").write_text(job_text(
        {"A": {"load": "in.csv", "header": True, "usecols": ["size", "price"], "block": [70, 2]},
         "I": {"expr": "A.astype('int64') * 0 + 3"}, "s": "sum(A, axis=1)"},
        {"A": "out/a.parquet", "I": "out/i.parquet", "s": {"path": "out/s.csv", "header": True}},
        name="io"))
    (tmp_path / "job2.toml").write_text(job_text(
        {"A": {"load": "in.csv", "header": True, "usecols": ["qty"]}, "B": "A * 2"},
        {"A": "out/a.csv", "B": "out/b.csv"}, name="io2"))
    run(tmp_path / "job.toml")
    run(tmp_path / "job2.toml")
    t = pq.read_table(tmp_path / "out" / "a.parquet")
    assert t.column_names == ["size", "price"]
    np.testing.assert_array_equal(np.column_stack([c.to_numpy() for c in t.columns]), a[:, [2, 0]])
    t = pq.read_table(tmp_path / "out" / "i.parquet")
    # Computed column for column from A: A's names (else named after the array).
    assert t.column_names == ["size", "price"] and t.column("size").type == "int64"
    assert (tmp_path / "out" / "s.csv").read_text().splitlines()[0] == "s"
    np.testing.assert_allclose(np.loadtxt(tmp_path / "out" / "s.csv", skiprows=1), a[:, [2, 0]].sum(axis=1))
    # The input's header comes along; an expression's output has none unless asked.
    assert (tmp_path / "out" / "a.csv").read_text().splitlines()[0] == "qty"
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "out" / "a.csv", skiprows=1), a[:, 1])
    np.testing.assert_array_equal(np.loadtxt(tmp_path / "out" / "b.csv"), a[:, 1] * 2)
    # `get` writes Parquet too; put reads it back.
    cli("put", "out/a.parquet", "data/A", cwd=tmp_path)
    cli("get", "data/A", "back.parquet", cwd=tmp_path)
    t = pq.read_table(tmp_path / "back.parquet")
    assert t.column_names == ["A_0", "A_1"]
    np.testing.assert_array_equal(np.column_stack([c.to_numpy() for c in t.columns]), a[:, [2, 0]])
    # header applies to CSV outputs only.
    (tmp_path / "bad.toml").write_text(job_text({"A": {"zeros": [3]}}, {"A": {"path": "a.npy", "header": True}}))
    p = cli("check", "bad.toml", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "outputs.A.header: header applies to a .csv output" in p.stderr, p.stderr


def test_an_output_to_standard_output_is_refused_and_a_job_without_outputs_warns(tmp_path):
    (tmp_path / "job.toml").write_text(job_text({"A": {"zeros": [3]}}, {"A": "-"}))
    p = cli("check", "job.toml", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "job.toml:" in p.stderr and "never to standard output" in p.stderr, p.stderr
    assert not (tmp_path / "-").exists()
    (tmp_path / "none.toml").write_text(job_text({"A": {"zeros": [3]}, "B": "A + 1"}, {}))
    p = cli("run", "none.toml", cwd=tmp_path)
    assert "warning: " in p.stderr and "no [outputs]" in p.stderr, p.stderr


def test_check_and_plan_create_nothing(tmp_path):
    """Neither the store folder nor an output's folder is left behind by check or plan."""
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"random": "normal", "shape": [100, 4]}, "Y": "X * 2"},
        {"X": "out/x.zarr", "Y": "deep/er/y.npy"}))
    before = sorted(p.name for p in tmp_path.iterdir())
    for cmd in (["check"], ["check", "--json"], ["plan"], ["plan", "--json"]):
        cli(*cmd, "job.toml", cwd=tmp_path)
        assert sorted(p.name for p in tmp_path.iterdir()) == before, cmd
    cli("ls", cwd=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# Item 6: numbers as people read them.

SHOWN = {
    "long": np.random.default_rng(1).normal(size=40),
    "wide": np.random.default_rng(2).normal(size=(5, 20)),
    "many": np.arange(2000.0) / 7,
    "square": np.random.default_rng(3).normal(size=(100, 100)),
    "ints": np.random.default_rng(4).integers(-10**6, 10**6, 50),
    "bools": np.random.default_rng(5).random(30) < 0.5,
    "f32": (np.random.default_rng(6).normal(size=30)).astype(np.float32),
    "cube": np.arange(180.0).reshape(2, 3, 30) * 1.5,
    "small": np.array([0.5, 0.25, 3.0]),
    "sci": np.array([1e-5, 1.0, 1234.5678, -2.5e-7, 0.0]),
    "big": np.array([1e9, 2.0, 3.5]),
    "special": np.array([np.nan, 1.5, -np.inf, np.inf, -0.0, 2.25]),
    "true": np.ones(12, dtype=bool),
    "f32sci": (np.arange(1, 31) ** 4 / 3).astype(np.float32),
    "tall": np.arange(3000.0).reshape(10, 30, 10) - 0.5,
    # every dtype: ints of each width (dtype named but int64's), complex parts apart
    "i8": np.array([-128, 0, 7, 127], dtype=np.int8),
    "u16": np.arange(0, 65535, 3001, dtype=np.uint16),
    "i32": np.random.default_rng(7).integers(-2**31, 2**31, 12, dtype=np.int32),
    "u64": np.array([0, 2**64 - 1, 2**63, 12], dtype=np.uint64),
    "c128": np.array([1.5 + 2j, -1 - 0.25j, 0j, 3.0 - 0j, -0.0 + 1e-3j]),
    "c64": (np.random.default_rng(8).normal(size=(3, 4)) + 1j).astype(np.complex64),
    "cspecial": np.array([complex(np.nan, 1), complex(2, np.inf), complex(-np.inf, -1), 0.5 - 0.5j]),
    "csci": np.array([1e-7 + 1e9j, 2.5 + 0j, -3e5 - 4e-6j]),
    "cmany": (np.arange(1200.0) / 7 + 1j * np.arange(1200.0)).reshape(40, 30),
}


@pytest.mark.parametrize("name", sorted(SHOWN))
def test_show_prints_as_numpy_does_wrapped_at_75_columns(tmp_path, name):
    a = SHOWN[name]
    np.save(tmp_path / "a.npy", a)
    cli("put", "a.npy", "data/A", cwd=tmp_path)
    out = cli("show", "data/A", cwd=tmp_path).stdout
    shown = out.split("\n", 2)[2].rstrip("\n")  # after ls's header and row
    assert shown == repr(a), f"\n{shown}\n{repr(a)}"
    assert max(len(line) for line in shown.splitlines()) <= 75


def test_human_units_and_plurals(tmp_path):
    """-v says bytes and memory in units, and one of a thing is singular everywhere."""
    (tmp_path / "job.toml").write_text(job_text({"A": {"random": "normal", "shape": [40]}, "s": "sum(A)"},
                                                {"s": "s.npy"}, name="one", compute={"workers": 1}))
    p = cli("-v", "run", "job.toml", cwd=tmp_path)
    done = [l for l in p.stderr.splitlines() if ": done in " in l]
    assert done and all(re.search(r"read \d+(\.\d)? [kMG]?B, wrote \d+(\.\d)? [kMG]?B, peak \d+ MiB\)$", l)
                        for l in done), done
    assert "stage main: 1 invocation (1 to run)" in p.stderr, p.stderr
    assert "with 1 worker," in p.stdout, p.stdout
    one_many = r"\b1 (tasks|invocations|workers|outputs|arrays|iterations|passes|slots|objects|attempts)\b"
    assert not re.search(one_many, p.stdout + p.stderr), p.stdout + p.stderr
    assert cli("check", "job.toml", cwd=tmp_path).stdout.splitlines()[0].endswith("ok (2 arrays, 1 output)")
    assert "1 worker," in cli("plan", "job.toml", cwd=tmp_path).stdout


# Item 1: a fit planned, shown and counted like any other stage.

def fit_job(tmp_path, call, name="fitplan"):
    rng = np.random.default_rng(7)
    X = rng.normal(size=(4000, 6))
    y = (X @ rng.normal(size=6) + rng.normal(size=4000) > 0).astype(np.float64)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    job = tmp_path / f"{name}.toml"
    job.write_text(job_text({"X": {"load": "X.npy", "block": [1000, 6]}, "y": {"load": "y.npy", "block": [1000]},
                             "w": call, "p": "mean((X @ w[:-1] + w[-1] > 0) == y)"},
                            {"w": "w.npy", "p": "p.npy"}, name=name))
    return job


@pytest.mark.parametrize("call,assumed,at_most", [
    ("logistic_regression(X, y)", 13, 101),                       # first evaluation (checks y), 12 line searches
    ("logistic_regression(X, y, solver='newton')", 7, 101),       # 1 + 6 Newton passes
    ("logistic_regression(X, y, max_iter=3)", 4, 4),              # max_iter bounds it
    ("linear_regression(X, y)", 1, 1),                            # one pass
])
def test_plan_projects_a_fits_passes(tmp_path, call, assumed, at_most):
    """`plan` projects a fit's passes (invocations, bytes, time, cost of each kind of pass)
    and says how many it assumes and why, in text and --json; the whole run's totals add
    the fit to the main stage."""
    job = fit_job(tmp_path, call)
    said = f"{assumed} {'pass' if assumed == 1 else 'passes'} assumed ("
    j = json.loads(cli("plan", "--json", job, cwd=tmp_path).stdout)
    for sched in j["schedulers"]:
        (f,) = sched["fits"]
        assert f["array"] == "w" and (f["passes_assumed"], f["passes_at_most"]) == (assumed, at_most), f
        assert f["why"].startswith(said), f["why"]
        names = [s["stage"] for s in f["stages"]]
        # y is checked by the first pass, not in a stage of its own.
        assert names[:2] == ["X", "y"] and "check" not in names, names
        assert sum(s["times"] for s in f["stages"][2:]) == assumed
        assert f["assumed"]["invocations"] == sum(s["times"] * s["invocations"] for s in f["stages"])
        assert f["assumed"]["projected_wall_seconds" if False else "wall_seconds"] > 0 and f["assumed"]["usd"] > 0
        run = sched["run"]
        assert run["invocations"] == sched["invocations"] + f["assumed"]["invocations"]
        assert abs(run["projected_wall_seconds"] - sched["projected_wall_seconds"] - f["assumed"]["wall_seconds"]) < 1e-9
        assert run["at_most"]["invocations"] >= run["invocations"]
    text = cli("plan", job, cwd=tmp_path).stdout
    assert f"fit w = " in text and said in text, text
    assert re.search(r"^fits before it \(\d+ pass(es)? assumed\)$", text, re.M), text
    assert re.search(r"^whole run \(fits and main stage\)$", text, re.M), text
    if "max_iter=3" in call:
        assert "max_iter = 3 bounds the iterations" in text, text
    elif "linear" in call:
        assert "least squares is solved in one pass" in text, text
    else:
        assert "typical" in text and f"at most {at_most} passes with max_iter = 100" in text, text


def test_a_fits_stats_hold_every_invocation_and_the_totals_are_their_sums(tmp_path):
    """Every invocation of every stage is one record; the totals are the records' sums;
    each pass sends the invocations its plan projects."""
    job = fit_job(tmp_path, "logistic_regression(X, y)", name="fitstats")
    plan = json.loads(cli("plan", "--json", job, cwd=tmp_path).stdout)["schedulers"][0]
    per = {s["stage"]: s["invocations"] for s in plan["fits"][0]["stages"]}
    run(job, "--stats", tmp_path / "s.json")
    s = json.loads((tmp_path / "s.json").read_text())
    tl = s["timeline"]
    assert len(tl) == s["invocations"] and all(i["status"] == "ok" for i in tl)
    for field, total in (("bytes_read", "s3_bytes_read"), ("bytes_written", "s3_bytes_written"), ("tasks", "tasks")):
        assert sum(i[field] for i in tl) == s[total], field
    for field, total in (("function_seconds", "function_seconds"), ("compute_seconds", "compute_seconds")):
        assert abs(sum(i[field] for i in tl) - s[total]) < 1e-6, field
    by_stage = {}
    for i in tl:
        by_stage.setdefault(i["stage"], []).append(i)
    for stage, recs in by_stage.items():
        m = re.fullmatch(r"fit\d+-(\w+?)(?:-\d+)?", stage)
        if m:
            assert len(recs) == per[m.group(1)], (stage, len(recs), per)
    assert len(s["fits"][0]["passes"]) == 1 + s["fits"][0]["n_iter"]


# Item 3: imports once.

def imports_job(tmp_path, name, src="in.csv"):
    job = tmp_path / f"{name}.toml"
    job.write_text(job_text({"X": {"load": src, "header": True, "usecols": ["b", "a"]}, "s": "sum(X, axis=0)"},
                            {"s": f"{name}_s.npy"}, name=name))
    return job


def test_an_unchanged_input_is_imported_once_and_reused_by_any_job(tmp_path):
    """A run imports an input file once; later runs of that job or another that load the
    same file the same way read the import in place while the file is unchanged (same
    size, times and content), and import it again once it changes. `ls` shows imports
    apart; `rm --imports` removes them."""
    rng = np.random.default_rng(8)
    a = rng.normal(size=(500, 3))
    with open(tmp_path / "in.csv", "w") as f:
        f.write("a,b,c\n")
        np.savetxt(f, a, delimiter=",")
    reused = re.compile(r"in\.csv: unchanged since it was imported to (\S+); read there")
    p = cli("-v", "run", imports_job(tmp_path, "one"), cwd=tmp_path)
    assert not reused.search(p.stderr), p.stderr
    stamp = (tmp_path / "nums-data" / "one" / "X" / "zarr.json").stat().st_mtime_ns
    for name in ("one", "two"):
        p = cli("-v", "run", imports_job(tmp_path, name), cwd=tmp_path)
        assert reused.search(p.stderr).group(1) == "one/X", p.stderr
        np.testing.assert_allclose(np.load(tmp_path / f"{name}_s.npy"), a[:, [1, 0]].sum(axis=0))
    assert (tmp_path / "nums-data" / "one" / "X" / "zarr.json").stat().st_mtime_ns == stamp
    assert not (tmp_path / "nums-data" / "two" / "X").exists()
    # Read another way: another import.
    (tmp_path / "three.toml").write_text(job_text({"X": {"load": "in.csv", "header": True}, "s": "sum(X)"},
                                                  {"s": "three_s.npy"}, name="three"))
    assert not reused.search(cli("-v", "run", "three.toml", cwd=tmp_path).stderr)
    ls = json.loads(cli("ls", "--json", cwd=tmp_path).stdout)
    froms = {i["path"]: i["imported_from"] for i in ls}
    assert froms == {"one/X": str(tmp_path / "in.csv"), "three/X": str(tmp_path / "in.csv")}, froms
    table = cli("ls", cwd=tmp_path).stdout
    assert "imported inputs" in table and "rm --imports" in table, table
    # Changed: imported again, by whichever job runs next.
    with open(tmp_path / "in.csv", "w") as f:
        f.write("a,b,c\n")
        np.savetxt(f, a * 2, delimiter=",")
    p = cli("-v", "run", imports_job(tmp_path, "two"), cwd=tmp_path)
    assert not reused.search(p.stderr), p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "two_s.npy"), 2 * a[:, [1, 0]].sum(axis=0))
    p = cli("-v", "run", imports_job(tmp_path, "one"), cwd=tmp_path)
    assert reused.search(p.stderr).group(1) == "two/X", p.stderr
    # rm --imports: the imports and their index entries go; outputs elsewhere stay.
    p = cli("rm", "--imports", "--yes", cwd=tmp_path)
    assert "deleted one/X" in p.stdout and "deleted two/X" in p.stdout and "deleted three/X" in p.stdout, p.stdout
    assert json.loads(cli("ls", "--json", cwd=tmp_path).stdout) == []
    p = cli("-v", "run", imports_job(tmp_path, "one"), cwd=tmp_path)
    assert not reused.search(p.stderr), p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "one_s.npy"), 2 * a[:, [1, 0]].sum(axis=0))


def test_a_reused_large_csv_is_not_counted_again(tmp_path):
    """A CSV the functions count before the probe (4 pieces of 4 MiB or more) is not
    counted again when its import is reused."""
    rng = np.random.default_rng(9)
    a = rng.normal(size=(400_000, 5))
    np.savetxt(tmp_path / "big.csv", a, delimiter=",", fmt="%.6f")
    assert (tmp_path / "big.csv").stat().st_size > 4 * (4 << 20)
    (tmp_path / "job.toml").write_text(job_text({"X": {"load": "big.csv"}, "s": "sum(X, axis=0)"},
                                                {"s": "s.npy"}, name="big"))
    stages = []
    for k in range(2):
        run(tmp_path / "job.toml", "--stats", tmp_path / f"s{k}.json")
        stages.append({i["stage"] for i in json.loads((tmp_path / f"s{k}.json").read_text())["timeline"]})
        np.testing.assert_allclose(np.load(tmp_path / "s.npy"), np.loadtxt(tmp_path / "big.csv", delimiter=",").sum(axis=0))
    assert "csv-count" in stages[0] and "csv-count" not in stages[1], stages
