"""Multinomial logistic regression (issue 43): LogisticRegression of three or more classes
is scikit-learn's multinomial model, fitted in the engine. Each test fits scikit-learn 1.9
on the same data (tolerances tightened on both sides) and compares coef_ (n_classes,
n_features), intercept_, predict_proba (the softmax), predict and score: 3 classes (iris)
and 5 (a synthetic set), labels of any dtype, class_weight and sample_weight, no penalty
(compared by probabilities), no intercept, X over several row blocks, Newton and L-BFGS;
and inside cross_val_score, GridSearchCV and Pipeline."""
import warnings

import numpy as np
import pytest
from sklearn import base, datasets, linear_model, model_selection, pipeline, preprocessing

import nums_cloud.numpy as nps
from nums_cloud.models import LogisticRegression


_iris = datasets.load_iris()
XI = preprocessing.StandardScaler().fit_transform(_iris.data)  # 150 x 4, 3 classes
YI = _iris.target
NAMES = _iris.target_names[YI]  # strings

# 5 overlapping classes: argmax of a linear model plus Gumbel noise (a softmax sample).
_rng = np.random.default_rng(7)
X5 = _rng.normal(size=(1200, 6))
_W5 = _rng.normal(size=(6, 5))
Y5 = np.argmax(X5 @ _W5 + _rng.gumbel(size=(1200, 5)) * 1.5, axis=1)
SW5 = np.array([0.0, 1.0, 2.0, 1.0, 0.5])[np.arange(len(Y5)) % 5]


