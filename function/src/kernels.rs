//! Block kernels: pure functions from input blocks to one output block.

use ndarray::{ArrayD, Axis, IxDyn, SliceInfoElem, Zip};
use nums_layout::batch::{BinaryOp, Kernel, RandomDist, ReduceOp, UnaryOp};
use nums_layout::map_block;
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
        Kernel::Iota { axis, start, step } => {
            let origin = out.block_origin(index);
            let o = *origin.get(*axis).ok_or("iota axis out of range")? as f64;
            Block::F64(ArrayD::from_shape_fn(IxDyn(&shape), |i| {
                start + step * (o + i[*axis] as f64)
            }))
        }
        Kernel::Eye { k } => {
            let origin = out.block_origin(index);
            if origin.len() != 2 {
                return Err("eye makes 2-D blocks".into());
            }
            let (r0, c0) = (origin[0] as i64, origin[1] as i64);
            Block::F64(ArrayD::from_shape_fn(IxDyn(&shape), |i| {
                ((c0 + i[1] as i64) - (r0 + i[0] as i64) == *k) as u8 as f64
            }))
        }
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
            // A 0-d block: it broadcasts to x's shape without filling a block.
            let s = Block::full(DType::Float64, &[], *value);
            if *scalar_left {
                binary(*op, &s, x)?
            } else {
                binary(*op, x, &s)?
            }
        }
        Kernel::Where => {
            let [c, a, b] = inputs else {
                return Err(format!("where needs 3 inputs, got {}", inputs.len()));
            };
            let dim = IxDyn(&shape);
            let (c, a, b) = (c.to_bool(), a.to_f64(), b.to_f64());
            let bc = |x| format!("where: a block of shape {x:?} does not broadcast to {shape:?}");
            let c = c.broadcast(dim.clone()).ok_or_else(|| bc(c.shape()))?;
            let a = a.broadcast(dim.clone()).ok_or_else(|| bc(a.shape()))?;
            let b = b.broadcast(dim).ok_or_else(|| bc(b.shape()))?;
            Block::F64(
                Zip::from(c)
                    .and(a)
                    .and(b)
                    .par_map_collect(|&c, &a, &b| if c { a } else { b }),
            )
        }
        Kernel::Einsum {
            subscripts,
            operands,
        } => crate::einsum::sum_of_terms(subscripts, *operands, inputs)?,
        Kernel::Transpose { perm } => {
            let x = one(inputs)?;
            if perm.len() != x.shape().len() {
                return Err(format!(
                    "transpose {perm:?} of a {}-D block",
                    x.shape().len()
                ));
            }
            map_block!(x, a => a.view().permuted_axes(perm.clone()).as_standard_layout().into_owned())
        }
        Kernel::Reduce { op, axes } => reduce(inputs, *op, axes)?,
        Kernel::Assemble { offsets, step } => assemble(inputs, offsets, step, &shape)?,
        Kernel::Reshape { ranges } => splice(inputs, ranges, &shape)?,
        Kernel::Take { axis, picks } => take(inputs, *axis, picks, &shape)?,
        k @ (Kernel::Qr { .. }
        | Kernel::Lstsq { .. }
        | Kernel::Svd { .. }
        | Kernel::Cholesky
        | Kernel::TriangularSolve { .. }
        | Kernel::SubtractProducts { .. }
        | Kernel::SubtractGram { .. }
        | Kernel::LuSolve
        | Kernel::Inverse
        | Kernel::Det { .. }) => crate::linalg::run(k, inputs, &shape)?,
    };
    // Cast to the output dtype the driver planned (kernels compute in float64 where the
    // dtypes mix, as NumPy's loops do after promotion).
    let block = block.cast(out.dtype);
    if block.shape() != shape.as_slice() {
        return Err(format!(
            "kernel produced a block of shape {:?}, expected {:?}",
            block.shape(),
            shape
        ));
    }
    Ok(block)
}

/// The inputs in the first one's dtype: borrowed where they already are (the usual case),
/// converted only where they differ.
fn in_first_dtype<'a>(inputs: &[&'a Block]) -> (DType, Vec<std::borrow::Cow<'a, Block>>) {
    let dtype = inputs.first().map_or(DType::Float64, |b| b.dtype());
    let same = inputs
        .iter()
        .map(|&b| {
            if b.dtype() == dtype {
                std::borrow::Cow::Borrowed(b)
            } else {
                std::borrow::Cow::Owned(b.clone().cast(dtype))
            }
        })
        .collect();
    (dtype, same)
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
        RandomDist::Integers { low, high } => {
            let span = (high - low) as f64;
            (low as f64 + (uniform01(key, i) * span).floor()).min((high - 1) as f64)
        }
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
    if op.is_logical() {
        let (a, b) = (a.to_bool(), b.to_bool());
        let (a, b) = (
            a.broadcast(dim.clone()).expect("broadcastable"),
            b.broadcast(dim).expect("broadcastable"),
        );
        let zip = Zip::from(a).and(b);
        return Ok(Block::Bool(match op {
            BinaryOp::And => zip.par_map_collect(|x, y| *x && *y),
            BinaryOp::Or => zip.par_map_collect(|x, y| *x || *y),
            _ => zip.par_map_collect(|x, y| *x != *y),
        }));
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
        op => Block::F64(zip.par_map_collect(|x, y| op.apply(*x, *y))),
    })
}

