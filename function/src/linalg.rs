//! Linear-algebra block kernels, the pieces the distributed factorizations are built from:
//! QR of a row block or of stacked R factors (TSQR, any fan-in; R or one slice of Q),
//! least squares from the R of `[a | b]`, SVD of a block, Cholesky with the triangular
//! solves and gemm/syrk updates of blocked right-looking algorithms, and LU solve, inverse
//! and determinants of one block. Each is a pure function from its input blocks to ONE
//! output block (the `Kernel` variants from `Qr` on, in `nums_layout::batch`).
//!
//! Arithmetic is float64, or complex128 when an input is complex (other dtypes are
//! converted; a 1-D block is one column), by the LAPACK and CBLAS of the OpenBLAS the
//! function already links, through the `lapack` and `cblas-sys` bindings (BENCHMARKS.md,
//! "LAPACK binding", says why); one kernel for both through [`field::Field`], the complex
//! one with A^H where the real one has A^T. The blocked LU's steps and lstsq are real only
//! (the graph runs a complex solve, inv or det in one task). LAPACK is column-major
//! and blocks are row-major, whose memory is the column-major transpose: most routines are
//! called for the transpose (potrf 'U' for a lower Cholesky, getrf of A^T, gesdd of A^T),
//! so the block is not transposed in memory; CBLAS takes row-major directly. QR alone
//! stacks its inputs into a column-major copy (see [`qr`]).
//!
//! A singular matrix or one that is not positive definite fails with NumPy's words after
//! [`LINALG_ERROR`]; [`linalg_error`] finds them in a failed task's message.
//! [`workspace_bytes`], each kernel's memory beyond its input and output blocks, is stated
//! in `nums_layout::batch` with the other kernels' (re-exported here).

use std::borrow::Cow;

mod field;

use cblas_sys::{CBLAS_DIAG, CBLAS_SIDE, CBLAS_UPLO};
use field::Field;
use ndarray::{Array1, Array2, ArrayD, ArrayView2, ArrayViewMut2, Axis, CowArray, Ix2, IxDyn, s};
use nums_layout::batch::{DetOutput, Kernel, LstsqOutput, QrOutput, SvdOutput};
use nums_layout::{Block, C128, Elem};
// Which kernels are this module's, and their workspace, are the kernels' memory model in
// nums_layout::batch (one place for the planner and the graph); kept at their old paths.
pub use nums_layout::batch::{is_linalg, workspace_bytes};

/// Starts the message of every error a user can act on (the rest is NumPy's
/// `numpy.linalg.LinAlgError` text, e.g. "Singular matrix").
pub const LINALG_ERROR: &str = "LinAlgError: ";

/// NumPy's LinAlgError text in a kernel's (or a failed task's) error message, if it has one:
/// `"task 3 (block R/0.0): LinAlgError: Singular matrix"` gives `"Singular matrix"`.
pub fn linalg_error(message: &str) -> Option<&str> {
    message
        .find(LINALG_ERROR)
        .map(|i| &message[i + LINALG_ERROR.len()..])
}

fn singular() -> String {
    format!("{LINALG_ERROR}Singular matrix")
}

fn not_positive_definite() -> String {
    format!("{LINALG_ERROR}Matrix is not positive definite")
}

/// Runs a linear-algebra `kernel` on `inputs` (in the order the kernel documents) for an
/// output block of `shape`. The result is float64, or complex128 when an input is complex
/// (the caller casts to the output dtype); a complex matrix's singular values, slogdet's
/// logabsdet and its rank are float64.
pub fn run(kernel: &Kernel, inputs: &[&Block], shape: &[usize]) -> Result<Block, String> {
    if inputs.iter().any(|b| b.dtype().is_complex()) {
        run_in::<C128>(kernel, inputs, shape)
    } else {
        run_in::<f64>(kernel, inputs, shape)
    }
}

fn run_in<T: Field>(kernel: &Kernel, inputs: &[&Block], shape: &[usize]) -> Result<Block, String> {
    let two = |name: &str| match inputs {
        [a, b] => Ok((*a, *b)),
        _ => Err(format!("{name} needs 2 inputs, got {}", inputs.len())),
    };
    // The blocked LU's steps and lstsq have no complex kernel: refused, never the real
    // parts' answer.
    let real = |name: &str| {
        if T::DTYPE.is_complex() {
            Err(format!(
                "{name} of a complex matrix: its kernel is real only (a complex solve, inv or det runs in one task)"
            ))
        } else {
            Ok(())
        }
    };
    let out: Block = match kernel {
        Kernel::Qr { cols, output } => T::wrap(qr::<T>(inputs, *cols, *output, shape)?),
        Kernel::Lstsq { n, rcond, output } => {
            real("lstsq")?;
            Block::F64(lstsq(one(inputs, "lstsq")?, *n, *rcond, *output)?)
        }
        Kernel::Svd { output } => svd::<T>(one(inputs, "svd")?, *output, shape)?,
        Kernel::Cholesky => T::wrap(cholesky::<T>(one(inputs, "cholesky")?)?),
        Kernel::CholeskyBlock { diagonal } => T::wrap(cholesky_block::<T>(inputs, *diagonal)?),
        Kernel::TriangularSolve {
            left,
            lower,
            transpose,
            unit_diagonal,
        } => {
            let (t, b) = two("triangular solve")?;
            T::wrap(triangular_solve::<T>(
                t,
                b,
                *left,
                *lower,
                *transpose,
                *unit_diagonal,
            )?)
        }
        Kernel::SubtractProducts {
            transpose_a,
            transpose_b,
        } => T::wrap(subtract_products::<T>(inputs, *transpose_a, *transpose_b)?),
        Kernel::SubtractGram { transpose } => T::wrap(subtract_gram::<T>(inputs, *transpose)?),
        Kernel::LuSolve => {
            let (a, b) = two("solve")?;
            T::wrap(lu_solve::<T>(a, b)?)
        }
        Kernel::Inverse => T::wrap(inverse::<T>(one(inputs, "inv")?)?),
        Kernel::Det { output } => det::<T>(one(inputs, "det")?, *output)?,
        Kernel::LuPanel {
            w,
            apply,
            factor,
            scale,
        } => {
            real("blocked LU")?;
            Block::F64(lu_panel(
                inputs,
                *w,
                *apply,
                *factor,
                *scale,
                // The rows of an [n], [n, c] or (a step version) [1, n, c] block.
                shape.get(shape.len().max(2) - 2).copied().unwrap_or(0),
            )?)
        }
        Kernel::LuBack { w, step, estimate } => {
            real("blocked LU")?;
            Block::F64(lu_back(inputs, *w, *step, *estimate)?)
        }
        Kernel::LuDet { w, step, output } => {
            real("blocked LU")?;
            let (f, m) = two("det")?;
            Block::F64(lu_det(f, m, *w, *step, *output)?)
        }
        other => return Err(format!("not a linear-algebra kernel: {other:?}")),
    };
    match out {
        Block::F64(a) => shaped(a, shape).map(Block::F64),
        Block::C128(a) => shaped(a, shape).map(Block::C128),
        b => Err(format!("a linear-algebra kernel gave {}", b.dtype())),
    }
}

fn one<'a>(inputs: &[&'a Block], name: &str) -> Result<&'a Block, String> {
    match inputs {
        [x] => Ok(x),
        _ => Err(format!("{name} needs 1 input, got {}", inputs.len())),
    }
}

/// The result in the output block's shape: the same, or the same elements without its
/// length-1 axes (an (n, 1) column for an (n,) block, a 1 x 1 for a 0-d one).
fn shaped<T: Elem>(a: ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, String> {
    if a.shape() == shape {
        return Ok(a);
    }
    let squeeze = |s: &[usize]| s.iter().copied().filter(|&d| d != 1).collect::<Vec<_>>();
    if squeeze(a.shape()) == squeeze(shape) {
        let got = a.shape().to_vec();
        return a
            .as_standard_layout()
            .into_owned()
            .into_shape_with_order(IxDyn(shape))
            .map_err(|e| format!("result of shape {got:?} as {shape:?}: {e}"));
    }
    Err(format!(
        "the result has shape {:?}, the output block {shape:?}",
        a.shape()
    ))
}

/// A block as a float64 matrix in row-major order, borrowed where it already is one; a
/// 1-D block is one column. (A complex block's kernels take [`matrix_of`].)
fn matrix<'a>(b: &'a Block, name: &str) -> Result<CowArray<'a, f64, Ix2>, String> {
    matrix_of::<f64>(b, name)
}

/// A block as a matrix of `T` in row-major order, borrowed where it already is one; a
/// 1-D block is one column.
fn matrix_of<'a, T: Field>(b: &'a Block, name: &str) -> Result<CowArray<'a, T, Ix2>, String> {
    let (r, c) = match *b.shape() {
        [m] => (m, 1),
        // A blocked LU's step versions: [1, m, n] blocks.
        [m, n] | [1, m, n] => (m, n),
        ref s => {
            return Err(format!(
                "{name} of a {}-D block of shape {s:?}: linear algebra takes 2-D blocks (or 1-D as a column)",
                s.len()
            ));
        }
    };
    let shape = |a: ArrayD<T>| a.into_shape_with_order((r, c)).expect("standard layout");
    Ok(match b.to_elem::<T>() {
        Cow::Borrowed(a) if a.is_standard_layout() => {
            CowArray::from(a.view().into_shape_with_order((r, c)).expect("standard"))
        }
        Cow::Owned(a) if a.is_standard_layout() => CowArray::from(shape(a)),
        a => CowArray::from(shape(a.as_standard_layout().into_owned())),
    })
}

fn square<T>(a: &CowArray<'_, T, Ix2>, name: &str) -> Result<usize, String> {
    if a.nrows() != a.ncols() {
        return Err(format!(
            "{name} of a {} x {} block: the matrix must be square",
            a.nrows(),
            a.ncols()
        ));
    }
    Ok(a.nrows())
}

/// A dimension as LAPACK's integer.
fn int(n: usize) -> Result<i32, String> {
    i32::try_from(n).map_err(|_| format!("dimension {n} is too large for LAPACK (32-bit)"))
}

/// Leading dimension: at least 1, as LAPACK and BLAS require even for empty matrices.
fn ld(n: usize) -> Result<i32, String> {
    int(n.max(1))
}

/// The slice of a standard-layout matrix.
fn slice<'a, T>(a: &'a ArrayView2<'_, T>) -> &'a [T] {
    a.as_slice().expect("standard layout")
}

/// A LAPACK `info` below zero is a bad argument: a bug here, not the user's input.
fn check_args(routine: &str, info: i32) -> Result<(), String> {
    if info < 0 {
        return Err(format!("LAPACK {routine}: argument {} is invalid", -info));
    }
    Ok(())
}

/// The optimal `lwork` a workspace query returned.
fn lwork<T: Field>(query: T) -> usize {
    query.lwork()
}

// ---------------------------------------------------------------------------------------
// QR (TSQR leaves and combines)
// ---------------------------------------------------------------------------------------

/// QR of the grid of `inputs` (row-major, `cols` per grid row) as one M x N matrix, with
/// diag(R) real and >= 0 (of a complex matrix: row j of R times the conjugate of its
/// diagonal's phase, column j of Q times that phase). The one copy: the stacking into the column-major M x N that LAPACK
/// overwrites (a row-major block's LQ, dgelqf, would avoid the transposition but is 4x
/// slower on tall blocks).
fn qr<T: Field>(
    inputs: &[&Block],
    cols: usize,
    output: QrOutput,
    shape: &[usize],
) -> Result<ArrayD<T>, String> {
    // QProduct's last input is C, the rest the grid.
    let (grid, c) = match output {
        QrOutput::QProduct { .. } => match inputs.split_last() {
            Some((c, grid)) => (grid, Some(matrix_of::<T>(c, "qr")?)),
            None => (inputs, None),
        },
        _ => (inputs, None),
    };
    if cols == 0 || grid.is_empty() || !grid.len().is_multiple_of(cols) {
        return Err(format!(
            "qr of {} input blocks in grid rows of {cols}",
            grid.len()
        ));
    }
    let blocks = grid
        .iter()
        .map(|b| matrix_of::<T>(b, "qr"))
        .collect::<Result<Vec<_>, _>>()?;
    let rows = blocks.len() / cols;
    let heights: Vec<usize> = (0..rows).map(|r| blocks[r * cols].nrows()).collect();
    let widths: Vec<usize> = (0..cols).map(|c| blocks[c].ncols()).collect();
    for (k, b) in blocks.iter().enumerate() {
        let want = (heights[k / cols], widths[k % cols]);
        if b.dim() != want {
            return Err(format!(
                "qr: input {k} has shape {:?}, but its grid row and column make it {want:?}",
                b.dim()
            ));
        }
    }
    let (m, n) = (heights.iter().sum::<usize>(), widths.iter().sum::<usize>());
    let k = m.min(n);
    // Column-major M x N: the stacking, and the copy LAPACK overwrites.
    let mut a = vec![T::ZERO; m * n];
    let mut r0 = 0;
    for (gr, &h) in heights.iter().enumerate() {
        let mut c0 = 0;
        for (gc, &w) in widths.iter().enumerate() {
            let b = &blocks[gr * cols + gc];
            // Tiles of 64 rows: reads stay in cache, writes are runs of 64.
            for i0 in (0..h).step_by(64) {
                let i1 = (i0 + 64).min(h);
                for j in 0..w {
                    let dst = (c0 + j) * m + r0;
                    for i in i0..i1 {
                        a[dst + i] = b[[i, j]];
                    }
                }
            }
            c0 += w;
        }
        r0 += h;
    }
    if shape.len() != 2 {
        return Err(format!("qr output block of shape {shape:?} is not 2-D"));
    }
    let factors = if k > 0 {
        householder(&mut a, m, n)?
    } else {
        Householder::Tau(vec![])
    };
    // R is the upper triangle of the first k rows; row j of R is multiplied by the
    // conjugate of the phase (a real's sign) of R's diagonal, column j of Q by the phase.
    let signs: Vec<T> = (0..k).map(|j| a[j * m + j].phase()).collect();
    match output {
        QrOutput::R => {
            // Rows past k are zero: n x n for a TSQR combine, m x n for mode "complete".
            if shape[1] != n || shape[0] < k || shape[0] > m.max(n) {
                return Err(format!(
                    "qr: R of a {m} x {n} matrix is {k} x {n} (or {n} x {n}, {m} x {n}), not {shape:?}"
                ));
            }
            let mut r = Array2::zeros((shape[0], n));
            for j in 0..k {
                let d = signs[j].conj();
                for i in j..n {
                    r[[j, i]] = d * a[i * m + j];
                }
                // Exactly real: the product's imaginary part can round to a few ulps.
                r[[j, j]] = T::real(a[j * m + j].abs());
            }
            Ok(r.into_dyn())
        }
        QrOutput::Q { part } | QrOutput::QProduct { part } => {
            let Some(&h) = heights.get(part) else {
                return Err(format!("qr: Q part {part} of {rows} grid rows"));
            };
            // Q diag(signs) C = H [diag(signs) C[..k]; 0]: C is the identity for Q itself;
            // all m columns of it (mode "complete") for an m x m block of one grid row.
            let complete = c.is_none() && m > n && rows == 1 && shape == [m, m];
            let w = match &c {
                None if complete => m,
                None if shape[0] != h || shape[1] < k || shape[1] > n => {
                    return Err(format!(
                        "qr: Q rows of grid row {part} of a {m} x {n} matrix are {h} x {k} (or {h} x {n}), not {shape:?}"
                    ));
                }
                None => k,
                Some(c) if c.nrows() < k || shape != [h, c.ncols()] => {
                    return Err(format!(
                        "qr: Q of a {m} x {n} matrix times C of {:?} (at least {k} rows), rows of grid row {part}: {h} x {}, not {shape:?}",
                        c.dim(),
                        c.ncols()
                    ));
                }
                Some(c) => c.ncols(),
            };
            let mut qc = vec![T::ZERO; m * w];
            for j in 0..w {
                for (i, &sign) in signs.iter().enumerate() {
                    let cij = c
                        .as_ref()
                        .map_or(if i == j { T::one() } else { T::ZERO }, |c| c[[i, j]]);
                    qc[j * m + i] = sign * cij;
                }
                if complete && j >= k {
                    qc[j * m + j] = T::one();
                }
            }
            if k > 0 && w > 0 {
                apply_q(&a, m, n, &factors, &mut qc, w)?;
            }
            let r0: usize = heights[..part].iter().sum();
            let mut out = Array2::zeros((h, shape[1]));
            for j in 0..w {
                for (i, &v) in qc[j * m + r0..j * m + r0 + h].iter().enumerate() {
                    out[[i, j]] = v;
                }
            }
            Ok(out.into_dyn())
        }
    }
}

