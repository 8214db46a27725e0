//! The one dispatch path: batches go out in dependency order, `workers` at a time, through
//! an [`Invoke`] — aws-sdk-lambda's Invoke ([`Invoker`]), against AWS Lambda or the local
//! endpoint. What can go wrong between the driver and a function is absorbed here, by
//! rules unit-tested against a fake [`Invoke`] ([`Policy`]): throttling (429, honouring
//! Retry-After), payloads over the limit (413: staged through the store), crashed
//! processes (a few resends), store outages (resent for a time budget), and stragglers
//! (one backup invocation each, Cubed's rule; the first result wins).
//!
//! This module is the loop and its accounting; `invoke.rs` is the transport (what a send
//! is, and what its failures mean), `policy.rs` the rules the loop applies.

mod invoke;
mod policy;

pub use invoke::{Invoke, InvokeError, Invoker, payload_for};
pub use policy::{Backups, Policy};

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use futures::StreamExt;
use futures::stream::FuturesUnordered;
use nums_layout::ErrorKind;
use nums_layout::Store;
use nums_layout::batch::{Kernel, Stats};
use nums_layout::failure::Retry;

use crate::sched::PlannedBatch;

/// How many of the ready batches [`Dispatch::fill`] looks through for one whose slot is
/// free (a bound: the ready queue may hold thousands).
const FILL_LOOKAHEAD: usize = 64;

/// A batch that failed for good.
#[derive(Debug, thiserror::Error)]
#[error("invocation {batch} failed after {}: {error}", crate::human::plural(u64::from(*.attempts), "attempt", "attempts"))]
pub struct DispatchError {
    pub batch: usize,
    /// Invocations of the batch sent (backups included).
    pub attempts: u32,
    pub error: InvokeError,
}

/// Totals of a dispatch.
#[derive(Debug, Default, Clone)]
pub struct Dispatched {
    /// What the winning invocation of each batch measured.
    pub stats: Stats,
    /// Invocations sent again after a failure, for any reason (throttling included).
    pub retries: u64,
    /// Of `retries`, those after Lambda throttled the call (429).
    pub throttled: u64,
    /// Backup invocations sent for stragglers (not counted in `retries`).
    pub backups: u64,
}

impl Dispatched {
    /// Adds another dispatch's totals (of the same run).
    pub fn merge(&mut self, o: &Dispatched) {
        self.stats.add(&o.stats);
        self.retries += o.retries;
        self.throttled += o.throttled;
        self.backups += o.backups;
    }
}

/// One invocation as it went, for `--stats`' per-invocation records and the timeline:
/// every send is seen once it answers (failed ones, and the slower copy of a batch that
/// had a backup, too); sends still in flight when a dispatch fails are not.
#[derive(Debug)]
pub struct Sent<'a> {
    /// The batch's index in the slice given to the dispatcher.
    pub batch: usize,
    /// Which send of the batch this was, from 1 (a backup counts as one).
    pub attempt: u32,
    /// A backup sent for a straggler.
    pub backup: bool,
    /// Sent (after any pause before a resend), and answered.
    pub started: Instant,
    pub ended: Instant,
    /// The function's figures, or why the invocation failed.
    pub result: Result<&'a Stats, &'a InvokeError>,
    /// Its batch was already done when it answered (the slower of a batch and its backup):
    /// its result was not used.
    pub late: bool,
}

/// How one invocation of a batch went.
struct Outcome {
    batch: usize,
    /// Which send of the batch this was (backups share their original's).
    seq: u32,
    /// The batch's send count when this one went (see [`Sent::attempt`]).
    attempt: u32,
    backup: bool,
    started: Instant,
    ended: Instant,
    /// Whether the payload went by key.
    stored: bool,
    /// From the send to the answer.
    took: Duration,
    result: Result<Stats, InvokeError>,
}

type Pending<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// One invocation of batch `i`, after a pause.
async fn attempt<I: Invoke>(
    inv: &I,
    b: &PlannedBatch,
    i: usize,
    store: &Store,
    (seq, stored, pause, attempt_no, backup): (u32, bool, Duration, u32, bool),
) -> Outcome {
    if !pause.is_zero() {
        tokio::time::sleep(pause).await;
    }
    let started = Instant::now();
    // A batch's first send goes to the process planned for it (whose memory may hold its
    // blocks); a resend or a backup to any (the planned one failed or is slow).
    let slot = (attempt_no == 1 && !backup).then_some(b.slot);
    let (took, result) = match payload_for(b, i, store, stored).await {
        Ok(p) => {
            let t = Instant::now();
            let r = inv.invoke_on(p, slot).await;
            (t.elapsed(), r)
        }
        Err(e) => (
            Duration::ZERO,
            Err(InvokeError::Stage {
                message: format!("{e:#}"),
            }),
        ),
    };
    Outcome {
        batch: i,
        seq,
        attempt: attempt_no,
        backup,
        started,
        ended: Instant::now(),
        stored,
        took,
        result,
    }
}

/// Where one batch is.
#[derive(Default)]
struct BatchState {
    /// Dependencies not finished yet.
    waiting: u32,
    done: bool,
    /// Invocations of it in flight (2 while a backup runs).
    running: u8,
    /// Its current send; outcomes and straggler entries of older ones are stale.
    seq: u32,
    backed_up: bool,
    /// Its payload goes through the store (Lambda refused it inline).
    stored: bool,
    sends: u32,
    failures: u32,
    throttled: u32,
    store_failures: u32,
    first_store_failure: Option<Instant>,
}

/// The running median of finished invocations' durations: two heaps, O(log n) a push.
#[derive(Default)]
struct Median {
    low: BinaryHeap<Duration>,
    high: BinaryHeap<Reverse<Duration>>,
}

impl Median {
    fn push(&mut self, d: Duration) {
        if self.low.peek().is_none_or(|&m| d <= m) {
            self.low.push(d);
        } else {
            self.high.push(Reverse(d));
        }
        if self.low.len() > self.high.len() + 1 {
            self.high.push(Reverse(self.low.pop().expect("non-empty")));
        } else if self.high.len() > self.low.len() {
            self.low.push(self.high.pop().expect("non-empty").0);
        }
    }

