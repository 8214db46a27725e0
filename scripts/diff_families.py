"""Issue 39's families for scripts/diff_numpy.py: random cases of the functions the last
wave added, over inputs of their own (every one of the 13 dtypes, 1-D and 2-D, ragged
blocks, empty and one-element arrays; NaN, -0.0, infinities, subnormals, each dtype's
limits, ties):

- sort:     sort/argsort (axis, stable, descending), x[argsort(x)]
- search:   searchsorted of Python numbers inside and outside the dtype's range, NumPy
            scalars and arrays of other dtypes, both sides
- unique:   unique (return_index/inverse/counts, equal_nan), unique_values/_counts/
            _inverse/_all, isin (complex, NaN, signed zeros)
- quantile: quantile/percentile/median and the nan variants, every method, axis,
            keepdims, float32 and ints (q out of range, bool and complex refused)
- stats:    histogram (bins, range, density, weights), bincount, cov, corrcoef,
            average (weights, returned), ptp
- scan:     cumsum/cumprod/nancumsum/nancumprod/cumulative_sum/cumulative_prod/diff
            across ragged blocks, with overflow and underflow, dtype=
- index:    boolean masks (1-D and of several axes) and integer-array indexing (out of
            range ones too)
- set:      x.at[i].set(v) with values outside the dtype (job language only)
- dtype:    the 13 dtypes' promotion with Python numbers, NumPy scalars and each other

Each case is a dict: expr (the job language's text), ref (the text NumPy evaluates in the
job language's reference, default expr), py (the text the Python package evaluates, None
where it has no equivalent), level (0 bits, 1 ulps, 2 tolerance, "scan", "scanprod"),
family, bound (for "scan": the text of the sum of absolute values, the error bound's
scale), alt (True: when NumPy's answer differs, it is also compared with NumPy's over
long double inputs, to tell NumPy's own overflow from a wrong answer).

NumPy's reference is adjusted only where nums-cloud documents a choice NumPy leaves open
(REFERENCE below): sorts are stable (NumPy's default quicksort orders 0.0 and -0.0, and
ties of argsort, as it happens), the Array API's descending= (array_api_strict's: the
flipped stable sort of the flipped array), unique's representative of equal values is
the first one (NumPy's unique without return_index sorts unstably, so which of 0.0 and
-0.0 it keeps is unspecified), unique_values is sorted (README's difference)."""
import collections

import numpy as np

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32",
          "float64", "complex64", "complex128"]
X1 = {"bool": "xb", "int8": "xi8", "int16": "xi16", "int32": "xi32", "int64": "xi64", "uint8": "xu8",
      "uint16": "xu16", "uint32": "xu32", "uint64": "xu64", "float32": "xf32", "float64": "xf64",
      "complex64": "xz64", "complex128": "xz128"}
REAL1 = [X1[d] for d in DTYPES if not d.startswith("complex")]
NUM1 = [X1[d] for d in DTYPES if d != "bool" and not d.startswith("complex")]
X2 = {"float64": "gf64", "float32": "gf32", "int64": "gi64", "uint8": "gu8", "int8": "gi8", "bool": "gb",
      "complex128": "gz128"}
METHODS = ["inverted_cdf", "averaged_inverted_cdf", "closest_observation", "interpolated_inverted_cdf", "hazen",
           "weibull", "linear", "median_unbiased", "normal_unbiased", "lower", "higher", "midpoint", "nearest"]
NAN, INF = np.nan, np.inf
F64_POOL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, 2.5, -2.5, 3.0, 1e308, -1e308, 1.7976931348623157e308,
            5e-324, -5e-324, 1e-300, 2.2250738585072014e-308, 1e16, 0.1, 0.3, 9007199254740993.0]
F32_POOL = [NAN, INF, -INF, 0.0, -0.0, 1.0, -1.0, 0.5, 0.1, 0.2, 0.3, 0.2999, 3.4028235e38, -3.4028235e38, 1e-45,
            1.1754944e-38, 16777217.0, 2.5]
# Magnitudes whose sums overflow and whose products underflow, across blocks.
SCAN_POOL = [1e308, -1e308, 1.5e308, 1e200, -1e200, 1e-200, 1e-310, 5e-324, 2.0, 0.5, -1.0, 1.0, 1e16, -1e16, 3.0,
             0.1, INF, -INF, NAN, 0.0, -0.0]
