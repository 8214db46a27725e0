//! Block kernels: pure functions from input blocks to one output block.

use ndarray::{ArrayD, Axis, Ix1, Ix2, IxDyn, Zip};
use nums_layout::batch::{BinaryOp, Kernel, RandomDist, UnaryOp};
use nums_layout::meta::{ArrayMeta, ravel};
use nums_layout::{Block, DType};
use rayon::prelude::*;

/// Runs `kernel` for output block `index` of array `out`.
pub fn run(
    kernel: &Kernel,
    inputs: &[&Block],
    out: &ArrayMeta,
    index: &[u64],
) -> Result<Block, String> {
    let shape = out.block_shape(index);
    let block = match kernel {
        Kernel::Fill { value } => Block::full(out.dtype, &shape, *value),
        Kernel::Random { dist, seed } => random(*dist, *seed, out, index),
        Kernel::Unary { op } => unary(*op, one(inputs)?),
        Kernel::Binary { op } => {
            let [a, b] = inputs else {
                return Err(format!(
                    "binary kernel needs 2 inputs, got {}",
                    inputs.len()
                ));
            };
            binary(*op, a, b)?
        }
        Kernel::Scalar {
            op,
            value,
            scalar_left,
        } => {
            let x = one(inputs)?;
            let s = Block::full(x.dtype(), x.shape(), *value);
            let s = match s {
                Block::Bool(_)
                    if !op.is_predicate() || !matches!(op, BinaryOp::And | BinaryOp::Or) =>
                {
                    Block::full(DType::Float64, x.shape(), *value)
                }
                s => s,
            };
            if *scalar_left {
                binary(*op, &s, x)?
            } else {
                binary(*op, x, &s)?
            }
        }
        Kernel::Matmul => matmul(inputs)?,
        Kernel::Transpose => match one(inputs)? {
            Block::F64(a) => Block::F64(a.t().as_standard_layout().into_owned()),
            Block::Bool(a) => Block::Bool(a.t().as_standard_layout().into_owned()),
        },
        Kernel::Sum { axes } => sum(inputs, axes)?,
        Kernel::Assemble { offsets } => assemble(inputs, offsets, &shape)?,
        Kernel::Reshape => match one(inputs)? {
            Block::F64(a) => Block::F64(reshape(a, &shape)?),
            Block::Bool(a) => Block::Bool(reshape(a, &shape)?),
        },
    };
    // Cast to the output dtype the driver planned (e.g. bool inputs summed as float64).
    let block = match (out.dtype, block) {
        (DType::Float64, Block::Bool(b)) => Block::F64(b.mapv(|v| v as u8 as f64)),
        (DType::Bool, Block::F64(a)) => Block::Bool(a.mapv(|v| v != 0.0)),
        (_, b) => b,
    };
    if block.shape() != shape.as_slice() {
        return Err(format!(
            "kernel produced a block of shape {:?}, expected {:?}",
            block.shape(),
            shape
        ));
    }
    Ok(block)
}

fn one<'a>(inputs: &[&'a Block]) -> Result<&'a Block, String> {
    match inputs {
        [x] => Ok(x),
        _ => Err(format!("kernel needs 1 input, got {}", inputs.len())),
    }
}