    fn get(&self) -> Option<Duration> {
        let lo = *self.low.peek()?;
        Some(match self.high.peek() {
            Some(Reverse(hi)) if self.high.len() == self.low.len() => (lo + *hi) / 2,
            _ => lo,
        })
    }
}

/// When a send becomes overdue, its batch, its seq and when it was sent.
type Deadline = (Instant, usize, u32, Instant);

/// One dispatch in progress. Everything it starts lives in `running`, polled by
/// [`run_batches_with`]'s own future: dropping that future cancels every invocation in
/// flight and leaves nothing behind.
struct Dispatch<'a, I> {
    inv: &'a I,
    batches: &'a [PlannedBatch],
    store: &'a Store,
    policy: &'a Policy,
    workers: usize,
    state: Vec<BatchState>,
    dependents: Vec<Vec<usize>>,
    ready: VecDeque<usize>,
    running: FuturesUnordered<Pending<'a>>,
    /// Sends not yet backed up, oldest first: (when sent, batch, seq). Entries of
    /// batches that finished or were sent again are dropped when they reach the top.
    by_age: BinaryHeap<Reverse<(Instant, usize, u32)>>,
    /// The same sends by when the projection rule calls them overdue while the run flows
    /// (`.0`) and while it is stalled (`.1`), each with the send's batch, seq and time.
    by_deadline: [BinaryHeap<Reverse<Deadline>>; 2],
    durations: Median,
    /// When an invocation last answered (or the dispatch began).
    last_answer: Instant,
    /// Batches started (their first send), finished, and started but not finished.
    started: usize,
    done: usize,
    active: usize,
    /// Of those, the batches planned for each slot.
    in_flight: Vec<u32>,
    total: Dispatched,
}

impl<'a, I: Invoke> Dispatch<'a, I> {
    fn send(&mut self, i: usize, pause: Duration, backup: bool) {
        let s = &mut self.state[i];
        s.running += 1;
        s.sends += 1;
        if backup {
            s.backed_up = true;
            self.total.backups += 1;
        } else {
            s.seq += 1;
            if let Some(rule) = &self.policy.backups {
                let sent = Instant::now() + pause;
                self.by_age.push(Reverse((sent, i, s.seq)));
                if let Some(after) = rule.overdue_after(&self.batches[i]) {
                    for (heap, after) in self.by_deadline.iter_mut().zip(after) {
                        heap.push(Reverse((sent + after, i, s.seq, sent)));
                    }
                }
            }
        }
        tracing::debug!(
            "invocation {i}: send {} ({}{}{}{})",
            s.sends,
            crate::human::plural(self.batches[i].num_tasks() as u64, "task", "tasks"),
            if backup { ", a backup" } else { "" },
            if s.stored { ", payload by key" } else { "" },
            if pause.is_zero() {
                String::new()
            } else {
                format!(", after {:.2} s", pause.as_secs_f64())
            }
        );
        let (inv, b, store) = (self.inv, &self.batches[i], self.store);
        let how = (s.seq, s.stored, pause, s.sends, backup);
        self.running.push(Box::pin(attempt(inv, b, i, store, how)));
    }

    /// Starts ready batches while fewer than `workers` are in progress: where the invoker
    /// addresses slots, first a batch planned for a slot with nothing in flight (among the
    /// first few ready), so that it finds its process free.
    fn fill(&mut self) {
        while self.active < self.workers {
            let k = match self.inv.addresses_slots() {
                true => (self.ready.iter().take(FILL_LOOKAHEAD))
                    .position(|&i| !self.slot_busy(self.batches[i].slot))
                    .unwrap_or(0),
                false => 0,
            };
            let Some(i) = self.ready.remove(k) else {
                break;
            };
            self.active += 1;
            self.count_in(i, true);
            self.started += 1;
            self.send(i, Duration::ZERO, false);
        }
    }

    /// Counts batch `i` in (or out of) the batches in progress on its planned slot.
    fn count_in(&mut self, i: usize, started: bool) {
        let s = self.batches[i].slot;
        if self.in_flight.len() <= s {
            self.in_flight.resize(s + 1, 0);
        }
        match started {
            true => self.in_flight[s] += 1,
            false => self.in_flight[s] -= 1,
        }
    }

    /// Whether a batch planned for slot `s` is in flight.
    fn slot_busy(&self, s: usize) -> bool {
        self.in_flight.get(s).is_some_and(|&n| n > 0)
    }

    /// After a malformed field at `at` (a CSV file's key, a task's first line): starts only
    /// the ready batches that read that file before that line, while workers are free.
    fn fill_earlier(&mut self, at: &(String, u64)) {
        let mut k = 0;
        while self.active < self.workers && k < self.ready.len() {
            let i = self.ready[k];
            if csv_first_line(&self.batches[i], &at.0).is_some_and(|l| l < at.1) {
                self.ready.remove(k);
                self.active += 1;
                self.count_in(i, true);
                self.started += 1;
                self.send(i, Duration::ZERO, false);
            } else {
                k += 1;
            }
        }
    }

    /// Sends a backup of every straggler; returns when the next send left would become one.
    fn back_up_stragglers(&mut self) -> Option<Instant> {
        let rule = self.policy.backups.as_ref()?;
        let now = Instant::now();
        let stalled = self.ready.is_empty() && self.running.len() < self.workers;
        let by_median = self.back_up_slow(rule, now, stalled);
        let by_projection = self.back_up_overdue(rule, now, stalled);
        by_median.into_iter().chain(by_projection).min()
    }

    /// Whether batch `i`'s send `seq` still runs and has no backup.
    fn unbacked(&self, i: usize, seq: u32) -> bool {
        let s = &self.state[i];
        !(s.done || s.backed_up || s.seq != seq || s.running == 0)
    }

