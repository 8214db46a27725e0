//! The functions of the expression language, NumPy's names and signatures, each turned
//! into graph nodes. Composite ones (mean, var, argmax, clip, ...) are built from the
//! primitive nodes, so that every block kernel stays small.

use super::*;
use crate::expr::Kwarg;

/// Functions the expression language knows (README's table is checked against this).
pub const SUPPORTED_FUNCTIONS: &[&str] = &[
    "abs",
    "absolute",
    "add",
    "all",
    "amax",
    "amin",
    "any",
    "arange",
    "argmax",
    "argmin",
    "astype",
    "ceil",
    "clip",
    "concatenate",
    "cos",
    "divide",
    "dot",
    "einsum",
    "equal",
    "exp",
    "expand_dims",
    "expit",
    "expm1",
    "eye",
    "floor",
    "floor_divide",
    "full",
    "full_like",
    "greater",
    "greater_equal",
    "hstack",
    "identity",
    "inner",
    "isfinite",
    "isinf",
    "isnan",
    "less",
    "less_equal",
    "linspace",
    "log",
    "log1p",
    "logical_and",
    "logical_not",
    "logical_or",
    "logical_xor",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "mod",
    "multiply",
    "nanargmax",
    "nanargmin",
    "nanmax",
    "nanmean",
    "nanmin",
    "nanprod",
    "nanstd",
    "nansum",
    "nanvar",
    "negative",
    "not_equal",
    "ones",
    "ones_like",
    "outer",
    "power",
    "prod",
    "ravel",
    "remainder",
    "reshape",
    "sigmoid",
    "sign",
    "sin",
    "sqrt",
    "square",
    "squeeze",
    "stack",
    "std",
    "subtract",
    "sum",
    "swapaxes",
    "tan",
    "tanh",
    "tensordot",
    "trace",
    "transpose",
    "true_divide",
    "var",
    "vstack",
    "where",
    "zeros",
    "zeros_like",
];

/// The parameters of each function, in NumPy's positional order.
fn params(f: &str) -> Option<&'static [&'static str]> {
    Some(match f {
        "sum" | "prod" | "nansum" | "nanprod" | "mean" | "nanmean" => {
            &["a", "axis", "dtype", "out", "keepdims"]
        }
        "min" | "max" | "amin" | "amax" | "nanmin" | "nanmax" | "all" | "any" | "argmin"
        | "argmax" | "nanargmin" | "nanargmax" => &["a", "axis", "out", "keepdims"],
        "std" | "var" | "nanstd" | "nanvar" => &["a", "axis", "dtype", "out", "ddof", "keepdims"],
        "where" => &["condition", "x", "y"],
        "clip" => &["a", "a_min", "a_max"],
        "matmul" | "dot" | "outer" | "inner" => &["a", "b"],
        "tensordot" => &["a", "b", "axes"],
        "trace" => &["a", "offset", "axis1", "axis2"],
        "zeros" | "ones" => &["shape", "dtype"],
        "full" => &["shape", "fill_value", "dtype"],
        "zeros_like" | "ones_like" => &["a", "dtype"],
        "full_like" => &["a", "fill_value", "dtype"],
        "eye" => &["N", "M", "k", "dtype"],
        "identity" => &["n", "dtype"],
        "arange" => &["start", "stop", "step", "dtype"],
        "linspace" => &["start", "stop", "num", "endpoint", "dtype"],
        "transpose" => &["a", "axes"],
        "swapaxes" => &["a", "axis1", "axis2"],
        "reshape" => &["a", "shape"],
        "ravel" => &["a"],
        "expand_dims" | "squeeze" => &["a", "axis"],
        "concatenate" | "stack" => &["arrays", "axis"],
        "vstack" | "hstack" => &["tup"],
        "astype" => &["a", "dtype"],
        f if unary_op(f).is_some() => &["x"],
        f if binary_op(f).is_some() => &["x1", "x2"],
        _ => return None,
    })
}

fn unary_op(f: &str) -> Option<UnaryOp> {
    Some(match f {
        "exp" => UnaryOp::Exp,
        "expm1" => UnaryOp::Expm1,
        "log" => UnaryOp::Log,
        "log1p" => UnaryOp::Log1p,
        "sqrt" => UnaryOp::Sqrt,
        "square" => UnaryOp::Square,
        "sign" => UnaryOp::Sign,
        "sin" => UnaryOp::Sin,
        "cos" => UnaryOp::Cos,
        "tan" => UnaryOp::Tan,
        "tanh" => UnaryOp::Tanh,
        "floor" => UnaryOp::Floor,
        "ceil" => UnaryOp::Ceil,
        "abs" | "absolute" => UnaryOp::Abs,
        "sigmoid" | "expit" => UnaryOp::Sigmoid,
        "negative" => UnaryOp::Neg,
        "logical_not" => UnaryOp::Not,
        "isnan" => UnaryOp::IsNan,
        "isfinite" => UnaryOp::IsFinite,
        "isinf" => UnaryOp::IsInf,
        _ => return None,
    })
}