# Python numbers for promotion and assignment: ints at every dtype's limits and past
# them (up to uint64's largest: past it nums-cloud refuses, as documented), floats past
# float32's range, complex, bools.
INT_LITS = ["0", "1", "-1", "2", "7", "127", "128", "-128", "-129", "255", "256", "300", "-300", "32767", "32768",
            "65535", "65536", "-32769", "2147483647", "2147483648", "4294967295", "4294967296", "-2147483649",
            "9223372036854775807", "-9223372036854775808", "9223372036854775808", "18446744073709551615",
            "-9223372036854775809", "9007199254740993"]
FLOAT_LITS = ["0.5", "-0.0", "2.5", "1e300", "-1e300", "3.4e38", "3.5e38", "1e-320", "np.nan", "np.inf", "-np.inf",
              "0.1", "1.5", "-7.5", "127.5", "1e20"]
COMPLEX_LITS = ["2j", "(1 + 2j)", "-1j", "(np.nan + 1j)"]
BOOL_LITS = ["True", "False"]
# NumPy scalars (strong in promotion): some out of their range, which NumPy's
# constructors refuse. The job language has no np.int8(5): its NumPy scalar is
# astype(5, 'int8') (a 0-d array, which promotes as a NumPy scalar does; it casts as
# astype does, so 300 wraps where np.int8(300) raises).
NP_SCALARS = [("int8", "5"), ("int8", "-3"), ("int8", "127"), ("uint8", "200"), ("uint8", "0"), ("int16", "300"),
              ("int16", "-32768"), ("uint16", "65535"), ("int32", "-7"), ("int32", "2147483647"),
              ("uint32", "4000000000"), ("int64", "-2"), ("int64", "9223372036854775807"),
              ("uint64", "18446744073709551615"), ("uint64", "3"), ("float32", "0.1"), ("float32", "3.4e38"),
              ("float32", "np.nan"), ("float64", "0.1"), ("float64", "-0.0"), ("float64", "1e300"),
              ("complex64", "(1 + 2j)"), ("complex128", "2j"), ("bool_", "True"), ("bool_", "False"), ("int8", "300"),
              ("uint8", "-1")]


def np_scalar(dtype, value):
    """(job text, Python text) of NumPy's scalar np.<dtype>(value)."""
    return f"astype({value}, '{dtype.rstrip('_')}')", f"np.{dtype}({value})"


# -- NumPy's reference where nums-cloud documents a choice NumPy leaves open --------------

def _flat(a, axis):
    a = np.asarray(a)
    return (a.ravel(), -1) if axis is None else (a, axis)


def sort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    """np.sort, stable (nums-cloud always is), with the Array API's descending= as
    array_api_strict computes it (equal values keep their order)."""
    np.sort(a, axis=axis, kind=kind, order=order, stable=stable)  # NumPy's refusals
    a, axis = _flat(a, axis)
    if descending:
        return np.flip(np.sort(np.flip(a, axis), axis=axis, kind="stable"), axis)
    return np.sort(a, axis=axis, kind="stable")


def argsort(a, axis=-1, kind=None, order=None, *, stable=None, descending=False):
    np.argsort(a, axis=axis, kind=kind, order=order, stable=stable)
    a, axis = _flat(a, axis)
    if descending:
        n = a.shape[axis]
        return n - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)
    return np.argsort(a, axis=axis, kind="stable")


def unique(ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *, equal_nan=True,
           sorted=True):  # noqa: A002 - NumPy's name
    """np.unique whose values are the first of equal ones (its stable sort, as with
    return_index): which of 0.0 and -0.0 NumPy keeps otherwise is its quicksort's."""
    res = np.unique(ar, return_index=True, return_inverse=return_inverse, return_counts=return_counts, axis=axis,
                    equal_nan=equal_nan, sorted=sorted)
    out = [res[0]] + ([res[1]] if return_index else []) + list(res[2:])
    return out[0] if len(out) == 1 else tuple(out)


UniqueCounts = collections.namedtuple("UniqueCountsResult", "values counts")
UniqueInverse = collections.namedtuple("UniqueInverseResult", "values inverse_indices")
UniqueAll = collections.namedtuple("UniqueAllResult", "values indices inverse_indices counts")


def unique_values(x):
    return unique(x, equal_nan=False)  # sorted here (README's difference)


def unique_counts(x):
    v, _, c = unique(x, True, False, True, equal_nan=False)
    return UniqueCounts(v, c)


def unique_inverse(x):
    v, _, inv = unique(x, True, True, equal_nan=False)
    return UniqueInverse(v, inv.reshape(np.shape(x)))


def unique_all(x):
    v, i, inv, c = unique(x, True, True, True, equal_nan=False)
    return UniqueAll(v, i, inv.reshape(np.shape(x)), c)


