//! Shapes: NumPy's transposes, reshapes, new and dropped axes, joins and dtype casts.

use super::*;

const ARRAYS: &[&str] = &["arrays", "axis"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "transpose",
        &["a", "axes"],
        "`np.transpose`, `x.transpose(1, 0)`, `.T`",
        transpose,
    )
    .rest(Rest::Spread),
    FuncDef::new(
        "swapaxes",
        &["a", "axis1", "axis2"],
        "`np.swapaxes`",
        swapaxes,
    ),
    FuncDef::new(
        "reshape",
        &["a", "shape"],
        "`np.reshape` (`-1` once), `x.reshape(2, 3)`",
        |s, b| {
            b.array("a")?;
            let (v, p) = b.need("shape")?;
            let items = match v {
                Val::Tuple(t) => t.clone(),
                v => vec![v.clone()],
            };
            let shape = items
                .iter()
                .map(|i| match i {
                    Val::Num(x) if x.kind() != ScalarKind::Float => Ok(x.as_i64()),
                    _ => Err(b.err(*p, "reshape(): sizes are integers")),
                })
                .collect::<Result<Vec<i64>, _>>()?;
            reshape(s, b, shape)
        },
    )
    .rest(Rest::Spread),
    FuncDef::new("ravel", &["a"], "`np.ravel`", |s, b| {
        reshape(s, b, vec![-1])
    }),
    FuncDef::new(
        "expand_dims",
        &["a", "axis"],
        "`np.expand_dims`",
        expand_dims,
    ),
    FuncDef::new("squeeze", &["a", "axis"], "`np.squeeze`", squeeze),
    FuncDef::new(
        "concatenate",
        ARRAYS,
        "`np.concatenate` (`axis=None` flattens)",
        concatenate,
    ),
    FuncDef::new("stack", ARRAYS, "`np.stack`", stack),
    FuncDef::new("vstack", &["tup"], "`np.vstack`", |s, b| {
        // NumPy's atleast_2d, then one after another along axis 0.
        let xs = arrays(b, "tup")?
            .into_iter()
            .map(|x| match s.meta(x).shape.clone()[..] {
                [] => s.reshape(x, &[1, 1]),
                [n] => s.reshape(x, &[1, n]),
                _ => x,
            })
            .collect();
        Ok(Val::Arr(s.concat(xs, 0, b.pos)?))
    }),
    FuncDef::new("hstack", &["tup"], "`np.hstack`", |s, b| {
        // NumPy's atleast_1d, then along axis 1 (axis 0 for 1-D arrays).
        let xs: Vec<NodeId> = arrays(b, "tup")?
            .into_iter()
            .map(|x| match s.meta(x).ndim() {
                0 => s.reshape(x, &[1]),
                _ => x,
            })
            .collect();
        let axis = if s.meta(xs[0]).ndim() == 1 { 0 } else { 1 };
        Ok(Val::Arr(s.concat(xs, axis, b.pos)?))
    }),
    FuncDef::new(
        "astype",
        &["x", "dtype"],
        "`np.astype`, `x.astype(dtype)`",
        |s, b| {
            let x = b.array("x")?;
            let d = b
                .dtype("dtype")?
                .ok_or_else(|| b.err(b.pos, "astype() needs a dtype"))?;
            Ok(Val::Arr(s.cast(x, d)))
        },
    ),
];

fn transpose(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let n = s.meta(x).ndim();
    let perm = match b.get("axes") {
        None => (0..n).rev().collect(),
        Some((v, p)) => {
            let Val::Tuple(t) = v else {
                return Err(b.err(*p, "transpose(): axes is a tuple"));
            };
            let perm = t
                .iter()
                .map(|i| axis_of(i, n).map_err(|m| b.err(*p, m)))
                .collect::<Result<Vec<usize>, _>>()?;
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..n).collect::<Vec<_>>() {
                return Err(b.err(
                    *p,
                    format!("transpose(): axes {perm:?} are not a permutation of 0..{n}"),
                ));
            }
            perm
        }
    };
    Ok(Val::Arr(s.transpose(x, perm)))
}

fn swapaxes(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let n = s.meta(x).ndim();
    let one = |name: &str| -> Result<usize, EvalError> {
        let v = b
            .int(name)?
            .ok_or_else(|| b.err(b.pos, format!("swapaxes() needs {name}")))?;
        one_axis(v, n).map_err(|m| b.err(b.pos, m))
    };
    let (a1, a2) = (one("axis1")?, one("axis2")?);
    let mut perm: Vec<usize> = (0..n).collect();
    perm.swap(a1, a2);
    Ok(Val::Arr(s.transpose(x, perm)))
}

