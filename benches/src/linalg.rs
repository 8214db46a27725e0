//! Choosing the LAPACK binding for the linear-algebra block kernels: the same factorizations
//! of the same float64 blocks, one run each, through
//! - `kernel`: nums-function's kernels (`function/src/linalg.rs`): the LAPACK of the OpenBLAS
//!   already linked, through the `lapack` and `cblas-sys` crates, on row-major blocks,
//! - `ndarray-linalg` 0.18 (its high-level API, or its `lax` layer where it has no R-only QR),
//!   on the same OpenBLAS,
//! - `faer` 0.24 (pure Rust, rayon on all cores),
//!
//! with ratios against `kernel`; then the LAPACK routes to a tall-skinny QR, against the
//! one the kernel takes (dgeqrt3). The copies a call must make (LAPACK overwrites its input,
//! faer keeps column-major matrices) are timed as part of it.
//!
//!     cargo run --release -p nums-benches --features linalg-candidates --bin linalg

use std::time::Instant;

use faer::linalg::solvers::Solve as _;
use faer::{Mat, MatRef, Par, Side};
use ndarray::{Array2, ShapeBuilder};
use ndarray_linalg::{
    Cholesky, Diag, JobSvd, QR, SVDDC, Solve, SolveTriangular, UPLO, layout::MatrixLayout,
};
use nums_function::linalg;
use nums_layout::Block;
use nums_layout::batch::{Kernel, QrOutput, SvdOutput};

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

fn row(name: &str, base: f64, others: &[f64]) {
    print!("{name:<34} {:>10.1}", base * 1e3);
    for t in others {
        print!(" {:>10.1} {:>6.2}", t * 1e3, t / base);
    }
    println!();
}

fn block(a: &Array2<f64>) -> Block {
    Block::F64(a.clone().into_dyn())
}

/// One run of the kernel on `inputs` for an output block of `shape`.
fn kernel(k: &Kernel, inputs: &[&Block], shape: &[usize]) -> (f64, Block) {
    time(|| linalg::run(k, inputs, shape).expect("kernel"))
}

fn r_of(b: &Block) -> Array2<f64> {
    let Block::F64(a) = b else {
        unreachable!("float64")
    };
    a.clone().into_dimensionality().expect("2-D")
}

/// R's equal up to the sign of each row.
fn same_r(a: &Array2<f64>, b: &Array2<f64>) {
    for i in 0..b.nrows() {
        let s = (a[[i, i]] / b[[i, i]]).signum();
        for j in i..b.ncols() {
            assert!((a[[i, j]] - s * b[[i, j]]).abs() < 1e-8 * (1.0 + b[[i, j]].abs()));
        }
    }
}

