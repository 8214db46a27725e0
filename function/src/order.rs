//! Scans, sorting and searching of blocks in every dtype: running sums and products
//! (the blocks of `cumsum`, each from its offset), NumPy's sort order ([`Sortable`]), a
//! block sorted or arg-sorted, the partition sizes and the merge of a sample sort, the
//! counts `searchsorted` adds up, and the selection of a 1-D mask across blocks.

use std::cmp::Ordering;

use ndarray::{ArrayD, Axis, IxDyn, Zip};
use nums_layout::batch::ReduceOp;
use nums_layout::num::Int;
use nums_layout::{Block, C64, C128, DType, Elem, Scalar, for_dtype};

use rayon::prelude::*;

use crate::slices::{Runs, append_rows, copy_slices};

/// An element type in NumPy's sort order: NaN after every number (a complex: finite, then
/// a NaN imaginary part, then a NaN real part, then both), -0.0 equal to 0.0.
pub trait Sortable: Elem {
    /// Where `self` comes relative to `other` in NumPy's ascending sort.
    fn order(&self, other: &Self) -> Ordering;
    /// Whether elements the order calls equal can differ (-0.0 and 0.0, NaNs' payloads):
    /// their sort must then be stable, as NumPy's is.
    const TIES_DIFFER: bool = false;
    /// Whether [`Sortable::key`] gives keys (ints and floats; not complex numbers).
    const KEYED: bool = false;
    /// An unsigned key in the order's order: elements the order calls equal have equal
    /// keys (sorting keys is sorting integers: no comparator, no NaN cases).
    #[inline]
    fn key(self) -> u64 {
        unreachable!("only for KEYED types")
    }
    /// The element whose key `k` is, where [`Sortable::plain`] holds.
    #[inline]
    fn from_key(_k: u64) -> Self {
        unreachable!("only for KEYED types")
    }
    /// Whether this element is the only one of its key (not -0.0, not a NaN).
    #[inline]
    fn plain(self) -> bool {
        true
    }
    /// The element's own bits (where its key forgets them: -0.0, a NaN's payload).
    #[inline]
    fn bits(self) -> u64 {
        self.key()
    }
    /// The element whose [`Sortable::bits`] `b` are.
    #[inline]
    fn from_bits(b: u64) -> Self {
        Self::from_key(b)
    }
}

macro_rules! sortable_ord {
    ($($t:ty => $u:ty),*) => {$(
        impl Sortable for $t {
            const KEYED: bool = true;
            #[inline]
            fn order(&self, other: &Self) -> Ordering {
                self.cmp(other)
            }
            #[inline]
            fn key(self) -> u64 {
                // Signed: the sign bit flipped puts negatives first.
                (self as $u ^ (<$t>::MIN as $u)) as u64
            }
            #[inline]
            fn from_key(k: u64) -> Self {
                (k as $u ^ (<$t>::MIN as $u)) as $t
            }
        }
    )*};
}
sortable_ord!(i8 => u8, i16 => u16, i32 => u32, i64 => u64, u8 => u8, u16 => u16, u32 => u32, u64 => u64);

impl Sortable for bool {
    const KEYED: bool = true;
    #[inline]
    fn order(&self, other: &Self) -> Ordering {
        self.cmp(other)
    }
    #[inline]
    fn key(self) -> u64 {
        self as u64
    }
    #[inline]
    fn from_key(k: u64) -> Self {
        k != 0
    }
}

/// NaN last, otherwise as `<` compares (so -0.0 equals 0.0).
#[inline]
fn float_order<F: PartialOrd + Copy>(a: F, b: F, a_nan: bool, b_nan: bool) -> Ordering {
    match (a_nan, b_nan) {
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
    }
}

macro_rules! sortable_float {
    ($($t:ty => $u:ty),*) => {$(
        impl Sortable for $t {
            const TIES_DIFFER: bool = true;
            const KEYED: bool = true;
            #[inline]
            fn order(&self, other: &Self) -> Ordering {
                float_order(*self, *other, self.is_nan(), other.is_nan())
            }
            #[inline]
            fn key(self) -> u64 {
                // -0.0 as 0.0 and every NaN as one (after +inf); then negatives' bits
                // reversed below the positives' (the usual total-order trick).
                let f = if self == 0.0 { 0.0 } else if self.is_nan() { <$t>::NAN } else { self };
                let b = f.to_bits();
                let top = 1 << (<$u>::BITS - 1);
                (if b & top != 0 { !b } else { b | top }) as u64
            }
            #[inline]
            fn from_key(k: u64) -> Self {
                let k = k as $u;
                let top = 1 << (<$u>::BITS - 1);
                <$t>::from_bits(if k & top != 0 { k & !top } else { !k })
            }
            #[inline]
            fn plain(self) -> bool {
                !(self.is_nan() || (self == 0.0 && self.is_sign_negative()))
            }
            #[inline]
            fn bits(self) -> u64 {
                self.to_bits() as u64
            }
            #[inline]
            fn from_bits(b: u64) -> Self {
                <$t>::from_bits(b as $u)
            }
        }
    )*};
}
sortable_float!(f32 => u32, f64 => u64);

macro_rules! sortable_complex {
    ($($t:ty),*) => {$(
        impl Sortable for $t {
            const TIES_DIFFER: bool = true;
            #[inline]
            fn order(&self, other: &Self) -> Ordering {
                // NumPy's complex order: by which parts are NaN first, then by the parts
                // that are not.
                let class = |z: &$t| (z.re.is_nan(), z.im.is_nan());
                let (ca, cb) = (class(self), class(other));
                ca.cmp(&cb).then_with(|| match ca {
                    (false, false) => float_order(self.re, other.re, false, false)
                        .then(float_order(self.im, other.im, false, false)),
                    (false, true) => float_order(self.re, other.re, false, false),
                    (true, false) => float_order(self.im, other.im, false, false),
                    (true, true) => Ordering::Equal,
                })
            }
        }
    )*};
}
sortable_complex!(C64, C128);

/// The order of two elements of a sort: ascending, or descending (NaN first).
#[inline]
fn cmp<T: Sortable>(a: &T, b: &T, descending: bool) -> Ordering {
    if descending { b.order(a) } else { a.order(b) }
}

/// A number type running sums and products accumulate in (NumPy's: ints wrap).
pub trait Acc: Elem {
    /// 1 (a product's identity).
    const ONE: Self;
    /// `self + o` (ints wrap).
    fn plus(self, o: Self) -> Self;
    /// `self * o` (ints wrap).
    fn times(self, o: Self) -> Self;
    /// Whether it is NaN (a complex: either part); ints never are.
    fn nan(self) -> bool;
}

