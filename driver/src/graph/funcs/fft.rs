//! Discrete Fourier transforms: NumPy's `np.fft` (the Array API's FFT extension), along
//! axes in any number of blocks, never gathered into one block.
//!
//! An axis in one block is one kernel call per block ([`NodeOp::Fft`]). An axis in several
//! blocks of length N = N1 N2 is transformed by the four-step algorithm, as ordinary block
//! tasks: the axis viewed as [N1, N2] (element N2 n1 + n2, a split of the axis block for
//! block), length-N1 FFTs down its columns times the twiddle exp(-2 pi i k1 n2 / N),
//! length-N2 FFTs along its rows, and frequency k1 + N1 k2 read back from [k1, k2] (a
//! transpose, then the axes merged). Each change between row blocks and column blocks is
//! two re-blockings through tiles, so that no task reads more than one block's worth:
//! blocks of about the input's size, bounded by `memory_mb`. A length with no factor
//! pair (a prime) is gathered into one block when that fits `memory_mb`, refused with
//! the sizes otherwise. Real transforms in one block are realfft's; across blocks `rfft`
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
        "`np.fft.fft` (an axis in several blocks: the four-step FFT across blocks, docs/guide.md)",
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
    let mut ns: Vec<Option<i64>> = match sizes {
        Some(sz) => sz.into_iter().map(Some).collect(),
        None => vec![None; axes.len()],
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
            if ns[last].is_none() {
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
    if one_block || m.grid()[axis] <= 1 || m.is_empty() {
        let kind = match t {
            Transform::Fft => FftKind::Forward,
            Transform::Ifft => FftKind::Inverse,
            Transform::Rfft => FftKind::Real,
            _ => FftKind::RealInverse,
        };
        let x = s.rechunk(x, whole_along(&m, axis));
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
    let err = |m: String| b.err(b.pos, format!("{}(): {m}", b.f));
    match t {
        Transform::Fft | Transform::Ifft => {
            across_blocks(s, x, axis, inverse, scale, complex).map_err(err)
        }
        Transform::Rfft => {
            let c = across_blocks(s, x, axis, false, scale, complex).map_err(err)?;
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
            let y = across_blocks(s, full, axis, true, scale, complex).map_err(err)?;
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

/// The complex FFT of `x` along `axis` (several blocks along it), in dtype `complex`:
/// the four-step algorithm, or for a length with no factor pair the axis gathered into
/// one block when that fits `memory_mb`. An error says why it cannot.
fn across_blocks(
    s: &mut Builder,
    x: NodeId,
    axis: usize,
    inverse: bool,
    scale: f64,
    complex: DType,
) -> Result<NodeId, String> {
    let m = s.meta(x).clone();
    let n = m.shape[axis];
    let limit = s.fft_block_limit(complex.size() as u64);
    let kind = if inverse {
        FftKind::Inverse
    } else {
        FftKind::Forward
    };
    let fft = |s: &mut Builder, x: NodeId, axis: usize, scale: f64, twiddle| {
        let meta = ArrayMeta {
            dtype: complex,
            ..s.meta(x).clone()
        };
        s.add(
            meta,
            NodeOp::Fft {
                x,
                axis,
                kind,
                scale,
                twiddle,
            },
        )
    };
    let (n1, n2) = factor_pair(n);
    if n2 == 1 || n1 > limit {
        // No factors (a prime), or one too large for a block: the axis in one block.
        if n > limit {
            return Err(format!(
                "an FFT of length {n} along an axis in {} blocks: {n} has no factor pair \
                 whose both sides fit a block ({}), so the axis would be gathered into one \
                 block of {n} elements, more than memory_mb = {} allows ({limit} elements); \
                 give more memory_mb, or pad to a length with small factors (n=)",
                m.grid()[axis],
                if n2 == 1 {
                    "it is prime".to_string()
                } else {
                    format!("{n1} x {n2}")
                },
                s.job.compute.memory_mb
            ));
        }
        let block = lanes_within(&m, &[axis], n, limit);
        let x = s.rechunk(x, block);
        return Ok(fft(s, x, axis, scale, None));
    }
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
    Ok(s.add(
        ArrayMeta::new(m.shape.clone(), out_block, complex),
        NodeOp::Reshape { x: e },
    ))
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
    /// blocks; a prime length is gathered into one block (it fits), then transformed.
    #[test]
    fn ragged_2d_and_prime_lengths_plan() {
        let g = job_graph(
            "[arrays]\nx = { random = \"normal\", shape = [60, 42], block = [7, 8] }\n\
             y = \"fft2(x)\"\np = { random = \"normal\", shape = [8191], block = [1000] }\n\
             q = \"fft(p)\"\n[outputs]\ny = \"out/y.npy\"\nq = \"out/q.npy\"\n",
        );
        let y = &g.nodes[g.named["y"]].meta;
        assert_eq!(
            (y.shape.clone(), y.dtype),
            (vec![60, 42], DType::Complex128)
        );
        let q = g.named["q"];
        assert!(matches!(g.nodes[q].op, NodeOp::Fft { .. }));
        assert_eq!(g.nodes[q].meta.block, vec![8191]);
    }

    #[test]
    fn lanes_within_shrinks_the_other_axes() {
        let m = ArrayMeta::new(vec![64, 1000], vec![64, 100], DType::Float64);
        assert_eq!(lanes_within(&m, &[1], 1000, 1 << 20), vec![64, 1000]);
        assert_eq!(lanes_within(&m, &[1], 1000, 16_000), vec![16, 1000]);
    }
}
