"""Issue 43, item 3: NumPy names a day-two user reaches for, each the engine's (job files
and Python alike), against NumPy on data with NaNs, infinities, ties and several
blocks."""
import numpy as np
import pytest

import nums_cloud.numpy as nps
from nums import job_text, run


def same(got, want, what="", ulps=0):
    """NumPy's values, dtype and shape: bit for bit, or within a few units in the last
    place (``ulps``) where a libm function computes them (its rounding is the machine's)."""
    got = got.get() if hasattr(got, "get") else got
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    if ulps:
        np.testing.assert_allclose(got, want, rtol=ulps * np.finfo(want.dtype).eps, atol=0,
                                   err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


RNG = np.random.default_rng(43)
F = np.concatenate([RNG.normal(size=40) * 3, [0.0, -0.0, np.nan, np.inf, -np.inf, 1e-300, 8.0, -27.0]])
G = np.concatenate([RNG.normal(size=40) * 3, [np.nan, 1.0, np.nan, -np.inf, np.inf, 2.0, np.nan, 0.0]])
I = np.arange(-24, 24, dtype=np.int64)


def test_elementwise_functions_are_numpys(session):
    f, g, i = nps.array(F).block(7), nps.array(G).block(5), nps.array(I).block(9)
    f32 = nps.array(F.astype(np.float32)).block(6)
    with np.errstate(all="ignore"):
        # libm's functions (and what is built on them): within 4 ulps.
        for name, got, want in [
            ("cbrt", nps.cbrt(f), np.cbrt(F)),
            ("cbrt int", nps.cbrt(i), np.cbrt(I)),
            ("exp2", nps.exp2(f), np.exp2(F)),
            ("exp2 f32", nps.exp2(f32), np.exp2(F.astype(np.float32))),
            ("sinc", nps.sinc(f), np.sinc(F)),
            ("logaddexp2", nps.logaddexp2(f, g), np.logaddexp2(F, G)),
            ("float_power", nps.float_power(f, 3), np.float_power(F, 3)),
        ]:
            same(got, want, name, ulps=4)
        # Arithmetic and comparisons: bit for bit.
        for name, got, want in [
            ("fabs", nps.fabs(i), np.fabs(I)),
            ("fmax", nps.fmax(f, g), np.fmax(F, G)),
            ("fmin", nps.fmin(f, g), np.fmin(F, G)),
            ("fmax int", nps.fmax(i, 3), np.fmax(I, 3)),
            ("nan_to_num", nps.nan_to_num(f), np.nan_to_num(F)),
            ("nan_to_num f32", nps.nan_to_num(f32), np.nan_to_num(F.astype(np.float32))),
            ("nan_to_num kw", nps.nan_to_num(f, nan=-1.0, posinf=9.0, neginf=-9.0),
             np.nan_to_num(F, nan=-1.0, posinf=9.0, neginf=-9.0)),
            ("nan_to_num int", nps.nan_to_num(i), np.nan_to_num(I)),
            ("isclose", nps.isclose(f, g), np.isclose(F, G)),
            ("isclose inf", nps.isclose(f, np.inf), np.isclose(F, np.inf)),
            ("isclose nan", nps.isclose(f, f, equal_nan=True), np.isclose(F, F, equal_nan=True)),
            ("isclose tol", nps.isclose(f, g, rtol=0.5, atol=1.0), np.isclose(F, G, rtol=0.5, atol=1.0)),
            ("deg2rad", nps.deg2rad(f), np.deg2rad(F)),
            ("radians int", nps.radians(i), np.radians(I)),
            ("rad2deg", nps.rad2deg(f), np.rad2deg(F)),
            ("heaviside", nps.heaviside(f, 0.5), np.heaviside(F, 0.5)),
            ("float_power", nps.float_power(i, 2), np.float_power(I, 2)),
            ("reciprocal", nps.reciprocal(f), np.reciprocal(F)),
            ("reciprocal int", nps.reciprocal(nps.array(I[I != 0]).block(5)),
             np.reciprocal(I[I != 0])),
        ]:
            same(got, want, name)
    assert nps.allclose(f, f, equal_nan=True) is True
    assert nps.allclose(f, g) is False
    assert nps.array_equal(i, nps.array(I)) is True
    assert nps.array_equal(f, f) is False  # NaN != NaN
    assert nps.array_equal(f, f, equal_nan=True) is True
    assert nps.array_equal(i, i[:3]) is False
    # NumPy's ufuncs reach them (``np.cbrt(x)`` of a nums-cloud array stays lazy).
    got = np.fmax(f, g)
    assert isinstance(got, nps.BlockArray)
    same(got, np.fmax(F, G), "np.fmax")


def test_shapes_sorting_and_statistics_are_numpys(session):
    a2 = RNG.integers(0, 5, size=(13, 6))
    x = nps.array(a2).block(4, 4)
    same(nps.column_stack((nps.array(I[:6]), nps.array(I[6:12]))),
         np.column_stack((I[:6], I[6:12])), "column_stack 1-D")
    same(nps.column_stack((x, nps.array(I[:13]))), np.column_stack((a2, I[:13])), "column_stack mixed")
    same(nps.dstack((x, x)), np.dstack((a2, a2)), "dstack")
    same(nps.fliplr(x), np.fliplr(a2), "fliplr")
    same(nps.flipud(x), np.flipud(a2), "flipud")
    same(nps.logspace(0, 3, 7), np.logspace(0, 3, 7), "logspace", ulps=4)
    same(nps.logspace(1, 2, 5, base=2.0, endpoint=False), np.logspace(1, 2, 5, base=2.0, endpoint=False),
         "logspace base", ulps=4)
    # take_along_axis: argsort's order, NumPy's negative indices, broadcast indices.
    order = nps.argsort(x, axis=1)
    same(nps.take_along_axis(x, order, axis=1), np.take_along_axis(a2, np.argsort(a2, axis=1, kind="stable"), axis=1),
         "take_along_axis 1")
    ind = RNG.integers(-13, 13, size=(4, 6))
    same(nps.take_along_axis(x, nps.array(ind), axis=0), np.take_along_axis(a2, ind, axis=0),
         "take_along_axis 0")
    col = RNG.integers(0, 6, size=(13, 1))
    same(x.take(nps.array([1, 4])), a2.take([1, 4]), "take method")
    same(nps.take_along_axis(x, nps.array(col), axis=1), np.take_along_axis(a2, col, axis=1),
         "take_along_axis broadcast")
    with pytest.raises(IndexError, match="out of bounds"):
        nps.take_along_axis(x, nps.array(np.full((1, 6), 13)), axis=0).get()
    # digitize: increasing and decreasing bins, right=, ties on the edges.
    v = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, 9.0, np.nan])
    for bins in ([0.0, 1.0, 2.5, 3.0], [3.0, 2.5, 1.0, 0.0]):
        for right in (False, True):
            same(nps.digitize(nps.array(v).block(3), bins, right=right),
                 np.digitize(v, bins, right=right), f"digitize {bins} {right}")
    with pytest.raises(ValueError, match="monotonically"):
        nps.digitize(nps.array(v), [0.0, 2.0, 1.0]).get()
    # lexsort: the last key first, ties by the ones before (stable).
    k1, k2 = RNG.integers(0, 3, size=50), RNG.integers(0, 4, size=50)
    same(nps.lexsort((nps.array(k1).block(7), nps.array(k2).block(9))), np.lexsort((k1, k2)), "lexsort")
    same(nps.lexsort(nps.array(np.stack([k1, k2]))), np.lexsort(np.stack([k1, k2])), "lexsort 2-D")
    # interp: NumPy's formula (bit for bit), the ends, left/right, repeated xp.
    xp = np.array([0.0, 1.0, 1.0, 2.5, 4.0])
    fp = np.array([1.0, 3.0, 5.0, -2.0, 7.0])
    xs = np.concatenate([np.linspace(-1, 5, 37), xp, [np.nan]])
    same(nps.interp(nps.array(xs).block(8), xp, fp), np.interp(xs, xp, fp), "interp")
    same(nps.interp(nps.array(xs), xp, fp, left=-9.0, right=9.0), np.interp(xs, xp, fp, left=-9.0, right=9.0),
         "interp ends")
    same(nps.interp(nps.array(xs), [2.0], [7.0]), np.interp(xs, [2.0], [7.0]), "interp one point")
    # convolve: each mode, either operand the shorter; ints exactly, floats to rounding.
    a, k = RNG.integers(-5, 5, size=30), np.array([1, -2, 3])
    for mode in ("full", "same", "valid"):
        same(nps.convolve(nps.array(a).block(7), k, mode=mode), np.convolve(a, k, mode=mode), f"convolve {mode}")
        same(nps.convolve(k, nps.array(a).block(7), mode=mode), np.convolve(k, a, mode=mode),
             f"convolve swapped {mode}")
    af, kf = RNG.normal(size=40), RNG.normal(size=4)
    np.testing.assert_allclose(nps.convolve(nps.array(af).block(9), kf).get(), np.convolve(af, kf), rtol=1e-12,
                               atol=1e-12)


