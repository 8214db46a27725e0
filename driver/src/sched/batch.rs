//! Cutting each slot's ordered tasks into batches (one invocation each) whose projected
//! peak memory fits `memory_mb`. Placement decides each task's slot and order; this step
//! decides which tasks run together; `wire` then writes the batches.
//!
//! The projection (see [`single_peak`] and `check::wire_peak`, which recomputes it from
//! the wire) is kept incrementally per open batch: one value per task (step) in a segment
//! tree with range add, so that adding a task costs O(inputs · log(batch size)) rather
//! than a new pass over the batch.

use std::cmp::Reverse;

use nums_function::memory::{TaskBlocks, batch_memory, task_peak};
use nums_layout::batch::{element_workspace, is_linalg, kernel_workspace};

use super::*;

/// The array a block is written in (one per array on the wire).
fn array_of(blocks: &Blocks, b: Bid) -> (usize, u32) {
    let id = blocks.block(b);
    (id.node, id.part)
}

/// Filling a task's [`TaskBlocks`] from the plan's blocks.
trait FromBlocks {
    /// Block `x` is read from the store.
    fn fetch(&mut self, blocks: &Blocks, x: Bid);
    /// Block `x` is the output.
    fn output(&mut self, blocks: &Blocks, x: Bid);
}

impl FromBlocks for TaskBlocks {
    fn fetch(&mut self, blocks: &Blocks, x: Bid) {
        let chunk = blocks.chunk(x);
        self.fetched += blocks.nbytes[x as usize];
        self.reads += 1;
        self.fetched_chunks += chunk;
        self.largest_chunk = self.largest_chunk.max(chunk);
    }

    fn output(&mut self, blocks: &Blocks, x: Bid) {
        self.out = blocks.nbytes[x as usize];
        self.out_chunk = blocks.chunk(x);
    }
}

/// [`task_peak`] of task `i` run alone, with its batch's description.
fn single_peak(tasks: &Tasks, blocks: &Blocks, i: usize, work: u64) -> u64 {
    let ins = tasks.inputs(i);
    let mut arrays: Vec<(usize, u32)> = ins
        .iter()
        .chain([&tasks.output[i]])
        .map(|&x| array_of(blocks, x))
        .collect();
    arrays.sort_unstable();
    arrays.dedup();
    let max_in = ins
        .iter()
        .map(|&x| blocks.nbytes[x as usize])
        .max()
        .unwrap_or(0);
    let mut t = TaskBlocks {
        max_in,
        work,
        ..Default::default()
    };
    for x in distinct(ins) {
        t.fetch(blocks, x);
    }
    t.output(blocks, tasks.output[i]);
    task_peak(&t) + batch_memory(1, ins.len() as u64, arrays.len() as u64)
}

/// Each task's kernel workspace ([`kernel_workspace`]): the linear-algebra kernels' by
/// their block shapes, the others' scratch and casts by their blocks' sizes and dtypes.
fn workspaces(g: &Graph, tasks: &Tasks, blocks: &Blocks) -> Vec<u64> {
    let shape = |b: Bid| {
        let id = blocks.block(b);
        let m = &g.nodes[id.node].meta;
        (m.block_shape(&id.index(g)), m.dtype)
    };
    // Elements and dtype, without the shape (the same numbers, for every task).
    let elems = |b: Bid| {
        let d = g.nodes[blocks.block(b).node].meta.dtype;
        (blocks.nbytes[b as usize] / d.size() as u64, d)
    };
    (0..tasks.len())
        .map(|i| {
            let k = &tasks.kernels[tasks.kernel[i] as usize];
            if !is_linalg(k) {
                let ins: Vec<(u64, DType)> = tasks.inputs(i).iter().map(|&x| elems(x)).collect();
                return element_workspace(k, &ins, elems(tasks.output[i]));
            }
            let ins: Vec<(Vec<usize>, DType)> = tasks.inputs(i).iter().map(|&x| shape(x)).collect();
            let (out, dt) = shape(tasks.output[i]);
            kernel_workspace(k, &ins, (&out, dt))
        })
        .collect()
}

/// Each step's projected memory in one batch, with range add and range max.
struct Steps {
    n: usize,
    cap: usize,
    max: Vec<u64>,
    add: Vec<u64>,
}

