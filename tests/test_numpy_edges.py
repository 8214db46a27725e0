"""Issue 39's wrong answers, each against NumPy (or the exception NumPy raises), through
the job language (the real binary) and the Python package: searchsorted with numbers
outside the array's dtype, histograms of float32, NumPy scalars' dtypes, cov/corrcoef
with NaN, unique of complex NaNs, assignment casts, random parameters, scans across
blocks that overflow, and the smaller ones."""
import os
import subprocess

import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps
from nums import BIN, job_text, run, snapshot

F32 = np.array([0.1, 0.2, 0.3, 0.3, 0.7], np.float32)
H32 = np.array([-0.3, -0.3, -0.1, 0.0, 0.1, 0.3, 0.3, 0.3, 0.3, 0.2999], np.float32)
NANVAR = np.random.default_rng(1).normal(size=(4, 6))
NANVAR[1, 2] = np.nan
ZC = np.array([1 + 1j, complex(np.nan, 0), complex(0, np.nan), 2, 1 + 1j,
               complex(np.nan, np.nan), 3j, 5, complex(0, np.nan), 7])
OVER = np.array([1e-310, 1e-310, 1e300, 1e300, 2.0])
SUMS = np.array([1e308, 1e308, -1e308, -1e308, 5.0, 1.0])
SIGNED_ZEROS = np.array([0.0, -0.0, 1.0, -0.0, 0.0, -1.0, -0.0])

# name -> (array, its blocks in the job)
INPUTS = {
    "u8": (np.array([1, 2, 3], np.uint8), [2]),
    "i8": (np.array([-128, 0, 44, 127], np.int8), [3]),
    "f32": (F32, [2]),
    "h32": (H32, [3]),
    "nanvar": (NANVAR, [3, 4]),
    "row": (np.arange(4.0).reshape(1, 4), [1, 3]),
    "zc": (ZC, [3]),
    "over": (OVER, [2]),
    "sums": (SUMS, [2]),
    "zeros": (SIGNED_ZEROS, [3]),
    "ar": (np.arange(5.0), [2]),
    "zn": (np.array([complex(np.nan, np.inf), 2 + 1j, 1 + 0j]), [2]),
    "nanf": (np.array([np.nan, 1.0, 2.5, np.nan, 4.0]), [2]),
    "g": (np.random.default_rng(4).normal(size=(3, 4, 5)), [2, 3, 2]),
    "flags": (np.array([True, False, True, True]), [3]),
    "zm": (np.array([3 - 1j, 1 + 2j, 0j, 2 + 0j, 1 - 5j]), [2]),
    "e2": (np.zeros((0, 3)), [1, 2]),
    "w8": (np.array([100, 100, 100, 1, 2, 3, 4, 5, 6, 7], np.int8), [4]),
    "wz": (np.arange(10) * (1 - 2j), [4]),
    "ku": (np.array([1, 2, 2, 5], np.uint64), [3]),
    "nz": (np.array([-0.0, np.nan, -0.0, 2.0]), [3]),
    "zi": (np.array([1 + 1j, complex(1, 1e308), complex(1, 1e308), complex(np.nan, -np.inf)]), [3]),
    "sq": (np.array([[2.0, 1.0], [1.0, 3.0]]), [2, 2]),
    "b2": (np.array([1.0, 2.0]), [2]),
}
G = INPUTS["g"][0]
ZN, NANF = INPUTS["zn"][0], INPUTS["nanf"][0]
W8, WZ, ZM = INPUTS["w8"][0], INPUTS["wz"][0], INPUTS["zm"][0]

