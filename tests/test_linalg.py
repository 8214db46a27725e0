"""np.linalg through the real binary against NumPy: TSQR qr (1, 2 and many row blocks,
ragged, blocks shorter than the matrix is wide, several tree levels), lstsq, svd, svdvals,
norm, and the square solvers in one task and blocked (Cholesky, LU with pivoting); both
schedulers; a subset on Garage; LinAlgError and bad shapes; plan's factorization text."""
import json
import subprocess

import numpy as np
import pytest

from nums import BIN, job_text, run

rng = np.random.default_rng(5)
A = rng.normal(size=(103, 6))
B = rng.normal(size=(103, 2))
y = rng.normal(size=103)
W = rng.normal(size=(5, 9))  # wide
G = rng.normal(size=(40, 40))
SPD = G @ G.T + 40 * np.eye(40)
rhs = rng.normal(size=(40, 3))

TALL = {
    "R": "np.linalg.qr(a).R",
    "Q": "linalg.qr(a)[0]",
    "Ronly": "qr(a, mode='r')",
    "x": "np.linalg.lstsq(a, b)[0]",
    "x1": "np.linalg.lstsq(a, y)[0]",
    "res": "np.linalg.lstsq(a, b)[1]",
    "rank": "np.linalg.lstsq(a, b)[2]",
    "sv": "svdvals(a)",
    "U": "np.linalg.svd(a, full_matrices=False).U",
    "S": "np.linalg.svd(a, full_matrices=False).S",
    "Vh": "np.linalg.svd(a, full_matrices=False)[2]",
    "svw": "svdvals(w)",
    "n_fro": "np.linalg.norm(a)",
    "n_2": "np.linalg.norm(a, 2)",
    "n_1": "np.linalg.norm(a, 1)",
    "n_inf": "np.linalg.norm(a, np.inf)",
    "n_m2": "np.linalg.norm(a, -2)",
    "n_nuc": "np.linalg.norm(a, 'nuc')",
    "n_ax": "np.linalg.norm(a, axis=0)",
    "n_ax3": "np.linalg.norm(a, 3, axis=1)",
    "n_vec": "np.linalg.norm(y, 1)",
    "n_w2": "np.linalg.norm(w, 2)",
}


def run_job(tmp_path, arrays, outputs, scheduler="lshs", check=True):
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {k: str(tmp_path / f"{k}.npy") for k in outputs},
                            name="la", storage={"url": f"file://{tmp_path / 'store'}"},
                            compute={"scheduler": scheduler, "memory_mb": 512}))
    return run(job, check=check)


def inputs(tmp_path, **arrays):
    out = {}
    for name, (arr, block) in arrays.items():
        np.save(tmp_path / f"in_{name}.npy", arr)
        out[name] = {"load": str(tmp_path / f"in_{name}.npy"), "block": block}
    return out


def close(got, want, rtol=1e-10):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=1e-10 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("scheduler", ["lshs", "naive"])
@pytest.mark.parametrize("block", [[103, 6], [60, 4], [7, 6], [1, 6]],
                         ids=["one-row-block", "two-row-blocks", "many-ragged", "three-levels"])
def test_tall_skinny_factorizations_match_numpy(tmp_path, scheduler, block):
    arrays = inputs(tmp_path, a=(A, block), b=(B, [block[0], 2]), y=(y, [10]), w=(W, [2, 4]))
    arrays.update(TALL)
    run_job(tmp_path, arrays, TALL, scheduler)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in TALL}
    Q, R = got["Q"], got["R"]
    assert Q.shape == (103, 6) and R.shape == (6, 6)
    close(Q @ R, A)
    close(Q.T @ Q, np.eye(6))
    assert np.all(np.tril(R, -1) == 0)
    close(np.abs(R), np.abs(np.linalg.qr(A)[1]))
    close(got["Ronly"], R)
    close(got["x"], np.linalg.lstsq(A, B, rcond=None)[0])
    assert got["x1"].shape == (6,)
    close(got["x1"], np.linalg.lstsq(A, y, rcond=None)[0])
    close(got["res"], np.linalg.lstsq(A, B, rcond=None)[1])
    assert got["rank"] == 6 and got["rank"].dtype == np.int32  # NumPy's
    s = np.linalg.svd(A, compute_uv=False)
    close(got["sv"], s)
    close(got["S"], s)
    U, Vh = got["U"], got["Vh"]
    close((U * got["S"]) @ Vh, A)
    close(U.T @ U, np.eye(6))
    u0, _, vh0 = np.linalg.svd(A, full_matrices=False)
    close(np.abs(U), np.abs(u0))  # up to a sign per column
    close(np.abs(Vh), np.abs(vh0))
    close(got["svw"], np.linalg.svd(W, compute_uv=False))
    for key, want in [("n_fro", np.linalg.norm(A)), ("n_2", np.linalg.norm(A, 2)),
                      ("n_1", np.linalg.norm(A, 1)), ("n_inf", np.linalg.norm(A, np.inf)),
                      ("n_m2", np.linalg.norm(A, -2)), ("n_nuc", np.linalg.norm(A, "nuc")),
                      ("n_ax", np.linalg.norm(A, axis=0)), ("n_ax3", np.linalg.norm(A, 3, axis=1)),
                      ("n_vec", np.linalg.norm(y, 1)), ("n_w2", np.linalg.norm(W, 2))]:
        assert got[key].shape == np.shape(want), key
        close(got[key], want)


