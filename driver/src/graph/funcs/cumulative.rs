//! Cumulative functions: NumPy's running sums and products (and the Array API's
//! `cumulative_sum`/`cumulative_prod` with `include_initial`) and `diff`. A running sum
//! across blocks is a scan: each block's total first, then the totals' running sum (the
//! offsets, one small block per lane), then each block's own running sum from its offset
//! (`NodeOp::ScanTotal`, `NodeOp::Scan`); no task holds more than one block of the input.

use super::*;

const CUM: &[&str] = &["a", "axis", "dtype", "out"];
const CUMULATIVE: &[&str] = &["x", "axis", "dtype", "out", "include_initial"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "cumsum",
        CUM,
        "`np.cumsum` (a scan across blocks)",
        |s, b| cumulative(s, b, ReduceOp::Sum, false),
    )
    .refusing(&["out"]),
    FuncDef::new("cumprod", CUM, "`np.cumprod`", |s, b| {
        cumulative(s, b, ReduceOp::Prod, false)
    })
    .refusing(&["out"]),
    FuncDef::new("nancumsum", CUM, "`np.nancumsum`", |s, b| {
        cumulative(s, b, ReduceOp::NanSum, false)
    })
    .refusing(&["out"]),
    FuncDef::new("nancumprod", CUM, "`np.nancumprod`", |s, b| {
        cumulative(s, b, ReduceOp::NanProd, false)
    })
    .refusing(&["out"]),
    FuncDef::new(
        "cumulative_sum",
        CUMULATIVE,
        "`np.cumulative_sum` (Array API; `include_initial=True` starts with 0)",
        |s, b| cumulative(s, b, ReduceOp::Sum, true),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "cumulative_prod",
        CUMULATIVE,
        "`np.cumulative_prod` (Array API)",
        |s, b| cumulative(s, b, ReduceOp::Prod, true),
    )
    .refusing(&["out"]),
    FuncDef::new(
        "diff",
        &["a", "n", "axis", "prepend", "append"],
        "`np.diff` (`!=` for bool)",
        diff,
    ),
    FuncDef::new(
        "ediff1d",
        &["ary", "to_end", "to_begin"],
        "`np.ediff1d`: `diff` of the flattened array, `to_begin` and `to_end` around it",
        ediff1d,
    ),
    FuncDef::new(
        "trapezoid",
        &["y", "x", "dx", "axis"],
        "`np.trapezoid` (NumPy's formula: `sum(d * (y[1:] + y[:-1]) / 2.0)`)",
        trapezoid,
    ),
    FuncDef::new(
        "gradient",
        &["f", "varargs", "axis", "edge_order"],
        "`np.gradient` (a spacing or coordinates per axis: a number or a 1-D array), `edge_order=1`; a tuple for several axes",
        gradient,
    )
    .rest(Rest::Leading),
];