fn binary_op(f: &str) -> Option<BinaryOp> {
    Some(match f {
        "add" => BinaryOp::Add,
        "subtract" => BinaryOp::Sub,
        "multiply" => BinaryOp::Mul,
        "divide" | "true_divide" => BinaryOp::Div,
        "power" => BinaryOp::Pow,
        "floor_divide" => BinaryOp::FloorDiv,
        "mod" | "remainder" => BinaryOp::Mod,
        "maximum" => BinaryOp::Maximum,
        "minimum" => BinaryOp::Minimum,
        "logical_and" => BinaryOp::And,
        "logical_or" => BinaryOp::Or,
        "logical_xor" => BinaryOp::Xor,
        "equal" => BinaryOp::Eq,
        "not_equal" => BinaryOp::Ne,
        "less" => BinaryOp::Lt,
        "less_equal" => BinaryOp::Le,
        "greater" => BinaryOp::Gt,
        "greater_equal" => BinaryOp::Ge,
        _ => return None,
    })
}

fn reduce_op(f: &str) -> Option<ReduceOp> {
    Some(match f {
        "sum" => ReduceOp::Sum,
        "prod" => ReduceOp::Prod,
        "min" | "amin" => ReduceOp::Min,
        "max" | "amax" => ReduceOp::Max,
        "all" => ReduceOp::All,
        "any" => ReduceOp::Any,
        "nansum" => ReduceOp::NanSum,
        "nanprod" => ReduceOp::NanProd,
        "nanmin" => ReduceOp::NanMin,
        "nanmax" => ReduceOp::NanMax,
        _ => return None,
    })
}

/// Evaluated arguments, bound to a function's parameters.
struct Bound {
    f: String,
    pos: usize,
    vals: Vec<Option<(Val, usize)>>,
    names: &'static [&'static str],
}

impl Bound {
    fn get(&self, name: &str) -> Option<&(Val, usize)> {
        let i = self.names.iter().position(|n| *n == name)?;
        self.vals[i]
            .as_ref()
            .filter(|(v, _)| !matches!(v, Val::None))
    }

    fn err(&self, pos: usize, m: String) -> EvalError {
        EvalError::Expr(ExprError::new(pos, m))
    }

    fn need(&self, name: &str) -> Result<&(Val, usize), EvalError> {
        self.get(name).ok_or_else(|| {
            self.err(
                self.pos,
                format!("{}() is missing the argument {name:?}", self.f),
            )
        })
    }

    fn array(&self, name: &str) -> Result<NodeId, EvalError> {
        match self.need(name)? {
            (Val::Arr(id), _) => Ok(*id),
            (_, p) => Err(self.err(*p, format!("{}(): {name} must be an array", self.f))),
        }
    }

    fn int(&self, name: &str) -> Result<Option<i64>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            Some((Val::Num(v, k), _)) if *k != ScalarKind::Float || v.fract() == 0.0 => {
                Ok(Some(*v as i64))
            }
            Some((_, p)) => Err(self.err(*p, format!("{}(): {name} must be an integer", self.f))),
        }
    }

    fn num(&self, name: &str) -> Result<Option<(f64, ScalarKind)>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            Some((Val::Num(v, k), _)) => Ok(Some((*v, *k))),
            Some((_, p)) => Err(self.err(*p, format!("{}(): {name} must be a number", self.f))),
        }
    }

    fn flag(&self, name: &str) -> Result<bool, EvalError> {
        Ok(self.num(name)?.is_some_and(|(v, _)| v != 0.0))
    }

    fn dtype(&self, name: &str) -> Result<Option<DType>, EvalError> {
        match self.get(name) {
            None => Ok(None),
            Some((Val::Str(s), p)) => DType::parse(s).map(Some).ok_or_else(|| {
                self.err(
                    *p,
                    format!("unsupported dtype {s:?}; supported: float64, float32, int64, bool"),
                )
            }),
            Some((_, p)) => Err(self.err(
                *p,
                format!("{}(): dtype is a string such as \"float32\"", self.f),
            )),
        }
    }

    /// A shape: an int or a tuple of ints, every size positive.
    fn shape(&self, name: &str) -> Result<Vec<u64>, EvalError> {
        let (v, p) = self.need(name)?;
        let items = match v {
            Val::Tuple(t) => t.clone(),
            v => vec![v.clone()],
        };
        items
            .iter()
            .map(|v| match v {
                Val::Num(x, k) if *k != ScalarKind::Float && *x >= 1.0 => Ok(*x as u64),
                _ => Err(self.err(
                    *p,
                    format!("{}(): {name} must be positive integers", self.f),
                )),
            })
            .collect()
    }

    /// Refuses arguments nums-cloud does not take (`out=`, `dtype=` of reductions).
    fn unsupported(&self, names: &[&str]) -> Result<(), EvalError> {
        for n in names {
            if let Some((_, p)) = self.get(n) {
                return Err(self.err(
                    *p,
                    format!("{}(): the argument {n:?} is not supported", self.f),
                ));
            }
        }
        Ok(())
    }
}

