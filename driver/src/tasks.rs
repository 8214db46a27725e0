//! From the array graph to block tasks, and from block tasks to batches (invocations).

use std::collections::HashMap;

use nums_layout::StoreSpec;
use nums_layout::batch::{ArrayRef, Batch, BlockRef, Kernel, Task};

use crate::graph::{Graph, NodeId, NodeOp};

/// One block of one node.
pub type BlockId = (NodeId, Vec<u64>);

/// A kernel that makes one output block from input blocks.
#[derive(Debug, Clone)]
pub struct BlockTask {
    pub kernel: Kernel,
    pub inputs: Vec<BlockId>,
    pub output: BlockId,
}

/// Where a node's array lives under the store root.
pub fn node_path(job: &str, g: &Graph, id: NodeId) -> String {
    match &g.nodes[id].name {
        Some(n) => format!("{job}/{n}"),
        None => format!("{job}/_tmp/n{id}"),
    }
}

/// All block tasks of the graph, in topological order (imports have none: the driver
/// writes their blocks).
pub fn block_tasks(g: &Graph) -> Vec<BlockTask> {
    let mut out = Vec::new();
    for n in &g.nodes {
        for idx in n.meta.blocks() {
            if let Some(t) = task_for(g, n.id, &idx) {
                out.push(t);
            }
        }
    }
    out
}

fn task_for(g: &Graph, id: NodeId, idx: &[u64]) -> Option<BlockTask> {
    let n = &g.nodes[id];
    let meta = |x: NodeId| &g.nodes[x].meta;
    let same = |x: NodeId| vec![(x, idx.to_vec())];
    let (kernel, inputs) = match &n.op {
        NodeOp::ImportNpy { .. } | NodeOp::ImportZarr { .. } => return None,
        NodeOp::Random { dist, seed } => (
            Kernel::Random {
                dist: *dist,
                seed: *seed,
            },
            vec![],
        ),
        NodeOp::Fill { value } => (Kernel::Fill { value: *value }, vec![]),
        NodeOp::Unary { op, x } => (Kernel::Unary { op: *op }, same(*x)),
        NodeOp::Scalar {
            op,
            x,
            value,
            scalar_left,
        } => (
            Kernel::Scalar {
                op: *op,
                value: *value,
                scalar_left: *scalar_left,
            },
            same(*x),
        ),
        NodeOp::Binary { op, a, b } => (
            Kernel::Binary { op: *op },
            vec![(*a, idx.to_vec()), (*b, idx.to_vec())],
        ),
        NodeOp::Transpose { x } => (
            Kernel::Transpose,
            vec![(*x, idx.iter().rev().copied().collect())],
        ),
        NodeOp::Matmul { a, b } => {
            let (ma, mb) = (meta(*a), meta(*b));
            let k_blocks = *ma.grid().last().expect("matmul operand has an axis");
            let mut inputs = Vec::new();
            for k in 0..k_blocks {
                let ai = match ma.ndim() {
                    2 => vec![idx[0], k],
                    _ => vec![k],
                };
                let bi = match (ma.ndim(), mb.ndim()) {
                    (2, 2) => vec![k, idx[1]],
                    (1, 2) => vec![k, idx[0]],
                    _ => vec![k],
                };
                inputs.push((*a, ai));
                inputs.push((*b, bi));
            }
            (Kernel::Matmul, inputs)
        }
        NodeOp::Sum { x, axes } => {
            let mx = meta(*x);
            let kept: Vec<usize> = (0..mx.ndim()).filter(|d| !axes.contains(d)).collect();
            let inputs = mx
                .blocks()
                .into_iter()
                .filter(|b| kept.iter().zip(idx).all(|(&d, &i)| b[d] == i))
                .map(|b| (*x, b))
                .collect();
            (Kernel::Sum { axes: axes.clone() }, inputs)
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
            for b in mx.blocks() {
                if b.iter()
                    .zip(&ranges)
                    .all(|(&i, &(lo, hi))| lo <= i && i <= hi)
                {
                    let o = mx.block_origin(&b);
                    offsets.push(
                        o.iter()
                            .zip(&origin)
                            .map(|(&a, &c)| a as i64 - c as i64)
                            .collect(),
                    );
                    inputs.push((*x, b));
                }
            }
            (Kernel::Assemble { offsets }, inputs)
        }
    };
    Some(BlockTask {
        kernel,
        inputs,
        output: (id, idx.to_vec()),
    })
}

/// A batch ready to send, with the batches it waits for.
#[derive(Debug, Clone)]
pub struct PlannedBatch {
    pub batch: Batch,
    pub deps: Vec<usize>,
}

/// The naive schedule: one task per invocation, every input read from the store and every
/// output written to it (as Cubed and PyWren do). The baseline LSHS is measured against.
pub fn naive(g: &Graph, tasks: &[BlockTask], job: &str, store: &StoreSpec) -> Vec<PlannedBatch> {
    let producer: HashMap<&BlockId, usize> = tasks
        .iter()
        .enumerate()
        .map(|(i, t)| (&t.output, i))
        .collect();
    tasks
        .iter()
        .map(|t| {
            let mut arrays: Vec<ArrayRef> = Vec::new();
            let mut slot: HashMap<NodeId, u32> = HashMap::new();
            let mut bref = |(node, idx): &BlockId| {
                let a = *slot.entry(*node).or_insert_with(|| {
                    arrays.push(ArrayRef {
                        path: node_path(job, g, *node),
                        meta: g.nodes[*node].meta.clone(),
                    });
                    (arrays.len() - 1) as u32
                });
                BlockRef {
                    array: a,
                    index: idx.clone(),
                }
            };
            let inputs: Vec<BlockRef> = t.inputs.iter().map(&mut bref).collect();
            let output = bref(&t.output);
            let mut deps: Vec<usize> = t
                .inputs
                .iter()
                .filter_map(|b| producer.get(b).copied())
                .collect();
            deps.sort_unstable();
            deps.dedup();
            PlannedBatch {
                batch: Batch {
                    store: store.clone(),
                    job_prefix: job.to_string(),
                    arrays,
                    tasks: vec![Task {
                        kernel: t.kernel.clone(),
                        inputs,
                        output,
                        store_output: true,
                    }],
                },
                deps,
            }
        })
        .collect()
}