# name -> (expression, NumPy's answer); the same names are NumPy's.
CASES = {
    "ss_neg": ("searchsorted(u8, -1)", np.searchsorted(INPUTS["u8"][0], -1)),
    "ss_300": ("searchsorted(i8, 300)", np.searchsorted(INPUTS["i8"][0], 300)),
    "ss_big": ("searchsorted(i8, 9223372036854775808)",
               np.searchsorted(INPUTS["i8"][0], 2**63)),
    "ss_f32r": ("searchsorted(f32, 0.3, side='right')", np.searchsorted(F32, 0.3, side="right")),
    "ss_f32l": ("searchsorted(f32, 0.3)", np.searchsorted(F32, 0.3)),
    "h_counts": ("histogram(h32, bins=5, range=(-0.3, 0.3))[0]",
                 np.histogram(H32, bins=5, range=(-0.3, 0.3))[0]),
    "h_edges": ("histogram(h32, bins=5, range=(-0.3, 0.3))[1]",
                np.histogram(H32, bins=5, range=(-0.3, 0.3))[1]),
    "h_auto": ("histogram(h32, bins=7)[0]", np.histogram(H32, bins=7)[0]),
    "h_auto_edges": ("histogram(h32, bins=7)[1]", np.histogram(H32, bins=7)[1]),
    "corr_nan": ("corrcoef(nanvar)", np.corrcoef(NANVAR)),
    "cov_row": ("cov(row, rowvar=False)", np.cov(np.arange(4.0).reshape(1, 4), rowvar=False)),
    "corr_row": ("corrcoef(row, rowvar=False)",
                 np.corrcoef(np.arange(4.0).reshape(1, 4), rowvar=False)),
    "u_inv": ("unique(zc, return_inverse=True)[1]", np.unique(ZC, return_inverse=True)[1]),
    "u_vals": ("unique(zc)", np.unique(ZC)),
    "ui_inv": ("unique_inverse(zc).inverse_indices", np.unique_inverse(ZC).inverse_indices),
    "ui_vals": ("unique_inverse(zc).values", np.unique_inverse(ZC).values),
    "cumprod": ("cumprod(over)", np.cumprod(OVER)),
    "nancumprod": ("nancumprod(over)", np.nancumprod(OVER)),
    "cumsum": ("cumulative_sum(sums)", np.cumulative_sum(SUMS)),
    "cumsum_zeros": ("cumsum(zeros)", np.cumsum(SIGNED_ZEROS)),
    "cumsum_initial": ("cumulative_sum(zeros, include_initial=True)",
                       np.cumulative_sum(SIGNED_ZEROS, include_initial=True)),
    "cumprod_nan": ("cumprod(zn)", np.cumprod(ZN)),
    "nancumsum_int": ("nancumsum(nanf, dtype='int64')", np.nancumsum(NANF, dtype=np.int64)),
    "nancumprod_int": ("nancumprod(nanf, dtype='int64')", np.nancumprod(NANF, dtype=np.int64)),
    "div_big": ("u8 / 300", INPUTS["u8"][0] / 300),
    "q32": ("quantile(f32, [0.25, 0.5])", np.quantile(F32, [0.25, 0.5])),
    "q32_one": ("quantile(f32, 0.5)", np.quantile(F32, 0.5)),
    "sort_zeros": ("sort(zeros)", np.sort(SIGNED_ZEROS, kind="stable")),
    "diff0": ("diff(ar, n=0, append=9.0)", np.diff(np.arange(5.0), n=0, append=9.0)),
    "abs_big": ("abs(3e300 + 1.797e308j)", np.abs(np.complex128(3e300 + 1.797e308j))),
    "bincount_empty": ("bincount(ar[:0].astype('int64'), weights=ar[:0])",
                       np.bincount(np.array([], np.int64), weights=np.array([]))),
    # Round two of the differential test: refusals where NumPy answers, and dtypes.
    "q_axes": ("quantile(g, 0.5, axis=(0, 2))", np.quantile(G, 0.5, axis=(0, 2))),
    "q_axes_keep": ("percentile(g, [10, 90], axis=(2, 0), keepdims=True)",
                    np.percentile(G, [10, 90], axis=(2, 0), keepdims=True)),
    "q_2d": ("quantile(g, [[0.1, 0.5], [0.2, 0.9]], axis=1)",
             np.quantile(G, [[0.1, 0.5], [0.2, 0.9]], axis=1)),
    "med_axes": ("median(g, axis=(1, 2))", np.median(G, axis=(1, 2))),
    "med_bool": ("median(flags)", np.median(INPUTS["flags"][0])),
    "nanmed_bool": ("nanmedian(flags[:3])", np.nanmedian(INPUTS["flags"][0][:3])),
    "med_complex": ("median(zm)", np.median(ZM)),
    "med_complex_even": ("median(zm[1:])", np.median(ZM[1:])),
    "med_complex_nan": ("median(zn)", np.median(ZN)),
    "med_empty": ("median(e2, axis=0)", np.median(np.zeros((0, 3)), axis=0)),
    "nanmed_empty": ("nanmedian(e2)", np.nanmedian(np.zeros((0, 3)))),
    "h_w8": ("histogram(ar * 2, bins=2, weights=w8[:5])[0]",
             np.histogram(np.arange(5.0) * 2, bins=2, weights=W8[:5])[0]),
    "h_wz": ("histogram(ar * 2, bins=3, weights=wz[:5])[0]",
             np.histogram(np.arange(5.0) * 2, bins=3, weights=WZ[:5])[0]),
    "bincount_u64": ("bincount(ku)", np.bincount(INPUTS["ku"][0])),
    "nancumsum_zero": ("nancumsum(nz)", np.nancumsum(INPUTS["nz"][0])),
    "nansum_zero": ("nansum(nz[:2])", np.nansum(INPUTS["nz"][0][:2])),
    "nancumprod_inf": ("nancumprod(zi)", np.nancumprod(INPUTS["zi"][0])),
    "clip_cnan": ("clip(zc, np.nan + 0j, 3)", np.clip(ZC, complex(np.nan, 0), 3)),
    "clip_wide": ("clip(i8, -1000, 3)", np.clip(INPUTS["i8"][0], -1000, 3)),
    "clip_wide_hi": ("clip(u8, 2, 1000)", np.clip(INPUTS["u8"][0], 2, 1000)),
    "lstsq_square_res": ("linalg.lstsq(sq, b2)[1]",
                         np.linalg.lstsq(INPUTS["sq"][0], INPUTS["b2"][0])[1]),
}


