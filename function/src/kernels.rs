//! Block kernels: pure functions from input blocks to one output block. Elementwise
//! functions and reductions compute in the operands' promoted dtype as NumPy's loops do
//! ([`crate::compute`]).

use std::borrow::Cow;

use crate::slices::{Runs, copy_slices};
use ndarray::{ArrayD, Axis, IxDyn, SliceInfoElem, Zip};
use nums_layout::batch::{BinaryOp, Frame, Kernel, RandomDist, UnaryOp};
use nums_layout::meta::ScalarKind;
use nums_layout::meta::{ArrayMeta, ravel};
use nums_layout::{Block, DType, Elem, Scalar, for_dtype, map_block};

use crate::compute;
use crate::order;
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
        Kernel::Random { dist, seed, frame } => random(*dist, *seed, frame.as_ref(), out, index),
        Kernel::Iota {
            axis,
            start,
            step,
            last,
        } => iota(out, index, *axis, *start, *step, *last)?,
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
        Kernel::Constant { values } => {
            let n: usize = shape.iter().product();
            if values.len() != n || out.num_blocks() != 1 {
                return Err(format!(
                    "a constant of {} values for a block of shape {shape:?} (one-block arrays only)",
                    values.len()
                ));
            }
            // Each value cast once, exactly (an int stays an int, a complex a complex).
            for_dtype!(out.dtype, T => T::wrap(
                ArrayD::from_shape_vec(IxDyn(&shape), values.iter().map(|&v| T::from_scalar(v)).collect())
                    .map_err(|e| e.to_string())?))
        }
        Kernel::Param { name } => {
            return Err(format!(
                "parameter {name} was sent without its values (a driver bug)"
            ));
        }
        Kernel::ImportNpy { .. }
        | Kernel::ImportCsv { .. }
        | Kernel::CsvCount { .. }
        | Kernel::ImportParquet { .. }
        | Kernel::ImportZarr { .. } => {
            return Err("an import kernel reads its file before it runs (see `import`)".into());
        }
        Kernel::ExportNpyPart { .. }
        | Kernel::ExportNpyBlock { .. }
        | Kernel::ExportZarrChunk { .. } => {
            return Err("an export writes as it runs (see `export`)".into());
        }
        Kernel::Unary { op } => compute::unary(*op, one(inputs)?, out.dtype),
        Kernel::CheckBelow { limit, error } => {
            let x = one(inputs)?;
            if x.to_i64().iter().any(|v| v >= limit) {
                return Err(error.clone());
            }
            x.clone()
        }
        Kernel::Binary { op } => {
            let [a, b] = inputs else {
                return Err(format!(
                    "binary kernel needs 2 inputs, got {}",
                    inputs.len()
                ));
            };
            compute::binary(*op, a, b)?
        }
        Kernel::Scalar {
            op,
            value,
            scalar_left,
        } => {
            let x = one(inputs)?;
            // NumPy's power of a float or complex array to the scalar 0.5 is its sqrt (so
            // -0.0 and -inf give -0.0 and NaN, where pow gives 0.0 and inf; (inf+1j)**0.5
            // is inf+0j, where cpow gives inf+nanj).
            if *op == BinaryOp::Pow
                && !*scalar_left
                && value.kind() == ScalarKind::Float
                && value.as_f64() == 0.5
                && (x.dtype().is_float() || x.dtype().is_complex())
            {
                return Ok(compute::unary(UnaryOp::Sqrt, x, out.dtype).cast(out.dtype));
            }
            // A 0-d block in the dtype NumPy 2 gives the weak scalar with x (NEP 50: the
            // array's, where the scalar's kind fits): it broadcasts to x's shape without
            // filling a block, an int stays exact, and with a float32 array a Python number
            // is a float32 first (`F == 0.1` compares with 0.1f32).
            let s = Block::full(x.dtype().promote_scalar(value.kind()), &[], *value);
            if *scalar_left {
                compute::binary(*op, &s, x)?
            } else {
                compute::binary(*op, x, &s)?
            }
        }
        Kernel::Where => {
            let [c, a, b] = inputs else {
                return Err(format!("where needs 3 inputs, got {}", inputs.len()));
            };
            where_(c, a, b, out.dtype, &shape)?
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
            map_block!(x, a => transposed(a, perm))
        }
        Kernel::Reduce { op, axes } => compute::reduce(inputs, *op, axes)?,
        Kernel::Assemble { offsets, step } => assemble(inputs, offsets, step, &shape)?,
        Kernel::Reshape { ranges } => splice(inputs, ranges, &shape)?,
        Kernel::Fft {
            axis,
            kind,
            scale,
            twiddle,
        } => crate::fft::fft(
            one(inputs)?,
            *kind,
            *axis,
            *scale,
            *twiddle,
            out.dtype,
            &shape,
            &out.block_origin(index),
        )?,
        Kernel::Take { axis, picks } => take(inputs, *axis, picks, &shape)?,
        Kernel::Put { axes, grid } => put(inputs, axes, grid, out.dtype)?,
        Kernel::Scan {
            op,
            axis,
            exclusive,
            offset,
        } => {
            let (x, offsets) = match (inputs, offset) {
                ([x], None) => (*x, None),
                ([x, o], Some(k)) => (*x, Some((*o, *k))),
                _ => return Err(format!("a scan given {} inputs", inputs.len())),
            };
            order::scan(x, offsets, *op, *axis, *exclusive, out.dtype)?
        }
        Kernel::ScanTotal { op, axis } => {
            let (x, start) = match inputs {
                [x] => (*x, None),
                [x, s] => (*x, Some(*s)),
                _ => return Err(format!("a total given {} inputs", inputs.len())),
            };
            order::scan_total(x, start, *op, *axis, out.dtype)?
        }
        Kernel::Sort {
            axis,
            descending,
            arg,
            ..
        } => {
            let origin = out.block_origin(index).get(*axis).copied().unwrap_or(0);
            order::sort(one(inputs)?, *axis, *descending, *arg, origin)?
        }
        Kernel::SortCount {
            first,
            splitters,
            descending,
        } => order::sort_count(one(inputs)?, *first, splitters, *descending)?,
        Kernel::SortMerge {
            parts,
            start,
            descending,
            arg,
            ..
        } => {
            let len = shape.first().copied().unwrap_or(0);
            order::sort_merge(inputs, *parts, *start, len, *descending, *arg)?
        }
        Kernel::SearchCount { right } => order::search_counts(inputs, *right)?,
        Kernel::Compress { axis } => {
            let origin = out.block_origin(index).get(*axis).copied().unwrap_or(0);
            order::compress(inputs, *axis, origin, &shape)?
        }
        Kernel::Gather { axis, len } => order::gather(inputs, *axis, *len, &shape)?,
        Kernel::IndexHits { len, block, blocks } => {
            order::index_hits(one(inputs)?, *len, *block, *blocks)?
        }
        Kernel::Overlay => order::overlay(inputs)?,
        Kernel::Quantile {
            axis,
            qs,
            method,
            nan,
            select,
        } => crate::stats::quantile(one(inputs)?, *axis, qs, *method, *nan, *select)?,
        Kernel::Histogram { bins, weighted } => crate::stats::histogram(inputs, *bins, *weighted)?,
        Kernel::Bincount { length, weighted } => {
            crate::stats::bincount(inputs, *length, *weighted)?
        }
        Kernel::DistinctCounts { cap } => crate::distinct::distinct_counts(inputs, *cap)?,
        Kernel::DistinctMerge { cap } => crate::distinct::distinct_merge(inputs, *cap)?,
        Kernel::GlmSums {
            loss,
            cols,
            intercept,
            hessian,
        } => crate::glm::sums(*loss, *cols, *intercept, *hessian, inputs)?,
        k @ (Kernel::Qr { .. }
        | Kernel::Lstsq { .. }
        | Kernel::Svd { .. }
        | Kernel::Cholesky
        | Kernel::CholeskyBlock { .. }
        | Kernel::TriangularSolve { .. }
        | Kernel::SubtractProducts { .. }
        | Kernel::SubtractGram { .. }
        | Kernel::LuSolve
        | Kernel::Inverse
        | Kernel::Det { .. }
        | Kernel::LuPanel { .. }
        | Kernel::LuBack { .. }
        | Kernel::LuDet { .. }) => crate::linalg::run(k, inputs, &shape)?,
    };
    // Cast to the output dtype the driver planned (kernels compute in the operands'
    // promoted dtype, or wider: int64 sums, float64 functions of float32, complex128).
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

