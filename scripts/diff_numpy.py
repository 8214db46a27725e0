"""Differential test against NumPy (a script, not part of the test suite): thousands of
random expressions of the job language over random inputs (NaN, inf, -0.0, subnormals,
int64 limits, float32, bool; ragged blocks; empty and one-element arrays), run through the
real binary in batches (one job per batch, one output per expression), each compared with
NumPy evaluating the same text on the same inputs, its numbers as NumPy scalars as the job
language defines them (test_conformance.numpy_eval): dtype and shape always; the values bit
for bit (NaN as NaN, the sign of zeros) where NumPy is exact (arithmetic, comparisons,
min/max, indexing, casts, integer reductions), within a few ulps for its transcendental
functions and power, within a tolerance for float reductions, contractions and linear
algebra. An expression NumPy refuses is run alone and must fail too.

    .venv/bin/python scripts/diff_numpy.py                    # seed 1, 3000 expressions
    .venv/bin/python scripts/diff_numpy.py --seed 7 --count 10000
    .venv/bin/python scripts/diff_numpy.py --seed 7 --case 1234  # one case: its job, kept

Deterministic per seed (and --batch): case K is expression K % batch of batch K // batch,
whose inputs and expressions come from a generator seeded by (seed, batch). Prints the
seed, the count run and each mismatch with the command that reproduces it; exits 1 if any.
The binary is target/debug/nums-cloud (NUMS_CLOUD_BIN or --bin for another).

Issue 39's families (scripts/diff_families.py: sort/argsort, searchsorted, unique and its
variants, quantile/percentile/median, histogram/bincount/cov/corrcoef/average, scans
across ragged blocks, masks and integer-array indexing, x.at[i].set(v), the 13 dtypes'
promotion with Python numbers and NumPy scalars) make a share of the cases (--families,
0.5 by default; 0 gives the original generator's cases exactly), from a generator of
their own; --large N cases past one sort invocation (1.5M elements, memory_mb = 128: the
sample sort) run in a job of their own. With --python every case also runs through the
Python package in this process (nums_cloud.numpy, PYTHONPATH=python after its build),
compared with NumPy evaluating the same text as Python does: the same values, or the
same exception class where NumPy raises.

    PYTHONPATH=python .venv/bin/python scripts/diff_numpy.py --seed 3 --count 2000 --python
    .venv/bin/python scripts/diff_numpy.py --seed 3 --families 1 --count 1000 --large 3

Differences that are NumPy's own are listed apart, not counted as mismatches, each with
its reason: a case is one when nums-cloud's answer is what NumPy itself computes another
way (see numpy_bug): its quantiles interpolate, and its medians average, in the input's
dtype (int8 and int64 wrap, float32 and float64 overflow; over long double inputs NumPy
gives nums-cloud's answer); a float out of uint32's range casts as NumPy's scalar loop
does, not its SIMD loop (undefined in C, and NumPy's two loops differ); clip with a
Python int bound outside the dtype and lo > hi (NumPy ignores that bound; its documented
minimum(maximum(a, lo), hi) gives nums-cloud's); complex64 powers (NumPy's cpowf, where
nums-cloud computes in complex128 rounded once). Refusals README documents (ints past
uint64's range, bincounts past 2^24 bins) are counted apart too."""
import argparse
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
from nums import BIN, job_text  # noqa: E402
from test_conformance import NS, numpy_eval  # noqa: E402

sys.path.insert(0, str(REPO / "scripts"))
import diff_families as families  # noqa: E402


def expit(x):
    """scipy.special.expit: of ints in float64 (the conformance table's 1 / (1 + exp(-x))
    negates an int64 first, and -(-2^63) wraps)."""
    x = np.asarray(x)
    x = x if x.dtype.kind == "f" else x.astype(np.float64)
    return 1 / (1 + np.exp(-x))


NS = {**NS, "sigmoid": expit, "expit": expit, **families.REFERENCE}

I64 = np.iinfo(np.int64)
SPECIAL = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 2.0, 3.0, 1e-300, 5e-324, -5e-324, 1e300,
           -1e300, 1e16, 2.5, -7.0]
INT_SPECIAL = [I64.min, I64.max, I64.min + 1, I64.max - 1, -1, 0, 1, 2, 2**53 + 1, -(2**62), 2**32]

# What NumPy computes exactly (correctly rounded or not rounded at all): compared bit for
# bit. Transcendental functions and power: within ULPS units in the last place (NumPy's
# SIMD versions and libm differ there). The rest (reductions, contractions, linalg):
# within a relative tolerance of the values involved.
TRANSCENDENTAL = {"exp", "expm1", "log", "log1p", "sin", "cos", "tan", "tanh", "sigmoid", "expit", "power", "**"}
ACCUMULATING = {"sum", "mean", "var", "std", "prod", "nansum", "nanmean", "nanvar", "nanstd", "nanprod", "@",
                "dot", "inner", "matmul", "einsum", "tensordot", "trace", "linalg"}
ULPS = 4
RTOL = {np.dtype(np.float64): 1e-9, np.dtype(np.float32): 2e-4, np.dtype(np.float16): 1e-2}


class Case:
    """One expression: `expr` the job language's text, `ref` the text NumPy evaluates as
    the job language's reference (numpy_eval), `py` the text the Python package and
    NumPy evaluate as Python does (None: not in Python); `level` the comparison (None:
    from the text, see inexactness; 0, 1, 2; "scan"/"scanprod": a running sum or
    product, `bound` the text of the running sum of absolute values)."""

    def __init__(self, index, expr, names, ref=None, py=True, level=None, family="expr", bound=None, alt=False):
        self.index, self.expr, self.names = index, expr, names
        self.ref = expr if ref is None else ref
        self.py = expr if py is True else py
        self.level, self.family, self.bound, self.alt = level, family, bound, alt
        self.want = self.error = None


