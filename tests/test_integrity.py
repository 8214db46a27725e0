"""Never a wrong answer with exit 0: two drivers on one job, interrupted and failed runs,
missing blocks, --resume and Ctrl-C, each run by the real binary on the file store and
compared with NumPy (or with an uninterrupted run, bit for bit)."""
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import zarr

from nums import BIN, job_text, run

N = 60  # row blocks: enough invocations (naive) to stop a run in the middle


def slow_job(seed, outputs=None, name="t"):
    """A job of many invocations (naive: one task each) whose result depends on `seed`."""
    arrays = {
        "X": {"random": "normal", "shape": [N * 2000, 8], "seed": seed, "block": [2000, 8]},
        "Y": "exp(X * 0.5) + sqrt(abs(X))",
        "s": "sum(Y, axis=0)",
    }
    return job_text(arrays, outputs or {"Y": "Y.npy", "s": "s.npy"}, name=name,
                    compute={"scheduler": "naive", "workers": 2})


def start(job, *args, signal_after=None):
    """`nums-cloud run job` in the background; `signal_after=(SIG, K)` has the driver send
    itself SIG once its journal records K finished batches: a kill or Ctrl-C in the middle
    of the run, where one sent from here would race a run that takes half a second."""
    env = dict(os.environ)
    if signal_after:
        env["NUMS_FAULT_SIGNAL_AFTER_BATCHES"] = "%d:%d" % signal_after
    return subprocess.Popen([BIN, "run", str(job), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


def wait_for(cond, timeout=60):
    t = time.time()
    while not cond():
        assert time.time() - t < timeout, "timed out"
        time.sleep(0.02)


def test_a_second_driver_on_the_same_job_is_refused_by_name(tmp_path):
    (tmp_path / "a.toml").write_text(slow_job(1, name="same"))
    (tmp_path / "b.toml").write_text(slow_job(2, name="same"))
    first = start(tmp_path / "a.toml")
    lease = tmp_path / "nums-data" / "same" / "_lease.json"
    wait_for(lease.exists)
    # Held still, the first driver's lease stays live for as long as the second takes.
    first.send_signal(signal.SIGSTOP)
    assert lease.exists(), "the first run ended before it could be paused"
    second = run(tmp_path / "b.toml", check=False)
    first.send_signal(signal.SIGCONT)
    assert second.returncode != 0
    assert "is being run by another driver" in second.stderr, second.stderr
    assert json.loads(lease.read_text())["run"] in second.stderr
    out, err = first.communicate(timeout=120)
    assert first.returncode == 0, err
    # The first run's answer is its own, whole.
    ref_dir = tmp_path / "ref"
    ref_dir.mkdir()
    (ref_dir / "job.toml").write_text(slow_job(1, name="ref"))
    run(ref_dir / "job.toml")
    assert np.array_equal(np.load(tmp_path / "Y.npy"), np.load(ref_dir / "Y.npy"))
    assert not lease.exists()


def test_an_interrupted_rerun_leaves_the_old_output_whole_and_resume_finishes_it(tmp_path):
    store = tmp_path / "nums-data" / "t"
    # The output is kept in the store, where a later job reads it.
    (tmp_path / "job.toml").write_text(slow_job(1, outputs={"Y": "nums-data/t/Y"}))
    run(tmp_path / "job.toml")
    reader = tmp_path / "reader"
    reader.mkdir()
    (reader / "job.toml").write_text(job_text(
        {"Y": {"load": str(store / "Y")}, "Z": "Y * 1"}, {"Z": "Z.npy"}, name="reader",
        storage={"url": f"file://{tmp_path / 'nums-data'}"}))
    run(reader / "job.toml")
    old = np.load(reader / "Z.npy")
    # The seed changes; the driver is killed halfway through.
    (tmp_path / "job.toml").write_text(slow_job(2, outputs={"Y": "nums-data/t/Y"}))
    p = start(tmp_path / "job.toml", signal_after=(signal.SIGKILL, N // 3))
    p.communicate(timeout=120)
    assert p.returncode == -signal.SIGKILL, p.returncode
    # A reader of the stored output sees the old run's array, whole.
    run(reader / "job.toml")
    assert np.array_equal(np.load(reader / "Z.npy"), old)
    # --resume sends only what is missing and gives the same bits as a whole run.
    p = run(tmp_path / "job.toml", "--resume", "--stats", str(tmp_path / "s.json"))
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["skipped_batches"] >= N // 3, stats
    assert "resuming run" in p.stderr
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "job.toml").write_text(slow_job(2, outputs={"Y": "Y2.npy"}, name="fresh"))
    run(fresh / "job.toml", "--stats", str(fresh / "s.json"))
    run(reader / "job.toml")
    assert np.array_equal(np.load(reader / "Z.npy"), np.load(fresh / "Y2.npy"))
    assert stats["invocations"] < json.loads((fresh / "s.json").read_text())["invocations"]
    left = [str(p) for p in (store / "_runs").rglob("*") if p.is_file()] if (store / "_runs").exists() else []
    assert not left, left


def test_ctrl_c_stops_keeps_state_for_resume_and_writes_stats(tmp_path):
    store = tmp_path / "nums-data" / "t"
    (tmp_path / "job.toml").write_text(slow_job(3))
    p = start(tmp_path / "job.toml", "--stats", str(tmp_path / "s.json"),
              signal_after=(signal.SIGINT, 5))
    out, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert "interrupted" in err and "--resume" in err, err
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["status"] == "interrupted" and stats["invocations"] >= 5, stats
    assert not (tmp_path / "Y.npy").exists()
    assert not (store / "_lease.json").exists()
    run(tmp_path / "job.toml", "--resume")
    assert np.load(tmp_path / "s.npy").shape == (8,)


def test_large_npy_outputs_are_written_in_place_by_the_functions_and_resume(tmp_path):
    """A large `.npy` output on the local backend is written by the functions, each block
    into its place as it is made (edge blocks, 3-D, bool and int32 too): never stored, never
    read back by the driver. A run killed half way leaves its partial file, and --resume
    keeps the blocks written; one whose partial file went missing writes them again."""
    arrays = {
        "A": {"random": "normal", "shape": [700, 300], "seed": 1, "block": [256, 128]},
        "B": {"random": "normal", "shape": [300, 500], "seed": 2, "block": [128, 256]},
        "C": "A @ B",
        "T": {"random": "uniform", "shape": [60, 70, 80], "seed": 3, "block": [32, 70, 30]},
        "M": "T > 0.5",
        "I": "(T * 1000).astype('int32')",
    }
    outs = {"C": "C.npy", "T": "T.npy", "M": "M.npy", "I": "I.npy"}
    (tmp_path / "job.toml").write_text(job_text(arrays, outs))
    plan = subprocess.run([BIN, "plan", str(tmp_path / "job.toml")], capture_output=True, text=True)
    assert f"in this plan: the functions write C into {tmp_path / 'C.npy'}" in plan.stdout, plan.stdout
    run(tmp_path / "job.toml", "--stats", str(tmp_path / "s.json"))
    stats = json.loads((tmp_path / "s.json").read_text())
    # The reference: the same job's arrays kept in its store.
    ref = tmp_path / "ref"
    ref.mkdir()
    (ref / "job.toml").write_text(job_text(arrays, {k: f"nums-data/t/{k}" for k in [*outs, "A", "B"]}))
    run(ref / "job.toml")
    z = lambda name: zarr.open(str(ref / "nums-data" / "t" / name), mode="r")
    for k in outs:
        got, want = np.load(tmp_path / f"{k}.npy"), z(k)[:]
        assert got.dtype == want.dtype and np.array_equal(got, want), k
    A, B = z("A")[:], z("B")[:]
    np.testing.assert_allclose(np.load(tmp_path / "C.npy"), A @ B, rtol=1e-10, atol=1e-10)
    big = sum(np.load(tmp_path / f"{k}.npy").nbytes for k in ["C", "T", "I"])
    assert stats["s3_bytes_written"] < big / 2, stats["s3_bytes_written"]
    assert stats["driver_bytes_read"] < 1 << 20, stats["driver_bytes_read"]
    assert not list(tmp_path.glob("*.partial"))

    # Killed half way (naive: one task per invocation), then resumed.
    (tmp_path / "k.toml").write_text(slow_job(4, outputs={"Y": "Y.npy"}, name="k"))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "job.toml").write_text(slow_job(4, outputs={"Y": "Y.npy"}, name="k"))
    run(fresh / "job.toml")
    want = np.load(fresh / "Y.npy")
    # Killed late enough that some of Y's blocks are in the file (naive: one invocation per
    # task, the file's last).
    planned = json.loads(subprocess.run([BIN, "plan", "--json", str(tmp_path / "k.toml")],
                                        capture_output=True, text=True, check=True).stdout)
    total = next(s["invocations"] for s in planned["schedulers"] if s["scheduler"] == "naive")
    for lose_the_file in [False, True]:
        p = start(tmp_path / "k.toml", signal_after=(signal.SIGKILL, total - N // 4))
        p.communicate(timeout=120)
        assert p.returncode == -signal.SIGKILL, p.returncode
        partial = tmp_path / "Y.npy.partial"
        assert partial.exists() and not (tmp_path / "Y.npy").exists()
        if lose_the_file:
            partial.unlink()
        run(tmp_path / "k.toml", "--resume", "--stats", str(tmp_path / "r.json"))
        assert json.loads((tmp_path / "r.json").read_text())["skipped_batches"] >= N // 2
        assert np.array_equal(np.load(tmp_path / "Y.npy"), want), lose_the_file
        assert not partial.exists()
        (tmp_path / "Y.npy").unlink()


def test_a_missing_block_is_an_error_naming_array_block_and_key(tmp_path):
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"random": "normal", "shape": [6, 4], "seed": 1, "block": [2, 4]}},
        {"X": "nums-data/src/X"}, name="src"))
    run(tmp_path / "job.toml")
    chunk = tmp_path / "nums-data" / "src" / "X" / "c" / "1" / "0"
    assert chunk.exists()
    chunk.unlink()
    (tmp_path / "r.toml").write_text(job_text(
        {"X": {"load": "nums-data/src/X"}, "s": "sum(X)"}, {"s": "s.npy"}, name="r"))
    p = run(tmp_path / "r.toml", check=False)
    assert p.returncode == 1
    assert "src/X/c/1/0" in p.stderr and "MissingBlock" in p.stderr, p.stderr
    assert not (tmp_path / "s.npy").exists()


