//! Indexing with data: boolean masks of several axes, integer arrays (their values
//! computed first, in a stage of their own), several advanced indices broadcast together
//! as NumPy does, and assignment (`x.at[index].set(v)`: a new array version whose blocks
//! the index does not touch are x's own, read in place).

use super::*;

impl Builder<'_> {
    /// The positions a 1-D bool `mask` of length `n` selects: known once the mask is
    /// computed (a stage of its own); until then every position (the largest shape).
    pub(super) fn selection(&mut self, mask: NodeId, n: u64) -> Result<Vec<u64>, String> {
        if n > MAX_SELECTION {
            return Err(format!(
                "a mask selects along an axis of {n}, longer than the {MAX_SELECTION} a mask may select along"
            ));
        }
        if let Some(values) = self.values.get(&mask) {
            // A session computes the mask's values as it computes any node's.
            return positions(values);
        }
        Ok(match self.masks.get(&mask) {
            Some(idx) => idx.clone(),
            None => {
                self.need.get_or_insert(mask);
                (0..n).collect()
            }
        })
    }

    /// The values of the integer array `a` as positions along an axis of `n` (negatives
    /// from the end), C order: computed first (a stage of its own); until then zeros.
    pub(super) fn index_values(&mut self, a: NodeId, n: u64) -> Result<Vec<u64>, String> {
        let len = self.meta(a).len();
        if len > MAX_SELECTION {
            return Err(format!(
                "an index array of {len} elements is longer than the {MAX_SELECTION} an index may hold"
            ));
        }
        let Some(b) = self.values.get(&a) else {
            self.need_values.get_or_insert(a);
            return Ok(vec![0; len as usize]);
        };
        let n = n as i64;
        b.to_i64()
            .iter()
            .map(|&i| {
                if i < -n || i >= n {
                    Err(format!(
                        "index {i} is out of bounds for an axis of size {n}"
                    ))
                } else {
                    Ok(i.rem_euclid(n.max(1)) as u64)
                }
            })
            .collect()
    }

    /// The values of the integer array `a` (C order) as they are: computed first (a
    /// stage of its own, as [`Builder::index_values`]'s); until then None.
    pub(super) fn int_values(&mut self, a: NodeId) -> Result<Option<Vec<i64>>, String> {
        let len = self.meta(a).len();
        if len > MAX_SELECTION {
            return Err(format!(
                "an array of {len} counts is longer than the {MAX_SELECTION} it may hold"
            ));
        }
        match self.values.get(&a) {
            Some(b) => Ok(Some(b.to_i64().iter().copied().collect())),
            None => {
                self.need_values.get_or_insert(a);
                Ok(None)
            }
        }
    }

    /// `x[mask]` with a bool mask of x's first k >= 2 axes: those axes become one of the
    /// selected elements in C order (x's leading axes merged, rows selected), any size.
    pub(super) fn mask_nd(&mut self, x: NodeId, mask: NodeId) -> NodeId {
        let (m, k) = (self.meta(x).clone(), self.meta(mask).ndim());
        let n: u64 = m.shape[..k].iter().product();
        let flat_mask = self.reshape(mask, &[n]);
        let rows: Vec<u64> = std::iter::once(n)
            .chain(m.shape[k..].iter().copied())
            .collect();
        let xr = self.reshape(x, &rows);
        self.compress_along(xr, flat_mask, 0)
    }

    /// NumPy's advanced indexing of `x` by `adv` (axis, index shape, positions in C order;
    /// every other axis whole): the indices broadcast together to one shape B, which takes
    /// the place of the indexed axes when they are next to each other and goes first
    /// otherwise. Made as x with the indexed axes first, merged into one, and rows taken.
    pub(super) fn advanced(
        &mut self,
        x: NodeId,
        adv: Vec<(usize, Vec<u64>, Vec<u64>)>,
    ) -> Result<Val, String> {
        let m = self.meta(x).clone();
        let mut b: Vec<u64> = vec![];
        for (_, s, _) in &adv {
            b = nums_layout::meta::broadcast(&b, s).ok_or_else(|| {
                format!(
                    "shape mismatch: indexing arrays could not be broadcast together with shapes {}",
                    adv.iter()
                        .map(|(_, s, _)| shape_str(s))
                        .collect::<Vec<_>>()
                        .join(" ")
                )
            })?;
        }
        let count: u64 = b.iter().product();
        if count > MAX_SELECTION {
            return Err(format!(
                "advanced indices select {count} positions, more than the {MAX_SELECTION} an index may hold"
            ));
        }
        let axes: Vec<usize> = adv.iter().map(|t| t.0).collect();
        let rest: Vec<usize> = (0..m.ndim()).filter(|a| !axes.contains(a)).collect();
        // The flat position (over the indexed axes) of every element of B.
        let mut flat = vec![0u64; count as usize];
        let mut stride = 1u64;
        for (a, s, idx) in adv.iter().rev() {
            for (p, f) in flat.iter_mut().enumerate() {
                let at = nums_layout::meta::unravel(p as u64, &b);
                // Broadcast: s's axes align with B's trailing ones; length 1 repeats.
                let off = b.len() - s.len();
                let own: Vec<u64> = s
                    .iter()
                    .enumerate()
                    .map(|(d, &l)| if l == 1 { 0 } else { at[off + d] })
                    .collect();
                *f += idx[nums_layout::meta::ravel(&own, s) as usize] * stride;
            }
            stride *= m.shape[*a];
        }
        let perm: Vec<usize> = axes.iter().chain(&rest).copied().collect();
        let xt = self.transpose(x, perm);
        let rows: Vec<u64> = std::iter::once(stride)
            .chain(rest.iter().map(|&a| m.shape[a]))
            .collect();
        let xr = self.reshape(xt, &rows);
        let t = self.meta(xr).clone();
        let mut shape = t.shape.clone();
        shape[0] = count;
        let taken = self.add(
            ArrayMeta::new(shape, t.block, t.dtype),
            NodeOp::Take {
                x: xr,
                axis: 0,
                indices: flat,
            },
        );
        let full: Vec<u64> = b
            .iter()
            .chain(rest.iter().map(|&a| &m.shape[a]))
            .copied()
            .collect();
        let mut r = self.reshape(taken, &full);
        // Next to each other: B stands where the indexed axes stood.
        let adjacent = axes.windows(2).all(|w| w[1] == w[0] + 1);
        let before = rest.iter().filter(|&&a| a < axes[0]).count();
        if adjacent && before > 0 {
            let nb = b.len();
            let perm: Vec<usize> = (nb..nb + before)
                .chain(0..nb)
                .chain(nb + before..nb + rest.len())
                .collect();
            r = self.transpose(r, perm);
        }
        Ok(Val::Arr(r))
    }
}