impl Steps {
    fn new() -> Steps {
        Steps {
            n: 0,
            cap: 1,
            max: vec![0; 2],
            add: vec![0; 2],
        }
    }

    /// The value of every step, pushing the pending adds down.
    fn values(&self) -> Vec<u64> {
        let mut out = Vec::with_capacity(self.n);
        fn walk(s: &Steps, node: usize, lo: usize, hi: usize, acc: u64, out: &mut Vec<u64>) {
            if lo >= s.n {
                return;
            }
            if lo == hi {
                out.push(acc + s.max[node]);
                return;
            }
            let mid = (lo + hi) / 2;
            let acc = acc + s.add[node];
            walk(s, 2 * node, lo, mid, acc, out);
            walk(s, 2 * node + 1, mid + 1, hi, acc, out);
        }
        walk(self, 1, 0, self.cap - 1, 0, &mut out);
        out
    }

    /// Adds `v` to steps `l..=r` (indices of appended steps). Bottom-up: the nodes that
    /// cover the range take the add, then their ancestors' maxima are made again (the
    /// tree is walked per task added, so loops rather than recursion).
    fn range_add(&mut self, l: usize, r: usize, v: u64) {
        if l > r || v == 0 {
            return;
        }
        let (mut lo, mut hi) = (l + self.cap, r + self.cap + 1);
        let (l0, r0) = (lo, hi - 1);
        while lo < hi {
            if lo & 1 == 1 {
                self.apply(lo, v);
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                self.apply(hi, v);
            }
            lo >>= 1;
            hi >>= 1;
        }
        self.rebuild(l0);
        self.rebuild(r0);
    }

    fn apply(&mut self, node: usize, v: u64) {
        self.max[node] += v;
        self.add[node] += v;
    }

    /// Makes the maxima of `node`'s ancestors again.
    fn rebuild(&mut self, mut node: usize) {
        while node > 1 {
            node >>= 1;
            self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
        }
    }

    /// The largest of steps `l..=r`: the nodes that cover the range, each with the adds
    /// of its ancestors (the left ones all lie under node `lo - 1` as the walk goes up,
    /// the right ones under node `hi`).
    fn range_max(&self, l: usize, r: usize) -> u64 {
        if l > r {
            return 0;
        }
        let (mut lo, mut hi) = (l + self.cap, r + self.cap + 1);
        let (mut left, mut right): (Option<u64>, Option<u64>) = (None, None);
        while lo < hi {
            if lo & 1 == 1 {
                left = left.max(Some(self.max[lo]));
                lo += 1;
            }
            if hi & 1 == 1 {
                hi -= 1;
                right = right.max(Some(self.max[hi]));
            }
            lo >>= 1;
            hi >>= 1;
            if let Some(x) = left.as_mut() {
                *x += self.add[lo - 1];
            }
            if let Some(x) = right.as_mut() {
                *x += self.add[hi];
            }
        }
        let above = |mut node: usize, mut x: u64| {
            while node > 1 {
                node >>= 1;
                x += self.add[node];
            }
            x
        };
        let left = left.map_or(0, |x| above(lo - 1, x));
        let right = right.map_or(0, |x| above(hi, x));
        left.max(right)
    }

    fn push(&mut self, v: u64) {
        if self.n == self.cap {
            let vals = self.values();
            self.cap *= 2;
            self.max = vec![0; 2 * self.cap];
            self.add = vec![0; 2 * self.cap];
            for (i, x) in vals.into_iter().enumerate() {
                self.set(i, x);
            }
        }
        let n = self.n;
        self.set(n, v);
        self.n += 1;
    }

    /// Sets step `i` (unset so far: 0) to `v`.
    fn set(&mut self, i: usize, v: u64) {
        let leaf = i + self.cap;
        let held = self.max[leaf] + {
            let (mut node, mut adds) = (leaf, 0);
            while node > 1 {
                node >>= 1;
                adds += self.add[node];
            }
            adds
        };
        let d = v - held;
        self.apply(leaf, d);
        self.rebuild(leaf);
    }

    fn peak(&self) -> u64 {
        self.max[1]
    }
}

