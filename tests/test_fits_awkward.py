"""Model fits against scikit-learn on awkward data (issue 39, item 6): columns of scales
from 1e-4 to 1e6, collinear and constant columns, imbalanced classes, float32 X, Poisson
targets all 0, and the defaults on nearly separable classes. Each fit gives scikit-learn's
coefficients (its optimum, within what the tolerance allows), or an error that says why;
"converged" means the stated tolerance was met, and a fit that did not meet it warns with
scikit-learn's ConvergenceWarning (Python) or fails (the job language).

Coefficients are compared within a bound derived from the problem, not from one machine's
rounding: a fit stopped where the gradient's largest magnitude is at most tol is, in the
standardized coordinates v = D theta (D = sqrt(diag H), H the Hessian at the optimum), at
most ||Hv^-1|| ||D^-1 g|| <= tol ||1/D|| / lambda_min(Hv) from the optimum (to first
order; doubled for the rest), and the reference fit likewise with its own tol."""
import warnings

import numpy as np
import pytest
from sklearn import linear_model
from sklearn.exceptions import ConvergenceWarning as SkConvergenceWarning

from nums_cloud.models import LogisticRegression, PoissonRegression

from nums import job_text, run


def theta(m):
    return np.r_[np.ravel(m.coef_), np.ravel(m.intercept_)]


def hessian(X, theta, family, l2):
    """The mean objective's Hessian at theta (coefficients, then the intercept)."""
    A = np.column_stack([X, np.ones(len(X))])
    z = A @ theta
    if family == "logistic":
        p = 1 / (1 + np.exp(-z))
        s = p * (1 - p)
    else:
        s = np.exp(z)
    H = (A * s[:, None]).T @ A / len(X)
    H[np.arange(X.shape[1]), np.arange(X.shape[1])] += l2
    return H


def bound(X, ref, family, l2, tol):
    """How far from the optimum (in standardized coordinates, 2-norm) a fit stopped at
    max|gradient| <= tol may be, and D, the scaling."""
    H = hessian(X, ref, family, l2)
    D = np.sqrt(np.diag(H))
    lam = np.linalg.eigvalsh(H / np.outer(D, D)).min()
    return 2 * tol * np.linalg.norm(1 / D) / lam, D


def assert_near_optimum(X, got, ref, family, l2, tol, ref_bound):
    """got (our fit at tol) within its bound of ref (the reference, itself within
    ref_bound of the optimum), in standardized coordinates; returns the distance."""
    b, D = bound(X, ref, family, l2, tol)
    err = np.linalg.norm(D * (got - ref))
    assert err <= b + ref_bound + 1e-9, (err, b, ref_bound, got, ref)
    return err


rng = np.random.default_rng(39)
N = 3000
X0 = rng.normal(size=(N, 4))
Y0 = (X0 @ [1.5, -1.0, 0.6, 0.8] + 0.2 + rng.logistic(size=N) > 0).astype(np.float64)
SCALES = np.array([1e6, 1e-4, 1.0, 1.0])


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_columns_of_scales_1e_minus_4_to_1e6(session, solver):
    """L-BFGS said "converged in 7 iterations" here with the gradient at 0.038 against
    tol=1e-10 and a N(0,1) column's coefficient 1e-12 instead of 0.17; Newton called the
    Hessian singular. Without a penalty the scaled problem is the unscaled one
    reparametrized: its optimum is scikit-learn's fit of the unscaled X, divided by the
    scales. With C=1, scikit-learn's newton-cholesky (invariant to scale) at a tight tol.
    (Its lbfgs, which scipy's ftol stops silently, is 0.0095 off on a N(0, 1) column.)"""
    Xs = X0 * SCALES
    scale = np.r_[SCALES, 1.0]
    sk = linear_model.LogisticRegression(penalty=None, solver="newton-cholesky", tol=1e-12,
                                         max_iter=100).fit(X0, Y0)
    ref = theta(sk) / scale
    m = LogisticRegression(penalty=None, solver=solver, tol=1e-10, max_iter=500).fit(Xs, Y0)
    assert m.converged_
    # The reference's bound in its own coordinates (v is the same in both).
    ref_bound = bound(X0, theta(sk), "logistic", 0.0, 1e-12)[0]
    err = assert_near_optimum(Xs, theta(m), ref, "logistic", 0.0, 1e-10, ref_bound)
    # In the column's own units: the N(0, 1) column's coefficient is sklearn's.
    np.testing.assert_allclose(theta(m) * scale, theta(sk), rtol=1e-6, atol=1e-8)
    assert err < 1e-6
    # (At tol=1e-12 its line search gives up on this X and it finishes with lbfgs.)
    sk = linear_model.LogisticRegression(C=1.0, solver="newton-cholesky", tol=1e-10,
                                         max_iter=100).fit(Xs, Y0)
    m = LogisticRegression(C=1.0, solver=solver, tol=1e-10, max_iter=500).fit(Xs, Y0)
    assert m.converged_
    ref_bound = bound(Xs, theta(sk), "logistic", 1 / N, 1e-10)[0]
    assert_near_optimum(Xs, theta(m), theta(sk), "logistic", 1 / N, 1e-10, ref_bound)


