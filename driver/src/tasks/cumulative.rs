//! Block work of the cumulative functions (`graph/funcs/cumulative.rs`): a scan across
//! blocks is each block's total, the totals' exclusive scan (one block along the axis),
//! then each block's own scan from its offset; no task reads more than one block of the
//! input.

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (n, idx) = (cx.n, cx.idx);
    match &n.op {
        NodeOp::Scan {
            x,
            op,
            axis,
            exclusive,
            offsets,
        } => {
            let mut inputs = vec![cx.b(*x, idx)];
            // The offsets: one element per block along `axis`, in one block or in blocks
            // of one (a chain's, whose first block starts from its own first element).
            let chained =
                |o: &NodeId| matches!(cx.g.nodes[*o].op, NodeOp::ScanTotal { chained: true, .. });
            let offsets = offsets.filter(|o| !(chained(o) && idx[*axis] == 0));
            let per = offsets.map(|o| cx.g.nodes[o].meta.block[*axis].max(1));
            if let (Some(o), Some(per)) = (offsets, per) {
                let mut oi = idx.to_vec();
                oi[*axis] /= per;
                inputs.push(cx.b(o, &oi));
            }
            cx.one(
                Kernel::Scan {
                    op: *op,
                    axis: *axis,
                    exclusive: *exclusive,
                    offset: per.map(|per| idx[*axis] % per),
                },
                inputs,
            )
        }
        NodeOp::ScanTotal {
            x,
            op,
            axis,
            chained: false,
        } => cx.one(
            Kernel::ScanTotal {
                op: *op,
                axis: *axis,
            },
            vec![cx.b(*x, idx)],
        ),
        NodeOp::ScanTotal {
            x,
            op,
            axis,
            chained: true,
        } => {
            let kernel = Kernel::ScanTotal {
                op: *op,
                axis: *axis,
            };
            if idx[*axis] == 0 {
                // Nothing before the first block: the identity (0, or 1 for a product).
                return cx.one(
                    Kernel::Fill {
                        value: op.empty_value(),
                    },
                    vec![],
                );
            }
            let mut before = idx.to_vec();
            before[*axis] -= 1;
            // The first block is folded from its own first element, the later ones from
            // what the blocks before them made.
            let mut inputs = vec![cx.b(*x, &before)];
            if before[*axis] > 0 {
                inputs.push(cx.b(cx.id, &before));
            }
            cx.one(kernel, inputs)
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