/// The batch a slot is adding tasks to.
struct Open {
    batch: u32,
    /// Position of its first task of its own (not a copy).
    first: u32,
    steps: Steps,
    /// Largest projection among the copies at its front (0: none).
    copy_max: u64,
    /// Step of the last task that read or made each block in the batch that a later task
    /// may read.
    last: HashMap<Bid, u32>,
    /// Tasks copied into it.
    copied: HashSet<u32>,
    /// Its tasks' projected seconds.
    secs: f64,
    /// Its tasks (copies too) and their inputs, and the arrays they name: its
    /// description, held throughout ([`batch_memory`]).
    tasks: u64,
    inputs: u64,
    arrays: HashSet<(usize, u32)>,
    /// Every batch it reads from was settled when read ([`Cutter::settled`]).
    settled_deps: bool,
    /// It made a block another slot reads ([`Variant::PublishedEarly`]): it ends as soon
    /// as [`Cutter::ends_after`] allows.
    publish: bool,
    /// The blocks it holds that a later task on its slot reads, and their bytes (in the
    /// published variants; small blocks made again where needed aside).
    here: HashSet<Bid>,
    held_here: u64,
    /// When it is projected to start ([`Cutter::end`]).
    start: f64,
}

impl Open {
    fn description(&self) -> u64 {
        batch_memory(self.tasks, self.inputs, self.arrays.len() as u64)
    }

    /// Its projected peak: the largest step's, or its copies', with its description.
    fn peak(&self) -> u64 {
        self.steps.peak().max(self.copy_max) + self.description()
    }
}

/// What adding a task to an open batch does.
struct Trial {
    peak: u64,
    /// Small new blocks made again at the batch's front (sorted), and their bytes.
    copies: Vec<u32>,
    copy_bytes: u64,
    copy_max: u64,
    /// The new step's projection.
    value: u64,
    /// Blocks it reads that the batch already held since step `.0` (bytes `.1`).
    kept: Vec<(u32, u64)>,
    /// Arrays it (and its copies) name that the batch did not.
    arrays: Vec<(usize, u32)>,
}

/// Batches as cut: each task's batch, each batch's slot and projected peak, and the small
/// new blocks each batch makes again (batch, group, task; later groups go first).
pub(super) struct Cut {
    pub batch_of: Vec<u32>,
    pub slot: Vec<u32>,
    pub peak: Vec<u64>,
    pub copies: Vec<(u32, u32, u32)>,
}

impl Cut {
    pub(super) fn len(&self) -> usize {
        self.slot.len()
    }
}

struct Cutter<'a> {
    tasks: &'a Tasks,
    blocks: &'a Blocks,
    producer: Vec<u32>,
    /// Per block, the tasks not yet cut that read it.
    readers: Vec<u32>,
    one_per_batch: bool,
    batch_of: Vec<u32>,
    /// Each task's kernel workspace.
    work: Vec<u64>,
    /// Each task's projected seconds ([`task_seconds`]).
    secs: Vec<f64>,
    /// Tasks whose block another slot reads (in the published variants); empty otherwise.
    feeds: Vec<bool>,
    /// [`Variant::Published`]: each such task ends its batch.
    at_once: bool,
    /// Per batch: closed, and so are all the batches it waits for, through and through.
    /// Its dependencies are final, so a batch that began before it may read from it
    /// without a cycle (the rule of [`Cutter::acyclic`] otherwise).
    settled: Vec<bool>,
    /// Per batch: when it is projected to end (while open: when it starts), from its
    /// tasks' seconds, what it waits for and its slot's batches before it.
    end: Vec<f64>,
    slot_end: Vec<f64>,
    model: crate::cost::CostModel,
    /// A batch reads from one made after it: batches are renumbered in dependency order.
    backward: bool,
    /// Per task, in the published variants (empty otherwise): whether a later task on its
    /// slot reads its output, and each of its distinct inputs ([`Again`]).
    again: Again,
}

impl Cutter<'_> {
    /// Ends a slot's open batch (if any), recording its peak.
    fn close(&mut self, open: &mut Option<Open>, cut: &mut Cut) {
        if let Some(done) = open.take() {
            let b = done.batch as usize;
            cut.peak[b] = done.peak();
            self.settled[b] = done.settled_deps;
            self.end[b] = done.start + done.secs + self.model.invoke_s;
            self.slot_end[cut.slot[b] as usize] = self.end[b];
        }
    }
}

