//! Contractions: NumPy's products of arrays, every one an Einstein sum (one kernel that
//! calls BLAS per block pair; see `ops.rs`).

use super::*;

const AB: &[&str] = &["a", "b"];

pub(super) const DEFS: &[FuncDef] = &[
    FuncDef::new(
        "matmul",
        &["x1", "x2"],
        "`np.matmul`, as `@` (1-D, 2-D and stacks, their batch axes broadcast)",
        |s, b| {
            let (x, y) = (b.array("x1")?, b.array("x2")?);
            s.matmul(x, y, b.pos)
        },
    ),
    FuncDef::new("dot", AB, "`np.dot`", dot),
    FuncDef::new("inner", AB, "`np.inner`", inner),
    FuncDef::new("outer", AB, "`np.outer` (operands flattened)", |s, b| {
        // NumPy's outer is multiply(a.ravel()[:, None], b.ravel()[None, :]): products,
        // not sums of products (which would turn -0.0 into 0.0).
        let (x, y) = (b.array("a")?, b.array("b")?);
        let (lx, ly) = (s.meta(x).len(), s.meta(y).len());
        let x = s.reshape(x, &[lx, 1]);
        let y = s.reshape(y, &[1, ly]);
        s.elementwise2(BinaryOp::Mul, Val::Arr(x), Val::Arr(y), b.pos)
    }),
    FuncDef::new(
        "tensordot",
        &["a", "b", "axes"],
        "`np.tensordot` (`axes` an int or a pair of axis lists)",
        tensordot,
    ),
    FuncDef::new(
        "einsum",
        &["subscripts", "operands"],
        "`np.einsum` (implicit or explicit output, `...` broadcast; no repeated output letter)",
        einsum,
    )
    .rest(Rest::Star),
    FuncDef::new(
        "trace",
        &["a", "offset", "axis1", "axis2"],
        "`np.trace`",
        trace,
    ),
    FuncDef::new(
        "cross",
        &["a", "b", "axisa", "axisb", "axisc", "axis"],
        "`np.cross` of 3-vectors along the last axis (NumPy's products and differences)",
        cross,
    )
    .refusing(&["axisa", "axisb", "axisc"]),
    FuncDef::new(
        "vecdot",
        &["x1", "x2", "axis"],
        "`np.vecdot`: `sum(conj(x1) * x2, axis)` in the operands' promoted dtype (no broadcasting along `axis`)",
        vecdot,
    ),
];

/// The most axes the operands of one product may have in all: one letter each.
const LETTERS: usize = 26;

/// `n` distinct einsum letters starting at the `from`-th.
fn letters(from: usize, n: usize) -> Vec<char> {
    ('a'..='z').skip(from).take(n).collect()
}

/// Refuses operands with more axes in all than there are letters.
fn check_letters(b: &Bound, ndims: usize) -> Result<(), EvalError> {
    if ndims > LETTERS {
        return Err(b.err(
            b.pos,
            format!(
                "{}(): {ndims} dimensions in all; at most {LETTERS} are supported",
                b.f
            ),
        ));
    }
    Ok(())
}

fn dot(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (va, vb) = (b.need("a")?.0.clone(), b.need("b")?.0.clone());
    let (&Val::Arr(x), &Val::Arr(y)) = (&va, &vb) else {
        return s.elementwise2(BinaryOp::Mul, va, vb, b.pos);
    };
    let (ma, mb) = (s.meta(x).clone(), s.meta(y).clone());
    let (na, nb) = (ma.ndim(), mb.ndim());
    if na == 0 || nb == 0 {
        // NumPy: a 0-d operand multiplies.
        return s.elementwise2(BinaryOp::Mul, va, vb, b.pos);
    }
    if na <= 2 && nb <= 2 {
        return s.matmul(x, y, b.pos);
    }
    check_letters(b, na + nb)?;
    // dot(a, b)[i.., j..] = sum(a[i.., :] * b[j.., :, k]): a's last axis with b's second
    // to last (its only one when b is 1-D).
    let kb = nb.saturating_sub(2);
    if ma.shape[na - 1] != mb.shape[kb] {
        return Err(b.err(
            b.pos,
            format!(
                "dot(): shapes {} and {} not aligned: {} (dim {}) != {} (dim {kb})",
                shape_str(&ma.shape),
                shape_str(&mb.shape),
                ma.shape[na - 1],
                na - 1,
                mb.shape[kb]
            ),
        ));
    }
    let la = letters(0, na);
    let mut lb = letters(na, nb);
    let k = la[na - 1];
    lb[kb] = k;
    let out: String = la.iter().chain(&lb).filter(|&&c| c != k).collect();
    let (la, lb): (String, String) = (la.into_iter().collect(), lb.into_iter().collect());
    s.einsum(&format!("{la},{lb}->{out}"), vec![x, y], b.pos)
}

