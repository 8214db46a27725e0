"""Nothing stored is lost, and nothing is left behind: outputs replace an array and only
an array, the names the store layout uses are reserved, links out of the store are never
followed, two jobs writing one output path leave one job's answer, `--resume` never reuses
work made from an input file that changed since, and no run leaves `.partial` files or
state it did not need. Each runs the real binary on the file store (and on Garage where
the kind of store matters)."""
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest
import zarr

from nums import BIN, job_text, run, snapshot


def cli(*args, cwd, env=None, check=True):
    p = subprocess.run([BIN, *args], cwd=cwd, capture_output=True, text=True, timeout=120,
                       env={**os.environ, **(env or {})})
    if check and p.returncode != 0:
        raise AssertionError(f"nums-cloud {' '.join(map(str, args))} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return p


def keep_victim(tmp_path, storage=None, env=None):
    """A job `victim` that keeps X (6 x 4, in three blocks) in the store."""
    (tmp_path / "victim.toml").write_text(job_text(
        {"X": {"random": "normal", "shape": [6, 4], "seed": 1, "block": [2, 4]}},
        {"X": (storage["url"] if storage else "nums-data") + "/victim/X"}, name="victim",
        storage=storage))
    run(tmp_path / "victim.toml", env=env)


# Item 8 of issue 29: an output path could delete other jobs (the store root, another
# job's prefix) or a folder that is not a Zarr array.
IN_STORE = ["nums-data", "nums-data/victim", "nums-data/victim/X", "nums-data/victim/X/c",
            "nums-data/attacker", "nums-data/attacker/Z.npy", "nums-data/victim/Z.npy",
            "nums-data/attacker/sub/Z", ".", "nums-data/../nums-data/victim"]


@pytest.mark.parametrize("dest", IN_STORE)
def test_an_output_in_the_store_is_a_plain_array_of_the_jobs_own(tmp_path, dest):
    keep_victim(tmp_path)
    before = snapshot(tmp_path / "nums-data")
    (tmp_path / "a.toml").write_text(job_text({"Z": {"zeros": [3]}}, {"Z": dest}, name="attacker"))
    p = cli("check", "a.toml", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "a.toml:8: outputs.Z" in p.stderr, p.stderr
    p = run(tmp_path / "a.toml", check=False)
    assert p.returncode == 1 and "outputs.Z" in p.stderr, p.stderr
    assert snapshot(tmp_path / "nums-data") == before
    assert (tmp_path / "victim.toml").exists()


def test_an_output_replaces_an_array_and_nothing_else(tmp_path):
    keep_victim(tmp_path)
    # A folder of other files, and a folder holding two arrays: neither is replaced.
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("keep")
    for name in ["A", "B", "0", "1"]:
        z = zarr.create_array(str(tmp_path / "arrays" / name), shape=(3,), dtype="float64")
        z[:] = 1.0
    for name in ["0", "1"]:
        z = zarr.create_array(str(tmp_path / "numbered" / name), shape=(3,), dtype="float64")
        z[:] = 1.0
    z = zarr.create_array(str(tmp_path / "big.zarr"), shape=(4, 4), chunks=(2, 2), dtype="float64")
    z[:] = 1.0
    kept = snapshot(tmp_path)
    for i, dest in enumerate(["data", "arrays", "numbered", "big.zarr/c", "big.zarr/c/0",
                              "big.zarr/c/0/new.zarr"]):
        (tmp_path / "a.toml").write_text(job_text({"Z": {"zeros": [3]}}, {"Z": dest}, name="attacker"))
        p = cli("check", "a.toml", cwd=tmp_path, check=False)
        assert p.returncode == 1 and "a.toml:8: outputs.Z" in p.stderr, p.stderr
        assert "not a Zarr array" in p.stderr or "inside the Zarr array" in p.stderr, p.stderr
        p = run(tmp_path / "a.toml", check=False)
        assert p.returncode == 1, p.stderr
    (tmp_path / "a.toml").unlink()
    assert snapshot(tmp_path) == {k: v for k, v in kept.items() if k != "a.toml"}
    # An array of the job's own under another name, a new path and an existing foreign
    # array are written.
    outs = {"Z": "nums-data/attacker/W", "A": "arrays/A", "N": "new/N.zarr"}
    (tmp_path / "a.toml").write_text(job_text(
        {"Z": {"full": [3], "value": 2.0}, "A": "Z + 1", "N": "Z * 3"}, outs, name="attacker"))
    run(tmp_path / "a.toml")
    assert zarr.open_array(str(tmp_path / "nums-data" / "attacker" / "W"), mode="r")[:].tolist() == [2.0] * 3
    assert zarr.open_array(str(tmp_path / "arrays" / "A"), mode="r")[:].tolist() == [3.0] * 3
    assert zarr.open_array(str(tmp_path / "arrays" / "B"), mode="r")[:].tolist() == [1.0] * 3
    assert zarr.open_array(str(tmp_path / "new" / "N.zarr"), mode="r")[:].tolist() == [6.0] * 3


def test_an_s3_output_into_the_jobs_store_is_refused_on_garage(tmp_path, garage):
    root = f"s3://{garage.bucket}/safe-{tmp_path.name}"
    storage = {"url": root, "endpoint": garage.endpoint}
    env = garage.env()
    keep_victim(tmp_path, storage, env)
    st = ["--storage", root, "--endpoint", garage.endpoint]
    for dest in [root, f"{root}/victim", f"{root}/victim/X", f"{root}/attacker", f"{root}/victim/z.npy"]:
        (tmp_path / "a.toml").write_text(job_text({"Z": {"zeros": [3]}}, {"Z": dest}, name="attacker",
                                                  storage=storage))
        p = cli("check", "a.toml", cwd=tmp_path, env=env, check=False)
        assert p.returncode == 1 and "a.toml:11: outputs.Z" in p.stderr, (dest, p.stderr)
        p = run(tmp_path / "a.toml", env=env, check=False)
        assert p.returncode == 1, (dest, p.stderr)
        cli("get", "victim/X", "x.npy", *st, cwd=tmp_path, env=env)
        assert np.load(tmp_path / "x.npy").shape == (6, 4)


# Item 9: names the store layout uses.
@pytest.mark.parametrize("name", ["_runs", "_lease", "_commit", "_inputs", "_batches"])
def test_names_the_store_layout_uses_are_reserved(tmp_path, name):
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"ones": [4]}, name: "X * 2"}, {"X": "nums-data/t/X", name: f"nums-data/t/{name}"}))
    p = cli("check", "job.toml", cwd=tmp_path, check=False)
    assert p.returncode == 1 and f"job.toml:7: arrays.{name}" in p.stderr and "reserved" in p.stderr, p.stderr
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode == 1 and "reserved" in p.stderr, p.stderr
    assert not (tmp_path / "nums-data" / "t").exists()