/// cumsum and friends (`array_api`: cumulative_sum/prod, whose axis is required past 1-D
/// and which may start with the identity).
fn cumulative(s: &mut Builder, b: &Bound, op: ReduceOp, array_api: bool) -> Result<Val, EvalError> {
    let x = b.array(if array_api { "x" } else { "a" })?;
    let m = s.meta(x).clone();
    let dtype = match b.dtype("dtype")? {
        Some(DType::Bool) => {
            return Err(b.err(
                b.pos,
                format!(
                    "{}(): dtype=bool is not supported; sum in an integer dtype and compare with 0",
                    b.f
                ),
            ));
        }
        Some(d) => d,
        None => m.dtype.sum_dtype(),
    };
    let (x, axis) = match b.get("axis") {
        Some((v, p)) => {
            let ax = axes_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?;
            match ax.as_slice() {
                [a] if matches!(v, Val::Num(..)) => (x, *a),
                _ => return Err(b.err(*p, format!("{}(): axis must be an integer", b.f))),
            }
        }
        None if array_api && m.ndim() != 1 => {
            return Err(b.err(
                b.pos,
                format!(
                    "{}(): axis must be given for an array of {} dimensions",
                    b.f,
                    m.ndim()
                ),
            ));
        }
        // NumPy's running sums flatten without an axis.
        None => (s.reshape(x, &[m.len()]), 0),
    };
    // NumPy's nan variants put 0 (1) where a NaN is, then scan in `dtype`: an int dtype
    // never sees the NaN.
    let (x, op) = match op {
        ReduceOp::NanSum | ReduceOp::NanProd if !s.meta(x).dtype.is_exact() && dtype.is_exact() => {
            let nan = s.unary(UnaryOp::IsNan, Val::Arr(x), b.pos)?;
            let id = Val::Num(op.empty_value());
            let v = s.where_(nan, id, Val::Arr(x), b.pos)?;
            (s.node(v, b.pos)?, op.partial())
        }
        op => (x, op),
    };
    let r = s.scan(x, op, axis, dtype);
    if !(array_api && b.flag("include_initial")?) {
        return Ok(Val::Arr(r));
    }
    let rm = s.meta(r).clone();
    let mut shape = rm.shape.clone();
    shape[axis] = 1;
    let init = s.add(
        ArrayMeta::new(shape, rm.block.clone(), dtype),
        NodeOp::Fill {
            value: op.empty_value(),
        },
    );
    Ok(Val::Arr(s.concat(vec![init, r], axis, b.pos)?))
}

/// `diff`: `n` times the differences of neighbours along `axis` (`!=` of bools), after
/// `prepend` and `append` are joined on.
fn diff(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut x = b.array("a")?;
    let nd = s.meta(x).ndim();
    if nd == 0 {
        return Err(b.err(
            b.pos,
            "diff requires input that is at least one dimensional",
        ));
    }
    let n = b.int("n")?.unwrap_or(1);
    if n < 0 {
        return Err(b.err(b.pos, format!("order must be non-negative but got {n}")));
    }
    let axis = match b.get("axis") {
        None => nd - 1,
        Some((v, p)) => axis_of(v, nd).map_err(|e| b.refused(*p, e))?,
    };
    // NumPy returns `a` itself for n = 0, before it looks at prepend or append.
    if n == 0 {
        return Ok(Val::Arr(x));
    }
    let mut parts = Vec::new();
    for (name, after) in [("prepend", false), ("append", true)] {
        let Some((v, p)) = b.get(name) else { continue };
        let m = s.meta(x).clone();
        let mut shape = m.shape.clone();
        shape[axis] = 1;
        let node = match v {
            Val::Num(value) => s.add(
                ArrayMeta::new(shape, m.block.clone(), DType::of_kind(value.kind())),
                NodeOp::Fill { value: *value },
            ),
            Val::Arr(a) if s.meta(*a).ndim() == 0 => {
                // A 0-d array broadcasts to one slice (NumPy's broadcast_to).
                let z = s.add(
                    ArrayMeta::new(shape, m.block.clone(), DType::Bool),
                    NodeOp::Fill {
                        value: Scalar::Bool(false),
                    },
                );
                let v = s.elementwise2(BinaryOp::Add, Val::Arr(*a), Val::Arr(z), *p)?;
                s.node(v, *p)?
            }
            Val::Arr(a) => *a,
            _ => return Err(b.err(*p, format!("diff(): {name} must be an array or a number"))),
        };
        parts.push((node, after));
    }
    if !parts.is_empty() {
        let mut xs: Vec<NodeId> = parts.iter().filter(|p| !p.1).map(|p| p.0).collect();
        xs.push(x);
        xs.extend(parts.iter().filter(|p| p.1).map(|p| p.0));
        x = s.concat(xs, axis, b.pos)?;
    }
    for _ in 0..n {
        let len = s.meta(x).shape[axis];
        if len == 0 {
            break;
        }
        let hi = s.slice(x, &[(axis, 1, len - 1)]);
        let lo = s.slice(x, &[(axis, 0, len - 1)]);
        let op = if s.meta(x).dtype == DType::Bool {
            BinaryOp::Ne
        } else {
            BinaryOp::Sub
        };
        let d = s.elementwise2(op, Val::Arr(hi), Val::Arr(lo), b.pos)?;
        x = s.node(d, b.pos)?;
    }
    Ok(Val::Arr(x))
}

