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
                    Err(format!("index {i} is out of bounds for an axis of size {n}"))
                } else {
                    Ok(i.rem_euclid(n.max(1)) as u64)
                }
            })
            .collect()
    }

    /// `x[mask]` with a bool mask of x's first k >= 2 axes: those axes become one of the
    /// selected elements in C order. A mask of every axis compresses (any size); a mask of
    /// some selects rows of x with its leading axes merged.
    pub(super) fn mask_nd(
        &mut self,
        x: NodeId,
        mask: NodeId,
        pos: usize,
    ) -> Result<NodeId, EvalError> {
        let (m, k) = (self.meta(x).clone(), self.meta(mask).ndim());
        let n: u64 = m.shape[..k].iter().product();
        let rest = &m.shape[k..];
        let flat_mask = self.reshape(mask, &[n]);
        let rows: Vec<u64> = std::iter::once(n).chain(rest.iter().copied()).collect();
        let xr = self.reshape(x, &rows);
        if rest.is_empty() {
            return Ok(self.compress(xr, flat_mask));
        }
        let idx = self
            .selection(flat_mask, n)
            .map_err(|e| EvalError::Expr(ExprError::new(pos, e)))?;
        let t = self.meta(xr).clone();
        let mut shape = t.shape.clone();
        shape[0] = idx.len() as u64;
        Ok(self.add(
            ArrayMeta::new(shape, t.block, t.dtype),
            NodeOp::Take {
                x: xr,
                axis: 0,
                indices: idx,
            },
        ))
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