/// `a` with its axes permuted, in C order. A matrix is copied in square tiles that stay in
/// cache both ways (ndarray's copy of a permuted view walks it element by element through
/// a dynamic index: half of `corrcoef`'s time went there).
fn transposed<T: Clone>(a: &ArrayD<T>, perm: &[usize]) -> ArrayD<T> {
    const TILE: usize = 32;
    let v = a.view().permuted_axes(perm.to_vec());
    let (Some(src), [r, c], [1, 0]) = (a.as_slice(), v.shape(), perm) else {
        return v.as_standard_layout().into_owned();
    };
    // Output [r, c] of a C-order [c, r] source: out[i, j] = src[j * r + i].
    let (r, c) = (*r, *c);
    let mut out = src.to_vec();
    for i0 in (0..r).step_by(TILE) {
        for j0 in (0..c).step_by(TILE) {
            for i in i0..(i0 + TILE).min(r) {
                for j in j0..(j0 + TILE).min(c) {
                    out[i * c + j] = src[j * r + i].clone();
                }
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&[r, c]), out).expect("r x c elements")
}

/// The inputs in the first one's dtype.
fn in_first_dtype<'a>(inputs: &[&'a Block]) -> (DType, Vec<Cow<'a, Block>>) {
    let dtype = inputs.first().map_or(DType::Float64, |b| b.dtype());
    (
        dtype,
        inputs
            .iter()
            .map(|&b| compute::in_dtype(b, dtype))
            .collect(),
    )
}