class Batch:
    """One batch's inputs (name -> (array, block)) and its generator of expressions."""

    def __init__(self, seed, number):
        self.rng = np.random.default_rng([seed, number])
        rng = self.rng
        shape_kind = rng.choice(["plain", "plain", "plain", "plain", "plain", "plain", "empty", "one", "row", "col"])
        r, c = int(rng.integers(2, 9)), int(rng.integers(2, 7))
        r, c = {"plain": (r, c), "empty": (0, c), "one": (1, 1), "row": (1, c), "col": (r, 1)}[shape_kind]
        self.r, self.c = r, c
        self.inputs = {}
        self.kinds = {"m": [], "v": [], "u": [], "sq": []}  # (r, c), (c,), (r,), (c, c)
        for name in "ABF":
            self.add(name, self.floats((r, c), np.float32 if name == "F" else np.float64), "m")
        self.add("P", np.abs(self.floats((r, c), np.float64)) + 0.25, "m")
        self.add("I", rng.integers(-6, 7, size=(r, c)), "m")
        self.add("L", self.ints((r, c)), "m")
        self.add("M", rng.random((r, c)) < 0.5, "m")
        self.add("v", self.floats((c,), np.float64), "v")
        self.add("iv", rng.integers(-3, 4, size=c), "v")
        self.add("mv", rng.random(c) < 0.5, "v")
        self.add("u", self.floats((r,), np.float64), "u")
        self.add("S", self.square(c), "sq")

    def square(self, c):
        """A c x c matrix for linear algebra: well conditioned mostly; sometimes exactly
        singular (two equal rows, a zero column), ill-conditioned, or holding NaN or inf."""
        rng = self.rng
        s = rng.normal(size=(c, c)) + c * np.eye(c) * rng.choice([0.0, 1.0])
        kind = rng.choice(["plain"] * 14 + ["rows", "column", "ill", "nan", "scaled", "ints"])
        if kind == "rows" and c > 1:
            s[c - 1] = s[0]
        elif kind == "column":
            s[:, rng.integers(c)] = 0.0
        elif kind == "ill":
            s[c - 1] = s[0] + 1e-9 * rng.normal(size=c)
        elif kind == "nan":
            s[rng.integers(c), rng.integers(c)] = rng.choice([np.nan, np.inf])
        elif kind == "scaled":
            s *= np.logspace(-100, 100, c)[rng.permutation(c)][:, None]
        elif kind == "ints":
            s = np.round(s * 3)
        return s

    def floats(self, shape, dtype):
        rng = self.rng
        a = rng.normal(size=shape) * rng.choice([1.0, 1.0, 1e-3, 1e3])
        special = rng.random(shape) < rng.choice([0.0, 0.1, 0.3])
        a[special] = rng.choice(SPECIAL, size=int(special.sum()))
        return a.astype(dtype)

    def ints(self, shape):
        rng = self.rng
        a = rng.integers(-2**62, 2**62, size=shape)
        special = rng.random(shape) < 0.4
        a[special] = rng.choice(np.array(INT_SPECIAL, dtype=np.int64), size=int(special.sum()))
        return a

    def add(self, name, a, kind):
        block = [int(self.rng.integers(1, d + 1)) if d > 0 else 1 for d in a.shape]
        self.inputs[name] = (a, block)
        self.kinds[kind].append(name)

    # -- expressions, typed by shape kind (m, v, u, s: (r, c), (c,), (r,), a scalar) and
    # value kind (b, i, f: bool, int, float), so that most are valid. Some are not on
    # purpose (NumPy refuses them, and so must nums-cloud); documented differences are not
    # made (float functions of bools, which NumPy gives as float16; //, % and ** of two
    # bools and square of one, int8 in NumPy; bitwise ops of numbers, which nums-cloud
    # refuses).

    def pick(self, seq):
        return seq[int(self.rng.integers(len(seq)))]

    def literal(self):
        rng = self.rng
        text = self.pick(["2", "-3", "0", "1", "0.5", "-0.0", "2.5", "np.nan", "np.inf", "-np.inf", "1e308",
                          "9223372036854775807", "-9223372036854775808", "True", "False", "3000000000",
                          "1e-320", str(int(rng.integers(-9, 10)))])
        return text, ("b" if text in ("True", "False") else "f" if re.search(r"[.ne]", text) else "i")

    def named(self, name):
        return name, self.inputs[name][0].dtype.kind.replace("u", "i")

    def leaf(self, kind):
        if kind == "s":
            if self.r and self.c and self.rng.random() < 0.4:
                name, t = self.named(self.pick(self.kinds["m"]))
                return f"{name}[0, 0]", t
            return self.literal()
        if kind == "m" and self.rng.random() < 0.15:
            return self.pick([self.named(self.pick(self.kinds["v"])), ("u[:, None]", "f")])
        return self.named(self.pick(self.kinds[kind]))

    @staticmethod
    def promote(*ts):
        return max(ts, key="bif".index)

    def as_bool(self, e):
        text, t = e
        return e if t == "b" else (f"({text} > 0)", "b")

    def as_number(self, e):
        text, t = e
        if t != "b":
            return e
        return (f"({text} * 1)", "i") if self.rng.random() < 0.5 else (f"({text} * 1.0)", "f")

    def expr(self, kind, depth):
        """(text, value kind) of an expression of shape kind `kind`."""
        rng = self.rng
        if depth <= 0 or rng.random() < 0.25:
            return self.leaf(kind)
        x = lambda k=kind: self.expr(k, depth - 1)  # noqa: E731
        roll = rng.random()
        if roll < 0.25:
            f = self.pick(["abs", "negative", "sign", "square", "sqrt", "exp", "expm1", "log", "log1p", "floor",
                           "ceil", "sin", "cos", "tan", "tanh", "sigmoid", "isnan", "isfinite", "isinf",
                           "logical_not", "-", "~"])
            a = x()
            if f in ("sin", "cos", "tan") and re.search(r"@|sum|mean|var|std|prod|inner|einsum|trace", a[0]):
                f = "tanh"  # of an accumulated value: its last bits are the sum's order, and
                # a periodic function of a large one is any number
            if f in "-~":  # parenthesized whole: .astype or [::-1] after it bind tighter
                a = self.as_bool(a) if f == "~" else a
                return f"({f}({a[0]}))", a[1]
            if f == "logical_not":
                return f"{f}({self.as_bool(a)[0]})", "b"
            if f.startswith("is"):
                return f"{f}({a[0]})", "b"
            if f == "square":  # of a bool: int64 here, NumPy's int8 (documented)
                a = self.as_number(a)
            if f in ("abs", "negative", "sign", "square"):
                return f"{f}({a[0]})", a[1]
            if f in ("floor", "ceil"):
                a = self.as_number(a)
                return f"{f}({a[0]})", a[1]
            return f"{f}({self.as_number(a)[0]})", "f"
        if roll < 0.55:
            op = self.pick(["+", "-", "*", "/", "//", "%", "**", "==", "!=", "<", "<=", ">", ">=", "&", "|", "^"])
            other = x(self.pick([kind, kind, "s"])) if kind != "s" else x("s")
            a, b = (x(), other) if rng.random() < 0.7 else (other, x())
            if op in "&|^":
                a, b = self.as_bool(a), self.as_bool(b)
            if op in ("//", "%", "**") and a[1] == b[1] == "b":
                a = self.as_number(a)
            if op == "**" and re.fullmatch(r"-?\d{3,}", b[0]):
                b = (b[0] + ".0", "f")  # Python would compute a giant int exactly
            t = ("b" if op in ("==", "!=", "<", "<=", ">", ">=", "&", "|", "^") else
                 "f" if op == "/" else self.promote(a[1], b[1]))
            return f"({a[0]} {op} {b[0]})", t
        if roll < 0.7:
            f = self.pick(["maximum", "minimum", "logical_and", "logical_or", "logical_xor", "where", "clip"])
            if f == "where":
                a, b = x(), x(self.pick([kind, "s"]))
                return f"where({x()[0]} > 0, {a[0]}, {b[0]})", self.promote(a[1], b[1])
            if f == "clip":
                lo, hi = self.pick([("-1", "1"), ("0", "None"), ("None", "0.5"), ("-0.0", "0")])
                a = self.as_number(x())
                return f"clip({a[0]}, {lo}, {hi})", "f" if "." in lo + hi else a[1]
            a, b = x(), x(self.pick([kind, "s"]))
            if f.startswith("logical"):
                return f"{f}({a[0]}, {b[0]})", "b"
            return f"{f}({a[0]}, {b[0]})", self.promote(a[1], b[1])
        if roll < 0.8 and kind != "s":
            d = self.pick(["float64", "float32", "int64", "bool"])
            return f"{x()[0]}.astype('{d}')", d[0]
        if roll < 0.9 and kind in ("v", "u", "s"):
            return self.reduction(kind, depth)
        if kind == "m":
            a = x()
            return self.pick([(f"{a[0]}[::-1]", a[1]), (f"{a[0]}[:, ::-1]", a[1]), (f"{a[0]}.T.T", a[1]),
                              (f"outer(u, {x('v')[0]})", "f"), (f"({a[0]} @ S)", "f")])
        if kind == "v":
            a, p, q = x(), x("u"), x("m")
            return self.pick([(f"({p[0]} @ {q[0]})", self.promote(p[1], q[1])), (f"(S @ {a[0]})", "f"),
                              (f"{a[0]}[::-1]", a[1])])
        if kind == "u":
            a, p, q = x(), x("m"), x("v")
            return self.pick([(f"({p[0]} @ {q[0]})", self.promote(p[1], q[1])), (f"{a[0]}[::-1]", a[1])])
        return self.pick([(f"({x('v')[0]} @ v)", "f"), ("trace(S)", "f"), (f"inner({x('u')[0]}, u)", "f"),
                          (f"einsum('ij,ij->', {x('m')[0]}, A)", "f")])

    def reduction(self, kind, depth):
        f = self.pick(["sum", "prod", "min", "max", "mean", "var", "std", "argmin", "argmax", "all", "any",
                       "nansum", "nanprod", "nanmin", "nanmax", "nanmean", "nanvar", "nanstd", "nanargmin",
                       "nanargmax"])
        src, axis = {"v": ("m", "0"), "u": ("m", "1"), "s": (self.pick(["m", "v", "u"]), "None")}[kind]
        extra = self.pick(["", "", ", ddof=1"]) if f in ("var", "std", "nanvar", "nanstd") else ""
        a = self.expr(src, depth - 1)
        t = ("b" if f in ("all", "any") or (f in ("min", "max", "nanmin", "nanmax") and a[1] == "b") else
             "i" if f in ("argmin", "argmax", "nanargmin", "nanargmax") or (a[1] != "f" and "sum" in f or "prod" in f)
             else "f" if "mean" in f or "var" in f or "std" in f else a[1])
        return f"{f}({a[0]}, axis={axis}{extra})", t

    def linalg(self):
        if not np.isfinite(self.inputs["S"][0]).all():
            # NumPy's lstsq can hang on inf; its SVD of inf gives NaN where TSQR's R holds
            # NaN and nums-cloud raises (a documented difference).
            return self.pick(["np.linalg.solve(S, v)", "np.linalg.inv(S)", "np.linalg.det(S)",
                              "np.linalg.slogdet(S).logabsdet", "np.linalg.norm(S)", "np.linalg.norm(A, 1)",
                              "abs(np.linalg.qr(S, mode='r'))", "trace(S @ S)"])
        return self.pick(["np.linalg.solve(S, v)", "np.linalg.inv(S)", "np.linalg.det(S)",
                          "np.linalg.slogdet(S).logabsdet", "np.linalg.slogdet(S).sign", "np.linalg.norm(S)",
                          "np.linalg.norm(A, 1)", "np.linalg.svdvals(S)", "abs(np.linalg.qr(S, mode='r'))",
                          "np.linalg.cholesky(S @ S.T + eye(S.shape[0]))", "np.linalg.lstsq(S, v)[0]",
                          "np.linalg.solve(S, S @ v)", "trace(S @ S)", "np.linalg.norm(v, np.inf)",
                          "np.linalg.inv(S.astype('float32'))", "np.linalg.det(S.astype('float32'))",
                          "np.linalg.solve(S, eye(S.shape[0]))", "np.linalg.solve(S.T, v)",
                          "np.linalg.det(S.T)", "np.linalg.slogdet(S @ S).logabsdet",
                          "np.linalg.norm(np.linalg.inv(S), 1)", "np.linalg.lstsq(S, S)[0]",
                          "np.linalg.svdvals(S.T @ S)", "np.linalg.det(S * 1e200)",
                          "np.linalg.slogdet(S * 1e-200).logabsdet"])

    def case(self, index, linalg=0.06):
        rng = self.rng
        if rng.random() < linalg:
            expr = self.linalg()
        else:
            expr = self.expr(self.pick(["m", "m", "v", "u", "s"]), int(rng.integers(1, 5)))[0]
        names = sorted({n for n in self.inputs if re.search(rf"\b{n}\b", expr)})
        return Case(index, expr, names)


