//! Random arrays by NumPy's names: the Generator's methods
//! (`random.default_rng(seed).normal(0, 1, (n, d))`) and the legacy module functions NumS
//! has (`random.rand`, `randn`, `randint`, `random_sample`, with `seed=`). Every element
//! is drawn from (seed, flat index) alone (`nums_function`'s counter-based generator):
//! deterministic for a seed, the same whatever the blocks. The values are not NumPy's bit
//! streams; the distributions are NumPy's. Distributions other than uniform, normal,
//! integers, gamma, Poisson and binomial are made from those by elementwise nodes.

use nums_layout::batch::RandomDist;

use super::*;

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "Generator.standard_normal",
        &["size", "dtype"],
        "`rng.standard_normal` (`rng`: `random.default_rng(seed)`)",
        |s, b| {
            let z = draw(s, b, RandomDist::Normal, 0, size(s, b, &[])?)?;
            as_dtype(s, b, z)
        },
    ),
    FuncDef::new(
        "Generator.normal",
        &["loc", "scale", "size"],
        "`rng.normal`",
        |s, b| {
            not_negative(b, "scale")?;
            let z = draw(s, b, RandomDist::Normal, 0, size(s, b, &["loc", "scale"])?)?;
            let r = affine(s, b, z, "loc", 0.0, "scale", 1.0)?;
            no_negative(s, b, "scale", r)
        },
    ),
    FuncDef::new(
        "Generator.lognormal",
        &["mean", "sigma", "size"],
        "`rng.lognormal`",
        |s, b| {
            not_negative(b, "sigma")?;
            let z = draw(s, b, RandomDist::Normal, 0, size(s, b, &["mean", "sigma"])?)?;
            let n = affine(s, b, z, "mean", 0.0, "sigma", 1.0)?;
            let r = s.unary(UnaryOp::Exp, n, b.pos)?;
            no_negative(s, b, "sigma", r)
        },
    ),
    FuncDef::new(
        "Generator.uniform",
        &["low", "high", "size"],
        "`rng.uniform`",
        |s, b| {
            let low = arg_or(b, "low", 0.0);
            let high = arg_or(b, "high", 1.0);
            if let (Val::Num(l), Val::Num(h)) = (&low, &high) {
                let span = h.as_f64() - l.as_f64();
                if span < 0.0 {
                    return Err(b.err(b.pos, format!("{}(): high - low < 0", b.f)));
                }
                if !span.is_finite() {
                    return Err(b.raising(
                        crate::refusal::PyException::OverflowError,
                        b.pos,
                        format!("{}(): high - low range exceeds valid bounds", b.f),
                    ));
                }
            }
            let u = draw(s, b, RandomDist::Uniform, 0, size(s, b, &["low", "high"])?)?;
            let span = s.binary(Op::Sub, high, low.clone(), b.pos)?;
            let scaled = s.binary(Op::Mul, u, span, b.pos)?;
            let r = s.binary(Op::Add, low, scaled, b.pos)?;
            no_negative(s, b, "high - low", r)
        },
    ),
    FuncDef::new(
        "Generator.random",
        &["size", "dtype"],
        "`rng.random` (in [0, 1))",
        |s, b| {
            let u = draw(s, b, RandomDist::Uniform, 0, size(s, b, &[])?)?;
            as_dtype(s, b, u)
        },
    ),
    FuncDef::new(
        "Generator.integers",
        &["low", "high", "size", "dtype", "endpoint"],
        "`rng.integers` (int64 by default; number bounds)",
        |s, b| integers(s, b, "low", "high"),
    ),
    FuncDef::new(
        "Generator.exponential",
        &["scale", "size"],
        "`rng.exponential`",
        |s, b| {
            not_negative(b, "scale")?;
            let e = exponential(s, b, size(s, b, &["scale"])?)?;
            let r = s.binary(Op::Mul, e, arg_or(b, "scale", 1.0), b.pos)?;
            no_negative(s, b, "scale", r)
        },
    ),
    FuncDef::new(
        "Generator.standard_exponential",
        &["size", "dtype"],
        "`rng.standard_exponential`",
        |s, b| {
            let e = exponential(s, b, size(s, b, &[])?)?;
            as_dtype(s, b, e)
        },
    ),
    FuncDef::new(
        "Generator.gamma",
        &["shape", "scale", "size"],
        "`rng.gamma` (a number shape)",
        |s, b| {
            not_negative(b, "scale")?;
            let g = gamma(s, b, positive(b, "shape")?, 0)?;
            let r = s.binary(Op::Mul, g, arg_or(b, "scale", 1.0), b.pos)?;
            no_negative(s, b, "scale", r)
        },
    ),
    FuncDef::new(
        "Generator.standard_gamma",
        &["shape", "size", "dtype"],
        "`rng.standard_gamma` (a number shape)",
        |s, b| {
            let g = gamma(s, b, positive(b, "shape")?, 0)?;
            as_dtype(s, b, g)
        },
    ),
    FuncDef::new(
        "Generator.beta",
        &["a", "b", "size"],
        "`rng.beta` (number parameters)",
        |s, b| {
            let x = gamma(s, b, positive(b, "a")?, 0)?;
            let y = gamma(s, b, positive(b, "b")?, 1)?;
            let sum = s.binary(Op::Add, x.clone(), y, b.pos)?;
            s.binary(Op::Div, x, sum, b.pos)
        },
    ),
    FuncDef::new(
        "Generator.chisquare",
        &["df", "size"],
        "`rng.chisquare` (a number df)",
        |s, b| {
            let g = gamma(s, b, positive(b, "df")? / 2.0, 0)?;
            s.binary(Op::Mul, g, Val::Num(Scalar::Float(2.0)), b.pos)
        },
    ),
    FuncDef::new(
        "Generator.poisson",
        &["lam", "size"],
        "`rng.poisson` (a number lam)",
        |s, b| {
            let lam = number(b, "lam", 1.0)?;
            if !(0.0..=1e18).contains(&lam) {
                return Err(b.err(b.pos, "poisson(): lam must be in 0..=1e18"));
            }
            let shape = size(s, b, &[])?;
            draw(s, b, RandomDist::Poisson { lam }, 0, shape)
        },
    ),
    FuncDef::new(
        "Generator.binomial",
        &["n", "p", "size"],
        "`rng.binomial` (number parameters)",
        |s, b| {
            let n = b
                .int("n")?
                .filter(|&n| n >= 0)
                .ok_or_else(|| b.err(b.pos, "binomial(): n must be a non-negative integer"))?;
            let p = number(b, "p", f64::NAN)?;
            if !(0.0..=1.0).contains(&p) {
                return Err(b.err(b.pos, "binomial(): p must be in [0, 1]"));
            }
            let shape = size(s, b, &[])?;
            draw(s, b, RandomDist::Binomial { n: n as u64, p }, 0, shape)
        },
    ),
    FuncDef::new(
        "Generator.choice",
        &["a", "size", "replace", "p", "axis", "shuffle"],
        "`rng.choice` (rows of an array, or of `arange(a)`; `p=` with replacement)",
        choice,
    )
    .aliases(&["random.choice"])
    .refusing(&["axis"]),
    FuncDef::new(
        "Generator.permutation",
        &["x", "axis"],
        "`rng.permutation` (of `arange(x)`, or of an array's rows)",
        |s, b| {
            if b.get("axis")
                .is_some_and(|(v, _)| !matches!(v, Val::Num(a) if a.as_i64() == 0))
            {
                return Err(b.err(b.pos, "permutation(): only axis=0 is supported"));
            }
            permutation(s, b, "x")
        },
    ),
    FuncDef::new(
        "Generator.permuted",
        &["x", "axis"],
        "`rng.permuted` (a new array; `axis=None` only)",
        |s, b| {
            if b.get("axis").is_some() {
                return Err(b.err(
                    b.pos,
                    "permuted(): axis= is not supported (each lane shuffled alone); axis=None is",
                ));
            }
            let x = b.array("x")?;
            let shape = s.meta(x).shape.clone();
            let n = shape.iter().product();
            let flat = s.reshape(x, &[n]);
            let p = shuffled(s, b, flat, n)?;
            let p = s.node(p, b.pos)?;
            Ok(Val::Arr(s.reshape(p, &shape)))
        },
    ),
    FuncDef::new(
        "random.default_rng",
        &["seed"],
        "`np.random.default_rng(seed)`: a Generator, used through its methods above",
        |_, b| {
            Err(b.err(
                b.pos,
                "a Generator is used through its methods: random.default_rng(seed).normal(0, 1, (n, d))",
            ))
        },
    ),
    FuncDef::new(
        "random.rand",
        &["d"],
        "`np.random.rand(d0, d1, ...)` (NumS's; `seed=` too)",
        |s, b| draw(s, b, RandomDist::Uniform, 0, dims(b)?),
    )
    .rest(Rest::Star),
    FuncDef::new(
        "random.randn",
        &["d"],
        "`np.random.randn(d0, d1, ...)` (NumS's; `seed=` too)",
        |s, b| draw(s, b, RandomDist::Normal, 0, dims(b)?),
    )
    .rest(Rest::Star),
    FuncDef::new(
        "random.randint",
        &["low", "high", "size", "dtype"],
        "`np.random.randint` (NumS's; `seed=` too)",
        |s, b| integers(s, b, "low", "high"),
    ),
    FuncDef::new(
        "random.random_sample",
        &["size"],
        "`np.random.random_sample` (NumS's; `seed=` too)",
        |s, b| {
            let shape = size(s, b, &[])?;
            draw(s, b, RandomDist::Uniform, 0, shape)
        },
    )
    .aliases(&["random.random"]),
];