def test_a_failed_run_commits_nothing(tmp_path):
    """A run that fails after some of its blocks were written leaves the old output whole."""
    good = job_text({"X": {"random": "normal", "shape": [6, 4], "seed": 1, "block": [2, 4]},
                     "Y": "X * 2"}, {"Y": "nums-data/f/Y"}, name="f")
    (tmp_path / "job.toml").write_text(good)
    run(tmp_path / "job.toml")
    old = zarr.open_array(str(tmp_path / "nums-data" / "f" / "Y"), mode="r")[:]
    # An input read in place with one corrupt block: the run fails at that block.
    z = zarr.create_array(str(tmp_path / "nums-data" / "in"), shape=(6, 4), chunks=(2, 4),
                          dtype="float64", compressors=zarr.codecs.ZstdCodec(level=1, checksum=True))
    z[:] = np.ones((6, 4))
    blob = tmp_path / "nums-data" / "in" / "c" / "2" / "0"
    data = bytearray(blob.read_bytes())
    data[-6] ^= 0xFF
    blob.write_bytes(bytes(data))
    bad = job_text({"X": {"load": "nums-data/in"}, "Y": "X * 3"}, {"Y": "nums-data/f/Y"}, name="f")
    (tmp_path / "job.toml").write_text(bad)
    p = run(tmp_path / "job.toml", check=False)
    assert p.returncode == 1 and "in/c/2/0" in p.stderr, p.stderr
    stored = zarr.open_array(str(tmp_path / "nums-data" / "f" / "Y"), mode="r")
    assert np.array_equal(stored[:], old)


