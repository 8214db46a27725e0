"""Complex linear algebra through the Python package against NumPy 2: det, slogdet (a unit
complex sign), inv, solve, cholesky (of a Hermitian matrix, upper= as NumPy's), qr, svd,
svdvals, pinv, matrix_rank, matrix_power's negative powers and the 2 and nuclear norms of
complex64 and complex128 matrices: random, ill-conditioned, singular (NumPy's
LinAlgError), in one block and in several (TSQR and blocked Cholesky on complex blocks; a
complex LU in one task), and stacks of them."""
import numpy as np
import pytest

import nums_cloud
import nums_cloud.numpy as nps

la = nps.linalg


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    s = nums_cloud.init(storage=f"file://{tmp_path_factory.mktemp('store')}", workers=2,
                        memory_mb=512, progress=False)
    yield s
    s.close()


def crandn(rng, *shape):
    return rng.standard_normal(shape) + 1j * rng.standard_normal(shape)


def close(got, want, rtol=1e-10):
    """Relative to the largest magnitude of NumPy's answer (LAPACK builds round alike only
    to that)."""
    want = np.asarray(want)
    assert np.asarray(got).shape == want.shape
    np.testing.assert_allclose(got, want, rtol=rtol,
                               atol=rtol * max(1.0, float(np.abs(want).max(initial=0))))


# One block, and blocks of 3 x 4 (ragged, several row and column blocks).
BLOCKS = [None, (3, 4)]


def arr(a, block):
    x = nps.asarray(a)
    return x if block is None else x.block(*block)


