//! A pass of a model's fit in one sweep over each block of rows ([`Kernel::GlmSums`]):
//! z = X W + b for every candidate at once (one GEMM per piece of rows), the loss and the
//! residual r of each element in one loop, then X^T r (one GEMM), the pieces small enough
//! to stay in cache while X's rows are read for the second product. The same expressions
//! as separate kernels (`X @ w_ + b_`, `sigmoid`, `maximum`, `abs`, `exp`, `log1p`, ...)
//! each made an m x k block, and ran three transcendental functions per element where
//! this runs two. A Newton pass (`hessian`) adds the Hessian sums X^T diag(s) X: the
//! piece's rows scaled by sqrt(s) into a buffer of the piece's size, then one syrk, where
//! the expressions made `X * s[:, None]`, a copy of the whole block.
//!
//! [`Kernel::GlmSums`]: nums_layout::batch::Kernel::GlmSums

use std::borrow::Cow;

use cblas_sys::{CBLAS_LAYOUT::CblasRowMajor, CBLAS_TRANSPOSE::CblasTrans, CBLAS_UPLO::CblasLower};
use ndarray::{
    Array1, Array2, ArrayD, ArrayView1, ArrayView2, Axis, Ix1, Ix2, Zip, linalg::general_mat_mul, s,
};
use nums_layout::Block;
use nums_layout::batch::{GLM_COUNTS, GlmCount, GlmLoss};

/// Bytes of X's rows in one piece: the piece's rows are read by the first product and
/// again, from cache, by the second (and by the scaling of a Newton pass).
const PIECE_BYTES: usize = 256 << 10;

/// The loss at linear predictor `z` and target `y`, the residual dloss/dz and the Hessian
/// weight d²loss/dz² (computed by the callers that use it: the compiler drops it for the
/// others).
#[inline]
fn loss_residual_weight(loss: GlmLoss, z: f64, y: f64) -> (f64, f64, f64) {
    match loss {
        GlmLoss::Logistic => {
            // log(1 + exp(z)) = max(z, 0) + log1p(exp(-|z|)), and sigmoid(z) from the
            // same exponential: no overflow either way. The weight p (1 - p) is
            // e / (1 + e)^2 on both sides, with no cancellation in 1 - p.
            let e = (-z.abs()).exp();
            let q = 1.0 / (1.0 + e);
            let p = if z >= 0.0 { q } else { e * q };
            (z.max(0.0) - z * y + e.ln_1p(), p - y, e * q * q)
        }
        GlmLoss::Poisson => {
            let p = z.exp();
            (p - z * y, p - y, p)
        }
        GlmLoss::Squared => {
            let r = z - y;
            (0.5 * r * r, r, 1.0)
        }
        GlmLoss::Multinomial { .. } => unreachable!("a row's classes at once: softmax_row"),
    }
}

