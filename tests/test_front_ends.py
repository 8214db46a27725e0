"""The job language and the Python package are two front ends of one engine: on the same
expressions they give the same bits (not merely values each close to NumPy's), and on the
same refusals the same words, with the exception class NumPy raises in Python. (The Rust
API is the third: Python's functions are its `Session::call`; driver/tests/api.rs checks
its error kinds.)"""
import subprocess

import numpy as np
import pytest

import nums_cloud.numpy as nps
from nums import BIN, job_text
from test_conformance import (CASES, DTYPE_CASES, DTYPE_ERRORS, DTYPE_INPUTS, _dtype_arrays,
                              numpy_answer, run_cases, run_table)
from test_python_numpy import lazy, namespace

# A share of each table, so the test stays a few seconds.
SAMPLE = [c for i, c in enumerate(CASES) if i % 4 == 0]
DTYPE_SAMPLE = [c for i, c in enumerate(DTYPE_CASES) if i % 4 == 1]


# Float sums of blocks add their partial results in the order a plan combines them (a
# compute of many arrays plans otherwise than a job of one): equal within rounding.
ORDERED = ("sum", "mean", "nansum", "nanmean", "var", "std", "nanvar", "nanstd", "prod",
           "nanprod", "average", "cov", "corrcoef", "dot", "inner", "einsum", "tensordot",
           "trace", "matmul", "vdot", "linalg", "norm", "@", "lstsq", "solve", "inv", "det")


def _same_bits(what, a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert (a.dtype, a.shape) == (b.dtype, b.shape), f"{what}: {a.dtype}{a.shape} != {b.dtype}{b.shape}"
    if a.dtype.kind in "fc" and any(w in what for w in ORDERED):
        rtol = 1e-5 if a.dtype in (np.float32, np.complex64) else 1e-12
        np.testing.assert_allclose(a, b, rtol=rtol, atol=0, equal_nan=True, err_msg=what)
        return
    if a.dtype.kind in "fc":
        # NaN as NaN (a NaN's sign and payload are the CPU's), every other value bit for bit.
        na, nb = np.isnan(a), np.isnan(b)
        assert (na == nb).all(), f"{what}: NaN at other places"
        a, b = np.where(na, 0, a), np.where(nb, 0, b)
        a, b = a.reshape(-1).view(np.uint8), b.reshape(-1).view(np.uint8)
    np.testing.assert_array_equal(a, b, err_msg=what)


def _python_values(ns, cases):
    values = {c: lazy(c, ns) for c in cases}
    arrays = {k: v for k, v in values.items() if isinstance(v, nps.BlockArray)}
    got = dict(zip(arrays, nps.get(*arrays.values())))
    return {c: got.get(c, v) for c, v in values.items()}


def test_the_job_language_and_python_give_the_same_bits(tmp_path, session):
    """The conformance table's expressions, on the same ragged blocks."""
    job = run_table(tmp_path, SAMPLE, {"url": f"file://{tmp_path / 'jobstore'}"})
    py = _python_values(namespace(blocks="ragged"), SAMPLE)
    for c in SAMPLE:
        _same_bits(c, py[c], job[c])


def test_every_dtype_gives_the_same_bits_through_both(tmp_path, session):
    """The 13 dtypes' promotion and functions, with Python numbers."""
    job = run_cases(tmp_path, _dtype_arrays(tmp_path, DTYPE_INPUTS), DTYPE_SAMPLE,
                    {"url": f"file://{tmp_path / 'jobstore'}"})
    ns = namespace()
    ns.update({n: nps.array(a).block((3, 2)[:a.ndim]) for n, a in DTYPE_INPUTS.items()})
    py = _python_values(ns, DTYPE_SAMPLE)
    for c in DTYPE_SAMPLE:
        _same_bits(c, py[c], job[c])


def test_the_same_refusals_say_the_same_and_raise_numpys_class(tmp_path, session):
    """Each of the dtype table's refusals: the job file's `check` and Python say the same
    words; Python raises the class NumPy raises for the same text."""
    arrays = _dtype_arrays(tmp_path, DTYPE_INPUTS)
    ns = namespace()
    ns.update({n: nps.array(a) for n, a in DTYPE_INPUTS.items()})
    job = tmp_path / "job.toml"
    for expr, words in DTYPE_ERRORS.items():
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
        assert p.returncode == 1 and words in p.stderr, (expr, p.stderr)
        if expr.startswith("linear_regression"):
            continue  # Python's models are scikit-learn's estimators (test_python_models)
        with pytest.raises(Exception) as e:
            v = lazy(expr, ns)
            v.get() if hasattr(v, "get") else v
        assert words in str(e.value), (expr, str(e.value))
        if expr.startswith(("np.linalg", "linear_regression")) or "float16" in expr:
            continue  # nums-cloud's own limits: NumPy answers these
        try:
            numpy_answer(expr, DTYPE_INPUTS)
        except (OverflowError, TypeError, ValueError, ZeroDivisionError, IndexError) as n:
            assert isinstance(e.value, type(n)), (expr, type(e.value), type(n))
