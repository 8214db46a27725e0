//! Block work of `einsum` (`graph/funcs/contractions.rs`: matmul, dot, tensordot, ...):
//! each output block is the sum over the contracted letters' blocks, a reduction the
//! scheduler splits into partial sums.

use nums_layout::Scalar;

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (n, idx, output) = (cx.n, cx.idx, cx.output);
    match &n.op {
        NodeOp::Einsum { subscripts, xs } => {
            let (lhs, out) = subscripts.split_once("->").expect("explicit einsum");
            let ins: Vec<Vec<char>> = lhs.split(',').map(|t| t.chars().collect()).collect();
            let out: Vec<char> = out.chars().collect();
            // Block index of every letter: the output's from `idx`, the contracted ones
            // over their grids (all combinations, in C order).
            let mut grid: Vec<(char, u64)> = Vec::new();
            for (l, &x) in ins.iter().zip(xs) {
                for (d, &c) in l.iter().enumerate() {
                    if !out.contains(&c) && !grid.iter().any(|(g, _)| *g == c) {
                        grid.push((c, cx.w.grids[x][d]));
                    }
                }
            }
            // Where each operand axis takes its index: output axis or contracted letter.
            let from: Vec<Vec<Result<usize, usize>>> = ins
                .iter()
                .map(|l| {
                    l.iter()
                        .map(|&c| match out.iter().position(|&o| o == c) {
                            Some(p) => Ok(p),
                            None => Err(grid.iter().position(|(g, _)| *g == c).expect("letter")),
                        })
                        .collect()
                })
                .collect();
            let sizes: Vec<u64> = grid.iter().map(|(_, s)| *s).collect();
            let count: u64 = sizes.iter().product();
            if count == 0 {
                // A contracted letter of length 0: a sum of nothing (NumPy's zeros).
                return cx.one(
                    Kernel::Fill {
                        value: Scalar::Int(0),
                    },
                    vec![],
                );
            }
            let mut terms = Vec::with_capacity((count as usize).saturating_mul(xs.len()));
            let mut at = Vec::new();
            for t in 0..count {
                let ci = unravel(t, &sizes);
                for (f, &x) in from.iter().zip(xs) {
                    at.clear();
                    at.extend(f.iter().map(|w| match *w {
                        Ok(p) => idx[p],
                        Err(c) => ci[c],
                    }));
                    terms.push(cx.b(x, &at));
                }
            }
            Some(Work::Reduce {
                kernel: Kernel::Einsum {
                    subscripts: subscripts.clone(),
                    operands: xs.len(),
                },
                arity: xs.len(),
                terms,
                output,
            })
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
