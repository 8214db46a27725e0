//! From the array graph to block work: for every output block either one task, or a
//! reduction (a sum of terms: matmul pairs or blocks summed over axes) that a scheduler
//! splits into partial sums and a combining task. Schedulers live in `sched`.

use nums_layout::batch::Kernel;

use crate::graph::{Graph, NodeId, NodeOp};

/// A block in the plan: block `index` of `node`, or its partial sum number `part` (> 0).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BlockId {
    pub node: NodeId,
    pub index: Vec<u64>,
    pub part: u32,
}

impl BlockId {
    pub fn new(node: NodeId, index: Vec<u64>) -> BlockId {
        BlockId {
            node,
            index,
            part: 0,
        }
    }

    /// Bytes of this block in memory (partial results have their node's dtype).
    pub fn nbytes(&self, g: &Graph) -> u64 {
        g.nodes[self.node].meta.block_nbytes(&self.index)
    }
}

/// A kernel that makes one output block from input blocks.
#[derive(Debug, Clone)]
pub struct BlockTask {
    pub kernel: Kernel,
    pub inputs: Vec<BlockId>,
    pub output: BlockId,
}

/// What one output block needs.
#[derive(Debug, Clone)]
pub enum Work {
    One(BlockTask),
    /// `output` is the sum over `terms` of `kernel(term)`; any grouping of the terms into
    /// partial sums gives the same value up to rounding.
    Reduce {
        kernel: Kernel,
        terms: Vec<Vec<BlockId>>,
        output: BlockId,
    },
}

impl Work {
    pub fn output(&self) -> &BlockId {
        match self {
            Work::One(t) => &t.output,
            Work::Reduce { output, .. } => output,
        }
    }

    /// The tasks for a grouping of a reduction's terms (groups in term order); a single
    /// group is one task. Partial k of the output is `part = k + 1`; they add up in order.
    pub fn expand(&self, groups: &[Vec<usize>]) -> Vec<BlockTask> {
        match self {
            Work::One(t) => vec![t.clone()],
            Work::Reduce {
                kernel,
                terms,
                output,
            } => {
                let task = |ids: &[usize], out: BlockId| BlockTask {
                    kernel: kernel.clone(),
                    inputs: ids.iter().flat_map(|&i| terms[i].iter().cloned()).collect(),
                    output: out,
                };
                if groups.len() == 1 {
                    return vec![task(&groups[0], output.clone())];
                }
                let mut out: Vec<BlockTask> = groups
                    .iter()
                    .enumerate()
                    .map(|(k, g)| {
                        task(
                            g,
                            BlockId {
                                part: k as u32 + 1,
                                ..output.clone()
                            },
                        )
                    })
                    .collect();
                let partials = out.iter().map(|t| t.output.clone()).collect();
                out.push(BlockTask {
                    kernel: kernel.combiner(),
                    inputs: partials,
                    output: output.clone(),
                });
                out
            }
        }
    }

    /// Like [`Work::expand`], but each group is a chain that adds one term at a time
    /// (term, then running sum), so a group holds one term's blocks at once and its terms
    /// can be computed as their operands appear. Each task comes with its group; the task
    /// that combines the groups' sums has none.
    pub fn expand_chained(&self, groups: &[Vec<usize>]) -> Vec<(BlockTask, Option<usize>)> {
        let Work::Reduce {
            kernel,
            terms,
            output,
        } = self
        else {
            return self
                .expand(groups)
                .into_iter()
                .map(|t| (t, Some(0)))
                .collect();
        };
        let mut part = 0;
        let mut next = |out: &BlockId| {
            part += 1;
            BlockId {
                part,
                ..out.clone()
            }
        };
        let mut out = Vec::new();
        let mut sums = Vec::new();
        for (k, g) in groups.iter().enumerate() {
            let mut acc: Option<BlockId> = None;
            for (n, &j) in g.iter().enumerate() {
                let final_step = groups.len() == 1 && n == g.len() - 1;
                let term_out = if final_step && g.len() == 1 {
                    output.clone()
                } else {
                    next(output)
                };
                out.push((
                    BlockTask {
                        kernel: kernel.clone(),
                        inputs: terms[j].clone(),
                        output: term_out.clone(),
                    },
                    Some(k),
                ));
                acc = Some(match acc {
                    None => term_out,
                    Some(a) => {
                        let sum_out = if final_step {
                            output.clone()
                        } else {
                            next(output)
                        };
                        out.push((
                            BlockTask {
                                kernel: kernel.combiner(),
                                inputs: vec![a, term_out],
                                output: sum_out.clone(),
                            },
                            Some(k),
                        ));
                        sum_out
                    }
                });
            }
            sums.push(acc.expect("a group has terms"));
        }
        if groups.len() > 1 {
            out.push((
                BlockTask {
                    kernel: kernel.combiner(),
                    inputs: sums,
                    output: output.clone(),
                },
                None,
            ));
        }
        out
    }
}

