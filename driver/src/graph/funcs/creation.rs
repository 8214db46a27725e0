//! Creation: NumPy's filled arrays, identities and ranges (random arrays come from the job
//! file). Their blocks are the default ones for the job's workers and memory.

use super::*;
use crate::refusal::PyException;

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new("zeros", &["shape", "dtype"], "`np.zeros`", |s, b| {
        filled(s, b, Some(0.0))
    }),
    FuncDef::new("ones", &["shape", "dtype"], "`np.ones`", |s, b| {
        filled(s, b, Some(1.0))
    }),
    FuncDef::new(
        "full",
        &["shape", "fill_value", "dtype"],
        "`np.full`",
        |s, b| filled(s, b, None),
    ),
    FuncDef::new("zeros_like", &["a", "dtype"], "`np.zeros_like`", |s, b| {
        filled_like(s, b, Some(0.0))
    }),
    FuncDef::new("ones_like", &["a", "dtype"], "`np.ones_like`", |s, b| {
        filled_like(s, b, Some(1.0))
    }),
    FuncDef::new(
        "full_like",
        &["a", "fill_value", "dtype"],
        "`np.full_like`",
        |s, b| filled_like(s, b, None),
    ),
    FuncDef::new("eye", &["N", "M", "k", "dtype"], "`np.eye`", |s, b| {
        eye(s, b, "N")
    }),
    FuncDef::new("identity", &["n", "dtype"], "`np.identity`", |s, b| {
        eye(s, b, "n")
    }),
    FuncDef::new(
        "arange",
        &["start", "stop", "step", "dtype"],
        "`np.arange`",
        arange,
    ),
    FuncDef::new(
        "linspace",
        &["start", "stop", "num", "endpoint", "retstep", "dtype"],
        "`np.linspace`",
        linspace,
    ),
    FuncDef::new(
        "logspace",
        &["start", "stop", "num", "endpoint", "base", "dtype"],
        "`np.logspace`: `base ** linspace(start, stop, num, endpoint)`",
        logspace,
    ),
    FuncDef::new(
        "tri",
        &["N", "M", "k", "dtype"],
        "`np.tri`: ones at and below the `k`-th diagonal",
        tri_ones,
    ),
    FuncDef::new(
        "empty",
        &["shape", "dtype"],
        "`np.empty`: zeros (no value is ever uninitialised)",
        |s, b| s.apply("zeros", &b.args_of(&["shape", "dtype"]), b.pos),
    ),
    FuncDef::new(
        "empty_like",
        &["prototype", "dtype"],
        "`np.empty_like`: zeros",
        |s, b| {
            let (v, _) = b.need("prototype")?.clone();
            let mut args = b.args_of(&["dtype"]);
            args.push(("a", v));
            s.apply("zeros_like", &args, b.pos)
        },
    ),
];

/// Refuses a fill value an integer array cannot hold (NumPy raises for these too).
fn check_fill(b: &Bound, value: Scalar, dtype: DType) -> Result<(), EvalError> {
    // NaN, infinities and magnitudes of 2^63 and beyond.
    if let (DType::Int64, Scalar::Float(v)) = (dtype, value)
        && (v.is_nan() || v.abs() >= 2f64.powi(63))
    {
        // NumPy: ValueError for NaN, OverflowError for infinities and floats past int64.
        return Err(b.raising(
            if v.is_nan() {
                PyException::ValueError
            } else {
                PyException::OverflowError
            },
            b.pos,
            format!("{}(): cannot convert the float {value} to an integer", b.f),
        ));
    }
    if let Some(dt) = out_of_range(value, dtype) {
        return Err(b.raising(
            PyException::OverflowError,
            b.pos,
            format!(
                "{}(): Python integer {value} out of bounds for {dt} (NumPy raises OverflowError)",
                b.f
            ),
        ));
    }
    Ok(())
}

/// A new array of `shape` where every element is `value` (or the `fill_value` argument).
fn filled(s: &mut Builder, b: &Bound, value: Option<f64>) -> Result<Val, EvalError> {
    let shape = b.shape("shape")?;
    let value = match value {
        Some(v) => Scalar::Float(v),
        None => b
            .num("fill_value")?
            .ok_or_else(|| b.err(b.pos, "full() needs fill_value"))?,
    };
    let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(value.kind()));
    check_fill(b, value, dtype)?;
    let m = s.default_meta(shape, dtype);
    Ok(Val::Arr(s.add(m, NodeOp::Fill { value })))
}