def _set(x, index, value):
    """The job language's x.at[index].set(value): NumPy's y = x.copy(); y[index] = value."""
    y = np.array(x, copy=True)
    y[index] = value
    return y


def astype(x, dtype):
    """The job language's astype(x, dtype): of a number a NumPy scalar (astype casts, so
    astype(300, 'int8') is np.int8(44)), as a function of numbers alone gives one. (A
    0-d array promotes the same, but NumPy assigns a float scalar as Python's float:
    an infinity into an int array raises, where a 0-d array casts.)"""
    r = np.asarray(x).astype(dtype)
    return r[()] if r.ndim == 0 else r


def _scalar_cast(x, dtype):
    """x cast element by element (NumPy's scalar loop): a float out of an int dtype's
    range is undefined in C, and NumPy's SIMD cast to uint32 gives 2147483648 where its
    scalar loop (arrays of 1 to 3 elements, the tail of longer ones) wraps."""
    x = np.asarray(x)
    with np.errstate(all="ignore"):
        return np.array([np.array([v]).astype(dtype)[0] for v in x.ravel()], dtype=dtype).reshape(x.shape)


CAST_REASON = ("a float outside the int dtype's range is undefined in C: NumPy's SIMD cast loop and its scalar "
               "loop (arrays of 1 to 3 elements, the tail of longer ones) give different values; element by "
               "element NumPy gives nums-cloud's")

REFERENCE = {"astype": astype, "_scalar_cast": _scalar_cast, "sort": sort, "argsort": argsort, "unique": unique, "unique_values": unique_values,
             "unique_counts": unique_counts, "unique_inverse": unique_inverse, "unique_all": unique_all,
             "_set": _set}


# -- the generator ---------------------------------------------------------------------