/// A seed of its own for part `k` of one call's draws (k = 0: the call's seed itself,
/// so `default_rng(s).random(n)` is the job file's `random = "uniform", seed = s`).
fn part_seed(seed: u64, k: u64) -> u64 {
    if k == 0 {
        seed
    } else {
        seed.wrapping_add(k.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .rotate_left(17)
            ^ k
    }
}

/// An array of `shape` drawn from `dist` with part `k` of the call's seed.
fn draw(
    s: &mut Builder,
    b: &Bound,
    dist: RandomDist,
    k: u64,
    shape: Vec<u64>,
) -> Result<Val, EvalError> {
    let dtype = match dist {
        RandomDist::Integers { .. } | RandomDist::Poisson { .. } | RandomDist::Binomial { .. } => {
            DType::Int64
        }
        _ => DType::Float64,
    };
    let meta = s.default_meta(shape, dtype);
    let seed = part_seed(b.seed.unwrap_or(0), k);
    Ok(Val::Arr(s.add(
        meta,
        NodeOp::Random {
            dist,
            seed,
            frame: None,
        },
    )))
}

/// The `size` argument, or (not given) the broadcast shape of the array parameters
/// `params` (a single value, 0-d, when they are numbers).
fn size(s: &Builder, b: &Bound, params: &[&str]) -> Result<Vec<u64>, EvalError> {
    if b.get("size").is_some() {
        return b.shape("size");
    }
    let mut shape = vec![];
    for p in params {
        if let Some((Val::Arr(a), pos)) = b.get(p) {
            shape = nums_layout::meta::broadcast(&shape, &s.meta(*a).shape).ok_or_else(|| {
                b.err(
                    *pos,
                    format!("{}(): the parameters' shapes do not broadcast", b.f),
                )
            })?;
        }
    }
    Ok(shape)
}

/// The legacy functions' `d0, d1, ...`.
fn dims(b: &Bound) -> Result<Vec<u64>, EvalError> {
    b.rest()
        .iter()
        .map(|(v, p)| match v {
            Val::Num(x) if x.kind() == ScalarKind::Int && x.as_i64() >= 0 => Ok(x.as_i64() as u64),
            _ => Err(b.err(
                *p,
                format!("{}(): dimensions are non-negative integers", b.f),
            )),
        })
        .collect()
}

/// A parameter as given (a number or an array), or `default`.
fn arg_or(b: &Bound, name: &str, default: f64) -> Val {
    b.get(name)
        .map_or(Val::Num(Scalar::Float(default)), |(v, _)| v.clone())
}

/// A number parameter (arrays are refused), or `default`.
fn number(b: &Bound, name: &str, default: f64) -> Result<f64, EvalError> {
    match b.get(name) {
        None if !default.is_nan() => Ok(default),
        None => Err(b.err(b.pos, format!("{}() is missing the argument {name:?}", b.f))),
        Some((Val::Num(x), _)) => Ok(x.as_f64()),
        Some((_, p)) => Err(b.err(
            *p,
            format!(
                "{}(): {name} must be a number here (an array of them is not supported)",
                b.f
            ),
        )),
    }
}

fn positive(b: &Bound, name: &str) -> Result<f64, EvalError> {
    let v = number(b, name, f64::NAN)?;
    if v > 0.0 && v.is_finite() {
        Ok(v)
    } else {
        Err(b.err(
            b.pos,
            format!("{}(): {name} must be a positive number", b.f),
        ))
    }
}

/// NumPy's ValueError for a negative scale given as a number (`normal(0, -1)`: "scale <
/// 0"); NaN passes, as in NumPy. An array of scales is checked by [`no_negative`].
fn not_negative(b: &Bound, name: &str) -> Result<(), EvalError> {
    match b.get(name) {
        Some((Val::Num(x), p)) if x.as_f64() < 0.0 => {
            Err(b.err(*p, format!("{}(): {name} < 0", b.f)))
        }
        _ => Ok(()),
    }
}

/// `r`, failing the run with NumPy's ValueError when the array argument `name` (for
/// `uniform`, `high - low`) holds a value below 0 (NaN passes): checked as it is read.
fn no_negative(s: &mut Builder, b: &Bound, name: &str, r: Val) -> Result<Val, EvalError> {
    let x = match name {
        "high - low" => match (b.get("low"), b.get("high")) {
            (Some((l, _)), Some((h, _)))
                if matches!(l, Val::Arr(_)) || matches!(h, Val::Arr(_)) =>
            {
                s.binary(Op::Sub, h.clone(), l.clone(), b.pos)?
            }
            _ => return Ok(r),
        },
        _ => match b.get(name) {
            Some((v @ Val::Arr(_), _)) => v.clone(),
            _ => return Ok(r),
        },
    };
    let neg = s.elementwise2(BinaryOp::Lt, x, Val::Num(Scalar::Float(0.0)), b.pos)?;
    let neg = s.node(neg, b.pos)?;
    let all: Vec<usize> = (0..s.meta(neg).ndim()).collect();
    let any = s.reduce(neg, ReduceOp::Any, all, false, b.pos)?;
    let any = s.cast(any, DType::Int64);
    let checked = s.add(
        s.meta(any).clone(),
        NodeOp::CheckBelow {
            x: any,
            limit: 1,
            error: format!("ValueError: {}(): {name} < 0", b.f),
        },
    );
    let r = s.node(r, b.pos)?;
    s.where_(Val::Arr(checked), Val::Arr(r), Val::Arr(r), b.pos)
}

/// `loc + scale * z`, the parameters numbers or arrays.
fn affine(
    s: &mut Builder,
    b: &Bound,
    z: Val,
    loc: &str,
    l0: f64,
    scale: &str,
    s0: f64,
) -> Result<Val, EvalError> {
    let scaled = s.binary(Op::Mul, z, arg_or(b, scale, s0), b.pos)?;
    s.binary(Op::Add, arg_or(b, loc, l0), scaled, b.pos)
}

/// Standard exponentials: -log(1 - U), finite for U in [0, 1).
fn exponential(s: &mut Builder, b: &Bound, shape: Vec<u64>) -> Result<Val, EvalError> {
    let u = draw(s, b, RandomDist::Uniform, 0, shape)?;
    let neg = s.binary(Op::Sub, Val::Num(Scalar::Float(0.0)), u, b.pos)?;
    let l = s.unary(UnaryOp::Log1p, neg, b.pos)?;
    s.binary(Op::Sub, Val::Num(Scalar::Float(0.0)), l, b.pos)
}

fn gamma(s: &mut Builder, b: &Bound, shape: f64, k: u64) -> Result<Val, EvalError> {
    let size = size(s, b, &[])?;
    draw(s, b, RandomDist::Gamma { shape }, k, size)
}

/// The `dtype=` of a float method: float64 (as drawn) or float32.
fn as_dtype(s: &mut Builder, b: &Bound, v: Val) -> Result<Val, EvalError> {
    match b.dtype("dtype")? {
        None | Some(DType::Float64) => Ok(v),
        Some(DType::Float32) => {
            let x = s.node(v, b.pos)?;
            Ok(Val::Arr(s.cast(x, DType::Float32)))
        }
        Some(d) => Err(b.err(
            b.pos,
            format!("{}(): dtype {d} is not supported; float64 or float32", b.f),
        )),
    }
}

/// Integers in [low, high) (`endpoint=True`: [low, high]); `high` not given: [0, low).
fn integers(s: &mut Builder, b: &Bound, lo: &str, hi: &str) -> Result<Val, EvalError> {
    let int = |name: &str| -> Result<Option<i64>, EvalError> {
        match b.get(name) {
            None => Ok(None),
            Some((Val::Num(x), _)) if x.kind() != ScalarKind::Float => Ok(Some(x.as_i64())),
            Some((_, p)) => Err(b.err(
                *p,
                format!(
                    "{}(): {name} must be an integer (arrays of bounds are not supported)",
                    b.f
                ),
            )),
        }
    };
    let (low, high) = match (int(lo)?, int(hi)?) {
        (Some(l), Some(h)) => (l, h),
        (Some(h), None) => (0, h),
        _ => return Err(b.err(b.pos, format!("{}() is missing the argument {lo:?}", b.f))),
    };
    let high = if b.given("endpoint").is_some() && b.flag("endpoint")? {
        high.checked_add(1)
            .ok_or_else(|| b.err(b.pos, "integers(): high is too large"))?
    } else {
        high
    };
    if high <= low {
        return Err(b.err(b.pos, format!("{}(): low >= high", b.f)));
    }
    let shape = size(s, b, &[])?;
    let v = draw(s, b, RandomDist::Integers { low, high }, 0, shape)?;
    match b.dtype("dtype")? {
        None | Some(DType::Int64) => Ok(v),
        Some(d)
            if d.is_int()
                && d.int_range()
                    .is_some_and(|(a, z)| a <= low.into() && i128::from(high) - 1 <= z) =>
        {
            let x = s.node(v, b.pos)?;
            Ok(Val::Arr(s.cast(x, d)))
        }
        Some(d) => Err(b.err(
            b.pos,
            format!("{}(): dtype {d} does not hold [{low}, {high})", b.f),
        )),
    }
}

/// A random permutation of `0..n` (int64): the positions that sort random keys (the
/// sample sort at any size).
fn perm(s: &mut Builder, b: &Bound, n: u64) -> Result<NodeId, EvalError> {
    let keys = draw(s, b, RandomDist::Uniform, 7, vec![n])?;
    let keys = s.node(keys, b.pos)?;
    s.sort_along(keys, 0, false, true, b.pos)
}

/// `x`'s rows in a random order.
fn shuffled(s: &mut Builder, b: &Bound, x: NodeId, n: u64) -> Result<Val, EvalError> {
    let p = perm(s, b, n)?;
    rows(s, b, x, p)
}

/// `x[idx]` for an int64 array `idx` (any length: gathered by the functions).
fn rows(s: &mut Builder, b: &Bound, x: NodeId, idx: NodeId) -> Result<Val, EvalError> {
    s.gather(x, idx, 0)
        .map(Val::Arr)
        .map_err(|m| b.err(b.pos, m))
}

/// `x` as a population: an int n is `arange(n)`, an array its rows.
fn population(s: &mut Builder, b: &Bound, name: &str) -> Result<(Option<NodeId>, u64), EvalError> {
    match b.need(name)? {
        (Val::Arr(a), p) => {
            let m = s.meta(*a);
            if m.ndim() == 0 {
                return Err(b.err(
                    *p,
                    format!(
                        "{}(): {name} must be an int or an array of at least 1 axis",
                        b.f
                    ),
                ));
            }
            Ok((Some(*a), m.shape[0]))
        }
        (Val::Num(x), _) if x.kind() == ScalarKind::Int && x.as_i64() >= 0 => {
            Ok((None, x.as_i64() as u64))
        }
        (_, p) => Err(b.err(
            *p,
            format!("{}(): {name} must be a non-negative int or an array", b.f),
        )),
    }
}

fn permutation(s: &mut Builder, b: &Bound, name: &str) -> Result<Val, EvalError> {
    let (x, n) = population(s, b, name)?;
    match x {
        None => Ok(Val::Arr(perm(s, b, n)?)),
        Some(x) => shuffled(s, b, x, n),
    }
}

fn choice(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, n) = population(s, b, "a")?;
    let shape = if b.get("size").is_some() {
        b.shape("size")?
    } else {
        vec![]
    };
    let k: u64 = shape.iter().product();
    let replace = b.given("replace").is_none() || b.flag("replace")?;
    if n == 0 && k > 0 {
        return Err(b.err(
            b.pos,
            "choice(): a cannot be empty unless no samples are taken",
        ));
    }
    let idx = if let Some((p, at)) = b.get("p").cloned() {
        if !replace {
            return Err(b.err(
                at,
                "choice(): p= is supported with replace=True only (NumPy's draw without replacement by weight is not)",
            ));
        }
        weighted(s, b, p, at, n, shape.clone())?
    } else if replace {
        let v = draw(
            s,
            b,
            RandomDist::Integers {
                low: 0,
                high: n.max(1) as i64,
            },
            0,
            shape.clone(),
        )?;
        s.node(v, b.pos)?
    } else {
        if k > n {
            return Err(b.err(
                b.pos,
                "choice(): cannot take a larger sample than population when replace=False",
            ));
        }
        let p = perm(s, b, n)?;
        let first = s.slice(p, &[(0, 0, k)]);
        s.reshape(first, &shape)
    };
    match x {
        None => Ok(Val::Arr(idx)),
        Some(x) => rows(s, b, x, idx),
    }
}