/// An array like `a` (shape, blocks, dtype unless given) filled with `value` (or the
/// `fill_value` argument).
fn filled_like(s: &mut Builder, b: &Bound, value: Option<f64>) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    let value = match value {
        Some(v) => Scalar::Float(v),
        None => b
            .num("fill_value")?
            .ok_or_else(|| b.err(b.pos, "full_like() needs fill_value"))?,
    };
    let dtype = b.dtype("dtype")?.unwrap_or(m.dtype);
    check_fill(b, value, dtype)?;
    Ok(Val::Arr(
        s.add(ArrayMeta { dtype, ..m }, NodeOp::Fill { value }),
    ))
}

/// eye and identity: 1 on the `k`-th diagonal of an `n` × `m` array.
fn eye(s: &mut Builder, b: &Bound, rows: &str) -> Result<Val, EvalError> {
    let n = b.int(rows)?.unwrap_or(0);
    let m = b.int("M")?.unwrap_or(n);
    if n < 0 || m < 0 {
        return Err(b.err(
            b.pos,
            format!("{}(): negative dimensions are not allowed", b.f),
        ));
    }
    let shape = vec![n as u64, m as u64];
    check_elements(&shape).map_err(|e| b.err(b.pos, format!("{}(): {e}", b.f)))?;
    // Any int, as NumPy's (uint64 ones too): one past int64 is past every diagonal of a
    // matrix of at most 2^50 elements, as int64's extremes are (all zeros).
    let k = match b.get("k") {
        None => 0,
        Some((Val::Num(v), p)) => {
            let k = v
                .as_i128()
                .ok_or_else(|| b.err(*p, format!("{}(): k must be an integer", b.f)))?;
            k.clamp(i64::MIN.into(), i64::MAX.into()) as i64
        }
        Some((_, p)) => return Err(b.err(*p, format!("{}(): k must be an integer", b.f))),
    };
    let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
    let meta = s.default_meta(shape, dtype);
    Ok(Val::Arr(s.add(meta, NodeOp::Eye { k })))
}

/// The elements a range has (none when `n` is not positive, as NumPy's); refused when
/// too many or not a number.
fn range_len(b: &Bound, n: f64) -> Result<u64, EvalError> {
    if n.is_nan() {
        return Err(b.err(b.pos, format!("{}(): cannot compute length", b.f)));
    }
    let n = n.max(0.0);
    check_elements(&[n as u64]).map_err(|_| {
        b.err(
            b.pos,
            format!("{}() of {n:e} elements: more than 2^50", b.f),
        )
    })
}

/// NumPy's arange: `ceil((stop - start) / step)` elements (exact for ints); element `i`
/// is `first + i * delta`, where `first` is `start` and `delta` the difference of the
/// first two elements (`start` and `start + step`) in the array's dtype, as NumPy fills it.
fn arange(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b
        .num("start")?
        .ok_or_else(|| b.err(b.pos, "arange() needs a stop"))?;
    let (start, stop) = match b.num("stop")? {
        Some(s) => (a, s),
        None => (Scalar::Int(0), a),
    };
    let step = b.num("step")?.unwrap_or(Scalar::Int(1));
    if step.as_f64() == 0.0 {
        return Err(b.err(b.pos, "arange(): step cannot be zero"));
    }
    let ints = [start, stop, step]
        .iter()
        .all(|v| v.kind() != ScalarKind::Float);
    let n = if ints {
        // Python ints: exact (a negative count is an empty range).
        let (lo, hi, d) = (
            i128::from(start.as_i64()),
            i128::from(stop.as_i64()),
            i128::from(step.as_i64()),
        );
        -floor_div(lo - hi, d) as f64
    } else {
        ((stop.as_f64() - start.as_f64()) / step.as_f64()).ceil()
    };
    let n = range_len(b, n)?;
    let kind = start
        .kind()
        .max(stop.kind())
        .max(step.kind())
        .max(ScalarKind::Int);
    let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(kind));
    if dtype == DType::Bool && n > 2 {
        return Err(b.raising(
            PyException::TypeError,
            b.pos,
            "arange(): bools only for ranges of at most 2 values (NumPy raises TypeError)",
        ));
    }
    // The first two elements as Python computes them, then in the array's dtype.
    let second = if ints {
        // Exact, as Python's ints; a float range takes it as a float (NumPy's), and a
        // range of one value or none never uses it.
        let exact = i128::from(start.as_i64()) + i128::from(step.as_i64());
        match i64::try_from(exact) {
            Ok(v) => Scalar::Int(v),
            Err(_) if n <= 1 => start,
            Err(_) if matches!(dtype.kind(), ScalarKind::Float | ScalarKind::Complex) => {
                Scalar::Float(exact as f64)
            }
            Err(_) => {
                return Err(b.err(b.pos, "arange(): start + step is outside int64's range"));
            }
        }
    } else {
        Scalar::Float(start.as_f64() + step.as_f64())
    };
    // (Ints step in wrapping int64, which the kernel's cast to a narrower int wraps as
    // NumPy's int8 arithmetic does; complex ranges are real ones.)
    let (first, delta) = match dtype.kind() {
        ScalarKind::Int => {
            let (x, y) = (start.as_i64(), second.as_i64());
            (Scalar::Int(x), Scalar::Int(y.wrapping_sub(x)))
        }
        ScalarKind::Float | ScalarKind::Complex => {
            let (x, y) = (start.as_f64(), second.as_f64());
            (Scalar::Float(x), Scalar::Float(y - x))
        }
        ScalarKind::Bool => (start, step),
    };
    let m = s.default_meta(vec![n], dtype);
    Ok(Val::Arr(s.add(
        m,
        NodeOp::Iota {
            axis: 0,
            start: first,
            step: delta,
            last: None,
        },
    )))
}