/// Where a block's array lives under the store root while run `prefix` (`<job>/_runs/<run>`,
/// see `crate::runs`) makes it: the arrays the run keeps (outputs, imports) are staged
/// under `<prefix>/out/<name>` until the run commits them to `<job>/<name>`; intermediates
/// live under `<prefix>/tmp/`; inputs read in place stay where they are.
pub fn array_path(prefix: &str, g: &Graph, b: &BlockId) -> String {
    if let NodeOp::InPlace { path, .. } = &g.nodes[b.node].op {
        return path.clone();
    }
    match (g.nodes[b.node].persisted_name(), b.part) {
        (Some(n), 0) => format!("{prefix}/out/{n}"),
        (None, 0) => format!("{prefix}/tmp/n{}", b.node),
        (_, p) => format!("{prefix}/tmp/n{}p{p}", b.node),
    }
}

/// Whether a block's array is a job intermediate (written only where another invocation
/// needs it, removed when the job ends): not an output, an import or an input read in place.
pub fn is_intermediate(g: &Graph, b: &BlockId) -> bool {
    !matches!(g.nodes[b.node].op, NodeOp::InPlace { .. })
        && (b.part > 0 || g.nodes[b.node].persisted_name().is_none())
}

/// Where a node's array lives under the store root during run `prefix`.
pub fn node_path(prefix: &str, g: &Graph, id: NodeId) -> String {
    array_path(prefix, g, &BlockId::new(id, vec![]))
}

/// The work of every block of the graph, in topological order (imports have none: the
/// driver writes their blocks).
pub fn block_work(g: &Graph) -> Vec<Work> {
    // Only what the stored arrays need is computed: a named array no output uses, or a
    // transpose that a contraction reads through, makes no tasks.
    let mut needed = vec![false; g.nodes.len()];
    for n in g.nodes.iter().rev() {
        if n.persist || needed[n.id] {
            needed[n.id] = true;
            for i in n.op.inputs() {
                needed[i] = true;
            }
        }
    }
    let mut out = Vec::new();
    for n in g.nodes.iter().filter(|n| needed[n.id]) {
        for idx in n.meta.blocks() {
            if let Some(w) = work_for(g, n.id, &idx) {
                out.push(w);
            }
        }
    }
    out
}

