//! Reductions: NumPy's sums, products, extremes, logical reductions, means, variances and
//! arg-extremes, with their `nan` variants. The composite ones (mean, var, std, argmax) are
//! built from the primitive reduce and elementwise nodes, so that every block kernel stays
//! small.

use super::*;

const REDUCE: &[&str] = &["a", "axis", "dtype", "out", "keepdims"];
const EXTREME: &[&str] = &["a", "axis", "out", "keepdims"];
/// NumPy 2's `correction` (the Array API's name of `ddof`) is a keyword.
const SPREAD: &[&str] = &[
    "a",
    "axis",
    "dtype",
    "out",
    "ddof",
    "keepdims",
    "correction",
];
/// nums-cloud writes no `out`.
const REFUSED: &[&str] = &["out"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new("sum", REDUCE, "`np.sum`", |s, b| {
        reduce(s, b, ReduceOp::Sum)
    })
    .refusing(REFUSED),
    FuncDef::new("prod", REDUCE, "`np.prod`", |s, b| {
        reduce(s, b, ReduceOp::Prod)
    })
    .refusing(REFUSED),
    FuncDef::new("min", EXTREME, "`np.min`", |s, b| {
        reduce(s, b, ReduceOp::Min)
    })
    .aliases(&["amin"])
    .refusing(&["out"]),
    FuncDef::new("max", EXTREME, "`np.max`", |s, b| {
        reduce(s, b, ReduceOp::Max)
    })
    .aliases(&["amax"])
    .refusing(&["out"]),
    FuncDef::new("all", EXTREME, "`np.all`", |s, b| {
        reduce(s, b, ReduceOp::All)
    })
    .refusing(&["out"]),
    FuncDef::new("any", EXTREME, "`np.any`", |s, b| {
        reduce(s, b, ReduceOp::Any)
    })
    .refusing(&["out"]),
    FuncDef::new("mean", REDUCE, "`np.mean`", |s, b| mean(s, b, false)).refusing(REFUSED),
    FuncDef::new("var", SPREAD, "`np.var` (two passes)", |s, b| {
        var(s, b, false, false)
    })
    .refusing(REFUSED),
    FuncDef::new("std", SPREAD, "`np.std` (two passes)", |s, b| {
        var(s, b, false, true)
    })
    .refusing(REFUSED),
    FuncDef::new(
        "argmin",
        EXTREME,
        "`np.argmin` (one axis or None)",
        |s, b| arg(s, b, false, false),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "argmax",
        EXTREME,
        "`np.argmax` (one axis or None; NaN first)",
        |s, b| arg(s, b, true, false),
    )
    .refusing(&["out"]),
    FuncDef::new("nansum", REDUCE, "`np.nansum`", |s, b| {
        reduce(s, b, ReduceOp::NanSum)
    })
    .refusing(REFUSED),
    FuncDef::new("nanprod", REDUCE, "`np.nanprod`", |s, b| {
        reduce(s, b, ReduceOp::NanProd)
    })
    .refusing(REFUSED),
    FuncDef::new("nanmin", EXTREME, "`np.nanmin`", |s, b| {
        reduce(s, b, ReduceOp::NanMin)
    })
    .refusing(&["out"]),
    FuncDef::new("nanmax", EXTREME, "`np.nanmax`", |s, b| {
        reduce(s, b, ReduceOp::NanMax)
    })
    .refusing(&["out"]),
    FuncDef::new("nanmean", REDUCE, "`np.nanmean`", |s, b| mean(s, b, true)).refusing(REFUSED),
    FuncDef::new("nanvar", SPREAD, "`np.nanvar`", |s, b| {
        var(s, b, true, false)
    })
    .refusing(REFUSED),
    FuncDef::new("nanstd", SPREAD, "`np.nanstd`", |s, b| {
        var(s, b, true, true)
    })
    .refusing(REFUSED),
    FuncDef::new("nanargmin", EXTREME, "`np.nanargmin`", |s, b| {
        arg(s, b, false, true)
    })
    .refusing(&["out"]),
    FuncDef::new("nanargmax", EXTREME, "`np.nanargmax`", |s, b| {
        arg(s, b, true, true)
    })
    .refusing(&["out"]),
    FuncDef::new(
        "allclose",
        &["a", "b", "rtol", "atol", "equal_nan"],
        "`np.allclose`: `all(isclose(...))` (a 0-d bool; the Python package's is a bool)",
        |s, b| {
            let close = super::elementwise::isclose(s, b)?;
            s.apply("all", &[("a", close)], b.pos)
        },
    ),
    FuncDef::new(
        "array_equal",
        &["a1", "a2", "equal_nan"],
        "`np.array_equal` (False for other shapes; a 0-d bool, the Python package's a bool)",
        array_equal,
    ),
];

