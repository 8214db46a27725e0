//! Statistics: NumPy's order statistics (`median`, `percentile`, `quantile` with every
//! `method=`, and their `nan` variants: exact, from the sorted lanes, so at any length
//! through the sample sort), `ptp`, `average` with weights, `cov`, `corrcoef`, and the
//! counts of `histogram` and `bincount` (a sum over blocks; bincount's length, the
//! largest value, is computed first in a stage of its own).

use super::*;
use nums_function::stats::{Point, quantile_dtype, quantile_point};
use nums_layout::batch::QuantileMethod;

const Q: &[&str] = &[
    "a",
    "q",
    "axis",
    "out",
    "overwrite_input",
    "method",
    "keepdims",
    "weights",
];
const MEDIAN: &[&str] = &["a", "axis", "out", "overwrite_input", "keepdims"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "median",
        MEDIAN,
        "`np.median` (exact: the sorted lanes)",
        |s, b| quantile(s, b, None, false),
    )
    .refusing(&["out"]),
    FuncDef::new("nanmedian", MEDIAN, "`np.nanmedian`", |s, b| {
        quantile(s, b, None, true)
    })
    .refusing(&["out"]),
    FuncDef::new(
        "percentile",
        Q,
        "`np.percentile` (every `method=`; exact at any length)",
        |s, b| quantile(s, b, Some(100.0), false),
    )
    .refusing(&["out", "weights"]),
    FuncDef::new("nanpercentile", Q, "`np.nanpercentile`", |s, b| {
        quantile(s, b, Some(100.0), true)
    })
    .refusing(&["out", "weights"]),
    FuncDef::new("quantile", Q, "`np.quantile` (every `method=`)", |s, b| {
        quantile(s, b, Some(1.0), false)
    })
    .refusing(&["out", "weights"]),
    FuncDef::new("nanquantile", Q, "`np.nanquantile`", |s, b| {
        quantile(s, b, Some(1.0), true)
    })
    .refusing(&["out", "weights"]),
    FuncDef::new(
        "ptp",
        &["a", "axis", "out", "keepdims"],
        "`np.ptp`",
        |s, b| {
            let x = b.array("a")?;
            if s.meta(x).dtype == DType::Bool {
                return Err(b.raising(
                    crate::refusal::PyException::TypeError,
                    b.pos,
                    "ptp(): numpy boolean subtract, the `-` operator, is not supported",
                ));
            }
            let axes = b.axes(s.meta(x).ndim())?;
            let keep = b.flag("keepdims")?;
            let hi = s.reduce(x, ReduceOp::Max, axes.clone(), keep, b.pos)?;
            let lo = s.reduce(x, ReduceOp::Min, axes, keep, b.pos)?;
            s.elementwise2(BinaryOp::Sub, Val::Arr(hi), Val::Arr(lo), b.pos)
        },
    )
    .refusing(&["out"]),
    FuncDef::new(
        "average",
        &["a", "axis", "weights", "returned", "keepdims"],
        "`np.average` (with `weights`, `returned`)",
        average,
    ),
    FuncDef::new(
        "cov",
        &[
            "m", "y", "rowvar", "bias", "ddof", "fweights", "aweights", "dtype",
        ],
        "`np.cov`",
        |s, b| {
            let c = cov(s, b)?;
            Ok(Val::Arr(s.squeeze_all(c)))
        },
    )
    .refusing(&["fweights", "aweights", "dtype"]),
    FuncDef::new(
        "corrcoef",
        &["x", "y", "rowvar", "dtype"],
        "`np.corrcoef`",
        corrcoef,
    )
    .refusing(&["dtype"]),
    FuncDef::new(
        "histogram",
        &["a", "bins", "range", "density", "weights"],
        "`np.histogram` (a number of equal bins; `range`, `density`, `weights`)",
        histogram,
    ),
    FuncDef::new(
        "bincount",
        &["x", "weights", "minlength"],
        "`np.bincount` (at most 2^24 bins)",
        bincount,
    ),
    FuncDef::new(
        "interp",
        &["x", "xp", "fp", "left", "right", "period"],
        "`np.interp` (NumPy's formula; `period` refused)",
        interp,
    )
    .refusing(&["period"]),
    FuncDef::new(
        "convolve",
        &["a", "v", "mode"],
        "`np.convolve` (the shorter operand of at most 256 elements: a sum of shifted slices)",
        convolve,
    ),
    FuncDef::new(
        "correlate",
        &["a", "v", "mode"],
        "`np.correlate` (`convolve` with `v` reversed and conjugated; \"valid\" by default)",
        correlate,
    ),
    FuncDef::new(
        "polyval",
        &["p", "x"],
        "`np.polyval` (Horner's rule, as NumPy: `y = y * x + p[i]` from zeros)",
        polyval,
    ),
    FuncDef::new(
        "polyfit",
        &["x", "y", "deg", "rcond", "full", "w", "cov"],
        "`np.polyfit` (as NumPy: `lstsq` of the weighted Vandermonde matrix, its columns scaled to unit norm; `full=True` gives its residuals, rank, singular values and rcond)",
        polyfit,
    )
    .refusing(&["cov"]),
    FuncDef::new(
        "vander",
        &["x", "N", "increasing"],
        "`np.vander` (powers by repeated products, as NumPy; at most 256 columns)",
        vander,
    ),
];

