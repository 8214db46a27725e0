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

use std::collections::{HashMap, HashSet};

use nums_layout::StoreSpec;
use nums_layout::batch::{ArrayRef, Batch, BlockRef, Task};

use crate::graph::Graph;
use crate::job::SchedulerKind;
use crate::tasks::{BlockId, BlockTask, Work, array_path};

/// New blocks up to this size are made again in each batch that needs them rather than
/// read from the store (a random or constant block costs less to make than to fetch).
const INLINE_MAX: u64 = 16 << 20;

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
            .filter(|(b, t)| {
                t.store_output
                    && b.batch.arrays[t.output.array as usize]
                        .path
                        .contains("/_tmp/")
            })
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
    pub array: String,
    pub block: String,
    pub shape: Vec<usize>,
    pub need_mib: u64,
    pub limit_mb: u64,
}

pub struct Ctx<'a> {
    pub g: &'a Graph,
    pub job: &'a str,
    pub store: &'a StoreSpec,
    pub workers: usize,
    pub memory_mb: u64,
}

pub fn plan(kind: SchedulerKind, cx: &Ctx, work: &[Work]) -> Result<Plan, PlanError> {
    let placed = match kind {
        SchedulerKind::Naive => naive_tasks(cx, work),
        SchedulerKind::Lshs => lshs_tasks(cx, work),
    };
    let placed = match kind {
        SchedulerKind::Naive => placed,
        SchedulerKind::Lshs => reorder(cx, placed),
    };
    let batches = cut(cx, &placed, kind == SchedulerKind::Naive)?;
    // What each slot will do once batched: its largest invocation's projected memory, and
    // the store bytes its invocations read and write.
    let mut loads = vec![SlotLoad::default(); cx.workers];
    for b in &batches {
        let l = &mut loads[b.slot];
        l.memory = l.memory.max(b.projected_peak);
        l.bytes_in += b.bytes_in;
        l.bytes_out += b.bytes_out;
    }
    Ok(Plan {
        scheduler: kind,
        tasks: placed.len(),
        batches,
        loads,
    })
}

/// Which slot a block belongs to when nothing else says: block-cyclic over the workers.
fn home(cx: &Ctx, b: &BlockId) -> usize {
    (cx.g.nodes[b.node].meta.block_linear(&b.index) as usize) % cx.workers
}

fn naive_tasks(cx: &Ctx, work: &[Work]) -> Vec<(BlockTask, usize)> {
    let room = (cx.memory_mb << 20).saturating_sub(BASE_MEMORY);
    let mut out = Vec::new();
    for w in work {
        let groups = match w {
            Work::One(_) => vec![vec![0]],
            Work::Reduce { terms, .. } => {
                let term_bytes = terms
                    .iter()
                    .map(|t| t.iter().map(|b| b.nbytes(cx.g)).sum::<u64>())
                    .max()
                    .unwrap_or(1)
                    .max(1);
                // As many terms per invocation as fit (each read counts three times while it is
                // decoded), at least one; the partial sums are then added by one more task.
                let biggest = terms
                    .iter()
                    .flatten()
                    .map(|b| b.nbytes(cx.g))
                    .max()
                    .unwrap_or(0);
                let fan_in = ((room.saturating_sub(biggest + 3 * w.output().nbytes(cx.g))
                    / (3 * term_bytes)) as usize)
                    .max(1);
                let ids: Vec<usize> = (0..terms.len()).collect();
                ids.chunks(fan_in).map(<[usize]>::to_vec).collect()
            }
        };
        for t in w.expand(&groups) {
            let s = home(cx, &t.output);
            out.push((t, s));
        }
    }
    out
}

/// NumS's three loads per slot, and where each block is.
struct Sim<'a> {
    cx: &'a Ctx<'a>,
    loads: Vec<SlotLoad>,
    at: HashMap<BlockId, usize>,
    written: HashSet<BlockId>,
}

impl<'a> Sim<'a> {
    fn new(cx: &'a Ctx<'a>) -> Self {
        Sim {
            cx,
            loads: vec![SlotLoad::default(); cx.workers],
            at: HashMap::new(),
            written: HashSet::new(),
        }
    }

