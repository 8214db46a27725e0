//! Schedulers: from block work to batches (one batch = one invocation).
//!
//! `naive` runs one task per invocation, every input read from and every output written to
//! the store (as Cubed and PyWren do); reductions become trees of bounded fan-in.
//! `lshs` is NumS's Load Simulated Hierarchical Scheduling adapted to serverless: each
//! task goes, among the slots that hold one of its operands (and the least-loaded slot),
//! to the one that minimises max(memory) + max(bytes in) + max(bytes out) over all slots
//! after the move; reductions are summed on the slot that holds their operands first; a
//! job's named arrays land at their block-cyclic home (or, where function processes hold
//! blocks in memory, may be made where those are: [`Affinity`]). Each slot's tasks are then cut
//! into batches whose projected peak memory fits `memory_mb`: a block produced and
//! consumed in one batch never touches the store.

mod batch;
#[cfg(any(test, debug_assertions))]
mod check;
mod lshs;
mod naive;
#[cfg(test)]
mod tests;
mod wire;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use nums_layout::batch::{Batch, Kernel};
use nums_layout::{DType, StoreSpec};

use crate::graph::Graph;
use crate::job::SchedulerKind;
use crate::tasks::{BlockId, BlockWork, Step, Work, array_path, block_nbytes};

/// New blocks up to this size are made again in each batch that needs them rather than
/// read from the store (a random or constant block costs less to make than to fetch).
pub(super) const INLINE_MAX: u64 = 16 << 20;

/// The most tasks one invocation runs: its description is held throughout
/// ([`nums_function::memory::batch_memory`], counted in its projection) and its tables
/// are walked per task; a sample sort's main stage otherwise sent ~39,000 tiny tasks in
/// one invocation.
pub const MAX_BATCH_TASKS: usize = 4096;

/// A batch ready to send, with the batches it waits for and what the plan expects of it.
/// Its wire form ([`PlannedBatch::batch`]) is written when it is sent, from the plan's
/// compact tables, so that a plan of millions of tasks stays small in memory.
#[derive(Debug, Clone)]
pub struct PlannedBatch {
    pub deps: Vec<usize>,
    pub slot: usize,
    pub projected_peak: u64,
    pub bytes_in: u64,
    /// Of `bytes_in`, what its first task that reads fetches ([`crate::cost::BatchWork::first_read`]).
    pub first_read: u64,
    /// Stored blocks it reads that its slot's process holds in memory (not in `bytes_in`).
    pub memory_hits: u64,
    pub bytes_out: u64,
    /// Store requests the batch will make: one GET per block read, one PUT per block written.
    pub gets: u64,
    pub puts: u64,
    /// The kernels' work, for the cost model ([`crate::cost::task_work`]).
    pub flops: f64,
    pub streamed: u64,
    pub made: u64,
    pub evals: u64,
    pub parsed: u64,
    body: Body,
}

#[derive(Debug, Clone)]
enum Body {
    /// Batch number `.1` of a plan.
    Planned(Arc<wire::Wire>, u32),
    /// A batch given whole.
    Given(Arc<Batch>),
}

impl PlannedBatch {
    /// Its work, as the cost model takes it.
    pub fn work(&self) -> crate::cost::BatchWork {
        crate::cost::BatchWork {
            tasks: self.num_tasks() as u64,
            bytes_in: self.bytes_in,
            first_read: self.first_read,
            memory_hits: self.memory_hits,
            bytes_out: self.bytes_out,
            flops: self.flops,
            streamed: self.streamed,
            made: self.made,
            evals: self.evals,
            parsed: self.parsed,
        }
    }

    /// A batch given whole (no projections), waiting for `deps`.
    pub fn from_batch(batch: Batch, deps: Vec<usize>) -> PlannedBatch {
        PlannedBatch {
            deps,
            slot: 0,
            projected_peak: 0,
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
            body: Body::Given(Arc::new(batch)),
        }
    }

    /// The same batch (dependencies, slot, projections) sent as `batch`: a fit's pass
    /// sends its plan's batches again, with new parameter values in them.
    pub fn with_batch(&self, batch: Batch) -> PlannedBatch {
        PlannedBatch {
            body: Body::Given(Arc::new(batch)),
            ..self.clone()
        }
    }