/// Adds the NaN and infinite values of row `i` of X's pieces to the counts.
fn count_non_finite(piece: &[ArrayView2<'_, f64>], i: usize, nan: &mut u64, inf: &mut u64) {
    for x in piece {
        for &v in x.row(i) {
            *nan += u64::from(v.is_nan());
            *inf += u64::from(v.is_infinite());
        }
    }
}

/// y as a class index of a multinomial loss of `classes` classes: an integer in
/// 0..classes, or none.
fn class_index(y: f64, classes: usize) -> Option<usize> {
    (y >= 0.0 && y < classes as f64 && y.fract() == 0.0).then_some(y as usize)
}

/// One candidate's classes of a row of a multinomial loss: `z` (the row's z for them,
/// intercepts added) becomes the softmax p, computed from z minus the row's largest (no
/// overflow); returns the loss logsumexp(z) - z_y (NaN for a y that is no class).
#[inline]
fn softmax_row(z: &mut [f64], y: Option<usize>) -> f64 {
    let zy = y.map_or(f64::NAN, |c| z[c]);
    let m = z.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mut total = 0.0;
    for v in z.iter_mut() {
        *v = (*v - m).exp();
        total += *v;
    }
    for v in z.iter_mut() {
        *v /= total;
    }
    m + total.ln() - zy
}

/// The sums of [`Kernel::GlmSums`] over its terms (each: `cols` blocks of X, y (or y and
/// the sample weights, [m, 2]), W and, with `intercept`, b): a [1 + p + GLM_COUNTS, k]
/// float64 block (p = d + intercept; the last [`GLM_COUNTS`] rows count what a fit checks
/// of its data, [`GlmCount`]); with `hessian` (k = 1), [1 + p + GLM_COUNTS, 1 + p]:
/// column 0 as without it, and rows 1..=p the p x p Hessian sums in columns 1..=p (row 0
/// beyond column 0 is zero).
///
/// [`Kernel::GlmSums`]: nums_layout::batch::Kernel::GlmSums
pub fn sums(
    loss: GlmLoss,
    cols: usize,
    intercept: bool,
    hessian: bool,
    inputs: &[&Block],
) -> Result<Block, String> {
    let arity = cols + 2 + usize::from(intercept);
    if cols == 0 || inputs.is_empty() || !inputs.len().is_multiple_of(arity) {
        return Err(format!(
            "a model's sums take terms of {arity} blocks ({cols} of X, y, W{}), got {} blocks",
            if intercept { ", b" } else { "" },
            inputs.len()
        ));
    }
    let w0 = inputs[cols + 1].shape();
    let [d, columns] = *w0 else {
        return Err(format!("W must be 2-D (features x candidates), not {w0:?}"));
    };
    // A multinomial candidate is one column of W per class.
    let classes = loss.classes();
    if classes == 0 || !columns.is_multiple_of(classes) {
        return Err(format!(
            "W of {w0:?} does not hold candidates of {classes} classes each"
        ));
    }
    let k = columns / classes;
    let p = classes * (d + usize::from(intercept));
    if hessian && k != 1 {
        return Err(format!(
            "a model's Hessian sums take one candidate, not W of {w0:?}"
        ));
    }
    let rows = 1 + p + GLM_COUNTS as usize;
    let mut out = Array2::<f64>::zeros((rows, if hessian { 1 + p } else { k }));
    for term in inputs.chunks(arity) {
        add_term(
            loss,
            &term[..cols],
            term[cols],
            &term[cols + 1..],
            hessian,
            &mut out,
        )?;
    }
    if hessian {
        // syrk summed the lower triangle.
        for i in 1..=p {
            for j in i + 1..=p {
                out[[i, j]] = out[[j, i]];
            }
        }
    }
    Ok(Block::F64(out.into_dyn()))
}

/// One of X's column blocks as a term holds it: float64 read in place, float32 converted a
/// piece at a time, other types converted once.
enum Column<'a> {
    F64(Cow<'a, ArrayD<f64>>),
    F32(&'a ArrayD<f32>),
}

impl Column<'_> {
    fn dim(&self) -> Result<(usize, usize), String> {
        let s = match self {
            Column::F64(a) => a.shape(),
            Column::F32(a) => a.shape(),
        };
        match *s {
            [m, w] => Ok((m, w)),
            _ => Err("X's blocks must be 2-D".to_string()),
        }
    }
}

/// Adds one row block's sums into `out` (column j: loss, X^T r, then sum r with b; with
/// `hessian`, rows and columns 1..=p: X^T diag(s) X bordered by X^T s and sum s with b,
/// its lower triangle; each row's terms times its weight), and its counts.
fn add_term(
    loss: GlmLoss,
    xs: &[&Block],
    y: &Block,
    params: &[&Block],
    hessian: bool,
    out: &mut Array2<f64>,
) -> Result<(), String> {
    let xs: Vec<Column<'_>> = xs
        .iter()
        .map(|b| match b {
            Block::F32(a) => Column::F32(a),
            b => Column::F64(b.to_f64()),
        })
        .collect();
    let dims: Vec<(usize, usize)> = xs.iter().map(Column::dim).collect::<Result<_, _>>()?;
    let y = y.to_f64();
    // y alone, or y and its sample weights side by side (carried together, so that every
    // stage that makes, re-blocks or reads y does the weights too).
    let (y, weights): (ArrayView1<'_, f64>, Option<ArrayView1<'_, f64>>) = match y.shape() {
        [_] => (y.view().into_dimensionality::<Ix1>().expect("1-D"), None),
        [_, 2] => {
            let yw = y.view().into_dimensionality::<Ix2>().expect("2-D");
            (
                yw.index_axis_move(Axis(1), 0),
                Some(yw.index_axis_move(Axis(1), 1)),
            )
        }
        s => {
            return Err(format!(
                "y's block must be [m] or [m, 2] (with weights), not {s:?}"
            ));
        }
    };
    let w = params[0].to_f64();
    let w: ArrayView2<'_, f64> = w
        .view()
        .into_dimensionality::<Ix2>()
        .map_err(|_| "W must be 2-D".to_string())?;
    let b = params.get(1).map(|b| b.to_f64());
    let b: Option<ArrayView1<'_, f64>> = match &b {
        Some(b) => Some(
            b.view()
                .into_dimensionality::<Ix1>()
                .map_err(|_| "b must be 1-D".to_string())?,
        ),
        None => None,
    };
    // k columns of W: one per candidate, or (multinomial) one per candidate and class.
    let (d, k) = w.dim();
    let classes = loss.classes();
    let m = y.len();
    // The parameters of a class, and of a candidate.
    let pc = d + usize::from(b.is_some());
    let p = classes * pc;
    let widths: Vec<usize> = dims.iter().map(|x| x.1).collect();
    let want = (
        1 + p + GLM_COUNTS as usize,
        if hessian { 1 + p } else { k / classes },
    );
    if dims.iter().any(|x| x.0 != m)
        || widths.iter().sum::<usize>() != d
        || b.is_some_and(|b| b.len() != k)
        || !k.is_multiple_of(classes)
        || out.dim() != want
    {
        return Err(format!(
            "a model's sums over X blocks of {dims:?}, y of {m}, W of {:?}, b of {:?}: the shapes do not agree",
            w.dim(),
            b.map(|b| b.len())
        ));
    }
    let rows = (PIECE_BYTES / (8 * d.max(1))).clamp(64, 8192).min(m.max(1));
    let mut z = Array2::<f64>::zeros((rows, k));
    // float32 columns, a piece at a time.
    let mut converted: Vec<Array2<f64>> = xs
        .iter()
        .zip(&widths)
        .map(|(x, &wc)| match x {
            Column::F32(_) => Array2::zeros((rows, wc)),
            Column::F64(_) => Array2::zeros((0, 0)),
        })
        .collect();
    // A Newton pass's piece of [X | 1] scaled by sqrt(s), row by row.
    let mut scaled = Array2::<f64>::zeros(if hessian { (rows, pc) } else { (0, 0) });
    let mut roots = Array1::<f64>::zeros(if hessian { rows } else { 0 });
    // A multinomial loss: X^T R of every candidate's classes ([d, k], spread over the
    // candidates' rows at the term's end), and for its Hessian each row's softmax p, and
    // [X | 1] scaled by sqrt(v) p_c for class c, side by side ([rows, p]).
    let multi = classes > 1;
    let mut grad = Array2::<f64>::zeros(if multi { (d, k) } else { (0, 0) });
    let mut probs = Array2::<f64>::zeros(if multi && hessian {
        (rows, classes)
    } else {
        (0, 0)
    });
    let mut cross = Array2::<f64>::zeros(if multi && hessian { (rows, p) } else { (0, 0) });
    // Sums of a piece, then added to the block's: rounding grows with the piece's rows
    // and the pieces' count, not with the block's rows.
    let (mut nan_x, mut inf_x) = (0u64, 0u64);
    let mut piece_loss = vec![0.0; k];
    let mut piece_r = vec![0.0; k];
    let mut total_loss = vec![0.0; k];
    let mut total_r = vec![0.0; k];
    for start in (0..m).step_by(rows) {
        let end = (start + rows).min(m);
        for (x, buf) in xs.iter().zip(&mut converted) {
            if let Column::F32(a) = x {
                let a = a
                    .view()
                    .into_dimensionality::<Ix2>()
                    .map_err(|_| "X's blocks must be 2-D".to_string())?;
                buf.slice_mut(s![..end - start, ..])
                    .zip_mut_with(&a.slice(s![start..end, ..]), |o, &v| *o = f64::from(v));
            }
        }
        let piece: Vec<ArrayView2<'_, f64>> = xs
            .iter()
            .zip(&converted)
            .map(|(x, buf)| match x {
                Column::F64(a) => a
                    .view()
                    .into_dimensionality::<Ix2>()
                    .expect("2-D, checked")
                    .slice_move(s![start..end, ..]),
                Column::F32(_) => buf.slice(s![..end - start, ..]),
            })
            .collect();
        let mut zc = z.slice_mut(s![..end - start, ..]);
        let mut at = 0;
        for (c, x) in piece.iter().enumerate() {
            let wc = w.slice(s![at..at + widths[c], ..]);
            let beta = if c == 0 { 0.0 } else { 1.0 };
            general_mat_mul(1.0, x, &wc, beta, &mut zc);
            at += widths[c];
        }
        piece_loss.fill(0.0);
        piece_r.fill(0.0);
        for (i, (mut row, &yi)) in zc
            .rows_mut()
            .into_iter()
            .zip(&y.slice(s![start..end]))
            .enumerate()
        {
            let vi = weights.map_or(1.0, |v| v[start + i]);
            if multi {
                let row = row.as_slice_mut().expect("z of standard layout");
                for (j, zv) in row.iter_mut().enumerate() {
                    *zv += b.map_or(0.0, |b| b[j]);
                }
                if !row[0].is_finite() {
                    count_non_finite(&piece, i, &mut nan_x, &mut inf_x);
                }
                let yc = class_index(yi, classes);
                for (cand, z) in row.chunks_mut(classes).enumerate() {
                    let j0 = cand * classes;
                    // A row of weight 0 is no row at all.
                    if vi == 0.0 {
                        z.fill(0.0);
                    } else {
                        piece_loss[j0] += vi * softmax_row(z, yc);
                    }
                    if hessian {
                        probs.row_mut(i).assign(&ArrayView1::from(&*z));
                    }
                    for (c, zv) in z.iter_mut().enumerate() {
                        let r = vi * (*zv - f64::from(u8::from(yc == Some(c))));
                        let r = if vi == 0.0 { 0.0 } else { r };
                        piece_r[j0 + c] += r;
                        *zv = r;
                    }
                }
                if hessian {
                    roots[i] = vi.sqrt();
                }
                continue;
            }
            for (j, zv) in row.iter_mut().enumerate() {
                let zj = *zv + b.map_or(0.0, |b| b[j]);
                // A row with NaN or inf in X has z NaN or inf at any finite parameters:
                // only such rows are scanned for them.
                if j == 0 && !zj.is_finite() {
                    count_non_finite(&piece, i, &mut nan_x, &mut inf_x);
                }
                // A row of weight 0 is no row at all (not 0 times an overflow, NaN).
                let (l, r, weight) = if vi == 0.0 {
                    (0.0, 0.0, 0.0)
                } else {
                    let (l, r, s) = loss_residual_weight(loss, zj, yi);
                    (vi * l, vi * r, vi * s)
                };
                piece_loss[j] += l;
                piece_r[j] += r;
                *zv = r;
                if hessian {
                    roots[i] = weight.sqrt();
                }
            }
        }
        for j in 0..k {
            total_loss[j] += piece_loss[j];
            total_r[j] += piece_r[j];
        }
        // X^T r, each column block into its rows of the gradient.
        let mut at = 1;
        for (c, x) in piece.iter().enumerate() {
            let mut g = if multi {
                grad.slice_mut(s![at - 1..at - 1 + widths[c], ..])
            } else {
                out.slice_mut(s![at..at + widths[c], ..k])
            };
            general_mat_mul(1.0, &x.t(), &zc.view(), 1.0, &mut g);
            at += widths[c];
        }
        if hessian && multi {
            // H = blockdiag_c([X|1]^T diag(v p_c) [X|1]) - C^T C, C = [X|1] scaled by
            // sqrt(v) p_c for each class c side by side: the blocks
            // [X|1]^T diag(v p_c (delta_cl - p_l)) [X|1], each a syrk.
            let n = end - start;
            for c in 0..classes {
                for i in 0..n {
                    let (q, pi) = (roots[i], probs[[i, c]]);
                    let t = q * pi.sqrt();
                    let mut at = 0;
                    for (w, x) in widths.iter().zip(&piece) {
                        let xr = x.row(i);
                        for j in 0..*w {
                            scaled[[i, at + j]] = t * xr[j];
                            cross[[i, c * pc + at + j]] = q * pi * xr[j];
                        }
                        at += w;
                    }
                    if b.is_some() {
                        scaled[[i, d]] = t;
                        cross[[i, c * pc + d]] = q * pi;
                    }
                }
                syrk_lower(&scaled.slice(s![..n, ..]), out, 1 + c * pc, 1.0)?;
            }
            syrk_lower(&cross.slice(s![..n, ..]), out, 1, -1.0)?;
        } else if hessian {
            // [X | 1] scaled by sqrt(s) (s >= 0 for every loss): X^T diag(s) X as A^T A.
            let n = end - start;
            let q = roots.slice(s![..n]).insert_axis(Axis(1));
            let mut at = 0;
            for (c, x) in piece.iter().enumerate() {
                Zip::from(scaled.slice_mut(s![..n, at..at + widths[c]]))
                    .and(x)
                    .and_broadcast(&q)
                    .for_each(|o, &v, &q| *o = q * v);
                at += widths[c];
            }
            if b.is_some() {
                scaled.slice_mut(s![..n, d]).assign(&roots.slice(s![..n]));
            }
            syrk_lower(&scaled.slice(s![..n, ..]), out, 1, 1.0)?;
        }
    }
    if multi {
        // Candidate j's class c: column j K + c of the sums here, rows 1 + c (d + b) on
        // of column j there.
        for j in 0..k / classes {
            out[[0, j]] += total_loss[j * classes];
            for c in 0..classes {
                let at = 1 + c * pc;
                for i in 0..d {
                    out[[at + i, j]] += grad[[i, j * classes + c]];
                }
                if b.is_some() {
                    out[[at + d, j]] += total_r[j * classes + c];
                }
            }
        }
    } else {
        for j in 0..k {
            out[[0, j]] += total_loss[j];
            if b.is_some() {
                out[[1 + d, j]] += total_r[j];
            }
        }
    }
    let mut counts = data_counts(loss, y, weights);
    counts[GlmCount::NanX as usize] = nan_x as f64;
    counts[GlmCount::InfX as usize] = inf_x as f64;
    for (i, c) in counts.into_iter().enumerate() {
        out[[1 + p + i, 0]] += c;
    }
    Ok(())
}

