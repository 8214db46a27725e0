//! Discrete Fourier transforms: NumPy's `np.fft` (the Array API's FFT extension), along
//! axes in any number of blocks, never gathered into one block.
//!
//! An axis in one block is one kernel call per block ([`NodeOp::Fft`]); so is an axis in
//! several blocks of an array with other axes whose lanes fit a task, re-blocked into two
//! blocks or more of whole lanes (the other axes split). Otherwise an axis in several
//! blocks of length N = N1 N2 is transformed by the four-step algorithm, as ordinary block
//! tasks: the axis viewed as [N1, N2] (element N2 n1 + n2, a split of the axis block for
//! block), length-N1 FFTs down its columns times the twiddle exp(-2 pi i k1 n2 / N),
//! length-N2 FFTs along its rows, and frequency k1 + N1 k2 read back from [k1, k2] (a
//! transpose, then the axes merged). Each change between row blocks and column blocks is
//! two re-blockings through tiles, so that no task reads more than one block's worth:
//! blocks of about the input's size, bounded by `memory_mb`. A length whose factor pair
//! would make columns longer than both the input's blocks and Bluestein's (a prime: its
//! only pair is N x 1), or too long for `memory_mb`, is transformed by Bluestein's
//! algorithm: a convolution with a chirp as three four-step FFTs of a 5-smooth padded
//! length M >= 2N - 1, the chirps engine arrays, so that no axis is ever gathered into
//! one block. Real transforms in one block are realfft's; across blocks `rfft`
//! is the complex FFT's first half, `irfft` the inverse of the Hermitian-completed
//! spectrum.

use nums_function::memory::BASE_MEMORY;
use nums_layout::batch::{FftKind, Twiddle};

use super::*;

const ONE: &[&str] = &["a", "n", "axis", "norm", "out"];
const MANY: &[&str] = &["a", "s", "axes", "norm", "out"];
const FREQ: &[&str] = &["n", "d", "dtype"];
const SHIFT: &[&str] = &["x", "axes"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "fft",
        ONE,
        "`np.fft.fft` (an axis in several blocks: the four-step FFT, or Bluestein's for a prime length, across blocks, docs/guide.md)",
        |s, b| one_axis_call(s, b, Transform::Fft),
    )
    .refusing(&["out"]),
    FuncDef::new("ifft", ONE, "`np.fft.ifft`", |s, b| {
        one_axis_call(s, b, Transform::Ifft)
    })
    .refusing(&["out"]),
    FuncDef::new(
        "rfft",
        ONE,
        "`np.fft.rfft` (one block along the axis: realfft; more: the first half of the complex FFT)",
        |s, b| one_axis_call(s, b, Transform::Rfft),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "irfft",
        ONE,
        "`np.fft.irfft` (more than one block: the inverse FFT of the Hermitian-completed spectrum)",
        |s, b| one_axis_call(s, b, Transform::Irfft),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "hfft",
        ONE,
        "`np.fft.hfft` (`irfft` of the conjugate)",
        |s, b| one_axis_call(s, b, Transform::Hfft),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "ihfft",
        ONE,
        "`np.fft.ihfft` (the conjugate of `rfft`)",
        |s, b| one_axis_call(s, b, Transform::Ihfft),
    )
    .refusing(&["out"]),
    FuncDef::new("fft2", MANY, "`np.fft.fft2` (`fft` along each axis)", |s, b| {
        many_axes_call(s, b, Transform::Fft, true)
    })
    .refusing(&["out"]),
    FuncDef::new("ifft2", MANY, "`np.fft.ifft2`", |s, b| {
        many_axes_call(s, b, Transform::Ifft, true)
    })
    .refusing(&["out"]),
    FuncDef::new("rfft2", MANY, "`np.fft.rfft2`", |s, b| {
        many_axes_call(s, b, Transform::Rfft, true)
    })
    .refusing(&["out"]),
    FuncDef::new("irfft2", MANY, "`np.fft.irfft2`", |s, b| {
        many_axes_call(s, b, Transform::Irfft, true)
    })
    .refusing(&["out"]),
    FuncDef::new("fftn", MANY, "`np.fft.fftn` (`fft` along each axis)", |s, b| {
        many_axes_call(s, b, Transform::Fft, false)
    })
    .refusing(&["out"]),
    FuncDef::new("ifftn", MANY, "`np.fft.ifftn`", |s, b| {
        many_axes_call(s, b, Transform::Ifft, false)
    })
    .refusing(&["out"]),
    FuncDef::new("rfftn", MANY, "`np.fft.rfftn`", |s, b| {
        many_axes_call(s, b, Transform::Rfft, false)
    })
    .refusing(&["out"]),
    FuncDef::new("irfftn", MANY, "`np.fft.irfftn`", |s, b| {
        many_axes_call(s, b, Transform::Irfft, false)
    })
    .refusing(&["out"]),
    FuncDef::new(
        "fftfreq",
        FREQ,
        "`np.fft.fftfreq` (`dtype`: the Array API's, float64 by default)",
        |s, b| freq(s, b, false),
    ),
    FuncDef::new("rfftfreq", FREQ, "`np.fft.rfftfreq`", |s, b| {
        freq(s, b, true)
    }),
    FuncDef::new(
        "fftshift",
        SHIFT,
        "`np.fft.fftshift` (`roll` by half of each axis)",
        |s, b| shift(s, b, false),
    ),
    FuncDef::new("ifftshift", SHIFT, "`np.fft.ifftshift`", |s, b| {
        shift(s, b, true)
    }),
];

/// A one-axis transform as NumPy names it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Transform {
    Fft,
    Ifft,
    Rfft,
    Irfft,
    Hfft,
    Ihfft,
}

