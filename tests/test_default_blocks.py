"""Default blocks (no `block` given) co-partition the arrays a job uses together: X and y
of a regression get the same row blocks, so that a later job reads them in place without
re-blocking; the operands of `A @ B` get compatible blocks along the contracted axis."""
import json
import subprocess

import numpy as np

from nums import BIN, assert_close, job_text, run


def plan_json(job):
    p = subprocess.run([BIN, "plan", "--json", str(job)], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return {s["scheduler"]: s for s in json.loads(p.stdout)["schedulers"]}


def test_newton_step_on_default_blocked_inputs_reads_them_once(tmp_path):
    # With memory_mb = 128 a default block is at most 8 MiB: X (200,000 x 32) alone would
    # be cut in 7 blocks of 32,768 rows and y alone in 2 of 100,000.
    rng = np.random.default_rng(0)
    X = rng.standard_normal((200_000, 32))
    y = (rng.random(200_000) < 0.5).astype(np.float64)
    w = rng.standard_normal(32) * 0.1
    for name, a in [("X", X), ("y", y), ("w", w)]:
        np.save(tmp_path / f"{name}.npy", a)
    job = tmp_path / "job.toml"
    job.write_text(job_text(
        {"X": {"load": str(tmp_path / "X.npy")}, "y": {"load": str(tmp_path / "y.npy")},
         "w": {"load": str(tmp_path / "w.npy")},
         "mu": "1 / (1 + exp(-(X @ w)))", "g": "X.T @ (mu - y)",
         "H": "X.T @ (X * (mu * (1 - mu))[:, None])"},
        {"g": str(tmp_path / "g.npy"), "H": str(tmp_path / "H.npy")},
        name="newton", storage={"url": f"file://{tmp_path / 'store'}"}, compute={"memory_mb": 128}))
    # The first run imports X and y (in the blocks the defaults give them) and computes.
    run(job)
    mu = 1 / (1 + np.exp(-(X @ w)))
    assert_close(np.load(tmp_path / "g.npy"), X.T @ (mu - y))
    assert_close(np.load(tmp_path / "H.npy"), X.T @ (X * (mu * (1 - mu))[:, None]))
    # A later run reads them in place: X and y in the same row blocks, read once.
    lshs = plan_json(job)["lshs"]
    inputs = X.nbytes + y.nbytes + w.nbytes
    assert lshs["store_bytes_read"] <= 1.05 * inputs, (lshs["store_bytes_read"], inputs)


def test_matmul_of_default_blocked_operands_does_not_re_block(tmp_path):
    # 4096² float64 arrays in their default blocks: A's column blocks are B's row blocks,
    # so no invocation re-blocks B for the others to wait on.
    job = tmp_path / "job.toml"
    job.write_text(job_text(
        {"A": {"random": "normal", "shape": [4096, 4096], "seed": 1},
         "B": {"random": "normal", "shape": [4096, 4096], "seed": 2}, "C": "A @ B"},
        {"C": str(tmp_path / "C.npy")}, name="mm", storage={"url": f"file://{tmp_path / 'store'}"},
        compute={"memory_mb": 2048}))
    plans = plan_json(job)
    # Every block of A and B is made once and read by the products: bytes written are A, B
    # (the blocks read by the other slot) and C, nothing re-blocked.
    lshs = plans["lshs"]
    ab = 2 * 4096 * 4096 * 8
    assert lshs["store_bytes_written"] <= 1.05 * (ab + ab // 2), lshs["store_bytes_written"]
    assert lshs["projected_wall_seconds"] <= plans["naive"]["projected_wall_seconds"] * (1 + 1e-9)