def test_newton_at_the_defaults_gives_scikit_learns_answer(session):
    """Nearly separable classes (8 standard normal columns, labels from a linear model of
    large coefficients plus noise): Newton stopped where the gradient met tol, 1.6% from
    the optimum, where scikit-learn's newton-cholesky (which also asks the Newton
    decrement of the last step) is 0.04% away. The same rule and line search give its
    iterates, so its coefficients; L-BFGS at the defaults is within what tol allows."""
    r = np.random.default_rng(6)
    n = 40_000
    X = r.normal(size=(n, 8))
    y = (X @ (10 * r.normal(size=8)) + 0.5 + r.normal(size=n) > 0).astype(np.float64)
    best = theta(linear_model.LogisticRegression(solver="newton-cholesky", tol=1e-12,
                                                 max_iter=100).fit(X, y))
    sk = theta(linear_model.LogisticRegression(solver="newton-cholesky").fit(X, y))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = LogisticRegression(solver="newton").fit(X, y)
    np.testing.assert_allclose(theta(m), sk, rtol=1e-7, atol=1e-9)
    rel = np.linalg.norm(theta(m) - best) / np.linalg.norm(best)
    sk_rel = np.linalg.norm(sk - best) / np.linalg.norm(best)
    assert rel <= sk_rel * (1 + 1e-6) + 1e-12, (rel, sk_rel)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = LogisticRegression().fit(X, y)
    ref_bound = bound(X, best, "logistic", 1 / n, 1e-12)[0]
    assert_near_optimum(X, theta(m), best, "logistic", 1 / n, 1e-4, ref_bound)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_collinear_and_constant_columns(session, solver):
    """A duplicated column and a constant one beside the intercept: with the penalty,
    scikit-learn's coefficients; without, the minimum is not unique and both solvers say
    so (L-BFGS returned one of the minima, as converged)."""
    X = np.column_stack([X0, X0[:, 0], np.full(N, 3.0)])
    sk = linear_model.LogisticRegression(solver="newton-cholesky", tol=1e-12,
                                         max_iter=100).fit(X, Y0)
    m = LogisticRegression(solver=solver, tol=1e-10, max_iter=500).fit(X, Y0)
    assert m.converged_
    ref_bound = bound(X, theta(sk), "logistic", 1 / N, 1e-12)[0]
    assert_near_optimum(X, theta(m), theta(sk), "logistic", 1 / N, 1e-10, ref_bound)
    for bad in (np.column_stack([X0, X0[:, 0]]), np.column_stack([X0, np.full(N, 3.0)])):
        with pytest.raises(Exception, match="linearly dependent columns"):
            LogisticRegression(penalty=None, solver=solver).fit(bad, Y0)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_imbalanced_classes_and_float32_x(session, solver):
    """3% positive labels; X in float32 (computed in float64, as scikit-learn's fit of
    the same values): scikit-learn's coefficients."""
    r = np.random.default_rng(8)
    X = r.normal(size=(N, 5)).astype(np.float32)
    y = (X @ [1.0, -0.5, 0.3, 0.0, 0.8] - 3.5 + r.logistic(size=N) > 0).astype(np.float64)
    assert 0.01 < y.mean() < 0.06
    X64 = X.astype(np.float64)
    sk = linear_model.LogisticRegression(C=2.0, solver="newton-cholesky", tol=1e-12,
                                         max_iter=100).fit(X64, y)
    m = LogisticRegression(C=2.0, solver=solver, tol=1e-10, max_iter=500).fit(X, y)
    assert m.converged_
    ref_bound = bound(X64, theta(sk), "logistic", 1 / (2.0 * N), 1e-12)[0]
    assert_near_optimum(X64, theta(m), theta(sk), "logistic", 1 / (2.0 * N), 1e-10, ref_bound)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_poisson_targets_all_zero(session, solver):
    """y all 0 has no best fit with an intercept (never penalised): the fit returned an
    intercept of -32 (L-BFGS) or -24 (Newton) with exit 0; now it is refused, saying
    why. Without an intercept the penalized minimum is finite: scikit-learn's."""
    y = np.zeros(N)
    for alpha in (1.0, 0.0):
        with pytest.raises(ValueError, match="no minimum"):
            PoissonRegression(alpha=alpha, solver=solver).fit(X0, y)
    sk = linear_model.PoissonRegressor(alpha=1.0, fit_intercept=False, tol=1e-12,
                                       max_iter=1000).fit(X0, y)
    m = PoissonRegression(alpha=1.0, fit_intercept=False, solver=solver, tol=1e-10).fit(X0, y)
    assert m.converged_
    np.testing.assert_allclose(m.coef_, sk.coef_, atol=1e-8)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_a_fit_that_does_not_meet_tol_warns_and_says_why(session, solver):
    """At max_iter, or stalled (a tol below float64's resolution: the loss no longer
    changes and the gradient wanders; L-BFGS stopped where the loss decreased by less
    than 64 eps and called it converged): scikit-learn's ConvergenceWarning, saying why,
    and converged_ False."""
    with pytest.warns(SkConvergenceWarning, match=r"max_iter = 2 iterations: the largest gradient"):
        m = LogisticRegression(solver=solver, max_iter=2).fit(X0, Y0)
    assert not m.converged_
    with pytest.warns(SkConvergenceWarning, match="stalled"):
        m = LogisticRegression(solver=solver, tol=1e-30, max_iter=1000).fit(X0, Y0)
    assert not m.converged_ and m.n_iter_[0] < 1000