macro_rules! acc_int {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ONE: Self = 1;
            #[inline]
            fn plus(self, o: Self) -> Self { self.wadd(o) }
            #[inline]
            fn times(self, o: Self) -> Self { self.wmul(o) }
            #[inline]
            fn nan(self) -> bool { false }
        }
    )*};
}
acc_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! acc_float {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ONE: Self = 1.0;
            #[inline]
            fn plus(self, o: Self) -> Self { self + o }
            #[inline]
            fn times(self, o: Self) -> Self { self * o }
            #[inline]
            fn nan(self) -> bool { self.is_nan() }
        }
    )*};
}
acc_float!(f32, f64);

macro_rules! acc_complex {
    ($($t:ty),*) => {$(
        impl Acc for $t {
            const ONE: Self = <$t>::new(1.0, 0.0);
            #[inline]
            fn plus(self, o: Self) -> Self { self + o }
            #[inline]
            fn times(self, o: Self) -> Self { self * o }
            #[inline]
            fn nan(self) -> bool { self.re.is_nan() || self.im.is_nan() }
        }
    )*};
}
acc_complex!(C64, C128);

/// The accumulation of `op` (sum, prod, nansum, nanprod): (identity, step).
/// One step of an accumulation: the accumulated value and the next one.
type Step<T> = fn(T, T) -> T;

fn accumulation<T: Acc>(op: ReduceOp) -> Result<(T, Step<T>), String> {
    Ok(match op {
        ReduceOp::Sum => (T::ZERO, |a, v| a.plus(v)),
        ReduceOp::Prod => (T::ONE, |a, v| a.times(v)),
        // NumPy's nan variants replace a NaN by the identity and then add or multiply:
        // `-0.0 + 0.0` is 0.0, and a complex infinity times 1 + 0j has a NaN part.
        ReduceOp::NanSum => (T::ZERO, |a, v| a.plus(if v.nan() { T::ZERO } else { v })),
        ReduceOp::NanProd => (T::ONE, |a, v| a.times(if v.nan() { T::ONE } else { v })),
        op => return Err(format!("no running {}", op.name())),
    })
}

/// A running op's value after its first element `v` (`id` the identity): `v` itself,
/// but the identity for a NaN the nan variants skip.
fn seed_of<T: Acc>(op: ReduceOp) -> fn(T, T) -> T {
    match op {
        ReduceOp::NanSum | ReduceOp::NanProd => |v: T, id: T| if v.nan() { id } else { v },
        _ => |v: T, _| v,
    }
}

/// Bytes of one (value, position) pair an argsort sorts: the value padded to 8 bytes.
fn pair_bytes(size: u64) -> u64 {
    size.next_multiple_of(8) + 8
}

/// Bytes [`sort`] holds beyond its input and output for `elems` elements of `size` bytes:
/// a lane's copy (values), or its (value, position) pairs (`arg`).
pub fn sort_scratch(elems: u64, size: u64, arg: bool) -> u64 {
    elems * if arg { pair_bytes(size) } else { size }
}

/// Bytes [`sort_merge`] holds beyond its inputs and output for an output of `out`
/// elements: the merge's (run, index) of each, one head per run aside.
pub fn merge_scratch(out: u64) -> u64 {
    out * 16
}

fn check_axis(shape: &[usize], axis: usize) -> Result<(), String> {
    if axis >= shape.len() {
        return Err(format!("axis {axis} of a {}-D block", shape.len()));
    }
    Ok(())
}

/// See [`nums_layout::batch::Kernel::Scan`]: `offsets` is the block of starting values
/// and the position along `axis` in it.
pub fn scan(
    x: &Block,
    offsets: Option<(&Block, u64)>,
    op: ReduceOp,
    axis: usize,
    exclusive: bool,
    dtype: DType,
) -> Result<Block, String> {
    check_axis(x.shape(), axis)?;
    for_dtype!(dtype, T => scan_t::<T>(x, offsets, op, axis, exclusive),
        bool => Err("a running sum or product in bool".into()))
}

fn scan_t<T: Acc>(
    x: &Block,
    offsets: Option<(&Block, u64)>,
    op: ReduceOp,
    axis: usize,
    exclusive: bool,
) -> Result<Block, String> {
    let (id, step) = accumulation::<T>(op)?;
    let seed = seed_of::<T>(op);
    let a = x.to_elem::<T>();
    let mut out = ArrayD::from_elem(a.raw_dim(), T::ZERO);
    // From `start`, or (none) from the lane's first element itself, as NumPy's one pass
    // starts (`cumsum([-0.0])` is -0.0, not 0 + -0.0).
    let run = |mut o: ndarray::ArrayViewMut1<T>, i: ndarray::ArrayView1<T>, start: Option<T>| {
        let mut acc = start;
        for (o, &v) in o.iter_mut().zip(i) {
            let next = match acc {
                Some(a) => step(a, v),
                None => seed(v, id),
            };
            *o = if exclusive { acc.unwrap_or(id) } else { next };
            acc = Some(next);
        }
    };
    match offsets {
        Some((b, k)) => {
            let o = b.to_elem::<T>();
            let mut want = a.shape().to_vec();
            want[axis] = o.shape().get(axis).copied().unwrap_or(0);
            if o.shape() != want.as_slice() || k as usize >= want[axis] {
                return Err(format!(
                    "offsets of shape {:?} (position {k}) for a block of shape {:?} along axis {axis}",
                    o.shape(),
                    a.shape()
                ));
            }
            let start = o.index_axis(Axis(axis), k as usize);
            Zip::from(out.lanes_mut(Axis(axis)))
                .and(a.lanes(Axis(axis)))
                .and(&start)
                .for_each(|o, i, &s| run(o, i, Some(s)));
        }
        None => Zip::from(out.lanes_mut(Axis(axis)))
            .and(a.lanes(Axis(axis)))
            .for_each(|o, i| run(o, i, None)),
    }
    Ok(T::wrap(out))
}

/// See [`nums_layout::batch::Kernel::ScanTotal`]: each lane folded from the identity, or
/// from `start`'s element (its shape with one element along `axis`).
pub fn scan_total(
    x: &Block,
    start: Option<&Block>,
    op: ReduceOp,
    axis: usize,
    dtype: DType,
) -> Result<Block, String> {
    check_axis(x.shape(), axis)?;
    // A mask's count of trues (a selection's sizes): counted, not widened to int64 first.
    if let (Block::Bool(m), None, ReduceOp::Sum, DType::Int64) = (x, start, op, dtype) {
        let t =
            Zip::from(m.lanes(Axis(axis))).map_collect(|l| l.iter().filter(|&&v| v).count() as i64);
        return Ok(Block::I64(t.insert_axis(Axis(axis))));
    }
    for_dtype!(dtype, T => {
        let (id, step) = accumulation::<T>(op)?;
        let seed = seed_of::<T>(op);
        let a = x.to_elem::<T>();
        let fold = |l: ndarray::ArrayView1<T>, s: T| l.iter().fold(s, |acc, &v| step(acc, v));
        // With no start, from the lane's first element itself (as `scan` does).
        let first = |l: ndarray::ArrayView1<T>| {
            let mut it = l.iter();
            match it.next() {
                Some(&v) => it.fold(seed(v, id), |acc, &v| step(acc, v)),
                None => id,
            }
        };
        let t = match start {
            None => Zip::from(a.lanes(Axis(axis))).map_collect(first),
            Some(s) => {
                let s = s.to_elem::<T>();
                let mut want = a.shape().to_vec();
                want[axis] = 1;
                if s.shape() != want.as_slice() {
                    return Err(format!(
                        "a starting value of shape {:?} for a block of shape {:?} along axis {axis}",
                        s.shape(),
                        a.shape()
                    ));
                }
                let s = s.index_axis(Axis(axis), 0);
                Zip::from(a.lanes(Axis(axis))).and(&s).map_collect(|l, &s| fold(l, s))
            }
        };
        Ok(T::wrap(t.insert_axis(Axis(axis))))
    }, bool => Err("a total in bool".into()))
}