/// The positions a boolean mask's values select (C order): where several advanced
/// indices meet (one mask alone is counted per block, never listed).
pub(crate) fn positions(values: &Block) -> Result<Vec<u64>, String> {
    let Block::Bool(values) = values else {
        return Err(format!("a mask of {} values, not bool", values.dtype()));
    };
    Ok(values
        .iter()
        .enumerate()
        .filter(|(_, v)| **v)
        .map(|(i, _)| i as u64)
        .collect())
}

/// What an assignment's index picks along one axis of x, in the order v's elements go.
#[derive(Debug, Clone, PartialEq)]
pub enum AxisSel {
    /// Positions `start + k * step`, `k` in `0..len` (a slice, an integer, the whole axis).
    Range { start: i64, step: i64, len: u64 },
    /// An integer list or array: (position, index into v along this axis), sorted by
    /// position, stably (repeats in the index's order: the last one wins).
    List(Vec<(u64, u64)>),
}

impl AxisSel {
    /// The picks in `lo..hi`: (position, index into the selection), by position; repeats
    /// in order.
    pub fn hits(&self, lo: u64, hi: u64) -> Vec<(u64, u64)> {
        match self {
            AxisSel::List(pairs) => {
                let a = pairs.partition_point(|p| p.0 < lo);
                let b = pairs.partition_point(|p| p.0 < hi);
                pairs[a..b].to_vec()
            }
            &AxisSel::Range { start, step, len } => {
                let (lo, hi) = (lo as i64, hi as i64 - 1);
                if len == 0 || lo > hi {
                    return vec![];
                }
                // k with lo <= start + k * step <= hi.
                let (a, b) = if step > 0 {
                    (
                        (lo - start).div_euclid(step)
                            + i64::from((lo - start).rem_euclid(step) != 0),
                        (hi - start).div_euclid(step),
                    )
                } else {
                    let s = -step;
                    (
                        (start - hi).div_euclid(s) + i64::from((start - hi).rem_euclid(s) != 0),
                        (start - lo).div_euclid(s),
                    )
                };
                let (a, b) = (a.max(0), b.min(len as i64 - 1));
                let mut out: Vec<(u64, u64)> = (a..=b)
                    .map(|k| ((start + k * step) as u64, k as u64))
                    .collect();
                out.sort_by_key(|p| p.0);
                out
            }
        }
    }