    fn is_named(&self, b: &BlockId) -> bool {
        b.part == 0 && self.cx.g.nodes[b.node].stored
    }

    /// Load changes of running `t` on slot `s`: (slot, memory, in, out) deltas.
    fn deltas(&self, t: &BlockTask, s: usize) -> Vec<(usize, u64, u64, u64)> {
        let g = self.cx.g;
        let mut d = Vec::new();
        let mut seen = HashSet::new();
        for b in &t.inputs {
            if !seen.insert(b) {
                continue;
            }
            match self.at.get(b) {
                Some(&src) if src == s => {}
                Some(&src) => {
                    d.push((s, 0, b.nbytes(g), 0));
                    if !self.written.contains(b) {
                        d.push((src, 0, 0, b.nbytes(g)));
                    }
                }
                None => d.push((s, 0, b.nbytes(g), 0)),
            }
        }
        let out = t.output.nbytes(g);
        d.push((s, out, 0, if self.is_named(&t.output) { out } else { 0 }));
        d
    }

    fn objective_with(&self, d: &[(usize, u64, u64, u64)]) -> u64 {
        let mut l = self.loads.clone();
        for &(s, m, i, o) in d {
            l[s].memory += m;
            l[s].bytes_in += i;
            l[s].bytes_out += o;
        }
        l.iter().map(|x| x.memory).max().unwrap_or(0)
            + l.iter().map(|x| x.bytes_in).max().unwrap_or(0)
            + l.iter().map(|x| x.bytes_out).max().unwrap_or(0)
    }

    fn apply(&mut self, t: &BlockTask, s: usize) {
        for (slot, m, i, o) in self.deltas(t, s) {
            self.loads[slot].memory += m;
            self.loads[slot].bytes_in += i;
            self.loads[slot].bytes_out += o;
        }
        for b in &t.inputs {
            if self.at.get(b).is_some_and(|&src| src != s) {
                self.written.insert(b.clone());
            }
        }
        if self.is_named(&t.output) {
            self.written.insert(t.output.clone());
        }
        self.at.insert(t.output.clone(), s);
    }

    /// The candidate slot with the least objective after the move (ties: lowest slot).
    fn best(&self, t: &BlockTask, candidates: &[usize]) -> usize {
        *candidates
            .iter()
            .min_by_key(|&&s| (self.objective_with(&self.deltas(t, s)), s))
            .expect("a candidate")
    }

    fn least_loaded(&self) -> usize {
        (0..self.loads.len())
            .min_by_key(|&s| {
                (
                    self.loads[s].memory + self.loads[s].bytes_in + self.loads[s].bytes_out,
                    s,
                )
            })
            .unwrap_or(0)
    }
}

fn lshs_tasks(cx: &Ctx, work: &[Work]) -> Vec<(BlockTask, usize)> {
    let mut sim = Sim::new(cx);
    // Blocks already in the store (inputs) belong to their block-cyclic home slot, so that
    // the work on them is spread the same way as the blocks they line up with.
    for n in &cx.g.nodes {
        if n.op.inputs().is_empty() && n.op.is_stored_input() {
            for idx in n.meta.blocks() {
                let b = BlockId::new(n.id, idx);
                let h = home(cx, &b);
                sim.written.insert(b.clone());
                sim.at.insert(b, h);
            }
        }
    }
    let mut out = Vec::new();
    for w in work {
        match w {
            Work::One(t) => {
                // New blocks (no inputs) and the job's outputs go to their block-cyclic home, so
                // that arrays blocked alike line up on the same slots.
                let s = if sim.is_named(&t.output) || t.inputs.is_empty() {
                    home(cx, &t.output)
                } else {
                    let mut c: Vec<usize> = t
                        .inputs
                        .iter()
                        .filter_map(|b| sim.at.get(b).copied())
                        .collect();
                    c.push(sim.least_loaded());
                    c.sort_unstable();
                    c.dedup();
                    sim.best(t, &c)
                };
                sim.apply(t, s);
                out.push((t.clone(), s));
            }
            Work::Reduce { terms, output, .. } => {
                // Sum each slot's own terms there first; then combine the partials.
                let mut by_slot: Vec<(usize, Vec<usize>)> = Vec::new();
                for (i, term) in terms.iter().enumerate() {
                    let s = term
                        .iter()
                        .find_map(|b| sim.at.get(b).copied())
                        .unwrap_or_else(|| home(cx, &term[0]));
                    match by_slot.iter_mut().find(|(x, _)| *x == s) {
                        Some((_, v)) => v.push(i),
                        None => by_slot.push((s, vec![i])),
                    }
                }
                let groups: Vec<Vec<usize>> = by_slot.iter().map(|(_, v)| v.clone()).collect();
                let named_home = sim.is_named(output).then(|| home(cx, output));
                for (t, group) in w.expand_chained(&groups) {
                    let s = match group {
                        Some(k) => by_slot[k].0,
                        None => match named_home {
                            Some(h) => h,
                            None => {
                                let mut c: Vec<usize> = by_slot.iter().map(|(s, _)| *s).collect();
                                c.push(sim.least_loaded());
                                c.sort_unstable();
                                c.dedup();
                                sim.best(&t, &c)
                            }
                        },
                    };
                    sim.apply(&t, s);
                    out.push((t, s));
                }
            }
        }
    }
    out
}

