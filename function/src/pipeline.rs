//! One invocation as a pipeline: store reads for the next tasks run while the current
//! task's kernel computes, and outputs are encoded and written behind the kernels, all
//! within the batch's `prefetch_budget`. Kernels run one at a time, in the batch's order,
//! on the same inputs as in the sequential run ([`crate::sequential`]); reads are started
//! in the order that run makes them and decode on the blocking pool (several blocks at
//! once, so on all cores); outputs encode there too, several at once.
//!
//! # Memory
//!
//! The planner projects a batch's peak for running its tasks one after the other
//! (`projected_peak` in driver/src/sched/batch.rs) and sets `prefetch_budget` to the
//! headroom between that and the memory limit. Freed blocks the allocator keeps for reuse
//! (`memory::bound_kept_blocks`) take up to half of it; the pipeline gets the rest. At any
//! moment the pipeline holds what the sequential run holds at the same task, plus only
//! what it has charged to its budget:
//! - a block read ahead, for a task that is not yet due: from the start of its GET to the
//!   end of its decoding, [`StoredArray::decode_peak`] (its encoded bytes, at most zstd's
//!   bound for the chunk; the decoded chunk; an edge block's cropped copy); from then on
//!   its decoded size. When its task comes due the charge ends: the block is then that
//!   task's input, which the projection counts (so must the planner: the fetched inputs
//!   of the current task, decoded and, while decoding, encoded too).
//! - an output written behind the next kernels: from the end of its kernel to the end of
//!   its encoding, the block itself (unless it is kept for a later task anyway, where the
//!   projection counts it) plus [`StoredArray::encode_peak`] (the encoded bytes, at most
//!   zstd's bound; an edge block's padded copy); from then on its encoded bytes, until
//!   its PUT returns.
//!
//! Charges are taken only when they fit. Reads are started strictly in order, so a later
//! task's read never passes an earlier one's; reads ahead leave room for one output
//! written behind (up to half the budget). On a local store reads start at most two
//! tasks ahead: they run at memory speed, and a block read further ahead is only one more
//! new buffer (a freed one is reused instead: `memory::BlockAllocator`). And there a
//! large block (a mapping of its own) is read ahead only into a freed block the
//! allocator keeps, else when its task is due: fresh pages cost more than the overlap
//! gains. Each costs a page fault, a zeroing and a cgroup charge, and its unmapping:
//! ~0.5 ms per MiB here against ~0.2 ms to decode into pages already held; with one
//! process per core there is no idle core for a read ahead to use either. In the peers
//! benchmark's blocks of 128 MiB, reading ahead into fresh pages made the Newton step,
//! `X.T @ X` and `mean(U * V)` 1.3-1.8x slower (BENCHMARKS.md, issue 28). An output that
//! does not fit even once the writes in flight are done is written before the next
//! kernel runs, as in the sequential run (where the projection counts it). With a budget
//! of 0 (the default) the pipeline is the sequential run: each task's reads start when
//! it is due and its output is written before the next task.
//!
//! # Time
//!
//! `compute_seconds` is the time in kernels. `io_seconds` is the time the kernels stood
//! still for the store: waiting for a due task's inputs, for room to write an output
//! behind (or for an output that had to be written before the next kernel), and for the
//! last writes at the end. Reads and writes that overlap a kernel are in neither, so
//! `wall_seconds` is about their sum; the store traffic itself is in the byte counts.
//!
//! # Errors
//!
//! The error reported is the one the sequential run would have met first: a failed read
//! surfaces when its task is due (after the kernels before it), and on any failure the
//! writes of earlier tasks are let finish, the earliest task's failure winning.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::Arc;
use std::time::Instant;

use nums_layout::batch::{Batch, BlockRef, Stats};
use nums_layout::{Block, Store, StoredArray};
use tokio::task::{JoinError, JoinSet};

use crate::live::Live;
use crate::{Codec, FnError, IO_CONCURRENCY, Invocation, Outputs};

/// Runs one batch as a pipeline bounded by its `prefetch_budget` (see the module docs).
pub async fn handle(
    batch: &Batch,
    store: &Store,
    outputs: Outputs,
    live: Option<&Live>,
) -> Result<Stats, FnError> {
    let inv = Invocation::start(batch, store, Codec::Direct, outputs)?;
    if let Some(l) = live {
        l.started(&inv.store.counters);
    }
    // Freed blocks kept for reuse take up to half the headroom; reads ahead and writes
    // behind the rest.
    let kept = crate::memory::bound_kept_blocks(batch.prefetch_budget / 2);
    let mut p = Pipeline::new(&inv, batch.prefetch_budget - kept);
    p.told = live;
    let (compute, io) = p.run().await?;
    let intermediate = p.intermediate_bytes_written;
    drop(p);
    Ok(inv.finish(compute, io, intermediate))
}