/// The Householder form LAPACK leaves below R: with the n x n block reflector T of dgeqrt3
/// (M >= N), or the scalars tau of dgeqrf (M < N).
enum Householder<T> {
    T(Vec<T>),
    Tau(Vec<T>),
}

/// QR of the column-major m x n `a` in place. A tall matrix goes through dgeqrt3, the
/// recursive QR made of level-3 BLAS: on 65536 x 128 it is 2x faster than dgeqrf, whose
/// panels are level-2 (BENCHMARKS.md, "LAPACK binding").
fn householder<T: Field>(a: &mut [T], m: usize, n: usize) -> Result<Householder<T>, String> {
    let (mi, ni) = (int(m)?, int(n)?);
    if m >= n {
        let mut t = vec![T::ZERO; n * n];
        // SAFETY: a is m x n column-major (lda m >= 1), t n x n (ldt n).
        let info = unsafe { T::geqrt3(mi, ni, a, mi, &mut t, ni) };
        check_args("geqrt3", info)?;
        return Ok(Householder::T(t));
    }
    let mut tau = vec![T::ZERO; m];
    let mut q = [T::ZERO];
    // SAFETY: a is m x n column-major, tau min(m, n); lwork -1 is a size query.
    let info = unsafe { T::geqrf(mi, ni, a, mi, &mut tau, &mut q, -1) };
    check_args("geqrf", info)?;
    let mut work = vec![T::ZERO; lwork(q[0])];
    let lw = int(work.len())?;
    // SAFETY: as above, with the work array LAPACK asked for.
    let info = unsafe { T::geqrf(mi, ni, a, mi, &mut tau, &mut work, lw) };
    check_args("geqrf", info)?;
    Ok(Householder::Tau(tau))
}

/// Applies Q (m x m, from [`householder`]'s output in `a`) to the column-major m x w `c`
/// in place: dgemqrt with dgeqrt3's T, or dormqr with dgeqrf's tau.
fn apply_q<T: Field>(
    a: &[T],
    m: usize,
    n: usize,
    h: &Householder<T>,
    c: &mut [T],
    w: usize,
) -> Result<(), String> {
    let k = m.min(n);
    let (mi, ki, wi) = (int(m)?, int(k)?, int(w)?);
    match h {
        Householder::T(t) => {
            let mut work = vec![T::ZERO; k * w];
            // SAFETY: V is a (m x k, ldv m), T k x k (ldt k, nb k), C m x w (ldc m), work
            // nb x w as gemqrt asks for side 'L'.
            let info = unsafe { T::gemqrt(mi, wi, ki, a, mi, t, c, mi, &mut work) };
            check_args("gemqrt", info)
        }
        Householder::Tau(tau) => {
            let mut q = [T::ZERO];
            // SAFETY: a holds the k reflectors (lda m), C m x w (ldc m); a size query.
            let info = unsafe { T::unmqr(mi, wi, ki, a, mi, tau, c, mi, &mut q, -1) };
            check_args("ormqr", info)?;
            let mut work = vec![T::ZERO; lwork(q[0])];
            let lw = int(work.len())?;
            // SAFETY: as above, with the work array LAPACK asked for.
            let info = unsafe { T::unmqr(mi, wi, ki, a, mi, tau, c, mi, &mut work, lw) };
            check_args("ormqr", info)
        }
    }
}

// ---------------------------------------------------------------------------------------
// SVD
// ---------------------------------------------------------------------------------------

/// An SVD: S descending, and U (m x k), Vh (k x n) when asked (thin), or U (m x m) and
/// Vh (n x n) (full).
struct Svd<T> {
    s: Array1<f64>,
    uv: Option<(Array2<T>, Array2<T>)>,
}

/// gesdd of the row-major m x n `a`, i.e. of the column-major A^T = U' S V'^H; then
/// A = conj(V') S U'^T: U is conj(V') (LAPACK's VT = V'^H, read row-major) and Vh is
/// U'^T (LAPACK's U, read row-major). Each U column's largest entry (the first, on ties)
/// is made real and positive (Vh's row takes the conjugate factor). `full`: all m columns
/// of U and n rows of Vh (jobz 'A', NumPy's full_matrices).
fn gesdd<T: Field>(a: ArrayView2<'_, T>, vectors: bool, full: bool) -> Result<Svd<T>, String> {
    let (m, n) = a.dim();
    let k = m.min(n);
    // U's columns and Vh's rows.
    let (uc, vr) = if full { (m, n) } else { (k, k) };
    if k == 0 {
        return Ok(Svd {
            s: Array1::zeros(0),
            uv: vectors.then(|| {
                (
                    Array2::eye(m).slice(s![.., ..uc]).to_owned(),
                    Array2::eye(n).slice(s![..vr, ..]).to_owned(),
                )
            }),
        });
    }
    // LAPACK's dgesdd refuses a matrix holding NaN (its argument 4), and NumPy says so;
    // one holding inf it takes, to give NaN (the answer here too, without the call).
    if a.iter().any(|v| v.is_nan()) {
        return Err(format!("{LINALG_ERROR}SVD did not converge"));
    }
    if a.iter().any(|v| !v.is_finite()) {
        let nan = T::real(f64::NAN);
        return Ok(Svd {
            s: Array1::from_elem(k, f64::NAN),
            uv: vectors.then(|| {
                (
                    Array2::from_elem((m, uc), nan),
                    Array2::from_elem((vr, n), nan),
                )
            }),
        });
    }
    let mut buf = a.as_standard_layout().into_owned();
    let buf = buf.as_slice_mut().expect("standard layout");
    let (mi, ni, ki) = (int(m)?, int(n)?, int(k)?);
    let mut s = vec![0.0; k];
    // LAPACK's U is n x vr (the row-major Vh), its VT is uc x m (the row-major U).
    let (mut vh, mut u) = if vectors {
        (vec![T::ZERO; n * vr], vec![T::ZERO; uc * m])
    } else {
        (vec![T::ZERO; 1], vec![T::ZERO; 1])
    };
    let (jobz, ldu, ldvt) = match (vectors, full) {
        (false, _) => (b'N', 1, 1),
        (true, false) => (b'S', ni, ki),
        (true, true) => (b'A', ni, mi),
    };
    let mut iwork = vec![0i32; 8 * k];
    let mut q = [T::ZERO];
    // SAFETY: buf is n x m column-major (lda n); s, U (n x k), VT (k x m) are sized for
    // jobz; iwork 8k as LAPACK asks; lwork -1 is a size query.
    let info = unsafe {
        T::gesdd(
            jobz, ni, mi, buf, &mut s, &mut vh, ldu, &mut u, ldvt, &mut q, -1, &mut iwork,
        )
    };
    check_args("gesdd", info)?;
    let mut work = vec![T::ZERO; lwork(q[0])];
    let lw = int(work.len())?;
    // SAFETY: as above, with the work array LAPACK asked for.
    let info = unsafe {
        T::gesdd(
            jobz, ni, mi, buf, &mut s, &mut vh, ldu, &mut u, ldvt, &mut work, lw, &mut iwork,
        )
    };
    check_args("gesdd", info)?;
    if info > 0 {
        return Err(format!("{LINALG_ERROR}SVD did not converge"));
    }
    let s = Array1::from(s);
    if !vectors {
        return Ok(Svd { s, uv: None });
    }
    let mut u = Array2::from_shape_vec((m, uc), u).expect("m x uc");
    let mut vh = Array2::from_shape_vec((vr, n), vh).expect("vr x n");
    for j in 0..k {
        let col = u.column(j);
        let big = col
            .iter()
            .copied()
            .reduce(|best, v| if v.abs() > best.abs() { v } else { best })
            .unwrap_or(T::ZERO);
        let d = big.phase();
        if d != T::one() {
            let dc = d.conj();
            u.column_mut(j).mapv_inplace(|v| v * dc);
            vh.row_mut(j).mapv_inplace(|v| v * d);
        }
    }
    Ok(Svd {
        s,
        uv: Some((u, vh)),
    })
}

/// S (float64), U or Vh (of `T`).
/// U of an output block of m x m (m > n) and Vh of n x n (n > m) are the full SVD's.
fn svd<T: Field>(a: &Block, output: SvdOutput, shape: &[usize]) -> Result<Block, String> {
    let a = matrix_of::<T>(a, "svd")?;
    let (m, n) = a.dim();
    let full = match output {
        SvdOutput::U => m > n && shape == [m, m],
        SvdOutput::Vh => n > m && shape == [n, n],
        _ => false,
    };
    let r = gesdd(a.view(), output != SvdOutput::Values, full)?;
    Ok(match (output, r.uv) {
        (SvdOutput::Values | SvdOutput::S, _) => Block::F64(r.s.into_dyn()),
        (SvdOutput::U, Some((u, _))) => T::wrap(u.into_dyn()),
        (SvdOutput::Vh, Some((_, vh))) => T::wrap(vh.into_dyn()),
        _ => unreachable!("vectors computed when asked"),
    })
}

// ---------------------------------------------------------------------------------------
// Least squares from the R of [a | b]
// ---------------------------------------------------------------------------------------

/// From R of [a | b] = [[R11, R12], [0, R22]]: a = Q R11, so the min-norm solution is
/// pinv(R11) R12 (R11^-1 R12 when a has full rank: one triangular solve), and its
/// residual is ||R22||^2 plus, when rank deficient, ||R11 x - R12||^2 per column.
fn lstsq(r: &Block, n: usize, rcond: f64, output: LstsqOutput) -> Result<ArrayD<f64>, String> {
    let r = matrix(r, "lstsq")?;
    let w = r.ncols();
    if n > w || r.nrows() > w {
        return Err(format!(
            "lstsq: the R of [a | b] with a of {n} columns is (n+p) x (n+p) (or has fewer rows), got {:?}",
            r.dim()
        ));
    }
    let (p, top) = (w - n, r.nrows().min(n));
    let mut r11 = Array2::zeros((n, n));
    let mut r12 = Array2::zeros((n, p));
    r11.slice_mut(s![..top, ..])
        .assign(&r.slice(s![..top, ..n]));
    r12.slice_mut(s![..top, ..])
        .assign(&r.slice(s![..top, n..]));
    let r22 = r.slice(s![top.., n..]);
    // a holding NaN or inf (its R does): NumPy's error (LAPACK's SVD refuses it).
    if r11.iter().any(|v| !v.is_finite()) {
        return Err(format!(
            "{LINALG_ERROR}SVD did not converge in Linear Least Squares"
        ));
    }
    let sv = gesdd(r11.view(), false, false)?.s;
    let cutoff = rcond * sv.first().copied().unwrap_or(0.0);
    let rank = sv.iter().filter(|&&v| v > cutoff).count();
    match output {
        LstsqOutput::SingularValues => return Ok(sv.into_dyn()),
        LstsqOutput::Rank => return Ok(ArrayD::from_elem(IxDyn(&[]), rank as f64)),
        LstsqOutput::X | LstsqOutput::Residuals => {}
    }
    let x = if rank == n {
        let mut x = r12.clone();
        trsm(r11.view(), x.view_mut(), true, false, false, false)?;
        x
    } else {
        // x = Vh[:rank]^T diag(1/s[:rank]) U[:, :rank]^T R12.
        let full = gesdd(r11.view(), true, false)?;
        let (u, vh) = full.uv.expect("vectors");
        let mut y = u.slice(s![.., ..rank]).t().dot(&r12);
        for (mut row, &sj) in y.rows_mut().into_iter().zip(&full.s) {
            row.mapv_inplace(|v| v / sj);
        }
        vh.slice(s![..rank, ..]).t().dot(&y)
    };
    if output == LstsqOutput::X {
        return Ok(x.into_dyn());
    }
    let mut res: Array1<f64> = r22.map_axis(ndarray::Axis(0), |c| c.dot(&c));
    if rank < n {
        let d = r11.dot(&x) - &r12;
        res += &d.map_axis(ndarray::Axis(0), |c| c.dot(&c));
    }
    Ok(res.into_dyn())
}

// ---------------------------------------------------------------------------------------
// Cholesky and the blocked pieces (trsm, gemm, syrk)
// ---------------------------------------------------------------------------------------

/// L with A = L L^H: the row-major lower triangle is the column-major upper one, so
/// potrf 'U' reads exactly A's lower triangle (as NumPy does) and leaves L there (the
/// column-major matrix is A^T = conj(A), Hermitian too: potrf gives conj(A) = U^H U, so
/// A = U^T conj(U) = L L^H with L = U^T, U read row-major).
fn cholesky<T: Field>(a: &Block) -> Result<ArrayD<T>, String> {
    let a = matrix_of::<T>(a, "cholesky")?;
    let n = square(&a, "cholesky")?;
    let mut l = a.into_owned();
    if n > 0 {
        let ni = int(n)?;
        // SAFETY: l is n x n, contiguous.
        let info = unsafe { T::potrf(b'U', ni, l.as_slice_mut().expect("standard"), ni) };
        check_args("potrf", info)?;
        if info > 0 {
            return Err(not_positive_definite());
        }
    }
    for i in 0..n {
        l.row_mut(i).slice_mut(s![i + 1..]).fill(T::ZERO);
    }
    Ok(l.into_dyn())
}

