"""Models fitted to convergence (logistic by Newton and L-BFGS, linear, ridge, Poisson),
run by the real binary and compared with scikit-learn fitting the same data; bad data and
arguments refused with the array's name and nothing committed."""
import json
import re

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression, PoissonRegressor, Ridge

from nums import job_text, run

N, D = 8011, 5  # ragged: the last row block is short


def data(tmp_path, kind, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(N, D))
    w = rng.normal(size=D)
    z = X @ w * 0.5 + 0.3
    if kind == "logistic":
        y = (rng.uniform(size=N) < 1 / (1 + np.exp(-z))).astype(np.float64)
    elif kind == "poisson":
        y = rng.poisson(np.exp(z * 0.5)).astype(np.float64)
    else:
        y = z + rng.normal(size=N) * 0.1
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    return X, y


def fit(tmp_path, expr, scheduler="lshs", extra=None, check=True, stats=False, args=()):
    arrays = {
        "X": {"load": str(tmp_path / "X.npy"), "block": [2000, D]},
        "y": {"load": str(tmp_path / "y.npy"), "block": [2000]},
        "w": expr,
        **(extra or {}),
    }
    outputs = {"w": "w.npy", **{k: f"{k}.npy" for k in (extra or {})}}
    (tmp_path / "job.toml").write_text(
        job_text(arrays, outputs, name="fit", compute={"scheduler": scheduler, "workers": 2})
    )
    args = [*(["--stats", str(tmp_path / "stats.json")] if stats else []), *map(str, args)]
    p = run(tmp_path / "job.toml", *args, check=check)
    return p


def coef(m):
    return np.r_[np.ravel(m.coef_), np.ravel(m.intercept_)]


@pytest.mark.parametrize("solver,scheduler", [("newton", "lshs"), ("newton", "naive"), ("lbfgs", "lshs")])
def test_logistic_regression_equals_scikit_learn(tmp_path, solver, scheduler):
    X, y = data(tmp_path, "logistic")
    fit(tmp_path, f"logistic_regression(X, y, solver='{solver}', C=0.5, tol=1e-9, max_iter=200)",
        scheduler=scheduler,
        extra={"p": "sigmoid(X @ w[:-1] + w[-1])"}, stats=True)
    want = coef(LogisticRegression(C=0.5, tol=1e-12, max_iter=10000).fit(X, y))
    got = np.load(tmp_path / "w.npy")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # The coefficients feed later expressions of the same job.
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), 1 / (1 + np.exp(-(X @ got[:-1] + got[-1]))),
                               rtol=1e-12)
    fits = json.loads((tmp_path / "stats.json").read_text())["fits"]
    assert len(fits) == 1 and fits[0]["converged"], fits
    assert fits[0]["n_iter"] >= 3 and len(fits[0]["loss"]) == fits[0]["n_iter"] + 1
    # The objective goes down every iteration.
    assert all(b <= a + 1e-12 for a, b in zip(fits[0]["loss"], fits[0]["loss"][1:])), fits[0]["loss"]
    # Nothing of the fit is left in the store but the job's imports (its outputs are files).
    assert sorted(p.name for p in (tmp_path / "nums-data" / "fit").iterdir()) == ["X", "y"]


def test_a_fits_invocations_are_in_stats_and_the_timeline(tmp_path):
    """Every invocation of a fit (each pass; the first checks the labels too) is a --stats
    record of a stage of its own, and the timeline draws it: records and invocations agree."""
    data(tmp_path, "logistic")
    svg = tmp_path / "run.svg"
    fit(tmp_path, "logistic_regression(X, y, solver='newton', tol=1e-8)", stats=True,
        args=["--timeline", svg])
    report = json.loads((tmp_path / "stats.json").read_text())
    tl = report["timeline"]
    assert len(tl) == report["invocations"], (len(tl), report["invocations"])
    assert sum(i["bytes_read"] for i in tl) == report["s3_bytes_read"]
    passes = report["fits"][0]["passes"]
    assert len(passes) >= 3, passes
    stages = {i["stage"] for i in tl}
    assert "main" in stages and not any(s.endswith("-check") for s in stages), stages
    # Stage fit<N>-<pass>-<k> holds pass k's invocations, as the fit's report counts them.
    for k, p in enumerate(passes, 1):
        mine = [i for i in tl if re.fullmatch(rf"fit\d+-newton-{k}", i["stage"])]
        assert len(mine) == p["invocations"] > 0, (k, p, sorted(stages))
        assert sum(i["bytes_read"] for i in mine) == p["bytes_read"]
    drawn = set(re.findall(r"data-stage='([^']+)'", svg.read_text()))
    assert stages <= drawn, stages - drawn


