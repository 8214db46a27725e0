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
            if let Some(o) = offsets {
                // The offsets of every block along `axis` are one block.
                let mut oi = idx.to_vec();
                oi[*axis] = 0;
                inputs.push(cx.b(*o, &oi));
            }
            cx.one(
                Kernel::Scan {
                    op: *op,
                    axis: *axis,
                    exclusive: *exclusive,
                    offset: offsets.map(|_| idx[*axis]),
                },
                inputs,
            )
        }
        NodeOp::ScanTotal { x, op, axis } => cx.one(
            Kernel::ScanTotal {
                op: *op,
                axis: *axis,
            },
            vec![cx.b(*x, idx)],
        ),
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
