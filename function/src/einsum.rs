//! Einstein sums of blocks. Every contraction the job language has (`@`, dot, outer,
//! tensordot, trace, einsum such as MTTKRP) is one of these, computed as pairwise
//! matrix products in the operands' promoted dtype: BLAS `dgemm`, `sgemm`, `zgemm` and
//! `cgemm` for float64, float32, complex128 and complex64; for integer operands (BLAS has
//! no integer GEMM) a cache-blocked loop in wrapping int64, NumPy's bits.

use std::collections::HashSet;
use std::num::Wrapping;

use ndarray::{
    ArrayD, ArrayView2, ArrayViewMut2, CowArray, Dimension, Ix3, IxDyn, LinalgScalar,
    linalg::general_mat_mul, s,
};
use nums_layout::{Block, C64, C128, DType};
use rayon::prelude::*;

/// An element type einsum computes in: float64 (BLAS) or wrapping int64.
pub trait Elem: LinalgScalar + Send + Sync + std::ops::AddAssign {
    /// Neither infinite nor NaN (every int).
    fn finite(&self) -> bool;

    /// `c = a @ b`, or `c += a @ b` where `accumulate`.
    fn gemm(
        a: &ArrayView2<'_, Self>,
        b: &ArrayView2<'_, Self>,
        c: &mut ArrayViewMut2<'_, Self>,
        accumulate: bool,
    );
}

impl Elem for f64 {
    fn finite(&self) -> bool {
        self.is_finite()
    }

    fn gemm(
        a: &ArrayView2<'_, f64>,
        b: &ArrayView2<'_, f64>,
        c: &mut ArrayViewMut2<'_, f64>,
        accumulate: bool,
    ) {
        // BLAS reads a transposed operand in place.
        general_mat_mul(1.0, a, b, if accumulate { 1.0 } else { 0.0 }, c);
    }
}

/// float32, complex64 and complex128 through BLAS (`sgemm`, `cgemm`, `zgemm`) as float64.
macro_rules! blas_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            fn finite(&self) -> bool {
                nums_layout::Elem::to_c128(*self).is_finite()
            }

            fn gemm(
                a: &ArrayView2<'_, $t>,
                b: &ArrayView2<'_, $t>,
                c: &mut ArrayViewMut2<'_, $t>,
                accumulate: bool,
            ) {
                blas_gemm(a, b, c, accumulate);
            }
        }
    )*};
}
blas_elem!(f32, C64, C128);

/// `c = a @ b` (or `+=`) by ndarray's BLAS dispatch.
fn blas_gemm<T: LinalgScalar>(
    a: &ArrayView2<'_, T>,
    b: &ArrayView2<'_, T>,
    c: &mut ArrayViewMut2<'_, T>,
    accumulate: bool,
) {
    let beta = if accumulate { T::one() } else { T::zero() };
    general_mat_mul(T::one(), a, b, beta, c);
}

impl Elem for Wrapping<i64> {
    fn finite(&self) -> bool {
        true
    }

    fn gemm(
        a: &ArrayView2<'_, Self>,
        b: &ArrayView2<'_, Self>,
        c: &mut ArrayViewMut2<'_, Self>,
        accumulate: bool,
    ) {
        let (m, k, n) = (a.nrows(), a.ncols(), b.ncols());
        let (a, b) = (a.as_standard_layout(), b.as_standard_layout());
        let (a, b) = (
            a.as_slice().expect("standard layout"),
            b.as_slice().expect("standard layout"),
        );
        if !accumulate {
            c.fill(Wrapping(0));
        }
        if n == 0 {
            return;
        }
        // Straight into `c` where it is one row-major slice (the usual case).
        if let Some(out) = c.as_slice_mut() {
            return int_gemm(a, b, out, k, n);
        }
        let mut out = vec![Wrapping(0i64); m * n];
        int_gemm(a, b, &mut out, k, n);
        *c += &ndarray::ArrayView2::from_shape((m, n), &out).expect("m x n");
    }
}

/// `c` (m x n, row-major) += `a` (m x k) @ `b` (k x n), in wrapping int64. Rows of
/// the output are split over threads in runs of `MC`; within a run, `b` is walked in
/// panels of `KC` rows by `NC` columns (256 KiB) that stay in cache while each row of the
/// run uses them; the innermost loop runs along a row of `b` and of `c`.
fn int_gemm(a: &[Wrapping<i64>], b: &[Wrapping<i64>], c: &mut [Wrapping<i64>], k: usize, n: usize) {
    const MC: usize = 64;
    const KC: usize = 128;
    const NC: usize = 256;
    c.par_chunks_mut(MC * n).enumerate().for_each(|(chunk, c)| {
        let row0 = chunk * MC;
        let rows = c.len() / n;
        for j0 in (0..n).step_by(NC) {
            let j1 = (j0 + NC).min(n);
            for p0 in (0..k).step_by(KC) {
                let p1 = (p0 + KC).min(k);
                for i in 0..rows {
                    let a_row = &a[(row0 + i) * k..(row0 + i + 1) * k];
                    let c_row = &mut c[i * n + j0..i * n + j1];
                    for (p, &x) in a_row.iter().enumerate().take(p1).skip(p0) {
                        if x.0 == 0 {
                            continue;
                        }
                        let b_row = &b[p * n + j0..p * n + j1];
                        for (c, &y) in c_row.iter_mut().zip(b_row) {
                            *c += x * y;
                        }
                    }
                }
            }
        }
    });
}

/// Subscripts such as `"ij,jk->ik"`: letters of each operand and of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    /// Each operand's letters, one per axis.
    pub inputs: Vec<Vec<char>>,
    /// The output's letters.
    pub output: Vec<char>,
}

impl Spec {
    /// Whether the function computes this einsum as a matrix product scaled along its
    /// contracted letter (`ji,j,jk->ik`), a piece of rows at a time.
    pub fn is_scaled_product(&self) -> bool {
        scaled_product(self).is_some()
    }

    /// Whether the function computes this einsum as an elementwise product summed over
    /// leading or trailing axes (`ij,ij->j`), a row at a time.
    pub fn is_product_sum(&self) -> bool {
        product_sum(self).is_some()
    }

    /// Parses explicit-output subscripts (the driver writes them so; users' implicit ones
    /// are made explicit there).
    pub fn parse(s: &str) -> Result<Spec, String> {
        let (lhs, rhs) = s
            .split_once("->")
            .ok_or_else(|| format!("einsum subscripts {s:?} have no '->'"))?;
        let letters = |t: &str| -> Result<Vec<char>, String> {
            let v: Vec<char> = t.chars().filter(|c| !c.is_whitespace()).collect();
            match v.iter().find(|c| !c.is_ascii_alphabetic()) {
                Some(c) => Err(format!("einsum subscripts {s:?}: {c:?} is not a letter")),
                None => Ok(v),
            }
        };
        let inputs = lhs.split(',').map(letters).collect::<Result<Vec<_>, _>>()?;
        let output = letters(rhs)?;
        let mut seen = HashSet::new();
        for c in &output {
            if !seen.insert(c) {
                return Err(format!(
                    "einsum subscripts {s:?}: output letter {c:?} is repeated"
                ));
            }
            if !inputs.iter().any(|i| i.contains(c)) {
                return Err(format!(
                    "einsum subscripts {s:?}: output letter {c:?} is in no operand"
                ));
            }
        }
        Ok(Spec { inputs, output })
    }
}