@pytest.mark.parametrize("scheduler", ["lshs", "naive"])
@pytest.mark.parametrize("block", [[40, 40], [15, 15]], ids=["one-block", "several-blocks"])
def test_square_solvers_match_numpy(tmp_path, scheduler, block):
    exprs = {
        "L": "np.linalg.cholesky(s)",
        "X": "np.linalg.solve(s, r)",
        "x1": "solve(s, r[:, 0])",
        "Inv": "linalg.inv(s)",
        "D": "np.linalg.det(s / 40)",
        "sg": "np.linalg.slogdet(s).sign",
        "ld": "np.linalg.slogdet(s)[1]",
    }
    arrays = inputs(tmp_path, s=(SPD, block), r=(rhs, [block[0], 2]))
    arrays.update(exprs)
    run_job(tmp_path, arrays, exprs, scheduler)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in exprs}
    close(got["L"], np.linalg.cholesky(SPD))
    close(got["X"], np.linalg.solve(SPD, rhs))
    close(got["x1"], np.linalg.solve(SPD, rhs[:, 0]))
    close(got["Inv"], np.linalg.inv(SPD))
    close(got["D"], np.linalg.det(SPD / 40), rtol=1e-9)
    sign, logdet = np.linalg.slogdet(SPD)
    assert got["sg"] == sign
    close(got["ld"], logdet)


@pytest.mark.parametrize("scheduler", ["lshs", "naive"])
def test_blocked_lu_matches_numpy_on_a_general_matrix(tmp_path, scheduler):
    """70 x 70, not symmetric, a zero where the first pivot would be without pivoting, in
    ragged blocks that are not square (column panels of 16): solve with 20 right-hand
    sides (two panels of them, one ragged) and with one, inv, det and slogdet (one
    factorization for all), float32 kept float32; a singular matrix's det is 0."""
    rng = np.random.default_rng(11)
    g = rng.normal(size=(70, 70))
    g[0, 0] = 0.0
    b = rng.normal(size=(70, 20))
    sing = g.copy()
    sing[:, 33] = 0.0
    exprs = {"X": "np.linalg.solve(g, b)", "x1": "np.linalg.solve(g, b[:, 3])",
             "Inv": "np.linalg.inv(g)", "D": "np.linalg.det(g)", "sg": "np.linalg.slogdet(g).sign",
             "ld": "np.linalg.slogdet(g).logabsdet", "D0": "np.linalg.det(z)",
             "ld0": "np.linalg.slogdet(z)[1]", "I32": "np.linalg.inv(g.astype('float32'))"}
    arrays = inputs(tmp_path, g=(g, [16, 50]), b=(b, [30, 20]), z=(sing, [20, 20]))
    arrays.update(exprs)
    run_job(tmp_path, arrays, exprs, scheduler)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in exprs}
    close(got["X"], np.linalg.solve(g, b))
    close(got["x1"], np.linalg.solve(g, b[:, 3]))
    close(got["Inv"], np.linalg.inv(g))
    close(got["D"], np.linalg.det(g), rtol=1e-9)
    assert got["sg"] == np.linalg.slogdet(g)[0]
    close(got["ld"], np.linalg.slogdet(g)[1])
    assert got["D0"] == 0.0 and got["ld0"] == -np.inf
    assert got["I32"].dtype == np.float32
    close(got["I32"], np.linalg.inv(g.astype(np.float32)), rtol=1e-3)


@pytest.mark.parametrize("block", [[8, 8], [13, 13], [61, 7], [30, 40]],
                         ids=["8", "13-ragged", "7-ragged", "30-ragged"])