def run_job(tmp_path, expr, X, y):
    np.save(tmp_path / "X.npy", X)
    np.save(tmp_path / "y.npy", y)
    (tmp_path / "job.toml").write_text(job_text({
        "X": {"load": str(tmp_path / "X.npy"), "block": [1000, X.shape[1]]},
        "y": {"load": str(tmp_path / "y.npy"), "block": [1000]},
        "w": expr,
    }, {"w": str(tmp_path / "w.npy")}, name="awkward"))
    return run(tmp_path / "job.toml", check=False)


def test_the_job_language_on_awkward_data(tmp_path):
    """The same rules in a job: badly scaled columns fitted by L-BFGS (its first pass
    evaluates the Hessian for the scaling) to the optimum; Poisson targets all 0 and a fit
    that does not meet its tol fail the run, saying why (exit 1, nothing written)."""
    Xs = X0 * SCALES
    scale = np.r_[SCALES, 1.0]
    p = run_job(tmp_path, "logistic_regression(X, y, penalty=None, tol=1e-10, max_iter=500)",
                Xs, Y0)
    assert p.returncode == 0, p.stderr
    sk = linear_model.LogisticRegression(penalty=None, solver="newton-cholesky", tol=1e-12,
                                         max_iter=100).fit(X0, Y0)
    got = np.load(tmp_path / "w.npy")
    np.testing.assert_allclose(got * scale, theta(sk), rtol=1e-6, atol=1e-8)
    (tmp_path / "w.npy").unlink()
    p = run_job(tmp_path, "poisson_regression(X, y)", X0, np.zeros(N))
    assert p.returncode == 1 and "no minimum" in p.stderr and "`w`" in p.stderr, p.stderr
    p = run_job(tmp_path, "logistic_regression(X, y, solver='newton', max_iter=2)", X0, Y0)
    assert p.returncode == 1, p.stderr
    assert "did not converge: it stopped at max_iter = 2 iterations" in p.stderr, p.stderr
    assert not (tmp_path / "w.npy").exists()