def test_put_get_show_rm_refuse_reserved_names(tmp_path):
    np.save(tmp_path / "a.npy", np.arange(3.0))
    cli("put", "a.npy", "victim/X", cwd=tmp_path)
    before = snapshot(tmp_path / "nums-data")
    for args in [("put", "a.npy", "victim/_runs"), ("put", "a.npy", "victim/_lease"),
                 ("get", "victim/_runs", "x.npy"), ("show", "victim/_runs"),
                 ("rm", "victim/_runs", "--yes"), ("rm", "victim/_lease.json", "--yes"),
                 ("rm", "--job", "_runs", "--yes")]:
        p = cli(*args, cwd=tmp_path, check=False)
        assert p.returncode == 1 and "reserved" in p.stderr, (args, p.stderr)
    assert snapshot(tmp_path / "nums-data") == before
    cli("get", "victim/X", "x.npy", cwd=tmp_path)
    assert np.load(tmp_path / "x.npy").tolist() == [0.0, 1.0, 2.0]


# Item 10: links out of the store.
def test_links_out_of_the_store_are_never_followed(tmp_path):
    outside = tmp_path / "outside"
    (outside / "sub").mkdir(parents=True)
    (outside / "precious.txt").write_text("keep")
    (outside / "sub" / "deep.txt").write_text("keep")
    (outside / "sub" / "chunk#1").write_text("keep")  # named like a staged put
    z = zarr.create_array(str(outside / "arr"), shape=(3,), dtype="float64")
    z[:] = 7.0
    np.save(tmp_path / "a.npy", np.arange(3.0))
    cli("put", "a.npy", "victim/X", cwd=tmp_path)
    store = tmp_path / "nums-data"
    os.symlink(outside, store / "victim" / "link")
    os.symlink(outside / "arr", store / "victim" / "arr")
    os.symlink(outside, store / "linked")
    kept = snapshot(outside)
    listed = [i["path"] for i in json.loads(cli("ls", "--json", cwd=tmp_path).stdout)]
    assert listed == ["victim/X"], listed
    for args in [("get", "victim/arr", "x.npy"), ("show", "victim/arr"), ("rm", "victim/arr", "--yes"),
                 ("put", "a.npy", "victim/arr"), ("put", "a.npy", "linked/Y"),
                 ("get", "victim/link/arr", "x.npy")]:
        p = cli(*args, cwd=tmp_path, check=False)
        assert p.returncode == 1 and "link" in p.stderr, (args, p.stderr)
        assert snapshot(outside) == kept, args
    assert not (tmp_path / "x.npy").exists()
    cli("rm", "--job", "victim", "--yes", cwd=tmp_path, check=False)
    cli("rm", "--job", "linked", "--yes", cwd=tmp_path, check=False)
    assert snapshot(outside) == kept
    assert not (store / "victim" / "X").exists()
    # An output through a link out of its folder is refused; an input file the job file
    # names through a link (data linked from elsewhere) is read.
    (tmp_path / "res").mkdir()
    os.symlink(outside / "arr", tmp_path / "res" / "linked.zarr")
    np.save(outside / "in.npy", np.arange(4.0))
    os.symlink(outside / "in.npy", tmp_path / "in.npy")
    (tmp_path / "r.toml").write_text(job_text({"A": {"load": "in.npy"}, "B": "A * 2"},
                                              {"B": "res/linked.zarr"}, name="r"))
    kept = snapshot(outside)
    p = run(tmp_path / "r.toml", check=False)
    assert p.returncode == 1 and "outputs.B" in p.stderr and "link" in p.stderr, p.stderr
    assert snapshot(outside) == kept
    (tmp_path / "r.toml").write_text(job_text({"A": {"load": "in.npy"}, "B": "A * 2"},
                                              {"B": "b.npy"}, name="r"))
    run(tmp_path / "r.toml")
    assert np.load(tmp_path / "b.npy").tolist() == [0.0, 2.0, 4.0, 6.0]