def _bits(a):
    """Values with their bits (signed zeros, NaN payloads) as NumPy would compare them."""
    a = np.asarray(a).reshape(-1)
    return a.view(np.uint8) if a.dtype.kind in "fc" else a


def _assert_same(got, want, what):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    if what.startswith(("corr", "cov", "q32", "abs", "q_", "lstsq", "med_empty", "nanmed_empty")):
        # (abs: a hypot, which two libms may round 1 ulp apart; an empty median is NumPy's
        # 0/0, whose NaN's sign is the CPU's.)
        np.testing.assert_allclose(got, want, rtol=1e-12, equal_nan=True, err_msg=what)
    elif what.startswith("u_vals"):
        # NumPy's hash-based unique keeps the first NaN in data order, its sorting one
        # (with return_inverse) the first in sorted order: either NaN is NumPy's.
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_array_equal(_bits(got), _bits(want), err_msg=what)


def _arrays(tmp_path):
    arrays = {}
    for name, (a, block) in INPUTS.items():
        np.save(tmp_path / f"{name}.npy", a)
        arrays[name] = {"load": str(tmp_path / f"{name}.npy"), "block": block}
    return arrays


def test_the_wrong_answers_are_numpys_in_a_job(tmp_path):
    arrays = _arrays(tmp_path)
    arrays.update({name: expr for name, (expr, _) in CASES.items()})
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {n: str(tmp_path / f"out_{n}.npy") for n in CASES},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    for name, (expr, want) in CASES.items():
        _assert_same(np.load(tmp_path / f"out_{name}.npy"), want, f"{name}: {expr}")


def test_the_wrong_answers_are_numpys_in_python(session):
    ns = {name: nps.array(a).block(block) for name, (a, block) in INPUTS.items()}
    ns["np"] = nps  # the job language's `np.nan`
    for name in dir(nps):
        if not name.startswith("_"):
            ns.setdefault(name, getattr(nps, name))
    for name, (expr, want) in CASES.items():
        got = eval(expr, ns)  # noqa: S307 - the table's own texts
        got = got.get() if hasattr(got, "get") else got
        _assert_same(got, want, f"{name}: {expr}")