/// NumPy's `norm=`: which direction is scaled, by 1/n or both by 1/sqrt(n).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Norm {
    Backward,
    Ortho,
    Forward,
}

impl Norm {
    fn of(b: &Bound) -> Result<Norm, EvalError> {
        match b.get("norm") {
            None => Ok(Norm::Backward),
            Some((Val::Str(t), _)) if t == "backward" => Ok(Norm::Backward),
            Some((Val::Str(t), _)) if t == "ortho" => Ok(Norm::Ortho),
            Some((Val::Str(t), _)) if t == "forward" => Ok(Norm::Forward),
            Some((v, p)) => Err(b.raising(
                PyException::ValueError,
                *p,
                format!(
                    "{}(): Invalid norm value {}; should be \"backward\", \"ortho\" or \"forward\".",
                    b.f,
                    match v {
                        Val::Str(t) => format!("{t:?}"),
                        _ => "(not a string)".into(),
                    }
                ),
            )),
        }
    }

    /// NumPy's `_swap_direction` (hfft and ihfft are irfft and rfft the other way round).
    fn swapped(self) -> Norm {
        match self {
            Norm::Backward => Norm::Forward,
            Norm::Ortho => Norm::Ortho,
            Norm::Forward => Norm::Backward,
        }
    }

    /// The factor of a transform of length `n`, forward or inverse.
    fn scale(self, n: u64, inverse: bool) -> f64 {
        match (self, inverse) {
            (Norm::Ortho, _) => 1.0 / (n as f64).sqrt(),
            (Norm::Backward, true) | (Norm::Forward, false) => 1.0 / n as f64,
            _ => 1.0,
        }
    }
}

/// A complex transform along one axis: its direction, its factor and its dtype.
#[derive(Clone, Copy, Debug)]
struct Dft {
    axis: usize,
    inverse: bool,
    scale: f64,
    complex: DType,
}

fn one_axis_call(s: &mut Builder, b: &Bound, t: Transform) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let nd = s.meta(x).ndim();
    if nd == 0 {
        return Err(b.err(b.pos, format!("{}(): a must be at least 1-D", b.f)));
    }
    let axis = match b.get("axis") {
        None => nd - 1,
        Some((v, p)) => axis_of(v, nd).map_err(|e| b.refused(*p, e))?,
    };
    let n = b.int("n")?;
    let norm = Norm::of(b)?;
    let r = transform(s, b, x, axis, n, t, norm)?;
    Ok(Val::Arr(r))
}

/// fft2, fftn and their kin: NumPy's `_raw_fftnd` (the last axis first; a real transform
/// on the last axis, its output's `s` the last entry).
fn many_axes_call(s: &mut Builder, b: &Bound, t: Transform, two: bool) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let shape = s.meta(x).shape.clone();
    let nd = shape.len();
    let sizes: Option<Vec<i64>> = match b.get("s") {
        None => None,
        Some((v, p)) => {
            let items = match v {
                Val::Tuple(t) => t.clone(),
                v => vec![v.clone()],
            };
            Some(
                items
                    .iter()
                    .map(|v| match v {
                        Val::Num(x) if x.kind() != ScalarKind::Float && x.integer().is_some() => {
                            Ok(x.as_i64())
                        }
                        _ => Err(b.err(*p, format!("{}(): s must be a tuple of integers", b.f))),
                    })
                    .collect::<Result<_, _>>()?,
            )
        }
    };
    let axes: Vec<usize> = match (b.get("axes"), &sizes) {
        (Some((v, p)), _) => {
            let items = match v {
                Val::Tuple(t) => t.clone(),
                v => vec![v.clone()],
            };
            items
                .iter()
                .map(|a| axis_of(a, nd).map_err(|e| b.refused(*p, e)))
                .collect::<Result<_, _>>()?
        }
        (None, _) if two => {
            if nd < 2 {
                return Err(b.err(b.pos, format!("{}(): a must be at least 2-D", b.f)));
            }
            vec![nd - 2, nd - 1]
        }
        (None, Some(sz)) => (nd.saturating_sub(sz.len())..nd).collect(),
        (None, None) => (0..nd).collect(),
    };
    if let Some(sz) = &sizes
        && sz.len() != axes.len()
    {
        return Err(b.err(
            b.pos,
            format!("{}(): Shape and axes have different lengths.", b.f),
        ));
    }
    if axes.is_empty() {
        return Ok(Val::Arr(x));
    }
    // NumPy's `_cook_nd_args`: each length is the input's along its axis when not given
    // (or given as -1), before any transform changes it (an axis named twice is
    // transformed at its first length again: rfftn(a, axes=(0, 0)) pads back).
    let shapeless = sizes.is_none();
    let mut ns: Vec<Option<i64>> = match sizes {
        Some(sz) => (sz.into_iter().zip(&axes))
            .map(|(n, &a)| Some(if n == -1 { shape[a] as i64 } else { n }))
            .collect(),
        None => axes.iter().map(|&a| Some(shape[a] as i64)).collect(),
    };
    let norm = Norm::of(b)?;
    let last = axes.len() - 1;
    let mut r = x;
    match t {
        Transform::Rfft => {
            r = transform(s, b, r, axes[last], ns[last], Transform::Rfft, norm)?;
            for i in (0..last).rev() {
                r = transform(s, b, r, axes[i], ns[i], Transform::Fft, norm)?;
            }
        }
        Transform::Irfft => {
            if shapeless {
                ns[last] = Some(2 * (shape[axes[last]] as i64 - 1));
            }
            for i in 0..last {
                r = transform(s, b, r, axes[i], ns[i], Transform::Ifft, norm)?;
            }
            r = transform(s, b, r, axes[last], ns[last], Transform::Irfft, norm)?;
        }
        t => {
            for i in (0..=last).rev() {
                r = transform(s, b, r, axes[i], ns[i], t, norm)?;
            }
        }
    }
    Ok(Val::Arr(r))
}