# Item 2: two jobs writing one output path at once.
def race(tmp_path, outputs, storage=None, env=None, races=8):
    """Runs jobs a (Y = 1) and b (Y = 2) at once `races` times, both writing `outputs`;
    yields the exit codes and stderr of each race."""
    arrays = lambda k: {"X": {"ones": [400, 30], "block": [4, 30]}, "Y": f"X * {k}"}
    for n, k in [("a", 1), ("b", 2)]:
        (tmp_path / f"{n}.toml").write_text(job_text(arrays(k), outputs, name=f"race-{n}", storage=storage,
                                                     compute={"workers": 1}))
    for _ in range(races):
        ps = [subprocess.Popen([BIN, "run", str(tmp_path / f"{n}.toml")], stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
              for n in "ab"]
        yield [(p.wait(timeout=120), p.communicate()[1]) for p in ps]


def one_answer(got):
    assert got.shape == (400, 30)
    assert np.all(got == 1) or np.all(got == 2), f"a mix: {np.unique(got)}"


def test_two_jobs_writing_one_output_path_leave_one_answer(tmp_path):
    outputs = {"Y": "out/Y.zarr"}
    zarr_keys = None
    for (ca, ea), (cb, eb) in race(tmp_path, outputs):
        assert 0 in (ca, cb), (ea, eb)
        for code, err in [(ca, ea), (cb, eb)]:
            assert code == 0 or "is being written by job race-" in err, err
        one_answer(zarr.open_array(str(tmp_path / "out" / "Y.zarr"), mode="r")[:])
        keys = sorted(str(p.relative_to(tmp_path / "out")) for p in (tmp_path / "out").rglob("*") if p.is_file())
        zarr_keys = zarr_keys or keys
        assert keys == zarr_keys, "blocks of a failed run are left"
    outputs = {"Y": "out/y.npy"}
    for (ca, ea), (cb, eb) in race(tmp_path, outputs):
        assert 0 in (ca, cb), (ea, eb)
        one_answer(np.load(tmp_path / "out" / "y.npy"))
        assert not list((tmp_path / "out").glob("*.partial"))


def test_two_jobs_writing_one_s3_output_leave_one_answer_on_garage(tmp_path, garage):
    env = garage.env()
    storage = {"url": f"s3://{garage.bucket}/race-{tmp_path.name}", "endpoint": garage.endpoint}
    dest = f"s3://{garage.bucket}/race-out-{tmp_path.name}/Y.zarr"
    for (ca, ea), (cb, eb) in race(tmp_path, {"Y": dest}, storage, env, races=4):
        assert 0 in (ca, cb), (ea, eb)
        for code, err in [(ca, ea), (cb, eb)]:
            assert code == 0 or "is being written by job race-" in err, err
        (tmp_path / "r.toml").write_text(job_text({"Y": {"load": dest}}, {"Y": "y.npy"}, name="reader",
                                                  storage=storage))
        run(tmp_path / "r.toml", env=env)
        one_answer(np.load(tmp_path / "y.npy"))


# Item 3: --resume after an input file changed.
N = 40


def test_resume_after_an_input_file_changed_starts_afresh(tmp_path):
    rng = np.random.default_rng(5)
    np.save(tmp_path / "X.npy", rng.normal(size=(N * 50, 4)))
    arrays = {"X": {"load": "X.npy", "block": [50, 4]}, "m": "X[:, 0] > 0", "S": "X[m] * 1",
              "G": "X.T @ X"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"S": "S.npy", "G": "G.npy"},
                                                compute={"scheduler": "naive", "workers": 2}))
    # Killed once its mask is known and part of the rest is done.
    env = {**os.environ, "NUMS_FAULT_SIGNAL_AFTER_BATCHES": f"9:{3 * N}"}
    p = subprocess.run([BIN, "run", str(tmp_path / "job.toml")], capture_output=True, text=True, env=env)
    assert p.returncode == -9, p.stderr
    X = rng.normal(size=(N * 50, 4))
    np.save(tmp_path / "X.npy", X)
    p = run(tmp_path / "job.toml", "--resume")
    np.testing.assert_allclose(np.load(tmp_path / "G.npy"), X.T @ X, rtol=1e-10)
    np.testing.assert_allclose(np.load(tmp_path / "S.npy"), X[X[:, 0] > 0])
    assert "X.npy" in p.stderr and "changed" in p.stderr, p.stderr