/// One block of a left-looking blocked Cholesky ([`Kernel::CholeskyBlock`]): the update
/// S = A_ij - sum_k L_ik L_jk^T (syrk on the diagonal, gemm elsewhere), then potrf of S on
/// the diagonal, or the trsm X L_jj^T = S below it.
fn cholesky_block<T: Field>(inputs: &[&Block], diagonal: bool) -> Result<ArrayD<T>, String> {
    if diagonal {
        let s = subtract_gram::<T>(inputs, false)?;
        return cholesky::<T>(&T::wrap(s));
    }
    let Some((ljj, rest)) = inputs.split_last() else {
        return Err("cholesky block needs A_ij and L_jj".into());
    };
    if rest.is_empty() {
        return Err("cholesky block needs A_ij and L_jj".into());
    }
    let mut s = subtract_products::<T>(rest, false, true)?
        .into_dimensionality::<Ix2>()
        .map_err(|e| e.to_string())?;
    let l = matrix_of::<T>(ljj, "cholesky")?;
    square(&l, "cholesky")?;
    trsm(l.view(), s.view_mut(), false, true, true, false)?;
    Ok(s.into_dyn())
}

/// Solves op(T) X = B (`left`) or X op(T) = B in place of `x` (holding B) with cblas_dtrsm
/// (ztrsm; op is then the conjugate transpose); only T's `lower` (or upper) triangle is
/// read.
fn trsm<T: Field>(
    t: ArrayView2<'_, T>,
    mut x: ArrayViewMut2<'_, T>,
    left: bool,
    lower: bool,
    transpose: bool,
    unit_diagonal: bool,
) -> Result<(), String> {
    let n = t.nrows();
    let (m, r) = x.dim();
    if (left && m != n) || (!left && r != n) || t.ncols() != n {
        return Err(format!(
            "triangular solve: a {:?} triangle and a right-hand side of {:?}",
            t.dim(),
            x.dim()
        ));
    }
    if !unit_diagonal && t.diag().iter().any(|&d| d == T::ZERO) {
        return Err(singular());
    }
    if m == 0 || r == 0 {
        return Ok(());
    }
    let t = t.as_standard_layout();
    let xs = x
        .as_slice_mut()
        .ok_or("triangular solve: a right-hand side not in standard layout")?;
    // SAFETY: T is n x n row-major (lda n), X m x r row-major (ldb r), sizes checked above.
    unsafe {
        T::trsm(
            if left {
                CBLAS_SIDE::CblasLeft
            } else {
                CBLAS_SIDE::CblasRight
            },
            if lower {
                CBLAS_UPLO::CblasLower
            } else {
                CBLAS_UPLO::CblasUpper
            },
            T::cblas_op(transpose),
            if unit_diagonal {
                CBLAS_DIAG::CblasUnit
            } else {
                CBLAS_DIAG::CblasNonUnit
            },
            int(m)?,
            int(r)?,
            slice(&t.view()).as_ptr(),
            ld(n)?,
            xs.as_mut_ptr(),
            ld(r)?,
        )
    };
    Ok(())
}

fn triangular_solve<T: Field>(
    t: &Block,
    b: &Block,
    left: bool,
    lower: bool,
    transpose: bool,
    unit_diagonal: bool,
) -> Result<ArrayD<T>, String> {
    let t = matrix_of::<T>(t, "triangular solve")?;
    square(&t, "triangular solve")?;
    let mut x = matrix_of::<T>(b, "triangular solve")?.into_owned();
    trsm(
        t.view(),
        x.view_mut(),
        left,
        lower,
        transpose,
        unit_diagonal,
    )?;
    Ok(x.into_dyn())
}

/// op(a) as (rows, cols) of a row-major matrix.
fn op_dim<T>(a: &CowArray<'_, T, Ix2>, t: bool) -> (usize, usize) {
    if t { (a.ncols(), a.nrows()) } else { a.dim() }
}

/// C - sum_k op(A_k) op(B_k): one copy of C, then dgemm with beta 1 per pair.
fn subtract_products<T: Field>(
    inputs: &[&Block],
    transpose_a: bool,
    transpose_b: bool,
) -> Result<ArrayD<T>, String> {
    let Some((c, pairs)) = inputs.split_first() else {
        return Err("subtract products needs C and pairs of blocks".into());
    };
    if !pairs.len().is_multiple_of(2) {
        return Err(format!(
            "subtract products needs C and pairs of blocks, got {} inputs",
            inputs.len()
        ));
    }
    let mut c = matrix_of::<T>(c, "subtract products")?.into_owned();
    for pair in pairs.chunks(2) {
        let a = matrix_of::<T>(pair[0], "subtract products")?;
        let b = matrix_of::<T>(pair[1], "subtract products")?;
        gemm_sub(c.view_mut(), a.view(), b.view(), transpose_a, transpose_b)?;
    }
    Ok(c.into_dyn())
}

/// C -= op(A) op(B): dgemm with beta 1 on row-major views (copied to standard layout
/// where they are not).
fn gemm_sub<T: Field>(
    mut c: ArrayViewMut2<'_, T>,
    a: ArrayView2<'_, T>,
    b: ArrayView2<'_, T>,
    transpose_a: bool,
    transpose_b: bool,
) -> Result<(), String> {
    let (m, n) = c.dim();
    let flip = |(r, c): (usize, usize), t: bool| if t { (c, r) } else { (r, c) };
    let ((am, ak), (bk, bn)) = (flip(a.dim(), transpose_a), flip(b.dim(), transpose_b));
    if am != m || bn != n || ak != bk {
        return Err(format!(
            "subtract products: C is {m} x {n}, op(A) {am} x {ak}, op(B) {bk} x {bn}"
        ));
    }
    if m == 0 || n == 0 || ak == 0 {
        return Ok(());
    }
    let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
    let cs = c
        .as_slice_mut()
        .ok_or("subtract products: C not in standard layout")?;
    // SAFETY: row-major A (lda its columns), B (ldb its columns), C m x n (ldc n), all
    // contiguous; shapes checked above.
    unsafe {
        T::gemm_sub(
            T::cblas_op(transpose_a),
            T::cblas_op(transpose_b),
            int(m)?,
            int(n)?,
            int(ak)?,
            slice(&a.view()).as_ptr(),
            ld(a.ncols())?,
            slice(&b.view()).as_ptr(),
            ld(b.ncols())?,
            cs.as_mut_ptr(),
            ld(n)?,
        )
    };
    Ok(())
}

/// C - sum_k A_k A_k^T (or A_k^T A_k; ^H for complex): dsyrk (zherk) on C's lower
/// triangle, mirrored to the upper (C's upper triangle is not read).
fn subtract_gram<T: Field>(inputs: &[&Block], transpose: bool) -> Result<ArrayD<T>, String> {
    let Some((c, terms)) = inputs.split_first() else {
        return Err("subtract gram needs C and at least one block".into());
    };
    let c = matrix_of::<T>(c, "subtract gram")?;
    let n = square(&c, "subtract gram")?;
    let mut c = c.into_owned();
    for a in terms {
        let a = matrix_of::<T>(a, "subtract gram")?;
        let (an, k) = op_dim(&a, transpose);
        if an != n {
            return Err(format!(
                "subtract gram: C is {n} x {n}, A {:?}{}",
                a.dim(),
                if transpose { " (transposed)" } else { "" }
            ));
        }
        if n == 0 || k == 0 {
            continue;
        }
        let cs = c.as_slice_mut().expect("standard layout");
        // SAFETY: row-major A (lda its columns), C n x n (ldc n); shapes checked above.
        unsafe {
            T::gram_sub(
                T::cblas_op(transpose),
                int(n)?,
                int(k)?,
                slice(&a.view()).as_ptr(),
                ld(a.ncols())?,
                cs.as_mut_ptr(),
                ld(n)?,
            )
        };
    }
    for i in 0..n {
        for j in i + 1..n {
            c[[i, j]] = c[[j, i]].conj();
        }
    }
    Ok(c.into_dyn())
}

// ---------------------------------------------------------------------------------------
// Both LU paths: equilibration, numerically zero pivots, the determinant from slogdet
// ---------------------------------------------------------------------------------------

/// e with m 2^-e in [1, 2): the power of two that equilibrates a row whose largest
/// magnitude is `m` (0 for a row of zeros, NaN or inf, left as it is), kept within the
/// exponents of normal numbers so that 2^-e is one.
fn row_exponent(m: f64) -> i32 {
    if !(m.is_finite() && m > 0.0) {
        return 0;
    }
    let (m, shift) = if m < f64::MIN_POSITIVE {
        (m * pow2(64), 64)
    } else {
        (m, 0)
    };
    (((m.to_bits() >> 52) & 0x7ff) as i32 - 1023 - shift).clamp(-1022, 1022)
}

/// 2^e, exactly (e in -1022..=1023).
fn pow2(e: i32) -> f64 {
    f64::from_bits(((e + 1023) as u64) << 52)
}

/// The largest magnitude of `v` (NaN ignored).
fn max_abs<'a, T: Field>(v: impl IntoIterator<Item = &'a T>) -> f64 {
    v.into_iter().fold(0.0, |m, x| m.max(x.abs()))
}

/// Whether a pivot `u` of LU is numerically zero: at most n eps times `scale`, the size of
/// what was cancelled to make it (as NumPy's matrix_rank tolerance is eps max(M, N) times
/// the largest singular value). An exactly singular matrix has a zero pivot in exact
/// arithmetic; getrf meets it as an exact zero only when the rounding cancels exactly (so
/// NumPy raises for some matrices with two equal rows and not for others), and a blocked
/// LU rounds the trailing updates of the pivot's row (trsm) and of the rows below (gemm)
/// differently, leaving a pivot of rounding size where the unblocked one may have met 0.
fn negligible_pivot<T: Field>(u: T, scale: f64, n: usize) -> bool {
    let t = n as f64 * f64::EPSILON * scale;
    t.is_finite() && u.abs() <= t
}

/// NumPy's det from slogdet: sign * exp(logabsdet) (0 for a singular matrix, and no
/// overflow of a running product on the way).
fn det_of(sign: f64, logabsdet: f64) -> f64 {
    sign * logabsdet.exp()
}

/// The reciprocal condition number below which solve and inv call an n x n matrix singular
/// (NumPy's LinAlgError "Singular matrix"): n eps. LU with partial pivoting gives the exact
/// factors of A + E with |E| within about n eps of |L||U| (Higham's gamma_n): a matrix
/// whose relative distance to a singular one (1 / its condition number) is below n eps may
/// be factored as a singular one, and its solution has no correct digit to give. The same
/// n eps as NumPy's matrix_rank tolerance (eps max(M, N) times the largest singular value)
/// and as [`negligible_pivot`]; LAPACK's gesvx warns at eps, MATLAB at eps too, but n eps
/// leaves room for the blocked LU's estimate, which can be lower than gecon's by about
/// sqrt(n) (see [`Kernel::LuBack`]).
pub fn singular_rcond(n: usize) -> f64 {
    n as f64 * f64::EPSILON
}

/// How A's condition is measured: A equilibrated as LAPACK's expert driver (gesvx, with
/// geequ) equilibrates it before gecon, rows first, then columns: M = D A C, D its rows'
/// powers of two ([`row_exponent`], as the blocked LU scales them), then C its columns'
/// scales c_j = 1 / ||D A e_j||_1, so that every column of M has 1-norm 1 and
/// ||M||_1 = 1 (by van der Sluis's theorem the column scaling of D A with the least 1-norm
/// condition number: Higham, Accuracy and Stability of Numerical Algorithms, 7.3). So a
/// matrix with badly scaled rows or columns, which solve answers as well as a well-scaled
/// one, is not called singular for its scaling (its rows' scales are undone exactly).
/// The 1-norms of D A's columns (C^-1) over `a`'s rows.
fn column_norms<T: Field>(a: ArrayView2<'_, T>, exps: &[i32]) -> Vec<f64> {
    let mut norms = vec![0.0; a.ncols()];
    for (row, &e) in a.rows().into_iter().zip(exps) {
        let d = pow2(-e);
        for (s, &v) in norms.iter_mut().zip(row) {
            *s += v.abs() * d;
        }
    }
    norms
}

/// M's reciprocal condition number from `inv_norm`, a lower bound of ||M^-1||_1
/// (||M||_1 = 1): 1 / inv_norm, so at least the true one (a matrix it calls singular is).
/// 0 when the bound overflowed (an inverse past f64's range); infinite (nothing to decide
/// from) when it is NaN: A holds NaN or inf, whose solution is NaN as NumPy's is (for a
/// finite A a NaN would need an inverse past f64's range with no pivot made zero, a
/// condition past 1e300: not met here).
fn rcond_from(inv_norm: f64) -> f64 {
    if inv_norm.is_nan() {
        f64::INFINITY
    } else {
        1.0 / inv_norm
    }
}

// ---------------------------------------------------------------------------------------
// LU of one block: solve, inverse, determinants
// ---------------------------------------------------------------------------------------

/// dgetrf of the n x n A, copied column-major, as NumPy calls LAPACK for solve, inv and
/// det (so that the factors, and what is made of them, are NumPy's): A = P L U in `f`
/// (column-major, L unit lower below the diagonal). A pivot that is numerically zero is
/// made an exact zero: at most n eps times the largest |l_js u_sj| (s < j) of its row's
/// elimination, the terms whose rounding it is within (a one-block LU has them all; the
/// blocked one, which has not, equilibrates its rows instead).
struct Lu<T> {
    f: Vec<T>,
    n: usize,
    ipiv: Vec<i32>,
    singular: bool,
    /// A's row scales d_i (powers of two) and D A's column 1-norms (C^-1), for the
    /// condition ([`column_norms`]).
    d: Vec<f64>,
    norms: Vec<f64>,
}

fn lu<T: Field>(a: &Block, name: &str) -> Result<Lu<T>, String> {
    let a = matrix_of::<T>(a, name)?;
    let n = square(&a, name)?;
    let mut f = vec![T::ZERO; n * n];
    for ((i, j), &v) in a.indexed_iter() {
        f[j * n + i] = v;
    }
    let exps: Vec<i32> = a
        .rows()
        .into_iter()
        .map(|r| row_exponent(max_abs(r)))
        .collect();
    let norms = column_norms(a.view(), &exps);
    let d = exps.iter().map(|&e| pow2(-e)).collect();
    let mut ipiv = vec![0i32; n];
    let mut info = 0;
    if n > 0 {
        let ni = int(n)?;
        // SAFETY: f is n x n column-major (lda n), ipiv n.
        info = unsafe { T::getrf(ni, &mut f, &mut ipiv) };
        check_args("getrf", info)?;
    }
    let mut singular = info > 0;
    for j in 0..n {
        // l_js is at (j, s), u_sj at (s, j).
        let terms = max_abs(
            &(0..j)
                .map(|s| f[s * n + j] * f[j * n + s])
                .collect::<Vec<_>>(),
        );
        if negligible_pivot(f[j * n + j], terms, n) {
            f[j * n + j] = T::ZERO;
            singular = true;
        }
    }
    Ok(Lu {
        f,
        n,
        ipiv,
        singular,
        d,
        norms,
    })
}