    /// Whether a backup of a straggler past its due time by `patience` may take a worker
    /// now: when one is free, or when nothing has answered for ten times `patience` (the
    /// pool is stuck: every worker hung). `workers` is the concurrency the user gave (a
    /// Lambda function's reserved concurrency, this machine's cores), and backups past it
    /// only slow everything down (367 of 3,577 naive invocations of a 4 GB fit on 2 cores
    /// were backups before). `Err`: when to look again.
    fn may_back_up(&self, now: Instant, patience: Duration) -> Result<(), Instant> {
        let stuck = self.last_answer + patience * 10;
        if self.running.len() >= self.workers && now < stuck {
            return Err(stuck);
        }
        Ok(())
    }

    /// Cubed's rule ([`Backups`]).
    fn back_up_slow(&mut self, rule: &Backups, now: Instant, stalled: bool) -> Option<Instant> {
        if (self.done as f64) < rule.min_done_fraction * self.started as f64 {
            return None;
        }
        let relief = if stalled { rule.stalled_relief } else { 1.0 };
        let slow = self
            .durations
            .get()?
            .mul_f64(rule.slow_factor * relief)
            .max(rule.min_age);
        while let Some(&Reverse((sent, i, seq))) = self.by_age.peek() {
            if !self.unbacked(i, seq) {
                self.by_age.pop();
                continue;
            }
            if now < sent + slow {
                return Some(sent + slow);
            }
            if let Err(later) = self.may_back_up(now, slow) {
                return Some(later);
            }
            self.by_age.pop();
            self.send(i, Duration::ZERO, true);
        }
        None
    }

    /// The projection's rule ([`Backups`]).
    fn back_up_overdue(&mut self, rule: &Backups, now: Instant, stalled: bool) -> Option<Instant> {
        rule.model.as_ref()?;
        // The heap of the run's state decides (the other one drops its stale entries
        // when its turn comes).
        let k = usize::from(stalled);
        while let Some(&Reverse((at, i, seq, sent))) = self.by_deadline[k].peek() {
            if !self.unbacked(i, seq) {
                self.by_deadline[k].pop();
                continue;
            }
            if now < at {
                return Some(at);
            }
            if let Err(later) = self.may_back_up(now, at - sent) {
                return Some(later);
            }
            self.by_deadline[k].pop();
            tracing::debug!(
                "invocation {i}: {:.1} s old, past its projection",
                (now - sent).as_secs_f64()
            );
            self.send(i, Duration::ZERO, true);
        }
        None
    }

    /// Takes one invocation's outcome: the batch is done, waits for its other copy, is
    /// sent again, or has failed for good.
    fn take(&mut self, o: Outcome) -> Result<Option<(usize, Stats)>, DispatchError> {
        let i = o.batch;
        let s = &mut self.state[i];
        s.running -= 1;
        if s.done {
            return Ok(None); // the slower of a batch and its backup
        }
        let e = match o.result {
            Ok(stats) => {
                tracing::debug!(
                    "invocation {i}: done in {:.3} s ({:.3} s compute, {:.3} s store I/O, read {}, wrote {}, peak {})",
                    o.took.as_secs_f64(),
                    stats.compute_seconds,
                    stats.io_seconds,
                    crate::human::human(stats.bytes_read),
                    crate::human::human(stats.bytes_written),
                    crate::human::mib(stats.peak_memory_bytes)
                );
                s.done = true;
                self.done += 1;
                self.active -= 1;
                self.count_in(i, false);
                self.durations.push(o.took);
                self.total.stats.add(&stats);
                for k in 0..self.dependents[i].len() {
                    let d = self.dependents[i][k];
                    self.state[d].waiting -= 1;
                    if self.state[d].waiting == 0 {
                        self.ready.push_back(d);
                    }
                }
                return Ok(Some((i, stats)));
            }
            Err(e) => e,
        };
        tracing::debug!("invocation {i}: a send failed: {e}");
        if e.too_large() && !o.stored {
            // Lambda refused it inline: send it again by key, at once.
            s.stored = true;
            if s.running == 0 {
                self.total.retries += 1;
                self.send(i, Duration::ZERO, false);
            }
            return Ok(None);
        }
        if s.running > 0 || o.seq != s.seq {
            return Ok(None); // its other copy may still succeed
        }
        let policy = self.policy;
        let pause = match (&e, e.retry()) {
            (InvokeError::Throttled { retry_after, .. }, _) => {
                (s.throttled < policy.throttled_attempts).then(|| {
                    s.throttled += 1;
                    self.total.throttled += 1;
                    policy.backoff(s.throttled, *retry_after)
                })
            }
            (_, Retry::WithinBudget) => {
                let first = *s.first_store_failure.get_or_insert_with(Instant::now);
                (first.elapsed() < policy.store_budget).then(|| {
                    s.store_failures += 1;
                    policy.backoff(s.store_failures, None)
                })
            }
            (_, Retry::Attempts) => {
                s.failures += 1;
                (s.failures < policy.attempts).then(|| policy.backoff(s.failures, None))
            }
            (_, Retry::Never) => None,
        };
        match pause {
            Some(pause) => {
                self.total.retries += 1;
                self.send(i, pause, false);
                Ok(None)
            }
            None => Err(DispatchError {
                batch: i,
                attempts: s.sends,
                error: e,
            }),
        }
    }
}

/// Sends every batch once its dependencies have finished, at most `workers` at a time,
/// with the default [`Policy`].
pub async fn run_batches<I: Invoke>(
    inv: &I,
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
    on_done: impl FnMut(usize, &Stats),
) -> Result<Dispatched, DispatchError> {
    run_batches_with(inv, batches, store, workers, &Policy::default(), on_done).await
}

/// Sends every batch once its dependencies have finished, at most `workers` batches in
/// progress at a time (plus a backup each for stragglers); `on_done` sees each batch's
/// winning stats once. The cost per invocation does not grow with the number of batches:
/// a finished batch releases its own dependents, and only the oldest sends are looked at
/// for stragglers. Cancel-safe: dropping the future cancels what is in flight.
pub async fn run_batches_with<I: Invoke>(
    inv: &I,
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
    policy: &Policy,
    on_done: impl FnMut(usize, &Stats),
) -> Result<Dispatched, DispatchError> {
    run_batches_observed(inv, batches, store, workers, policy, on_done, |_| {}).await
}