    /// The batch in the wire format, as the function receives it.
    pub fn batch(&self) -> Batch {
        match &self.body {
            Body::Planned(w, b) => {
                let mut batch = w.batch(*b as usize);
                batch.prefetch_budget = w.limit.saturating_sub(self.projected_peak);
                batch
            }
            Body::Given(b) => (**b).clone(),
        }
    }

    /// Number of block tasks the batch runs.
    pub fn num_tasks(&self) -> usize {
        match &self.body {
            Body::Planned(w, b) => w.members(*b as usize).len(),
            Body::Given(b) => b.tasks.len(),
        }
    }
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
    /// The scheduler the job asked for.
    pub scheduler: SchedulerKind,
    /// Which of its plans it keeps.
    pub variant: Variant,
    pub tasks: usize,
    pub batches: Vec<PlannedBatch>,
    pub loads: Vec<SlotLoad>,
    wire: Arc<wire::Wire>,
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
        self.wire.intermediate_bytes()
    }

    /// The plan's projection on `workers` workers of `memory_mb` by `model`.
    pub fn project(
        &self,
        model: crate::cost::CostModel,
        workers: usize,
        memory_mb: u64,
    ) -> crate::cost::Projection {
        let batches: Vec<_> = self
            .batches
            .iter()
            .map(|b| (b.work(), b.deps.as_slice(), b.projected_peak, b.slot))
            .collect();
        let gets = self.batches.iter().map(|b| b.gets).sum();
        let puts = self.batches.iter().map(|b| b.puts).sum();
        crate::cost::project(model, workers, memory_mb, &batches, gets, puts)
    }

    /// Which plan the scheduler kept, as `plan` and `plan --json` say it.
    pub fn kept(&self) -> &'static str {
        match (self.scheduler, self.variant) {
            (SchedulerKind::Naive, _) => "naive",
            (_, Variant::Streamed) => "lshs",
            (_, Variant::Published) => {
                "lshs's placement, each block another slot reads published at once"
            }
            (_, Variant::PublishedEarly) => {
                "lshs's placement, blocks another slot reads published where that reads little again"
            }
            (_, Variant::Naive) => "naive's plan, projected faster than lshs's own",
        }
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
    /// The backend's cost model and invocation timeout: batches are cut to a duration
    /// too (see `batch::cut`).
    pub model: crate::cost::CostModel,
    pub timeout_seconds: u64,
    /// Which slot's process holds which stored block in memory (the local backend's
    /// view); `None`: none is known to.
    pub(crate) held: Option<&'a crate::residency::Residency>,
}

/// How a plan was made: LSHS's placement cut into batches as it streams, the same with
/// every block another slot reads published at once or early, or naive's. LSHS plans all
/// four and keeps the one its cost model projects fastest (see [`plan`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// LSHS as it is: each slot's tasks streamed through as few invocations as fit.
    Streamed,
    /// LSHS, a batch ended after each task whose block another slot reads, so that the
    /// other slot does not wait for the rest of the batch (`A @ B` re-blocking B).
    Published,
    /// LSHS, a batch that made a block another slot reads ended as soon as that reads
    /// little again (`batch::Cutter::ends_after`): the other slot waits less, and each
    /// slot reads its row blocks once (a fit's pass: at once, X was read 1.5x).
    PublishedEarly,
    /// Naive's plan: one task per invocation.
    Naive,
}

/// How a placement treats the blocks that slots' processes hold in memory ([`Ctx::held`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Affinity {
    /// As if none were held: stored blocks at their homes (a held block still counts as
    /// a memory hit where it is read on its holder). A first run's only placement.
    Off,
    /// Work over a held block goes to its holder; the job's named arrays to their homes.
    Inputs,
    /// The same, the named arrays placed by the loads like any block (where their inputs
    /// are), not moved to their homes through the store.
    Outputs,
}