/// One transform of `x` along `axis` with NumPy's `n` (crop or zero-pad) and `norm`.
fn transform(
    s: &mut Builder,
    b: &Bound,
    x: NodeId,
    axis: usize,
    n: Option<i64>,
    t: Transform,
    norm: Norm,
) -> Result<NodeId, EvalError> {
    let m = s.meta(x).clone();
    let len = m.shape[axis];
    let real_out = matches!(t, Transform::Irfft | Transform::Hfft);
    let n = n.unwrap_or(if real_out {
        2 * (len as i64 - 1)
    } else {
        len as i64
    });
    if n < 1 {
        return Err(b.raising(
            PyException::ValueError,
            b.pos,
            format!(
                "{}(): Invalid number of FFT data points ({n}) specified.",
                b.f
            ),
        ));
    }
    let n = n as u64;
    let single = m.dtype == DType::Float32 || m.dtype == DType::Complex64;
    let complex = if single {
        DType::Complex64
    } else {
        DType::Complex128
    };
    let real = if single {
        DType::Float32
    } else {
        DType::Float64
    };
    if matches!(t, Transform::Rfft | Transform::Ihfft) && m.dtype.is_complex() {
        return Err(b.raising(
            PyException::TypeError,
            b.pos,
            format!(
                "{}(): the input is complex ({}); rfft transforms real input (fft for complex)",
                b.f,
                m.dtype.name()
            ),
        ));
    }
    match t {
        Transform::Hfft => {
            let c = s.unary(UnaryOp::Conj, Val::Arr(x), b.pos)?;
            let c = s.node(c, b.pos)?;
            return transform(
                s,
                b,
                c,
                axis,
                Some(n as i64),
                Transform::Irfft,
                norm.swapped(),
            );
        }
        Transform::Ihfft => {
            let r = transform(
                s,
                b,
                x,
                axis,
                Some(n as i64),
                Transform::Rfft,
                norm.swapped(),
            )?;
            let c = s.unary(UnaryOp::Conj, Val::Arr(r), b.pos)?;
            return s.node(c, b.pos);
        }
        _ => {}
    }
    // The input's length along the axis: n, or an inverse real transform's n / 2 + 1.
    let want = if t == Transform::Irfft { n / 2 + 1 } else { n };
    // An axis in one block stays in one (NumPy's n pads it at most to what is asked).
    let one_block = m.grid()[axis] <= 1 || m.is_empty();
    let x = fit_length(s, x, axis, want, b.pos)?;
    let inverse = matches!(t, Transform::Ifft | Transform::Irfft);
    let scale = norm.scale(n, inverse);
    let m = s.meta(x).clone();
    // An axis in several blocks whose lanes fit a task, in an array whose other axes give
    // two blocks or more of whole lanes: transformed in such blocks (a rechunk, one
    // exchange), not by the four-step's three (an fft2 of 6000 x 6000 in 1400 x 1400
    // blocks: 32.6 s against Dask's 7.0 s).
    let limit = s.fft_block_limit(complex.size() as u64);
    let blocks = |b: &[u64]| -> u64 { (0..b.len()).map(|d| m.shape[d].div_ceil(b[d])).product() };
    let lanes = (m.ndim() > 1 && !one_block)
        .then(|| {
            let mut b = lanes_within(&m, &[axis], want, limit);
            // Two blocks at least where another axis can be split (both threads busy).
            while blocks(&b) < 2 {
                match (0..b.len())
                    .filter(|&d| d != axis && b[d] > 1)
                    .max_by_key(|&d| b[d])
                {
                    Some(d) => b[d] = b[d].div_ceil(2),
                    None => break,
                }
            }
            b
        })
        .filter(|b| {
            let others: u64 = (0..b.len()).filter(|&d| d != axis).map(|d| b[d]).product();
            others * want <= limit && blocks(b) >= 2
        });
    if one_block || m.grid()[axis] <= 1 || m.is_empty() || lanes.is_some() {
        let kind = match t {
            Transform::Fft => FftKind::Forward,
            Transform::Ifft => FftKind::Inverse,
            Transform::Rfft => FftKind::Real,
            _ => FftKind::RealInverse,
        };
        let x = s.rechunk(x, lanes.unwrap_or_else(|| whole_along(&m, axis)));
        let mut shape = m.shape.clone();
        shape[axis] = match t {
            Transform::Rfft => n / 2 + 1,
            Transform::Irfft => n,
            _ => n,
        };
        let mut block = s.meta(x).block.clone();
        block[axis] = shape[axis].max(1);
        let dtype = if t == Transform::Irfft { real } else { complex };
        return Ok(s.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Fft {
                x,
                axis,
                kind,
                scale,
                twiddle: None,
            },
        ));
    }
    let dft = Dft {
        axis,
        inverse,
        scale,
        complex,
    };
    match t {
        Transform::Fft | Transform::Ifft => across_blocks(s, b, x, dft),
        Transform::Rfft => {
            let c = across_blocks(s, b, x, dft)?;
            Ok(s.slice(c, &[(axis, 0, n / 2 + 1)]))
        }
        _ => {
            // The full spectrum: y[k] for k <= n / 2, conj(y[n - k]) above.
            let tail = n - want;
            let mut parts = vec![s.cast(x, complex)];
            if tail > 0 {
                let mid = s.slice(x, &[(axis, 1, tail)]);
                let flipped = s.apply(
                    "flip",
                    &[
                        ("m", Val::Arr(mid)),
                        ("axis", Val::Num(Scalar::Int(axis as i64))),
                    ],
                    b.pos,
                )?;
                let c = s.unary(UnaryOp::Conj, flipped, b.pos)?;
                let c = s.node(c, b.pos)?;
                parts.push(s.cast(c, complex));
            }
            let full = s.concat(parts, axis, b.pos)?;
            let y = across_blocks(s, b, full, dft)?;
            let r = s.unary(UnaryOp::Real, Val::Arr(y), b.pos)?;
            s.node(r, b.pos)
        }
    }
}

