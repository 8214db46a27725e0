"""``nums_cloud.preprocessing``: scikit-learn's ``StandardScaler`` over nums-cloud arrays,
usable in a ``sklearn.pipeline.Pipeline`` before the estimators of
:mod:`nums_cloud.models`."""

import numpy as np

from .models import _Estimator, _array_values, _is_lazy
from .numpy import _array

__all__ = ["StandardScaler"]


class StandardScaler(_Estimator):
    """Standardize features by removing the mean and scaling to unit variance
    (scikit-learn's ``StandardScaler``): ``z = (x - mean_) / scale_``.

    ``fit`` computes every column's mean, population variance (``ddof=0``, as
    scikit-learn's) and count of values in one compute; NaN values are left out of them
    and kept by ``transform``, as scikit-learn's. A column of zero variance (within its
    rounding) is scaled by 1. ``transform`` and ``inverse_transform`` of a nums-cloud
    array are lazy nums-cloud arrays; of a NumPy array, NumPy arrays.

    Parameters
    ----------
    copy : ignored
        The input is never modified.
    with_mean : bool, default True
        Center the columns.
    with_std : bool, default True
        Scale the columns to unit variance.

    Attributes
    ----------
    mean_, var_, scale_ : ndarray of shape (n_features,) or None
        None where ``with_mean`` and ``with_std`` leave them out, as scikit-learn's.
    n_samples_seen_ : int or ndarray
        Values of each column (an array when NaN makes them differ).
    n_features_in_ : int
    """

    _estimator_type = None

    def __init__(self, *, copy=True, with_mean=True, with_std=True):
        self.copy = copy
        self.with_mean = with_mean
        self.with_std = with_std

    def __sklearn_tags__(self):  # pragma: no cover (scikit-learn >= 1.6 asks)
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags

        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags(), input_tags=InputTags(allow_nan=True))

    def fit(self, X, y=None, sample_weight=None):
        """Compute the mean and standard deviation of each column of X (one compute);
        returns the scaler."""
        if sample_weight is not None:
            raise ValueError("StandardScaler.fit: sample_weight is not supported")
        from . import numpy as nps

        X = _array.asarray(X)
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        if X.dtype != np.float64:
            X = X.astype(np.float64)
        n = X.shape[0]
        nans = nps.isnan(X).sum(axis=0)
        if self.with_mean or self.with_std:
            mean, var, nans = _array_values(nps.nanmean(X, axis=0), nps.nanvar(X, axis=0), nans)
            self.mean_, self.var_ = np.asarray(mean), np.asarray(var)
        else:
            nans = _array_values(nans)
            self.mean_ = self.var_ = None
        counts = n - np.asarray(nans, dtype=np.int64)
        self.n_samples_seen_ = int(counts[0]) if (counts == counts[0]).all() else counts
        self.n_features_in_ = X.shape[1]
        if self.with_std:
            # scikit-learn's test of a constant column: a variance within its rounding.
            eps = np.finfo(np.float64).eps
            constant = self.var_ <= counts * eps * self.var_ + (counts * self.mean_ * eps) ** 2
            self.scale_ = np.where(constant, 1.0, np.sqrt(self.var_))
        else:
            self.var_ = self.scale_ = None
        return self

    def _checked(self, X):
        if not hasattr(self, "n_features_in_"):
            raise AttributeError("This StandardScaler instance is not fitted yet. Call 'fit' "
                                 "with appropriate arguments first.")
        if not _is_lazy(X):
            X = np.asarray(X, dtype=np.float64)
        elif X.dtype != np.float64:
            X = X.astype(np.float64)
        if X.ndim != 2:
            raise ValueError(f"Expected 2D array, got {X.ndim}D array instead")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features, but StandardScaler is expecting "
                             f"{self.n_features_in_} features as input.")
        return X

    def _vector(self, v, X):
        return _array.asarray(v, session=X._s) if _is_lazy(X) else v

    def transform(self, X, copy=None):
        """``(X - mean_) / scale_`` (as ``with_mean`` and ``with_std`` ask): lazy for a
        nums-cloud X."""
        X = self._checked(X)
        if self.with_mean:
            X = X - self._vector(self.mean_, X)
        if self.with_std:
            X = X / self._vector(self.scale_, X)
        return X

    def inverse_transform(self, X, copy=None):
        """``X * scale_ + mean_``: the data ``transform`` was given, lazy for a nums-cloud
        X."""
        X = self._checked(X)
        if self.with_std:
            X = X * self._vector(self.scale_, X)
        if self.with_mean:
            X = X + self._vector(self.mean_, X)
        return X

    def fit_transform(self, X, y=None, **fit_params):
        """``fit(X).transform(X)``."""
        return self.fit(X, y, **fit_params).transform(X)
