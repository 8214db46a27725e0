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
    FuncDef::new("cbrt", X, "`np.cbrt` (real cube root)", |s, b| {
        unary(s, b, UnaryOp::Cbrt)
    }),
    FuncDef::new("exp2", X, "`np.exp2`", |s, b| unary(s, b, UnaryOp::Exp2)),
    FuncDef::new("fabs", X, "`np.fabs` (floats; complex refused)", fabs),
    FuncDef::new(
        "fmax",
        X12,
        "`np.fmax` (a NaN loses to a number)",
        |s, b| fmax_fmin(s, b, BinaryOp::Maximum),
    ),
    FuncDef::new(
        "fmin",
        X12,
        "`np.fmin` (a NaN loses to a number)",
        |s, b| fmax_fmin(s, b, BinaryOp::Minimum),
    ),
    FuncDef::new(
        "nan_to_num",
        &["x", "copy", "nan", "posinf", "neginf"],
        "`np.nan_to_num` (NaN to `nan`, infinities to `posinf`/`neginf` or the dtype's limits)",
        nan_to_num,
    ),
    FuncDef::new(
        "isclose",
        &["a", "b", "rtol", "atol", "equal_nan"],
        "`np.isclose` (NumPy 2's: `abs(a - b) <= atol + rtol * abs(b)` where b is finite, or equal)",
        isclose,
    ),
    FuncDef::new("deg2rad", X, "`np.deg2rad`: `x * (pi / 180)`", |s, b| {
        scaled(s, b, std::f64::consts::PI / 180.0)
    })
    .aliases(&["radians"]),
    FuncDef::new("rad2deg", X, "`np.rad2deg`: `x * (180 / pi)`", |s, b| {
        scaled(s, b, 180.0 / std::f64::consts::PI)
    })
    .aliases(&["degrees"]),
    FuncDef::new(
        "heaviside",
        X12,
        "`np.heaviside` (`x2` where `x1` is 0)",
        heaviside,
    ),
    FuncDef::new(
        "sinc",
        X,
        "`np.sinc`: `sin(pi x) / (pi x)`, 1 at 0 (NumPy's formula)",
        sinc,
    ),
    FuncDef::new(
        "float_power",
        X12,
        "`np.float_power` (in float64, or complex128)",
        float_power,
    ),
    FuncDef::new(
        "reciprocal",
        X,
        "`np.reciprocal` (of ints: 1, -1 or 0; 0 at 0, where NumPy's is undefined)",
        reciprocal,
    ),
    FuncDef::new("logaddexp2", X12, "`np.logaddexp2`", logaddexp2),
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

/// The dtype of an operand (a Python number's own: weak).
fn dtype_of(s: &Builder, v: &Val, b: &Bound) -> Result<DType, EvalError> {
    match v {
        Val::Arr(id) => Ok(s.meta(*id).dtype),
        Val::Num(x) => Ok(x.dtype()),
        Val::NpScalar(_, d) => Ok(*d),
        _ => Err(b.err(b.pos, format!("{}() needs arrays or numbers", b.f))),
    }
}

/// `v` cast to `dtype` (an array's nodes, a number's value).
fn cast_val(s: &mut Builder, v: Val, dtype: DType) -> Val {
    match v {
        Val::Arr(id) => Val::Arr(s.cast(id, dtype)),
        Val::Num(x) => Val::Num(x.cast(dtype)),
        Val::NpScalar(x, _) => Val::NpScalar(x.cast(dtype), dtype),
        v => v,
    }
}

fn num(x: f64) -> Val {
    Val::Num(Scalar::Float(x))
}

/// NumPy's fabs: the float loops only (ints compute in floats, complex is refused).
fn fabs(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (v, p) = b.need("x")?.clone();
    let d = dtype_of(s, &v, b)?;
    if d.is_complex() {
        return Err(b.raising(
            crate::refusal::PyException::TypeError,
            p,
            format!("fabs() is not defined for complex numbers (NumPy raises TypeError); got {d}"),
        ));
    }
    let v = cast_val(s, v, d.to_float_fn());
    let v = s.unary(UnaryOp::Abs, v, b.pos)?;
    strong(v)
}

/// NumPy's fmax and fmin: `maximum` or `minimum`, except that a NaN loses to a number
/// (both NaN: the first).
fn fmax_fmin(s: &mut Builder, b: &Bound, op: BinaryOp) -> Result<Val, EvalError> {
    let (x1, _) = b.need("x1")?.clone();
    let (x2, _) = b.need("x2")?.clone();
    let m = s.elementwise2(op, x1.clone(), x2.clone(), b.pos)?;
    let nan1 = s.unary(UnaryOp::IsNan, x1.clone(), b.pos)?;
    let nan2 = s.unary(UnaryOp::IsNan, x2.clone(), b.pos)?;
    let m = s.where_(nan1, x2, m, b.pos)?;
    let m = s.where_(nan2, x1, m, b.pos)?;
    strong(m)
}