/// `x` cropped or zero-padded along `axis` to `want` elements (NumPy's `n`).
fn fit_length(
    s: &mut Builder,
    x: NodeId,
    axis: usize,
    want: u64,
    pos: usize,
) -> Result<NodeId, EvalError> {
    let m = s.meta(x).clone();
    let len = m.shape[axis];
    if want <= len {
        return Ok(s.slice(x, &[(axis, 0, want)]));
    }
    let mut shape = m.shape.clone();
    shape[axis] = want - len;
    let mut block = m.block.clone();
    block[axis] = block[axis].min(shape[axis]).max(1);
    let zeros = s.add(
        ArrayMeta::new(shape, block, m.dtype),
        NodeOp::Fill {
            value: Scalar::Int(0),
        },
    );
    s.concat(vec![x, zeros], axis, pos)
}

/// `m`'s block with `axis` whole.
fn whole_along(m: &ArrayMeta, axis: usize) -> Vec<u64> {
    let mut block = m.block.clone();
    block[axis] = m.shape[axis].max(1);
    block
}

impl<'a> Builder<'a> {
    /// The most elements of a complex dtype of `size` bytes one FFT block may hold: a
    /// task holds its input, its output and the kernel's copies (about six blocks), in
    /// half of what an invocation holds past its base (the rest for the tasks that make
    /// its inputs in the same batch).
    fn fft_block_limit(&self, size: u64) -> u64 {
        let limit = self.job.compute.memory_mb << 20;
        (limit.saturating_sub(BASE_MEMORY) / 2 / (6 * size)).max(1)
    }
}

/// The complex FFT of `x` along `axis` (several blocks along it), in dtype `complex`: the
/// four-step algorithm, or where the length's factor pair would make columns longer than
/// both the input's blocks and Bluestein's (a prime: the whole axis), or ones that do not
/// fit `memory_mb`, Bluestein's transform. An error says why neither fits.
fn across_blocks(s: &mut Builder, b: &Bound, x: NodeId, t: Dft) -> Result<NodeId, EvalError> {
    let Dft { axis, complex, .. } = t;
    let m = s.meta(x).clone();
    let n = m.shape[axis];
    let limit = s.fft_block_limit(complex.size() as u64);
    let (n1, n2) = factor_pair(n);
    let padded = bluestein_length(n);
    let (p1, p2) = factor_pair(padded);
    // Longer columns than both make fewer, larger tasks (less parallel): Bluestein's ~3
    // FFTs of 2N-4N elements in blocks of the input's size are the better plan.
    let direct = n1 <= limit && (n1 <= m.block[axis].max(p1) || p1 > limit);
    if direct && n2 > 1 {
        return Ok(four_step(s, x, t, (n1, n2), limit));
    }
    if direct {
        // A prime of 2 or 3: its axis in one block.
        let block = lanes_within(&m, &[axis], n, limit);
        let x = s.rechunk(x, block);
        return Ok(fft_node(s, x, t, None));
    }
    if p1 <= limit {
        return bluestein(s, b, x, t, (p1, p2), limit);
    }
    Err(b.err(
        b.pos,
        format!(
            "{}(): an FFT of length {n} along an axis in {} blocks: neither {n} ({}) nor \
             Bluestein's padded length {padded} ({p1} x {p2}) has a factor pair whose both \
             sides fit a block, more than memory_mb = {} allows ({limit} elements); give \
             more memory_mb",
            b.f,
            m.grid()[axis],
            if n2 == 1 {
                "a prime".to_string()
            } else {
                format!("{n1} x {n2}")
            },
            s.job.compute.memory_mb
        ),
    ))
}

/// The four-step FFT `t` of `x` (its axis of length N1 N2) in blocks of at most `limit`
/// elements.
fn four_step(s: &mut Builder, x: NodeId, t: Dft, (n1, n2): (u64, u64), limit: u64) -> NodeId {
    let Dft {
        axis,
        scale,
        complex,
        ..
    } = t;
    let m = s.meta(x).clone();
    let n = m.shape[axis];
    let fft = |s: &mut Builder, x: NodeId, axis: usize, scale: f64, twiddle| {
        fft_node(s, x, Dft { axis, scale, ..t }, twiddle)
    };
    // The other axes' blocks shrunk so that a column of N1 (and a row of N2) fits.
    let others = lanes_within(&m, &[axis], n1.max(n2), limit);
    let o: u64 = (0..m.ndim())
        .filter(|&d| d != axis)
        .map(|d| others[d].min(m.shape[d]).max(1))
        .product();
    // Blocks of about the input's elements along the axis (at least one row or column).
    let target = (m.block[axis] * o).clamp(n1.max(n2) * o, limit.max(n1.max(n2) * o));
    let rows = (target / (n2 * o)).clamp(1, n1);
    let cols = (target / (n1 * o)).clamp(1, n2);
    // The other axes' blocks, with `at` in place of the axis.
    let with = |at: &[u64]| -> Vec<u64> { [&others[..axis], at, &others[axis + 1..]].concat() };
    // The axis as [N1, N2] in row blocks (element N2 n1 + n2 at [n1, n2]).
    let x = s.rechunk(x, with(&[rows * n2]));
    let split_shape = [&m.shape[..axis], &[n1, n2], &m.shape[axis + 1..]].concat();
    let a = s.add(
        ArrayMeta::new(split_shape, with(&[rows, n2]), m.dtype),
        NodeOp::Reshape { x },
    );
    // Columns whole, through tiles; length-N1 FFTs down them, times the twiddle.
    let a = s.rechunk(a, with(&[rows, cols]));
    let a = s.rechunk(a, with(&[n1, cols]));
    let twiddle = Twiddle { axis: axis + 1, n };
    let b = fft(s, a, axis, 1.0, Some(twiddle));
    // Rows whole, through tiles; length-N2 FFTs along them: [k1, k2].
    let b = s.rechunk(b, with(&[rows, cols]));
    let b = s.rechunk(b, with(&[rows, n2]));
    let d = fft(s, b, axis + 1, scale, None);
    // Frequency k1 + N1 k2 is at [k2, k1] of the transpose, whose rows whole (through
    // tiles) merge into the axis.
    let mut perm: Vec<usize> = (0..m.ndim() + 1).collect();
    perm.swap(axis, axis + 1);
    let e = s.transpose(d, perm);
    let e = s.rechunk(e, with(&[cols, rows]));
    let e = s.rechunk(e, with(&[cols, n1]));
    let out_block = with(&[cols * n1]);
    s.add(
        ArrayMeta::new(m.shape.clone(), out_block, complex),
        NodeOp::Reshape { x: e },
    )
}

