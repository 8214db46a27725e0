//! A pass of a model's fit in one sweep over each block of rows ([`Kernel::GlmSums`]):
//! z = X W + b for every candidate at once (one GEMM per piece of rows), the loss and the
//! residual r of each element in one loop, then X^T r (one GEMM), the pieces small enough
//! to stay in cache while X's rows are read for the second product. The same expressions
//! as separate kernels (`X @ w_ + b_`, `sigmoid`, `maximum`, `abs`, `exp`, `log1p`, ...)
//! each made an m x k block, and ran three transcendental functions per element where
//! this runs two.
//!
//! [`Kernel::GlmSums`]: nums_layout::batch::Kernel::GlmSums

use std::borrow::Cow;

use ndarray::{Array2, ArrayD, ArrayView1, ArrayView2, Ix1, Ix2, linalg::general_mat_mul, s};
use nums_layout::Block;
use nums_layout::batch::GlmLoss;

/// Bytes of X's rows in one piece: the piece's rows are read by the first product and
/// again, from cache, by the second.
const PIECE_BYTES: usize = 256 << 10;

/// The loss at linear predictor `z` and target `y`, and the residual dloss/dz.
#[inline]
fn loss_and_residual(loss: GlmLoss, z: f64, y: f64) -> (f64, f64) {
    match loss {
        GlmLoss::Logistic => {
            // log(1 + exp(z)) = max(z, 0) + log1p(exp(-|z|)), and sigmoid(z) from the
            // same exponential: no overflow either way.
            let e = (-z.abs()).exp();
            let p = if z >= 0.0 {
                1.0 / (1.0 + e)
            } else {
                e / (1.0 + e)
            };
            (z.max(0.0) - z * y + e.ln_1p(), p - y)
        }
        GlmLoss::Poisson => {
            let p = z.exp();
            (p - z * y, p - y)
        }
        GlmLoss::Squared => {
            let r = z - y;
            (0.5 * r * r, r)
        }
    }
}

/// The sums of [`Kernel::GlmSums`] over its terms (each: `cols` blocks of X, y, W and,
/// with `intercept`, b): a [1 + d + intercept, k] float64 block.
///
/// [`Kernel::GlmSums`]: nums_layout::batch::Kernel::GlmSums
pub fn sums(
    loss: GlmLoss,
    cols: usize,
    intercept: bool,
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
    let [d, k] = *w0 else {
        return Err(format!("W must be 2-D (features x candidates), not {w0:?}"));
    };
    let mut out = Array2::<f64>::zeros((1 + d + usize::from(intercept), k));
    for term in inputs.chunks(arity) {
        add_term(loss, &term[..cols], term[cols], &term[cols + 1..], &mut out)?;
    }
    Ok(Block::F64(out.into_dyn()))
}

