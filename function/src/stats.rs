//! Order statistics and counts of blocks: NumPy's quantiles of sorted lanes (every
//! `method=`, and `median`), histograms of equal bins and `bincount`, as NumPy computes
//! them.

use ndarray::{ArrayD, Axis, IxDyn, Zip};
use nums_layout::batch::QuantileMethod;
use nums_layout::{Block, DType, Elem, for_dtype};

use crate::order::Sortable;

/// Where quantile `q` of `n` sorted values is.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Point {
    /// Element i.
    At(usize),
    /// NumPy's `_lerp` of elements i and j by t.
    Lerp(usize, usize, f64),
    /// The mean of elements i and j (the median of an even count).
    Mean(usize, usize),
}

/// NumPy's `_quantile` for `n` (> 0) sorted values: the element, or the two elements and
/// the weight, its `method` takes for quantile `q` (in [0, 1]).
pub fn quantile_point(n: usize, q: f64, method: QuantileMethod) -> Point {
    use QuantileMethod::*;
    let nf = n as f64;
    let last = n - 1;
    let clip = |i: f64| (i.max(0.0) as usize).min(last);
    // NumPy's _discrete_interpolation_to_boundaries: the previous index where the
    // condition holds, else the next one.
    let discrete = |index: f64, cond: &dyn Fn(f64, f64) -> bool| {
        let previous = index.floor();
        let gamma = index - previous;
        Point::At(clip(if cond(gamma, index) {
            previous
        } else {
            previous + 1.0
        }))
    };
    let virtual_index = |alpha: f64, beta: f64| nf * q + (alpha + q * (1.0 - alpha - beta)) - 1.0;
    let v = match method {
        Lower => return Point::At(clip(((nf - 1.0) * q).floor())),
        Higher => return Point::At(clip(((nf - 1.0) * q).ceil())),
        Nearest => return Point::At(clip(((nf - 1.0) * q).round_ties_even())),
        InvertedCdf => return discrete(nf * q - 1.0, &|g, _| g == 0.0),
        ClosestObservation => {
            return discrete(nf * q - 1.0 - 0.5, &|g, i| {
                g == 0.0 && i.floor().rem_euclid(2.0) == 1.0
            });
        }
        Median => {
            return if n % 2 == 1 {
                Point::At(n / 2)
            } else {
                Point::Mean(n / 2 - 1, n / 2)
            };
        }
        AveragedInvertedCdf => nf * q - 1.0,
        InterpolatedInvertedCdf => virtual_index(0.0, 1.0),
        Hazen => virtual_index(0.5, 0.5),
        Weibull => virtual_index(0.0, 0.0),
        Linear => (nf - 1.0) * q,
        MedianUnbiased => virtual_index(1.0 / 3.0, 1.0 / 3.0),
        NormalUnbiased => virtual_index(3.0 / 8.0, 3.0 / 8.0),
        Midpoint => 0.5 * (((nf - 1.0) * q).floor() + ((nf - 1.0) * q).ceil()),
    };
    // NumPy's _get_indexes: past the ends both are the end (the last as index -1, which
    // gamma is computed from).
    let (i, j, previous) = if v >= nf - 1.0 {
        (last, last, -1.0)
    } else if v < 0.0 {
        (0, 0, 0.0)
    } else {
        let p = v.floor();
        (p as usize, p as usize + 1, p)
    };
    let gamma = v - previous;
    let gamma = match method {
        AveragedInvertedCdf if gamma == 0.0 => 0.5,
        AveragedInvertedCdf => 1.0,
        Midpoint if v % 1.0 == 0.0 => 0.0,
        Midpoint => 0.5,
        _ => gamma,
    };
    Point::Lerp(i, j, gamma)
}

/// NumPy's `_lerp`: from the nearer end, so that t = 1 gives b.
fn lerp(a: f64, b: f64, t: f64) -> f64 {
    let d = b - a;
    if t >= 0.5 {
        b - d * (1.0 - t)
    } else {
        a + d * t
    }
}

