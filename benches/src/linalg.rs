//! Choosing the LAPACK binding for the linear-algebra block kernels: the same factorizations
//! of the same float64 blocks, one run each, through
//! - `lapack`: the `lapack` crate (LAPACK of the OpenBLAS already linked) and CBLAS, called on
//!   the row-major blocks as the kernels call them (no transposing copies),
//! - `ndarray-linalg` 0.18 (its high-level API, or its `lax` layer where it has no R-only QR),
//!   on the same OpenBLAS,
//! - `faer` 0.24 (pure Rust, rayon on all cores),
//!
//! and ratios against `lapack`. The copy a kernel must make (LAPACK overwrites its input) is
//! timed as part of each call.
//!
//!     cargo run --release -p nums-benches --features linalg-candidates --bin linalg

use std::time::Instant;

use cblas_sys::{
    CBLAS_DIAG::CblasNonUnit, CBLAS_LAYOUT::CblasRowMajor, CBLAS_SIDE::CblasLeft,
    CBLAS_TRANSPOSE::CblasNoTrans, CBLAS_UPLO::CblasLower,
};
use faer::linalg::solvers::Solve as _;
use faer::{Mat, MatRef, Par, Side};
use ndarray::{Array2, ShapeBuilder};
use ndarray_linalg::{
    Cholesky, Diag, JobSvd, QR, SVDDC, Solve, SolveTriangular, UPLO, layout::MatrixLayout,
};

/// Seconds of one run of `f`, and its result.
fn time<T>(f: impl FnOnce() -> T) -> (f64, T) {
    let t = Instant::now();
    let r = f();
    (t.elapsed().as_secs_f64(), r)
}

/// A deterministic (m, n) matrix of values in [-1, 1), row-major.
fn matrix(m: usize, n: usize, seed: u64) -> Array2<f64> {
    Array2::from_shape_fn((m, n), |(i, j)| {
        let mut z = (i * n + j) as u64 ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 52) as f64 - 1.0
    })
}

/// Symmetric, diagonally dominant: positive definite.
fn spd(n: usize) -> Array2<f64> {
    let g = matrix(n, n, 7);
    let mut a = &g + &g.t();
    for i in 0..n {
        a[[i, i]] += 2.0 * n as f64;
    }
    a
}

/// Lower triangular with a dominant diagonal (well conditioned).
fn lower(n: usize) -> Array2<f64> {
    let mut l = matrix(n, n, 3);
    for i in 0..n {
        for j in i + 1..n {
            l[[i, j]] = 0.0;
        }
        l[[i, i]] = n as f64;
    }
    l
}

fn faer_of(a: &Array2<f64>) -> Mat<f64> {
    Mat::from_fn(a.nrows(), a.ncols(), |i, j| a[[i, j]])
}

fn lwork(q: f64) -> usize {
    (q as usize).max(1)
}

/// QR of a row-major (m, n) matrix with LAPACK: its memory is the column-major n x m
/// transpose, whose LQ (gelqf) leaves R^T = L, i.e. R in the row-major upper triangle.
fn lapack_qr_rowmajor(a: &Array2<f64>, want_q: bool) -> Array2<f64> {
    let (m, n) = (a.nrows() as i32, a.ncols() as i32);
    let mut buf = a.as_standard_layout().into_owned();
    let s = buf.as_slice_mut().expect("contiguous");
    let k = m.min(n);
    let mut tau = vec![0.0; k as usize];
    let (mut q, mut info) = ([0.0], 0);
    unsafe { lapack::dgelqf(n, m, s, n, &mut tau, &mut q, -1, &mut info) };
    let mut work = vec![0.0; lwork(q[0])];
    unsafe {
        lapack::dgelqf(
            n,
            m,
            s,
            n,
            &mut tau,
            &mut work,
            lwork(q[0]) as i32,
            &mut info,
        )
    };
    assert_eq!(info, 0);
    if want_q {
        unsafe { lapack::dorglq(n, m, n, s, n, &tau, &mut q, -1, &mut info) };
        let mut work = vec![0.0; lwork(q[0])];
        unsafe {
            lapack::dorglq(
                n,
                m,
                n,
                s,
                n,
                &tau,
                &mut work,
                lwork(q[0]) as i32,
                &mut info,
            )
        };
        assert_eq!(info, 0);
    }
    buf
}

