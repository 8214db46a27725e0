//! Elementwise functions and reductions of blocks in every dtype, as NumPy's loops compute
//! them: both operands are cast to their promoted dtype (bool arithmetic to int8) and the
//! op runs in it. Integers wrap on overflow ([`nums_layout::num::Int`]); float32 computes
//! `+ - * /` in float32 (rounded as float64-then-float32 would be) and other functions in
//! float64, rounded once; complex computes in complex128 with NumPy's complex division,
//! power and lexicographic order ([`nums_layout::num`]).

use std::borrow::Cow;

use ndarray::{ArrayD, ArrayViewD, Axis, IxDyn, Zip};
use nums_layout::batch::{self, BinaryOp, ReduceOp, UnaryOp, unary_compute_dtype};
// The dtype an op computes in and the bytes its casts take are op semantics and the
// kernels' memory model, stated in nums_layout::batch; kept at their old paths here.
pub use nums_layout::batch::{binary_cast_bytes, cast_bytes, cast_workspace, compute_dtype};
use nums_layout::num::Int;
use nums_layout::{Block, C64, C128, DType, Elem};

/// Runs the arm of `$d`'s domain with the type name bound to its element type: the
/// integer arm for int8 ... uint64, the float arm for float32 and float64, the complex arm
/// for complex64 and complex128. Bool has none (it computes as int8 or as bool).
macro_rules! by_domain {
    ($d:expr, int $ti:ident => $int:expr, float $tf:ident => $float:expr, complex $tc:ident => $complex:expr) => {
        match $d {
            DType::Int8 => {
                type $ti = i8;
                $int
            }
            DType::Int16 => {
                type $ti = i16;
                $int
            }
            DType::Int32 => {
                type $ti = i32;
                $int
            }
            DType::Int64 => {
                type $ti = i64;
                $int
            }
            DType::UInt8 => {
                type $ti = u8;
                $int
            }
            DType::UInt16 => {
                type $ti = u16;
                $int
            }
            DType::UInt32 => {
                type $ti = u32;
                $int
            }
            DType::UInt64 => {
                type $ti = u64;
                $int
            }
            DType::Float32 => {
                type $tf = f32;
                $float
            }
            DType::Float64 => {
                type $tf = f64;
                $float
            }
            DType::Complex64 => {
                type $tc = C64;
                $complex
            }
            DType::Complex128 => {
                type $tc = C128;
                $complex
            }
            DType::Bool => unreachable!("bool computes as int8 or as bool"),
        }
    };
}

/// float32 or float64: the types whose `+ - * /` run natively.
pub trait Real:
    Elem
    + PartialOrd
    + Default
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
{
}
impl Real for f32 {}
impl Real for f64 {}

/// `op` of one block, its result in the dtype it computes in (the caller casts to the
/// output's dtype `out`).
pub fn unary(op: UnaryOp, x: &Block, out: DType) -> Block {
    if let (UnaryOp::Not, Block::Bool(b)) = (op, x) {
        return Block::Bool(b.mapv(|v| !v));
    }
    let d = x.dtype();
    match unary_compute_dtype(op, d, out) {
        DType::Bool => with_block!(x, a => Block::Bool(
            Zip::from(a).par_map_collect(|v| op.apply(v.to_f64()) != 0.0))),
        DType::Float32 => with_block!(x, a => Block::F32(
            Zip::from(a).par_map_collect(|v| op.apply(v.to_f64()) as f32))),
        DType::Float64 => with_block!(x, a => Block::F64(
            Zip::from(a).par_map_collect(|v| op.apply(v.to_f64())))),
        c => by_domain!(c,
            int T => {
                let a = x.to_elem::<T>();
                T::wrap(Zip::from(&*a).par_map_collect(|&v| op.apply_int(v).unwrap_or(v)))
            },
            float T => unreachable!("float functions computed above {:?}", T::DTYPE),
            complex T => {
                // Straight into the output's element type: a real result (abs, angle,
                // real, imag) is the real part, a predicate 1 or 0.
                let a = x.view::<T>().expect("complex computes in its own dtype");
                nums_layout::for_dtype!(out, O => O::wrap(Zip::from(a).par_map_collect(|&z| {
                    O::from_elem(op.apply_complex(z.to_c128()))
                })))
            }
        ),
    }
}