def test_numpy_scalars_keep_their_dtype_in_python(session):
    """NEP 50: a NumPy scalar is strong, a Python number weak."""
    u8 = np.array([255, 1], np.uint8)
    f32 = np.array([1.5, 2.5], np.float32)
    c = np.array([True, False])
    x8, x32, xc = nps.array(u8), nps.array(f32), nps.array(c)
    cases = [
        (x8 + np.int64(1), u8 + np.int64(1)),
        (np.int64(1) + x8, np.int64(1) + u8),
        (nps.where(xc, x8, np.int32(-1)), np.where(c, u8, np.int32(-1))),
        (x32 * np.float64(0.1), f32 * np.float64(0.1)),
        (x32 * 0.1, f32 * 0.1),
        (x8 + 1, u8 + 1),
        (nps.add(x8, np.uint16(7)), np.add(u8, np.uint16(7))),
        (nps.maximum(x32, np.float32(2.0)), np.maximum(f32, np.float32(2.0))),
        (x8 < np.int16(300), u8 < np.int16(300)),
        (nps.searchsorted(x32, np.float32(2.5)), np.searchsorted(f32, np.float32(2.5))),
        # A NumPy scalar on the left: NumPy's ufunc hands the operation to the array.
        (np.int64(3) & x8, np.int64(3) & u8),
        (np.uint8(1) << x8, np.uint8(1) << u8),
        (np.float32(2) ** x32, np.float32(2) ** f32),
        (np.copysign(x32, np.float64(-1)), np.copysign(f32, np.float64(-1))),
        # A function of numbers alone gives a NumPy scalar, strong as NumPy's.
        (x32 * nps.sqrt(2), f32 * np.sqrt(2)),
    ]
    for i, (got, want) in enumerate(cases):
        got = got.get()
        assert got.dtype == want.dtype, (i, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=str(i))
    assert type(nps.sqrt(2)) is np.float64 and type(nps.floor(-3)) is np.int64
    assert not (~(nps.log1p(2**63 - 1) > 0))
    # A NumPy scalar stays a number where one is wanted.
    assert nps.sum(nps.ones((2, 3)), axis=np.int64(1)).shape == (2,)
    assert nps.zeros(np.int32(3)).shape == (3,)


def test_searchsorted_of_an_empty_array_is_zero(session):
    got = nps.searchsorted(nps.array(np.array([], np.float64)), 2.0).get()
    assert got == np.searchsorted(np.array([], np.float64), 2.0) == 0
    got = nps.searchsorted(nps.array(np.array([], np.float64)), nps.array([1.0, 3.0])).get()
    np.testing.assert_array_equal(got, [0, 0])


def _numpy_raises(f):
    try:
        f()
    except Exception as e:  # noqa: BLE001 - the class is what is compared
        return type(e)
    raise AssertionError("NumPy did not raise")


def test_refusals_raise_numpys_exception_classes(session):
    x8 = nps.array(np.array([1, 2], np.int8))
    cases = [
        (lambda: nps.ones(3)[5], lambda: np.ones(3)[5]),
        (lambda: nps.ones(3) & nps.ones(3), lambda: np.ones(3).__and__(np.ones(3))),
        (lambda: x8 + 300, lambda: np.array([1, 2], np.int8) + 300),
        (lambda: -nps.ones(2, dtype=bool), lambda: -np.ones(2, dtype=bool)),
        (lambda: nps.take(nps.ones(3), [7]), lambda: np.take(np.ones(3), [7])),
        (lambda: nps.bincount(nps.ones(3)), lambda: np.bincount(np.ones(3))),
        (lambda: nps.floor(nps.ones(2, dtype="complex128")),
         lambda: np.floor(np.ones(2, dtype=np.complex128))),
        (lambda: nps.sum(nps.ones(3), axis=2), lambda: np.sum(np.ones(3), axis=2)),
        (lambda: nps.ones(3)[nps.array([True, False])],
         lambda: np.ones(3)[np.array([True, False])]),
        (lambda: nps.quantile(nps.ones((2, 3)), 0.5, axis=-3),
         lambda: np.quantile(np.ones((2, 3)), 0.5, axis=-3)),
        (lambda: nps.quantile(nps.zeros(0), 0.5), lambda: np.quantile(np.zeros(0), 0.5)),
    ]
    for i, (ours, numpys) in enumerate(cases):
        want = _numpy_raises(numpys)
        with pytest.raises(want):
            r = ours()
            r.get() if hasattr(r, "get") else r
        assert want in (IndexError, TypeError, OverflowError, ValueError,
                        np.exceptions.AxisError), (i, want)