impl Cutter<'_> {
    /// Whether task `p` ends its batch ([`critical`]): published as soon as it is made,
    /// not after the slot's other work of that step.
    fn publishes(&self, p: usize) -> bool {
        critical(&self.tasks.kernels[self.tasks.kernel[p] as usize])
    }

    /// Whether `o` ends after its task `i`: a [`critical`] task ends it at once, and in
    /// [`Variant::Published`] a task whose block another slot reads. In
    /// [`Variant::PublishedEarly`] a batch that made such a block ends as soon as ending
    /// it reads little again (the blocks it holds that the slot's later tasks read, at
    /// most [`REREAD_MAX`]), so that the other slot starts sooner while the slot's reads
    /// of one block stay in one invocation (ended after each such block, the rest of a
    /// row block's work read the row block again: a fit's Newton pass read X 1.5x).
    fn ends_after(&self, o: &Open, i: usize) -> bool {
        self.publishes(i)
            || (self.at_once && self.feeds[i])
            || (o.publish && o.held_here <= REREAD_MAX)
    }

    /// A task without inputs whose block is small: made again where needed.
    fn cheap(&self, p: usize) -> bool {
        !self.one_per_batch && remade(self.tasks, self.blocks, p)
    }

    /// Whether task `i` may join `o` without a cycle: it reads from other batches only
    /// blocks made before the batch's first task (or small blocks it makes again). In
    /// the published variants also blocks of a settled batch (none of the batches it
    /// waits for, through and through, can wait for `o`, which is open) projected to end
    /// before `o` starts, or later by less than reading again what `o` holds for the
    /// slot's later tasks (ending `o` here would read those again).
    fn acyclic(&self, o: &Open, i: usize) -> bool {
        let reread = || {
            self.model.io_seconds(&crate::cost::BatchWork {
                bytes_in: o.held_here,
                ..Default::default()
            })
        };
        self.tasks.inputs(i).iter().all(|&x| {
            let p = self.producer[x as usize];
            if p == NONE
                || self.batch_of[p as usize] == o.batch
                || p < o.first
                || self.cheap(p as usize)
            {
                return true;
            }
            let b = self.batch_of[p as usize] as usize;
            self.published() && self.settled[b] && self.end[b] <= o.start + reread()
        })
    }

    /// Whether a [`critical`] task joining `o` would make it wait: an input of it comes
    /// from another batch projected to end after `o` starts, so that `o`'s tasks before
    /// it would wait too. It starts a batch of its own instead: the slot runs them in the
    /// meantime (a blocked LU's next panel updated by the factored panels it has while
    /// the other slot factors the one it lacks), and the factored panel is not held back
    /// by them.
    fn waits(&self, o: &Open, i: usize) -> bool {
        self.publishes(i)
            && self.tasks.inputs(i).iter().any(|&x| {
                let p = self.producer[x as usize];
                p != NONE
                    && self.batch_of[p as usize] != o.batch
                    && !self.cheap(p as usize)
                    && self.end[self.batch_of[p as usize] as usize] > o.start
            })
    }

    fn published(&self) -> bool {
        !self.again.output.is_empty()
    }

    fn trial(&self, o: &Open, i: usize) -> Trial {
        let nbytes = |b: Bid| self.blocks.nbytes[b as usize];
        let ins = self.tasks.inputs(i);
        let mut copies: Vec<u32> = ins
            .iter()
            .map(|&x| self.producer[x as usize])
            .filter(|&p| {
                p != NONE
                    && self.batch_of[p as usize] != o.batch
                    && self.cheap(p as usize)
                    && !o.copied.contains(&p)
            })
            .collect();
        copies.sort_unstable();
        copies.dedup();
        // Copies run first, each holding the ones before it; those already there now
        // also hold the new ones.
        let mut copy_max = if o.copy_max > 0 { o.copy_max } else { 0 };
        let mut copy_bytes = 0;
        for &p in &copies {
            let mut t = TaskBlocks::default();
            t.output(self.blocks, self.tasks.output[p as usize]);
            copy_max = copy_max.max(copy_bytes + task_peak(&t));
            copy_bytes += t.out;
        }
        if o.copy_max > 0 {
            copy_max = copy_max.max(o.copy_max + copy_bytes);
        }
        let mut held = 0;
        let mut t = TaskBlocks {
            max_in: ins.iter().map(|&x| nbytes(x)).max().unwrap_or(0),
            work: self.work[i],
            ..Default::default()
        };
        let mut kept = Vec::new();
        for x in distinct(ins) {
            let n = nbytes(x);
            let p = self.producer[x as usize];
            if p != NONE && copies.binary_search(&p).is_ok() {
                held += n;
            } else if let Some(&l) = o.last.get(&x) {
                held += n;
                kept.push((l, n));
            } else {
                t.fetch(self.blocks, x);
            }
        }
        t.output(self.blocks, self.tasks.output[i]);
        let value = held + task_peak(&t);
        // The steps so far hold the new copies' blocks, and each kept block from the step
        // after its last use on.
        kept.sort_unstable();
        let m = o.steps.n;
        let mut own = value;
        let (mut from, mut extra) = (0usize, copy_bytes);
        for &(l, n) in &kept {
            let l = l as usize;
            if l >= from {
                own = own.max(o.steps.range_max(from, l) + extra);
                from = l + 1;
            }
            extra += n;
        }
        if from < m {
            own = own.max(o.steps.range_max(from, m - 1) + extra);
        }
        let mut arrays: Vec<(usize, u32)> = ins
            .iter()
            .chain([&self.tasks.output[i]])
            .chain(copies.iter().map(|&p| &self.tasks.output[p as usize]))
            .map(|&x| array_of(self.blocks, x))
            .filter(|a| !o.arrays.contains(a))
            .collect();
        arrays.sort_unstable();
        arrays.dedup();
        let description = batch_memory(
            o.tasks + 1 + copies.len() as u64,
            o.inputs + ins.len() as u64,
            (o.arrays.len() + arrays.len()) as u64,
        );
        Trial {
            peak: own.max(copy_max) + description,
            copies,
            copy_bytes,
            copy_max,
            value,
            kept,
            arrays,
        }
    }

    fn apply(&mut self, o: &mut Open, i: usize, t: Trial, cut: &mut Cut) {
        let m = o.steps.n;
        for &p in &t.copies {
            o.copied.insert(p);
            cut.copies.push((o.batch, i as u32, p));
        }
        o.copy_max = t.copy_max;
        if m > 0 {
            o.steps.range_add(0, m - 1, t.copy_bytes);
            for &(l, n) in &t.kept {
                o.steps.range_add(l as usize + 1, m - 1, n);
            }
        }
        o.steps.push(t.value);
        o.secs += self.secs[i];
        o.tasks += 1 + t.copies.len() as u64;
        o.inputs += self.tasks.inputs(i).len() as u64;
        o.arrays.extend(t.arrays);
        for &x in self.tasks.inputs(i) {
            let p = self.producer[x as usize];
            if p == NONE || self.cheap(p as usize) {
                continue;
            }
            let b = self.batch_of[p as usize];
            if b != o.batch {
                o.settled_deps &= self.settled[b as usize];
                o.start = o.start.max(self.end[b as usize]);
                self.backward |= b > o.batch;
            }
        }
        o.publish |= !self.at_once && self.feeds.get(i).copied().unwrap_or(false);
        if !self.again.output.is_empty() {
            let out = self.tasks.output[i];
            let again = &self.again.inputs[self.again.start[i] as usize..];
            let blocks = distinct(self.tasks.inputs(i))
                .zip(again.iter().copied())
                .chain([(out, self.again.output[i])]);
            for (x, later) in blocks {
                let p = self.producer[x as usize];
                if p != NONE && self.cheap(p as usize) {
                    continue;
                }
                let n = self.blocks.nbytes[x as usize];
                if later {
                    if o.here.insert(x) {
                        o.held_here += n;
                    }
                } else if o.here.remove(&x) {
                    o.held_here -= n;
                }
            }
        }
        // Blocks no later task reads are forgotten.
        for x in distinct(self.tasks.inputs(i)) {
            self.readers[x as usize] -= 1;
            if self.readers[x as usize] > 0 {
                o.last.insert(x, m as u32);
            } else {
                o.last.remove(&x);
            }
        }
        let out = self.tasks.output[i];
        if self.readers[out as usize] > 0 {
            o.last.insert(out, m as u32);
        }
        self.batch_of[i] = o.batch;
    }
}