fn work_for(g: &Graph, id: NodeId, idx: &[u64]) -> Option<Work> {
    let n = &g.nodes[id];
    let meta = |x: NodeId| &g.nodes[x].meta;
    let b = |x: NodeId, i: Vec<u64>| BlockId::new(x, i);
    let same = |x: NodeId| vec![b(x, idx.to_vec())];
    let output = b(id, idx.to_vec());
    let one = |kernel: Kernel, inputs: Vec<BlockId>| {
        Some(Work::One(BlockTask {
            kernel,
            inputs,
            output: output.clone(),
        }))
    };
    // A broadcast operand's block along an axis it does not span is its block 0.
    let bcast = |x: NodeId| {
        let m = meta(x);
        let off = idx.len() - m.ndim();
        b(
            x,
            (0..m.ndim())
                .map(|d| if m.shape[d] == 1 { 0 } else { idx[d + off] })
                .collect(),
        )
    };
    match &n.op {
        NodeOp::ImportNpy { .. }
        | NodeOp::ImportCsv { .. }
        | NodeOp::ImportZarr { .. }
        | NodeOp::InPlace { .. } => None,
        NodeOp::Random { dist, seed } => one(
            Kernel::Random {
                dist: *dist,
                seed: *seed,
            },
            vec![],
        ),
        NodeOp::Fill { value } => one(Kernel::Fill { value: *value }, vec![]),
        NodeOp::Iota {
            axis,
            start,
            step,
            last,
        } => one(
            Kernel::Iota {
                axis: *axis,
                start: *start,
                step: *step,
                last: *last,
            },
            vec![],
        ),
        NodeOp::Eye { k } => one(Kernel::Eye { k: *k }, vec![]),
        NodeOp::Unary { op, x } => one(Kernel::Unary { op: *op }, same(*x)),
        NodeOp::Scalar {
            op,
            x,
            value,
            scalar_left,
        } => one(
            Kernel::Scalar {
                op: *op,
                value: *value,
                scalar_left: *scalar_left,
            },
            same(*x),
        ),
        NodeOp::Binary { op, a, b: y } => {
            one(Kernel::Binary { op: *op }, vec![bcast(*a), bcast(*y)])
        }
        NodeOp::Where { c, a, b: y } => one(Kernel::Where, vec![bcast(*c), bcast(*a), bcast(*y)]),
        NodeOp::Transpose { x, perm } => {
            let mut src = vec![0; perm.len()];
            for (i, &p) in perm.iter().enumerate() {
                src[p] = idx[i];
            }
            one(Kernel::Transpose { perm: perm.clone() }, vec![b(*x, src)])
        }
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
                        grid.push((c, meta(x).grid()[d]));
                    }
                }
            }
            let sizes: Vec<u64> = grid.iter().map(|(_, s)| *s).collect();
            let count: u64 = sizes.iter().product();
            let terms = (0..count)
                .map(|t| {
                    let ci = nums_layout::meta::unravel(t, &sizes);
                    let at = |c: char| match out.iter().position(|&o| o == c) {
                        Some(p) => idx[p],
                        None => ci[grid.iter().position(|(g, _)| *g == c).expect("letter")],
                    };
                    ins.iter()
                        .zip(xs)
                        .map(|(l, &x)| b(x, l.iter().map(|&c| at(c)).collect()))
                        .collect()
                })
                .collect();
            Some(Work::Reduce {
                kernel: Kernel::Einsum {
                    subscripts: subscripts.clone(),
                    operands: xs.len(),
                },
                terms,
                output,
            })
        }
        NodeOp::Reduce { x, op, axes } => {
            let mx = meta(*x);
            let kept: Vec<usize> = (0..mx.ndim()).filter(|d| !axes.contains(d)).collect();
            let terms = mx
                .blocks()
                .into_iter()
                .filter(|bi| kept.iter().zip(idx).all(|(&d, &i)| bi[d] == i))
                .map(|bi| vec![b(*x, bi)])
                .collect();
            Some(Work::Reduce {
                kernel: Kernel::Reduce {
                    op: *op,
                    axes: axes.clone(),
                },
                terms,
                output,
            })
        }
        NodeOp::Rechunk { x } => gather(
            g,
            id,
            idx,
            &[(*x, vec![0; n.meta.ndim()])],
            &n.meta
                .block_origin(idx)
                .iter()
                .map(|&o| o as i64)
                .collect::<Vec<_>>(),
            &[],
        ),
        NodeOp::Concat { xs, axis } => {
            let mut at = 0i64;
            let sources: Vec<(NodeId, Vec<i64>)> = xs
                .iter()
                .map(|&x| {
                    let mut o = vec![0; n.meta.ndim()];
                    o[*axis] = at;
                    at += meta(x).shape[*axis] as i64;
                    (x, o)
                })
                .collect();
            let first: Vec<i64> = n.meta.block_origin(idx).iter().map(|&o| o as i64).collect();
            gather(g, id, idx, &sources, &first, &[])
        }
        NodeOp::Slice { x, start, step } => {
            let first: Vec<i64> = n
                .meta
                .block_origin(idx)
                .iter()
                .zip(start.iter().zip(step))
                .map(|(&o, (&s, &st))| s + o as i64 * st)
                .collect();
            gather(g, id, idx, &[(*x, vec![0; n.meta.ndim()])], &first, step)
        }
        NodeOp::Take { x, axis, indices } => {
            let mx = meta(*x);
            let o = n.meta.block_origin(idx)[*axis] as usize;
            let l = n.meta.block_shape(idx)[*axis];
            let xb = mx.block[*axis];
            let mut inputs: Vec<BlockId> = Vec::new();
            let mut picks = Vec::new();
            for &i in &indices[o..o + l] {
                let mut bi = idx.to_vec();
                bi[*axis] = i / xb;
                let k = match inputs.iter().position(|b| b.index == bi) {
                    Some(k) => k,
                    None => {
                        inputs.push(b(*x, bi));
                        inputs.len() - 1
                    }
                };
                picks.push((k as u32, i % xb));
            }
            one(Kernel::Take { axis: *axis, picks }, inputs)
        }
        NodeOp::Reshape { x } => {
            let (mx, mo) = (meta(*x), &n.meta);
            let non_unit = |m: &nums_layout::ArrayMeta| -> Vec<(u64, u64)> {
                m.shape
                    .iter()
                    .zip(&m.block)
                    .filter(|(s, _)| **s != 1)
                    .map(|(s, b)| (*s, *b))
                    .collect()
            };
            if non_unit(mx) == non_unit(mo) {
                // Length-1 axes come or go: the block with the same non-unit indices.
                let mut ids = mo
                    .shape
                    .iter()
                    .zip(idx)
                    .filter(|(s, _)| **s != 1)
                    .map(|(_, i)| *i);
                let src: Vec<u64> = mx
                    .shape
                    .iter()
                    .map(|&s| if s == 1 { 0 } else { ids.next().expect("same") })
                    .collect();
                let len = mx.block_shape(&src).iter().product::<usize>() as u64;
                return one(
                    Kernel::Reshape {
                        ranges: vec![(0, len)],
                    },
                    vec![b(*x, src)],
                );
            }
            // Both blocked along axis 0 only: blocks are runs of the flat C order.
            let row = |m: &nums_layout::ArrayMeta| m.shape.iter().skip(1).product::<u64>().max(1);
            let lo = mo.block_origin(idx).first().copied().unwrap_or(0) * row(mo);
            let hi = lo + mo.block_shape(idx).iter().product::<usize>() as u64;
            let per = mx.block.first().copied().unwrap_or(1) * row(mx);
            let mut inputs = Vec::new();
            let mut ranges = Vec::new();
            for k in lo / per..hi.div_ceil(per) {
                let (a, z) = (k * per, ((k + 1) * per).min(mx.len()));
                let (s, e) = (lo.max(a), hi.min(z));
                if s < e {
                    let mut bi = vec![0; mx.ndim()];
                    if let Some(b0) = bi.first_mut() {
                        *b0 = k;
                    }
                    inputs.push(b(*x, bi));
                    ranges.push((s - a, e - a));
                }
            }
            one(Kernel::Reshape { ranges }, inputs)
        }
    }
}