@pytest.mark.parametrize("block", BLOCKS, ids=["one-block", "ragged-blocks"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_lu_functions_of_a_complex_matrix_match_numpy(session, block, dtype):
    rng = np.random.default_rng(1)
    a = (crandn(rng, 9, 9) + 3 * np.eye(9)).astype(dtype)
    b = crandn(rng, 9, 2).astype(dtype)
    rtol = 1e-10 if dtype == np.complex128 else 2e-5
    x, y = arr(a, block), arr(b, block)
    inv = la.inv(x)
    assert inv.dtype == dtype
    close(inv.get(), np.linalg.inv(a), rtol)
    close(la.solve(x, y).get(), np.linalg.solve(a, b), rtol)
    close(la.solve(x, y[:, 0]).get(), np.linalg.solve(a, b[:, 0]), rtol)
    # a real right-hand side with a complex matrix, and a real matrix with a complex one
    close(la.solve(x, nps.asarray(b.real)).get(), np.linalg.solve(a, b.real), rtol)
    close(la.solve(nps.asarray(a.real), y).get(), np.linalg.solve(a.real, b), rtol)
    det = la.det(x)
    assert det.dtype == dtype and det.shape == ()
    close(det.get(), np.linalg.det(a), rtol)
    sign, logabsdet = la.slogdet(x)
    want = np.linalg.slogdet(a)
    assert sign.dtype == dtype and logabsdet.dtype == np.dtype(dtype).type(0).real.dtype
    close(sign.get(), want.sign, rtol)
    assert abs(abs(complex(sign.get())) - 1) < 1e-6
    close(logabsdet.get(), want.logabsdet, rtol)
    for n in (-1, -2, -3):
        close(la.matrix_power(x, n).get(), np.linalg.matrix_power(a, n), 1e3 * rtol)


def test_ill_conditioned_complex_matrices_are_solved_as_numpy_solves_them(session):
    """A complex matrix of condition about 1e10 (singular values from 1 to 1e-10, random
    unitary factors): solve's residual is as small as NumPy's, inv's product with the matrix
    is the identity to the condition's digits."""
    rng = np.random.default_rng(2)
    n = 12
    u, _ = np.linalg.qr(crandn(rng, n, n))
    v, _ = np.linalg.qr(crandn(rng, n, n))
    a = (u * np.logspace(0, -10, n)) @ v.conj().T
    b = crandn(rng, n)
    for block in BLOCKS:
        got = la.solve(arr(a, block), nps.asarray(b)).get()
        want = np.linalg.solve(a, b)
        assert np.linalg.norm(a @ got - b) <= 100 * max(np.linalg.norm(a @ want - b), 1e-15)
        close(la.inv(arr(a, block)).get() @ a, np.eye(n), 1e-4)
        close(la.det(arr(a, block)).get(), np.linalg.det(a), 1e-5)


@pytest.mark.parametrize("block", BLOCKS, ids=["one-block", "ragged-blocks"])
def test_a_singular_complex_matrix_is_numpys_linalg_error(session, block):
    rng = np.random.default_rng(3)
    a = crandn(rng, 6, 6)
    a[4] = (1 - 2j) * a[1]  # a row that is a complex multiple of another
    x = arr(a, block)
    for f in (lambda: la.inv(x), lambda: la.solve(x, nps.ones(6)),
              lambda: la.matrix_power(x, -1)):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            f().get()
    # det and slogdet of a singular matrix are 0 (sign 0, logabsdet -inf), as NumPy's
    assert abs(complex(la.det(x).get())) < 1e-12
    sign, logabsdet = la.slogdet(x)
    assert complex(sign.get()) == 0 and float(logabsdet.get()) == -np.inf
    z = np.zeros((3, 3), dtype=np.complex64)
    with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
        la.inv(nps.asarray(z)).get()
    assert la.det(nps.asarray(z)).get() == 0


@pytest.mark.parametrize("block", [None, (3, 3), (4, 6)], ids=["one-block", "square-blocks", "other-blocks"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_cholesky_of_a_hermitian_matrix_matches_numpy(session, block, dtype):
    """L with A = L L^H (lower), its conjugate transpose with upper=True, on one block and
    blocked (left-looking, zherk and ztrsm on complex blocks); only the lower triangle is
    read, as NumPy's; a Hermitian matrix that is not positive definite is NumPy's error."""
    rng = np.random.default_rng(4)
    g = crandn(rng, 10, 10)
    h = (g @ g.conj().T + 10 * np.eye(10)).astype(dtype)
    rtol = 1e-10 if dtype == np.complex128 else 2e-5
    l = la.cholesky(arr(h, block))
    assert l.dtype == dtype
    close(l.get(), np.linalg.cholesky(h), rtol)
    close(la.cholesky(arr(h, block), upper=True).get(), np.linalg.cholesky(h, upper=True), rtol)
    # the upper triangle is not read
    lower_only = np.tril(h)
    close(la.cholesky(arr(lower_only, block)).get(), np.linalg.cholesky(h), rtol)
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        la.cholesky(arr(h - 1e3 * np.eye(10, dtype=dtype), block)).get()


@pytest.mark.parametrize("block", [None, (4, 3), (2, 5)], ids=["one-block", "row-blocks", "tree"])
@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_qr_svd_and_the_norms_of_a_complex_matrix_match_numpy(session, block, dtype):
    """TSQR of complex blocks (leaves, combines, Q by direct TSQR): Q R = A with Q^H Q = I and
    |R| NumPy's (diag(R) real and >= 0 here; NumPy's is LAPACK's phase); the SVD's S and
    svdvals NumPy's (real dtype), U S Vh = A with unitary factors; the 2, -2 and nuclear
    norms; pinv (the standard's default cutoff, max(M, N) eps: NumPy's ``rtol=None``) and
    matrix_rank of full-rank and rank-deficient matrices."""
    rng = np.random.default_rng(5)
    a = crandn(rng, 13, 5).astype(dtype)
    real = np.dtype(dtype).type(0).real.dtype
    rtol = 1e-10 if dtype == np.complex128 else 2e-5
    x = arr(a, block)
    q, r = la.qr(x)
    assert q.dtype == dtype and r.dtype == dtype
    qv, rv = q.get(), r.get()
    close(qv @ rv, a, rtol)
    close(qv.conj().T @ qv, np.eye(5), rtol)
    close(np.abs(rv), np.abs(np.linalg.qr(a).R), rtol)
    assert np.all(np.diag(rv).imag == 0) and np.all(np.diag(rv).real >= 0)
    assert np.all(np.tril(rv, -1) == 0)
    u, s, vh = la.svd(x, full_matrices=False)
    assert (u.dtype, s.dtype, vh.dtype) == (dtype, real, dtype)
    uv, sv, vhv = u.get(), s.get(), vh.get()
    close(sv, np.linalg.svd(a, compute_uv=False), rtol)
    close((uv * sv) @ vhv, a, rtol)
    close(uv.conj().T @ uv, np.eye(5), rtol)
    close(vhv @ vhv.conj().T, np.eye(5), rtol)
    sv2 = la.svdvals(x)
    assert sv2.dtype == real
    close(sv2.get(), np.linalg.svdvals(a), rtol)
    close(la.svdvals(arr(a.T, None)).get(), np.linalg.svdvals(a.T), rtol)  # wide
    for ord in (2, -2, "nuc"):
        got = la.norm(x, ord)
        assert got.dtype == real, ord
        close(got.get(), np.linalg.norm(a, ord), rtol)
    close(la.matrix_norm(x, ord=2).get(), np.linalg.matrix_norm(a, ord=2), rtol)
    close(la.pinv(x).get(), np.linalg.pinv(a, rtol=None), 1e2 * rtol)
    assert int(la.matrix_rank(x).get()) == 5
    low = (crandn(rng, 13, 2) @ crandn(rng, 2, 5)).astype(dtype)  # rank 2
    assert int(la.matrix_rank(arr(low, block)).get()) == np.linalg.matrix_rank(low) == 2
    close(la.pinv(arr(low, block)).get(), np.linalg.pinv(low, rtol=None), 1e2 * rtol)
    close(la.pinv(arr(low.T, None)).get(), np.linalg.pinv(low.T, rtol=None), 1e2 * rtol)


def test_stacks_of_complex_matrices_match_numpy(session):
    rng = np.random.default_rng(6)
    st = crandn(rng, 2, 3, 4, 4) + 4 * np.eye(4)
    x = nps.asarray(st)
    for name in ("inv", "det", "svdvals"):
        close(getattr(la, name)(x).get(), getattr(np.linalg, name)(st))
    sign, logabsdet = la.slogdet(x)
    want = np.linalg.slogdet(st)
    close(sign.get(), want.sign)
    close(logabsdet.get(), want.logabsdet)
    b = crandn(rng, 3, 4, 2)
    close(la.solve(x, nps.asarray(b)).get(), np.linalg.solve(st, b))
    h = st @ np.conj(np.swapaxes(st, -1, -2))
    close(la.cholesky(nps.asarray(h)).get(), np.linalg.cholesky(h))
    close(la.matrix_power(x, -2).get(), np.linalg.matrix_power(st, -2), 1e-9)
    np.testing.assert_array_equal(la.matrix_rank(x).get(), np.linalg.matrix_rank(st))


def test_complex_lstsq_is_refused_naming_what_takes_complex(session):
    rng = np.random.default_rng(7)
    with pytest.raises(Exception, match="lstsq takes real matrices"):
        la.lstsq(nps.asarray(crandn(rng, 6, 3)), nps.ones(6)).get()


@pytest.mark.parametrize("block", [None, (4, 3)], ids=["one-block", "row-blocks"])
@pytest.mark.parametrize("dtype", [np.float64, np.complex128])
def test_qr_modes_match_numpy(session, block, dtype):
    """mode "complete" (Q m x m, R m x n), "reduced" and "r" of tall and wide matrices."""
    rng = np.random.default_rng(8)
    for shape in ((9, 4), (3, 7), (5, 5)):
        a = rng.standard_normal(shape).astype(dtype)
        if dtype == np.complex128:
            a = a + 1j * rng.standard_normal(shape)
        x = arr(a, block)
        for mode in ("complete", "reduced"):
            q, r = la.qr(x, mode=mode)
            want = np.linalg.qr(a, mode=mode)
            assert q.shape == want.Q.shape and r.shape == want.R.shape, (shape, mode)
            qv, rv = q.get(), r.get()
            close(qv @ rv, a)
            close(qv.conj().T @ qv, np.eye(qv.shape[1]))
            close(np.abs(rv), np.abs(want.R))
        close(np.abs(la.qr(x, mode="r").get()), np.abs(np.linalg.qr(a, mode="r")))
