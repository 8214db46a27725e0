//! Creation: NumPy's filled arrays, identities and ranges (random arrays come from the job
//! file). Their blocks are the default ones for the job's workers and memory.

use super::*;

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
        "`np.arange` (not empty)",
        arange,
    ),
    FuncDef::new(
        "linspace",
        &["start", "stop", "num", "endpoint", "retstep", "dtype"],
        "`np.linspace`",
        linspace,
    ),
];

/// Refuses a fill value an integer array cannot hold (NumPy raises for these too).
fn check_fill(b: &Bound, value: f64, dtype: DType) -> Result<(), EvalError> {
    // NaN, infinities and magnitudes of 2^63 and beyond.
    if dtype == DType::Int64 && (value.is_nan() || value.abs() >= 2f64.powi(63)) {
        return Err(b.err(
            b.pos,
            format!("{}(): cannot convert the float {value} to an integer", b.f),
        ));
    }
    Ok(())
}

/// A new array of `shape` where every element is `value` (or the `fill_value` argument).
fn filled(s: &mut Builder, b: &Bound, value: Option<f64>) -> Result<Val, EvalError> {
    let shape = b.shape("shape")?;
    let (value, kind) = match value {
        Some(v) => (v, ScalarKind::Float),
        None => b
            .num("fill_value")?
            .ok_or_else(|| b.err(b.pos, "full() needs fill_value"))?,
    };
    let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(kind));
    check_fill(b, value, dtype)?;
    let m = s.default_meta(shape, dtype);
    let value = scalar_of(value, kind);
    Ok(Val::Arr(s.add(m, NodeOp::Fill { value })))
}

/// An array like `a` (shape, blocks, dtype unless given) filled with `value` (or the
/// `fill_value` argument).
fn filled_like(s: &mut Builder, b: &Bound, value: Option<f64>) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    let value = match value {
        Some(v) => Scalar::Float(v),
        None => {
            let (v, k) = b
                .num("fill_value")?
                .ok_or_else(|| b.err(b.pos, "full_like() needs fill_value"))?;
            scalar_of(v, k)
        }
    };
    let dtype = b.dtype("dtype")?.unwrap_or(m.dtype);
    check_fill(b, value.as_f64(), dtype)?;
    Ok(Val::Arr(
        s.add(ArrayMeta { dtype, ..m }, NodeOp::Fill { value }),
    ))
}

/// eye and identity: 1 on the `k`-th diagonal of an `n` × `m` array.
fn eye(s: &mut Builder, b: &Bound, rows: &str) -> Result<Val, EvalError> {
    let n = b.int(rows)?.unwrap_or(0);
    let m = b.int("M")?.unwrap_or(n);
    if n < 1 || m < 1 {
        return Err(b.err(b.pos, format!("{}(): sizes must be positive", b.f)));
    }
    let shape = vec![n as u64, m as u64];
    check_elements(&shape).map_err(|e| b.err(b.pos, format!("{}(): {e}", b.f)))?;
    let k = b.int("k")?.unwrap_or(0);
    let dtype = b.dtype("dtype")?.unwrap_or(DType::Float64);
    let meta = s.default_meta(shape, dtype);
    Ok(Val::Arr(s.add(meta, NodeOp::Eye { k })))
}

/// The elements a range has, refused when none or too many.
fn range_len(b: &Bound, n: f64) -> Result<u64, EvalError> {
    if n.is_nan() || n < 1.0 {
        return Err(b.err(
            b.pos,
            format!("{}() is empty; nums-cloud arrays are not empty", b.f),
        ));
    }
    check_elements(&[n as u64]).map_err(|_| {
        b.err(
            b.pos,
            format!("{}() of {n:e} elements: more than 2^50", b.f),
        )
    })
}

fn arange(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b
        .num("start")?
        .ok_or_else(|| b.err(b.pos, "arange() needs a stop"))?;
    let (start, stop) = match b.num("stop")? {
        Some(s) => (a, s),
        None => ((0.0, ScalarKind::Int), a),
    };
    let step = b.num("step")?.unwrap_or((1.0, ScalarKind::Int));
    if step.0 == 0.0 {
        return Err(b.err(b.pos, "arange(): step cannot be zero"));
    }
    let n = range_len(b, ((stop.0 - start.0) / step.0).ceil())?;
    let kind = start.1.max(stop.1).max(step.1).max(ScalarKind::Int);
    let dtype = b.dtype("dtype")?.unwrap_or(DType::of_kind(kind));
    let m = s.default_meta(vec![n], dtype);
    Ok(Val::Arr(s.add(
        m,
        NodeOp::Iota {
            axis: 0,
            start: scalar_of(start.0, start.1),
            step: scalar_of(step.0, step.1),
            last: None,
        },
    )))
}

fn linspace(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let start = b
        .num("start")?
        .ok_or_else(|| b.err(b.pos, "linspace() needs start"))?
        .0;
    let stop = b
        .num("stop")?
        .ok_or_else(|| b.err(b.pos, "linspace() needs stop"))?
        .0;
    let num = b.int("num")?.unwrap_or(50);
    if num < 1 {
        return Err(b.err(b.pos, "linspace(): num must be positive"));
    }
    let num = range_len(b, num as f64)?;
    let endpoint = b.get("endpoint").is_none() || b.flag("endpoint")?;
    if b.flag("retstep")? {
        return Err(b.err(b.pos, "linspace(): retstep=True is not supported"));
    }
    let div = if endpoint { (num - 1).max(1) } else { num } as f64;
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