    fn len(&self) -> u64 {
        match self {
            AxisSel::Range { len, .. } => *len,
            AxisSel::List(pairs) => pairs.len() as u64,
        }
    }
}

impl Builder<'_> {
    /// `x.at[items].set(v)`, when `f` and `args` are that call (None otherwise).
    pub(super) fn at_set(
        &mut self,
        f: &str,
        args: &[Expr],
        kwargs: &[crate::expr::Kwarg],
        pos: usize,
    ) -> Option<Result<Val, EvalError>> {
        let [target, value] = args else { return None };
        let ExprKind::Index(at, items) = &target.kind else {
            return None;
        };
        let ExprKind::Attr(x, attr) = &at.kind else {
            return None;
        };
        if attr != "at" {
            return None;
        }
        let err = |m: &str| Some(Err(EvalError::Expr(ExprError::new(pos, m))));
        if f != "set" {
            return err(&format!(
                "x.at[index].{f}() is not supported: x.at[index].set(value) is (NumPy's x[index] = value on a new array)"
            ));
        }
        if let Some(k) = kwargs.first() {
            return Some(Err(EvalError::Expr(ExprError::new(
                k.pos,
                format!("set() takes no keyword {}", k.name),
            ))));
        }
        Some((|| {
            let Val::Arr(x) = self.eval(x)? else {
                return Err(EvalError::Expr(ExprError::new(
                    at.pos,
                    "only arrays have .at",
                )));
            };
            let v = self.eval_operand(value)?;
            self.assign(x, items, v, value.pos)
        })())
    }

    /// NumPy's `x[items] = v` on a new array version: a bool mask (with whole axes
    /// around it) is a `where`; integers, slices, `None` and one integer list or array
    /// pick elements orthogonally ([`NodeOp::Put`]), x's other blocks shared.
    fn assign(&mut self, x: NodeId, items: &[Expr], v: Val, vpos: usize) -> Result<Val, EvalError> {
        let m = self.meta(x).clone();
        let items = expand_ellipsis(items, m.ndim())?;
        let whole = |e: &Expr| matches!(&e.kind, ExprKind::Slice(None, None, None));
        // Each item's value (slices and None stay expressions).
        let mut vals: Vec<Option<Val>> = Vec::new();
        for it in &items {
            vals.push(match &it.kind {
                ExprKind::Slice(..) | ExprKind::None => None,
                _ => Some(self.eval(it)?),
            });
        }
        // A Python number is converted as NumPy converts it. A NumPy scalar is cast, except
        // into signed ints, where NumPy 2 converts a real one as a Python number too
        // (`i8[0] = np.float64(300.0)` is OverflowError, `u8[0] = np.float64(300.0)` 44).
        let checked = match &v {
            Val::Num(x) => Some(*x),
            Val::NpScalar(x, d)
                if m.dtype.is_int() && !m.dtype.is_unsigned() && !d.is_complex() =>
            {
                Some(*x)
            }
            _ => None,
        };
        if let Some(x) = checked {
            setitem_scalar(x, m.dtype).map_err(|r| EvalError::Expr(ExprError::refused(vpos, r)))?;
        }
        let vnode = self.node(v, vpos)?;
        let vnode = self.cast(vnode, m.dtype);
        let vm = self.meta(vnode).clone();
        let at = |p: usize, s: String| EvalError::Expr(ExprError::new(p, s));
        // A bool mask of axes d..d + k, every other item a whole axis: where(mask, v, x).
        let masks: Vec<usize> = (0..items.len())
            .filter(
                |&i| matches!(&vals[i], Some(Val::Arr(a)) if self.meta(*a).dtype == DType::Bool),
            )
            .collect();
        if let [i] = masks[..] {
            let Some(Val::Arr(mask)) = vals[i].clone() else {
                unreachable!()
            };
            let mm = self.meta(mask).clone();
            let k = mm.ndim();
            let d = i; // every item before it is a whole axis
            let others_whole = items.iter().enumerate().all(|(j, e)| j == i || whole(e));
            if !others_whole || d + k > m.ndim() || mm.shape[..] != m.shape[d..d + k] {
                return Err(at(
                    items[i].pos,
                    format!(
                        "a bool mask {} in an assignment must match axes of {} and the other items be whole axes (:)",
                        shape_str(&mm.shape),
                        shape_str(&m.shape)
                    ),
                ));
            }
            // The target x[mask] is x.shape[..d] + (count,) + x.shape[d + k..]: v must
            // broadcast over the count, so its axis there has length 1.
            let tl = m.ndim() - k + 1;
            if vm.ndim() > tl {
                return Err(at(
                    vpos,
                    format!(
                        "value of shape {} does not fit x[mask]",
                        shape_str(&vm.shape)
                    ),
                ));
            }
            let mut vs = vec![1u64; tl - vm.ndim()];
            vs.extend(&vm.shape);
            if vs[d] != 1 && d == 0 && k == m.ndim() && vm.ndim() == 1 {
                // `x[mask] = y[mask]`: one value per selected element, in C order.
                let flat = self.reshape(mask, &[mm.len()]);
                let p = self.nonzero_positions(flat, vpos)?;
                let known = self.values.contains_key(&p);
                let count = self.meta(p).len();
                if known && count != vm.len() {
                    return Err(at(
                        vpos,
                        format!(
                            "NumPy boolean array indexing assignment cannot assign {} input values to the {count} output values where the mask is true",
                            vm.len()
                        ),
                    ));
                }
                return self
                    .put_flat(x, p, vnode)
                    .map(Val::Arr)
                    .map_err(|e| at(vpos, e));
            }
            if vs[d] != 1 {
                return Err(at(
                    vpos,
                    format!(
                        "an array of shape {} set through a mask: only values that broadcast over the selected elements (a number, or length 1 along the mask's axis) are supported; write where(mask, values, x) with values of x's shape",
                        shape_str(&vm.shape)
                    ),
                ));
            }
            let vfull: Vec<u64> = vs[..d]
                .iter()
                .copied()
                .chain(std::iter::repeat_n(1, k))
                .chain(vs[d + 1..].iter().copied())
                .collect();
            let vx = self.reshape(vnode, &vfull);
            let mfull: Vec<u64> = std::iter::repeat_n(1, d)
                .chain(mm.shape.iter().copied())
                .chain(std::iter::repeat_n(1, m.ndim() - d - k))
                .collect();
            let mx = self.reshape(mask, &mfull);
            let r = self.where_(Val::Arr(mx), Val::Arr(vx), Val::Arr(x), vpos)?;
            let r = self.node(r, vpos)?;
            // The same blocks as x (where follows its operands' broadcast blocks).
            return Ok(Val::Arr(self.rechunk(r, m.block.clone())));
        }
        // Orthogonal picks: per x axis a selection; the target's axes (None: a new one).
        let mut sel: Vec<AxisSel> = Vec::new();
        let mut target: Vec<Option<usize>> = Vec::new();
        let mut ints: Vec<usize> = Vec::new();
        let mut list: Option<(usize, usize)> = None; // (x axis, item)
        let mut d = 0;
        for (i, it) in items.iter().enumerate() {
            let err = |s: String| at(it.pos, s);
            let index_err = |s: String| {
                EvalError::Expr(ExprError::raising(
                    crate::refusal::PyException::IndexError,
                    it.pos,
                    s,
                ))
            };
            if matches!(it.kind, ExprKind::None) {
                target.push(None);
                continue;
            }
            if d >= m.ndim() {
                return Err(index_err(format!(
                    "too many indices for an array of dimension {}",
                    m.ndim()
                )));
            }
            let n = m.shape[d] as i64;
            if let ExprKind::Slice(a, b, c) = &it.kind {
                let mut opt = |e: &Option<Box<Expr>>| -> Result<Option<i64>, EvalError> {
                    match e {
                        None => Ok(None),
                        Some(e) if matches!(e.kind, ExprKind::None) => Ok(None),
                        Some(e) => self.int(e).map(Some),
                    }
                };
                let (a, b, c) = (opt(a)?, opt(b)?, opt(c)?);
                let (start, step, len) = python_slice(a, b, c.unwrap_or(1), n).map_err(err)?;
                sel.push(AxisSel::Range {
                    start,
                    step,
                    len: len as u64,
                });
                target.push(Some(d));
                d += 1;
                continue;
            }
            let positions: Vec<u64> = match vals[i].take().expect("evaluated") {
                Val::Num(v) if v.kind() == ScalarKind::Int => {
                    let k = v.as_i64();
                    if k < -n || k >= n {
                        return Err(index_err(format!(
                            "index {k} is out of bounds for axis {d} with size {n}"
                        )));
                    }
                    sel.push(AxisSel::Range {
                        start: k.rem_euclid(n),
                        step: 1,
                        len: 1,
                    });
                    ints.push(d);
                    d += 1;
                    continue;
                }
                Val::Tuple(t) => t
                    .iter()
                    .map(|v| match v {
                        Val::Num(k)
                            if k.kind() == ScalarKind::Int && (-n..n).contains(&k.as_i64()) =>
                        {
                            Ok(k.as_i64().rem_euclid(n) as u64)
                        }
                        _ => Err(err(format!("an index list holds integers in -{n}..{n}"))),
                    })
                    .collect::<Result<_, _>>()?,
                Val::Arr(a) if self.meta(a).dtype.is_int() && self.meta(a).ndim() == 1 => {
                    self.index_values(a, m.shape[d]).map_err(err)?
                }
                _ => {
                    return Err(err(
                        "an assignment's index is integers, slices, None, ..., one integer list or 1-D integer array, or one bool mask".into(),
                    ));
                }
            };
            if list.is_some() {
                return Err(err(
                    "one integer list or array per assignment index (several, broadcast together, are not supported yet)".into(),
                ));
            }
            let mut pairs: Vec<(u64, u64)> = positions.into_iter().zip(0..).collect();
            pairs.sort_by_key(|p| p.0);
            sel.push(AxisSel::List(pairs));
            list = Some((d, target.len()));
            target.push(Some(d));
            d += 1;
        }
        for k in d..m.ndim() {
            sel.push(AxisSel::Range {
                start: 0,
                step: 1,
                len: m.shape[k],
            });
            target.push(Some(k));
        }
        // NumPy's rule: integers beside a list are advanced indices too; when they are not
        // next to it, the list's axis goes first.
        if let Some((ld, ti)) = list {
            let adv: Vec<usize> = ints.iter().copied().chain([ld]).collect();
            let (lo, hi) = (
                adv.iter().min().copied().unwrap_or(ld),
                adv.iter().max().copied().unwrap_or(ld),
            );
            if hi - lo + 1 != adv.len() {
                let a = target.remove(ti);
                target.insert(0, a);
            }
        }
        let tshape: Vec<u64> = target
            .iter()
            .map(|a| a.map_or(1, |d| sel[d].len()))
            .collect();
        if vm.ndim() > tshape.len()
            || nums_layout::meta::broadcast(&vm.shape, &tshape).as_deref() != Some(&tshape[..])
        {
            return Err(at(
                vpos,
                format!(
                    "could not broadcast input array from shape {} into shape {}",
                    shape_str(&vm.shape),
                    shape_str(&tshape)
                ),
            ));
        }
        // v in x's axis order: leading 1s, new axes dropped, the list's axis back in
        // place, 1 at the integers' axes.
        let mut vs = vec![1u64; tshape.len() - vm.ndim()];
        vs.extend(&vm.shape);
        let kept: Vec<(usize, u64)> = target
            .iter()
            .zip(&vs)
            .filter_map(|(a, &l)| a.map(|d| (d, l)))
            .collect();
        let mut vn = self.reshape(vnode, &kept.iter().map(|k| k.1).collect::<Vec<_>>());
        let perm: Vec<usize> = {
            let mut p: Vec<usize> = (0..kept.len()).collect();
            p.sort_by_key(|&i| kept[i].0);
            p
        };
        vn = self.transpose(vn, perm);
        let vshape: Vec<u64> = (0..m.ndim())
            .map(|d| kept.iter().find(|k| k.0 == d).map_or(1, |k| k.1))
            .collect();
        vn = self.reshape(vn, &vshape);
        Ok(Val::Arr(self.add(
            m.clone(),
            NodeOp::Put {
                x,
                v: vn,
                sel: Arc::new(sel),
            },
        )))
    }
}