/// Plans `work` with scheduler `kind`: placement (which slot runs each task, in which
/// order), then batch cutting (which tasks run together), then the batches' wire tables.
///
/// LSHS never keeps a plan its own cost model projects slower than one it can make: a
/// slot's batch that makes a block another slot waits for makes that slot wait for the
/// whole batch (`A @ B` re-blocking B in one invocation: projected 3.6 s against naive's
/// 2.0 s). So it also cuts its placement with such blocks published at once, and early
/// (where that reads little again), and plans naive's, and keeps the fastest projection
/// (LSHS's own on a tie), for plans of up to [`ALTERNATIVES_MAX_TASKS`] tasks. Naive's is
/// not made when a floor of its projection is past the best so far.
///
/// Where processes hold blocks in memory, it places both ignoring and following them
/// ([`Affinity`]): work that follows a held block away from its home can be projected
/// slower than reading it there (a named array made from it, moved home through the
/// store: 0.32 s against 0.15 s), so a plan with memory is never projected slower than
/// the plan without, and the first placement is the plan without (the one made past
/// the limit).
pub fn plan(kind: SchedulerKind, cx: &Ctx, work: &BlockWork) -> Result<Plan, PlanError> {
    let held = held_slots(cx, work);
    let fresh = || Blocks {
        held: held.clone(),
        ..Blocks::new(cx.g, work)
    };
    if kind == SchedulerKind::Naive {
        let mut blocks = fresh();
        let tasks = naive::place(cx, work, &mut blocks);
        return finish(cx, kind, work, tasks, blocks, Variant::Naive);
    }
    let affinities = match held.is_empty() {
        true => &[Affinity::Off][..],
        false => &[Affinity::Off, Affinity::Inputs, Affinity::Outputs],
    };
    let seconds = |p: &Plan| p.project(cx.model, cx.workers, cx.memory_mb).wall_seconds;
    // The fastest so far; a candidate that cannot fit is passed over (LSHS's own first
    // plan fits, or the plan is refused).
    let mut best: Option<(Plan, f64)> = None;
    let consider = |p: Result<Plan, PlanError>, best: &mut Option<(Plan, f64)>| {
        let mut p = match (p, best.is_none()) {
            (Ok(p), _) => p,
            (Err(e), true) => return Err(e),
            (Err(_), false) => return Ok(()),
        };
        let s = seconds(&p);
        if best.as_ref().is_none_or(|b| s < b.1) {
            p.scheduler = kind;
            *best = Some((p, s));
        }
        Ok(())
    };
    let mut naive_floor = f64::INFINITY;
    for &affinity in affinities {
        let mut blocks = fresh();
        let placed = lshs::place(cx, work, &mut blocks, affinity);
        let tasks = lshs::reorder(cx, placed, &blocks);
        if tasks.len() > ALTERNATIVES_MAX_TASKS {
            return finish(cx, kind, work, tasks, blocks, Variant::Streamed);
        }
        // Naive's plan runs each work's block (a task whose output is no partial sum) in
        // an invocation of its own at least, so it is projected no faster than their
        // invokes and task overheads spread over the workers: past LSHS's projection, it
        // is not planned.
        let works = (0..tasks.len())
            .filter(|&i| blocks.block(tasks.output[i]).part == 0)
            .count();
        naive_floor = naive_floor
            .min(works as f64 * (cx.model.invoke_s + cx.model.task_s) / cx.workers.max(1) as f64);
        let published =
            batch::feeds_other_slots(&tasks, &blocks).then(|| (tasks.clone(), blocks.clone()));
        consider(
            finish(cx, kind, work, tasks, blocks, Variant::Streamed),
            &mut best,
        )?;
        if let Some((tasks, blocks)) = published {
            let p = finish(
                cx,
                kind,
                work,
                tasks.clone(),
                blocks.clone(),
                Variant::Published,
            );
            consider(p, &mut best)?;
            let p = finish(cx, kind, work, tasks, blocks, Variant::PublishedEarly);
            consider(p, &mut best)?;
        }
    }
    if best.as_ref().is_some_and(|b| naive_floor < b.1) {
        let mut blocks = fresh();
        let tasks = naive::place(cx, work, &mut blocks);
        let p = finish(
            cx,
            SchedulerKind::Naive,
            work,
            tasks,
            blocks,
            Variant::Naive,
        );
        consider(p, &mut best)?;
    }
    Ok(best.expect("a plan").0)
}

/// LSHS plans its alternatives for plans of up to this many tasks: past it, three plans
/// side by side would pass the planner's memory target (a plan of 8 million tasks takes
/// ~1 GB under LSHS and ~1.7 GB under naive: BENCHMARKS.md, "Planning at scale"), and a
/// plan that large streams each slot's share through many invocations, where LSHS's
/// own cut is the one that reads its inputs once.
const ALTERNATIVES_MAX_TASKS: usize = 1_000_000;

