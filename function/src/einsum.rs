//! Einstein sums of blocks. Every contraction the job language has (`@`, dot, outer,
//! tensordot, trace, einsum such as MTTKRP) is one of these, computed as pairwise
//! matrix products so that BLAS does the arithmetic.

use std::collections::HashSet;

use ndarray::{ArrayD, Axis, CowArray, Dimension, Ix3, IxDyn, linalg::general_mat_mul, s};
use nums_layout::Block;

/// Subscripts such as `"ij,jk->ik"`: letters of each operand and of the output.
#[derive(Debug, Clone, PartialEq)]
pub struct Spec {
    pub inputs: Vec<Vec<char>>,
    pub output: Vec<char>,
}

impl Spec {
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

/// The sum over terms (each `operands` consecutive blocks) of the einsum of each term.
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
    let mut acc: Option<ArrayD<f64>> = None;
    for term in inputs.chunks(operands) {
        let r = einsum(&spec, term)?;
        acc = Some(match acc {
            None => r,
            Some(mut a) => {
                a += &r;
                a
            }
        });
    }
    Ok(Block::F64(acc.expect("at least one term")))
}

/// An operand with a letter per axis; borrowed from its block until an op must copy.
struct Labeled<'a> {
    a: CowArray<'a, f64, IxDyn>,
    l: Vec<char>,
}

/// The einsum of one block per operand.
pub fn einsum(spec: &Spec, blocks: &[&Block]) -> Result<ArrayD<f64>, String> {
    let mut ops = Vec::new();
    for (k, (b, l)) in blocks.iter().zip(&spec.inputs).enumerate() {
        if b.shape().len() != l.len() {
            return Err(format!(
                "einsum operand {k} has {} axes but subscripts {:?}",
                b.shape().len(),
                l.iter().collect::<String>()
            ));
        }
        let a = match b.to_f64() {
            std::borrow::Cow::Borrowed(a) => CowArray::from(a.view()),
            std::borrow::Cow::Owned(a) => CowArray::from(a),
        };
        ops.push(diagonal(a, l.clone())?);
    }
    // Letters in one operand only and not in the output are summed out first.
    for i in 0..ops.len() {
        let only: Vec<char> = ops[i]
            .l
            .iter()
            .copied()
            .filter(|c| {
                !spec.output.contains(c)
                    && ops
                        .iter()
                        .enumerate()
                        .all(|(j, o)| j == i || !o.l.contains(c))
            })
            .collect();
        for c in only {
            let ax = ops[i].l.iter().position(|x| *x == c).expect("letter");
            ops[i].a = CowArray::from(ops[i].a.sum_axis(Axis(ax)));
            ops[i].l.remove(ax);
        }
    }
    let mut rest = ops.into_iter();
    let mut cur = rest.next().ok_or("einsum of no operands")?;
    let rest: Vec<Labeled> = rest.collect();
    for (k, next) in rest.iter().enumerate() {
        let later: HashSet<char> = spec
            .output
            .iter()
            .chain(rest[k + 1..].iter().flat_map(|o| o.l.iter()))
            .copied()
            .collect();
        cur = contract(cur, next, &later)?;
    }
    let perm: Vec<usize> = spec
        .output
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

/// Takes the diagonal over repeated letters of one operand (`"ii"` becomes `"i"`).
fn diagonal(mut a: CowArray<'_, f64, IxDyn>, mut l: Vec<char>) -> Result<Labeled<'_>, String> {
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
fn matrix<'v>(
    o: &'v Labeled<'_>,
    rows: &[char],
    cols: &[char],
) -> (CowArray<'v, f64, ndarray::Ix2>, (usize, usize)) {
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
fn contract<'a>(
    x: Labeled<'a>,
    y: &Labeled<'a>,
    later: &HashSet<char>,
) -> Result<Labeled<'a>, String> {
    let size =
        |o: &Labeled, c: char| o.a.shape()[o.l.iter().position(|x| *x == c).expect("letter")];
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
    fn arrange<'v>(
        o: &'v Labeled<'_>,
        order: &[&[char]],
    ) -> (CowArray<'v, f64, IxDyn>, Vec<usize>) {
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
        let mut out = ndarray::Array2::<f64>::zeros((dx.0, dy.1));
        general_mat_mul(1.0, &ax, &ay, 0.0, &mut out);
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
    let mut out = ndarray::Array3::<f64>::zeros((nb, m, n));
    for i in 0..nb {
        general_mat_mul(
            1.0,
            &ax.slice(s![i, .., ..]),
            &ay.slice(s![i, .., ..]),
            0.0,
            &mut out.slice_mut(s![i, .., ..]),
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
}