/// [`run_batches_with`], and `on_sent` sees every invocation as it answers ([`Sent`]),
/// before `on_done` sees the batch's winning stats.
pub async fn run_batches_observed<I: Invoke>(
    inv: &I,
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
    policy: &Policy,
    mut on_done: impl FnMut(usize, &Stats),
    mut on_sent: impl FnMut(&Sent<'_>),
) -> Result<Dispatched, DispatchError> {
    let n = batches.len();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, b) in batches.iter().enumerate() {
        for &d in &b.deps {
            dependents[d].push(i);
        }
    }
    let mut d = Dispatch {
        inv,
        batches,
        store,
        policy,
        workers: workers.max(1),
        state: batches
            .iter()
            .map(|b| BatchState {
                waiting: b.deps.len() as u32,
                ..BatchState::default()
            })
            .collect(),
        ready: (0..n).filter(|&i| batches[i].deps.is_empty()).collect(),
        dependents,
        running: FuturesUnordered::new(),
        by_age: BinaryHeap::new(),
        by_deadline: [BinaryHeap::new(), BinaryHeap::new()],
        durations: Median::default(),
        last_answer: Instant::now(),
        started: 0,
        done: 0,
        active: 0,
        in_flight: Vec::new(),
        total: Dispatched::default(),
    };
    // A malformed CSV field: the failure met earliest in the file so far, and where.
    let mut bad_field: Option<(DispatchError, (String, u64))> = None;
    while d.done < n {
        match &bad_field {
            None => d.fill(),
            Some((_, at)) => d.fill_earlier(at),
        }
        let wake = d.back_up_stragglers();
        if d.running.is_empty() {
            if bad_field.is_some() {
                break;
            }
            unreachable!("dependency cycle in the batch graph");
        }
        let outcome = match wake {
            Some(at) => tokio::select! {
                o = d.running.next() => o,
                _ = tokio::time::sleep_until(at.into()) => None,
            },
            None => d.running.next().await,
        };
        if let Some(o) = outcome {
            d.last_answer = Instant::now();
            on_sent(&Sent {
                batch: o.batch,
                attempt: o.attempt,
                backup: o.backup,
                started: o.started,
                ended: o.ended,
                result: o.result.as_ref(),
                late: d.state[o.batch].done,
            });
            match d.take(o) {
                Ok(Some((i, stats))) => on_done(i, &stats),
                Ok(None) => {}
                // Blocks are parsed in parallel and the first failure to arrive need not
                // be the file's first bad line: the invocations running finish, and those
                // ready that read the file before it run too (no other work starts);
                // the earliest in the file is the error.
                Err(e) => {
                    let at = csv_place(&batches[e.batch], &e.error);
                    if at.is_none() && bad_field.is_none() {
                        return Err(e);
                    }
                    // A failed batch no longer holds a worker while the others finish.
                    d.active -= 1;
                    d.count_in(e.batch, false);
                    if let Some(at) = at
                        && bad_field.as_ref().is_none_or(|(_, first)| at < *first)
                    {
                        bad_field = Some((e, at));
                    }
                }
            }
        }
    }
    match bad_field {
        Some((e, _)) => Err(e),
        None => Ok(d.total),
    }
}

/// Where a failure of batch `b` lies in a CSV file when it is a task's malformed field:
/// the file's key and the first line of the task that met it (tasks read disjoint lines,
/// and a task reports its own first bad line).
fn csv_place(b: &PlannedBatch, error: &InvokeError) -> Option<(String, u64)> {
    let InvokeError::Function { kind, message, .. } = error else {
        return None;
    };
    if !matches!(kind, ErrorKind::Kernel | ErrorKind::ValueError) {
        return None;
    }
    // The function's `task N (block KEY): ...` (`FnError::Kernel`).
    let n: usize = message
        .strip_prefix("task ")?
        .split(' ')
        .next()?
        .parse()
        .ok()?;
    match &b.batch().tasks.get(n)?.kernel {
        Kernel::ImportCsv { key, line, .. } => Some((key.clone(), *line)),
        _ => None,
    }
}

