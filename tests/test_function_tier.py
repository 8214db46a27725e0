"""Issue 42, item 2: local function processes keep the blocks they read and wrote in memory
across invocations, and LSHS sends the work over those blocks to the process that holds
them (slot affinity). Computes are forced onto the backend (``in_process_mb=0``, no tier in
this process); the session's counts say what the functions read from the store and what
they read from their own memory. Results are checked against NumPy."""
import os

import numpy as np

import nums_cloud
import nums_cloud.numpy as nps


def init(path, **kw):
    kw = {"workers": 2, "memory_mb": 512, "progress": False, "in_process_mb": 0,
          "memory_tier_mb": 0, **kw}
    return nums_cloud.init(storage=f"file://{path / 'store'}", **kw)


def delta(s, f):
    c0 = s.counts()
    v = f()
    c1 = s.counts()
    return v, {k: c1[k] - c0[k] for k in c1}


def test_a_second_pass_reads_the_function_processes_memory(tmp_path):
    s = init(tmp_path)
    a = np.random.default_rng(3).standard_normal((200_000, 20))  # 32 MB, 16 blocks
    x = nums_cloud.persist(nps.array(a).block(12_500, 20) * 2.0)
    delta(s, lambda: x.sum(axis=0).get())  # the processes meet every block once
    for _ in range(2):
        v, d = delta(s, lambda: (x.sum(axis=0) / x.shape[0]).get())
        np.testing.assert_allclose(v, 2 * a.mean(axis=0))
        # Every block of x from a function process's memory: none from the store.
        assert d["memory_hits"] >= 16 and d["memory_bytes_read"] >= 32_000_000, d
        assert d["bytes_read"] < 1_000_000, d
    s.close()


def test_a_rewritten_or_evicted_block_is_read_back(tmp_path):
    s = init(tmp_path)
    store = tmp_path / "store"
    a = np.random.default_rng(4).standard_normal((40_000, 10))  # 4 blocks of 800 kB
    x = nums_cloud.persist(nps.array(a).block(10_000, 10) + 0.0)
    chunks = sorted(os.path.join(d, f) for d, _, fs in os.walk(store) for f in fs
                    if "/out/" in d and "/c/" in os.path.join(d, f))
    assert [c.rsplit("/c/", 1)[1] for c in chunks] == ["0/0", "1/0", "2/0", "3/0"], chunks
    np.testing.assert_allclose(x.sum(axis=0).get(), a.sum(axis=0))
    _, d = delta(s, lambda: x.sum(axis=0).get())
    assert d["memory_hits"] >= 4 and d["bytes_read"] < 10_000, d
    # Another writer puts block 1's bytes in block 0's chunk: the process that holds the
    # old block 0 reads the new one from the store, never the one it kept.
    with open(chunks[1], "rb") as f:
        new = f.read()
    with open(chunks[0], "wb") as f:
        f.write(new)
    want = a.sum(axis=0) - a[:10_000].sum(axis=0) + a[10_000:20_000].sum(axis=0)
    v, d = delta(s, lambda: x.sum(axis=0).get())
    np.testing.assert_allclose(v, want)
    assert d["memory_hits"] >= 3 and d["bytes_read"] >= 700_000, d
    s.close()
    # A tier of no share (as before it existed): every block from the store, same values.
    s2 = init(tmp_path, function_tier_percent=0)
    z = nums_cloud.persist(nps.array(a).block(10_000, 10) * 1.0)
    for _ in range(2):
        v, d = delta(s2, lambda: z.sum(axis=0).get())
        np.testing.assert_allclose(v, a.sum(axis=0))
        assert d["memory_hits"] == 0 and d["bytes_read"] >= 3_000_000, d
    s2.close()


def test_blocks_evicted_for_a_smaller_share_are_read_back(tmp_path):
    # 64 MB in blocks of 4 MB against tiers of 5% of what each batch leaves (~20 MB):
    # most blocks are evicted between passes and read back, the values always NumPy's.
    s = init(tmp_path, function_tier_percent=5)
    a = np.random.default_rng(5).standard_normal((400_000, 20))
    x = nums_cloud.persist(nps.array(a).block(25_000, 20) - 1.0)
    for _ in range(3):
        v, d = delta(s, lambda: x.max(axis=0).get())
        np.testing.assert_array_equal(v, (a - 1.0).max(axis=0))
        assert d["bytes_read"] >= 30_000_000, d
    s.close()