/// Each task's projected seconds by the cost model: its kernel, and its reads of blocks
/// already stored (blocks made in the plan may be held in its batch, so they count 0).
fn task_seconds(cx: &Ctx, tasks: &Tasks, blocks: &Blocks) -> Vec<f64> {
    let g = cx.g;
    let grids: Vec<Vec<u64>> = g.nodes.iter().map(|n| n.meta.grid()).collect();
    let shape = |x: Bid| {
        let id = blocks.block(x);
        let meta = &g.nodes[id.node].meta;
        meta.block_shape(&nums_layout::meta::unravel(id.block, &grids[id.node]))
    };
    let producer = tasks.producers(blocks.len());
    (0..tasks.len())
        .map(|i| {
            let ins = tasks.inputs(i);
            let out = tasks.output[i];
            let nbytes = |x: &Bid| blocks.nbytes[*x as usize];
            let work = crate::cost::task_work(
                &tasks.kernels[tasks.kernel[i] as usize],
                ins.iter().map(nbytes).sum(),
                nbytes(&out),
                |k| shape(if k < ins.len() { ins[k] } else { out }),
                ins.len(),
            );
            let stored: u64 = distinct(ins)
                .filter(|&x| producer[x as usize] == NONE)
                .map(|x| nbytes(&x))
                .sum();
            let work = crate::cost::BatchWork {
                tasks: 1,
                bytes_in: stored,
                flops: work.flops,
                streamed: work.streamed,
                made: nbytes(&out),
                evals: work.evals,
                parsed: work.parsed,
                ..Default::default()
            };
            cx.model.io_seconds(&work) + cx.model.compute_seconds(&work)
        })
        .collect()
}