/// `a` in `shape`, where one size may be -1 (whatever is left).
fn reshape(s: &mut Builder, b: &Bound, shape: Vec<i64>) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let len = s.meta(x).len();
    let bad = || {
        b.err(
            b.pos,
            format!("cannot reshape an array of size {len} into shape {shape:?}"),
        )
    };
    let free = shape.iter().filter(|&&d| d == -1).count();
    let known = shape
        .iter()
        .filter(|&&d| d != -1)
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
        .ok_or_else(bad)?;
    // NumPy: -1 beside a 0 is not inferred (any size would do).
    if free > 1 || (free == 1 && known == 0) {
        return Err(bad());
    }
    let sizes: Vec<u64> = shape
        .iter()
        .map(|&d| if d == -1 { len / known } else { d as u64 })
        .collect();
    if sizes.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d)) != Some(len) {
        return Err(bad());
    }
    Ok(Val::Arr(s.reshape(x, &sizes)))
}

fn expand_dims(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    let (v, p) = b.need("axis")?;
    let added = match v {
        Val::Tuple(t) => t.len(),
        _ => 1,
    };
    let n = m.ndim() + added;
    let axes = axes_of(v, n).map_err(|e| b.err(*p, e))?;
    let mut src = m.shape.iter().copied();
    let shape: Vec<u64> = (0..n)
        .map(|d| {
            if axes.contains(&d) {
                1
            } else {
                src.next().unwrap_or(1)
            }
        })
        .collect();
    Ok(Val::Arr(s.reshape(x, &shape)))
}

fn squeeze(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    let axes = match b.get("axis") {
        None => (0..m.ndim()).filter(|&d| m.shape[d] == 1).collect(),
        Some((v, p)) => {
            let axes = axes_of(v, m.ndim()).map_err(|e| b.err(*p, e))?;
            if let Some(&d) = axes.iter().find(|&&d| m.shape[d] != 1) {
                return Err(b.err(
                    *p,
                    format!("squeeze(): axis {d} has size {}, not 1", m.shape[d]),
                ));
            }
            axes
        }
    };
    let shape: Vec<u64> = (0..m.ndim())
        .filter(|d| !axes.contains(d))
        .map(|d| m.shape[d])
        .collect();
    Ok(Val::Arr(s.reshape(x, &shape)))
}

/// The arrays of a tuple or list argument (at least one).
fn arrays(b: &Bound, name: &str) -> Result<Vec<NodeId>, EvalError> {
    let (v, p) = b.need(name)?;
    let Val::Tuple(items) = v else {
        return Err(b.err(*p, format!("{}() takes a tuple or list of arrays", b.f)));
    };
    let mut xs = Vec::new();
    for i in items {
        match i {
            Val::Arr(id) => xs.push(*id),
            _ => return Err(b.err(*p, format!("{}(): every item must be an array", b.f))),
        }
    }
    if xs.is_empty() {
        return Err(b.err(*p, format!("{}() needs at least one array", b.f)));
    }
    Ok(xs)
}

/// The `axis` of concatenate and stack: one integer (0 when not given).
fn join_axis(b: &Bound, ndim: usize) -> Result<usize, EvalError> {
    match b.given("axis") {
        None => Ok(0),
        Some((v, p)) => axis_of(v, ndim).map_err(|m| b.err(*p, m)),
    }
}

fn concatenate(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let xs = arrays(b, "arrays")?;
    if let Some((Val::None, _)) = b.given("axis") {
        // NumPy: the arrays are flattened first.
        let xs = xs
            .into_iter()
            .map(|x| {
                let n = s.meta(x).len();
                s.reshape(x, &[n])
            })
            .collect();
        return Ok(Val::Arr(s.concat(xs, 0, b.pos)?));
    }
    let n = s.meta(xs[0]).ndim();
    if n == 0 {
        let p = b.need("arrays")?.1;
        return Err(b.err(p, "concatenate() of 0-d arrays"));
    }
    let axis = join_axis(b, n)?;
    Ok(Val::Arr(s.concat(xs, axis, b.pos)?))
}

fn stack(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let xs = arrays(b, "arrays")?;
    let first = s.meta(xs[0]).shape.clone();
    if let Some(&x) = xs.iter().find(|&&x| s.meta(x).shape != first) {
        return Err(b.err(
            b.pos,
            format!(
                "stack(): all input arrays must have the same shape; got {} and {}",
                shape_str(&first),
                shape_str(&s.meta(x).shape)
            ),
        ));
    }
    let ax = join_axis(b, first.len() + 1)?;
    let mut shape = first;
    shape.insert(ax, 1);
    let xs = xs.into_iter().map(|x| s.reshape(x, &shape)).collect();
    Ok(Val::Arr(s.concat(xs, ax, b.pos)?))
}
