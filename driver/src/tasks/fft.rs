//! Block work of the FFT (`graph/funcs/fft.rs`): each block of an FFT node is one kernel
//! call on the matching block of its operand, whose lanes along the axis are whole; the
//! four-step decomposition across blocks is made of these and of re-blockings.

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let NodeOp::Fft {
        x,
        axis,
        kind,
        scale,
        twiddle,
    } = &cx.n.op
    else {
        unreachable!("routed here by tasks::BlockWork::work_for")
    };
    cx.one(
        Kernel::Fft {
            axis: *axis,
            kind: *kind,
            scale: *scale,
            twiddle: *twiddle,
        },
        vec![cx.b(*x, cx.idx)],
    )
}