def test_data_dependent_refusals_raise_numpys_classes(session):
    nan = nps.array(np.array([np.nan, np.nan]))
    with pytest.raises(ValueError, match="autodetected range .*is not finite"):
        nps.histogram(nan, bins=3)[0].get()
    for data in ([-1.0, np.inf], [np.nan, 1.0]):
        with pytest.raises(ValueError, match="autodetected range .*is not finite"):
            nps.histogram(nps.array(data).block([1]))[1].get()
    with pytest.raises(ValueError, match="finite-sized bins"):
        nps.histogram(nps.arange(5.0), bins=3, range=(-1.7976931348623157e308,
                                                      1.7976931348623157e308))[0].get()
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        nps.average(nps.arange(3.0), weights=nps.array([1.0, -1.0, 0.0])).get()
    with pytest.raises(ZeroDivisionError, match="Weights sum to zero"):
        nps.average(nps.arange(2.0), weights=nps.zeros(2), returned=True)[1].get()
    with pytest.raises(ValueError, match="no negative elements"):
        nps.bincount(nps.array([-7, -6])).get()
    with pytest.raises(TypeError, match="complex128"):
        nps.bincount(nps.array([0, 1]), weights=nps.array([1j, 2.0])).get()
    # NumPy finds the negatives before it refuses complex weights.
    with pytest.raises(ValueError, match="no negative elements"):
        nps.bincount(nps.array([0, -1]), weights=nps.array([1j, 2.0])).get()
    with pytest.raises(TypeError, match="complex128"):
        nps.bincount(nps.array([0, 1], dtype="uint8"), weights=nps.array([1j, 2.0]))
    with pytest.raises(ValueError):
        nps.histogram(nps.arange(5.0), bins=3, range=(0, np.inf))


BAD = {
    # Assignment of numbers that NumPy refuses.
    "u8.at[0].set(-1)": "out of bounds for uint8",
    "i8.at[0].set(255)": "out of bounds for int8",
    "i8.at[0].set(np.nan)": "cannot convert float NaN to integer",
    "i8.at[0].set(np.inf)": "cannot convert float infinity to integer",
    "u8.at[1:].set(1j)": "complex number",
    "i8.at[0].set(300.0)": "out of bounds for int8",
    # A NumPy scalar into signed ints is converted as a Python number (NumPy 2).
    "i8.at[0].set(astype(300.0, 'float64'))": "out of bounds for int8",
    "i8.at[1:].set(astype(3.4e38, 'float32'))": "out of bounds for int8",
    # Random parameters NumPy refuses.
    "random.default_rng(1).normal(0, -1, size=3)": "scale < 0",
    "random.default_rng(1).uniform(1, 0, size=3)": "high - low < 0",
    "random.default_rng(1).lognormal(0, -1, size=3)": "sigma < 0",
    "random.default_rng(1).exponential(-2, size=3)": "scale < 0",
    "random.default_rng(1).gamma(2, -1, size=3)": "scale < 0",
    # Histograms NumPy refuses.
    "histogram(f32, range=(0, np.inf))[0]": "is not finite",
}