def test_array_methods_are_numpys(session):
    a = RNG.normal(size=(6, 5))
    x = nps.array(a).block(4, 2)
    same(x.round(2), a.round(2), "round")
    same(x.cumsum(axis=0), a.cumsum(axis=0), "cumsum")
    same(x.cumprod(axis=1), a.cumprod(axis=1), "cumprod")
    same(x.argsort(axis=0), a.argsort(axis=0, kind="stable"), "argsort")
    same(x.diagonal(), a.diagonal(), "diagonal")
    srt = np.sort(a[0])
    same(nps.array(srt).block(2).searchsorted(0.0), srt.searchsorted(0.0), "searchsorted")
    same(x.repeat(2, axis=0), a.repeat(2, axis=0), "repeat")
    same((x > 0).nonzero()[1], (a > 0).nonzero()[1], "nonzero")
    assert x.tolist() == a.tolist()
    same(x.to_numpy(), a, "to_numpy")
    x.sort()  # in place, as NumPy's
    a.sort()
    same(x, a, "sort in place")


def test_lists_are_arrays_wherever_numpy_takes_an_array(tmp_path):
    """In a job file, a list operand of a function is its array (NumPy's array_like):
    ``isin(K, [1, 3, 5])``; and the new names run there too."""
    arrays = {"K": "arange(10)", "M": "isin(K, [1, 3, 5])", "E": "exp([0.0, 1.0])",
              "C": "allclose(K, K + 1e-12)", "D": "digitize(K, [2, 5, 8])",
              "P": "interp(K, [0, 9], [0.0, 1.0])", "S": "cbrt(K - 5)",
              "U": "K[astype(arange(3), 'uint8')]"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {n: str(tmp_path / f"{n}.npy") for n in arrays if n != "K"},
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    run(job)
    k = np.arange(10)
    for name, want in {"M": np.isin(k, [1, 3, 5]), "E": np.exp([0.0, 1.0]), "C": np.array(True),
                       "D": np.digitize(k, [2, 5, 8]), "P": np.interp(k, [0, 9], [0.0, 1.0]),
                       "S": np.cbrt(k - 5), "U": k[:3]}.items():
        same(np.load(tmp_path / f"{name}.npy"), want, name)


def test_choice_with_probabilities(session):
    """``Generator.choice(p=...)`` draws each index with its probability (a binomial
    bound on 100k draws: a wrong mapping is off by far more), never one of probability
    0; ``p`` not summing to 1 or negative fails as NumPy's ValueError."""
    g = nps.random.default_rng(3)
    p = np.array([0.1, 0.2, 0.3, 0.4, 0.0])
    n = 100_000
    x = g.choice(5, size=n, p=p).get()
    assert x.dtype == np.int64 and x.shape == (n,)
    freq = np.bincount(x, minlength=5) / n
    assert np.all(np.abs(freq - p) <= 6 * np.sqrt(p * (1 - p) / n)), freq
    rows = nps.array(np.arange(12).reshape(6, 2))
    got = g.choice(rows, size=4, p=[0.0, 0.0, 1.0, 0.0, 0.0, 0.0]).get()
    np.testing.assert_array_equal(got, np.tile([4, 5], (4, 1)))
    assert nps.random.default_rng(7).choice(5, 50, p=p).tolist() == \
        nps.random.default_rng(7).choice(5, 50, p=p).tolist()
    with pytest.raises(ValueError, match="do not sum to 1"):
        g.choice(3, size=4, p=[0.5, 0.6, 0.1]).get()
    with pytest.raises(ValueError, match="non-negative"):
        g.choice(3, size=4, p=[1.5, -0.5, 0.0]).get()
    with pytest.raises(ValueError, match="same size"):
        g.choice(3, size=4, p=[0.5, 0.5])


def test_the_names_docs_unsupported_listed_are_numpys(session):
    """What docs/unsupported.md listed with a workaround, now the engine's: diag, tri,
    split, array_split, ediff1d, trapezoid, polyval, vander, rot90, cross, kron,
    correlate, empty."""
    a2 = RNG.normal(size=(7, 5))
    x = nps.array(a2).block(3, 2)
    v = RNG.normal(size=6)
    xv = nps.array(v).block(4)
    for k in (0, 2, -1):
        same(nps.diag(x, k), np.diag(a2, k), f"diag 2-D {k}")
        same(nps.diag(xv, k), np.diag(v, k), f"diag 1-D {k}")
    same(nps.diag(nps.array([1.0, np.inf])), np.diag([1.0, np.inf]), "diag inf")
    same(nps.tri(4, 6, 1), np.tri(4, 6, 1), "tri")
    same(nps.tri(3, dtype="int64"), np.tri(3, dtype=np.int64), "tri int")
    for got, want in zip(nps.split(x, [2, 5], axis=0), np.split(a2, [2, 5], axis=0)):
        same(got, want, "split indices")
    for got, want in zip(nps.split(x, 5, axis=1), np.split(a2, 5, axis=1)):
        same(got, want, "split sections")
    for got, want in zip(nps.array_split(x, 3), np.array_split(a2, 3)):
        same(got, want, "array_split")
    with pytest.raises(ValueError, match="equal division"):
        nps.split(x, 3)
    same(nps.ediff1d(x), np.ediff1d(a2), "ediff1d")
    same(nps.ediff1d(xv, to_begin=[0.0], to_end=9.0), np.ediff1d(v, to_begin=[0.0], to_end=9.0), "ediff1d ends")
    same(nps.trapezoid(x, axis=0), np.trapezoid(a2, axis=0), "trapezoid", ulps=8)
    same(nps.trapezoid(xv, dx=0.5), np.trapezoid(v, dx=0.5), "trapezoid dx", ulps=8)
    xs = np.cumsum(RNG.random(5))
    same(nps.trapezoid(x, nps.array(xs)), np.trapezoid(a2, xs), "trapezoid x", ulps=8)
    same(nps.polyval([3.0, -2.0, 0.5], xv), np.polyval([3.0, -2.0, 0.5], v), "polyval")
    same(nps.polyval(nps.array([1, 2, 3]), nps.array(I)), np.polyval([1, 2, 3], I), "polyval int")
    same(nps.vander(xv), np.vander(v), "vander")
    same(nps.vander(nps.array(I[:5]), 3, increasing=True), np.vander(I[:5], 3, increasing=True), "vander int")
    a3 = RNG.normal(size=(4, 3, 2))
    for k in (1, 2, 3, -1):
        same(nps.rot90(nps.array(a3).block(3, 2, 1), k), np.rot90(a3, k), f"rot90 {k}")
    same(nps.rot90(nps.array(a3), axes=(1, 2)), np.rot90(a3, axes=(1, 2)), "rot90 axes")
    u, w = RNG.normal(size=(5, 3)), RNG.normal(size=3)
    same(nps.cross(nps.array(u).block(2, 3), w), np.cross(u, w), "cross")
    same(nps.cross(nps.array(u.T), nps.array(u.T), axis=0), np.cross(u.T, u.T, axis=0), "cross axis")
    same(nps.kron(x, nps.array([[1.0, 2.0], [3.0, 4.0]])), np.kron(a2, [[1.0, 2.0], [3.0, 4.0]]), "kron 2-D")
    same(nps.kron(nps.array(I[:4]), nps.array(I[:3])), np.kron(I[:4], I[:3]), "kron 1-D")
    af, kf = RNG.integers(-5, 5, size=12), np.array([1, 0, -2])
    for mode in ("valid", "same", "full"):
        same(nps.correlate(nps.array(af).block(5), kf, mode), np.correlate(af, kf, mode), f"correlate {mode}")
        same(nps.correlate(kf, nps.array(af).block(5), mode), np.correlate(kf, af, mode),
             f"correlate swapped {mode}")
    same(nps.empty((2, 3)), np.zeros((2, 3)), "empty")
    same(nps.empty_like(x, dtype=np.int32), np.zeros((7, 5), np.int32), "empty_like")


def test_gradient_is_numpys(session):
    """np.gradient with uniform spacing: NumPy's formulas, bit for bit; one array for one
    axis, a tuple for several; ints in float64."""
    a2 = RNG.normal(size=(9, 6))
    x = nps.array(a2).block(4, 4)
    same(nps.gradient(nps.array(F[:40]).block(7)), np.gradient(F[:40]), "1-D")
    same(nps.gradient(nps.array(I).block(9), 0.5), np.gradient(I, 0.5), "int, dx")
    for got, want in zip(nps.gradient(x, 2.0, 0.25), np.gradient(a2, 2.0, 0.25)):
        same(got, want, "2-D, a spacing per axis")
    same(nps.gradient(x, axis=1), np.gradient(a2, axis=1), "axis")
    same(nps.gradient(nps.array([1.0, 4.0])), np.gradient(np.array([1.0, 4.0])), "two points")
    with pytest.raises(ValueError, match="too small"):
        nps.gradient(nps.array([1.0]))


def test_dlpack_exports_the_values(session):
    """``np.from_dlpack`` of a nums-cloud array gives its values (read-only, or a copy on
    request); ``nps.from_dlpack`` of one is an array of those values; the device is the
    CPU."""
    x = nps.array(RNG.normal(size=(5, 4))).block(2, 3) * 2.0
    want = x.get()
    got = np.from_dlpack(x)
    np.testing.assert_array_equal(got, want)
    assert not got.flags.writeable
    copied = np.from_dlpack(x, copy=True)
    assert copied.flags.writeable and np.array_equal(copied, want)
    same(nps.from_dlpack(x), want, "from_dlpack")
    assert x.__dlpack_device__() == (1, 0)
    # A consumer of DLPack before 1.0 (no max_version) cannot be told of read-only
    # memory: it gets a copy (NumPy refuses to export read-only memory to it).
    assert type(x.__dlpack__()).__name__ == "PyCapsule"
    np.testing.assert_array_equal(np.from_dlpack(_Legacy(x)), want)


class _Legacy:
    """A DLPack producer as a consumer before DLPack 1.0 sees it: no max_version."""

    def __init__(self, x):
        self.x = x

    def __dlpack__(self, stream=None, **kw):
        return self.x.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.x.__dlpack_device__()


def test_arange_whose_second_value_would_leave_int64(session):
    """``arange`` with int bounds where start + step leaves int64: a range of one value or
    none never uses that sum (the Array API suite drew it), as NumPy's."""
    for args, kw in [((-3832770122693467648, 1067801, -6173300264493582336), {"dtype": np.float64}),
                     ((-3832770122693467648, 1067801, -6173300264493582336), {}),
                     ((2**62 + 1, 2**62 + 3, 2**62), {}),
                     ((-(2**62), -(2**63), -(2**62) - 5), {"dtype": np.float64})]:
        same(nps.arange(*args, **kw), np.arange(*args, **kw), str(args))


def test_vecdot_and_matrix_transpose_are_numpys(session):
    """The standard's vecdot (conjugating x1, in the promoted dtype: int32 stays int32)
    and matrix_transpose, the engine's (job files have them too)."""
    a = RNG.integers(-9, 9, size=(4, 3, 5)).astype(np.int32)
    c = RNG.normal(size=(3, 5)) + 1j * RNG.normal(size=(3, 5))
    x = nps.array(a).block(2, 2, 3)
    same(nps.vecdot(x, x), np.vecdot(a, a), "int32")
    same(nps.vecdot(x, x, axis=1), np.vecdot(a, a, axis=1), "axis")
    got = nps.vecdot(nps.array(c), nps.array(c[::-1]))
    np.testing.assert_allclose(got.get(), np.vecdot(c, c[::-1]), rtol=1e-13)
    assert got.dtype == np.complex128
    same(nps.matrix_transpose(x), np.matrix_transpose(a), "matrix_transpose")
    with pytest.raises(ValueError, match="not broadcast along it"):
        nps.vecdot(x, nps.ones((4, 3, 4)))


def test_vector_norm_keepdims_keeps_every_axis(session):
    """``linalg.vector_norm(x, axis=None, keepdims=True)`` has x's number of axes, each
    of length 1 (it had one axis whatever x's: found by the Array API suite)."""
    for a in (np.float64(3.0) * np.ones(()), RNG.normal(size=(3, 4)), RNG.normal(size=(2, 3, 2))):
        for ord in (2, 1, 0.5, np.inf):
            got = nps.linalg.vector_norm(nps.asarray(a), keepdims=True, ord=ord)
            want = np.linalg.vector_norm(a, keepdims=True, ord=ord)
            assert got.shape == want.shape, (a.shape, ord, got.shape)
            np.testing.assert_allclose(got.get(), want, rtol=1e-12)


def test_eye_takes_a_k_past_int64(session):
    """NumPy's eye takes any Python int for k: one past int64 is past every diagonal, the
    all-zero matrix (the Array API suite drew such a k). Past uint64 no engine number
    carries it: OverflowError at the Python boundary, as for any argument."""
    for k in (2**63, 2**64 - 1, 2**63 - 1, -2**63, 3, -1, True):
        for n, m in ((3, None), (2, 5)):
            got = nps.eye(n, m, k=k)
            want = np.eye(n, m, k=k)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got.get(), want, err_msg=f"k={k}")
    np.testing.assert_array_equal(nps.eye(4, k=2**63 + 7, dtype=np.int8).get(),
                                  np.eye(4, k=2**63 + 7, dtype=np.int8))
    with pytest.raises(OverflowError):
        nps.eye(3, k=-2**63 - 1)
    # NumPy's TypeError; the engine's "k must be an integer" is a ValueError (as before).
    with pytest.raises((TypeError, ValueError), match="k must be an integer"):
        nps.eye(3, k=1.5)