fn main() {
    let par = Par::rayon(0);
    faer::set_global_parallelism(par);
    println!(
        "{:<34} {:>10} {:>10} {:>6} {:>10} {:>6}",
        "operation (float64)", "kernel ms", "nd-la ms", "ratio", "faer ms", "ratio"
    );
    // Warm both thread pools up (OpenBLAS starts its threads on first use).
    let w = matrix(256, 256, 1);
    let _ = w.dot(&w);
    let _ = faer_of(&w).qr();

    // QR of a tall-skinny row block.
    let a = matrix(65536, 128, 1);
    let ab = block(&a);
    let (t_kernel, r) = kernel(
        &Kernel::Qr {
            cols: 1,
            output: QrOutput::R,
        },
        &[&ab],
        &[128, 128],
    );
    let r = r_of(&r);
    let (t_lax, r_lax) = time(|| {
        let mut buf = a.clone();
        let layout = MatrixLayout::C {
            row: 65536,
            lda: 128,
        };
        <f64 as lax::Lapack>::householder(layout, buf.as_slice_mut().expect("contiguous"))
            .expect("qr");
        buf
    });
    let (t_faer, rf) = time(|| {
        let m = faer_of(&a);
        m.qr().thin_R().to_owned()
    });
    same_r(&r_lax, &r);
    same_r(&Array2::from_shape_fn((128, 128), |(i, j)| rf[(i, j)]), &r);
    row("QR R 65536x128", t_kernel, &[t_lax, t_faer]);
    // Q takes a second task (one output block each): R, then Q's rows.
    let (t_q, _) = kernel(
        &Kernel::Qr {
            cols: 1,
            output: QrOutput::Q { part: 0 },
        },
        &[&ab],
        &[65536, 128],
    );
    let (t_nd, _) = time(|| a.qr().expect("qr"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&a);
        let qr = m.qr();
        (qr.compute_thin_Q(), qr.thin_R().to_owned())
    });
    row("QR Q+R 65536x128", t_kernel + t_q, &[t_nd, t_faer]);

    // Cholesky of an SPD block.
    let n = 4096;
    let s = spd(n);
    let (t_kernel, _) = kernel(&Kernel::Cholesky, &[&block(&s)], &[n, n]);
    let (t_nd, _) = time(|| s.cholesky(UPLO::Lower).expect("cholesky"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&s);
        m.llt(Side::Lower).expect("llt").L().to_owned()
    });
    row("Cholesky 4096x4096", t_kernel, &[t_nd, t_faer]);
    drop(s);

    // Triangular solve L X = B.
    let l = lower(n);
    let b = matrix(n, 512, 5);
    let trsm = Kernel::TriangularSolve {
        left: true,
        lower: true,
        transpose: false,
        unit_diagonal: false,
    };
    let (t_kernel, _) = kernel(&trsm, &[&block(&l), &block(&b)], &[n, 512]);
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
        "triangular solve 4096^2, 512 rhs",
        t_kernel,
        &[t_nd, t_faer],
    );
    drop((l, b));

    // SVD (thin, with vectors): the kernel's U task computes all three.
    for n in [128usize, 2048] {
        let a = matrix(n, n, 11);
        let (t_kernel, _) = kernel(
            &Kernel::Svd {
                output: SvdOutput::U,
            },
            &[&block(&a)],
            &[n, n],
        );
        let (t_nd, _) = time(|| a.svddc(JobSvd::Some).expect("svd"));
        let (t_faer, _) = time(|| faer_of(&a).thin_svd().expect("svd"));
        row(
            &format!("SVD {n}x{n} (U, S, Vh)"),
            t_kernel,
            &[t_nd, t_faer],
        );
    }

    // LU solve A x = b (getrf, then two triangular solves).
    let a4 = spd(n) + matrix(n, n, 13) * (n as f64);
    let rhs = matrix(n, 1, 17);
    let (t_kernel, _) = kernel(&Kernel::LuSolve, &[&block(&a4), &block(&rhs)], &[n, 1]);
    let rhs1 = rhs.column(0).to_owned();
    let (t_nd, _) = time(|| a4.solve(&rhs1).expect("solve"));
    let (t_faer, _) = time(|| {
        let m = faer_of(&a4);
        let r: MatRef<'_, f64> =
            MatRef::from_column_major_slice(rhs.as_slice().expect("contiguous"), n, 1);
        m.partial_piv_lu().solve(r)
    });
    row("LU solve 4096^2, 1 rhs", t_kernel, &[t_nd, t_faer]);
    drop(a4);

    // The LAPACK routes to the R (and Q) of a tall-skinny block.
    println!();
    println!(
        "{:<34} {:>10} {:>10} {:>6}",
        "LAPACK route, 65536x128", "geqrt3 ms", "route ms", "ratio"
    );
    let (t3, r3) = time(|| lapack_qr_geqrt3(&a, false));
    for (name, f) in [
        (
            "R: dgeqrf (column-major copy)",
            &(|| lapack_qr_colmajor(&a, false)) as &dyn Fn() -> Array2<f64>,
        ),
        ("R: dgeqr (LAPACK's TSQR)", &|| lapack_qr_geqr(&a)),
        ("R: dgelqf (row-major, no copy)", &|| {
            lapack_qr_rowmajor(&a, false)
        }),
    ] {
        let (t, r2) = time(f);
        same_r(
            &r2.slice(ndarray::s![..128, ..]).to_owned(),
            &r3.slice(ndarray::s![..128, ..]).to_owned(),
        );
        row(name, t3, &[t]);
    }
    let (t3q, _) = time(|| lapack_qr_geqrt3(&a, true));
    for (name, f) in [
        (
            "Q+R: dgeqrf + dorgqr",
            &(|| lapack_qr_colmajor(&a, true)) as &dyn Fn() -> Array2<f64>,
        ),
        ("Q+R: dgelqf + dorglq (row-major)", &|| {
            lapack_qr_rowmajor(&a, true)
        }),
    ] {
        let (t, _) = time(f);
        row(name, t3q, &[t]);
    }
}