impl<'a> Builder<'a> {
    fn bind(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[Kwarg],
        pos: usize,
    ) -> Result<Bound, EvalError> {
        let at = |p: usize, m: String| EvalError::Expr(ExprError::new(p, m));
        let names = params(f).ok_or_else(|| {
            at(
                pos,
                format!(
                    "unknown function {f}(); supported: {}",
                    SUPPORTED_FUNCTIONS.join(", ")
                ),
            )
        })?;
        let mut vals: Vec<Option<(Val, usize)>> = vec![None; names.len()];
        // `x.reshape(2, 3)` and `x.transpose(1, 0)`: the trailing integers are one tuple.
        let varargs = matches!(f, "reshape" | "transpose") && args.len() > 2;
        for (i, a) in args.iter().enumerate() {
            if varargs && i >= 1 {
                break;
            }
            if i >= names.len() {
                return Err(at(
                    a.pos,
                    format!(
                        "{f}() takes at most {} positional arguments ({}), got {}",
                        names.len(),
                        names.join(", "),
                        args.len()
                    ),
                ));
            }
            vals[i] = Some((self.eval(a)?, a.pos));
        }
        if varargs {
            let items = args[1..]
                .iter()
                .map(|a| self.eval(a))
                .collect::<Result<Vec<_>, _>>()?;
            vals[1] = Some((Val::Tuple(items), args[1].pos));
        }
        for Kwarg {
            name: k,
            pos: kpos,
            value: v,
        } in kwargs
        {
            let Some(i) = names.iter().position(|n| n == k) else {
                return Err(at(
                    *kpos,
                    format!(
                        "{f}() got an unexpected keyword argument {k:?}; it takes {}",
                        names.join(", ")
                    ),
                ));
            };
            if vals[i].is_some() {
                return Err(at(*kpos, format!("{f}() got multiple values for {k:?}")));
            }
            vals[i] = Some((self.eval(v)?, v.pos));
        }
        Ok(Bound {
            f: f.to_string(),
            pos,
            vals,
            names,
        })
    }