/// NumPy's nan_to_num: NaN to `nan` (0), +inf to `posinf` (the dtype's largest), -inf to
/// `neginf` (its most negative); ints and bools as they are; complex part by part.
fn nan_to_num(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    let d = dtype_of(s, &x, b)?;
    if d.is_exact() {
        return strong(x);
    }
    let float = |b: &Bound, name: &str| -> Result<Option<f64>, EvalError> {
        Ok(b.num(name)?.map(|v| v.as_f64()))
    };
    let (nan, posinf, neginf) = (
        float(b, "nan")?.unwrap_or(0.0),
        float(b, "posinf")?,
        float(b, "neginf")?,
    );
    let big = if d.real() == DType::Float32 {
        f32::MAX as f64
    } else {
        f64::MAX
    };
    let part = |s: &mut Builder, v: Val| -> Result<Val, EvalError> {
        let is_nan = s.unary(UnaryOp::IsNan, v.clone(), b.pos)?;
        let pos_inf = s.elementwise2(BinaryOp::Eq, v.clone(), num(f64::INFINITY), b.pos)?;
        let neg_inf = s.elementwise2(BinaryOp::Eq, v.clone(), num(f64::NEG_INFINITY), b.pos)?;
        let v = s.where_(is_nan, num(nan), v, b.pos)?;
        let v = s.where_(pos_inf, num(posinf.unwrap_or(big)), v, b.pos)?;
        s.where_(neg_inf, num(neginf.unwrap_or(-big)), v, b.pos)
    };
    if !d.is_complex() {
        let v = part(s, x)?;
        return strong(v);
    }
    let re = s.unary(UnaryOp::Real, x.clone(), b.pos)?;
    let im = s.unary(UnaryOp::Imag, x, b.pos)?;
    let (re, im) = (part(s, re)?, part(s, im)?);
    let re = cast_val(s, re, d);
    let i = Val::Num(Scalar::Complex(0.0, 1.0));
    let im = s.elementwise2(BinaryOp::Mul, im, i, b.pos)?;
    let v = s.elementwise2(BinaryOp::Add, re, im, b.pos)?;
    strong(v)
}

/// NumPy 2's isclose: `abs(a - b) <= atol + rtol * abs(b)` where `b` is finite, or
/// `a == b` (infinities of one sign), or both NaN with `equal_nan`; `b` at least float.
pub(super) fn isclose(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("a")?.clone();
    let (y, _) = b.need("b")?.clone();
    let rtol = b.num("rtol")?.map_or(1e-5, |v| v.as_f64());
    let atol = b.num("atol")?.map_or(1e-8, |v| v.as_f64());
    let yd = dtype_of(s, &y, b)?;
    let y = if yd.is_exact() {
        cast_val(s, y, DType::Float64)
    } else {
        y
    };
    let diff = s.elementwise2(BinaryOp::Sub, x.clone(), y.clone(), b.pos)?;
    let diff = s.unary(UnaryOp::Abs, diff, b.pos)?;
    let ay = s.unary(UnaryOp::Abs, y.clone(), b.pos)?;
    let tol = s.elementwise2(BinaryOp::Mul, num(rtol), ay, b.pos)?;
    let tol = s.elementwise2(BinaryOp::Add, num(atol), tol, b.pos)?;
    let close = s.elementwise2(BinaryOp::Le, diff, tol, b.pos)?;
    let finite = s.unary(UnaryOp::IsFinite, y.clone(), b.pos)?;
    let close = s.elementwise2(BinaryOp::And, close, finite, b.pos)?;
    let eq = s.elementwise2(BinaryOp::Eq, x.clone(), y.clone(), b.pos)?;
    let mut close = s.elementwise2(BinaryOp::Or, close, eq, b.pos)?;
    if b.flag("equal_nan")? {
        let nx = s.unary(UnaryOp::IsNan, x, b.pos)?;
        let ny = s.unary(UnaryOp::IsNan, y, b.pos)?;
        let both = s.elementwise2(BinaryOp::And, nx, ny, b.pos)?;
        close = s.elementwise2(BinaryOp::Or, close, both, b.pos)?;
    }
    strong(close)
}

/// `x * k` in `x`'s float dtype (NumPy's deg2rad and rad2deg multiply by the constant).
fn scaled(s: &mut Builder, b: &Bound, k: f64) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    let d = dtype_of(s, &x, b)?;
    let x = cast_val(s, x, d.to_float_fn());
    let v = s.elementwise2(BinaryOp::Mul, x, num(k), b.pos)?;
    strong(v)
}

/// NumPy's heaviside: 0 below 0, 1 above, `x2` at 0, NaN at NaN; in a float dtype.
fn heaviside(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x1, _) = b.need("x1")?.clone();
    let (x2, _) = b.need("x2")?.clone();
    let d = s.result_dtype(
        BinaryOp::Maximum,
        (dtype_of(s, &x1, b)?, matches!(x1, Val::Num(_))),
        (dtype_of(s, &x2, b)?, matches!(x2, Val::Num(_))),
        b.pos,
    )?;
    let d = d.to_float_fn();
    let (x1, x2) = (cast_val(s, x1, d), cast_val(s, x2, d));
    let below = s.elementwise2(BinaryOp::Lt, x1.clone(), num(0.0), b.pos)?;
    let above = s.elementwise2(BinaryOp::Gt, x1.clone(), num(0.0), b.pos)?;
    let nan = s.unary(UnaryOp::IsNan, x1.clone(), b.pos)?;
    let v = s.where_(above, num(1.0), x2, b.pos)?;
    let v = s.where_(below, num(0.0), v, b.pos)?;
    let v = s.where_(nan, x1, v, b.pos)?;
    strong(cast_val(s, v, d))
}

