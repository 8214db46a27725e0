//! Block work of a fit's pass in one sweep (`graph/funcs/models.rs`, `glm_sums`): the sums
//! over X's row blocks, a reduction the scheduler splits into partial sums. A term is one
//! row block: X's blocks across its columns, y's block beside them (with the sample
//! weights, if any, as its second column), W and b.

use nums_layout::Scalar;

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let NodeOp::GlmSums {
        loss,
        x,
        y,
        w,
        b,
        hessian,
    } = &cx.n.op
    else {
        unreachable!("routed here by tasks::BlockWork::work_for")
    };
    let (rows, cols) = (cx.w.grids[*x][0], cx.w.grids[*x][1]);
    if rows == 0 {
        // No rows: sums of nothing.
        return cx.one(
            Kernel::Fill {
                value: Scalar::Int(0),
            },
            vec![],
        );
    }
    let arity = cols as usize + 2 + usize::from(b.is_some());
    let mut terms = Vec::with_capacity(rows as usize * arity);
    for i in 0..rows {
        terms.extend((0..cols).map(|c| cx.b(*x, &[i, c])));
        // y, or y and its sample weights ([n, 2], one block across).
        terms.push(if cx.w.grids[*y].len() == 2 {
            cx.b(*y, &[i, 0])
        } else {
            cx.b(*y, &[i])
        });
        terms.push(cx.b(*w, &[0, 0]));
        terms.extend(b.map(|b| cx.b(b, &[0])));
    }
    Some(Work::Reduce {
        kernel: Kernel::GlmSums {
            loss: *loss,
            cols: cols as usize,
            intercept: b.is_some(),
            hessian: *hessian,
        },
        arity,
        terms,
        output: cx.output,
    })
}