/// `op` of two blocks broadcast together, in the dtype it computes in
/// ([`compute_dtype`]); predicates give bool.
pub fn binary(op: BinaryOp, a: &Block, b: &Block) -> Result<Block, String> {
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
    let c = compute_dtype(op, a.dtype(), b.dtype());
    // NumPy compares int64 with uint64 exactly (their promoted dtype is float64).
    if op.is_predicate() && a.dtype().is_int() && b.dtype().is_int() && !c.is_exact() {
        return Ok(mixed_compare(op, a, b, dim));
    }
    by_domain!(c,
        int T => {
            let (x, y) = (a.to_elem::<T>(), b.to_elem::<T>());
            int_binary(op, bc(&x, &dim), bc(&y, &dim))
        },
        float T => {
            let (x, y) = (a.to_elem::<T>(), b.to_elem::<T>());
            Ok(float_binary(op, bc(&x, &dim), bc(&y, &dim)))
        },
        complex T => {
            let (x, y) = (a.to_elem::<T>(), b.to_elem::<T>());
            Ok(complex_binary(op, bc(&x, &dim), bc(&y, &dim)))
        }
    )
}

fn bc<'a, T>(a: &'a ArrayD<T>, dim: &IxDyn) -> ArrayViewD<'a, T> {
    a.broadcast(dim.clone()).expect("broadcastable")
}

/// `op` of two integers of one type (see [`BinaryOp::apply_int`]): an int array to a
/// negative power is NumPy's error.
fn int_binary<T: Int>(
    op: BinaryOp,
    a: ArrayViewD<'_, T>,
    b: ArrayViewD<'_, T>,
) -> Result<Block, String> {
    if op == BinaryOp::Pow && b.iter().any(|e| e.negative()) {
        return Err(format!("ValueError: {}", batch::NEGATIVE_POWER));
    }
    if op.is_predicate() {
        return Ok(Block::Bool(predicate(op, a, b)));
    }
    let zip = Zip::from(a).and(b);
    Ok(T::wrap(match op {
        BinaryOp::Add => zip.par_map_collect(|&x, &y| x.wadd(y)),
        BinaryOp::Sub => zip.par_map_collect(|&x, &y| x.wsub(y)),
        BinaryOp::Mul => zip.par_map_collect(|&x, &y| x.wmul(y)),
        BinaryOp::Div => return Err("/ of ints computes in float64".into()),
        op => zip.par_map_collect(|&x, &y| op.apply_int(x, y).expect("an int op")),
    }))
}

/// `op` of two floats of one type: `+ - * /` natively, comparisons, and the other ops in
/// float64 rounded once.
fn float_binary<T: Real>(op: BinaryOp, a: ArrayViewD<'_, T>, b: ArrayViewD<'_, T>) -> Block {
    if op.is_predicate() {
        return Block::Bool(predicate(op, a, b));
    }
    let zip = Zip::from(a).and(b);
    match op {
        BinaryOp::Add => T::wrap(zip.par_map_collect(|&x, &y| x + y)),
        BinaryOp::Sub => T::wrap(zip.par_map_collect(|&x, &y| x - y)),
        BinaryOp::Mul => T::wrap(zip.par_map_collect(|&x, &y| x * y)),
        BinaryOp::Div => T::wrap(zip.par_map_collect(|&x, &y| x / y)),
        // float32's steps are its own.
        BinaryOp::NextAfter if T::DTYPE == DType::Float32 => {
            T::wrap(zip.par_map_collect(|&x, &y| {
                T::from_elem(batch::nextafter_f32(x.to_f64() as f32, y.to_f64() as f32))
            }))
        }
        op => T::wrap(zip.par_map_collect(|&x, &y| T::from_elem(op.apply(x.to_f64(), y.to_f64())))),
    }
}

/// `op`, a predicate, of two views of one (broadcast) shape: the comparison chosen once,
/// not per element, and a side that is one value broadcast (`x > 1`) read as a scalar, so
/// that the other is one pass in its own layout.
fn predicate<T>(op: BinaryOp, a: ArrayViewD<'_, T>, b: ArrayViewD<'_, T>) -> ArrayD<bool>
where
    T: PartialOrd + Default + Copy + Send + Sync,
{
    let one = |v: &ArrayViewD<'_, T>| v.strides().iter().all(|&s| s == 0);
    macro_rules! each {
        ($($op:ident: $x:ident, $y:ident => $e:expr),*) => {
            match op {
                $(BinaryOp::$op => {
                    let f = |$x: T, $y: T| $e;
                    if let Some(&y) = b.first().filter(|_| one(&b)) {
                        return Zip::from(&a).par_map_collect(|&x| f(x, y));
                    }
                    if let Some(&x) = a.first().filter(|_| one(&a)) {
                        return Zip::from(&b).par_map_collect(|&y| f(x, y));
                    }
                    return Zip::from(&a).and(&b).par_map_collect(|&x, &y| f(x, y));
                })*
                _ => {}
            }
        };
    }
    each!(Lt: x, y => x < y, Le: x, y => x <= y, Gt: x, y => x > y,
          Ge: x, y => x >= y, Eq: x, y => x == y, Ne: x, y => x != y);
    Zip::from(a)
        .and(b)
        .par_map_collect(|&x, &y| op.compare(x, y).expect("a predicate"))
}

