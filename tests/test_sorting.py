"""Sorting past one invocation (the sample sort) and the Array API's descending sorts,
against NumPy: the real binary on local function processes, every invocation within
memory_mb (the functions' measured peaks)."""
import json

import numpy as np

from nums import job_text, run

MEMORY_MB = 128
# Past what one task sorts within half of 128 MB (about 0.7M float64): sample-sorted.
N = 1_500_000


def _flip_argsort(x):
    """The Array API's stable descending argsort, as array_api_strict computes it."""
    return len(x) - 1 - np.flip(np.argsort(np.flip(x), kind="stable"))


def test_a_sort_past_one_invocation_matches_numpy_within_memory(tmp_path):
    rng = np.random.default_rng(26)
    x = rng.normal(size=N)
    x[::97] = np.nan
    x[5::101] = 0.5  # ties across blocks and partitions
    k = rng.integers(0, 40, size=N)  # few values: partitions split ties by position
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "k.npy", k)
    cases = {
        "s": ("sort(x)", np.sort(x)),
        "a": ("argsort(k)", np.argsort(k, kind="stable")),
        "d": ("sort(k, descending=True)", np.sort(k)[::-1]),
        "ad": ("argsort(x, descending=True)", _flip_argsort(x)),
        "m": ("median(k)", np.median(k)),
        "p": ("nanpercentile(x, (5, 50, 95))", np.nanpercentile(x, (5, 50, 95))),
        "u": ("unique(k, return_counts=True)[1]", np.unique(k, return_counts=True)[1]),
    }
    arrays = {"x": {"load": str(tmp_path / "x.npy")}, "k": {"load": str(tmp_path / "k.npy")}}
    arrays.update({name: expr for name, (expr, _) in cases.items()})
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {n: str(tmp_path / f"{n}.npy") for n in cases},
                            storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"memory_mb": MEMORY_MB}))
    run(job, "--stats", str(tmp_path / "stats.json"))
    for name, (expr, want) in cases.items():
        got = np.load(tmp_path / f"{name}.npy")
        assert got.dtype == np.asarray(want).dtype, expr
        np.testing.assert_array_equal(got, want, err_msg=expr)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert 0 < stats["peak_memory_bytes"] <= stats["memory_limit_bytes"] == MEMORY_MB << 20
    stages = {i["stage"] for i in stats["timeline"]}
    # The samples and the partition sizes were computed before the main stage.
    assert sum(s.startswith("values-") for s in stages) >= 3, stages


def test_descending_sorts_are_the_array_apis(tmp_path):
    rng = np.random.default_rng(3)
    a = rng.integers(0, 4, size=(9, 7)).astype(np.float64)
    a[2, 3] = np.nan
    np.save(tmp_path / "a.npy", a)
    cases = {
        "s0": ("sort(a, axis=0, descending=True)", np.flip(np.sort(a, axis=0), axis=0)),
        "s1": ("sort(a, descending=True)", np.flip(np.sort(a, axis=1), axis=1)),
        "a0": ("argsort(a, axis=None, descending=True)", _flip_argsort(a.ravel())),
        "a1": ("argsort(a, axis=1, descending=True, stable=True)",
               np.stack([_flip_argsort(r) for r in a])),
    }
    arrays = {"a": {"load": str(tmp_path / "a.npy"), "block": [4, 3]}}
    arrays.update({name: expr for name, (expr, _) in cases.items()})
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {n: str(tmp_path / f"{n}.npy") for n in cases},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    for name, (expr, want) in cases.items():
        np.testing.assert_array_equal(np.load(tmp_path / f"{name}.npy"), want, err_msg=expr)