/// The transform `t` of each lane of `x` (its axis whole in each block).
fn fft_node(s: &mut Builder, x: NodeId, t: Dft, twiddle: Option<Twiddle>) -> NodeId {
    let Dft {
        axis,
        inverse,
        scale,
        complex,
    } = t;
    let meta = ArrayMeta {
        dtype: complex,
        ..s.meta(x).clone()
    };
    let kind = if inverse {
        FftKind::Inverse
    } else {
        FftKind::Forward
    };
    let op = NodeOp::Fft {
        x,
        axis,
        kind,
        scale,
        twiddle,
    };
    s.add(meta, op)
}

/// Bluestein's (chirp-z) FFT of `x` along `axis` (length N) from three four-step FFTs of
/// the padded length M = P1 P2 >= 2N - 1: with w[k] = exp(i pi k^2 / N) (its conjugate
/// for the inverse), X[k] = conj(w[k]) sum_n x[n] conj(w[n]) w[k - n], the sum a circular
/// convolution of length M (the input zero-padded; the filter w[k] for k < N, w[M - k]
/// at the top, zeros between) computed as the inverse FFT of the product of the two FFTs.
/// The chirps and the filter are engine arrays, so every step is ordinary block tasks.
fn bluestein(
    s: &mut Builder,
    b: &Bound,
    x: NodeId,
    t: Dft,
    pair: (u64, u64),
    limit: u64,
) -> Result<NodeId, EvalError> {
    let Dft {
        axis,
        inverse,
        scale,
        complex,
    } = t;
    let m = s.meta(x).clone();
    let n = m.shape[axis];
    let padded = pair.0 * pair.1;
    let pos = b.pos;
    let block = m.block[axis];
    let sign = if inverse { -1.0 } else { 1.0 };
    // A 1-D array of the axis's length as one that broadcasts along `axis` of `x`.
    let along = |s: &mut Builder, v: NodeId| {
        let mut shape = vec![1; m.ndim()];
        shape[axis] = s.meta(v).shape[0];
        s.reshape(v, &shape)
    };
    let mul = |s: &mut Builder, a: NodeId, c: NodeId| -> Result<NodeId, EvalError> {
        let v = s.elementwise2(BinaryOp::Mul, Val::Arr(a), Val::Arr(c), pos)?;
        let v = s.node(v, pos)?;
        Ok(s.cast(v, complex))
    };
    let conj_w = chirp(s, (0, n as i64), n, -sign, complex, block, pos)?;
    let conj_w = along(s, conj_w);
    let a = mul(s, x, conj_w)?;
    let a = fit_length(s, a, axis, padded, pos)?;
    let forward = Dft {
        inverse: false,
        scale: 1.0,
        ..t
    };
    let fa = four_step(s, a, forward, pair, limit);
    let head = chirp(s, (0, n as i64), n, sign, complex, block, pos)?;
    let head = fit_length(s, head, 0, padded - (n - 1), pos)?;
    let filter = if n > 1 {
        let tail = chirp(s, (1 - n as i64, 0), n, sign, complex, block, pos)?;
        s.concat(vec![head, tail], 0, pos)?
    } else {
        head
    };
    let filter = s.rechunk(filter, vec![block]);
    let ff = four_step(s, filter, Dft { axis: 0, ..forward }, pair, limit);
    let ff = along(s, ff);
    let product = mul(s, fa, ff)?;
    let back = Dft {
        inverse: true,
        scale: scale / padded as f64,
        ..t
    };
    let y = four_step(s, product, back, pair, limit);
    let y = s.slice(y, &[(axis, 0, n)]);
    mul(s, y, conj_w)
}

/// Bluestein's padded length for `n`: the least 2^a 3^b 5^c >= 2n - 1 (at least 6, so
/// that it has a factor pair for the four-step).
fn bluestein_length(n: u64) -> u64 {
    let want = (2 * n).saturating_sub(1).max(6);
    let mut best = u64::MAX;
    let mut p5 = 1u64;
    while p5 < 2 * want {
        let mut p35 = p5;
        while p35 < 2 * want {
            let mut m = p35;
            while m < want {
                m *= 2;
            }
            best = best.min(m);
            p35 *= 3;
        }
        p5 *= 5;
    }
    best
}