/// The Assemble task of output block `idx`: the blocks of `sources` (each placed at its
/// origin in one frame) that hold elements `first + p * step` (step empty: 1).
fn gather(
    g: &Graph,
    id: NodeId,
    idx: &[u64],
    sources: &[(NodeId, Vec<i64>)],
    first: &[i64],
    step: &[i64],
) -> Option<Work> {
    let shape = g.nodes[id].meta.block_shape(idx);
    let mut inputs = Vec::new();
    let mut offsets = Vec::new();
    for (x, at) in sources {
        let mx = &g.nodes[*x].meta;
        // Per axis, the source blocks that hold an element of the output block.
        let per_axis: Vec<Vec<u64>> = (0..mx.ndim())
            .map(|d| {
                let s = step.get(d).copied().unwrap_or(1);
                (0..mx.grid()[d])
                    .filter(|&k| {
                        let o = at[d] + (k * mx.block[d]) as i64 - first[d];
                        let len = (mx.shape[d].min((k + 1) * mx.block[d]) - k * mx.block[d]) as i64;
                        nums_layout::meta::strided_overlap(o, len, s, shape[d] as i64).is_some()
                    })
                    .collect()
            })
            .collect();
        let counts: Vec<u64> = per_axis.iter().map(|v| v.len() as u64).collect();
        for lin in 0..counts.iter().product::<u64>() {
            let pick = nums_layout::meta::unravel(lin, &counts);
            let bi: Vec<u64> = pick
                .iter()
                .enumerate()
                .map(|(d, &i)| per_axis[d][i as usize])
                .collect();
            offsets.push(
                (0..mx.ndim())
                    .map(|d| at[d] + (bi[d] * mx.block[d]) as i64 - first[d])
                    .collect(),
            );
            inputs.push(BlockId::new(*x, bi));
        }
    }
    let output = BlockId::new(id, idx.to_vec());
    Some(Work::One(BlockTask {
        kernel: Kernel::Assemble {
            offsets,
            step: step.to_vec(),
        },
        inputs,
        output,
    }))
}
