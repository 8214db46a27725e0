"""Fault injection, end to end: the real nums-cloud binary on the file store with local
function processes, hit while a job runs (a function process killed or frozen, a process
really over its memory). Every result is checked against NumPy; every fault absorbed shows
in --stats (retries, backups).

Helpers here are meant to be reused by more fault tests: `FaultRun` starts a run in the
background and finds its function processes (children of the driver), `busy_function`
picks one in the middle of an invocation."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from nums import BIN, assert_close, job_text

# ---------------------------------------------------------------- helpers


def children(pid):
    """Pids of the processes whose parent is `pid`."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        # pid (comm) state ppid ...: comm may hold spaces, so split after the last ')'.
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            out.append(int(d.name))
    return out


def cpu_seconds(pid):
    """User + system CPU time of a process, or None once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cmdline(pid):
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return []


class FaultRun:
    """`nums-cloud run job --stats` in the background, to be hit while it runs."""

    def __init__(self, job, tmp_path, *args, env=None):
        self.stats_path = Path(tmp_path) / "stats.json"
        e = dict(os.environ)
        e.update(env or {})
        self.started = time.monotonic()
        self.proc = subprocess.Popen([BIN, "run", str(job), "--quiet", "--stats", str(self.stats_path), *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=e)
        self.hit = []  # pids signalled, resumed and reaped by finish()

    def function_pids(self):
        """The driver's function processes (`nums-cloud function`), as the endpoint runs them."""
        return [p for p in children(self.proc.pid) if b"function" in cmdline(p)]

    def busy_function(self, timeout=60.0, window=0.1, min_cpu=0.03, after_cpu=0.3):
        """A function process in the middle of an invocation, with the job under way: one
        that used at least `min_cpu` seconds of CPU over `window` seconds and `after_cpu`
        seconds in all (several invocations done: a backup compares with finished ones)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"the run ended before a function was busy:\n{self.proc.stderr.read()}")
            before = {p: cpu_seconds(p) for p in self.function_pids()}
            time.sleep(window)
            for p, c in before.items():
                now = cpu_seconds(p)
                if c is not None and now is not None and now - c >= min_cpu and now >= after_cpu:
                    return p
        raise AssertionError("no function process got busy")

    def signal(self, pid, sig):
        os.kill(pid, sig)
        self.hit.append(pid)

    def finish(self, timeout=120):
        """Waits for the run; returns (exit code, stdout, stderr, stats or None)."""
        try:
            out, err = self.proc.communicate(timeout=timeout)
        finally:
            self.proc.kill()
            for p in self.hit:  # a frozen process the driver did not take down
                try:
                    os.kill(p, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        self.seconds = time.monotonic() - self.started
        stats = json.loads(self.stats_path.read_text()) if self.stats_path.exists() else None
        return self.proc.returncode, out, err, stats


# A job of 40 row blocks, each invocation a few tens of milliseconds of BLAS (naive
# scheduler: one task per invocation, so many invocations to hit).
rng = np.random.default_rng(7)
# (16 blocks were too few once blocks were read as mapped files: a whole run took 0.5 s,
# and no function process had used the CPU `busy_function` waits for before it ended).
A = rng.normal(size=(10000, 800))
W = rng.normal(size=(800, 800)) / 30


def matmul_job(tmp_path, name, compute=None):
    np.save(tmp_path / "A.npy", A)
    np.save(tmp_path / "W.npy", W)
    arrays = {
        "A": {"load": str(tmp_path / "A.npy"), "block": [250, 800]},
        "W": {"load": str(tmp_path / "W.npy"), "block": [800, 800]},
        "Y": "tanh(A @ W) @ W",
    }
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"Y": str(tmp_path / "Y.npy")}, name=name,
                            storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"scheduler": "naive", "workers": 2, "memory_mb": 1024,
                                     **(compute or {})}))
    return job, np.tanh(A @ W) @ W


# ---------------------------------------------------------------- tests


def test_a_killed_function_process_is_retried(tmp_path):
    """SIGKILL of a function process mid-invocation, far under its memory: the invocation
    fails as a crash (not out of memory), is sent again, and the result is NumPy's."""
    # A process seen busy may finish its invocation before the signal lands (then nothing
    # is retried, and the next invocation starts a new process): every run must be right,
    # and within three runs one must have been killed mid-invocation and retried.
    retried = []
    for attempt in range(3):
        d = tmp_path / f"run{attempt}"
        d.mkdir()
        job, want = matmul_job(d, "sigkill")
        run = FaultRun(job, d)
        # Early in the run (most invocations still to come), not after several are done.
        run.signal(run.busy_function(after_cpu=0.05), signal.SIGKILL)
        code, _, err, stats = run.finish()
        assert code == 0, err
        assert_close(np.load(d / "Y.npy"), want)
        retried.append(stats["retries"])
        if stats["retries"] >= 1:
            break
    assert max(retried) >= 1, retried


def frozen_runs(tmp_path, name, compute):
    """Runs the matmul job with a busy function process frozen (SIGSTOP), up to three
    times: a process seen busy may finish the job's last invocation before the signal
    lands (then nothing needs a backup). Every run must be right and end long before
    timeout_seconds; returns the backups of each."""
    backups = []
    for attempt in range(3):
        d = tmp_path / f"run{attempt}"
        d.mkdir()
        job, want = matmul_job(d, name, compute={"timeout_seconds": 600, **compute})
        run = FaultRun(job, d)
        run.signal(run.busy_function(), signal.SIGSTOP)
        code, _, err, stats = run.finish(timeout=120)
        assert code == 0, err
        assert run.seconds < 60, run.seconds
        assert_close(np.load(d / "Y.npy"), want)
        backups.append(stats["backups"])
        if stats["backups"] >= 1:
            break
    return backups