/// See [`nums_layout::batch::Kernel::Sort`]: `origin` is the block's position along
/// `axis` in its array (added to argsort's indices).
pub fn sort(
    x: &Block,
    axis: usize,
    descending: bool,
    arg: bool,
    origin: u64,
) -> Result<Block, String> {
    check_axis(x.shape(), axis)?;
    for_dtype!(x.dtype(), T => Ok(sort_t::<T>(x.view::<T>().expect("its dtype"), axis, descending, arg, origin)))
}

fn sort_t<T: Sortable>(
    a: &ArrayD<T>,
    axis: usize,
    descending: bool,
    arg: bool,
    origin: u64,
) -> Block {
    if T::KEYED {
        return sort_keyed(a, axis, descending, arg, origin);
    }
    if arg {
        let mut out = ArrayD::<i64>::zeros(a.raw_dim());
        let mut pairs: Vec<(T, i64)> = Vec::with_capacity(a.shape()[axis]);
        Zip::from(out.lanes_mut(Axis(axis)))
            .and(a.lanes(Axis(axis)))
            .for_each(|mut o, l| {
                pairs.clear();
                pairs.extend(l.iter().zip(origin as i64..).map(|(&v, i)| (v, i)));
                // Ties by position: the order a stable sort gives, at an unstable sort's cost.
                pairs.sort_unstable_by(|p, q| cmp(&p.0, &q.0, descending).then(p.1.cmp(&q.1)));
                for (o, p) in o.iter_mut().zip(&pairs) {
                    *o = p.1;
                }
            });
        return Block::I64(out);
    }
    let mut out = a.clone();
    let mut lane: Vec<T> = Vec::with_capacity(a.shape()[axis]);
    for mut o in out.lanes_mut(Axis(axis)) {
        lane.clear();
        lane.extend(o.iter().copied());
        // Equal ints are alike; equal floats may not be (-0.0 and 0.0, NaNs), and keep
        // their order as in NumPy's stable sort.
        if T::TIES_DIFFER {
            lane.sort_by(|p, q| cmp(p, q, descending));
        } else {
            lane.sort_unstable_by(|p, q| cmp(p, q, descending));
        }
        for (o, v) in o.iter_mut().zip(&lane) {
            *o = *v;
        }
    }
    T::wrap(out)
}

/// Lanes longer than this are sorted on rayon's threads ([`sort_keyed`]).
const PARALLEL_FROM: usize = 1 << 15;

/// `keys` sorted, on rayon's threads if `parallel`: by [`crate::keysort`] where the CPU
/// has what it needs, else by std's sort.
fn sort_keys(keys: &mut Vec<u64>, parallel: bool) {
    let done = if parallel {
        crate::keysort::par_sort(keys)
    } else {
        crate::keysort::sort(keys)
    };
    if !done && parallel {
        par_sort(keys);
    } else if !done {
        keys.sort_unstable();
    }
}

/// Sorts `v` on rayon's threads: a part per thread sorted by std's `sort_unstable`
/// (ipnsort: on integer keys about twice as fast as rayon's own parallel pdqsort), then the
/// sorted parts merged pairwise, each merge split among the threads at equal shares of its
/// output (merge path). Equal elements are alike (keys), so no merge needs to be stable.
fn par_sort<T: Ord + Copy + Send + Sync>(v: &mut Vec<T>) {
    let threads = rayon::current_num_threads();
    let n = v.len();
    if threads < 2 || n < PARALLEL_FROM {
        v.sort_unstable();
        return;
    }
    let mut width = n.div_ceil(threads.next_power_of_two());
    v.par_chunks_mut(width).for_each(|c| c.sort_unstable());
    let mut from = std::mem::take(v);
    let mut to = from.clone();
    while width < n {
        // Each pair of runs [lo, lo + width) and [lo + width, lo + 2 width) into `to`,
        // in `threads` pieces of equal output.
        let pieces = (0..n)
            .step_by(2 * width)
            .flat_map(|lo| {
                let (mid, hi) = ((lo + width).min(n), (lo + 2 * width).min(n));
                let (a, b) = (&from[lo..mid], &from[mid..hi]);
                let splits: Vec<(usize, usize)> = (0..=threads)
                    .map(|k| merge_split(a, b, k * (hi - lo) / threads))
                    .collect();
                (0..threads).map(move |k| (lo, splits[k], splits[k + 1]))
            })
            .collect::<Vec<_>>();
        // The pieces cover `to` in order: each its share, one after the other.
        let mut outs: Vec<&mut [T]> = Vec::with_capacity(pieces.len());
        let mut rest = to.as_mut_slice();
        for &(_, (i0, j0), (i1, j1)) in &pieces {
            let (out, r) = std::mem::take(&mut rest).split_at_mut(i1 - i0 + j1 - j0);
            outs.push(out);
            rest = r;
        }
        let from_ref = &from;
        outs.into_par_iter()
            .zip(pieces.par_iter())
            .for_each(|(out, &(lo, (i0, j0), (i1, j1)))| {
                let mid = (lo + width).min(n);
                merge_into(
                    &from_ref[lo + i0..lo + i1],
                    &from_ref[mid + j0..mid + j1],
                    out,
                );
            });
        std::mem::swap(&mut from, &mut to);
        width *= 2;
    }
    *v = from;
}

/// Where the first `p` elements of the merge of sorted `a` and `b` come from: (i, p - i),
/// i of them from `a` (ties to `a`).
fn merge_split<T: Ord>(a: &[T], b: &[T], p: usize) -> (usize, usize) {
    let (mut lo, mut hi) = (p.saturating_sub(b.len()), p.min(a.len()));
    while lo < hi {
        let i = (lo + hi) / 2;
        if a[i] <= b[p - i - 1] {
            lo = i + 1;
        } else {
            hi = i;
        }
    }
    (lo, p - lo)
}

/// Merges sorted `a` and `b` into `out` (of their joint length).
fn merge_into<T: Ord + Copy>(a: &[T], b: &[T], out: &mut [T]) {
    let (mut i, mut j) = (0, 0);
    for o in out.iter_mut() {
        // Past the end of one run, the other's element (branch-light: one comparison).
        let take_a = j >= b.len() || (i < a.len() && a[i] <= b[j]);
        *o = if take_a { a[i] } else { b[j] };
        i += take_a as usize;
        j += !take_a as usize;
    }
}