/// Element at global index `g` is `start + step * g[axis]`; see [`Kernel::Iota`].
fn iota(
    out: &ArrayMeta,
    index: &[u64],
    axis: usize,
    start: Scalar,
    step: Scalar,
    last: Option<Scalar>,
) -> Result<Block, String> {
    let shape = out.block_shape(index);
    let origin = out.block_origin(index);
    let o = *origin.get(axis).ok_or("iota axis out of range")?;
    let n = out.shape[axis];
    let ints = |s: Scalar| !matches!(s, Scalar::Float(_));
    if !out.dtype.is_float() && ints(start) && ints(step) {
        let (a, d) = (start.as_i64(), step.as_i64());
        return Ok(Block::I64(ArrayD::from_shape_fn(IxDyn(&shape), |i| {
            let g = o + i[axis] as u64;
            match last {
                Some(l) if g + 1 == n => l.as_i64(),
                _ => a.wrapping_add(d.wrapping_mul(g as i64)),
            }
        })));
    }
    let (a, d) = (start.as_f64(), step.as_f64());
    // NumPy's linspace rounds toward -inf for an integer dtype (astype would truncate).
    let floor = out.dtype.is_int();
    Ok(Block::F64(ArrayD::from_shape_fn(IxDyn(&shape), |i| {
        let g = o + i[axis] as u64;
        let v = match last {
            Some(l) if g + 1 == n => l.as_f64(),
            _ => a + d * g as f64,
        };
        if floor { v.floor() } else { v }
    })))
}

/// `where(c, a, b)`: a and b in the output's dtype (exact for ints), picked by c.
fn where_(c: &Block, a: &Block, b: &Block, dtype: DType, shape: &[usize]) -> Result<Block, String> {
    let dim = IxDyn(shape);
    let bc = |x: &[usize]| format!("where: a block of shape {x:?} does not broadcast to {shape:?}");
    let c = c.to_bool();
    let c = c.broadcast(dim.clone()).ok_or_else(|| bc(c.shape()))?;
    Ok(for_dtype!(dtype, T => {
        let (a, b) = (a.to_elem::<T>(), b.to_elem::<T>());
        let a = a.broadcast(dim.clone()).ok_or_else(|| bc(a.shape()))?;
        let b = b.broadcast(dim.clone()).ok_or_else(|| bc(b.shape()))?;
        T::wrap(
            Zip::from(c)
                .and(a)
                .and(b)
                .par_map_collect(|&c, &a, &b| if c { a } else { b }),
        )
    }))
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

fn key_of(seed: u64) -> u64 {
    mix(seed.wrapping_add(0x632b_e59b_d9b4_e019))
}

/// Element `i` of the random integers in `[low, high)` with `seed`, exact over all of int64.
pub fn random_int(low: i64, high: i64, seed: u64, i: u64) -> i64 {
    let key = key_of(seed);
    let span = (high as i128 - low as i128).max(1) as u128;
    let offset = if span <= 1 << 53 {
        // floor(u * span), in float64 (exact for these spans; the values of earlier versions).
        ((uniform01(key, i) * span as f64).floor() as u128).min(span - 1)
    } else {
        // The same 53 random bits, scaled in integers.
        let h = mix(key ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15)) >> 11;
        (h as u128 * span) >> 53
    };
    (low as i128 + offset as i128) as i64
}

/// Element `i` of the random array with `seed`: the same value whatever the block shape.
pub fn random_value(dist: RandomDist, seed: u64, i: u64) -> f64 {
    let key = key_of(seed);
    match dist {
        RandomDist::Uniform => uniform01(key, i),
        RandomDist::Integers { low, high } => random_int(low, high, seed, i) as f64,
        RandomDist::Gamma { shape } => crate::random::gamma(key, i, shape),
        RandomDist::Poisson { lam } => crate::random::poisson(key, i, lam) as f64,
        RandomDist::Binomial { n, p } => crate::random::binomial(key, i, n, p) as f64,
        RandomDist::Normal => {
            // Box-Muller on two independent uniforms; 1-u keeps the log finite.
            let u1 = 1.0 - uniform01(key, 2 * i);
            let u2 = uniform01(key, 2 * i + 1);
            (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
        }
    }
}

fn random(
    dist: RandomDist,
    seed: u64,
    frame: Option<&Frame>,
    out: &ArrayMeta,
    index: &[u64],
) -> Block {
    match dist {
        RandomDist::Integers { low, high } => Block::I64(by_flat_index(out, frame, index, |i| {
            random_int(low, high, seed, i)
        })),
        RandomDist::Poisson { lam } => Block::I64(by_flat_index(out, frame, index, |i| {
            crate::random::poisson(key_of(seed), i, lam)
        })),
        RandomDist::Binomial { n, p } => Block::I64(by_flat_index(out, frame, index, |i| {
            crate::random::binomial(key_of(seed), i, n, p)
        })),
        _ => Block::F64(by_flat_index(out, frame, index, |i| {
            random_value(dist, seed, i)
        })),
    }
}

/// Output block `index` of `out` whose element at flat index `i` of the whole array is
/// `f(i)`; within `frame`, the flat index in the frame's array.
fn by_flat_index<T: Send + Clone + Default>(
    out: &ArrayMeta,
    frame: Option<&Frame>,
    index: &[u64],
    f: impl Fn(u64) -> T + Sync,
) -> ArrayD<T> {
    let shape = out.block_shape(index);
    let origin = out.block_origin(index);
    let n: usize = shape.iter().product();
    let row = shape.last().copied().unwrap_or(1).max(1);
    let mut v = vec![T::default(); n];
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
        let (base, stride) = match frame {
            None => (ravel(&g, &out.shape), 1),
            Some(fr) => {
                let at: Vec<u64> = (g.iter().zip(&fr.start).zip(&fr.step))
                    .map(|((&p, a), s)| (a + p as i64 * s) as u64)
                    .collect();
                (ravel(&at, &fr.shape), fr.step.last().copied().unwrap_or(1))
            }
        };
        for (j, x) in chunk.iter_mut().enumerate() {
            *x = f(base.wrapping_add_signed(j as i64 * stride));
        }
    });
    ArrayD::from_shape_vec(IxDyn(&shape), v).expect("shape")
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
        // Consecutive picks of one input copied as runs.
        let mut at = 0;
        while at < picks.len() {
            let k = picks[at].0;
            let x = xs
                .get(k as usize)
                .ok_or_else(|| format!("take: no input {k}"))?;
            let mut runs = Runs::default();
            while let Some(&(kk, i)) = picks.get(at).filter(|p| p.0 == k) {
                if i as usize >= x.shape()[axis] {
                    return Err(format!(
                        "take: index {i} of a block of {} along axis {axis}",
                        x.shape()[axis]
                    ));
                }
                debug_assert_eq!(kk, k);
                runs.push(at, i as usize);
                at += 1;
            }
            copy_slices(out, x, axis, &runs)?;
        }
        Ok(())
    }
    let (dtype, same) = in_first_dtype(inputs);
    Ok(for_dtype!(dtype, T => {
        let xs: Vec<&ArrayD<T>> = same.iter().map(|b| T::view(b).expect("cast above")).collect();
        let mut out = ArrayD::from_elem(IxDyn(shape), T::ZERO);
        go(&mut out, &xs, axis, picks)?;
        T::wrap(out)
    }))
}