def _sk(**kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # penalty=None is deprecated in 1.9: C=np.inf
        if kw.get("penalty", "l2") is None:
            kw.pop("penalty")
            kw["C"] = np.inf
        return linear_model.LogisticRegression(tol=1e-10, max_iter=5000, **kw)


def _ours(**kw):
    return LogisticRegression(tol=1e-9, max_iter=1000, **kw)


def _got(a):
    return a.get() if isinstance(a, nps.BlockArray) else a


def _same_model(m, sk, X, y, Xa, ya, rtol=1e-5, atol=1e-6, coef=True):
    np.testing.assert_array_equal(m.classes_, sk.classes_)
    assert m.classes_.dtype == sk.classes_.dtype
    k, d = len(sk.classes_), X.shape[1]
    assert m.coef_.shape == (k, d) and m.intercept_.shape == (k,)
    assert m.n_iter_.shape == (1,) and m.n_iter_[0] >= 1
    if coef:
        np.testing.assert_allclose(m.coef_, sk.coef_, rtol=rtol, atol=atol)
        np.testing.assert_allclose(m.intercept_, sk.intercept_, rtol=rtol, atol=atol)
    z = m.decision_function(Xa)
    assert z.shape == (X.shape[0], k)
    proba = m.predict_proba(Xa)
    if isinstance(Xa, nps.BlockArray):
        assert isinstance(proba, nps.BlockArray)
    proba = _got(proba)
    np.testing.assert_allclose(proba.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(proba, sk.predict_proba(X), rtol=rtol, atol=1e-7)
    pred = m.predict(Xa)
    if isinstance(Xa, nps.BlockArray) and sk.classes_.dtype.kind in "biuf":
        assert isinstance(pred, nps.BlockArray)  # lazy, as the binary model's
    pred = _got(pred)
    assert isinstance(pred, np.ndarray) and pred.dtype == sk.predict(X).dtype
    np.testing.assert_array_equal(pred, sk.predict(X))
    assert m.score(Xa, ya) == pytest.approx(sk.score(X, y), abs=1e-12)


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("data", ["iris", "five"])
@pytest.mark.parametrize("solver", ["lbfgs", "newton-cholesky"])
def test_multinomial_matches_scikit_learn(session, data, lazy, solver):
    X, y = (XI, YI) if data == "iris" else (X5, Y5)
    sk = _sk(C=2.0).fit(X, y)
    # Several row blocks of X (and of y) when lazy.
    Xa, ya = (nps.array(X).block(130, X.shape[1]), nps.array(y)) if lazy else (X, y)
    m = _ours(C=2.0, solver=solver)
    assert m.fit(Xa, ya) is m
    _same_model(m, sk, X, y, Xa, ya)


@pytest.mark.parametrize("labels", [NAMES, YI.astype(np.float64) * 2.0 - 1.0,
                                    (YI + 3).astype(np.int32)])
@pytest.mark.parametrize("lazy", [False, True])
def test_labels_of_any_dtype(session, labels, lazy):
    """Strings, floats and int32 labels: classes_ as np.unique sorts them, predict of
    their dtype (lazy for numeric labels of a nums-cloud X)."""
    sk = _sk().fit(XI, labels)
    string = labels.dtype.kind == "U"
    Xa = nps.array(XI).block(40, 4) if lazy else XI
    ya = nps.array(labels) if lazy and not string else labels
    m = _ours().fit(Xa, ya)
    _same_model(m, sk, XI, labels, Xa, ya)


@pytest.mark.parametrize("class_weight", [None, "balanced", {0: 3.0, 2: 0.5, 4: 2.0}])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("lazy", [False, True])
def test_class_weight_and_sample_weight(session, class_weight, weighted, lazy):
    conv = (lambda a: nps.array(a)) if lazy else (lambda a: a)
    sw = SW5 if weighted else None
    cw = class_weight
    if isinstance(cw, dict):  # all but the named classes weigh 1
        cw = {**{c: 1.0 for c in range(5)}, **cw}
    sk = _sk(class_weight=cw).fit(X5, Y5, sample_weight=sw)
    m = _ours(class_weight=cw).fit(conv(X5), conv(Y5),
                                   sample_weight=None if sw is None else conv(sw))
    _same_model(m, sk, X5, Y5, conv(X5), conv(Y5))
    if weighted and class_weight is None:
        # Weight 2 is a duplicated row, weight 0 a row left out.
        rows = np.repeat(np.arange(len(Y5)), (SW5 * 2).astype(int))
        dup = _ours().fit(X5[rows], Y5[rows], sample_weight=np.full(len(rows), 0.5))
        np.testing.assert_allclose(m.coef_, dup.coef_, rtol=1e-6, atol=1e-7)


def test_string_labels_balanced(session):
    sk = _sk(class_weight="balanced").fit(XI[20:], NAMES[20:])
    m = _ours(class_weight="balanced").fit(nps.array(XI[20:]), NAMES[20:])
    _same_model(m, sk, XI[20:], NAMES[20:], XI[20:], NAMES[20:])


@pytest.mark.parametrize("lazy", [False, True])
@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_no_penalty_gives_scikit_learns_probabilities(session, lazy, solver):
    """Without a penalty the coefficients are determined up to a vector added to every
    class: the probabilities are compared, and both solvers, from 0, keep the classes'
    sum at 0 (as scikit-learn's L-BFGS does)."""
    sk = _sk(penalty=None).fit(X5, Y5)
    Xa, ya = (nps.array(X5).block(300, 6), nps.array(Y5)) if lazy else (X5, Y5)
    m = _ours(penalty=None, solver=solver).fit(Xa, ya)
    _same_model(m, sk, X5, Y5, Xa, ya, rtol=1e-5, coef=False)
    np.testing.assert_allclose(m.coef_.sum(axis=0), 0.0, atol=1e-8)
    np.testing.assert_allclose(m.intercept_.sum(), 0.0, atol=1e-8)
    np.testing.assert_allclose(m.coef_ - m.coef_.mean(axis=0),
                               sk.coef_ - sk.coef_.mean(axis=0), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("solver", ["lbfgs", "newton"])
def test_without_intercept(session, solver):
    sk = _sk(fit_intercept=False, C=0.5).fit(X5, Y5)
    m = _ours(fit_intercept=False, C=0.5, solver=solver).fit(nps.array(X5).block(500, 6),
                                                              nps.array(Y5))
    assert np.all(m.intercept_ == 0.0)
    _same_model(m, sk, X5, Y5, X5, Y5)


def test_multi_class_of_older_scikit_learn(session):
    """``multi_class`` ('auto', 'multinomial': the same model) is accepted as code written
    for scikit-learn before 1.8 passes it; 'ovr' is refused, naming what does it."""
    sk = _sk().fit(XI, YI)
    for mc in ("auto", "multinomial"):
        m = _ours(multi_class=mc).fit(XI, YI)
        np.testing.assert_allclose(m.coef_, sk.coef_, rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="OneVsRestClassifier"):
        _ours(multi_class="ovr").fit(XI, YI)
    assert base.clone(_ours(multi_class="multinomial")).multi_class == "multinomial"


def test_inside_scikit_learns_model_selection(session):
    """cross_val_score, GridSearchCV and a Pipeline with a scaler: scikit-learn's own
    scores of its own estimator on the same folds."""
    X, y = _iris.data, YI
    cv = model_selection.StratifiedKFold(5, shuffle=True, random_state=0)
    ours = model_selection.cross_val_score(_ours(C=0.5), XI, y, cv=cv)
    theirs = model_selection.cross_val_score(_sk(C=0.5), XI, y, cv=cv)
    np.testing.assert_allclose(ours, theirs, atol=1e-12)
    grid = model_selection.GridSearchCV(_ours(), {"C": [0.1, 1.0]}, cv=3).fit(XI, y)
    sk_grid = model_selection.GridSearchCV(_sk(), {"C": [0.1, 1.0]}, cv=3).fit(XI, y)
    assert grid.best_params_ == sk_grid.best_params_
    np.testing.assert_allclose(grid.cv_results_["mean_test_score"],
                               sk_grid.cv_results_["mean_test_score"], atol=1e-12)
    pipe = pipeline.make_pipeline(preprocessing.StandardScaler(), _ours()).fit(X, NAMES)
    sk_pipe = pipeline.make_pipeline(preprocessing.StandardScaler(), _sk()).fit(X, NAMES)
    np.testing.assert_array_equal(pipe.predict(X), sk_pipe.predict(X))
    np.testing.assert_allclose(pipe.predict_proba(X), sk_pipe.predict_proba(X), rtol=1e-5,
                               atol=1e-7)
