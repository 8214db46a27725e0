//! Elementwise functions: NumPy's ufuncs of one and two operands, `where` and `clip`.
//! Arrays broadcast; numbers fold (see `ops.rs` for promotion and broadcasting).

use super::*;

const X: &[&str] = &["x"];
const X12: &[&str] = &["x1", "x2"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new("abs", X, "`np.abs`", |s, b| unary(s, b, UnaryOp::Abs)).aliases(&["absolute"]),
    FuncDef::new("negative", X, "`np.negative`, as unary `-`", |s, b| {
        unary(s, b, UnaryOp::Neg)
    }),
    FuncDef::new("sign", X, "`np.sign`", |s, b| unary(s, b, UnaryOp::Sign)),
    FuncDef::new("square", X, "`np.square`", |s, b| {
        unary(s, b, UnaryOp::Square)
    }),
    FuncDef::new("sqrt", X, "`np.sqrt`", |s, b| unary(s, b, UnaryOp::Sqrt)),
    FuncDef::new("exp", X, "`np.exp`", |s, b| unary(s, b, UnaryOp::Exp)),
    FuncDef::new("expm1", X, "`np.expm1`", |s, b| unary(s, b, UnaryOp::Expm1)),
    FuncDef::new("log", X, "`np.log`", |s, b| unary(s, b, UnaryOp::Log)),
    FuncDef::new("log1p", X, "`np.log1p`", |s, b| unary(s, b, UnaryOp::Log1p)),
    FuncDef::new("floor", X, "`np.floor`", |s, b| unary(s, b, UnaryOp::Floor)),
    FuncDef::new("ceil", X, "`np.ceil`", |s, b| unary(s, b, UnaryOp::Ceil)),
    FuncDef::new("trunc", X, "`np.trunc`", |s, b| unary(s, b, UnaryOp::Trunc)),
    FuncDef::new("rint", X, "`np.rint` (halves to even)", |s, b| {
        unary(s, b, UnaryOp::Rint)
    }),
    FuncDef::new(
        "round",
        &["a", "decimals", "out"],
        "`np.round` (halves to even; `decimals` as NumPy: scaled, `rint`, scaled back)",
        round,
    )
    .aliases(&["around"])
    .refusing(&["out"]),
    FuncDef::new("log2", X, "`np.log2`", |s, b| unary(s, b, UnaryOp::Log2)),
    FuncDef::new("log10", X, "`np.log10`", |s, b| unary(s, b, UnaryOp::Log10)),
    FuncDef::new("signbit", X, "`np.signbit` (bool; -0.0 too)", |s, b| {
        unary(s, b, UnaryOp::Signbit)
    }),
    FuncDef::new("positive", X, "`np.positive`, as unary `+`", positive),
    FuncDef::new("sin", X, "`np.sin`", |s, b| unary(s, b, UnaryOp::Sin)),
    FuncDef::new("cos", X, "`np.cos`", |s, b| unary(s, b, UnaryOp::Cos)),
    FuncDef::new("tan", X, "`np.tan`", |s, b| unary(s, b, UnaryOp::Tan)),
    FuncDef::new("tanh", X, "`np.tanh`", |s, b| unary(s, b, UnaryOp::Tanh)),
    FuncDef::new("sinh", X, "`np.sinh`", |s, b| unary(s, b, UnaryOp::Sinh)),
    FuncDef::new("cosh", X, "`np.cosh`", |s, b| unary(s, b, UnaryOp::Cosh)),
    FuncDef::new("arcsin", X, "`np.arcsin`", |s, b| {
        unary(s, b, UnaryOp::Asin)
    })
    .aliases(&["asin"]),
    FuncDef::new("arccos", X, "`np.arccos`", |s, b| {
        unary(s, b, UnaryOp::Acos)
    })
    .aliases(&["acos"]),
    FuncDef::new("arctan", X, "`np.arctan`", |s, b| {
        unary(s, b, UnaryOp::Atan)
    })
    .aliases(&["atan"]),
    FuncDef::new("arcsinh", X, "`np.arcsinh`", |s, b| {
        unary(s, b, UnaryOp::Asinh)
    })
    .aliases(&["asinh"]),
    FuncDef::new("arccosh", X, "`np.arccosh`", |s, b| {
        unary(s, b, UnaryOp::Acosh)
    })
    .aliases(&["acosh"]),
    FuncDef::new("arctanh", X, "`np.arctanh`", |s, b| {
        unary(s, b, UnaryOp::Atanh)
    })
    .aliases(&["atanh"]),
    FuncDef::new("sigmoid", X, "`scipy.special.expit`", |s, b| {
        unary(s, b, UnaryOp::Sigmoid)
    })
    .aliases(&["expit"]),
    FuncDef::new("real", &["val"], "`np.real`, as `x.real`", |s, b| {
        unary_of(s, b, "val", UnaryOp::Real)
    }),
    FuncDef::new("imag", &["val"], "`np.imag`, as `x.imag`", |s, b| {
        unary_of(s, b, "val", UnaryOp::Imag)
    }),
    FuncDef::new("conj", X, "`np.conj`", |s, b| unary(s, b, UnaryOp::Conj)).aliases(&["conjugate"]),
    FuncDef::new(
        "angle",
        &["z", "deg"],
        "`np.angle` (radians, or degrees with `deg=True`)",
        angle,
    ),
    FuncDef::new("isnan", X, "`np.isnan` (bool)", |s, b| {
        unary(s, b, UnaryOp::IsNan)
    }),
    FuncDef::new("isfinite", X, "`np.isfinite` (bool)", |s, b| {
        unary(s, b, UnaryOp::IsFinite)
    }),
    FuncDef::new("isinf", X, "`np.isinf` (bool)", |s, b| {
        unary(s, b, UnaryOp::IsInf)
    }),
    FuncDef::new("add", X12, "`np.add`, as `+`", |s, b| {
        binary(s, b, BinaryOp::Add)
    }),
    FuncDef::new("subtract", X12, "`np.subtract`, as `-`", |s, b| {
        binary(s, b, BinaryOp::Sub)
    }),
    FuncDef::new("multiply", X12, "`np.multiply`, as `*`", |s, b| {
        binary(s, b, BinaryOp::Mul)
    }),
    FuncDef::new("divide", X12, "`np.divide`, as `/`", |s, b| {
        binary(s, b, BinaryOp::Div)
    })
    .aliases(&["true_divide"]),
    FuncDef::new("power", X12, "`np.power`, as `**`", |s, b| {
        binary(s, b, BinaryOp::Pow)
    }),
    FuncDef::new("floor_divide", X12, "`np.floor_divide`, as `//`", |s, b| {
        binary(s, b, BinaryOp::FloorDiv)
    }),
    FuncDef::new(
        "remainder",
        X12,
        "`np.remainder`, as `%` (Python's signs)",
        |s, b| binary(s, b, BinaryOp::Mod),
    )
    .aliases(&["mod"]),
    FuncDef::new("maximum", X12, "`np.maximum` (NaN propagates)", |s, b| {
        binary(s, b, BinaryOp::Maximum)
    }),
    FuncDef::new("minimum", X12, "`np.minimum` (NaN propagates)", |s, b| {
        binary(s, b, BinaryOp::Minimum)
    }),
    FuncDef::new("arctan2", X12, "`np.arctan2`", |s, b| {
        binary(s, b, BinaryOp::Atan2)
    })
    .aliases(&["atan2"]),
    FuncDef::new("hypot", X12, "`np.hypot`", |s, b| {
        binary(s, b, BinaryOp::Hypot)
    }),
    FuncDef::new("copysign", X12, "`np.copysign`", |s, b| {
        binary(s, b, BinaryOp::Copysign)
    }),
    FuncDef::new("logaddexp", X12, "`np.logaddexp`", |s, b| {
        binary(s, b, BinaryOp::LogAddExp)
    }),
    FuncDef::new(
        "nextafter",
        X12,
        "`np.nextafter` (in the operands' float type)",
        |s, b| binary(s, b, BinaryOp::NextAfter),
    ),
    FuncDef::new("equal", X12, "`np.equal`, as `==`", |s, b| {
        binary(s, b, BinaryOp::Eq)
    }),
    FuncDef::new("not_equal", X12, "`np.not_equal`, as `!=`", |s, b| {
        binary(s, b, BinaryOp::Ne)
    }),
    FuncDef::new("less", X12, "`np.less`, as `<`", |s, b| {
        binary(s, b, BinaryOp::Lt)
    }),
    FuncDef::new("less_equal", X12, "`np.less_equal`, as `<=`", |s, b| {
        binary(s, b, BinaryOp::Le)
    }),
    FuncDef::new("greater", X12, "`np.greater`, as `>`", |s, b| {
        binary(s, b, BinaryOp::Gt)
    }),
    FuncDef::new(
        "greater_equal",
        X12,
        "`np.greater_equal`, as `>=`",
        |s, b| binary(s, b, BinaryOp::Ge),
    ),
    FuncDef::new(
        "logical_and",
        X12,
        "`np.logical_and` (numbers read as bools), as `&` of bools",
        |s, b| binary(s, b, BinaryOp::And),
    ),
    FuncDef::new(
        "logical_or",
        X12,
        "`np.logical_or` (numbers read as bools), as `\\|` of bools",
        |s, b| binary(s, b, BinaryOp::Or),
    ),
    FuncDef::new(
        "logical_xor",
        X12,
        "`np.logical_xor` (numbers read as bools), as `^` of bools",
        |s, b| binary(s, b, BinaryOp::Xor),
    ),
    FuncDef::new(
        "logical_not",
        X,
        "`np.logical_not` (numbers read as bools), as `~` of bools",
        |s, b| {
            let (v, _) = b.need("x")?.clone();
            let v = as_bool(s, v);
            let v = s.unary(UnaryOp::Not, v, b.pos)?;
            strong(v)
        },
    ),
    FuncDef::new(
        "bitwise_and",
        X12,
        "`np.bitwise_and`, as `&` of ints (logical of bools)",
        |s, b| binary(s, b, BinaryOp::BitAnd),
    ),
    FuncDef::new(
        "bitwise_or",
        X12,
        "`np.bitwise_or`, as `\\|` of ints",
        |s, b| binary(s, b, BinaryOp::BitOr),
    ),
    FuncDef::new(
        "bitwise_xor",
        X12,
        "`np.bitwise_xor`, as `^` of ints",
        |s, b| binary(s, b, BinaryOp::BitXor),
    ),
    FuncDef::new(
        "bitwise_invert",
        X,
        "`np.bitwise_invert`, as `~` (of bools: logical not)",
        |s, b| unary(s, b, UnaryOp::Not),
    )
    .aliases(&["bitwise_not", "invert"]),
    FuncDef::new(
        "left_shift",
        X12,
        "`np.left_shift`, as `<<` (0 past the width)",
        |s, b| binary(s, b, BinaryOp::Shl),
    )
    .aliases(&["bitwise_left_shift"]),
    FuncDef::new(
        "right_shift",
        X12,
        "`np.right_shift`, as `>>` (arithmetic for signed ints)",
        |s, b| binary(s, b, BinaryOp::Shr),
    )
    .aliases(&["bitwise_right_shift"]),
    FuncDef::new(
        "where",
        &["condition", "x", "y"],
        "`np.where(condition, x, y)`; `np.where(condition)` is `nonzero`",
        where_,
    ),
    FuncDef::new(
        "clip",
        &["a", "a_min", "a_max", "out", "min", "max"],
        "`np.clip` (`None`: no bound; NumPy 2's and the Array API's `min=`, `max=`)",
        clip,
    )
    .refusing(&["out"]),
];