/// Adds one row block's sums into `out` (rows: loss, X^T r, then sum r with b).
fn add_term(
    loss: GlmLoss,
    xs: &[&Block],
    y: &Block,
    params: &[&Block],
    out: &mut Array2<f64>,
) -> Result<(), String> {
    let xs: Vec<Cow<'_, ArrayD<f64>>> = xs.iter().map(|b| b.to_f64()).collect();
    let xs: Vec<ArrayView2<'_, f64>> = xs
        .iter()
        .map(|x| x.view().into_dimensionality::<Ix2>())
        .collect::<Result<_, _>>()
        .map_err(|_| "X's blocks must be 2-D".to_string())?;
    let y = y.to_f64();
    let y: ArrayView1<'_, f64> = y
        .view()
        .into_dimensionality::<Ix1>()
        .map_err(|_| "y's block must be 1-D".to_string())?;
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
    let (d, k) = w.dim();
    let m = y.len();
    let widths: Vec<usize> = xs.iter().map(|x| x.ncols()).collect();
    if xs.iter().any(|x| x.nrows() != m)
        || widths.iter().sum::<usize>() != d
        || b.is_some_and(|b| b.len() != k)
        || out.dim() != (1 + d + usize::from(b.is_some()), k)
    {
        return Err(format!(
            "a model's sums over X blocks of {:?}, y of {m}, W of {:?}, b of {:?}: the shapes do not agree",
            xs.iter().map(|x| x.dim()).collect::<Vec<_>>(),
            w.dim(),
            b.map(|b| b.len())
        ));
    }
    let rows = (PIECE_BYTES / (8 * d.max(1))).clamp(64, 8192).min(m.max(1));
    let mut z = Array2::<f64>::zeros((rows, k));
    // Sums of a piece, then added to the block's: rounding grows with the piece's rows
    // and the pieces' count, not with the block's rows.
    let mut piece_loss = vec![0.0; k];
    let mut piece_r = vec![0.0; k];
    let mut total_loss = vec![0.0; k];
    let mut total_r = vec![0.0; k];
    for start in (0..m).step_by(rows) {
        let end = (start + rows).min(m);
        let mut zc = z.slice_mut(s![..end - start, ..]);
        let mut at = 0;
        for (c, x) in xs.iter().enumerate() {
            let wc = w.slice(s![at..at + widths[c], ..]);
            let beta = if c == 0 { 0.0 } else { 1.0 };
            general_mat_mul(1.0, &x.slice(s![start..end, ..]), &wc, beta, &mut zc);
            at += widths[c];
        }
        piece_loss.fill(0.0);
        piece_r.fill(0.0);
        for (mut row, &yi) in zc.rows_mut().into_iter().zip(&y.slice(s![start..end])) {
            for (j, zv) in row.iter_mut().enumerate() {
                let zj = *zv + b.map_or(0.0, |b| b[j]);
                let (l, r) = loss_and_residual(loss, zj, yi);
                piece_loss[j] += l;
                piece_r[j] += r;
                *zv = r;
            }
        }
        for j in 0..k {
            total_loss[j] += piece_loss[j];
            total_r[j] += piece_r[j];
        }
        // X^T r, each column block into its rows of the gradient.
        let mut at = 1;
        for (c, x) in xs.iter().enumerate() {
            let mut g = out.slice_mut(s![at..at + widths[c], ..]);
            general_mat_mul(
                1.0,
                &x.slice(s![start..end, ..]).t(),
                &zc.view(),
                1.0,
                &mut g,
            );
            at += widths[c];
        }
    }
    for j in 0..k {
        out[[0, j]] += total_loss[j];
        if b.is_some() {
            out[[1 + d, j]] += total_r[j];
        }
    }
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
        };
        let r = p - yc;
        let mut rows = vec![l.sum_axis(Axis(0)).insert_axis(Axis(0)), x.t().dot(&r)];
        if b.is_some() {
            rows.push(r.sum_axis(Axis(0)).insert_axis(Axis(0)));
        }
        let views: Vec<_> = rows.iter().map(|a| a.view()).collect();
        concatenate(Axis(0), &views).unwrap()
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
                let got = sums(loss, 3, intercept, &refs).unwrap();
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
            &blocks.iter().collect::<Vec<_>>(),
        )
        .unwrap();
        let got: Array2<f64> = got.to_f64().into_owned().into_dimensionality().unwrap();
        assert!(got.iter().all(|v| v.is_finite()), "{got}");
        close(&got, &reference(GlmLoss::Logistic, &xt, &yt, &wt, None));
    }

    #[test]
    fn malformed_terms_are_refused() {
        let x = Block::F64(Array2::<f64>::zeros((5, 2)).into_dyn());
        let y = Block::F64(Array1::<f64>::zeros(4).into_dyn());
        let w = Block::F64(Array2::<f64>::zeros((2, 3)).into_dyn());
        let e = sums(GlmLoss::Logistic, 1, false, &[&x, &y, &w]).unwrap_err();
        assert!(e.contains("do not agree"), "{e}");
        let e = sums(GlmLoss::Logistic, 1, true, &[&x, &y, &w]).unwrap_err();
        assert!(e.contains("terms of 4 blocks"), "{e}");
    }
}