def test_foreign_zarr_chunks_never_written_are_its_fill_value(tmp_path):
    z = zarr.create_array(str(tmp_path / "f.zarr"), shape=(6, 4), chunks=(2, 2),
                          dtype="float64", fill_value=np.nan)
    z[0:2, :] = 1.0  # chunks of rows 2..5 are never written
    (tmp_path / "job.toml").write_text(job_text(
        {"Z": {"load": "f.zarr"}, "Y": "Z + 1"}, {"Y": "Y.npy"}))
    run(tmp_path / "job.toml")
    want = np.full((6, 4), np.nan)
    want[0:2] = 2.0
    np.testing.assert_array_equal(np.load(tmp_path / "Y.npy"), want)


def test_output_whose_rank_changes_is_replaced(tmp_path):
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"ones": [6], "block": [2]}}, {"X": "nums-data/t/X"}))
    run(tmp_path / "job.toml")
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"ones": [6, 3], "block": [2, 2]}}, {"X": "nums-data/t/X"}))
    run(tmp_path / "job.toml")
    stored = zarr.open_array(str(tmp_path / "nums-data" / "t" / "X"), mode="r")
    assert stored.shape == (6, 3) and np.array_equal(stored[:], np.ones((6, 3)))


def test_check_refuses_a_store_that_takes_no_writes(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    (tmp_path / "job.toml").write_text(job_text(
        {"X": {"ones": [6]}}, {"X": "X.npy"}, storage={"url": "file://ro"}))
    os.chmod(ro, 0o555)
    try:
        if os.geteuid() == 0:
            # root writes anywhere: make the folder immutable instead, where allowed.
            if subprocess.run(["chattr", "+i", str(ro)], capture_output=True).returncode != 0:
                return
        p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True)
        assert p.returncode == 1 and "storage.url" in p.stderr and "writes" in p.stderr, p.stderr
    finally:
        subprocess.run(["chattr", "-i", str(ro)], capture_output=True)
        os.chmod(ro, 0o755)


