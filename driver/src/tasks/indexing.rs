//! Block work of assignment ([`NodeOp::Put`]): a block the index touches is x's block with
//! v's elements set; one it does not touch is x's own ([`untouched`]).

use std::collections::HashMap;

use super::*;
use crate::graph::AxisSel;

/// Per axis, the picks of `sel` inside block `idx` of an array blocked as `m`: (position
/// in the block, index into the selection).
fn picks(sel: &[AxisSel], m: &ArrayMeta, idx: &[u64]) -> Vec<Vec<(u64, u64)>> {
    let (origin, shape) = (m.block_origin(idx), m.block_shape(idx));
    sel.iter()
        .enumerate()
        .map(|(d, s)| {
            let lo = origin[d];
            s.hits(lo, lo + shape[d] as u64)
                .into_iter()
                .map(|(p, k)| (p - lo, k))
                .collect()
        })
        .collect()
}

/// Whether block `idx` of the Put node `n` keeps x's values: then readers of an
/// intermediate read x's block in place.
pub(super) fn untouched(n: &Node, idx: &[u64]) -> Option<NodeId> {
    let NodeOp::Put { x, sel, .. } = &n.op else {
        return None;
    };
    let (origin, shape) = (n.meta.block_origin(idx), n.meta.block_shape(idx));
    let none = sel
        .iter()
        .enumerate()
        .any(|(d, s)| s.hits(origin[d], origin[d] + shape[d] as u64).is_empty());
    none.then_some(*x)
}

pub(super) fn work(cx: &Out) -> Option<Work> {
    let NodeOp::Put { x, v, sel } = &cx.n.op else {
        return None;
    };
    let xb = cx.b(*x, cx.idx);
    let axes = picks(sel, &cx.n.meta, cx.idx);
    if axes.iter().any(Vec::is_empty) {
        // Untouched: an intermediate's readers read x's block; a stored array copies it.
        return cx.n.persist.then(|| {
            let kernel = Kernel::Put {
                axes: vec![vec![]; axes.len()],
                grid: vec![0; axes.len()],
            };
            Work::One(BlockTask {
                kernel,
                inputs: vec![xb],
                output: cx.output,
            })
        });
    }
    let vm = cx.meta(*v);
    // Per axis: v's blocks in order of first use, and each pick's (block, index) in v.
    let mut blocks: Vec<Vec<u64>> = Vec::new();
    let mut put: Vec<Vec<(u64, u32, u64)>> = Vec::new();
    for (d, a) in axes.iter().enumerate() {
        let mut seen: HashMap<u64, u32> = HashMap::new();
        let mut bl = Vec::new();
        let along = a
            .iter()
            .map(|&(p, k)| {
                // A broadcast axis of v (length 1) gives every pick its one element.
                let k = if vm.shape[d] == 1 { 0 } else { k };
                let b = k / vm.block[d];
                let slot = *seen.entry(b).or_insert_with(|| {
                    bl.push(b);
                    (bl.len() - 1) as u32
                });
                (p, slot, k % vm.block[d])
            })
            .collect();
        blocks.push(bl);
        put.push(along);
    }
    let grid: Vec<u64> = blocks.iter().map(|b| b.len() as u64).collect();
    let mut inputs = vec![xb];
    for lin in 0..grid.iter().product::<u64>() {
        let pick = unravel(lin, &grid);
        let bi: Vec<u64> = pick
            .iter()
            .enumerate()
            .map(|(d, &i)| blocks[d][i as usize])
            .collect();
        inputs.push(cx.b(*v, &bi));
    }
    cx.one(
        Kernel::Put {
            axes: put,
            grid: grid.iter().map(|&g| g as u32).collect(),
        },
        inputs,
    )
}
