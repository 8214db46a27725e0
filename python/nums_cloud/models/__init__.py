"""``nums_cloud.models``: the generalized linear models the engine fits, as
scikit-learn's estimators (``fit`` returns the estimator; ``predict``, ``predict_proba``
where it applies, ``score``; ``coef_``, ``intercept_``, ``n_iter_``), with scikit-learn's
and NumS's parameter names.

A fit runs in the engine: X and y are made once, then each iteration is one pass over
them by the functions (or in this process when they are small), and the driver takes the
step, so X and y of any size fit. X and y may be nums-cloud arrays or NumPy arrays (or
anything NumPy makes an array of). Predictions of a nums-cloud array are lazy nums-cloud
arrays; of a NumPy array, NumPy arrays.

``fit`` takes scikit-learn's ``sample_weight`` (the coefficients are scikit-learn's with
the same weights: weight 2 is a row counted twice, weight 0 a row left out); the first
pass of a fit checks the data and refuses NaN or infinity in X, y or the weights in
scikit-learn's words, before any step. NumS's import path, ``nums_cloud.models.glms``,
names the same estimators."""

import inspect
import warnings

import numpy as np

from ..numpy import _array

__all__ = ["LogisticRegression", "LinearRegression", "Ridge", "PoissonRegression",
           "PoissonRegressor", "ConvergenceWarning"]

try:  # scikit-learn's warning class when it is installed, so its filters apply
    from sklearn.exceptions import ConvergenceWarning
except ImportError:  # pragma: no cover
    class ConvergenceWarning(UserWarning):
        """A fit stopped at ``max_iter`` before it met its tolerance."""

class _Estimator:
    """scikit-learn's estimator protocol: parameters from ``__init__``'s signature
    (``get_params``, ``set_params``, ``sklearn.base.clone``), a repr of those that
    differ from their defaults."""

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return [p.name for p in sig.parameters.values()
                if p.name != "self" and p.kind != p.VAR_KEYWORD]

    def get_params(self, deep=True):
        """Get parameters for this estimator."""
        return {k: getattr(self, k) for k in self._param_names()}

    def set_params(self, **params):
        """Set the parameters of this estimator."""
        names = self._param_names()
        for k, v in params.items():
            if k not in names:
                raise ValueError(f"Invalid parameter {k!r} for estimator {self!r}")
            setattr(self, k, v)
        return self

    def __repr__(self):
        sig = inspect.signature(type(self).__init__)
        changed = [f"{k}={getattr(self, k)!r}" for k, p in sig.parameters.items()
                   if k != "self" and p.default is not p.empty
                   and getattr(self, k) != p.default]
        return f"{type(self).__name__}({', '.join(changed)})"

    def __sklearn_tags__(self):  # pragma: no cover (scikit-learn >= 1.6 asks)
        from sklearn.utils import Tags, TargetTags

        return Tags(estimator_type=self._estimator_type, target_tags=TargetTags(required=True))

    def _data(self, X, y):
        """X as a float64 nums-cloud array, and y as it was given (a nums-cloud array, or
        a NumPy array of any dtype, strings included), their shapes checked."""
        X = _array.asarray(X)
        y = y if _is_lazy(y) else np.asarray(y)
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{X.shape[0]}, {y.shape[0]}]")
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        return X, y

    @staticmethod
    def _weights(sample_weight, X):
        """The fit's ``sample_weight`` keyword: none, or the weights as a nums-cloud array
        (a number weighs every row alike, as scikit-learn's). The engine checks them
        (one per row, none negative, NaN or infinite, not all 0) in the fit's first
        pass."""
        if sample_weight is None:
            return {}
        if np.ndim(sample_weight) == 0 and not _is_lazy(sample_weight):
            sample_weight = np.full(X.shape[0], float(sample_weight))
        return {"sample_weight": _array.asarray(sample_weight, session=X._s)._a}

    def _fit(self, model, X, y, sample_weight=None, **kw):
        """The engine's fit of ``model`` to X, y (numbers) and the sample weights."""
        y = _array.asarray(y, session=X._s)
        if y.dtype != np.float64:
            y = y.astype(np.float64)
        kw.update(self._weights(sample_weight, X))
        return X._s.fit(model, X._a, y._a, **kw)

    def _fitted(self, X, fit):
        self.n_features_in_ = X.shape[1]
        self.n_iter_ = fit["n_iter"]
        self.converged_ = fit["converged"]
        self.loss_curve_ = list(fit["loss"])
        if not fit["converged"]:
            # The stated tolerance was not met (at max_iter, or where no step lowers the
            # loss): the coefficients are returned, as scikit-learn's are, with its
            # warning, which says why.
            why = fit.get("why_not") or f"it stopped at max_iter = {self.max_iter} iterations"
            warnings.warn(
                f"{type(self).__name__} did not converge: {why}; raise max_iter, loosen "
                "tol or scale X", ConvergenceWarning, stacklevel=3)

    def _check_fitted(self):
        if not hasattr(self, "coef_"):
            raise AttributeError(f"This {type(self).__name__} instance is not fitted yet. "
                                 "Call 'fit' with appropriate arguments first.")

    def _linear(self, X):
        """``X @ coef + intercept``: lazy for a nums-cloud array, NumPy's for others."""
        self._check_fitted()
        coef = np.ravel(self.coef_)
        b = float(np.ravel(self.intercept_)[0]) if np.ndim(self.intercept_) else float(
            self.intercept_)
        if isinstance(X, _array.BlockArray):
            if X.dtype != np.float64:
                X = X.astype(np.float64)
            return X @ _array.asarray(coef, session=X._s) + b
        return np.asarray(X, dtype=np.float64) @ coef + b