/// A placement cut into batches (as `variant` says) and written, checked in debug builds.
fn finish(
    cx: &Ctx,
    kind: SchedulerKind,
    work: &BlockWork,
    tasks: Tasks,
    blocks: Blocks,
    variant: Variant,
) -> Result<Plan, PlanError> {
    let cut = batch::cut(cx, &tasks, &blocks, variant)?;
    // Debug builds check every plan small enough to check quickly (the property tests
    // check plans of every shape).
    #[cfg(debug_assertions)]
    let placed = (tasks.len() <= CHECK_MAX_TASKS).then(|| tasks.to_block_tasks(&blocks));
    let mut plan = wire::write(cx, kind, tasks, blocks, cut);
    plan.variant = variant;
    #[cfg(debug_assertions)]
    if let Some(placed) = placed
        && let Err(e) = check::check_plan(cx, kind, work, &placed, &plan)
    {
        panic!("the {kind:?} plan breaks an invariant: {e}");
    }
    #[cfg(not(debug_assertions))]
    let _ = work;
    Ok(plan)
}

/// Plans of up to this many tasks are checked in debug builds.
#[cfg(debug_assertions)]
const CHECK_MAX_TASKS: usize = 200_000;

/// Per block, the slot whose process holds it in memory (`NONE`: none known): the blocks
/// in the store before the run that [`Ctx::held`] knows of. Empty when nothing is held, so
/// that a plan with nothing in memory is made exactly as before.
fn held_slots(cx: &Ctx, work: &BlockWork) -> Vec<u32> {
    let Some(held) = cx.held.filter(|h| !h.is_empty()) else {
        return Vec::new();
    };
    let blocks = Blocks::new(cx.g, work);
    let mut at = vec![NONE; blocks.len()];
    let mut any = false;
    for n in &cx.g.nodes {
        if !(n.op.inputs().is_empty() && n.op.in_store_before_run()) {
            continue;
        }
        let path = crate::tasks::node_path(cx.prefix, cx.g, n.id);
        let grid = n.meta.grid();
        for lin in 0..n.meta.num_blocks() {
            let idx = nums_layout::meta::unravel(lin, &grid);
            let key = nums_layout::zarr::chunk_key(&path, &idx);
            if let Some(s) = held.holder(&key).filter(|&s| s < cx.workers) {
                at[blocks.id(&BlockId::new(n.id, lin), &[]) as usize] = s as u32;
                any = true;
            }
        }
    }
    if any { at } else { Vec::new() }
}

/// Which slot a block belongs to when nothing else says: block-cyclic over the workers.
pub(super) fn home(cx: &Ctx, b: &BlockId) -> usize {
    panel_home(cx, b).unwrap_or((b.block % cx.workers as u64) as usize)
}

/// Whether a task's output is what other slots' next work waits for, so that it goes
/// first among its slot's ready tasks and ends its invocation (is published at once): a
/// blocked LU's factored panel, read by every update of the next step.
pub(super) fn critical(kernel: &Kernel) -> bool {
    matches!(kernel, Kernel::LuPanel { factor: true, .. })
}

/// The slot of a blocked LU's panel version: cyclic over the panel (its column), whatever
/// the step (the last panel's first step aside), so that each slot keeps its panels
/// through the factorization and only the factored panel of each step crosses slots
/// (ScaLAPACK's 1-D block-cyclic LU). Placed by
/// loads alone, every update would follow the factored panel it reads onto one slot.
/// The right-hand side's versions through the forward steps and the back substitution,
/// and the solution, stay on one slot per column block of the right-hand side (the
/// solution's own home): each step reads a factored panel from the store wherever it
/// runs, and placed by loads each back-substitution step followed its panel to the other
/// slot, a chain of p invocations of one task each.
pub(super) fn panel_home(cx: &Ctx, b: &BlockId) -> Option<usize> {
    use crate::graph::{LuStep, NodeOp};
    let n = &cx.g.nodes[b.node];
    let cyclic = |columns: u64| Some(((b.block % columns.max(1)) % cx.workers as u64) as usize);
    match n.op {
        NodeOp::Lu {
            step: LuStep::Panels,
            ..
        } => {
            // The last panel's first step (after F_0) runs on panel 0's slot: cyclic, the
            // last panel takes the most updates (p - 1) on a slot whose panels take the
            // most, while panel 0's slot holds the fewest; that step reads A's own blocks
            // from the store wherever it runs, and the other slot is busy factoring panel
            // 1 meanwhile (the 8192² solve: projected 6.34 -> 6.14 s).
            let p = n.meta.shape[0];
            if p >= 3 && b.block == p + p - 1 {
                return Some(0);
            }
            cyclic(p)
        }
        // Versions [steps, n, c] in blocks [1, n, wb], the solution [n(, c)] in [n(, wb)]:
        // the column block is the last axis's.
        NodeOp::Lu {
            step: LuStep::Forward | LuStep::Backward | LuStep::Probe | LuStep::Solution,
            ..
        } => cyclic(*n.meta.grid().last().unwrap_or(&1)),
        _ => None,
    }
}