/// Indices drawn with the probabilities `p` (n of them): NumPy's way, a uniform draw in
/// [0, 1) placed in `p`'s cumulative sums scaled to end at 1 (`searchsorted`, right);
/// `p` negative or not summing to 1 fails the run with NumPy's ValueError.
fn weighted(
    s: &mut Builder,
    b: &Bound,
    p: Val,
    at: usize,
    n: u64,
    shape: Vec<u64>,
) -> Result<NodeId, EvalError> {
    let p = match s.list_operand(p, at)? {
        Val::Arr(id) => id,
        _ => return Err(b.err(at, "choice(): p must be 1-dimensional")),
    };
    let pm = s.meta(p).clone();
    if pm.ndim() != 1 {
        return Err(b.err(at, "choice(): p must be 1-dimensional"));
    }
    if pm.shape[0] != n {
        return Err(b.err(at, "choice(): a and p must have same size"));
    }
    let p = s.cast(p, DType::Float64);
    let cdf = s.apply("cumsum", &[("a", Val::Arr(p))], b.pos)?;
    let last = s.apply(
        "take",
        &[("a", cdf.clone()), ("indices", Val::Num(Scalar::Int(-1)))],
        b.pos,
    )?;
    let cdf = s.elementwise2(BinaryOp::Div, cdf, last.clone(), b.pos)?;
    let u = draw(s, b, RandomDist::Uniform, 0, shape)?;
    let idx = s.apply(
        "searchsorted",
        &[("a", cdf), ("v", u), ("side", Val::Str("right".into()))],
        b.pos,
    )?;
    // NumPy's checks: no negative probability, and a sum within sqrt(eps) of 1.
    let min = s.apply("min", &[("a", Val::Arr(p))], b.pos)?;
    let negative = s.elementwise2(BinaryOp::Lt, min, Val::Num(Scalar::Float(0.0)), b.pos)?;
    let idx = super::sorting::checked(
        s,
        idx,
        negative,
        "ValueError: choice(): probabilities are not non-negative".into(),
        b.pos,
    )?;
    let off = s.elementwise2(BinaryOp::Sub, last, Val::Num(Scalar::Float(1.0)), b.pos)?;
    let off = s.unary(UnaryOp::Abs, off, b.pos)?;
    let tol = Val::Num(Scalar::Float(f64::EPSILON.sqrt()));
    let far = s.elementwise2(BinaryOp::Gt, off.clone(), tol, b.pos)?;
    let nan = s.unary(UnaryOp::IsNan, off, b.pos)?;
    let far = s.elementwise2(BinaryOp::Or, far, nan, b.pos)?;
    let idx = super::sorting::checked(
        s,
        idx,
        far,
        "ValueError: choice(): probabilities do not sum to 1".into(),
        b.pos,
    )?;
    s.node(idx, b.pos)
}