def _is_lazy(X):
    return isinstance(X, _array.BlockArray)


class LogisticRegression(_Estimator):
    """Logistic regression (scikit-learn's ``LogisticRegression``, NumS's too): two or more
    classes of any labels (numbers, bools, strings), an L2 penalty of strength ``1 / C``
    (or none), fitted by L-BFGS or Newton's method to scikit-learn's objective, so the
    coefficients are scikit-learn's.

    The labels are ``classes_``, sorted as ``np.unique`` sorts them. Of two, the second is
    the positive class (``coef_`` of shape (1, n_features) points toward it,
    ``predict_proba``'s second column is its probability). Of three or more, the model is
    scikit-learn's multinomial one: ``coef_`` (n_classes, n_features) and ``intercept_``
    (n_classes,), a row per class, ``predict_proba`` the softmax of
    ``decision_function``'s (n_samples, n_classes) scores; the intercepts (and without a
    penalty the coefficients) are those whose sum over the classes is 0, scikit-learn's
    too. A nums-cloud y is mapped to class indices lazily,
    its distinct values found by one compute; strings have no nums-cloud dtype, so string
    labels come as a NumPy array or a list.

    Parameters
    ----------
    penalty : {"l2", None}, default "l2"
        ``None`` (or NumS's ``"none"``): no penalty.
    C : float, default 1.0
        Inverse of regularization strength.
    tol : float, default 1e-4
        scikit-learn's: converged when the gradient's largest magnitude is at most
        ``tol`` (and, for Newton's method, half the squared Newton decrement of the last
        step); otherwise a ``ConvergenceWarning`` says why.
    max_iter : int, default 100
    solver : str, default "lbfgs"
        ``"lbfgs"`` (also ``"bfgs"``) or Newton's method (``"newton"``, ``"newton-cg"``,
        ``"newton-cholesky"``, NumS's ``"irls"``).
    fit_intercept : bool, default True
    class_weight : dict, "balanced" or None, default None
        scikit-learn's: a weight per class label (classes not named weigh 1), or
        ``"balanced"``, ``n_samples / (n_classes * np.bincount(y))`` (the counts weighted
        by ``sample_weight`` when given); multiplies ``sample_weight``.
    random_state : ignored
        The fit is deterministic.
    verbose : int, default 0
        Ignored: the session's progress bar reports a fit's passes.
    warm_start : bool, default False
        Only False: each fit starts from zero.
    n_jobs : ignored
        The engine decides the parallelism (the session's workers).
    multi_class : {"auto", "multinomial"}, default "auto"
        Accepted for code written for scikit-learn before 1.8, which removed it: both
        mean the multinomial model for three or more classes. ``"ovr"`` is refused (use
        ``sklearn.multiclass.OneVsRestClassifier``).
    """

    _estimator_type = "classifier"

    def __init__(self, penalty="l2", *, C=1.0, tol=1e-4, max_iter=100, solver="lbfgs",
                 fit_intercept=True, class_weight=None, random_state=None, verbose=0,
                 warm_start=False, n_jobs=None, multi_class="auto"):
        self.penalty = penalty
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.class_weight = class_weight
        self.random_state = random_state
        self.verbose = verbose
        self.warm_start = warm_start
        self.n_jobs = n_jobs
        self.multi_class = multi_class

    def fit(self, X, y, sample_weight=None):
        """Fit the model to X (n_samples, n_features) and labels y (two classes or more),
        each row weighted by ``sample_weight`` (and ``class_weight``); returns the
        estimator."""
        _no_warm_start(self)
        if self.multi_class not in ("auto", "multinomial"):
            raise ValueError(
                f"multi_class={self.multi_class!r} is not supported: more than two classes "
                "are fitted as scikit-learn's multinomial model ('auto', 'multinomial'); for "
                "one binary model per class use "
                "sklearn.multiclass.OneVsRestClassifier(LogisticRegression())")
        X, y = self._data(X, y)
        classes, yk = _encode_labels(y)
        n_classes = 2
        if classes is not None:
            self.classes_ = classes
            n_classes = max(len(classes), 2)
            sample_weight = _class_weighted(self.class_weight, classes, yk, sample_weight, X)
        # The engine checks the parameters and knows the solvers' names.
        kw = {} if n_classes == 2 else {"n_classes": n_classes}
        fit = self._fit("logistic_regression", X, yk, sample_weight, penalty=self.penalty,
                        C=self.C, solver=self.solver, tol=self.tol, max_iter=self.max_iter,
                        fit_intercept=self.fit_intercept, **kw)
        rows = fit["classes"]
        self.coef_ = np.array(fit["coef"]).reshape(rows, -1)
        self.intercept_ = np.array(fit["intercepts"])
        self._fitted(X, fit)
        self.n_iter_ = np.array([fit["n_iter"]], dtype=np.int32)
        return self

    def decision_function(self, X):
        """Confidence scores: ``X @ coef_.T + intercept_``; of two classes, a score per
        sample (positive: ``classes_[1]``), of more, (n_samples, n_classes)."""
        if np.ndim(self.coef_) == 2 and len(self.coef_) > 1:
            return self._scores(X)
        return self._linear(X)

    def _scores(self, X):
        """``X @ coef_.T + intercept_``, (n_samples, n_classes): lazy for a nums-cloud
        array, NumPy's for others."""
        coef, b = np.asarray(self.coef_).T, np.asarray(self.intercept_, dtype=np.float64)
        if isinstance(X, _array.BlockArray):
            if X.dtype != np.float64:
                X = X.astype(np.float64)
            return X @ _array.asarray(coef, session=X._s) + _array.asarray(b, session=X._s)
        return np.asarray(X, dtype=np.float64) @ coef + b

    def predict_proba(self, X):
        """Probability estimates of each of ``classes_``, one row per sample (of more
        than two classes, the softmax of ``decision_function``)."""
        z = self.decision_function(X)
        if np.ndim(z) == 2:
            ns = _namespace(z)
            e = ns.exp(z - ns.max(z, axis=1, keepdims=True))
            return e / ns.sum(e, axis=1, keepdims=True)
        if _is_lazy(z):
            from .. import numpy as nps

            p = nps.sigmoid(z)
            return nps.stack([1.0 - p, p], axis=1)
        p = 1.0 / (1.0 + np.exp(-z))
        return np.stack([1.0 - p, p], axis=1)

    def predict(self, X):
        """Predicted class labels for the samples in X, of ``classes_``' dtype: lazy for a
        nums-cloud X with numeric or bool labels; a NumPy array for a NumPy X, and for
        string labels (which have no nums-cloud dtype), computed."""
        z = self.decision_function(X)
        classes = self.classes_
        if np.ndim(z) == 2:
            ns = _namespace(z)
            k = ns.argmax(z, axis=1)
            if not _is_lazy(k):
                return classes[k]
            if classes.dtype.kind not in "biuf":
                return classes[k.get()]
            from .. import numpy as nps

            label = nps.where(k == 0, classes[0], classes[1])
            for i in range(2, len(classes)):
                label = nps.where(k == i, classes[i], label)
            return label.astype(classes.dtype)
        if not _is_lazy(z):
            return classes[(z > 0).astype(np.intp)]
        if classes.dtype.kind not in "biuf":
            return classes[(z.get() > 0).astype(np.intp)]
        from .. import numpy as nps

        return nps.where(z > 0, classes[1], classes[0]).astype(classes.dtype)

    def score(self, X, y, sample_weight=None):
        """The mean accuracy on the given test data and labels (weighted by
        ``sample_weight``)."""
        p = self.predict(X)
        if _is_lazy(p):
            y = _array.asarray(y, session=p._s)
            hit = (p == y).astype(np.float64)
            if sample_weight is None:
                return float(hit.mean())
            w = _array.asarray(sample_weight, session=p._s).astype(np.float64)
            return float((hit * w).sum() / w.sum())
        return float(np.average(p == np.asarray(y), weights=sample_weight))