def test_a_frozen_function_process_is_backed_up(tmp_path):
    """SIGSTOP of a function process mid-invocation: its invocation gets a backup and the
    job completes long before timeout_seconds, with NumPy's result."""
    backups = frozen_runs(tmp_path, "sigstop", {})
    assert max(backups) >= 1, backups


def test_a_frozen_process_with_one_worker_gets_another_process(tmp_path):
    """With workers = 1 the frozen process is the only one: the endpoint starts another
    for the backup, as Lambda starts another environment."""
    backups = frozen_runs(tmp_path, "sigstop1", {"workers": 1})
    assert max(backups) >= 1, backups


def test_a_frozen_function_under_lshs_costs_one_invocation_again(tmp_path):
    """SIGSTOP of a function process under LSHS, whose plan has few, large invocations,
    pairs of which the rest of the plan waits for: the frozen invocation gets a backup (the
    run stalls, so the backup comes at 1.5x the finished invocations' median, or twice its
    projection, and never before a second), the result is NumPy's, and the run ends long
    before the function's timeout (it once waited for it). How long after the fault-free
    run it ends is timing, not a guarantee: a bound of the fault-free run's time plus a
    second and twice its longest invocation failed on a busy CI machine."""
    rng = np.random.default_rng(11)
    a, b = rng.normal(size=(3072, 3072)), rng.normal(size=(3072, 3072)) / 50
    np.save(tmp_path / "A.npy", a)
    np.save(tmp_path / "B.npy", b)
    store = f"file://{tmp_path / 'store'}"
    # The inputs in the store first, as a user's earlier job leaves them: read in place.
    setup = tmp_path / "setup.toml"
    setup.write_text(job_text({"A": {"load": str(tmp_path / "A.npy"), "block": [768, 768]},
                               "B": {"load": str(tmp_path / "B.npy"), "block": [768, 768]}},
                              {"A": f"{store}/in/A", "B": f"{store}/in/B"}, name="in",
                              storage={"url": store}))
    subprocess.run([BIN, "run", "-q", str(setup)], check=True, capture_output=True)
    want = np.tanh(a @ b) @ b
    seconds, backups = [], []
    for attempt in range(4):
        d = tmp_path / f"run{attempt}"
        d.mkdir()
        job = d / "job.toml"
        job.write_text(job_text({"A": {"load": f"{store}/in/A"}, "B": {"load": f"{store}/in/B"},
                                 "C": "tanh(A @ B) @ B"}, {"C": str(d / "C.npy")}, name="frozen-lshs",
                                storage={"url": store},
                                compute={"workers": 2, "memory_mb": 128, "timeout_seconds": 600}))
        run = FaultRun(job, d)
        if attempt > 0:
            run.signal(run.busy_function(after_cpu=0.1), signal.SIGSTOP)
        code, _, err, stats = run.finish(timeout=120)
        assert code == 0, err
        assert_close(np.load(d / "C.npy"), want)
        seconds.append(run.seconds)
        backups.append(stats["backups"])
        if attempt > 0 and stats["backups"] >= 1:
            break
    # A process seen busy may finish the job's last invocation before the signal lands:
    # within three tries one must have been frozen mid-invocation.
    assert max(backups[1:]) >= 1, backups
    # The function timeout is 600 s: a run that waited for the frozen invocation takes it.
    assert stats["backups"] >= 1 and seconds[-1] < 60, (seconds, backups)


# A function process that really goes over its memory: it takes an invocation, then fills
# twice AWS_LAMBDA_FUNCTION_MEMORY_SIZE, touching every page.
OVER_MEMORY = """
import os, time, urllib.request
api = os.environ["AWS_LAMBDA_RUNTIME_API"]
urllib.request.urlopen(f"http://{api}/2018-06-01/runtime/invocation/next").read()
b = bytearray(2 * int(os.environ["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"]) << 20)
for i in range(0, len(b), 4096):
    b[i] = 1
time.sleep(60)
"""


def test_a_function_over_memory_is_out_of_memory_and_not_retried(tmp_path):
    script = tmp_path / "over_memory.py"
    script.write_text(OVER_MEMORY)
    job, _ = matmul_job(tmp_path, "oom", compute={"memory_mb": 256})
    run = FaultRun(job, tmp_path, env={"NUMS_CLOUD_FUNCTION": f"{sys.executable} {script}"})
    code, _, err, _ = run.finish(timeout=60)
    assert code != 0
    assert "Runtime.OutOfMemory" in err and "memory_mb = 256" in err, err
    assert "after 1 attempt:" in err, err
    assert "hint: a batch needs more than memory_mb = 256" in err, err


def test_a_killed_driver_takes_its_function_processes_along(tmp_path):
    """SIGKILL of the driver mid-job: its function processes die with it (no orphan keeps
    computing and writing for a run that is gone)."""
    job, _ = matmul_job(tmp_path, "driverkill")
    run = FaultRun(job, tmp_path)
    run.busy_function()
    pids = run.function_pids()
    assert pids
    run.proc.kill()
    run.proc.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.05)
    left = [p for p in pids if Path(f"/proc/{p}").exists() and b"function" in cmdline(p)]
    assert not left, f"function processes outlived their driver: {left}"