/// The chirp exp(sign i pi k^2 / n) for k in `range` (lo..hi), a 1-D array in `complex`
/// in blocks of `block`. The phase k^2 mod 2n is computed in integers ([`square_mod`]),
/// so that the angle stays below 2 pi and exact however large k is.
fn chirp(
    s: &mut Builder,
    (lo, hi): (i64, i64),
    n: u64,
    sign: f64,
    complex: DType,
    block: u64,
    pos: usize,
) -> Result<NodeId, EvalError> {
    let len = (hi - lo) as u64;
    let k = s.add(
        ArrayMeta::new(vec![len], vec![block.min(len).max(1)], DType::Int64),
        NodeOp::Iota {
            axis: 0,
            start: Scalar::Int(lo),
            step: Scalar::Int(1),
            last: None,
        },
    );
    let q = 2 * n as i64;
    let mut arith = Graphed { s: &mut *s, pos };
    let r = arith.with(BinaryOp::Mod, &k, q)?;
    let phase = square_mod(&mut arith, &r, q)?;
    let angle = Scalar::Complex(0.0, sign * std::f64::consts::PI / n as f64);
    let v = s.elementwise2(BinaryOp::Mul, Val::Arr(phase), Val::Num(angle), pos)?;
    let w = s.unary(UnaryOp::Exp, v, pos)?;
    let w = s.node(w, pos)?;
    Ok(s.cast(w, complex))
}

/// Integer arithmetic on values: numbers, or int64 arrays of the graph.
trait IntArith {
    type V;
    /// `a op b`.
    fn both(&mut self, op: BinaryOp, a: &Self::V, b: &Self::V) -> Result<Self::V, EvalError>;
    /// `a op k`.
    fn with(&mut self, op: BinaryOp, a: &Self::V, k: i64) -> Result<Self::V, EvalError>;
}

/// int64 arrays of the graph, elementwise.
struct Graphed<'s, 'a> {
    s: &'s mut Builder<'a>,
    pos: usize,
}

impl IntArith for Graphed<'_, '_> {
    type V = NodeId;

    fn both(&mut self, op: BinaryOp, a: &NodeId, b: &NodeId) -> Result<NodeId, EvalError> {
        let v = self
            .s
            .elementwise2(op, Val::Arr(*a), Val::Arr(*b), self.pos)?;
        self.s.node(v, self.pos)
    }

    fn with(&mut self, op: BinaryOp, a: &NodeId, k: i64) -> Result<NodeId, EvalError> {
        let v = self
            .s
            .elementwise2(op, Val::Arr(*a), Val::Num(Scalar::Int(k)), self.pos)?;
        self.s.node(v, self.pos)
    }
}

/// `r * r mod q` for 0 <= r < q exactly in int64 for any q up to 2^62: `r` times its
/// `c`-bit digits, highest first, Horner's rule with a reduction at each step (c = 63 -
/// bits(q - 1), so that every product stays below 2^63; one digit, `r * r` itself, while
/// q <= 2^31).
fn square_mod<A: IntArith>(a: &mut A, r: &A::V, q: i64) -> Result<A::V, EvalError> {
    let bits = 64 - (q - 1).max(1).leading_zeros();
    let c = 63 - bits;
    let digits = bits.div_ceil(c);
    let mut acc: Option<A::V> = None;
    for j in (0..digits).rev() {
        let shifted = if j == 0 {
            None
        } else {
            Some(a.with(BinaryOp::Shr, r, (c * j) as i64)?)
        };
        let digit = match (shifted, j + 1 == digits) {
            (None, true) => None,
            (None, false) => Some(a.with(BinaryOp::BitAnd, r, (1i64 << c) - 1)?),
            (Some(v), true) => Some(v),
            (Some(v), false) => Some(a.with(BinaryOp::BitAnd, &v, (1i64 << c) - 1)?),
        };
        let term = a.both(BinaryOp::Mul, r, digit.as_ref().unwrap_or(r))?;
        let term = a.with(BinaryOp::Mod, &term, q)?;
        acc = Some(match acc {
            None => term,
            Some(v) => {
                let v = a.with(BinaryOp::Mul, &v, 1i64 << c)?;
                let v = a.with(BinaryOp::Mod, &v, q)?;
                let v = a.both(BinaryOp::Add, &v, &term)?;
                a.with(BinaryOp::Mod, &v, q)?
            }
        });
    }
    Ok(acc.expect("at least one digit"))
}

/// The factor pair N1 x N2 = n closest to a square (N1 >= N2); N2 = 1 for a prime.
fn factor_pair(n: u64) -> (u64, u64) {
    let mut d = (n as f64).sqrt() as u64;
    while d > 1 && (d * d > n || !n.is_multiple_of(d)) {
        d -= 1;
    }
    let d = d.max(1);
    (n / d, d)
}

/// `m`'s block with `axes` of `len` elements together (one lane each) and the other axes'
/// blocks halved, largest first, until a block holds at most `limit` elements.
fn lanes_within(m: &ArrayMeta, axes: &[usize], len: u64, limit: u64) -> Vec<u64> {
    let mut block: Vec<u64> = (0..m.ndim())
        .map(|d| m.block[d].min(m.shape[d]).max(1))
        .collect();
    for &a in axes {
        block[a] = m.shape[a].max(1);
    }
    let others = |b: &[u64]| -> u64 {
        (0..b.len())
            .filter(|d| !axes.contains(d))
            .map(|d| b[d])
            .product()
    };
    while others(&block) * len > limit {
        let Some(d) = (0..block.len())
            .filter(|d| !axes.contains(d))
            .max_by_key(|&d| block[d])
            .filter(|&d| block[d] > 1)
        else {
            break;
        };
        block[d] = block[d].div_ceil(2);
    }
    block
}

