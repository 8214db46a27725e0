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
    assert "after 1 attempt(s)" in p.stderr, p.stderr
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


def test_put_errors_name_the_command_and_the_files_that_exist(tmp_path):
    """`put`'s job is made up: its errors name the file put and the flag, never a job file
    that does not exist."""
    (tmp_path / "a.csv").write_text("1,2\n3,4\n")
    (tmp_path / "b.csv").write_text("1,2\n3,x\n")
    for args, words in ((["a.csv", "misc/A", "--usecols", "5"], "--usecols: column 5 is out of range"),
                        (["a.csv", "misc/A", "--dtype", "float16"], "--dtype: unsupported dtype"),
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