def test_blocked_lu_pivots_rows_across_every_panel(tmp_path, block):
    """Each step's panels carry only their active rows: a row a panel dropped or missed
    would change the answer. 61 x 61 whose every pivot is in the last rows (a diagonally
    dominant matrix with its rows reversed: each step swaps a row from the bottom row block
    into its own), and a random one, in panels of 8, 13, 7 and 30 columns (ragged last
    panels): solve, inv and det against NumPy's, and a singular matrix still refused (its
    det numerically zero: the dependent columns' updates round differently, in different
    panels, so that its pivot may be of rounding size rather than 0 on another machine)."""
    rng = np.random.default_rng(29)
    n = 61
    dom = rng.normal(size=(n, n)) + n * np.eye(n)
    rev = dom[::-1].copy()
    g = rng.normal(size=(n, n))
    b = rng.normal(size=(n, 3))
    sing = g.copy()
    sing[:, 40] = sing[:, 2] * 4.0  # dependent columns in different panels
    exprs = {"Xr": "np.linalg.solve(rev, b)", "Xg": "np.linalg.solve(g, b[:, 1])",
             "Ir": "np.linalg.inv(rev)", "Dr": "np.linalg.det(rev / 61)", "Dg": "np.linalg.det(g)",
             "Ds": "np.linalg.det(z)"}
    arrays = inputs(tmp_path, rev=(rev, block), g=(g, block), b=(b, [block[0], 3]), z=(sing, block))
    arrays.update(exprs)
    run_job(tmp_path, arrays, exprs)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in exprs}
    close(got["Xr"], np.linalg.solve(rev, b))
    close(got["Xg"], np.linalg.solve(g, b[:, 1]))
    close(got["Ir"], np.linalg.inv(rev))
    close(got["Dr"], np.linalg.det(rev / 61), rtol=1e-9)
    close(got["Dg"], np.linalg.det(g), rtol=1e-9)
    assert abs(got["Ds"]) <= n * np.finfo(float).eps * np.prod(np.linalg.norm(sing, axis=1))
    arrays["bad"] = "np.linalg.solve(z, b)"
    p = run_job(tmp_path, arrays, ["bad"], check=False)
    assert p.returncode == 1 and "LinAlgError: Singular matrix" in p.stderr, p.stderr


@pytest.mark.parametrize("scheduler", ["lshs", "naive"])
@pytest.mark.parametrize("block", [[16, 16], [16, 50], [100, 7]], ids=["square", "wide", "tall"])
def test_blocked_cholesky_matches_numpy(tmp_path, scheduler, block):
    """100 x 100 in ragged blocks (square blocks, or rechunked to them): one task per block
    of L, as NumPy's L; an expression on L reads it like any array."""
    rng = np.random.default_rng(8)
    m = rng.normal(size=(100, 100))
    spd = m @ m.T + 100 * np.eye(100)
    arrays = inputs(tmp_path, s=(spd, block))
    arrays.update({"L": "np.linalg.cholesky(s)", "t": "sum(np.linalg.cholesky(s) ** 2)"})
    run_job(tmp_path, arrays, ["L", "t"], scheduler)
    close(np.load(tmp_path / "L.npy"), np.linalg.cholesky(spd))
    close(np.load(tmp_path / "t.npy"), np.trace(spd))


@pytest.mark.parametrize("expr,words", [
    ("np.linalg.solve(z, r)", "LinAlgError: Singular matrix"),
    ("np.linalg.inv(z)", "LinAlgError: Singular matrix"),
    ("np.linalg.cholesky(n)", "LinAlgError: Matrix is not positive definite"),
    ("np.linalg.cholesky(nb)", "LinAlgError: Matrix is not positive definite"),  # blocked
    ("np.linalg.inv(z * 2) @ r + 1", "LinAlgError: Singular matrix"),  # an intermediate
])
def test_linalg_errors_use_numpy_wording_and_name_the_array(tmp_path, expr, words):
    z = np.ones((6, 6))
    n = -np.eye(6)
    arrays = inputs(tmp_path, z=(z, [3, 3]), n=(n, [6, 6]), nb=(n, [4, 4]), r=(np.ones((6, 1)), [6, 1]))
    arrays["bad"] = expr
    p = run_job(tmp_path, arrays, ["bad"], check=False)
    assert p.returncode == 1, p.stdout + p.stderr
    assert words in p.stderr, p.stderr
    assert "arrays.bad" in p.stderr, p.stderr  # the key (and its line) of the array
    assert not (tmp_path / "bad.npy").exists()


