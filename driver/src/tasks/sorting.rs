//! Block work of sorting, searching and selection (`graph/funcs/sorting.rs`): a block
//! sorted on its own, a sample sort's partition sizes and merges, `searchsorted` as a sum
//! over the sorted array's blocks, and a 1-D selection whose counts per block are known.

use super::*;
use nums_function::order::{merge_scratch, sort_scratch};

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (n, idx, output) = (cx.n, cx.idx, cx.output);
    match &n.op {
        NodeOp::Sort {
            x,
            axis,
            descending,
            arg,
        } => {
            let m = cx.meta(*x);
            let elems = m.block_shape(idx).iter().product::<usize>() as u64;
            cx.one(
                Kernel::Sort {
                    axis: *axis,
                    descending: *descending,
                    arg: *arg,
                    scratch: sort_scratch(elems, m.dtype.size() as u64, *arg),
                },
                vec![cx.b(*x, idx)],
            )
        }
        NodeOp::SortCount {
            x,
            splitters,
            descending,
        } => {
            let m = cx.meta(*x);
            cx.one(
                Kernel::SortCount {
                    first: idx[0] * m.block[0],
                    splitters: splitters.to_vec(),
                    descending: *descending,
                },
                vec![cx.b(*x, &idx[..1])],
            )
        }
        NodeOp::SortMerge {
            runs,
            positions,
            buckets,
            descending,
            arg,
        } => {
            let a = n.meta.block_origin(idx)[0];
            let len = n.meta.block_shape(idx)[0] as u64;
            let total = n.meta.shape[0];
            // Partition k holds sorted positions buckets[k].0 up to the next one's start.
            let end = |k: usize| buckets.get(k + 1).map_or(total, |b| b.0);
            let lo = buckets.partition_point(|b| b.0 <= a).saturating_sub(1);
            let hi = buckets.partition_point(|b| b.0 < a + len);
            let (lo, hi) = (lo.min(hi), hi.max(lo + 1).min(buckets.len()));
            debug_assert!(end(hi - 1) >= a + len);
            let first = buckets[lo].1.start;
            let last = buckets[hi - 1].1.end;
            let mut inputs: Vec<BlockId> = runs[first..last].iter().map(|&r| cx.only(r)).collect();
            if *arg {
                inputs.extend(positions[first..last].iter().map(|&r| cx.only(r)));
            }
            cx.one(
                Kernel::SortMerge {
                    parts: last - first,
                    start: a - buckets[lo].0,
                    descending: *descending,
                    arg: *arg,
                    scratch: merge_scratch(len),
                },
                inputs,
            )
        }
        NodeOp::SearchSorted { a, v, right } => {
            // An empty `a` (no blocks, or one empty block that nothing writes): every
            // value's position is 0.
            let terms = if cx.g.nodes[*a].meta.is_empty() {
                Vec::new()
            } else {
                (0..cx.w.grids[*a][0])
                    .flat_map(|k| [cx.b(*a, &[k]), cx.b(*v, idx)])
                    .collect()
            };
            reduce_or_fill(Kernel::SearchCount { right: *right }, 2, terms, output, cx)
        }
        NodeOp::Compress {
            x,
            mask,
            axis,
            before,
            offsets,
        } => {
            let a = n.meta.block_origin(idx)[*axis];
            let len = n.meta.block_shape(idx)[*axis] as u64;
            // Mask block i selects offsets[i]..offsets[i + 1] of the output: a term per
            // block with a selected slice in this output block, combined as partials
            // when they are too many for one task.
            let nb = offsets.len() - 1;
            let mut i = offsets[1..].partition_point(|&o| o <= a);
            let mut terms = Vec::new();
            let mut xi = idx.to_vec();
            while i < nb && offsets[i] < a + len {
                if offsets[i] < offsets[i + 1] {
                    xi[*axis] = i as u64;
                    terms.extend([
                        cx.b(*x, &xi),
                        cx.b(*mask, &[i as u64]),
                        cx.b(*before, &[i as u64]),
                    ]);
                }
                i += 1;
            }
            reduce_or_fill(Kernel::Compress { axis: *axis }, 3, terms, output, cx)
        }
        NodeOp::IndexHits { idx: i, len, block } => cx.one(
            Kernel::IndexHits {
                len: *len,
                block: *block,
                blocks: len.div_ceil((*block).max(1)),
            },
            vec![cx.b(*i, &[idx[0]])],
        ),
        NodeOp::Gather {
            x,
            idx: ix,
            axis,
            starts,
            hits,
        } => {
            let j = idx[*axis];
            let mut xi = idx.to_vec();
            let mut terms = Vec::new();
            for &i in &hits[j as usize] {
                xi[*axis] = u64::from(i);
                terms.extend([
                    cx.b(*ix, &[j]),
                    cx.b(*x, &xi),
                    cx.b(*starts, &[u64::from(i)]),
                ]);
            }
            let len = cx.meta(*x).shape[*axis];
            reduce_or_fill(Kernel::Gather { axis: *axis, len }, 3, terms, output, cx)
        }
        NodeOp::Quantile {
            x,
            axis,
            qs,
            method,
            nan,
            select,
        } => cx.one(
            Kernel::Quantile {
                axis: *axis,
                qs: qs.clone(),
                method: *method,
                nan: *nan,
                select: *select,
            },
            vec![cx.b(*x, idx)],
        ),
        NodeOp::Histogram {
            x,
            lo,
            hi,
            weights,
            bins,
        } => {
            let count: u64 = cx.w.grids[*x].iter().product();
            let gx = &cx.w.grids[*x];
            let mut terms = Vec::new();
            for k in 0..count {
                let bi = unravel(k, gx);
                terms.push(cx.b(*x, &bi));
                terms.push(cx.b(*lo, &[]));
                terms.push(cx.b(*hi, &[]));
                if let Some(w) = weights {
                    terms.push(cx.b(*w, &bi));
                }
            }
            reduce_or_fill(
                Kernel::Histogram {
                    bins: *bins,
                    weighted: weights.is_some(),
                },
                3 + weights.is_some() as usize,
                terms,
                output,
                cx,
            )
        }
        NodeOp::Bincount { x, weights } => {
            let mut terms = Vec::new();
            for k in 0..cx.w.grids[*x][0] {
                terms.push(cx.b(*x, &[k]));
                if let Some(w) = weights {
                    terms.push(cx.b(*w, &[k]));
                }
            }
            reduce_or_fill(
                Kernel::Bincount {
                    length: n.meta.shape[0],
                    weighted: weights.is_some(),
                },
                1 + weights.is_some() as usize,
                terms,
                output,
                cx,
            )
        }
        NodeOp::DistinctCounts { x, cap } => {
            let gx = &cx.w.grids[*x];
            let terms = (0..gx.iter().product::<u64>())
                .map(|k| cx.b(*x, &unravel(k, gx)))
                .collect();
            reduce_or_fill(Kernel::DistinctCounts { cap: *cap }, 1, terms, output, cx)
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}

/// A sum of `kernel` over `terms`, or zeros when there are none (an empty input).
fn reduce_or_fill(
    kernel: Kernel,
    arity: usize,
    terms: Vec<BlockId>,
    output: BlockId,
    cx: &Out<'_, '_>,
) -> Option<Work> {
    if terms.is_empty() {
        return cx.one(
            Kernel::Fill {
                value: nums_layout::Scalar::Int(0),
            },
            vec![],
        );
    }
    Some(Work::Reduce {
        kernel,
        arity,
        terms,
        output,
    })
}