def _no_warm_start(est):
    if getattr(est, "warm_start", False):
        raise ValueError(f"{type(est).__name__}: warm_start=True is not supported; each fit "
                         "starts from zero")


# scikit-learn's words (sklearn.utils.multiclass.check_classification_targets).
_CONTINUOUS = ("Unknown label type: continuous. Maybe you are trying to fit a classifier, "
               "which expects discrete classes on a regression target with continuous values.")


def _namespace(a):
    """NumPy, or nums-cloud's namespace for a nums-cloud array."""
    if _is_lazy(a):
        from .. import numpy as nps

        return nps
    return np


def _encode_labels(y):
    """``(classes_, yk)``: the labels as ``np.unique`` sorts them, and y as each label's
    index among them (two labels: 0 and 1), float64, lazily for a nums-cloud y (its
    distinct values from one compute). Labels NaN or infinite give ``(None, y)``: the
    engine refuses them in scikit-learn's words, after X's."""
    if _is_lazy(y):
        classes = _lazy_classes(y)
    else:
        classes = np.unique(y)
    if classes.dtype.kind == "f":
        if not np.isfinite(classes).all():
            return None, y
        if np.any(classes != np.floor(classes)):
            raise ValueError(_CONTINUOUS)
    elif classes.dtype.kind == "c":
        raise ValueError(_CONTINUOUS)
    if len(classes) < 2:
        raise ValueError("This solver needs samples of at least 2 classes in the data, but "
                         f"the data contains only one class: {classes[0]!r}")
    if len(classes) > 2:
        # The index of each label among the sorted classes.
        if _is_lazy(y):
            from .. import numpy as nps

            return classes, nps.searchsorted(classes, y).astype(np.float64)
        return classes, np.searchsorted(classes, y).astype(np.float64)
    return classes, (y == classes[1]).astype(np.float64)