/// Orders the placed tasks so that each slot streams: among its ready tasks a slot runs
/// first the one that frees the most memory (last uses of its inputs), then the one that
/// brings in the least new data (blocks to read or make), then one whose inputs it holds. Slots take turns, which gives
/// one global topological order for cutting batches.
fn reorder(cx: &Ctx, placed: Vec<(BlockTask, usize)>) -> Vec<(BlockTask, usize)> {
    let g = cx.g;
    let n = placed.len();
    let producer: HashMap<&BlockId, usize> = placed
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (&t.output, i))
        .collect();
    let mut uses: HashMap<&BlockId, usize> = HashMap::new();
    let mut waiting = vec![0usize; n];
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, (t, _)) in placed.iter().enumerate() {
        let mut seen = HashSet::new();
        for b in &t.inputs {
            *uses.entry(b).or_default() += 1;
            if let Some(&p) = producer.get(b)
                && seen.insert(p)
            {
                waiting[i] += 1;
                consumers[p].push(i);
            }
        }
    }
    let mut ready: Vec<std::collections::BTreeSet<usize>> = vec![Default::default(); cx.workers];
    for i in 0..n {
        if waiting[i] == 0 {
            ready[placed[i].1].insert(i);
        }
    }
    let mut live: Vec<HashSet<&BlockId>> = vec![HashSet::new(); cx.workers];
    let mut order = Vec::with_capacity(n);
    while order.len() < n {
        let mut progressed = false;
        for s in 0..cx.workers {
            let score = |i: usize| {
                let t = &placed[i].0;
                let (mut freed, mut held, mut new) = (0, 0, 0);
                let mut counts: HashMap<&BlockId, usize> = HashMap::new();
                for b in &t.inputs {
                    *counts.entry(b).or_default() += 1;
                }
                for (b, c) in counts {
                    if uses[b] == c {
                        freed += b.nbytes(g);
                    }
                    if live[s].contains(b) {
                        held += 1;
                    } else {
                        new += b.nbytes(g);
                    }
                }
                if t.inputs.is_empty() {
                    new += t.output.nbytes(g);
                }
                // Free memory first, then bring in as little new data as possible (a block
                // read or made), then use what is held.
                (
                    freed,
                    std::cmp::Reverse(new),
                    held,
                    std::cmp::Reverse(t.output.nbytes(g)),
                    std::cmp::Reverse(i),
                )
            };
            let Some(&i) = ready[s].iter().max_by_key(|&&i| score(i)) else {
                continue;
            };
            ready[s].remove(&i);
            progressed = true;
            order.push(i);
            let t = &placed[i].0;
            for b in &t.inputs {
                let u = uses.get_mut(b).expect("counted");
                *u -= 1;
                if *u == 0 {
                    live[s].remove(b);
                } else {
                    live[s].insert(b); // read or received here, kept for its next use
                }
            }
            if uses.get(&t.output).copied().unwrap_or(0) > 0 {
                live[s].insert(&t.output);
            }
            for &c in &consumers[i] {
                waiting[c] -= 1;
                if waiting[c] == 0 {
                    ready[placed[c].1].insert(c);
                }
            }
        }
        assert!(progressed, "the block task graph has a cycle");
    }
    let mut slots: Vec<Option<(BlockTask, usize)>> = placed.into_iter().map(Some).collect();
    order
        .into_iter()
        .map(|i| slots[i].take().expect("each once"))
        .collect()
}

