//! Block work of the reductions (`graph/funcs/reductions.rs`): each output block is the
//! sum (or product, min, ...) of the input blocks along the reduced axes.

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (n, idx, output) = (cx.n, cx.idx, cx.output);
    match &n.op {
        NodeOp::Reduce { x, op, axes } => {
            // The input blocks whose kept indices are `idx`, in row-major order: every
            // combination of the reduced axes' indices.
            let gx = &cx.w.grids[*x];
            let kept: Vec<usize> = (0..gx.len()).filter(|d| !axes.contains(d)).collect();
            let reduced: Vec<usize> = (0..gx.len()).filter(|d| axes.contains(d)).collect();
            let sizes: Vec<u64> = reduced.iter().map(|&d| gx[d]).collect();
            let mut bi = vec![0; gx.len()];
            for (&d, &i) in kept.iter().zip(idx) {
                bi[d] = i;
            }
            let count: u64 = sizes.iter().product();
            if count == 0 {
                // Reduced axes of length 0: the op's identity, as NumPy's (the ops
                // with none, min and max, are refused when the graph is built).
                return cx.one(
                    Kernel::Fill {
                        value: op.empty_value(),
                    },
                    vec![],
                );
            }
            let terms = (0..count)
                .map(|t| {
                    for (&d, r) in reduced.iter().zip(unravel(t, &sizes)) {
                        bi[d] = r;
                    }
                    cx.b(*x, &bi)
                })
                .collect();
            Some(Work::Reduce {
                kernel: Kernel::Reduce {
                    op: *op,
                    axes: axes.clone(),
                },
                arity: 1,
                terms,
                output,
            })
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