/// `op` of two complex numbers of one type, in complex128 (see
/// [`BinaryOp::apply_complex`]); comparisons are lexicographic, as NumPy's.
fn complex_binary<T: Elem>(op: BinaryOp, a: ArrayViewD<'_, T>, b: ArrayViewD<'_, T>) -> Block {
    let zip = Zip::from(a).and(b);
    if op.is_predicate() {
        return Block::Bool(zip.par_map_collect(|&x, &y| {
            op.compare_complex(x.to_c128(), y.to_c128())
                .expect("a predicate")
        }));
    }
    T::wrap(zip.par_map_collect(|&x, &y| T::from_elem(op.apply_complex(x.to_c128(), y.to_c128()))))
}

/// A comparison of a signed int block with a uint64 one (either side), exact.
fn mixed_compare(op: BinaryOp, a: &Block, b: &Block, dim: IxDyn) -> Block {
    let (x, y) = (a.to_i64(), b.to_i64());
    let (ua, ub) = (a.dtype().is_unsigned(), b.dtype().is_unsigned());
    let wide = |v: i64, unsigned: bool| {
        if unsigned {
            v as u64 as i128
        } else {
            v as i128
        }
    };
    Block::Bool(
        Zip::from(bc(&x, &dim))
            .and(bc(&y, &dim))
            .par_map_collect(|&p, &q| op.compare(wide(p, ua), wide(q, ub)).expect("a predicate")),
    )
}

