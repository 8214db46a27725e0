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


# Lanes past what one task sorts within 128 MB (about 0.7M float64, fewer for an argsort):
# each lane of a 2-D or 3-D array is sample-sorted on its own.
ROWS = 800_000


def _flip_argsort_along(x, axis):
    """The Array API's stable descending argsort along `axis`."""
    n = x.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)


def _assert_partitioned(got, x, kth, perm=None):
    """`got` is a partition of `x` along axis 0 at each of `kth` (`perm`: the positions of
    an argpartition, each column's a permutation)."""
    want = np.sort(x, axis=0)
    # The same values in each column, NaNs and all.
    np.testing.assert_array_equal(np.sort(got, axis=0), want)
    if perm is not None:
        np.testing.assert_array_equal(np.sort(perm, axis=0),
                                      np.broadcast_to(np.arange(len(x))[:, None], perm.shape))
    for k in kth:
        np.testing.assert_array_equal(got[k], want[k])
        # NaN sorts last: before kth nothing compares greater, after it nothing less.
        assert not (got[:k] > got[k]).any() and not (got[k + 1:] < got[k]).any()
        assert not np.isnan(got[:k][:, ~np.isnan(want[k])]).any()
        if np.isnan(want[k]).any():
            assert np.isnan(got[k + 1:][:, np.isnan(want[k])]).all()


def _run_cases(tmp_path, arrays, cases):
    """Runs `cases` (name: (expression, NumPy's result, or a check of the result)) over
    the .npy `arrays` within MEMORY_MB; asserts each result (dtype, NaNs and all) and
    returns the run's stats."""
    for name, a in arrays.items():
        np.save(tmp_path / f"{name}.npy", a)
    defs = {name: {"load": str(tmp_path / f"{name}.npy")} for name in arrays}
    defs.update({name: expr for name, (expr, _) in cases.items()})
    job = tmp_path / "job.toml"
    job.write_text(job_text(defs, {n: str(tmp_path / f"out_{n}.npy") for n in cases},
                            storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"memory_mb": MEMORY_MB}))
    run(job, "--stats", str(tmp_path / "stats.json"))
    for name, (expr, want) in cases.items():
        got = np.load(tmp_path / f"out_{name}.npy")
        if callable(want):
            want(got)
            continue
        want = np.asarray(want)
        assert got.dtype == want.dtype, expr
        np.testing.assert_array_equal(got, want, err_msg=expr)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert 0 < stats["peak_memory_bytes"] <= stats["memory_limit_bytes"] == MEMORY_MB << 20
    return stats


def _value_stages(stats):
    return {i["stage"] for i in stats["timeline"] if i["stage"].startswith("values-")}


def test_sorts_along_axis_0_of_long_columns_match_numpy(tmp_path):
    rng = np.random.default_rng(41)
    x = rng.normal(size=(ROWS, 3))
    x[::97, 1] = np.nan
    x[5::101, 0] = 0.5  # ties across blocks and partitions
    k = rng.integers(0, 40, size=(ROWS, 2))  # few values: partitions split ties by position
    cases = {
        "s": ("sort(x, axis=0)", np.sort(x, axis=0)),
        # The sample sort's key is (value, position): stable, as NumPy's stable argsort.
        "a": ("argsort(k, axis=0)", np.argsort(k, axis=0, kind="stable")),
        "an": ("argsort(x, axis=0)", np.argsort(x, axis=0, kind="stable")),
        "d": ("sort(k, axis=0, descending=True)", np.flip(np.sort(k, axis=0), axis=0)),
        "ad": ("argsort(x, axis=0, descending=True)", _flip_argsort_along(x, 0)),
        # NumPy's partition leaves the order on either side of kth unspecified: any
        # partition of the column's values (here a full sort) is one.
        "p": ("partition(x, (7, -1000), axis=0)",
              lambda got: _assert_partitioned(got, x, (7, ROWS - 1000))),
        "ap": ("argpartition(k, 400_000, axis=0)",
               lambda got: _assert_partitioned(np.take_along_axis(k, got, axis=0), k,
                                               (400_000,), got)),
    }
    stats = _run_cases(tmp_path, {"x": x, "k": k}, cases)
    # Sample-sorted (not whole lanes): the samples of each array's lanes (one stage for
    # all of them), then each sort's partition sizes.
    assert len(_value_stages(stats)) == 2 + len(cases), _value_stages(stats)