impl<T: Field> Lu<T> {
    /// X = A^-1 B by getrs (B row-major n x k, copied column-major and back), as NumPy's
    /// solve (gesv) and inv (gesv of the identity); LinAlgError "Singular matrix" when a
    /// pivot is (numerically) zero or A's estimated reciprocal condition number
    /// ([`Lu::rcond`]) is below [`singular_rcond`].
    fn solve(&self, b: ArrayView2<'_, T>) -> Result<Array2<T>, String> {
        if self.singular || self.rcond()? < singular_rcond(self.n) {
            return Err(singular());
        }
        let (n, k) = b.dim();
        if n != self.n {
            return Err(format!("solve: a is {0} x {0}, b has {n} rows", self.n));
        }
        let mut cm = vec![T::ZERO; n * k];
        for ((i, j), &v) in b.indexed_iter() {
            cm[j * n + i] = v;
        }
        self.getrs(b'N', &mut cm, k)?;
        Ok(Array2::from_shape_fn((n, k), |(i, j)| cm[j * n + i]))
    }

    /// getrs in place of `cm` (n x k, column-major): A^-1 B (`trans` b'N') or A^-H B
    /// ([`Field::ADJOINT`]).
    fn getrs(&self, trans: u8, cm: &mut [T], k: usize) -> Result<(), String> {
        let n = self.n;
        if n > 0 && k > 0 {
            // SAFETY: f holds the n x n factors (lda n) and ipiv their pivots; cm is n x k
            // column-major (ldb n).
            let info =
                unsafe { T::getrs(trans, int(n)?, int(k)?, &self.f, &self.ipiv, cm, ld(n)?) };
            check_args("getrs", info)?;
        }
        Ok(())
    }

    /// The reciprocal condition number of A equilibrated ([`column_norms`]: M = D A C) in
    /// the 1-norm, 1 / ||M^-1||_1, ||M^-1||_1 estimated as LAPACK's dgecon estimates it
    /// (Hager and Higham's estimator, dlacn2: a lower bound, usually exact, from a few
    /// solves with the factors of A: M^-1 x = C^-1 A^-1 D^-1 x and
    /// M^-T x = D^-1 A^-T C^-1 x). See [`rcond_from`]: infinite when A holds NaN or inf,
    /// 0 when a solve overflows (past f64's range) or meets a zero pivot.
    fn rcond(&self) -> Result<f64, String> {
        let n = self.n;
        if n == 0 || self.norms.iter().any(|s| !s.is_finite()) {
            return Ok(f64::INFINITY);
        }
        let (mut v, mut x) = (vec![T::ZERO; n], vec![T::ZERO; n]);
        let mut isgn = vec![0i32; n];
        let (mut est, mut kase, mut isave) = (0.0, 0, [0i32; 3]);
        let scale = |x: &mut [T], by: &[f64], div: bool| {
            for (x, &s) in x.iter_mut().zip(by) {
                *x = *x * T::real(if div { 1.0 / s } else { s });
            }
        };
        loop {
            // SAFETY: v, x and isgn have n entries, isave 3 (lacn2's reverse communication).
            unsafe {
                T::lacn2(
                    int(n)?,
                    &mut v,
                    &mut x,
                    &mut isgn,
                    &mut est,
                    &mut kase,
                    &mut isave,
                )
            };
            match kase {
                1 => {
                    scale(&mut x, &self.d, true);
                    self.getrs(b'N', &mut x, 1)?;
                    scale(&mut x, &self.norms, false);
                }
                2 => {
                    scale(&mut x, &self.norms, false);
                    self.getrs(T::ADJOINT, &mut x, 1)?;
                    scale(&mut x, &self.d, true);
                }
                _ => break,
            }
            if x.iter().any(|v| !v.is_finite()) {
                return Ok(0.0);
            }
        }
        Ok(rcond_from(est))
    }
}

fn lu_solve<T: Field>(a: &Block, b: &Block) -> Result<ArrayD<T>, String> {
    let lu = lu::<T>(a, "solve")?;
    let b = matrix_of::<T>(b, "solve")?;
    Ok(lu.solve(b.view())?.into_dyn())
}

fn inverse<T: Field>(a: &Block) -> Result<ArrayD<T>, String> {
    let lu = lu::<T>(a, "inv")?;
    let eye = Array2::from_shape_fn((lu.n, lu.n), |(i, j)| T::real((i == j) as u8 as f64));
    Ok(lu.solve(eye.view())?.into_dyn())
}

/// NumPy's slogdet and det from the factors: the sign of the permutation and of each
/// pivot (a complex matrix's sign is the product of the pivots' phases, a unit complex
/// number), the sum of the pivots' logs in order, det = sign * exp(logabsdet); a singular A
/// gives 0, 0 and -inf. logabsdet is float64; det and sign are of `T`.
fn det<T: Field>(a: &Block, output: DetOutput) -> Result<Block, String> {
    let lu = lu::<T>(a, "det")?;
    let n = lu.n;
    let swaps = lu
        .ipiv
        .iter()
        .enumerate()
        .filter(|&(i, &p)| p as usize != i + 1)
        .count();
    let mut sign = T::real(if swaps % 2 == 0 { 1.0 } else { -1.0 });
    let mut log = 0.0;
    for j in 0..n {
        let u = lu.f[j * n + j];
        sign = sign * u.phase();
        log += u.abs().ln();
    }
    if lu.singular {
        (sign, log) = (T::ZERO, f64::NEG_INFINITY);
    }
    let scalar = |v: T| T::wrap(ArrayD::from_elem(IxDyn(&[]), v));
    Ok(match output {
        DetOutput::Det => scalar(sign * T::real(log.exp())),
        DetOutput::Sign => scalar(sign),
        DetOutput::Logabsdet => Block::F64(ArrayD::from_elem(IxDyn(&[]), log)),
    })
}

// ---------------------------------------------------------------------------------------
// Blocked LU on column panels: factor and update steps, back substitution, determinant
// ---------------------------------------------------------------------------------------

/// F_k of a blocked LU: the rows of its row block (r .. r + w_k), its width w_k, n, the
/// global rows its pivots swap with (row n), and its columns' 1-norms in D A (row n + 1).
struct Factored<'a> {
    f: CowArray<'a, f64, Ix2>,
    r: usize,
    n: usize,
    pivots: Vec<usize>,
    norms: Vec<f64>,
}

fn factored<'a>(f: &'a Block, w: usize, k: usize) -> Result<Factored<'a>, String> {
    let f = matrix(f, "lu")?;
    let (rows, wk) = f.dim();
    let n = rows.saturating_sub(2);
    let r = k * w;
    if rows < 2 || r + wk > n {
        return Err(format!(
            "lu: panel {k} of width {wk} (blocks of {w}) does not fit a factored panel of {rows} rows"
        ));
    }
    let pivots = f
        .row(n)
        .iter()
        .map(|&p| p as usize)
        .take(wk)
        .collect::<Vec<_>>();
    if pivots.iter().any(|&p| p >= n) {
        return Err(format!("lu: panel {k}'s pivots point past its {n} rows"));
    }
    let norms = f.row(n + 1).to_vec();
    Ok(Factored {
        f,
        r,
        n,
        pivots,
        norms,
    })
}

/// The exponents of [`row_exponent`] for a block of row magnitudes (n values).
fn row_exponents(m: &Block, n: usize) -> Result<Vec<i32>, String> {
    let m = m.to_f64();
    if m.len() != n {
        return Err(format!("lu: {} row magnitudes for {n} rows", m.len()));
    }
    Ok(m.iter().map(|&v| row_exponent(v)).collect())
}

/// One [`Kernel::LuPanel`] step.
fn lu_panel(
    inputs: &[&Block],
    w: usize,
    apply: Option<usize>,
    factor: bool,
    scale: bool,
    out_rows: usize,
) -> Result<ArrayD<f64>, String> {
    let (inputs, magnitudes) = match inputs.split_last() {
        Some((m, rest)) if scale => (rest, Some(*m)),
        _ => (inputs, None),
    };
    let (f, qs) = match (apply, inputs) {
        (Some(k), [f, qs @ ..]) if !qs.is_empty() => (Some(factored(f, w, k)?), qs),
        (None, qs) if !qs.is_empty() => (None, qs),
        _ => return Err(format!("lu panel: {} inputs", inputs.len())),
    };
    // Q given as its row blocks, top to bottom (a panel of A read from A's own blocks).
    let qs = qs
        .iter()
        .map(|q| matrix(q, "lu"))
        .collect::<Result<Vec<_>, _>>()?;
    let q_rows: usize = qs.iter().map(|q| q.nrows()).sum();
    let c = qs[0].ncols();
    if let Some(q) = qs.iter().find(|q| q.ncols() != c) {
        return Err(format!(
            "lu panel: row blocks of {c} and {} columns",
            q.ncols()
        ));
    }
    let n = f.as_ref().map_or(q_rows, |f| f.n);
    // A panel of the factorization (n + 2 rows out), or of a right-hand side (n).
    let panel = out_rows == n + 2;
    if q_rows < n
        || !(panel || out_rows == n)
        || (factor && !panel)
        || (panel && !scale && q_rows < n + 2)
    {
        return Err(format!(
            "lu panel: a panel of {q_rows} rows for {n} rows, {out_rows} out"
        ));
    }
    let mut out = Array2::<f64>::zeros((out_rows, c));
    let mut r0 = 0;
    for q in &qs {
        let take = q.nrows().min(n - r0);
        out.slice_mut(s![r0..r0 + take, ..])
            .assign(&q.slice(s![..take, ..]));
        r0 += take;
    }
    if let Some(m) = magnitudes {
        // D: the input's rows equilibrated, as A's are.
        let exps = row_exponents(m, n)?;
        for (mut row, &e) in out.rows_mut().into_iter().zip(&exps) {
            if e != 0 {
                row *= pow2(-e);
            }
        }
        if panel {
            // The columns' 1-norms in D A, for the condition estimate (row n + 1).
            for j in 0..c {
                out[[n + 1, j]] = out.slice(s![..n, j]).iter().map(|v| v.abs()).sum();
            }
        }
    } else if panel {
        out.row_mut(n + 1).assign(&qs[0].row(n + 1));
    }
    if let Some(f) = &f {
        let (r, wk) = (f.r, f.f.ncols());
        for (i, &p) in f.pivots.iter().enumerate() {
            if p != r + i {
                let (a, b) = (r + i, p);
                for j in 0..c {
                    out.swap([a, j], [b, j]);
                }
            }
        }
        let (mut top, bottom) = out.view_mut().split_at(Axis(0), r + wk);
        let mut block = top.slice_mut(s![r.., ..]);
        trsm(
            f.f.slice(s![r..r + wk, ..]),
            block.view_mut(),
            true,
            true,
            false,
            true,
        )?;
        let below = bottom.slice_move(s![..n - r - wk, ..]);
        gemm_sub(
            below,
            f.f.slice(s![r + wk..n, ..]),
            block.view(),
            false,
            false,
        )?;
    }
    if factor {
        let r1 = apply.map_or(0, |k| (k + 1) * w);
        let m = n
            .checked_sub(r1)
            .filter(|&m| m >= c)
            .ok_or_else(|| format!("lu panel: {c} columns to factor from row {r1} of {n}"))?;
        // getrf works column-major: the panel's rows r1.. in that order, then back.
        let mut cm = vec![0.0; m * c];
        for ((i, j), &v) in out.slice(s![r1..n, ..]).indexed_iter() {
            cm[j * m + i] = v;
        }
        let mut ipiv = vec![0i32; c];
        if c > 0 {
            let mut info = 0;
            // SAFETY: cm is m x c column-major (lda m), ipiv has min(m, c) = c entries.
            unsafe { lapack::dgetrf(int(m)?, int(c)?, &mut cm, ld(m)?, &mut ipiv, &mut info) };
            check_args("dgetrf", info)?;
        }
        for ((i, j), v) in out.slice_mut(s![r1..n, ..]).indexed_iter_mut() {
            *v = cm[j * m + i];
        }
        for (j, &p) in ipiv.iter().enumerate() {
            out[[n, j]] = (r1 + p as usize - 1) as f64;
        }
        // Column j's pivot is row r1 + j; the scale is U's column above it, rows 0 .. r1 + j
        // (the earlier steps' rows, then this panel's): the rows' own terms are in other
        // panels' tasks, so the rows were equilibrated instead, and what a row's
        // elimination cancels is of the size of U's entries.
        for j in 0..c {
            let above = max_abs(out.slice(s![..r1 + j, j]));
            if negligible_pivot(out[[r1 + j, j]], above, n) {
                out[[r1 + j, j]] = 0.0;
            }
        }
    }
    Ok(out.into_dyn())
}

/// One [`Kernel::LuBack`] step: X_k = U_kk^-1 Y_k, then Y_above -= U_above X_k. With
/// `estimate`, of the condition probe: X_k's rows are then scaled by D A's column 1-norms
/// (C^-1, F_k's last row); and at step 0, with Y and the probe G, the probe's step first
/// decides whether A is singular, then Y's is taken.
fn lu_back(inputs: &[&Block], w: usize, k: usize, estimate: bool) -> Result<ArrayD<f64>, String> {
    let (f, y, probe) = match (inputs, estimate) {
        ([f, y], _) => (f, y, None),
        ([f, y, z, g], true) if k == 0 => (f, y, Some((z, g))),
        _ => {
            return Err(format!(
                "lu back substitution: {} inputs{}",
                inputs.len(),
                if estimate { " with the estimate" } else { "" }
            ));
        }
    };
    let f = factored(f, w, k)?;
    let mut y = matrix(y, "lu")?.into_owned();
    if let Some((z, g)) = probe {
        let mut z = matrix(z, "lu")?.into_owned();
        probe_step(&f, &mut z)?;
        let g = matrix(g, "lu")?;
        if g.dim() != z.dim() {
            return Err(format!(
                "lu condition: a probe of {:?} for {:?}",
                g.dim(),
                z.dim()
            ));
        }
        if blocked_rcond(&z, &g) < singular_rcond(f.n) {
            return Err(singular());
        }
    } else if estimate {
        probe_step(&f, &mut y)?;
        return Ok(y.into_dyn());
    }
    back_step(&f, &mut y)?;
    Ok(y.into_dyn())
}

/// A back substitution step of the condition probe: the step, then the rows it solved
/// scaled by their columns' 1-norms in D A, so that the probe ends as C^-1 (D A)^-1 G =
/// M^-1 G ([`column_norms`]).
fn probe_step(f: &Factored<'_>, z: &mut Array2<f64>) -> Result<(), String> {
    back_step(f, z)?;
    for (i, &s) in f.norms.iter().enumerate() {
        z.row_mut(f.r + i).mapv_inplace(|v| v * s);
    }
    Ok(())
}