/// The sum over terms (each `operands` consecutive blocks) of the einsum of each term: in
/// wrapping int64 where every block is int64 or bool, else in float64.
pub fn sum_of_terms(subscripts: &str, operands: usize, inputs: &[&Block]) -> Result<Block, String> {
    let spec = Spec::parse(subscripts)?;
    if spec.inputs.len() != operands
        || operands == 0
        || inputs.is_empty()
        || !inputs.len().is_multiple_of(operands)
    {
        return Err(format!(
            "einsum {subscripts:?} of {operands} operands got {} input blocks",
            inputs.len()
        ));
    }
    let dtype = inputs
        .iter()
        .map(|b| b.dtype())
        .reduce(DType::promote)
        .expect("inputs");
    if dtype.is_exact() {
        // Every int type in wrapping int64: its low bits are the narrower type's wrapped
        // sum of products, and uint64's are its own.
        let sum = terms(&spec, inputs, |b| CowArray::from(b.to_i64().mapv(Wrapping)))?;
        return Ok(Block::I64(sum.mapv(|v| v.0)));
    }
    fn cow<T: nums_layout::Elem>(b: &Block) -> CowArray<'_, T, IxDyn> {
        match b.to_elem::<T>() {
            std::borrow::Cow::Borrowed(a) => CowArray::from(a.view()),
            std::borrow::Cow::Owned(a) => CowArray::from(a),
        }
    }
    Ok(match dtype {
        DType::Float32 => Block::F32(terms(&spec, inputs, cow::<f32>)?),
        DType::Complex64 => Block::C64(terms(&spec, inputs, cow::<C64>)?),
        DType::Complex128 => Block::C128(terms(&spec, inputs, cow::<C128>)?),
        _ => Block::F64(terms(&spec, inputs, as_f64)?),
    })
}

/// A block's values as float64, borrowed where they are float64.
fn as_f64(b: &Block) -> CowArray<'_, f64, IxDyn> {
    match b.to_f64() {
        std::borrow::Cow::Borrowed(a) => CowArray::from(a.view()),
        std::borrow::Cow::Owned(a) => CowArray::from(a),
    }
}