/// See [`nums_layout::batch::Kernel::Quantile`].
pub fn quantile(
    x: &Block,
    axis: usize,
    qs: &[f64],
    method: QuantileMethod,
    nan: bool,
    select: bool,
) -> Result<Block, String> {
    if axis >= x.shape().len() {
        return Err(format!("axis {axis} of a {}-D block", x.shape().len()));
    }
    if select && !x.dtype().is_complex() {
        let x = for_dtype!(x.dtype(), T => T::wrap(selected(x.view::<T>().expect("its dtype"), axis, qs, method, nan)));
        return quantile(&x, axis, qs, method, nan, false);
    }
    match x {
        Block::C64(a) => Ok(Block::C64(median_complex(
            a,
            axis,
            nan,
            |z| z.is_nan(),
            |z| z / 2.0,
        ))),
        Block::C128(a) => Ok(Block::C128(median_complex(
            a,
            axis,
            nan,
            |z| z.is_nan(),
            |z| z / 2.0,
        ))),
        _ => {
            for_dtype!(x.dtype(), T => quantile_t::<T>(x.view::<T>().expect("its dtype"), axis, qs, method, nan))
        }
    }
}

/// NumPy's median of sorted complex lanes (the only quantile it takes of complex numbers):
/// the middle one, or the mean of the middle two; a lane holding a NaN (sorted last) gives
/// its last element, as does a nan variant's lane of NaNs alone.
fn median_complex<T: Copy + Default + std::ops::Add<Output = T>>(
    a: &ArrayD<T>,
    axis: usize,
    nan: bool,
    is_nan: impl Fn(&T) -> bool,
    half: impl Fn(T) -> T,
) -> ArrayD<T> {
    let mut shape = a.shape().to_vec();
    shape[axis] = 1;
    let mut out = ArrayD::from_elem(IxDyn(&shape), T::default());
    Zip::from(out.lanes_mut(Axis(axis)))
        .and(a.lanes(Axis(axis)))
        .for_each(|mut o, l| {
            let Some(&last) = l.last() else { return };
            o[0] = match valid_len(&l, nan, &is_nan) {
                Some(n) if n > 0 => match quantile_point(n, 0.5, QuantileMethod::Median) {
                    Point::At(i) => l[i],
                    Point::Mean(i, j) | Point::Lerp(i, j, _) => half(l[i] + l[j]),
                },
                _ => last,
            };
        });
    out
}

/// `a` with each lane along `axis` made to read as its sorted self wherever the
/// quantiles `qs` look: NaNs last, and at each position a quantile reads (of the lane's
/// numbers with `nan`, else of all of it), the element a sort puts there (selected, as
/// NumPy's `partition` does: linear time, where a sort takes n log n).
fn selected<T: Sortable>(
    a: &ArrayD<T>,
    axis: usize,
    qs: &[f64],
    method: QuantileMethod,
    nan: bool,
) -> ArrayD<T> {
    if a.ndim() == 1 {
        if let Some(out) = selected_by_keys(a, qs, method) {
            return out;
        }
        // One lane (a column's median): selected in its own copy, which is the output.
        let mut lane: Vec<T> = a.iter().copied().collect();
        select_lane(&mut lane, qs, method, nan);
        return ArrayD::from_shape_vec(a.raw_dim(), lane).expect("n elements");
    }
    let mut out = a.to_owned();
    let mut lane: Vec<T> = Vec::with_capacity(a.shape()[axis]);
    for mut o in out.lanes_mut(Axis(axis)) {
        lane.clear();
        lane.extend(o.iter().copied());
        select_lane(&mut lane, qs, method, nan);
        for (o, v) in o.iter_mut().zip(&lane) {
            *o = *v;
        }
    }
    out
}