class Families:
    """One batch's family inputs (added to `inputs`, name -> (array, block)) and its
    cases, from a generator of their own seeded by (seed, batch, 39): the original
    generator's stream is untouched."""

    NAMES = ["sort", "search", "unique", "quantile", "stats", "scan", "index", "set", "dtype"]

    def __init__(self, seed, number, inputs):
        self.rng = rng = np.random.default_rng([seed, number, 39])
        self.inputs = inputs
        self.n = n = int(rng.choice([0, 1, int(rng.integers(2, 9)), int(rng.integers(2, 41))], p=[0.04, 0.06, 0.45,
                                                                                                  0.45]))
        self.r = r = int(rng.choice([0, 1, int(rng.integers(2, 8))], p=[0.04, 0.1, 0.86]))
        self.c = c = int(rng.integers(1, 7))
        for d in DTYPES:
            self.add(X1[d], self.values(d, (n,)))
        for d, name in X2.items():
            self.add(name, self.values(d, (r, c)))
        self.add("xs", self.scan_values((n,)))
        self.add("gs", self.scan_values((r, c)))
        w = rng.random(n) * rng.choice([1.0, 10.0])
        w[rng.random(n) < 0.2] = 0.0
        kind = rng.choice(["plain"] * 8 + ["zero", "negative"])
        if kind == "zero":
            w[:] = 0.0
        elif kind == "negative" and n:
            w[rng.integers(n)] = -w.sum() if rng.random() < 0.5 else -1.0
        self.add("xw", w)
        self.add("gw", rng.random((r, c)) * (rng.random((r, c)) < 0.8))
        k = rng.integers(0, rng.choice([3, 8, 30]), size=n)
        if n and rng.random() < 0.1:
            k[rng.integers(n)] = -1
        self.add("xc", k.astype(np.int64))
        m = int(rng.integers(0, 9))
        j = rng.integers(-n, max(n, 1), size=m) if n else np.zeros(m, np.int64)
        if m and rng.random() < 0.1:
            j[rng.integers(m)] = rng.choice([n, -n - 1])
        self.add("xj", j.astype(np.int64))
        self.add("xm", rng.random(n) < 0.5)

    def add(self, name, a):
        block = [int(self.rng.integers(1, d + 1)) if d > 0 else 1 for d in a.shape]
        self.inputs[name] = (a, block)

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def chance(self, p):
        return self.rng.random() < p

    # -- values

    def values(self, dtype, shape):
        rng = self.rng
        d = np.dtype(dtype)
        if d == np.bool_:
            return rng.random(shape) < rng.choice([0.1, 0.5, 0.9])
        if d.kind in "iu":
            info = np.iinfo(d)
            mode = self.pick(["ties", "full", "mixed", "mixed"])
            if mode == "ties":
                a = rng.integers(max(int(info.min), -3), min(int(info.max), 4) + 1, size=shape)
                return a.astype(d)
            a = rng.integers(info.min, info.max, size=shape, dtype=d, endpoint=True)
            if mode == "mixed":
                special = np.array([info.min, info.max, info.min + 1, info.max - 1, 0, 1, 2] +
                                   ([-1] if d.kind == "i" else []), dtype=object).astype(d)
                at = rng.random(shape) < 0.35
                a[at] = rng.choice(special, size=int(at.sum()))
                small = rng.random(shape) < 0.2
                a[small] = rng.integers(0, 4, size=int(small.sum())).astype(d)
            return a
        if d.kind == "c":
            part = np.float32 if d == np.complex64 else np.float64
            with np.errstate(all="ignore"):
                return (self.values(part, shape).astype(d) + 1j * self.values(part, shape).astype(d)).astype(d)
        pool = F32_POOL if d == np.float32 else F64_POOL
        mode = self.pick(["ties", "normal", "mixed", "mixed", "extreme"])
        if mode == "ties":
            a = rng.choice([0.0, -0.0, 1.0, -1.0, 0.5, NAN, 2.5, INF], size=shape)
        elif mode == "extreme":
            a = rng.choice(pool, size=shape)
        else:
            a = rng.normal(size=shape) * rng.choice([1.0, 1e-3, 1e3])
            if mode == "mixed":
                at = rng.random(shape) < 0.3
                a[at] = rng.choice(pool, size=int(at.sum()))
        with np.errstate(all="ignore"):
            return a.astype(d)

    def scan_values(self, shape):
        rng = self.rng
        a = rng.choice(SCAN_POOL, size=shape)
        plain = rng.random(shape) < rng.choice([0.1, 0.4])
        a[plain] = rng.normal(size=int(plain.sum()))
        return a

    def first(self, name):
        a = self.inputs[name][0]
        return a.shape[0] if a.ndim else 0

    # -- cases

    def case(self):
        family = self.pick(self.NAMES)
        c = getattr(self, family)()
        c.setdefault("family", family)
        c.setdefault("ref", c["expr"])
        c.setdefault("py", c["expr"])
        c.setdefault("level", None)
        return c

    def any1(self, real=False):
        return self.pick(REAL1 if real else list(X1.values()))

    def any2(self, real=False):
        return self.pick([v for k, v in X2.items() if not (real and k.startswith("complex"))])

    def axis_arg(self, ndim, none=True, tuple_=False):
        opts = ["", ", axis=0", ", axis=-1"] + ([", axis=None"] if none else [])
        if ndim == 2:
            opts += [", axis=1", ", axis=1"] + ([", axis=(0, 1)"] if tuple_ else [])
        return self.pick(opts)

    def sort(self):
        two = self.chance(0.35)
        x = self.any2() if two else self.any1()
        if not two and self.chance(0.15):
            return {"expr": f"{x}[argsort({x}{self.pick(['', ', descending=True'])})]"}
        f = self.pick(["sort", "argsort"])
        args = self.axis_arg(2 if two else 1)
        if self.chance(0.4):
            args += ", descending=True"
        if self.chance(0.15):
            args += ", stable=True"
        elif self.chance(0.1):
            args += ", kind='stable'"
        return {"expr": f"{f}({x}{args})"}

    def number(self, dtype=None):
        """(job text, Python text) of a number: a Python one, or a NumPy scalar."""
        roll = self.rng.random()
        if roll < 0.3:
            return np_scalar(*self.pick(NP_SCALARS))
        if roll < 0.65:
            lit = self.pick(INT_LITS)
        elif roll < 0.9:
            lit = self.pick(FLOAT_LITS)
        elif roll < 0.96:
            lit = self.pick(BOOL_LITS)
        else:
            lit = self.pick(COMPLEX_LITS)
        return lit, lit

    def search(self):
        x = self.pick(REAL1 + REAL1 + ["xz128"])
        a = f"sort({x})"
        roll = self.rng.random()
        if roll < 0.6:
            v, pv = self.number()
        elif roll < 0.85:
            v = pv = self.any1(real=self.chance(0.9))
        else:
            v = pv = self.any2(real=True)
        side = self.pick(["", "", ", side='left'", ", side='right'"])
        return {"expr": f"searchsorted({a}, {v}{side})", "py": f"searchsorted({a}, {pv}{side})"}

    def unique(self):
        x = self.any2() if self.chance(0.25) else self.any1()
        roll = self.rng.random()
        if roll < 0.15:
            y = self.pick([self.any1(), self.any2()])
            return {"expr": f"isin({x}, {y}{self.pick(['', ', invert=True'])})"}
        k = self.rng.integers(4)
        form = self.pick([
            f"unique({x})", f"unique({x}, return_index=True)[1]", f"unique({x}, return_inverse=True)[1]",
            f"unique({x}, return_counts=True)[1]", f"unique({x}, equal_nan=False)",
            f"unique({x}, return_index=True, return_inverse=True, return_counts=True)[{k}]",
            f"unique({x}, return_counts=True, equal_nan=False)[1]",
            f"unique({x}, return_index=True, equal_nan=False)[1]",
            f"unique({x}, return_inverse=True, equal_nan=False)[0]",
            f"unique_values({x})", f"unique_counts({x}).values", f"unique_counts({x}).counts",
            f"unique_inverse({x}).values", f"unique_inverse({x}).inverse_indices", f"unique_all({x}).values",
            f"unique_all({x}).indices", f"unique_all({x}).inverse_indices", f"unique_all({x}).counts"])
        return {"expr": form}

    def quantile(self):
        f = self.pick(["quantile", "percentile", "nanquantile", "nanpercentile", "median", "nanmedian", "quantile",
                       "percentile"])
        two = self.chance(0.4)
        if two:
            x = self.pick(["gf64", "gf64", "gf32", "gi64", "gu8", "gi8", "gb", "gz128"])
        else:
            x = self.pick(["xf64", "xf64", "xf32", "xf32", "xi64", "xi64", "xi8", "xu8", "xu64", "xi16", "xu32",
                           "xb", "xz128", "xs"])
        args = ""
        if "median" not in f:
            q = self.pick(["0.5", "0", "1", "0.25", "0.3", "0.75", "0.999", "0.1", "[0.25, 0.5]", "(0.1, 0.9, 0.5)",
                           "[0.0, 1.0]", "0.3333333333333333", "1.5", "-0.1", "[[0.2, 0.4], [0.6, 0.8]]"])
            if "percentile" in f:
                q = q.replace("0.3333333333333333", "33.333333333333336")
                q = {"0.5": "50", "0": "0", "1": "100", "0.25": "25", "0.3": "30", "0.75": "75", "0.999": "99.9",
                     "0.1": "10", "[0.25, 0.5]": "[25, 50]", "(0.1, 0.9, 0.5)": "(10, 90, 50)",
                     "[0.0, 1.0]": "[0.0, 100.0]", "1.5": "150", "-0.1": "-10",
                     "[[0.2, 0.4], [0.6, 0.8]]": "[[20, 40], [60, 80]]"}.get(q, q)
            args = f", {q}"
        args += self.axis_arg(2 if two else 1, tuple_=True)
        if "median" not in f and self.chance(0.7):
            args += f", method='{self.pick(METHODS)}'"
        if self.chance(0.15):
            args += ", keepdims=True"
        return {"expr": f"{f}({x}{args})", "level": 1, "alt": True}

    def stats(self):
        sub = self.pick(["histogram", "histogram", "bincount", "cov", "corrcoef", "average", "average", "ptp"])
        return getattr(self, "stats_" + sub)()

    def stats_histogram(self):
        x = self.pick(["xf64", "xf64", "xf32", "xf32", "xi64", "xi8", "xu8", "gf64", "xu64", "xi16", "xb", "xs"])
        args = ""
        if self.chance(0.7):
            args += f", bins={self.pick([1, 2, 3, 4, 5, 7, 10, 12, 0])}"
        if self.chance(0.45):
            args += ", range=" + self.pick(["(-1, 1)", "(0, 0)", "(-0.5, 2.5)", "(1, 0)", "(0, np.inf)", "(-100, 100)",
                                            "(0.1, 0.3)", "(-1e300, 1e300)", "(-0.3, 0.3)", "(0, 255)",
                                            "(np.nan, 1)"])
        if self.chance(0.2):
            args += ", density=True"
        if self.chance(0.25):
            args += ", weights=" + ("gw" if x.startswith("g") else self.pick(["xw", "xw", "xi8", "xf32"]))
        part = self.pick([0, 0, 1])
        level = 1 if (part == 0 and "density" in args) else 2 if (part == 0 and "weights" in args) else 0
        return {"expr": f"histogram({x}{args})[{part}]", "level": level}

    def stats_bincount(self):
        x = self.pick(["xc", "xc", "xc", "xu8", "xi8", "xb", "xu16", "xf64", "xu64", "xi64", "xu32", "gu8"])
        args = ""
        if self.chance(0.35):
            args += ", weights=" + self.pick(["xw", "xf64", "xi8", "xb", "xf32", "xz128"])
        if self.chance(0.3):
            args += f", minlength={self.pick([0, 1, 5, 50])}"
        return {"expr": f"bincount({x}{args})", "level": 2 if "weights" in args else 0}

    def stats_cov(self, f="cov"):
        m = self.pick(["gf64", "gf64", "gf32", "gi64", "gz128", "gu8", "gb", "xf64", "xf32", "xi64", "xz128", "xs"])
        args = ""
        if self.chance(0.25):
            args += ", " + (self.pick(["gf64", "gi64", "gf32"]) if m.startswith("g") else
                            self.pick(["xf64", "xi8", "xf32", "xu64"]))
        if self.chance(0.3):
            args += ", rowvar=False"
        if f == "cov":
            if self.chance(0.2):
                args += ", bias=True"
            if self.chance(0.2):
                args += f", ddof={self.pick([0, 1, 2, 3])}"
        return {"expr": f"{f}({m}{args})", "level": 2, "fragile": True}

    def stats_corrcoef(self):
        return self.stats_cov("corrcoef")

    def stats_average(self):
        two = self.chance(0.4)
        if two:
            a = self.pick(["gf64", "gf32", "gi64", "gu8", "gz128", "gb"])
            axis = self.pick(["", ", axis=None", ", axis=0", ", axis=1", ", axis=-1"])
            w = self.pick(["", "gw", "gw", "gw[:, 0]", "gw[0]"])
            if w == "gw[:, 0]":
                axis = ", axis=0"
            elif w == "gw[0]":
                axis = self.pick([", axis=1", ", axis=-1"])
        else:
            a = self.pick(["xf64", "xf64", "xf32", "xi64", "xi8", "xu8", "xb", "xz128", "xs"])
            axis = self.pick(["", ", axis=0", ", axis=None"])
            w = self.pick(["", "xw", "xw", "xf32", "xi8", "xb"])
        args = axis + (f", weights={w}" if w else "")
        tail = ""
        if self.chance(0.25):
            args += ", returned=True"
            tail = f"[{self.pick([0, 1])}]"
        if self.chance(0.1):
            args += ", keepdims=True"
        return {"expr": f"average({a}{args}){tail}", "level": 2, "fragile": True}

    def stats_ptp(self):
        two = self.chance(0.4)
        x = self.any2(real=True) if two else self.any1(real=True)
        return {"expr": f"ptp({x}{self.axis_arg(2 if two else 1)})"}

    def scan(self):
        f = self.pick(["cumsum", "cumprod", "nancumsum", "nancumprod", "cumulative_sum", "cumulative_prod", "diff",
                       "cumsum", "cumprod"])
        two = self.chance(0.35)
        if two:
            x = self.pick(["gs", "gs", "gf64", "gi64", "gu8", "gi8", "gf32", "gb", "gz128"])
        else:
            x = self.pick(["xs", "xs", "xs", "xf64", "xf32", "xi8", "xu8", "xi16", "xi32", "xi64", "xu64", "xb",
                           "xz128", "xz64", "xu16"])
        if f == "diff":
            args = f", n={self.pick([0, 1, 1, 2, 3])}" if self.chance(0.6) else ""
            args += self.pick(["", ", axis=0", ", axis=-1"] + ([", axis=1"] if two else []))
            if self.chance(0.25):
                args += f", prepend={self.pick(['0', '1e308', 'np.nan', '-1', '300'])}"
            if self.chance(0.25):
                args += f", append={self.pick(['0', '-1e308', '2.5', '255'])}"
            return {"expr": f"diff({x}{args})"}
        axis = self.pick(["", ", axis=0", ", axis=-1"] + ([", axis=1", ", axis=1"] if two else []))
        args = axis
        if self.chance(0.2):
            args += f", dtype='{self.pick(['int8', 'uint8', 'int64', 'float32', 'float64', 'complex128', 'uint64'])}'"
        if f.startswith("cumulative") and self.chance(0.4):
            args += ", include_initial=True"
        expr = f"{f}({x}{args})"
        if "prod" in f:
            return {"expr": expr, "level": "scanprod"}
        # The running sums of each part's absolute values (NaN as 0: where the other
        # part is NaN, this one's sum goes on)
        base = "cumulative_sum" if f.startswith("cumulative") else "cumsum"
        init = ", include_initial=True" if "include_initial" in args else ""
        parts = (f"nan_to_num(abs(({x}).real).astype('float64')) + "
                 f"1j * nan_to_num(abs(({x}).imag).astype('float64'))")
        bound = f"{base}({parts}{axis}{init})"
        return {"expr": expr, "level": "scan", "bound": bound}

    def index(self):
        n = self.n
        two = self.chance(0.4)
        if two:
            g = self.any2()
            r, c = self.r, self.c
            i = self.position
            lo = self.pick(["0", "0.5", "np.nan", "-1"]) if g != "gb" else "False"
            form = self.pick([f"{g}[{g} > {lo}]", f"{g}[{g}[:, 0] > {lo}]" if c else f"{g}[{g} > {lo}]",
                              f"{g}[:, {g}[0] > {lo}]" if r else f"{g}[{g} > {lo}]",
                              f"{g}[{g}[:, 0] > {lo}, 1:]", f"{g}[[{i(r)}, {i(r)}]]", f"{g}[:, [{i(c)}, {i(c)}]]",
                              f"{g}[[{i(r)}, {i(r)}], [{i(c)}, {i(c)}]]", f"{g}[{i(r)}, [{i(c)}, {i(c)}]]",
                              f"{g}[xj]", f"{g}[:, xj]", f"{g}[{g} > {lo}][::-1]", f"{g}[~({g} > {lo})]",
                              f"{g}[xm]" if n == r else f"{g}[{g}[:, -1] > {lo}]"])
            return {"expr": form}
        x = self.any1()
        lo = self.pick(["0", "0.5", "np.nan", "-1"]) if x != "xb" else "False"
        i = lambda: self.position(n)  # noqa: E731
        bools = ", ".join(self.pick(["True", "False"]) for _ in range(n + (self.pick([0, 0, 0, 1, -1]) if n else 0)))
        form = self.pick([f"{x}[{x} > {lo}]", f"{x}[xm]", f"{x}[~xm]", f"{x}[xj]", f"{x}[[{i()}, {i()}, {i()}]]",
                          f"{x}[[{i()}]]", f"{x}[[{bools}]]" if bools else f"{x}[xm]", f"{x}[flatnonzero(xm)]",
                          f"{x}[{x} > {lo}][::-1]", f"{x}[xm][xj]", f"{x}[xj][xj]", f"{x}[::-1][xj]",
                          f"take({x}, [{i()}, {i()}])", f"{x}[argsort(xs)]", f"{x}[xc]"])
        return {"expr": form}

    def position(self, m):
        """An index into an axis of length m: mostly in range, negative too, sometimes
        just past either end (IndexError)."""
        if self.chance(0.08) or not m:
            return self.pick([m, -m - 1])
        return int(self.rng.integers(-m, m))

    def set(self):
        n = self.n
        two = self.chance(0.3)
        if two:
            x = self.any2()
            r, c = self.r, self.c
            idx = self.pick(["0", "-1", ":, 0", ":, -1", "1:, ::2", f"{self.pick([0, -1, r])}, {self.pick([0, c])}",
                             f"{x} > 0" if x != "gb" else x, f"{x}[:, 0] > 0" if x != "gb" else f"{x}[:, 0]",
                             "[0, 0]", "[-1, 0]", "..., 0", ":"])
        else:
            x = self.any1()
            idx = self.pick(["0", "-1", str(n), "1:", "::2", ":", "[0, 0, 1]", "[-1, 0]", "xm", "xj",
                             f"{x} > 0" if x != "xb" else x, "...", "1:-1", f"-{n + 1}"])
        roll = self.rng.random()
        if roll < 0.35:
            v = self.pick(["0", "1", "-1", "7", "0.5", "-0.0", "2.5", "-7.5", "True", "np.nan", "np.inf", "100"])
        elif roll < 0.75:
            v = self.pick(INT_LITS + INT_LITS + FLOAT_LITS + FLOAT_LITS + BOOL_LITS + COMPLEX_LITS)
        elif roll < 0.8:
            v = self.pick([self.any1(), self.any1(), "xs"]) + "[0]" if n else "0"
        elif roll < 0.85:
            v = np_scalar(*self.pick(NP_SCALARS))[0]
        else:
            # an array of another dtype, cast as NumPy casts (NaN and inf into ints too)
            v = self.pick([self.any1(), "xs"]) if not two else self.pick([self.any2(), "gs"])
            idx = self.pick([":", "...", ":"])
        expr = f"{x}.at[{idx}].set({v})"
        alt = (f"_set({x}, np.s_[{idx}], _scalar_cast({v}, {x}.dtype))", None, CAST_REASON)
        return {"expr": expr, "ref": f"_set({x}, np.s_[{idx}], {v})", "py": None, "alt": alt}

    def dtype(self):
        x = self.any1()
        if self.chance(0.15):
            # casts, as NumPy's astype and assignment cast (x86-64: out of range too)
            y = self.pick([x, "xs", "xf64", "xf32"])
            d = self.pick(DTYPES)
            alt = (f"_scalar_cast({y}, '{d}')", f"_scalar_cast({y}, '{d}')", CAST_REASON)
            return {"expr": f"{y}.astype('{d}')", "level": 1 if d.startswith("complex") else None, "alt": alt}
        roll = self.rng.random()
        if roll < 0.6:
            v, pv = self.number()
        else:
            v = pv = self.any1()
        op = self.pick(["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", ">=", "&", "|", "^", "<<", ">>",
                        "maximum", "minimum", "where", "clip", "+", "*", "-", "<"])
        boolish = lambda t: t in ("xb", "True", "False") or t.startswith("np.bool_") or "'bool'" in t  # noqa: E731
        if op in ("//", "%", "**") and boolish(x) and boolish(v):
            op = "+"  # int8 in NumPy, int64 here (documented)
        swap = self.chance(0.3)
        a, b, pa, pb = (v, x, pv, x) if swap else (x, v, x, pv)
        if op in ("maximum", "minimum"):
            return {"expr": f"{op}({a}, {b})", "py": f"{op}({pa}, {pb})", "level": self.level(x, v)}
        if op == "where":
            return {"expr": f"where(xm, {a}, {b})", "py": f"where(xm, {pa}, {pb})", "level": self.level(x, v)}
        if op == "clip":
            (lo, plo), (hi, phi) = self.number(), self.pick([("None", "None"), self.number()])
            c = {"expr": f"clip({x}, {lo}, {hi})", "py": f"clip({x}, {plo}, {phi})", "level": self.level(x, v)}
            if hi != "None":
                # NumPy drops a Python int bound outside the array's dtype, so with
                # lo > hi its clip gives lo where its documented definition gives hi.
                c["alt"] = (f"minimum(maximum({x}, {lo}), {hi})", f"minimum(maximum({x}, {plo}), {phi})",
                            "NumPy's clip ignores a Python int bound outside the dtype (here with lo > hi); "
                            "np.minimum(np.maximum(a, lo), hi), as its documentation defines clip, gives nums-cloud's")
            return c
        level = 1 if op == "**" else self.level(x, v)
        c = {"expr": f"({a} {op} {b})", "py": f"({pa} {op} {pb})", "level": level}
        if op == "**" and ("z64" in x + v or "complex64" in v):
            c["alt"] = "c128"
        return c

    @staticmethod
    def level(*names):
        """Complex results: within ulps (complex64 computes in complex128, rounded once)."""
        return 1 if any("z" in n or "j" in n or "complex" in n for n in names) else None