/// A function's result: of numbers alone NumPy's ufunc gives a NumPy scalar, which is
/// strong in promotion (`sqrt(2) * F32` is float64).
fn strong(v: Val) -> Result<Val, EvalError> {
    Ok(match v {
        Val::Num(x) => Val::NpScalar(x, x.dtype()),
        v => v,
    })
}

/// NumPy's logical functions read any number as true when non-zero.
fn as_bool(s: &mut Builder, v: Val) -> Val {
    match v {
        Val::Arr(id) => Val::Arr(s.cast(id, DType::Bool)),
        Val::Num(x) => Val::Num(Scalar::Bool(x.as_bool())),
        Val::NpScalar(x, _) => Val::NpScalar(Scalar::Bool(x.as_bool()), DType::Bool),
        v => v,
    }
}

fn unary(s: &mut Builder, b: &Bound, op: UnaryOp) -> Result<Val, EvalError> {
    unary_of(s, b, "x", op)
}

/// `op` of the argument `param` (of a number, a NumPy scalar).
fn unary_of(s: &mut Builder, b: &Bound, param: &str, op: UnaryOp) -> Result<Val, EvalError> {
    let (v, _) = b.need(param)?.clone();
    let v = s.unary(op, v, b.pos)?;
    strong(v)
}

/// NumPy's angle: the argument in radians, times 180 / pi with `deg=True`.
fn angle(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = unary_of(s, b, "z", UnaryOp::Angle)?;
    if !b.flag("deg")? {
        return Ok(a);
    }
    let k = Val::Num(Scalar::Float(180.0 / std::f64::consts::PI));
    s.elementwise2(BinaryOp::Mul, a, k, b.pos)
}