/// The same QR through a column-major copy and geqrf (the copy is the transpose).
fn lapack_qr_colmajor(a: &Array2<f64>, want_q: bool) -> Array2<f64> {
    let (m, n) = (a.nrows() as i32, a.ncols() as i32);
    let mut buf = Array2::<f64>::zeros((a.nrows(), a.ncols()).f());
    buf.assign(a);
    let s = buf.as_slice_memory_order_mut().expect("contiguous");
    let mut tau = vec![0.0; m.min(n) as usize];
    let (mut q, mut info) = ([0.0], 0);
    unsafe { lapack::dgeqrf(m, n, s, m, &mut tau, &mut q, -1, &mut info) };
    let mut work = vec![0.0; lwork(q[0])];
    unsafe {
        lapack::dgeqrf(
            m,
            n,
            s,
            m,
            &mut tau,
            &mut work,
            lwork(q[0]) as i32,
            &mut info,
        )
    };
    assert_eq!(info, 0);
    if want_q {
        unsafe { lapack::dorgqr(m, n, n, s, m, &tau, &mut q, -1, &mut info) };
        let mut work = vec![0.0; lwork(q[0])];
        unsafe {
            lapack::dorgqr(
                m,
                n,
                n,
                s,
                m,
                &tau,
                &mut work,
                lwork(q[0]) as i32,
                &mut info,
            )
        };
        assert_eq!(info, 0);
    }
    buf
}

/// A row-major matrix copied into column-major order (the transpose LAPACK's QR needs).
fn colmajor(a: &Array2<f64>) -> Array2<f64> {
    let mut buf = Array2::<f64>::zeros((a.nrows(), a.ncols()).f());
    buf.assign(a);
    buf
}

/// R (and Q) through the recursive, level-3 dgeqrt3 on a column-major copy; Q by applying
/// the reflectors (dgemqrt) to the first n columns of the identity.
fn lapack_qr_geqrt3(a: &Array2<f64>, want_q: bool) -> Array2<f64> {
    let (m, n) = (a.nrows() as i32, a.ncols() as i32);
    let mut buf = colmajor(a);
    let s = buf.as_slice_memory_order_mut().expect("contiguous");
    let mut t = vec![0.0; (n * n) as usize];
    let mut info = 0;
    unsafe { lapack::dgeqrt3(m, n, s, m, &mut t, n, &mut info) };
    assert_eq!(info, 0);
    if want_q {
        let mut q = Array2::<f64>::zeros((a.nrows(), a.ncols()).f());
        for i in 0..a.ncols() {
            q[[i, i]] = 1.0;
        }
        let qs = q.as_slice_memory_order_mut().expect("contiguous");
        let mut work = vec![0.0; (n * n) as usize];
        unsafe {
            lapack::dgemqrt(
                b'L', b'N', m, n, n, n, s, m, &t, n, qs, m, &mut work, &mut info,
            )
        };
        assert_eq!(info, 0);
        return q;
    }
    buf
}

/// R through dgeqr, LAPACK's tall-skinny driver (it picks a TSQR, dlatsqr, for such shapes).
fn lapack_qr_geqr(a: &Array2<f64>) -> Array2<f64> {
    let (m, n) = (a.nrows() as i32, a.ncols() as i32);
    let mut buf = colmajor(a);
    let s = buf.as_slice_memory_order_mut().expect("contiguous");
    let (mut tq, mut wq, mut info) = ([0.0; 5], [0.0], 0);
    unsafe { lapack::dgeqr(m, n, s, m, &mut tq, &[-1], &mut wq, -1, &mut info) };
    let mut t = vec![0.0; tq[0] as usize];
    let mut work = vec![0.0; lwork(wq[0])];
    let ts = [t.len() as i32];
    unsafe {
        lapack::dgeqr(
            m,
            n,
            s,
            m,
            &mut t,
            &ts,
            &mut work,
            lwork(wq[0]) as i32,
            &mut info,
        )
    };
    assert_eq!(info, 0);
    buf
}

fn row(name: &str, base: f64, others: &[Option<f64>]) {
    let cell = |t: Option<f64>| match t {
        Some(t) => format!("{:>10.1} {:>6.2}", t * 1e3, t / base),
        None => format!("{:>10} {:>6}", "-", "-"),
    };
    println!(
        "{name:<38} {:>10.1} {} {}",
        base * 1e3,
        cell(others[0]),
        cell(others[1])
    );
}

