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
            // F_k: block (k, 0, k) of the panels.
            let lu = if *step == LuStep::Panels { id } else { xs[0] };
            let w = cx.meta(lu).block[2] as usize;
            let p = cx.w.grids[lu][0];
            let f = |k: u64| cx.b(lu, &[k, 0, k]);
            // Panel i of a right-hand side as given (1-D: its one block).
            let rhs = |i: u64| {
                let y = xs[1];
                cx.b(
                    y,
                    &if cx.meta(y).ndim() == 1 {
                        vec![0]
                    } else {
                        vec![0, i]
                    },
                )
            };
            let panel = |apply, factor, scale| Kernel::LuPanel {
                w,
                apply,
                factor,
                scale,
            };
            // A's row magnitudes (its rows' equilibration): the last operand of the
            // panels, the forward steps and the determinant's shares.
            let magnitudes = || cx.b(*xs.last().expect("operands"), &[0]);
            match *step {
                LuStep::Panels => {
                    let (k, j) = (idx[0], idx[2]);
                    if j < k || (k == 0 && j > 0) {
                        return None; // no task reads it
                    }
                    // A's panel j: its row blocks, top to bottom.
                    let a_panel =
                        |j: u64| (0..cx.w.grids[xs[0]][0]).map(move |i| cx.b(xs[0], &[i, j]));
                    if k == 0 {
                        let mut inputs: Vec<BlockId> = a_panel(0).collect();
                        inputs.push(magnitudes());
                        return cx.one(panel(None, true, true), inputs);
                    }
                    // A panel's first version reads A's panel, and scales its rows.
                    let mut inputs = vec![f(k - 1)];
                    if k == 1 {
                        inputs.extend(a_panel(j));
                        inputs.push(magnitudes());
                    } else {
                        inputs.push(cx.b(id, &[k - 1, 0, j]));
                    }
                    cx.one(panel(Some(k as usize - 1), j == k, k == 1), inputs)
                }
                LuStep::Forward => {
                    let (k, i) = (idx[0], idx[2]);
                    // Step 0 reads b as given, and scales its rows as A's (not the
                    // probe's, which has no magnitudes).
                    let scale = k == 0 && xs.len() > 2;
                    let mut inputs = if k == 0 {
                        vec![f(k), rhs(i)]
                    } else {
                        vec![f(k), cx.b(id, &[k - 1, 0, i])]
                    };
                    if scale {
                        inputs.push(magnitudes());
                    }
                    cx.one(panel(Some(k as usize), false, scale), inputs)
                }
                LuStep::Backward | LuStep::Probe => {
                    let (i, j) = (idx[0], idx[2]);
                    let k = p - 1 - i;
                    let src = if i == 0 {
                        cx.b(xs[1], &[p - 1, 0, j])
                    } else {
                        cx.b(id, &[i - 1, 0, j])
                    };
                    cx.one(
                        Kernel::LuBack {
                            w,
                            step: k as usize,
                            estimate: *step == LuStep::Probe,
                        },
                        vec![f(k), src],
                    )
                }
                LuStep::Solution => {
                    let j = idx.get(1).copied().unwrap_or(0);
                    // [forward, backward] (backward only when p > 1) of y, then of the
                    // probe, then the probe.
                    let chain = if p > 1 { 2 } else { 1 };
                    let last = |versions: &[NodeId], j: u64| match versions {
                        [_, back] => cx.b(*back, &[p - 2, 0, j]),
                        _ => cx.b(versions[0], &[p - 1, 0, j]),
                    };
                    let (y, probe) = xs[1..].split_at(chain);
                    let inputs = vec![
                        f(0),
                        last(y, j),
                        last(&probe[..chain], 0),
                        cx.b(probe[chain], &[0, 0]),
                    ];
                    cx.one(
                        Kernel::LuBack {
                            w,
                            step: 0,
                            estimate: true,
                        },
                        inputs,
                    )
                }
                LuStep::Det(output) => cx.one(
                    Kernel::LuDet {
                        w,
                        step: idx[0] as usize,
                        output,
                    },
                    vec![f(idx[0]), magnitudes()],
                ),
            }
        }
        NodeOp::Dense { kernel, xs } => {
            cx.one(kernel.clone(), xs.iter().map(|&x| cx.only(x)).collect())
        }
        _ => unreachable!("routed here by tasks::BlockWork::work_for"),
    }
}