/// A 64-bit mix (the splitmix64 finalizer): a counter-based generator, so any element
/// of a random array can be computed from (seed, flat index) alone.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn uniform01(key: u64, i: u64) -> f64 {
    let h = mix(key ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15));
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Element `i` of the random array with `seed`: the same value whatever the block shape.
pub fn random_value(dist: RandomDist, seed: u64, i: u64) -> f64 {
    let key = mix(seed.wrapping_add(0x632b_e59b_d9b4_e019));
    match dist {
        RandomDist::Uniform => uniform01(key, i),
        RandomDist::Normal => {
            // Box-Muller on two independent uniforms; 1-u keeps the log finite.
            let u1 = 1.0 - uniform01(key, 2 * i);
            let u2 = uniform01(key, 2 * i + 1);
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
    }
}

fn random(dist: RandomDist, seed: u64, out: &ArrayMeta, index: &[u64]) -> Block {
    let shape = out.block_shape(index);
    let origin = out.block_origin(index);
    let n: usize = shape.iter().product();
    let row = shape.last().copied().unwrap_or(1).max(1);
    let mut v = vec![0.0; n];
    let outer: Vec<u64> = shape[..shape.len().saturating_sub(1)]
        .iter()
        .map(|&s| s as u64)
        .collect();
    v.par_chunks_mut(row).enumerate().for_each(|(r, chunk)| {
        // Global index of this row's first element.
        let local = nums_layout::meta::unravel(r as u64, &outer);
        let mut g: Vec<u64> = local.iter().zip(&origin).map(|(l, o)| l + o).collect();
        if !shape.is_empty() {
            g.push(origin[shape.len() - 1]);
        }
        let base = ravel(&g, &out.shape);
        for (j, x) in chunk.iter_mut().enumerate() {
            *x = random_value(dist, seed, base + j as u64);
        }
    });
    Block::F64(ArrayD::from_shape_vec(IxDyn(&shape), v).expect("shape"))
}

fn unary(op: UnaryOp, x: &Block) -> Block {
    if let (UnaryOp::Not, Block::Bool(b)) = (op, x) {
        return Block::Bool(b.mapv(|v| !v));
    }
    let mut out = x.to_f64().into_owned();
    out.par_mapv_inplace(|v| op.apply(v));
    Block::F64(out)
}

fn binary(op: BinaryOp, a: &Block, b: &Block) -> Result<Block, String> {
    let shape = nums_layout::meta::broadcast(a.shape(), b.shape()).ok_or_else(|| {
        format!(
            "operands of {} have block shapes {:?} and {:?}",
            op.symbol(),
            a.shape(),
            b.shape()
        )
    })?;
    let dim = IxDyn(&shape);
    if matches!(op, BinaryOp::And | BinaryOp::Or) {
        let (a, b) = (to_bool(a), to_bool(b));
        let f = if op == BinaryOp::And {
            |x: &bool, y: &bool| *x && *y
        } else {
            |x: &bool, y: &bool| *x || *y
        };
        let (a, b) = (
            a.broadcast(dim.clone()).expect("broadcastable"),
            b.broadcast(dim).expect("broadcastable"),
        );
        return Ok(Block::Bool(Zip::from(a).and(b).par_map_collect(f)));
    }
    let (a, b) = (a.to_f64(), b.to_f64());
    let (a, b) = (
        a.broadcast(dim.clone()).expect("broadcastable"),
        b.broadcast(dim).expect("broadcastable"),
    );
    let zip = Zip::from(a).and(b);
    Ok(match op {
        BinaryOp::Add => Block::F64(zip.par_map_collect(|x, y| x + y)),
        BinaryOp::Sub => Block::F64(zip.par_map_collect(|x, y| x - y)),
        BinaryOp::Mul => Block::F64(zip.par_map_collect(|x, y| x * y)),
        BinaryOp::Div => Block::F64(zip.par_map_collect(|x, y| x / y)),
        BinaryOp::Lt => Block::Bool(zip.par_map_collect(|x, y| x < y)),
        BinaryOp::Le => Block::Bool(zip.par_map_collect(|x, y| x <= y)),
        BinaryOp::Gt => Block::Bool(zip.par_map_collect(|x, y| x > y)),
        BinaryOp::Ge => Block::Bool(zip.par_map_collect(|x, y| x >= y)),
        BinaryOp::Eq => Block::Bool(zip.par_map_collect(|x, y| x == y)),
        BinaryOp::Ne => Block::Bool(zip.par_map_collect(|x, y| x != y)),
        BinaryOp::And | BinaryOp::Or => unreachable!("handled above"),
        op => Block::F64(zip.par_map_collect(|x, y| op.apply(*x, *y))),
    })
}

fn to_bool(x: &Block) -> std::borrow::Cow<'_, ArrayD<bool>> {
    match x {
        Block::Bool(b) => std::borrow::Cow::Borrowed(b),
        Block::F64(a) => std::borrow::Cow::Owned(a.mapv(|v| v != 0.0)),
    }
}

/// Sum over k of a_k @ b_k, in k order (BLAS dgemm/dgemv through ndarray).
fn matmul(inputs: &[&Block]) -> Result<Block, String> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(2) {
        return Err(format!(
            "matmul needs pairs of inputs, got {}",
            inputs.len()
        ));
    }
    let mut acc: Option<ArrayD<f64>> = None;
    for pair in inputs.chunks(2) {
        let (a, b) = (pair[0].to_f64(), pair[1].to_f64());
        let prod = match (a.ndim(), b.ndim()) {
            (2, 2) => view2(&a)?.dot(&view2(&b)?).into_dyn(),
            (2, 1) => view2(&a)?.dot(&view1(&b)?).into_dyn(),
            (1, 2) => view1(&a)?.dot(&view2(&b)?).into_dyn(),
            (1, 1) => ndarray::arr0(view1(&a)?.dot(&view1(&b)?)).into_dyn(),
            (x, y) => return Err(format!("matmul of {x}-D and {y}-D blocks is not supported")),
        };
        acc = Some(match acc {
            None => prod,
            Some(mut s) => {
                s += &prod;
                s
            }
        });
    }
    Ok(Block::F64(acc.expect("at least one pair")))
}

fn view2(a: &ArrayD<f64>) -> Result<ndarray::ArrayView2<'_, f64>, String> {
    a.view()
        .into_dimensionality::<Ix2>()
        .map_err(|e| e.to_string())
}

fn view1(a: &ArrayD<f64>) -> Result<ndarray::ArrayView1<'_, f64>, String> {
    a.view()
        .into_dimensionality::<Ix1>()
        .map_err(|e| e.to_string())
}