/// [`sort_t`] of ints and floats, by their keys ([`Sortable::key`]): an unstable sort of
/// integers, which orders ties by position where they could differ (a key and the
/// position in one 128-bit integer): the order NumPy's stable sort gives.
fn sort_keyed<T: Sortable>(
    a: &ArrayD<T>,
    axis: usize,
    descending: bool,
    arg: bool,
    origin: u64,
) -> Block {
    // Descending: keys reversed (NaN first); ties still by position.
    let flip = if descending { u64::MAX } else { 0 };
    let n = a.shape()[axis];
    // Long lanes sorted on every core (a lane of a column that fits one task is the whole
    // compute in a caller's process).
    let parallel = n > PARALLEL_FROM;
    let mut keys: Vec<u64> = Vec::new();
    let mut pairs: Vec<u128> = Vec::new();
    // The positions (from `first`) of lane `l` in sorted order, in `pairs`' low halves.
    let by_position = |pairs: &mut Vec<u128>, l: ndarray::ArrayView1<T>, first: u64| {
        pairs.clear();
        pairs.extend(
            (l.iter().zip(first..)).map(|(v, i)| (((v.key() ^ flip) as u128) << 64) | i as u128),
        );
        if parallel {
            par_sort(pairs);
        } else {
            pairs.sort_unstable();
        }
    };
    if arg {
        let mut out = ArrayD::<i64>::zeros(a.raw_dim());
        Zip::from(out.lanes_mut(Axis(axis)))
            .and(a.lanes(Axis(axis)))
            .for_each(|mut o, l| {
                by_position(&mut pairs, l, origin);
                for (o, p) in o.iter_mut().zip(&pairs) {
                    *o = *p as u64 as i64;
                }
            });
        return Block::I64(out);
    }
    if let (true, Some(s)) = (parallel, a.as_slice().filter(|_| a.ndim() == 1)) {
        // A long column of plain elements: keys taken, sorted and turned back on every
        // core.
        if s.par_iter().all(|v| v.plain()) {
            keys = s.par_iter().map(|&v| v.key() ^ flip).collect();
            sort_keys(&mut keys, true);
            let out: Vec<T> = keys.par_iter().map(|&k| T::from_key(k ^ flip)).collect();
            return T::wrap(ArrayD::from_shape_vec(a.raw_dim(), out).expect("n elements"));
        }
    }
    if a.ndim() == 1 {
        // One lane (a column's sort): its keys taken in one pass, sorted, and the output
        // made from them, with no copy of the lane first.
        let mut plain = true;
        keys.extend(a.iter().map(|&v| {
            plain &= v.plain();
            v.key() ^ flip
        }));
        if plain {
            sort_keys(&mut keys, parallel);
            let out: Vec<T> = keys.iter().map(|&k| T::from_key(k ^ flip)).collect();
            return T::wrap(ArrayD::from_shape_vec(a.raw_dim(), out).expect("n elements"));
        }
    }
    let mut out = a.clone();
    let mut lane: Vec<T> = Vec::with_capacity(n);
    for mut o in out.lanes_mut(Axis(axis)) {
        if o.iter().all(|v| v.plain()) {
            // Equal keys are equal elements: the keys alone, sorted.
            keys.clear();
            keys.extend(o.iter().map(|v| v.key() ^ flip));
            sort_keys(&mut keys, parallel);
            for (o, k) in o.iter_mut().zip(&keys) {
                *o = T::from_key(k ^ flip);
            }
        } else {
            lane.clear();
            lane.extend(o.iter().copied());
            by_position(&mut pairs, o.view(), 0);
            for (o, p) in o.iter_mut().zip(&pairs) {
                *o = lane[*p as u64 as usize];
            }
        }
    }
    T::wrap(out)
}

/// See [`nums_layout::batch::Kernel::SortCount`]: a [1, splitters] int64 block.
pub fn sort_count(
    x: &Block,
    first: u64,
    splitters: &[(Scalar, u64)],
    descending: bool,
) -> Result<Block, String> {
    if x.shape().len() != 1 {
        return Err(format!("partition sizes of a {}-D block", x.shape().len()));
    }
    for_dtype!(x.dtype(), T => {
        let a = x.view::<T>().expect("its dtype");
        let s: Vec<(T, u64)> = splitters.iter().map(|&(v, i)| (T::from_scalar(v), i)).collect();
        // Per element, how many splitters are at most its key; then a prefix sum.
        let mut hist = vec![0i64; s.len() + 1];
        for (j, v) in a.iter().enumerate() {
            let at = first + j as u64;
            let b = s.partition_point(|(sv, si)| cmp(sv, v, descending).then(si.cmp(&at)) != Ordering::Greater);
            hist[b] += 1;
        }
        let counts: Vec<i64> = hist[..s.len()].iter().scan(0i64, |acc, &h| { *acc += h; Some(*acc) }).collect();
        Ok(Block::I64(ArrayD::from_shape_vec(IxDyn(&[1, s.len()]), counts).map_err(|e| e.to_string())?))
    })
}

/// A sample sort's splitters: `parts - 1` keys (value, array position) evenly spaced in
/// the sorted sample (`values`, taken at `positions`), ascending in the sort order.
pub fn splitters(
    values: &Block,
    positions: &[u64],
    parts: usize,
    descending: bool,
) -> Vec<(Scalar, u64)> {
    for_dtype!(values.dtype(), T => {
        let v = values.to_elem::<T>();
        let mut keys: Vec<(T, u64)> = v.iter().copied().zip(positions.iter().copied()).collect();
        keys.sort_unstable_by(|a, b| cmp(&a.0, &b.0, descending).then(a.1.cmp(&b.1)));
        let n = keys.len();
        if n == 0 {
            return vec![];
        }
        (1..parts)
            .map(|k| {
                let (v, p) = keys[(k * n / parts).min(n - 1)];
                (v.to_scalar(), p)
            })
            .collect()
    })
}