def test_polyfit_and_resize_are_numpys(session):
    """np.polyfit (the scaled, weighted lstsq NumPy solves; blocks of x and y across many
    rows) and np.resize (cyclic fill, cut, empty input): against NumPy."""
    xs = np.linspace(-3.0, 5.0, 1000)
    ys = 0.5 * xs**3 - 2.0 * xs + 1.0 + RNG.normal(size=1000) * 0.1
    x, y = nps.array(xs).block(128), nps.array(ys).block(128)
    for deg in (0, 1, 3, 6):
        np.testing.assert_allclose(nps.polyfit(x, y, deg).get(), np.polyfit(xs, ys, deg),
                                   rtol=1e-9, atol=1e-12, err_msg=f"polyfit deg {deg}")
    w = RNG.random(1000) + 0.5
    np.testing.assert_allclose(nps.polyfit(x, y, 2, w=nps.array(w)).get(), np.polyfit(xs, ys, 2, w=w),
                               rtol=1e-9)
    y2 = np.stack([ys, 3.0 * xs + 2.0], axis=1)
    np.testing.assert_allclose(nps.polyfit(x, nps.array(y2).block(100, 2), 1).get(),
                               np.polyfit(xs, y2, 1), rtol=1e-9, atol=1e-12)
    # Integer points are made float, as NumPy's `x + 0.0`.
    got = nps.polyfit(nps.array(I), nps.array(I * I), 2)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got.get(), np.polyfit(I, I * I, 2), atol=1e-9)
    c, res, rank, sv, rcond = nps.polyfit(x, y, 3, full=True)
    wc, wres, wrank, wsv, wrcond = np.polyfit(xs, ys, 3, full=True)
    np.testing.assert_allclose(c.get(), wc, rtol=1e-9)
    np.testing.assert_allclose(res.get(), wres, rtol=1e-6)
    assert int(rank.get()) == wrank and float(rcond) == wrcond
    np.testing.assert_allclose(sv.get(), wsv, rtol=1e-9)
    with pytest.raises(ValueError, match="deg must be non-negative"):
        nps.polyfit(x, y, -1)

    a = RNG.normal(size=(3, 4))
    xa = nps.array(a).block(2, 3)
    for shape in ((2, 6), (5, 5), (25,), (3,), (0,), 7, (2, 0, 3)):
        same(nps.resize(xa, shape), np.resize(a, shape), f"resize {shape}")
    same(nps.resize(nps.array(I[:0]), (2, 3)), np.resize(I[:0], (2, 3)), "resize empty")
    same(nps.resize(nps.array([True, False]), 5), np.resize([True, False], 5), "resize bool")
    with pytest.raises(ValueError, match="non-negative"):
        nps.resize(xa, (-1, 2))