/// fftfreq and rfftfreq: NumPy's integer frequencies times `1 / (n d)`.
fn freq(s: &mut Builder, b: &Bound, half: bool) -> Result<Val, EvalError> {
    let n = b
        .int("n")?
        .ok_or_else(|| b.err(b.pos, format!("{}() is missing the argument \"n\"", b.f)))?;
    if n < 1 {
        return Err(b.raising(
            PyException::ValueError,
            b.pos,
            format!("{}(): n must be a positive integer, not {n}", b.f),
        ));
    }
    let d = b.num("d")?.map_or(1.0, Scalar::as_f64);
    let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
    if !dtype.is_float() {
        return Err(b.err(
            b.pos,
            format!("{}(): dtype must be a real floating dtype", b.f),
        ));
    }
    let arange = |s: &mut Builder, lo: i64, hi: i64| -> Result<NodeId, EvalError> {
        let v = s.apply(
            "arange",
            &[
                ("start", Val::Num(Scalar::Int(lo))),
                ("stop", Val::Num(Scalar::Int(hi))),
            ],
            b.pos,
        )?;
        s.node(v, b.pos)
    };
    let ints = if half {
        arange(s, 0, n / 2 + 1)?
    } else {
        let pos = arange(s, 0, (n - 1) / 2 + 1)?;
        if n / 2 > 0 {
            let neg = arange(s, -(n / 2), 0)?;
            s.concat(vec![pos, neg], 0, b.pos)?
        } else {
            pos
        }
    };
    let val = Scalar::Float(1.0 / (n as f64 * d));
    let f = s.elementwise2(BinaryOp::Mul, Val::Arr(ints), Val::Num(val), b.pos)?;
    let f = s.node(f, b.pos)?;
    Ok(Val::Arr(s.cast(f, dtype)))
}