/// median, percentile and quantile (`scale`: 100 for percentiles, None for the median)
/// and their nan variants.
fn quantile(s: &mut Builder, b: &Bound, scale: Option<f64>, nan: bool) -> Result<Val, EvalError> {
    let mut x = b.array("a")?;
    let m = s.meta(x).clone();
    let median = scale.is_none();
    // NumPy's median of complex numbers sorts them (real part first) and averages the
    // middle two; its quantiles refuse them.
    if m.dtype.is_complex() && !median {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            b.pos,
            format!("{}(): a must be an array of real numbers", b.f),
        ));
    }
    let mut method = QuantileMethod::Median;
    // The quantiles (flat), the shape of q (its axes come first in the result; empty for
    // one number), and whether q is all ints.
    let (qs, q_shape, ints) = match scale {
        None => (vec![0.5], vec![], false),
        Some(scale) => {
            let (v, p) = b.need("q")?;
            let bad = || {
                b.err(
                    *p,
                    format!(
                        "{}(): q must be a number or a (nested) list of numbers",
                        b.f
                    ),
                )
            };
            let (items, q_shape) = nested_numbers(v).ok_or_else(bad)?;
            let mut qs = Vec::new();
            let mut ints = true;
            for q in &items {
                ints &= q.kind() != ScalarKind::Float;
                let f = q.as_f64() / scale;
                if !(0.0..=1.0).contains(&f) {
                    return Err(b.err(
                        *p,
                        if scale == 100.0 {
                            "Percentiles must be in the range [0, 100]"
                        } else {
                            "Quantiles must be in the range [0, 1]"
                        },
                    ));
                }
                qs.push(f);
            }
            method = match b.get("method") {
                None => QuantileMethod::Linear,
                Some((Val::Str(name), p)) => QuantileMethod::parse(name).ok_or_else(|| {
                    b.err(
                        *p,
                        format!(
                            "{name:?} is not a valid method. Use one of: {}",
                            QuantileMethod::NAMES.join(", ")
                        ),
                    )
                })?,
                Some((_, p)) => return Err(b.err(*p, format!("{}(): method is a string", b.f))),
            };
            (qs, q_shape, ints && scale == 1.0)
        }
    };
    let listed = !q_shape.is_empty();
    // NumPy takes the element (keeping the dtype) for integral linear indices.
    if method == QuantileMethod::Linear && ints {
        method = QuantileMethod::Lower;
    }
    if qs.is_empty() {
        return Err(b.err(b.pos, format!("{}(): q is empty", b.f)));
    }
    if m.dtype == DType::Bool {
        if median {
            // NumPy's median of bools is the mean of the middle ones: float64.
            x = s.cast(x, DType::Float64);
        } else if !method.picks() {
            return Err(b.raising(
                crate::refusal::PyException::TypeError,
                b.pos,
                format!(
                    "{}(): numpy boolean subtract, the `-` operator, is not supported",
                    b.f
                ),
            ));
        }
    }
    let keepdims = b.flag("keepdims")?;
    // The reduced axes (all for None), and the others, whose shape the result keeps.
    let axes = match b.get("axis") {
        None => (0..m.ndim()).collect(),
        Some((v, p)) => axes_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let others: Vec<usize> = (0..m.ndim()).filter(|d| !axes.contains(d)).collect();
    let lane: u64 = axes.iter().map(|&a| m.shape[a]).product();
    let rest: Vec<u64> = if keepdims {
        let mut kept = m.shape.clone();
        axes.iter().for_each(|&a| kept[a] = 1);
        kept
    } else {
        others.iter().map(|&d| m.shape[d]).collect()
    };
    if lane == 0 || (nan && m.is_empty()) {
        if !nan && !median {
            return Err(b.raising(
                crate::refusal::PyException::IndexError,
                b.pos,
                format!(
                    "{}(): index -1 is out of bounds for axis 0 with size 0 (an empty axis has no quantiles)",
                    b.f
                ),
            ));
        }
        // NumPy: the median of nothing is NaN (with a RuntimeWarning); the nan variants of
        // an empty array are its nanmean, whatever q is.
        let dtype = m.dtype.to_float();
        return Ok(Val::Arr(s.empty(rest, dtype, Scalar::Float(f64::NAN))));
    }
    // One lane per kept position: a single axis as it lies, several moved last and merged.
    let (xf, axis) = match axes[..] {
        [a] => (x, a),
        _ => {
            let mut perm = others.clone();
            perm.extend(&axes);
            let t = if perm.iter().enumerate().all(|(i, &d)| i == d) {
                x
            } else {
                s.transpose(x, perm)
            };
            let mut shape: Vec<u64> = others.iter().map(|&d| m.shape[d]).collect();
            shape.push(lane);
            (s.reshape(t, &shape), others.len())
        }
    };
    // A list of float quantiles is a float64 array to NumPy, which an interpolating
    // method's result is promoted with (float32 data gives float64).
    let out_dtype = match quantile_dtype(s.meta(xf).dtype, method) {
        d if listed && !method.picks() => d.promote(DType::Float64),
        d => d,
    };
    let r = s.quantiles_along(xf, axis, &qs, method, nan, out_dtype, b.pos)?;
    // NumPy: q's axes first, then the other axes (the reduced ones kept as 1 by keepdims).
    if listed {
        let nd = s.meta(r).ndim();
        let mut perm = vec![axis];
        perm.extend((0..nd).filter(|&d| d != axis));
        let t = s.transpose(r, perm);
        let shape: Vec<u64> = q_shape.iter().chain(&rest).copied().collect();
        Ok(Val::Arr(s.reshape(t, &shape)))
    } else {
        Ok(Val::Arr(s.reshape(r, &rest)))
    }
}

/// The numbers of a number or a nested list of them (rows of equal length), flat, with
/// the list's shape (empty for a number).
fn nested_numbers(v: &Val) -> Option<(Vec<Scalar>, Vec<u64>)> {
    match v {
        Val::Num(x) | Val::NpScalar(x, _) => Some((vec![*x], vec![])),
        Val::Tuple(items) => {
            let mut flat = Vec::new();
            let mut inner: Option<Vec<u64>> = None;
            for i in items {
                let (f, sh) = nested_numbers(i)?;
                if inner.get_or_insert_with(|| sh.clone()) != &sh {
                    return None;
                }
                flat.extend(f);
            }
            let mut shape = vec![items.len() as u64];
            shape.extend(inner.unwrap_or_default());
            Some((flat, shape))
        }
        _ => None,
    }
}

fn average(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let m = s.meta(a).clone();
    let keep = b.flag("keepdims")?;
    let axes = b.axes(m.ndim())?;
    let Some((w, wp)) = b.get("weights").cloned() else {
        let avg = s.mean(a, axes.clone(), keep, false, b.pos)?;
        if !b.flag("returned")? {
            return Ok(Val::Arr(avg));
        }
        let n: u64 = axes.iter().map(|&d| m.shape[d]).product();
        let am = s.meta(avg).clone();
        let scl = s.add(
            am,
            NodeOp::Fill {
                value: Scalar::Int(n as i64),
            },
        );
        return Ok(Val::Tuple(vec![Val::Arr(avg), Val::Arr(scl)]));
    };
    let mut w = s.node(w, wp)?;
    let wm = s.meta(w).clone();
    let rdt = if m.dtype.is_exact() {
        m.dtype.promote(wm.dtype).promote(DType::Float64)
    } else {
        m.dtype.promote(wm.dtype)
    };
    if wm.shape != m.shape {
        let Some((v, p)) = b.get("axis") else {
            return Err(b.err(
                wp,
                "Axis must be specified when shapes of a and weights differ.",
            ));
        };
        let [ax] = axes_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?[..] else {
            return Err(b.err(*p, "average(): one axis with 1-D weights"));
        };
        if wm.ndim() != 1 {
            return Err(b.err(
                wp,
                "1D weights expected when shapes of a and weights differ.",
            ));
        }
        if wm.shape[0] != m.shape[ax] {
            return Err(b.err(
                wp,
                "Shape of weights must be consistent with shape of a along specified axis.",
            ));
        }
        let mut shape = vec![1; m.ndim()];
        shape[ax] = m.shape[ax];
        w = s.reshape(w, &shape);
    }
    let (ac, wc) = (s.cast(a, rdt), s.cast(w, rdt));
    let prod = s.elementwise2(BinaryOp::Mul, Val::Arr(ac), Val::Arr(wc), b.pos)?;
    let prod = s.node(prod, b.pos)?;
    let num = s.reduce(prod, ReduceOp::Sum, axes.clone(), keep, b.pos)?;
    // Weights broadcast to a's shape before they are summed (NumPy's wgt).
    let zeros = s.add(
        ArrayMeta {
            dtype: rdt,
            ..m.clone()
        },
        NodeOp::Fill {
            value: Scalar::Int(0),
        },
    );
    let wb = s.elementwise2(BinaryOp::Add, Val::Arr(wc), Val::Arr(zeros), b.pos)?;
    let wb = s.node(wb, b.pos)?;
    let scl = s.reduce(wb, ReduceOp::Sum, axes, keep, b.pos)?;
    let avg = s.elementwise2(BinaryOp::Div, Val::Arr(num), Val::Arr(scl), b.pos)?;
    // NumPy raises where the weights add up to zero: checked as the values are made.
    let zero = s.elementwise2(BinaryOp::Eq, Val::Arr(scl), Val::Num(Scalar::Int(0)), b.pos)?;
    let zero = s.node(zero, b.pos)?;
    let zero = s.cast(zero, DType::Int64);
    let checked = s.add(
        s.meta(zero).clone(),
        NodeOp::CheckBelow {
            x: zero,
            limit: 1,
            error: "ZeroDivisionError: Weights sum to zero, can't be normalized".into(),
        },
    );
    let avg = s.where_(Val::Arr(checked), avg.clone(), avg, b.pos)?;
    if b.flag("returned")? {
        let scl = s.where_(Val::Arr(checked), Val::Arr(scl), Val::Arr(scl), b.pos)?;
        Ok(Val::Tuple(vec![avg, scl]))
    } else {
        Ok(avg)
    }
}