/// The first line in file `key` of the CSV import tasks of batch `b`, if it has any.
fn csv_first_line(b: &PlannedBatch, key: &str) -> Option<u64> {
    (b.batch().tasks.iter())
        .filter_map(|t| match &t.kernel {
            Kernel::ImportCsv { key: k, line, .. } if k == key => Some(*line),
            _ => None,
        })
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nums_layout::batch::{Batch, BlockRef, Payload, Task};
    use nums_layout::{ErrorKind, StoreSpec};
    use std::collections::HashMap;
    use std::sync::atomic::AtomicUsize;
    use std::sync::atomic::Ordering::SeqCst;
    use std::sync::{Arc, Mutex};

    fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("nums-dispatch-{tag}-{}", std::process::id()));
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        (Store::open(&spec).unwrap(), dir)
    }

    /// What the fake function does with one send of a batch.
    enum Act {
        /// Answers at once.
        Ok,
        /// Answers after a pause.
        OkAfter(Duration),
        Fail(InvokeError),
        FailAfter(Duration, InvokeError),
        /// Never answers (a hung function).
        Hang,
    }

    /// Counts sends in flight while alive (dropped with the send's future).
    struct Gauge(Arc<AtomicUsize>);
    impl Drop for Gauge {
        fn drop(&mut self) {
            self.0.fetch_sub(1, SeqCst);
        }
    }

    /// A fake function: `act(batch, n, stored)` says what the `n`th send (from 1) of a batch
    /// does. Batch i is recognised by its job prefix `b{i}`; its stats carry `tasks = i`.
    struct Fake<F> {
        act: F,
        sends: Mutex<HashMap<usize, u32>>,
        /// Every send: (batch, when, payload by key).
        log: Mutex<Vec<(usize, Instant, bool)>>,
        /// When each batch's successful answer left the function.
        answered: Arc<Mutex<HashMap<usize, Instant>>>,
        in_flight: Arc<AtomicUsize>,
        most_in_flight: AtomicUsize,
    }

    fn fake<F: Fn(usize, u32, bool) -> Act + Sync>(act: F) -> Fake<F> {
        Fake {
            act,
            sends: Mutex::default(),
            log: Mutex::default(),
            answered: Arc::default(),
            in_flight: Arc::default(),
            most_in_flight: AtomicUsize::new(0),
        }
    }

    impl<F> Fake<F> {
        fn sends_of(&self, i: usize) -> u32 {
            self.sends.lock().unwrap().get(&i).copied().unwrap_or(0)
        }
    }

    impl<F: Fn(usize, u32, bool) -> Act + Sync> Invoke for Fake<F> {
        fn invoke(
            &self,
            payload: Vec<u8>,
        ) -> impl Future<Output = Result<Stats, InvokeError>> + Send {
            let (prefix, stored) = match serde_json::from_slice(&payload).unwrap() {
                Payload::Inline(b) => (b.job_prefix, false),
                Payload::Stored { job_prefix, .. } => (job_prefix, true),
            };
            let i: usize = prefix[1..].parse().unwrap();
            let n = {
                let mut s = self.sends.lock().unwrap();
                let n = s.entry(i).or_default();
                *n += 1;
                *n
            };
            self.log.lock().unwrap().push((i, Instant::now(), stored));
            let now = self.in_flight.fetch_add(1, SeqCst) + 1;
            self.most_in_flight.fetch_max(now, SeqCst);
            let gauge = Gauge(self.in_flight.clone());
            let act = (self.act)(i, n, stored);
            let answered = self.answered.clone();
            async move {
                let _gauge = gauge;
                let ok = || {
                    answered.lock().unwrap().insert(i, Instant::now());
                    Ok(Stats {
                        invocations: 1,
                        tasks: i as u64,
                        ..Stats::default()
                    })
                };
                match act {
                    Act::Ok => ok(),
                    Act::OkAfter(d) => {
                        tokio::time::sleep(d).await;
                        ok()
                    }
                    Act::Fail(e) => Err(e),
                    Act::FailAfter(d, e) => {
                        tokio::time::sleep(d).await;
                        Err(e)
                    }
                    Act::Hang => std::future::pending().await,
                }
            }
        }
    }

    fn function_error(kind: ErrorKind) -> InvokeError {
        InvokeError::Function {
            kind,
            error_type: kind.wire_name().into(),
            message: "injected".into(),
        }
    }

    /// `n` empty batches named `b{i}`, batch i depending on `deps(i)`.
    fn plan(n: usize, store: &Store, deps: impl Fn(usize) -> Vec<usize>) -> Vec<PlannedBatch> {
        (0..n)
            .map(|i| {
                PlannedBatch::from_batch(
                    Batch {
                        store: store.spec().clone(),
                        job_prefix: format!("b{i}"),
                        arrays: vec![],
                        tasks: vec![],
                        prefetch_budget: 0,
                    },
                    deps(i),
                )
            })
            .collect()
    }

    /// The default rules with every pause in milliseconds, and no backups.
    fn fast() -> Policy {
        Policy {
            attempts: 3,
            throttled_attempts: 4,
            backoff_base: Duration::from_millis(1),
            backoff_cap: Duration::from_millis(10),
            store_budget: Duration::from_millis(40),
            backups: None,
        }
    }

    /// [`fast`] with Cubed's backup rule, a straggler being at least 20 ms old.
    fn with_backups() -> Policy {
        Policy {
            backups: Some(Backups {
                min_age: Duration::from_millis(20),
                ..Backups::default()
            }),
            ..fast()
        }
    }

    /// Runs `batches` against `f`; returns the totals and which batches `on_done` saw.
    async fn dispatch<F: Fn(usize, u32, bool) -> Act + Sync>(
        f: &Fake<F>,
        batches: &[PlannedBatch],
        store: &Store,
        workers: usize,
        policy: &Policy,
    ) -> (Result<Dispatched, DispatchError>, Vec<usize>) {
        let mut seen = Vec::new();
        let r = run_batches_with(f, batches, store, workers, policy, |i, st| {
            assert_eq!(st.tasks, i as u64, "stats of another batch");
            seen.push(i);
        })
        .await;
        (r, seen)
    }

    /// A malformed CSV field met by several batches at once is reported at the file's
    /// first bad line, whichever failure arrives first: the batches running finish, the
    /// ready ones that read the file before the failure run, and no other starts.
    #[tokio::test]
    async fn a_csv_files_first_bad_line_wins_whichever_fails_first() {
        let (store, dir) = temp_store("fake-csv");
        // Batch i imports the block of the file from line `first(i)`: the ready order is
        // the file's reversed.
        let first = |i: usize| 1 + 100 * (4 - i as u64);
        let mut batches = plan(6, &store, |_| vec![]);
        for (i, b) in batches.iter_mut().enumerate().take(5) {
            let mut batch = b.batch();
            batch.tasks = vec![Task {
                kernel: Kernel::ImportCsv {
                    source: store.spec().clone(),
                    key: "f.csv".into(),
                    start: 0,
                    end: 0,
                    line: first(i),
                    skip: 0,
                    columns: 1,
                    usecols: vec![0],
                    delimiter: b',',
                    dtypes: vec![],
                },
                inputs: vec![],
                output: BlockRef {
                    array: 0,
                    index: vec![i as u64],
                },
                write_output: true,
            }];
            *b = b.with_batch(batch);
        }
        let bad = |i: usize| InvokeError::Function {
            kind: ErrorKind::Kernel,
            error_type: "KernelError".into(),
            message: format!(
                "task 0 (block X/c/{i}): f.csv:{}: column 1: \"x\" is not a number",
                first(i) + 7
            ),
        };
        // Batch 0 (the file's last block) fails at once, batch 2 a little later; batch 1
        // is slow; batch 3 then runs (before 2's lines), batch 4 (the file's first block)
        // too, and is fine; batch 5 (no import) never starts.
        let f = fake(move |i, _, _| match i {
            0 => Act::Fail(bad(0)),
            1 => Act::OkAfter(Duration::from_millis(40)),
            2 => Act::FailAfter(Duration::from_millis(5), bad(2)),
            3 => Act::FailAfter(Duration::from_millis(5), bad(3)),
            _ => Act::Ok,
        });
        let (r, _) = dispatch(&f, &batches, &store, 2, &fast()).await;
        let e = r.unwrap_err();
        assert_eq!(e.batch, 3, "{e}");
        assert!(e.to_string().contains("f.csv:108:"), "{e}");
        assert_eq!(
            (0..6).map(|i| f.sends_of(i)).collect::<Vec<_>>(),
            [1, 1, 1, 1, 1, 0]
        );
        // An error of any other kind still ends the dispatch at once.
        let f = fake(|i, _, _| match i {
            0 => Act::Fail(function_error(ErrorKind::OutOfMemory)),
            _ => Act::OkAfter(Duration::from_millis(20)),
        });
        let (r, _) = dispatch(&f, &batches, &store, 2, &fast()).await;
        assert_eq!(r.unwrap_err().batch, 0);
        assert_eq!(f.sends_of(2), 0);
        std::fs::remove_dir_all(dir).ok();
    }

    /// Every batch runs once, after its dependencies answered, never more than `workers`
    /// at a time, and each batch's own stats reach `on_done`.
    #[tokio::test]
    async fn batches_run_in_dependency_order_within_the_worker_limit() {
        let (store, dir) = temp_store("fake-order");
        let deps = |i: usize| if i < 7 { vec![] } else { vec![i / 3, i - 7] };
        let batches = plan(300, &store, deps);
        let f = fake(|_, _, _| Act::OkAfter(Duration::from_micros(fastrand::u64(0..1500))));
        let (r, mut seen) = dispatch(&f, &batches, &store, 5, &fast()).await;
        let d = r.unwrap();
        assert_eq!(d.stats.invocations, 300);
        assert_eq!(d.stats.tasks, (0..300).sum::<u64>());
        assert_eq!((d.retries, d.throttled, d.backups), (0, 0, 0));
        seen.sort();
        assert_eq!(seen, (0..300).collect::<Vec<_>>());
        assert_eq!(f.most_in_flight.load(SeqCst), 5);
        let answered = f.answered.lock().unwrap();
        for &(i, sent, _) in f.log.lock().unwrap().iter() {
            assert_eq!(f.sends_of(i), 1);
            for dep in deps(i) {
                assert!(
                    answered[&dep] <= sent,
                    "batch {i} sent before {dep} answered"
                );
            }
        }
        std::fs::remove_dir_all(dir).ok();
    }

    /// A crashed process's batch is sent again, up to `attempts` sends in all.
    #[tokio::test]
    async fn crashes_are_resent_a_few_times() {
        let (store, dir) = temp_store("fake-crash");
        let batches = plan(12, &store, |_| vec![]);
        let f = fake(|i, n, _| match (i, n) {
            (3, 1 | 2) => Act::Fail(function_error(ErrorKind::Crashed)),
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 3, &fast()).await.0.unwrap();
        assert_eq!((d.retries, d.stats.invocations), (2, 12));
        assert_eq!(f.sends_of(3), 3);

        let f = fake(|i, _, _| match i {
            5 => Act::Fail(function_error(ErrorKind::Crashed)),
            _ => Act::Ok,
        });
        let e = dispatch(&f, &batches, &store, 3, &fast())
            .await
            .0
            .unwrap_err();
        assert_eq!((e.batch, e.attempts), (5, 3), "{e}");
        assert!(e.to_string().contains("Runtime.ExitError"), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// Out of memory, a timeout, bad data: the same send would fail the same way.
    #[tokio::test]
    async fn failures_that_would_repeat_fail_at_once() {
        let (store, dir) = temp_store("fake-fatal");
        let batches = plan(6, &store, |_| vec![]);
        for kind in [
            ErrorKind::OutOfMemory,
            ErrorKind::TimedOut,
            ErrorKind::MissingBlock,
        ] {
            let f = fake(|i, _, _| match i {
                2 => Act::Fail(function_error(kind)),
                _ => Act::Ok,
            });
            let e = dispatch(&f, &batches, &store, 2, &fast())
                .await
                .0
                .unwrap_err();
            assert_eq!((e.batch, e.attempts), (2, 1), "{e}");
            assert!(
                matches!(&e.error, InvokeError::Function { kind: k, .. } if *k == kind),
                "{e}"
            );
            assert_eq!(f.sends_of(2), 1);
        }
        let api = InvokeError::Api {
            status: Some(403),
            code: Some("AccessDeniedException".into()),
            message: "no".into(),
        };
        let f = fake(|_, _, _| Act::Fail(api.clone()));
        let e = dispatch(&f, &batches, &store, 2, &fast())
            .await
            .0
            .unwrap_err();
        assert_eq!(e.attempts, 1, "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// A throttled send is paused at least Lambda's Retry-After, counted in `throttled`;
    /// a batch throttled past `throttled_attempts` fails as throttled.
    #[tokio::test]
    async fn throttling_is_waited_out_honouring_retry_after() {
        let (store, dir) = temp_store("fake-throttle");
        let batches = plan(3, &store, |_| vec![]);
        let throttled = || InvokeError::Throttled {
            message: "Rate Exceeded.".into(),
            retry_after: Some(Duration::from_millis(8)),
        };
        let f = fake(|i, n, _| match (i, n) {
            (0, 1 | 2) => Act::Fail(throttled()),
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 3, &fast()).await.0.unwrap();
        assert_eq!((d.retries, d.throttled, d.stats.invocations), (2, 2, 3));
        let sends: Vec<Instant> = f
            .log
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.0 == 0)
            .map(|s| s.1)
            .collect();
        assert_eq!(sends.len(), 3);
        for w in sends.windows(2) {
            assert!(w[1] - w[0] >= Duration::from_millis(8), "{:?}", w[1] - w[0]);
        }

        let f = fake(|i, _, _| match i {
            1 => Act::Fail(throttled()),
            _ => Act::Ok,
        });
        let e = dispatch(&f, &batches, &store, 3, &fast())
            .await
            .0
            .unwrap_err();
        assert_eq!((e.batch, e.attempts), (1, 5), "{e}");
        assert!(matches!(e.error, InvokeError::Throttled { .. }), "{e}");
        std::fs::remove_dir_all(dir).ok();
    }

    /// A function's store errors are resent for the store budget, however many sends that
    /// takes, and fail the batch once it is spent.
    #[tokio::test]
    async fn store_errors_are_waited_out_for_the_budget() {
        let (store, dir) = temp_store("fake-store");
        let batches = plan(4, &store, |_| vec![]);
        let f = fake(|i, n, _| match (i, n) {
            (1, ..=6) => Act::Fail(function_error(ErrorKind::Store)),
            _ => Act::Ok,
        });
        let patient = Policy {
            store_budget: Duration::from_secs(10),
            ..fast()
        };
        let d = dispatch(&f, &batches, &store, 2, &patient).await.0.unwrap();
        assert_eq!((d.retries, d.stats.invocations), (6, 4));

        let f = fake(|i, _, _| match i {
            2 => Act::Fail(function_error(ErrorKind::Store)),
            _ => Act::Ok,
        });
        let t = Instant::now();
        let e = dispatch(&f, &batches, &store, 2, &fast())
            .await
            .0
            .unwrap_err();
        assert_eq!(e.batch, 2, "{e}");
        assert!(e.attempts > fast().attempts, "{e}");
        assert!(t.elapsed() >= fast().store_budget, "{:?}", t.elapsed());
        std::fs::remove_dir_all(dir).ok();
    }

    /// A payload Lambda refuses as too large (413) is staged in the store and sent by key.
    #[tokio::test]
    async fn refused_payloads_travel_through_the_store() {
        let (store, dir) = temp_store("fake-413");
        let batches = plan(3, &store, |_| vec![]);
        let f = fake(|_, _, stored| match stored {
            false => Act::Fail(InvokeError::Api {
                status: Some(413),
                code: Some("RequestEntityTooLargeException".into()),
                message: "too large".into(),
            }),
            true => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 3, &fast()).await.0.unwrap();
        assert_eq!((d.retries, d.stats.invocations), (3, 3));
        for (i, b) in batches.iter().enumerate() {
            assert_eq!(f.sends_of(i), 2);
            let staged: Batch = serde_json::from_slice(
                &store.get(&format!("b{i}/_batches/{i}.json")).await.unwrap(),
            )
            .unwrap();
            assert_eq!(staged, b.batch());
        }
        std::fs::remove_dir_all(dir).ok();
    }

    /// A hung send gets one backup once Cubed's rule holds; the backup's answer completes
    /// the batch, and the run does not wait for the hung one.
    #[tokio::test]
    async fn a_straggler_gets_one_backup_and_the_first_answer_wins() {
        let (store, dir) = temp_store("fake-backup");
        let batches = plan(40, &store, |i| if i == 39 { vec![25] } else { vec![] });
        let f = fake(|i, n, _| match (i, n) {
            (25, 1) => Act::Hang,
            _ => Act::Ok,
        });
        let t = Instant::now();
        let (r, mut seen) = dispatch(&f, &batches, &store, 4, &with_backups()).await;
        let d = r.unwrap();
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert_eq!((d.backups, d.retries, d.stats.invocations), (1, 0, 40));
        assert_eq!(f.sends_of(25), 2);
        seen.sort();
        assert_eq!(seen, (0..40).collect::<Vec<_>>());
        // The winner's answer released the batch's dependent.
        assert!(f.answered.lock().unwrap().contains_key(&39));
        std::fs::remove_dir_all(dir).ok();
    }

    /// Slow sends while other batches wait for a worker get no backup: a backup takes a
    /// worker only when one is free, so no more than `workers` sends are ever in flight.
    #[tokio::test]
    async fn backups_take_only_free_workers() {
        let (store, dir) = temp_store("fake-free");
        let batches = plan(40, &store, |_| vec![]);
        let f = fake(|i, _, _| {
            if i % 4 == 0 {
                Act::OkAfter(Duration::from_millis(150))
            } else {
                Act::Ok
            }
        });
        let d = dispatch(&f, &batches, &store, 2, &with_backups())
            .await
            .0
            .unwrap();
        assert_eq!(d.stats.invocations, 40);
        assert_eq!(f.most_in_flight.load(SeqCst), 2);
        // Only the last slow batch may get one, once the queue is empty.
        assert!(d.backups <= 1, "{} backups", d.backups);
        std::fs::remove_dir_all(dir).ok();
    }

    /// With one worker, a hung send blocks everything: it gets its backup before
    /// 10 batches could start (the pool is stuck: every worker hung).
    #[tokio::test]
    async fn a_hung_send_holding_every_worker_gets_a_backup() {
        let (store, dir) = temp_store("fake-stalled");
        let batches = plan(20, &store, |_| vec![]);
        let f = fake(|i, n, _| match (i, n) {
            (3, 1) => Act::Hang,
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 1, &with_backups())
            .await
            .0
            .unwrap();
        assert_eq!((d.backups, d.retries, d.stats.invocations), (1, 0, 20));
        assert_eq!(f.most_in_flight.load(SeqCst), 2);
        std::fs::remove_dir_all(dir).ok();
    }

    /// Two workers, a hung send, and every other batch waiting for it (a plan of few
    /// batches, as LSHS makes): nothing else can start, so the finished ones decide and
    /// the hung send gets its backup (Cubed's rule would wait for 10 to start).
    #[tokio::test]
    async fn a_hung_send_that_the_rest_wait_for_gets_a_backup() {
        let (store, dir) = temp_store("fake-waited-for");
        // Batches 0-3 free; 4-11 all wait for batch 2.
        let batches = plan(12, &store, |i| if i >= 4 { vec![2] } else { vec![] });
        let f = fake(|i, n, _| match (i, n) {
            (2, 1) => Act::Hang,
            _ => Act::Ok,
        });
        let d = tokio::time::timeout(
            Duration::from_secs(5),
            dispatch(&f, &batches, &store, 2, &with_backups()),
        )
        .await
        .expect("no backup: the dispatch hangs")
        .0
        .unwrap();
        assert_eq!((d.backups, d.stats.invocations), (1, 12));
        std::fs::remove_dir_all(dir).ok();
    }

    /// A run of one batch has no statistics to call it slow: the projection does, once
    /// the send is `overdue_factor` times older than its projected duration.
    #[tokio::test]
    async fn a_lone_hung_send_gets_a_backup_past_its_projection() {
        let (store, dir) = temp_store("fake-overdue");
        let batches = plan(1, &store, |_| vec![]);
        let f = fake(|_, n, _| if n == 1 { Act::Hang } else { Act::Ok });
        let model = crate::cost::CostModel {
            invoke_s: 0.01,
            ..crate::cost::LOCAL
        };
        let mut policy = with_backups();
        if let Some(b) = &mut policy.backups {
            b.model = Some(model);
            b.min_overdue = Duration::from_millis(50);
        }
        let d = tokio::time::timeout(
            Duration::from_secs(5),
            dispatch(&f, &batches, &store, 2, &policy),
        )
        .await
        .expect("no backup: the dispatch hangs")
        .0
        .unwrap();
        assert_eq!((d.backups, d.stats.invocations), (1, 1));
        // Without the model, Cubed's rule alone waits for a finished invocation that
        // never comes: the dispatch is still waiting after a second.
        let f = fake(|_, n, _| if n == 1 { Act::Hang } else { Act::Ok });
        let waited = tokio::time::timeout(
            Duration::from_secs(1),
            dispatch(&f, &batches, &store, 2, &with_backups()),
        )
        .await;
        assert!(waited.is_err(), "a backup without a projection");
        std::fs::remove_dir_all(dir).ok();
    }

    /// A copy that fails while its twin still runs does not fail the batch, nor does a
    /// loser failing after the batch is done; when both copies fail, the batch is resent.
    #[tokio::test]
    async fn one_copy_failing_waits_for_the_other() {
        let (store, dir) = temp_store("fake-twins");
        let batches = plan(30, &store, |i| if i == 29 { vec![10] } else { vec![] });
        let ms = Duration::from_millis;
        // The original fails while its backup runs; the backup answers later.
        let f = fake(|i, n, _| match (i, n) {
            (10, 1) => Act::FailAfter(ms(400), function_error(ErrorKind::TimedOut)),
            (10, 2) => Act::OkAfter(ms(800)),
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 4, &with_backups())
            .await
            .0
            .unwrap();
        assert_eq!((d.backups, d.retries), (1, 0));
        // The backup answers first; the original's crash, later, is ignored.
        let f = fake(|i, n, _| match (i, n) {
            (10, 1) => Act::FailAfter(ms(400), function_error(ErrorKind::Crashed)),
            (29, _) => Act::OkAfter(ms(600)),
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 4, &with_backups())
            .await
            .0
            .unwrap();
        // (Batch 29, slow, got a backup too.)
        assert_eq!((d.backups, d.retries), (2, 0));
        // Both copies crash: the batch is sent again (and gets no second backup).
        let f = fake(|i, n, _| match (i, n) {
            (10, 1) => Act::FailAfter(ms(300), function_error(ErrorKind::Crashed)),
            (10, 2) => Act::FailAfter(ms(300), function_error(ErrorKind::Crashed)),
            (10, 3) => Act::OkAfter(ms(100)),
            _ => Act::Ok,
        });
        let d = dispatch(&f, &batches, &store, 4, &with_backups())
            .await
            .0
            .unwrap();
        assert_eq!((d.backups, d.retries), (1, 1));
        assert_eq!(f.sends_of(10), 3);
        std::fs::remove_dir_all(dir).ok();
    }

    /// With fewer than half of the started invocations finished, hung sends get no
    /// backup; and dropping the dispatch cancels every send in flight (Ctrl-C drops it).
    #[tokio::test]
    async fn no_backup_below_the_rule_and_dropping_cancels_everything() {
        let (store, dir) = temp_store("fake-cancel");
        let batches = plan(5, &store, |_| vec![]);
        let f = fake(|i, _, _| match i {
            0..=2 => Act::Hang,
            _ => Act::Ok,
        });
        let policy = with_backups();
        let run = dispatch(&f, &batches, &store, 3, &policy);
        assert!(
            tokio::time::timeout(Duration::from_millis(200), run)
                .await
                .is_err()
        );
        assert_eq!(f.sends_of(2), 1);
        assert_eq!(f.in_flight.load(SeqCst), 0, "a send outlived the dispatch");

        let f = fake(|_, _, _| Act::Hang);
        let run = dispatch(&f, &batches, &store, 3, &policy);
        assert!(
            tokio::time::timeout(Duration::from_millis(50), run)
                .await
                .is_err()
        );
        assert_eq!(f.in_flight.load(SeqCst), 0, "a send outlived the dispatch");
        let sent = f.log.lock().unwrap().len();
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert_eq!(
            f.log.lock().unwrap().len(),
            sent,
            "sends after the dispatch was dropped"
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn running_median() {
        let mut m = Median::default();
        assert_eq!(m.get(), None);
        let mut all = Vec::new();
        for _ in 0..101 {
            let d = Duration::from_micros(fastrand::u64(0..1000));
            m.push(d);
            all.push(d);
            all.sort();
            let k = all.len();
            let want = if k % 2 == 1 {
                all[k / 2]
            } else {
                (all[k / 2 - 1] + all[k / 2]) / 2
            };
            assert_eq!(m.get(), Some(want));
        }
    }
}