def test_quantiles_along_axis_0_of_long_columns_match_numpy(tmp_path):
    rng = np.random.default_rng(42)
    x = rng.normal(size=(ROWS, 3))
    x[::89, 1] = np.nan
    x[:, 2] = np.nan
    x[ROWS // 3, 2] = 7.0  # one number among NaNs
    k = rng.integers(-20, 20, size=(ROWS, 2))
    cases = {
        "m": ("median(x, axis=0)", np.median(x, axis=0)),
        "nm": ("nanmedian(x, axis=0, keepdims=True)", np.nanmedian(x, axis=0, keepdims=True)),
        "p": ("percentile(x, (5, 50, 95), axis=0)", np.percentile(x, (5, 50, 95), axis=0)),
        "nq": ("nanquantile(x, 0.3, axis=0, method='hazen')",
               np.nanquantile(x, 0.3, axis=0, method="hazen")),
        "mk": ("median(k, axis=0)", np.median(k, axis=0)),
    }
    for method in ("inverted_cdf", "averaged_inverted_cdf", "midpoint", "nearest"):
        cases[f"q_{method}"] = (f"quantile(k, (0.1, 0.333, 0.9), axis=0, method='{method}')",
                                np.quantile(k, (0.1, 0.333, 0.9), axis=0, method=method))
    stats = _run_cases(tmp_path, {"x": x, "k": k}, cases)
    # Each array's samples, each quantile's partition sizes, and the numbers in each lane
    # of the two NaN-skipping ones (a stage each, for all lanes).
    assert len(_value_stages(stats)) == 2 + len(cases) + 2, _value_stages(stats)


def test_sorts_and_quantiles_along_the_middle_axis_of_a_3d_array_match_numpy(tmp_path):
    # y is made in the job (ties: eighths, -0.0 among the zeros; NaNs) and written out, the
    # answers computed from it: a 3-D .npy input of this size does not import within
    # 128 MB (a limit of the .npy reader, not of the sort).
    shape = [2, ROWS, 2]
    defs = {
        "r": {"random": "normal", "shape": shape, "seed": 5},
        "y": "where(r > 2.2, np.nan, round(r * 8) / 8)",
        "s": "sort(y, axis=1)",
        "a": "argsort(y, axis=1)",
        "q": "nanquantile(y, (0.25, 0.5), axis=1, method='weibull')",
    }
    outs = ("y", "s", "a", "q")
    job = tmp_path / "job.toml"
    job.write_text(job_text(defs, {n: str(tmp_path / f"out_{n}.npy") for n in outs},
                            storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"memory_mb": MEMORY_MB}))
    run(job, "--stats", str(tmp_path / "stats.json"))
    got = {n: np.load(tmp_path / f"out_{n}.npy") for n in outs}
    y = got["y"]
    assert np.isnan(y).any() and len(np.unique(y)) < 200
    np.testing.assert_array_equal(got["s"], np.sort(y, axis=1))
    np.testing.assert_array_equal(got["a"], np.argsort(y, axis=1, kind="stable"))
    want = np.nanquantile(y, (0.25, 0.5), axis=1, method="weibull")
    assert got["q"].dtype == want.dtype
    np.testing.assert_array_equal(got["q"], want)
    stats = json.loads((tmp_path / "stats.json").read_text())
    assert 0 < stats["peak_memory_bytes"] <= stats["memory_limit_bytes"] == MEMORY_MB << 20
    # The lanes' samples, each sort's partition sizes, the numbers in each lane.
    assert len(_value_stages(stats)) == 1 + 3 + 1, _value_stages(stats)