impl Builder<'_> {
    /// `x.ravel()[positions] = v` on a new version of x: `positions` a 1-D integer array
    /// (negatives from the end; its values computed first, a stage of their own), `v` 1-D
    /// of its length, cast to x's dtype; the last of repeated positions wins (NumPy's put).
    pub(in crate::graph) fn put_flat(
        &mut self,
        x: NodeId,
        positions: NodeId,
        v: NodeId,
    ) -> Result<NodeId, String> {
        let m = self.meta(x).clone();
        let n = m.len();
        let pos = self.index_values(positions, n)?;
        if self.meta(v).shape != [pos.len() as u64] {
            return Err(format!(
                "{} values for {} positions",
                self.meta(v).len(),
                pos.len()
            ));
        }
        let flat = self.reshape(x, &[n]);
        let mut pairs: Vec<(u64, u64)> = pos.into_iter().zip(0..).collect();
        // Stable: of repeated positions, the last value stays last.
        pairs.sort_by_key(|p| p.0);
        let v = self.cast(v, m.dtype);
        let fm = self.meta(flat).clone();
        let r = self.add(
            fm,
            NodeOp::Put {
                x: flat,
                v,
                sel: Arc::new(vec![AxisSel::List(pairs)]),
            },
        );
        Ok(self.reshape(r, &m.shape))
    }
}