/// One lane of [`selected`], in place.
fn select_lane<T: Sortable>(lane: &mut [T], qs: &[f64], method: QuantileMethod, nan: bool) {
    // NaNs (floats only) to the end, the numbers before them.
    let mut valid = lane.len();
    let mut i = 0;
    while i < valid {
        if lane[i].to_f64().is_nan() {
            valid -= 1;
            lane.swap(i, valid);
        } else {
            i += 1;
        }
    }
    // A lane holding a NaN gives NaN unless NaNs are left out: nothing to select.
    if valid != lane.len() && !nan {
        return;
    }
    // Each position selected in what lies after the one before it.
    let mut lo = 0;
    for p in read_at(valid, qs, method) {
        lane[lo..valid].select_nth_unstable_by(p - lo, |x, y| x.order(y));
        lo = p + 1;
    }
}

/// The positions of a sorted lane of `valid` numbers that the quantiles `qs` read, in
/// order, once each.
fn read_at(valid: usize, qs: &[f64], method: QuantileMethod) -> Vec<usize> {
    let mut at: Vec<usize> = Vec::with_capacity(2 * qs.len());
    for &q in qs {
        if valid == 0 {
            break;
        }
        match quantile_point(valid, q, method) {
            Point::At(i) => at.push(i),
            Point::Lerp(i, j, _) | Point::Mean(i, j) => at.extend([i, j]),
        }
    }
    at.sort_unstable();
    at.dedup();
    at
}

/// [`selected`] of one lane of ints or floats whose elements are each the only one of
/// their key (no NaN, no -0.0; None otherwise): selected among their keys (integers: no
/// comparator, half the time of the elements' order on 3M floats). Only the positions the
/// quantiles read are set; the rest are zero (never read: with no NaN, `valid_len` finds
/// every element valid without looking at them).
fn selected_by_keys<T: Sortable>(
    a: &ArrayD<T>,
    qs: &[f64],
    method: QuantileMethod,
) -> Option<ArrayD<T>> {
    if !T::KEYED {
        return None;
    }
    let mut plain = true;
    let mut keys: Vec<u64> = a
        .iter()
        .map(|&v| {
            plain &= v.plain();
            v.key()
        })
        .collect();
    if !plain {
        return None;
    }
    // Zeros: pages the kernel maps on first touch, of which only the read ones are.
    let mut out = ArrayD::from_elem(a.raw_dim(), T::ZERO);
    let out_lane = out.as_slice_mut().expect("a new array");
    let mut lo = 0;
    for p in read_at(keys.len(), qs, method) {
        keys[lo..].select_nth_unstable(p - lo);
        out_lane[p] = T::from_key(keys[p]);
        lo = p + 1;
    }
    Some(out)
}

fn quantile_t<T: Sortable>(
    a: &ArrayD<T>,
    axis: usize,
    qs: &[f64],
    method: QuantileMethod,
    nan: bool,
) -> Result<Block, String> {
    let mut shape = a.shape().to_vec();
    shape[axis] = qs.len();
    let is_nan = |v: &T| {
        let f = v.to_f64();
        f.is_nan()
    };
    if method.picks() {
        // The elements themselves (NaN where the lane has one, in a float dtype).
        let mut out = ArrayD::from_elem(IxDyn(&shape), T::ZERO);
        let mut nans = ArrayD::from_elem(IxDyn(&shape), false);
        Zip::from(out.lanes_mut(Axis(axis)))
            .and(nans.lanes_mut(Axis(axis)))
            .and(a.lanes(Axis(axis)))
            .for_each(|mut o, mut m, l| {
                let valid = valid_len(&l, nan, &is_nan);
                for (k, &q) in qs.iter().enumerate() {
                    match valid {
                        Some(n) if n > 0 => {
                            if let Point::At(i) = quantile_point(n, q, method) {
                                o[k] = l[i];
                            }
                        }
                        _ => m[k] = true,
                    }
                }
            });
        if nans.iter().any(|&m| m) {
            let mut f = out.mapv(|v| v.to_f64());
            Zip::from(&mut f).and(&nans).for_each(|f, &m| {
                if m {
                    *f = f64::NAN;
                }
            });
            return Ok(Block::F64(f));
        }
        return Ok(T::wrap(out));
    }
    let mut out = ArrayD::from_elem(IxDyn(&shape), 0.0f64);
    Zip::from(out.lanes_mut(Axis(axis)))
        .and(a.lanes(Axis(axis)))
        .for_each(|mut o, l| {
            let valid = valid_len(&l, nan, &is_nan);
            for (k, &q) in qs.iter().enumerate() {
                o[k] = match valid {
                    Some(n) if n > 0 => match quantile_point(n, q, method) {
                        Point::At(i) => l[i].to_f64(),
                        Point::Lerp(i, j, t) => lerp(l[i].to_f64(), l[j].to_f64(), t),
                        Point::Mean(i, j) => (l[i].to_f64() + l[j].to_f64()) / 2.0,
                    },
                    _ => f64::NAN,
                };
            }
        });
    Ok(Block::F64(out))
}