/// Each input reduced over `axes`, then the partial results combined in input order (all
/// inputs of one dtype). Ints: sums and products in wrapping int64 (whose bits are
/// uint64's too), extremes in their own type; floats in float64; complex in complex128;
/// `all`/`any` in bool.
pub fn reduce(inputs: &[&Block], op: ReduceOp, axes: &[usize]) -> Result<Block, String> {
    let mut axes = axes.to_vec();
    axes.sort_unstable_by(|a, b| b.cmp(a));
    if let Some((x, &ax)) = inputs.iter().find_map(|x| {
        axes.iter()
            .find(|&&ax| ax >= x.shape().len())
            .map(|ax| (x, ax))
    }) {
        return Err(format!(
            "{} over axis {ax} of a {}-D block",
            op.name(),
            x.shape().len()
        ));
    }
    let d = inputs.first().map_or(DType::Float64, |x| x.dtype());
    if let Some(x) = inputs.iter().find(|x| x.dtype() != d) {
        return Err(format!(
            "{} of blocks of dtypes {d} and {}",
            op.name(),
            x.dtype()
        ));
    }
    if matches!(op, ReduceOp::All | ReduceOp::Any) {
        let f = |a: bool, v: bool| if op == ReduceOp::All { a && v } else { a || v };
        let parts = inputs
            .iter()
            .map(|x| fold_axes(&x.to_bool(), &axes, op == ReduceOp::All, f, f));
        return combine(parts, op, f).map(Block::Bool);
    }
    let extreme = matches!(
        op,
        ReduceOp::Min | ReduceOp::Max | ReduceOp::NanMin | ReduceOp::NanMax
    );
    if d.is_exact() && !extreme {
        let later = |acc, v| op.apply_i64(acc, v);
        let parts = inputs.iter().map(|x| {
            with_block!(x, a => fold_axes(a, &axes, op.identity_i64(),
                |acc, v| op.apply_i64(acc, v.to_i64()), later))
        });
        return combine(parts, op, later).map(Block::I64);
    }
    if d.is_exact() {
        let c = if d == DType::Bool { DType::Int8 } else { d };
        return by_domain!(c,
            int T => {
                let f = |acc: T, v: T| op.apply_int(acc, v);
                let parts = inputs
                    .iter()
                    .map(|x| fold_axes(&x.to_elem::<T>(), &axes, op.identity_int::<T>(), f, f));
                combine(parts, op, f).map(T::wrap)
            },
            float T => unreachable!("exact dtypes only, not {}", T::DTYPE),
            complex T => unreachable!("exact dtypes only, not {}", T::DTYPE)
        );
    }
    // The input's values are folded with `op` (nansum skips their NaNs); what that first
    // fold made (a NaN of inf - inf included) is folded and combined with `op.partial()`.
    let later = op.partial();
    if d.is_complex() {
        let id = op.identity_complex();
        let parts = inputs.iter().map(|x| {
            with_block!(x, a => if axes.is_empty() {
                // No axis reduced: each value alone, a NaN the nan variants' identity.
                a.mapv(|v| {
                    let z = v.to_c128();
                    if later != op && nums_layout::num::c_isnan(z) { id } else { z }
                })
            } else {
                fold_axes(a, &axes, id, |acc, v| op.apply_complex(acc, v.to_c128()),
                    |acc, v| later.apply_complex(acc, v))
            })
        });
        return combine(parts, op, |a, v| later.apply_complex(a, v)).map(Block::C128);
    }
    let fold = |a: ndarray::ArrayViewD<'_, f64>, ax: usize, op: ReduceOp| {
        // A sum along a contiguous lane keeps ndarray's unrolled sum (its rounding).
        if op == ReduceOp::Sum && a.shape()[ax + 1..].iter().product::<usize>() == 1 {
            a.sum_axis(Axis(ax))
        } else {
            // The common ops as closures of their own: the compiler vectorises a row's
            // adds only when the op is not looked up per element.
            match op {
                ReduceOp::Sum => fold_along(a, ax, 0.0, |a, v| a + v),
                ReduceOp::Min => fold_along(a, ax, op.identity(), batch::minimum),
                ReduceOp::Max => fold_along(a, ax, op.identity(), batch::maximum),
                _ => fold_along(a, ax, op.identity(), |a, v| op.apply(a, v)),
            }
        }
    };
    let parts = inputs.iter().map(|x| {
        let x = x.to_f64();
        match axes.split_first() {
            // No axis reduced (`nansum(x, axis=())`): each value alone, a NaN its identity.
            None if later != op => x.mapv(|v| if v.is_nan() { op.identity() } else { v }),
            None => x.into_owned(),
            // Every axis of a min or max (order does not matter): one pass in memory
            // order, not lanes of the last axis one at a time.
            Some(_) if extreme && axes.len() == x.ndim() => ndarray::ArrayD::from_elem(
                ndarray::IxDyn(&[]),
                match x.as_slice_memory_order() {
                    Some(s) => extreme_of(s, op),
                    None => x.iter().fold(op.identity(), |a, &v| op.apply(a, v)),
                },
            ),
            Some((&first, rest)) => rest.iter().fold(fold(x.view(), first, op), |p, &ax| {
                fold(p.view(), ax, later)
            }),
        }
    });
    combine(parts, op, |a, v| later.apply(a, v)).map(Block::F64)
}

/// `x` folded over `axes` (descending) one at a time into accumulators of type `A`
/// starting at `init`: the first axis with `first` (from the input's elements), the others
/// with `later`; only the (smaller) results are allocated. With no axes, each value is
/// folded into `init` alone.
fn fold_axes<T: Copy, A: Copy>(
    x: &ArrayD<T>,
    axes: &[usize],
    init: A,
    first: impl Fn(A, T) -> A,
    later: impl Fn(A, A) -> A,
) -> ArrayD<A> {
    match axes.split_first() {
        None => x.mapv(|v| first(init, v)),
        Some((&ax, rest)) => {
            let p = fold_along(x.view(), ax, init, &first);
            rest.iter()
                .fold(p, |p, &ax| fold_along(p.view(), ax, init, &later))
        }
    }
}

/// `x` folded along `axis` with `f` from `init`, each result in the input's order (as
/// ndarray's `fold_axis`). A standard-layout block is walked as contiguous rows: ndarray
/// takes a dynamic-dimension subview per step, which costs more than the adds when the
/// rows are short (a column reduction of row blocks: 85% of its time).
fn fold_along<T: Copy, A: Copy>(
    x: ArrayViewD<'_, T>,
    axis: usize,
    init: A,
    f: impl Fn(A, T) -> A,
) -> ArrayD<A> {
    let Some(s) = x.as_slice() else {
        return x.fold_axis(Axis(axis), init, |&a, &v| f(a, v));
    };
    let shape = x.shape();
    let (n, inner) = (shape[axis], shape[axis + 1..].iter().product::<usize>());
    let mut out_shape = shape.to_vec();
    out_shape.remove(axis);
    let mut out = vec![init; out_shape.iter().product()];
    if inner > 0 && n > 0 {
        for (acc, lane) in out.chunks_exact_mut(inner).zip(s.chunks_exact(n * inner)) {
            for row in lane.chunks_exact(inner) {
                for (a, &v) in acc.iter_mut().zip(row) {
                    *a = f(*a, v);
                }
            }
        }
    }
    ArrayD::from_shape_vec(IxDyn(&out_shape), out).expect("the shape of the values made")
}