def test_pad_modes_are_numpys(session, tmp_path):
    # Every mode that takes elements, widths past the axis (periodic as NumPy's), 2-D with
    # a width per axis (the corners from the axis padded first), over several blocks.
    a = np.arange(5 * 7, dtype=np.float64).reshape(5, 7) * 1.5 - 4
    x = nps.array(a).block(2, 3)
    v = nps.array(I).block(10)
    for mode in ["constant", "edge", "wrap", "reflect", "symmetric"]:
        for width in [0, 1, 3, 13, (0, 2), (4, 1)]:
            same(nps.pad(v, width, mode=mode), np.pad(I, width, mode=mode), (mode, width))
        for width in [((1, 2), (3, 0)), ((6, 9), (8, 2)), 2]:
            same(nps.pad(x, width, mode=mode), np.pad(a, width, mode=mode), (mode, width))
    same(nps.pad(nps.array([7]), 4, mode="reflect"), np.pad([7], 4, mode="reflect"))
    same(nps.pad(x, 2, mode="empty").shape, np.pad(a, 2, mode="empty").shape)
    with pytest.raises(ValueError, match="empty axis 0"):
        nps.pad(nps.zeros(0), 1, mode="edge").get()
    with pytest.raises(ValueError, match="constant_values is for mode=\"constant\""):
        nps.pad(v, 1, mode="edge", constant_values=3).get()
    with pytest.raises(ValueError, match="\"median_of_three\" is not supported"):
        nps.pad(v, 1, mode="median_of_three").get()
    # A job file's pad, in the engine as Python's.
    np.save(tmp_path / "a.npy", a)
    job = tmp_path / "job.toml"
    job.write_text(job_text({"A": {"load": "a.npy", "block": [2, 3]},
                             "P": "pad(A, ((2, 3), (1, 4)), mode='symmetric')"},
                            {"P": "p.npy"}))
    run(job)
    same(np.load(tmp_path / "p.npy"), np.pad(a, ((2, 3), (1, 4)), mode="symmetric"))