def _lazy_classes(y):
    """``np.unique`` of a nums-cloud y. Labels of one or two finite values (what a binary
    classifier is given) from one compute of their least, their greatest and how many
    are neither, which sorts nothing (sorting 2M labels took 0.4-0.8 s of a 4-5 s
    cross-validation fold); any other y from ``nps.unique``."""
    from .. import numpy as nps

    if y.shape[0] > 0 and y.dtype.kind in "biuf":
        lo, hi = y.min(), y.max()
        neither = ((y != lo) & (y != hi)).sum()
        lo, hi, others = (np.asarray(v) for v in _array_values(lo, hi, neither))
        finite = y.dtype.kind != "f" or (np.isfinite(lo) and np.isfinite(hi))
        if finite and others == 0:
            return np.array([lo] if lo == hi else [lo, hi], dtype=lo.dtype)
    return np.asarray(nps.unique(y).get())


def _class_weight_vector(class_weight, classes, y01, sample_weight, X):
    """scikit-learn's ``compute_class_weight``: the weight of each of ``classes``
    (``"balanced"``: from the class counts, weighted by ``sample_weight``); ``y01`` the
    labels' indices among the classes."""
    if isinstance(class_weight, str) and class_weight == "balanced" and len(classes) > 2:
        k = len(classes)
        if _is_lazy(y01) or _is_lazy(sample_weight):
            y = _array.asarray(y01, session=X._s)
            sw = 1.0 if sample_weight is None else _array.asarray(
                sample_weight, session=X._s).astype(np.float64)
            counts = np.array([float(v) for v in _array_values(
                *[((y == c) * sw).sum() for c in range(k)])])
        else:
            sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
            counts = np.bincount(y01.astype(np.intp), weights=sw, minlength=k)
        with np.errstate(divide="ignore"):
            return counts.sum() / (k * counts)
    if isinstance(class_weight, str) and class_weight == "balanced":
        if _is_lazy(y01) or _is_lazy(sample_weight):
            y = _array.asarray(y01, session=X._s)
            if sample_weight is None:
                total, ones = float(X.shape[0]), float(y.sum())
            else:
                sw = _array.asarray(sample_weight, session=X._s).astype(np.float64)
                total, ones = (float(v) for v in _array_values(sw.sum(), (sw * y).sum()))
        else:
            sw = np.ones(len(y01)) if sample_weight is None else np.asarray(
                sample_weight, dtype=np.float64)
            total, ones = float(sw.sum()), float(sw @ y01)
        with np.errstate(divide="ignore"):
            return total / (2 * np.array([total - ones, ones]))
    if not isinstance(class_weight, dict):
        raise ValueError("The 'class_weight' parameter of LogisticRegression must be an "
                         "instance of 'dict', a str among {'balanced'} or None. Got "
                         f"{class_weight!r} instead.")
    weight = np.ones(len(classes))
    unweighted = []
    for i, c in enumerate(classes):
        try:
            c = int(c)
        except ValueError:  # strings
            c = str(c)
        if c in class_weight:
            weight[i] = class_weight[c]
        else:
            unweighted.append(c)
    if unweighted and len(classes) - len(unweighted) != len(class_weight):
        raise ValueError(f"The classes, {np.array(unweighted).tolist()}, are not in "
                         "class_weight")
    return weight