/// The values of a sorted lane a quantile is taken over: all (`None` when one is NaN,
/// which sorts last), or with `nan` those before the first NaN.
fn valid_len<T: Copy>(
    l: &ndarray::ArrayView1<T>,
    nan: bool,
    is_nan: &dyn Fn(&T) -> bool,
) -> Option<usize> {
    let n = l.len();
    if nan {
        // NaNs are last: the first one by bisection.
        let (mut lo, mut hi) = (0, n);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if is_nan(&l[mid]) {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        Some(lo)
    } else if n > 0 && is_nan(&l[n - 1]) {
        None
    } else {
        Some(n)
    }
}

/// See [`nums_layout::batch::Kernel::Histogram`]: terms (values, lowest edge, highest
/// edge, weights when `weighted`).
///
/// As NumPy's `histogram` finds each value's bin, in its dtypes: the edges are float32 for
/// float32 values (else float64), made by `linspace` in the edges' given dtype (float32
/// when they are the data's own minimum and maximum, float64 when they came from `range=`)
/// and then cast; values are kept and compared in the edges' dtype. A non-finite range or
/// edges that do not increase (too many bins for the range) is NumPy's ValueError.
pub fn histogram(inputs: &[&Block], bins: u64, weighted: bool) -> Result<Block, String> {
    let arity = if weighted { 4 } else { 3 };
    if inputs.is_empty() || !inputs.len().is_multiple_of(arity) || bins == 0 {
        return Err(format!("a histogram given {} inputs", inputs.len()));
    }
    let nb = bins as usize;
    let mut counts = vec![0i64; nb];
    let mut sums = vec![0.0f64; nb];
    let mut checked = None;
    for t in inputs.chunks(arity) {
        let (first, last) = (t[1].first().as_f64(), t[2].first().as_f64());
        let edges = HistEdges {
            first,
            last,
            bins,
            single: t[0].dtype() == DType::Float32,
            c32: t[1].dtype() == DType::Float32,
        };
        if checked != Some((first.to_bits(), last.to_bits())) {
            edges.check()?;
            checked = Some((first.to_bits(), last.to_bits()));
        }
        let x = t[0].to_f64();
        let weights = if weighted {
            let w = t[3].to_f64();
            if w.shape() != x.shape() {
                return Err("weights of another shape than the values".into());
            }
            Some(w.iter().copied().collect::<Vec<f64>>())
        } else {
            None
        };
        for (k, &v) in x.iter().enumerate() {
            let Some(i) = edges.bin(v) else { continue };
            match &weights {
                Some(w) => sums[i] += w[k],
                None => counts[i] += 1,
            }
        }
    }
    Ok(if weighted {
        Block::F64(ArrayD::from_shape_vec(IxDyn(&[nb]), sums).map_err(|e| e.to_string())?)
    } else {
        Block::I64(ArrayD::from_shape_vec(IxDyn(&[nb]), counts).map_err(|e| e.to_string())?)
    })
}

/// A histogram's equal bins between `first` and `last`, as NumPy computes them.
struct HistEdges {
    first: f64,
    last: f64,
    bins: u64,
    /// The values (so the edges) are float32.
    single: bool,
    /// `first` and `last` are float32 (the data's own), so `linspace` and the bin
    /// arithmetic run in float32.
    c32: bool,
}

impl HistEdges {
    /// Edge `i` (0..=bins) in the edges' dtype, as a float64.
    fn edge(&self, i: u64) -> f64 {
        if self.c32 {
            let (f, l) = (self.first as f32, self.last as f32);
            let step = (l - f) / self.bins as f32;
            (if i == self.bins {
                l
            } else {
                i as f32 * step + f
            }) as f64
        } else {
            let step = (self.last - self.first) / self.bins as f64;
            let e = if i == self.bins {
                self.last
            } else {
                i as f64 * step + self.first
            };
            if self.single { e as f32 as f64 } else { e }
        }
    }

    /// NumPy's ValueErrors: a range that is not finite, edges that do not increase.
    fn check(&self) -> Result<(), String> {
        use nums_layout::Scalar;
        if !(self.first.is_finite() && self.last.is_finite()) {
            return Err(format!(
                "ValueError: autodetected range of [{}, {}] is not finite",
                Scalar::Float(self.first),
                Scalar::Float(self.last)
            ));
        }
        let mut prev = self.edge(0);
        for i in 1..=self.bins {
            let e = self.edge(i);
            if prev.partial_cmp(&e) != Some(std::cmp::Ordering::Less) {
                return Err(format!(
                    "ValueError: Too many bins for data range. Cannot create {} finite-sized bins.",
                    self.bins
                ));
            }
            prev = e;
        }
        Ok(())
    }

    /// The bin of the value `v` (exact in the values' dtype), `None` outside the edges.
    fn bin(&self, v: f64) -> Option<usize> {
        let nb = self.bins as usize;
        let (lo, hi) = if self.single {
            (self.first as f32 as f64, self.last as f32 as f64)
        } else {
            (self.first, self.last)
        };
        if !(v >= lo && v <= hi) {
            return None;
        }
        let f = if self.c32 {
            let (f, l) = (self.first as f32, self.last as f32);
            ((v as f32 - f) / (l - f) * self.bins as f32) as f64
        } else if self.single {
            ((v as f32 - self.first as f32) as f64) / (self.last - self.first) * self.bins as f64
        } else {
            (v - self.first) / (self.last - self.first) * self.bins as f64
        };
        let mut i = (f as usize).min(nb - 1);
        if v < self.edge(i as u64) {
            i = i.saturating_sub(1);
        } else if i + 1 < nb && v >= self.edge(i as u64 + 1) {
            i += 1;
        }
        Some(i)
    }
}

/// See [`nums_layout::batch::Kernel::Bincount`]: terms (values, weights when `weighted`).
pub fn bincount(inputs: &[&Block], length: u64, weighted: bool) -> Result<Block, String> {
    let arity = if weighted { 2 } else { 1 };
    if inputs.is_empty() || !inputs.len().is_multiple_of(arity) {
        return Err(format!("a bincount given {} inputs", inputs.len()));
    }
    let len = length as usize;
    let mut counts = vec![0i64; len];
    let mut sums = vec![0.0f64; len];
    for t in inputs.chunks(arity) {
        if !t[0].dtype().is_exact() {
            return Err(format!(
                "TypeError: Cannot cast array data from dtype('{}') to dtype('int64') according to the rule 'safe'",
                t[0].dtype()
            ));
        }
        let x = t[0].to_i64();
        let w: Option<Vec<f64>> = weighted.then(|| t[1].to_f64().iter().copied().collect());
        if w.as_ref().is_some_and(|w| w.len() != x.len()) {
            return Err("weights of another length than the values".into());
        }
        for (k, &v) in x.iter().enumerate() {
            if v < 0 {
                return Err("ValueError: 'list' argument must have no negative elements".into());
            }
            let Some(slot) = usize::try_from(v).ok().filter(|&v| v < len) else {
                return Err(format!(
                    "a value {v} past the {len} bins its count was planned for"
                ));
            };
            match &w {
                Some(w) => sums[slot] += w[k],
                None => counts[slot] += 1,
            }
        }
    }
    Ok(if weighted {
        Block::F64(ArrayD::from_shape_vec(IxDyn(&[len]), sums).map_err(|e| e.to_string())?)
    } else {
        Block::I64(ArrayD::from_shape_vec(IxDyn(&[len]), counts).map_err(|e| e.to_string())?)
    })
}

/// The dtype NumPy's quantile of a `dtype` array has with `method`.
pub fn quantile_dtype(dtype: DType, method: QuantileMethod) -> DType {
    if method.picks() {
        dtype
    } else {
        dtype.to_float()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantile_points_are_numpys() {
        use QuantileMethod::*;
        assert_eq!(quantile_point(5, 0.5, Linear), Point::Lerp(2, 3, 0.0));
        assert_eq!(quantile_point(4, 0.5, Linear), Point::Lerp(1, 2, 0.5));
        assert_eq!(quantile_point(4, 1.0, Linear), Point::Lerp(3, 3, 4.0));
        assert_eq!(quantile_point(4, 0.5, Lower), Point::At(1));
        assert_eq!(quantile_point(4, 0.5, Higher), Point::At(2));
        assert_eq!(quantile_point(4, 0.5, Nearest), Point::At(2));
        assert_eq!(quantile_point(4, 0.5, InvertedCdf), Point::At(1));
        assert_eq!(quantile_point(4, 0.5, Median), Point::Mean(1, 2));
        assert_eq!(quantile_point(4, 0.5, Midpoint), Point::Lerp(1, 2, 0.5));
        assert_eq!(
            quantile_point(4, 0.5, AveragedInvertedCdf),
            Point::Lerp(1, 2, 0.5)
        );
    }

    #[test]
    fn selected_order_statistics_equal_a_sorts() {
        // Lanes along axis 0 of a 2-D block (strided), with repeats, NaNs in some lanes,
        // a lane of NaNs only; every method, the nan forms too, and ints.
        let mut state = 7u64;
        let mut next = || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) % 50
        };
        let (n, lanes) = (101, 5);
        let mut v: Vec<f64> = (0..n * lanes).map(|_| next() as f64 - 20.0).collect();
        v[3 * lanes + 1] = f64::NAN;
        v[50 * lanes + 1] = f64::NAN;
        for i in 0..n {
            v[i * lanes + 4] = f64::NAN;
        }
        let x = Block::F64(ArrayD::from_shape_vec(IxDyn(&[n, lanes]), v).unwrap());
        let sorted = crate::order::sort(&x, 0, false, false, 0).unwrap();
        let ints = Block::I64(x.to_f64().mapv(|f| if f.is_nan() { 0 } else { f as i64 }));
        let ints_sorted = crate::order::sort(&ints, 0, false, false, 0).unwrap();
        let qs = [0.0, 0.05, 0.5, 0.5, 0.731, 1.0];
        let methods = (QuantileMethod::NAMES.iter())
            .map(|n| QuantileMethod::parse(n).unwrap())
            .chain([QuantileMethod::Median]);
        for method in methods {
            for nan in [false, true] {
                for (x, sorted) in [(&x, &sorted), (&ints, &ints_sorted)] {
                    let want = quantile(sorted, 0, &qs, method, nan, false).unwrap();
                    let got = quantile(x, 0, &qs, method, nan, true).unwrap();
                    let (w, g) = (want.to_f64(), got.to_f64());
                    assert_eq!(want.dtype(), got.dtype(), "{method:?} nan={nan}");
                    assert!(
                        w.iter()
                            .zip(g.iter())
                            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
                        "{method:?} nan={nan}: {w} != {g}"
                    );
                }
            }
        }
        // One lane (1-D: selected by keys where it is plain), each of x's lanes and one
        // holding -0.0, against the sorted lane.
        let mut lanes_1d: Vec<Block> = (0..lanes)
            .map(|l| Block::F64(x.to_f64().index_axis(Axis(1), l).to_owned()))
            .collect();
        lanes_1d.push(Block::F64(
            ndarray::arr1(&[0.0, -0.0, 3.0, -0.0, 1.0]).into_dyn(),
        ));
        lanes_1d.push(Block::I64(
            ints.to_f64().index_axis(Axis(1), 0).mapv(|f| f as i64),
        ));
        for lane in &lanes_1d {
            let sorted = crate::order::sort(lane, 0, false, false, 0).unwrap();
            let methods = (QuantileMethod::NAMES.iter()).map(|n| QuantileMethod::parse(n).unwrap());
            for method in methods.chain([QuantileMethod::Median]) {
                for nan in [false, true] {
                    let want = quantile(&sorted, 0, &qs, method, nan, false).unwrap();
                    let got = quantile(lane, 0, &qs, method, nan, true).unwrap();
                    let (want, got) = (want.to_f64(), got.to_f64());
                    assert!(
                        want.iter()
                            .zip(got.iter())
                            .all(|(a, b)| a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan())),
                        "1-D {method:?} nan={nan}: {want} != {got}"
                    );
                }
            }
        }
    }

    fn f32s(v: &[f32]) -> Block {
        Block::F32(ArrayD::from_shape_vec(IxDyn(&[v.len()]), v.to_vec()).unwrap())
    }

    fn scalar(d: DType, v: f64) -> Block {
        Block::full(d, &[], nums_layout::Scalar::Float(v))
    }

    fn counts(b: &Block) -> Vec<i64> {
        b.to_i64().iter().copied().collect()
    }

    #[test]
    fn a_float32_histogram_bins_as_numpy_does() {
        // np.histogram(x, bins=5, range=(-0.3, 0.3)) of float32 x: [2, 1, 1, 1, 5] (the
        // range's edges compare in float32, so -0.3f32 and 0.3f32 are inside).
        let x = f32s(&[-0.3, -0.3, -0.1, 0.0, 0.1, 0.3, 0.3, 0.3, 0.3, 0.2999]);
        let (lo, hi) = (scalar(DType::Float64, -0.3), scalar(DType::Float64, 0.3));
        let h = histogram(&[&x, &lo, &hi], 5, false).unwrap();
        assert_eq!(counts(&h), [2, 1, 1, 1, 5]);
        // The data's own edges (float32 minimum and maximum): bins=7 as NumPy gives.
        let (lo, hi) = (scalar(DType::Float32, -0.3), scalar(DType::Float32, 0.3));
        let h = histogram(&[&x, &lo, &hi], 7, false).unwrap();
        assert_eq!(counts(&h), [2, 0, 1, 1, 1, 0, 5]);
    }

    #[test]
    fn a_histogram_refuses_what_numpy_refuses() {
        let x = f32s(&[f32::NAN, f32::NAN]);
        let nan = scalar(DType::Float32, f64::NAN);
        let e = histogram(&[&x, &nan, &nan], 3, false).unwrap_err();
        assert_eq!(
            e,
            "ValueError: autodetected range of [nan, nan] is not finite"
        );
        let x = Block::F64(ArrayD::from_shape_vec(IxDyn(&[2]), vec![0.0, 1.0]).unwrap());
        let (lo, hi) = (
            scalar(DType::Float64, -f64::MAX),
            scalar(DType::Float64, f64::MAX),
        );
        let e = histogram(&[&x, &lo, &hi], 3, false).unwrap_err();
        assert!(e.contains("Cannot create 3 finite-sized bins"), "{e}");
    }
}