/// The array `a` in the reduction's `dtype=` when given (NumPy computes in it), and that
/// dtype. Bool is refused as cumsum's is.
fn in_dtype(s: &mut Builder, b: &Bound) -> Result<(NodeId, Option<DType>), EvalError> {
    let x = b.array("a")?;
    match b.dtype("dtype")? {
        Some(DType::Bool) => Err(b.err(
            b.pos,
            format!(
                "{}(): dtype=bool is not supported; reduce in an integer dtype and compare with 0",
                b.f
            ),
        )),
        Some(d) => Ok((s.cast(x, d), Some(d))),
        None => Ok((x, None)),
    }
}

/// `r` in `dtype` when given: the engine accumulates narrow ints in 64 bits, and an int
/// sum or product in a narrower dtype is that result modulo its width (NumPy's wrap).
fn as_dtype(s: &mut Builder, r: NodeId, dtype: Option<DType>) -> NodeId {
    match dtype {
        Some(d) => s.cast(r, d),
        None => r,
    }
}

fn reduce(s: &mut Builder, b: &Bound, op: ReduceOp) -> Result<Val, EvalError> {
    let (x, dtype) = in_dtype(s, b)?;
    let axes = b.axes(s.meta(x).ndim())?;
    let r = s.reduce(x, op, axes, b.flag("keepdims")?, b.pos)?;
    Ok(Val::Arr(as_dtype(s, r, dtype)))
}

fn mean(s: &mut Builder, b: &Bound, nan: bool) -> Result<Val, EvalError> {
    let (x, dtype) = in_dtype(s, b)?;
    let axes = b.axes(s.meta(x).ndim())?;
    let r = s.mean(x, axes, b.flag("keepdims")?, nan, b.pos)?;
    Ok(Val::Arr(as_dtype(s, r, dtype)))
}

/// var (or std, its square root) with `ddof` (or NumPy 2's `correction`, not both).
fn var(s: &mut Builder, b: &Bound, nan: bool, sqrt: bool) -> Result<Val, EvalError> {
    let (x, _) = in_dtype(s, b)?;
    let axes = b.axes(s.meta(x).ndim())?;
    let ddof = match (b.num("ddof")?, b.num("correction")?) {
        (Some(_), Some(_)) => {
            return Err(b.err(
                b.pos,
                format!(
                    "{}(): ddof and correction can't be provided simultaneously",
                    b.f
                ),
            ));
        }
        (d, c) => d.or(c).map_or(0.0, Scalar::as_f64),
    };
    let v = s.var(x, axes, b.flag("keepdims")?, ddof, nan, b.pos)?;
    if sqrt {
        s.unary(UnaryOp::Sqrt, Val::Arr(v), b.pos)
    } else {
        Ok(Val::Arr(v))
    }
}

/// argmin, argmax and their nan variants: one axis or None (flattened).
fn arg(s: &mut Builder, b: &Bound, max: bool, nan: bool) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let axis = match b.get("axis") {
        None => None,
        Some((v, p)) => {
            let ax = axes_of(v, s.meta(x).ndim()).map_err(|m| b.refused(*p, m))?;
            match ax.as_slice() {
                [a] if matches!(v, Val::Num(..)) => Some(*a),
                _ => return Err(b.err(*p, format!("{}(): axis must be an integer", b.f))),
            }
        }
    };
    Ok(Val::Arr(s.arg_extreme(
        x,
        axis,
        b.flag("keepdims")?,
        max,
        nan,
        b.pos,
    )?))
}

impl<'a> Builder<'a> {
    fn count_over(&self, x: NodeId, axes: &[usize]) -> u64 {
        let m = self.meta(x);
        axes.iter().map(|&d| m.shape[d]).product()
    }