/// A block's number in the plan's dense tables.
pub(super) type Bid = u32;

/// No block, task or slot.
pub(super) const NONE: u32 = u32::MAX;

/// The distinct blocks of `ins` (a task's inputs), in order of first appearance.
pub(super) fn distinct(ins: &[Bid]) -> impl Iterator<Item = Bid> + '_ {
    // Inputs are few and mostly distinct: a short list is searched, a long one hashed.
    let mut seen = (ins.len() > 16).then(HashSet::new);
    ins.iter().enumerate().filter_map(move |(k, &x)| {
        let first = match seen.as_mut() {
            Some(s) => s.insert(x),
            None => !ins[..k].contains(&x),
        };
        first.then_some(x)
    })
}

/// Dense numbers for the plan's blocks: block `b` of node `n` is `base[n] + b` (nodes with
/// no work and not in the store have none); partial sums are numbered after them as they
/// are made. Each block's size is kept.
#[derive(Clone)]
pub(super) struct Blocks {
    base: Vec<u64>,
    parts: Vec<BlockId>,
    pub nbytes: Vec<u64>,
    /// Per node, its chunk's bytes (a whole block: an edge block is decoded and encoded
    /// as one).
    chunk: Vec<u64>,
    /// Per block, the slot whose process holds it in memory, `NONE` for none; empty when
    /// none does ([`held_slots`]).
    pub held: Vec<u32>,
}

impl Blocks {
    fn new(g: &Graph, work: &BlockWork) -> Blocks {
        let mut base = Vec::with_capacity(g.nodes.len() + 1);
        let mut nbytes = Vec::new();
        base.push(0);
        for n in &g.nodes {
            if work.needed(n.id) || n.op.in_store_before_run() {
                nbytes.extend((0..n.meta.num_blocks()).map(|b| block_nbytes(&n.meta, b)));
            }
            base.push(nbytes.len() as u64);
        }
        assert!(
            nbytes.len() < NONE as usize,
            "a plan of more than 4 billion blocks"
        );
        Blocks {
            base,
            parts: Vec::new(),
            nbytes,
            chunk: g.nodes.iter().map(|n| n.meta.max_block_nbytes()).collect(),
            held: Vec::new(),
        }
    }

    /// The number of a block; a partial sum's through `parts` (by part, of one output).
    pub(super) fn id(&self, b: &BlockId, parts: &[Bid]) -> Bid {
        if b.part == 0 {
            (self.base[b.node] + b.block) as Bid
        } else {
            parts[b.part as usize]
        }
    }

    /// The number of `b`, a new partial sum's recorded in `parts`.
    pub(super) fn made(&mut self, b: &BlockId, parts: &mut Vec<Bid>, g: &Graph) -> Bid {
        if b.part == 0 {
            return self.id(b, parts);
        }
        let id = self.nbytes.len() as Bid;
        assert!(id < NONE, "a plan of more than 4 billion blocks");
        self.nbytes.push(b.nbytes(g));
        self.parts.push(*b);
        let p = b.part as usize;
        if parts.len() <= p {
            parts.resize(p + 1, NONE);
        }
        parts[p] = id;
        id
    }

    /// The block of number `id`.
    pub(super) fn block(&self, id: Bid) -> BlockId {
        let n0 = *self.base.last().expect("base") as usize;
        let id = id as usize;
        if id >= n0 {
            return self.parts[id - n0];
        }
        let node = self.base.partition_point(|&b| b <= id as u64) - 1;
        BlockId::new(node, id as u64 - self.base[node])
    }

    pub(super) fn len(&self) -> usize {
        self.nbytes.len()
    }

    /// The slot whose process holds block `id` in memory, if one does.
    pub(super) fn held_by(&self, id: Bid) -> Option<usize> {
        let s = *self.held.get(id as usize)?;
        (s != NONE).then_some(s as usize)
    }