impl<'a> Builder<'a> {
    /// The running `op` of `x` along `axis` in `dtype`: one scan per block when the axis
    /// has one block, else block totals, their exclusive scan (the offsets) and each
    /// block's scan from its offset. Floats fold the blocks' starting values in order
    /// instead (a chain, block by block), so that the scan is NumPy's one pass bit for bit:
    /// a product that underflows to 0 stays 0 where a total of later blocks overflows.
    pub(super) fn scan(&mut self, x: NodeId, op: ReduceOp, axis: usize, dtype: DType) -> NodeId {
        let m = self.meta(x).clone();
        let out = ArrayMeta { dtype, ..m.clone() };
        let nk = m.grid()[axis];
        if nk <= 1 {
            return self.add(
                out,
                NodeOp::Scan {
                    x,
                    op,
                    axis,
                    exclusive: false,
                    offsets: None,
                },
            );
        }
        let mut shape = m.shape.clone();
        shape[axis] = nk;
        let mut block = m.block.clone();
        block[axis] = 1;
        if !dtype.is_exact() {
            let starts = self.add(
                ArrayMeta::new(shape, block, dtype),
                NodeOp::ScanTotal {
                    x,
                    op,
                    axis,
                    chained: true,
                },
            );
            return self.add(
                out,
                NodeOp::Scan {
                    x,
                    op,
                    axis,
                    exclusive: false,
                    offsets: Some(starts),
                },
            );
        }
        let totals = self.add(
            ArrayMeta::new(shape.clone(), block.clone(), dtype),
            NodeOp::ScanTotal {
                x,
                op,
                axis,
                chained: false,
            },
        );
        block[axis] = nk;
        let totals = self.rechunk(totals, block.clone());
        // A NaN among the totals was made by the data (inf - inf): it propagates.
        let offsets = self.add(
            ArrayMeta::new(shape, block, dtype),
            NodeOp::Scan {
                x: totals,
                op: op.partial(),
                axis,
                exclusive: true,
                offsets: None,
            },
        );
        self.add(
            out,
            NodeOp::Scan {
                x,
                op,
                axis,
                exclusive: false,
                offsets: Some(offsets),
            },
        )
    }
}

/// NumPy's ediff1d: the differences of the flattened array, with `to_begin` and
/// `to_end` (numbers or arrays, flattened) around them.
fn ediff1d(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (a, p) = b.need("ary")?.clone();
    let a = s.list_operand(a, p)?;
    let a = s.node(a, p)?;
    let n = s.meta(a).len();
    let flat = s.reshape(a, &[n]);
    let d = s.apply("diff", &[("a", Val::Arr(flat))], b.pos)?;
    let mut parts = Vec::new();
    let dtype = s.meta(a).dtype;
    let flat_of = |s: &mut Builder, name: &str| -> Result<Option<NodeId>, EvalError> {
        let Some((v, p)) = b.get(name).cloned() else {
            return Ok(None);
        };
        let v = s.list_operand(v, p)?;
        let v = s.node(v, p)?;
        let len = s.meta(v).len();
        let v = s.reshape(v, &[len]);
        Ok(Some(s.cast(v, dtype)))
    };
    let (begin, end) = (flat_of(s, "to_begin")?, flat_of(s, "to_end")?);
    parts.extend(begin);
    parts.push(s.node(d, b.pos)?);
    parts.extend(end);
    if parts.len() == 1 {
        return Ok(Val::Arr(parts[0]));
    }
    Ok(Val::Arr(s.concat(parts, 0, b.pos)?))
}