def test_logistic_without_intercept_or_penalty(tmp_path):
    X, y = data(tmp_path, "logistic", seed=1)
    fit(tmp_path, "logistic_regression(X, y, penalty=None, fit_intercept=False, solver='newton', tol=1e-10)")
    want = np.ravel(LogisticRegression(C=np.inf, fit_intercept=False, tol=1e-12, max_iter=10000).fit(X, y).coef_)
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("expr,model", [
    ("linear_regression(X, y)", LinearRegression()),
    ("ridge(X, y, alpha=250.0)", Ridge(alpha=250.0)),
    ("ridge(X, y, alpha=3.0, fit_intercept=False)", Ridge(alpha=3.0, fit_intercept=False)),
])
def test_least_squares_equal_scikit_learn(tmp_path, expr, model):
    X, y = data(tmp_path, "linear")
    fit(tmp_path, expr)
    m = model.fit(X, y)
    want = coef(m) if m.fit_intercept else np.ravel(m.coef_)
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_poisson_regression_equals_scikit_learn(tmp_path, solver):
    X, y = data(tmp_path, "poisson")
    fit(tmp_path, f"poisson_regression(X, y, alpha=0.5, solver='{solver}', tol=1e-9, max_iter=300)")
    want = coef(PoissonRegressor(alpha=0.5, tol=1e-12, max_iter=10000).fit(X, y))
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-5, atol=1e-6)


