//! Block work of the arrays made from nothing (`graph/funcs/creation.rs`): random, filled,
//! ranges, identities, a fit's parameters. Each block is one task without inputs.

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let n = cx.n;
    match &n.op {
        NodeOp::Random { dist, seed, frame } => cx.one(
            Kernel::Random {
                dist: *dist,
                seed: *seed,
                frame: frame.as_deref().cloned(),
            },
            vec![],
        ),
        NodeOp::Fill { value } => cx.one(Kernel::Fill { value: *value }, vec![]),
        NodeOp::Ints { values } => cx.one(
            Kernel::Fill {
                value: nums_layout::Scalar::Int(values[cx.idx[0] as usize]),
            },
            vec![],
        ),
        NodeOp::Iota {
            axis,
            start,
            step,
            last,
        } => cx.one(
            Kernel::Iota {
                axis: *axis,
                start: *start,
                step: *step,
                last: *last,
            },
            vec![],
        ),
        NodeOp::Eye { k } => cx.one(Kernel::Eye { k: *k }, vec![]),
        NodeOp::Param { name } => cx.one(Kernel::Param { name: name.clone() }, vec![]),
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