def numpy_value(expr, inputs):
    ns = dict(NS)
    ns.update({k: a for k, (a, _) in inputs.items()})
    # LAPACK prints to the process's stdout when handed NaN: kept out of the report.
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as null:
        os.dup2(null.fileno(), 1)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # The job language's numbers are NumPy's scalars (`~True` is False), not Python's.
            return numpy_eval(expr, ns)
    finally:
        os.dup2(saved, 1)
        os.close(saved)


def inexactness(expr):
    """0: NumPy's value is exact; 1: one transcendental function (ulps); 2: accumulated, or
    transcendental functions of each other (a tolerance: an ulp of difference in an
    argument is more in the result)."""
    words = re.findall(r"[a-z_][a-z_0-9]*|\*\*|@", expr)
    if set(words) & ACCUMULATING or "linalg" in expr:
        return 2
    n = sum(w in TRANSCENDENTAL for w in words)
    return 0 if n == 0 else 1 if n == 1 else 2


def linalg_matrix(case, inputs):
    """The matrix a linear-algebra case factors (the text of np.linalg.f's first argument,
    evaluated by NumPy), or None."""
    m = re.search(r"np\.linalg\.\w+\(", case.expr)
    if not m:
        return None
    depth, i = 0, m.end()
    for j in range(m.end(), len(case.expr)):
        ch = case.expr[j]
        if ch in "([":
            depth += 1
        elif ch in ")]" and depth:
            depth -= 1
        elif ch in ",)" and not depth:
            return numpy_value(case.expr[i:j], inputs)
    return None