/// NumPy's cov before its squeeze: observations along axis 1 (rowvar), rows of `m` then
/// of `y`, in float64 (complex128 for complex).
fn cov(s: &mut Builder, b: &Bound) -> Result<NodeId, EvalError> {
    let name = if b.get("m").is_some() { "m" } else { "x" };
    let rowvar = match b.num("rowvar")? {
        None => true,
        Some(v) => v.as_bool(),
    };
    // NumPy turns `m` when it is 2-D (a 1x4 `m` is four variables of one observation)
    // and `y` when it has more than one row.
    let as_rows = |s: &mut Builder, x: NodeId, p: usize, is_y: bool| {
        let m = s.meta(x).clone();
        let x2 = match m.ndim() {
            0 => s.reshape(x, &[1, 1]),
            1 => s.reshape(x, &[1, m.shape[0]]),
            2 => x,
            _ => return Err(b.err(p, "m has more than 2 dimensions")),
        };
        let turn = if is_y {
            s.meta(x2).shape[0] != 1
        } else {
            m.ndim() == 2
        };
        Ok(if !rowvar && turn {
            s.transpose(x2, vec![1, 0])
        } else {
            x2
        })
    };
    let x = b.array(name)?;
    let mut xs = vec![as_rows(s, x, b.pos, false)?];
    if let Some((yv, yp)) = b.get("y").cloned() {
        let y = s.node(yv, yp)?;
        xs.push(as_rows(s, y, yp, true)?);
    }
    let dtype = xs
        .iter()
        .map(|&x| s.meta(x).dtype)
        .fold(DType::Float64, DType::promote);
    let xs: Vec<NodeId> = xs.into_iter().map(|x| s.cast(x, dtype)).collect();
    let x = if xs.len() == 1 {
        xs[0]
    } else {
        s.concat(xs, 0, b.pos)?
    };
    let ddof = match b.num("ddof")? {
        Some(d) => d.as_f64(),
        None if b.flag("bias")? => 0.0,
        None => 1.0,
    };
    let n = s.meta(x).shape[1] as f64;
    let fact = (n - ddof).max(0.0);
    // Observations along axis 0 as given (`rowvar=False` on a column-per-variable array,
    // the usual case): centred and multiplied as they are blocked, row blocks, never
    // transposed (a transposed copy of every block cost more than the products).
    let (x, obs, var) = match s.g.nodes[x].op {
        NodeOp::Transpose { x: src, .. } => (src, 0, 1),
        _ => (x, 1, 0),
    };
    let avg = s.mean(x, vec![obs], true, false, b.pos)?;
    let xc = s.elementwise2(BinaryOp::Sub, Val::Arr(x), Val::Arr(avg), b.pos)?;
    let xc = s.node(xc, b.pos)?;
    let mut xr = Val::Arr(xc);
    if dtype.is_complex() {
        xr = s.unary(UnaryOp::Conj, xr, b.pos)?;
    }
    let xr = s.node(xr, b.pos)?;
    // c[i, k] = sum over observations j of xc[i, j] * conj(xc[k, j]), as NumPy's
    // `dot(X, X.T.conj())`.
    let subscripts = if var == 0 { "ij,kj->ik" } else { "ji,jk->ik" };
    let c = s.einsum(subscripts, vec![xc, xr], b.pos)?;
    let c = s.elementwise2(BinaryOp::Div, c, Val::Num(Scalar::Float(fact)), b.pos)?;
    s.node(c, b.pos)
}

fn corrcoef(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let c = cov(s, b)?;
    let k = s.meta(c).shape[0];
    let dtype = s.meta(c).dtype;
    if k == 1 {
        // One variable: NumPy's `c / c` (NaN for a NaN, zero or infinite variance).
        let r = s.elementwise2(BinaryOp::Div, Val::Arr(c), Val::Arr(c), b.pos)?;
        let r = s.node(r, b.pos)?;
        return Ok(Val::Arr(s.squeeze_all(r)));
    }
    // The variances, read off the diagonal (a NaN elsewhere stays in its own row and
    // column, as NumPy's `diag` keeps it).
    let d = s.einsum("ii->i", vec![c], b.pos)?;
    let d = s.unary(UnaryOp::Real, d, b.pos)?;
    let sd = s.unary(UnaryOp::Sqrt, d, b.pos)?;
    let sd = s.node(sd, b.pos)?;
    let col = s.reshape(sd, &[k, 1]);
    let row = s.reshape(sd, &[1, k]);
    let r = s.elementwise2(BinaryOp::Div, Val::Arr(c), Val::Arr(col), b.pos)?;
    let mut r = s.elementwise2(BinaryOp::Div, r, Val::Arr(row), b.pos)?;
    if !dtype.is_complex() {
        // NumPy clips rounding past +-1.
        let lo = s.elementwise2(BinaryOp::Maximum, r, Val::Num(Scalar::Float(-1.0)), b.pos)?;
        r = s.elementwise2(BinaryOp::Minimum, lo, Val::Num(Scalar::Float(1.0)), b.pos)?;
    }
    let r = s.node(r, b.pos)?;
    Ok(Val::Arr(s.squeeze_all(r)))
}