def test_memory_hint_is_right_the_first_time_and_names_the_users_array(tmp_path):
    arrays = {"X": {"random": "normal", "shape": [4000, 1000], "seed": 1, "block": [4000, 1000]},
              "Y": "sum(exp(X) * 2, axis=0)"}
    text = job_text(arrays, {"Y": "Y.npy"}, compute={"memory_mb": 128, "workers": 1})
    (tmp_path / "job.toml").write_text(text)
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    assert "job.toml:6: arrays.X: block [0, 0] of array X" in p.stderr, p.stderr
    assert "(expression n" not in p.stderr, p.stderr
    hint = int(p.stderr.split("give memory_mb = ")[1].split()[0])
    assert hint > 128 and hint % 64 == 0
    # Following the hint plans the job at once; 64 MB less does not.
    (tmp_path / "job.toml").write_text(text.replace("memory_mb = 128", f"memory_mb = {hint}"))
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    (tmp_path / "job.toml").write_text(text.replace("memory_mb = 128", f"memory_mb = {hint - 64}"))
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True)
    assert p.returncode == 1, p.stderr


def test_one_mask_indexes_several_arrays(tmp_path):
    X = np.arange(30, dtype=float).reshape(10, 3) - 12.0
    np.save(tmp_path / "X.npy", X)
    arrays = {"X": {"load": "X.npy", "block": [4, 3]}, "m": "X[:, 0] > 0", "w": "X[:, 1]",
              "z": "X[~m] @ ones(3) - w[~m]", "y": "X[m][:, 2] + w[m]"}
    (tmp_path / "job.toml").write_text(job_text(arrays, {"z": "z.npy", "y": "y.npy"}))
    run(tmp_path / "job.toml")
    m = X[:, 0] > 0
    np.testing.assert_allclose(np.load(tmp_path / "z.npy"), X[~m] @ np.ones(3) - X[:, 1][~m])
    np.testing.assert_allclose(np.load(tmp_path / "y.npy"), X[m, 2] + X[:, 1][m])


def test_a_store_outage_of_30_s_mid_job_is_survived(tmp_path):
    """Garage stops for 30 s while functions read and write blocks; the run waits it out
    (store requests retry with backoff) and gives NumPy's answer."""
    from garage import Garage

    with Garage(bucket="outage") as g:
        # 5x the other tests' blocks: the run lasts well past the 1.5 s before the outage
        # on a quiet machine too (60 blocks once ended in 1.4 s).
        arrays = {"X": {"random": "uniform", "shape": [5 * N * 2000, 8], "seed": 5, "block": [2000, 8]},
                  "Y": "X * 2 + 1", "s": "sum(Y, axis=0)"}
        (tmp_path / "job.toml").write_text(job_text(
            arrays, {"s": "s.npy"}, name="outage",
            storage={"url": f"s3://{g.bucket}/o", "endpoint": g.endpoint},
            compute={"scheduler": "naive", "workers": 2}))
        env = {**os.environ, **g.env()}
        p = subprocess.Popen([BIN, "run", str(tmp_path / "job.toml"), "--stats", str(tmp_path / "s.json")],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        time.sleep(1.5)
        assert p.poll() is None, "the job ended before the outage"
        # In this thread: Garage dies with the thread that started it (PR_SET_PDEATHSIG).
        g.outage(30)
        try:
            out, err = p.communicate(timeout=240)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            raise AssertionError(f"the run hung:\n{err}") from None
        assert p.returncode == 0, err
    stats = json.loads((tmp_path / "s.json").read_text())
    assert stats["wall_seconds"] > 25, stats  # it did live through the outage
    # The same values as a job on the file store (same seed: same data).
    (tmp_path / "ref.toml").write_text(job_text(arrays, {"s": "ref.npy"}, name="ref",
                                                compute={"scheduler": "naive", "workers": 2}))
    run(tmp_path / "ref.toml")
    np.testing.assert_array_equal(np.load(tmp_path / "s.npy"), np.load(tmp_path / "ref.npy"))
