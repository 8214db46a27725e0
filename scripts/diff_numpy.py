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
The binary is target/debug/nums-cloud (NUMS_CLOUD_BIN or --bin for another)."""
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


def expit(x):
    """scipy.special.expit: of ints in float64 (the conformance table's 1 / (1 + exp(-x))
    negates an int64 first, and -(-2^63) wraps)."""
    x = np.asarray(x)
    x = x if x.dtype.kind == "f" else x.astype(np.float64)
    return 1 / (1 + np.exp(-x))


NS = {**NS, "sigmoid": expit, "expit": expit}

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
    def __init__(self, index, expr, names):
        self.index, self.expr, self.names = index, expr, names
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


def compare(case, got, inputs):
    """None when `got` matches NumPy's value, else why not."""
    want = case.want
    if singular_to_working_precision(case, inputs) and got.shape == want.shape and got.dtype == want.dtype:
        case.ill_posed = True
        return None
    if got.shape != want.shape:
        return f"shape {got.shape}, NumPy {want.shape}"
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, NumPy {want.dtype}"
    if want.dtype.kind != "f":
        bad = got != want
        return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ"
    gn, wn = np.isnan(got), np.isnan(want)
    if (gn != wn).any():
        return f"NaN at {int((gn != wn).sum())} places where the other has a number"
    level = inexactness(case.expr)
    # Values computed in float32 on the way (NumPy rounds each float32 result, its
    # float32 functions to their own ulps) are compared at float32's precision.
    precision = want.dtype
    if "float32" in case.expr or any(inputs[n][0].dtype == np.float32 for n in case.names):
        precision = np.dtype(np.float32) if want.dtype.itemsize > 4 else want.dtype
    g, w = got[~wn], want[~wn]
    if level == 0:
        bad = (g != w) | (np.signbit(g) != np.signbit(w))
        return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ in their bits"
    inf = np.isinf(g) | np.isinf(w)
    if (g[inf] != w[inf]).any():
        return "infinities differ"
    g, w = g[~inf].astype(np.float64), w[~inf].astype(np.float64)
    if level == 1:
        with np.errstate(all="ignore"):
            ulp = np.spacing(np.abs(w).astype(precision)).astype(np.float64)
        tol = ULPS * np.maximum(ulp, np.spacing(precision.type(0)).astype(np.float64))
    else:
        rtol = RTOL[precision]
        a = linalg_matrix(case, inputs)
        if a is not None:
            # As exact as the matrix's condition number allows.
            cond, eps = condition(a)
            rtol = max(rtol, 100 * max(a.shape) * max(eps, np.finfo(precision).eps) * cond)
        scale = max([1.0] + [float(np.abs(a[np.isfinite(a)]).max(initial=0)) for n in case.names
                             for a in [inputs[n][0]] if a.dtype.kind == "f"])
        tol = rtol * (np.abs(w) + scale)
    bad = np.abs(g - w) > tol
    return None if not bad.any() else f"{int(bad.sum())} of {want.size} values differ beyond the tolerance"


def show(a, limit=400):
    s = np.array2string(np.asarray(a), threshold=40, max_line_width=120, floatmode="unique")
    return s if len(s) < limit else s[:limit] + " ..."


def write_job(folder, inputs, cases):
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
                            compute={"memory_mb": 1024}))
    return job


def run_job(binary, folder, inputs, cases):
    """Runs `cases` as one job; returns (ok, stderr)."""
    for c in cases:
        (folder / f"c{c.index}.npy").unlink(missing_ok=True)
    job = write_job(folder, inputs, cases)
    shutil.rmtree(folder / "store", ignore_errors=True)
    p = subprocess.run([binary, "run", str(job)], capture_output=True, text=True, timeout=600)
    return p.returncode == 0, p.stdout + p.stderr


def run_batch(binary, folder, inputs, cases, failed):
    """Runs the valid `cases` of a batch, dropping (into `failed`, with the error) those
    the run names as failing, until the rest runs; returns the cases that ran."""
    cases = list(cases)
    while cases:
        ok, err = run_job(binary, folder, inputs, cases)
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
        cases = run_batch(binary, folder, inputs, cases[:half], failed) + \
            run_batch(binary, folder, inputs, cases[half:], failed)
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


