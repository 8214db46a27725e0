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
        "permute_dims",
        &["a", "axes"],
        "`np.permute_dims` (Array API: `transpose` with `axes`)",
        transpose,
    ),
    FuncDef::new(
        "moveaxis",
        &["a", "source", "destination"],
        "`np.moveaxis` (ints or tuples)",
        moveaxis,
    ),
    FuncDef::new(
        "swapaxes",
        &["a", "axis1", "axis2"],
        "`np.swapaxes`",
        swapaxes,
    ),
    FuncDef::new(
        "reshape",
        &["a", "shape", "order", "copy"],
        "`np.reshape` (`-1` once; `order` \"C\", \"F\" or \"A\"; `copy` taken), `x.reshape(2, 3)`",
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
        "`np.expand_dims` (the Array API's default `axis=0`)",
        expand_dims,
    ),
    FuncDef::new("squeeze", &["a", "axis"], "`np.squeeze`", squeeze),
    FuncDef::new(
        "concatenate",
        ARRAYS,
        "`np.concatenate` (`axis=None` flattens)",
        concatenate,
    ),
    FuncDef::new(
        "concat",
        ARRAYS,
        "`np.concat` (Array API's `concatenate`)",
        concatenate,
    ),
    FuncDef::new("stack", ARRAYS, "`np.stack`", stack),
    FuncDef::new(
        "unstack",
        &["x", "axis"],
        "`np.unstack` (Array API; a tuple of slices)",
        unstack,
    ),
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
        "flip",
        &["m", "axis"],
        "`np.flip` (a reversed slice: each block reads the blocks that hold it)",
        flip,
    ),
    FuncDef::new(
        "roll",
        &["a", "shift", "axis"],
        "`np.roll` (two slices joined; `axis=None` rolls the flattened array)",
        roll,
    ),
    FuncDef::new("tile", &["A", "reps"], "`np.tile` (copies joined)", tile),
    FuncDef::new(
        "resize",
        &["a", "new_shape"],
        "`np.resize` (the flattened array repeated to fill the new shape; zeros when `a` is empty)",
        resize,
    ),
    FuncDef::new(
        "repeat",
        &["a", "repeats", "axis"],
        "`np.repeat` (an int: a broadcast; a list or an array per element, an array's values computed first)",
        repeat,
    ),
    FuncDef::new(
        "take",
        &["a", "indices", "axis", "out", "mode"],
        "`np.take` (integer indices: an int, a list, or an array of any shape, its values computed first)",
        take,
    )
    .refusing(&["out", "mode"]),
    FuncDef::new(
        "broadcast_to",
        &["array", "shape"],
        "`np.broadcast_to`",
        broadcast_to,
    ),
    FuncDef::new(
        "broadcast_arrays",
        &["args"],
        "`np.broadcast_arrays` (a tuple)",
        broadcast_arrays,
    )
    .rest(Rest::Star),
    FuncDef::new(
        "meshgrid",
        &["xi", "copy", "sparse", "indexing"],
        "`np.meshgrid` (a tuple; `indexing` \"xy\" or \"ij\", `sparse`)",
        meshgrid,
    )
    .rest(Rest::Leading),
    FuncDef::new(
        "tril",
        &["m", "k"],
        "`np.tril` (of the last two axes)",
        |s, b| tri(s, b, true),
    ),
    FuncDef::new(
        "triu",
        &["m", "k"],
        "`np.triu` (of the last two axes)",
        |s, b| tri(s, b, false),
    ),
    FuncDef::new(
        "diagonal",
        &["a", "offset", "axis1", "axis2"],
        "`np.diagonal` (the diagonal last)",
        diagonal,
    ),
    FuncDef::new(
        "pad",
        &["array", "pad_width", "mode", "constant_values", "stat_length", "end_values"],
        "`np.pad` (every mode: `constant` with one constant, `edge`, `wrap`, `reflect`, `symmetric`, `mean`, `maximum`, `minimum`, `median`, `linear_ramp`, `empty`)",
        pad,
    ),
    FuncDef::new(
        "astype",
        &["x", "dtype", "copy"],
        "`np.astype`, `x.astype(dtype)` (`copy` taken: arrays are never changed in place)",
        |s, b| {
            let d = b
                .dtype("dtype")?
                .ok_or_else(|| b.err(b.pos, "astype() needs a dtype"))?;
            // A number becomes the NumPy scalar of the dtype (NumPy's `np.int32(-1)`).
            if let (Val::Num(x), _) = b.need("x")? {
                return Ok(Val::NpScalar(x.cast(d), d));
            }
            let x = b.array("x")?;
            Ok(Val::Arr(s.cast(x, d)))
        },
    ),
    FuncDef::new(
        "column_stack",
        &["tup"],
        "`np.column_stack` (1-D arrays as columns)",
        |s, b| stack_along(s, b, 1),
    ),
    FuncDef::new(
        "dstack",
        &["tup"],
        "`np.dstack` (along a third axis)",
        |s, b| stack_along(s, b, 2),
    ),
    FuncDef::new("fliplr", &["m"], "`np.fliplr`: `flip(m, axis=1)`", |s, b| {
        flip_axis(s, b, 1)
    }),
    FuncDef::new("flipud", &["m"], "`np.flipud`: `flip(m, axis=0)`", |s, b| {
        flip_axis(s, b, 0)
    }),
    FuncDef::new(
        "put",
        &["a", "ind", "v", "mode"],
        "`np.put`, returning the new array (NumPy's `a` after the call; `mode` 'raise', 'wrap' or 'clip'; `ind`'s values computed first)",
        put,
    ),
    FuncDef::new(
        "place",
        &["arr", "mask", "vals"],
        "`np.place`, returning the new array (the mask's positions computed first)",
        place,
    ),
    FuncDef::new(
        "putmask",
        &["a", "mask", "values"],
        "`np.putmask`, returning the new array (`values` repeated over `a`'s flat positions)",
        putmask,
    ),
    FuncDef::new(
        "put_along_axis",
        &["arr", "indices", "values", "axis"],
        "`np.put_along_axis`, returning the new array (the indices' values computed first)",
        put_along_axis,
    ),
    FuncDef::new(
        "take_along_axis",
        &["arr", "indices", "axis"],
        "`np.take_along_axis` (indices broadcast with `arr` but along `axis`; their values computed first)",
        take_along_axis,
    ),
    FuncDef::new(
        "diag",
        &["v", "k"],
        "`np.diag` (a 2-D array's `k`-th diagonal; a 1-D array on one)",
        diag,
    ),
    FuncDef::new(
        "split",
        &["ary", "indices_or_sections", "axis"],
        "`np.split` (a tuple of slices; sections must divide the axis)",
        |s, b| split(s, b, false),
    ),
    FuncDef::new(
        "array_split",
        &["ary", "indices_or_sections", "axis"],
        "`np.array_split` (a tuple of slices; the first ones one longer)",
        |s, b| split(s, b, true),
    ),
    FuncDef::new(
        "rot90",
        &["m", "k", "axes"],
        "`np.rot90` (flips and a transpose)",
        rot90,
    ),
    FuncDef::new(
        "kron",
        &["a", "b"],
        "`np.kron` (an outer product, its axes interleaved)",
        kron,
    ),
    FuncDef::new(
        "matrix_transpose",
        &["x"],
        "`np.matrix_transpose`: the last two axes swapped",
        |s, b| {
            let x = b.array("x")?;
            if s.meta(x).ndim() < 2 {
                return Err(b.err(
                    b.pos,
                    "matrix_transpose(): input array must be at least 2-dimensional",
                ));
            }
            let int = |i: i64| Val::Num(Scalar::Int(i));
            s.apply(
                "swapaxes",
                &[("a", Val::Arr(x)), ("axis1", int(-1)), ("axis2", int(-2))],
                b.pos,
            )
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
                .map(|i| axis_of(i, n).map_err(|m| b.refused(*p, m)))
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
        one_axis(v, n).map_err(|m| b.refused(b.pos, m))
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
    // NumPy's order: "C" (and "A": nums-cloud's arrays are in C order) reads and writes
    // the elements with the last index fastest; "F" with the first, which is the C reshape
    // of the reversed axes, reversed back.
    let fortran = match b.get("order") {
        None => false,
        Some((Val::Str(o), _)) if o == "C" || o == "A" => false,
        Some((Val::Str(o), _)) if o == "F" => true,
        Some((v, p)) => {
            let got = match v {
                Val::Str(o) => format!("{o:?}"),
                _ => "not a string".to_string(),
            };
            return Err(b.err(
                *p,
                format!("reshape(): order must be one of 'C', 'F' or 'A' (got {got})"),
            ));
        }
    };
    if !fortran {
        return Ok(Val::Arr(s.reshape(x, &sizes)));
    }
    let n = s.meta(x).ndim();
    let t = s.transpose(x, (0..n).rev().collect());
    let rev: Vec<u64> = sizes.iter().rev().copied().collect();
    let r = s.reshape(t, &rev);
    Ok(Val::Arr(s.transpose(r, (0..sizes.len()).rev().collect())))
}

fn expand_dims(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    // The Array API's default axis 0 (NumPy's axis has none).
    let zero = (Val::Num(Scalar::Int(0)), b.pos);
    let (v, p) = b.get("axis").unwrap_or(&zero);
    let added = match v {
        Val::Tuple(t) => t.len(),
        _ => 1,
    };
    let n = m.ndim() + added;
    let axes = axes_of(v, n).map_err(|e| b.refused(*p, e))?;
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
            let axes = axes_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?;
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
        Some((v, p)) => axis_of(v, ndim).map_err(|m| b.refused(*p, m)),
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

/// An axis argument of one int or a tuple of ints, each normalized, none repeated.
fn axis_list(b: &Bound, name: &str, ndim: usize) -> Result<Vec<usize>, EvalError> {
    let (v, p) = b.need(name)?;
    let items = match v {
        Val::Tuple(t) => t.clone(),
        v => vec![v.clone()],
    };
    let axes = items
        .iter()
        .map(|i| axis_of(i, ndim).map_err(|m| b.refused(*p, m.after(&format!("{}(): ", b.f)))))
        .collect::<Result<Vec<usize>, _>>()?;
    let mut seen = axes.clone();
    seen.sort_unstable();
    seen.dedup();
    if seen.len() != axes.len() {
        return Err(b.err(*p, format!("{}(): repeated axis in {name}", b.f)));
    }
    Ok(axes)
}

/// Integers of an int or a tuple argument.
pub(super) fn ints(b: &Bound, name: &str) -> Result<Vec<i64>, EvalError> {
    let (v, p) = b.need(name)?;
    let items = match v {
        Val::Tuple(t) => t.clone(),
        v => vec![v.clone()],
    };
    items
        .iter()
        .map(|i| match i {
            Val::Num(x) if x.kind() != ScalarKind::Float => Ok(x.as_i64()),
            _ => Err(b.err(*p, format!("{}(): {name} must be integers", b.f))),
        })
        .collect()
}

/// `x` along `axis` from `start` by `step` (negative: backwards), `len` elements; blocks
/// as indexing makes them.
fn strided(s: &mut Builder, x: NodeId, axis: usize, start: i64, step: i64, len: u64) -> NodeId {
    let m = s.meta(x).clone();
    let mut st = vec![0i64; m.ndim()];
    let mut steps = vec![1i64; m.ndim()];
    let mut shape = m.shape.clone();
    let mut block = m.block.clone();
    st[axis] = start;
    steps[axis] = step;
    shape[axis] = len;
    block[axis] = (block[axis] / step.unsigned_abs()).max(1);
    s.add(
        ArrayMeta::new(shape, block, m.dtype),
        NodeOp::Slice {
            x,
            start: st,
            step: steps,
        },
    )
}

fn moveaxis(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let n = s.meta(x).ndim();
    let src = axis_list(b, "source", n)?;
    let dst = axis_list(b, "destination", n)?;
    if src.len() != dst.len() {
        return Err(b.err(
            b.pos,
            "moveaxis(): `source` and `destination` arguments must have the same number of elements",
        ));
    }
    // NumPy's: the other axes in order, then each source inserted at its destination.
    let mut order: Vec<usize> = (0..n).filter(|d| !src.contains(d)).collect();
    let mut pairs: Vec<(usize, usize)> = dst.into_iter().zip(src).collect();
    pairs.sort_unstable();
    for (d, a) in pairs {
        order.insert(d, a);
    }
    Ok(Val::Arr(s.transpose(x, order)))
}

fn unstack(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("x")?;
    let m = s.meta(x).clone();
    if m.ndim() == 0 {
        return Err(b.err(b.pos, "unstack() of a 0-d array"));
    }
    let axis = match b.get("axis") {
        None => 0,
        Some((v, p)) => axis_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let mut shape = m.shape.clone();
    shape.remove(axis);
    let parts = (0..m.shape[axis])
        .map(|i| {
            let one = s.slice(x, &[(axis, i, 1)]);
            Val::Arr(s.reshape(one, &shape))
        })
        .collect();
    Ok(Val::Tuple(parts))
}

/// The axes of `flip`'s `axis` (every axis when not given).
fn flip(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut x = b.array("m")?;
    let m = s.meta(x).clone();
    let axes = match b.get("axis") {
        None => (0..m.ndim()).collect(),
        Some(_) => axis_list(b, "axis", m.ndim())?,
    };
    for a in axes {
        let n = m.shape[a];
        if n > 1 {
            x = strided(s, x, a, n as i64 - 1, -1, n);
        }
    }
    Ok(Val::Arr(x))
}

fn roll(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let m = s.meta(x).clone();
    let shifts = ints(b, "shift")?;
    let Some(_) = b.get("axis") else {
        // NumPy: the flattened array rolled (by every shift: they broadcast against
        // its one axis), then its shape again.
        let k = shifts.iter().fold(0i64, |t, &k| t.wrapping_add(k));
        let flat = s.reshape(x, &[m.len()]);
        let r = roll_axis(s, flat, 0, k, b.pos)?;
        return Ok(Val::Arr(s.reshape(r, &m.shape)));
    };
    let axes = {
        let (v, p) = b.need("axis")?;
        let items = match v {
            Val::Tuple(t) => t.clone(),
            v => vec![v.clone()],
        };
        items
            .iter()
            .map(|i| axis_of(i, m.ndim()).map_err(|e| b.refused(*p, e)))
            .collect::<Result<Vec<usize>, _>>()?
    };
    // NumPy broadcasts shift against axis; shifts of one axis add up.
    let pairs: Vec<(i64, usize)> = match (shifts.len(), axes.len()) {
        (i, j) if i == j => shifts.into_iter().zip(axes).collect(),
        (1, _) => axes.into_iter().map(|a| (shifts[0], a)).collect(),
        (_, 1) => shifts.into_iter().map(|k| (k, axes[0])).collect(),
        _ => return Err(b.err(b.pos, "roll(): shift and axis do not broadcast")),
    };
    let mut total = vec![0i64; m.ndim()];
    for (k, a) in pairs {
        total[a] = total[a].wrapping_add(k);
    }
    let mut r = x;
    for (a, k) in total.into_iter().enumerate() {
        r = roll_axis(s, r, a, k, b.pos)?;
    }
    Ok(Val::Arr(r))
}

/// `x` rolled by `k` along `axis`: its last `k` elements, then the others.
fn roll_axis(
    s: &mut Builder,
    x: NodeId,
    axis: usize,
    k: i64,
    pos: usize,
) -> Result<NodeId, EvalError> {
    let n = s.meta(x).shape[axis];
    if n == 0 {
        return Ok(x);
    }
    let k = k.rem_euclid(n as i64) as u64;
    if k == 0 {
        return Ok(x);
    }
    let tail = s.slice(x, &[(axis, n - k, k)]);
    let head = s.slice(x, &[(axis, 0, n - k)]);
    s.concat(vec![tail, head], axis, pos)
}

fn tile(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("A")?;
    let reps = ints(b, "reps")?;
    if let Some(r) = reps.iter().find(|&&r| r < 0) {
        return Err(b.err(b.pos, format!("tile(): negative repetition {r}")));
    }
    let m = s.meta(x).clone();
    let d = m.ndim().max(reps.len());
    // Both padded with leading 1s to d axes.
    let mut shape = vec![1u64; d - m.ndim()];
    shape.extend(&m.shape);
    let mut reps_d = vec![1i64; d - reps.len()];
    reps_d.extend(&reps);
    let mut r = s.reshape(x, &shape);
    for (a, &k) in reps_d.iter().enumerate() {
        if k == 1 {
            continue;
        }
        r = if k == 0 {
            s.slice(r, &[(a, 0, 0)])
        } else {
            s.concat(vec![r; k as usize], a, b.pos)?
        };
    }
    Ok(Val::Arr(r))
}

/// NumPy's resize: `a` flattened, repeated as often as the new shape needs (one
/// broadcast, however many copies), cut to its size and reshaped; an empty `a` gives zeros.
fn resize(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (a, p) = b.need("a")?.clone();
    let a = s.list_operand(a, p)?;
    let a = s.node(a, p)?;
    let shape = ints(b, "new_shape")?;
    if shape.iter().any(|&d| d < 0) {
        return Err(b.err(
            b.pos,
            "resize(): all elements of new_shape must be non-negative",
        ));
    }
    let shape: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    let total: u64 = shape.iter().product();
    let m = s.meta(a).clone();
    let n = m.len();
    if n == 0 {
        let dims = shape
            .iter()
            .map(|&d| Val::Num(Scalar::Int(d as i64)))
            .collect();
        return s.apply(
            "zeros",
            &[
                ("shape", Val::Tuple(dims)),
                ("dtype", Val::Str(m.dtype.name().into())),
            ],
            b.pos,
        );
    }
    let flat = s.reshape(a, &[1, n]);
    let copies = total.div_ceil(n);
    let r = s.apply(
        "broadcast_to",
        &[
            ("array", Val::Arr(flat)),
            (
                "shape",
                Val::Tuple(vec![
                    Val::Num(Scalar::Int(copies as i64)),
                    Val::Num(Scalar::Int(n as i64)),
                ]),
            ),
        ],
        b.pos,
    )?;
    let r = s.node(r, b.pos)?;
    let r = s.reshape(r, &[copies * n]);
    let r = s.slice(r, &[(0, 0, total)]);
    Ok(Val::Arr(s.reshape(r, &shape)))
}

fn repeat(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut x = b.array("a")?;
    let reps = match b.need("repeats")? {
        // An array of counts: its values computed first (a stage); until then one each.
        (Val::Arr(r), p) => {
            let (r, p) = (*r, *p);
            let rm = s.meta(r).clone();
            if !rm.dtype.is_int() || rm.ndim() > 1 {
                return Err(b.raising(
                    crate::refusal::PyException::TypeError,
                    p,
                    format!(
                        "repeat(): repeats must be integers, 0-D or 1-D (got {} of shape {})",
                        rm.dtype.name(),
                        shape_str(&rm.shape)
                    ),
                ));
            }
            match s
                .int_values(r)
                .map_err(|e| b.err(p, format!("repeat(): {e}")))?
            {
                Some(v) => v,
                None => vec![1; rm.len() as usize],
            }
        }
        _ => ints(b, "repeats")?,
    };
    if let Some(r) = reps.iter().find(|&&r| r < 0) {
        return Err(b.err(b.pos, format!("repeat(): negative repetition {r}")));
    }
    let axis = match b.get("axis") {
        None => {
            let n = s.meta(x).len();
            x = s.reshape(x, &[n]);
            0
        }
        Some((v, p)) => axis_of(v, s.meta(x).ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let m = s.meta(x).clone();
    let n = m.shape[axis];
    if let [k] = reps[..] {
        // Each element k times: a new axis of k after `axis` (a broadcast), then merged.
        let k = k as u64;
        let mut one = m.shape.clone();
        one.insert(axis + 1, 1);
        let mut wide = one.clone();
        wide[axis + 1] = k;
        let mut out = m.shape.clone();
        out[axis] = n * k;
        let r = s.reshape(x, &one);
        let r = broadcast_node(s, r, &wide);
        return Ok(Val::Arr(s.reshape(r, &out)));
    }
    if reps.len() as u64 != n {
        return Err(b.err(
            b.pos,
            format!("repeat(): {} repeats for an axis of {n}", reps.len()),
        ));
    }
    let indices: Vec<u64> = reps
        .iter()
        .enumerate()
        .flat_map(|(i, &k)| std::iter::repeat_n(i as u64, k as usize))
        .collect();
    Ok(Val::Arr(take_node(s, x, axis, indices)))
}

pub(super) fn take_node(s: &mut Builder, x: NodeId, axis: usize, indices: Vec<u64>) -> NodeId {
    let t = s.meta(x).clone();
    let mut shape = t.shape.clone();
    shape[axis] = indices.len() as u64;
    s.add(
        ArrayMeta::new(shape, t.block, t.dtype),
        NodeOp::Take { x, axis, indices },
    )
}

fn take(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut x = b.array("a")?;
    let axis = match b.get("axis") {
        None => {
            let n = s.meta(x).len();
            x = s.reshape(x, &[n]);
            0
        }
        Some((v, p)) => axis_of(v, s.meta(x).ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let (v, p) = b.need("indices")?;
    let m = s.meta(x).clone();
    if let Val::Arr(ind) = v {
        // An array of indices: its values computed first (a stage), any shape, which takes
        // the place of `axis` in the result (NumPy's).
        let im = s.meta(*ind).clone();
        if !im.dtype.is_int() {
            return Err(b.raising(
                crate::refusal::PyException::TypeError,
                *p,
                format!(
                    "take(): indices of dtype {} are not integers",
                    im.dtype.name()
                ),
            ));
        }
        let r = s.gather(x, *ind, axis).map_err(|e| {
            b.raising(
                crate::refusal::PyException::IndexError,
                *p,
                format!("take(): {e}"),
            )
        })?;
        return Ok(Val::Arr(r));
    }
    let scalar = !matches!(v, Val::Tuple(_));
    let n = m.shape[axis] as i64;
    let idx = ints(b, "indices")?
        .into_iter()
        .map(|i| {
            if i < -n || i >= n {
                Err(b.raising(
                    crate::refusal::PyException::IndexError,
                    *p,
                    format!("take(): index {i} is out of bounds for axis {axis} with size {n}"),
                ))
            } else {
                Ok(i.rem_euclid(n) as u64)
            }
        })
        .collect::<Result<Vec<u64>, _>>()?;
    let r = take_node(s, x, axis, idx);
    if scalar {
        let mut shape = m.shape.clone();
        shape.remove(axis);
        return Ok(Val::Arr(s.reshape(r, &shape)));
    }
    Ok(Val::Arr(r))
}

/// `x` broadcast to `shape` (checked by the caller): NumPy's broadcast_to, as `where`
/// of a true mask of that shape, blocked as `x` along the axes it spans.
pub(super) fn broadcast_node(s: &mut Builder, x: NodeId, shape: &[u64]) -> NodeId {
    let m = s.meta(x).clone();
    if m.shape == shape {
        return x;
    }
    let mut meta = s.default_meta(shape.to_vec(), DType::Bool);
    let lead = shape.len() - m.ndim();
    for d in 0..m.ndim() {
        if m.shape[d] == shape[lead + d] && m.shape[d] > 1 {
            meta.block[lead + d] = m.block[d];
        }
    }
    let meta = ArrayMeta::new(meta.shape, meta.block, DType::Bool);
    let c = s.add(
        meta.clone(),
        NodeOp::Fill {
            value: Scalar::Bool(true),
        },
    );
    let x = s.rechunk(
        x,
        (0..m.ndim())
            .map(|d| {
                if m.shape[d] == 1 {
                    1
                } else {
                    meta.block[lead + d]
                }
            })
            .collect(),
    );
    s.add(
        ArrayMeta::new(meta.shape, meta.block, m.dtype),
        NodeOp::Where { c, a: x, b: x },
    )
}

/// NumPy's check of broadcast_to: `x`'s shape broadcasts to `shape` itself.
fn broadcastable(from: &[u64], to: &[u64]) -> bool {
    from.len() <= to.len()
        && from
            .iter()
            .rev()
            .zip(to.iter().rev())
            .all(|(&f, &t)| f == t || f == 1)
}

fn broadcast_to(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("array")?;
    let shape = b.shape("shape")?;
    Ok(Val::Arr(broadcast_checked(
        s,
        b,
        x,
        &shape,
        "broadcast_to",
    )?))
}

/// [`broadcast_node`] after NumPy's check, the error naming the function `f`.
fn broadcast_checked(
    s: &mut Builder,
    b: &Bound,
    x: NodeId,
    shape: &[u64],
    f: &str,
) -> Result<NodeId, EvalError> {
    let from = s.meta(x).shape.clone();
    if !broadcastable(&from, shape) {
        return Err(b.err(
            b.pos,
            format!(
                "{f}(): shape {} cannot broadcast to {}",
                shape_str(&from),
                shape_str(shape)
            ),
        ));
    }
    Ok(broadcast_node(s, x, shape))
}

/// NumPy's put, returning the new array (NumPy's `a` after the call): `v` (repeated to
/// `ind`'s length) at the flat positions `ind` (their values computed first).
fn put(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    use crate::refusal::PyException;
    let a = b.array("a")?;
    let n = s.meta(a).len();
    let (ind, p) = b.need("ind")?;
    let ind = s.node(ind.clone(), *p)?;
    let k = s.meta(ind).len();
    let ind = s.reshape(ind, &[k]);
    // NumPy casts `ind` to intp whatever its type.
    let ind = s.cast(ind, DType::Int64);
    let v = s.node(b.need("v")?.0.clone(), b.pos)?;
    let nv = s.meta(v).len();
    let mode = match b.get("mode") {
        None => "raise".to_string(),
        Some((Val::Str(m), _)) if ["raise", "wrap", "clip"].contains(&m.as_str()) => m.clone(),
        Some((_, p)) => {
            return Err(b.raising(
                PyException::ValueError,
                *p,
                "clipmode must be one of 'clip', 'raise', or 'wrap'",
            ));
        }
    };
    if k == 0 || nv == 0 {
        return Ok(Val::Arr(a));
    }
    if n == 0 {
        return Err(b.raising(
            PyException::IndexError,
            b.pos,
            "cannot replace elements of an empty array",
        ));
    }
    let last = Val::Num(Scalar::Int(n as i64 - 1));
    let ind = match mode.as_str() {
        "wrap" => {
            let r = s.elementwise2(
                BinaryOp::Mod,
                Val::Arr(ind),
                Val::Num(Scalar::Int(n as i64)),
                b.pos,
            )?;
            s.node(r, b.pos)?
        }
        "clip" => {
            let r = s.apply(
                "clip",
                &[
                    ("a", Val::Arr(ind)),
                    ("a_min", Val::Num(Scalar::Int(0))),
                    ("a_max", last),
                ],
                b.pos,
            )?;
            s.node(r, b.pos)?
        }
        _ => ind,
    };
    let v = s.reshape(v, &[nv]);
    let v = repeated(s, v, k, b.pos)?;
    let r = s
        .put_flat(a, ind, v)
        .map_err(|e| b.raising(PyException::IndexError, b.pos, format!("put(): {e}")))?;
    Ok(Val::Arr(r))
}

/// The 1-D `v` repeated (and cut) to length `k`, as NumPy's put, place and putmask
/// repeat their values.
fn repeated(s: &mut Builder, v: NodeId, k: u64, pos: usize) -> Result<NodeId, EvalError> {
    if s.meta(v).len() == k {
        return Ok(v);
    }
    let r = s.apply(
        "resize",
        &[
            ("a", Val::Arr(v)),
            ("new_shape", Val::Num(Scalar::Int(k as i64))),
        ],
        pos,
    )?;
    s.node(r, pos)
}

/// The mask of place and putmask: of `a`'s size (NumPy's ValueError naming `f` if not),
/// in its shape, non-zero as true.
fn same_size_mask(s: &mut Builder, b: &Bound, a: NodeId, f: &str) -> Result<NodeId, EvalError> {
    let m = s.meta(a).clone();
    let (mask, p) = b.need("mask")?;
    let mask = s.node(mask.clone(), *p)?;
    if s.meta(mask).len() != m.len() {
        return Err(b.raising(
            crate::refusal::PyException::ValueError,
            *p,
            format!("{f}: mask and data must be the same size"),
        ));
    }
    let mask = s.reshape(mask, &m.shape);
    if s.meta(mask).dtype == DType::Bool {
        return Ok(mask);
    }
    let r = s.elementwise2(BinaryOp::Ne, Val::Arr(mask), Val::Num(Scalar::Int(0)), *p)?;
    s.node(r, *p)
}

/// NumPy's place, returning the new array: the mask's true positions (computed first, C
/// order) take `vals` in turn, repeated.
fn place(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let arr = b.array("arr")?;
    let mask = same_size_mask(s, b, arr, "place")?;
    let n = s.meta(arr).len();
    let flat = s.reshape(mask, &[n]);
    let p = s.nonzero_positions(flat, b.pos)?;
    let vals = s.node(b.need("vals")?.0.clone(), b.pos)?;
    let nv = s.meta(vals).len();
    if nv == 0 {
        // NumPy's error where the mask selects something; refused here for any mask.
        return Err(b.raising(
            crate::refusal::PyException::ValueError,
            b.pos,
            "Cannot insert from an empty array!",
        ));
    }
    let count = s.meta(p).len();
    let vals = s.reshape(vals, &[nv]);
    let vals = repeated(s, vals, count, b.pos)?;
    let r = s
        .put_flat(arr, p, vals)
        .map_err(|e| b.err(b.pos, format!("place(): {e}")))?;
    Ok(Val::Arr(r))
}

/// NumPy's putmask, returning the new array: where the mask is true, the value at the
/// same flat position of `values` repeated to `a`'s size.
fn putmask(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let a = b.array("a")?;
    let m = s.meta(a).clone();
    let mask = same_size_mask(s, b, a, "putmask")?;
    let v = s.node(b.need("values")?.0.clone(), b.pos)?;
    let nv = s.meta(v).len();
    if nv == 0 {
        return Ok(Val::Arr(a));
    }
    let v = if s.meta(v).shape == m.shape {
        v
    } else {
        let flat = s.reshape(v, &[nv]);
        let r = repeated(s, flat, m.len(), b.pos)?;
        s.reshape(r, &m.shape)
    };
    let v = s.cast(v, m.dtype);
    let r = s.where_(Val::Arr(mask), Val::Arr(v), Val::Arr(a), b.pos)?;
    let r = s.node(r, b.pos)?;
    Ok(Val::Arr(s.rechunk(r, m.block.clone())))
}

fn broadcast_arrays(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut xs = Vec::new();
    for (v, p) in b.rest() {
        xs.push(s.node(v.clone(), *p)?);
    }
    let (shape, _, _) = s.align(&xs, "broadcast_arrays", b.pos)?;
    Ok(Val::Tuple(
        xs.into_iter()
            .map(|x| Val::Arr(broadcast_node(s, x, &shape)))
            .collect(),
    ))
}

fn meshgrid(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut xs = Vec::new();
    for (v, p) in b.rest() {
        let x = s.node(v.clone(), *p)?;
        let n = s.meta(x).len();
        xs.push(s.reshape(x, &[n]));
    }
    let xy = match b.get("indexing") {
        None => true,
        Some((Val::Str(v), _)) if v == "xy" => true,
        Some((Val::Str(v), _)) if v == "ij" => false,
        Some((_, p)) => {
            return Err(b.err(*p, "meshgrid(): indexing is \"xy\" or \"ij\""));
        }
    };
    let sparse = b.flag("sparse")?;
    let mut lens: Vec<u64> = xs.iter().map(|&x| s.meta(x).shape[0]).collect();
    // "xy": the first two outputs' axes swapped (Cartesian indexing).
    let axis_of_input = |i: usize| -> usize {
        match (xy && xs.len() > 1, i) {
            (true, 0) => 1,
            (true, 1) => 0,
            _ => i,
        }
    };
    if xy && lens.len() > 1 {
        lens.swap(0, 1);
    }
    let out = xs
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let mut one = vec![1u64; lens.len()];
            one[axis_of_input(i)] = lens[axis_of_input(i)];
            let r = s.reshape(x, &one);
            Val::Arr(if sparse {
                r
            } else {
                broadcast_node(s, r, &lens)
            })
        })
        .collect();
    Ok(Val::Tuple(out))
}

/// tril (`lower`) or triu of the last two axes: `where` of the column index against the
/// row index plus `k`.
fn tri(s: &mut Builder, b: &Bound, lower: bool) -> Result<Val, EvalError> {
    let x = b.array("m")?;
    let k = b.int("k")?.unwrap_or(0);
    let m = s.meta(x).clone();
    let n = m.ndim();
    if n < 2 {
        return Err(b.err(b.pos, format!("{}() needs at least 2 dimensions", b.f)));
    }
    let (rows, cols) = (m.shape[n - 2], m.shape[n - 1]);
    let (br, bc) = (m.block[n - 2], m.block[n - 1]);
    let iota = |s: &mut Builder, shape: Vec<u64>, block: Vec<u64>, axis: usize| {
        s.add(
            ArrayMeta::new(shape, block, DType::Int64),
            NodeOp::Iota {
                axis,
                start: Scalar::Int(0),
                step: Scalar::Int(1),
                last: None,
            },
        )
    };
    let i = iota(s, vec![rows, 1], vec![br, 1], 0);
    let j = iota(s, vec![1, cols], vec![1, bc], 1);
    let ik = s.elementwise2(BinaryOp::Add, Val::Arr(i), Val::Num(Scalar::Int(k)), b.pos)?;
    // tril keeps j <= i + k, triu keeps j >= i + k.
    let op = if lower { BinaryOp::Le } else { BinaryOp::Ge };
    let c = s.elementwise2(op, Val::Arr(j), ik, b.pos)?;
    s.where_(c, Val::Arr(x), Val::Num(zero_of(m.dtype)), b.pos)
}

/// A weak zero of `dtype`'s kind (it keeps the dtype in promotion).
fn zero_of(dtype: DType) -> Scalar {
    match dtype.kind() {
        ScalarKind::Bool => Scalar::Bool(false),
        ScalarKind::Int => Scalar::Int(0),
        ScalarKind::Float => Scalar::Float(0.0),
        ScalarKind::Complex => Scalar::Complex(0.0, 0.0),
    }
}

fn diagonal(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let n = s.meta(x).ndim();
    if n < 2 {
        return Err(b.err(b.pos, "diagonal() needs an array of at least 2 dimensions"));
    }
    let offset = b.int("offset")?.unwrap_or(0);
    let one = |v: Option<i64>, d: i64| -> Result<usize, EvalError> {
        one_axis(v.unwrap_or(d), n).map_err(|m| b.refused(b.pos, m.after("diagonal(): ")))
    };
    let (a1, a2) = (one(b.int("axis1")?, 0)?, one(b.int("axis2")?, 1)?);
    if a1 == a2 {
        return Err(b.err(b.pos, "diagonal(): axis1 and axis2 cannot be the same"));
    }
    // The diagonal (i, i + offset): that of the square slice holding it (as `trace`).
    let (n1, n2) = (s.meta(x).shape[a1] as i64, s.meta(x).shape[a2] as i64);
    let (r0, c0) = (offset.saturating_neg().clamp(0, n1), offset.clamp(0, n2));
    let k = (n1 - r0).min(n2 - c0).max(0) as u64;
    let x = s.slice(x, &[(a1, r0 as u64, k), (a2, c0 as u64, k)]);
    if k == 0 {
        // Nothing on it: the other axes, then an empty one.
        let m = s.meta(x).clone();
        let mut shape: Vec<u64> = (0..n)
            .filter(|&d| d != a1 && d != a2)
            .map(|d| m.shape[d])
            .collect();
        shape.push(0);
        let e = s.slice(x, &[(a1, 0, 0)]);
        let perm: Vec<usize> = (0..n)
            .filter(|&d| d != a1 && d != a2)
            .chain([a1, a2])
            .collect();
        let e = s.transpose(e, perm);
        return Ok(Val::Arr(s.reshape(e, &shape)));
    }
    // Letters: a..; the second axis takes the first's letter (einsum's diagonal).
    let mut l: Vec<char> = (0..n).map(|d| (b'a' + d as u8) as char).collect();
    l[a2] = l[a1];
    let out: String = (0..n)
        .filter(|&d| d != a1 && d != a2)
        .map(|d| l[d])
        .chain([l[a1]])
        .collect();
    let l: String = l.into_iter().collect();
    s.einsum(&format!("{l}->{out}"), vec![x], b.pos)
}

/// The modes of `np.pad` that take elements of the array: the source index along the
/// axis (of length `n`, at least 1) of the padded position `j` (negative before it,
/// `n` and on after it), periodic as NumPy's for any width.
#[derive(Clone, Copy)]
enum PadFrom {
    Edge,
    Wrap,
    Reflect,
    Symmetric,
}

impl PadFrom {
    fn index(self, n: u64, j: i64) -> u64 {
        let n = n as i64;
        let periodic = |p: i64| j.rem_euclid(p);
        (match self {
            PadFrom::Edge => j.clamp(0, n - 1),
            PadFrom::Wrap => periodic(n),
            PadFrom::Reflect if n == 1 => 0,
            PadFrom::Reflect => {
                let k = periodic(2 * (n - 1));
                if k < n { k } else { 2 * (n - 1) - k }
            }
            PadFrom::Symmetric => {
                let k = periodic(2 * n);
                if k < n { k } else { 2 * n - 1 - k }
            }
        }) as u64
    }
}

/// The widest pad a mode that takes elements makes along one axis (its source indices
/// are listed in the plan).
const PAD_TAKE_LIMIT: u64 = 1 << 24;

/// How `np.pad` fills a side: a constant, elements of the array, a statistic of the
/// elements next to it (the reduction's name), or a ramp to an end value.
#[derive(Clone, Copy)]
enum PadMode {
    Constant,
    Take(PadFrom),
    Stat(&'static str),
    Ramp,
}

/// NumPy's `_as_pairs`: one value, `(before, after)`, or one pair per axis, as `ndim` pairs.
fn as_pairs<T: Copy>(
    v: &Val,
    ndim: usize,
    one: impl Fn(&Val) -> Result<T, EvalError>,
    bad: impl Fn() -> EvalError,
) -> Result<Vec<(T, T)>, EvalError> {
    let pair = |v: &Val| -> Result<(T, T), EvalError> {
        match v {
            Val::Tuple(t) if t.len() == 2 => Ok((one(&t[0])?, one(&t[1])?)),
            Val::Tuple(t) if t.len() == 1 => Ok((one(&t[0])?, one(&t[0])?)),
            Val::Tuple(_) => Err(bad()),
            v => one(v).map(|w| (w, w)),
        }
    };
    match v {
        Val::Tuple(t) if t.iter().all(|i| matches!(i, Val::Tuple(_))) => {
            let ps = t.iter().map(pair).collect::<Result<Vec<_>, _>>()?;
            match ps.len() {
                1 => Ok(vec![ps[0]; ndim]),
                l if l == ndim => Ok(ps),
                _ => Err(bad()),
            }
        }
        v => Ok(vec![pair(v)?; ndim]),
    }
}

fn pad(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("array")?;
    let m = s.meta(x).clone();
    let mode = match b.get("mode") {
        None => "constant".to_string(),
        Some((Val::Str(v), _)) => v.clone(),
        Some((_, p)) => return Err(b.err(*p, "pad(): mode is a string such as \"edge\"")),
    };
    let how = match mode.as_str() {
        // NumPy leaves "empty"'s padding undefined: here it is zeros.
        "constant" | "empty" => PadMode::Constant,
        "edge" => PadMode::Take(PadFrom::Edge),
        "wrap" => PadMode::Take(PadFrom::Wrap),
        "reflect" => PadMode::Take(PadFrom::Reflect),
        "symmetric" => PadMode::Take(PadFrom::Symmetric),
        "mean" => PadMode::Stat("mean"),
        "median" => PadMode::Stat("median"),
        "maximum" => PadMode::Stat("max"),
        "minimum" => PadMode::Stat("min"),
        "linear_ramp" => PadMode::Ramp,
        _ => {
            let p = b.get("mode").map_or(b.pos, |(_, p)| *p);
            return Err(b.err(
                p,
                format!(
                    "pad(): mode={mode:?} is not supported; the modes are \"constant\", \"edge\", \
                     \"wrap\", \"reflect\", \"symmetric\", \"mean\", \"maximum\", \"minimum\", \
                     \"median\", \"linear_ramp\" and \"empty\""
                ),
            ));
        }
    };
    // An argument of another mode is refused, as NumPy does.
    for (arg, wanted) in [
        ("constant_values", "constant"),
        ("end_values", "linear_ramp"),
        (
            "stat_length",
            "mean\", \"maximum\", \"minimum\" or \"median",
        ),
    ] {
        let fits = match arg {
            "constant_values" => mode == "constant",
            "end_values" => matches!(how, PadMode::Ramp),
            _ => matches!(how, PadMode::Stat(_)),
        };
        if let Some((_, p)) = b.get(arg)
            && !fits
        {
            return Err(b.err(
                *p,
                format!("pad(): {arg} is for mode=\"{wanted}\", not {mode:?} (as NumPy)"),
            ));
        }
    }
    let (v, p) = b.need("pad_width")?;
    let bad = |what: &'static str| {
        let p = b.get(what).map_or(*p, |(_, p)| *p);
        move || {
            b.err(
                p,
                format!(
                    "pad(): {what} is an int, (before, after) or one pair per axis, none negative"
                ),
            )
        }
    };
    let count = |what: &'static str| {
        move |v: &Val| match v {
            Val::Num(x) | Val::NpScalar(x, _)
                if x.kind() != ScalarKind::Float && x.as_i64() >= 0 =>
            {
                Ok(x.as_i64() as u64)
            }
            _ => Err(bad(what)()),
        }
    };
    let widths = as_pairs(v, m.ndim(), count("pad_width"), bad("pad_width"))?;
    // None (the whole axis) is u64::MAX: clamped to the axis below, as NumPy's.
    let stat_lengths = match b.get("stat_length") {
        None | Some((Val::None, _)) => vec![(u64::MAX, u64::MAX); m.ndim()],
        Some((v, _)) => {
            let one = |v: &Val| match v {
                Val::None => Ok(u64::MAX),
                v => count("stat_length")(v),
            };
            as_pairs(v, m.ndim(), one, bad("stat_length"))?
        }
    };
    let number = |what: &'static str| {
        move |v: &Val| match v {
            Val::Num(x) | Val::NpScalar(x, _) => Ok(*x),
            _ => {
                let p = b.get(what).map_or(b.pos, |(_, p)| *p);
                Err(b.err(
                    p,
                    format!("pad(): {what} are numbers: one, (before, after) or one pair per axis"),
                ))
            }
        }
    };
    let end_values = match b.get("end_values") {
        None => vec![(Scalar::Int(0), Scalar::Int(0)); m.ndim()],
        Some((v, _)) => as_pairs(v, m.ndim(), number("end_values"), || {
            b.err(
                b.pos,
                "pad(): end_values are numbers: one, (before, after) or one pair per axis",
            )
        })?,
    };
    let c = match b.get("constant_values") {
        None => Scalar::Int(0),
        Some((Val::Num(c), _)) => *c,
        Some((_, p)) => {
            return Err(b.err(*p, "pad(): constant_values is one number"));
        }
    };
    let mut r = x;
    for (a, &(before, after)) in widths.iter().enumerate() {
        if before == 0 && after == 0 {
            continue;
        }
        let n = m.shape[a];
        if n == 0 && !matches!(how, PadMode::Constant) {
            return Err(b.err(
                b.pos,
                format!(
                    "pad(): can't extend empty axis {a} using modes other than \"constant\" \
                     or \"empty\" (as NumPy)"
                ),
            ));
        }
        let mut parts = Vec::new();
        for (side, w, first) in [(0, before, -(before as i64)), (1, after, n as i64)] {
            if w == 0 {
                parts.push(None);
                continue;
            }
            let mut shape = s.meta(r).shape.clone();
            shape[a] = w;
            let part = match how {
                PadMode::Constant => {
                    let meta = s.default_meta(shape, m.dtype);
                    s.add(
                        meta,
                        NodeOp::Fill {
                            value: c.cast(m.dtype),
                        },
                    )
                }
                PadMode::Take(_) if w > PAD_TAKE_LIMIT => {
                    return Err(b.err(
                        *p,
                        format!(
                            "pad(): mode={mode:?} pads at most {PAD_TAKE_LIMIT} along an axis \
                             ({w} asked along axis {a}); concatenate copies of slices instead"
                        ),
                    ));
                }
                PadMode::Take(f) => {
                    let idx = (0..w as i64).map(|i| f.index(n, first + i)).collect();
                    take_node(s, r, a, idx)
                }
                PadMode::Stat(f) => {
                    let l = if side == 0 {
                        stat_lengths[a].0
                    } else {
                        stat_lengths[a].1
                    }
                    .min(n);
                    let stat = pad_stat(s, b, r, a, f, if side == 0 { 0 } else { n - l }, l)?;
                    broadcast_node(s, stat, &shape)
                }
                PadMode::Ramp => {
                    let end = if side == 0 {
                        end_values[a].0
                    } else {
                        end_values[a].1
                    };
                    pad_ramp(
                        s,
                        b,
                        r,
                        a,
                        if side == 0 { 0 } else { n - 1 },
                        end,
                        w,
                        side == 1,
                    )?
                }
            };
            parts.push(Some(part));
        }
        let xs: Vec<NodeId> = [parts[0], Some(r), parts[1]]
            .into_iter()
            .flatten()
            .collect();
        r = s.concat(xs, a, b.pos)?;
    }
    Ok(Val::Arr(r))
}

/// NumPy's `_get_stats` for one side: the statistic `f` of `len` elements from `start`
/// along `axis`, kept as an axis of 1; rounded (halves to even) where the array holds
/// integers, then in the array's dtype.
fn pad_stat(
    s: &mut Builder,
    b: &Bound,
    x: NodeId,
    axis: usize,
    f: &str,
    start: u64,
    len: u64,
) -> Result<NodeId, EvalError> {
    let dtype = s.meta(x).dtype;
    if len == 0 && matches!(f, "max" | "min") {
        return Err(b.err(
            b.pos,
            "pad(): stat_length of 0 yields no value for padding (as NumPy)",
        ));
    }
    if len == 0 && !dtype.is_float() && !dtype.is_complex() {
        return Err(b.err(
            b.pos,
            format!(
                "pad(): stat_length of 0 makes a {f} of nothing, NaN, which {} cannot hold",
                dtype.name()
            ),
        ));
    }
    let chunk = s.slice(x, &[(axis, start, len)]);
    let v = s.apply(
        f,
        &[
            ("a", Val::Arr(chunk)),
            ("axis", Val::Num(Scalar::Int(axis as i64))),
            ("keepdims", Val::Num(Scalar::Bool(true))),
        ],
        b.pos,
    )?;
    let v = if dtype.is_int() {
        s.apply("round", &[("a", v)], b.pos)?
    } else {
        v
    };
    let v = s.node(v, b.pos)?;
    Ok(s.cast(v, dtype))
}

/// NumPy's `_get_linear_ramps` for one side: `linspace(end, edge, w, endpoint=False)`
/// along `axis` from the element at `edge` (reversed after the array), with linspace's
/// arithmetic: `i * step + end`, or `i / w * delta + end` when any lane's step is 0;
/// floored where the array holds integers, then in the array's dtype.
#[allow(clippy::too_many_arguments)]
fn pad_ramp(
    s: &mut Builder,
    b: &Bound,
    x: NodeId,
    axis: usize,
    edge: u64,
    end: Scalar,
    w: u64,
    after: bool,
) -> Result<NodeId, EvalError> {
    let dtype = s.meta(x).dtype;
    let dt = if dtype.is_float() || dtype.is_complex() {
        dtype
    } else {
        DType::Float64
    };
    let pos = b.pos;
    let e = s.slice(x, &[(axis, edge, 1)]);
    let e = Val::Arr(s.cast(e, dt));
    let delta = s.binary(Op::Sub, e, Val::Num(end), pos)?;
    let div = Val::Num(Scalar::Int(w as i64));
    let step = s.binary(Op::Div, delta.clone(), div.clone(), pos)?;
    let i = s.apply(
        "arange",
        &[
            ("start", Val::Num(Scalar::Int(w as i64))),
            ("dtype", Val::Str(dt.name().to_string())),
        ],
        pos,
    )?;
    let i = s.node(i, pos)?;
    let mut along = vec![1; s.meta(x).ndim()];
    along[axis] = w;
    let i = Val::Arr(s.reshape(i, &along));
    let by_step = s.binary(Op::Mul, i.clone(), step.clone(), pos)?;
    let by_step = s.binary(Op::Add, by_step, Val::Num(end), pos)?;
    let by_delta = s.binary(Op::Div, i, div, pos)?;
    let by_delta = s.binary(Op::Mul, by_delta, delta, pos)?;
    let by_delta = s.binary(Op::Add, by_delta, Val::Num(end), pos)?;
    let zero = s.binary(Op::Eq, step, Val::Num(Scalar::Int(0)), pos)?;
    let any_zero = s.apply("any", &[("a", zero)], pos)?;
    let y = s.where_(any_zero, by_delta, by_step, pos)?;
    let y = if dtype.is_int() {
        s.unary(UnaryOp::Floor, y, pos)?
    } else {
        y
    };
    let y = if after {
        s.apply(
            "flip",
            &[("m", y), ("axis", Val::Num(Scalar::Int(axis as i64)))],
            pos,
        )?
    } else {
        y
    };
    let y = s.node(y, pos)?;
    Ok(s.cast(y, dtype))
}

/// NumPy's column_stack (`axis` 1: 1-D arrays as columns) and dstack (`axis` 2: 1-D and
/// 2-D arrays as `(1, n, 1)` and `(m, n, 1)`): concatenated along `axis`.
fn stack_along(s: &mut Builder, b: &Bound, axis: usize) -> Result<Val, EvalError> {
    let xs = arrays(b, "tup")?;
    let xs = xs
        .into_iter()
        .map(|x| {
            let shape = s.meta(x).shape.clone();
            let shape = match (axis, shape.as_slice()) {
                (1, [n]) => vec![*n, 1],
                (2, []) => vec![1, 1, 1],
                (2, [n]) => vec![1, *n, 1],
                (2, [m, n]) => vec![*m, *n, 1],
                _ => return x,
            };
            s.reshape(x, &shape)
        })
        .collect();
    Ok(Val::Arr(s.concat(xs, axis, b.pos)?))
}

/// NumPy's fliplr and flipud: `flip` along one axis, which `m` must have.
fn flip_axis(s: &mut Builder, b: &Bound, axis: usize) -> Result<Val, EvalError> {
    let m = b.array("m")?;
    let ndim = s.meta(m).ndim();
    if ndim <= axis {
        return Err(b.err(
            b.pos,
            format!("{}(): the input must be at least {}-D", b.f, axis + 1),
        ));
    }
    s.apply(
        "flip",
        &[
            ("m", Val::Arr(m)),
            ("axis", Val::Num(Scalar::Int(axis as i64))),
        ],
        b.pos,
    )
}

/// NumPy's take_along_axis: `arr`'s elements at `indices` along `axis` (NumPy's
/// broadcasting elsewhere; `axis=None`: of `arr` flattened), gathered from `arr`
/// flattened at each element's flat position.
fn take_along_axis(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (arr, flat) = along_axis(s, b, "take_along_axis")?;
    let total = s.meta(arr).len();
    let whole = s.reshape(arr, &[total]);
    let r = s
        .gather(whole, flat, 0)
        .map_err(|e| b.err(b.pos, format!("take_along_axis(): {e}")))?;
    Ok(Val::Arr(r))
}

/// NumPy's put_along_axis, returning the new array: `values` broadcast to the indices'
/// shape (as [`along_axis`] broadcasts them), put at their flat positions.
fn put_along_axis(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (arr, flat) = along_axis(s, b, "put_along_axis")?;
    let shape = s.meta(arr).shape.clone();
    let out = s.meta(flat).shape.clone();
    let v = b.need("values")?.0.clone();
    let v = s.node(v, b.pos)?;
    let v = broadcast_checked(s, b, v, &out, "put_along_axis")?;
    let n = s.meta(flat).len();
    let (flat, v) = (s.reshape(flat, &[n]), s.reshape(v, &[n]));
    let arr = s.reshape(arr, &shape);
    let r = s
        .put_flat(arr, flat, v)
        .map_err(|e| b.err(b.pos, format!("put_along_axis(): {e}")))?;
    Ok(Val::Arr(r))
}

/// `arr` (flattened when `axis` is None) and the flat positions in it of NumPy's
/// `take_along_axis`/`put_along_axis` indices (checked, broadcast with `arr` but along
/// `axis`): the functions `f` share the rules.
fn along_axis(s: &mut Builder, b: &Bound, f: &str) -> Result<(NodeId, NodeId), EvalError> {
    let mut arr = b.array("arr")?;
    let ind = match b.need("indices")? {
        (Val::Arr(id), _) => *id,
        (_, p) => {
            return Err(b.err(*p, format!("{f}(): indices must be an array of integers")));
        }
    };
    let (am, im) = (s.meta(arr).clone(), s.meta(ind).clone());
    if !im.dtype.is_int() {
        return Err(b.raising(
            crate::refusal::PyException::IndexError,
            b.pos,
            format!(
                "{f}(): indices of dtype {} are not integers",
                im.dtype.name()
            ),
        ));
    }
    let axis = match b.given("axis") {
        Some((Val::None, _)) => {
            if im.ndim() != 1 {
                return Err(b.err(b.pos, format!("{f}(): when axis=None, indices must be 1-D")));
            }
            arr = s.reshape(arr, &[am.len()]);
            0
        }
        Some((v, p)) => axis_of(v, am.ndim()).map_err(|e| b.refused(*p, e))?,
        None => axis_of(&Val::Num(Scalar::Int(-1)), am.ndim()).map_err(|e| b.refused(b.pos, e))?,
    };
    let shape = s.meta(arr).shape.clone();
    if im.ndim() != shape.len() {
        return Err(b.err(
            b.pos,
            format!(
                "{f}(): indices and arr must have the same number of dimensions ({} and {})",
                im.ndim(),
                shape.len()
            ),
        ));
    }
    // The result's shape: the indices' along `axis`, the broadcast one elsewhere.
    let mut out = Vec::with_capacity(shape.len());
    for (d, (&n, &k)) in shape.iter().zip(&im.shape).enumerate() {
        out.push(match (d == axis, n, k) {
            (true, _, k) => k,
            (false, n, k) if n == k || k == 1 => n,
            (false, 1, k) => k,
            _ => {
                return Err(b.err(
                    b.pos,
                    format!(
                        "{f}(): shape mismatch: arr of shape {} and indices of shape {} do not broadcast along axis {d}",
                        shape_str(&shape),
                        shape_str(&im.shape)
                    ),
                ));
            }
        });
    }
    let int = |v: u64| Val::Num(Scalar::Int(v as i64));
    // The indices checked against the axis' length and made non-negative: a gather of
    // 0..n at them (NumPy's IndexError for one out of bounds).
    let n = shape[axis];
    let iota = s.apply("arange", &[("start", int(n))], b.pos)?;
    let Val::Arr(iota) = iota else {
        unreachable!("arange gives an array")
    };
    let ind = s.gather(iota, ind, 0).map_err(|e| {
        b.raising(
            crate::refusal::PyException::IndexError,
            b.pos,
            format!("{f}(): {}", e.replace("axis 0", &format!("axis {axis}"))),
        )
    })?;
    let ind = s.reshape(ind, &im.shape);
    // The flat position: the index along `axis`, each other axis' coordinate (0 where
    // arr has length 1 there), times arr's C-order strides.
    let mut stride = 1u64;
    let mut flat: Option<Val> = None;
    for d in (0..shape.len()).rev() {
        let coord = if d == axis {
            Val::Arr(ind)
        } else if shape[d] == 1 {
            stride *= shape[d];
            continue;
        } else {
            let Val::Arr(r) = s.apply("arange", &[("start", int(shape[d]))], b.pos)? else {
                unreachable!("arange gives an array")
            };
            let mut at = vec![1; shape.len()];
            at[d] = shape[d];
            Val::Arr(s.reshape(r, &at))
        };
        let term = if stride == 1 {
            coord
        } else {
            s.elementwise2(BinaryOp::Mul, coord, int(stride), b.pos)?
        };
        flat = Some(match flat {
            None => term,
            Some(f) => s.elementwise2(BinaryOp::Add, f, term, b.pos)?,
        });
        stride *= shape[d];
    }
    let flat = s.node(flat.expect("one axis at least"), b.pos)?;
    let flat = if s.meta(flat).shape != out {
        s.apply(
            "broadcast_to",
            &[
                ("array", Val::Arr(flat)),
                ("shape", Val::Tuple(out.iter().map(|&v| int(v)).collect())),
            ],
            b.pos,
        )?
    } else {
        Val::Arr(flat)
    };
    let Val::Arr(flat) = flat else {
        unreachable!("broadcast_to gives an array")
    };
    Ok((arr, flat))
}

/// NumPy's diag: a 2-D array's `k`-th diagonal, or a 1-D array's values on the `k`-th
/// diagonal of a square array of zeros (`where`, so an infinity stays on its diagonal).
fn diag(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let v = b.array("v")?;
    let k = b.int("k")?.unwrap_or(0);
    let int = |i: i64| Val::Num(Scalar::Int(i));
    match s.meta(v).ndim() {
        2 => s.apply("diagonal", &[("a", Val::Arr(v)), ("offset", int(k))], b.pos),
        1 => {
            let n = s.meta(v).shape[0];
            let size = n.saturating_add(k.unsigned_abs());
            check_elements(&[size, size]).map_err(|m| b.err(b.pos, format!("diag(): {m}")))?;
            let k = k.clamp(-(size as i64), size as i64);
            // Row i holds v[i] at column i + k: v padded to `size` at the start (k > 0) or
            // end, broadcast along the rows, kept on the diagonal.
            let pad = if k >= 0 { (k, 0) } else { (0, -k) };
            let w = s.apply(
                "pad",
                &[
                    ("array", Val::Arr(v)),
                    ("pad_width", Val::Tuple(vec![int(pad.0), int(pad.1)])),
                ],
                b.pos,
            )?;
            let w = s.node(w, b.pos)?;
            let w = s.reshape(w, &[1, size]);
            let on = s.apply(
                "eye",
                &[
                    ("N", int(size as i64)),
                    ("k", int(k)),
                    ("dtype", Val::Str("bool".into())),
                ],
                b.pos,
            )?;
            let dtype = s.meta(v).dtype;
            let zero = Val::Num(Scalar::Int(0).cast(dtype));
            let r = s.where_(on, Val::Arr(w), zero, b.pos)?;
            let r = s.node(r, b.pos)?;
            Ok(Val::Arr(s.cast(r, dtype)))
        }
        _ => Err(b.err(b.pos, "diag(): input must be 1- or 2-d.")),
    }
}

/// NumPy's split and array_split: slices of `ary` along `axis` at the given indices
/// (clipped as Python's slices), or into equal sections (array_split: the first `n %
/// sections` one longer).
fn split(s: &mut Builder, b: &Bound, uneven: bool) -> Result<Val, EvalError> {
    let x = b.array("ary")?;
    let m = s.meta(x).clone();
    if m.ndim() == 0 {
        return Err(b.err(
            b.pos,
            format!("{}(): a 0-d array has no axis to split", b.f),
        ));
    }
    let axis = match b.get("axis") {
        None => 0,
        Some((v, p)) => axis_of(v, m.ndim()).map_err(|e| b.refused(*p, e))?,
    };
    let n = m.shape[axis] as i64;
    let (v, p) = b.need("indices_or_sections")?.clone();
    let bounds: Vec<(i64, i64)> = match v {
        Val::Num(x) if x.kind() != ScalarKind::Float => {
            let k = x.as_i64();
            if k <= 0 {
                return Err(b.err(
                    p,
                    format!("{}(): number sections must be larger than 0.", b.f),
                ));
            }
            if !uneven && n % k != 0 {
                return Err(b.err(
                    p,
                    "split(): array split does not result in an equal division",
                ));
            }
            let (each, extra) = (n / k, n % k);
            let mut start = 0;
            (0..k)
                .map(|i| {
                    let len = each + (i < extra) as i64;
                    start += len;
                    (start - len, start)
                })
                .collect()
        }
        _ => {
            let idx = ints(b, "indices_or_sections")?;
            let clip = |i: i64| if i < 0 { (i + n).max(0) } else { i.min(n) };
            let mut cuts = vec![0];
            cuts.extend(idx.iter().map(|&i| clip(i)));
            cuts.push(n);
            cuts.windows(2).map(|w| (w[0], w[1].max(w[0]))).collect()
        }
    };
    let parts = bounds
        .into_iter()
        .map(|(from, to)| Val::Arr(s.slice(x, &[(axis, from as u64, (to - from) as u64)])))
        .collect();
    Ok(Val::Tuple(parts))
}

/// NumPy's rot90: `k` quarter turns from the first of `axes` towards the second.
fn rot90(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let m = b.array("m")?;
    let nd = s.meta(m).ndim();
    let (a0, a1) = match b.get("axes") {
        None => (0, 1),
        Some((Val::Tuple(t), p)) if t.len() == 2 => (
            axis_of(&t[0], nd).map_err(|e| b.refused(*p, e))?,
            axis_of(&t[1], nd).map_err(|e| b.refused(*p, e))?,
        ),
        Some((_, p)) => return Err(b.err(*p, "rot90(): len(axes) must be 2.")),
    };
    if nd < 2 || a0 == a1 {
        return Err(b.err(b.pos, "rot90(): Axes must be different."));
    }
    let int = |i: usize| Val::Num(Scalar::Int(i as i64));
    let flip =
        |s: &mut Builder, v: Val, a: usize| s.apply("flip", &[("m", v), ("axis", int(a))], b.pos);
    let swap = |s: &mut Builder, v: Val| {
        s.apply(
            "swapaxes",
            &[("a", v), ("axis1", int(a0)), ("axis2", int(a1))],
            b.pos,
        )
    };
    let m = Val::Arr(m);
    match b.int("k")?.unwrap_or(1).rem_euclid(4) {
        0 => Ok(m),
        1 => {
            let f = flip(s, m, a1)?;
            swap(s, f)
        }
        2 => {
            let f = flip(s, m, a0)?;
            flip(s, f, a1)
        }
        _ => {
            let t = swap(s, m)?;
            flip(s, t, a1)
        }
    }
}

/// NumPy's kron: `a`'s and `b`'s axes interleaved in an outer product (the shorter
/// shape padded with 1s in front), then each pair merged.
fn kron(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut ids = Vec::new();
    for name in ["a", "b"] {
        let (v, p) = b.need(name)?.clone();
        let v = s.list_operand(v, p)?;
        ids.push(s.node(v, p)?);
    }
    let (x, y) = (ids[0], ids[1]);
    let (xs, ys) = (s.meta(x).shape.clone(), s.meta(y).shape.clone());
    let nd = xs.len().max(ys.len());
    let pad = |sh: &[u64]| [vec![1; nd - sh.len()], sh.to_vec()].concat();
    let (xs, ys) = (pad(&xs), pad(&ys));
    let spread = |sh: &[u64], first: bool| -> Vec<u64> {
        sh.iter()
            .flat_map(|&d| if first { [d, 1] } else { [1, d] })
            .collect()
    };
    let x = s.reshape(x, &spread(&xs, true));
    let y = s.reshape(y, &spread(&ys, false));
    let r = s.elementwise2(BinaryOp::Mul, Val::Arr(x), Val::Arr(y), b.pos)?;
    let r = s.node(r, b.pos)?;
    let shape: Vec<u64> = xs.iter().zip(&ys).map(|(a, b)| a * b).collect();
    Ok(Val::Arr(s.reshape(r, &shape)))
}