/// One block the batch reads from the store.
struct Read {
    /// The first task that needs it.
    task: usize,
    block: BlockRef,
    /// Bytes held from its GET to the end of its decoding.
    peak: u64,
    /// Bytes held once decoded.
    nbytes: u64,
    /// The buffer it is decoded into (its chunk's bytes).
    decoded: u64,
}

/// The reads the sequential run makes, in its order (before each task, its inputs that
/// are neither produced earlier in the batch nor read earlier and still needed), and for
/// each task the range of them it makes.
fn schedule(inv: &Invocation) -> (Vec<Read>, Vec<Range<usize>>) {
    let batch = inv.batch;
    let mut uses = crate::uses(batch);
    let mut live: HashSet<&BlockRef> = HashSet::new();
    let mut reads = Vec::new();
    let mut by_task = Vec::with_capacity(batch.tasks.len());
    for (n, t) in batch.tasks.iter().enumerate() {
        let first = reads.len();
        let mut missing: Vec<&BlockRef> = t.inputs.iter().filter(|r| !live.contains(r)).collect();
        missing.sort_by_key(|r| (r.array, r.index.clone()));
        missing.dedup();
        for r in missing {
            let arr: &StoredArray = inv.array(r);
            reads.push(Read {
                task: n,
                block: r.clone(),
                peak: arr.decode_peak(&r.index),
                nbytes: arr.meta.block_nbytes(&r.index),
                decoded: arr.chunk_nbytes(),
            });
            live.insert(r);
        }
        by_task.push(first..reads.len());
        for r in &t.inputs {
            let u = uses.get_mut(r).expect("counted");
            *u -= 1;
            if *u == 0 {
                live.remove(r);
            }
        }
        if uses.get(&t.output).copied().unwrap_or(0) > 0 {
            live.insert(&t.output);
        }
    }
    (reads, by_task)
}

/// What finished in the background.
enum Event {
    /// Read `i` of the schedule.
    Read(usize, Result<Arc<Block>, FnError>),
    /// Task `n`'s output, encoded (and the block, when the memory tier keeps it), or kept
    /// in memory unwritten.
    Encoded(usize, Result<crate::Encoded, FnError>),
    /// Task `n`'s output, written (bytes of intermediates written).
    Written(usize, Result<u64, FnError>),
}

struct Pipeline<'a> {
    inv: &'a Invocation<'a>,
    reads: Vec<Read>,
    by_task: Vec<Range<usize>>,
    budget: u64,
    /// Budget that reads ahead leave for an output written behind.
    write_reserve: u64,
    /// How many tasks past the current one reads start for (within the budget).
    tasks_ahead: usize,
    /// A local store: a read ahead starts only into a freed block the allocator keeps
    /// (module docs).
    reuse_only: bool,
    /// Reads ahead started into kept blocks and not finished (each will take one).
    reusing: HashSet<usize>,
    /// Bytes charged to the budget now.
    used: u64,
    /// Each read's charge (0: not charged, or its task is due).
    charge: Vec<u64>,
    /// The task whose kernel runs next or now.
    current: usize,
    /// Reads started so far (they start in order), and how many of them are unfinished.
    next_read: usize,
    reading: usize,
    /// Blocks read ahead for tasks not yet due, by read.
    ahead: HashMap<usize, Arc<Block>>,
    /// Blocks the due task and later ones use, as in the sequential run.
    live: HashMap<BlockRef, Arc<Block>>,
    /// Failed reads; no read starts after one fails (the batch will fail).
    failed: HashMap<usize, FnError>,
    /// Outputs being encoded or written, by task, with their charge.
    writes: HashMap<usize, u64>,
    write_errors: Vec<(usize, FnError)>,
    events: JoinSet<Event>,
    intermediate_bytes_written: u64,
    /// Told of each finished task (a local function process's progress reports).
    told: Option<&'a Live>,
}