fn linspace(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    // NumPy computes a linspace in float64 whatever the dtype (rounding toward -inf for
    // an int dtype, done by the kernel).
    let start = b
        .num("start")?
        .ok_or_else(|| b.err(b.pos, "linspace() needs start"))?
        .as_f64();
    let stop = b
        .num("stop")?
        .ok_or_else(|| b.err(b.pos, "linspace() needs stop"))?
        .as_f64();
    let num = b.int("num")?.unwrap_or(50);
    if num < 0 {
        return Err(b.err(
            b.pos,
            format!("linspace(): Number of samples, {num}, must be non-negative."),
        ));
    }
    let num = range_len(b, num as f64)?;
    let endpoint = b.get("endpoint").is_none() || b.flag("endpoint")?;
    if b.flag("retstep")? {
        return Err(b.err(b.pos, "linspace(): retstep=True is not supported"));
    }
    let div = if endpoint {
        num.saturating_sub(1).max(1)
    } else {
        num.max(1)
    } as f64;
    let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
    let m = s.default_meta(vec![num], dtype);
    Ok(Val::Arr(s.add(
        m,
        NodeOp::Iota {
            axis: 0,
            start: Scalar::Float(start),
            step: Scalar::Float((stop - start) / div),
            // NumPy sets the endpoint to stop exactly.
            last: (endpoint && num > 1).then_some(Scalar::Float(stop)),
        },
    )))
}

/// NumPy's logspace, as it computes it: `power(base, linspace(start, stop, num,
/// endpoint))`, then cast to `dtype`.
fn logspace(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let y = s.apply(
        "linspace",
        &b.args_of(&["start", "stop", "num", "endpoint"]),
        b.pos,
    )?;
    let base = match b.get("base") {
        Some((v, _)) => v.clone(),
        None => Val::Num(Scalar::Float(10.0)),
    };
    let r = s.elementwise2(BinaryOp::Pow, base, y, b.pos)?;
    match b.dtype("dtype")? {
        Some(d) => {
            let id = s.node(r, b.pos)?;
            Ok(Val::Arr(s.cast(id, d)))
        }
        None => Ok(r),
    }
}

/// NumPy's tri: `tril(ones((N, M)), k)` in `dtype` (float64).
fn tri_ones(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (n, _) = b.need("N")?.clone();
    let m = b.get("M").map_or_else(|| n.clone(), |(v, _)| v.clone());
    let mut args = vec![("shape", Val::Tuple(vec![n, m]))];
    args.extend(b.args_of(&["dtype"]));
    let ones = s.apply("ones", &args, b.pos)?;
    let mut args = vec![("m", ones)];
    args.extend(b.args_of(&["k"]));
    s.apply("tril", &args, b.pos)
}