/// The longest a batch may be projected to run: a quarter of the invocation timeout, so
/// that a slot's work too long for one invocation (a large job on few workers, Lambda's
/// 15 minutes) is cut into several, with room for the model's error. (Cutting a slot's
/// work finer, for stragglers, was measured and refused: on the peers workloads it sent
/// partial sums and re-read inputs through the store, 1.25-2x the bytes read.)
fn batch_seconds_cap(cx: &Ctx) -> f64 {
    cx.timeout_seconds as f64 / 4.0
}

/// Whether task `p` is made again in each batch that reads its block: no inputs, no file
/// read, a small block.
fn remade(tasks: &Tasks, blocks: &Blocks, p: usize) -> bool {
    tasks.inputs(p).is_empty()
        && !tasks.kernels[tasks.kernel[p] as usize].reads_file()
        && blocks.nbytes[tasks.output[p] as usize] <= INLINE_MAX
}

/// Which tasks make a block that a task on another slot reads (a small new block made
/// again where needed excepted): its reader waits for the producer's whole batch.
fn feeds(tasks: &Tasks, blocks: &Blocks) -> Vec<bool> {
    let producer = tasks.producers(blocks.len());
    let mut f = vec![false; tasks.len()];
    for i in 0..tasks.len() {
        for x in distinct(tasks.inputs(i)) {
            let p = producer[x as usize];
            if p == NONE || tasks.slot[p as usize] == tasks.slot[i] {
                continue;
            }
            f[p as usize] |= !remade(tasks, blocks, p as usize);
        }
    }
    f
}

/// Whether any task's block is read on another slot (so that the published variants cut
/// differently from [`Variant::Streamed`]).
pub(super) fn feeds_other_slots(tasks: &Tasks, blocks: &Blocks) -> bool {
    feeds(tasks, blocks).into_iter().any(|f| f)
}