def condition(a):
    """a's condition number (inf when it holds NaN or inf) and its precision's eps."""
    eps = np.finfo(a.dtype if a.dtype.kind == "f" else np.float64).eps
    with np.errstate(all="ignore"):
        if a.ndim != 2 or not np.isfinite(a).all():
            return np.inf, eps
        if a.size == 0:
            return 1.0, eps
        return np.linalg.cond(a.astype(np.float64)), eps


def equilibrated_rcond(a):
    """The reciprocal condition number in the 1-norm of `a` equilibrated as nums-cloud's
    solve and inv measure it (rows scaled by powers of two to a largest magnitude in
    [1, 2), then columns to 1; docs/guide.md): below n eps they refuse `a` as singular."""
    a = a.astype(np.float64)
    with np.errstate(all="ignore"):
        r = np.abs(a).max(axis=1)
        da = a * np.where(r > 0, 2.0 ** -np.floor(np.log2(np.where(r > 0, r, 1.0))), 1.0)[:, None]
        c = np.abs(da).max(axis=0)
        if (c == 0).any():
            return 0.0
        m = da / c
        try:
            return 1 / (np.linalg.norm(m, 1) * np.linalg.norm(np.linalg.inv(m), 1))
        except np.linalg.LinAlgError:
            return 0.0


def singular_to_working_precision(case, inputs):
    """Whether the case is linear algebra on a square matrix singular to working precision,
    where NumPy's values are rounding noise (or NaN): nums-cloud may refuse, or give 0 for
    det, or other noise (its condition in the 2-norm past 1 / (n eps), or equilibrated in
    the 1-norm as nums-cloud's solve measures it). Or on NaN or inf, where LAPACK's results
    are not specified (where inf - inf meets depends on the order of its operations)."""
    a = linalg_matrix(case, inputs)
    if a is None:
        return False
    if any(not np.isfinite(inputs[n][0]).all() for n in case.names if inputs[n][0].dtype.kind == "f"):
        return True
    if a.ndim != 2 or a.shape[0] != a.shape[1]:
        return False
    cond, eps = condition(a)
    return cond > 1 / (len(a) * eps) or equilibrated_rcond(a) < len(a) * np.finfo(np.float64).eps


def compare(case, got, inputs, want=None):
    """None when `got` matches NumPy's value (case.want, or `want`), else why not."""
    want = case.want if want is None else want
    if singular_to_working_precision(case, inputs) and got.shape == want.shape and got.dtype == want.dtype:
        case.ill_posed = True
        return None
    if got.shape != want.shape:
        return f"shape {got.shape}, NumPy {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, NumPy {want.dtype}"
    if want.dtype.kind == "c":
        # Each part as a float (complex64 computes in complex128 rounded once: its
        # arithmetic within ulps, see diff_families' levels).
        with np.errstate(all="ignore"):
            magnitude = np.asarray(np.abs(want), dtype=np.float64)
        for part, name in ((np.real, "real"), (np.imag, "imaginary")):
            why = compare_floats(case, np.array(part(got)), np.array(part(want)), inputs, part, magnitude)
            if why:
                return f"{name} parts: {why}"
        return None
    if want.dtype.kind != "f":
        bad = got != want
        return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ"
    return compare_floats(case, got, want, inputs)


def compare_floats(case, got, want, inputs, part=np.real, magnitude=None):
    """`magnitude`: for a part of complex values, their moduli (a part's ulps are the
    modulus's: a rounding of the whole may change a small part by more than its own)."""
    got, want = np.asarray(got), np.asarray(want)
    with np.errstate(all="ignore"):
        magnitude = np.broadcast_to(np.asarray(np.abs(want) if magnitude is None else magnitude, dtype=np.float64),
                                    want.shape)
    if fragile(case, inputs) and got.shape == want.shape:
        # An infinity where the other has NaN: two infinities met on the way, in an
        # order NumPy's BLAS chose; the other values are compared.
        moot = (np.isnan(got) & np.isinf(want)) | (np.isinf(got) & np.isnan(want))
        if moot.any():
            case.ill_posed = True
            got, want, magnitude = got[~moot], want[~moot], magnitude[~moot]
    gn, wn = np.isnan(got), np.isnan(want)
    if (gn != wn).any():
        return f"NaN at {int((gn != wn).sum())} places where the other has a number"
    level = inexactness(case.expr) if case.level is None else case.level
    # Values computed in float32 on the way (NumPy rounds each float32 result, its
    # float32 functions to their own ulps) are compared at float32's precision.
    precision = want.dtype
    if "float32" in case.expr or any(inputs[n][0].dtype in (np.float32, np.complex64) for n in case.names):
        precision = np.dtype(np.float32) if want.dtype.itemsize > 4 else want.dtype
    g, w, magnitude = got[~wn], want[~wn], magnitude[~wn]
    if level == 0:
        bad = (g != w) | (np.signbit(g) != np.signbit(w))
        return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ in their bits"
    inf = np.isinf(g) | np.isinf(w)
    if (g[inf] != w[inf]).any():
        return f"infinities differ at {int((g[inf] != w[inf]).sum())} places"
    if level in ("scan", "scanprod"):
        return compare_scan(case, got, want, inputs, level, precision, part)
    g, w, magnitude = g[~inf].astype(np.float64), w[~inf].astype(np.float64), magnitude[~inf]
    if level == 1:
        with np.errstate(all="ignore"):
            ulp = np.spacing(np.maximum(np.abs(w), magnitude).astype(precision)).astype(np.float64)
        tol = ULPS * np.maximum(ulp, np.spacing(precision.type(0)).astype(np.float64))
    else:
        rtol = RTOL[precision]
        a = linalg_matrix(case, inputs)
        if a is not None:
            # As exact as the matrix's condition number allows.
            cond, eps = condition(a)
            rtol = max(rtol, 100 * max(a.shape) * max(eps, np.finfo(precision).eps) * cond)
        scale = max([1.0] + [float(np.abs(a[np.isfinite(a)]).max(initial=0)) for n in case.names
                             for a in [inputs[n][0]] if a.dtype.kind in "fc"])
        tol = rtol * (np.abs(w) + scale)
    bad = np.abs(g - w) > tol
    return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ beyond the tolerance"