impl<'a> Pipeline<'a> {
    fn new(inv: &'a Invocation<'a>, budget: u64) -> Self {
        let (reads, by_task) = schedule(inv);
        let largest_write = inv
            .batch
            .tasks
            .iter()
            .filter(|t| t.write_output)
            .map(|t| write_cost(inv.array(&t.output), &t.output, false))
            .max()
            .unwrap_or(0);
        // Two on a local store (module docs); a remote store's reads take a round trip
        // each: as far ahead as the budget allows.
        let tasks_ahead = if inv.store.is_local() { 2 } else { usize::MAX };
        Pipeline {
            inv,
            tasks_ahead,
            reuse_only: inv.store.is_local(),
            reusing: HashSet::new(),
            charge: vec![0; reads.len()],
            reads,
            by_task,
            budget,
            write_reserve: largest_write.min(budget / 2),
            used: 0,
            current: 0,
            next_read: 0,
            reading: 0,
            ahead: HashMap::new(),
            live: HashMap::new(),
            failed: HashMap::new(),
            writes: HashMap::new(),
            write_errors: Vec::new(),
            events: JoinSet::new(),
            intermediate_bytes_written: 0,
            told: None,
        }
    }

    /// Runs the tasks; returns (compute seconds, I/O wait seconds).
    async fn run(&mut self) -> Result<(f64, f64), FnError> {
        let batch = self.inv.batch;
        let mut uses = crate::uses(batch);
        let (mut compute, mut io) = (0.0, 0.0);
        for (n, t) in batch.tasks.iter().enumerate() {
            // Task n is due: its reads ahead become its inputs, which the projection counts.
            self.current = n;
            for i in self.by_task[n].clone() {
                self.used -= std::mem::take(&mut self.charge[i]);
                if let Some(b) = self.ahead.remove(&i) {
                    self.live.insert(self.reads[i].block.clone(), b);
                }
            }
            self.admit();

            let waited = Instant::now();
            loop {
                self.check_writes().await?;
                let failed = self.by_task[n]
                    .clone()
                    .find(|i| self.failed.contains_key(i));
                if let Some(i) = failed {
                    let e = self.failed.remove(&i).expect("failed");
                    return Err(self.fail(n, e).await);
                }
                if t.inputs.iter().all(|r| self.live.contains_key(r)) {
                    break;
                }
                let ev = self.events.join_next().await;
                self.on(ev.expect("a due input is being read"));
                self.admit();
            }
            io += waited.elapsed().as_secs_f64();

            let inputs: Vec<Arc<Block>> = t.inputs.iter().map(|r| self.live[r].clone()).collect();
            let kernel = self.inv.kernel(n, t, inputs);
            tokio::pin!(kernel);
            let result = loop {
                tokio::select! {
                    biased;
                    r = &mut kernel => break r,
                    Some(ev) = self.events.join_next() => {
                        self.on(ev);
                        self.admit();
                    }
                }
            };
            let (block, seconds) = match result {
                Ok(r) => r,
                Err(e) => return Err(self.fail(n, e).await),
            };
            compute += seconds;
            if let Some(l) = self.told {
                l.task_done();
            }
            for r in &t.inputs {
                let u = uses.get_mut(r).expect("counted");
                *u -= 1;
                if *u == 0 {
                    self.live.remove(r);
                }
            }

            let block = Arc::new(block);
            let kept = uses.get(&t.output).copied().unwrap_or(0) > 0;
            if t.write_output {
                let waited = Instant::now();
                self.write(n, block.clone(), kept).await?;
                io += waited.elapsed().as_secs_f64();
            }
            if kept {
                self.live.insert(t.output.clone(), block);
            }
        }
        let waited = Instant::now();
        while !self.writes.is_empty() {
            let ev = self.events.join_next().await;
            self.on(ev.expect("a write is in flight"));
            self.check_writes().await?;
        }
        io += waited.elapsed().as_secs_f64();
        Ok((compute, io))
    }

    /// Starts reads in order while they fit: the due task's always (the projection
    /// counts them), later tasks' within the budget.
    fn admit(&mut self) {
        while self.next_read < self.reads.len()
            && self.reading < IO_CONCURRENCY
            && self.failed.is_empty()
        {
            let i = self.next_read;
            let rd = &self.reads[i];
            if rd.task > self.current.saturating_add(self.tasks_ahead) {
                break;
            }
            if rd.task > self.current {
                let room = self.budget.saturating_sub(self.write_reserve);
                if self.used + rd.peak > room {
                    break;
                }
                if self.reuse_only {
                    // usize::MAX: a small block, from the heap.
                    let kept = crate::memory::kept_fitting(rd.decoded);
                    if kept != usize::MAX {
                        if kept <= self.reusing.len() {
                            break;
                        }
                        self.reusing.insert(i);
                    }
                }
                self.used += rd.peak;
                self.charge[i] = rd.peak;
            }
            let read = self.inv.read(&rd.block);
            self.events.spawn(async move { Event::Read(i, read.await) });
            self.reading += 1;
            self.next_read += 1;
        }
    }