/// Cuts each slot's task sequence into batches that fit memory and keep the batch graph
/// acyclic: a batch reads from other batches only blocks produced before its first task.
/// Batches are cut by duration too ([`batch_seconds_cap`]), a batch's first task
/// excepted (a task is never split).
pub(super) fn cut(
    cx: &Ctx,
    tasks: &Tasks,
    blocks: &Blocks,
    variant: Variant,
) -> Result<Cut, PlanError> {
    let one_per_batch = variant == Variant::Naive;
    let published = matches!(variant, Variant::Published | Variant::PublishedEarly);
    let g = cx.g;
    let limit = cx.memory_mb << 20;
    let mut readers = vec![0u32; blocks.len()];
    for i in 0..tasks.len() {
        for x in distinct(tasks.inputs(i)) {
            readers[x as usize] += 1;
        }
    }
    let mut c = Cutter {
        tasks,
        blocks,
        readers,
        producer: tasks.producers(blocks.len()),
        one_per_batch,
        batch_of: vec![NONE; tasks.len()],
        work: workspaces(g, tasks, blocks),
        secs: if one_per_batch {
            vec![0.0; tasks.len()]
        } else {
            task_seconds(cx, tasks, blocks)
        },
        feeds: if published {
            feeds(tasks, blocks)
        } else {
            Vec::new()
        },
        at_once: variant == Variant::Published,
        settled: Vec::new(),
        end: Vec::new(),
        slot_end: vec![0.0; cx.workers],
        model: cx.model,
        backward: false,
        again: if published {
            again(tasks, blocks.len())
        } else {
            Again::default()
        },
    };
    let cap = batch_seconds_cap(cx);
    let mut cut = Cut {
        batch_of: Vec::new(),
        slot: Vec::new(),
        peak: Vec::new(),
        copies: Vec::new(),
    };
    let mut open: Vec<Option<Open>> = (0..cx.workers).map(|_| None).collect();
    for i in 0..tasks.len() {
        let s = tasks.slot[i] as usize;
        if !one_per_batch
            && let Some(o) = open[s].as_mut()
            && o.secs + c.secs[i] <= cap
            && c.acyclic(o, i)
            && !c.waits(o, i)
        {
            let t = c.trial(o, i);
            if t.peak <= limit && o.tasks + 1 + t.copies.len() as u64 <= MAX_BATCH_TASKS as u64 {
                c.apply(o, i, t, &mut cut);
                if c.ends_after(o, i) {
                    c.close(&mut open[s], &mut cut);
                }
                continue;
            }
        }
        let single = single_peak(tasks, blocks, i, c.work[i]);
        if single > limit {
            let out = blocks.block(tasks.output[i]);
            let index = out.index(g);
            let m = &g.nodes[out.node].meta;
            return Err(PlanError {
                node: out.node,
                array: g.nodes[out.node]
                    .name
                    .clone()
                    .unwrap_or_else(|| format!("(expression n{})", out.node)),
                block: format!("{index:?}"),
                shape: m.block_shape(&index),
                need_mib: single.div_ceil(1 << 20),
                limit_mb: cx.memory_mb,
            });
        }
        let b = cut.slot.len() as u32;
        cut.slot.push(s as u32);
        c.settled.push(false);
        c.end.push(0.0);
        if one_per_batch {
            cut.peak.push(single);
            c.batch_of[i] = b;
            continue;
        }
        cut.peak.push(0);
        // The slot's open batch ends first, so that this one may count it settled.
        c.close(&mut open[s], &mut cut);
        let mut o = Open {
            batch: b,
            first: i as u32,
            steps: Steps::new(),
            copy_max: 0,
            last: HashMap::new(),
            copied: HashSet::new(),
            secs: 0.0,
            tasks: 0,
            inputs: 0,
            arrays: HashSet::new(),
            settled_deps: true,
            publish: false,
            here: HashSet::new(),
            held_here: 0,
            start: c.slot_end[s],
        };
        let t = c.trial(&o, i);
        c.apply(&mut o, i, t, &mut cut);
        let ends = c.ends_after(&o, i);
        open[s] = Some(o);
        if ends {
            c.close(&mut open[s], &mut cut);
        }
    }
    for o in open.into_iter().flatten() {
        cut.peak[o.batch as usize] = o.peak();
    }
    if c.backward {
        renumber(&mut cut, &mut c);
    }
    cut.batch_of = c.batch_of;
    Ok(cut)
}

/// The most bytes a [`Variant::PublishedEarly`] batch ends holding that its slot reads
/// again.
const REREAD_MAX: u64 = INLINE_MAX;

/// Which blocks each task reads or makes that a later task on its slot reads.
#[derive(Default)]
struct Again {
    output: Vec<bool>,
    /// Task i's distinct inputs, in order: `inputs[start[i]..start[i + 1]]`.
    start: Vec<u32>,
    inputs: Vec<bool>,
}