fn histogram(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let n = s.meta(a).len();
    let flat = s.reshape(a, &[n]);
    let bins = match b.get("bins") {
        None => 10,
        Some((Val::Num(v), p)) if v.kind() != ScalarKind::Float => {
            if v.as_i64() < 1 {
                return Err(b.err(*p, "`bins` must be positive, when an integer"));
            }
            v.as_i64() as u64
        }
        Some((_, p)) => {
            return Err(b.err(
                *p,
                "histogram(): bins is a number of equal bins (edges or a rule's name are not supported)",
            ));
        }
    };
    if bins > MAX_SELECTION {
        return Err(b.err(
            b.pos,
            format!("histogram(): more than {MAX_SELECTION} bins"),
        ));
    }
    let f64_node = |s: &mut Builder, v: f64| s.scalar_node(Scalar::Float(v), DType::Float64);
    let (lo, hi) = match b.get("range") {
        Some((Val::Tuple(r), p)) => {
            let [Val::Num(l), Val::Num(h)] = r.as_slice() else {
                return Err(b.err(*p, "histogram(): range is (min, max)"));
            };
            let (mut l, mut h) = (l.as_f64(), h.as_f64());
            if l > h {
                return Err(b.err(*p, "max must be larger than min in range parameter."));
            }
            if !(l.is_finite() && h.is_finite()) {
                return Err(b.err(*p, format!("supplied range of [{l}, {h}] is not finite")));
            }
            if l == h {
                (l, h) = (l - 0.5, h + 0.5);
            }
            (f64_node(s, l), f64_node(s, h))
        }
        Some((_, p)) => return Err(b.err(*p, "histogram(): range is (min, max)")),
        None if n == 0 => (f64_node(s, 0.0), f64_node(s, 1.0)),
        None => {
            // The data's own minimum and maximum: NumPy scalars of its dtype, so float32
            // data gets edges made in float32 (`linspace` in the edges' dtype).
            let lo = s.reduce(flat, ReduceOp::Min, vec![0], false, b.pos)?;
            let hi = s.reduce(flat, ReduceOp::Max, vec![0], false, b.pos)?;
            let c = if s.meta(a).dtype == DType::Float32 {
                DType::Float32
            } else {
                DType::Float64
            };
            let (lo, hi) = (s.cast(lo, c), s.cast(hi, c));
            // NumPy refuses data holding NaN or an infinity (without `range`): checked as
            // the minimum and maximum are made, before edges or counts use them.
            let fl = s.unary(UnaryOp::IsFinite, Val::Arr(lo), b.pos)?;
            let fh = s.unary(UnaryOp::IsFinite, Val::Arr(hi), b.pos)?;
            let ok = s.elementwise2(BinaryOp::And, fl, fh, b.pos)?;
            let bad = s.unary(UnaryOp::Not, ok, b.pos)?;
            let bad = s.node(bad, b.pos)?;
            let bad = s.cast(bad, DType::Int64);
            let checked = s.add(
                s.meta(bad).clone(),
                NodeOp::CheckBelow {
                    x: bad,
                    limit: 1,
                    error: "ValueError: autodetected range of the data is not finite (it holds NaN or an infinity)".into(),
                },
            );
            let lo = s.where_(Val::Arr(checked), Val::Arr(lo), Val::Arr(lo), b.pos)?;
            let lo = s.node(lo, b.pos)?;
            let same = s.elementwise2(BinaryOp::Eq, Val::Arr(lo), Val::Arr(hi), b.pos)?;
            let l2 = s.elementwise2(
                BinaryOp::Sub,
                Val::Arr(lo),
                Val::Num(Scalar::Float(0.5)),
                b.pos,
            )?;
            let h2 = s.elementwise2(
                BinaryOp::Add,
                Val::Arr(hi),
                Val::Num(Scalar::Float(0.5)),
                b.pos,
            )?;
            let l = s.where_(same.clone(), l2, Val::Arr(lo), b.pos)?;
            let h = s.where_(same, h2, Val::Arr(hi), b.pos)?;
            (s.node(l, b.pos)?, s.node(h, b.pos)?)
        }
    };
    // Weights are summed in float64 per bin and the sums cast to the weights' dtype, as
    // NumPy's bincount-then-astype does (int8 weights wrap; complex ones are two sums).
    let counts = |s: &mut Builder, weights: Option<NodeId>| {
        let dtype = if weights.is_some() {
            DType::Float64
        } else {
            DType::Int64
        };
        s.add(
            ArrayMeta::new(vec![bins], vec![bins], dtype),
            NodeOp::Histogram {
                x: flat,
                lo,
                hi,
                weights,
                bins,
            },
        )
    };
    let hist = match b.get("weights").cloned() {
        None => counts(s, None),
        Some((w, p)) => {
            let w = s.node(w, p)?;
            if s.meta(w).shape != s.meta(a).shape {
                return Err(b.err(p, "weights should have the same shape as a."));
            }
            let wdtype = s.meta(w).dtype;
            let wf = s.reshape(w, &[n]);
            let block = s.meta(flat).block.clone();
            let sum_of = |s: &mut Builder, part: Option<UnaryOp>| {
                let v = match part {
                    Some(op) => s.unary(op, Val::Arr(wf), b.pos)?,
                    None => Val::Arr(wf),
                };
                let v = s.node(v, b.pos)?;
                let v = s.cast(v, DType::Float64);
                let v = s.rechunk(v, block.clone());
                Ok::<_, EvalError>(counts(s, Some(v)))
            };
            if wdtype.is_complex() {
                let re = sum_of(s, Some(UnaryOp::Real))?;
                let im = sum_of(s, Some(UnaryOp::Imag))?;
                let (re, im) = (s.cast(re, wdtype), s.cast(im, wdtype));
                let i = Val::Num(Scalar::Complex(0.0, 1.0));
                let im = s.elementwise2(BinaryOp::Mul, Val::Arr(im), i, b.pos)?;
                let h = s.elementwise2(BinaryOp::Add, Val::Arr(re), im, b.pos)?;
                s.node(h, b.pos)?
            } else {
                let h = sum_of(s, None)?;
                s.cast(h, wdtype)
            }
        }
    };
    // NumPy's linspace(lo, hi, bins + 1) in lo's dtype: i * step + lo, the last exactly
    // hi; then in the edges' dtype (float32 for float32 data).
    let iota = s.add(
        ArrayMeta::new(vec![bins + 1], vec![bins + 1], s.meta(lo).dtype),
        NodeOp::Iota {
            axis: 0,
            start: Scalar::Float(0.0),
            step: Scalar::Float(1.0),
            last: None,
        },
    );
    let span = s.elementwise2(BinaryOp::Sub, Val::Arr(hi), Val::Arr(lo), b.pos)?;
    let step = s.elementwise2(
        BinaryOp::Div,
        span,
        Val::Num(Scalar::Float(bins as f64)),
        b.pos,
    )?;
    let e = s.elementwise2(BinaryOp::Mul, Val::Arr(iota), step, b.pos)?;
    let e = s.elementwise2(BinaryOp::Add, e, Val::Arr(lo), b.pos)?;
    let end = s.elementwise2(
        BinaryOp::Eq,
        Val::Arr(iota),
        Val::Num(Scalar::Float(bins as f64)),
        b.pos,
    )?;
    let edges = s.where_(end, Val::Arr(hi), e, b.pos)?;
    let edges = s.node(edges, b.pos)?;
    let edges = s.cast(
        edges,
        if s.meta(a).dtype == DType::Float32 {
            DType::Float32
        } else {
            DType::Float64
        },
    );
    let hist = if b.flag("density")? {
        let widths_hi = s.slice(edges, &[(0, 1, bins)]);
        let widths_lo = s.slice(edges, &[(0, 0, bins)]);
        let db = s.elementwise2(
            BinaryOp::Sub,
            Val::Arr(widths_hi),
            Val::Arr(widths_lo),
            b.pos,
        )?;
        let total = s.reduce(hist, ReduceOp::Sum, vec![0], false, b.pos)?;
        let h = s.elementwise2(BinaryOp::Div, Val::Arr(hist), db, b.pos)?;
        let h = s.elementwise2(BinaryOp::Div, h, Val::Arr(total), b.pos)?;
        s.node(h, b.pos)?
    } else {
        hist
    };
    Ok(Val::Tuple(vec![Val::Arr(hist), Val::Arr(edges)]))
}