/// NumPy's sinc, by its formula: `y = pi * where(x == 0, 1e-20, x)`, `sin(y) / y`.
fn sinc(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    let d = dtype_of(s, &x, b)?;
    let x = cast_val(s, x, d.to_float_fn());
    let zero = s.elementwise2(BinaryOp::Eq, x.clone(), num(0.0), b.pos)?;
    let x = s.where_(zero, num(1e-20), x, b.pos)?;
    let y = s.elementwise2(BinaryOp::Mul, num(std::f64::consts::PI), x, b.pos)?;
    let sin = s.unary(UnaryOp::Sin, y.clone(), b.pos)?;
    let v = s.elementwise2(BinaryOp::Div, sin, y, b.pos)?;
    strong(v)
}

/// NumPy's float_power: `power` in float64 (complex128 for complex operands).
fn float_power(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x1, _) = b.need("x1")?.clone();
    let (x2, _) = b.need("x2")?.clone();
    let complex = dtype_of(s, &x1, b)?.is_complex() || dtype_of(s, &x2, b)?.is_complex();
    let d = if complex {
        DType::Complex128
    } else {
        DType::Float64
    };
    let (x1, x2) = (cast_val(s, x1, d), cast_val(s, x2, d));
    let v = s.elementwise2(BinaryOp::Pow, x1, x2, b.pos)?;
    strong(cast_val(s, v, d))
}

/// NumPy's reciprocal: `1 / x` in floats; of ints C's `1 / x` (1 and -1 themselves,
/// 0 elsewhere).
fn reciprocal(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, _) = b.need("x")?.clone();
    let d = dtype_of(s, &x, b)?;
    if !d.is_exact() {
        let one = if d.is_complex() {
            Val::Num(Scalar::Complex(1.0, 0.0))
        } else {
            num(1.0)
        };
        let v = s.elementwise2(BinaryOp::Div, one, x, b.pos)?;
        return strong(cast_val(s, v, d));
    }
    let d = if d == DType::Bool { DType::Int8 } else { d };
    let x = cast_val(s, x, d);
    let ax = s.unary(UnaryOp::Abs, x.clone(), b.pos)?;
    let unit = s.elementwise2(BinaryOp::Eq, ax, Val::Num(Scalar::Int(1)), b.pos)?;
    let v = s.where_(unit, x, Val::Num(Scalar::Int(0)), b.pos)?;
    strong(cast_val(s, v, d))
}

/// NumPy's logaddexp2 (`npy_logaddexp2`): `x + 1` where equal, else the larger plus
/// `log2(1 + 2**-|x1 - x2|)` (`log2e * log1p`), NaN where the difference is.
fn logaddexp2(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x1, _) = b.need("x1")?.clone();
    let (x2, _) = b.need("x2")?.clone();
    let d = s.result_dtype(
        BinaryOp::Maximum,
        (dtype_of(s, &x1, b)?, matches!(x1, Val::Num(_))),
        (dtype_of(s, &x2, b)?, matches!(x2, Val::Num(_))),
        b.pos,
    )?;
    let d = d.to_float_fn();
    let (x1, x2) = (cast_val(s, x1, d), cast_val(s, x2, d));
    let log2_1p = |s: &mut Builder, v: Val| -> Result<Val, EvalError> {
        let e = s.unary(UnaryOp::Exp2, v, b.pos)?;
        let l = s.unary(UnaryOp::Log1p, e, b.pos)?;
        s.elementwise2(BinaryOp::Mul, num(std::f64::consts::LOG2_E), l, b.pos)
    };
    let tmp = s.elementwise2(BinaryOp::Sub, x1.clone(), x2.clone(), b.pos)?;
    let neg = s.unary(UnaryOp::Neg, tmp.clone(), b.pos)?;
    let up = log2_1p(s, neg)?;
    let up = s.elementwise2(BinaryOp::Add, x1.clone(), up, b.pos)?;
    let down = log2_1p(s, tmp.clone())?;
    let down = s.elementwise2(BinaryOp::Add, x2.clone(), down, b.pos)?;
    let pos = s.elementwise2(BinaryOp::Gt, tmp.clone(), num(0.0), b.pos)?;
    let nonpos = s.elementwise2(BinaryOp::Le, tmp.clone(), num(0.0), b.pos)?;
    let v = s.where_(nonpos, down, tmp, b.pos)?;
    let v = s.where_(pos, up, v, b.pos)?;
    let eq = s.elementwise2(BinaryOp::Eq, x1.clone(), x2, b.pos)?;
    let plus1 = s.elementwise2(BinaryOp::Add, x1, num(1.0), b.pos)?;
    let v = s.where_(eq, plus1, v, b.pos)?;
    strong(cast_val(s, v, d))
}