/// Each input summed over `axes`, then the partial sums added in input order.
fn sum(inputs: &[&Block], axes: &[usize]) -> Result<Block, String> {
    let mut axes = axes.to_vec();
    axes.sort_unstable_by(|a, b| b.cmp(a));
    let mut acc: Option<ArrayD<f64>> = None;
    for x in inputs {
        let mut part = x.to_f64().into_owned();
        for &ax in &axes {
            if ax >= part.ndim() {
                return Err(format!("sum over axis {ax} of a {}-D block", part.ndim()));
            }
            part = part.sum_axis(Axis(ax));
        }
        acc = Some(match acc {
            None => part,
            Some(mut s) => {
                s += &part;
                s
            }
        });
    }
    acc.map(Block::F64)
        .ok_or_else(|| "sum needs at least one input".to_string())
}

/// The same elements in C order under another shape (expand_dims, squeeze, reshape of a block).
fn reshape<T: Clone>(a: &ArrayD<T>, shape: &[usize]) -> Result<ArrayD<T>, String> {
    a.as_standard_layout()
        .into_owned()
        .into_shape_with_order(IxDyn(shape))
        .map_err(|e| {
            format!(
                "cannot reshape a block of {:?} to {shape:?}: {e}",
                a.shape()
            )
        })
}

/// Copies the part of each input block that overlaps the output block.
fn assemble(inputs: &[&Block], offsets: &[Vec<i64>], shape: &[usize]) -> Result<Block, String> {
    if inputs.len() != offsets.len() || inputs.is_empty() {
        return Err(format!(
            "assemble has {} inputs and {} offsets",
            inputs.len(),
            offsets.len()
        ));
    }
    fn place<T: Clone>(out: &mut ArrayD<T>, x: &ArrayD<T>, off: &[i64]) {
        let mut dst = Vec::new();
        let mut src = Vec::new();
        for (d, &o) in off.iter().enumerate() {
            let lo = o.max(0);
            let hi = (o + x.shape()[d] as i64).min(out.shape()[d] as i64);
            dst.push(ndarray::SliceInfoElem::from(
                lo as isize..hi.max(lo) as isize,
            ));
            src.push(ndarray::SliceInfoElem::from(
                (lo - o) as isize..(hi.max(lo) - o) as isize,
            ));
        }
        out.slice_mut(dst.as_slice())
            .assign(&x.slice(src.as_slice()));
    }
    Ok(match inputs[0] {
        Block::F64(_) => {
            let mut out = ArrayD::zeros(IxDyn(shape));
            for (x, off) in inputs.iter().zip(offsets) {
                place(&mut out, &x.to_f64(), off);
            }
            Block::F64(out)
        }
        Block::Bool(_) => {
            let mut out = ArrayD::from_elem(IxDyn(shape), false);
            for (x, off) in inputs.iter().zip(offsets) {
                let Block::Bool(b) = x else {
                    return Err("assemble mixes dtypes".into());
                };
                place(&mut out, b, off);
            }
            Block::Bool(out)
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_values_do_not_depend_on_block_shape() {
        let a = ArrayMeta::new(vec![5, 7], vec![2, 3], DType::Float64);
        let b = ArrayMeta::new(vec![5, 7], vec![5, 7], DType::Float64);
        let whole = random(RandomDist::Normal, 3, &b, &[0, 0]);
        let Block::F64(whole) = whole else { panic!() };
        for idx in a.blocks() {
            let Block::F64(part) = random(RandomDist::Normal, 3, &a, &idx) else {
                panic!()
            };
            let o = a.block_origin(&idx);
            for (i, v) in part.indexed_iter() {
                assert_eq!(*v, whole[[o[0] as usize + i[0], o[1] as usize + i[1]]]);
            }
        }
    }

    #[test]
    fn normal_moments() {
        let n = 200_000u64;
        let xs: Vec<f64> = (0..n)
            .map(|i| random_value(RandomDist::Normal, 7, i))
            .collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(mean.abs() < 0.01, "{mean}");
        assert!((var - 1.0).abs() < 0.02, "{var}");
        let u: Vec<f64> = (0..n)
            .map(|i| random_value(RandomDist::Uniform, 7, i))
            .collect();
        assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
        assert!((u.iter().sum::<f64>() / n as f64 - 0.5).abs() < 0.01);
    }

    #[test]
    fn matmul_sums_pairs() {
        let a = Block::F64(ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![1., 2., 3., 4.]).unwrap());
        let b = Block::F64(ArrayD::from_shape_vec(IxDyn(&[2, 1]), vec![1., 1.]).unwrap());
        let Block::F64(r) = matmul(&[&a, &b, &a, &b]).unwrap() else {
            panic!()
        };
        assert_eq!(r.into_raw_vec_and_offset().0, vec![6., 14.]);
    }
}

#[cfg(test)]
mod assemble_tests {
    use super::*;

    #[test]
    fn assemble_rechunks() {
        // A 1-D array [0..7) in blocks of 3, re-blocked into blocks of 4: block 1 is [4..7).
        let b = |v: Vec<f64>| Block::F64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap());
        let (b1, b2) = (b(vec![3., 4., 5.]), b(vec![6.]));
        let out = assemble(&[&b1, &b2], &[vec![-1], vec![2]], &[3]).unwrap();
        assert_eq!(out, b(vec![4., 5., 6.]));
    }
}