def fragile(case, inputs):
    """Whether products past float64's range may meet on the way (cov of values near
    1e308, a matrix product with 1e308 in it): where an infinity meets another, NumPy's
    NaN or infinity is its BLAS's order of operations."""
    f = getattr(case, "fragile", None)
    if f is None:
        level = inexactness(case.expr) if case.level is None else case.level
        big = max([0.0] + [float(np.abs(a[np.isfinite(a)]).max(initial=0)) for n in case.names
                           for a in [inputs[n][0]] if a.dtype.kind in "fc"])
        contraction = re.search(r"@|\b(dot|einsum|inner|tensordot|matmul|trace)\(", case.expr)
        f = case.fragile = bool(level == 2 and contraction and (
            big > 1e150 or re.search(r"\b1e(1[5-9]\d|[23]\d\d)\b", case.expr)))
    return f


def compare_scan(case, got, want, inputs, level, precision, part=np.real):
    """A running sum or product across blocks: NaN, infinities and zeros where NumPy has
    them (an overflow or underflow on the way is NumPy's, whatever the blocks), the
    other values within the rounding of a sum in another order (n eps times the running
    sum of absolute values) or of a product (a relative 1e-6: the order of a product's
    roundings through subnormals)."""
    n = max(want.size, 1)
    eps = float(np.finfo(precision).eps)
    zeros = (got == 0) & (want == 0) & (np.signbit(got) != np.signbit(want))
    if zeros.any():
        return f"the sign of zero differs at {int(zeros.sum())} places"
    fin = np.isfinite(want) & np.isfinite(got)
    g, w = got[fin].astype(np.float64), want[fin].astype(np.float64)
    if level == "scanprod":
        zero = (g == 0) != (w == 0)
        if zero.any():
            return f"0 where the other is not at {int(zero.sum())} places (an underflow on the way)"
        bad = np.abs(g - w) > 1e-6 * np.abs(w)
        return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ beyond the tolerance"
    try:
        bound = part(numpy_value(case.bound, inputs))
    except Exception:  # noqa: BLE001 - no bound: the plain tolerance
        bound = None
    if bound is None or bound.shape != want.shape:
        bound = np.full(want.shape, max([1.0] + [float(np.abs(inputs[m][0][np.isfinite(inputs[m][0])]).max(initial=0))
                                                 for m in case.names]))
    with np.errstate(all="ignore"):
        tol = 4 * n * eps * np.abs(bound.astype(np.float64))[fin] + 4 * n * float(np.spacing(precision.type(0)))
    bad = ~(np.abs(g - w) <= tol)
    return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ beyond n eps of the sums"


def numpy_bug(case, got, inputs, python=False):
    """A reason when nums-cloud's `got` is NumPy's own answer computed as it documents it
    (case.alt, a (job text, Python text, reason): NumPy's value of that text), or, for
    case.alt True, what NumPy computes over long double inputs (its quantiles
    interpolate in the input's dtype: ints wrap, float64 overflows); else None."""
    if not case.alt or case.want is None:
        return None
    if case.alt == "c128":
        # NumPy's complex64 power is its single-precision cpowf; nums-cloud computes in
        # complex128, rounded once (README).
        wide = {n: ((a.astype(np.complex128) if a.dtype == np.complex64 else a), block)
                for n, (a, block) in inputs.items()}
        try:
            with np.errstate(all="ignore"):
                alt = np.asarray(numpy_value(case.py if python else case.ref, wide)).astype(case.want.dtype)
        except Exception:  # noqa: BLE001
            return None
        if alt.shape != got.shape or compare(case, got, inputs, want=alt) is not None:
            return None
        return (f"NumPy's complex64 power is its single-precision cpowf (inexact, and NaN where it overflows); "
                f"in complex128 rounded to complex64, as nums-cloud documents computing it, NumPy gives "
                f"nums-cloud's {show(alt, 120)}")
    if case.alt is not True:
        text, py_text, reason = case.alt
        try:
            alt = np.asarray(numpy_value(py_text if python else text, inputs))
        except Exception:  # noqa: BLE001
            return None
        if alt.dtype != got.dtype or alt.shape != got.shape or compare(case, got, inputs, want=alt) is not None:
            return None
        return f"{reason}: {show(alt, 120)}"
    if case.want.dtype.kind != "f":
        return None
    kinds = ", ".join(sorted({inputs[n][0].dtype.name for n in case.names}))
    how = "wraps" if re.search(r"\bu?int", kinds) else "overflows"
    what = ("median, the mean of the two middle values, sums them" if re.match(r"(nan)?median\(", case.ref) else
            "interpolation a + (b - a) * t computes b - a")
    # Over long double inputs (exact for int64), or over the inputs cast to float64 first
    # (rounding ints past 2^53, as nums-cloud does).
    for wide_type, how_wide in ((np.longdouble, "long double inputs"), (np.float64, "the inputs cast to float64")):
        wide = {n: ((a.astype(wide_type) if a.dtype.kind in "iuf" and a.dtype.itemsize <= 8 else a), block)
                for n, (a, block) in inputs.items()}
        try:
            alt = numpy_value(case.ref, wide)
        except Exception:  # noqa: BLE001
            continue
        with np.errstate(all="ignore"):
            alt = np.asarray(alt).astype(case.want.dtype)
        if alt.shape == got.shape and compare(case, got, inputs, want=alt) is None:
            return (f"NumPy's {what} in the input's dtype ({kinds}), which {how}; over {how_wide} NumPy gives "
                    f"nums-cloud's {show(alt, 120)}")
    return None