/// Projected peak memory of running `tasks` in order as one invocation (see
/// `nums_function::handle`): the process's base, the blocks kept for later tasks, the
/// current task's fetched inputs three times (encoded, decompressed, decoded), one input-sized kernel
/// temporary, the output twice (result and accumulator), and its encoded copy.
fn projected_peak(g: &Graph, tasks: &[&BlockTask]) -> u64 {
    let mut uses: HashMap<&BlockId, usize> = HashMap::new();
    for t in tasks {
        for b in &t.inputs {
            *uses.entry(b).or_default() += 1;
        }
    }
    let mut live: HashMap<&BlockId, u64> = HashMap::new();
    let mut peak = 0;
    for t in tasks {
        let held: u64 = live.values().sum();
        let mut fetched = 0;
        let mut seen = HashSet::new();
        for b in &t.inputs {
            if !live.contains_key(b) && seen.insert(b) {
                fetched += b.nbytes(g);
            }
        }
        let max_in = t.inputs.iter().map(|b| b.nbytes(g)).max().unwrap_or(0);
        let out = t.output.nbytes(g);
        peak = peak.max(BASE_MEMORY + held + 3 * fetched + max_in + 3 * out);
        for b in &t.inputs {
            live.insert(b, b.nbytes(g));
        }
        for b in &t.inputs {
            let u = uses.get_mut(b).expect("counted");
            *u -= 1;
            if *u == 0 {
                live.remove(b);
            }
        }
        if uses.get(&t.output).copied().unwrap_or(0) > 0 {
            live.insert(&t.output, out);
        }
    }
    peak
}