fn main() {
    let par = Par::rayon(0);
    faer::set_global_parallelism(par);
    println!(
        "{:<38} {:>10} {:>10} {:>6} {:>10} {:>6}",
        "operation (float64)", "lapack ms", "nd-la ms", "ratio", "faer ms", "ratio"
    );
    // Warm both thread pools up (OpenBLAS starts its threads on first use).
    let w = matrix(256, 256, 1);
    let _ = w.dot(&w);
    let _ = faer_of(&w).qr();

    // QR of a tall-skinny row block.
    let a = matrix(65536, 128, 1);
    let (t_gelqf, r1) = time(|| lapack_qr_rowmajor(&a, false));
    let (t_geqrf, r2) = time(|| lapack_qr_colmajor(&a, false));
    let (t_lax, _) = time(|| {
        let mut buf = a.clone();
        let layout = MatrixLayout::C {
            row: 65536,
            lda: 128,
        };
        <f64 as lax::Lapack>::householder(layout, buf.as_slice_mut().expect("contiguous"))
            .expect("qr")
    });
    let (t_faer, rf) = time(|| {
        let m = faer_of(&a);
        m.qr().thin_R().to_owned()
    });
    // The three R's agree up to row signs.
    for i in 0..128 {
        let s = (r1[[i, i]] / r2[[i, i]]).signum();
        for j in i..128 {
            assert!((r1[[i, j]] - s * r2[[i, j]]).abs() < 1e-8 * (1.0 + r2[[i, j]].abs()));
            let fs = (rf[(i, i)] / r2[[i, i]]).signum();
            assert!((rf[(i, j)] - fs * r2[[i, j]]).abs() < 1e-8 * (1.0 + r2[[i, j]].abs()));
        }
    }
    row(
        "QR R 65536x128 (gelqf, row-major)",
        t_gelqf,
        &[Some(t_lax), Some(t_faer)],
    );
    row("QR R 65536x128 (geqrf, col. copy)", t_geqrf, &[None, None]);
    let (t_geqrt3, r3) = time(|| lapack_qr_geqrt3(&a, false));
    let (t_geqr, r4) = time(|| lapack_qr_geqr(&a));
    for i in 0..128 {
        for r in [&r3, &r4] {
            let s = (r[[i, i]] / r2[[i, i]]).signum();
            assert!((r[[i, 127]] - s * r2[[i, 127]]).abs() < 1e-8 * (1.0 + r2[[i, 127]].abs()));
        }
    }
    row(
        "QR R 65536x128 (geqrt3, col. copy)",
        t_geqrt3,
        &[None, None],
    );
    row("QR R 65536x128 (geqr TS, col. copy)", t_geqr, &[None, None]);
    let (t_lapack_q, _) = time(|| lapack_qr_rowmajor(&a, true));
    let (t_geqrf_q, _) = time(|| lapack_qr_colmajor(&a, true));
    let (t_nd, _) = time(|| a.qr().expect("qr"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&a);
        let qr = m.qr();
        (qr.compute_thin_Q(), qr.thin_R().to_owned())
    });
    row(
        "QR Q+R 65536x128 (orglq, row-major)",
        t_lapack_q,
        &[Some(t_nd), Some(t_faer)],
    );
    row(
        "QR Q+R 65536x128 (orgqr, col. copy)",
        t_geqrf_q,
        &[None, None],
    );
    let (t_geqrt3_q, _) = time(|| lapack_qr_geqrt3(&a, true));
    row(
        "QR Q+R 65536x128 (geqrt3+gemqrt)",
        t_geqrt3_q,
        &[None, None],
    );
    drop(a);

    // Cholesky of an SPD block: potrf on the row-major memory (upper of the transpose).
    let n = 4096;
    let s = spd(n);
    let (t_lapack, _) = time(|| {
        let mut l = s.clone();
        let mut info = 0;
        let sl = l.as_slice_mut().expect("contiguous");
        unsafe { lapack::dpotrf(b'U', n as i32, sl, n as i32, &mut info) };
        assert_eq!(info, 0);
        l
    });
    let (t_nd, _) = time(|| s.cholesky(UPLO::Lower).expect("cholesky"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&s);
        m.llt(Side::Lower).expect("llt").L().to_owned()
    });
    row("Cholesky 4096x4096", t_lapack, &[Some(t_nd), Some(t_faer)]);
    drop(s);

    // Triangular solve L X = B.
    let l = lower(n);
    let b = matrix(n, 512, 5);
    let (t_lapack, _) = time(|| {
        let mut x = b.clone();
        unsafe {
            cblas_sys::cblas_dtrsm(
                CblasRowMajor,
                CblasLeft,
                CblasLower,
                CblasNoTrans,
                CblasNonUnit,
                n as i32,
                512,
                1.0,
                l.as_ptr(),
                n as i32,
                x.as_mut_ptr(),
                512,
            )
        };
        x
    });
    let (t_nd, _) = time(|| {
        l.solve_triangular(UPLO::Lower, Diag::NonUnit, &b)
            .expect("trsm")
    });
    let (t_faer, _) = time(|| {
        let lf = faer_of(&l);
        let mut x = faer_of(&b);
        faer::linalg::triangular_solve::solve_lower_triangular_in_place(
            lf.as_ref(),
            x.as_mut(),
            par,
        );
        x
    });
    row(
        "triangular solve 4096^2 \\ 4096x512",
        t_lapack,
        &[Some(t_nd), Some(t_faer)],
    );
    drop((l, b));

    // SVD (thin, with vectors): gesdd.
    for n in [128usize, 2048] {
        let a = matrix(n, n, 11);
        let (t_lapack, s1) = time(|| {
            let mut buf = a.clone();
            let ni = n as i32;
            let (mut s, mut u, mut vt) = (vec![0.0; n], vec![0.0; n * n], vec![0.0; n * n]);
            let mut iwork = vec![0i32; 8 * n];
            let (mut q, mut info) = ([0.0], 0);
            let sl = buf.as_slice_mut().expect("contiguous");
            unsafe {
                lapack::dgesdd(
                    b'S', ni, ni, sl, ni, &mut s, &mut u, ni, &mut vt, ni, &mut q, -1, &mut iwork,
                    &mut info,
                )
            };
            let mut work = vec![0.0; lwork(q[0])];
            unsafe {
                lapack::dgesdd(
                    b'S',
                    ni,
                    ni,
                    sl,
                    ni,
                    &mut s,
                    &mut u,
                    ni,
                    &mut vt,
                    ni,
                    &mut work,
                    lwork(q[0]) as i32,
                    &mut iwork,
                    &mut info,
                )
            };
            assert_eq!(info, 0);
            s
        });
        let (t_nd, _) = time(|| a.svddc(JobSvd::Some).expect("svd"));
        let (t_faer, sf) = time(|| {
            let m = faer_of(&a);
            let svd = m.thin_svd().expect("svd");
            (0..n).map(|i| svd.S()[i]).collect::<Vec<f64>>()
        });
        for (x, y) in s1.iter().zip(&sf) {
            assert!((x - y).abs() < 1e-9 * s1[0], "{x} {y}");
        }
        row(
            &format!("SVD {n}x{n} (U, S, Vh)"),
            t_lapack,
            &[Some(t_nd), Some(t_faer)],
        );
    }

    // LU solve A x = b (getrf + getrs).
    let a = spd(n) + matrix(n, n, 13) * (n as f64);
    let rhs = matrix(n, 1, 17);
    let (t_lapack, _) = time(|| {
        // The row-major memory is A^T: solve A^T' x = b with trans = 'T'.
        let mut lu = a.clone();
        let mut x = rhs.clone();
        let mut ipiv = vec![0i32; n];
        let mut info = 0;
        let sl = lu.as_slice_mut().expect("contiguous");
        unsafe { lapack::dgetrf(n as i32, n as i32, sl, n as i32, &mut ipiv, &mut info) };
        assert_eq!(info, 0);
        let xs = x.as_slice_mut().expect("contiguous");
        unsafe {
            lapack::dgetrs(
                b'T', n as i32, 1, sl, n as i32, &ipiv, xs, n as i32, &mut info,
            )
        };
        x
    });
    let rhs1 = rhs.column(0).to_owned();
    let (t_nd, _) = time(|| a.solve(&rhs1).expect("solve"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&a);
        let r: MatRef<'_, f64> =
            faer::mat::MatRef::from_column_major_slice(rhs.as_slice().expect("contiguous"), n, 1);
        m.partial_piv_lu().solve(r)
    });
    row(
        "LU solve 4096^2 x = b",
        t_lapack,
        &[Some(t_nd), Some(t_faer)],
    );
}