def test_resume_after_an_s3_input_changed_starts_afresh_on_garage(tmp_path, garage):
    from test_import import s3_put
    env = garage.env()
    rng = np.random.default_rng(6)
    key = f"inputs-{tmp_path.name}/X.npy"
    np.save(tmp_path / "X.npy", rng.normal(size=(N * 50, 4)))
    s3_put(garage, key, (tmp_path / "X.npy").read_bytes())
    arrays = {"X": {"load": f"s3://{garage.bucket}/{key}", "block": [50, 4]}, "G": "X.T @ X"}
    (tmp_path / "job.toml").write_text(job_text(
        arrays, {"G": "G.npy"}, storage={"url": f"s3://{garage.bucket}/rs-{tmp_path.name}",
                                         "endpoint": garage.endpoint},
        compute={"scheduler": "naive", "workers": 2}))
    p = subprocess.run([BIN, "run", str(tmp_path / "job.toml")], capture_output=True, text=True,
                       env={**os.environ, **env, "NUMS_FAULT_SIGNAL_AFTER_BATCHES": f"9:{N // 2}"})
    assert p.returncode == -9, p.stderr
    X = rng.normal(size=(N * 50, 4))
    np.save(tmp_path / "X.npy", X)
    s3_put(garage, key, (tmp_path / "X.npy").read_bytes())
    p = run(tmp_path / "job.toml", "--resume", env=env)
    np.testing.assert_allclose(np.load(tmp_path / "G.npy"), X.T @ X, rtol=1e-10)
    assert "X.npy" in p.stderr and "changed" in p.stderr, p.stderr