/// The counts of [`GlmCount`] but X's: how many of `y`'s values the loss cannot take
/// (logistic: neither 0, 1 nor NaN; Poisson: negative; squared: NaN), are NaN, are
/// infinite, equal 1, and are above 0; the weights' sum (the rows' count without them),
/// and how many are negative, NaN, infinite: what a fit refuses its data for, counted in
/// the pass that reads them anyway (a stage of its own took 0.15-0.36 s of a 1M-row fit).
fn data_counts(
    loss: GlmLoss,
    y: ArrayView1<'_, f64>,
    weights: Option<ArrayView1<'_, f64>>,
) -> [f64; GLM_COUNTS as usize] {
    let mut c = [0u64; GLM_COUNTS as usize];
    let mut add = |k: GlmCount, yes: bool| c[k as usize] += u64::from(yes);
    // Multinomial: the last class stands for 1 (one class of labels is refused).
    let one = (loss.classes() - 1).max(1) as f64;
    for &v in y {
        add(
            GlmCount::RefusedY,
            match loss {
                GlmLoss::Logistic => v != 0.0 && v != 1.0 && !v.is_nan(),
                GlmLoss::Poisson => v < 0.0,
                GlmLoss::Squared => v.is_nan(),
                GlmLoss::Multinomial { classes } => {
                    class_index(v, classes as usize).is_none() && !v.is_nan()
                }
            },
        );
        add(GlmCount::NanY, v.is_nan());
        add(GlmCount::InfY, v.is_infinite());
        add(GlmCount::OnesY, v == one);
        add(GlmCount::PositiveY, v > 0.0);
    }
    let mut weight = y.len() as f64;
    if let Some(ws) = weights {
        for &v in ws {
            add(GlmCount::NegativeWeight, v < 0.0);
            add(GlmCount::NanWeight, v.is_nan());
            add(GlmCount::InfWeight, v.is_infinite());
        }
        weight = ws.sum();
    }
    let mut out = c.map(|n| n as f64);
    out[GlmCount::Weight as usize] = weight;
    out
}