/// Cuts each slot's task sequence into batches that fit memory and keep the batch graph
/// acyclic: a batch reads from other batches only blocks produced before its first task.
fn cut(
    cx: &Ctx,
    placed: &[(BlockTask, usize)],
    one_per_batch: bool,
) -> Result<Vec<PlannedBatch>, PlanError> {
    let g = cx.g;
    let limit = cx.memory_mb << 20;
    let producer: HashMap<&BlockId, usize> = placed
        .iter()
        .enumerate()
        .map(|(i, (t, _))| (&t.output, i))
        .collect();
    let mut batch_of = vec![usize::MAX; placed.len()];
    // Each batch's tasks in execution order; a small new block (a task without inputs)
    // that another slot made is made again where it is needed instead of waiting for it.
    let mut members: Vec<Vec<usize>> = Vec::new();
    let mut firsts: Vec<usize> = Vec::new();
    let mut slot_of: Vec<usize> = Vec::new();
    let cheap = |p: usize| {
        !one_per_batch
            && placed[p].0.inputs.is_empty()
            && placed[p].0.output.nbytes(g) <= INLINE_MAX
    };
    let mut open: Vec<Option<usize>> = vec![None; cx.workers];
    for (i, (t, s)) in placed.iter().enumerate() {
        let copies = |b: usize, members: &[Vec<usize>], batch_of: &[usize]| -> Vec<usize> {
            let mut c: Vec<usize> = t
                .inputs
                .iter()
                .filter_map(|x| producer.get(x).copied())
                .filter(|&p| batch_of[p] != b && cheap(p) && !members[b].contains(&p))
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let fits = |b: usize, members: &[Vec<usize>], batch_of: &[usize]| -> bool {
            let first = firsts[b];
            let acyclic = t.inputs.iter().all(|x| match producer.get(x) {
                Some(&p) => batch_of[p] == b || p < first || cheap(p),
                None => true,
            });
            let mut ts: Vec<&BlockTask> = copies(b, members, batch_of)
                .iter()
                .map(|&j| &placed[j].0)
                .collect();
            ts.extend(members[b].iter().map(|&j| &placed[j].0));
            ts.push(t);
            acyclic && projected_peak(g, &ts) <= limit
        };
        let b = match open[*s] {
            Some(b) if !one_per_batch && fits(b, &members, &batch_of) => b,
            _ => {
                if projected_peak(g, &[t]) > limit {
                    let m = &g.nodes[t.output.node].meta;
                    return Err(PlanError {
                        array: g.nodes[t.output.node]
                            .name
                            .clone()
                            .unwrap_or_else(|| format!("(expression n{})", t.output.node)),
                        block: format!("{:?}", t.output.index),
                        shape: m.block_shape(&t.output.index),
                        need_mib: projected_peak(g, &[t]).div_ceil(1 << 20),
                        limit_mb: cx.memory_mb,
                    });
                }
                members.push(Vec::new());
                firsts.push(i);
                slot_of.push(*s);
                open[*s] = Some(members.len() - 1);
                members.len() - 1
            }
        };
        let c = copies(b, &members, &batch_of);
        members[b].splice(0..0, c);
        members[b].push(i);
        batch_of[i] = b;
    }

    // Which outputs leave their batch: the job's outputs, and blocks another batch reads.
    let mut needed_outside: HashSet<usize> = HashSet::new();
    for ids in &members {
        let here: HashSet<usize> = ids.iter().copied().collect();
        for &i in ids {
            for x in &placed[i].0.inputs {
                if let Some(&p) = producer.get(x)
                    && !here.contains(&p)
                {
                    needed_outside.insert(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    for (b, ids) in members.iter().enumerate() {
        let mut arrays: Vec<ArrayRef> = Vec::new();
        let mut slot: HashMap<(usize, u32), u32> = HashMap::new();
        let mut bref = |b: &BlockId| {
            let a = *slot.entry((b.node, b.part)).or_insert_with(|| {
                let meta = g.nodes[b.node].meta.clone();
                arrays.push(ArrayRef {
                    path: array_path(cx.job, g, b),
                    meta,
                    read_only: matches!(g.nodes[b.node].op, crate::graph::NodeOp::Stored { .. }),
                });
                (arrays.len() - 1) as u32
            });
            BlockRef {
                array: a,
                index: b.index.clone(),
            }
        };
        let mine: HashSet<usize> = ids.iter().copied().collect();
        let mut tasks = Vec::new();
        let mut deps = Vec::new();
        let (mut bytes_in, mut bytes_out, mut puts) = (0, 0, 0);
        let mut fetched = HashSet::new();
        for &i in ids {
            let t = &placed[i].0;
            for x in &t.inputs {
                match producer.get(x) {
                    Some(&p) if mine.contains(&p) => {}
                    p => {
                        if let Some(&p) = p {
                            deps.push(batch_of[p]);
                        }
                        if fetched.insert(x.clone()) {
                            bytes_in += x.nbytes(g);
                        }
                    }
                }
            }
            let copy = batch_of[i] != b;
            let store_output = !copy
                && ((t.output.part == 0 && g.nodes[t.output.node].stored)
                    || needed_outside.contains(&i));
            if store_output {
                bytes_out += t.output.nbytes(g);
                puts += 1;
            }
            tasks.push(Task {
                kernel: t.kernel.clone(),
                inputs: t.inputs.iter().map(&mut bref).collect(),
                output: bref(&t.output),
                store_output,
            });
        }
        deps.sort_unstable();
        deps.dedup();
        let ts: Vec<&BlockTask> = ids.iter().map(|&i| &placed[i].0).collect();
        out.push(PlannedBatch {
            batch: Batch {
                store: cx.store.clone(),
                job_prefix: cx.job.to_string(),
                arrays,
                tasks,
            },
            deps,
            slot: slot_of[b],
            projected_peak: projected_peak(g, &ts),
            bytes_in,
            bytes_out,
            gets: fetched.len() as u64,
            puts,
        });
    }
    Ok(out)
}
