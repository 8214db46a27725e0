"""scikit-learn parity of nums_cloud.models (issue 43): any two labels (numbers, bools,
strings) with ``classes_`` and ``predict`` of their dtype; ``sample_weight`` for every
estimator and ``class_weight`` for LogisticRegression, against scikit-learn's own fits with
the same weights on real data (scikit-learn's breast cancer and diabetes sets); NaN and
infinity refused up front in scikit-learn's words; NumS's ``nums.models.glms`` import
path; scikit-learn's harmless parameters (``n_jobs``, ``verbose``, ``warm_start``) through
``clone`` and ``GridSearchCV``."""
import re
import warnings

import numpy as np
import pytest
from sklearn import base, datasets, linear_model, model_selection

import nums_cloud
import nums_cloud.numpy as nps
from nums_cloud.models import LinearRegression, LogisticRegression, PoissonRegression, Ridge


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = nums_cloud.init(storage=f"file://{tmp_path_factory.mktemp('store')}", workers=2,
                        memory_mb=512, progress=False)
    yield s
    s.close()


def _standardized(x):
    return (x - x.mean(axis=0)) / x.std(axis=0)


_cancer = datasets.load_breast_cancer()
XC = _standardized(_cancer.data)[:, :8]  # 569 x 8: a few seconds' fits at most
YC = _cancer.target  # 0 (malignant) and 1 (benign)
_diabetes = datasets.load_diabetes()
XD = _standardized(_diabetes.data)
YD = _diabetes.target
# Poisson targets: the diabetes progression scores as counts.
YP = np.round(YD / 25.0)

# Weights with zeros (rows left out) and repeats (weight 2: a row counted twice).
SW = np.array([0.0, 1.0, 2.0, 1.0, 0.5])[np.arange(len(YC)) % 5]
SWD = np.array([0.0, 1.0, 2.0, 1.0, 3.0])[np.arange(len(YD)) % 5]

TIGHT = dict(tol=1e-10, max_iter=1000)


def _sk_logistic(**kw):
    return linear_model.LogisticRegression(**TIGHT, **kw)


def _ours_logistic(**kw):
    return LogisticRegression(tol=1e-8, max_iter=500, **kw)