/// The min or max (`op`) of every value of `s`, bit for bit what folding them in order
/// gives: eight lanes that compilers turn into SIMD min/max, NaNs and infinities only
/// noted; a NaN or infinity in `s`, or a zero result (whose sign, payload or source
/// depend on the order), is folded again in order.
fn extreme_of(s: &[f64], op: ReduceOp) -> f64 {
    let (r, odd) = match op {
        ReduceOp::Min | ReduceOp::NanMin => extreme_pieces::<true>(s),
        ReduceOp::Max | ReduceOp::NanMax => extreme_pieces::<false>(s),
        _ => (0.0, true),
    };
    if odd || r == 0.0 || r.is_infinite() {
        s.iter().fold(op.identity(), |a, &v| op.apply(a, v))
    } else {
        r
    }
}

/// Values whose extreme one rayon task takes (4 MiB of float64).
const EXTREME_PIECE: usize = 1 << 19;

/// [`extreme_lanes`] of a long `s` in pieces on rayon's threads: the blocks of a step
/// share every thread to the end (7.5 blocks over two slots left one thread reading the
/// last alone), and the extreme of the pieces' extremes is the same value in any order.
fn extreme_pieces<const MIN: bool>(s: &[f64]) -> (f64, bool) {
    use rayon::prelude::*;
    if s.len() <= 2 * EXTREME_PIECE {
        return extreme_lanes::<MIN>(s);
    }
    let start = if MIN {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    s.par_chunks(EXTREME_PIECE)
        .map(extreme_lanes::<MIN>)
        .reduce(
            || (start, false),
            |(a, x), (b, y)| (pick::<MIN>(a, b), x || y),
        )
}

/// The least (`MIN`) or greatest value of `s` that is not NaN (an infinity if none), and
/// whether `s` holds a NaN or an infinity: in 256-bit vectors where the CPU has AVX2 (the
/// build targets plain x86-64, whose SSE2 halves the lanes: a 500 MB min ran at 13 GB/s on
/// two threads, NumPy's at 15 GB/s on one).
fn extreme_lanes<const MIN: bool>(s: &[f64]) -> (f64, bool) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { extreme_lanes_avx2::<MIN>(s) };
    }
    extreme_lanes_any::<MIN>(s)
}

/// [`extreme_lanes_any`] in AVX2's words: `min_pd(v, a)` is `v < a ? v : a`, the same
/// pick, NaNs skipped (the compiler's own vectorising of the loop shuffled lanes: 14 GB/s
/// on two threads where this reads 17).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn extreme_lanes_avx2<const MIN: bool>(s: &[f64]) -> (f64, bool) {
    use std::arch::x86_64::*;
    let start = if MIN {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    let mut acc = [_mm256_set1_pd(start); 4];
    let mut probe = [_mm256_setzero_pd(); 4];
    let chunks = s.chunks_exact(16);
    let tail = chunks.remainder();
    for c in chunks {
        for (k, (a, p)) in acc.iter_mut().zip(&mut probe).enumerate() {
            // SAFETY: `c` holds 16 values; this reads 4 of them from 4 k.
            let v = unsafe { _mm256_loadu_pd(c.as_ptr().add(4 * k)) };
            *a = if MIN {
                _mm256_min_pd(v, *a)
            } else {
                _mm256_max_pd(v, *a)
            };
            *p = _mm256_add_pd(*p, _mm256_sub_pd(v, v));
        }
    }
    let (mut lanes, mut probes) = ([0.0f64; 16], [0.0f64; 16]);
    for k in 0..4 {
        // SAFETY: each array holds 16 values; this writes 4 of them from 4 k.
        unsafe {
            _mm256_storeu_pd(lanes.as_mut_ptr().add(4 * k), acc[k]);
            _mm256_storeu_pd(probes.as_mut_ptr().add(4 * k), probe[k]);
        }
    }
    let (r, odd) = extreme_lanes_any::<MIN>(tail);
    let r = lanes.into_iter().chain([r]).fold(start, pick::<MIN>);
    (r, odd || probes.iter().any(|p| p.is_nan()))
}