def test_a_sessions_median_along_axis_0_of_long_columns_matches_numpy(tmp_path):
    """The Python package's nps.median(X, axis=0) (the issue's 20M x 16, scaled to 128 MB),
    its stages computed as the session evaluates."""
    import nums_cloud
    import nums_cloud.numpy as nps

    rng = np.random.default_rng(44)
    x = rng.normal(size=(ROWS, 4))
    x[::31, 3] = np.nan
    s = nums_cloud.init(storage=f"file://{tmp_path / 'store'}", workers=2,
                        memory_mb=MEMORY_MB, progress=False)
    try:
        X = nps.array(x)
        t = s.counts()["tasks"]
        np.testing.assert_array_equal(nps.median(X, axis=0).get(), np.median(x, axis=0))
        # Sample-sorted column by column (hundreds of tasks over three stages), where
        # columns a task sorts whole take about eight.
        assert s.counts()["tasks"] - t > 100
        np.testing.assert_array_equal(nps.nanpercentile(X, [1, 99], axis=0).get(),
                                      np.nanpercentile(x, [1, 99], axis=0))
        np.testing.assert_array_equal(nps.argsort(X[:, 1:3], axis=0).get(),
                                      np.argsort(x[:, 1:3], axis=0, kind="stable"))
    finally:
        s.close()


def test_unique_by_hash_count_and_by_sort_matches_numpy(tmp_path):
    """unique's values and counts, counted by hashing where the values are few (up to
    1,024: a table per block, merged in block order) and sorted where they are more, in
    every kind of dtype, over ragged and many blocks, with NaNs, signed zeros, one
    element and none; then from Python (the caller's process)."""
    rng = np.random.default_rng(42)
    f = rng.integers(-3, 4, size=10_007).astype(np.float64)
    f[::97] = np.nan
    f[5::89] = -0.0
    f[7::101] = np.inf
    f32 = f.astype(np.float32)
    inputs = {
        "f": (f, [1000]),  # 11 blocks, the last ragged
        "f32": (f32, [777]),
        "i8": (rng.integers(-128, 128, size=5000).astype(np.int8), [333]),
        "u64": (np.array([2**64 - 1, 0, 7, 2**63, 2**64 - 1, 7], np.uint64), [4]),
        "b": (rng.random(1001) < 0.3, [100]),
        "one": (np.array([2.5]), [1]),
        "none": (np.zeros(0), [1]),
        "many": (rng.integers(0, 5000, size=20_000), [3000]),  # past the table: sorted
        "x2d": (f[:10_000].reshape(100, 100), [30, 70]),
    }
    arrays, cases = {}, {}
    for name, (a, block) in inputs.items():
        np.save(tmp_path / f"{name}.npy", a)
        arrays[name] = {"load": str(tmp_path / f"{name}.npy"), "block": block}
        v, c = np.unique(a, return_counts=True)
        cases[f"{name}_v"] = (f"unique({name})", v)
        cases[f"{name}_c"] = (f"unique({name}, return_counts=True)[1]", c)
    # The Array API's unique: each NaN its own value (then sorted, not counted by hash).
    ac = np.unique_counts(f)
    cases["f_ac"] = ("unique_counts(f).counts", ac.counts)
    cases["f_av"] = ("unique_values(f)", np.sort(np.unique_values(f)))
    arrays.update({n: expr for n, (expr, _) in cases.items()})
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {n: str(tmp_path / f"out_{n}.npy") for n in cases},
                            storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"memory_mb": MEMORY_MB}))
    run(job)
    for name, (expr, want) in cases.items():
        got = np.load(tmp_path / f"out_{name}.npy")
        if name == "f_av":
            got = np.sort(got)
        assert got.dtype == want.dtype, expr
        np.testing.assert_array_equal(got, want, err_msg=expr)

    import nums_cloud
    import nums_cloud.numpy as nps

    s = nums_cloud.init(storage=f"file://{tmp_path / 'py'}", workers=2, progress=False)
    try:
        for name, (a, _) in inputs.items():
            v, c = nps.unique(nps.array(a), return_counts=True)
            want_v, want_c = np.unique(a, return_counts=True)
            np.testing.assert_array_equal(v.get(), want_v, err_msg=name)
            np.testing.assert_array_equal(c.get(), want_c, err_msg=name)
        # The first zero in data order is the value's (NumPy's sort may keep either).
        z = nps.unique(nps.array(np.array([1.0, -0.0, 0.0, -0.0]))).get()
        assert np.signbit(z[0]) and z[1] == 1.0
    finally:
        s.close()