@pytest.mark.parametrize("expr,words", [
    ("np.linalg.qr(v)", "qr(): a has shape (5,) (1-D)"),
    ("np.linalg.cholesky(w)", "cholesky(): a is 5 x 9; the matrix must be square"),
    ("np.linalg.lstsq(w, v)[0]", "lstsq(): a is 5 x 9 (fewer rows than columns)"),
    ("np.linalg.svd(t).U", "svd(): a is 100000 x 4; full_matrices=True (NumPy's default) is gesdd's full SVD"),
    ("np.linalg.qr(t.T).R", "qr(): a is 4 x 100000; the QR of a wide matrix"),
    ("np.linalg.qr(a)", "name one of them"),
])
def test_unsupported_shapes_are_refused_at_check(tmp_path, expr, words):
    arrays = inputs(tmp_path, w=(W, [5, 9]), v=(np.ones(5), [5]), a=(A, [50, 6]))
    arrays["t"] = {"random": "normal", "shape": [100000, 4], "block": [10000, 4]}
    arrays["bad"] = expr
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"bad": str(tmp_path / "bad.npy")}, name="la",
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    p = subprocess.run([BIN, "check", str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode != 0, p.stdout
    assert words in p.stderr + p.stdout, p.stderr + p.stdout
    assert "arrays.bad" in p.stderr + p.stdout, p.stderr + p.stdout


@pytest.mark.parametrize("block", [[5, 9], [2, 4]], ids=["one-block", "ragged-blocks"])
def test_wide_qr_and_the_full_svd_match_numpy(tmp_path, block):
    """NumPy's qr of a wide matrix (Q m x m, R m x n) and svd's full_matrices=True (its
    default: U m x m, Vh n x n) of a tall and a wide one, in one task whatever the blocks."""
    outs = {"R": "np.linalg.qr(w).R", "Q": "np.linalg.qr(w).Q", "Ronly": "qr(w, mode='r')",
            "U": "np.linalg.svd(a).U", "S": "np.linalg.svd(a)[1]", "Vh": "np.linalg.svd(a).Vh",
            "Uw": "np.linalg.svd(w).U", "Vhw": "np.linalg.svd(w)[2]"}
    arrays = inputs(tmp_path, w=(W, block), a=(A[:20], [block[1], block[0]]))
    arrays.update(outs)
    run_job(tmp_path, arrays, outs)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in outs}
    q, r = got["Q"], got["R"]
    assert q.shape == (5, 5) and r.shape == (5, 9)
    close(q @ r, W)
    close(q.T @ q, np.eye(5))
    close(np.abs(r), np.abs(np.linalg.qr(W).R))
    close(got["Ronly"], r)
    for a, u, vh in [(A[:20], got["U"], got["Vh"]), (W, got["Uw"], got["Vhw"])]:
        m, n = a.shape
        want = np.linalg.svd(a)
        assert u.shape == (m, m) and vh.shape == (n, n)
        close(u.T @ u, np.eye(m))
        close(vh @ vh.T, np.eye(n))
        k = min(m, n)
        close((u[:, :k] * want.S) @ vh[:k], a)
    close(got["S"], np.linalg.svd(A[:20], compute_uv=False))


def test_a_matrix_past_one_invocation_is_blocked_or_refused_with_the_memory_it_needs(tmp_path):
    """A 9000 x 9000 matrix in one block is one LU task, which cannot fit 512 MiB: refused,
    saying what would do. In blocks, inv and cholesky are blocked: they check, and their
    plans keep every task within the limit. A matrix whose column panels of 64 cannot fit
    is refused with the memory a task would need."""
    one = {"random": "normal", "shape": [9000, 9000], "block": [9000, 9000]}
    s = {"random": "normal", "shape": [9000, 9000], "block": [1000, 1000]}
    job = tmp_path / "job.toml"

    def run(cmd, arrays, out):
        job.write_text(job_text(arrays, {out: str(tmp_path / f"{out}.npy")}, name="la",
                                storage={"url": f"file://{tmp_path / 'store'}"}))
        return subprocess.run([BIN, *cmd, str(job)], capture_output=True, text=True, timeout=60)

    p = run(["check"], {"s": one, "I": "np.linalg.inv(s)"}, "I")
    assert p.returncode != 0
    assert "inv(): a is 9000 x 9000" in p.stderr and "MiB; memory_mb is 512" in p.stderr, p.stderr
    assert "smaller blocks" in p.stderr, p.stderr
    huge = {"random": "normal", "shape": [200000, 200000], "block": [4000, 4000]}
    p = run(["check"], {"s": huge, "y": {"random": "normal", "shape": [200000], "block": [4000]},
                        "x": "np.linalg.solve(s, y)"}, "x")
    assert p.returncode != 0
    assert "solve(): a is 200000 x 200000; blocked LU on column panels of 200000 x 62 needs" in p.stderr, p.stderr
    narrow = {"random": "normal", "shape": [70000, 70000], "block": [1000, 64]}
    p = run(["check"], {"s": narrow, "d": "np.linalg.det(s)"}, "d")
    assert p.returncode != 0 and "1094 steps of 1094 panels" in p.stderr and "larger blocks" in p.stderr, p.stderr
    for expr, out, least in [("np.linalg.inv(s)", "I", 45 + 2 * 81), ("np.linalg.cholesky(s @ s.T)", "L", 45)]:
        p = run(["plan", "--json"], {"s": s, out: expr}, out)
        assert p.returncode == 0, p.stderr
        for sched in json.loads(p.stdout)["schedulers"]:
            assert 0 < sched["projected_peak_memory_bytes"] <= 512 << 20
            # inv: a task per panel step (9 x 10 / 2), per step and panel of the identity
            # forward and back; cholesky: one per block of L on or below the diagonal.
            assert sched["tasks"] > least, (expr, sched["tasks"])
        # The factorization's structure, in the plan's text and its picture.
        svg = tmp_path / "plan.svg"
        p = run(["plan", "--svg", str(svg)], {"s": s, out: expr}, out)
        assert p.returncode == 0, p.stderr
        want = {"I": "LU in I: 9000 x 9000 in 18 column panels of 9000 x 500, right-looking with "
                     "partial pivoting: 171 panel tasks",
                "L": "Cholesky in L: 9000 x 9000 in 9 x 9 blocks of 1000, left-looking: 45 block tasks"}[out]
        assert want in p.stdout, p.stdout
        assert want.split(":")[0] in svg.read_text()


def test_plan_shows_the_tsqr_tree(tmp_path):
    arrays = {"X": {"random": "normal", "shape": [4000, 8], "block": [10, 8]},
              "R": "np.linalg.qr(X, mode='r')"}
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {"R": str(tmp_path / "R.npy")}, name="la",
                            storage={"url": f"file://{tmp_path / 'store'}"}))
    svg = tmp_path / "plan.svg"
    p = subprocess.run([BIN, "plan", "--svg", str(svg), str(job)], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "TSQR in R: 4000 x 8 in 400 row blocks, 3 levels, fan-in 32" in p.stdout, p.stdout
    # The picture lists the tree too (bold heading, one line per level).
    assert ">TSQR in R: 4000 x 8 in 400 row blocks, 3 levels, fan-in 32</text>" in svg.read_text()
    assert "level 2: 1 blocks" in svg.read_text()
    assert "level 0: 400 blocks (one R per row block)" in p.stdout, p.stdout
    assert "level 1: 13 blocks (each the R of up to 32 stacked R's)" in p.stdout, p.stdout
    assert "level 2: 1 blocks" in p.stdout, p.stdout


def test_factorizations_on_garage(garage, tmp_path):
    """A subset with the store on a real S3 server: TSQR R and lstsq, blocked Cholesky and
    blocked LU solve, det."""
    g = rng.normal(size=(70, 70))
    spd = g @ g.T + 70 * np.eye(70)
    arrays = inputs(tmp_path, a=(A, [20, 6]), b=(B, [20, 2]), s=(spd, [25, 25]), g=(g, [30, 30]),
                    r=(rhs[:, :2].repeat(2, axis=0)[:70], [30, 2]))
    exprs = {"R": "np.linalg.qr(a, mode='r')", "x": "np.linalg.lstsq(a, b)[0]",
             "L": "np.linalg.cholesky(s)", "X": "np.linalg.solve(g, r)", "d": "np.linalg.det(g)"}
    arrays.update(exprs)
    job = tmp_path / "job.toml"
    job.write_text(job_text(arrays, {k: str(tmp_path / f"{k}.npy") for k in exprs}, name="la",
                            storage={"url": f"s3://{garage.bucket}/la", "endpoint": garage.endpoint}))
    run(job, env=garage.env())
    got = {k: np.load(tmp_path / f"{k}.npy") for k in exprs}
    r0 = rhs[:, :2].repeat(2, axis=0)[:70]
    close(np.abs(got["R"]), np.abs(np.linalg.qr(A, mode="r")))
    close(got["x"], np.linalg.lstsq(A, B, rcond=None)[0])
    close(got["L"], np.linalg.cholesky(spd))
    close(got["X"], np.linalg.solve(g, r0))
    close(got["d"], np.linalg.det(g), rtol=1e-9)


# Blocks of ragged, square, wide and tall panels (2 to 13 columns), and one block.
BLOCKS = [[4, 4], [13, 13], [4, 13], [13, 4], [6, 6], [2, 2], [7, 40], [40, 40]]


def blocks_of(n):
    """BLOCKS for an n x n matrix (one block: [n, n])."""
    return [[min(b, n) for b in blk] for blk in BLOCKS]


def refused_on_every_block_shape(tmp_path, mats):
    """solve and inv of each matrix of `mats`, on each of BLOCKS in turn (one run per
    failing expression, solve and inv alternating), fail with NumPy's LinAlgError."""
    for k, blk in enumerate(blocks_of(len(mats[0]))):
        m = mats[k % len(mats)]
        n = len(m)
        expr = "np.linalg.solve(g, r)" if k % 2 == 0 else "np.linalg.inv(g) * 2"
        arr = {**inputs(tmp_path, g=(m, blk), r=(np.ones((n, 3)), [blk[0], 3])), "bad": expr}
        p = run_job(tmp_path, arr, ["bad"], check=False)
        assert p.returncode == 1 and "LinAlgError: Singular matrix" in p.stderr, (blk, p.stdout + p.stderr)
        assert not (tmp_path / "bad.npy").exists()


@pytest.mark.parametrize("n", [12, 26, 40])
def test_an_exactly_singular_matrix_is_singular_on_every_block_shape(tmp_path, n):
    """A row of zeros, and a column of zeros: every update of them is an exact 0, so that
    the LU meets an exact zero pivot whatever the rounding (any CPU, any BLAS; NumPy raises
    too). det is 0.0 (sign 0, logabsdet -inf) on every block shape (one block, or blocked
    LU on panels of 2 to 13 columns), and solve and inv fail with NumPy's LinAlgError."""
    rng = np.random.default_rng(n)
    row, col = rng.normal(size=(n, n)), rng.normal(size=(n, n))
    row[n // 2] = 0.0
    col[:, n // 3] = 0.0
    for m in (row, col):
        with pytest.raises(np.linalg.LinAlgError, match="Singular matrix"):
            np.linalg.solve(m, np.ones(n))
        assert np.linalg.det(m) == 0.0
    arrays, outs = {}, []
    for k, blk in enumerate(blocks_of(n)):
        for name, m in (("row", row), ("col", col)):
            arrays.update(inputs(tmp_path, **{f"{name}{k}": (m, blk)}))
            arrays.update({f"d{name}{k}": f"np.linalg.det({name}{k})",
                           f"s{name}{k}": f"np.linalg.slogdet({name}{k}).sign",
                           f"l{name}{k}": f"np.linalg.slogdet({name}{k}).logabsdet"})
            outs += [f"{c}{name}{k}" for c in "dsl"]
    run_job(tmp_path, arrays, outs)
    for k, blk in enumerate(blocks_of(n)):
        for name in ("row", "col"):
            got = [float(np.load(tmp_path / f"{c}{name}{k}.npy")) for c in "dsl"]
            assert got == [0.0, 0.0, -np.inf], (name, blk, got)
    refused_on_every_block_shape(tmp_path, [row, col])


def triangular(n):
    """Upper triangular, 1 on the diagonal and -1 above: its LU is itself (exact, pivots all
    1, det 1, on any machine), its condition about 2^n."""
    return np.eye(n) - np.triu(np.ones((n, n)), 1)


def numerically_singular(kind, n, seed):
    """An n x n matrix that is singular in exact arithmetic but whose LU meets no exact zero
    pivot (rounding leaves pivots of rounding size, different ones on different CPUs and
    BLAS builds; NumPy raises for some on one machine and not on another); or singular to
    working precision with no small pivot at all (`triangular`, n = 60: condition 1e19)."""
    if kind == "triangular":
        return triangular(n)
    rng = np.random.default_rng(seed)
    if kind in ("rank n/2", "rank n-1"):  # a product of thin random factors
        r = n // 2 if kind == "rank n/2" else n - 1
        return rng.normal(size=(n, r)) @ rng.normal(size=(r, n))
    g = rng.normal(size=(n, n))
    if kind == "a row of the others":  # a random combination of all the other rows
        g[n // 3] = rng.normal(size=n - 1) @ np.delete(g, n // 3, axis=0)
    elif kind == "two equal rows":
        g[n - 2] = g[1]
    elif kind == "dependent columns":  # in different panels, scaled by 4 (exactly)
        g[:, n - 3] = g[:, 2] * 4.0
    return g


NUMERICALLY_SINGULAR = [("rank n/2", 26), ("rank n-1", 40), ("a row of the others", 12),
                        ("two equal rows", 40), ("dependent columns", 26), ("triangular", 60)]


@pytest.mark.parametrize("kind,n", NUMERICALLY_SINGULAR)
def test_a_numerically_singular_matrix_is_refused_on_every_block_shape(tmp_path, kind, n):
    """solve and inv refuse a matrix singular in exact arithmetic whatever pivots the
    rounding leaves, on every block shape: what decides is its condition (the reciprocal
    condition number of A equilibrated, in the 1-norm, below n eps: gecon's estimate in one
    block, a random probe solved with the factors when blocked), not whether a pivot came
    out exactly 0. Two matrices of each kind (two seeds) take turns over the block shapes.
    Their determinant is numerically zero (at most n eps times Hadamard's bound, the
    product of the rows' norms) on every block shape, exactly 0 where the pivots say so.
    The triangular one has pivots of 1 on any machine (det 1): only its condition says it
    is singular to working precision."""
    mats = [numerically_singular(kind, n, seed) for seed in (1, 2)]
    refused_on_every_block_shape(tmp_path, mats)
    arrays, outs = {}, []
    for k, blk in enumerate(blocks_of(n)):
        arrays.update(inputs(tmp_path, **{f"g{k}": (mats[k % 2], blk)}))
        arrays[f"d{k}"] = f"np.linalg.det(g{k})"
        outs.append(f"d{k}")
    run_job(tmp_path, arrays, outs)
    for k, blk in enumerate(blocks_of(n)):
        m = mats[k % 2]
        hadamard = np.prod(np.linalg.norm(m, axis=1))
        d = float(np.load(tmp_path / f"d{k}.npy"))
        assert abs(d) <= n * np.finfo(float).eps * hadamard, (blk, d, hadamard)


@pytest.mark.parametrize("kind,n", NUMERICALLY_SINGULAR)
def test_an_ill_conditioned_matrix_near_a_singular_one_is_solved(tmp_path, kind, n):
    """The same matrices moved 1e-8 of their size away from singular (condition 1e8 to 1e12,
    its reciprocal far above n eps), and the triangular one at n = 30 (condition 1e10):
    solved on every block shape, with a residual of rounding size and NumPy's solution
    within what the condition allows."""
    rng = np.random.default_rng(3)
    if kind == "triangular":
        n = 30
        m = triangular(n)
    else:
        m = numerically_singular(kind, n, 1)
        m = m + 1e-8 * np.abs(m).max() * rng.normal(size=(n, n))
    b = rng.normal(size=(n, 2))
    arrays, outs = inputs(tmp_path, b=(b, [4, 2])), []
    for k, blk in enumerate(blocks_of(n)):
        arrays.update(inputs(tmp_path, **{f"g{k}": (m, blk)}))
        arrays.update({f"x{k}": f"np.linalg.solve(g{k}, b)", f"i{k}": f"np.linalg.inv(g{k})"})
        outs += [f"x{k}", f"i{k}"]
    run_job(tmp_path, arrays, outs)
    cond = np.linalg.cond(m, 1)
    assert 1e6 < cond < 1e13, cond
    want, inv = np.linalg.solve(m, b), np.linalg.inv(m)
    eps = np.finfo(float).eps
    for k, blk in enumerate(blocks_of(n)):
        x, i = np.load(tmp_path / f"x{k}.npy"), np.load(tmp_path / f"i{k}.npy")
        res = np.abs(m @ x - b) / (np.abs(m) @ np.abs(x) + np.abs(b))
        assert res.max() < 1e-12, (blk, res.max())
        # Both backward stable: each within about n eps cond of the exact solution.
        assert np.linalg.norm(x - want, 1) <= 4 * n * eps * cond * np.linalg.norm(want, 1), blk
        assert np.linalg.norm(i - inv, 1) <= 4 * n * eps * cond * np.linalg.norm(inv, 1), blk


def test_ill_conditioned_and_badly_scaled_matrices_are_solved_as_numpy_solves_them(tmp_path):
    """What is not singular is not refused, on any block shape: condition numbers to 1e13
    (prescribed singular values, Hilbert 10), rows or columns scaled across 200 orders of
    magnitude (the LU equilibrates its rows, so the singularity rule does not depend on
    them). Each solution has NumPy's small residual and agrees with NumPy's within the
    condition number's reach."""
    rng = np.random.default_rng(21)
    n = 30

    def with_singular_values(s):
        u, _ = np.linalg.qr(rng.normal(size=(n, n)))
        v, _ = np.linalg.qr(rng.normal(size=(n, n)))
        return (u * s) @ v.T

    i = np.arange(10)
    mats = {
        "k12": with_singular_values(np.logspace(0, -12, n)),
        "k13": with_singular_values(np.r_[np.ones(n - 1), 1e-13]),
        "rows": rng.normal(size=(n, n)) * np.logspace(0, -200, n)[rng.permutation(n)][:, None],
        "cols": rng.normal(size=(n, n)) * np.logspace(0, -200, n)[None, rng.permutation(n)],
        "both": rng.normal(size=(n, n)) * np.logspace(50, -50, n)[:, None] * np.logspace(-50, 50, n)[None, :],
        "hilb": 1.0 / (i[:, None] + i[None, :] + 1),
    }
    b = rng.normal(size=(n, 2))
    arrays, outs = {}, []
    for name, m in mats.items():
        for k, blk in enumerate([[4, 4], [7, 30], [30, 3], [30, 30]]):
            arrays.update(inputs(tmp_path, **{f"{name}{k}": (m, blk)}))
            arrays[f"x_{name}{k}"] = f"np.linalg.solve({name}{k}, b[:{len(m)}])"
            arrays[f"d_{name}{k}"] = f"np.linalg.slogdet({name}{k}).logabsdet"
            outs += [f"x_{name}{k}", f"d_{name}{k}"]
    arrays.update(inputs(tmp_path, b=(b, [4, 2])))
    run_job(tmp_path, arrays, outs)
    for name, m in mats.items():
        want = np.linalg.solve(m, b[:len(m)])
        cond = np.linalg.cond(m)
        for k in range(4):
            got = np.load(tmp_path / f"x_{name}{k}.npy")
            # Backward stable as NumPy's: a residual of rounding size row by row.
            res = np.abs(m @ got - b[:len(m)]) / (np.abs(m) @ np.abs(got) + np.abs(b[:len(m)]))
            assert res.max() < 1e-12, (name, k, res.max())
            if name in ("rows", "cols", "both"):
                close(got, want, rtol=1e-9)  # badly scaled, not ill-posed: NumPy's answer
            else:
                # Two backward-stable answers, each within about n eps cond of the exact one
                # (NumPy's from another OpenBLAS build, on another CPU other kernels).
                tol = 4 * len(m) * np.finfo(float).eps * cond
                assert np.abs(got - want).max() <= tol * np.abs(want).max(), (name, k)
            # logabsdet: as exact as the smallest pivot, relatively cond * eps.
            ld = np.linalg.slogdet(m)[1]
            assert abs(float(np.load(tmp_path / f"d_{name}{k}.npy")) - ld) < 1e-9 * (1 + abs(ld)) + 1e-14 * cond


def test_one_block_lu_gives_numpys_bits(tmp_path):
    """A matrix in one block is factored as NumPy factors it (getrf of A, getrs, det as
    sign * exp(sum of the pivots' logs)). Bits are compared only where both sides make the
    same floating-point operations: det and slogdet of matrices whose LU is exact
    (triangular, diagonal, a permutation: the pivots are the entries, their logs and exp
    the C library's on both sides) are NumPy's bits. A random matrix's factors come from
    LAPACK, which NumPy calls in its own OpenBLAS build and nums-cloud in the system's (on
    another CPU, other kernels): solve, inv and det agree within what the condition number
    allows two backward-stable answers to differ (both within about n eps cond of the
    exact one)."""
    rng = np.random.default_rng(12)
    mats = {"tri": np.triu(rng.normal(size=(9, 9))) + 3 * np.eye(9), "diag": np.diag(rng.uniform(0.5, 2, 9)),
            "perm": np.eye(9)[rng.permutation(9)] * 3.0, "big": np.diag(np.r_[[1e200] * 3, [1e-200] * 3]),
            "rnd": rng.normal(size=(23, 23))}
    exprs = {}
    for name in mats:
        exprs.update({f"d_{name}": f"np.linalg.det({name})", f"l_{name}": f"np.linalg.slogdet({name})[1]",
                      f"s_{name}": f"np.linalg.slogdet({name}).sign"})
    b = rng.normal(size=(23, 3))
    exprs.update({"x": "np.linalg.solve(rnd, b)", "i": "np.linalg.inv(rnd)"})
    arrays = inputs(tmp_path, b=(b, [23, 3]), **{k: (m, list(m.shape)) for k, m in mats.items()})
    arrays.update(exprs)
    run_job(tmp_path, arrays, exprs)
    got = {k: np.load(tmp_path / f"{k}.npy") for k in exprs}
    rnd = mats["rnd"]
    n, eps, cond = len(rnd), np.finfo(float).eps, np.linalg.cond(rnd, 1)
    tol = 4 * n * eps * cond  # two answers, each within n eps cond of the exact one
    assert tol < 1e-9, cond
    for name, m in mats.items():
        sign, logdet = np.linalg.slogdet(m)
        want = [np.linalg.det(m), logdet, sign]
        have = [got[f"{c}_{name}"] for c in "dls"]
        if name == "rnd":
            # log|det| = sum of log|pivot|: each pivot's rounding moves it by about n eps cond.
            assert have[2] == want[2]
            assert abs(have[1] - want[1]) <= tol
            assert abs(have[0] - want[0]) <= tol * abs(want[0])
        else:
            assert [h.tobytes() for h in have] == [np.float64(w).tobytes() for w in want], (name, have, want)
    assert abs(float(got["d_big"]) - 1) < 1e-12  # 1e200^3 1e-200^3: no running product overflows
    x, inv = np.linalg.solve(rnd, b), np.linalg.inv(rnd)
    assert np.linalg.norm(got["x"] - x, 1) <= tol * np.linalg.norm(x, 1)
    assert np.linalg.norm(got["i"] - inv, 1) <= tol * np.linalg.norm(inv, 1)


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
def test_svd_and_lstsq_of_nan_or_inf_fail_as_numpy_fails(tmp_path, bad):
    """LAPACK's SVD refuses a matrix holding NaN: NumPy's svd, svdvals and 2 and nuclear
    norms raise "SVD did not converge", its lstsq "SVD did not converge in Linear Least
    Squares" (with inf too). nums-cloud failed them all with "LAPACK dgesdd: argument 4 is
    invalid". (A matrix with inf and no NaN NumPy's svd answers with NaN; TSQR's R of it
    holds NaN, so nums-cloud raises as for NaN.)"""
    a = rng.normal(size=(9, 4))
    a[5, 2] = bad
    arrays = inputs(tmp_path, a=(a, [4, 4]), b=(np.ones(9), [4]))
    cases = [("np.linalg.lstsq(a, b)[0]", "SVD did not converge in Linear Least Squares",
              lambda: np.linalg.lstsq(a, np.ones(9), rcond=None))]
    if np.isnan(bad):
        cases += [(e, "SVD did not converge", f) for e, f in [
            ("np.linalg.svdvals(a)", lambda: np.linalg.svdvals(a)),
            ("np.linalg.svd(a, full_matrices=False).S", lambda: np.linalg.svd(a)),
            ("np.linalg.norm(a, 2)", lambda: np.linalg.norm(a, 2)),
            ("np.linalg.norm(a, 'nuc')", lambda: np.linalg.norm(a, "nuc"))]]
    for expr, words, numpy in cases:
        with pytest.raises(np.linalg.LinAlgError, match=words):
            numpy()
        p = run_job(tmp_path, {**arrays, "bad": expr}, ["bad"], check=False)
        assert p.returncode == 1 and f"LinAlgError: {words}" in p.stderr, (expr, p.stderr)
        assert "arrays.bad" in p.stderr