/// x's block (input 0) with the elements `axes` name set from v's blocks (the other
/// inputs, row-major over `grid`); see [`Kernel::Put`].
fn put(
    inputs: &[&Block],
    axes: &[Vec<(u64, u32, u64)>],
    grid: &[u32],
    dtype: DType,
) -> Result<Block, String> {
    let Some((x, vs)) = inputs.split_first() else {
        return Err("put needs x's block".into());
    };
    let nv: usize = grid.iter().map(|&g| g as usize).product();
    if vs.len() != nv * usize::from(!axes.iter().any(Vec::is_empty))
        || axes.len() != x.shape().len()
    {
        return Err(format!(
            "put of {} v blocks (grid {grid:?}) into a {}-D block along {} axes",
            vs.len(),
            x.shape().len(),
            axes.len()
        ));
    }
    fn go<T: Clone>(
        out: &mut ArrayD<T>,
        vs: &[&ArrayD<T>],
        axes: &[Vec<(u64, u32, u64)>],
        grid: &[u32],
    ) -> Result<(), String> {
        let counts: Vec<u64> = axes.iter().map(|a| a.len() as u64).collect();
        let grid: Vec<u64> = grid.iter().map(|&g| u64::from(g)).collect();
        let total: u64 = counts.iter().product();
        let (mut o, mut k, mut i) = (
            vec![0; axes.len()],
            vec![0; axes.len()],
            vec![0; axes.len()],
        );
        for lin in 0..total {
            let pick = nums_layout::meta::unravel(lin, &counts);
            for d in 0..axes.len() {
                let (op, vk, vi) = axes[d][pick[d] as usize];
                (o[d], k[d], i[d]) = (op as usize, u64::from(vk), vi as usize);
            }
            let v = vs[ravel(&k, &grid) as usize];
            let val = v
                .get(IxDyn(&i))
                .ok_or_else(|| format!("put: no element {i:?} in a v block of {:?}", v.shape()))?;
            *out.get_mut(IxDyn(&o))
                .ok_or_else(|| format!("put: no element {o:?} in x's block"))? = val.clone();
        }
        Ok(())
    }
    let x = compute::in_dtype(x, dtype);
    let vs: Vec<Cow<Block>> = vs.iter().map(|&b| compute::in_dtype(b, dtype)).collect();
    Ok(for_dtype!(dtype, T => {
        let vs: Vec<&ArrayD<T>> = vs.iter().map(|b| T::view(b).expect("cast above")).collect();
        let mut out = T::view(&x).expect("cast above").clone();
        go(&mut out, &vs, axes, grid)?;
        T::wrap(out)
    }))
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
    Ok(for_dtype!(dtype, T => {
        let parts = same
            .iter()
            .zip(ranges)
            .map(|(b, r)| (T::view(b).expect("cast above"), *r))
            .collect();
        T::wrap(cat(parts, shape)?)
    }))
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
        let (mut d, mut s) = (out.slice_mut(dst.as_slice()), x.slice(src.as_slice()));
        // Axes of length 1 dropped: ndarray's inner loop runs along the last axis, and a
        // column (n x 1) would otherwise copy one element per outer step.
        for ax in (0..d.ndim()).rev() {
            if d.shape()[ax] == 1 && d.ndim() > 1 {
                d.index_axis_inplace(Axis(ax), 0);
                s.index_axis_inplace(Axis(ax), 0);
            }
        }
        // One and two axes copied with fixed dimensions (a dynamic one looks up its
        // strides per element), contiguous runs as slices.
        if let (Some(d), Some(s)) = (d.as_slice_mut(), s.as_slice()) {
            d.clone_from_slice(s);
            return;
        }
        match d.ndim() {
            1 => {
                let mut d = d.into_dimensionality::<ndarray::Ix1>().expect("1-D");
                d.assign(&s.into_dimensionality::<ndarray::Ix1>().expect("1-D"));
            }
            2 => {
                let mut d = d.into_dimensionality::<ndarray::Ix2>().expect("2-D");
                let s = s.into_dimensionality::<ndarray::Ix2>().expect("2-D");
                for (mut dr, sr) in d.rows_mut().into_iter().zip(s.rows()) {
                    match (dr.as_slice_mut(), sr.as_slice()) {
                        (Some(dr), Some(sr)) => dr.clone_from_slice(sr),
                        _ => dr.assign(&sr),
                    }
                }
            }
            _ => d.assign(&s),
        }
    }
    let (dtype, same) = in_first_dtype(inputs);
    for (x, off) in same.iter().zip(offsets) {
        if off.len() != shape.len() || x.shape().len() != shape.len() {
            return Err(format!(
                "assemble of a {}-D block at offset {off:?} into a {}-D block",
                x.shape().len(),
                shape.len()
            ));
        }
    }
    Ok(for_dtype!(dtype, T => {
        let views: Vec<&ArrayD<T>> = same.iter().map(|x| T::view(x).expect("cast above")).collect();
        if step.iter().all(|&s| s == 1)
            && let Some(out) = rows_in_order(&views, offsets, shape)
        {
            return Ok(T::wrap(out));
        }
        let mut out = ArrayD::from_elem(IxDyn(shape), T::ZERO);
        for (x, off) in same.iter().zip(offsets) {
            place(&mut out, T::view(x).expect("cast above"), off, step);
        }
        T::wrap(out)
    }))
}

