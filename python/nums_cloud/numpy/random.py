"""``nums_cloud.numpy.random``: random arrays with NumS's names (``rand``, ``randn``,
``randint``, ``random_sample``, ``permutation``) and NumPy's ``default_rng(seed)``
generators.

The engine's generator is counter-based: the element at flat index *i* is a pure function
of (seed, *i*), so an array's values do not depend on its blocks, and arrays of any size
are made in parallel by the functions. The values differ from NumPy's generators'. Each
call draws a fresh seed from the module's stream (``seed(s)`` resets it) or from the
generator's own, so a program that seeds gets the same arrays every run."""

import operator

import numpy as _np

from .. import _session
from . import _array

__all__ = ["seed", "rand", "randn", "randint", "random_sample", "random", "sample",
           "ranf", "uniform", "normal", "standard_normal", "permutation", "choice", "default_rng",
           "Generator"]


def _shape(size):
    if size is None:
        return ()
    if isinstance(size, (list, tuple)):
        return tuple(operator.index(d) for d in size)
    return (operator.index(size),)


class Generator:
    """NumPy's ``Generator`` over nums-cloud's counter-based generator: its methods
    return lazy arrays (computed in parallel by the functions, or in this process when
    small), their seeds drawn from the generator's own stream."""

    def __init__(self, seed=None):
        self._seeds = _np.random.default_rng(seed)

    def _seed(self):
        return int(self._seeds.integers(0, 2**63 - 1))

    def _session(self):
        return _session.session()._native

    def random(self, size=None, dtype=_np.float64):
        """Return random floats in the half-open interval [0.0, 1.0)."""
        s = self._session()
        x = _array.BlockArray(s.random("uniform", list(_shape(size)), self._seed()), s)
        return x if _np.dtype(dtype) == _np.float64 else x.astype(dtype)

    def standard_normal(self, size=None, dtype=_np.float64):
        """Draw samples from a standard Normal distribution (mean=0, stdev=1)."""
        s = self._session()
        x = _array.BlockArray(s.random("normal", list(_shape(size)), self._seed()), s)
        return x if _np.dtype(dtype) == _np.float64 else x.astype(dtype)

    def normal(self, loc=0.0, scale=1.0, size=None):
        """Draw random samples from a normal (Gaussian) distribution."""
        x = self.standard_normal(size)
        return x * scale + loc if (loc, scale) != (0.0, 1.0) else x

    def uniform(self, low=0.0, high=1.0, size=None):
        """Draw samples from a uniform distribution over [low, high)."""
        x = self.random(size)
        return x * (high - low) + low if (low, high) != (0.0, 1.0) else x

    def integers(self, low, high=None, size=None, dtype=_np.int64, endpoint=False):
        """Return random integers from ``low`` (inclusive) to ``high`` (exclusive, or
        inclusive with ``endpoint=True``); with ``high`` None, from 0 to ``low``."""
        if high is None:
            low, high = 0, low
        if endpoint:
            high += 1
        if high <= low:
            raise ValueError("high <= low")
        if _np.dtype(dtype) != _np.int64:
            raise TypeError("nums-cloud's random integers are int64")
        s = self._session()
        return _array.BlockArray(
            s.random("integers", list(_shape(size)), self._seed(), int(low), int(high)), s)

    def permutation(self, x):
        """Randomly permute a sequence, or return a permuted range.

        nums-cloud: the permutation is drawn by NumPy in this process (the engine has no
        sort) and becomes an input; an array is then indexed by it (along axis 0)."""
        n = operator.index(x) if not hasattr(x, "shape") else x.shape[0]
        perm = _np.random.default_rng(self._seed()).permutation(n).astype(_np.int64)
        if not hasattr(x, "shape"):
            return _array.asarray(perm)
        x = _array.asarray(x)
        return x[_array.asarray(perm, session=x._s)]

    def choice(self, a, size=None, replace=True, p=None, axis=0, shuffle=True):
        """Generates a random sample from a given array (its rows) or ``arange(a)``: with
        replacement, uniformly or with the probabilities ``p``; without, a random
        permutation's first ones. The engine's ``random.choice``."""
        if axis != 0:
            raise ValueError("nums-cloud's choice draws along axis 0")
        kw = {"replace": replace, "seed": self._seed()}
        if size is not None:
            kw["size"] = _shape(size)
        if p is not None:
            kw["p"] = p
        return _array.call("random.choice", (a,), kw)

    def shuffle(self, x):
        """Modify an array in place by shuffling its contents along axis 0 (the array
        becomes ``permutation(x)``)."""
        if not isinstance(x, _array.BlockArray):
            raise TypeError("shuffle() changes a nums-cloud array in place; "
                            f"not {type(x).__name__}")
        x._become(self.permutation(x))


_global = Generator()


def seed(seed=None):
    """Seed the module's stream: the arrays drawn after it are the same every run."""
    global _global
    _global = Generator(seed)


def default_rng(seed=None):
    """Construct a new Generator (NumPy's ``default_rng``): the same seed gives the same
    arrays."""
    return Generator(seed)


def rand(*shape):
    """Random values in a given shape, uniform over [0, 1) (NumS's and NumPy's
    ``rand``)."""
    return _global.random(shape)


def randn(*shape):
    """Samples from the standard normal distribution in a given shape."""
    return _global.standard_normal(shape)


def randint(low, high=None, size=None, dtype=_np.int64):
    """Random integers from ``low`` (inclusive) to ``high`` (exclusive)."""
    return _global.integers(low, high, size, dtype)


def random_sample(size=None):
    """Random floats in the half-open interval [0.0, 1.0)."""
    return _global.random(size)


random = ranf = sample = random_sample


def uniform(low=0.0, high=1.0, size=None):
    """Samples from a uniform distribution over [low, high)."""
    return _global.uniform(low, high, size)


def normal(loc=0.0, scale=1.0, size=None):
    """Random samples from a normal (Gaussian) distribution."""
    return _global.normal(loc, scale, size)


def standard_normal(size=None):
    """Samples from a standard Normal distribution (mean=0, stdev=1)."""
    return _global.standard_normal(size)


def choice(a, size=None, replace=True, p=None):
    """Generates a random sample from a given array or ``arange(a)`` (see
    :meth:`Generator.choice`)."""
    return _global.choice(a, size, replace, p)


def permutation(x):
    """Randomly permute a sequence, or return a permuted range (see
    :meth:`Generator.permutation`)."""
    return _global.permutation(x)