def test_refusals_in_the_job_language(tmp_path):
    arrays = _arrays(tmp_path)
    job = tmp_path / "job.toml"
    for expr, message in BAD.items():
        job.write_text(job_text({**arrays, "y": expr}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 1 and message in p.stderr, (expr, p.stderr)
    # What NumPy accepts stays accepted: a float truncates, a bool array takes anything.
    arrays["ok1"] = "u8.at[0].set(-0.5)"
    arrays["ok2"] = "astype(u8, 'bool').at[0].set(1j)"
    job.write_text(job_text(arrays, {"ok1": str(tmp_path / "ok1.npy"),
                                     "ok2": str(tmp_path / "ok2.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    want = INPUTS["u8"][0].copy()
    want[0] = -0.5
    np.testing.assert_array_equal(np.load(tmp_path / "ok1.npy"), want)
    np.testing.assert_array_equal(np.load(tmp_path / "ok2.npy"), [True, True, True])


def test_all_nan_histogram_fails_the_run_with_numpys_words(tmp_path):
    arrays = _arrays(tmp_path)
    arrays["y"] = "histogram(f32 * np.nan, bins=3)[0]"
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"y": str(tmp_path / "y.npy")},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = run(job, check=False)
    assert p.returncode != 0
    assert "autodetected range" in p.stderr and "is not finite" in p.stderr, p.stderr
    assert not (tmp_path / "y.npy").exists()


@pytest.mark.parametrize("expr, words", [
    ("random.default_rng(1).normal(0, ar - 1, size=5)", "scale < 0"),
    ("random.default_rng(1).exponential(ar - 1, size=5)", "scale < 0"),
    ("random.default_rng(1).lognormal(0, ar - 1, size=5)", "sigma < 0"),
    ("random.default_rng(1).uniform(ar, 2.0, size=5)", "high - low < 0"),
])
def test_random_array_parameters_are_checked_as_numpy_checks_them(tmp_path, expr, words):
    """An array of scales holding a negative fails the run with NumPy's words (numbers
    are refused at check); without one the same expression runs."""
    arrays = _arrays(tmp_path)
    job = tmp_path / "job.toml"
    for e, ok in ((expr, False), (expr.replace("ar - 1", "ar + 1").replace("uniform(ar,", "uniform(ar - 9,"), True)):
        job.write_text(job_text({**arrays, "y": e}, {"y": str(tmp_path / "y.npy")},
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        p = run(job, check=False)
        if ok:
            assert p.returncode == 0, (e, p.stderr)
        else:
            assert p.returncode != 0 and words in p.stderr, (e, p.stderr)
            assert not (tmp_path / "y.npy").exists()


def test_a_killed_sessions_store_is_reclaimed_by_the_next(tmp_path):
    """A session whose process died (os._exit) leaves its prefix; the next session on the
    same store removes it, and never a live session's."""
    store = tmp_path / "store"
    code = (
        "import os, numpy as np, nums_cloud, nums_cloud.numpy as nps\n"
        f"nums_cloud.init(storage='file://{store}', progress=False)\n"
        "x = nps.array(np.arange(10.0)); x.persist(); print(float(x.sum()), flush=True)\n"
        "{tail}"
    )
    env = dict(os.environ)
    py = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                      ".venv", "bin", "python")
    py = py if os.path.exists(py) else "python3"
    # A live session (waiting on its standard input) and a killed one.
    live = subprocess.Popen([py, "-c", code.replace("{tail}", "input()\n")], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert live.stdout.readline().strip() == "45.0"
        dead = subprocess.run([py, "-c", code.replace("{tail}", "os._exit(0)\n")], env=env,
                              capture_output=True, text=True, timeout=120)
        assert dead.stdout.strip() == "45.0", dead.stderr
        before = sorted(p.name for p in store.iterdir() if p.name.startswith("api-"))
        assert len(before) == 2, before
        s = nums_cloud.init(storage=f"file://{store}", progress=False)
        try:
            y = nps.array(np.arange(3.0))
            y.persist()
            after = sorted(p.name for p in store.iterdir() if p.name.startswith("api-"))
        finally:
            s.close()
        # The dead one is gone, the live one and this one's own were kept.
        assert len(after) == 2 and len(set(after) & set(before)) == 1, (before, after)
        live_left = set(after) & set(before)
    finally:
        live.stdin.write("\n")
        live.stdin.flush()
        live.wait(timeout=60)
    assert live_left.isdisjoint(p.name for p in store.iterdir())  # closed at its end


def test_a_full_disk_fails_at_once_and_says_so(tmp_path):
    """A store whose disk is full fails the run at once (not after the store's retry
    budget, an hour here) and says so; what was stored before stays."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a small tmpfs needs root")
    try:
        store = {"url": f"file://{mnt / 'store'}"}
        first = tmp_path / "first.toml"
        first.write_text(job_text({"small": "arange(3.0)"},
                                  {"small": str(mnt / "store" / "kept" / "small")},
                                  name="kept", storage=store))
        run(first)
        before = snapshot(mnt / "store" / "kept")
        job = tmp_path / "job.toml"
        job.write_text(job_text({"x": "random.default_rng(1).random((1000, 1000))"},
                                {"x": str(mnt / "store" / "big" / "x")}, name="big",
                                storage=store))
        p = run(job, check=False, env={"NUMS_STORE_RETRY_SECONDS": "3600"})
        assert p.returncode != 0
        assert "disk is full" in p.stderr, p.stderr
        assert snapshot(mnt / "store" / "kept") == before
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


def test_the_dtype_refusals_raise_numpys_classes_in_python(session):
    """Every refusal of the conformance table's dtype errors raises, from Python, the
    exception class NumPy raises for the same text (the engine's one table)."""
    from test_conformance import DTYPE_ERRORS, DTYPE_INPUTS, numpy_answer

    ns = {name: getattr(nps, name) for name in dir(nps) if not name.startswith("_")}
    ns.update({name: nps.array(a) for name, a in DTYPE_INPUTS.items()})
    checked = 0
    for expr in DTYPE_ERRORS:
        if expr.startswith(("np.linalg", "linear_regression")) or "float16" in expr:
            continue
        want = _numpy_raises(lambda: numpy_answer(expr, DTYPE_INPUTS))
        with pytest.raises(want):
            r = eval(expr, ns)  # noqa: S307 - the table's own texts
            r.get()
        checked += 1
    assert checked >= 15