fn inner(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, y) = (b.array("a")?, b.array("b")?);
    let (na, nb) = (s.meta(x).ndim(), s.meta(y).ndim());
    if na == 0 || nb == 0 {
        return s.elementwise2(BinaryOp::Mul, Val::Arr(x), Val::Arr(y), b.pos);
    }
    check_letters(b, na + nb)?;
    // The last axes of both get the one letter no other axis has.
    let mut la = letters(0, na);
    let mut lb = letters(na, nb);
    la[na - 1] = 'z';
    lb[nb - 1] = 'z';
    let out: String = la[..na - 1].iter().chain(&lb[..nb - 1]).collect();
    let (la, lb): (String, String) = (la.into_iter().collect(), lb.into_iter().collect());
    s.einsum(&format!("{la},{lb}->{out}"), vec![x, y], b.pos)
}

fn tensordot(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let (x, y) = (b.array("a")?, b.array("b")?);
    let (na, nb) = (s.meta(x).ndim(), s.meta(y).ndim());
    let (ax, ay): (Vec<usize>, Vec<usize>) = match b.get("axes") {
        None => (
            (na.saturating_sub(2)..na).collect(),
            (0..2.min(nb)).collect(),
        ),
        Some((Val::Num(k), p)) => {
            let Some(k) = k.integer() else {
                return Err(b.err(*p, format!("tensordot: axes={k} is not an integer")));
            };
            // NumPy: a negative count contracts nothing.
            let k = k.max(0) as usize;
            if k > na || k > nb {
                return Err(b.err(
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
                        Val::Num(..) => {
                            axis_of(i, n).map_err(|m| b.refused(*p, m.after("tensordot: ")))
                        }
                        _ => Err(b.err(*p, "tensordot: axes are integers")),
                    })
                    .collect()
            };
            let (ax, ay) = (list(&t[0], na)?, list(&t[1], nb)?);
            for axes in [&ax, &ay] {
                if (1..axes.len()).any(|i| axes[..i].contains(&axes[i])) {
                    return Err(b.err(*p, "tensordot: duplicate axes are not allowed"));
                }
            }
            (ax, ay)
        }
        Some((_, p)) => {
            return Err(b.err(*p, "tensordot: axes is an integer or a pair of axis lists"));
        }
    };
    if ax.len() != ay.len() {
        return Err(b.err(
            b.pos,
            format!("tensordot: {} axes of a but {} of b", ax.len(), ay.len()),
        ));
    }
    check_letters(b, na + nb)?;
    let la = letters(0, na);
    let mut lb = letters(na, nb);
    for (&i, &j) in ax.iter().zip(&ay) {
        lb[j] = la[i];
    }
    let out: String = (0..na)
        .filter(|i| !ax.contains(i))
        .map(|i| la[i])
        .chain((0..nb).filter(|j| !ay.contains(j)).map(|j| lb[j]))
        .collect();
    let (la, lb): (String, String) = (la.into_iter().collect(), lb.into_iter().collect());
    s.einsum(&format!("{la},{lb}->{out}"), vec![x, y], b.pos)
}

/// `einsum(subscripts, *operands)`.
fn einsum(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let subscripts = match b.given("subscripts") {
        Some((Val::Str(t), _)) => t,
        given => {
            let p = given.map_or(b.pos, |g| g.1);
            return Err(b.err(p, "einsum() takes the subscripts string first"));
        }
    };
    let mut xs = Vec::new();
    for (v, p) in b.rest() {
        match v {
            Val::Arr(id) => xs.push(*id),
            _ => return Err(b.err(*p, "einsum operands are arrays")),
        }
    }
    s.einsum_broadcasting(subscripts, xs, b.pos)
}

fn trace(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let x = b.array("a")?;
    let n = s.meta(x).ndim();
    let offset = b.int("offset")?.unwrap_or(0);
    let one = |v: Option<i64>, d: i64| -> Result<usize, EvalError> {
        one_axis(v.unwrap_or(d), n).map_err(|m| b.refused(b.pos, m.after("trace(): ")))
    };
    if n < 2 {
        return Err(b.err(b.pos, "trace() needs an array of at least 2 dimensions"));
    }
    let (a1, a2) = (one(b.int("axis1")?, 0)?, one(b.int("axis2")?, 1)?);
    if a1 == a2 {
        return Err(b.err(b.pos, "trace(): axis1 and axis2 are the same"));
    }
    check_letters(b, n)?;
    // NumPy sums the diagonal (i, i + offset) of any rectangle: its min(n1, n2 - offset)
    // elements (none past the edge), here the diagonal of the square slice that holds it.
    let (n1, n2) = (s.meta(x).shape[a1] as i64, s.meta(x).shape[a2] as i64);
    let (r0, c0) = (offset.saturating_neg().clamp(0, n1), offset.clamp(0, n2));
    let k = (n1 - r0).min(n2 - c0).max(0) as u64;
    let x = s.slice(x, &[(a1, r0 as u64, k), (a2, c0 as u64, k)]);
    let mut l = letters(0, n);
    l[a2] = l[a1];
    let out: String = (0..n)
        .filter(|&d| d != a1 && d != a2)
        .map(|d| l[d])
        .collect();
    let l: String = l.into_iter().collect();
    // NumPy's trace sums as `sum` does (bools and ints in int64 or uint64), where einsum
    // keeps the dtype.
    let x = s.cast(x, s.meta(x).dtype.sum_dtype());
    s.einsum(&format!("{l}->{out}"), vec![x], b.pos)
}