    pub(super) fn mean(
        &mut self,
        x: NodeId,
        axes: Vec<usize>,
        keepdims: bool,
        nan: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let fdt = self.meta(x).dtype.to_float();
        // NumPy sums ints in float64 for a mean (no int64 wrapping).
        let x = self.cast(x, fdt);
        if !nan {
            let n = self.count_over(x, &axes);
            let s = self.reduce(x, ReduceOp::Sum, axes, keepdims, pos)?;
            let s = self.cast(s, fdt);
            let v = self.elementwise2(
                BinaryOp::Div,
                Val::Arr(s),
                Val::Num(Scalar::Int(n as i64)),
                pos,
            )?;
            return self.node(v, pos);
        }
        let s = self.reduce(x, ReduceOp::NanSum, axes.clone(), keepdims, pos)?;
        let s = self.cast(s, fdt);
        let cnt = self.valid_count(x, axes, keepdims, fdt.real(), pos)?;
        let v = self.elementwise2(BinaryOp::Div, Val::Arr(s), Val::Arr(cnt), pos)?;
        self.node(v, pos)
    }

    /// How many values are not NaN along `axes`, in `dtype`.
    fn valid_count(
        &mut self,
        x: NodeId,
        axes: Vec<usize>,
        keepdims: bool,
        dtype: DType,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let isnan = self.unary(UnaryOp::IsNan, Val::Arr(x), pos)?;
        let ok = self.unary(UnaryOp::Not, isnan, pos)?;
        let ok = self.node(ok, pos)?;
        let c = self.reduce(ok, ReduceOp::Sum, axes, keepdims, pos)?;
        Ok(self.cast(c, dtype))
    }

    /// Two passes, as NumPy computes it: the mean, then the mean square deviation (of a
    /// complex array, the mean of `|x - mean|^2`: a real variance).
    fn var(
        &mut self,
        x: NodeId,
        axes: Vec<usize>,
        keepdims: bool,
        ddof: f64,
        nan: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let fdt = self.meta(x).dtype.to_float().real();
        let mu = self.mean(x, axes.clone(), true, nan, pos)?;
        let mut d = self.elementwise2(BinaryOp::Sub, Val::Arr(x), Val::Arr(mu), pos)?;
        if nan {
            // Only the NaNs of x are left out (as NumPy does): a deviation that is NaN
            // because x holds infinities (inf - inf) makes the variance NaN.
            let isnan = self.unary(UnaryOp::IsNan, Val::Arr(x), pos)?;
            d = self.where_(isnan, Val::Num(Scalar::Float(0.0)), d, pos)?;
        }
        let d = self.node(d, pos)?;
        let sq = if self.meta(d).dtype.is_complex() {
            // NumPy's: the real part of d * conj(d).
            let c = self.unary(UnaryOp::Conj, Val::Arr(d), pos)?;
            let p = self.elementwise2(BinaryOp::Mul, Val::Arr(d), c, pos)?;
            self.unary(UnaryOp::Real, p, pos)?
        } else {
            self.elementwise2(BinaryOp::Mul, Val::Arr(d), Val::Arr(d), pos)?
        };
        let sq = self.node(sq, pos)?;
        let s = self.reduce(sq, ReduceOp::Sum, axes.clone(), keepdims, pos)?;
        let v = if nan {
            // NaN where no degrees of freedom are left (count <= ddof), as NumPy's nanvar.
            let cnt = self.valid_count(x, axes, keepdims, fdt, pos)?;
            let den = self.elementwise2(
                BinaryOp::Sub,
                Val::Arr(cnt),
                Val::Num(Scalar::Float(ddof)),
                pos,
            )?;
            let v = self.elementwise2(BinaryOp::Div, Val::Arr(s), den.clone(), pos)?;
            let left = self.elementwise2(BinaryOp::Gt, den, Val::Num(Scalar::Float(0.0)), pos)?;
            self.where_(left, v, Val::Num(Scalar::Float(f64::NAN)), pos)?
        } else {
            // NumPy divides by max(n - ddof, 0): inf or NaN past n, never a negative count.
            let n = (self.count_over(x, &axes) as f64 - ddof).max(0.0);
            self.elementwise2(BinaryOp::Div, Val::Arr(s), Val::Num(Scalar::Float(n)), pos)?
        };
        self.node(v, pos)
    }

