"""Re-blocking bounded by memory: time-contiguous blocks to space-contiguous ones (every
target block overlaps every source block) go through an intermediate grid, so no task
reads more than a share of memory_mb; the values are NumPy's."""
import json
import subprocess

import numpy as np
from nums import BIN, job_text, run

import nums_cloud
import nums_cloud.numpy as nps


def test_time_to_space_reblocking_runs_within_memory_and_matches_numpy(tmp_path):
    # 4096 x 48 x 48 float64 (75 MB): a direct re-blocking task would read all of it, over
    # memory_mb = 128; through the intermediate grid each task reads a few MB.
    a = np.random.default_rng(3).standard_normal((4096, 48, 48))
    np.save(tmp_path / "a.npy", a)
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2, memory_mb=128,
                        in_process_mb=0, progress=False)
    try:
        x = nps.load(str(tmp_path / "a.npy")).block(32, 48, 48)
        y = x.block(4096, 6, 6)
        assert y.block_shape == (4096, 6, 6)
        got = (y * 2).get()
        np.testing.assert_array_equal(got, a * 2)
        # The same along a ragged grid (no side divides the other), summed per column.
        z = x.block(1000, 7, 5).sum(axis=0).get()
        np.testing.assert_allclose(z, a.sum(axis=0), rtol=1e-12, atol=1e-9)
    finally:
        s.close()


def test_a_job_reblocks_its_input_within_memory(tmp_path):
    a = np.arange(4096 * 48 * 48, dtype=np.float64).reshape(4096, 48, 48)
    np.save(tmp_path / "a.npy", a)
    job = tmp_path / "job.toml"
    job.write_text(job_text({"A": {"load": "a.npy", "block": [32, 48, 48]},
                             "B": {"expr": "A + 1", "block": [4096, 6, 6]}},
                            {"B": "b.npy"}, name="reblock", compute={"memory_mb": 128}))
    plan = json.loads(subprocess.run([BIN, "plan", "--json", str(job)], capture_output=True,
                                     text=True, check=True, cwd=tmp_path).stdout)
    # A direct task would hold the whole input (75 MB) at once: every projected peak is
    # below that, and within memory_mb.
    for s in plan["schedulers"]:
        assert 0 < s["projected_peak_memory_bytes"] < a.nbytes, s
        assert s["projected_peak_memory_bytes"] <= s["memory_limit_bytes"], s
    run(job)
    np.testing.assert_array_equal(np.load(tmp_path / "b.npy"), a + 1)