def _class_weighted(class_weight, classes, y01, sample_weight, X):
    """``sample_weight`` times each row's class weight (scikit-learn multiplies them);
    unchanged without ``class_weight``, or for weights the engine refuses for their
    shape."""
    if class_weight is None or (isinstance(class_weight, dict) and not class_weight):
        return sample_weight
    if np.ndim(sample_weight) == 0 and not _is_lazy(sample_weight):
        # A number weighs every row alike: no class's share changes.
        scale = 1.0 if sample_weight is None else float(sample_weight)
        sample_weight = None
    elif tuple(np.shape(sample_weight)) != (X.shape[0],):
        return sample_weight
    else:
        scale = 1.0
    weight = _class_weight_vector(class_weight, classes, y01, sample_weight, X) * scale
    if len(classes) > 2:
        # Each row's class's weight (y01: the class indices).
        if _is_lazy(y01) or _is_lazy(sample_weight):
            from .. import numpy as nps

            yk = _array.asarray(y01, session=X._s)
            rows = nps.where(yk == 0.0, weight[0], weight[1])
            for c in range(2, len(classes)):
                rows = nps.where(yk == float(c), weight[c], rows)
        else:
            rows = weight[y01.astype(np.intp)]
        if sample_weight is None:
            return rows
        if _is_lazy(rows):
            return _array.asarray(sample_weight, session=X._s).astype(np.float64) * rows
        return np.asarray(sample_weight, dtype=np.float64) * rows
    w0, w1 = weight
    if _is_lazy(y01) or _is_lazy(sample_weight):
        from .. import numpy as nps

        rows = nps.where(_array.asarray(y01, session=X._s) == 1.0, w1, w0)
        if sample_weight is None:
            return rows
        return _array.asarray(sample_weight, session=X._s).astype(np.float64) * rows
    rows = np.where(y01 == 1.0, w1, w0)
    if sample_weight is None:
        return rows
    return np.asarray(sample_weight, dtype=np.float64) * rows