/// The blocked LU's condition estimate from its probe: `x` = M^-1 G, `g` = G (n x t, t
/// columns of standard normals). Each column bounds ||M^-1||_1 from below by
/// ||x_i||_1 / ||g_i||_1; the largest gives an upper bound of M's reciprocal condition
/// number ([`rcond_from`]): a matrix it calls singular is. G is random, so that A's
/// smallest singular direction has a part in it whatever A's structure (a vector of ones,
/// or of signs, misses the null vector e_i - e_j of two equal rows); its bound is lower
/// than gecon's by about sqrt(n) (the part of a random vector in one direction), which
/// [`singular_rcond`]'s n eps allows for.
fn blocked_rcond(x: &Array2<f64>, g: &CowArray<'_, f64, Ix2>) -> f64 {
    let mut bound = 0.0f64;
    for (xi, gi) in x.columns().into_iter().zip(g.columns()) {
        let den: f64 = gi.iter().map(|v| v.abs()).sum();
        if den > 0.0 {
            let b = xi.iter().map(|v| v.abs()).sum::<f64>() / den;
            bound = if bound.is_nan() || b.is_nan() {
                f64::NAN
            } else {
                bound.max(b)
            };
        }
    }
    rcond_from(bound)
}

/// Back substitution step k of `y` (n x c) with F_k.
fn back_step(f: &Factored<'_>, y: &mut Array2<f64>) -> Result<(), String> {
    let (r, wk) = (f.r, f.f.ncols());
    if y.nrows() != f.n {
        return Err(format!(
            "lu back substitution: {} rows for {}",
            y.nrows(),
            f.n
        ));
    }
    let (above, mut rest) = y.view_mut().split_at(Axis(0), r);
    let mut xk = rest.slice_mut(s![..wk, ..]);
    trsm(
        f.f.slice(s![r..r + wk, ..]),
        xk.view_mut(),
        true,
        false,
        false,
        false,
    )?;
    gemm_sub(above, f.f.slice(s![..r, ..]), xk.view(), false, false)
}

