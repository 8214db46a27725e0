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

    /// Bytes of this block in memory (partial sums are float64 like their node's block).
    pub fn nbytes(&self, g: &Graph) -> u64 {
        let m = &g.nodes[self.node].meta;
        let elems: u64 = m.block_shape(&self.index).iter().product::<usize>() as u64;
        elems
            * if self.part > 0 {
                8
            } else {
                m.dtype.size() as u64
            }
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
                    kernel: Kernel::Sum { axes: vec![] },
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
                                kernel: Kernel::Sum { axes: vec![] },
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
                    kernel: Kernel::Sum { axes: vec![] },
                    inputs: sums,
                    output: output.clone(),
                },
                None,
            ));
        }
        out
    }
}

/// Where a block's array lives under the store root.
pub fn array_path(job: &str, g: &Graph, b: &BlockId) -> String {
    if let NodeOp::Stored { path } = &g.nodes[b.node].op {
        return path.clone();
    }
    match (g.nodes[b.node].stored_name(), b.part) {
        (Some(n), 0) => format!("{job}/{n}"),
        (None, 0) => format!("{job}/_tmp/n{}", b.node),
        (_, p) => format!("{job}/_tmp/n{}p{p}", b.node),
    }
}

/// Where a node's array lives under the store root.
pub fn node_path(job: &str, g: &Graph, id: NodeId) -> String {
    array_path(job, g, &BlockId::new(id, vec![]))
}

/// The work of every block of the graph, in topological order (imports have none: the
/// driver writes their blocks).
pub fn block_work(g: &Graph) -> Vec<Work> {
    let mut out = Vec::new();
    for n in &g.nodes {
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
    match &n.op {
        NodeOp::ImportNpy { .. } | NodeOp::ImportZarr { .. } | NodeOp::Stored { .. } => None,
        NodeOp::Random { dist, seed } => one(
            Kernel::Random {
                dist: *dist,
                seed: *seed,
            },
            vec![],
        ),
        NodeOp::Fill { value } => one(Kernel::Fill { value: *value }, vec![]),
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
            // A broadcast operand's block along an axis it does not span is its block 0.
            let of = |x: NodeId| {
                let m = meta(x);
                let off = idx.len() - m.ndim();
                b(
                    x,
                    (0..m.ndim())
                        .map(|d| if m.shape[d] == 1 { 0 } else { idx[d + off] })
                        .collect(),
                )
            };
            one(Kernel::Binary { op: *op }, vec![of(*a), of(*y)])
        }
        NodeOp::ExpandDims { x, new_axes } => {
            let src = idx
                .iter()
                .enumerate()
                .filter(|(k, _)| !new_axes.contains(k))
                .map(|(_, &i)| i)
                .collect();
            one(Kernel::Reshape, vec![b(*x, src)])
        }
        NodeOp::Transpose { x } => one(
            Kernel::Transpose,
            vec![b(*x, idx.iter().rev().copied().collect())],
        ),
        NodeOp::Matmul { a, b: y } => {
            let (ma, mb) = (meta(*a), meta(*y));
            let k_blocks = *ma.grid().last().expect("matmul operand has an axis");
            let terms = (0..k_blocks)
                .map(|k| {
                    let ai = match ma.ndim() {
                        2 => vec![idx[0], k],
                        _ => vec![k],
                    };
                    let bi = match (ma.ndim(), mb.ndim()) {
                        (2, 2) => vec![k, idx[1]],
                        (1, 2) => vec![k, idx[0]],
                        _ => vec![k],
                    };
                    vec![b(*a, ai), b(*y, bi)]
                })
                .collect();
            Some(Work::Reduce {
                kernel: Kernel::Matmul,
                terms,
                output,
            })
        }
        NodeOp::Sum { x, axes } => {
            let mx = meta(*x);
            let kept: Vec<usize> = (0..mx.ndim()).filter(|d| !axes.contains(d)).collect();
            let terms = mx
                .blocks()
                .into_iter()
                .filter(|bi| kept.iter().zip(idx).all(|(&d, &i)| bi[d] == i))
                .map(|bi| vec![b(*x, bi)])
                .collect();
            Some(Work::Reduce {
                kernel: Kernel::Sum { axes: axes.clone() },
                terms,
                output,
            })
        }
        NodeOp::Rechunk { x } => {
            let (mx, mo) = (meta(*x), &n.meta);
            let origin = mo.block_origin(idx);
            let shape = mo.block_shape(idx);
            // Input blocks overlapping [origin, origin + shape) along every axis.
            let ranges: Vec<(u64, u64)> = (0..mo.ndim())
                .map(|d| {
                    (
                        origin[d] / mx.block[d],
                        (origin[d] + shape[d] as u64 - 1) / mx.block[d],
                    )
                })
                .collect();
            let mut inputs = Vec::new();
            let mut offsets = Vec::new();
            for bi in mx.blocks() {
                if bi
                    .iter()
                    .zip(&ranges)
                    .all(|(&i, &(lo, hi))| lo <= i && i <= hi)
                {
                    let o = mx.block_origin(&bi);
                    offsets.push(
                        o.iter()
                            .zip(&origin)
                            .map(|(&a, &c)| a as i64 - c as i64)
                            .collect(),
                    );
                    inputs.push(b(*x, bi));
                }
            }
            one(Kernel::Assemble { offsets }, inputs)
        }
    }
}