def generate(seed, batch, number, size, linalg):
    b = Batch(seed, number)
    cases = []
    for j in range(size):
        c = b.case(number * batch + j, linalg)
        try:
            c.want = numpy_value(c.expr, b.inputs)
        except Exception as e:  # noqa: BLE001 - NumPy's refusal is the expected answer
            c.error = f"{type(e).__name__}: {e}"
        cases.append(c)
    return b, cases


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=3000, help="expressions to run")
    ap.add_argument("--batch", type=int, default=250, help="expressions per job")
    ap.add_argument("--errors", type=float, default=0.05,
                    help="at most this share of the count run alone as expressions NumPy refuses")
    ap.add_argument("--linalg", type=float, default=0.06, help="the share of np.linalg expressions")
    ap.add_argument("--case", type=int, help="run this one case and keep its job")
    ap.add_argument("--bin", default=BIN)
    ap.add_argument("--keep", help="a folder for the jobs (default: a temporary one, removed)")
    args = ap.parse_args()
    if not Path(args.bin).exists():
        sys.exit(f"no binary at {args.bin}: cargo build -p nums-cloud --bin nums-cloud")
    root = Path(args.keep or tempfile.mkdtemp(prefix="diff_numpy_"))
    started = time.time()
    mismatches, counts = [], {"compared": 0, "exact": 0, "ulps": 0, "tolerance": 0, "refused": 0,
                              "skipped": 0, "singular": 0, "ill_posed": 0}
    numbers = [args.case // args.batch] if args.case is not None else range(math.ceil(args.count / args.batch))
    error_budget = int(args.errors * args.count)
    for number in numbers:
        size = min(args.batch, args.count - number * args.batch) if args.case is None else args.batch
        b, cases = generate(args.seed, args.batch, number, size, args.linalg)
        if args.case is not None:
            cases = [c for c in cases if c.index == args.case]
        folder = root / f"batch{number}"
        valid = [c for c in cases if c.error is None]
        failed = []
        ran = run_batch(args.bin, folder, b.inputs, valid, failed)
        for c, err in failed:
            if "Singular matrix" in err and singular_to_working_precision(c, b.inputs):
                counts["singular"] += 1  # NumPy's value is rounding noise; refused instead
                continue
            mismatches.append((c, b, f"NumPy gives {c.want.dtype} {c.want.shape}; nums-cloud fails: {err}"))
        for c in ran:
            got = np.load(folder / f"c{c.index}.npy")
            why = compare(c, got, b.inputs)
            counts["compared"] += 1
            counts[("exact", "ulps", "tolerance")[inexactness(c.expr)]] += 1
            counts["ill_posed"] += getattr(c, "ill_posed", False)
            if why:
                mismatches.append((c, b, f"{why}\n    nums-cloud: {show(got)}\n    NumPy:      {show(c.want)}"))
        for c in cases:
            if c.error is None:
                continue
            if args.case is None and counts["refused"] >= error_budget:
                counts["skipped"] += 1
                continue
            counts["refused"] += 1
            ok, err = run_job(args.bin, root / f"refused{c.index}", b.inputs, [c])
            if ok:
                got = np.load(root / f"refused{c.index}" / f"c{c.index}.npy")
                mismatches.append((c, b, f"NumPy refuses ({c.error[:200]}); nums-cloud gives {show(got)}"))
            elif args.case is None:
                shutil.rmtree(root / f"refused{c.index}", ignore_errors=True)
        if args.case is None and not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
        print(f"batch {number}: {len(cases)} cases, {len(mismatches)} mismatches so far "
              f"({time.time() - started:.0f} s)", file=sys.stderr, flush=True)
    print(f"seed {args.seed}: {counts['compared']} expressions compared with NumPy ({counts['exact']} bit for bit, "
          f"{counts['ulps']} within {ULPS} ulps, {counts['tolerance']} within a tolerance), "
          f"{counts['refused']} that NumPy refuses run alone ({counts['skipped']} more not run), "
          f"{counts['singular']} refused as singular where NumPy gives rounding noise, "
          f"{counts['ill_posed']} linear algebra on singular or non-finite matrices not compared for values; "
          f"{len(mismatches)} mismatches; {time.time() - started:.0f} s")
    kinds = {}
    for _, _, why in mismatches:
        kind = re.sub(r"\d+ of \d+ values", "values", why.splitlines()[0])
        kind = re.sub(r"\(at column \d+\)|\(\d+,[\d, ]*\)|\(\)", "", kind)[:110]
        kinds[kind] = kinds.get(kind, 0) + 1
    for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        print(f"  {n:5d}  {kind}")
    for c, b, why in mismatches:
        print(f"\ncase {c.index}: {c.expr}\n  {why}")
        for n in c.names:
            a, block = b.inputs[n]
            print(f"    {n} {a.dtype} {a.shape} block {block}: {show(a, 300)}")
        print(f"  reproduce: .venv/bin/python scripts/diff_numpy.py --seed {args.seed} --batch {args.batch} "
              f"--linalg {args.linalg} --case {c.index} --keep /tmp/case{c.index}")
    if args.case is not None:
        folder = root / f"refused{args.case}"
        folder = folder if folder.exists() else root / f"batch{args.case // args.batch}"
        print(f"\njob: {folder / 'job.toml'}")
    elif not args.keep:
        shutil.rmtree(root, ignore_errors=True)
    sys.exit(1 if mismatches else 0)


if __name__ == "__main__":
    main()