/// The sum of the einsums of each term's blocks, each block made an array by `elems`.
fn terms<'b, T: Elem>(
    spec: &Spec,
    inputs: &[&'b Block],
    elems: impl Fn(&'b Block) -> CowArray<'b, T, IxDyn>,
) -> Result<ArrayD<T>, String> {
    if let Some(letters) = matrix_product(spec) {
        return sum_of_products(spec, letters, inputs, elems);
    }
    if let Some(scaled) = scaled_product(spec) {
        return sum_of_scaled_products(spec, scaled, inputs, elems);
    }
    if let Some(trailing) = product_sum(spec) {
        return sum_of_product_sums(spec, trailing, inputs, elems);
    }
    let mut acc: Option<ArrayD<T>> = None;
    for term in inputs.chunks(spec.inputs.len()) {
        let r = einsum_of(spec, term.iter().map(|&b| elems(b)).collect())?;
        acc = Some(match acc {
            None => r,
            Some(mut a) => {
                a += &r;
                a
            }
        });
    }
    Ok(acc.expect("at least one term"))
}

/// The letters (rows, contracted, columns) of an einsum that is one matrix product
/// (`ij,jk->ik`, either operand possibly stored transposed), or `None`.
fn matrix_product(spec: &Spec) -> Option<(char, char, char)> {
    let ([x, y], &[i, k]) = (&spec.inputs[..], &spec.output[..]) else {
        return None;
    };
    let j = *x.iter().find(|&&c| c != i)?;
    let two = |o: &[char], p: char, q: char| o.len() == 2 && o.contains(&p) && o.contains(&q);
    (i != k && j != k && two(x, i, j) && two(y, j, k)).then_some((i, j, k))
}

/// The sum of matrix products `Σ a_t @ b_t` (a blocked `A @ B`'s block of C), each product
/// added into one output by GEMM itself (`beta = 1`): no product is a buffer of its own,
/// and no pass adds it.
fn sum_of_products<'b, T: Elem>(
    spec: &Spec,
    (i, j, k): (char, char, char),
    inputs: &[&'b Block],
    elems: impl Fn(&'b Block) -> CowArray<'b, T, IxDyn>,
) -> Result<ArrayD<T>, String> {
    let mut acc: Option<ndarray::Array2<T>> = None;
    for term in inputs.chunks(2) {
        let (x, y) = (elems(term[0]), elems(term[1]));
        for (n, (a, l)) in [(&x, &spec.inputs[0]), (&y, &spec.inputs[1])]
            .into_iter()
            .enumerate()
        {
            if a.ndim() != 2 {
                return Err(format!(
                    "einsum operand {n} has {} axes but subscripts {:?}",
                    a.ndim(),
                    l.iter().collect::<String>()
                ));
            }
        }
        let (x, y) = (
            Labeled {
                a: x,
                l: spec.inputs[0].clone(),
            },
            Labeled {
                a: y,
                l: spec.inputs[1].clone(),
            },
        );
        let (ax, (m, kx)) = matrix(&x, &[i], &[j]);
        let (ay, (ky, n)) = matrix(&y, &[j], &[k]);
        if kx != ky {
            return Err(format!("einsum letter {j:?} has sizes {kx} and {ky}"));
        }
        let c = acc.get_or_insert_with(|| ndarray::Array2::zeros((m, n)));
        if c.dim() != (m, n) {
            return Err(format!(
                "einsum terms of shapes {:?} and {:?}",
                c.dim(),
                (m, n)
            ));
        }
        T::gemm(&ax.view(), &ay.view(), &mut c.view_mut(), true);
    }
    Ok(acc.ok_or("einsum of no terms")?.into_dyn())
}

/// A matrix product whose contracted letter also scales it (`ji,j,jk->ik`: `A.T @ (B *
/// v[:, None])`, a weighted Gram matrix): the letters (rows, contracted, columns) and the
/// positions of the two matrices and the vector, or `None`.
fn scaled_product(spec: &Spec) -> Option<((char, char, char), [usize; 3])> {
    if spec.inputs.len() != 3 {
        return None;
    }
    let v = spec.inputs.iter().position(|l| l.len() == 1)?;
    let (x, y) = match v {
        0 => (1, 2),
        1 => (0, 2),
        _ => (0, 1),
    };
    let pair = Spec {
        inputs: vec![spec.inputs[x].clone(), spec.inputs[y].clone()],
        output: spec.output.clone(),
    };
    let (i, j, k) = matrix_product(&pair)?;
    (spec.inputs[v] == [j]).then_some(((i, j, k), [x, y, v]))
}

/// Rows of the scaled operand scaled at a time: a piece of about 512 KiB, which stays in
/// cache between its scaling and the GEMM that reads it.
const SCALED_PIECE_BYTES: usize = 512 << 10;

/// `Σ_t a_t @ (v_t[:, None] * b_t)` (see [`scaled_product`]) added into one output by GEMM
/// itself, the scaled rows of `b` made a piece at a time in one reused buffer: the products
/// `a_ij (v_j b_jk)` NumPy's `A.T @ (B * v[:, None])` sums, with no scaled copy of a block.
fn sum_of_scaled_products<'b, T: Elem>(
    spec: &Spec,
    ((i, j, k), [px, py, pv]): ((char, char, char), [usize; 3]),
    inputs: &[&'b Block],
    elems: impl Fn(&'b Block) -> CowArray<'b, T, IxDyn>,
) -> Result<ArrayD<T>, String> {
    let mut acc: Option<ndarray::Array2<T>> = None;
    let mut buf: Vec<T> = Vec::new();
    for term in inputs.chunks(3) {
        let labeled = |p: usize| -> Result<Labeled<'b, T>, String> {
            let a = elems(term[p]);
            let l = &spec.inputs[p];
            if a.ndim() != l.len() {
                return Err(format!(
                    "einsum operand {p} has {} axes but subscripts {:?}",
                    a.ndim(),
                    l.iter().collect::<String>()
                ));
            }
            Ok(Labeled { a, l: l.clone() })
        };
        let (x, y, v) = (labeled(px)?, labeled(py)?, labeled(pv)?);
        let (ax, (m, kx)) = matrix(&x, &[i], &[j]);
        let (ay, (ky, n)) = matrix(&y, &[j], &[k]);
        let kv = v.a.len();
        if kx != ky || kx != kv {
            return Err(format!("einsum letter {j:?} has sizes {kx}, {ky} and {kv}"));
        }
        let c = acc.get_or_insert_with(|| ndarray::Array2::zeros((m, n)));
        if c.dim() != (m, n) {
            return Err(format!(
                "einsum terms of shapes {:?} and {:?}",
                c.dim(),
                (m, n)
            ));
        }
        let v =
            v.a.view()
                .into_shape_with_order(kv)
                .map_err(|e| e.to_string())?;
        let rows = (SCALED_PIECE_BYTES / (n.max(1) * std::mem::size_of::<T>())).max(16);
        for at in (0..kx).step_by(rows) {
            let end = (at + rows).min(kx);
            buf.clear();
            for (r, &s) in ay
                .slice(s![at..end, ..])
                .outer_iter()
                .zip(v.slice(s![at..end]))
            {
                buf.extend(r.iter().map(|&b| s * b));
            }
            let piece = ArrayView2::from_shape((end - at, n), &buf).map_err(|e| e.to_string())?;
            T::gemm(&ax.slice(s![.., at..end]), &piece, &mut c.view_mut(), true);
        }
    }
    Ok(acc.ok_or("einsum of no terms")?.into_dyn())
}

/// An elementwise product summed over leading or trailing axes (`ij,ij->j`, `sum(U * V,
/// axis=0)`; `ij,ij->i`; `ij,ij->`): whether the output keeps the trailing axes (else the
/// leading ones), or `None`.
fn product_sum(spec: &Spec) -> Option<bool> {
    let [x, y] = &spec.inputs[..] else {
        return None;
    };
    let distinct = x.iter().collect::<HashSet<_>>().len() == x.len();
    if x != y || !distinct {
        return None;
    }
    let o = &spec.output[..];
    if x.ends_with(o) {
        Some(true)
    } else if x.starts_with(o) {
        Some(false)
    } else {
        None
    }
}

/// `Σ_t Σ x_t * y_t` over the axes [`product_sum`] sums, a row at a time (rows added in
/// order into the output, as NumPy's sum over a leading axis adds them): no product block
/// is made.
fn sum_of_product_sums<'b, T: Elem>(
    spec: &Spec,
    trailing: bool,
    inputs: &[&'b Block],
    elems: impl Fn(&'b Block) -> CowArray<'b, T, IxDyn>,
) -> Result<ArrayD<T>, String> {
    let keep = spec.output.len();
    let mut acc: Option<ArrayD<T>> = None;
    for term in inputs.chunks(2) {
        let (x, y) = (elems(term[0]), elems(term[1]));
        if x.ndim() != spec.inputs[0].len() || x.shape() != y.shape() {
            return Err(format!(
                "einsum {:?} of shapes {:?} and {:?}",
                spec.inputs[0].iter().collect::<String>(),
                x.shape(),
                y.shape()
            ));
        }
        let kept = if trailing {
            &x.shape()[x.ndim() - keep..]
        } else {
            &x.shape()[..keep]
        };
        let acc = acc.get_or_insert_with(|| ArrayD::zeros(IxDyn(kept)));
        if acc.shape() != kept {
            return Err(format!(
                "einsum terms of shapes {:?} and {kept:?}",
                acc.shape()
            ));
        }
        let (x, y) = (x.as_standard_layout(), y.as_standard_layout());
        let (xs, ys) = (
            x.as_slice().expect("standard"),
            y.as_slice().expect("standard"),
        );
        let a = acc.as_slice_mut().expect("standard");
        if xs.is_empty() || a.is_empty() {
            continue;
        }
        if trailing {
            for (xr, yr) in xs.chunks_exact(a.len()).zip(ys.chunks_exact(a.len())) {
                for ((s, &p), &q) in a.iter_mut().zip(xr).zip(yr) {
                    *s += p * q;
                }
            }
        } else {
            let cols = xs.len() / a.len();
            for ((s, xr), yr) in a
                .iter_mut()
                .zip(xs.chunks_exact(cols))
                .zip(ys.chunks_exact(cols))
            {
                *s += xr.iter().zip(yr).fold(T::zero(), |t, (&p, &q)| t + p * q);
            }
        }
    }
    Ok(acc.ok_or("einsum of no terms")?)
}

/// An operand with a letter per axis; borrowed from its block until an op must copy.
struct Labeled<'a, T> {
    a: CowArray<'a, T, IxDyn>,
    l: Vec<char>,
}

/// The einsum of one block per operand, in float64.
pub fn einsum(spec: &Spec, blocks: &[&Block]) -> Result<ArrayD<f64>, String> {
    einsum_of(spec, blocks.iter().map(|&b| as_f64(b)).collect())
}

/// The einsum of one array per operand.
fn einsum_of<T: Elem>(
    spec: &Spec,
    arrays: Vec<CowArray<'_, T, IxDyn>>,
) -> Result<ArrayD<T>, String> {
    let mut ops = Vec::new();
    for (k, (a, l)) in arrays.into_iter().zip(&spec.inputs).enumerate() {
        if a.ndim() != l.len() {
            return Err(format!(
                "einsum operand {k} has {} axes but subscripts {:?}",
                a.ndim(),
                l.iter().collect::<String>()
            ));
        }
        ops.push(diagonal(a, l.clone())?);
    }
    contract_all(ops, &spec.output)
}

/// The letters of operand `i` that no other operand and not the output has.
fn lone<T>(ops: &[Labeled<'_, T>], i: usize, output: &[char]) -> Vec<char> {
    ops[i]
        .l
        .iter()
        .copied()
        .filter(|c| {
            !output.contains(c)
                && ops
                    .iter()
                    .enumerate()
                    .all(|(j, o)| j == i || !o.l.contains(c))
        })
        .collect()
}

/// `Σ Π ops` over every letter not in `output`, as NumPy's einsum defines it: the sum of
/// every product. Summing a letter out of some operands first (a lone letter of one
/// operand, or a pair contracted before the others join) gives the same value where every
/// operand left out of that step is finite; otherwise an infinity meeting a 0 or a sum that
/// cancels could hide a NaN (`Σ_jk a_j b_k` with an infinity in `a` and a 0 in `b` is NaN,
/// `(Σ_j a_j)(Σ_k b_k)` may not be). Where no step is exact, the sum runs over one summed
/// letter's indices, a slice at a time.
fn contract_all<T: Elem>(
    mut ops: Vec<Labeled<'_, T>>,
    output: &[char],
) -> Result<ArrayD<T>, String> {
    let many = ops.len() > 1;
    let lonely: Vec<Vec<char>> = (0..ops.len()).map(|i| lone(&ops, i, output)).collect();
    // Which operands are finite: read only where an exactness question is asked (a lone
    // letter beside other operands, or more than two operands).
    let finite = |o: &Labeled<'_, T>| o.a.iter().all(T::finite);
    let asks = many && (ops.len() > 2 || lonely.iter().any(|l| !l.is_empty()));
    let mut ok: Vec<bool> = if asks {
        ops.iter().map(finite).collect()
    } else {
        vec![true; ops.len()]
    };
    for (i, only) in lonely.into_iter().enumerate() {
        if only.is_empty() {
            continue;
        }
        if !ok.iter().enumerate().all(|(j, &f)| j == i || f) {
            return sum_of_slices(&ops, output, only[0]);
        }
        let mut summed = CowArray::from(ops[i].a.view());
        let mut l = ops[i].l.clone();
        for &c in &only {
            let ax = l.iter().position(|x| *x == c).expect("letter");
            summed = CowArray::from(summed.sum_axis(ndarray::Axis(ax)));
            l.remove(ax);
        }
        let summed = Labeled {
            a: CowArray::from(summed.into_owned()),
            l,
        };
        let summed_ok = !asks || finite(&summed);
        if many && ok[i] && !summed_ok {
            // Finite values whose sum overflowed: the products may not.
            return sum_of_slices(&ops, output, only[0]);
        }
        ops[i] = summed;
        ok[i] = summed_ok;
    }
    // Pairs in the order of the least work of the path they start ([`pairs_by_cost`]).
    // The last two operands' contraction is one sum of products, always exact.
    while ops.len() > 1 {
        let later_of = |ops: &[Labeled<'_, T>], p: usize, q: usize| -> HashSet<char> {
            output
                .iter()
                .chain(
                    ops.iter()
                        .enumerate()
                        .filter(|&(j, _)| j != p && j != q)
                        .flat_map(|(_, o)| o.l.iter()),
                )
                .copied()
                .collect()
        };
        let exact = |p: usize, q: usize| {
            let later = later_of(&ops, p, q);
            let sums = ops[p]
                .l
                .iter()
                .any(|c| ops[q].l.contains(c) && !later.contains(c));
            !sums || ok.iter().enumerate().all(|(j, &f)| j == p || j == q || f)
        };
        let Some((p, q)) = pairs_by_cost(&ops, output)
            .into_iter()
            .find(|&(p, q)| exact(p, q))
        else {
            let c = ops
                .iter()
                .flat_map(|o| o.l.iter())
                .find(|c| !output.contains(c))
                .copied()
                .expect("a pair that sums is over a letter not in the output");
            return sum_of_slices(&ops, output, c);
        };
        let later = later_of(&ops, p, q);
        let y = ops.remove(q);
        let x = ops.remove(p);
        ok.remove(q);
        ok.remove(p);
        let z = contract(x, &y, &later)?;
        ok.insert(p, ops.len() < 2 || finite(&z));
        ops.insert(p, z);
    }
    let cur = ops.pop().ok_or("einsum of no operands")?;
    let perm: Vec<usize> = output
        .iter()
        .map(|c| {
            cur.l
                .iter()
                .position(|x| x == c)
                .expect("output letter kept")
        })
        .collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) && cur.a.is_standard_layout() {
        return Ok(cur.a.into_owned());
    }
    Ok(cur
        .a
        .view()
        .permuted_axes(perm)
        .as_standard_layout()
        .into_owned())
}

/// `Σ_t` of the einsum of `ops` with letter `c` (not in `output`) fixed at `t` in every
/// operand that has it: the sum over that letter, one slice at a time, added in order.
fn sum_of_slices<T: Elem>(
    ops: &[Labeled<'_, T>],
    output: &[char],
    c: char,
) -> Result<ArrayD<T>, String> {
    let size = |c: &char| -> usize {
        ops.iter()
            .find_map(|o| o.l.iter().position(|x| x == c).map(|p| o.a.shape()[p]))
            .expect("a letter of an operand")
    };
    let mut acc = ArrayD::<T>::zeros(IxDyn(&output.iter().map(size).collect::<Vec<_>>()));
    for t in 0..size(&c) {
        let part: Vec<Labeled<'_, T>> = ops
            .iter()
            .map(|o| match o.l.iter().position(|x| *x == c) {
                Some(ax) => {
                    let mut l = o.l.clone();
                    l.remove(ax);
                    Labeled {
                        a: CowArray::from(o.a.index_axis(ndarray::Axis(ax), t)),
                        l,
                    }
                }
                None => Labeled {
                    a: CowArray::from(o.a.view()),
                    l: o.l.clone(),
                },
            })
            .collect();
        acc += &contract_all(part, output)?;
    }
    Ok(acc)
}

/// The pairs of operands (`p < q`) in the order of the least work of a whole path that
/// starts with them (every order of the later contractions tried, up to [`SEARCHED`]
/// operands; beyond, the least work of the pair's own step), ties in operand order. A
/// step's work is its multiplications and, at [`WRITE_COST`] each, the elements it writes:
/// its result and any operand copied into the order GEMM reads. For MTTKRP
/// (`ijk,jf,kf->if`) that is the tensor block times `kf` first, read in place (its last
/// axis contracted), then a small product with `jf`: fewer multiplications in all than
/// the two factors' product first, which also writes a `jkf` block as large as the
/// tensor block's.
fn pairs_by_cost<T>(ops: &[Labeled<'_, T>], output: &[char]) -> Vec<(usize, usize)> {
    let shapes: Vec<Shape> = ops
        .iter()
        .map(|o| Shape {
            l: o.l.clone(),
            n: o.a.shape().to_vec(),
        })
        .collect();
    let search = shapes.len() <= SEARCHED;
    let mut pairs: Vec<(f64, (usize, usize))> = (0..shapes.len())
        .flat_map(|p| (p + 1..shapes.len()).map(move |q| (p, q)))
        .map(|(p, q)| {
            let (work, rest) = Shape::step(&shapes, p, q, output);
            let after = if search {
                Shape::least_work(&rest, output)
            } else {
                0.0
            };
            (work + after, (p, q))
        })
        .collect();
    pairs.sort_by(|a, b| a.0.total_cmp(&b.0));
    pairs.into_iter().map(|(_, pq)| pq).collect()
}

/// Operands up to which [`pairs_by_cost`] tries every order of contractions (5 operands:
/// 180 orders).
const SEARCHED: usize = 5;

/// Multiplications an element written costs, in [`pairs_by_cost`]'s work: a GEMM does
/// about 25 G multiply-adds a second on one core, memory takes 0.2-1.3 G new elements.
const WRITE_COST: f64 = 16.0;

/// An operand's letters and sizes, for choosing the order of contractions.
#[derive(Clone)]
struct Shape {
    l: Vec<char>,
    n: Vec<usize>,
}

impl Shape {
    fn size(&self, c: char) -> usize {
        self.n[self.l.iter().position(|x| *x == c).expect("letter")]
    }

    /// Whether the operand's letters are the groups `a` then `b`, or `b` then `a`: read in
    /// place by [`matrix`] (a standard-layout block).
    fn in_order(&self, a: &[char], b: &[char]) -> bool {
        let cat = |x: &[char], y: &[char]| x.iter().chain(y).copied().collect::<Vec<char>>();
        self.l == cat(a, b) || self.l == cat(b, a)
    }

    /// The work of contracting operands `p` and `q` of `ops` as [`contract`] does, and
    /// the operands after it (the result in `p`'s place).
    fn step(ops: &[Shape], p: usize, q: usize, output: &[char]) -> (f64, Vec<Shape>) {
        let (x, y) = (&ops[p], &ops[q]);
        let later: HashSet<char> = output
            .iter()
            .chain(
                ops.iter()
                    .enumerate()
                    .filter(|&(j, _)| j != p && j != q)
                    .flat_map(|(_, o)| o.l.iter()),
            )
            .copied()
            .collect();
        let shared: Vec<char> = x.l.iter().copied().filter(|c| y.l.contains(c)).collect();
        let batch: Vec<char> = shared
            .iter()
            .copied()
            .filter(|c| later.contains(c))
            .collect();
        let con: Vec<char> = shared
            .iter()
            .copied()
            .filter(|c| !later.contains(c))
            .collect();
        let fx: Vec<char> = x.l.iter().copied().filter(|c| !y.l.contains(c)).collect();
        let fy: Vec<char> = y.l.iter().copied().filter(|c| !x.l.contains(c)).collect();
        let count = |o: &Shape| o.n.iter().product::<usize>() as f64;
        let mults: f64 = x.l.iter().map(|&c| x.size(c) as f64).product::<f64>()
            * fy.iter().map(|&c| y.size(c) as f64).product::<f64>();
        let copied = if batch.is_empty() {
            let cx = if x.in_order(&fx, &con) { 0.0 } else { count(x) };
            let cy = if y.in_order(&con, &fy) { 0.0 } else { count(y) };
            cx + cy
        } else {
            let cat = |g: &[&[char]]| g.iter().flat_map(|g| g.iter()).copied().collect::<Vec<_>>();
            let cx = if x.l == cat(&[&batch, &fx, &con]) {
                0.0
            } else {
                count(x)
            };
            let cy = if y.l == cat(&[&batch, &con, &fy]) {
                0.0
            } else {
                count(y)
            };
            cx + cy
        };
        let l: Vec<char> = if batch.is_empty() {
            fx.iter().chain(&fy).copied().collect()
        } else {
            batch.iter().chain(&fx).chain(&fy).copied().collect()
        };
        let z = Shape {
            n: l.iter()
                .map(|&c| {
                    if x.l.contains(&c) {
                        x.size(c)
                    } else {
                        y.size(c)
                    }
                })
                .collect(),
            l,
        };
        let work = mults + WRITE_COST * (copied + count(&z));
        let mut rest: Vec<Shape> = ops.to_vec();
        rest.remove(q);
        rest[p] = z;
        (work, rest)
    }

    /// The least work of contracting `ops` down to one operand, over every order.
    fn least_work(ops: &[Shape], output: &[char]) -> f64 {
        if ops.len() < 2 {
            return 0.0;
        }
        (0..ops.len())
            .flat_map(|p| (p + 1..ops.len()).map(move |q| (p, q)))
            .map(|(p, q)| {
                let (work, rest) = Shape::step(ops, p, q, output);
                work + Shape::least_work(&rest, output)
            })
            .fold(f64::INFINITY, f64::min)
    }
}

/// Takes the diagonal over repeated letters of one operand (`"ii"` becomes `"i"`).
fn diagonal<T: Elem>(
    mut a: CowArray<'_, T, IxDyn>,
    mut l: Vec<char>,
) -> Result<Labeled<'_, T>, String> {
    while let Some((p, q)) = (0..l.len())
        .flat_map(|p| (p + 1..l.len()).map(move |q| (p, q)))
        .find(|&(p, q)| l[p] == l[q])
    {
        if a.shape()[p] != a.shape()[q] {
            return Err(format!(
                "einsum letter {:?} has sizes {} and {} in one operand",
                l[p],
                a.shape()[p],
                a.shape()[q]
            ));
        }
        let mut shape = a.shape().to_vec();
        shape.remove(q);
        let src = &a;
        a = CowArray::from(ArrayD::from_shape_fn(IxDyn(&shape), |idx| {
            let mut full = idx.slice().to_vec();
            full.insert(q, idx[p]);
            src[IxDyn(&full)]
        }));
        l.remove(q);
    }
    Ok(Labeled { a, l })
}

/// An operand as a (rows, columns) matrix over two groups of its letters: a view when its
/// axes are in that order or in the opposite one (then transposed), else a copy.
fn matrix<'v, T: Elem>(
    o: &'v Labeled<'_, T>,
    rows: &[char],
    cols: &[char],
) -> (CowArray<'v, T, ndarray::Ix2>, (usize, usize)) {
    let pos = |c: &char| o.l.iter().position(|x| x == c).expect("letter");
    let size = |g: &[char]| g.iter().map(|c| o.a.shape()[pos(c)]).product::<usize>();
    let (m, k) = (size(rows), size(cols));
    let perm = |order: &[&[char]]| -> Vec<usize> {
        order.iter().flat_map(|g| g.iter()).map(pos).collect()
    };
    let direct = o.a.view().permuted_axes(perm(&[rows, cols]));
    if direct.is_standard_layout() {
        let v = direct.into_shape_with_order((m, k)).expect("contiguous");
        return (CowArray::from(v), (m, k));
    }
    let flipped = o.a.view().permuted_axes(perm(&[cols, rows]));
    if flipped.is_standard_layout() {
        let v = flipped.into_shape_with_order((k, m)).expect("contiguous");
        return (CowArray::from(v.reversed_axes()), (m, k));
    }
    let owned = direct
        .as_standard_layout()
        .into_owned()
        .into_shape_with_order((m, k))
        .expect("contiguous");
    (CowArray::from(owned), (m, k))
}

/// Contracts two operands over their shared letters that no later operand or the output
/// needs; shared letters still needed are batch axes.
fn contract<'a, T: Elem>(
    x: Labeled<'a, T>,
    y: &Labeled<'a, T>,
    later: &HashSet<char>,
) -> Result<Labeled<'a, T>, String> {
    let size =
        |o: &Labeled<T>, c: char| o.a.shape()[o.l.iter().position(|x| *x == c).expect("letter")];
    let shared: Vec<char> = x.l.iter().copied().filter(|c| y.l.contains(c)).collect();
    for &c in &shared {
        if size(&x, c) != size(y, c) {
            return Err(format!(
                "einsum letter {c:?} has sizes {} and {}",
                size(&x, c),
                size(y, c)
            ));
        }
    }
    let batch: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| later.contains(c))
        .collect();
    let con: Vec<char> = shared
        .iter()
        .copied()
        .filter(|c| !later.contains(c))
        .collect();
    let fx: Vec<char> = x.l.iter().copied().filter(|c| !y.l.contains(c)).collect();
    let fy: Vec<char> = y.l.iter().copied().filter(|c| !x.l.contains(c)).collect();
    // Each operand as (batch, rows, columns); a view where the axes are already in order.
    fn arrange<'v, T: Elem>(
        o: &'v Labeled<'_, T>,
        order: &[&[char]],
    ) -> (CowArray<'v, T, IxDyn>, Vec<usize>) {
        let size = |c: char| o.a.shape()[o.l.iter().position(|x| *x == c).expect("letter")];
        let perm: Vec<usize> = order
            .iter()
            .flat_map(|g| g.iter())
            .map(|c| o.l.iter().position(|x| x == c).expect("letter"))
            .collect();
        let dims = order
            .iter()
            .map(|g| g.iter().map(|&c| size(c)).product())
            .collect();
        let v = o.a.view().permuted_axes(perm);
        let v = if v.is_standard_layout() {
            CowArray::from(v)
        } else {
            CowArray::from(v.as_standard_layout().into_owned())
        };
        (v, dims)
    }
    if batch.is_empty() {
        // One product: BLAS reads a transposed operand in place, so an operand stored the
        // other way round (`ji,jk->ik`) is passed as a transposed view, not copied.
        let (ax, dx) = matrix(&x, &fx, &con);
        let (ay, dy) = matrix(y, &con, &fy);
        let mut out = ndarray::Array2::<T>::zeros((dx.0, dy.1));
        T::gemm(&ax.view(), &ay.view(), &mut out.view_mut(), false);
        let l: Vec<char> = fx.iter().chain(&fy).copied().collect();
        let shape: Vec<usize> = fx
            .iter()
            .map(|&c| size(&x, c))
            .chain(fy.iter().map(|&c| size(y, c)))
            .collect();
        let a = out
            .into_shape_with_order(IxDyn(&shape))
            .map_err(|e| e.to_string())?;
        return Ok(Labeled {
            a: CowArray::from(a),
            l,
        });
    }
    let (ax, dx) = arrange(&x, &[&batch, &fx, &con]);
    let (ay, dy) = arrange(y, &[&batch, &con, &fy]);
    let (nb, m, k, n) = (dx[0], dx[1], dx[2], dy[2]);
    let shape_err = |e: ndarray::ShapeError| e.to_string();
    let ax = ax
        .view()
        .into_shape_with_order((nb, m, k))
        .map_err(shape_err)?
        .into_dimensionality::<Ix3>()
        .map_err(shape_err)?;
    let ay = ay
        .view()
        .into_shape_with_order((nb, k, n))
        .map_err(shape_err)?
        .into_dimensionality::<Ix3>()
        .map_err(shape_err)?;
    let mut out = ndarray::Array3::<T>::zeros((nb, m, n));
    for i in 0..nb {
        T::gemm(
            &ax.slice(s![i, .., ..]),
            &ay.slice(s![i, .., ..]),
            &mut out.slice_mut(s![i, .., ..]),
            false,
        );
    }
    let l: Vec<char> = batch.iter().chain(&fx).chain(&fy).copied().collect();
    let shape: Vec<usize> = batch
        .iter()
        .map(|&c| size(&x, c))
        .chain(fx.iter().map(|&c| size(&x, c)))
        .chain(fy.iter().map(|&c| size(y, c)))
        .collect();
    let a = out
        .into_shape_with_order(IxDyn(&shape))
        .map_err(shape_err)?;
    Ok(Labeled {
        a: CowArray::from(a),
        l,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(shape: &[usize], f: impl Fn(&[usize]) -> f64) -> Block {
        Block::F64(ArrayD::from_shape_fn(IxDyn(shape), |i| f(i.slice())))
    }

    fn run(spec: &str, blocks: &[&Block]) -> ArrayD<f64> {
        einsum(&Spec::parse(spec).unwrap(), blocks).unwrap()
    }

    #[test]
    fn matmul_trace_outer_and_mttkrp() {
        let a = block(&[2, 3], |i| (i[0] * 3 + i[1]) as f64);
        let b = block(&[3, 2], |i| (i[0] + 2 * i[1]) as f64 - 1.0);
        let r = run("ij,jk->ik", &[&a, &b]);
        // Direct sums.
        for i in 0..2 {
            for k in 0..2 {
                let want: f64 = (0..3)
                    .map(|j| ((i * 3 + j) as f64) * ((j + 2 * k) as f64 - 1.0))
                    .sum();
                assert_eq!(r[[i, k]], want);
            }
        }
        let sq = block(&[3, 3], |i| (i[0] * 3 + i[1]) as f64);
        assert_eq!(run("ii->", &[&sq])[[]], 0.0 + 4.0 + 8.0);
        let u = block(&[2], |i| i[0] as f64 + 1.0);
        let v = block(&[3], |i| i[0] as f64);
        assert_eq!(run("i,j->ij", &[&u, &v])[[1, 2]], 4.0);
        // MTTKRP: M[i,f] = sum_jk X[i,j,k] B[j,f] C[k,f].
        let x = block(&[2, 3, 4], |i| (i[0] + 2 * i[1] + 3 * i[2]) as f64);
        let bb = block(&[3, 2], |i| (i[0] as f64) - (i[1] as f64));
        let cc = block(&[4, 2], |i| (i[0] * i[1]) as f64 + 0.5);
        let m = run("ijk,jf,kf->if", &[&x, &bb, &cc]);
        for i in 0..2 {
            for f in 0..2 {
                let mut want = 0.0;
                for j in 0..3 {
                    for k in 0..4 {
                        want += (i + 2 * j + 3 * k) as f64
                            * (j as f64 - f as f64)
                            * ((k * f) as f64 + 0.5);
                    }
                }
                assert_eq!(m[[i, f]], want);
            }
        }
        let e = Spec::parse("ij,jk->ii").unwrap_err();
        assert!(e.contains("repeated"), "{e}");
    }

    #[test]
    fn a_path_is_chosen_by_its_whole_work() {
        let op = |l: &str, n: &[usize]| Labeled {
            a: CowArray::from(ArrayD::<f64>::zeros(IxDyn(n))),
            l: l.chars().collect(),
        };
        // MTTKRP on a peers block: the tensor times `kf` first (k is its last axis: read in
        // place), not the factors' product (a 4M-element `jkf`) nor `jf` (a transposed copy).
        let ops = [
            op("ijk", &[32, 512, 256]),
            op("jf", &[512, 32]),
            op("kf", &[256, 32]),
        ];
        assert_eq!(pairs_by_cost(&ops, &['i', 'f'])[0], (0, 2));
        // A chain of matrix products: the pair whose product is small first.
        let ops = [
            op("ij", &[1000, 10]),
            op("jk", &[10, 1000]),
            op("kl", &[1000, 10]),
        ];
        assert_eq!(pairs_by_cost(&ops, &['i', 'l'])[0], (1, 2));
        // Each order gives NumPy's sums (checked against every product added in turn).
        let x = block(&[3, 5, 4], |i| {
            (i[0] + 2 * i[1] + 3 * i[2]) as f64 % 7.0 - 3.0
        });
        let b = block(&[5, 2], |i| i[0] as f64 - i[1] as f64);
        let c = block(&[4, 2], |i| (i[0] * i[1]) as f64 + 0.5);
        let spec = "ijk,jf,kf->if";
        assert!(same(&run(spec, &[&x, &b, &c]), &brute(spec, &[&x, &b, &c])));
    }

    /// Σ over every letter not in the output of the product of the operands.
    fn brute(spec: &str, ops: &[&Block]) -> ArrayD<f64> {
        let s = Spec::parse(spec).unwrap();
        let mut size = std::collections::BTreeMap::new();
        for (l, b) in s.inputs.iter().zip(ops) {
            for (c, &n) in l.iter().zip(b.shape()) {
                size.insert(*c, n);
            }
        }
        let letters: Vec<char> = size.keys().copied().collect();
        let dims: Vec<usize> = letters.iter().map(|c| size[c]).collect();
        let out_dims: Vec<usize> = s.output.iter().map(|c| size[c]).collect();
        let mut out = ArrayD::<f64>::zeros(IxDyn(&out_dims));
        for idx in ndarray::indices(IxDyn(&dims)) {
            let at = |c: &char| idx[letters.iter().position(|x| x == c).unwrap()];
            let p: f64 = s
                .inputs
                .iter()
                .zip(ops)
                .map(|(l, b)| {
                    let i: Vec<usize> = l.iter().map(at).collect();
                    b.to_f64()[IxDyn(&i)]
                })
                .product();
            let o: Vec<usize> = s.output.iter().map(at).collect();
            out[IxDyn(&o)] += p;
        }
        out
    }

    /// Equal, NaN where the other is NaN, or within 1e-12 relative.
    fn same(a: &ArrayD<f64>, b: &ArrayD<f64>) -> bool {
        a.shape() == b.shape()
            && a.iter().zip(b).all(|(x, y)| {
                (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-12 * y.abs()
            })
    }

    /// A letter of one operand only is summed with every product, as NumPy's sum of
    /// products: an infinity meeting a 0 of another operand is NaN, whichever operand
    /// holds which (summing the letter out first would give an infinity).
    #[test]
    fn lone_letters_keep_zero_times_infinity() {
        let inf = f64::INFINITY;
        let x = block(&[2, 3], |i| [[1.0, inf, 2.0], [inf, -inf, 1.0]][i[0]][i[1]]);
        let y = block(&[2, 2], |i| [[0.0, 1.0], [2.0, 0.0]][i[0]][i[1]]);
        let big = block(&[2, 2], |i| [[1e308, 1e308], [-1.0, 3.0]][i[0]][i[1]]);
        let (u, w) = (
            block(&[3], |i| [1.0, inf, 2.0][i[0]]),
            block(&[2], |i| [0.0, 1.0][i[0]]),
        );
        // Three operands: contracting b and c first sums 2 - 1 = 1 and hides the NaN of
        // inf * 2 + inf * (-1).
        let a3 = block(&[1, 1], |_| inf);
        let b3 = block(&[1, 2], |i| [2.0, -1.0][i[1]]);
        let c3 = block(&[2, 1], |i| [1.0, inf][i[0]]);
        // b and c the cheapest pair, a not finite: a and b go first.
        let a4 = block(&[3, 1], |_| inf);
        let c4 = block(&[2, 1], |_| 1.0);
        for (spec, ops) in [
            ("ij,kl->il", vec![&x, &y]),
            ("ij,kl->il", vec![&y, &x]),
            ("ji,jk->i", vec![&x, &y]),
            ("j,k->", vec![&u, &w]),
            ("ij,kl->", vec![&y, &x]),
            ("ij,kl->ik", vec![&x, &y]),
            ("ij,kl->ik", vec![&big, &y]),
            ("ij,kl->", vec![&x, &x]),
            ("ij,jk->ik", vec![&y, &big]),
            ("ij,jk,kl->il", vec![&a3, &b3, &c3]),
            ("ij,jk,kl->il", vec![&a4, &b3, &c4]),
            ("ij,jk,kl->il", vec![&a4, &b3, &c3]),
            ("ij,jk,kl->il", vec![&c3, &a3, &b3]),
            ("ij,jk,kl->ik", vec![&a3, &b3, &c3]),
            ("ij,jk,kl->", vec![&y, &y, &x]),
            ("ji,jk,kl->il", vec![&x, &y, &big]),
        ] {
            let (got, want) = (run(spec, &ops), brute(spec, &ops));
            assert!(same(&got, &want), "{spec}: {got} != {want}");
        }
    }

    /// A weighted Gram matrix (`X.T @ (X * v[:, None])`, a fit's Hessian) as three operands:
    /// the sum over terms of every product `a_ij v_j b_jk`, in pieces of rows (the first
    /// term spans two), operands stored either way round, float64 and int64; an infinity
    /// meeting a 0 of the vector is NaN, as NumPy's product is.
    #[test]
    fn a_scaled_matrix_product_sums_every_product() {
        for spec in ["ji,jk,j->ik", "ij,j,jk->ik", "j,ji,kj->ik"] {
            let s = Spec::parse(spec).unwrap();
            let ((i, j, k), _) = scaled_product(&s).expect(spec);
            let mut blocks = Vec::new();
            for (t, kt) in [40_000usize, 5].into_iter().enumerate() {
                for l in &s.inputs {
                    let dims: Vec<usize> = l
                        .iter()
                        .map(|&c| match c {
                            _ if c == j => kt,
                            _ if c == i => 4,
                            _ => 3,
                        })
                        .collect();
                    let _ = k;
                    blocks.push(block(&dims, |x| {
                        (x.iter()
                            .enumerate()
                            .map(|(a, &v)| (a + 2) * v)
                            .sum::<usize>()
                            + t) as f64
                            % 7.0
                            - 3.0
                    }));
                }
            }
            let refs: Vec<&Block> = blocks.iter().collect();
            let got = sum_of_terms(spec, 3, &refs).unwrap();
            let mut want = ArrayD::<f64>::zeros(IxDyn(&[4, 3]));
            for term in refs.chunks(3) {
                want += &brute(spec, term);
            }
            assert_eq!(got, Block::F64(want.clone()), "{spec}");
            let ints: Vec<Block> = blocks
                .iter()
                .map(|b| Block::I64(b.to_i64().into_owned()))
                .collect();
            let irefs: Vec<&Block> = ints.iter().collect();
            let got = sum_of_terms(spec, 3, &irefs).unwrap();
            assert_eq!(got, Block::I64(want.mapv(|v| v as i64)), "{spec} in int64");
        }
        for not in ["ji,jk,k->ik", "ij,jk,kl->il", "ji,jk,jk->ik", "ji,jk->ik"] {
            assert!(
                scaled_product(&Spec::parse(not).unwrap()).is_none(),
                "{not}"
            );
        }
        // An infinity of X where v is 0: that row's products are NaN.
        let x = block(&[3, 2], |i| if i == [1, 0] { f64::INFINITY } else { 1.0 });
        let v = block(&[3], |i| if i[0] == 1 { 0.0 } else { 2.0 });
        let spec = "ji,jk,j->ik";
        let got = sum_of_terms(spec, 3, &[&x, &x, &v]).unwrap();
        let want = brute(spec, &[&x, &x, &v]);
        assert!(same(&got.to_f64(), &want), "{got:?} != {want}");
        assert!(want[[0, 0]].is_nan() && want[[1, 1]] == 4.0);
        let e = sum_of_terms(spec, 3, &[&x, &x, &block(&[2], |_| 1.0)]).unwrap_err();
        assert!(e.contains("sizes 3, 3 and 2"), "{e}");
    }

    /// An elementwise product summed over leading or trailing axes equals the sum of every
    /// product, over terms, float64 and int64; other letter orders are not taken.
    #[test]
    fn a_product_summed_over_leading_or_trailing_axes_sums_every_product() {
        for spec in [
            "ij,ij->j",
            "ij,ij->i",
            "ij,ij->",
            "ijk,ijk->jk",
            "ijk,ijk->i",
        ] {
            let s = Spec::parse(spec).unwrap();
            assert!(product_sum(&s).is_some(), "{spec}");
            let dims: Vec<usize> = [5, 3, 2][..s.inputs[0].len()].to_vec();
            let blocks: Vec<Block> = (0..4)
                .map(|t| {
                    block(&dims, |x| {
                        (x.iter()
                            .enumerate()
                            .map(|(a, &v)| (a + 3) * v)
                            .sum::<usize>()
                            + t) as f64
                            % 5.0
                            - 2.0
                    })
                })
                .collect();
            let refs: Vec<&Block> = blocks.iter().collect();
            let got = sum_of_terms(spec, 2, &refs).unwrap();
            let want = brute(spec, &refs[..2]) + brute(spec, &refs[2..]);
            assert_eq!(got, Block::F64(want.clone()), "{spec}");
            let ints: Vec<Block> = blocks
                .iter()
                .map(|b| Block::I64(b.to_i64().into_owned()))
                .collect();
            let irefs: Vec<&Block> = ints.iter().collect();
            let got = sum_of_terms(spec, 2, &irefs).unwrap();
            assert_eq!(got, Block::I64(want.mapv(|v| v as i64)), "{spec} in int64");
        }
        for not in [
            "ij,ji->j",
            "ijk,ijk->ik",
            "ij,ij->ji",
            "ii,ii->i",
            "ij,jk->ik",
        ] {
            assert!(product_sum(&Spec::parse(not).unwrap()).is_none(), "{not}");
        }
        let inf = block(&[2, 2], |i| if i == [0, 1] { f64::INFINITY } else { 1.0 });
        let zero = block(&[2, 2], |i| if i == [0, 1] { 0.0 } else { 2.0 });
        let got = sum_of_terms("ij,ij->j", 2, &[&inf, &zero]).unwrap();
        let got = got.to_f64().into_owned();
        assert!(got[[1]].is_nan() && got[[0]] == 4.0, "{got}");
    }

    /// A sum of matrix products (GEMM adding into one output) equals the sum of each
    /// product computed alone, for operands stored either way round, float64 and int64,
    /// and a mismatched contraction is an error.
    #[test]
    fn a_sum_of_matrix_products_accumulates_in_place() {
        for spec in [
            "ij,jk->ik",
            "ji,jk->ik",
            "ij,kj->ik",
            "ji,kj->ik",
            "ab,bc->ac",
        ] {
            let s = Spec::parse(spec).unwrap();
            assert!(matrix_product(&s).is_some(), "{spec}");
            let (tx, ty) = (s.inputs[0][0] != s.output[0], s.inputs[1][1] != s.output[1]);
            let dims = |t: bool, r: usize, c: usize| if t { [c, r] } else { [r, c] };
            let mut blocks = Vec::new();
            for t in 0..3usize {
                let kt = 2 + t; // terms may differ in their contracted size
                blocks.push(block(&dims(tx, 4, kt), |i| {
                    (i[0] * 7 + i[1] * 3 + t) as f64 % 5.0 - 2.0
                }));
                blocks.push(block(&dims(ty, kt, 3), |i| {
                    (i[0] * 2 + i[1] * 5 + t) as f64 % 7.0 - 3.0
                }));
            }
            let refs: Vec<&Block> = blocks.iter().collect();
            let got = sum_of_terms(spec, 2, &refs).unwrap();
            let mut want = ArrayD::<f64>::zeros(IxDyn(&[4, 3]));
            for term in refs.chunks(2) {
                want += &run(spec, term);
            }
            assert_eq!(got, Block::F64(want.clone()), "{spec}");
            let ints: Vec<Block> = blocks
                .iter()
                .map(|b| Block::I64(b.to_i64().into_owned()))
                .collect();
            let irefs: Vec<&Block> = ints.iter().collect();
            let got = sum_of_terms(spec, 2, &irefs).unwrap();
            assert_eq!(got, Block::I64(want.mapv(|v| v as i64)), "{spec} in int64");
        }
        for not in [
            "ij,jk->ki",
            "ij,jk,kl->il",
            "ijk,kl->ijl",
            "ii,ik->ik",
            "ij,ij->ij",
        ] {
            assert!(
                matrix_product(&Spec::parse(not).unwrap()).is_none(),
                "{not}"
            );
        }
        let a = block(&[2, 3], |_| 1.0);
        let b = block(&[4, 2], |_| 1.0);
        let e = sum_of_terms("ij,jk->ik", 2, &[&a, &b]).unwrap_err();
        assert!(e.contains("sizes 3 and 4"), "{e}");
    }
}