    /// Writes task `n`'s output: behind the next kernels if it fits the budget (once the
    /// writes in flight are done, if need be), else before the next kernel runs.
    async fn write(&mut self, n: usize, block: Arc<Block>, kept: bool) -> Result<(), FnError> {
        let out = &self.inv.batch.tasks[n].output;
        let cost = write_cost(self.inv.array(out), out, kept);
        // Writes come first: no read starts while this one waits for room.
        while self.used + cost > self.budget && !self.writes.is_empty() {
            let ev = self.events.join_next().await;
            self.on(ev.expect("a write is in flight"));
            self.check_writes().await?;
        }
        let behind = self.used + cost <= self.budget;
        let charge = if behind { cost } else { 0 };
        self.used += charge;
        self.writes.insert(n, charge);
        let encode = self.inv.encode(out, block);
        self.events
            .spawn(async move { Event::Encoded(n, encode.await) });
        if !behind {
            while self.writes.contains_key(&n) {
                let ev = self.events.join_next().await;
                self.on(ev.expect("the write is in flight"));
                self.admit();
            }
            self.check_writes().await?;
        }
        self.admit();
        Ok(())
    }

    /// Takes in what finished in the background.
    fn on(&mut self, ev: Result<Event, JoinError>) {
        // The steps catch their own errors; a panic in one is the handler's, as before.
        let ev = ev.unwrap_or_else(|e| std::panic::resume_unwind(e.into_panic()));
        match ev {
            Event::Read(i, result) => {
                self.reading -= 1;
                self.reusing.remove(&i);
                match result {
                    Ok(b) => {
                        // Decoded: the encoded bytes are gone.
                        let keep = self.charge[i].min(self.reads[i].nbytes);
                        self.used -= self.charge[i] - keep;
                        self.charge[i] = keep;
                        if self.reads[i].task <= self.current {
                            self.live.insert(self.reads[i].block.clone(), b);
                        } else {
                            self.ahead.insert(i, b);
                        }
                    }
                    Err(e) => {
                        self.used -= std::mem::take(&mut self.charge[i]);
                        self.failed.insert(i, e);
                    }
                }
            }
            Event::Encoded(n, Ok(bytes)) => {
                // Encoded: the block (if not kept) and any padded copy are gone.
                let c = self.writes.get_mut(&n).expect("write in flight");
                let keep = (*c).min(bytes.len());
                self.used -= *c - keep;
                *c = keep;
                let put = self.inv.put(&self.inv.batch.tasks[n].output, bytes);
                self.events
                    .spawn(async move { Event::Written(n, put.await) });
            }
            Event::Written(n, Ok(intermediate)) => {
                self.used -= self.writes.remove(&n).expect("write in flight");
                self.intermediate_bytes_written += intermediate;
            }
            Event::Encoded(n, Err(e)) | Event::Written(n, Err(e)) => {
                self.used -= self.writes.remove(&n).expect("write in flight");
                self.write_errors.push((n, e));
            }
        }
        debug_assert!(self.used <= self.budget, "{} > {}", self.used, self.budget);
    }

    /// Fails the invocation if a write failed.
    async fn check_writes(&mut self) -> Result<(), FnError> {
        if self.write_errors.is_empty() {
            return Ok(());
        }
        let (n, e) = self.write_errors.remove(0);
        Err(self.fail(n, e).await)
    }

    /// The error the sequential run would have met first, given that task `n` failed
    /// with `e`: the writes in flight (of earlier tasks) are let finish, and the earliest
    /// task's failure wins.
    async fn fail(&mut self, n: usize, e: FnError) -> FnError {
        while !self.writes.is_empty() {
            let ev = self.events.join_next().await;
            self.on(ev.expect("a write is in flight"));
        }
        let mut errors = vec![(n, e)];
        errors.append(&mut self.write_errors);
        errors
            .into_iter()
            .reduce(|a, b| if b.0 < a.0 { b } else { a })
            .expect("one error")
            .1
    }
}

/// Bytes charged for writing output `r` behind: the block itself unless it is `kept` for
/// a later task, and what encoding it holds.
fn write_cost(arr: &StoredArray, r: &BlockRef, kept: bool) -> u64 {
    let block = if kept {
        0
    } else {
        arr.meta.block_nbytes(&r.index)
    };
    block + arr.encode_peak(&r.index)
}