/// fftshift (ifftshift): each axis rolled by half its length (back).
fn shift(s: &mut Builder, b: &Bound, back: bool) -> Result<Val, EvalError> {
    let x = b.array("x")?;
    let shape = s.meta(x).shape.clone();
    let axes: Vec<usize> = match b.get("axes") {
        None => (0..shape.len()).collect(),
        Some((Val::Tuple(t), p)) => t
            .iter()
            .map(|a| axis_of(a, shape.len()).map_err(|e| b.refused(*p, e)))
            .collect::<Result<_, _>>()?,
        Some((a, p)) => vec![axis_of(a, shape.len()).map_err(|e| b.refused(*p, e))?],
    };
    let mut r = Val::Arr(x);
    for a in axes {
        let half = (shape[a] / 2) as i64;
        let k = if back { -half } else { half };
        r = s.apply(
            "roll",
            &[
                ("a", r),
                ("shift", Val::Num(Scalar::Int(k))),
                ("axis", Val::Num(Scalar::Int(a as i64))),
            ],
            b.pos,
        )?;
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn factor_pairs_are_near_square() {
        assert_eq!(factor_pair(1 << 16), (256, 256));
        assert_eq!(factor_pair(3 * 5 * 7 * 64), (84, 80));
        assert_eq!(factor_pair(8191), (8191, 1));
        assert_eq!(factor_pair(2), (2, 1));
        assert_eq!(factor_pair(12), (4, 3));
    }

    fn job_graph(text: &str) -> Graph {
        let job = crate::job::Job::parse(std::path::Path::new("/tmp/f/job.toml"), text).unwrap();
        crate::graph::build(&job, &Default::default()).unwrap()
    }

    /// The most bytes any task of the graph's work reads, and the most it writes.
    fn largest_task(g: &Graph) -> (u64, u64, usize) {
        let (mut read, mut made, mut tasks) = (0, 0, 0);
        for w in crate::tasks::block_work(g).iter() {
            let ins: u64 = w.terms().flatten().map(|b| b.nbytes(g)).sum();
            read = read.max(ins);
            made = made.max(w.output().nbytes(g));
            tasks += 1;
        }
        (read, made, tasks)
    }

    /// A 1-D FFT over 16 blocks is planned as block tasks none of which reads or makes
    /// more than a block's worth (4,096 complex128 = 64 KiB), never the axis (1 MiB).
    #[test]
    fn a_many_block_fft_never_gathers_the_axis() {
        for f in [
            "fft(x)",
            "ifft(x, norm='ortho')",
            "rfft(x)",
            "np.fft.irfft(x)",
        ] {
            let g = job_graph(&format!(
                "[arrays]\nx = {{ random = \"normal\", shape = [65536], block = [4096] }}\n\
                 y = \"{f}\"\n[outputs]\ny = \"out/y.npy\"\n"
            ));
            let (read, made, tasks) = largest_task(&g);
            let axis = 65536 * 16;
            assert!(read <= 2 * 4096 * 16, "{f}: a task reads {read} bytes");
            assert!(made <= 2 * 4096 * 16, "{f}: a task makes {made} bytes");
            assert!(read < axis / 4 && tasks > 16, "{f}: {tasks} tasks");
        }
    }

    /// The FFT of a 2-D array blocked along both axes transforms each axis across its
    /// blocks.
    #[test]
    fn ragged_2d_plans() {
        let g = job_graph(
            "[arrays]\nx = { random = \"normal\", shape = [60, 42], block = [7, 8] }\n\
             y = \"fft2(x)\"\n[outputs]\ny = \"out/y.npy\"\n",
        );
        let y = &g.nodes[g.named["y"]].meta;
        assert_eq!(
            (y.shape.clone(), y.dtype),
            (vec![60, 42], DType::Complex128)
        );
    }

    /// An axis of a 2-D array in several blocks, whose lanes fit a task, is re-blocked
    /// into whole lanes (one exchange, no twiddled four-step column FFTs), the other axes
    /// split for two blocks at least; a 1-D axis, a single lane, or lanes too long for a
    /// task keep the four-step.
    #[test]
    fn lanes_that_fit_are_transformed_whole() {
        let four_steps = |f: &str, shape: &str, block: &str| {
            let g = job_graph(&format!(
                "[compute]\nmemory_mb = 128\n[arrays]\nx = {{ random = \"normal\", shape = {shape}, \
                 block = {block} }}\ny = \"{f}\"\n[outputs]\ny = \"out/y.npy\"\n"
            ));
            let twiddled = (g.nodes.iter())
                .filter(|n| {
                    matches!(
                        n.op,
                        NodeOp::Fft {
                            twiddle: Some(_),
                            ..
                        }
                    )
                })
                .count();
            let y = &g.nodes[g.named["y"]].meta;
            assert_eq!(y.dtype, DType::Complex128, "{f}");
            twiddled
        };
        assert_eq!(four_steps("fft2(x)", "[6000, 6000]", "[1400, 1400]"), 0);
        assert_eq!(four_steps("fft(x, axis=0)", "[6000, 600]", "[700, 600]"), 0);
        assert!(four_steps("fft(x)", "[65536]", "[4096]") > 0);
        // After the first axis the other is whole: its blocks halved for two.
        assert_eq!(four_steps("fft2(x)", "[60, 42]", "[7, 8]"), 0);
        assert_eq!(four_steps("fft(x)", "[1000, 6]", "[1000, 2]"), 0);
        // 2**19 complex128 is more than a task holds at memory_mb = 128 (480,597).
        assert!(four_steps("fft(x)", "[3, 524288]", "[2, 65536]") > 0);
        // One lane: whole, it would be one block (the axis gathered).
        assert!(four_steps("fft(x)", "[1, 4096]", "[1, 512]") > 0);
    }

    /// A prime length, and one whose factor pair (50,021 x 2) would make columns longer
    /// than both the input's blocks and Bluestein's, are Bluestein's transforms over
    /// blocks: no task reads or makes more than a few blocks' worth, never the axis.
    #[test]
    fn primes_and_long_factors_never_gather_the_axis() {
        for (n, block) in [(8191, 1000), (100_003, 8192), (2 * 50_021, 8192)] {
            for f in ["fft(x)", "ifft(x, norm='ortho')", "rfft(x)", "irfft(x)"] {
                let g = job_graph(&format!(
                    "[compute]\nmemory_mb = 128\n[arrays]\n\
                     x = {{ random = \"normal\", shape = [{n}], block = [{block}] }}\n\
                     y = \"{f}\"\n[outputs]\ny = \"out/y.npy\"\n"
                ));
                let (read, made, _) = largest_task(&g);
                let axis = 16 * n;
                assert!(read <= 16 * 6 * block, "{n} {f}: a task reads {read} bytes");
                assert!(made <= 16 * 3 * block, "{n} {f}: a task makes {made} bytes");
                assert!(
                    read < axis / 4,
                    "{n} {f}: a task reads {read} of {axis} bytes"
                );
            }
        }
    }

    /// Numbers, with Python's modulo: the reference for [`square_mod`] on arrays.
    struct Numbers;

    impl IntArith for Numbers {
        type V = i64;

        fn both(&mut self, op: BinaryOp, a: &i64, b: &i64) -> Result<i64, EvalError> {
            Ok(match op {
                BinaryOp::Mul => a.checked_mul(*b).expect("below 2^63"),
                BinaryOp::Add => a.checked_add(*b).expect("below 2^63"),
                _ => unreachable!("{op:?}"),
            })
        }

        fn with(&mut self, op: BinaryOp, a: &i64, k: i64) -> Result<i64, EvalError> {
            Ok(match op {
                BinaryOp::Mod => a.rem_euclid(k),
                BinaryOp::Shr => a >> k,
                BinaryOp::BitAnd => a & k,
                _ => self.both(op, a, &k)?,
            })
        }
    }

    /// The chirp's phase k^2 mod 2N is exact (no product past 2^63) from small lengths to
    /// the engine's largest (2^50 elements), for negative k too.
    #[test]
    fn chirp_phase_is_exact_in_int64() {
        for n in [
            1u64,
            2,
            7,
            100_003,
            1 << 30,
            (1 << 30) + 1,
            1_518_500_250,
            (1 << 40) + 15,
            1 << 50,
        ] {
            let q = 2 * n as i64;
            let mut ks: Vec<i64> = vec![0, 1, 2, 3, q - 1, q, q + 1, 1 - n as i64, -1];
            ks.extend((0..50).map(|i| (i * 2_654_435_761_i64).rem_euclid(4 * q) - 2 * q));
            for k in ks {
                let r = Numbers.with(BinaryOp::Mod, &k, q).ok().unwrap();
                let got = square_mod(&mut Numbers, &r, q).ok().unwrap();
                let want = (k as i128 * k as i128).rem_euclid(q as i128) as i64;
                assert_eq!(got, want, "{k}^2 mod {q}");
            }
        }
    }

    #[test]
    fn bluestein_lengths_are_5_smooth_and_composite() {
        for (n, m) in [
            (2, 6),
            (3, 6),
            (5, 9),
            (8191, 16384),
            (100_003, 202_500),
            (1_000_003, 2_025_000),
        ] {
            assert_eq!(bluestein_length(n), m);
            assert!(factor_pair(m).1 > 1);
        }
    }

    #[test]
    fn lanes_within_shrinks_the_other_axes() {
        let m = ArrayMeta::new(vec![64, 1000], vec![64, 100], DType::Float64);
        assert_eq!(lanes_within(&m, &[1], 1000, 1 << 20), vec![64, 1000]);
        assert_eq!(lanes_within(&m, &[1], 1000, 16_000), vec![16, 1000]);
    }
}