/// See [`nums_layout::batch::Kernel::SortMerge`]: `inputs` are the runs of values, then
/// (with `arg`) of positions; `len` elements from `start`. A k-way merge (ties go to the
/// earlier run: a stable merge), holding one head per run beside the output.
pub fn sort_merge(
    inputs: &[&Block],
    parts: usize,
    start: u64,
    len: usize,
    descending: bool,
    arg: bool,
) -> Result<Block, String> {
    let want = if arg { 2 * parts } else { parts };
    if inputs.len() != want || parts == 0 {
        return Err(format!(
            "a merge of {parts} runs given {} inputs",
            inputs.len()
        ));
    }
    let dtype = inputs[0].dtype();
    let start = start as usize;
    for_dtype!(dtype, T => {
        let runs = inputs[..parts]
            .iter()
            .map(|b| {
                let v = b.view::<T>().ok_or_else(|| format!("runs of dtypes {dtype} and {}", b.dtype()))?;
                Ok(v.as_slice().map(std::borrow::Cow::Borrowed).unwrap_or_else(|| v.iter().copied().collect::<Vec<_>>().into()))
            })
            .collect::<Result<Vec<std::borrow::Cow<[T]>>, String>>()?;
        let total: usize = runs.iter().map(|v| v.len()).sum();
        if start + len > total {
            return Err(format!("elements {start}..{} of a merge of {total}", start + len));
        }
        let order = merge_order(&runs, start, len, descending);
        if arg {
            let positions = inputs[parts..]
                .iter()
                .map(|b| b.view::<i64>().and_then(|a| a.as_slice()).ok_or("runs of positions are int64"))
                .collect::<Result<Vec<&[i64]>, _>>()?;
            if positions.iter().zip(&runs).any(|(p, r)| p.len() != r.len()) {
                return Err("a run of positions as long as its run of values".into());
            }
            let out: Vec<i64> = order.iter().map(|&(r, i)| positions[r][i]).collect();
            Ok(Block::I64(ArrayD::from_shape_vec(IxDyn(&[len]), out).map_err(|e| e.to_string())?))
        } else {
            let out: Vec<T> = order.iter().map(|&(r, i)| runs[r][i]).collect();
            Ok(T::wrap(ArrayD::from_shape_vec(IxDyn(&[len]), out).map_err(|e| e.to_string())?))
        }
    })
}

/// Elements `skip..skip + count` of the stable k-way merge of sorted `runs`, as (run,
/// index).
fn merge_order<T: Sortable>(
    runs: &[std::borrow::Cow<[T]>],
    mut skip: usize,
    count: usize,
    descending: bool,
) -> Vec<(usize, usize)> {
    use std::collections::BinaryHeap;
    struct Head<'a, T: Sortable> {
        v: T,
        run: usize,
        at: usize,
        descending: bool,
        _r: std::marker::PhantomData<&'a T>,
    }
    impl<T: Sortable> PartialEq for Head<'_, T> {
        fn eq(&self, o: &Self) -> bool {
            self.cmp(o) == Ordering::Equal
        }
    }
    impl<T: Sortable> Eq for Head<'_, T> {}
    impl<T: Sortable> PartialOrd for Head<'_, T> {
        fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
            Some(self.cmp(o))
        }
    }
    impl<T: Sortable> Ord for Head<'_, T> {
        // Reversed: the heap's top is the next element (the earlier run on a tie).
        fn cmp(&self, o: &Self) -> Ordering {
            cmp(&o.v, &self.v, self.descending).then(o.run.cmp(&self.run))
        }
    }
    let mut heap: BinaryHeap<Head<T>> = runs
        .iter()
        .enumerate()
        .filter(|(_, r)| !r.is_empty())
        .map(|(run, r)| Head {
            v: r[0],
            run,
            at: 0,
            descending,
            _r: std::marker::PhantomData,
        })
        .collect();
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let Some(mut h) = heap.pop() else { break };
        if skip > 0 {
            skip -= 1;
        } else {
            out.push((h.run, h.at));
        }
        h.at += 1;
        if let Some(&v) = runs[h.run].get(h.at) {
            h.v = v;
            heap.push(h);
        }
    }
    out
}

/// See [`nums_layout::batch::Kernel::SearchCount`]: terms (sorted block, values), the
/// counts of each added up.
pub fn search_counts(inputs: &[&Block], right: bool) -> Result<Block, String> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(2) {
        return Err(format!("a search given {} inputs", inputs.len()));
    }
    let mut sum: Option<ArrayD<i64>> = None;
    for t in inputs.chunks(2) {
        let Block::I64(c) = search_count(t[0], t[1], right)? else {
            unreachable!("counts are int64")
        };
        match &mut sum {
            Some(s) if s.shape() == c.shape() => *s += &c,
            Some(_) => return Err("terms of values of different shapes".into()),
            None => sum = Some(c),
        }
    }
    Ok(Block::I64(sum.expect("a term")))
}

/// For each value of `v`, how many
/// elements of the sorted 1-D `a` come before it.
pub fn search_count(a: &Block, v: &Block, right: bool) -> Result<Block, String> {
    if a.shape().len() != 1 {
        return Err(format!("searchsorted in a {}-D block", a.shape().len()));
    }
    for_dtype!(a.dtype(), T => {
        let s = a.view::<T>().expect("its dtype");
        let s = s.as_slice().map(std::borrow::Cow::Borrowed).unwrap_or_else(|| s.iter().copied().collect::<Vec<_>>().into());
        let v = v.to_elem::<T>();
        Ok(Block::I64(v.mapv(|x| {
            s.partition_point(|e| match e.order(&x) {
                Ordering::Less => true,
                Ordering::Equal => right,
                Ordering::Greater => false,
            }) as i64
        })))
    })
}

/// The one int64 value of a 1-element block (a term's offset or start).
fn one_int(b: &Block, what: &str) -> Result<i64, String> {
    let v = b.to_i64();
    match v.len() {
        1 => Ok(*v.iter().next().expect("one")),
        n => Err(format!(
            "{what}: a block of {n} values where one was expected"
        )),
    }
}

/// See [`nums_layout::batch::Kernel::Compress`]: terms (values, mask, selected before);
/// `origin` is the output block's start along `axis`.
pub fn compress(
    inputs: &[&Block],
    axis: usize,
    origin: u64,
    shape: &[usize],
) -> Result<Block, String> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(3) {
        return Err(format!(
            "a selection given {} inputs, not triples",
            inputs.len()
        ));
    }
    let dtype = inputs[0].dtype();
    let len = *shape
        .get(axis)
        .ok_or("a selection along an axis the output lacks")? as u64;
    for_dtype!(dtype, T => {
        let mut parts = Vec::with_capacity(inputs.len() / 3);
        for term in inputs.chunks(3) {
            let x = term[0].view::<T>().ok_or("values of one dtype")?;
            let m = term[1].to_bool();
            let before = one_int(term[2], "a selection's offset")?;
            if m.ndim() != 1 || x.shape().get(axis) != Some(&m.len()) {
                return Err(format!("values of shape {:?} with a mask of shape {:?} along axis {axis}", x.shape(), m.shape()));
            }
            let m = m.as_standard_layout();
            let runs = selected_runs(m.as_slice().expect("standard layout"), before as u64, origin, len);
            parts.push((x, runs));
        }
        // Rows selected in order fill the output as they are appended (a row filter).
        if let Some(out) = (axis == 0).then(|| append_rows(&parts, shape)).flatten() {
            return Ok(T::wrap(out));
        }
        let mut out = ArrayD::from_elem(IxDyn(shape), T::ZERO);
        for (x, runs) in &parts {
            copy_slices(&mut out, x, axis, runs)?;
        }
        Ok(T::wrap(out))
    })
}