fn again(tasks: &Tasks, nblocks: usize) -> Again {
    let n = tasks.len();
    let mut a = Again {
        output: vec![false; n],
        start: vec![0; n + 1],
        inputs: Vec::new(),
    };
    for i in 0..n {
        a.start[i + 1] = a.start[i] + distinct(tasks.inputs(i)).count() as u32;
    }
    a.inputs = vec![false; a.start[n] as usize];
    // The slots that read each block after the task at hand: one slot in a table (most
    // blocks are read on one), any others in a set.
    let mut one = vec![NONE; nblocks];
    let mut more: HashSet<(Bid, u32)> = HashSet::new();
    for i in (0..n).rev() {
        let s = tasks.slot[i];
        let o = tasks.output[i];
        let w = one[o as usize];
        a.output[i] = w == s || (w != NONE && more.contains(&(o, s)));
        for (k, x) in distinct(tasks.inputs(i)).enumerate() {
            let w = &mut one[x as usize];
            a.inputs[a.start[i] as usize + k] = if *w == s {
                true
            } else if *w == NONE {
                *w = s;
                false
            } else {
                !more.insert((x, s))
            };
        }
    }
    a
}

/// Numbers the batches in an order each batch's dependencies come before it (the plan's
/// batches wait only for earlier ones), keeping the cut's order where it may: batches
/// were numbered as they began, and one may read from a settled batch begun after it.
fn renumber(cut: &mut Cut, c: &mut Cutter) {
    let nb = cut.len();
    let mut edges: Vec<(u32, u32)> = Vec::new();
    for i in 0..c.tasks.len() {
        let b = c.batch_of[i];
        for &x in c.tasks.inputs(i) {
            let p = c.producer[x as usize];
            if p != NONE && !c.cheap(p as usize) && c.batch_of[p as usize] != b {
                edges.push((c.batch_of[p as usize], b));
            }
        }
    }
    edges.sort_unstable();
    edges.dedup();
    let mut after: Vec<Vec<u32>> = vec![Vec::new(); nb];
    let mut waiting = vec![0u32; nb];
    for (d, b) in edges {
        after[d as usize].push(b);
        waiting[b as usize] += 1;
    }
    let mut ready: std::collections::BinaryHeap<Reverse<u32>> = (0..nb as u32)
        .filter(|&b| waiting[b as usize] == 0)
        .map(Reverse)
        .collect();
    let mut new = vec![NONE; nb];
    let mut n = 0;
    while let Some(Reverse(b)) = ready.pop() {
        new[b as usize] = n;
        n += 1;
        for &a in &after[b as usize] {
            waiting[a as usize] -= 1;
            if waiting[a as usize] == 0 {
                ready.push(Reverse(a));
            }
        }
    }
    assert_eq!(n as usize, nb, "the batch graph has a cycle");
    let mut slot = vec![0; nb];
    let mut peak = vec![0; nb];
    for b in 0..nb {
        slot[new[b] as usize] = cut.slot[b];
        peak[new[b] as usize] = cut.peak[b];
    }
    cut.slot = slot;
    cut.peak = peak;
    for x in &mut cut.copies {
        x.0 = new[x.0 as usize];
    }
    for b in &mut c.batch_of {
        *b = new[*b as usize];
    }
}

#[cfg(test)]
mod steps_tests {
    use super::Steps;

    /// The tree agrees with a plain list under random pushes, range adds and range maxima.
    #[test]
    fn steps_agree_with_a_list() {
        let mut rng = fastrand::Rng::with_seed(7);
        for _ in 0..200 {
            let (mut s, mut v) = (Steps::new(), Vec::<u64>::new());
            for _ in 0..rng.usize(1..300) {
                match rng.u8(0..3) {
                    0 => {
                        let x = rng.u64(0..1000);
                        s.push(x);
                        v.push(x);
                    }
                    1 if !v.is_empty() => {
                        let (l, r) = (rng.usize(0..v.len()), rng.usize(0..v.len()));
                        let x = rng.u64(0..100);
                        s.range_add(l, r, x);
                        if l <= r {
                            v[l..=r].iter_mut().for_each(|y| *y += x);
                        }
                    }
                    _ if !v.is_empty() => {
                        let (l, r) = (rng.usize(0..v.len()), rng.usize(0..v.len()));
                        let want = if l <= r {
                            *v[l..=r].iter().max().unwrap()
                        } else {
                            0
                        };
                        assert_eq!(s.range_max(l, r), want);
                    }
                    _ => {}
                }
                assert_eq!(s.peak(), v.iter().copied().max().unwrap_or(0));
                assert_eq!(s.values(), v);
            }
        }
    }
}
