//! Block work of the functions that move elements (`graph/funcs/shapes.rs`): transpose,
//! re-blocking, concatenation, slicing, `take` and `reshape`; most assemble an output block
//! from the input blocks that hold its elements (`BlockWork::gather`).

use std::collections::HashMap;

use super::*;

/// The block of `x` that block `idx` of the Slice or Rechunk node `n` is, whole and
/// unchanged (on x's block boundaries, step 1): readers of an intermediate read x's block
/// in place ([`BlockWork::id`]), as they read an assignment's untouched blocks. A peek at
/// a persisted array's first block (`x[:n].min()`) copies nothing.
pub(super) fn same_block(g: &Graph, n: &Node, idx: &[u64]) -> Option<(NodeId, Vec<u64>)> {
    let (x, start) = match &n.op {
        NodeOp::Slice { x, start, step } if step.iter().all(|&s| s == 1) => (*x, &start[..]),
        NodeOp::Rechunk { x } => (*x, &[][..]),
        _ => return None,
    };
    let mx = &g.nodes[x].meta;
    let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
    if mx.ndim() != idx.len() || mx.dtype != n.meta.dtype || shape.contains(&0) {
        return None;
    }
    (0..idx.len())
        .map(|d| {
            let b = mx.block[d].max(1);
            let first = start.get(d).copied().unwrap_or(0) + origin[d] as i64;
            let first = u64::try_from(first).ok().filter(|f| f % b == 0)?;
            (mx.shape[d].saturating_sub(first).min(b) == shape[d] as u64).then_some(first / b)
        })
        .collect::<Option<Vec<u64>>>()
        .map(|j| (x, j))
}

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (id, n, idx) = (cx.id, cx.n, cx.idx);
    if !n.persist && same_block(cx.g, n, idx).is_some() {
        return None;
    }
    match &n.op {
        NodeOp::Transpose { x, perm } => {
            let mut src = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            cx.one(
                Kernel::Transpose { perm: perm.clone() },
                vec![cx.b(*x, &src)],
            )
        }
        NodeOp::Rechunk { x } => cx.w.gather(
            id,
            idx,
            &[(*x, vec![0; n.meta.ndim()])],
            &n.meta
                .block_origin(idx)
                .iter()
                .map(|&o| o as i64)
                .collect::<Vec<_>>(),
            &[],
        ),
        NodeOp::Concat { xs, axis } => {
            let mut at = 0i64;
            let sources: Vec<(NodeId, Vec<i64>)> = xs
                .iter()
                .map(|&x| {
                    let mut o = vec![0; n.meta.ndim()];
                    o[*axis] = at;
                    at += cx.meta(x).shape[*axis] as i64;
                    (x, o)
                })
                .collect();
            let first: Vec<i64> = n.meta.block_origin(idx).iter().map(|&o| o as i64).collect();
            cx.w.gather(id, idx, &sources, &first, &[])
        }
        NodeOp::Slice { x, start, step } => {
            let first: Vec<i64> = n
                .meta
                .block_origin(idx)
                .iter()
                .zip(start.iter().zip(step))
                .map(|(&o, (&s, &st))| s + o as i64 * st)
                .collect();
            cx.w.gather(id, idx, &[(*x, vec![0; n.meta.ndim()])], &first, step)
        }
        NodeOp::Take { x, axis, indices } => {
            let mx = cx.meta(*x);
            let o = n.meta.block_origin(idx)[*axis] as usize;
            let l = n.meta.block_shape(idx)[*axis];
            let xb = mx.block[*axis];
            let mut inputs: Vec<BlockId> = Vec::new();
            // Input number of each source block along `axis`, in order of first use.
            let mut seen: HashMap<u64, u32> = HashMap::new();
            let mut picks = Vec::with_capacity(l);
            let mut bi = idx.to_vec();
            for &i in &indices[o..o + l] {
                let k = *seen.entry(i / xb).or_insert_with(|| {
                    bi[*axis] = i / xb;
                    inputs.push(cx.b(*x, &bi));
                    (inputs.len() - 1) as u32
                });
                picks.push((k, i % xb));
            }
            cx.one(Kernel::Take { axis: *axis, picks }, inputs)
        }
        NodeOp::Reshape { x } => {
            let (mx, mo) = (cx.meta(*x), &n.meta);
            let non_unit = |m: &ArrayMeta| -> Vec<(u64, u64)> {
                m.shape
                    .iter()
                    .zip(&m.block)
                    .filter(|(s, _)| **s != 1)
                    .map(|(s, b)| (*s, *b))
                    .collect()
            };
            if non_unit(mx) == non_unit(mo) {
                // Length-1 axes come or go: the block with the same non-unit indices.
                let mut ids = mo
                    .shape
                    .iter()
                    .zip(idx)
                    .filter(|(s, _)| **s != 1)
                    .map(|(_, i)| *i);
                let src: Vec<u64> = mx
                    .shape
                    .iter()
                    .map(|&s| if s == 1 { 0 } else { ids.next().expect("same") })
                    .collect();
                let len = mx.block_shape(&src).iter().product::<usize>() as u64;
                return cx.one(
                    Kernel::Reshape {
                        ranges: vec![(0, len)],
                    },
                    vec![cx.b(*x, &src)],
                );
            }
            // One axis split in two, or two merged, block for block (the inner one whole).
            let src = match (split_axis(mx, mo), split_axis(mo, mx)) {
                (Some(a), _) => Some([&idx[..=a], &idx[a + 2..]].concat()),
                (_, Some(a)) => Some([&idx[..=a], &[0], &idx[a + 1..]].concat()),
                _ => None,
            };
            if let Some(src) = src {
                let len = mx.block_shape(&src).iter().product::<usize>() as u64;
                return cx.one(
                    Kernel::Reshape {
                        ranges: vec![(0, len)],
                    },
                    vec![cx.b(*x, &src)],
                );
            }
            // Both blocked along axis 0 only: blocks are runs of the flat C order.
            let row = |m: &ArrayMeta| m.shape.iter().skip(1).product::<u64>().max(1);
            let lo = mo.block_origin(idx).first().copied().unwrap_or(0) * row(mo);
            let hi = lo + mo.block_shape(idx).iter().product::<usize>() as u64;
            let per = mx.block.first().copied().unwrap_or(1) * row(mx);
            let mut inputs = Vec::new();
            let mut ranges = Vec::new();
            for k in lo / per..hi.div_ceil(per) {
                let (a, z) = (k * per, ((k + 1) * per).min(mx.len()));
                let (s, e) = (lo.max(a), hi.min(z));
                if s < e {
                    let mut bi = vec![0; mx.ndim()];
                    if let Some(b0) = bi.first_mut() {
                        *b0 = k;
                    }
                    inputs.push(cx.b(*x, &bi));
                    ranges.push((s - a, e - a));
                }
            }
            cx.one(Kernel::Reshape { ranges }, inputs)
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}

/// The axis `a` of `whole` that `split` splits into its axes `a` and `a + 1`, block for
/// block: each block of `split` holds whole runs along `a + 1`, and `whole`'s blocks along
/// `a` are as many runs (the same elements, in the same C order, block by block).
pub(crate) fn split_axis(whole: &ArrayMeta, split: &ArrayMeta) -> Option<usize> {
    if split.ndim() != whole.ndim() + 1 {
        return None;
    }
    let a = (0..whole.ndim()).find(|&d| whole.shape[d] != split.shape[d])?;
    let (inner, outer) = (split.shape[a + 1], split.shape[a]);
    let same =
        |d: usize, e: usize| whole.shape[d] == split.shape[e] && whole.block[d] == split.block[e];
    ((0..a).all(|d| same(d, d))
        && (a + 1..whole.ndim()).all(|d| same(d, d + 1))
        && whole.shape[a] == outer * inner
        && split.block[a + 1] == inner
        && whole.block[a] == split.block[a] * inner)
        .then_some(a)
}