    pub(super) fn call(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[Kwarg],
        pos: usize,
    ) -> Result<Val, EvalError> {
        let at = |p: usize, m: String| EvalError::Expr(ExprError::new(p, m));
        if f == "einsum" {
            // einsum(subscripts, *operands)
            if let Some(k) = kwargs.first() {
                return Err(at(
                    k.pos,
                    format!("einsum() got an unexpected keyword argument {:?}", k.name),
                ));
            }
            let Some(first) = args.first() else {
                return Err(at(pos, "einsum() takes the subscripts string first".into()));
            };
            let Val::Str(s) = self.eval(first)? else {
                return Err(at(
                    first.pos,
                    "einsum() takes the subscripts string first".into(),
                ));
            };
            let mut xs = Vec::new();
            for a in &args[1..] {
                match self.eval(a)? {
                    Val::Arr(id) => xs.push(id),
                    _ => return Err(at(a.pos, "einsum operands are arrays".into())),
                }
            }
            return self.einsum(&s, xs, pos);
        }
        let b = self.bind(f, args, kwargs, pos)?;
        let axes_arg = |s: &Self, b: &Bound, x: NodeId| -> Result<Vec<usize>, EvalError> {
            let ndim = s.meta(x).ndim();
            match b.get("axis") {
                None => Ok((0..ndim).collect()),
                Some((v, p)) => axes_of(v, ndim).map_err(|m| at(*p, m)),
            }
        };
        if let Some(op) = unary_op(f) {
            let (v, _) = b.need("x")?.clone();
            return self.unary(op, v, pos);
        }
        if let Some(op) = binary_op(f) {
            let (mut x1, _) = b.need("x1")?.clone();
            let (mut x2, _) = b.need("x2")?.clone();
            if op.is_logical() {
                // NumPy's logical functions read any number as true when non-zero.
                for v in [&mut x1, &mut x2] {
                    match v {
                        Val::Arr(id) => *v = Val::Arr(self.cast(*id, DType::Bool)),
                        Val::Num(x, _) => *v = Val::Num((*x != 0.0) as u8 as f64, ScalarKind::Bool),
                        _ => {}
                    }
                }
            }
            return self.elementwise2(op, x1, x2, pos);
        }
        if let Some(op) = reduce_op(f) {
            b.unsupported(&["dtype", "out"])?;
            let x = b.array("a")?;
            let axes = axes_arg(self, &b, x)?;
            return Ok(Val::Arr(self.reduce(x, op, axes, b.flag("keepdims")?)));
        }
        match f {
            "mean" | "nanmean" => {
                b.unsupported(&["dtype", "out"])?;
                let x = b.array("a")?;
                let axes = axes_arg(self, &b, x)?;
                Ok(Val::Arr(self.mean(
                    x,
                    axes,
                    b.flag("keepdims")?,
                    f == "nanmean",
                    pos,
                )?))
            }
            "var" | "std" | "nanvar" | "nanstd" => {
                b.unsupported(&["dtype", "out"])?;
                let x = b.array("a")?;
                let axes = axes_arg(self, &b, x)?;
                let ddof = b.num("ddof")?.map_or(0.0, |v| v.0);
                let nan = f.starts_with("nan");
                let v = self.var(x, axes, b.flag("keepdims")?, ddof, nan, pos)?;
                if f.ends_with("std") {
                    self.unary(UnaryOp::Sqrt, Val::Arr(v), pos)
                } else {
                    Ok(Val::Arr(v))
                }
            }
            "argmin" | "argmax" | "nanargmin" | "nanargmax" => {
                b.unsupported(&["out"])?;
                let x = b.array("a")?;
                let axis = match b.get("axis") {
                    None => None,
                    Some((v, p)) => {
                        let ax = axes_of(v, self.meta(x).ndim()).map_err(|m| at(*p, m))?;
                        match ax.as_slice() {
                            [a] if matches!(v, Val::Num(..)) => Some(*a),
                            _ => return Err(at(*p, format!("{f}(): axis must be an integer"))),
                        }
                    }
                };
                Ok(Val::Arr(self.arg_extreme(
                    x,
                    axis,
                    b.flag("keepdims")?,
                    f.ends_with("max"),
                    f.starts_with("nan"),
                    pos,
                )?))
            }
            "where" => {
                let c = b.need("condition")?.clone();
                let (x, y) = match (b.get("x"), b.get("y")) {
                    (Some(x), Some(y)) => (x.clone(), y.clone()),
                    _ => {
                        return Err(at(
                            pos,
                            "where() needs three arguments (condition, x, y); the one-argument form is not supported"
                                .into(),
                        ));
                    }
                };
                let c = match c.0 {
                    Val::Arr(id) => Val::Arr(self.cast(id, DType::Bool)),
                    v => v,
                };
                self.where_(c, x.0, y.0, pos)
            }
            "clip" => {
                let (mut v, _) = b.need("a")?.clone();
                if let Some((lo, _)) = b.get("a_min") {
                    v = self.elementwise2(BinaryOp::Maximum, v, lo.clone(), pos)?;
                }
                if let Some((hi, _)) = b.get("a_max") {
                    v = self.elementwise2(BinaryOp::Minimum, v, hi.clone(), pos)?;
                }
                Ok(v)
            }
            "matmul" => {
                let (x, y) = (b.array("a")?, b.array("b")?);
                self.matmul(x, y, pos)
            }
            "dot" => {
                let (va, vb) = (b.need("a")?.0.clone(), b.need("b")?.0.clone());
                let (Val::Arr(x), Val::Arr(y)) = (&va, &vb) else {
                    return self.elementwise2(BinaryOp::Mul, va, vb, pos);
                };
                let (x, y) = (*x, *y);
                let (na, nb) = (self.meta(x).ndim(), self.meta(y).ndim());
                if na <= 2 && nb <= 2 {
                    return self.matmul(x, y, pos);
                }
                // dot(a, b)[i.., j..] = sum(a[i.., :] * b[j.., :, k]): a's last axis with
                // b's second to last.
                let la: String = letters(0, na);
                let mut lb: Vec<char> = letters(na, nb).chars().collect();
                let k = la.chars().last().expect("ndim > 0");
                lb[nb - 2] = k;
                let out: String = la
                    .chars()
                    .chain(lb.iter().copied())
                    .filter(|&c| c != k)
                    .collect();
                let lb: String = lb.into_iter().collect();
                self.einsum(&format!("{la},{lb}->{out}"), vec![x, y], pos)
            }
            "inner" => {
                let (x, y) = (b.array("a")?, b.array("b")?);
                let (na, nb) = (self.meta(x).ndim(), self.meta(y).ndim());
                if na == 0 || nb == 0 {
                    return self.elementwise2(BinaryOp::Mul, Val::Arr(x), Val::Arr(y), pos);
                }
                let mut la: Vec<char> = letters(0, na).chars().collect();
                let mut lb: Vec<char> = letters(na, nb).chars().collect();
                la[na - 1] = 'z';
                lb[nb - 1] = 'z';
                let out: String = la[..na - 1].iter().chain(&lb[..nb - 1]).collect();
                let (la, lb): (String, String) =
                    (la.into_iter().collect(), lb.into_iter().collect());
                self.einsum(&format!("{la},{lb}->{out}"), vec![x, y], pos)
            }
            "outer" => {
                let (x, y) = (b.array("a")?, b.array("b")?);
                let (lx, ly) = (self.meta(x).len(), self.meta(y).len());
                let x = self.reshape(x, &[lx]);
                let y = self.reshape(y, &[ly]);
                self.einsum("i,j->ij", vec![x, y], pos)
            }
            "tensordot" => {
                let (x, y) = (b.array("a")?, b.array("b")?);
                let (na, nb) = (self.meta(x).ndim(), self.meta(y).ndim());
                let (ax, ay): (Vec<usize>, Vec<usize>) = match b.get("axes") {
                    None => (
                        (na.saturating_sub(2)..na).collect(),
                        (0..2.min(nb)).collect(),
                    ),
                    Some((Val::Num(k, _), p)) => {
                        let k = *k as usize;
                        if k > na || k > nb {
                            return Err(at(
                                *p,
                                format!("tensordot: axes={k} is more than the operands have"),
                            ));
                        }
                        ((na - k..na).collect(), (0..k).collect())
                    }
                    Some((Val::Tuple(t), p)) if t.len() == 2 => {
                        let list = |v: &Val, n: usize| -> Result<Vec<usize>, EvalError> {
                            let items = match v {
                                Val::Tuple(t) => t.clone(),
                                v => vec![v.clone()],
                            };
                            items
                                .iter()
                                .map(|i| match i {
                                    Val::Num(x, _) => one_axis(*x as i64, n)
                                        .map_err(|m| at(*p, format!("tensordot: {m}"))),
                                    _ => Err(at(*p, "tensordot: axes are integers".into())),
                                })
                                .collect()
                        };
                        (list(&t[0], na)?, list(&t[1], nb)?)
                    }
                    Some((_, p)) => {
                        return Err(at(
                            *p,
                            "tensordot: axes is an integer or a pair of axis lists".into(),
                        ));
                    }
                };
                if ax.len() != ay.len() {
                    return Err(at(
                        pos,
                        format!("tensordot: {} axes of a but {} of b", ax.len(), ay.len()),
                    ));
                }
                let la: Vec<char> = letters(0, na).chars().collect();
                let mut lb: Vec<char> = letters(na, nb).chars().collect();
                for (&i, &j) in ax.iter().zip(&ay) {
                    lb[j] = la[i];
                }
                let out: String = (0..na)
                    .filter(|i| !ax.contains(i))
                    .map(|i| la[i])
                    .chain((0..nb).filter(|j| !ay.contains(j)).map(|j| lb[j]))
                    .collect();
                let (la, lb): (String, String) =
                    (la.into_iter().collect(), lb.into_iter().collect());
                self.einsum(&format!("{la},{lb}->{out}"), vec![x, y], pos)
            }
            "trace" => {
                let x = b.array("a")?;
                let n = self.meta(x).ndim();
                if b.int("offset")?.unwrap_or(0) != 0 {
                    return Err(at(pos, "trace(): only offset=0 is supported".into()));
                }
                let one = |v: Option<i64>, d: i64| -> Result<usize, EvalError> {
                    one_axis(v.unwrap_or(d), n).map_err(|m| at(pos, format!("trace(): {m}")))
                };
                if n < 2 {
                    return Err(at(
                        pos,
                        "trace() needs an array of at least 2 dimensions".into(),
                    ));
                }
                let (a1, a2) = (one(b.int("axis1")?, 0)?, one(b.int("axis2")?, 1)?);
                if a1 == a2 {
                    return Err(at(pos, "trace(): axis1 and axis2 are the same".into()));
                }
                let mut l: Vec<char> = letters(0, n).chars().collect();
                l[a2] = l[a1];
                let out: String = (0..n)
                    .filter(|&d| d != a1 && d != a2)
                    .map(|d| l[d])
                    .collect();
                let l: String = l.into_iter().collect();
                self.einsum(&format!("{l}->{out}"), vec![x], pos)
            }
            "zeros" | "ones" | "full" => {
                let shape = b.shape("shape")?;
                let (value, kind) = match f {
                    "zeros" => (0.0, ScalarKind::Float),
                    "ones" => (1.0, ScalarKind::Float),
                    _ => b
                        .num("fill_value")?
                        .ok_or_else(|| at(pos, "full() needs fill_value".into()))?,
                };
                let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(kind));
                let m = self.default_meta(shape, dtype);
                Ok(Val::Arr(self.add(m, NodeOp::Fill { value })))
            }
            "zeros_like" | "ones_like" | "full_like" => {
                let x = b.array("a")?;
                let m = self.meta(x).clone();
                let value = match f {
                    "zeros_like" => 0.0,
                    "ones_like" => 1.0,
                    _ => {
                        b.num("fill_value")?
                            .ok_or_else(|| at(pos, "full_like() needs fill_value".into()))?
                            .0
                    }
                };
                let dtype = b.dtype("dtype")?.unwrap_or(m.dtype);
                Ok(Val::Arr(
                    self.add(ArrayMeta { dtype, ..m }, NodeOp::Fill { value }),
                ))
            }
            "eye" | "identity" => {
                let n = b.int(if f == "eye" { "N" } else { "n" })?.unwrap_or(0);
                let m = b.int("M")?.unwrap_or(n);
                if n < 1 || m < 1 {
                    return Err(at(pos, format!("{f}(): sizes must be positive")));
                }
                let k = b.int("k")?.unwrap_or(0);
                let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
                let meta = self.default_meta(vec![n as u64, m as u64], dtype);
                Ok(Val::Arr(self.add(meta, NodeOp::Eye { k })))
            }
            "arange" => {
                let a = b
                    .num("start")?
                    .ok_or_else(|| at(pos, "arange() needs a stop".into()))?;
                let (start, stop) = match b.num("stop")? {
                    Some(s) => (a, s),
                    None => ((0.0, ScalarKind::Int), a),
                };
                let step = b.num("step")?.unwrap_or((1.0, ScalarKind::Int));
                if step.0 == 0.0 {
                    return Err(at(pos, "arange(): step cannot be zero".into()));
                }
                let n = ((stop.0 - start.0) / step.0).ceil();
                if n.is_nan() || n < 1.0 {
                    return Err(at(
                        pos,
                        "arange() is empty; nums-cloud arrays are not empty".into(),
                    ));
                }
                let kind = start.1.max(stop.1).max(step.1).max(ScalarKind::Int);
                let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(kind));
                let m = self.default_meta(vec![n as u64], dtype);
                Ok(Val::Arr(self.add(
                    m,
                    NodeOp::Iota {
                        axis: 0,
                        start: start.0,
                        step: step.0,
                    },
                )))
            }
            "linspace" => {
                let start = b
                    .num("start")?
                    .ok_or_else(|| at(pos, "linspace() needs start".into()))?
                    .0;
                let stop = b
                    .num("stop")?
                    .ok_or_else(|| at(pos, "linspace() needs stop".into()))?
                    .0;
                let num = b.int("num")?.unwrap_or(50);
                if num < 1 {
                    return Err(at(pos, "linspace(): num must be positive".into()));
                }
                let endpoint = b.get("endpoint").is_none() || b.flag("endpoint")?;
                let div = if endpoint { (num - 1).max(1) } else { num } as f64;
                let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
                let m = self.default_meta(vec![num as u64], dtype);
                Ok(Val::Arr(self.add(
                    m,
                    NodeOp::Iota {
                        axis: 0,
                        start,
                        step: (stop - start) / div,
                    },
                )))
            }
            "transpose" => {
                let x = b.array("a")?;
                let n = self.meta(x).ndim();
                let perm = match b.get("axes") {
                    None => (0..n).rev().collect(),
                    Some((v, p)) => {
                        let Val::Tuple(t) = v else {
                            return Err(at(*p, "transpose(): axes is a tuple".into()));
                        };
                        let mut perm = Vec::new();
                        for i in t {
                            perm.push(axes_of(i, n).map_err(|m| at(*p, m))?[0]);
                        }
                        let mut sorted = perm.clone();
                        sorted.sort_unstable();
                        if sorted != (0..n).collect::<Vec<_>>() {
                            return Err(at(
                                *p,
                                format!(
                                    "transpose(): axes {perm:?} are not a permutation of 0..{n}"
                                ),
                            ));
                        }
                        perm
                    }
                };
                Ok(Val::Arr(self.transpose(x, perm)))
            }
            "swapaxes" => {
                let x = b.array("a")?;
                let n = self.meta(x).ndim();
                let one = |name: &str| -> Result<usize, EvalError> {
                    let v = b
                        .int(name)?
                        .ok_or_else(|| at(pos, format!("swapaxes() needs {name}")))?;
                    one_axis(v, n).map_err(|m| at(pos, m))
                };
                let (a1, a2) = (one("axis1")?, one("axis2")?);
                let mut perm: Vec<usize> = (0..n).collect();
                perm.swap(a1, a2);
                Ok(Val::Arr(self.transpose(x, perm)))
            }
            "reshape" | "ravel" => {
                let x = b.array("a")?;
                let len = self.meta(x).len();
                let shape: Vec<i64> = if f == "ravel" {
                    vec![-1]
                } else {
                    let (v, p) = b.need("shape")?;
                    let items = match v {
                        Val::Tuple(t) => t.clone(),
                        v => vec![v.clone()],
                    };
                    items
                        .iter()
                        .map(|i| match i {
                            Val::Num(x, k) if *k != ScalarKind::Float => Ok(*x as i64),
                            _ => Err(at(*p, "reshape(): sizes are integers".into())),
                        })
                        .collect::<Result<_, _>>()?
                };
                let known: i64 = shape.iter().filter(|&&s| s != -1).product();
                let free = shape.iter().filter(|&&s| s == -1).count();
                let bad = || {
                    at(
                        pos,
                        format!("cannot reshape an array of size {len} into shape {shape:?}"),
                    )
                };
                if free > 1 || shape.iter().any(|&s| s == 0 || s < -1) || known <= 0 {
                    return Err(bad());
                }
                let shape: Vec<u64> = shape
                    .iter()
                    .map(|&s| {
                        if s == -1 {
                            len / known as u64
                        } else {
                            s as u64
                        }
                    })
                    .collect();
                if shape.iter().product::<u64>() != len {
                    return Err(bad());
                }
                Ok(Val::Arr(self.reshape(x, &shape)))
            }
            "expand_dims" | "squeeze" => {
                let x = b.array("a")?;
                let m = self.meta(x).clone();
                let shape = if f == "expand_dims" {
                    let (v, p) = b.need("axis")?;
                    let axes = axes_of(
                        v,
                        m.ndim()
                            + match v {
                                Val::Tuple(t) => t.len(),
                                _ => 1,
                            },
                    )
                    .map_err(|e| at(*p, e))?;
                    let mut src = m.shape.iter();
                    (0..m.ndim() + axes.len())
                        .map(|d| {
                            if axes.contains(&d) {
                                1
                            } else {
                                *src.next().expect("sizes")
                            }
                        })
                        .collect::<Vec<u64>>()
                } else {
                    let axes = match b.get("axis") {
                        None => (0..m.ndim()).filter(|&d| m.shape[d] == 1).collect(),
                        Some((v, p)) => {
                            let axes = axes_of(v, m.ndim()).map_err(|e| at(*p, e))?;
                            if let Some(&d) = axes.iter().find(|&&d| m.shape[d] != 1) {
                                return Err(at(
                                    *p,
                                    format!("squeeze(): axis {d} has size {}, not 1", m.shape[d]),
                                ));
                            }
                            axes
                        }
                    };
                    (0..m.ndim())
                        .filter(|d| !axes.contains(d))
                        .map(|d| m.shape[d])
                        .collect()
                };
                Ok(Val::Arr(self.reshape(x, &shape)))
            }
            "concatenate" | "stack" | "vstack" | "hstack" => {
                let (v, p) = b
                    .need(if f.ends_with("stack") && f != "stack" {
                        "tup"
                    } else {
                        "arrays"
                    })?
                    .clone();
                let Val::Tuple(items) = v else {
                    return Err(at(p, format!("{f}() takes a tuple or list of arrays")));
                };
                let mut xs = Vec::new();
                for i in items {
                    match i {
                        Val::Arr(id) => xs.push(id),
                        _ => return Err(at(p, format!("{f}(): every item must be an array"))),
                    }
                }
                if xs.is_empty() {
                    return Err(at(p, format!("{f}() needs at least one array")));
                }
                let n = self.meta(xs[0]).ndim();
                let axis_v = b.get("axis").map(|(v, _)| v.clone());
                let axis = |ndim: usize| -> Result<usize, EvalError> {
                    match &axis_v {
                        None => Ok(0),
                        Some(v) => axes_of(v, ndim).map(|a| a[0]).map_err(|m| at(p, m)),
                    }
                };
                match f {
                    "stack" => {
                        let ax = axis(n + 1)?;
                        let xs: Vec<NodeId> = xs
                            .into_iter()
                            .map(|x| {
                                let mut s = self.meta(x).shape.clone();
                                s.insert(ax, 1);
                                self.reshape(x, &s)
                            })
                            .collect();
                        Ok(Val::Arr(self.concat(xs, ax, pos)?))
                    }
                    "vstack" => {
                        let xs: Vec<NodeId> = xs
                            .into_iter()
                            .map(|x| {
                                let s = self.meta(x).shape.clone();
                                if s.len() == 1 {
                                    self.reshape(x, &[1, s[0]])
                                } else {
                                    x
                                }
                            })
                            .collect();
                        Ok(Val::Arr(self.concat(xs, 0, pos)?))
                    }
                    "hstack" => Ok(Val::Arr(self.concat(
                        xs,
                        if n == 1 { 0 } else { 1 },
                        pos,
                    )?)),
                    _ => {
                        if n == 0 {
                            return Err(at(p, "concatenate() of 0-d arrays".into()));
                        }
                        let ax = axis(n)?;
                        Ok(Val::Arr(self.concat(xs, ax, pos)?))
                    }
                }
            }
            "astype" => {
                let x = b.array("a")?;
                let d = b
                    .dtype("dtype")?
                    .ok_or_else(|| at(pos, "astype() needs a dtype".into()))?;
                Ok(Val::Arr(self.cast(x, d)))
            }
            _ => unreachable!("every function with params is handled: {f}"),
        }
    }

    fn count_over(&self, x: NodeId, axes: &[usize]) -> u64 {
        let m = self.meta(x);
        axes.iter().map(|&d| m.shape[d]).product()
    }

    fn mean(
        &mut self,
        x: NodeId,
        axes: Vec<usize>,
        keepdims: bool,
        nan: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let fdt = self.meta(x).dtype.to_float();
        if !nan {
            let n = self.count_over(x, &axes);
            let s = self.reduce(x, ReduceOp::Sum, axes, keepdims);
            let s = self.cast(s, fdt);
            let v = self.elementwise2(
                BinaryOp::Div,
                Val::Arr(s),
                Val::Num(n as f64, ScalarKind::Int),
                pos,
            )?;
            return self.node(v, pos);
        }
        let s = self.reduce(x, ReduceOp::NanSum, axes.clone(), keepdims);
        let s = self.cast(s, fdt);
        let cnt = self.valid_count(x, axes, keepdims, fdt, pos)?;
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
        let c = self.reduce(ok, ReduceOp::Sum, axes, keepdims);
        Ok(self.cast(c, dtype))
    }

    /// Two passes, as NumPy computes it: the mean, then the mean square deviation.
    fn var(
        &mut self,
        x: NodeId,
        axes: Vec<usize>,
        keepdims: bool,
        ddof: f64,
        nan: bool,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let fdt = self.meta(x).dtype.to_float();
        let mu = self.mean(x, axes.clone(), true, nan, pos)?;
        let d = self.elementwise2(BinaryOp::Sub, Val::Arr(x), Val::Arr(mu), pos)?;
        let d = self.node(d, pos)?;
        let sq = self.elementwise2(BinaryOp::Mul, Val::Arr(d), Val::Arr(d), pos)?;
        let sq = self.node(sq, pos)?;
        let op = if nan { ReduceOp::NanSum } else { ReduceOp::Sum };
        let s = self.reduce(sq, op, axes.clone(), keepdims);
        let v = if nan {
            let cnt = self.valid_count(x, axes, keepdims, fdt, pos)?;
            let den = self.elementwise2(
                BinaryOp::Sub,
                Val::Arr(cnt),
                Val::Num(ddof, ScalarKind::Float),
                pos,
            )?;
            self.elementwise2(BinaryOp::Div, Val::Arr(s), den, pos)?
        } else {
            let n = self.count_over(x, &axes) as f64 - ddof;
            self.elementwise2(
                BinaryOp::Div,
                Val::Arr(s),
                Val::Num(n, ScalarKind::Float),
                pos,
            )?
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
        let ext = self.reduce(x, op, vec![axis], true);
        let mut hit = self.elementwise2(BinaryOp::Eq, Val::Arr(x), Val::Arr(ext), pos)?;
        if !nan && m.dtype.is_float() {
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
                start: 0.0,
                step: 1.0,
            },
        );
        let n = Val::Num(m.shape[axis] as f64, ScalarKind::Int);
        let cand = self.where_(hit, Val::Arr(idx), n, pos)?;
        let cand = self.node(cand, pos)?;
        let r = self.reduce(cand, ReduceOp::Min, vec![axis], keepdims);
        Ok(
            if keepdims && orig.ndim() != 1 && self.meta(r).ndim() != orig.ndim() {
                self.reshape(r, &vec![1; orig.ndim()])
            } else {
                r
            },
        )
    }
}

/// `n` distinct einsum letters starting at the `from`-th.
fn letters(from: usize, n: usize) -> String {
    ('a'..='z').skip(from).take(n).collect()
}