fn binary(s: &mut Builder, b: &Bound, op: BinaryOp) -> Result<Val, EvalError> {
    let (mut x1, _) = b.need("x1")?.clone();
    let (mut x2, _) = b.need("x2")?.clone();
    if op.is_logical() {
        x1 = as_bool(s, x1);
        x2 = as_bool(s, x2);
    }
    let v = s.elementwise2(op, x1, x2, b.pos)?;
    strong(v)
}

fn where_(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let c = b.need("condition")?.clone();
    let (x, y) = match (b.get("x"), b.get("y")) {
        (Some(x), Some(y)) => (x, y),
        (None, None) => {
            // NumPy's where(condition): its nonzero.
            let c = s.node(c.0, c.1)?;
            return s.nonzero(c, b.pos);
        }
        _ => {
            return Err(b.err(
                b.pos,
                "where() takes one argument (condition) or three (condition, x, y)",
            ));
        }
    };
    let (x, y) = (x.0.clone(), y.0.clone());
    let c = match c.0 {
        Val::Arr(id) => Val::Arr(s.cast(id, DType::Bool)),
        v => v,
    };
    s.where_(c, x, y, b.pos)
}

/// NumPy's clip: `maximum` with a lone lower bound, `minimum` with a lone upper one (a
/// tie gives the bound); with two number bounds its scalar loop, where a tie keeps `a`
/// (the sign of a zero at a bound of zero is `a`'s); with an array bound both ufuncs.
fn clip(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (mut v, _) = b.need("a")?.clone();
    // NumPy 2 (and the Array API): the bounds as `min=`, `max=`, never beside `a_min`,
    // `a_max`.
    let (mut lo, mut hi) = match (
        b.given("a_min").or(b.given("a_max")),
        b.given("min").or(b.given("max")),
    ) {
        (Some(_), Some((_, p))) => {
            return Err(b.err(
                *p,
                "clip(): passing `min` or `max` keyword argument when `a_min` and `a_max` are provided is forbidden",
            ));
        }
        (None, Some(_)) => (b.get("min"), b.get("max")),
        _ => (b.get("a_min"), b.get("a_max")),
    };
    let number = |v: Option<&(Val, usize)>| matches!(v, Some((Val::Num(_) | Val::NpScalar(..), _)));
    let numbers = number(lo) && number(hi);
    // NumPy ignores a Python int bound past the int array's range on the side that
    // clips nothing (`clip(int8, -1000, 3)`); past the other side it overflows.
    if let Val::Arr(id) = &v
        && s.meta(*id).dtype != DType::Bool
        && let Some((min, max)) = s.meta(*id).dtype.int_range()
    {
        let int = |b: Option<&(Val, usize)>| match b {
            Some((Val::Num(x), _)) if x.kind() == ScalarKind::Int => x.as_i128(),
            _ => None,
        };
        if int(lo).is_some_and(|x| x < min) {
            lo = None;
        }
        if int(hi).is_some_and(|x| x > max) {
            hi = None;
        }
    }
    let (low, high) = if numbers {
        (BinaryOp::ClipLow, BinaryOp::ClipHigh)
    } else {
        (BinaryOp::Maximum, BinaryOp::Minimum)
    };
    if let Some((lo, _)) = lo {
        v = s.elementwise2(low, v, lo.clone(), b.pos)?;
    }
    if let Some((hi, _)) = hi {
        v = s.elementwise2(high, v, hi.clone(), b.pos)?;
    }
    strong(v)
}

