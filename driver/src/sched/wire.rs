//! From cut batches to what is sent: each batch's members in execution order, what it
//! waits for, reads and writes, and (when it is sent) its wire form.
//!
//! A plan keeps its tasks in the compact tables of placement; [`Wire::batch`] writes one
//! batch's [`Batch`] on demand, so a plan's memory grows with its tasks by tens of bytes
//! each, not by the size of their JSON.

use std::cmp::Reverse;
use std::fmt;

use nums_layout::batch::{ArrayRef, BlockRef, Task};

use super::batch::Cut;
use super::*;
use crate::graph::NodeOp;
use crate::tasks::is_intermediate;

/// Everything needed to write a plan's batches.
pub(crate) struct Wire {
    g: Graph,
    prefix: String,
    store: StoreSpec,
    /// The invocation's memory limit in bytes: what a batch projects below it is its
    /// function's read-ahead and write-behind budget.
    pub(super) limit: u64,
    grids: Vec<Vec<u64>>,
    blocks: Blocks,
    tasks: Tasks,
    batch_of: Vec<u32>,
    /// Whether each task's output goes to the store (where it is not a copy).
    write: Vec<bool>,
    /// Batch b runs `members[mstart[b]..mstart[b + 1]]`: its copies, then its own tasks.
    mstart: Vec<u64>,
    members: Vec<u32>,
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Wire({} tasks in {} batches)",
            self.tasks.len(),
            self.mstart.len() - 1
        )
    }
}

impl Wire {
    pub(super) fn members(&self, b: usize) -> &[u32] {
        &self.members[self.mstart[b] as usize..self.mstart[b + 1] as usize]
    }

    /// Batch `b` in the wire format.
    pub(super) fn batch(&self, b: usize) -> Batch {
        let g = &self.g;
        let mut arrays: Vec<ArrayRef> = Vec::new();
        let mut slot: HashMap<(usize, u32), u32> = HashMap::new();
        let mut bref = |id: Bid| {
            let b = self.blocks.block(id);
            let a = *slot.entry((b.node, b.part)).or_insert_with(|| {
                let op = &g.nodes[b.node].op;
                arrays.push(ArrayRef {
                    path: array_path(&self.prefix, g, &b),
                    meta: g.nodes[b.node].meta.clone(),
                    read_only: matches!(op, NodeOp::InPlace { .. }),
                    sparse: matches!(op, NodeOp::InPlace { sparse: true, .. }),
                    intermediate: is_intermediate(g, &b),
                    foreign: match op {
                        NodeOp::InPlace {
                            foreign: Some(f), ..
                        } => Some((**f).clone()),
                        _ => None,
                    },
                });
                (arrays.len() - 1) as u32
            });
            BlockRef {
                array: a,
                index: nums_layout::meta::unravel(b.block, &self.grids[b.node]),
            }
        };
        let mut tasks = Vec::with_capacity(self.members(b).len());
        for &i in self.members(b) {
            let i = i as usize;
            let copy = self.batch_of[i] as usize != b;
            tasks.push(Task {
                kernel: self.tasks.kernels[self.tasks.kernel[i] as usize].clone(),
                inputs: self.tasks.inputs(i).iter().map(|&x| bref(x)).collect(),
                output: bref(self.tasks.output[i]),
                write_output: !copy && self.write[i],
            });
        }
        Batch {
            store: self.store.clone(),
            job_prefix: self.prefix.clone(),
            arrays,
            tasks,
            prefetch_budget: 0,
        }
    }

    pub(super) fn intermediate_bytes(&self) -> u64 {
        (0..self.tasks.len())
            .filter(|&i| self.write[i])
            .map(|i| self.tasks.output[i])
            .filter(|&o| is_intermediate(&self.g, &self.blocks.block(o)))
            .map(|o| self.blocks.nbytes[o as usize])
            .sum()
    }
}