fn bincount(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("x")?;
    let m = s.meta(x).clone();
    if m.ndim() != 1 {
        return Err(b.err(
            b.pos,
            "bincount(): x must be 1-D (object too deep for desired array)",
        ));
    }
    if !m.dtype.is_exact() {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            b.pos,
            format!(
                "Cannot cast array data from dtype('{}') to dtype('int64') according to the rule 'safe'",
                m.dtype
            ),
        ));
    }
    // NumPy casts uint64 to int64 (2^63 and above wrap to negatives, which it refuses).
    let x = if m.dtype == DType::UInt64 {
        s.cast(x, DType::Int64)
    } else {
        x
    };
    let minlength = b.int("minlength")?.unwrap_or(0);
    if minlength < 0 {
        return Err(b.err(b.pos, "'minlength' must not be negative"));
    }
    let length = if m.is_empty() {
        minlength as u64
    } else {
        // The largest value decides the length: computed first, in a stage of its own.
        let top = s.reduce(x, ReduceOp::Max, vec![0], false, b.pos)?;
        let top = s.cast(top, DType::Int64);
        let largest = match s.values.get(&top) {
            Some(v) => v.first().as_i64(),
            None => {
                s.need_values.get_or_insert(top);
                0
            }
        };
        (largest.saturating_add(1)).max(minlength).max(0) as u64
    };
    if length > MAX_SELECTION {
        return Err(b.err(
            b.pos,
            format!("bincount(): {length} bins, more than the {MAX_SELECTION} a bincount may have"),
        ));
    }
    let weights = match b.get("weights").cloned() {
        None => None,
        Some((w, p)) => {
            let w = s.node(w, p)?;
            if s.meta(w).shape != m.shape {
                return Err(b.err(p, "The weights and list don't have the same length."));
            }
            if s.meta(w).dtype.is_complex() {
                let message = format!(
                    "Cannot cast array data from dtype('{}') to dtype('float64') according to the rule 'safe'",
                    s.meta(w).dtype
                );
                // NumPy looks for negatives in x first: where x may hold them, both are
                // checked as the data is read, in NumPy's order.
                let xd = s.meta(x).dtype;
                if m.is_empty() || !xd.is_int() || xd.is_unsigned() {
                    return Err(b.raising(crate::refusal::PyException::TypeError, p, message));
                }
                let ok = no_negatives(s, x, b)?;
                let fail = s.cast(ok, DType::Int64);
                let fail = s.elementwise2(BinaryOp::Add, Val::Arr(fail), Val::Num(Scalar::Int(1)), b.pos)?;
                let fail = s.node(fail, b.pos)?;
                let refused = s.add(
                    s.meta(fail).clone(),
                    NodeOp::CheckBelow {
                        x: fail,
                        limit: 1,
                        error: format!("TypeError: {message}"),
                    },
                );
                let zeros = s.empty(vec![length], DType::Float64, Scalar::Float(0.0));
                return s.where_(Val::Arr(refused), Val::Arr(zeros), Val::Arr(zeros), b.pos);
            }
            let w = s.cast(w, DType::Float64);
            Some(s.rechunk(w, m.block.clone()))
        }
    }
    // NumPy counts an empty x without its weights: int64 zeros.
    .filter(|_| !m.is_empty());
    let counts = s.add(
        ArrayMeta::new(
            vec![length],
            vec![length.max(1)],
            if weights.is_some() {
                DType::Float64
            } else {
                DType::Int64
            },
        ),
        NodeOp::Bincount { x, weights },
    );
    let xd = s.meta(x).dtype;
    if m.is_empty() || !xd.is_int() || xd.is_unsigned() {
        return Ok(Val::Arr(counts));
    }
    let checked = no_negatives(s, x, b)?;
    s.where_(Val::Arr(checked), Val::Arr(counts), Val::Arr(counts), b.pos)
}

/// A check node (0, as an int64 scalar) that fails the run with NumPy's ValueError when
/// `x` holds a negative value, however many (all negative: no bins at all).
fn no_negatives(s: &mut Builder, x: NodeId, b: &Bound) -> Result<NodeId, EvalError> {
    let neg = s.reduce(x, ReduceOp::Min, vec![0], false, b.pos)?;
    let neg = s.elementwise2(BinaryOp::Lt, Val::Arr(neg), Val::Num(Scalar::Int(0)), b.pos)?;
    let neg = s.node(neg, b.pos)?;
    let neg = s.cast(neg, DType::Int64);
    Ok(s.add(
        s.meta(neg).clone(),
        NodeOp::CheckBelow {
            x: neg,
            limit: 1,
            error: "ValueError: 'list' argument must have no negative elements".into(),
        },
    ))
}

impl<'a> Builder<'a> {
    /// `x` without its axes of length 1 (NumPy's squeeze()).
    fn squeeze_all(&mut self, x: NodeId) -> NodeId {
        let shape: Vec<u64> = self
            .meta(x)
            .shape
            .iter()
            .copied()
            .filter(|&l| l != 1)
            .collect();
        self.reshape(x, &shape)
    }

