"""``nums_cloud.models.glms``: NumS's import path of its generalized linear models
(``from nums.models.glms import LogisticRegression``), the estimators of
:mod:`nums_cloud.models`."""

from . import (LinearRegression, LogisticRegression, PoissonRegression, PoissonRegressor,
               Ridge)

__all__ = ["LogisticRegression", "LinearRegression", "Ridge", "PoissonRegression",
           "PoissonRegressor"]