/// `v` where it is beyond `a` (less for `MIN`), else `a`: a NaN `v` never is.
#[inline(always)]
fn pick<const MIN: bool>(a: f64, v: f64) -> f64 {
    if (MIN && v < a) || (!MIN && v > a) {
        v
    } else {
        a
    }
}

// `v - v` is meant: 0 for a finite value, NaN otherwise.
#[allow(clippy::eq_op)]
#[inline(always)]
fn extreme_lanes_any<const MIN: bool>(s: &[f64]) -> (f64, bool) {
    // NaNs never pass `<` or `>`: skipped here, noted apart.
    let pick = pick::<MIN>;
    let start = if MIN {
        f64::INFINITY
    } else {
        f64::NEG_INFINITY
    };
    // `v - v` is 0 for a finite value and NaN for a NaN or an infinity: summed, a probe
    // that stays vector arithmetic (a select per element kept the loop scalar).
    let (mut acc, mut probe) = ([start; 8], [0.0f64; 8]);
    let chunks = s.chunks_exact(8);
    let tail = chunks.remainder();
    for c in chunks {
        for i in 0..8 {
            acc[i] = pick(acc[i], c[i]);
            probe[i] += c[i] - c[i];
        }
    }
    for &v in tail {
        acc[0] = pick(acc[0], v);
        probe[0] += v - v;
    }
    (
        acc.into_iter().fold(start, pick),
        probe.iter().any(|p| p.is_nan()),
    )
}

/// Partial results combined elementwise in order with `f`.
pub fn combine<T: Copy>(
    parts: impl Iterator<Item = ArrayD<T>>,
    op: ReduceOp,
    f: impl Fn(T, T) -> T,
) -> Result<ArrayD<T>, String> {
    let mut acc: Option<ArrayD<T>> = None;
    for part in parts {
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
                Zip::from(&mut s).and(&part).for_each(|a, &v| *a = f(*a, v));
                s
            }
        });
    }
    acc.ok_or_else(|| format!("{} needs at least one input", op.name()))
}