/// The runs of a mask block's selected slices that land in an output block's
/// `[origin, origin + len)`, `before` selected slices preceding the block: chunks whose
/// selected slices all come before `origin` are counted, not walked (an output block takes
/// a part of a mask block).
fn selected_runs(m: &[bool], before: u64, origin: u64, len: u64) -> Runs {
    const CHUNK: usize = 256;
    // A bool is one byte, 0 or 1: eight flags read as one word.
    let m: &[u8] = bytemuck::cast_slice(m);
    let (mut at, mut first) = (before, 0);
    while let Some(c) = m.get(first..first + CHUNK) {
        let n = c.iter().map(|&b| u64::from(b)).sum::<u64>();
        if at + n > origin {
            break;
        }
        at += n;
        first += CHUNK;
    }
    let mut runs = Runs::default();
    let end = origin + len;
    // The set flags of a word from the lowest byte up, one bit each (no branch per flag).
    let mut take = |mut bits: u64, base: usize| {
        while bits != 0 {
            if at >= end {
                return false;
            }
            if at >= origin {
                runs.push(
                    (at - origin) as usize,
                    base + bits.trailing_zeros() as usize / 8,
                );
            }
            at += 1;
            bits &= bits - 1;
        }
        true
    };
    let words = m[first..].chunks_exact(8);
    let tail = words.remainder();
    let mut base = first;
    for w in words {
        if !take(u64::from_le_bytes(w.try_into().expect("8 bytes")), base) {
            return runs;
        }
        base += 8;
    }
    let mut last = [0u8; 8];
    last[..tail.len()].copy_from_slice(tail);
    take(u64::from_le_bytes(last), base);
    runs
}

/// See [`nums_layout::batch::Kernel::Gather`]: terms (indices, a block of x, its start).
pub fn gather(inputs: &[&Block], axis: usize, len: u64, shape: &[usize]) -> Result<Block, String> {
    if inputs.is_empty() || !inputs.len().is_multiple_of(3) {
        return Err(format!(
            "a gather given {} inputs, not triples",
            inputs.len()
        ));
    }
    let dtype = inputs[1].dtype();
    for_dtype!(dtype, T => {
        let mut out = ArrayD::from_elem(IxDyn(shape), T::ZERO);
        for term in inputs.chunks(3) {
            let idx = term[0].to_i64();
            let x = term[1].view::<T>().ok_or("values of one dtype")?;
            let start = one_int(term[2], "a gather's block start")?;
            let here = *x.shape().get(axis).ok_or("a block without the gathered axis")? as i64;
            if idx.len() != shape[axis] {
                return Err(format!("{} indices for an output of {} along axis {axis}", idx.len(), shape[axis]));
            }
            let n = len as i64;
            let mut runs = Runs::default();
            for (p, &i) in idx.iter().enumerate() {
                if i < -n || i >= n {
                    return Err(format!("index {i} is out of bounds for axis {axis} with size {n}"));
                }
                let k = i.rem_euclid(n.max(1)) - start;
                if (0..here).contains(&k) {
                    runs.push(p, k as usize);
                }
            }
            copy_slices(&mut out, x, axis, &runs)?;
        }
        Ok(T::wrap(out))
    })
}

/// See [`nums_layout::batch::Kernel::IndexHits`].
pub fn index_hits(idx: &Block, len: u64, block: u64, blocks: u64) -> Result<Block, String> {
    if !idx.dtype().is_int() {
        return Err(format!("indices of dtype {}", idx.dtype()));
    }
    let n = len as i64;
    let mut out = vec![0i64; blocks as usize + 2];
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for &i in idx.to_i64().iter() {
        // uint64 past int64 wraps negative in to_i64: it is out of bounds either way.
        lo = lo.min(i);
        hi = hi.max(i);
        if (-n..n).contains(&i) {
            out[(i.rem_euclid(n) as u64 / block.max(1)) as usize] += 1;
        }
    }
    out[blocks as usize] = lo;
    out[blocks as usize + 1] = hi;
    Ok(Block::I64(
        ArrayD::from_shape_vec(IxDyn(&[1, blocks as usize + 2]), out).map_err(|e| e.to_string())?,
    ))
}

/// See [`nums_layout::batch::Kernel::Overlay`].
pub fn overlay(inputs: &[&Block]) -> Result<Block, String> {
    let first = inputs.first().ok_or("an overlay of nothing")?;
    let dtype = first.dtype();
    for_dtype!(dtype, T => {
        let mut out = first.view::<T>().ok_or("one dtype")?.as_standard_layout().into_owned();
        for b in &inputs[1..] {
            let v = b.view::<T>().ok_or("partials of one dtype")?;
            if v.shape() != out.shape() {
                return Err(format!("partials of shapes {:?} and {:?}", out.shape(), v.shape()));
            }
            let o: &mut [u8] = bytemuck::cast_slice_mut(out.as_slice_mut().expect("standard layout"));
            let std = v.as_standard_layout();
            let i: &[u8] = bytemuck::cast_slice(std.as_slice().expect("standard layout"));
            o.iter_mut().zip(i).for_each(|(a, b)| *a |= b);
        }
        Ok(T::wrap(out))
    }, bool => {
        let mut out = first.to_bool().as_standard_layout().into_owned();
        for b in &inputs[1..] {
            let v = b.to_bool();
            if v.shape() != out.shape() {
                return Err(format!("partials of shapes {:?} and {:?}", out.shape(), v.shape()));
            }
            Zip::from(&mut out).and(&*v).for_each(|a, &b| *a |= b);
        }
        Ok(Block::Bool(out))
    })
}

#[cfg(test)]
mod tests {
    /// NumPy's stable sort (and argsort) of a lane, by the comparator: what keyed sorts
    /// must give, bit for bit.
    fn reference<T: Sortable>(v: &[T], descending: bool) -> (Vec<T>, Vec<i64>) {
        let mut p: Vec<(T, i64)> = v.iter().copied().zip(0..).collect();
        p.sort_by(|a, b| cmp(&a.0, &b.0, descending));
        (
            p.iter().map(|x| x.0).collect(),
            p.iter().map(|x| x.1).collect(),
        )
    }

    /// Checks a lane of `v` and one of its first 300 (`v` itself is long enough to be
    /// sorted on several threads).
    fn check_keyed<T: Sortable>(v: Vec<T>, bits: impl Fn(&T) -> u64) {
        assert!(v.len() > PARALLEL_FROM);
        check_lane(v[..300].to_vec(), &bits);
        check_lane(v, &bits);
    }

