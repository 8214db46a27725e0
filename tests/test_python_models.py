"""nums_cloud.models as scikit-learn's estimators: the coefficients of scikit-learn's own
fits on the same data, from NumPy arrays and from nums-cloud arrays; fit returns the
estimator; predict, predict_proba, score; get_params, set_params and clone; NumS's
parameter names; refused parameters."""
import numpy as np
import pytest
from sklearn import base, linear_model

import nums_cloud
import nums_cloud.numpy as nps
from nums_cloud.models import (LinearRegression, LogisticRegression, PoissonRegression,
                               PoissonRegressor, Ridge)


rng = np.random.default_rng(3)
X = rng.normal(size=(3000, 5))
W = np.array([1.0, -2.0, 0.5, 0.0, 0.25])
Y01 = (X @ W + 0.3 + rng.normal(size=3000) > 0).astype(np.int64)
YLIN = X @ W + 1.5 + 0.1 * rng.normal(size=3000)
YCOUNT = rng.poisson(np.exp(0.3 * X @ W + 0.2)).astype(np.float64)


@pytest.mark.parametrize("solver", ["newton", "lbfgs"])
@pytest.mark.parametrize("lazy", [False, True])
def test_logistic_regression_matches_scikit_learn(session, solver, lazy):
    Xa, ya = (nps.array(X).block(700, 5), nps.array(Y01)) if lazy else (X, Y01)
    m = LogisticRegression(C=10.0, solver=solver, tol=1e-8, max_iter=200)
    assert m.fit(Xa, ya) is m
    sk = linear_model.LogisticRegression(C=10.0, tol=1e-10, max_iter=1000).fit(X, Y01)
    np.testing.assert_allclose(m.coef_, sk.coef_, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.intercept_, sk.intercept_, rtol=1e-5, atol=1e-6)
    assert m.coef_.shape == (1, 5) and m.intercept_.shape == (1,)
    assert m.n_iter_.shape == (1,) and 1 <= m.n_iter_[0] <= 200
    assert list(m.classes_) == [0, 1]
    proba = m.predict_proba(Xa)
    pred = m.predict(Xa)
    if lazy:
        assert isinstance(proba, nps.BlockArray) and isinstance(pred, nps.BlockArray)
        proba, pred = proba.get(), pred.get()
    np.testing.assert_allclose(proba, sk.predict_proba(X), atol=1e-6)
    assert (pred == sk.predict(X)).mean() > 0.999
    assert abs(m.score(Xa, ya) - sk.score(X, Y01)) < 1e-3