def show(a, limit=400):
    s = np.array2string(np.asarray(a), threshold=40, max_line_width=120, floatmode="unique")
    return s if len(s) < limit else s[:limit] + " ..."


def write_job(folder, inputs, cases, memory_mb=1024):
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for name, (a, block) in inputs.items():
        np.save(folder / f"{name}.npy", a)
        arrays[name] = {"load": str(folder / f"{name}.npy"), "block": block}
    for c in cases:
        arrays[f"c{c.index}"] = c.expr
    outputs = {f"c{c.index}": str(folder / f"c{c.index}.npy") for c in cases}
    job = folder / "job.toml"
    job.write_text(job_text(arrays, outputs, name="diff", storage={"url": f"file://{folder / 'store'}"},
                            compute={"memory_mb": memory_mb}))
    return job


def run_job(binary, folder, inputs, cases, memory_mb=1024):
    """Runs `cases` as one job; returns (ok, stderr)."""
    for c in cases:
        (folder / f"c{c.index}.npy").unlink(missing_ok=True)
    job = write_job(folder, inputs, cases, memory_mb)
    shutil.rmtree(folder / "store", ignore_errors=True)
    p = subprocess.run([binary, "run", str(job)], capture_output=True, text=True, timeout=600)
    return p.returncode == 0, p.stdout + p.stderr


def run_batch(binary, folder, inputs, cases, failed, memory_mb=1024):
    """Runs the valid `cases` of a batch, dropping (into `failed`, with the error) those
    the run names as failing, until the rest runs; returns the cases that ran."""
    cases = list(cases)
    while cases:
        ok, err = run_job(binary, folder, inputs, cases, memory_mb)
        if ok:
            return cases
        named = {int(m) for m in re.findall(r"(?:arrays\.|output )c(\d+)\b", err)} & {c.index for c in cases}
        if not named and len(cases) == 1:
            named = {cases[0].index}
        if named:
            for c in cases:
                if c.index in named:
                    failed.append((c, first_error(err)))
            cases = [c for c in cases if c.index not in named]
            continue
        # Not attributed to an output: halve until it is.
        half = len(cases) // 2
        cases = run_batch(binary, folder, inputs, cases[:half], failed, memory_mb) + \
            run_batch(binary, folder, inputs, cases[half:], failed, memory_mb)
        return cases
    return cases


def first_error(err):
    """The message of a failed run, without its paths and advice: a panic's message, or
    what the error says about the output."""
    lines = err.splitlines()
    for i, ln in enumerate(lines):
        if "panicked at" in ln:
            return "PANIC: " + (lines[i + 1] if i + 1 < len(lines) else ln)[:300]
    for ln in lines:
        m = re.search(r"(?:arrays\.|output )c\d+:? (.*)", ln)
        if m:
            return m.group(1)[:300]
    lines = [ln for ln in lines if ln.startswith("error")]
    return (lines[0] if lines else err.strip().splitlines()[-1] if err.strip() else "failed")[:300]


def case_of(index, spec, inputs):
    """A Case of a diff_families spec."""
    text = spec["expr"] + " " + spec["ref"] + " " + (spec["py"] or "")
    names = sorted({n for n in inputs if re.search(rf"\b{n}\b", text)})
    c = Case(index, spec["expr"], names, ref=spec["ref"], py=spec["py"], level=spec["level"],
             family=spec["family"], bound=spec.get("bound"), alt=spec.get("alt", False))
    if spec.get("fragile"):
        c.fragile = max([0.0] + [float(np.abs(a[np.isfinite(a)]).max(initial=0)) for n in names
                                 for a in [inputs[n][0]] if a.dtype.kind in "fc"]) > 1e150
    return c


def reference(c, inputs):
    try:
        c.want = numpy_value(c.ref, inputs)
    except Exception as e:  # noqa: BLE001 - NumPy's refusal is the expected answer
        c.error = f"{type(e).__name__}: {e}"


def generate(seed, batch, number, size, linalg, share=0.0):
    """Batch `number`'s inputs and cases: a share `share` of them from diff_families (its
    inputs added to the batch's), the rest from the original generator (`share` 0: the
    original's cases exactly)."""
    b = Batch(seed, number)
    fam = families.Families(seed, number, b.inputs) if share > 0 else None
    chooser = np.random.default_rng([seed, number, 40])
    cases = []
    for j in range(size):
        index = number * batch + j
        if fam is not None and chooser.random() < share:
            c = case_of(index, fam.case(), b.inputs)
        else:
            c = b.case(index, linalg)
        reference(c, b.inputs)
        cases.append(c)
    return b, cases


def large_batch(seed, count, first):
    """`count` cases past one sort invocation, over 1.5M-element inputs of their own."""
    inputs = families.large_inputs(seed)
    cases = [case_of(first + i, spec, inputs) for i, spec in enumerate(families.large_cases(seed, count))]
    for c in cases:
        reference(c, inputs)
    return inputs, cases


# -- the Python package ------------------------------------------------------------------

NUMPY_EXCEPTIONS = {v for v in vars(np.exceptions).values() if isinstance(v, type) and
                    issubclass(v, Exception)} | {np.linalg.LinAlgError}


def public_class(cls):
    """The exception class a caller of NumPy names: NumPy's public ones (AxisError,
    LinAlgError, ...) and Python's; not NumPy's private subclasses (UFuncTypeError is a
    TypeError)."""
    for k in cls.__mro__:
        if k.__module__ == "builtins" or k in NUMPY_EXCEPTIONS:
            return k
    return cls