class Ridge(_Estimator):
    """Linear least squares with L2 regularization (scikit-learn's ``Ridge``), from the
    normal equations in one pass over X and y.

    Parameters
    ----------
    alpha : float, default 1.0
        Regularization strength (0: ordinary least squares).
    fit_intercept : bool, default True
    copy_X : ignored
        X is never modified.
    """

    _estimator_type = "regressor"

    def __init__(self, alpha=1.0, *, fit_intercept=True, copy_X=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.copy_X = copy_X

    max_iter = 1

    def _model(self):
        """The engine's model and its keywords."""
        return "ridge", {"alpha": self.alpha, "fit_intercept": self.fit_intercept}

    def fit(self, X, y, sample_weight=None):
        """Fit the model to X (n_samples, n_features) and y, each row weighted by
        ``sample_weight``; returns the estimator."""
        X, y = self._data(X, y)
        model, kw = self._model()
        fit = self._fit(model, X, y, sample_weight, **kw)
        self.coef_ = np.array(fit["coef"])
        self.intercept_ = float(fit["intercept"])
        self._fitted(X, fit)
        return self

    def predict(self, X):
        """Predict using the linear model."""
        return self._linear(X)

    def score(self, X, y, sample_weight=None):
        """The coefficient of determination R^2 of the prediction (weighted by
        ``sample_weight``, as scikit-learn's ``r2_score``)."""
        p = self.predict(X)
        y, w, _ = _scored(p, y, sample_weight)
        ybar = (w * y).sum() / w.sum()
        res, tot = _sums(p, (w * (y - p) ** 2).sum(), (w * (y - ybar) ** 2).sum())
        return 1.0 - res / tot if tot != 0 else (1.0 if res == 0 else 0.0)


def _scored(p, y, sample_weight):
    """y and the weights (1 without them) as float64 arrays of the prediction's kind
    (nums-cloud beside a lazy prediction, NumPy otherwise), and that kind's namespace."""
    if _is_lazy(p):
        from .. import numpy as nps

        y = _array.asarray(y, session=p._s).astype(np.float64)
        w = 1.0 + 0.0 * y if sample_weight is None else _array.asarray(
            sample_weight, session=p._s).astype(np.float64)
        return y, w, nps
    y = np.asarray(y, dtype=np.float64)
    w = np.ones_like(y) if sample_weight is None else np.asarray(sample_weight,
                                                                  dtype=np.float64)
    return y, w, np


def _sums(p, *values):
    """Scores' sums as floats: computed in one plan beside a lazy prediction."""
    if _is_lazy(p):
        return tuple(float(v) for v in _array_values(*values))
    return tuple(float(v) for v in values)


class LinearRegression(Ridge):
    """Ordinary least squares (scikit-learn's ``LinearRegression``, NumS's too): a
    :class:`Ridge` without a penalty.

    Parameters
    ----------
    fit_intercept : bool, default True
    copy_X : ignored
        X is never modified.
    n_jobs : ignored
        The engine decides the parallelism (the session's workers).
    """

    def __init__(self, *, fit_intercept=True, copy_X=True, n_jobs=None):
        self.fit_intercept = fit_intercept
        self.copy_X = copy_X
        self.n_jobs = n_jobs

    def _model(self):
        return "linear_regression", {"fit_intercept": self.fit_intercept}


class PoissonRegression(_Estimator):
    """Poisson regression with a log link and an L2 penalty (scikit-learn's
    ``PoissonRegressor``, NumS's ``PoissonRegression``), for counts y >= 0.

    Parameters
    ----------
    alpha : float, default 1.0
        L2 penalty strength (0: none).
    fit_intercept : bool, default True
    solver : str, default "lbfgs"
        As :class:`LogisticRegression`'s.
    max_iter : int, default 100
    tol : float, default 1e-4
        As :class:`LogisticRegression`'s. With an intercept, ``y`` all 0 has no best fit
        (the intercept falls without bound) and is refused.
    warm_start : bool, default False
        Only False: each fit starts from zero.
    verbose : int, default 0
        Ignored: the session's progress bar reports a fit's passes.
    """

    _estimator_type = "regressor"

    def __init__(self, *, alpha=1.0, fit_intercept=True, solver="lbfgs", max_iter=100,
                 tol=1e-4, warm_start=False, verbose=0):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol
        self.warm_start = warm_start
        self.verbose = verbose

    def fit(self, X, y, sample_weight=None):
        """Fit the model to X (n_samples, n_features) and counts y, each row weighted by
        ``sample_weight``; returns the estimator."""
        _no_warm_start(self)
        X, y = self._data(X, y)
        fit = self._fit("poisson_regression", X, y, sample_weight, alpha=self.alpha,
                        solver=self.solver, tol=self.tol, max_iter=self.max_iter,
                        fit_intercept=self.fit_intercept)
        self.coef_ = np.array(fit["coef"])
        self.intercept_ = float(fit["intercept"])
        self._fitted(X, fit)
        return self

    def predict(self, X):
        """The expected counts: ``exp(X @ coef_ + intercept_)``."""
        z = self._linear(X)
        if _is_lazy(z):
            from .. import numpy as nps

            return nps.exp(z)
        return np.exp(z)

    def score(self, X, y, sample_weight=None):
        """D^2, the fraction of Poisson deviance explained (scikit-learn's score; weighted
        by ``sample_weight``)."""
        mu = self.predict(X)
        y, w, ns = _scored(mu, y, sample_weight)
        ybar = (w * y).sum() / w.sum()

        def dev(m):
            with np.errstate(divide="ignore", invalid="ignore"):
                term = ns.where(y > 0, y * ns.log(ns.where(y > 0, y, 1.0) / m), 0.0)
            return 2.0 * (w * (term - y + m)).sum()

        d, d0 = _sums(mu, dev(mu), dev(ybar + 0.0 * y))
        return 1.0 - d / d0


PoissonRegressor = PoissonRegression


def _array_values(*arrays):
    """The values of several nums-cloud arrays, computed in one plan."""
    from ..numpy import get

    return get(*arrays)