/// NumPy's unary `+`: the operand itself (NumPy refuses bools).
fn positive(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (v, p) = b.need("x")?.clone();
    let dtype = match &v {
        Val::Arr(id) => s.meta(*id).dtype,
        Val::Num(x) => x.dtype(),
        Val::NpScalar(_, d) => *d,
        _ => return Err(b.err(p, "positive() needs an array or a number")),
    };
    if dtype == DType::Bool {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            p,
            "positive() is not defined for bools (NumPy raises TypeError)",
        ));
    }
    strong(v)
}

/// NumPy's round (`PyArray_Round`): ints are themselves for `decimals >= 0`; otherwise
/// `rint(x * 10**decimals) / 10**decimals` (`rint(x / 10**-decimals) * 10**-decimals`
/// for negative decimals), ints computed in float64 and cast back, as NumPy does.
fn round(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (v, p) = b.need("a")?.clone();
    let d = b.int("decimals")?.unwrap_or(0);
    let dtype = match &v {
        Val::Arr(id) => s.meta(*id).dtype,
        Val::Num(x) => x.dtype(),
        Val::NpScalar(_, d) => *d,
        _ => return Err(b.err(p, "round() needs an array or a number")),
    };
    if dtype.is_int() && d >= 0 {
        return strong(v);
    }
    let f = Val::Num(Scalar::Float(10f64.powi(d.unsigned_abs().min(400) as i32)));
    let (down, up) = if d >= 0 {
        (BinaryOp::Mul, BinaryOp::Div)
    } else {
        (BinaryOp::Div, BinaryOp::Mul)
    };
    let x = match v {
        Val::Arr(id) if dtype.is_int() => Val::Arr(s.cast(id, DType::Float64)),
        Val::NpScalar(x, _) | Val::Num(x) if dtype.is_int() => {
            Val::NpScalar(x.cast(DType::Float64), DType::Float64)
        }
        v => v,
    };
    let mut r = if d == 0 {
        x
    } else {
        s.elementwise2(down, x, f.clone(), b.pos)?
    };
    r = s.unary(UnaryOp::Rint, r, b.pos)?;
    if d != 0 {
        r = s.elementwise2(up, r, f, b.pos)?;
    }
    if dtype.is_int() {
        r = match r {
            Val::Arr(id) => Val::Arr(s.cast(id, dtype)),
            Val::Num(x) | Val::NpScalar(x, _) => Val::NpScalar(x.cast(dtype), dtype),
            v => v,
        };
    }
    strong(r)
}