    /// The bytes of block `id`'s chunk (its own where it is no edge block).
    pub(super) fn chunk(&self, id: Bid) -> u64 {
        self.chunk[self.block(id).node]
    }
}

/// The block tasks of a plan, compact: kernels interned, blocks by number, inputs in one
/// array. Task `i` runs `kernels[kernel[i]]` on `inputs(i)` and makes `output[i]` on slot
/// `slot[i]`.
#[derive(Default, Clone)]
pub(super) struct Tasks {
    pub kernels: Vec<Kernel>,
    pub kernel: Vec<u32>,
    pub output: Vec<Bid>,
    start: Vec<u32>,
    all_inputs: Vec<Bid>,
    pub slot: Vec<u32>,
}

impl Tasks {
    pub(super) fn len(&self) -> usize {
        self.output.len()
    }

    pub(super) fn inputs(&self, i: usize) -> &[Bid] {
        let end = self
            .start
            .get(i + 1)
            .map_or(self.all_inputs.len(), |&e| e as usize);
        &self.all_inputs[self.start[i] as usize..end]
    }

    /// The number of `k` among the kernels (the recent ones are looked at: the kernels of
    /// one node's tasks and their combiners).
    pub(super) fn intern(&mut self, k: &Kernel) -> u32 {
        let n = self.kernels.len();
        if let Some(i) = (n.saturating_sub(8)..n)
            .rev()
            .find(|&i| self.kernels[i] == *k)
        {
            return i as u32;
        }
        self.kernels.push(k.clone());
        n as u32
    }

    pub(super) fn push(
        &mut self,
        kernel: u32,
        inputs: impl IntoIterator<Item = Bid>,
        output: Bid,
        slot: usize,
    ) {
        assert!(
            self.all_inputs.len() < NONE as usize,
            "too many task inputs"
        );
        self.start.push(self.all_inputs.len() as u32);
        self.all_inputs.extend(inputs);
        self.kernel.push(kernel);
        self.output.push(output);
        self.slot.push(slot as u32);
    }

    /// The same tasks in `order` (a permutation of their numbers).
    pub(super) fn permute(self, order: &[u32]) -> Tasks {
        let mut t = Tasks {
            kernels: self.kernels,
            ..Default::default()
        };
        t.start.reserve(order.len());
        t.all_inputs.reserve(self.all_inputs.len());
        for &i in order {
            let i = i as usize;
            let end = self
                .start
                .get(i + 1)
                .map_or(self.all_inputs.len(), |&e| e as usize);
            t.start.push(t.all_inputs.len() as u32);
            t.all_inputs
                .extend_from_slice(&self.all_inputs[self.start[i] as usize..end]);
            t.kernel.push(self.kernel[i]);
            t.output.push(self.output[i]);
            t.slot.push(self.slot[i]);
        }
        t
    }

    /// The task that makes each block (`NONE`: a block in the store before the run).
    pub(super) fn producers(&self, nblocks: usize) -> Vec<u32> {
        let mut p = vec![NONE; nblocks];
        for (i, &o) in self.output.iter().enumerate() {
            p[o as usize] = i as u32;
        }
        p
    }

    /// The tasks as [`BlockTask`]s with their slots (for the invariant check).
    #[cfg(any(test, debug_assertions))]
    pub(super) fn to_block_tasks(&self, blocks: &Blocks) -> Vec<(crate::tasks::BlockTask, usize)> {
        (0..self.len())
            .map(|i| {
                (
                    crate::tasks::BlockTask {
                        kernel: self.kernels[self.kernel[i] as usize].clone(),
                        inputs: self.inputs(i).iter().map(|&b| blocks.block(b)).collect(),
                        output: blocks.block(self.output[i]),
                    },
                    self.slot[i] as usize,
                )
            })
            .collect()
    }
}

/// The kernel numbers of one work's tasks: its own and (made when first needed) its
/// combiner's.
pub(super) struct Kernels {
    own: u32,
    combine: Option<u32>,
}

impl Kernels {
    pub(super) fn new(tasks: &mut Tasks, w: &Work) -> Kernels {
        Kernels {
            own: tasks.intern(w.kernel()),
            combine: None,
        }
    }

    pub(super) fn of(&mut self, step: Step, tasks: &mut Tasks, w: &Work) -> u32 {
        match step {
            Step::Work => self.own,
            Step::Combine => *self
                .combine
                .get_or_insert_with(|| tasks.intern(&w.kernel().combiner())),
        }
    }
}