class Python:
    """The same cases through nums_cloud.numpy in this process: each case's `py` text
    evaluated in a namespace of nps's functions over the batch's inputs (the same
    blocks), against NumPy evaluating the same text as Python does."""

    def __init__(self, root, memory_mb=512):
        import nums_cloud
        import nums_cloud.numpy as nps
        self.nums_cloud, self.nps = nums_cloud, nps
        self.session = nums_cloud.init(storage=f"file://{root}/store", workers=2, memory_mb=memory_mb,
                                       progress=False)

    def close(self):
        self.session.close()

    def namespace(self, inputs):
        import types
        nps = self.nps
        ns = {name: getattr(nps, name) for name in dir(nps) if not name.startswith("_")}
        shim = types.SimpleNamespace(**ns)
        shim.linalg = nps.linalg
        shim.random = nps.random
        ns["np"] = shim
        for name, (a, block) in inputs.items():
            ns[name] = nps.array(a).block(block)
        return ns

    @staticmethod
    def numpy(text, inputs):
        """NumPy's value of `text` as Python evaluates it (numbers as Python's), or its
        exception."""
        ns = dict(NS)
        ns.update({k: a for k, (a, _) in inputs.items()})
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = eval(text, ns)  # noqa: S307 - the generator's own texts
                return np.asarray(v), None
        except Exception as e:  # noqa: BLE001
            return None, e

    def ours(self, text, ns):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                v = eval(text, ns)  # noqa: S307
                if isinstance(v, self.nps.BlockArray):
                    v = v.get()
                return np.asarray(v), None
        except (KeyboardInterrupt, SystemExit):
            raise
        except BaseException as e:  # noqa: BLE001 - a panic (pyo3's PanicException) too
            return None, e

    def check(self, cases, inputs, counts):
        """[(case, why)] of the cases whose Python value or exception is not NumPy's."""
        ns = self.namespace(inputs)
        out = []
        for c in cases:
            if c.py is None:
                continue
            want, want_exc = self.numpy(c.py, inputs)
            got, got_exc = self.ours(c.py, ns)
            counts["py_run"] += 1
            if want_exc is not None and got_exc is not None:
                counts["py_refused"] += 1
                # (NumPy's MemoryError: an allocation it could not make, such as a
                # bincount past 2^24 bins, which nums-cloud refuses as documented.)
                if not isinstance(got_exc, public_class(type(want_exc))) and not isinstance(want_exc, MemoryError):
                    out.append((c, f"Python: NumPy raises {type(want_exc).__name__} ({str(want_exc)[:150]}); "
                                   f"nums_cloud.numpy raises {type(got_exc).__name__}: {str(got_exc)[:200]}"))
                continue
            if want_exc is not None:
                out.append((c, f"Python: NumPy raises {type(want_exc).__name__} ({str(want_exc)[:150]}); "
                               f"nums_cloud.numpy gives {show(got)}"))
                continue
            if got_exc is not None:
                if "Singular matrix" in str(got_exc) and singular_to_working_precision(c, inputs):
                    counts["py_singular"] += 1
                    continue
                if DOCUMENTED.search(str(got_exc)):
                    counts["py_documented"] += 1  # an int past uint64's range, ...: refused (README)
                    continue
                out.append((c, f"Python: NumPy gives {want.dtype} {want.shape} {show(want, 200)}; "
                               f"nums_cloud.numpy raises {type(got_exc).__name__}: {str(got_exc)[:300]}"))
                continue
            counts["py_compared"] += 1
            why = compare(c, got, inputs, want=want)
            if why and c.alt:
                saved, c.want = c.want, want
                bug = numpy_bug(c, got, inputs, python=True)
                c.want = saved
                if bug:
                    out.append((c, "NUMPY " + bug))
                    continue
            if why:
                out.append((c, f"Python: {why}\n    nums-cloud: {show(got)}\n    NumPy:      {show(want)}"))
        return out


def describe(c, inputs, args, why, python):
    lines = [f"\ncase {c.index} [{c.family}{', Python' if python else ''}]: {c.py if python else c.expr}",
             f"  {why}"]
    for n in c.names:
        a, block = inputs[n]
        lines.append(f"    {n} {a.dtype} {a.shape} block {block}: {show(a, 300)}")
    py = "PYTHONPATH=python " if args.python else ""
    if c.family == "large":
        lines.append(f"  reproduce: {py}.venv/bin/python scripts/diff_numpy.py --seed {args.seed} --count 0 "
                     f"--large {args.large}{' --python' if args.python else ''}")
    else:
        lines.append(f"  reproduce: {py}.venv/bin/python scripts/diff_numpy.py --seed {args.seed} --batch {args.batch} "
                     f"--linalg {args.linalg} --families {args.families} --case {c.index}"
                     f"{' --python' if args.python else ''} --keep /tmp/case{c.index}")
    return "\n".join(lines)


# Refusals README documents where NumPy answers: ints past uint64's range, bincounts of
# more than 2^24 bins.
DOCUMENTED = re.compile(r"int64 and uint64|past int64's range|a bincount may have")


def run_cases(args, root, inputs, cases, folder, counts, mismatches, numpy_bugs, memory_mb=1024):
    """The job language: the valid cases as one job (halved where one fails), each that
    NumPy refuses alone (within the budget); compared with NumPy's."""
    valid = [c for c in cases if c.error is None]
    failed = []
    ran = run_batch(args.bin, folder, inputs, valid, failed, memory_mb)
    for c, err in failed:
        if "Singular matrix" in err and singular_to_working_precision(c, inputs):
            counts["singular"] += 1  # NumPy's value is rounding noise; refused instead
            continue
        if DOCUMENTED.search(err):
            counts["documented"] += 1
            continue
        mismatches.append((c, f"NumPy gives {c.want.dtype} {c.want.shape} {show(c.want, 200)}; "
                              f"nums-cloud fails: {err}", False))
    for c in ran:
        got = np.load(folder / f"c{c.index}.npy")
        why = compare(c, got, inputs)
        counts["compared"] += 1
        level = inexactness(c.expr) if c.level is None else c.level
        counts[{0: "exact", 1: "ulps", 2: "tolerance"}.get(level, "tolerance")] += 1
        counts["ill_posed"] += getattr(c, "ill_posed", False)
        if why and c.alt:
            bug = numpy_bug(c, got, inputs)
            if bug:
                numpy_bugs.append((c, f"{why}\n    nums-cloud: {show(got)}\n    NumPy:      {show(c.want)}\n    {bug}",
                                   False))
                continue
        if why:
            mismatches.append((c, f"{why}\n    nums-cloud: {show(got)}\n    NumPy:      {show(c.want)}", False))
    for c in cases:
        if c.error is None:
            continue
        if args.case is None and counts["refused"] >= args.error_budget:
            counts["skipped"] += 1
            continue
        counts["refused"] += 1
        ok, err = run_job(args.bin, root / f"refused{c.index}", inputs, [c], memory_mb)
        if ok:
            got = np.load(root / f"refused{c.index}" / f"c{c.index}.npy")
            mismatches.append((c, f"NumPy refuses ({c.error[:200]}); nums-cloud gives {show(got)}", False))
        elif args.case is None:
            shutil.rmtree(root / f"refused{c.index}", ignore_errors=True)


