"""NumPy's random names (issue 26, item 8): `random.default_rng(seed).<method>(...)` and
NumS's `random.rand/randn/randint/random_sample`. Values are not NumPy's bit streams, so
each case is checked against NumPy's own draws of the same call: dtype and shape exactly,
mean and standard deviation within sampling error, the range of values; and two block
shapes must give equal arrays (each element comes from (seed, index) alone)."""
import numpy as np

from nums import job_text, run

N = (400, 500)
R = "random.default_rng(7)."
# (expression, NumPy's call on a Generator `g` of the same distribution)
CASES = [
    (R + "standard_normal((400, 500))", lambda g: g.standard_normal(N)),
    (R + "normal(2, 3, (400, 500))", lambda g: g.normal(2, 3, N)),
    (R + "lognormal(0, 0.5, (400, 500))", lambda g: g.lognormal(0, 0.5, N)),
    (R + "uniform(-1, 4, (400, 500))", lambda g: g.uniform(-1, 4, N)),
    (R + "random((400, 500))", lambda g: g.random(N)),
    (R + "random((400, 500), dtype='float32')", lambda g: g.random(N, dtype="float32")),
    (R + "integers(0, 10, (400, 500))", lambda g: g.integers(0, 10, N)),
    (R + "integers(-5, 5, (400, 500), dtype='int8', endpoint=True)",
     lambda g: g.integers(-5, 5, N, dtype="int8", endpoint=True)),
    (R + "exponential(2.0, (400, 500))", lambda g: g.exponential(2.0, N)),
    (R + "standard_exponential((400, 500))", lambda g: g.standard_exponential(N)),
    (R + "gamma(0.5, 2.0, (400, 500))", lambda g: g.gamma(0.5, 2.0, N)),
    (R + "standard_gamma(3.0, (400, 500))", lambda g: g.standard_gamma(3.0, N)),
    (R + "beta(2.0, 5.0, (400, 500))", lambda g: g.beta(2.0, 5.0, N)),
    (R + "chisquare(3, (400, 500))", lambda g: g.chisquare(3, N)),
    (R + "poisson(3.5, (400, 500))", lambda g: g.poisson(3.5, N)),
    (R + "poisson(1000.0, (400, 500))", lambda g: g.poisson(1000.0, N)),
    (R + "binomial(20, 0.3, (400, 500))", lambda g: g.binomial(20, 0.3, N)),
    (R + "binomial(100000, 0.5, (400, 500))", lambda g: g.binomial(100000, 0.5, N)),
    (R + "choice(10, (400, 500))", lambda g: g.choice(10, N)),
    ("random.rand(400, 500, seed=3)", lambda g: np.random.rand(*N)),
    ("random.randn(400, 500, seed=3)", lambda g: np.random.randn(*N)),
    ("random.randint(0, 7, (400, 500), seed=3)", lambda g: np.random.randint(0, 7, N)),
    ("random.random_sample((400, 500), seed=3)", lambda g: np.random.random_sample(N)),
    ("np.random.default_rng(seed=9).normal(size=(400, 500))", lambda g: g.normal(size=N)),
]
# Exact properties: a permutation holds each value once, a choice without replacement
# too, a shuffled array the same values.
EXACT = [
    R + "permutation(100000)",
    R + "permutation(arange(30.0).reshape(10, 3))",
    R + "choice(1000, 500, replace=False)",
    R + "choice(arange(20) * 2, 7)",
    R + "permuted(arange(24).reshape(4, 6))",
]


def _run(tmp_path, name, block, exprs):
    d = tmp_path / name
    d.mkdir()
    arrays, outputs = {}, {}
    for i, expr in enumerate(exprs):
        arrays[f"r{i}"] = {"expr": expr, "block": block} if block and "(400, 500)" in expr else expr
        outputs[f"r{i}"] = str(d / f"r{i}.npy")
    job = d / "job.toml"
    job.write_text(job_text(arrays, outputs, storage={"url": f"file://{d / 'store'}"}))
    run(job)
    return [np.load(d / f"r{i}.npy") for i in range(len(exprs))]


def test_distributions_match_numpys(tmp_path):
    exprs = [c[0] for c in CASES]
    got = _run(tmp_path, "a", [97, 130], exprs)
    other = _run(tmp_path, "b", [400, 37], exprs)
    failures = []
    for (expr, numpy_call), a, b in zip(CASES, got, other):
        want = np.asarray(numpy_call(np.random.default_rng(0)))
        n = want.size
        sd = float(want.astype(np.float64).std())
        checks = {
            "shape": a.shape == want.shape,
            "dtype": a.dtype == want.dtype,
            "blocks": np.array_equal(a, b),
            # Means within 5 standard errors of each other; spreads within 2%.
            "mean": abs(a.astype(np.float64).mean() - want.astype(np.float64).mean()) < 5 * 1.42 * sd / np.sqrt(n) + 1e-12,
            "std": abs(a.astype(np.float64).std() - sd) < 0.02 * sd + 1e-12,
            "range": a.min() >= want.min() - 6 * sd and a.max() <= want.max() + 6 * sd,
        }
        if any(f in expr for f in ("integers", "choice", "randint")):
            checks["values"] = set(np.unique(a)) == set(np.unique(want))
        if "uniform" in expr or "random(" in expr or "rand(" in expr or "random_sample" in expr:
            lo, hi = (-1, 4) if "uniform" in expr else (0, 1)
            checks["range"] = a.min() >= lo and a.max() < hi
        bad = [k for k, ok in checks.items() if not ok]
        if bad:
            failures.append(f"{expr}: {bad} (mean {a.mean():.4f} vs {want.mean():.4f}, std {a.std():.4f} vs {sd:.4f}, "
                            f"dtype {a.dtype} vs {want.dtype})")
    assert not failures, "\n".join(failures)


def test_permutations_and_choices(tmp_path):
    perm, rows, nodup, picks, shuffled = _run(tmp_path, "p", None, EXACT)
    assert perm.dtype == np.int64 and np.array_equal(np.sort(perm), np.arange(100000))
    assert not np.array_equal(perm, np.arange(100000))
    x = np.arange(30.0).reshape(10, 3)
    assert rows.shape == (10, 3) and np.array_equal(rows[np.argsort(rows[:, 0])], x)
    assert nodup.shape == (500,) and len(np.unique(nodup)) == 500 and nodup.min() >= 0 and nodup.max() < 1000
    assert picks.shape == (7,) and set(picks) <= set(range(0, 40, 2))
    assert shuffled.shape == (4, 6) and np.array_equal(np.sort(shuffled.ravel()), np.arange(24))
    # Deterministic: the same job gives the same draws.
    again = _run(tmp_path, "q", None, EXACT[:1])[0]
    assert np.array_equal(again, perm)


def test_seedless_generators_and_bad_calls_are_refused(tmp_path):
    import subprocess

    from nums import BIN
    for expr, msg in [
        ("random.default_rng().normal(size=3)", "default_rng takes one seed"),
        ("random.default_rng(1).frobnicate(3)", "a Generator has no method frobnicate()"),
        ("random.default_rng(1)", "used through its methods"),
        ("random.default_rng(1).binomial(5, 1.5, 3)", "p must be in [0, 1]"),
        ("random.default_rng(1).choice(3, 5, replace=False)", "larger sample than population"),
    ]:
        job = tmp_path / "job.toml"
        job.write_text(job_text({"r": expr}, {"r": str(tmp_path / "r.npy")}, storage={"url": f"file://{tmp_path}/s"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode != 0 and msg in p.stderr, (expr, p.stderr)