/// One [`Kernel::LuDet`] share: panel k's pivots and the scales of row block k (the
/// product over the panels of prod 2^e is that over all rows, whatever the pivoting).
fn lu_det(
    f: &Block,
    magnitudes: &Block,
    w: usize,
    k: usize,
    output: DetOutput,
) -> Result<ArrayD<f64>, String> {
    let f = factored(f, w, k)?;
    let exps = row_exponents(magnitudes, f.n)?;
    let (r, wk) = (f.r, f.f.ncols());
    let swaps = f
        .pivots
        .iter()
        .enumerate()
        .filter(|&(i, &p)| p != r + i)
        .count();
    let parity = if swaps % 2 == 0 { 1.0 } else { -1.0 };
    let diag: Vec<f64> = (0..wk).map(|i| f.f[[r + i, i]]).collect();
    let sign = if diag.contains(&0.0) {
        0.0
    } else {
        parity * diag.iter().map(|v| v.signum()).product::<f64>()
    };
    let e: i64 = exps[r..r + wk].iter().map(|&e| e as i64).sum();
    let log = diag.iter().map(|d| d.abs().ln()).sum::<f64>() + e as f64 * std::f64::consts::LN_2;
    let v = match output {
        DetOutput::Det => det_of(sign, log),
        DetOutput::Sign => sign,
        DetOutput::Logabsdet => log,
    };
    Ok(ArrayD::from_elem(IxDyn(&[1]), v))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::random_value;
    use ndarray::{Array, Axis, concatenate};
    use nums_layout::DType;
    use nums_layout::batch::RandomDist;

    /// A deterministic m x n matrix of standard normals.
    fn randn(m: usize, n: usize, seed: u64) -> Array2<f64> {
        Array::from_shape_fn((m, n), |(i, j)| {
            random_value(RandomDist::Normal, seed, (i * n + j) as u64)
        })
    }

    fn blk(a: &Array2<f64>) -> Block {
        Block::F64(a.clone().into_dyn())
    }

    fn mat(b: &Block) -> Array2<f64> {
        let Block::F64(a) = b else { panic!("float64") };
        match a.ndim() {
            0 | 1 => a.clone().into_shape_with_order((a.len(), 1)).unwrap(),
            _ => a.clone().into_dimensionality().unwrap(),
        }
    }

    fn go(kernel: &Kernel, inputs: &[&Array2<f64>], shape: &[usize]) -> Array2<f64> {
        let blocks: Vec<Block> = inputs.iter().map(|a| blk(a)).collect();
        let refs: Vec<&Block> = blocks.iter().collect();
        mat(&run(kernel, &refs, shape).unwrap_or_else(|e| panic!("{kernel:?}: {e}")))
    }

    fn err(kernel: &Kernel, inputs: &[&Array2<f64>], shape: &[usize]) -> String {
        let blocks: Vec<Block> = inputs.iter().map(|a| blk(a)).collect();
        let refs: Vec<&Block> = blocks.iter().collect();
        run(kernel, &refs, shape).expect_err("an error")
    }

    fn close(a: &Array2<f64>, b: &Array2<f64>, tol: f64) {
        assert_eq!(a.dim(), b.dim());
        let scale = 1.0 + b.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        for ((i, x), y) in a.indexed_iter().zip(b.iter()) {
            assert!((x - y).abs() <= tol * scale, "at {i:?}: {x} vs {y}");
        }
    }

    fn eye(n: usize) -> Array2<f64> {
        Array2::eye(n)
    }

    const R: Kernel = Kernel::Qr {
        cols: 1,
        output: QrOutput::R,
    };

    fn q(part: usize) -> Kernel {
        Kernel::Qr {
            cols: 1,
            output: QrOutput::Q { part },
        }
    }

    fn rows(a: &Array2<f64>, lo: usize, hi: usize) -> Array2<f64> {
        a.slice(s![lo..hi, ..]).to_owned()
    }

    #[test]
    fn qr_of_a_row_block() {
        for (m, n) in [(37, 5), (5, 5), (3, 7), (1, 1)] {
            let a = randn(m, n, 1);
            let k = m.min(n);
            let r = go(&R, &[&a], &[k, n]);
            let qm = go(&q(0), &[&a], &[m, k]);
            close(&qm.dot(&r), &a, 1e-13);
            close(&qm.t().dot(&qm), &eye(k), 1e-13);
            for j in 0..k {
                assert!(r[[j, j]] >= 0.0);
                assert!(r.row(j).iter().take(j).all(|&v| v == 0.0));
            }
            // The padded forms: R n x n with zero rows, Q m x n with zero columns.
            let rp = go(&R, &[&a], &[n, n]);
            let qp = go(&q(0), &[&a], &[m, n]);
            assert_eq!(rp.slice(s![..k, ..]), r);
            assert!(rp.slice(s![k.., ..]).iter().all(|&v| v == 0.0));
            close(&qp.dot(&rp), &a, 1e-13);
        }
        // An R of the wrong shape is refused.
        let a = randn(6, 3, 2);
        assert!(err(&R, &[&a], &[2, 3]).contains("R of a 6 x 3 matrix is 3 x 3"));
    }

    /// TSQR: leaves, then trees of stacked-R combines with fan-in 2 and 3, over ragged row
    /// blocks (one shorter than the matrix is wide): the same R as the one-shot QR, and
    /// the direct-TSQR Q (leaf Q times the Q2 slices up the tree) the same Q.
    #[test]
    fn tsqr_trees_equal_the_one_shot_qr() {
        let (m, n) = (103, 7);
        let a = randn(m, n, 3);
        let cuts = [0, 30, 60, 64, 94, 103];
        let r_one = go(&R, &[&a], &[n, n]);
        let q_one = go(&q(0), &[&a], &[m, n]);
        let leaves: Vec<Array2<f64>> = cuts.windows(2).map(|w| rows(&a, w[0], w[1])).collect();
        let leaf_r: Vec<Array2<f64>> = leaves.iter().map(|b| go(&R, &[b], &[n, n])).collect();
        let leaf_q: Vec<Array2<f64>> = leaves
            .iter()
            .map(|b| go(&q(0), &[b], &[b.nrows(), n]))
            .collect();
        for fan_in in [2, 3, 5] {
            // Each level combines groups of `fan_in` R's; `path[i]` is leaf i's product of
            // Q2 slices so far.
            let mut level = leaf_r.clone();
            let mut owner: Vec<usize> = (0..leaves.len()).collect();
            let mut path: Vec<Array2<f64>> = vec![eye(n); leaves.len()];
            while level.len() > 1 {
                let mut next = vec![];
                let mut q2 = vec![];
                for group in level.chunks(fan_in) {
                    let refs: Vec<&Array2<f64>> = group.iter().collect();
                    next.push(go(&R, &refs, &[n, n]));
                    q2.push(
                        (0..group.len())
                            .map(|p| go(&q(p), &refs, &[n, n]))
                            .collect::<Vec<_>>(),
                    );
                }
                for (leaf, o) in owner.iter_mut().enumerate() {
                    let slice = &q2[*o / fan_in][*o % fan_in];
                    path[leaf] = path[leaf].dot(slice);
                    *o /= fan_in;
                }
                level = next;
            }
            close(&level[0], &r_one, 1e-12);
            let q_tree: Vec<Array2<f64>> =
                leaf_q.iter().zip(&path).map(|(ql, p)| ql.dot(p)).collect();
            let views: Vec<_> = q_tree.iter().map(|x| x.view()).collect();
            close(&concatenate(Axis(0), &views).unwrap(), &q_one, 1e-12);
            // The same without forming the leaf Q's: the reflectors applied to the path.
            let qp = Kernel::Qr {
                cols: 1,
                output: QrOutput::QProduct { part: 0 },
            };
            for ((leaf, p), want) in leaves.iter().zip(&path).zip(&q_tree) {
                close(&go(&qp, &[leaf, p], &[leaf.nrows(), n]), want, 1e-12);
            }
        }
    }

    #[test]
    fn qr_of_a_grid_is_qr_of_the_whole() {
        // [a | b] as two grid columns, two grid rows; b 1-D in one of them.
        let (a, b) = (randn(20, 4, 4), randn(20, 1, 5));
        let whole = concatenate(Axis(1), &[a.view(), b.view()]).unwrap();
        let r_whole = go(&R, &[&whole], &[5, 5]);
        let blocks = [rows(&a, 0, 12), rows(&b, 0, 12), rows(&a, 12, 20)];
        let b1 = Block::F64(b.slice(s![12..20, 0]).to_owned().into_dyn());
        let mut ins: Vec<Block> = blocks.iter().map(blk).collect();
        ins.push(b1);
        let refs: Vec<&Block> = ins.iter().collect();
        let kernel = |output| Kernel::Qr { cols: 2, output };
        let r = mat(&run(&kernel(QrOutput::R), &refs, &[5, 5]).unwrap());
        close(&r, &r_whole, 1e-13);
        let q1 = mat(&run(&kernel(QrOutput::Q { part: 1 }), &refs, &[8, 5]).unwrap());
        close(&q1, &rows(&go(&q(0), &[&whole], &[20, 5]), 12, 20), 1e-13);
        // A grid whose blocks do not line up is refused.
        let bad = [blk(&a), blk(&randn(19, 1, 6))];
        let refs: Vec<&Block> = bad.iter().collect();
        let e = run(&kernel(QrOutput::R), &refs, &[5, 5]).unwrap_err();
        assert!(e.contains("input 1 has shape (19, 1)"), "{e}");
    }

    fn lstsq_k(n: usize, output: LstsqOutput) -> Kernel {
        Kernel::Lstsq {
            n,
            rcond: f64::EPSILON * 50.0,
            output,
        }
    }

    #[test]
    fn lstsq_from_the_r_of_a_b() {
        let (a, b) = (randn(50, 4, 7), randn(50, 2, 8));
        let ab = concatenate(Axis(1), &[a.view(), b.view()]).unwrap();
        let r = go(&R, &[&ab], &[6, 6]);
        let x = go(&lstsq_k(4, LstsqOutput::X), &[&r], &[4, 2]);
        // The normal equations hold: a^T (b - a x) = 0.
        let res = &b - &a.dot(&x);
        close(&a.t().dot(&res), &Array2::zeros((4, 2)), 1e-12);
        let rss = go(&lstsq_k(4, LstsqOutput::Residuals), &[&r], &[2]);
        let want = res.map_axis(Axis(0), |c| c.dot(&c));
        close(&rss, &want.insert_axis(Axis(1)), 1e-12);
        let rank = run(&lstsq_k(4, LstsqOutput::Rank), &[&blk(&r)], &[]).unwrap();
        assert_eq!(rank, Block::F64(ArrayD::from_elem(IxDyn(&[]), 4.0)));
        let sv = go(&lstsq_k(4, LstsqOutput::SingularValues), &[&r], &[4]);
        let sv_a = go(
            &Kernel::Svd {
                output: SvdOutput::Values,
            },
            &[&a],
            &[4],
        );
        close(&sv, &sv_a, 1e-12);
        // One column of b, as a 1-D output block.
        let x1 = run(
            &lstsq_k(4, LstsqOutput::X),
            &[&blk(&r.slice(s![..5, ..5]).to_owned())],
            &[4],
        )
        .unwrap();
        close(&mat(&x1), &x.slice(s![.., ..1]).to_owned(), 1e-12);
    }

    #[test]
    fn lstsq_of_a_rank_deficient_a_is_the_min_norm_solution() {
        // Columns 0 and 2 equal: rank 2; the null space is (1, 0, -1), so the min-norm
        // solution has x0 == x2.
        let c = randn(30, 2, 9);
        let a = concatenate(Axis(1), &[c.view(), c.slice(s![.., ..1])]).unwrap();
        let b = randn(30, 1, 10);
        let ab = concatenate(Axis(1), &[a.view(), b.view()]).unwrap();
        let r = go(&R, &[&ab], &[4, 4]);
        let rank = run(&lstsq_k(3, LstsqOutput::Rank), &[&blk(&r)], &[]).unwrap();
        assert_eq!(rank, Block::F64(ArrayD::from_elem(IxDyn(&[]), 2.0)));
        let x = go(&lstsq_k(3, LstsqOutput::X), &[&r], &[3, 1]);
        assert!((x[[0, 0]] - x[[2, 0]]).abs() < 1e-12, "{x}");
        let res = &b - &a.dot(&x);
        close(&a.t().dot(&res), &Array2::zeros((3, 1)), 1e-12);
        let rss = go(&lstsq_k(3, LstsqOutput::Residuals), &[&r], &[1]);
        assert!((rss[[0, 0]] - res.iter().map(|v| v * v).sum::<f64>()).abs() < 1e-10);
    }

    fn svd_k(output: SvdOutput) -> Kernel {
        Kernel::Svd { output }
    }

    #[test]
    fn svd_of_a_block() {
        for (m, n) in [(9, 6), (6, 9), (128, 128)] {
            let a = randn(m, n, 11);
            let k = m.min(n);
            let s = go(&svd_k(SvdOutput::S), &[&a], &[k]);
            let u = go(&svd_k(SvdOutput::U), &[&a], &[m, k]);
            let vh = go(&svd_k(SvdOutput::Vh), &[&a], &[k, n]);
            let us = &u * &s.t();
            close(&us.dot(&vh), &a, 1e-12);
            close(&u.t().dot(&u), &eye(k), 1e-12);
            close(&vh.dot(&vh.t()), &eye(k), 1e-12);
            assert!(s.iter().zip(s.iter().skip(1)).all(|(x, y)| x >= y));
            close(&go(&svd_k(SvdOutput::Values), &[&a], &[k]), &s, 1e-12);
            for j in 0..k {
                let big = u
                    .column(j)
                    .iter()
                    .fold(0.0f64, |b, &v| if v.abs() > b.abs() { v } else { b });
                assert!(big > 0.0);
            }
        }
        // A known answer.
        let d = Array2::from_diag(&ndarray::arr1(&[1.0, -3.0, 2.0]));
        let s = go(&svd_k(SvdOutput::S), &[&d], &[3]);
        close(&s, &ndarray::arr2(&[[3.0], [2.0], [1.0]]), 1e-15);
    }

    /// A well-conditioned SPD matrix: G G^T / n + I.
    fn spd(n: usize, seed: u64) -> Array2<f64> {
        let g = randn(n, n, seed);
        g.dot(&g.t()) / n as f64 + eye(n)
    }

    #[test]
    fn cholesky_reads_the_lower_triangle_and_refuses_what_is_not_positive_definite() {
        // A known L.
        let l = ndarray::arr2(&[[2.0, 0.0, 0.0], [1.0, 3.0, 0.0], [-1.0, 0.5, 1.5]]);
        let mut a = l.dot(&l.t());
        a[[0, 2]] = 99.0; // the upper triangle is not read
        close(&go(&Kernel::Cholesky, &[&a], &[3, 3]), &l, 1e-15);
        let a = spd(40, 12);
        let l = go(&Kernel::Cholesky, &[&a], &[40, 40]);
        close(&l.dot(&l.t()), &a, 1e-13);
        let bad = ndarray::arr2(&[[1.0, 2.0], [2.0, 1.0]]);
        let e = err(&Kernel::Cholesky, &[&bad], &[2, 2]);
        assert_eq!(e, "LinAlgError: Matrix is not positive definite");
        assert_eq!(
            linalg_error(&format!("task 2 (block L/0.0): {e}")),
            Some("Matrix is not positive definite")
        );
        assert!(err(&Kernel::Cholesky, &[&randn(2, 3, 1)], &[2, 3]).contains("must be square"));
    }

    fn trsm_k(left: bool, lower: bool, transpose: bool) -> Kernel {
        Kernel::TriangularSolve {
            left,
            lower,
            transpose,
            unit_diagonal: false,
        }
    }

    const GEMM_T: Kernel = Kernel::SubtractProducts {
        transpose_a: false,
        transpose_b: true,
    };
    const GEMM: Kernel = Kernel::SubtractProducts {
        transpose_a: false,
        transpose_b: false,
    };
    const GEMM_TN: Kernel = Kernel::SubtractProducts {
        transpose_a: true,
        transpose_b: false,
    };

    /// Block (i, j) of `x` cut at `cuts` along both axes.
    fn block(x: &Array2<f64>, cuts: &[usize], i: usize, j: usize) -> Array2<f64> {
        x.slice(s![cuts[i]..cuts[i + 1], cuts[j]..cuts[j + 1]])
            .to_owned()
    }

    /// The left-looking blocked Cholesky the driver plans for a matrix of several blocks:
    /// one CholeskyBlock task per block of L on or below the diagonal, in row-major order,
    /// gives the one-shot L (ragged last block), and a matrix that is not positive definite
    /// fails in the block where it shows, with NumPy's wording.
    #[test]
    #[allow(clippy::needless_range_loop)] // block indices read as the algorithm is written
    fn cholesky_blocks_give_the_one_shot_factor() {
        let a = spd(11, 21);
        let cuts = [0, 4, 8, 11];
        let nb = cuts.len() - 1;
        let blk = |x: &Array2<f64>, i: usize, j: usize| block(x, &cuts, i, j);
        let mut l: Vec<Vec<Array2<f64>>> = vec![vec![]; nb];
        for i in 0..nb {
            for j in 0..=i {
                let aij = blk(&a, i, j);
                let mut ins = vec![&aij];
                if i == j {
                    ins.extend((0..j).map(|k| &l[j][k]));
                } else {
                    for k in 0..j {
                        ins.push(&l[i][k]);
                        ins.push(&l[j][k]);
                    }
                    ins.push(&l[j][j]);
                }
                let sh = [aij.nrows(), aij.ncols()];
                let out = go(&Kernel::CholeskyBlock { diagonal: i == j }, &ins, &sh);
                l[i].push(out);
            }
        }
        let whole = go(&Kernel::Cholesky, &[&a], &[11, 11]);
        for i in 0..nb {
            for j in 0..=i {
                close(&l[i][j], &blk(&whole, i, j), 1e-13);
            }
        }
        let mut bad = a.clone();
        bad[[9, 9]] = -50.0;
        let b22 = blk(&bad, 2, 2);
        let e = err(
            &Kernel::CholeskyBlock { diagonal: true },
            &[&b22, &l[2][0], &l[2][1]],
            &[3, 3],
        );
        assert!(e.contains("Matrix is not positive definite"), "{e}");
    }

    /// Blocked right-looking Cholesky over ragged blocks [4, 5, 2] with the kernels a
    /// driver would run (potrf, trsm, syrk, gemm), then solve A x = b by blocked forward
    /// and backward substitution: the one-shot L, and a small residual.
    #[test]
    #[allow(clippy::needless_range_loop)] // block indices read as the algorithm is written
    fn blocked_cholesky_and_solve_from_the_pieces() {
        let a = spd(11, 13);
        let cuts = [0, 4, 9, 11];
        let nb = cuts.len() - 1;
        let blk_of = |x: &Array2<f64>, i: usize, j: usize| block(x, &cuts, i, j);
        let mut t: Vec<Vec<Array2<f64>>> = (0..nb)
            .map(|i| (0..nb).map(|j| blk_of(&a, i, j)).collect())
            .collect();
        let mut l: Vec<Vec<Option<Array2<f64>>>> = vec![vec![None; nb]; nb];
        for k in 0..nb {
            let d = &t[k][k];
            let lkk = go(&Kernel::Cholesky, &[d], &[d.nrows(), d.ncols()]);
            for i in k + 1..nb {
                let sh = [t[i][k].nrows(), lkk.ncols()];
                l[i][k] = Some(go(&trsm_k(false, true, true), &[&lkk, &t[i][k]], &sh));
            }
            l[k][k] = Some(lkk);
            for i in k + 1..nb {
                let lik = l[i][k].clone().unwrap();
                let sh = [t[i][i].nrows(), t[i][i].nrows()];
                t[i][i] = go(
                    &Kernel::SubtractGram { transpose: false },
                    &[&t[i][i], &lik],
                    &sh,
                );
                for j in k + 1..i {
                    let ljk = l[j][k].clone().unwrap();
                    let sh = [t[i][j].nrows(), t[i][j].ncols()];
                    t[i][j] = go(&GEMM_T, &[&t[i][j], &lik, &ljk], &sh);
                }
            }
        }
        let whole = go(&Kernel::Cholesky, &[&a], &[11, 11]);
        for i in 0..nb {
            for j in 0..=i {
                close(l[i][j].as_ref().unwrap(), &blk_of(&whole, i, j), 1e-13);
            }
        }
        // Forward: y_i = L_ii^-1 (b_i - sum_{k<i} L_ik y_k); backward with L^T.
        let b = randn(11, 1, 14);
        let bi = |i: usize| rows(&b, cuts[i], cuts[i + 1]);
        let mut y: Vec<Array2<f64>> = vec![];
        for i in 0..nb {
            let mut ins = vec![bi(i)];
            for (k, yk) in y.iter().enumerate() {
                ins.push(l[i][k].clone().unwrap());
                ins.push(yk.clone());
            }
            let refs: Vec<&Array2<f64>> = ins.iter().collect();
            let c = go(&GEMM, &refs, &[ins[0].nrows(), 1]);
            let lii = l[i][i].clone().unwrap();
            y.push(go(&trsm_k(true, true, false), &[&lii, &c], &[c.nrows(), 1]));
        }
        let mut x: Vec<Option<Array2<f64>>> = vec![None; nb];
        for i in (0..nb).rev() {
            let mut ins = vec![y[i].clone()];
            for k in i + 1..nb {
                ins.push(l[k][i].clone().unwrap());
                ins.push(x[k].clone().unwrap());
            }
            let refs: Vec<&Array2<f64>> = ins.iter().collect();
            let c = go(&GEMM_TN, &refs, &[ins[0].nrows(), 1]);
            let lii = l[i][i].clone().unwrap();
            x[i] = Some(go(&trsm_k(true, true, true), &[&lii, &c], &[c.nrows(), 1]));
        }
        let views: Vec<Array2<f64>> = x.into_iter().map(Option::unwrap).collect();
        let views: Vec<_> = views.iter().map(|v| v.view()).collect();
        let x = concatenate(Axis(0), &views).unwrap();
        close(&a.dot(&x), &b, 1e-12);
    }

    #[test]
    fn triangular_solves_every_side_and_orientation() {
        let mut t = randn(6, 6, 15);
        for i in 0..6 {
            t[[i, i]] = 3.0 + i as f64;
        }
        let lower = Array2::from_shape_fn((6, 6), |(i, j)| if j <= i { t[[i, j]] } else { 0.0 });
        let upper = Array2::from_shape_fn((6, 6), |(i, j)| if j >= i { t[[i, j]] } else { 0.0 });
        let b = randn(6, 3, 16);
        let bt = randn(3, 6, 17);
        for (lo, tri) in [(true, &lower), (false, &upper)] {
            for tr in [false, true] {
                let op = if tr { tri.t().to_owned() } else { tri.clone() };
                // The full t is passed: only the named triangle may be read.
                let x = go(&trsm_k(true, lo, tr), &[&t, &b], &[6, 3]);
                close(&op.dot(&x), &b, 1e-13);
                let x = go(&trsm_k(false, lo, tr), &[&t, &bt], &[3, 6]);
                close(&x.dot(&op), &bt, 1e-13);
            }
        }
        let unit = Kernel::TriangularSolve {
            left: true,
            lower: true,
            transpose: false,
            unit_diagonal: true,
        };
        let lu = &lower - &Array2::from_diag(&lower.diag()) + eye(6);
        close(&lu.dot(&go(&unit, &[&t, &b], &[6, 3])), &b, 1e-13);
        let mut z = lower.clone();
        z[[3, 3]] = 0.0;
        assert_eq!(
            err(&trsm_k(true, true, false), &[&z, &b], &[6, 3]),
            "LinAlgError: Singular matrix"
        );
        assert!(err(&trsm_k(true, true, false), &[&t, &bt], &[3, 6]).contains("right-hand side"));
    }

    #[test]
    fn subtract_gram_and_products() {
        let c = spd(5, 18);
        let (a1, a2) = (randn(5, 3, 19), randn(5, 2, 20));
        let want = &c - &a1.dot(&a1.t()) - &a2.dot(&a2.t());
        close(
            &go(
                &Kernel::SubtractGram { transpose: false },
                &[&c, &a1, &a2],
                &[5, 5],
            ),
            &want,
            1e-14,
        );
        let (t1, t2) = (a1.t().to_owned(), a2.t().to_owned());
        close(
            &go(
                &Kernel::SubtractGram { transpose: true },
                &[&c, &t1, &t2],
                &[5, 5],
            ),
            &want,
            1e-14,
        );
        let cc = randn(5, 4, 21);
        let b1 = randn(3, 4, 22);
        close(
            &go(&GEMM, &[&cc, &a1, &b1], &[5, 4]),
            &(&cc - &a1.dot(&b1)),
            1e-14,
        );
        let both = Kernel::SubtractProducts {
            transpose_a: true,
            transpose_b: true,
        };
        let b1t = b1.t().to_owned();
        close(
            &go(&both, &[&cc, &t1, &b1t], &[5, 4]),
            &(&cc - &a1.dot(&b1)),
            1e-14,
        );
        assert!(err(&GEMM, &[&cc, &a1], &[5, 4]).contains("pairs"));
        assert!(err(&GEMM, &[&cc, &a1, &a1], &[5, 4]).contains("op(B) 5 x 3"));
    }

    #[test]
    fn lu_solve_inverse_and_determinants() {
        let a = randn(7, 7, 23) + eye(7) * 3.0;
        let x0 = randn(7, 3, 24);
        let b = a.dot(&x0);
        close(&go(&Kernel::LuSolve, &[&a, &b], &[7, 3]), &x0, 1e-12);
        let b1 = Block::F64(b.column(1).to_owned().into_dyn());
        let x1 = run(&Kernel::LuSolve, &[&blk(&a), &b1], &[7]).unwrap();
        close(&mat(&x1), &x0.slice(s![.., 1..2]).to_owned(), 1e-12);
        let inv = go(&Kernel::Inverse, &[&a], &[7, 7]);
        close(&a.dot(&inv), &eye(7), 1e-12);
        let det = |o: DetOutput, m: &Array2<f64>| go(&Kernel::Det { output: o }, &[m], &[])[[0, 0]];
        let m = ndarray::arr2(&[[1.0, 2.0], [3.0, 4.0]]);
        assert!((det(DetOutput::Det, &m) + 2.0).abs() < 1e-14);
        assert_eq!(det(DetOutput::Sign, &m), -1.0);
        assert!((det(DetOutput::Logabsdet, &m) - 2f64.ln()).abs() < 1e-14);
        // An odd permutation of the identity: det -1 exactly.
        let p = ndarray::arr2(&[[0.0, 1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]);
        assert_eq!(det(DetOutput::Det, &p), -1.0);
        // Singular: an error for solve and inv, zeros for det, as NumPy.
        let s = ndarray::arr2(&[[1.0, 2.0], [2.0, 4.0]]);
        let one = Array2::ones((2, 1));
        assert_eq!(
            err(&Kernel::LuSolve, &[&s, &one], &[2, 1]),
            "LinAlgError: Singular matrix"
        );
        assert_eq!(
            err(&Kernel::Inverse, &[&s], &[2, 2]),
            "LinAlgError: Singular matrix"
        );
        assert_eq!(det(DetOutput::Det, &s), 0.0);
        assert_eq!(det(DetOutput::Sign, &s), 0.0);
        assert_eq!(det(DetOutput::Logabsdet, &s), f64::NEG_INFINITY);
    }

    fn lu_step(k: Kernel, ins: &[&Array2<f64>], shape: [usize; 2]) -> Result<Array2<f64>, String> {
        let blocks: Vec<Block> = ins.iter().map(|a| blk(a)).collect();
        let refs: Vec<&Block> = blocks.iter().collect();
        run(&k, &refs, &shape).map(|b| mat(&b))
    }

    /// A's row magnitudes, the blocked LU's scale input.
    fn magnitudes(a: &Array2<f64>) -> Array2<f64> {
        a.map_axis(Axis(1), |r| r.iter().fold(0.0, |m: f64, v| m.max(v.abs())))
            .insert_axis(Axis(1))
    }

    /// The factored panels F_k of a blocked LU on panels of `w`, made step by step as the
    /// driver's graph wires them (panel j after step k reads F_(k-1) and itself after
    /// step k - 1; the first version of each panel reads A's panel and scales it).
    fn lu_panels(a: &Array2<f64>, w: usize) -> Vec<Array2<f64>> {
        let n = a.nrows();
        let p = n.div_ceil(w);
        let m = magnitudes(a);
        let cols = |j: usize| a.slice(s![.., j * w..((j + 1) * w).min(n)]).to_owned();
        let panel = |apply, factor, scale| Kernel::LuPanel {
            w,
            apply,
            factor,
            scale,
        };
        let mut at: Vec<Array2<f64>> = (0..p).map(cols).collect();
        at[0] = lu_step(
            panel(None, true, true),
            &[&at[0], &m],
            [n + 2, at[0].ncols()],
        )
        .unwrap();
        for k in 1..p {
            for j in k..p {
                let c = at[j].ncols();
                let kernel = panel(Some(k - 1), j == k, k == 1);
                at[j] = if k == 1 {
                    lu_step(kernel, &[&at[k - 1], &at[j], &m], [n + 2, c])
                } else {
                    lu_step(kernel, &[&at[k - 1], &at[j]], [n + 2, c])
                }
                .unwrap();
            }
        }
        at
    }

    /// A panel of A given as its row blocks (read from A's own blocks, never assembled in
    /// the store) steps to the same bits as the panel given whole: the first panel
    /// factored, and a later panel's first update by F_0.
    #[test]
    fn lu_panel_of_row_blocks_is_the_panel_given_whole() {
        let (n, w, r) = (12usize, 4usize, 5usize);
        let a = Array2::from_shape_fn((n, n), |(i, j)| {
            ((i * 7 + j * 3) % 11) as f64 - 4.5 + if i == j { 9.0 } else { 0.0 }
        });
        let m = magnitudes(&a);
        let panel = |j: usize| a.slice(s![.., j * w..(j + 1) * w]).to_owned();
        // Row blocks of 5 rows (the last of 2): edge blocks as A's grid gives them.
        let rows = |q: &Array2<f64>| -> Vec<Array2<f64>> {
            (0..n.div_ceil(r))
                .map(|i| q.slice(s![i * r..((i + 1) * r).min(n), ..]).to_owned())
                .collect()
        };
        let kernel = |apply, factor| Kernel::LuPanel {
            w,
            apply,
            factor,
            scale: true,
        };
        let q0 = panel(0);
        let whole = lu_step(kernel(None, true), &[&q0, &m], [n + 2, w]).unwrap();
        let blocks = rows(&q0);
        let mut ins: Vec<&Array2<f64>> = blocks.iter().collect();
        ins.push(&m);
        assert_eq!(
            lu_step(kernel(None, true), &ins, [n + 2, w]).unwrap(),
            whole
        );
        let q1 = panel(1);
        let want = lu_step(kernel(Some(0), false), &[&whole, &q1, &m], [n + 2, w]).unwrap();
        let blocks = rows(&q1);
        let mut ins: Vec<&Array2<f64>> = vec![&whole];
        ins.extend(blocks.iter());
        ins.push(&m);
        assert_eq!(
            lu_step(kernel(Some(0), false), &ins, [n + 2, w]).unwrap(),
            want
        );
    }

    /// Y carried through the factored panels' steps (its rows first scaled as A's when
    /// `m` is given; without, the condition probe), then through the back substitution
    /// but its last step.
    fn lu_substitute(
        f: &[Array2<f64>],
        m: Option<&Array2<f64>>,
        b: &Array2<f64>,
        w: usize,
    ) -> Result<Array2<f64>, String> {
        let mut y = b.clone();
        for (k, fk) in f.iter().enumerate() {
            let scale = k == 0 && m.is_some();
            let panel = Kernel::LuPanel {
                w,
                apply: Some(k),
                factor: false,
                scale,
            };
            let mut ins: Vec<&Array2<f64>> = vec![fk, &y];
            ins.extend(m.filter(|_| scale));
            y = lu_step(panel, &ins, [b.nrows(), b.ncols()])?;
        }
        for (k, fk) in f.iter().enumerate().skip(1).rev() {
            let back = Kernel::LuBack {
                w,
                step: k,
                estimate: m.is_none(),
            };
            y = lu_step(back, &[fk, &y], [b.nrows(), b.ncols()])?;
        }
        Ok(y)
    }

    /// The probe of the blocked condition estimate.
    fn probe(n: usize) -> Array2<f64> {
        randn(n, 3, 77)
    }

    /// X = A^-1 B from the factored panels, as the graph wires it: B scaled as A's rows and
    /// updated with each panel, then the back substitution from the last row block up;
    /// beside it the probe (unscaled), and the last step estimates A's condition first.
    fn lu_solve_blocked(
        f: &[Array2<f64>],
        a: &Array2<f64>,
        b: &Array2<f64>,
        w: usize,
    ) -> Result<Array2<f64>, String> {
        let y = lu_substitute(f, Some(&magnitudes(a)), b, w)?;
        let g = probe(a.nrows());
        let z = lu_substitute(f, None, &g, w)?;
        let last = Kernel::LuBack {
            w,
            step: 0,
            estimate: true,
        };
        lu_step(last, &[&f[0], &y, &z, &g], [b.nrows(), b.ncols()])
    }

    /// The blocked estimate's reciprocal condition number (what the last step compares
    /// with n eps).
    fn blocked_rcond_of(a: &Array2<f64>, w: usize) -> f64 {
        let f = lu_panels(a, w);
        let g = probe(a.nrows());
        let f0 = blk(&f[0]);
        // A pivot made zero: the probe's back substitution refuses (rcond 0).
        let z = lu_substitute(&f, None, &g, w).and_then(|mut z| {
            probe_step(&factored(&f0, w, 0)?, &mut z)?;
            Ok(z)
        });
        z.map_or(0.0, |z| blocked_rcond(&z, &CowArray::from(g.view())))
    }

    /// The one-block estimate's reciprocal condition number (gecon's, of D A C; 0 when a
    /// pivot is numerically zero, as solve takes it).
    fn one_block_rcond(a: &Array2<f64>) -> f64 {
        let lu = lu::<f64>(&blk(a), "solve").unwrap();
        if lu.singular {
            0.0
        } else {
            lu.rcond().unwrap()
        }
    }

    /// The exact reciprocal condition number of D A C in the 1-norm (its inverse by LAPACK).
    fn exact_rcond(a: &Array2<f64>) -> f64 {
        let n = a.nrows();
        let d = a.map_axis(Axis(1), |r| pow2(-row_exponent(max_abs(r))));
        let da = a * &d.insert_axis(Axis(1));
        let c = da.map_axis(Axis(0), |col| {
            1.0 / col.iter().map(|v| v.abs()).sum::<f64>()
        });
        let m = &da * &c.insert_axis(Axis(0));
        let norm1 = |x: &Array2<f64>| {
            (0..n)
                .map(|j| x.column(j).iter().map(|v| v.abs()).sum::<f64>())
                .fold(0.0, f64::max)
        };
        // The inverse from getrs of the identity, whatever the condition.
        let lu = lu(&blk(&m), "inv").unwrap();
        let mut cm: Vec<f64> = (0..n * n)
            .map(|k| (k % (n + 1) == 0) as u8 as f64)
            .collect();
        lu.getrs(b'N', &mut cm, n).unwrap();
        let inv = Array2::from_shape_vec((n, n), cm).unwrap().reversed_axes();
        1.0 / (norm1(&m) * norm1(&inv))
    }

    /// Matrices that are singular in exact arithmetic but whose LU need not meet an exact
    /// zero pivot (the rounding leaves pivots of rounding size, on one machine's OpenBLAS
    /// an exact zero, on another's not): a product of thin random factors (rank n / 2, and
    /// n - 1) and a row that is a random combination of the others. solve and inv refuse
    /// them in one block and blocked on every panel width, from their condition whatever
    /// the pivots. And one whose pivots are all 1 on any machine (an exact LU: upper
    /// triangular, 1 on the diagonal and -1 above, condition about 2^n), so that the
    /// pivots cannot say it: at n = 60 (condition 1e19) it is singular to working
    /// precision and refused, its det 1; at n = 30 (condition 1e10) it is solved.
    #[test]
    fn numerically_singular_matrices_are_refused_from_their_condition() {
        let singular = "LinAlgError: Singular matrix";
        let det = |o: DetOutput, m: &Array2<f64>| go(&Kernel::Det { output: o }, &[m], &[])[[0, 0]];
        let kahan = |n: usize| {
            Array::from_shape_fn((n, n), |(i, j)| match i.cmp(&j) {
                std::cmp::Ordering::Equal => 1.0,
                std::cmp::Ordering::Less => -1.0,
                std::cmp::Ordering::Greater => 0.0,
            })
        };
        let (k60, k30) = (kahan(60), kahan(30));
        assert_eq!(det(DetOutput::Det, &k60), 1.0);
        assert_eq!(
            err(&Kernel::LuSolve, &[&k60, &eye(60)], &[60, 60]),
            singular
        );
        assert_eq!(err(&Kernel::Inverse, &[&k60], &[60, 60]), singular);
        let b = k30.dot(&randn(30, 2, 5));
        go(&Kernel::LuSolve, &[&k30, &b], &[30, 2]);
        for w in [2, 3, 4, 6, 13] {
            let f = lu_panels(&k60, w);
            assert_eq!(lu_det_blocked(&f, &k60, w)[0], 1.0);
            assert_eq!(
                lu_solve_blocked(&f, &k60, &eye(60), w).unwrap_err(),
                singular,
                "panels of {w}"
            );
            lu_solve_blocked(&lu_panels(&k30, w), &k30, &b, w).unwrap();
        }
        for (n, seed) in [(12usize, 1u64), (26, 2), (40, 3), (61, 4)] {
            let thin = |r: usize| randn(n, r, seed).dot(&randn(r, n, seed + 100));
            let mut comb = randn(n, n, seed + 200);
            let others =
                concatenate(Axis(0), &[comb.slice(s![..3, ..]), comb.slice(s![4.., ..])]).unwrap();
            let row = randn(1, n - 1, seed + 300).dot(&others);
            comb.row_mut(3).assign(&row.row(0));
            for (what, a) in [
                ("rank n/2", thin(n / 2)),
                ("rank n-1", thin(n - 1)),
                ("a row of the others", comb),
            ] {
                let at = format!("{what}, n {n}");
                assert!(
                    one_block_rcond(&a) < singular_rcond(n),
                    "{at}: {}",
                    one_block_rcond(&a)
                );
                assert_eq!(
                    err(&Kernel::LuSolve, &[&a, &eye(n)], &[n, n]),
                    singular,
                    "{at}"
                );
                assert_eq!(err(&Kernel::Inverse, &[&a], &[n, n]), singular, "{at}");
                for w in [2, 3, 4, 6, 13] {
                    let f = lu_panels(&a, w);
                    assert!(
                        blocked_rcond_of(&a, w) < singular_rcond(n),
                        "{at}, panels of {w}"
                    );
                    assert_eq!(
                        lu_solve_blocked(&f, &a, &eye(n), w).unwrap_err(),
                        singular,
                        "{at}, panels of {w}"
                    );
                }
            }
        }
    }

    /// Both estimates are at least the exact reciprocal condition number of D A C (their
    /// inverse's norm is a lower bound), gecon's usually equal to it and the blocked one's
    /// within about sqrt(n) of it; scaling A's rows across 600 orders of magnitude leaves
    /// them as they were (D undoes it exactly), and its columns too leaves a
    /// well-conditioned matrix far from singular; a merely ill-conditioned matrix
    /// (singular values graded over 8 orders of magnitude between random factors: a
    /// condition of about 1e11) is solved in one block and blocked.
    #[test]
    fn condition_estimates_bound_the_condition_and_ignore_scaling() {
        for (n, seed) in [(5usize, 1u64), (12, 2), (30, 3), (61, 4)] {
            // Graded over 8 orders of magnitude.
            let (u, v) = (randn(n, n, seed), randn(n, n, seed + 1));
            let graded = Array::from_shape_fn((n, n), |(i, j)| {
                (0..n)
                    .map(|k| u[[i, k]] * v[[j, k]] * 10f64.powf(-8.0 * k as f64 / (n - 1) as f64))
                    .sum::<f64>()
            });
            for (what, a) in [("random", randn(n, n, seed + 2)), ("graded", graded)] {
                let exact = exact_rcond(&a);
                let one = one_block_rcond(&a);
                // (The exact one from a computed inverse: to about n eps / rcond.)
                let lo = exact * (1.0 - 1e-6 - n as f64 * f64::EPSILON / exact);
                assert!(
                    one >= lo && one <= 3.0 * exact,
                    "{what} {n}: gecon's {one}, exact {exact}"
                );
                for w in [2, 4, 7] {
                    let b = blocked_rcond_of(&a, w);
                    assert!(
                        b >= lo && b <= 10.0 * n as f64 * exact,
                        "{what} {n} panels of {w}: {b}, exact {exact}"
                    );
                }
                // Rows by 2^-300 .. 2^300 (a permutation), then columns by 2^300 .. 2^-300.
                let e = |k: usize| pow2(-300 + (600 * ((k * 7) % n) / n.max(2)) as i32);
                let rows = Array::from_shape_fn((n, n), |(i, j)| a[[i, j]] * e(i));
                let again = one_block_rcond(&rows);
                assert!(
                    (again / one - 1.0).abs() < 0.5,
                    "{what} {n}: {one} rows scaled {again}"
                );
                let b = blocked_rcond_of(&rows, 4) / blocked_rcond_of(&a, 4);
                assert!(
                    (b - 1.0).abs() < 0.5,
                    "{what} {n}: rows scaled, blocked {b}x"
                );
                let both = Array::from_shape_fn((n, n), |(i, j)| rows[[i, j]] / e(j));
                if what == "random" {
                    assert!(one_block_rcond(&both) > 1e6 * singular_rcond(n));
                    assert!(blocked_rcond_of(&both, 4) > 1e6 * singular_rcond(n));
                }
                if what == "graded" {
                    let x0 = randn(n, 2, 9);
                    let b = a.dot(&x0);
                    assert!(one > singular_rcond(n));
                    go(&Kernel::LuSolve, &[&a, &b], &[n, 2]);
                    for w in [2, 4, 7] {
                        lu_solve_blocked(&lu_panels(&a, w), &a, &b, w).unwrap();
                    }
                }
            }
        }
    }

    /// det, sign and logabsdet from the panels' shares, as the graph combines them: det is
    /// sign * exp(logabsdet).
    fn lu_det_blocked(f: &[Array2<f64>], a: &Array2<f64>, w: usize) -> [f64; 3] {
        let m = magnitudes(a);
        let share = |k: usize, output| {
            lu_step(Kernel::LuDet { w, step: k, output }, &[&f[k], &m], [1, 1]).unwrap()[[0, 0]]
        };
        let ks = 0..f.len();
        let sign: f64 = ks.clone().map(|k| share(k, DetOutput::Sign)).product();
        let log: f64 = ks.map(|k| share(k, DetOutput::Logabsdet)).sum();
        [sign * log.exp(), sign, log]
    }

    #[test]
    fn blocked_lu_steps_solve_and_give_the_determinant() {
        let det = |o: DetOutput, m: &Array2<f64>| go(&Kernel::Det { output: o }, &[m], &[])[[0, 0]];
        for (n, w, c) in [(10, 4, 3), (9, 3, 1), (16, 16, 2), (12, 5, 12)] {
            let a = randn(n, n, 40 + n as u64);
            let x0 = randn(n, c, 41);
            let f = lu_panels(&a, w);
            close(
                &lu_solve_blocked(&f, &a, &a.dot(&x0), w).unwrap(),
                &x0,
                1e-9,
            );
            let [d, sign, log] = lu_det_blocked(&f, &a, w);
            let d1 = det(DetOutput::Det, &a);
            assert!((d - d1).abs() <= 1e-9 * d1.abs(), "{n} {w}: {d} vs {d1}");
            assert_eq!(sign, det(DetOutput::Sign, &a));
            assert!((log - det(DetOutput::Logabsdet, &a)).abs() < 1e-9);
        }
        // Pivoting is needed: zeros where the first pivots would be without it.
        let mut a = randn(8, 8, 3);
        a[[0, 0]] = 0.0;
        a[[4, 1]] = 0.0;
        let x = lu_solve_blocked(&lu_panels(&a, 3), &a, &eye(8), 3).unwrap();
        close(&a.dot(&x), &eye(8), 1e-9);
        // Singular (a zero column in the second panel): the back substitution says so,
        // the determinant is 0 (sign 0, log -inf), as NumPy's.
        let mut s = randn(8, 8, 4);
        s.column_mut(4).fill(0.0);
        let f = lu_panels(&s, 3);
        assert_eq!(
            lu_solve_blocked(&f, &s, &eye(8), 3).unwrap_err(),
            "LinAlgError: Singular matrix"
        );
        assert_eq!(lu_det_blocked(&f, &s, 3), [0.0, 0.0, f64::NEG_INFINITY]);
    }

    /// Two equal rows: exactly singular. Whatever pivot the rounding leaves (an exact zero
    /// or one of rounding size), one block and blocked LU on panels of 2 to 13 columns
    /// refuse to solve (NumPy's words) and give det 0, sign 0, logabsdet -inf. A matrix
    /// with condition 1e11, or with rows scaled across 250 orders of magnitude, is solved.
    #[test]
    fn numerically_zero_pivots_are_zero_on_every_panel_width() {
        let singular = "LinAlgError: Singular matrix";
        let det = |o: DetOutput, m: &Array2<f64>| go(&Kernel::Det { output: o }, &[m], &[])[[0, 0]];
        for (n, seed) in [(12u64, 1u64), (26, 2), (40, 3), (64, 4)] {
            let n = n as usize;
            let mut a = randn(n, n, seed);
            let (i, j) = (seed as usize, n - 1 - seed as usize);
            let row = a.row(i).to_owned();
            a.row_mut(j).assign(&row);
            assert_eq!(err(&Kernel::LuSolve, &[&a, &eye(n)], &[n, n]), singular);
            assert_eq!(err(&Kernel::Inverse, &[&a], &[n, n]), singular);
            assert_eq!(det(DetOutput::Det, &a), 0.0);
            assert_eq!(det(DetOutput::Logabsdet, &a), f64::NEG_INFINITY);
            for w in [2, 3, 4, 6, 13] {
                let f = lu_panels(&a, w);
                assert_eq!(
                    lu_solve_blocked(&f, &a, &eye(n), w).unwrap_err(),
                    singular,
                    "n {n}, panels of {w}"
                );
                assert_eq!(lu_det_blocked(&f, &a, w), [0.0, 0.0, f64::NEG_INFINITY]);
            }
        }
        let n = 26;
        let x0 = randn(n, 2, 9);
        // Row 5 is row 3 plus 1e-10 of noise: condition about 1e11 (1e-12 of noise makes
        // about 1e13, and an equilibrated rcond about n eps: the threshold).
        let mut near = randn(n, n, 10);
        let row = &near.row(3).to_owned() + &(randn(1, n, 11).row(0).to_owned() * 1e-10);
        near.row_mut(5).assign(&row);
        let rows =
            randn(n, n, 12) * &Array::from_shape_fn((n, 1), |(i, _)| 10f64.powi(-10 * i as i32));
        for a in [near, rows] {
            let b = a.dot(&x0);
            let res = |x: &Array2<f64>| {
                let r = (&a.dot(x) - &b).mapv(f64::abs);
                let s = a.mapv(f64::abs).dot(&x.mapv(f64::abs)) + b.mapv(f64::abs);
                r.iter().zip(&s).fold(0.0, |m: f64, (r, s)| m.max(r / s))
            };
            assert!(res(&go(&Kernel::LuSolve, &[&a, &b], &[n, 2])) < 1e-13);
            for w in [3, 4, 13] {
                let x = lu_solve_blocked(&lu_panels(&a, w), &a, &b, w).unwrap();
                assert!(res(&x) < 1e-13, "panels of {w}: {}", res(&x));
            }
        }
    }

    /// Through `kernels::run` (the dispatch and the output dtype): float32 inputs are
    /// computed in float64 and cast back; a rank comes out as int64.
    #[test]
    fn float32_and_int_outputs_through_the_kernel_dispatch() {
        use nums_layout::meta::ArrayMeta;
        let a = randn(12, 3, 25);
        let a32 = Block::F32(a.mapv(|v| v as f32).into_dyn());
        let out = ArrayMeta::new(vec![3, 3], vec![3, 3], DType::Float32);
        let r32 = crate::kernels::run(&R, &[&a32], &out, &[0, 0]).unwrap();
        let Block::F32(r32) = r32 else {
            panic!("float32 out")
        };
        let r = go(&R, &[&a], &[3, 3]);
        for (x, y) in r32.iter().zip(&r) {
            assert!((*x as f64 - y).abs() < 1e-5 * (1.0 + y.abs()), "{x} {y}");
        }
        let out = ArrayMeta::new(vec![], vec![], DType::Int64);
        let k = lstsq_k(2, LstsqOutput::Rank);
        let rank = crate::kernels::run(&k, &[&blk(&r)], &out, &[]).unwrap();
        assert_eq!(rank, Block::I64(ArrayD::from_elem(IxDyn(&[]), 2)));
        // Not a matrix: a clear error.
        let cube = Block::F64(ArrayD::zeros(IxDyn(&[2, 2, 2])));
        let e = run(&Kernel::Cholesky, &[&cube], &[2, 2]).unwrap_err();
        assert!(e.contains("cholesky of a 3-D block"), "{e}");
    }

    #[test]
    fn wire_format() {
        let k = Kernel::Qr {
            cols: 2,
            output: QrOutput::Q { part: 3 },
        };
        let j = serde_json::to_string(&k).unwrap();
        assert_eq!(j, r#"{"kernel":"qr","cols":2,"result":{"q":{"part":3}}}"#);
        assert_eq!(serde_json::from_str::<Kernel>(&j).unwrap(), k);
        let j = serde_json::to_string(&Kernel::Cholesky).unwrap();
        assert_eq!(j, r#"{"kernel":"cholesky"}"#);
        let j = serde_json::to_string(&lstsq_k(4, LstsqOutput::X)).unwrap();
        assert!(j.starts_with(r#"{"kernel":"lstsq","n":4,"#), "{j}");
    }

    /// A deterministic complex m x n matrix of standard normal parts.
    fn crandn(m: usize, n: usize, seed: u64) -> Array2<C128> {
        let (re, im) = (randn(m, n, seed), randn(m, n, seed + 1000));
        Array2::from_shape_fn((m, n), |ij| C128::new(re[ij], im[ij]))
    }

    fn cgo(kernel: &Kernel, inputs: &[&Array2<C128>], shape: &[usize]) -> Array2<C128> {
        let blocks: Vec<Block> = inputs
            .iter()
            .map(|a| Block::C128((*a).clone().into_dyn()))
            .collect();
        let refs: Vec<&Block> = blocks.iter().collect();
        match run(kernel, &refs, shape).unwrap_or_else(|e| panic!("{kernel:?}: {e}")) {
            Block::C128(a) => a.into_shape_with_order(shape_2d(shape)).unwrap(),
            b => panic!("{kernel:?} gave {}", b.dtype()),
        }
    }

    fn shape_2d(shape: &[usize]) -> (usize, usize) {
        match *shape {
            [] => (1, 1),
            [m] => (m, 1),
            [m, n] => (m, n),
            _ => panic!("{shape:?}"),
        }
    }

    fn cclose(a: &Array2<C128>, b: &Array2<C128>, tol: f64) {
        assert_eq!(a.dim(), b.dim());
        let scale = 1.0 + b.iter().fold(0.0f64, |m, v| m.max(v.norm()));
        for ((i, x), y) in a.indexed_iter().zip(b.iter()) {
            assert!((x - y).norm() <= tol * scale, "at {i:?}: {x} vs {y}");
        }
    }

    fn adjoint(a: &Array2<C128>) -> Array2<C128> {
        a.t().mapv(|v| v.conj())
    }

    fn ceye(n: usize) -> Array2<C128> {
        Array2::from_shape_fn((n, n), |(i, j)| C128::new((i == j) as u8 as f64, 0.0))
    }

    /// The complex kernels (complex128 in, complex128 out): QR with Q^H Q = I and diag(R)
    /// real >= 0, a TSQR combine equal to the one-shot R, the SVD's U S Vh, Cholesky's
    /// L L^H (one block, and a blocked factorization's off-diagonal and diagonal blocks
    /// through ztrsm, zgemm and zherk), LU's solve, inverse and determinant.
    #[test]
    fn complex_kernels_factor_complex_matrices() {
        let (m, n) = (11, 4);
        let a = crandn(m, n, 7);
        let r = cgo(&R, &[&a], &[n, n]);
        let qm = cgo(&q(0), &[&a], &[m, n]);
        cclose(&qm.dot(&r), &a, 1e-13);
        cclose(&adjoint(&qm).dot(&qm), &ceye(n), 1e-13);
        for j in 0..n {
            assert!(r[[j, j]].im == 0.0 && r[[j, j]].re >= 0.0, "{}", r[[j, j]]);
            assert!(r.row(j).iter().take(j).all(|&v| v == C128::ZERO));
        }
        let (top, bottom) = (
            a.slice(s![..6, ..]).to_owned(),
            a.slice(s![6.., ..]).to_owned(),
        );
        let (r1, r2) = (cgo(&R, &[&top], &[n, n]), cgo(&R, &[&bottom], &[n, n]));
        cclose(&cgo(&R, &[&r1, &r2], &[n, n]), &r, 1e-13);

        let svd = |output| Kernel::Svd { output };
        let u = cgo(&svd(SvdOutput::U), &[&a], &[m, n]);
        let vh = cgo(&svd(SvdOutput::Vh), &[&a], &[n, n]);
        let Block::F64(sv) = run(
            &svd(SvdOutput::S),
            &[&Block::C128(a.clone().into_dyn())],
            &[n],
        )
        .unwrap() else {
            panic!("singular values are real")
        };
        let us = Array2::from_shape_fn((m, n), |(i, j)| u[[i, j]] * sv[j]);
        cclose(&us.dot(&vh), &a, 1e-13);

        let g = crandn(6, 6, 8);
        let h = g.dot(&adjoint(&g)) + ceye(6).mapv(|v| v * 6.0);
        let l = cgo(&Kernel::Cholesky, &[&h], &[6, 6]);
        cclose(&l.dot(&adjoint(&l)), &h, 1e-13);
        assert!((0..6).all(|i| l.row(i).iter().skip(i + 1).all(|&v| v == C128::ZERO)));
        // Blocked, on 3 x 3 blocks: L11, then L21 (X L11^H = A21), then L22 of
        // A22 - L21 L21^H.
        let blk = |i: usize, j: usize| h.slice(s![3 * i..3 * i + 3, 3 * j..3 * j + 3]).to_owned();
        let l11 = cgo(&Kernel::Cholesky, &[&blk(0, 0)], &[3, 3]);
        let l21 = cgo(
            &Kernel::CholeskyBlock { diagonal: false },
            &[&blk(1, 0), &l11],
            &[3, 3],
        );
        let l22 = cgo(
            &Kernel::CholeskyBlock { diagonal: true },
            &[&blk(1, 1), &l21],
            &[3, 3],
        );
        cclose(&l11, &l.slice(s![..3, ..3]).to_owned(), 1e-13);
        cclose(&l21, &l.slice(s![3.., ..3]).to_owned(), 1e-13);
        cclose(&l22, &l.slice(s![3.., 3..]).to_owned(), 1e-13);

        let b = crandn(6, 2, 9);
        let x = cgo(&Kernel::LuSolve, &[&g, &b], &[6, 2]);
        cclose(&g.dot(&x), &b, 1e-12);
        let inv = cgo(&Kernel::Inverse, &[&g], &[6, 6]);
        cclose(&g.dot(&inv), &ceye(6), 1e-12);
        // det of an upper triangular matrix: the product of its diagonal; slogdet's sign
        // that product's phase.
        let mut t = crandn(4, 4, 10);
        for i in 0..4 {
            for j in 0..i {
                t[[i, j]] = C128::ZERO;
            }
        }
        let want = (0..4).fold(C128::new(1.0, 0.0), |p, i| p * t[[i, i]]);
        let det = |output| cgo(&Kernel::Det { output }, &[&t], &[])[[0, 0]];
        assert!((det(DetOutput::Det) - want).norm() <= 1e-12 * want.norm());
        assert!((det(DetOutput::Sign) - want / want.norm()).norm() <= 1e-14);
        let Block::F64(log) = run(
            &Kernel::Det {
                output: DetOutput::Logabsdet,
            },
            &[&Block::C128(t.into_dyn())],
            &[],
        )
        .unwrap() else {
            panic!("logabsdet is real")
        };
        assert!((log[[]] - want.norm().ln()).abs() <= 1e-13);
    }

    /// A complex matrix is singular or not positive definite as a real one is (NumPy's
    /// LinAlgError), and the kernels that are real only refuse it rather than take its real
    /// parts.
    #[test]
    fn complex_kernels_fail_as_numpy_and_real_only_kernels_refuse() {
        let mut a = crandn(4, 4, 11);
        let row = a.row(1).mapv(|v| v * C128::new(1.0, -2.0));
        a.row_mut(3).assign(&row);
        let blocks = [Block::C128(a.clone().into_dyn())];
        let e = run(&Kernel::Inverse, &[&blocks[0]], &[4, 4]).unwrap_err();
        assert_eq!(linalg_error(&e), Some("Singular matrix"), "{e}");
        let h = ceye(3).mapv(|v| -v);
        let e = run(&Kernel::Cholesky, &[&Block::C128(h.into_dyn())], &[3, 3]).unwrap_err();
        assert_eq!(
            linalg_error(&e),
            Some("Matrix is not positive definite"),
            "{e}"
        );
        let e = run(&lstsq_k(2, LstsqOutput::X), &[&blocks[0]], &[2, 2]).unwrap_err();
        assert!(
            e.contains("lstsq of a complex matrix: its kernel is real only"),
            "{e}"
        );
        let panel = Kernel::LuPanel {
            w: 2,
            apply: None,
            factor: true,
            scale: false,
        };
        let e = run(&panel, &[&blocks[0]], &[6, 2]).unwrap_err();
        assert!(e.contains("blocked LU of a complex matrix"), "{e}");
    }
}