def test_pad_statistic_and_ramp_modes_are_numpys(session):
    # mean, maximum, minimum, median of stat_length elements next to each side (the whole
    # axis by default; the corners from the axes padded first), and linear_ramp to
    # end_values, over several blocks, in floats and ints (NumPy rounds a mean or median of
    # ints halves to even and floors a ramp).
    a = np.arange(6 * 7, dtype=np.float64).reshape(6, 7) ** 1.5 - 9
    x = nps.array(a).block(2, 3)
    ai = (np.arange(6 * 7).reshape(6, 7) * 7919) % 23 - 11
    xi = nps.array(ai).block(4, 2)
    v = nps.array(I).block(10)
    for mode in ["mean", "maximum", "minimum", "median"]:
        for length in [None, 1, 2, (1, 4), ((2, 1), (3, 5)), 100]:
            for arr, xs in [(a, x), (ai, xi)]:
                kw = {} if length is None else {"stat_length": length}
                got, want = nps.pad(xs, ((2, 1), (3, 2)), mode=mode, **kw), np.pad(arr, ((2, 1), (3, 2)), mode=mode, **kw)
                # A mean's sum runs in another order than NumPy's pairwise one.
                if mode == "mean" and arr.dtype.kind == "f":
                    np.testing.assert_allclose(got.get(), want, rtol=1e-13, err_msg=str(length))
                else:
                    same(got, want, (mode, length))
        same(nps.pad(v, (3, 5), mode=mode, stat_length=4), np.pad(I, (3, 5), mode=mode, stat_length=4), mode)
    for ends in [0, 5, (-3.5, 2.25), ((1, 2), (100, -7))]:
        for arr, xs in [(a, x), (ai, xi)]:
            same(nps.pad(xs, ((3, 2), (1, 4)), mode="linear_ramp", end_values=ends),
                 np.pad(arr, ((3, 2), (1, 4)), mode="linear_ramp", end_values=ends), ends)
    # A lane whose edge equals its end value: linspace's other formula for every lane.
    same(nps.pad(xi, 3, mode="linear_ramp", end_values=int(ai[0, 0])),
         np.pad(ai, 3, mode="linear_ramp", end_values=int(ai[0, 0])))
    with pytest.raises(ValueError, match="stat_length of 0 yields no value"):
        nps.pad(v, 1, mode="maximum", stat_length=0).get()
    with pytest.raises(ValueError, match="end_values is for mode=\"linear_ramp\""):
        nps.pad(v, 1, mode="mean", end_values=3).get()