/// The block in `dtype`, borrowed where it already is.
pub fn in_dtype(b: &Block, dtype: DType) -> Cow<'_, Block> {
    if b.dtype() == dtype {
        Cow::Borrowed(b)
    } else {
        Cow::Owned(b.clone().cast(dtype))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ndarray::arr1;

    /// Values with every case a fold's order shows: ties of signed zeros, NaNs of two
    /// payloads, infinities, repeats.
    fn awkward(n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                match (x >> 33) % 16 {
                    0 => 0.0,
                    1 => -0.0,
                    2 if seed.is_multiple_of(3) => f64::NAN,
                    3 if seed.is_multiple_of(3) => f64::from_bits(0x7ff8_0000_0000_0bad),
                    4 if seed.is_multiple_of(5) => f64::INFINITY,
                    5 if seed.is_multiple_of(5) => f64::NEG_INFINITY,
                    k => (x >> 40) as f64 / 1e6 - 4.0 * k as f64,
                }
            })
            .collect()
    }

    #[test]
    fn comparisons_with_a_scalar_either_side_or_broadcast_match_each_pair() {
        let x = awkward(40, 15);
        let a = Block::F64(ArrayD::from_shape_vec(IxDyn(&[8, 5]), x.clone()).unwrap());
        let col = Block::F64(ArrayD::from_shape_vec(IxDyn(&[8, 1]), x[..8].to_vec()).unwrap());
        let one = Block::F64(ArrayD::from_elem(IxDyn(&[]), x[3]));
        let nan = Block::F64(ArrayD::from_elem(IxDyn(&[]), f64::NAN));
        let ops = [
            BinaryOp::Lt,
            BinaryOp::Le,
            BinaryOp::Gt,
            BinaryOp::Ge,
            BinaryOp::Eq,
            BinaryOp::Ne,
        ];
        for op in ops {
            for (p, q) in [
                (&a, &one),
                (&one, &a),
                (&a, &col),
                (&col, &a),
                (&a, &nan),
                (&a, &a),
            ] {
                let shape = nums_layout::meta::broadcast(p.shape(), q.shape()).unwrap();
                let (pv, qv) = (p.to_f64(), q.to_f64());
                let (pv, qv) = (bc(&pv, &IxDyn(&shape)), bc(&qv, &IxDyn(&shape)));
                let want = Zip::from(&pv)
                    .and(&qv)
                    .map_collect(|&x, &y| op.compare(x, y).unwrap());
                assert_eq!(
                    binary(op, p, q).unwrap().to_bool().into_owned(),
                    want,
                    "{op:?}"
                );
            }
        }
    }

    #[test]
    fn reductions_over_rows_fold_in_ndarrays_order_bit_for_bit() {
        let ops = [
            ReduceOp::Sum,
            ReduceOp::Prod,
            ReduceOp::Min,
            ReduceOp::Max,
            ReduceOp::NanSum,
            ReduceOp::NanMin,
            ReduceOp::NanMax,
        ];
        for (seed, shape) in [
            vec![37, 5],
            vec![3, 11, 4],
            vec![1000],
            vec![0, 3],
            vec![4, 0, 2],
        ]
        .into_iter()
        .enumerate()
        {
            let n = shape.iter().product();
            for seed in [seed as u64, seed as u64 + 15, seed as u64 + 30] {
                let a = ArrayD::from_shape_vec(IxDyn(&shape), awkward(n, seed)).unwrap();
                for op in ops {
                    for ax in 0..shape.len() {
                        let want = if op == ReduceOp::Sum {
                            a.sum_axis(Axis(ax))
                        } else {
                            a.fold_axis(Axis(ax), op.identity(), |&p, &v| op.apply(p, v))
                        };
                        let got = reduce(&[&Block::F64(a.clone())], op, &[ax]).unwrap();
                        let got = got.to_f64().into_owned();
                        assert_eq!(got.shape(), want.shape(), "{op:?} {shape:?} axis {ax}");
                        for (g, w) in got.iter().zip(&want) {
                            // Arithmetic on two NaNs keeps either's payload (the compiler
                            // may swap an add's operands): NaN-ness only there.
                            let arith =
                                matches!(op, ReduceOp::Sum | ReduceOp::Prod | ReduceOp::NanSum);
                            if !(arith && g.is_nan() && w.is_nan()) {
                                assert_eq!(g.to_bits(), w.to_bits(), "{op:?} {shape:?} axis {ax}");
                            }
                        }
                    }
                    if matches!(
                        op,
                        ReduceOp::Min | ReduceOp::Max | ReduceOp::NanMin | ReduceOp::NanMax
                    ) {
                        let all: Vec<usize> = (0..shape.len()).collect();
                        let want = a.iter().fold(op.identity(), |p, &v| op.apply(p, v));
                        let got = reduce(&[&Block::F64(a.clone())], op, &all).unwrap();
                        let got = got.to_f64().iter().next().copied().unwrap();
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{op:?} {shape:?} seed {seed}"
                        );
                    }
                }
            }
        }
        // Ints along rows: the same fold.
        let a = ArrayD::from_shape_fn(IxDyn(&[50, 7]), |i| {
            (i[0] * 31 + i[1] * 17) as i32 % 23 - 11
        });
        let got = reduce(&[&Block::I32(a.clone())], ReduceOp::Min, &[0]).unwrap();
        let want = a.fold_axis(Axis(0), i32::MAX, |&p, &v| p.min(v));
        assert_eq!(got, Block::I32(want));
    }

    #[test]
    fn extremes_of_long_blocks_in_pieces_are_the_ordered_folds() {
        // Longer than two pieces: taken in pieces on rayon's threads. The extreme is put
        // in each piece in turn, and a NaN or an infinity in the last piece is noticed.
        let n = 2 * EXTREME_PIECE + 12_345;
        let base: Vec<f64> = (0..n)
            .map(|i| ((i * 7919) % 100_003) as f64 * 0.5 - 9.0)
            .collect();
        for at in [0, EXTREME_PIECE - 1, EXTREME_PIECE + 3, n - 1] {
            for (op, far) in [(ReduceOp::Min, -1e9), (ReduceOp::Max, 1e9)] {
                for odd in [None, Some(f64::NAN), Some(f64::NEG_INFINITY)] {
                    let mut v = base.clone();
                    v[at] = far;
                    if let Some(x) = odd {
                        v[n - 2] = x;
                    }
                    let a = ArrayD::from_shape_vec(IxDyn(&[n]), v.clone()).unwrap();
                    let want = v.iter().fold(op.identity(), |p, &x| op.apply(p, x));
                    let got = reduce(&[&Block::F64(a)], op, &[0]).unwrap();
                    let got = got.to_f64().iter().next().copied().unwrap();
                    assert_eq!(got.to_bits(), want.to_bits(), "{op:?} at {at} {odd:?}");
                }
            }
        }
    }

    #[test]
    fn narrow_ints_wrap_in_their_own_type() {
        let a = Block::I8(arr1(&[100i8, -128, 7]).into_dyn());
        let b = Block::I8(arr1(&[100i8, -1, 0]).into_dyn());
        assert_eq!(
            binary(BinaryOp::Add, &a, &b).unwrap(),
            Block::I8(arr1(&[-56i8, 127, 7]).into_dyn())
        );
        // MIN // -1 wraps, x // 0 and x % 0 are 0.
        assert_eq!(
            binary(BinaryOp::FloorDiv, &a, &b).unwrap(),
            Block::I8(arr1(&[1i8, -128, 0]).into_dyn())
        );
        assert_eq!(
            binary(BinaryOp::Mod, &a, &b).unwrap(),
            Block::I8(arr1(&[0i8, 0, 0]).into_dyn())
        );
        // uint8 with int8: int16, as NumPy promotes.
        let u = Block::U8(arr1(&[200u8, 1, 255]).into_dyn());
        assert_eq!(
            binary(BinaryOp::Sub, &b, &u).unwrap(),
            Block::I16(arr1(&[-100i16, -2, -255]).into_dyn())
        );
        assert_eq!(
            unary(UnaryOp::Neg, &u, DType::UInt8),
            Block::U8(arr1(&[56u8, 255, 1]).into_dyn())
        );
        // int64 against uint64: exact, though their promoted dtype is float64.
        let i = Block::I64(arr1(&[(1 << 62) + 1, -1]).into_dyn());
        let w = Block::U64(arr1(&[1u64 << 62, u64::MAX]).into_dyn());
        assert_eq!(
            binary(BinaryOp::Gt, &i, &w).unwrap(),
            Block::Bool(arr1(&[true, false]).into_dyn())
        );
        assert_eq!(
            binary(BinaryOp::Add, &i, &w).unwrap().dtype(),
            DType::Float64
        );
        // Sums of int8 in int64; extremes in their own type.
        let s = reduce(&[&a, &b], ReduceOp::Sum, &[0]).unwrap();
        assert_eq!(
            s,
            Block::I64(ndarray::arr0(100 - 128 + 7 + 100 - 1).into_dyn())
        );
        let m = reduce(&[&u], ReduceOp::Max, &[0]).unwrap();
        assert_eq!(m, Block::U8(ndarray::arr0(255u8).into_dyn()));
    }

    #[test]
    fn complex_computes_as_numpy() {
        let z = |re, im| C128::new(re, im);
        let a = Block::C128(arr1(&[z(1.0, 2.0), z(3.0, -4.0)]).into_dyn());
        let b = Block::C64(arr1(&[C64::new(0.0, 1.0), C64::new(2.0, 0.0)]).into_dyn());
        assert_eq!(
            binary(BinaryOp::Mul, &a, &b).unwrap(),
            Block::C128(arr1(&[z(-2.0, 1.0), z(6.0, -8.0)]).into_dyn())
        );
        assert_eq!(
            binary(BinaryOp::Div, &a, &b).unwrap(),
            Block::C128(arr1(&[z(2.0, -1.0), z(1.5, -2.0)]).into_dyn())
        );
        assert_eq!(
            binary(BinaryOp::Lt, &a, &b).unwrap(),
            Block::Bool(arr1(&[false, false]).into_dyn())
        );
        assert_eq!(
            unary(UnaryOp::Abs, &a, DType::Float64),
            Block::F64(arr1(&[5f64.sqrt(), 5.0]).into_dyn())
        );
        assert_eq!(
            unary(UnaryOp::Imag, &b, DType::Float32),
            Block::F32(arr1(&[1.0f32, 0.0]).into_dyn())
        );
        assert_eq!(
            unary(UnaryOp::IsNan, &a, DType::Bool),
            Block::Bool(arr1(&[false, false]).into_dyn())
        );
        let s = reduce(&[&a], ReduceOp::Sum, &[0]).unwrap();
        assert_eq!(s, Block::C128(ndarray::arr0(z(4.0, -2.0)).into_dyn()));
        let p = reduce(&[&a], ReduceOp::Prod, &[0]).unwrap();
        assert_eq!(p, Block::C128(ndarray::arr0(z(11.0, 2.0)).into_dyn()));
        let m = reduce(&[&a], ReduceOp::Max, &[0]).unwrap();
        assert_eq!(m, Block::C128(ndarray::arr0(z(3.0, -4.0)).into_dyn()));
    }
}