# -- past one invocation: the sample sort (memory_mb = 128) -------------------------------

LARGE_N = 1_500_000


def large_inputs(seed):
    rng = np.random.default_rng([seed, 1_500_000])
    x = rng.normal(size=LARGE_N)
    x[rng.integers(0, 97):: 97] = np.nan
    x[rng.integers(0, 101):: 101] = 0.5
    x[rng.integers(0, 89):: 89] = -0.0
    x[rng.integers(0, 83):: 83] = 0.0
    x[rng.integers(0, LARGE_N, 20)] = rng.choice([np.inf, -np.inf, 1e308, -1e308, 5e-324], 20)
    k = rng.integers(0, int(rng.choice([3, 40, 100000])), size=LARGE_N)
    k[rng.integers(0, LARGE_N, 10)] = rng.choice([np.iinfo(np.int64).min, np.iinfo(np.int64).max], 10)
    # Blocks of 200k and 300k elements: each sorts in one task, the whole does not.
    return {"big": (x, [200_003]), "bigk": (k, [300_007])}


def large_cases(seed, count):
    rng = np.random.default_rng([seed, 1_500_001])
    pool = ["sort(big)", "argsort(bigk)", "sort(bigk, descending=True)", "argsort(big, descending=True)",
            "argsort(big)", "sort(big, descending=True)", "median(bigk)", "median(big)", "nanmedian(big)",
            "unique(bigk, return_counts=True)[1]", "unique(big)", "unique(bigk, return_index=True)[1]",
            "searchsorted(sort(big), big[:1000])", "searchsorted(sort(bigk), 7, side='right')",
            "unique_inverse(bigk).inverse_indices[::1000]", "big[argsort(big)][::997]"]
    for m in METHODS:
        pool += [f"nanpercentile(big, (5, 50, 95), method='{m}')", f"quantile(bigk, 0.3, method='{m}')"]
    out = []
    for _ in range(count):
        e = pool[int(rng.integers(len(pool)))]
        level = 1 if any(w in e for w in ("median", "quantile", "percentile")) else None
        out.append({"expr": e, "ref": e, "py": e, "level": level, "family": "large", "alt": level == 1})
    return out