/// Each input reduced over `axes`, then the partial results combined in input order.
fn reduce(inputs: &[&Block], op: ReduceOp, axes: &[usize]) -> Result<Block, String> {
    let mut axes = axes.to_vec();
    axes.sort_unstable_by(|a, b| b.cmp(a));
    let mut acc: Option<ArrayD<f64>> = None;
    for x in inputs {
        let x = x.to_f64();
        if let Some(&ax) = axes.iter().find(|&&ax| ax >= x.ndim()) {
            return Err(format!(
                "{} over axis {ax} of a {}-D block",
                op.name(),
                x.ndim()
            ));
        }
        let fold = |a: ndarray::ArrayViewD<'_, f64>, ax: usize| {
            if op == ReduceOp::Sum {
                a.sum_axis(Axis(ax))
            } else {
                a.fold_axis(Axis(ax), op.identity(), |&a, &v| op.apply(a, v))
            }
        };
        // Reduce from a view of the block: only the (smaller) result is allocated.
        let part = match axes.split_first() {
            None => x.into_owned(),
            Some((&first, rest)) => rest
                .iter()
                .fold(fold(x.view(), first), |p, &ax| fold(p.view(), ax)),
        };
        acc = Some(match acc {
            None => part,
            Some(mut s) => {
                if s.shape() != part.shape() {
                    return Err(format!(
                        "{} of partial results of shapes {:?} and {:?}",
                        op.name(),
                        s.shape(),
                        part.shape()
                    ));
                }
                Zip::from(&mut s)
                    .and(&part)
                    .for_each(|a, &v| *a = op.apply(*a, v));
                s
            }
        });
    }
    acc.map(Block::F64)
        .ok_or_else(|| format!("{} needs at least one input", op.name()))
}

/// Output slice `p` along `axis` is slice `picks[p].1` of input `picks[p].0`.
fn take(
    inputs: &[&Block],
    axis: usize,
    picks: &[(u32, u64)],
    shape: &[usize],
) -> Result<Block, String> {
    if picks.len() != shape.get(axis).copied().unwrap_or(0) || inputs.is_empty() {
        return Err(format!(
            "take of {} picks into a block of shape {shape:?}",
            picks.len()
        ));
    }
    fn go<T: Clone>(
        out: &mut ArrayD<T>,
        xs: &[&ArrayD<T>],
        axis: usize,
        picks: &[(u32, u64)],
    ) -> Result<(), String> {
        for (p, &(k, i)) in picks.iter().enumerate() {
            let x = xs
                .get(k as usize)
                .ok_or_else(|| format!("take: no input {k}"))?;
            if i as usize >= x.shape()[axis] {
                return Err(format!(
                    "take: index {i} of a block of {} along axis {axis}",
                    x.shape()[axis]
                ));
            }
            out.index_axis_mut(Axis(axis), p)
                .assign(&x.index_axis(Axis(axis), i as usize));
        }
        Ok(())
    }
    let (dtype, same) = in_first_dtype(inputs);
    let mut out = Block::full(dtype, shape, 0.0);
    macro_rules! arm {
        ($v:ident, $o:ident) => {{
            let xs: Vec<&ArrayD<_>> = same
                .iter()
                .map(|b| match b.as_ref() {
                    Block::$v(a) => a,
                    _ => unreachable!("cast above"),
                })
                .collect();
            go($o, &xs, axis, picks)?
        }};
    }
    match &mut out {
        Block::F64(o) => arm!(F64, o),
        Block::F32(o) => arm!(F32, o),
        Block::I64(o) => arm!(I64, o),
        Block::Bool(o) => arm!(Bool, o),
    }
    Ok(out)
}