def _close(ours, sk, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(ours.coef_, sk.coef_, rtol=rtol, atol=atol)
    np.testing.assert_allclose(ours.intercept_, sk.intercept_, rtol=rtol, atol=atol)


@pytest.mark.parametrize("labels", [(-1, 1), ("no", "yes"), (False, True), (1.0, 3.0),
                                    (np.int32(2), np.int32(7))])
@pytest.mark.parametrize("lazy", [False, True])
def test_any_two_labels_as_scikit_learn(session, labels, lazy):
    """classes_ is np.unique's; the coefficients point to the second class; predict's
    labels and dtype are scikit-learn's (lazy for a nums-cloud X with numeric labels; a
    NumPy array for string labels); score counts the same hits."""
    y = np.where(YC == 1, labels[1], labels[0])
    sk = _sk_logistic().fit(XC, y)
    # String labels have no nums-cloud dtype: they come as NumPy arrays, X may be lazy.
    string = y.dtype.kind == "U"
    Xa = nps.array(XC).block(200, 8) if lazy else XC
    ya = nps.array(y) if lazy and not string else y
    m = _ours_logistic().fit(Xa, ya)
    np.testing.assert_array_equal(m.classes_, sk.classes_)
    assert m.classes_.dtype == sk.classes_.dtype
    _close(m, sk)
    pred = m.predict(Xa)
    if lazy and not string:
        assert isinstance(pred, nps.BlockArray)
        pred = pred.get()
    assert isinstance(pred, np.ndarray) and pred.dtype == sk.predict(XC).dtype
    np.testing.assert_array_equal(pred, sk.predict(XC))
    assert m.score(Xa, ya) == pytest.approx(sk.score(XC, y), abs=1e-12)
    proba = m.predict_proba(Xa)
    proba = proba.get() if lazy else proba
    np.testing.assert_allclose(proba, sk.predict_proba(XC), atol=1e-6)


def test_labels_scikit_learn_refuses(session):
    """Non-integral float labels are continuous, one class has no boundary: scikit-learn's
    words (more than two classes are its multinomial model: test_python_multinomial.py)."""
    for y in (np.where(YC == 1, 2.0, 0.5), nps.array(np.where(YC == 1, 2.0, 0.5))):
        with pytest.raises(ValueError) as sk_err:
            _sk_logistic().fit(XC, np.asarray(y.get() if hasattr(y, "get") else y))
        with pytest.raises(ValueError, match=re.escape(str(sk_err.value))):
            LogisticRegression().fit(XC, y)
    one = np.zeros(len(YC))
    with pytest.raises(ValueError) as sk_err:
        _sk_logistic().fit(XC, one)
    for y in (one, nps.array(one)):
        with pytest.raises(ValueError, match=re.escape(str(sk_err.value))):
            LogisticRegression().fit(XC, y)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
@pytest.mark.parametrize("lazy", [False, True])
def test_logistic_sample_weight(session, solver, lazy):
    """scikit-learn's coefficients with the same weights, and weight 2 is a duplicated
    row, weight 0 a row left out."""
    sk = _sk_logistic(C=0.5).fit(XC, YC, sample_weight=SW)
    conv = (lambda a: nps.array(a)) if lazy else (lambda a: a)
    m = _ours_logistic(C=0.5, solver=solver).fit(conv(XC), conv(YC), sample_weight=conv(SW))
    _close(m, sk)
    rows = np.repeat(np.arange(len(YC)), (SW * 2).astype(int))  # weights 0.5 as one of two
    dup = _ours_logistic(C=0.5, solver=solver).fit(XC[rows], YC[rows],
                                                   sample_weight=np.full(len(rows), 0.5))
    np.testing.assert_allclose(m.coef_, dup.coef_, rtol=1e-6, atol=1e-8)
    # A number weighs every row alike (scikit-learn's), as all weights 1 would.
    one = _ours_logistic(C=0.5, solver=solver).fit(XC, YC, sample_weight=1.0)
    _close(one, _sk_logistic(C=0.5).fit(XC, YC))


@pytest.mark.parametrize("lazy", [False, True])
def test_regressors_sample_weight(session, lazy):
    conv = (lambda a: nps.array(a)) if lazy else (lambda a: a)
    for ours, theirs in ((LinearRegression(), linear_model.LinearRegression()),
                         (Ridge(alpha=3.0), linear_model.Ridge(alpha=3.0)),
                         (Ridge(alpha=0.5, fit_intercept=False),
                          linear_model.Ridge(alpha=0.5, fit_intercept=False))):
        ours.fit(conv(XD), conv(YD), sample_weight=conv(SWD))
        theirs.fit(XD, YD, sample_weight=SWD)
        np.testing.assert_allclose(ours.coef_, theirs.coef_, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(ours.intercept_, theirs.intercept_, rtol=1e-9, atol=1e-9)
        # Weight 2 is a duplicated row, weight 0 a row left out.
        rows = np.repeat(np.arange(len(YD)), SWD.astype(int))
        dup = base.clone(ours).fit(XD[rows], YD[rows])
        np.testing.assert_allclose(ours.coef_, dup.coef_, rtol=1e-9, atol=1e-9)
        for sw in (None, SWD):
            np.testing.assert_allclose(
                ours.score(conv(XD), conv(YD), sample_weight=None if sw is None else conv(sw)),
                theirs.score(XD, YD, sample_weight=sw), rtol=1e-9)
    p = PoissonRegression(alpha=0.1, solver="newton", tol=1e-10).fit(
        conv(XD), conv(YP), sample_weight=conv(SWD))
    sk = linear_model.PoissonRegressor(alpha=0.1, tol=1e-12, max_iter=1000).fit(
        XD, YP, sample_weight=SWD)
    np.testing.assert_allclose(p.coef_, sk.coef_, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(p.intercept_, sk.intercept_, rtol=1e-5, atol=1e-7)
    rows = np.repeat(np.arange(len(YP)), SWD.astype(int))
    dup = PoissonRegression(alpha=0.1, solver="lbfgs", tol=1e-10).fit(XD[rows], YP[rows])
    np.testing.assert_allclose(p.coef_, dup.coef_, rtol=1e-5, atol=1e-7)
    for sw in (None, SWD):
        np.testing.assert_allclose(
            p.score(conv(XD), conv(YP), sample_weight=None if sw is None else conv(sw)),
            sk.score(XD, YP, sample_weight=sw), rtol=1e-5)
    # The classifier's accuracy, weighted.
    m = _ours_logistic().fit(conv(XC), conv(YC))
    skc = _sk_logistic().fit(XC, YC)
    assert m.score(conv(XC), conv(YC), sample_weight=conv(SW)) == pytest.approx(
        skc.score(XC, YC, sample_weight=SW), abs=1e-12)


@pytest.mark.parametrize("class_weight", [{0: 3.0, 1: 0.5}, {1: 2.0}, "balanced"])
@pytest.mark.parametrize("lazy", [False, True])
def test_class_weight(session, class_weight, lazy):
    """scikit-learn's class weights (a dict, classes not named weigh 1; "balanced":
    n_samples / (n_classes * bincount), weighted by sample_weight), times sample_weight."""
    conv = (lambda a: nps.array(a)) if lazy else (lambda a: a)
    for sw in (None, SW):
        sk = _sk_logistic(class_weight=class_weight).fit(XC, YC, sample_weight=sw)
        m = _ours_logistic(class_weight=class_weight).fit(
            conv(XC), conv(YC), sample_weight=None if sw is None else conv(sw))
        _close(m, sk)
    # String labels: a dict keyed by the labels.
    y = np.where(YC == 1, "yes", "no")
    sk = _sk_logistic(class_weight={"no": 2.0, "yes": 1.0}).fit(XC, y)
    m = _ours_logistic(class_weight={"no": 2.0, "yes": 1.0}).fit(conv(XC), y)
    _close(m, sk)


def test_class_weight_naming_unknown_classes_is_refused(session):
    with pytest.raises(ValueError) as sk_err:
        _sk_logistic(class_weight={0: 2.0, 5: 1.0}).fit(XC, YC)
    with pytest.raises(ValueError, match=re.escape(str(sk_err.value))):
        LogisticRegression(class_weight={0: 2.0, 5: 1.0}).fit(XC, YC)


def _sk_error(est, X, y, **kw):
    with pytest.raises(ValueError) as e, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(X, y, **kw)
    return str(e.value)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("ours,theirs,y", [
    (LogisticRegression(), linear_model.LogisticRegression(), YC.astype(np.float64)),
    (LogisticRegression(solver="newton"), linear_model.LogisticRegression(),
     YC.astype(np.float64)),
    (Ridge(), linear_model.Ridge(), YD[:len(YC)]),
    (LinearRegression(), linear_model.LinearRegression(), YD[:len(YC)]),
    (PoissonRegression(), linear_model.PoissonRegressor(), YP[:len(YC)]),
])
def test_nan_and_inf_are_refused_up_front_in_scikit_learns_words(session, lazy, ours, theirs,
                                                                   y):
    """NaN or infinity in X or y, NaN or negative weights: scikit-learn's ValueError and
    text, from the fit's first pass (X before y, as scikit-learn checks them)."""
    X = XC[:len(y)]
    conv = (lambda a: nps.array(a)) if lazy else (lambda a: a)
    xnan, xinf, ynan = X.copy(), X.copy(), y.copy()
    xnan[3, 2] = np.nan
    xinf[7, 1] = -np.inf
    ynan[5] = np.nan
    cases = [(xnan, y, {}), (xinf, y, {}), (X, ynan, {}), (xnan, ynan, {}),
             (X, y, {"sample_weight": np.where(np.arange(len(y)) == 4, np.nan, 1.0)})]
    if isinstance(ours, LinearRegression):
        # Only LinearRegression refuses negative weights in scikit-learn (the others take
        # them; nums-cloud refuses them for every model, in these words).
        cases.append((X, y, {"sample_weight": np.where(np.arange(len(y)) == 4, -1.0, 1.0)}))
    for Xb, yb, kw in cases:
        # Its first sentence (scikit-learn adds advice on estimators that take NaN).
        want = _sk_error(base.clone(theirs), Xb, yb, **kw).splitlines()[0]
        assert want.startswith("Input ") or "Negative" in want, want
        kw = {k: conv(v) for k, v in kw.items()}
        with pytest.raises(ValueError, match=re.escape(want)):
            base.clone(ours).fit(conv(Xb), conv(yb), **kw)
    with pytest.raises(ValueError, match=re.escape(
            "Negative values in data passed to `sample_weight`.")):
        base.clone(ours).fit(conv(X), conv(y),
                             sample_weight=conv(np.where(np.arange(len(y)) == 4, -1.0, 1.0)))
    with pytest.raises(ValueError, match="at least one non-zero"):
        base.clone(ours).fit(conv(X), conv(y), sample_weight=conv(np.zeros(len(y))))
    with pytest.raises(ValueError, match=re.escape(
            f"sample_weight.shape == (3,), expected ({len(y)},)!")):
        base.clone(ours).fit(conv(X), conv(y), sample_weight=conv(np.ones(3)))


def test_nums_glms_import_path():
    from nums_cloud.models import glms
    from nums_cloud.models.glms import LogisticRegression as L

    assert L is LogisticRegression
    assert {"LinearRegression", "Ridge", "PoissonRegression"} <= set(glms.__all__)


def test_harmless_parameters_and_grid_search(session):
    """n_jobs, verbose and warm_start=False are taken (n_jobs ignored: the engine decides
    the parallelism), kept by get_params and clone, and GridSearchCV runs over the
    estimator as over scikit-learn's, to the same choice and scores."""
    m = LogisticRegression(n_jobs=4, verbose=0, warm_start=False, C=2.0)
    c = base.clone(m)
    assert c.get_params() == m.get_params() and c.get_params()["n_jobs"] == 4
    assert repr(m) == "LogisticRegression(C=2.0, n_jobs=4)"
    assert base.clone(LinearRegression(n_jobs=2)).n_jobs == 2
    assert base.clone(PoissonRegression(verbose=1)).verbose == 1
    with pytest.raises(ValueError, match="warm_start=True is not supported"):
        LogisticRegression(warm_start=True).fit(XC, YC)
    grid = {"C": [0.05, 1.0]}
    ours = model_selection.GridSearchCV(_ours_logistic(n_jobs=2), grid, cv=3).fit(XC, YC)
    sk = model_selection.GridSearchCV(_sk_logistic(), grid, cv=3).fit(XC, YC)
    assert ours.best_params_ == sk.best_params_
    np.testing.assert_allclose(ours.cv_results_["mean_test_score"],
                               sk.cv_results_["mean_test_score"], atol=1e-12)


def _raw_with_awkward_columns():
    """The diabetes set unscaled, a constant column, and a NaN (left out by fit, kept by
    transform)."""
    X = np.column_stack([_diabetes.data * 100 + 50, np.full(len(YD), 7.0)])
    X[10, 2] = np.nan
    return X


@pytest.mark.parametrize("with_mean,with_std", [(True, True), (False, True), (True, False),
                                                (False, False)])
@pytest.mark.parametrize("lazy", [False, True])
def test_standard_scaler_is_scikit_learns(session, with_mean, with_std, lazy):
    from sklearn import preprocessing as skp

    from nums_cloud.preprocessing import StandardScaler

    X = _raw_with_awkward_columns()
    sk = skp.StandardScaler(with_mean=with_mean, with_std=with_std).fit(X)
    Xa = nps.array(X).block(100, 11) if lazy else X
    ours = StandardScaler(with_mean=with_mean, with_std=with_std).fit(Xa)
    for name in ("mean_", "var_", "scale_"):
        a, b = getattr(ours, name), getattr(sk, name)
        if b is None:
            assert a is None, name
        else:
            np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-12, err_msg=name)
    np.testing.assert_array_equal(ours.n_samples_seen_, sk.n_samples_seen_)
    if with_std:
        assert ours.scale_[-1] == 1.0  # the constant column
    z = ours.transform(Xa)
    back = ours.inverse_transform(z)
    if lazy:
        assert isinstance(z, nps.BlockArray) and isinstance(back, nps.BlockArray)
        z, back = z.get(), back.get()
    np.testing.assert_allclose(z, sk.transform(X), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(back, X, rtol=1e-12)
    assert np.isnan(z[10, 2])


def test_standard_scaler_in_a_pipeline(session):
    """A Pipeline of the scaler and LogisticRegression gives scikit-learn's pipeline's
    coefficients and predictions, from NumPy and from nums-cloud arrays."""
    from sklearn import pipeline
    from sklearn import preprocessing as skp

    from nums_cloud.preprocessing import StandardScaler

    X = _cancer.data[:, :8]
    sk = pipeline.make_pipeline(skp.StandardScaler(), _sk_logistic(C=0.5)).fit(X, YC)
    for Xa, ya in ((X, YC), (nps.array(X), nps.array(YC))):
        ours = pipeline.make_pipeline(StandardScaler(), _ours_logistic(C=0.5)).fit(Xa, ya)
        _close(ours[-1], sk[-1])
        pred = ours.predict(Xa)
        pred = pred.get() if isinstance(pred, nps.BlockArray) else pred
        np.testing.assert_array_equal(pred, sk.predict(X))
    assert base.clone(StandardScaler(with_mean=False)).get_params()["with_mean"] is False
    with pytest.raises(ValueError, match="X has 3 features, but StandardScaler is expecting 8"):
        ours[0].transform(X[:, :3])
