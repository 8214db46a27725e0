//! Schedulers: from block work to batches (one batch = one invocation).
//!
//! `naive` runs one task per invocation, every input read from and every output written to
//! the store (as Cubed and PyWren do); reductions become trees of bounded fan-in.
//! `lshs` is NumS's Load Simulated Hierarchical Scheduling adapted to serverless: each
//! task goes, among the slots that hold one of its operands (and the least-loaded slot),
//! to the one that minimises max(memory) + max(bytes in) + max(bytes out) over all slots
//! after the move; reductions are summed on the slot that holds their operands first; a
//! job's named arrays land at their block-cyclic home. Each slot's tasks are then cut
//! into batches whose projected peak memory fits `memory_mb`: a block produced and
//! consumed in one batch never touches the store.

mod batch;
mod check;
mod lshs;
mod naive;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, HashSet};

use nums_layout::StoreSpec;
use nums_layout::batch::{ArrayRef, Batch, BlockRef, Task};

use crate::graph::Graph;
use crate::job::SchedulerKind;
use crate::tasks::{BlockId, BlockTask, Work, array_path};

/// New blocks up to this size are made again in each batch that needs them rather than
/// read from the store (a random or constant block costs less to make than to fetch).
pub(super) const INLINE_MAX: u64 = 16 << 20;

/// Memory of a function process before it holds any block (runtime, threads, buffers).
pub const BASE_MEMORY: u64 = 40 << 20;

/// A batch ready to send, with the batches it waits for and what the plan expects of it.
#[derive(Debug, Clone)]
pub struct PlannedBatch {
    pub batch: Batch,
    pub deps: Vec<usize>,
    pub slot: usize,
    pub projected_peak: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
    /// Store requests the batch will make: one GET per block read, one PUT per block written.
    pub gets: u64,
    pub puts: u64,
}

/// Loads of one slot: NumS's three (memory, bytes in, bytes out), simulated while placing;
/// a plan reports them per slot after batching (largest projected invocation memory, store
/// bytes read and written).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct SlotLoad {
    pub memory: u64,
    pub bytes_in: u64,
    pub bytes_out: u64,
}

#[derive(Debug, Clone)]
pub struct Plan {
    pub scheduler: SchedulerKind,
    pub tasks: usize,
    pub batches: Vec<PlannedBatch>,
    pub loads: Vec<SlotLoad>,
}

impl Plan {
    pub fn bytes_read(&self) -> u64 {
        self.batches.iter().map(|b| b.bytes_in).sum()
    }
    pub fn bytes_written(&self) -> u64 {
        self.batches.iter().map(|b| b.bytes_out).sum()
    }
    /// Bytes of intermediates (not named arrays) the plan writes to the store; they stay
    /// there until the job ends, so this is the peak intermediate storage.
    pub fn intermediate_bytes(&self) -> u64 {
        self.batches
            .iter()
            .flat_map(|b| b.batch.tasks.iter().map(move |t| (b, t)))
            .filter(|(b, t)| t.write_output && b.batch.arrays[t.output.array as usize].intermediate)
            .map(|(b, t)| {
                b.batch.arrays[t.output.array as usize]
                    .meta
                    .block_nbytes(&t.output.index)
            })
            .sum()
    }

    pub fn max_projected_peak(&self) -> u64 {
        self.batches
            .iter()
            .map(|b| b.projected_peak)
            .max()
            .unwrap_or(0)
    }
}

/// A plan that cannot fit `memory_mb`.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "block {block} of array {array} (block shape {shape:?}) needs a batch of {need_mib} MiB, over memory_mb = {limit_mb}; \
     give memory_mb = {need_mib} or more, or a smaller `block` for the arrays it reads"
)]
pub struct PlanError {
    /// The node whose block does not fit (the driver names it by the user's key).
    pub node: crate::graph::NodeId,
    pub array: String,
    pub block: String,
    pub shape: Vec<usize>,
    pub need_mib: u64,
    pub limit_mb: u64,
}

pub struct Ctx<'a> {
    pub g: &'a Graph,
    /// The run's prefix under the store root (`<job>/_runs/<run>`): where its arrays are
    /// made, and the one prefix its functions may write under.
    pub prefix: &'a str,
    pub store: &'a StoreSpec,
    pub workers: usize,
    pub memory_mb: u64,
}

pub fn plan(kind: SchedulerKind, cx: &Ctx, work: &[Work]) -> Result<Plan, PlanError> {
    let placed = match kind {
        SchedulerKind::Naive => naive::place(cx, work),
        SchedulerKind::Lshs => lshs::reorder(cx, lshs::place(cx, work)),
    };
    let batches = batch::cut(cx, &placed, kind == SchedulerKind::Naive)?;
    // What each slot will do once batched: its largest invocation's projected memory, and
    // the store bytes its invocations read and write.
    let mut loads = vec![SlotLoad::default(); cx.workers];
    for b in &batches {
        let l = &mut loads[b.slot];
        l.memory = l.memory.max(b.projected_peak);
        l.bytes_in += b.bytes_in;
        l.bytes_out += b.bytes_out;
    }
    let plan = Plan {
        scheduler: kind,
        tasks: placed.len(),
        batches,
        loads,
    };
    #[cfg(debug_assertions)]
    if let Err(e) = check::check_plan(cx, kind, work, &placed, &plan) {
        panic!("the {kind:?} plan breaks an invariant: {e}");
    }
    Ok(plan)
}

/// Which slot a block belongs to when nothing else says: block-cyclic over the workers.
pub(super) fn home(cx: &Ctx, b: &BlockId) -> usize {
    (cx.g.nodes[b.node].meta.block_linear(&b.index) as usize) % cx.workers
}