    fn check_lane<T: Sortable>(v: Vec<T>, bits: &impl Fn(&T) -> u64) {
        let a = ndarray::ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.clone()).unwrap();
        for descending in [false, true] {
            let (want, want_arg) = reference(&v, descending);
            let got = sort_keyed(&a, 0, descending, false, 0);
            let got: Vec<T> = got.view::<T>().unwrap().iter().copied().collect();
            assert_eq!(
                got.iter().map(bits).collect::<Vec<_>>(),
                want.iter().map(bits).collect::<Vec<_>>()
            );
            let arg = sort_keyed(&a, 0, descending, true, 0);
            assert_eq!(arg.to_i64().iter().copied().collect::<Vec<_>>(), want_arg);
        }
    }

    #[test]
    fn keyed_sorts_are_numpys_stable_sort_bit_for_bit() {
        let mut state = 3u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 11
        };
        let specials = [
            0.0,
            -0.0,
            f64::NAN,
            -f64::NAN,
            f64::from_bits(0x7ff8_0000_0000_0001),
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::MIN_POSITIVE,
            -f64::MIN_POSITIVE,
            5e-324,
            1.5,
            -1.5,
        ];
        let floats: Vec<f64> = (0..40_000)
            .map(|i| {
                if i % 3 == 0 {
                    specials[(next() % specials.len() as u64) as usize]
                } else {
                    (next() % 7) as f64 - 3.0
                }
            })
            .collect();
        check_keyed(floats.clone(), |f| f.to_bits());
        check_keyed(floats.iter().map(|&f| f as f32).collect(), |f| {
            f.to_bits() as u64
        });
        // No -0.0 and no NaN: the keys alone.
        check_keyed(
            floats
                .iter()
                .map(|&f| if f.plain() { f } else { 2.0 })
                .collect(),
            |f| f.to_bits(),
        );
        check_keyed((0..40_000).map(|_| next() as i64).collect(), |&v| v as u64);
        check_keyed((0..40_000).map(|_| next() as i8).collect(), |&v| v as u64);
        check_keyed((0..40_000).map(|_| next() as u16).collect(), |&v| v as u64);
        check_keyed((0..40_000).map(|_| next()).collect(), |&v| v);
        check_keyed((0..40_000).map(|_| next() % 2 == 0).collect(), |&v| {
            v as u64
        });
    }

    #[test]
    fn parallel_sorts_equal_a_sort_on_any_thread_count() {
        let mut state = 7u64;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            state >> 40
        };
        // Many ties (values below 2^24), lengths that split unevenly.
        for n in [PARALLEL_FROM + 1, 100_003] {
            let v: Vec<u64> = (0..n).map(|_| next()).collect();
            let mut want = v.clone();
            want.sort_unstable();
            for threads in [1, 2, 3, 8] {
                let pool = rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .build()
                    .unwrap();
                let mut got = v.clone();
                pool.install(|| par_sort(&mut got));
                assert_eq!(got, want, "{n} elements on {threads} threads");
            }
        }
    }

    use super::*;
    use ndarray::ShapeBuilder;

    fn f64s(b: &Block) -> Vec<f64> {
        b.to_f64().iter().copied().collect()
    }

    #[test]
    fn selections_in_partials_overlay_exactly() {
        let f = |shape: &[usize], v: Vec<f64>| {
            Block::F64(ArrayD::from_shape_vec(IxDyn(shape), v).unwrap())
        };
        let i = |v: Vec<i64>| Block::I64(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap());
        let nan = f64::from_bits(0x7ff8_0000_dead_beef);
        // x along axis 0 in two blocks of 2 rows: [[-0, 1], [2, nan]] and [[4, 5], [6, 7]].
        let (x0, x1) = (
            f(&[2, 2], vec![-0.0, 1.0, 2.0, nan]),
            f(&[2, 2], vec![4.0, 5.0, 6.0, 7.0]),
        );
        // Indices 3, 0, -3 (= 1), 0: each block's term fills its own rows.
        let idx = i(vec![3, 0, -3, 0]);
        let (s0, s1) = (i(vec![0]), i(vec![2]));
        let a = gather(&[&idx, &x0, &s0], 0, 4, &[4, 2]).unwrap();
        let b = gather(&[&idx, &x1, &s1], 0, 4, &[4, 2]).unwrap();
        let whole = gather(&[&idx, &x0, &s0, &idx, &x1, &s1], 0, 4, &[4, 2]).unwrap();
        let bits = |b: &Block| b.to_f64().iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        let want: Vec<u64> = [6.0, 7.0, -0.0, 1.0, 2.0, nan, -0.0, 1.0]
            .iter()
            .map(|v: &f64| v.to_bits())
            .collect();
        assert_eq!(bits(&whole), want);
        assert_eq!(bits(&overlay(&[&a, &b]).unwrap()), want);
        // Along axis 1 (rows not runs of memory): the same values, transposed.
        let t = |b: &Block| Block::F64(b.to_f64().t().as_standard_layout().into_owned());
        let across = gather(&[&idx, &t(&x0), &s0, &idx, &t(&x1), &s1], 1, 4, &[2, 4]).unwrap();
        assert_eq!(bits(&t(&across)), want);
        assert!(
            gather(&[&i(vec![4]), &x0, &s0], 0, 4, &[1, 2])
                .unwrap_err()
                .contains("index 4 is out of bounds")
        );
        // A mask's selection: block 0 selects row 1, block 1 rows 0 and 1 (one before it).
        let m = |v: Vec<bool>| Block::Bool(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v).unwrap());
        let (m0, m1) = (m(vec![false, true]), m(vec![true, true]));
        let (b0, b1) = (i(vec![0]), i(vec![1]));
        // Output blocks of 2 rows: the second (origin 2) holds block 1's second row only.
        let c = compress(&[&x0, &m0, &b0, &x1, &m1, &b1], 0, 2, &[1, 2]).unwrap();
        assert_eq!(bits(&c), vec![6f64.to_bits(), 7f64.to_bits()]);
        let first = compress(&[&x0, &m0, &b0, &x1, &m1, &b1], 0, 0, &[2, 2]).unwrap();
        assert_eq!(
            bits(&first),
            [2.0, nan, 4.0, 5.0]
                .iter()
                .map(|v: &f64| v.to_bits())
                .collect::<Vec<_>>()
        );
        // Blocks not in C order, all or one of them: the same rows (copied into a zeroed
        // output instead of appended).
        let fo = |b: &Block| {
            let a = b.to_f64();
            let mut o = ArrayD::<f64>::zeros(IxDyn(a.shape()).f());
            o.assign(&a);
            Block::F64(o)
        };
        for terms in [
            [&fo(&x0), &m0, &b0, &fo(&x1), &m1, &b1],
            [&x0, &m0, &b0, &fo(&x1), &m1, &b1],
        ] {
            assert_eq!(
                bits(&compress(&terms, 0, 0, &[2, 2]).unwrap()),
                bits(&first)
            );
        }
        // Long masks: chunks counted before an output block's first row, as walked.
        let mut r = 7u64;
        let mask: Vec<bool> = (0..3000)
            .map(|k| {
                r = r
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                k >= 2000 || (r >> 60) < 3
            })
            .collect();
        // And a mask whose length is not a whole number of 8-flag words.
        for mask in [&mask[..], &mask[..2997]] {
            let picked: Vec<usize> = (0..mask.len()).filter(|&k| mask[k]).collect();
            for (before, origin, len) in [
                (0, 0, 50),
                (10, 300, 97),
                (0, 200, 2000),
                (5, 9_999, 3),
                (0, 900, 5000),
            ] {
                let want: Vec<(usize, usize)> = (picked.iter().enumerate())
                    .map(|(i, &k)| (before + i as u64, k))
                    .filter(|&(at, _)| at >= origin && at < origin + len)
                    .map(|(at, k)| ((at - origin) as usize, k))
                    .collect();
                let mut runs = Runs::default();
                want.iter().for_each(|&(to, from)| runs.push(to, from));
                assert_eq!(selected_runs(mask, before, origin, len).0, runs.0);
            }
        }
        let hits = index_hits(&i(vec![3, 0, -3, 9, -1]), 4, 2, 2).unwrap();
        assert_eq!(
            hits.to_i64().iter().copied().collect::<Vec<_>>(),
            vec![2, 2, -3, 9]
        );
    }

    #[test]
    fn numpy_sort_order_puts_nan_last() {
        let x = Block::F64(
            ArrayD::from_shape_vec(IxDyn(&[5]), vec![2.0, f64::NAN, -1.0, 0.0, -0.0]).unwrap(),
        );
        let s = sort(&x, 0, false, false, 0).unwrap();
        let v = f64s(&s);
        assert_eq!(&v[..1], &[-1.0]);
        assert_eq!(v[1], 0.0);
        assert_eq!(v[3], 2.0);
        assert!(v[4].is_nan());
        let a = sort(&x, 0, false, true, 10).unwrap();
        assert_eq!(
            a.to_i64().iter().copied().collect::<Vec<_>>(),
            [12, 13, 14, 10, 11]
        );
        let d = sort(&x, 0, true, true, 0).unwrap();
        assert_eq!(
            d.to_i64().iter().copied().collect::<Vec<_>>(),
            [1, 0, 3, 4, 2]
        );
        let z = |re: f64, im: f64| C128::new(re, im);
        let mut c = [
            z(f64::NAN, 0.0),
            z(1.0, f64::NAN),
            z(1.0, 2.0),
            z(0.0, 5.0),
            z(f64::NAN, f64::NAN),
        ];
        c.sort_by(|a, b| a.order(b));
        assert_eq!((c[0].re, c[1].re), (0.0, 1.0));
        assert!(c[2].im.is_nan() && c[3].re.is_nan() && c[4].im.is_nan());
    }

    #[test]
    fn scans_start_from_offsets() {
        let x = Block::I64(ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![1, 2, 3, 4, 5, 6]).unwrap());
        let s = scan(&x, None, ReduceOp::Sum, 1, false, DType::Int64).unwrap();
        assert_eq!(
            s.to_i64().iter().copied().collect::<Vec<_>>(),
            [1, 3, 6, 4, 9, 15]
        );
        let e = scan(&x, None, ReduceOp::Sum, 0, true, DType::Int64).unwrap();
        assert_eq!(
            e.to_i64().iter().copied().collect::<Vec<_>>(),
            [0, 0, 0, 1, 2, 3]
        );
        let off = Block::I64(ArrayD::from_shape_vec(IxDyn(&[2, 2]), vec![0, 100, 0, 200]).unwrap());
        let s = scan(&x, Some((&off, 1)), ReduceOp::Sum, 1, false, DType::Int64).unwrap();
        assert_eq!(
            s.to_i64().iter().copied().collect::<Vec<_>>(),
            [101, 103, 106, 204, 209, 215]
        );
        let t = scan_total(&x, None, ReduceOp::Prod, 1, DType::Int64).unwrap();
        assert_eq!(
            (
                t.shape().to_vec(),
                t.to_i64().iter().copied().collect::<Vec<_>>()
            ),
            (vec![2, 1], vec![6, 120])
        );
        // A mask's trues per lane, as the int64 sum of its values.
        let m = Block::Bool(
            ArrayD::from_shape_vec(IxDyn(&[2, 3]), vec![true, false, true, false, false, true])
                .unwrap(),
        );
        for axis in [0, 1] {
            let t = scan_total(&m, None, ReduceOp::Sum, axis, DType::Int64).unwrap();
            let want = m.to_i64().sum_axis(Axis(axis)).insert_axis(Axis(axis));
            assert_eq!(t.to_i64().into_owned(), want);
        }
    }

    #[test]
    fn sample_sort_counts_and_merges() {
        let x = Block::F64(
            ArrayD::from_shape_vec(IxDyn(&[6]), vec![3.0, 1.0, 2.0, 1.0, 5.0, 1.0]).unwrap(),
        );
        // Splitters (1.0 at position 13) and (3.0 at 0): the block holds positions 10..16.
        let c = sort_count(
            &x,
            10,
            &[(Scalar::Float(1.0), 13), (Scalar::Float(3.0), 0)],
            false,
        )
        .unwrap();
        assert_eq!(c.to_i64().iter().copied().collect::<Vec<_>>(), [1, 4]);
        let r1 = Block::F64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![1.0, 4.0]).unwrap());
        let r2 = Block::F64(ArrayD::from_shape_vec(IxDyn(&[3]), vec![0.0, 1.0, 2.0]).unwrap());
        let p1 = Block::I64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![0, 1]).unwrap());
        let p2 = Block::I64(ArrayD::from_shape_vec(IxDyn(&[3]), vec![7, 8, 9]).unwrap());
        let m = sort_merge(&[&r1, &r2], 2, 1, 3, false, false).unwrap();
        assert_eq!(f64s(&m), [1.0, 1.0, 2.0]);
        let m = sort_merge(&[&r1, &r2, &p1, &p2], 2, 1, 3, false, true).unwrap();
        assert_eq!(m.to_i64().iter().copied().collect::<Vec<_>>(), [0, 8, 9]);
    }

    #[test]
    fn searches_and_selections() {
        let a = Block::I64(ArrayD::from_shape_vec(IxDyn(&[4]), vec![1, 2, 2, 5]).unwrap());
        let v = Block::I64(ArrayD::from_shape_vec(IxDyn(&[3]), vec![2, 0, 9]).unwrap());
        assert_eq!(
            search_count(&a, &v, false)
                .unwrap()
                .to_i64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [1, 0, 4]
        );
        assert_eq!(
            search_count(&a, &v, true)
                .unwrap()
                .to_i64()
                .iter()
                .copied()
                .collect::<Vec<_>>(),
            [3, 0, 4]
        );
        let m = Block::Bool(
            ArrayD::from_shape_vec(IxDyn(&[4]), vec![true, false, true, true]).unwrap(),
        );
        let none = Block::I64(ArrayD::from_shape_vec(IxDyn(&[1]), vec![0]).unwrap());
        let c = compress(&[&a, &m, &none], 0, 1, &[2]).unwrap();
        assert_eq!(c.to_i64().iter().copied().collect::<Vec<_>>(), [2, 5]);
    }
}