/// The elements `ranges[k]` (flat, C order) of each input, concatenated and shaped as
/// the output block.
fn splice(inputs: &[&Block], ranges: &[(u64, u64)], shape: &[usize]) -> Result<Block, String> {
    if inputs.len() != ranges.len() || inputs.is_empty() {
        return Err(format!(
            "reshape has {} inputs and {} ranges",
            inputs.len(),
            ranges.len()
        ));
    }
    fn cat<T: Clone>(
        parts: Vec<(&ArrayD<T>, (u64, u64))>,
        shape: &[usize],
    ) -> Result<ArrayD<T>, String> {
        let mut v = Vec::with_capacity(shape.iter().product());
        for (a, (lo, hi)) in parts {
            let a = a.as_standard_layout();
            let flat = a.as_slice().expect("standard layout");
            let r = flat
                .get(lo as usize..hi as usize)
                .ok_or_else(|| format!("range {lo}..{hi} of a block of {} elements", flat.len()))?;
            v.extend_from_slice(r);
        }
        ArrayD::from_shape_vec(IxDyn(shape), v).map_err(|e| format!("reshape to {shape:?}: {e}"))
    }
    let (dtype, same) = in_first_dtype(inputs);
    macro_rules! go {
        ($v:ident) => {{
            let parts = same
                .iter()
                .zip(ranges)
                .map(|(b, r)| match b.as_ref() {
                    Block::$v(a) => (a, *r),
                    _ => unreachable!("cast above"),
                })
                .collect();
            Block::$v(cat(parts, shape)?)
        }};
    }
    Ok(match dtype {
        DType::Float64 => go!(F64),
        DType::Float32 => go!(F32),
        DType::Int64 => go!(I64),
        DType::Bool => go!(Bool),
    })
}

/// Copies the part of each input block that lands in the output block, taking every
/// `step`-th source element (negative: backwards).
fn assemble(
    inputs: &[&Block],
    offsets: &[Vec<i64>],
    step: &[i64],
    shape: &[usize],
) -> Result<Block, String> {
    if inputs.len() != offsets.len() || inputs.is_empty() {
        return Err(format!(
            "assemble has {} inputs and {} offsets",
            inputs.len(),
            offsets.len()
        ));
    }
    /// The (destination, source) slices of one axis.
    fn axis(o: i64, len: i64, s: i64, n: i64) -> Option<(SliceInfoElem, SliceInfoElem)> {
        let (p_lo, p_hi) = nums_layout::meta::strided_overlap(o, len, s, n)?;
        let (first, last) = (p_lo * s - o, p_hi * s - o);
        let src = if s > 0 {
            SliceInfoElem::Slice {
                start: first as isize,
                end: Some(last as isize + 1),
                step: s as isize,
            }
        } else {
            // ndarray walks a negative step from the end of the range.
            SliceInfoElem::Slice {
                start: last as isize,
                end: Some(first as isize + 1),
                step: s as isize,
            }
        };
        let dst = SliceInfoElem::Slice {
            start: p_lo as isize,
            end: Some(p_hi as isize + 1),
            step: 1,
        };
        Some((dst, src))
    }
    fn place<T: Clone>(out: &mut ArrayD<T>, x: &ArrayD<T>, off: &[i64], step: &[i64]) {
        let mut dst = Vec::new();
        let mut src = Vec::new();
        for (d, &o) in off.iter().enumerate() {
            let s = step.get(d).copied().unwrap_or(1);
            match axis(o, x.shape()[d] as i64, s, out.shape()[d] as i64) {
                Some((a, b)) => {
                    dst.push(a);
                    src.push(b);
                }
                None => return,
            }
        }
        out.slice_mut(dst.as_slice())
            .assign(&x.slice(src.as_slice()));
    }
    let (dtype, same) = in_first_dtype(inputs);
    let mut out = Block::full(dtype, shape, 0.0);
    for (x, off) in same.iter().zip(offsets) {
        if off.len() != shape.len() || x.shape().len() != shape.len() {
            return Err(format!(
                "assemble of a {}-D block at offset {off:?} into a {}-D block",
                x.shape().len(),
                shape.len()
            ));
        }
        match (&mut out, x.as_ref()) {
            (Block::F64(o), Block::F64(x)) => place(o, x, off, step),
            (Block::F32(o), Block::F32(x)) => place(o, x, off, step),
            (Block::I64(o), Block::I64(x)) => place(o, x, off, step),
            (Block::Bool(o), Block::Bool(x)) => place(o, x, off, step),
            _ => unreachable!("cast above"),
        }
    }
    Ok(out)
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
}

#[cfg(test)]
mod assemble_tests {
    use super::*;

    #[test]
    fn assemble_rechunks() {
        // A 1-D array [0..7) in blocks of 3, re-blocked into blocks of 4: block 1 is [4..7).
        let b = |v: Vec<f64>| Block::F64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap());
        let (b1, b2) = (b(vec![3., 4., 5.]), b(vec![6.]));
        let out = assemble(&[&b1, &b2], &[vec![-1], vec![2]], &[], &[3]).unwrap();
        assert_eq!(out, b(vec![4., 5., 6.]));
        // x[::-2] of [0..7) in blocks of 3, output block 0 (2 elements): 6, 4 — from the
        // source coordinate 6 backwards; block 1 [3,4,5] sits at offset 3 - 6 = -3.
        let b0 = b(vec![0., 1., 2.]);
        let out = assemble(
            &[&b1, &b2, &b0],
            &[vec![-3], vec![0], vec![-6]],
            &[-2],
            &[4],
        )
        .unwrap();
        assert_eq!(out, b(vec![6., 4., 2., 0.]));
    }
}