/// Inputs of whole rows that tile the output along axis 0 (a re-blocking into longer
/// blocks: a sort's column gathered into one), copied one after another on rayon's threads
/// with no zeroed output first ([`nums_layout::block::concat_views`]); None otherwise.
fn rows_in_order<T: Copy + Send + Sync>(
    inputs: &[&ArrayD<T>],
    offsets: &[Vec<i64>],
    shape: &[usize],
) -> Option<ArrayD<T>> {
    let n = *shape.first()? as i64;
    let mut parts = Vec::with_capacity(inputs.len());
    for (x, off) in inputs.iter().zip(offsets) {
        if off[1..].iter().any(|&o| o != 0) || x.shape()[1..] != shape[1..] {
            return None;
        }
        let (o, len) = (off[0], x.shape()[0] as i64);
        let (lo, hi) = (o.max(0), (o + len).min(n));
        if lo < hi {
            let rows = ndarray::Slice::from((lo - o) as usize..(hi - o) as usize);
            parts.push((lo, hi, x.slice_axis(Axis(0), rows)));
        }
    }
    parts.sort_by_key(|p| p.0);
    let tiled = parts.iter().try_fold(0, |at, p| (p.0 == at).then_some(p.1));
    if tiled != Some(n) {
        return None;
    }
    let views: Vec<_> = parts.into_iter().map(|p| p.2).collect();
    nums_layout::block::concat_views(shape, &views)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiled_transposes_match_ndarrays() {
        for (r, c) in [
            (0, 3),
            (1, 1),
            (1, 70),
            (70, 1),
            (33, 70),
            (64, 32),
            (5, 129),
        ] {
            let a = ArrayD::from_shape_fn(IxDyn(&[c, r]), |i| (i[0] * 1000 + i[1]) as i64);
            let want = a
                .view()
                .permuted_axes(vec![1, 0])
                .as_standard_layout()
                .into_owned();
            assert_eq!(transposed(&a, &[1, 0]), want, "{r} x {c}");
        }
        let a = ArrayD::from_shape_fn(IxDyn(&[2, 3, 4]), |i| {
            (i[0] * 100 + i[1] * 10 + i[2]) as f64
        });
        let want = a
            .view()
            .permuted_axes(vec![2, 0, 1])
            .as_standard_layout()
            .into_owned();
        assert_eq!(transposed(&a, &[2, 0, 1]), want);
        // A source not in C order (Fortran's) takes ndarray's way.
        let f = a
            .index_axis(Axis(0), 1)
            .reversed_axes()
            .to_owned()
            .into_dyn();
        let want = f
            .view()
            .permuted_axes(vec![1, 0])
            .as_standard_layout()
            .into_owned();
        assert_eq!(transposed(&f, &[1, 0]), want);
    }

    #[test]
    fn random_values_do_not_depend_on_block_shape() {
        let a = ArrayMeta::new(vec![5, 7], vec![2, 3], DType::Float64);
        let b = ArrayMeta::new(vec![5, 7], vec![5, 7], DType::Float64);
        let whole = random(RandomDist::Normal, 3, None, &b, &[0, 0]);
        let Block::F64(whole) = whole else { panic!() };
        for idx in a.blocks() {
            let Block::F64(part) = random(RandomDist::Normal, 3, None, &a, &idx) else {
                panic!()
            };
            let o = a.block_origin(&idx);
            for (i, v) in part.indexed_iter() {
                assert_eq!(*v, whole[[o[0] as usize + i[0], o[1] as usize + i[1]]]);
            }
        }
        // A region (rows 4, 2, 0; columns 1, 3, 5) made on its own, in blocks of 2:
        // the whole's elements there.
        let region = ArrayMeta::new(vec![3, 3], vec![2, 2], DType::Float64);
        let frame = Frame {
            shape: vec![5, 7],
            start: vec![4, 1],
            step: vec![-2, 2],
        };
        for idx in region.blocks() {
            let Block::F64(part) = random(RandomDist::Normal, 3, Some(&frame), &region, &idx)
            else {
                panic!()
            };
            let o = region.block_origin(&idx);
            for (i, v) in part.indexed_iter() {
                let (r, c) = (o[0] as usize + i[0], o[1] as usize + i[1]);
                assert_eq!(*v, whole[[4 - 2 * r, 1 + 2 * c]]);
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
        // Row blocks of a 2-D array gathered into a longer block (rows in order, the last
        // block's first rows only), given in any order; and columns placed side by side
        // (not whole rows): each equal to the array's slice.
        let a = ArrayD::from_shape_fn(IxDyn(&[7, 3]), |i| (i[0] * 10 + i[1]) as f64);
        let rows = |r: std::ops::Range<usize>| {
            Block::F64(a.slice(ndarray::s![r, ..]).to_owned().into_dyn())
        };
        let (r0, r1, r2) = (rows(0..3), rows(3..6), rows(6..7));
        let out = assemble(
            &[&r2, &r0, &r1],
            &[vec![5, 0], vec![-1, 0], vec![2, 0]],
            &[],
            &[6, 3],
        )
        .unwrap();
        assert_eq!(out, rows(1..7));
        let cols = |c: std::ops::Range<usize>| {
            Block::F64(a.slice(ndarray::s![.., c]).to_owned().into_dyn())
        };
        let out = assemble(
            &[&cols(0..2), &cols(2..3)],
            &[vec![0, 0], vec![0, 2]],
            &[],
            &[7, 3],
        )
        .unwrap();
        assert_eq!(out, Block::F64(a.clone()));
    }
}

#[cfg(test)]
mod int_tests {
    use super::*;
    use nums_layout::batch::ReduceOp;

    fn ints(v: &[i64]) -> Block {
        Block::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap())
    }

    fn run1(kernel: Kernel, inputs: &[&Block], dtype: DType, n: usize) -> Result<Block, String> {
        let meta = ArrayMeta::new(vec![n as u64], vec![n as u64], dtype);
        run(&kernel, inputs, &meta, &[0])
    }

    const BIG: i64 = 3_000_000_007;

    #[test]
    fn int64_arithmetic_is_exact_and_wraps() {
        let x = ints(&[BIG, -BIG, i64::MAX, i64::MIN, -7, 7]);
        let y = ints(&[BIG, 2, 1, -1, 2, -2]);
        let bin = |op, dtype| run1(Kernel::Binary { op }, &[&x, &y], dtype, 6).unwrap();
        assert_eq!(
            bin(BinaryOp::Mul, DType::Int64),
            ints(&[
                9_000_000_042_000_000_049,
                -6_000_000_014,
                i64::MAX,
                i64::MIN,
                -14,
                -14
            ])
        );
        assert_eq!(
            bin(BinaryOp::Add, DType::Int64),
            ints(&[6_000_000_014, -3_000_000_005, i64::MIN, i64::MAX, -5, 5])
        );
        assert_eq!(
            bin(BinaryOp::FloorDiv, DType::Int64),
            ints(&[1, -1_500_000_004, i64::MAX, i64::MIN, -4, -4])
        );
        assert_eq!(bin(BinaryOp::Mod, DType::Int64), ints(&[0, 1, 0, 0, 1, -1]));
        let Block::Bool(lt) = bin(BinaryOp::Lt, DType::Bool) else {
            panic!()
        };
        assert_eq!(
            lt.as_slice().unwrap(),
            &[false, true, false, true, true, false]
        );
        // 2^53 + 1 and 2^53 are different ints (equal as float64s).
        let a = ints(&[(1 << 53) + 1]);
        let b = ints(&[1 << 53]);
        let eq = run1(
            Kernel::Binary { op: BinaryOp::Eq },
            &[&a, &b],
            DType::Bool,
            1,
        )
        .unwrap();
        assert_eq!(eq, Block::Bool(ArrayD::from_elem(IxDyn(&[1]), false)));
    }

    #[test]
    fn int_scalars_stay_exact_and_float_scalars_promote() {
        let x = ints(&[(1 << 53) + 1, 2]);
        let k = |value: Scalar, op, dtype| {
            run1(
                Kernel::Scalar {
                    op,
                    value,
                    scalar_left: false,
                },
                &[&x],
                dtype,
                2,
            )
            .unwrap()
        };
        assert_eq!(
            k(Scalar::Int(1), BinaryOp::Add, DType::Int64),
            ints(&[(1 << 53) + 2, 3])
        );
        assert_eq!(
            k(Scalar::Int(2), BinaryOp::Pow, DType::Int64),
            ints(&[((1i64 << 53) + 1).wrapping_mul((1 << 53) + 1), 4])
        );
        let e = run1(
            Kernel::Scalar {
                op: BinaryOp::Pow,
                value: Scalar::Int(-1),
                scalar_left: false,
            },
            &[&x],
            DType::Int64,
            2,
        )
        .unwrap_err();
        assert!(
            e.contains("Integers to negative integer powers are not allowed"),
            "{e}"
        );
        // A float scalar computes in float64, as NumPy promotes.
        let Block::F64(f) = k(Scalar::Float(0.5), BinaryOp::Add, DType::Float64) else {
            panic!()
        };
        // 2^53 + 1 is 2^53 as a float64, and 2^53 + 0.5 rounds to it (NumPy: the same).
        assert_eq!(f.as_slice().unwrap(), &[9_007_199_254_740_992.0, 2.5]);
        let Block::F64(f) = k(Scalar::Float(f64::NAN), BinaryOp::Maximum, DType::Float64) else {
            panic!()
        };
        assert!(f.iter().all(|v| v.is_nan()));
        let Block::F64(f) = k(Scalar::Float(-0.0), BinaryOp::Mul, DType::Float64) else {
            panic!()
        };
        assert_eq!(f[1].to_bits(), (-0.0f64).to_bits());
        let Block::F64(f) = k(
            Scalar::Float(f64::NEG_INFINITY),
            BinaryOp::Maximum,
            DType::Float64,
        ) else {
            panic!()
        };
        assert_eq!(f[1], 2.0);
    }

    #[test]
    fn unary_int_ops_wrap() {
        let x = ints(&[i64::MIN, -BIG, 0, BIG]);
        let u = |op| run1(Kernel::Unary { op }, &[&x], DType::Int64, 4).unwrap();
        assert_eq!(u(UnaryOp::Abs), ints(&[i64::MIN, BIG, 0, BIG]));
        assert_eq!(u(UnaryOp::Neg), ints(&[i64::MIN, BIG, 0, -BIG]));
        assert_eq!(u(UnaryOp::Sign), ints(&[-1, -1, 0, 1]));
        assert_eq!(u(UnaryOp::Square), ints(&[0, BIG * BIG, 0, BIG * BIG]));
        let y = ints(&[(1 << 60) + 1]);
        let floor = run1(Kernel::Unary { op: UnaryOp::Floor }, &[&y], DType::Int64, 1).unwrap();
        assert_eq!(floor, y);
    }

    #[test]
    fn int_reductions_wrap_in_any_grouping() {
        let a = ints(&[i64::MAX, 5, -3]);
        let b = ints(&[i64::MAX, 1]);
        let r = |op, inputs: &[&Block]| {
            let meta = ArrayMeta::new(vec![], vec![], DType::Int64);
            run(&Kernel::Reduce { op, axes: vec![0] }, inputs, &meta, &[]).unwrap()
        };
        let want = i64::MAX
            .wrapping_add(5 - 3)
            .wrapping_add(i64::MAX)
            .wrapping_add(1);
        let Block::I64(s) = r(ReduceOp::Sum, &[&a, &b]) else {
            panic!()
        };
        assert_eq!(s[[]], want);
        let Block::I64(p) = r(ReduceOp::Prod, &[&a]) else {
            panic!()
        };
        assert_eq!(p[[]], i64::MAX.wrapping_mul(5).wrapping_mul(-3));
        let Block::I64(m) = r(ReduceOp::Min, &[&a, &b]) else {
            panic!()
        };
        assert_eq!(m[[]], -3);
    }

    /// nansum and nanprod skip only the input's own NaNs: a NaN that a block's partial
    /// result holds (inf - inf, 0 * inf) propagates through the later axes of one block
    /// and through the combine of partials, as NumPy's.
    #[test]
    fn nan_reductions_skip_only_the_inputs_nans() {
        let f = |shape: &[usize], v: &[f64]| {
            Block::F64(ArrayD::from_shape_vec(IxDyn(shape), v.to_vec()).unwrap())
        };
        let inf = f64::INFINITY;
        let r = |k: &Kernel, inputs: &[&Block], shape: Vec<u64>| {
            let idx = vec![0; shape.len()];
            let meta = ArrayMeta::new(shape.clone(), shape, DType::Float64);
            let Block::F64(a) = run(k, inputs, &meta, &idx).unwrap() else {
                panic!()
            };
            a
        };
        // One block, both axes reduced: row 0 sums to inf - inf.
        let x = f(&[2, 2], &[inf, -inf, 1.0, f64::NAN]);
        for op in [ReduceOp::NanSum, ReduceOp::Sum] {
            let k = Kernel::Reduce {
                op,
                axes: vec![0, 1],
            };
            assert!(r(&k, &[&x], vec![])[[]].is_nan(), "{op:?}");
        }
        // 0 * inf in one row, then the other axis.
        let y = f(&[2, 2], &[0.0, inf, 2.0, f64::NAN]);
        let k = Kernel::Reduce {
            op: ReduceOp::NanProd,
            axes: vec![1, 0],
        };
        assert!(r(&k, &[&y], vec![])[[]].is_nan());
        // The input's own NaN is skipped: row 1 of y is 2.
        let k = Kernel::Reduce {
            op: ReduceOp::NanProd,
            axes: vec![1],
        };
        let p = r(&k, &[&y], vec![2]);
        assert!(p[[0]].is_nan() && p[[1]] == 2.0, "{p}");
        // Partials combined: a NaN partial is a real NaN.
        let k = Kernel::Reduce {
            op: ReduceOp::NanSum,
            axes: vec![0],
        };
        let comb = k.combiner();
        let part = r(&k, &[&x], vec![2]);
        assert!(part[[0]] == inf && part[[1]] == -inf, "{part}");
        let nan_part = f(&[1], &[f64::NAN]);
        let one = f(&[1], &[1.0]);
        assert!(r(&comb, &[&nan_part, &one], vec![1])[[0]].is_nan());
        // No axis reduced (axis=()): each NaN of the input is the identity.
        let k = Kernel::Reduce {
            op: ReduceOp::NanSum,
            axes: vec![],
        };
        assert_eq!(
            r(&k, &[&f(&[2], &[f64::NAN, -0.0])], vec![2])
                .mapv(f64::to_bits)
                .as_slice()
                .unwrap(),
            &[0.0f64.to_bits(), (-0.0f64).to_bits()]
        );
        // nanmax's partial of NaNs only is still skipped.
        let k = Kernel::Reduce {
            op: ReduceOp::NanMax,
            axes: vec![0],
        };
        let comb = k.combiner();
        assert_eq!(r(&comb, &[&nan_part, &one], vec![1])[[0]], 1.0);
    }

    #[test]
    fn iota_is_exact_past_2_53() {
        let meta = ArrayMeta::new(vec![10], vec![4], DType::Int64);
        let k = Kernel::Iota {
            axis: 0,
            start: Scalar::Int(3_000_000_000_000_000_001),
            step: Scalar::Int(3),
            last: None,
        };
        let Block::I64(b) = run(&k, &[], &meta, &[1]).unwrap() else {
            panic!()
        };
        let want: Vec<i64> = (4..8).map(|g| 3_000_000_000_000_000_001 + 3 * g).collect();
        assert_eq!(b.as_slice().unwrap(), want.as_slice());
        // linspace(0, 10, 4, dtype=int64): floats rounded toward -inf, the endpoint exact.
        let meta = ArrayMeta::new(vec![4], vec![4], DType::Int64);
        let k = Kernel::Iota {
            axis: 0,
            start: Scalar::Float(-10.0),
            step: Scalar::Float(10.0 / 3.0),
            last: Some(Scalar::Float(0.0)),
        };
        assert_eq!(run(&k, &[], &meta, &[0]).unwrap(), ints(&[-10, -7, -4, 0]));
    }

    #[test]
    fn where_and_casts_keep_ints_exact() {
        let c = Block::Bool(ArrayD::from_shape_vec(IxDyn(&[2]), vec![true, false]).unwrap());
        let a = ints(&[(1 << 53) + 1, 0]);
        let b = Block::scalar(Scalar::Int(-((1 << 53) + 3)));
        let w = run1(Kernel::Where, &[&c, &a, &b], DType::Int64, 2).unwrap();
        assert_eq!(w, ints(&[(1 << 53) + 1, -((1 << 53) + 3)]));
        let f = Block::F64(
            ArrayD::from_shape_vec(IxDyn(&[4]), vec![f64::NAN, -2.7, 1e300, 2.5]).unwrap(),
        );
        assert_eq!(f.cast(DType::Int64), ints(&[i64::MIN, -2, i64::MIN, 2]));
        let Block::F32(g) = ints(&[(1 << 60) + (1 << 36) + 1]).cast(DType::Float32) else {
            panic!()
        };
        assert_eq!(g[0], ((1i64 << 60) + (1 << 37)) as f32);
    }

    #[test]
    fn int_matmul_is_exact_and_wraps() {
        // Sizes that cross the gemm's panels; values whose products overflow int64.
        let (m, k, n) = (70, 300, 260);
        let val = |i: usize, j: usize, s: u64| {
            let h = mix((i * 1000 + j) as u64 ^ s);
            (h as i64) >> (h % 40)
        };
        let a = ArrayD::from_shape_fn(IxDyn(&[m, k]), |i| val(i[0], i[1], 1));
        let b = ArrayD::from_shape_fn(IxDyn(&[k, n]), |i| val(i[0], i[1], 2));
        let (ba, bb) = (Block::I64(a.clone()), Block::I64(b.clone()));
        let got = crate::einsum::sum_of_terms("ij,jk->ik", 2, &[&ba, &bb]).unwrap();
        let Block::I64(got) = got else { panic!() };
        for i in 0..m {
            for j in 0..n {
                let want = (0..k).fold(0i64, |s, p| {
                    s.wrapping_add(a[[i, p]].wrapping_mul(b[[p, j]]))
                });
                assert_eq!(got[[i, j]], want, "({i}, {j})");
            }
        }
        // Transposed operand, batch axes and sums over terms in int64 too.
        let at = Block::I64(a.t().to_owned());
        let got2 = crate::einsum::sum_of_terms("ji,jk->ik", 2, &[&at, &bb]).unwrap();
        assert_eq!(got2, Block::I64(got.clone()));
        let twice = crate::einsum::sum_of_terms("ij,jk->ik", 2, &[&ba, &bb, &ba, &bb]).unwrap();
        assert_eq!(twice, Block::I64(got.mapv(|v| v.wrapping_mul(2))));
        let x = Block::I64(ArrayD::from_shape_fn(IxDyn(&[3, 4, 5]), |i| {
            val(i[0] * 100 + i[1], i[2], 3)
        }));
        let y = Block::I64(ArrayD::from_shape_fn(IxDyn(&[3, 5, 2]), |i| {
            val(i[0] * 100 + i[1], i[2], 4)
        }));
        let Block::I64(z) = crate::einsum::sum_of_terms("bij,bjk->bik", 2, &[&x, &y]).unwrap()
        else {
            panic!()
        };
        let (Block::I64(xa), Block::I64(ya)) = (&x, &y) else {
            panic!()
        };
        for bi in 0..3 {
            for i in 0..4 {
                for kk in 0..2 {
                    let want = (0..5).fold(0i64, |s, j| {
                        s.wrapping_add(xa[[bi, i, j]].wrapping_mul(ya[[bi, j, kk]]))
                    });
                    assert_eq!(z[[bi, i, kk]], want);
                }
            }
        }
    }
}