def test_x_and_y_made_by_the_job_are_fitted_in_place_of_files(tmp_path):
    """X and y computed by the job (random, expressions) are made once for the loop."""
    (tmp_path / "job.toml").write_text(job_text({
        "X": {"random": "normal", "shape": [9000, 4], "seed": 3, "block": [2000, 4]},
        "u": {"random": "uniform", "shape": [9000], "seed": 4, "block": [2000]},
        "wt": {"random": "normal", "shape": [4], "seed": 5},
        "y": "(sigmoid(X @ wt - 0.25) > u).astype('float64')",
        "w": "logistic_regression(X, y, solver='newton', tol=1e-10)",
    }, {"w": "w.npy", "X": "X.npy", "y": "y.npy"}, name="made"))
    run(tmp_path / "job.toml")
    X, y = np.load(tmp_path / "X.npy"), np.load(tmp_path / "y.npy")
    want = coef(LogisticRegression(tol=1e-12, max_iter=10000).fit(X, y))
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_multinomial_logistic_regression_equals_scikit_learn(tmp_path, solver):
    """n_classes=4: scikit-learn's multinomial model of y's class indices 0..3; the result
    has a row [coef..., intercept] per class, which later expressions use (the scores,
    and their softmax: scikit-learn's probabilities)."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D))
    y = np.argmax(X @ rng.normal(size=(D, 4)) + rng.gumbel(size=(N, 4)), axis=1).astype(np.float64)
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    fit(tmp_path, f"logistic_regression(X, y, n_classes=4, solver='{solver}', C=0.5, tol=1e-9)",
        extra={"z": "X @ w[:, :-1].T + w[:, -1]"}, stats=True)
    sk = LogisticRegression(C=0.5, tol=1e-12, max_iter=10000).fit(X, y)
    got = np.load(tmp_path / "w.npy")
    assert got.shape == (4, D + 1)
    np.testing.assert_allclose(got, np.c_[sk.coef_, sk.intercept_], rtol=1e-5, atol=1e-6)
    z = np.load(tmp_path / "z.npy")
    e = np.exp(z - z.max(axis=1, keepdims=True))
    np.testing.assert_allclose(e / e.sum(axis=1, keepdims=True), sk.predict_proba(X), rtol=1e-5,
                               atol=1e-7)
    fits = json.loads((tmp_path / "stats.json").read_text())["fits"]
    assert len(fits) == 1 and fits[0]["converged"], fits


@pytest.mark.parametrize("y,expr,message", [
    (lambda y: np.where(y > 0, 3.0, 0.0), "logistic_regression(X, y, n_classes=3)",
     "labels other than the class indices 0 to 2 (n_classes=3)"),
    (lambda y: np.where(y > 0, 2.0, 0.0), "logistic_regression(X, y)", "labels other than 0 and 1"),
    (lambda y: np.where(np.arange(N) == 7, np.nan, y), "logistic_regression(X, y)",
     "Input y contains NaN."),
    (lambda y: -y - 1, "poisson_regression(X, y)", "negative values"),
])
def test_bad_labels_fail_naming_the_array_and_commit_nothing(tmp_path, y, expr, message):
    X, y0 = data(tmp_path, "logistic")
    np.save(tmp_path / "y.npy", y(y0))
    p = fit(tmp_path, expr, check=False)
    assert p.returncode == 1, p.stderr
    assert "`w`" in p.stderr and message in p.stderr, p.stderr
    assert not (tmp_path / "w.npy").exists()
    assert not (tmp_path / "nums-data" / "fit" / "w").exists()


@pytest.mark.parametrize("expr,bad,message", [
    # NaN before infinity, and both before labels other than 0 and 1: scikit-learn's
    # order and words.
    ("linear_regression(X, y)", [np.inf, np.nan], "Input y contains NaN."),
    ("logistic_regression(X, y, solver='newton')", [np.inf, 2.0],
     "Input y contains infinity or a value too large for dtype('float64')."),
])
def test_nan_and_inf_in_y_are_refused_by_the_first_pass(tmp_path, expr, bad, message):
    """The first pass counts y's NaN and infinities (in its sums' last rows): the fit
    stops there, with no model."""
    X, y0 = data(tmp_path, "logistic")
    y = y0.copy()
    y[[3, 40]] = bad
    np.save(tmp_path / "y.npy", y)
    p = fit(tmp_path, expr, check=False)
    assert p.returncode == 1, p.stderr
    assert "`w`" in p.stderr and message in p.stderr, p.stderr
    assert not (tmp_path / "w.npy").exists()
    assert not (tmp_path / "nums-data" / "fit" / "w").exists()


@pytest.mark.parametrize("expr,message", [
    ("logistic_regression(X[:, 0], y)", "X must be 2-D"),
    ("logistic_regression(X, y[:100])", "y must be 1-D with one value per row of X"),
    ("logistic_regression(X, y, solver='sag')", "solver 'sag' is not supported"),
    ("logistic_regression(X, y, C=0)", "C must be positive"),
    ("ridge(X, y, alpha=-1)", "alpha must be 0 or more"),
    ("logistic_regression(X, y, max_iter=0)", "max_iter must be between 1 and 100000"),
    ("logistic_regression(X, y, n_classes=1)", "n_classes must be between 2 and 1000"),
])
def test_bad_arguments_are_refused_at_check(tmp_path, expr, message):
    data(tmp_path, "logistic")
    (tmp_path / "job.toml").write_text(job_text({
        "X": {"load": str(tmp_path / "X.npy")},
        "y": {"load": str(tmp_path / "y.npy")},
        "w": expr,
    }, {"w": "w.npy"}))
    from nums import BIN
    import subprocess
    p = subprocess.run([BIN, "check", str(tmp_path / "job.toml")], capture_output=True, text=True)
    assert p.returncode == 1 and message in p.stderr and "arrays.w" in p.stderr, p.stderr


def test_a_singular_least_squares_problem_says_so(tmp_path):
    X, y = data(tmp_path, "linear")
    X[:, 1] = X[:, 0]  # linearly dependent columns, no penalty
    np.save(tmp_path / "X.npy", X)
    p = fit(tmp_path, "linear_regression(X, y)", check=False)
    assert p.returncode == 1 and "LinAlgError" in p.stderr and "`w`" in p.stderr, p.stderr


def test_not_converging_within_max_iter_fails_saying_why(tmp_path):
    """A job's fit is its answer only when it met its tol: one that stops at max_iter
    fails the run (it warned and exited 0), with the gradient it reached."""
    data(tmp_path, "logistic")
    p = fit(tmp_path, "logistic_regression(X, y, solver='lbfgs', tol=1e-14, max_iter=2)",
            check=False)
    assert p.returncode == 1 and not (tmp_path / "w.npy").exists(), p.stderr
    assert ("`w`: logistic_regression(solver='lbfgs', C=1) did not converge: it stopped at "
            "max_iter = 2 iterations: the largest gradient is ") in p.stderr, p.stderr
    assert "> tol = 1e-14; raise max_iter, loosen tol or scale X" in p.stderr, p.stderr


def test_a_fit_on_garage_equals_scikit_learn_and_repeats_bit_for_bit(garage, tmp_path):
    """On a real S3 server, with X made by the job and y imported: the same job twice gives
    the same bits."""
    rng = np.random.default_rng(7)
    u = rng.uniform(size=6000)
    np.save(tmp_path / "u.npy", u)
    text = job_text({
        "X": {"random": "normal", "shape": [6000, 4], "seed": 8, "block": [1600, 4]},
        "u": {"load": str(tmp_path / "u.npy"), "block": [1600]},
        "wt": {"random": "normal", "shape": [4], "seed": 9},
        "y": "(sigmoid(X @ wt + 0.2) > u).astype('float64')",
        "w": "logistic_regression(X, y, solver='lbfgs', C=2.0, tol=1e-10, max_iter=500)",
    }, {"w": "w.npy", "X": "X.npy", "y": "y.npy"}, name="s3fit",
        storage={"url": f"s3://{garage.bucket}/models", "endpoint": garage.endpoint})
    (tmp_path / "job.toml").write_text(text)
    p = run(tmp_path / "job.toml", env=garage.env())
    assert "fit          w = logistic_regression(solver='lbfgs', C=2): converged" in p.stdout, p.stdout
    first = np.load(tmp_path / "w.npy")
    X, y = np.load(tmp_path / "X.npy"), np.load(tmp_path / "y.npy")
    want = coef(LogisticRegression(C=2.0, tol=1e-12, max_iter=10000).fit(X, y))
    np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
    run(tmp_path / "job.toml", env=garage.env())
    assert np.load(tmp_path / "w.npy").tobytes() == first.tobytes()


def save(tmp_path, X, y):
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_separable_classes_without_a_penalty_fail_instead_of_converging(tmp_path, solver):
    """Separable classes have no unpenalised optimum: the coefficients grow while the loss
    falls to 0. At scikit-learn's default tol such a fit used to stop with its gradient
    faded and report coefficients of 93 (Newton) or 288 (L-BFGS) as converged."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(N, D))
    save(tmp_path, X, (X @ rng.normal(size=D) + 0.2 > 0).astype(np.float64))
    p = fit(tmp_path, f"logistic_regression(X, y, penalty=None, solver='{solver}')", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "`w`" in p.stderr and "separable" in p.stderr and "give C a finite value" in p.stderr, p.stderr
    assert not (tmp_path / "w.npy").exists()


@pytest.mark.parametrize("label", [0.0, 1.0])
def test_labels_of_one_class_are_refused_as_scikit_learn_refuses_them(tmp_path, label):
    rng = np.random.default_rng(5)
    save(tmp_path, rng.normal(size=(N, D)), np.full(N, label))
    p = fit(tmp_path, "logistic_regression(X, y)", check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert ("This solver needs samples of at least 2 classes in the data, but the data contains only one "
            f"class: {label}") in p.stderr and "`w`" in p.stderr, p.stderr
    assert not (tmp_path / "w.npy").exists()


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
def test_fits_with_an_optimum_and_no_penalty_equal_scikit_learn(tmp_path, solver):
    """Not refused: classes separable but for 6 rows repeated with the other label (no
    hyperplane separates them, the coefficients are large and finite), and Poisson counts
    without a penalty."""
    rng = np.random.default_rng(6)
    X = rng.normal(size=(N, D))
    y = (X @ rng.normal(size=D) > 0).astype(np.float64)
    X, y = np.r_[X, X[:6]], np.r_[y, 1 - y[:6]]
    save(tmp_path, X, y)
    fit(tmp_path, f"logistic_regression(X, y, penalty=None, solver='{solver}', tol=1e-9, max_iter=1000)")
    want = coef(LogisticRegression(C=np.inf, tol=1e-12, max_iter=100000).fit(X, y))
    assert np.abs(want).max() > 10  # large, as near-separable classes make them
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-4, atol=1e-4)
    X, y = data(tmp_path, "poisson", seed=2)
    fit(tmp_path, f"poisson_regression(X, y, alpha=0.0, solver='{solver}', tol=1e-9, max_iter=300)")
    want = coef(PoissonRegressor(alpha=0.0, tol=1e-12, max_iter=10000).fit(X, y))
    np.testing.assert_allclose(np.load(tmp_path / "w.npy"), want, rtol=1e-5, atol=1e-6)