def python_cases(py, cases, inputs, counts, mismatches, numpy_bugs):
    for c, why in py.check(cases, inputs, counts):
        if why.startswith("NUMPY "):
            numpy_bugs.append((c, why[len("NUMPY "):], True))
        else:
            mismatches.append((c, why, True))


def kind_of(why):
    """A mismatch's kind, for the summary: its first line without values, expressions,
    positions and numbers."""
    kind = re.sub(r"NumPy gives \w+ \([\d, ]*\) .*?; ", "NumPy gives a value; ", why, count=1, flags=re.S)
    kind = kind.splitlines()[0]
    kind = re.sub(r"NumPy (refuses|raises) \(?(\w+)[ :].*?\); ", r"NumPy \1 \2; ", kind)
    kind = re.sub(r"(nums-cloud gives|nums_cloud\.numpy gives) .*", r"\1 a value", kind)
    kind = re.sub(r"`[^`]*`:? ?|\(at column \d+\)|\d+ of \d+ values", "", kind)
    kind = re.sub(r"(?<![\w.])-?\d[\d.e+-]*", "#", kind)
    return kind[:150]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=3000, help="expressions to run")
    ap.add_argument("--batch", type=int, default=250, help="expressions per job")
    ap.add_argument("--errors", type=float, default=0.1,
                    help="at most this share of the count run alone as expressions NumPy refuses")
    ap.add_argument("--linalg", type=float, default=0.06, help="the share of np.linalg expressions")
    ap.add_argument("--families", type=float, default=0.5,
                    help="the share of issue 39's families (diff_families.py); 0: the original generator's cases")
    ap.add_argument("--large", type=int, default=0,
                    help="cases past one sort invocation (1.5M elements, memory_mb = 128), in a job of their own")
    ap.add_argument("--python", action="store_true",
                    help="also through the Python package in this process (PYTHONPATH=python)")
    ap.add_argument("--case", type=int, help="run this one case and keep its job")
    ap.add_argument("--bin", default=BIN)
    ap.add_argument("--keep", help="a folder for the jobs (default: a temporary one, removed)")
    args = ap.parse_args()
    if not Path(args.bin).exists():
        sys.exit(f"no binary at {args.bin}: cargo build -p nums-cloud --bin nums-cloud")
    root = Path(args.keep or tempfile.mkdtemp(prefix="diff_numpy_"))
    started = time.time()
    mismatches, numpy_bugs = [], []
    counts = {"compared": 0, "exact": 0, "ulps": 0, "tolerance": 0, "refused": 0, "skipped": 0, "singular": 0,
              "documented": 0,
              "ill_posed": 0, "py_run": 0, "py_compared": 0, "py_refused": 0, "py_singular": 0,
              "py_documented": 0}
    families_run = {}
    py = Python(root / "python") if args.python else None
    numbers = [args.case // args.batch] if args.case is not None else range(math.ceil(args.count / args.batch))
    args.error_budget = int(args.errors * args.count)
    shown = {}
    for number in numbers:
        size = min(args.batch, args.count - number * args.batch) if args.case is None else args.batch
        b, cases = generate(args.seed, args.batch, number, size, args.linalg, args.families)
        if args.case is not None:
            cases = [c for c in cases if c.index == args.case]
        for c in cases:
            families_run[c.family] = families_run.get(c.family, 0) + 1
            shown[c.index] = b.inputs
        run_cases(args, root, b.inputs, cases, root / f"batch{number}", counts, mismatches, numpy_bugs)
        if py is not None:
            python_cases(py, cases, b.inputs, counts, mismatches, numpy_bugs)
        if args.case is None and not args.keep:
            shutil.rmtree(root / f"batch{number}", ignore_errors=True)
        print(f"batch {number}: {len(cases)} cases, {len(mismatches)} mismatches so far "
              f"({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
    if args.large and args.case is None:
        inputs, cases = large_batch(args.seed, args.large, 10**9)
        for c in cases:
            families_run["large"] = families_run.get("large", 0) + 1
            shown[c.index] = inputs
        run_cases(args, root, inputs, cases, root / "large", counts, mismatches, numpy_bugs, memory_mb=128)
        if py is not None:
            py.close()
            py = Python(root / "python-large", memory_mb=128)
            python_cases(py, cases, inputs, counts, mismatches, numpy_bugs)
        print(f"large: {len(cases)} cases, {len(mismatches)} mismatches so far ({time.time() - started:.0f} s)",
              file=sys.stderr, flush=True)
    if py is not None:
        py.close()
    print(f"seed {args.seed}: {counts['compared']} expressions compared with NumPy ({counts['exact']} bit for bit, "
          f"{counts['ulps']} within {ULPS} ulps, {counts['tolerance']} within a tolerance), "
          f"{counts['refused']} that NumPy refuses run alone ({counts['skipped']} more not run), "
          f"{counts['singular']} refused as singular where NumPy gives rounding noise, "
          f"{counts['documented']} refused as documented (ints past uint64, bincounts past 2^24 bins), "
          f"{counts['ill_posed']} linear algebra on singular or non-finite matrices not compared for values; "
          + (f"Python: {counts['py_run']} run ({counts['py_compared']} compared, {counts['py_refused']} refused as "
             f"NumPy refuses, {counts['py_singular']} singular, {counts['py_documented']} refused as documented); "
             if args.python else "")
          + f"{len(mismatches)} mismatches, {len(numpy_bugs)} NumPy's own; {time.time() - started:.0f} s")
    print("  cases by family: " + ", ".join(f"{k} {v}" for k, v in sorted(families_run.items())))
    kinds = {}
    for c, why, python in mismatches:
        kind = f"[{c.family}] {kind_of(why)}"
        kinds[kind] = kinds.get(kind, 0) + 1
    for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {kind}")
    for c, why, python in mismatches:
        print(describe(c, shown[c.index], args, why, python))
    if numpy_bugs:
        print(f"\nNumPy's own ({len(numpy_bugs)}, not counted):")
        for c, why, python in numpy_bugs:
            print(describe(c, shown[c.index], args, why, python))
    if args.case is not None:
        folder = root / f"refused{args.case}"
        folder = folder if folder.exists() else root / f"batch{args.case // args.batch}"
        print(f"\njob: {folder / 'job.toml'}")
    elif not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