/// Adds alpha A^T A (A: rows x p) to the lower triangle of `out`'s rows and columns
/// at..at + p.
fn syrk_lower(
    a: &ArrayView2<'_, f64>,
    out: &mut Array2<f64>,
    at: usize,
    alpha: f64,
) -> Result<(), String> {
    let (rows, p) = a.dim();
    if rows == 0 || p == 0 {
        return Ok(());
    }
    let int = |n: usize| i32::try_from(n).map_err(|_| format!("{n} is too large for BLAS"));
    let a = a.as_slice().expect("a piece of standard layout");
    let ldc = out.ncols();
    if at + p > out.nrows().min(out.ncols()) {
        return Err(format!(
            "a Hessian block of {p} at {at} is out of {:?}",
            out.dim()
        ));
    }
    let c = out.as_slice_mut().expect("standard layout");
    // SAFETY: A row-major rows x p (lda p); C the p x p block at (at, at) of a row-major
    // matrix of ldc columns, checked in bounds above.
    unsafe {
        cblas_sys::cblas_dsyrk(
            CblasRowMajor,
            CblasLower,
            CblasTrans,
            int(p)?,
            int(rows)?,
            alpha,
            a.as_ptr(),
            int(p)?,
            1.0,
            c[at * ldc + at..].as_mut_ptr(),
            int(ldc)?,
        )
    };
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::{Array1, Axis, concatenate};

    fn data(m: usize, d: usize, seed: u64) -> (Array2<f64>, Array1<f64>) {
        let mut s = seed;
        let mut next = move || {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 11) as f64 / (1u64 << 53) as f64) * 2.0 - 1.0
        };
        let x = Array2::from_shape_fn((m, d), |_| next());
        let y = Array1::from_shape_fn(m, |_| (next() > 0.0) as u8 as f64);
        (x, y)
    }

    /// The sums as the separate expressions compute them (NumPy's formulas, as
    /// `models::program` wrote them): z = X @ W + b; the loss summed down the rows;
    /// r = p - y; X.T @ r; sum(r).
    fn reference(
        loss: GlmLoss,
        x: &Array2<f64>,
        y: &Array1<f64>,
        w: &Array2<f64>,
        b: Option<&Array1<f64>>,
    ) -> Array2<f64> {
        let mut z = x.dot(w);
        if let Some(b) = b {
            z += b;
        }
        let yc = y.view().insert_axis(Axis(1));
        let (p, l) = match loss {
            GlmLoss::Logistic => (
                z.mapv(|v| 1.0 / (1.0 + (-v).exp())),
                z.mapv(|v| v.max(0.0)) - &z * &yc + z.mapv(|v| (-v.abs()).exp().ln_1p()),
            ),
            GlmLoss::Poisson => (z.mapv(f64::exp), z.mapv(f64::exp) - &z * &yc),
            GlmLoss::Squared => (z.clone(), (&z - &yc).mapv(|v| 0.5 * v * v)),
            GlmLoss::Multinomial { .. } => unreachable!("tested on its own"),
        };
        let r = p - yc;
        let mut rows = vec![l.sum_axis(Axis(0)).insert_axis(Axis(0)), x.t().dot(&r)];
        if b.is_some() {
            rows.push(r.sum_axis(Axis(0)).insert_axis(Axis(0)));
        }
        let views: Vec<_> = rows.iter().map(|a| a.view()).collect();
        with_counts(loss, y, concatenate(Axis(0), &views).unwrap())
    }

    /// `sums` with the rows of counts below ([`GlmCount`]): y's values the loss refuses,
    /// NaN, inf, ones, positive; X's NaN and inf (none here); the rows' count as the
    /// weights' sum, and no weights refused.
    fn with_counts(loss: GlmLoss, y: &Array1<f64>, sums: Array2<f64>) -> Array2<f64> {
        let count = |f: &dyn Fn(f64) -> bool| y.iter().filter(|&&v| f(v)).count() as f64;
        let bad = match loss {
            GlmLoss::Logistic => count(&|v| v != 0.0 && v != 1.0 && !v.is_nan()),
            GlmLoss::Poisson => count(&|v| v < 0.0),
            GlmLoss::Squared => count(&|v| v.is_nan()),
            GlmLoss::Multinomial { .. } => unreachable!("tested on its own"),
        };
        let counts = [
            bad,
            count(&|v| v.is_nan()),
            count(&|v| v.is_infinite()),
            count(&|v| v == 1.0),
            count(&|v| v > 0.0),
            0.0,
            0.0,
            y.len() as f64,
            0.0,
            0.0,
            0.0,
        ];
        let mut out = Array2::zeros((sums.nrows() + counts.len(), sums.ncols()));
        out.slice_mut(s![..sums.nrows(), ..]).assign(&sums);
        for (i, c) in counts.into_iter().enumerate() {
            out[[sums.nrows() + i, 0]] = c;
        }
        out
    }

    fn close(got: &Array2<f64>, want: &Array2<f64>) {
        assert_eq!(got.dim(), want.dim());
        for (g, w) in got.iter().zip(want) {
            assert!(
                (g - w).abs() <= 1e-12 * (1.0 + w.abs()),
                "got\n{got}\nwant\n{want}"
            );
        }
    }

    /// The fused sums equal the separate expressions' for every loss, with and without
    /// an intercept, over several row blocks (terms) of X cut into column blocks, X in
    /// float32 as in float64, and for linear predictors far out in both tails (where
    /// exp(z) overflows and a naive log(1 + exp(z)) is inf).
    #[test]
    fn fused_sums_equal_the_separate_expressions() {
        let (d, k) = (7, 4);
        let (x, y) = data(10_000, d, 1);
        let (w, _) = data(d, k, 2);
        let w = w * 0.8;
        let b = Array1::from(vec![0.3, -0.2, 0.0, 1.5]);
        for loss in [GlmLoss::Logistic, GlmLoss::Poisson, GlmLoss::Squared] {
            let y = match loss {
                GlmLoss::Poisson => y.mapv(|v| v * 3.0),
                _ => y.clone(),
            };
            for intercept in [true, false] {
                let bb = intercept.then_some(&b);
                // Row blocks of 4,000, 4,000 and 2,000 rows; X's columns in blocks of 3,
                // 3 and 1.
                let mut blocks: Vec<Block> = Vec::new();
                for r in [0..4000, 4000..8000, 8000..10_000] {
                    for c in [0..3, 3..6, 6..7] {
                        let xb = x.slice(s![r.clone(), c]).to_owned();
                        blocks.push(Block::F64(xb.into_dyn()));
                    }
                    blocks.push(Block::F64(y.slice(s![r.clone()]).to_owned().into_dyn()));
                    blocks.push(Block::F64(w.clone().into_dyn()));
                    if intercept {
                        blocks.push(Block::F64(b.clone().into_dyn()));
                    }
                }
                let refs: Vec<&Block> = blocks.iter().collect();
                let got = sums(loss, 3, intercept, false, &refs).unwrap();
                let want = reference(loss, &x, &y, &w, bb);
                close(
                    &got.to_f64().into_owned().into_dimensionality().unwrap(),
                    &want,
                );
            }
        }
        // float32 X in one block, y as int64.
        let x32 = x.mapv(|v| v as f32);
        let y64 = y.mapv(|v| v as i64);
        let blocks = [
            Block::F32(x32.clone().into_dyn()),
            Block::I64(y64.into_dyn()),
            Block::F64(w.clone().into_dyn()),
            Block::F64(b.clone().into_dyn()),
        ];
        let got = sums(
            GlmLoss::Logistic,
            1,
            true,
            false,
            &blocks.iter().collect::<Vec<_>>(),
        )
        .unwrap();
        let want = reference(GlmLoss::Logistic, &x32.mapv(f64::from), &y, &w, Some(&b));
        close(
            &got.to_f64().into_owned().into_dimensionality().unwrap(),
            &want,
        );
        // The tails: z from -800 to 800.
        let xt = Array2::from_shape_fn((401, 1), |(i, _)| i as f64 * 4.0 - 800.0);
        let yt = Array1::from_shape_fn(401, |i| (i % 3 == 0) as u8 as f64);
        let wt = Array2::from_elem((1, 2), 1.0);
        let blocks = [
            Block::F64(xt.clone().into_dyn()),
            Block::F64(yt.clone().into_dyn()),
            Block::F64(wt.clone().into_dyn()),
        ];
        let got = sums(
            GlmLoss::Logistic,
            1,
            false,
            false,
            &blocks.iter().collect::<Vec<_>>(),
        )
        .unwrap();
        let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
        assert!(got.iter().all(|v| v.is_finite()), "{got}");
        close(&got, &reference(GlmLoss::Logistic, &xt, &yt, &wt, None));
    }

    /// The Hessian sums as the separate expressions of a Newton pass compute them
    /// (`models::program` wrote them so): z = X @ w + b; p and s = p (1 - p) (logistic),
    /// exp(z) (Poisson) or 1; r = p - y; then the loss, X.T @ r, sum(r) in column 0 and
    /// X.T @ (X * s[:, None]), X.T @ s, sum(s) below row 0.
    fn reference_hessian(
        loss: GlmLoss,
        x: &Array2<f64>,
        y: &Array1<f64>,
        w: &Array1<f64>,
        b: Option<f64>,
    ) -> Array2<f64> {
        let d = x.ncols();
        let p_ = d + usize::from(b.is_some());
        let z = x.dot(w) + b.unwrap_or(0.0);
        let (p, l, s) = match loss {
            GlmLoss::Logistic => {
                let p = z.mapv(|v| 1.0 / (1.0 + (-v).exp()));
                let l = z.mapv(|v| v.max(0.0)) - &z * y + z.mapv(|v| (-v.abs()).exp().ln_1p());
                let s = p.mapv(|v| v * (1.0 - v));
                (p, l, s)
            }
            GlmLoss::Poisson => (
                z.mapv(f64::exp),
                z.mapv(f64::exp) - &z * y,
                z.mapv(f64::exp),
            ),
            GlmLoss::Squared => (z.clone(), (&z - y).mapv(|v| 0.5 * v * v), z.mapv(|_| 1.0)),
            GlmLoss::Multinomial { .. } => unreachable!("tested on its own"),
        };
        let r = p - y;
        let mut out = Array2::zeros((1 + p_, 1 + p_));
        out[[0, 0]] = l.sum();
        out.slice_mut(s![1..=d, 0]).assign(&x.t().dot(&r));
        let xs = x * &s.view().insert_axis(Axis(1));
        out.slice_mut(s![1..=d, 1..=d]).assign(&x.t().dot(&xs));
        if b.is_some() {
            out[[1 + d, 0]] = r.sum();
            let xts = x.t().dot(&s);
            out.slice_mut(s![1..=d, 1 + d]).assign(&xts);
            out.slice_mut(s![1 + d, 1..=d]).assign(&xts);
            out[[1 + d, 1 + d]] = s.sum();
        }
        with_counts(loss, y, out)
    }

    /// A Newton pass's fused sums (loss, gradient and Hessian in one sweep, the Hessian
    /// by syrk on each piece of rows scaled by sqrt(s)) equal the separate expressions'
    /// for every loss, with and without an intercept, over row blocks of which one spans
    /// several pieces, X cut into column blocks, in float64 and in float32, and the
    /// Hessian is exactly symmetric.
    #[test]
    fn fused_newton_sums_equal_the_separate_expressions() {
        let d = 7;
        let (x, y) = data(13_000, d, 3);
        let (w, _) = data(d, 1, 4);
        let w = w.column(0).to_owned() * 0.8;
        let x32 = x.mapv(|v| v as f32);
        for loss in [GlmLoss::Logistic, GlmLoss::Poisson, GlmLoss::Squared] {
            let y = match loss {
                GlmLoss::Poisson => y.mapv(|v| v * 3.0),
                _ => y.clone(),
            };
            for intercept in [true, false] {
                for float32 in [false, true] {
                    // Row blocks of 9,000 (two pieces of 4,681 rows at d = 7), 2,000 and
                    // 2,000 rows; X's columns in blocks of 4 and 3.
                    let mut blocks: Vec<Block> = Vec::new();
                    for r in [0..9000, 9000..11_000, 11_000..13_000] {
                        for c in [0..4, 4..7] {
                            blocks.push(if float32 {
                                Block::F32(x32.slice(s![r.clone(), c]).to_owned().into_dyn())
                            } else {
                                Block::F64(x.slice(s![r.clone(), c]).to_owned().into_dyn())
                            });
                        }
                        blocks.push(Block::F64(y.slice(s![r.clone()]).to_owned().into_dyn()));
                        blocks.push(Block::F64(w.clone().insert_axis(Axis(1)).into_dyn()));
                        if intercept {
                            blocks.push(Block::F64(Array1::from(vec![0.4]).into_dyn()));
                        }
                    }
                    let refs: Vec<&Block> = blocks.iter().collect();
                    let got = sums(loss, 2, intercept, true, &refs).unwrap();
                    let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
                    let xr = if float32 {
                        x32.mapv(f64::from)
                    } else {
                        x.clone()
                    };
                    let want = reference_hessian(loss, &xr, &y, &w, intercept.then_some(0.4));
                    close(&got, &want);
                    let p_ = d + usize::from(intercept);
                    let h = got.slice(s![1..=p_, 1..]);
                    assert_eq!(h, h.t(), "{loss:?}: not symmetric");
                    // The same as a gradient pass's column.
                    let grad = sums(loss, 2, intercept, false, &refs).unwrap();
                    let grad: Array2<f64> =
                        grad.to_f64().into_owned().into_dimensionality().unwrap();
                    assert_eq!(grad.column(0), got.column(0));
                }
            }
        }
        // The tails: z from -800 to 800, finite sums.
        let xt = Array2::from_shape_fn((401, 1), |(i, _)| i as f64 * 4.0 - 800.0);
        let yt = Array1::from_shape_fn(401, |i| (i % 3 == 0) as u8 as f64);
        let blocks = [
            Block::F64(xt.clone().into_dyn()),
            Block::F64(yt.clone().into_dyn()),
            Block::F64(Array2::from_elem((1, 1), 1.0).into_dyn()),
            Block::F64(Array1::from(vec![0.0]).into_dyn()),
        ];
        let got = sums(
            GlmLoss::Logistic,
            1,
            true,
            true,
            &blocks.iter().collect::<Vec<_>>(),
        )
        .unwrap();
        let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
        assert!(got.iter().all(|v| v.is_finite()), "{got}");
        close(
            &got,
            &reference_hessian(
                GlmLoss::Logistic,
                &xt,
                &yt,
                &Array1::from(vec![1.0]),
                Some(0.0),
            ),
        );
    }

    /// The sums count y's values a fit refuses (a pass's first run is the fit's check of
    /// y): for each loss, those it cannot take, NaN, infinities, ones and values above 0,
    /// summed over the terms; the loss and gradient rows above are NaN where y is, as
    /// before.
    #[test]
    fn sums_count_the_values_of_y_a_fit_refuses() {
        let y = Array1::from(vec![
            0.0,
            1.0,
            2.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            0.5,
            1.0,
        ]);
        let x = Array2::from_elem((9, 1), 0.5);
        let w = Block::F64(Array2::from_elem((1, 1), 0.1).into_dyn());
        let mut blocks = Vec::new();
        for r in [0..4, 4..9] {
            blocks.push(Block::F64(x.slice(s![r.clone(), ..]).to_owned().into_dyn()));
            blocks.push(Block::F64(y.slice(s![r]).to_owned().into_dyn()));
            blocks.push(w.clone());
        }
        let refs: Vec<&Block> = blocks.iter().collect();
        for (loss, bad) in [
            // 2, -1, inf, -inf, 0.5; not NaN (counted as NaN).
            (GlmLoss::Logistic, 5.0),
            // -1, -inf.
            (GlmLoss::Poisson, 2.0),
            // NaN.
            (GlmLoss::Squared, 1.0),
        ] {
            for hessian in [false, true] {
                let got = sums(loss, 1, false, hessian, &refs).unwrap();
                let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
                assert_eq!(got.nrows(), 2 + GLM_COUNTS as usize);
                assert_eq!(
                    got.slice(s![2.., 0]).to_vec(),
                    [bad, 1.0, 2.0, 2.0, 5.0, 0.0, 0.0, 9.0, 0.0, 0.0, 0.0],
                    "{loss:?}"
                );
                assert!(got.slice(s![2.., 1..]).iter().all(|&v| v == 0.0));
            }
        }
    }

    /// Sample weights (y's block [m, 2]) weigh each row's loss, gradient and Hessian
    /// terms: weights 0, 1 and 2 give the sums of the rows repeated that many times (a
    /// row of weight 0 is absent, even where its loss overflows), for every loss, with
    /// and without the Hessian; the counts below are y's (each row once), the weights'
    /// sum, and the weights refused (negative, NaN, inf).
    #[test]
    fn weighted_sums_are_the_sums_of_repeated_rows() {
        let d = 3;
        let (x, y) = data(600, d, 7);
        let reps: Vec<usize> = (0..600).map(|i| i % 3).collect();
        let wts = Array1::from_iter(reps.iter().map(|&r| r as f64));
        let rows: Vec<usize> = (0..600)
            .flat_map(|i| std::iter::repeat_n(i, reps[i]))
            .collect();
        let xr = x.select(Axis(0), &rows);
        let mut x = x;
        // Overflows exp(z) of a Poisson loss: only in a row of weight 0.
        x[[0, 0]] = 2000.0;
        assert_eq!(reps[0], 0);
        let w = Array2::from_shape_fn((d, 1), |(i, _)| 0.3 - 0.2 * i as f64);
        let b = Array1::from(vec![0.1]);
        for loss in [GlmLoss::Logistic, GlmLoss::Poisson, GlmLoss::Squared] {
            let y = match loss {
                GlmLoss::Poisson => y.mapv(|v| v * 3.0),
                _ => y.clone(),
            };
            let yr = y.select(Axis(0), &rows);
            for hessian in [false, true] {
                let yw = ndarray::stack(Axis(1), &[y.view(), wts.view()]).unwrap();
                let weighted = [
                    Block::F64(x.clone().into_dyn()),
                    Block::F64(yw.into_dyn()),
                    Block::F64(w.clone().into_dyn()),
                    Block::F64(b.clone().into_dyn()),
                ];
                let repeated = [
                    Block::F64(xr.clone().into_dyn()),
                    Block::F64(yr.clone().into_dyn()),
                    Block::F64(w.clone().into_dyn()),
                    Block::F64(b.clone().into_dyn()),
                ];
                let run = |blocks: &[Block]| -> Array2<f64> {
                    let refs: Vec<&Block> = blocks.iter().collect();
                    sums(loss, 1, true, hessian, &refs)
                        .unwrap()
                        .to_f64()
                        .into_owned()
                        .into_dimensionality()
                        .unwrap()
                };
                let (got, want) = (run(&weighted), run(&repeated));
                let p = 1 + d + 1;
                close(
                    &got.slice(s![..p, ..]).to_owned(),
                    &want.slice(s![..p, ..]).to_owned(),
                );
                let counts = got.slice(s![p.., 0]).to_vec();
                assert_eq!(counts[GlmCount::Weight as usize], wts.sum(), "{loss:?}");
                assert_eq!(
                    counts[GlmCount::PositiveY as usize],
                    y.iter().filter(|&&v| v > 0.0).count() as f64
                );
            }
        }
        // X's NaN and inf, and the weights refused, are counted.
        let mut xb = Array2::from_elem((5, 2), 0.5);
        xb[[1, 0]] = f64::NAN;
        xb[[1, 1]] = f64::NAN;
        xb[[3, 1]] = f64::NEG_INFINITY;
        let yw = ndarray::array![
            [0.0, 1.0],
            [1.0, -1.0],
            [0.0, f64::NAN],
            [1.0, f64::INFINITY],
            [1.0, 0.0]
        ];
        let blocks = [
            Block::F64(xb.into_dyn()),
            Block::F64(yw.into_dyn()),
            Block::F64(Array2::<f64>::zeros((2, 1)).into_dyn()),
        ];
        let got = sums(
            GlmLoss::Logistic,
            1,
            false,
            false,
            &blocks.iter().collect::<Vec<_>>(),
        )
        .unwrap()
        .to_f64()
        .into_owned();
        let counts: Vec<f64> = got.iter().skip(3).copied().collect();
        use GlmCount::*;
        for (k, want) in [
            (NanX, 2.0),
            (InfX, 1.0),
            (NegativeWeight, 1.0),
            (NanWeight, 1.0),
            (InfWeight, 1.0),
        ] {
            assert_eq!(counts[k as usize], want, "{k:?}: {counts:?}");
        }
        assert!(counts[Weight as usize].is_nan());
    }

    /// The multinomial loss's sums for candidate parameters `theta` (class-major: each
    /// class's d coefficients, then its intercept), computed row by row from the
    /// definition: the loss sum v (logsumexp(z) - z_y), the gradient sum v (p_c -
    /// [c = y]) [x, 1], the Hessian sum v p_c (delta_cl - p_l) [x, 1] [x, 1]^T.
    fn multinomial_reference(
        x: &Array2<f64>,
        y: &[usize],
        v: &[f64],
        theta: &[f64],
        classes: usize,
        intercept: bool,
    ) -> (f64, Vec<f64>, Array2<f64>) {
        let d = x.ncols();
        let pc = d + usize::from(intercept);
        let p = classes * pc;
        let (mut loss, mut grad, mut hess) = (0.0, vec![0.0; p], Array2::zeros((p, p)));
        for (i, row) in x.rows().into_iter().enumerate() {
            let mut a = row.to_vec();
            if intercept {
                a.push(1.0);
            }
            let z: Vec<f64> = (0..classes)
                .map(|c| (0..pc).map(|j| theta[c * pc + j] * a[j]).sum())
                .collect();
            let lse = z.iter().map(|v| v.exp()).sum::<f64>().ln();
            let prob: Vec<f64> = z.iter().map(|v| (v - lse).exp()).collect();
            loss += v[i] * (lse - z[y[i]]);
            for c in 0..classes {
                let r = prob[c] - f64::from(u8::from(c == y[i]));
                for j in 0..pc {
                    grad[c * pc + j] += v[i] * r * a[j];
                    for l in 0..classes {
                        let s = prob[c] * (f64::from(u8::from(c == l)) - prob[l]);
                        for k in 0..pc {
                            hess[[c * pc + j, l * pc + k]] += v[i] * s * a[j] * a[k];
                        }
                    }
                }
            }
        }
        (loss, grad, hess)
    }

    /// The multinomial sums ([`GlmLoss::Multinomial`]) of several candidates at once,
    /// over row blocks one of which spans pieces, X cut into column blocks, with sample
    /// weights (0 among them), with and without an intercept: each candidate's loss,
    /// gradient and (a Newton pass) Hessian are the definition's, the gradient is the
    /// loss's by central differences, and y's counts are the class indices'.
    #[test]
    fn multinomial_sums_are_the_definitions() {
        let (classes, d, m) = (3usize, 5usize, 9_000usize);
        let loss = GlmLoss::Multinomial { classes: 3 };
        let (x, u) = data(m, d, 11);
        let (_, u2) = data(m, d, 12);
        let y: Vec<usize> = (0..m)
            .map(|i| (u[i] as usize + 2 * u2[i] as usize) % classes)
            .collect();
        let yf = Array1::from_iter(y.iter().map(|&c| c as f64));
        let v: Vec<f64> = (0..m).map(|i| [1.0, 0.0, 2.0, 0.5][i % 4]).collect();
        let yw = ndarray::stack(Axis(1), &[yf.view(), ArrayView1::from(&v)]).unwrap();
        for intercept in [true, false] {
            let pc = d + usize::from(intercept);
            let p = classes * pc;
            // Two candidates, far from 0 (z up to about +-6).
            let thetas: Vec<Vec<f64>> = (0..2)
                .map(|t| {
                    (0..p)
                        .map(|i| ((i * 7 + t * 3) % 11) as f64 / 4.0 - 1.2)
                        .collect()
                })
                .collect();
            let params = |thetas: &[Vec<f64>]| {
                let k = thetas.len();
                let w = Array2::from_shape_fn((d, classes * k), |(i, col)| {
                    thetas[col / classes][(col % classes) * pc + i]
                });
                let b = Array1::from_shape_fn(classes * k, |col| match intercept {
                    true => thetas[col / classes][(col % classes) * pc + d],
                    false => 0.0,
                });
                (w, b)
            };
            let run = |thetas: &[Vec<f64>], hessian: bool| -> Array2<f64> {
                let (w, b) = params(thetas);
                let mut blocks = Vec::new();
                // Row blocks of 7,000 (pieces of 6,553 rows at d = 5) and 2,000; X's
                // columns in blocks of 3 and 2.
                for r in [0..7000, 7000..m] {
                    for c in [0..3, 3..5] {
                        blocks.push(Block::F64(x.slice(s![r.clone(), c]).to_owned().into_dyn()));
                    }
                    blocks.push(Block::F64(
                        yw.slice(s![r.clone(), ..]).to_owned().into_dyn(),
                    ));
                    blocks.push(Block::F64(w.clone().into_dyn()));
                    if intercept {
                        blocks.push(Block::F64(b.clone().into_dyn()));
                    }
                }
                let refs: Vec<&Block> = blocks.iter().collect();
                sums(loss, 2, intercept, hessian, &refs)
                    .unwrap()
                    .to_f64()
                    .into_owned()
                    .into_dimensionality()
                    .unwrap()
            };
            let near = |a: f64, b: f64, rtol: f64| (a - b).abs() <= rtol * (1.0 + b.abs());
            let got = run(&thetas, false);
            assert_eq!(got.dim(), (1 + p + GLM_COUNTS as usize, 2));
            for (t, theta) in thetas.iter().enumerate() {
                let (l, g, _) = multinomial_reference(&x, &y, &v, theta, classes, intercept);
                assert!(near(got[[0, t]], l, 1e-12), "{} {l}", got[[0, t]]);
                for i in 0..p {
                    assert!(
                        near(got[[1 + i, t]], g[i], 1e-11),
                        "{i}: {} {}",
                        got[[1 + i, t]],
                        g[i]
                    );
                }
            }
            // The gradient is the loss's: central differences along each parameter.
            let h = 1e-5;
            for i in 0..p {
                let mut up = thetas[0].clone();
                let mut down = thetas[0].clone();
                up[i] += h;
                down[i] -= h;
                let f = run(&[up, down], false);
                let fd = (f[[0, 0]] - f[[0, 1]]) / (2.0 * h);
                assert!(
                    near(fd, got[[1 + i, 0]], 1e-6),
                    "{i}: {fd} {}",
                    got[[1 + i, 0]]
                );
            }
            // A Newton pass at candidate 1: the same column, and the whole Hessian.
            let newton = run(&thetas[1..], true);
            assert_eq!(newton.dim(), (1 + p + GLM_COUNTS as usize, 1 + p));
            // (The counts are candidate 0's column's only.)
            let sums = s![..1 + p];
            for (a, b) in newton
                .column(0)
                .slice(sums)
                .iter()
                .zip(got.column(1).slice(sums))
            {
                assert!(near(*a, *b, 1e-12), "{a} {b}");
            }
            let (_, _, hess) = multinomial_reference(&x, &y, &v, &thetas[1], classes, intercept);
            let hs = newton.slice(s![1..=p, 1..]);
            assert_eq!(hs, hs.t(), "not symmetric");
            for ((i, j), want) in hess.indexed_iter() {
                assert!(
                    near(hs[[i, j]], *want, 1e-10),
                    "{i} {j}: {} {want}",
                    hs[[i, j]]
                );
            }
            // Counts: no label refused; "ones" the rows of the last class, the weights'
            // sum.
            let counts = got.slice(s![1 + p.., 0]).to_vec();
            assert_eq!(counts[GlmCount::RefusedY as usize], 0.0);
            let last = y.iter().filter(|&&c| c == classes - 1).count() as f64;
            assert_eq!(counts[GlmCount::OnesY as usize], last);
            assert_eq!(counts[GlmCount::Weight as usize], v.iter().sum::<f64>());
        }
        // Labels that are no class index are counted (3, -1, 0.5; NaN as NaN), and give
        // a NaN loss, not a panic.
        let yb = Array1::from(vec![0.0, 3.0, -1.0, 0.5, f64::NAN, 2.0]);
        let xb = Array2::from_elem((6, 1), 0.5);
        let blocks = [
            Block::F64(xb.into_dyn()),
            Block::F64(yb.into_dyn()),
            Block::F64(Array2::<f64>::zeros((1, 3)).into_dyn()),
        ];
        let got = sums(loss, 1, false, false, &blocks.iter().collect::<Vec<_>>()).unwrap();
        let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
        assert!(got[[0, 0]].is_nan());
        assert_eq!(got[[1 + 3 + GlmCount::RefusedY as usize, 0]], 3.0);
        assert_eq!(got[[1 + 3 + GlmCount::NanY as usize, 0]], 1.0);
    }

    #[test]
    fn malformed_terms_are_refused() {
        let x = Block::F64(Array2::<f64>::zeros((5, 2)).into_dyn());
        let y = Block::F64(Array1::<f64>::zeros(4).into_dyn());
        let w = Block::F64(Array2::<f64>::zeros((2, 3)).into_dyn());
        let e = sums(GlmLoss::Logistic, 1, false, false, &[&x, &y, &w]).unwrap_err();
        assert!(e.contains("do not agree"), "{e}");
        let e = sums(GlmLoss::Logistic, 1, true, false, &[&x, &y, &w]).unwrap_err();
        assert!(e.contains("terms of 4 blocks"), "{e}");
        let x = Block::F64(Array2::<f64>::zeros((4, 2)).into_dyn());
        let e = sums(GlmLoss::Logistic, 1, false, true, &[&x, &y, &w]).unwrap_err();
        assert!(e.contains("one candidate"), "{e}");
    }
}
