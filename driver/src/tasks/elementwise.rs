//! Block work of the elementwise functions (`graph/funcs/elementwise.rs`): each output
//! block reads the same block of each operand, block 0 along the axes it broadcasts.

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (n, idx) = (cx.n, cx.idx);
    match &n.op {
        NodeOp::Unary { op, x } => cx.one(Kernel::Unary { op: *op }, vec![cx.b(*x, idx)]),
        NodeOp::CheckBelow { x, limit, error } => cx.one(
            Kernel::CheckBelow {
                limit: *limit,
                error: error.clone(),
            },
            vec![cx.b(*x, idx)],
        ),
        NodeOp::Scalar {
            op,
            x,
            value,
            scalar_left,
        } => cx.one(
            Kernel::Scalar {
                op: *op,
                value: *value,
                scalar_left: *scalar_left,
            },
            vec![cx.b(*x, idx)],
        ),
        NodeOp::Binary { op, a, b: y } => {
            cx.one(Kernel::Binary { op: *op }, vec![cx.bcast(*a), cx.bcast(*y)])
        }
        NodeOp::Where { c, a, b: y } => cx.one(
            Kernel::Where,
            vec![cx.bcast(*c), cx.bcast(*a), cx.bcast(*y)],
        ),
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