/// NumPy's cross of 3-vectors along the last axis (or `axis`), as it computes it:
/// `a1 * b2 - a2 * b1`, `a2 * b0 - a0 * b2`, `a0 * b1 - a1 * b0`, stacked.
fn cross(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut v = Vec::new();
    for name in ["a", "b"] {
        let (x, p) = b.need(name)?.clone();
        let x = s.list_operand(x, p)?;
        let x = s.node(x, p)?;
        let m = s.meta(x).clone();
        let axis = match b.get("axis") {
            None => m.ndim().checked_sub(1),
            Some((a, p)) => Some(axis_of(a, m.ndim()).map_err(|e| b.refused(*p, e))?),
        };
        match axis {
            Some(axis) if m.shape[axis] == 3 => {
                let x = if axis + 1 == m.ndim() {
                    x
                } else {
                    let mut perm: Vec<usize> = (0..m.ndim()).filter(|&d| d != axis).collect();
                    perm.push(axis);
                    s.transpose(x, perm)
                };
                v.push(x);
            }
            _ => {
                return Err(b.err(
                    p,
                    "cross(): the vectors must have 3 elements along the axis (2-D vectors are not supported)",
                ));
            }
        }
    }
    let comp = |s: &mut Builder, x: NodeId, i: i64| {
        s.apply(
            "take",
            &[
                ("a", Val::Arr(x)),
                ("indices", Val::Num(Scalar::Int(i))),
                ("axis", Val::Num(Scalar::Int(-1))),
            ],
            b.pos,
        )
    };
    let (a, c) = (v[0], v[1]);
    let mut parts = Vec::new();
    for (i, j) in [(1, 2), (2, 0), (0, 1)] {
        let (ai, cj) = (comp(s, a, i)?, comp(s, c, j)?);
        let (aj, ci) = (comp(s, a, j)?, comp(s, c, i)?);
        let l = s.elementwise2(BinaryOp::Mul, ai, cj, b.pos)?;
        let r = s.elementwise2(BinaryOp::Mul, aj, ci, b.pos)?;
        parts.push(s.elementwise2(BinaryOp::Sub, l, r, b.pos)?);
    }
    let r = s.apply(
        "stack",
        &[
            ("arrays", Val::Tuple(parts)),
            ("axis", Val::Num(Scalar::Int(-1))),
        ],
        b.pos,
    )?;
    // NumPy's `axis` is the result's vector axis too.
    match b.get("axis") {
        None => Ok(r),
        Some((axis, _)) => s.apply(
            "moveaxis",
            &[
                ("a", r),
                ("source", Val::Num(Scalar::Int(-1))),
                ("destination", axis.clone()),
            ],
            b.pos,
        ),
    }
}

/// NumPy's (and the Array API's) vecdot: `sum(conj(x1) * x2, axis=axis)` in the operands'
/// promoted dtype (a sum would widen ints); the two must have one length along `axis`.
fn vecdot(s: &mut Builder, b: &Bound) -> Result<Val, EvalError> {
    let mut ids = Vec::new();
    for name in ["x1", "x2"] {
        let (v, p) = b.need(name)?.clone();
        let v = s.list_operand(v, p)?;
        ids.push(s.node(v, p)?);
    }
    let (m1, m2) = (s.meta(ids[0]).clone(), s.meta(ids[1]).clone());
    let axis = b.int("axis")?.unwrap_or(-1);
    let along = |m: &ArrayMeta| -> Option<u64> {
        let nd = m.ndim() as i64;
        let a = if axis < 0 { axis + nd } else { axis };
        (0..nd).contains(&a).then(|| m.shape[a as usize])
    };
    match (along(&m1), along(&m2)) {
        (Some(n1), Some(n2)) if n1 == n2 => {}
        _ => {
            return Err(b.err(
                b.pos,
                format!(
                    "vecdot(): x1 of shape {} and x2 of shape {} differ in size along axis {axis} (they are not broadcast along it)",
                    shape_str(&m1.shape),
                    shape_str(&m2.shape)
                ),
            ));
        }
    }
    let dtype = m1.dtype.promote(m2.dtype);
    let x1 = if m1.dtype.is_complex() {
        s.unary(UnaryOp::Conj, Val::Arr(ids[0]), b.pos)?
    } else {
        Val::Arr(ids[0])
    };
    let p = s.elementwise2(BinaryOp::Mul, x1, Val::Arr(ids[1]), b.pos)?;
    s.apply(
        "sum",
        &[
            ("a", p),
            ("axis", Val::Num(Scalar::Int(axis))),
            ("dtype", Val::Str(dtype.name().into())),
        ],
        b.pos,
    )
}