    /// The quantiles `qs` of the lanes of `x` along `axis`, in `dtype`: x's shape with
    /// `qs.len()` along `axis`. From lanes sorted whole in one block each, or (lanes past
    /// one invocation) from the order statistics of each lane's sample sort.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn quantiles_along(
        &mut self,
        x: NodeId,
        axis: usize,
        qs: &[f64],
        method: QuantileMethod,
        nan: bool,
        dtype: DType,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let k = qs.len() as u64;
        let lanes = match self.sorted_lanes(x, axis, false, false, pos)? {
            super::sorting::Sorted::Whole(sorted) => {
                // The order statistics are selected from the unsorted lanes (NumPy's
                // partition: linear, not a sort's n log n); complex lanes are sorted.
                let (sorted, select) = match &self.g.nodes[sorted].op {
                    NodeOp::Sort { x: lanes, .. } if !self.meta(x).dtype.is_complex() => {
                        (*lanes, true)
                    }
                    _ => (sorted, false),
                };
                let sm = self.meta(sorted).clone();
                let mut shape = sm.shape.clone();
                shape[axis] = k;
                let mut block = sm.block.clone();
                block[axis] = k.max(1);
                return Ok(self.add(
                    ArrayMeta::new(shape, block, dtype),
                    NodeOp::Quantile {
                        x: sorted,
                        axis,
                        qs: qs.to_vec(),
                        method,
                        nan,
                        select,
                    },
                ));
            }
            super::sorting::Sorted::Lanes(lanes) => lanes,
        };
        // Sample-sorted lanes: the order statistics are slices of each sorted lane.
        let xm = self.meta(x).clone();
        let n = xm.shape[axis];
        let valid: Vec<u64> = if nan {
            // How many of each lane are not NaN (they sort last): computed first, in a
            // stage (one for all lanes).
            let isnan = self.unary(UnaryOp::IsNan, Val::Arr(x), pos)?;
            let ok = self.unary(UnaryOp::Not, isnan, pos)?;
            let ok = self.node(ok, pos)?;
            let cnt = self.reduce(ok, ReduceOp::Sum, vec![axis], false, pos)?;
            match self.values.get(&cnt) {
                Some(v) => v.to_i64().iter().map(|&c| c as u64).collect(),
                None => {
                    self.need_values.get_or_insert(cnt);
                    vec![n; lanes.len()]
                }
            }
        } else {
            vec![n; lanes.len()]
        };
        let mut out = Vec::with_capacity(lanes.len());
        for (sorted, valid) in lanes.into_iter().zip(valid) {
            out.push(self.lane_quantiles(sorted, valid, qs, method, nan, dtype, pos)?);
        }
        let mut shape = xm.shape.clone();
        shape[axis] = k;
        self.stack_lanes(out, &shape, axis, pos)
    }

    /// The quantiles `qs` of the sorted 1-D `sorted`, of which the first `valid` are
    /// numbers (the rest NaN), in `dtype`: its order statistics' slices.
    #[allow(clippy::too_many_arguments)]
    fn lane_quantiles(
        &mut self,
        sorted: NodeId,
        valid: u64,
        qs: &[f64],
        method: QuantileMethod,
        nan: bool,
        dtype: DType,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let sm = self.meta(sorted).clone();
        let n = sm.shape[0];
        let at = |s: &mut Self, i: usize| s.slice(sorted, &[(0, i as u64, 1)]);
        let last = at(self, n as usize - 1);
        let mut parts = Vec::new();
        for &q in qs {
            if valid == 0 {
                parts.push(self.add(
                    ArrayMeta::new(vec![1], vec![1], dtype),
                    NodeOp::Fill {
                        value: Scalar::Float(f64::NAN),
                    },
                ));
                continue;
            }
            let v = match quantile_point(valid as usize, q, method) {
                Point::At(i) => Val::Arr(at(self, i)),
                Point::Lerp(i, j, t) => {
                    let (a, b) = (Val::Arr(at(self, i)), Val::Arr(at(self, j)));
                    let d = self.elementwise2(BinaryOp::Sub, b.clone(), a.clone(), pos)?;
                    if t >= 0.5 {
                        let w = self.elementwise2(
                            BinaryOp::Mul,
                            d,
                            Val::Num(Scalar::Float(1.0 - t)),
                            pos,
                        )?;
                        self.elementwise2(BinaryOp::Sub, b, w, pos)?
                    } else {
                        let w =
                            self.elementwise2(BinaryOp::Mul, d, Val::Num(Scalar::Float(t)), pos)?;
                        self.elementwise2(BinaryOp::Add, a, w, pos)?
                    }
                }
                Point::Mean(i, j) => {
                    let (a, b) = (at(self, i), at(self, j));
                    let a = self.cast(a, DType::Float64);
                    let b = self.cast(b, DType::Float64);
                    let sum = self.elementwise2(BinaryOp::Add, Val::Arr(a), Val::Arr(b), pos)?;
                    self.elementwise2(BinaryOp::Div, sum, Val::Num(Scalar::Float(2.0)), pos)?
                }
            };
            let mut v = self.node(v, pos)?;
            v = self.cast(v, dtype);
            if !nan && !sm.dtype.is_exact() {
                // A NaN anywhere (it sorts last) makes the quantile NaN.
                let isnan = self.unary(UnaryOp::IsNan, Val::Arr(last), pos)?;
                let w = self.where_(isnan, Val::Num(Scalar::Float(f64::NAN)), Val::Arr(v), pos)?;
                v = self.node(w, pos)?;
                v = self.cast(v, dtype);
            }
            parts.push(v);
        }
        self.concat(parts, 0, pos)
    }
}

/// A 1-D real array argument (a list is one).
fn vector(s: &mut Builder, b: &Bound, name: &str) -> Result<NodeId, EvalError> {
    let (v, p) = b.need(name)?.clone();
    let id = match s.list_operand(v, p)? {
        Val::Arr(id) => id,
        _ => return Err(b.err(p, format!("{}(): {name} must be a 1-D array", b.f))),
    };
    if s.meta(id).ndim() != 1 {
        return Err(b.err(p, format!("{}(): {name} must be 1-D", b.f)));
    }
    Ok(id)
}