/// NumPy's trapezoid, by its formula: `sum(d * (y[1:] + y[:-1]) / 2.0, axis)` with `d`
/// the spacing `dx` or `diff(x)` (1-D `x` along `axis`, or `x` of `y`'s shape).
fn trapezoid(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (y, p) = b.need("y")?.clone();
    let y = s.list_operand(y, p)?;
    let y = s.node(y, p)?;
    let m = s.meta(y).clone();
    if m.ndim() == 0 {
        return Err(b.err(p, "trapezoid(): y must be at least 1-D"));
    }
    let axis = match b.get("axis") {
        None => m.ndim() - 1,
        Some((v, p)) => axis_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let n = m.shape[axis];
    if n == 0 {
        return Err(b.err(p, "trapezoid(): y is empty along the axis"));
    }
    let hi = s.slice(y, &[(axis, 1, n - 1)]);
    let lo = s.slice(y, &[(axis, 0, n - 1)]);
    let d = match b.get("x").cloned() {
        None => b
            .get("dx")
            .map_or(Val::Num(Scalar::Float(1.0)), |(v, _)| v.clone()),
        Some((x, p)) => {
            let x = s.list_operand(x, p)?;
            let x = s.node(x, p)?;
            let xm = s.meta(x).clone();
            let ax = if xm.ndim() == 1 { 0 } else { axis };
            let d = s.apply(
                "diff",
                &[
                    ("a", Val::Arr(x)),
                    ("axis", Val::Num(Scalar::Int(ax as i64))),
                ],
                b.pos,
            )?;
            if xm.ndim() == 1 && m.ndim() > 1 {
                let d = s.node(d, b.pos)?;
                let mut at = vec![1; m.ndim()];
                at[axis] = s.meta(d).shape[0];
                Val::Arr(s.reshape(d, &at))
            } else {
                d
            }
        }
    };
    let sum = s.elementwise2(BinaryOp::Add, Val::Arr(hi), Val::Arr(lo), b.pos)?;
    let t = s.elementwise2(BinaryOp::Mul, d, sum, b.pos)?;
    let t = s.elementwise2(BinaryOp::Div, t, Val::Num(Scalar::Float(2.0)), b.pos)?;
    s.apply(
        "sum",
        &[("a", t), ("axis", Val::Num(Scalar::Int(axis as i64)))],
        b.pos,
    )
}

/// NumPy's gradient with uniform spacing, by its formulas: `(f[2:] - f[:-2]) / (2. *
/// dx)` inside, one-sided `(f[1] - f[0]) / dx` and `(f[-1] - f[-2]) / dx` at the ends;
/// ints in float64. One array for one axis, a tuple for several.
/// NumPy's gradient of `f` along `axis` at the coordinates `x` (a 1-D array of the
/// axis' length, or a 0-d one: a spacing): in the interior `a f[i-1] + b f[i] + c f[i+1]`
/// with NumPy's weights of the two spacings around `i`, at the edges one-sided
/// differences; f's dtype kept (NumPy's output is `empty_like(f)`).
fn gradient_at(
    s: &mut Builder,
    b: &Bound,
    f: NodeId,
    axis: usize,
    x: Val,
) -> Result<NodeId, EvalError> {
    let m = s.meta(f).clone();
    let n = m.shape[axis];
    let x = s.list_operand(x, b.pos)?;
    let x = s.node(x, b.pos)?;
    let xm = s.meta(x).clone();
    if xm.ndim() == 0 {
        let by = s.cast(x, DType::Float64);
        let one = |s: &mut Builder, hi: u64, lo: u64, len: u64, k: f64| -> Result<Val, EvalError> {
            let a = s.slice(f, &[(axis, hi, len)]);
            let c = s.slice(f, &[(axis, lo, len)]);
            let v = s.elementwise2(BinaryOp::Sub, Val::Arr(a), Val::Arr(c), b.pos)?;
            let h = s.elementwise2(
                BinaryOp::Mul,
                Val::Arr(by),
                Val::Num(Scalar::Float(k)),
                b.pos,
            )?;
            s.elementwise2(BinaryOp::Div, v, h, b.pos)
        };
        let mut parts = vec![one(s, 1, 0, 1, 1.0)?];
        if n > 2 {
            parts.push(one(s, 2, 0, n - 2, 2.0)?);
        }
        parts.push(one(s, n - 1, n - 2, 1, 1.0)?);
        let parts = parts
            .into_iter()
            .map(|v| s.node(v, b.pos))
            .collect::<Result<Vec<_>, _>>()?;
        let g = s.concat(parts, axis, b.pos)?;
        return Ok(s.cast(g, m.dtype));
    }
    if xm.ndim() != 1 || xm.shape[0] != n {
        return Err(b.err(
            b.pos,
            format!(
                "gradient(): when 1d, distances must match the length of the corresponding dimension (axis {axis}: {n}, spacing of shape {})",
                shape_str(&xm.shape)
            ),
        ));
    }
    let x = s.cast(x, DType::Float64);
    let mut along = vec![1; m.ndim()];
    // A length-`len` piece of x's differences, along `axis` of f.
    let diff = |s: &mut Builder, lo: u64, len: u64| -> Result<Val, EvalError> {
        let hi = s.slice(x, &[(0, lo + 1, len)]);
        let lo = s.slice(x, &[(0, lo, len)]);
        s.elementwise2(BinaryOp::Sub, Val::Arr(hi), Val::Arr(lo), b.pos)
    };
    let shaped =
        |s: &mut Builder, v: Val, len: u64, along: &mut Vec<u64>| -> Result<Val, EvalError> {
            along[axis] = len;
            let v = s.node(v, b.pos)?;
            Ok(Val::Arr(s.reshape(v, along)))
        };
    let fs = |s: &mut Builder, lo: u64, len: u64| Val::Arr(s.slice(f, &[(axis, lo, len)]));
    let edge = |s: &mut Builder, lo: u64, along: &mut Vec<u64>| -> Result<NodeId, EvalError> {
        let h = diff(s, lo, 1)?;
        let h = shaped(s, h, 1, along)?;
        let (a, c) = (fs(s, lo + 1, 1), fs(s, lo, 1));
        let v = s.elementwise2(BinaryOp::Sub, a, c, b.pos)?;
        let v = s.elementwise2(BinaryOp::Div, v, h, b.pos)?;
        s.node(v, b.pos)
    };
    let mut parts = vec![edge(s, 0, &mut along)?];
    if n > 2 {
        let k = n - 2;
        let d1 = diff(s, 0, k)?;
        let d2 = diff(s, 1, k)?;
        let sum = s.elementwise2(BinaryOp::Add, d1.clone(), d2.clone(), b.pos)?;
        // a = -d2 / (d1 (d1 + d2)), b = (d2 - d1) / (d1 d2), c = d1 / (d2 (d1 + d2))
        let neg = s.elementwise2(
            BinaryOp::Sub,
            Val::Num(Scalar::Float(0.0)),
            d2.clone(),
            b.pos,
        )?;
        let den = s.elementwise2(BinaryOp::Mul, d1.clone(), sum.clone(), b.pos)?;
        let wa = s.elementwise2(BinaryOp::Div, neg, den, b.pos)?;
        let num = s.elementwise2(BinaryOp::Sub, d2.clone(), d1.clone(), b.pos)?;
        let den = s.elementwise2(BinaryOp::Mul, d1.clone(), d2.clone(), b.pos)?;
        let wb = s.elementwise2(BinaryOp::Div, num, den, b.pos)?;
        let den = s.elementwise2(BinaryOp::Mul, d2, sum, b.pos)?;
        let wc = s.elementwise2(BinaryOp::Div, d1, den, b.pos)?;
        let mut acc: Option<Val> = None;
        for (w, lo) in [(wa, 0), (wb, 1), (wc, 2)] {
            let w = shaped(s, w, k, &mut along)?;
            let f = fs(s, lo, k);
            let t = s.elementwise2(BinaryOp::Mul, w, f, b.pos)?;
            acc = Some(match acc {
                None => t,
                Some(a) => s.elementwise2(BinaryOp::Add, a, t, b.pos)?,
            });
        }
        let mid = acc.expect("three terms");
        parts.push(s.node(mid, b.pos)?);
    }
    parts.push(edge(s, n - 2, &mut along)?);
    let g = s.concat(parts, axis, b.pos)?;
    Ok(s.cast(g, m.dtype))
}

fn gradient(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let rest = b.rest();
    let Some((f, p)) = rest.first().cloned() else {
        return Err(b.err(b.pos, "gradient() is missing the argument \"f\""));
    };
    let f = s.list_operand(f, p)?;
    let f = s.node(f, p)?;
    let m = s.meta(f).clone();
    if m.dtype == DType::Bool {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            p,
            "gradient(): f of bools cannot be subtracted (NumPy raises TypeError)",
        ));
    }
    let f = if m.dtype.is_int() {
        s.cast(f, DType::Float64)
    } else {
        f
    };
    let axes: Vec<usize> = match b.get("axis") {
        None => (0..m.ndim()).collect(),
        Some((Val::Tuple(t), p)) => t
            .iter()
            .map(|a| axis_of(a, m.ndim()).map_err(|e| b.refused(*p, e)))
            .collect::<Result<_, _>>()?,
        Some((a, p)) => vec![axis_of(a, m.ndim()).map_err(|e| b.refused(*p, e))?],
    };
    if b.int("edge_order")?.is_some_and(|e| e != 1) {
        return Err(b.err(b.pos, "gradient(): only edge_order=1 is supported"));
    }
    let spacing: Vec<Val> = rest[1..].iter().map(|(v, _)| v.clone()).collect();
    let dx = |i: usize| -> Result<Val, EvalError> {
        let v = match spacing.len() {
            0 => return Ok(Val::Num(Scalar::Float(1.0))),
            1 => &spacing[0],
            n if n == axes.len() => &spacing[i],
            _ => {
                return Err(b.err(
                    b.pos,
                    "gradient(): invalid number of arguments (one spacing, or one per axis)",
                ));
            }
        };
        match v {
            Val::Num(x) => Ok(Val::Num(Scalar::Float(x.as_f64()))),
            v => Ok(v.clone()),
        }
    };
    let mut out = Vec::new();
    for (i, &axis) in axes.iter().enumerate() {
        let n = m.shape[axis];
        if n < 2 {
            return Err(b.err(
                b.pos,
                "gradient(): Shape of array too small to calculate a numerical gradient, at least (edge_order + 1) elements are required.",
            ));
        }
        let d = dx(i)?;
        if !matches!(d, Val::Num(_)) {
            // Coordinates along the axis: NumPy's second-order differences of uneven
            // spacing, first-order at the edges.
            let g = gradient_at(s, b, f, axis, d)?;
            out.push(Val::Arr(g));
            continue;
        }
        let two_d = match &d {
            Val::Num(x) => Val::Num(Scalar::Float(2.0 * x.as_f64())),
            v => v.clone(),
        };
        let part =
            |s: &mut Builder, hi: u64, lo: u64, len: u64, by: Val| -> Result<NodeId, EvalError> {
                let a = s.slice(f, &[(axis, hi, len)]);
                let c = s.slice(f, &[(axis, lo, len)]);
                let v = s.elementwise2(BinaryOp::Sub, Val::Arr(a), Val::Arr(c), b.pos)?;
                let v = s.elementwise2(BinaryOp::Div, v, by, b.pos)?;
                s.node(v, b.pos)
            };
        let first = part(s, 1, 0, 1, d.clone())?;
        let last = part(s, n - 1, n - 2, 1, d.clone())?;
        let mut parts = vec![first];
        if n > 2 {
            parts.push(part(s, 2, 0, n - 2, two_d)?);
        }
        parts.push(last);
        out.push(Val::Arr(s.concat(parts, axis, b.pos)?));
    }
    Ok(if out.len() == 1 {
        out.pop().expect("one axis")
    } else {
        Val::Tuple(out)
    })
}
