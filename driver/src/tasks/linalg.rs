//! Block work of the linear algebra (`graph/funcs/linalg.rs`): TSQR's levels, blocked
//! Cholesky and LU on column panels, and the dense one-task kernels.

use nums_layout::batch::QrOutput;

use crate::graph::{LuStep, TsqrQ};

use super::*;

pub(super) fn work(cx: &Out<'_, '_>) -> Option<Work> {
    let (id, n, idx) = (cx.id, cx.n, cx.idx);
    match &n.op {
        NodeOp::Tsqr { xs, group, q } => {
            // Group `g` of the operands' block rows, each row's blocks side by side.
            let j = idx[0];
            let (g, part) = match q {
                None => (j, 0),
                Some(_) => (j / group, j % group),
            };
            let rows = cx.w.grids[xs[0]][0];
            let cols: u64 = xs.iter().map(|&x| cx.w.grids[x][1]).sum();
            let mut inputs = Vec::new();
            for r in g * group..((g + 1) * group).min(rows) {
                for &x in xs {
                    inputs.extend((0..cx.w.grids[x][1]).map(|c| cx.b(x, &[r, c])));
                }
            }
            let output = match q {
                None => QrOutput::R,
                Some(TsqrQ { c: None }) => QrOutput::Q {
                    part: part as usize,
                },
                Some(TsqrQ { c: Some(c) }) => {
                    inputs.push(cx.b(*c, &[g, 0]));
                    QrOutput::QProduct {
                        part: part as usize,
                    }
                }
            };
            cx.one(
                Kernel::Qr {
                    cols: cols as usize,
                    output,
                },
                inputs,
            )
        }
        NodeOp::CholeskyBlocked { x } => {
            let (i, j) = (idx[0], idx[1]);
            if i < j {
                return cx.one(
                    Kernel::Fill {
                        value: nums_layout::Scalar::Float(0.0),
                    },
                    vec![],
                );
            }
            let mut inputs = vec![cx.b(*x, idx)];
            for k in 0..j {
                if i != j {
                    inputs.push(cx.b(id, &[i, k]));
                }
                inputs.push(cx.b(id, &[j, k]));
            }
            if i != j {
                inputs.push(cx.b(id, &[j, j]));
            }
            cx.one(Kernel::CholeskyBlock { diagonal: i == j }, inputs)
        }
        NodeOp::Lu { xs, step } => {
            let panel = |w: u64, apply: Option<u64>, factor, scale, carry| Kernel::LuPanel {
                w: w as usize,
                apply: apply.map(|k| k as usize),
                factor,
                scale,
                carry,
            };
            // A's row magnitudes (its rows' equilibration): the last operand of the first
            // steps, the forward steps and the determinant's shares.
            let magnitudes = || cx.b(*xs.last().expect("operands"), &[0]);
            match *step {
                // Step k's inputs: F_(k-1) (none at step 0), then the panel's version
                // after step k - 2 (A's panel and its rows' magnitudes at steps 0 and 1).
                LuStep::Factor { k } | LuStep::Update { k } => {
                    let w = match k {
                        0 => n.meta.shape[1],
                        _ => cx.meta(xs[0]).shape[1],
                    };
                    // The panel: k itself, or V_k's block b.
                    let j = match step {
                        LuStep::Update { .. } => k + 1 + idx[1],
                        _ => k,
                    };
                    let inputs = match k {
                        0 => vec![cx.b(xs[0], &[0, 0]), magnitudes()],
                        1 => vec![cx.b(xs[0], &[0, 0]), cx.b(xs[1], &[0, j]), magnitudes()],
                        // V_(k-1)'s block b is panel k + b.
                        _ => vec![cx.b(xs[0], &[0, 0]), cx.b(xs[1], &[0, j - k])],
                    };
                    let factor = matches!(step, LuStep::Factor { .. });
                    cx.one(panel(w, k.checked_sub(1), factor, k <= 1, true), inputs)
                }
                LuStep::URows => {
                    let (i, j) = (idx[0], idx[1]);
                    if j < i + 2 {
                        return None; // in F_i and F_(i+1), or below the diagonal
                    }
                    cx.one(
                        Kernel::Assemble {
                            offsets: vec![vec![0, 0]],
                            step: vec![],
                        },
                        vec![cx.b(xs[i as usize], &[0, j - i - 2])],
                    )
                }
                LuStep::Forward | LuStep::Backward | LuStep::Solution | LuStep::Det(_) => {
                    // F_k is xs[k]; then U (with 3 or more panels), then the step's own.
                    let f0 = cx.meta(xs[0]);
                    let (size, w) = (f0.shape[0] - 1, f0.shape[1]);
                    let p = size.div_ceil(w);
                    let f = |k: u64| cx.b(xs[k as usize], &[0, 0]);
                    let rest = &xs[p as usize..];
                    let (u, rest) = match (step, p >= 3) {
                        (LuStep::Backward | LuStep::Solution, true) => (Some(rest[0]), &rest[1..]),
                        _ => (None, rest),
                    };
                    // F_k, then the blocks of U above it that F_k does not hold.
                    let back = |k: u64| {
                        let mut ins = vec![f(k)];
                        if let Some(u) = u {
                            ins.extend((0..k.saturating_sub(1)).map(|i| cx.b(u, &[i, k])));
                        }
                        ins
                    };
                    match *step {
                        LuStep::Forward => {
                            let (k, i) = (idx[0], idx[2]);
                            // Step 0 reads b as given, and scales its rows as A's.
                            let inputs = if k == 0 {
                                let y = rest[0];
                                let yi = if cx.meta(y).ndim() == 1 {
                                    vec![0]
                                } else {
                                    vec![0, i]
                                };
                                vec![f(k), cx.b(y, &yi), magnitudes()]
                            } else {
                                vec![f(k), cx.b(id, &[k - 1, 0, i])]
                            };
                            cx.one(panel(w, Some(k), false, k == 0, false), inputs)
                        }
                        LuStep::Backward => {
                            let (i, j) = (idx[0], idx[2]);
                            let k = p - 1 - i;
                            let src = if i == 0 {
                                cx.b(rest[0], &[p - 1, 0, j])
                            } else {
                                cx.b(id, &[i - 1, 0, j])
                            };
                            let mut inputs = back(k);
                            inputs.push(src);
                            cx.one(
                                Kernel::LuBack {
                                    w: w as usize,
                                    step: k as usize,
                                },
                                inputs,
                            )
                        }
                        LuStep::Solution => {
                            let j = idx.get(1).copied().unwrap_or(0);
                            let src = match rest.get(1) {
                                Some(&backward) => cx.b(backward, &[p.saturating_sub(2), 0, j]),
                                None => cx.b(rest[0], &[p - 1, 0, j]),
                            };
                            let mut inputs = back(0);
                            inputs.push(src);
                            cx.one(Kernel::LuBack { w: w as usize, step: 0 }, inputs)
                        }
                        LuStep::Det(output) => cx.one(
                            Kernel::LuDet {
                                w: w as usize,
                                step: idx[0] as usize,
                                output,
                            },
                            vec![f(idx[0]), magnitudes()],
                        ),
                        _ => unreachable!("matched above"),
                    }
                }
            }
        }
        NodeOp::Dense { kernel, xs } => cx.one(
            kernel.clone(),
            xs.iter().map(|&x| BlockId::new(x, 0)).collect(),
        ),
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