/// NumPy's checks of a number assigned into an array of `dtype` (`x[i] = v` converts a
/// Python scalar as `int(v)` or `float(v)` would, then into the dtype): an int must fit
/// (OverflowError), a float into ints must be finite (NaN: ValueError, infinity:
/// OverflowError) and its truncation fit, a complex goes only into complex (or bool)
/// arrays (TypeError). An array of values is cast as NumPy's `x[i] = a` casts, unchecked.
fn setitem_scalar(v: Scalar, dtype: DType) -> Result<(), crate::refusal::Refusal> {
    use crate::refusal::{PyException, Refusal};
    if dtype == DType::Bool || dtype.is_complex() {
        return Ok(());
    }
    if let Scalar::Complex(..) = v {
        return Err(Refusal::new(
            PyException::TypeError,
            format!(
                "cannot assign the complex number {v} into a {dtype} array (NumPy raises TypeError)"
            ),
        ));
    }
    let Some((lo, hi)) = dtype.int_range() else {
        return Ok(()); // floats take any real number (float32 rounds, maybe to inf)
    };
    let int = match v {
        Scalar::Float(f) if f.is_nan() => {
            return Err(Refusal::new(
                PyException::ValueError,
                format!("cannot convert float NaN to integer (assigning into a {dtype} array)"),
            ));
        }
        Scalar::Float(f) if f.is_infinite() => {
            return Err(Refusal::new(
                PyException::OverflowError,
                format!(
                    "cannot convert float infinity to integer (assigning into a {dtype} array)"
                ),
            ));
        }
        // Truncated toward zero, as int() does; past i128 it is out of every range.
        Scalar::Float(f) => (f.trunc().abs() < 1e38).then_some(f.trunc() as i128),
        s => s.as_i128(),
    };
    match int {
        Some(i) if (lo..=hi).contains(&i) => Ok(()),
        _ => Err(Refusal::new(
            PyException::OverflowError,
            format!(
                "Python integer {} out of bounds for {dtype} (NumPy raises OverflowError)",
                int.map_or_else(|| v.to_string(), |i| i.to_string())
            ),
        )),
    }
}
