"""``nums_cloud.models``: the generalized linear models the engine fits, as
scikit-learn's estimators (``fit`` returns the estimator; ``predict``, ``predict_proba``
where it applies, ``score``; ``coef_``, ``intercept_``, ``n_iter_``), with scikit-learn's
and NumS's parameter names.

A fit runs in the engine: X and y are made once, then each iteration is one pass over
them by the functions (or in this process when they are small), and the driver takes the
step, so X and y of any size fit. X and y may be nums-cloud arrays or NumPy arrays (or
anything NumPy makes an array of). Predictions of a nums-cloud array are lazy nums-cloud
arrays; of a NumPy array, NumPy arrays."""

import inspect
import warnings

import numpy as np

from .numpy import _array

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
        X = _array.asarray(X)
        y = _array.asarray(y, session=X._s)
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        if y.ndim != 1:
            raise ValueError(f"y should be a 1d array, got an array of shape {y.shape}")
        if y.shape[0] != X.shape[0]:
            raise ValueError(f"Found input variables with inconsistent numbers of samples: "
                             f"[{X.shape[0]}, {y.shape[0]}]")
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        if y.dtype != np.float64:
            y = y.astype(np.float64)
        return X, y

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
    """Logistic regression (scikit-learn's ``LogisticRegression``, NumS's too): binary
    labels 0 and 1, an L2 penalty of strength ``1 / C`` (or none), fitted by L-BFGS or
    Newton's method to scikit-learn's objective, so the coefficients are
    scikit-learn's.

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
    random_state : ignored
        The fit is deterministic.
    """

    _estimator_type = "classifier"

    def __init__(self, penalty="l2", *, C=1.0, tol=1e-4, max_iter=100, solver="lbfgs",
                 fit_intercept=True, random_state=None):
        self.penalty = penalty
        self.C = C
        self.tol = tol
        self.max_iter = max_iter
        self.solver = solver
        self.fit_intercept = fit_intercept
        self.random_state = random_state

    def fit(self, X, y):
        """Fit the model to X (n_samples, n_features) and labels y (0 and 1); returns
        the estimator."""
        X, y = self._data(X, y)
        # The engine checks the parameters and knows the solvers' names.
        fit = X._s.fit("logistic_regression", X._a, y._a, penalty=self.penalty, C=self.C,
                       solver=self.solver, tol=self.tol, max_iter=self.max_iter,
                       fit_intercept=self.fit_intercept)
        self.coef_ = np.array([fit["coef"]])
        self.intercept_ = np.array([fit["intercept"]])
        self.classes_ = np.array([0, 1])
        self._fitted(X, fit)
        self.n_iter_ = np.array([fit["n_iter"]], dtype=np.int32)
        return self

    def decision_function(self, X):
        """Confidence scores: ``X @ coef_ + intercept_``."""
        return self._linear(X)

    def predict_proba(self, X):
        """Probability estimates of classes 0 and 1, one row per sample."""
        z = self._linear(X)
        if _is_lazy(z):
            from . import numpy as nps

            p = nps.sigmoid(z)
            return nps.stack([1.0 - p, p], axis=1)
        p = 1.0 / (1.0 + np.exp(-z))
        return np.stack([1.0 - p, p], axis=1)

    def predict(self, X):
        """Predicted class labels (0 or 1, int64) for the samples in X."""
        z = self._linear(X)
        return (z > 0).astype(np.int64)

    def score(self, X, y):
        """The mean accuracy on the given test data and labels."""
        p = self.predict(X)
        if _is_lazy(p):
            y = _array.asarray(y, session=p._s)
            return float((p == y).mean())
        return float(np.mean(p == np.asarray(y)))


class Ridge(_Estimator):
    """Linear least squares with L2 regularization (scikit-learn's ``Ridge``), from the
    normal equations in one pass over X and y.

    Parameters
    ----------
    alpha : float, default 1.0
        Regularization strength (0: ordinary least squares).
    fit_intercept : bool, default True
    """

    _estimator_type = "regressor"

    def __init__(self, alpha=1.0, *, fit_intercept=True):
        self.alpha = alpha
        self.fit_intercept = fit_intercept

    max_iter = 1

    def _model(self):
        """The engine's model and its keywords."""
        return "ridge", {"alpha": self.alpha, "fit_intercept": self.fit_intercept}

    def fit(self, X, y):
        """Fit the model to X (n_samples, n_features) and y; returns the estimator."""
        X, y = self._data(X, y)
        model, kw = self._model()
        fit = X._s.fit(model, X._a, y._a, **kw)
        self.coef_ = np.array(fit["coef"])
        self.intercept_ = float(fit["intercept"])
        self._fitted(X, fit)
        return self

    def predict(self, X):
        """Predict using the linear model."""
        return self._linear(X)

    def score(self, X, y):
        """The coefficient of determination R^2 of the prediction."""
        p = self.predict(X)
        if _is_lazy(p):
            y = _array.asarray(y, session=p._s).astype(np.float64)
            res = ((y - p) ** 2).sum()
            tot = ((y - y.mean()) ** 2).sum()
            res, tot = (float(v) for v in _array_values(res, tot))
        else:
            y = np.asarray(y, dtype=np.float64)
            res, tot = float(((y - p) ** 2).sum()), float(((y - y.mean()) ** 2).sum())
        return 1.0 - res / tot if tot != 0 else (1.0 if res == 0 else 0.0)


class LinearRegression(Ridge):
    """Ordinary least squares (scikit-learn's ``LinearRegression``, NumS's too): a
    :class:`Ridge` without a penalty.

    Parameters
    ----------
    fit_intercept : bool, default True
    """

    def __init__(self, *, fit_intercept=True):
        self.fit_intercept = fit_intercept

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
    """

    _estimator_type = "regressor"

    def __init__(self, *, alpha=1.0, fit_intercept=True, solver="lbfgs", max_iter=100,
                 tol=1e-4):
        self.alpha = alpha
        self.fit_intercept = fit_intercept
        self.solver = solver
        self.max_iter = max_iter
        self.tol = tol

    def fit(self, X, y):
        """Fit the model to X (n_samples, n_features) and counts y; returns the
        estimator."""
        X, y = self._data(X, y)
        fit = X._s.fit("poisson_regression", X._a, y._a, alpha=self.alpha,
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
            from . import numpy as nps

            return nps.exp(z)
        return np.exp(z)

    def score(self, X, y):
        """D^2, the fraction of Poisson deviance explained (scikit-learn's score)."""
        mu = self.predict(X)
        if _is_lazy(mu):
            from . import numpy as nps

            y = _array.asarray(y, session=mu._s).astype(np.float64)
            ybar = y.mean()

            def dev(m):
                term = nps.where(y > 0, y * nps.log(nps.where(y > 0, y, 1.0) / m), 0.0)
                return 2.0 * (term - y + m).sum()

            d, d0 = (float(v) for v in _array_values(dev(mu), dev(ybar + 0.0 * y)))
        else:
            y = np.asarray(y, dtype=np.float64)

            def dev(m):
                with np.errstate(divide="ignore", invalid="ignore"):
                    term = np.where(y > 0, y * np.log(np.where(y > 0, y, 1.0) / m), 0.0)
                return float(2.0 * (term - y + m).sum())

            d, d0 = dev(mu), dev(np.full_like(y, y.mean()))
        return 1.0 - d / d0


PoissonRegressor = PoissonRegression


def _array_values(*arrays):
    """The values of several nums-cloud arrays, computed in one plan."""
    from .numpy import get

    return get(*arrays)