def test_resume_of_the_same_inputs_still_resumes(tmp_path):
    np.save(tmp_path / "X.npy", np.arange(N * 50 * 4, dtype=float).reshape(N * 50, 4))
    arrays = {"X": {"load": "X.npy", "block": [50, 4]}, "G": "X.T @ X"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"G": "G.npy"},
                                                compute={"scheduler": "naive", "workers": 2}))
    env = {**os.environ, "NUMS_FAULT_SIGNAL_AFTER_BATCHES": f"9:{N}"}
    p = subprocess.run([BIN, "run", str(tmp_path / "job.toml")], capture_output=True, text=True, env=env)
    assert p.returncode == -9, p.stderr
    p = run(tmp_path / "job.toml", "--resume")
    assert "resuming run" in p.stderr, p.stderr
    X = np.load(tmp_path / "X.npy")
    np.testing.assert_allclose(np.load(tmp_path / "G.npy"), X.T @ X)


# Item 12: leftovers.
def test_no_partial_file_is_left_by_ctrl_c_a_failed_write_or_a_killed_run(tmp_path):
    arrays = {"X": {"random": "normal", "shape": [4_000_000, 4], "seed": 1, "block": [500_000, 4]}}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"X": "X.npy"}, compute={"memory_mb": 1024}))
    partial = tmp_path / "X.npy.partial"
    p = subprocess.Popen([BIN, "run", str(tmp_path / "job.toml")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    t = time.time()
    while not partial.exists() and p.poll() is None:
        assert time.time() - t < 120
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert not partial.exists() and not (tmp_path / "X.npy").exists()
    # A partial file a killed run left is removed by the next run.
    partial.write_bytes(b"left by a killed run")
    run(tmp_path / "job.toml")
    assert not partial.exists() and np.load(tmp_path / "X.npy").shape == (4_000_000, 4)
    # `get` interrupted, and `get` whose read fails half way.
    cli("put", "X.npy", "d/X", "--block", "500000,4", cwd=tmp_path)
    p = subprocess.Popen([BIN, "get", "d/X", "x2.npy"], cwd=tmp_path, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    while not (tmp_path / "x2.npy.partial").exists() and p.poll() is None:
        time.sleep(0.002)
    p.send_signal(signal.SIGINT)
    p.communicate(timeout=60)
    assert p.returncode != 0 and not (tmp_path / "x2.npy.partial").exists()
    # A write that fails half way, as on a full disk: files may not grow past 40 MB (and
    # SIGXFSZ is ignored, so that the write fails with EFBIG instead).
    def small_files():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (40 << 20, 40 << 20))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    p = subprocess.run([BIN, "get", "d/X", "x6.npy"], cwd=tmp_path, capture_output=True, text=True,
                       preexec_fn=small_files)
    assert p.returncode == 1 and "x6.npy" in p.stderr, p.stderr
    assert not list(tmp_path.glob("*.partial")) and not (tmp_path / "x6.npy").exists()
    chunk = tmp_path / "nums-data" / "d" / "X" / "c" / "7" / "0"
    chunk.write_bytes(chunk.read_bytes()[:100])
    p = cli("get", "d/X", "x3.npy", cwd=tmp_path, check=False)
    assert p.returncode == 1 and "c/7/0" in p.stderr, p.stderr
    assert not list(tmp_path.glob("*.partial")) and not (tmp_path / "x3.npy").exists()
    # A run whose export fails half way (the loaded array's last block is corrupt).
    (tmp_path / "r.toml").write_text(job_text({"X": {"load": "nums-data/d/X"}}, {"X": "x4.npy"}, name="r"))
    p = run(tmp_path / "r.toml", check=False)
    assert p.returncode == 1 and "c/7/0" in p.stderr, p.stderr
    assert not list(tmp_path.glob("*.partial")) and not (tmp_path / "x4.npy").exists()


def test_a_run_refused_for_memory_creates_nothing(tmp_path):
    arrays = {"X": {"random": "normal", "shape": [4000, 1000], "seed": 1, "block": [4000, 1000]},
              "Y": "sum(exp(X) * 2, axis=0)"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"Y": "Y.npy"}, compute={"memory_mb": 128}))
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode == 1 and "memory_mb" in p.stderr, p.stderr
    assert "resume" not in p.stderr and "kept" not in p.stderr, p.stderr
    assert not (tmp_path / "nums-data" / "t").exists(), list((tmp_path / "nums-data").rglob("*"))