def test_fits_over_arrays_computed_in_this_process(session):
    # A compute in this process keeps no zarr.json of what it makes (only it reads them);
    # a fit's passes load X and y as any Zarr array: X computed earlier, y and a slice of X
    # made in the fit's own stage, are described for them.
    Xa = nums_cloud.persist(nps.array(X).block(700, 5) * 1.0)
    ya = nps.array(Y01) + 0
    for rows in (slice(None), slice(0, 2000)):
        m = LogisticRegression(C=10.0, tol=1e-8, max_iter=200).fit(Xa[rows], ya[rows])
        sk = linear_model.LogisticRegression(C=10.0, tol=1e-10, max_iter=1000)
        sk.fit(X[rows], Y01[rows])
        np.testing.assert_allclose(m.coef_, sk.coef_, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(m.intercept_, sk.intercept_, rtol=1e-5, atol=1e-6)


def test_nums_higgs_example_on_a_csv_of_its_layout(session, tmp_path):
    """NumS's README fit of HIGGS.csv (the label first, then the features; no header),
    with only the imports changed, on a CSV of that layout: scikit-learn's coefficients
    and accuracy."""
    import nums_cloud as nums

    path = tmp_path / "HIGGS.csv"
    np.savetxt(path, np.column_stack([Y01.astype(np.float64), X]), delimiter=",", fmt="%.17g")
    higgs_dataset = nums.read_csv(str(path))
    y, X_ = higgs_dataset[:, 0].astype(int), higgs_dataset[:, 1:]
    model = LogisticRegression(solver="newton-cg")
    model.fit(X_, y)
    y_pred = model.predict(X_)
    accuracy = (nps.sum(y == y_pred) / X_.shape[0]).get()
    sk = linear_model.LogisticRegression(tol=1e-10, max_iter=1000).fit(X, Y01)
    # The README's defaults: tol 1e-4 on the gradient, so agreement to about 1e-3.
    np.testing.assert_allclose(model.coef_, sk.coef_, rtol=5e-3)
    assert abs(float(accuracy) - sk.score(X, Y01)) < 1e-3, accuracy


def test_unpenalised_and_nums_names(session):
    m = LogisticRegression(penalty=None, solver="newton-cg", tol=1e-10).fit(X, Y01)
    sk = linear_model.LogisticRegression(C=np.inf, tol=1e-10, max_iter=1000).fit(X, Y01)
    np.testing.assert_allclose(m.coef_, sk.coef_, rtol=1e-4)
    m2 = LogisticRegression(penalty="none", solver="irls", tol=1e-10).fit(X, Y01)
    np.testing.assert_allclose(m2.coef_, m.coef_, rtol=1e-8)
    with pytest.raises(ValueError, match="penalty 'l1'"):
        LogisticRegression(penalty="l1").fit(X, Y01)
    with pytest.raises(ValueError, match="solver 'saga'"):
        LogisticRegression(solver="saga").fit(X, Y01)
    # Any two labels, as scikit-learn's (tests/test_sklearn_parity.py has more).
    m3 = LogisticRegression(penalty=None, solver="newton-cg", tol=1e-10).fit(X, Y01 * 2)
    assert list(m3.classes_) == [0, 2]
    np.testing.assert_allclose(m3.coef_, m.coef_, rtol=1e-8)


def test_linear_ridge_and_poisson_match_scikit_learn(session):
    for ours, theirs in ((LinearRegression(), linear_model.LinearRegression()),
                         (Ridge(alpha=3.0), linear_model.Ridge(alpha=3.0)),
                         (Ridge(alpha=0.5, fit_intercept=False), linear_model.Ridge(alpha=0.5, fit_intercept=False))):
        ours.fit(nps.array(X), nps.array(YLIN))
        theirs.fit(X, YLIN)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(ours.predict(X), theirs.predict(X), rtol=1e-9)
        np.testing.assert_allclose(ours.score(nps.array(X), YLIN), theirs.score(X, YLIN), rtol=1e-9)
    p = PoissonRegression(alpha=0.1, solver="newton", tol=1e-10).fit(X, YCOUNT)
    sk = linear_model.PoissonRegressor(alpha=0.1, tol=1e-12, max_iter=1000).fit(X, YCOUNT)
    np.testing.assert_allclose(p.coef_, sk.coef_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(p.intercept_, sk.intercept_, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(p.predict(X), sk.predict(X), rtol=1e-4)
    np.testing.assert_allclose(p.score(nps.array(X), nps.array(YCOUNT)), sk.score(X, YCOUNT), rtol=1e-4)
    assert PoissonRegressor is PoissonRegression


def test_estimator_protocol(session):
    m = LogisticRegression(C=2.0, solver="newton")
    assert m.get_params()["C"] == 2.0 and repr(m) == "LogisticRegression(C=2.0, solver='newton')"
    c = base.clone(m)
    assert c is not m and c.get_params() == m.get_params()
    m.set_params(max_iter=5, tol=1e-14)
    with pytest.warns(Warning, match="did not converge"):
        m.fit(X, Y01)
    assert m.n_iter_[0] == 5 and not m.converged_
    with pytest.raises(AttributeError, match="not fitted"):
        Ridge().predict(X)
    with pytest.raises(ValueError, match="inconsistent numbers of samples"):
        Ridge().fit(X, YLIN[:10])


def test_estimator_defaults_are_the_engines():
    """Each estimator's parameters default to the engine's table (``_native.models()``,
    what the job language's model functions take), and every solver name an estimator
    documents is one the engine takes."""
    import inspect

    from nums_cloud import _native

    table = _native.models()
    for cls, model in [(LogisticRegression, "logistic_regression"), (Ridge, "ridge"),
                       (LinearRegression, "linear_regression"),
                       (PoissonRegression, "poisson_regression")]:
        # (n_classes is the labels': the estimator counts them.)
        engine = {k: v for k, v in table[model].items() if k != "n_classes"}
        ours = {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
                if k in engine}
        assert ours == engine, (cls.__name__, ours, engine)
    doc = LogisticRegression.__doc__
    assert all(f'"{n}"' in doc for n in _native.solvers()), doc