/// NumPy's interp, by its formula (`arr_interp`): for `xp[j] <= x < xp[j+1]`, `slope *
/// (x - xp[j]) + fp[j]` with `slope = (fp[j+1] - fp[j]) / (xp[j+1] - xp[j])` (from the
/// right end where that is NaN; `fp[j]` where both are and the values are equal);
/// `fp[-1]` at `xp[-1]`, `left` and `right` (the end values) outside.
fn interp(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    let xp = vector(s, b, "xp")?;
    let fp = vector(s, b, "fp")?;
    let n = s.meta(xp).shape[0];
    if s.meta(fp).shape[0] != n {
        return Err(b.err(b.pos, "interp(): fp and xp are not of the same length."));
    }
    if n == 0 {
        return Err(b.err(b.pos, "interp(): array of sample points is empty"));
    }
    if s.meta(fp).dtype.is_complex() || s.meta(xp).dtype.is_complex() {
        return Err(b.err(b.pos, "interp(): complex xp or fp are not supported"));
    }
    let f64_of = |s: &mut Builder, v: Val| -> Result<Val, EvalError> {
        let id = s.node(v, b.pos)?;
        Ok(Val::Arr(s.cast(id, DType::Float64)))
    };
    let x = f64_of(s, x)?;
    let (xp, fp) = (f64_of(s, Val::Arr(xp))?, f64_of(s, Val::Arr(fp))?);
    let int = |i: i64| Val::Num(Scalar::Int(i));
    let at = |s: &mut Builder, a: &Val, i: Val| {
        s.apply("take", &[("a", a.clone()), ("indices", i)], b.pos)
    };
    let (x0, f0) = (at(s, &xp, int(0))?, at(s, &fp, int(0))?);
    let (xl, fl) = (at(s, &xp, int(-1))?, at(s, &fp, int(-1))?);
    let end = |name: &str, default: &Val| {
        b.get(name)
            .map_or_else(|| default.clone(), |(v, _)| v.clone())
    };
    let (left, right) = (end("left", &f0), end("right", &fl));
    let mut r = if n == 1 {
        f0.clone()
    } else {
        // j: the last sample at or below x, within 0..n-2.
        let j = s.apply(
            "searchsorted",
            &[
                ("a", xp.clone()),
                ("v", x.clone()),
                ("side", Val::Str("right".into())),
            ],
            b.pos,
        )?;
        let j = s.elementwise2(BinaryOp::Sub, j, int(1), b.pos)?;
        let j = s.elementwise2(BinaryOp::Maximum, j, int(0), b.pos)?;
        let j = s.elementwise2(BinaryOp::Minimum, j, int(n as i64 - 2), b.pos)?;
        let j1 = s.elementwise2(BinaryOp::Add, j.clone(), int(1), b.pos)?;
        let (xa, xb) = (at(s, &xp, j.clone())?, at(s, &xp, j1.clone())?);
        let (ya, yb) = (at(s, &fp, j)?, at(s, &fp, j1)?);
        let dy = s.elementwise2(BinaryOp::Sub, yb.clone(), ya.clone(), b.pos)?;
        let dx = s.elementwise2(BinaryOp::Sub, xb.clone(), xa.clone(), b.pos)?;
        let slope = s.elementwise2(BinaryOp::Div, dy, dx, b.pos)?;
        let line = |s: &mut Builder, x0: Val, y0: Val| -> Result<Val, EvalError> {
            let d = s.elementwise2(BinaryOp::Sub, x.clone(), x0, b.pos)?;
            let v = s.elementwise2(BinaryOp::Mul, slope.clone(), d, b.pos)?;
            s.elementwise2(BinaryOp::Add, v, y0, b.pos)
        };
        let from_left = line(s, xa, ya.clone())?;
        let from_right = line(s, xb, yb.clone())?;
        let nan = s.unary(UnaryOp::IsNan, from_left.clone(), b.pos)?;
        let r = s.where_(nan, from_right, from_left, b.pos)?;
        let nan = s.unary(UnaryOp::IsNan, r.clone(), b.pos)?;
        let flat = s.elementwise2(BinaryOp::Eq, ya.clone(), yb, b.pos)?;
        let both = s.elementwise2(BinaryOp::And, nan, flat, b.pos)?;
        s.where_(both, ya, r, b.pos)?
    };
    let at_end = s.elementwise2(BinaryOp::Eq, x.clone(), xl.clone(), b.pos)?;
    r = s.where_(at_end, fl, r, b.pos)?;
    let above = s.elementwise2(BinaryOp::Gt, x.clone(), xl, b.pos)?;
    r = s.where_(above, right, r, b.pos)?;
    let below = s.elementwise2(BinaryOp::Lt, x, x0, b.pos)?;
    r = s.where_(below, left, r, b.pos)?;
    let id = s.node(r, b.pos)?;
    Ok(Val::Arr(s.cast(id, DType::Float64)))
}

/// NumPy's convolve of 1-D arrays: `sum_j v[j] * a[k - j]`, one shifted slice of `a`
/// (padded with zeros) per element of the shorter operand; `mode` "full", "same" or
/// "valid" as NumPy's.
fn convolve(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    /// The most terms of the sum: each is a node of the graph.
    const MAX_KERNEL: u64 = 256;
    let mut a = vector(s, b, "a")?;
    let mut v = vector(s, b, "v")?;
    let (mut n, mut m) = (s.meta(a).shape[0], s.meta(v).shape[0]);
    if n == 0 || m == 0 {
        return Err(b.err(b.pos, "convolve(): v cannot be empty"));
    }
    if m > n {
        // NumPy swaps them: the result is the same.
        std::mem::swap(&mut a, &mut v);
        std::mem::swap(&mut n, &mut m);
    }
    if m > MAX_KERNEL {
        return Err(b.err(
            b.pos,
            format!(
                "convolve(): the shorter operand has {m} elements; at most {MAX_KERNEL} (a sum of shifted slices)"
            ),
        ));
    }
    let mode = match b.get("mode") {
        None => "full".to_string(),
        Some((Val::Str(m), _)) if ["full", "same", "valid"].contains(&m.as_str()) => m.clone(),
        Some((_, p)) => {
            return Err(b.err(
                *p,
                "convolve(): mode must be \"full\", \"same\" or \"valid\"",
            ));
        }
    };
    let dtype = s.meta(a).dtype.promote(s.meta(v).dtype);
    let dtype = if dtype == DType::Bool {
        DType::Int64
    } else {
        dtype
    };
    let (a, v) = (s.cast(a, dtype), s.cast(v, dtype));
    let int = |i: u64| Val::Num(Scalar::Int(i as i64));
    let padded = s.apply(
        "pad",
        &[("array", Val::Arr(a)), ("pad_width", int(m - 1))],
        b.pos,
    )?;
    let padded = s.node(padded, b.pos)?;
    let len = n + m - 1;
    let mut sum: Option<Val> = None;
    for j in 0..m {
        let start = m - 1 - j;
        let part = s.slice(padded, &[(0, start, len)]);
        let w = s.apply("take", &[("a", Val::Arr(v)), ("indices", int(j))], b.pos)?;
        let term = s.elementwise2(BinaryOp::Mul, Val::Arr(part), w, b.pos)?;
        sum = Some(match sum {
            None => term,
            Some(t) => s.elementwise2(BinaryOp::Add, t, term, b.pos)?,
        });
    }
    let full = s.node(sum.expect("one term at least"), b.pos)?;
    let (from, to) = match mode.as_str() {
        "full" => (0, len),
        "same" => ((m - 1) / 2, (m - 1) / 2 + n),
        _ => (m - 1, n),
    };
    let r = if (from, to) == (0, len) {
        full
    } else {
        s.slice(full, &[(0, from, to - from)])
    };
    Ok(Val::Arr(s.cast(r, dtype)))
}

/// NumPy's correlate: `sum_n a[n + k] * conj(v[n])`, `convolve` of `a` with `v` reversed
/// and conjugated (the operands swapped and the result reversed where `v` is longer);
/// mode "valid" by default.
fn correlate(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = vector(s, b, "a")?;
    let v = vector(s, b, "v")?;
    let mode = b
        .get("mode")
        .map_or(Val::Str("valid".into()), |(m, _)| m.clone());
    let int = |i: i64| Val::Num(Scalar::Int(i));
    let reversed = |s: &mut Builder, x: NodeId| -> Result<Val, EvalError> {
        let r = s.apply("flip", &[("m", Val::Arr(x)), ("axis", int(0))], b.pos)?;
        s.unary(UnaryOp::Conj, r, b.pos)
    };
    let swap = s.meta(v).shape[0] > s.meta(a).shape[0];
    let (a, v) = if swap { (v, a) } else { (a, v) };
    let k = reversed(s, v)?;
    let r = s.apply(
        "convolve",
        &[("a", Val::Arr(a)), ("v", k), ("mode", mode)],
        b.pos,
    )?;
    if !swap {
        return Ok(r);
    }
    // correlate(v, a) reversed (and conjugated): correlate(a, v).
    let r = s.node(r, b.pos)?;
    reversed(s, r)
}