def test_over_long_names_are_refused_at_check_with_the_limit(tmp_path):
    for name, arrays, key in [("j" * 256, {"X": {"ones": [3]}}, "name"),
                              ("t", {"X" * 256: {"ones": [3]}}, "arrays." + "X" * 256)]:
        (tmp_path / "job.toml").write_text(job_text(arrays, {}, name=name))
        p = cli("check", "job.toml", cwd=tmp_path, check=False)
        assert p.returncode == 1 and f": {key}: " in p.stderr, p.stderr
        assert "at most" in p.stderr and "characters" in p.stderr, p.stderr
        assert "does not take writes" not in p.stderr


def test_a_zarr_input_rewritten_while_a_run_reads_it_is_never_a_mix(tmp_path):
    """A job imports a Zarr array outside its store while another job rewrites it: the
    reader stops itself half way (SIGSTOP after 10 batches), the writer runs, the reader
    goes on. It fails saying the input changed (it gave a mix of both, exit 0)."""
    writer = lambda k: job_text({"X": {"ones": [400 * 50, 4], "block": [50, 4]}, "Y": f"X * {k}"},
                                {"Y": "out/Y.zarr"}, name="writer")
    (tmp_path / "w.toml").write_text(writer(1))
    run(tmp_path / "w.toml")
    (tmp_path / "r.toml").write_text(job_text({"Y": {"load": "out/Y.zarr", "block": [50, 4]}, "S": "Y + 0"},
                                              {"S": "S.npy"}, name="reader",
                                              compute={"scheduler": "naive", "workers": 1}))
    env = {**os.environ, "NUMS_FAULT_SIGNAL_AFTER_BATCHES": "%d:10" % signal.SIGSTOP}
    p = subprocess.Popen([BIN, "run", str(tmp_path / "r.toml")], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=env)
    t = time.time()
    while open(f"/proc/{p.pid}/stat").read().split(") ")[1][0] != "T":
        assert p.poll() is None and time.time() - t < 60, "the reader did not stop"
        time.sleep(0.01)
    (tmp_path / "w.toml").write_text(writer(2))
    run(tmp_path / "w.toml")
    p.send_signal(signal.SIGCONT)
    out, err = p.communicate(timeout=120)
    if p.returncode == 0:
        got = np.load(tmp_path / "S.npy")
        assert np.all(got == 1) or np.all(got == 2), f"a mix: {np.unique(got)}"
    assert p.returncode == 1 and "changed while this run read it" in err, err
    assert not (tmp_path / "S.npy").exists()