/// The plan of cut batches: members, dependencies, store traffic, slot loads.
pub(super) fn write(cx: &Ctx, kind: SchedulerKind, tasks: Tasks, blocks: Blocks, cut: Cut) -> Plan {
    let g = cx.g;
    let n = tasks.len();
    let nb = cut.len();
    // Members: each batch's copies (later groups first, each group in task order), then
    // its own tasks in order.
    let mut copies = cut.copies;
    copies.sort_unstable_by_key(|&(b, group, p)| (b, Reverse(group), p));
    let mut mstart = vec![0u64; nb + 1];
    for &(b, _, _) in &copies {
        mstart[b as usize + 1] += 1;
    }
    for &b in &cut.batch_of {
        mstart[b as usize + 1] += 1;
    }
    for b in 0..nb {
        mstart[b + 1] += mstart[b];
    }
    let mut members = vec![0u32; mstart[nb] as usize];
    let mut fill = mstart.clone();
    for &(b, _, p) in &copies {
        members[fill[b as usize] as usize] = p;
        fill[b as usize] += 1;
    }
    drop(copies);
    for (i, &b) in cut.batch_of.iter().enumerate() {
        members[fill[b as usize] as usize] = i as u32;
        fill[b as usize] += 1;
    }
    drop(fill);
    let of = |b: usize| &members[mstart[b] as usize..mstart[b + 1] as usize];

    // Which outputs leave their batch: the job's outputs, and blocks another batch reads.
    let producer = tasks.producers(blocks.len());
    let mut here = vec![NONE; n];
    let mut write = vec![false; n];
    for b in 0..nb {
        for &m in of(b) {
            here[m as usize] = b as u32;
        }
        for &m in of(b) {
            for &x in tasks.inputs(m as usize) {
                let p = producer[x as usize];
                if p != NONE && here[p as usize] != b as u32 {
                    write[p as usize] = true;
                }
            }
        }
    }
    for (w, &o) in write.iter_mut().zip(&tasks.output) {
        let o = blocks.block(o);
        *w |= o.part == 0 && g.nodes[o.node].persist;
    }
    let mut fetched = vec![NONE; blocks.len()];
    struct Stats {
        deps: Vec<usize>,
        bytes_in: u64,
        first_read: u64,
        memory_hits: u64,
        bytes_out: u64,
        gets: u64,
        puts: u64,
        flops: f64,
        streamed: u64,
        made: u64,
        evals: u64,
        parsed: u64,
    }
    let grids: Vec<Vec<u64>> = g.nodes.iter().map(|n| n.meta.grid()).collect();
    let shape = |x: u32| {
        let id = blocks.block(x);
        let meta = &g.nodes[id.node].meta;
        meta.block_shape(&nums_layout::meta::unravel(id.block, &grids[id.node]))
    };
    let mut stats = Vec::with_capacity(nb);
    for b in 0..nb {
        for &m in of(b) {
            here[m as usize] = b as u32;
        }
        let mut s = Stats {
            deps: Vec::new(),
            bytes_in: 0,
            first_read: 0,
            memory_hits: 0,
            bytes_out: 0,
            gets: 0,
            puts: 0,
            flops: 0.0,
            streamed: 0,
            made: 0,
            evals: 0,
            parsed: 0,
        };
        for &m in of(b) {
            let m = m as usize;
            let ins = tasks.inputs(m);
            let out = tasks.output[m];
            let work = crate::cost::task_work(
                &tasks.kernels[tasks.kernel[m] as usize],
                ins.iter().map(|&x| blocks.nbytes[x as usize]).sum(),
                blocks.nbytes[out as usize],
                |i| shape(if i < ins.len() { ins[i] } else { out }),
                ins.len(),
            );
            s.flops += work.flops;
            s.streamed += work.streamed;
            s.evals += work.evals;
            s.parsed += work.parsed;
            s.made += blocks.nbytes[out as usize];
            let before = s.bytes_in;
            for &x in tasks.inputs(m) {
                let p = producer[x as usize];
                if p != NONE && here[p as usize] == b as u32 {
                    continue;
                }
                if p != NONE {
                    s.deps.push(cut.batch_of[p as usize] as usize);
                }
                if fetched[x as usize] != b as u32 {
                    fetched[x as usize] = b as u32;
                    // A block the slot's process holds is checked (one request), not read.
                    match blocks.held_by(x) == Some(cut.slot[b] as usize) {
                        true => s.memory_hits += 1,
                        false => s.bytes_in += blocks.nbytes[x as usize],
                    }
                    s.gets += 1;
                }
            }
            if before == 0 {
                s.first_read = s.bytes_in;
            }
            if cut.batch_of[m] as usize == b && write[m] {
                s.bytes_out += blocks.nbytes[tasks.output[m] as usize];
                s.puts += 1;
            }
        }
        s.deps.sort_unstable();
        s.deps.dedup();
        s.deps.shrink_to_fit();
        stats.push(s);
    }
    drop(fetched);
    drop(here);
    let wire = Arc::new(Wire {
        g: g.clone(),
        prefix: cx.prefix.to_string(),
        store: cx.store.clone(),
        limit: cx.memory_mb << 20,
        grids,
        blocks,
        tasks,
        batch_of: cut.batch_of,
        write,
        mstart,
        members,
    });
    let batches: Vec<PlannedBatch> = stats
        .into_iter()
        .enumerate()
        .map(|(b, s)| PlannedBatch {
            deps: s.deps,
            slot: cut.slot[b] as usize,
            projected_peak: cut.peak[b],
            bytes_in: s.bytes_in,
            first_read: s.first_read,
            memory_hits: s.memory_hits,
            bytes_out: s.bytes_out,
            gets: s.gets,
            puts: s.puts,
            flops: s.flops,
            streamed: s.streamed,
            made: s.made,
            evals: s.evals,
            parsed: s.parsed,
            body: Body::Planned(wire.clone(), b as u32),
        })
        .collect();
    // What each slot will do once batched: its largest invocation's projected memory, and
    // the store bytes its invocations read and write.
    let mut loads = vec![SlotLoad::default(); cx.workers];
    for b in &batches {
        let l = &mut loads[b.slot];
        l.memory = l.memory.max(b.projected_peak);
        l.bytes_in += b.bytes_in;
        l.bytes_out += b.bytes_out;
    }
    Plan {
        scheduler: kind,
        variant: super::Variant::Streamed,
        tasks: n,
        batches,
        loads,
        wire,
    }
}