/// NumPy's polyval, as it computes it: `y = zeros_like(x)`, then `y = y * x + p[i]` for
/// each coefficient, highest power first.
fn polyval(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let p = vector(s, b, "p")?;
    let (x, px) = b.need("x")?.clone();
    let x = s.list_operand(x, px)?;
    let x = s.node(x, px)?;
    let n = s.meta(p).shape[0];
    if n > 256 {
        return Err(b.err(b.pos, "polyval(): at most 256 coefficients (a node each)"));
    }
    let mut y = s.apply("zeros_like", &[("a", Val::Arr(x))], b.pos)?;
    for i in 0..n {
        let c = s.apply(
            "take",
            &[
                ("a", Val::Arr(p)),
                ("indices", Val::Num(Scalar::Int(i as i64))),
            ],
            b.pos,
        )?;
        let t = s.elementwise2(BinaryOp::Mul, y, Val::Arr(x), b.pos)?;
        y = s.elementwise2(BinaryOp::Add, t, c, b.pos)?;
    }
    Ok(y)
}

/// NumPy's polyfit, as it computes it: x and y made float, the Vandermonde matrix of x
/// (`deg + 1` columns, highest power first), its rows and y's weighted by `w`, its columns
/// scaled to unit norm (the conditioning NumPy applies), `lstsq` with `rcond` (default
/// `len(x)` epsilons), the coefficients scaled back. `full=True`: NumPy's five results.
fn polyfit(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = vector(s, b, "x")?;
    let (y, py) = b.need("y")?.clone();
    let y = s.list_operand(y, py)?;
    let y = s.node(y, py)?;
    let m = s.meta(x).shape[0];
    let ym = s.meta(y).clone();
    let deg = match b.int("deg")? {
        Some(d) if d >= 0 => d as u64,
        Some(_) => return Err(b.err(b.pos, "polyfit(): deg must be non-negative")),
        None => return Err(b.err(b.pos, "polyfit(): deg is required")),
    };
    if m == 0 {
        return Err(b.err(b.pos, "polyfit(): x is empty (expected a non-empty vector)"));
    }
    if ym.ndim() == 0 || ym.ndim() > 2 || ym.shape[0] != m {
        return Err(b.err(
            py,
            format!(
                "polyfit(): y has shape {}; it must be 1-D or 2-D with x's {m} rows",
                shape_str(&ym.shape)
            ),
        ));
    }
    // `x + 0.0` in NumPy: ints become float64, float32 stays.
    let float = |s: &mut Builder, v: NodeId| {
        let dt = s.meta(v).dtype.to_float();
        s.cast(v, dt)
    };
    let (x, mut rhs) = (float(s, x), float(s, y));
    let order = deg + 1;
    let lhs = s.apply(
        "vander",
        &[
            ("x", Val::Arr(x)),
            ("N", Val::Num(Scalar::Int(order as i64))),
        ],
        b.pos,
    )?;
    let mut lhs = s.node(lhs, b.pos)?;
    if b.get("w").is_some() {
        let w = vector(s, b, "w")?;
        if s.meta(w).shape[0] != m {
            return Err(b.err(b.pos, format!("polyfit(): w must have x's length {m}")));
        }
        let w = float(s, w);
        let col = s.reshape(w, &[m, 1]);
        let l = s.elementwise2(BinaryOp::Mul, Val::Arr(lhs), Val::Arr(col), b.pos)?;
        lhs = s.node(l, b.pos)?;
        let wy = if ym.ndim() == 2 { col } else { w };
        let r = s.elementwise2(BinaryOp::Mul, Val::Arr(rhs), Val::Arr(wy), b.pos)?;
        rhs = s.node(r, b.pos)?;
    }
    let sq = s.elementwise2(BinaryOp::Mul, Val::Arr(lhs), Val::Arr(lhs), b.pos)?;
    let sq = s.node(sq, b.pos)?;
    let ss = s.reduce(sq, ReduceOp::Sum, vec![0], false, b.pos)?;
    let scale = s.apply("sqrt", &[("x", Val::Arr(ss))], b.pos)?;
    let scale = s.node(scale, b.pos)?;
    let l = s.elementwise2(BinaryOp::Div, Val::Arr(lhs), Val::Arr(scale), b.pos)?;
    let rcond = match b.num("rcond")? {
        Some(v) => v.as_f64(),
        None => {
            m as f64
                * if s.meta(x).dtype == DType::Float32 {
                    f32::EPSILON as f64
                } else {
                    f64::EPSILON
                }
        }
    };
    let fit = s.apply(
        "lstsq",
        &[
            ("a", l),
            ("b", Val::Arr(rhs)),
            ("rcond", Val::Num(Scalar::Float(rcond))),
        ],
        b.pos,
    )?;
    let Val::Tuple(mut parts) = fit else {
        unreachable!("lstsq gives a tuple")
    };
    let scale = if ym.ndim() == 2 {
        s.reshape(scale, &[order, 1])
    } else {
        scale
    };
    let c = s.elementwise2(BinaryOp::Div, parts[0].clone(), Val::Arr(scale), b.pos)?;
    if !b.flag("full")? {
        return Ok(c);
    }
    parts[0] = c;
    parts.push(Val::Num(Scalar::Float(rcond)));
    Ok(Val::Tuple(parts))
}

/// NumPy's vander: the columns `x ** (N - 1)`, ..., `x ** 0` (or increasing), each power
/// the product of the one before and `x`, as NumPy's `multiply.accumulate` makes them,
/// in `x`'s dtype promoted with int.
fn vander(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = vector(s, b, "x")?;
    let len = s.meta(x).shape[0];
    let n = match b.int("N")? {
        None => len,
        Some(n) if n >= 0 => n as u64,
        Some(_) => return Err(b.err(b.pos, "vander(): N must be non-negative")),
    };
    if n > 256 {
        return Err(b.err(
            b.pos,
            format!("vander(): {n} columns; at most 256 (a node each)"),
        ));
    }
    let dtype = s.meta(x).dtype.promote(DType::Int64);
    let x = s.cast(x, dtype);
    let col = s.reshape(x, &[len, 1]);
    let mut cols = Vec::new();
    let ones = s.apply(
        "ones",
        &[
            (
                "shape",
                Val::Tuple(vec![
                    Val::Num(Scalar::Int(len as i64)),
                    Val::Num(Scalar::Int(1)),
                ]),
            ),
            ("dtype", Val::Str(dtype.name().into())),
        ],
        b.pos,
    )?;
    let mut power = s.node(ones, b.pos)?;
    for i in 0..n {
        if i > 0 {
            let next = s.elementwise2(BinaryOp::Mul, Val::Arr(power), Val::Arr(col), b.pos)?;
            power = s.node(next, b.pos)?;
        }
        cols.push(power);
    }
    if !b.flag("increasing")? {
        cols.reverse();
    }
    if cols.is_empty() {
        return s.apply(
            "zeros",
            &[
                (
                    "shape",
                    Val::Tuple(vec![
                        Val::Num(Scalar::Int(len as i64)),
                        Val::Num(Scalar::Int(0)),
                    ]),
                ),
                ("dtype", Val::Str(dtype.name().into())),
            ],
            b.pos,
        );
    }
    Ok(Val::Arr(s.concat(cols, 1, b.pos)?))
}