impl Builder<'_> {
    /// A call of NumPy's random module (`random.f(...)`, `seed=` giving the seed; without
    /// it, one made from the array's name and the call's position) or of a Generator's
    /// method (`random.default_rng(seed).f(...)`); None when `f` is neither.
    pub(in crate::graph) fn random_call(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[Kwarg],
        pos: usize,
    ) -> Option<Result<Val, EvalError>> {
        let at = |p: usize, m: String| EvalError::Expr(ExprError::new(p, m));
        let seed_of = |s: &mut Self, e: &Expr| -> Result<u64, EvalError> {
            match s.eval(e)? {
                Val::Num(x) if x.kind() != ScalarKind::Float && x.as_i64() >= 0 => {
                    Ok(x.as_i64() as u64)
                }
                _ => Err(at(e.pos, "a seed is a non-negative integer".into())),
            }
        };
        if f.starts_with("random.") && f != "random.default_rng" {
            let def = lookup(f)?;
            return Some((|| {
                let (seeds, rest): (Vec<&Kwarg>, Vec<&Kwarg>) =
                    kwargs.iter().partition(|k| k.name == "seed");
                let rest: Vec<Kwarg> = rest.into_iter().cloned().collect();
                let seed = match seeds.first() {
                    Some(k) => seed_of(self, &k.value)?,
                    None => {
                        let name = self.stack.last().map_or("", String::as_str);
                        name.bytes()
                            .fold(pos as u64 ^ 0xcbf2_9ce4_8422_2325, |h, c| {
                                (h ^ u64::from(c)).wrapping_mul(0x0100_0000_01b3)
                            })
                    }
                };
                let mut b = self.bind(def, f, args, &rest, pos)?;
                b.seed = Some(seed);
                (def.lower)(self, &b)
            })());
        }
        let (rng, rest) = args.split_first()?;
        let ExprKind::Call(g, gargs, gkw) = &rng.kind else {
            return None;
        };
        if g != "random.default_rng" {
            return None;
        }
        Some((|| {
            let seed_expr = match (gargs.as_slice(), gkw.as_slice()) {
                ([e], []) => e,
                ([], [k]) if k.name == "seed" => &k.value,
                _ => {
                    return Err(at(
                        rng.pos,
                        "default_rng takes one seed (an integer): its draws are then the same in every run".into(),
                    ));
                }
            };
            let seed = seed_of(self, seed_expr)?;
            let name = format!("Generator.{f}");
            let def = lookup(&name).ok_or_else(|| {
                let methods: Vec<&str> = definitions()
                    .filter_map(|d| d.name.strip_prefix("Generator."))
                    .collect();
                at(
                    pos,
                    format!(
                        "a Generator has no method {f}(); supported: {}",
                        methods.join(", ")
                    ),
                )
            })?;
            let mut b = self.bind(def, f, rest, kwargs, pos)?;
            b.seed = Some(seed);
            (def.lower)(self, &b)
        })())
    }
}