    /// argmax and friends: the smallest index along the axis where the value equals the
    /// extreme (or is NaN, which NumPy's argmax reports first); flattened when no axis.
    fn arg_extreme(
        &mut self,
        x: NodeId,
        axis: Option<usize>,
        keepdims: bool,
        max: bool,
        nan: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let orig = self.meta(x).clone();
        let (x, axis) = match axis {
            Some(a) => (x, a),
            None => (self.reshape(x, &[orig.len()]), 0),
        };
        let m = self.meta(x).clone();
        let op = match (max, nan) {
            (true, false) => ReduceOp::Max,
            (false, false) => ReduceOp::Min,
            (true, true) => ReduceOp::NanMax,
            (false, true) => ReduceOp::NanMin,
        };
        if m.shape[axis] == 0 {
            // NumPy's argmax has no answer for an empty slice (nanargmax says argmax too).
            return Err(EvalError::Expr(ExprError::new(
                pos,
                format!(
                    "attempt to get {} of an empty sequence",
                    if max { "argmax" } else { "argmin" }
                ),
            )));
        }
        let ext = self.reduce(x, op, vec![axis], true, pos)?;
        let mut hit = self.elementwise2(BinaryOp::Eq, Val::Arr(x), Val::Arr(ext), pos)?;
        if !nan && !m.dtype.is_exact() {
            let isnan = self.unary(UnaryOp::IsNan, Val::Arr(x), pos)?;
            hit = self.elementwise2(BinaryOp::Or, hit, isnan, pos)?;
        }
        let idx = self.add(
            ArrayMeta {
                dtype: DType::Int64,
                ..m.clone()
            },
            NodeOp::Iota {
                axis,
                start: Scalar::Int(0),
                step: Scalar::Int(1),
                last: None,
            },
        );
        let n = Val::Num(Scalar::Int(m.shape[axis] as i64));
        let cand = self.where_(hit, Val::Arr(idx), n, pos)?;
        let cand = self.node(cand, pos)?;
        let mut r = self.reduce(cand, ReduceOp::Min, vec![axis], keepdims, pos)?;
        if nan && !m.dtype.is_exact() {
            // No candidate in a slice of NaNs only: NumPy raises rather than answer.
            r = self.add(
                self.meta(r).clone(),
                NodeOp::CheckBelow {
                    x: r,
                    limit: m.shape[axis] as i64,
                    error: format!(
                        "ValueError: {}: All-NaN slice encountered",
                        if max { "nanargmax" } else { "nanargmin" }
                    ),
                },
            );
        }
        Ok(
            if keepdims && orig.ndim() != 1 && self.meta(r).ndim() != orig.ndim() {
                self.reshape(r, &vec![1; orig.ndim()])
            } else {
                r
            },
        )
    }
}

/// NumPy's array_equal: the same shape and every element equal (NaNs too, with
/// `equal_nan`).
fn array_equal(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut v = Vec::new();
    for name in ["a1", "a2"] {
        let (x, p) = b.need(name)?.clone();
        v.push(s.list_operand(x, p)?);
    }
    let (a1, a2) = (v[0].clone(), v[1].clone());
    let (n1, n2) = (s.node(a1.clone(), b.pos)?, s.node(a2.clone(), b.pos)?);
    if s.meta(n1).shape != s.meta(n2).shape {
        return Ok(Val::NpScalar(Scalar::Bool(false), DType::Bool));
    }
    let mut eq = s.elementwise2(BinaryOp::Eq, a1.clone(), a2.clone(), b.pos)?;
    if b.flag("equal_nan")? {
        let x = s.unary(UnaryOp::IsNan, a1, b.pos)?;
        let y = s.unary(UnaryOp::IsNan, a2, b.pos)?;
        let both = s.elementwise2(BinaryOp::And, x, y, b.pos)?;
        eq = s.elementwise2(BinaryOp::Or, eq, both, b.pos)?;
    }
    s.apply("all", &[("a", eq)], b.pos)
}
