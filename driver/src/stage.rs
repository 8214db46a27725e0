//! The stage runner: every stage of a run goes through [`Stages::run`] — the CSV count
//! before the job is checked, each boolean mask's stage, the making of a fit's X and y,
//! every pass of a fit, the main stage, and the export of large `.npy` outputs to S3. One
//! place gives each stage the run's backend, the journal (`--resume` skips the batches an
//! earlier run finished), the dispatcher's policy, the `--stats` record of every
//! invocation, the progress, and the explanation of a failure.
//!
//! What happens reaches the caller through an [`Observer`] (as Cubed's executor callbacks
//! do): [`History`] keeps what `--stats` reports, `progress::Progress` draws the bar. A
//! stage never calls back up into the run.

use std::collections::{BTreeSet, HashSet};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::anyhow;
use nums_layout::batch::Stats;
use nums_layout::{ErrorKind, Store, StoredArray};

use crate::backend::Backend;
use crate::config::{Compute, EngineConfig};
use crate::dispatch::{DispatchError, Dispatched, InvokeError, Sent};
use crate::graph::{self, Graph, NodeOp};
use crate::human::plural;
use crate::invocation::Invocation;
use crate::job::Job;
use crate::report::FitReport;
use crate::reports::Heard;
use crate::runs::Run;
use crate::sched::{Plan, PlannedBatch};
use crate::tasks;

/// A stage begins.
pub(crate) struct StageStart<'a> {
    pub stage: &'a str,
    /// Invocations it sends now, and those a resumed run skips (finished before).
    pub to_run: u64,
    pub skipped: u64,
    /// The block tasks of the invocations it sends.
    pub tasks: u64,
    /// Those invocations as the cost model projects them on the stage's workers (each
    /// one's start, end and tasks, in seconds from the stage's start).
    pub projected: &'a [Invocation],
    /// Its invocations report as they run ([`Observer::on_heard`]): local function
    /// processes do; Lambda's answer once.
    pub reported: bool,
}

/// What the progress total expects of stages not started yet.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(crate) struct Expected {
    pub invocations: u64,
    pub tasks: u64,
    /// Their projected wall time.
    pub seconds: f64,
}

impl Expected {
    /// What `plan` is expected to send, as projected on `cfg`'s workers.
    pub(crate) fn of(cfg: &EngineConfig, plan: &Plan) -> Expected {
        Expected {
            invocations: plan.batches.len() as u64,
            tasks: plan.batches.iter().map(|b| b.num_tasks() as u64).sum(),
            seconds: crate::plan::project(cfg, plan, true).wall_seconds,
        }
    }
}

/// A batch of a stage finished: the stats of the invocation that did it, and the memory
/// it was allowed (its projection, or `memory_mb` when that is more).
pub(crate) struct BatchEnd<'a> {
    pub stage: &'a str,
    pub batch: usize,
    pub stats: &'a Stats,
    pub allowed_peak: u64,
}

/// What a caller sees of the stages it runs. Every method has a default that ignores it.
pub(crate) trait Observer: Send + Sync {
    fn on_stage_start(&self, _e: &StageStart<'_>) {}
    /// Each invocation as it answers (failed ones, retries, backups and late copies too).
    fn on_invocation(&self, _r: &Invocation) {}
    fn on_batch_end(&self, _e: &BatchEnd<'_>) {}
    /// What a running invocation of stage `stage` reported, or that it ended: always
    /// before its batch's [`Observer::on_batch_end`].
    fn on_heard(&self, _stage: &str, _h: &Heard) {}
    /// A stage finished: its dispatcher's counters (retries, throttling, backups).
    fn on_stage_end(&self, _stage: &str, _counters: &Dispatched) {}
    /// What a long stage is at, in words (a fit's iteration, loss and gradient).
    fn on_note(&self, _text: &str) {}
    /// What is still to come in the stages of `what` (`main`, a fit's `fit<N>`) that have
    /// not started: a progress total that counts them.
    fn on_expect(&self, _what: &str, _e: &Expected) {}
    /// The plan of the stages of `what` (`main`) is made, projected to take `seconds`.
    fn on_planned(&self, _what: &str, _plan: &Plan, _seconds: f64) {}
    /// Node `node`, a model, is fitted.
    fn on_fit(&self, _node: graph::NodeId, _fit: &FitReport) {}
}

/// Two observers, each seeing everything.
impl<A: Observer + ?Sized, B: Observer + ?Sized> Observer for (&A, &B) {
    fn on_stage_start(&self, e: &StageStart<'_>) {
        self.0.on_stage_start(e);
        self.1.on_stage_start(e);
    }
    fn on_invocation(&self, r: &Invocation) {
        self.0.on_invocation(r);
        self.1.on_invocation(r);
    }
    fn on_batch_end(&self, e: &BatchEnd<'_>) {
        self.0.on_batch_end(e);
        self.1.on_batch_end(e);
    }
    fn on_heard(&self, stage: &str, h: &Heard) {
        self.0.on_heard(stage, h);
        self.1.on_heard(stage, h);
    }
    fn on_stage_end(&self, stage: &str, counters: &Dispatched) {
        self.0.on_stage_end(stage, counters);
        self.1.on_stage_end(stage, counters);
    }
    fn on_note(&self, text: &str) {
        self.0.on_note(text);
        self.1.on_note(text);
    }
    fn on_expect(&self, what: &str, e: &Expected) {
        self.0.on_expect(what, e);
        self.1.on_expect(what, e);
    }
    fn on_planned(&self, what: &str, plan: &Plan, seconds: f64) {
        self.0.on_planned(what, plan, seconds);
        self.1.on_planned(what, plan, seconds);
    }
    fn on_fit(&self, node: graph::NodeId, fit: &FitReport) {
        self.0.on_fit(node, fit);
        self.1.on_fit(node, fit);
    }
}

/// What a run measured, stage after stage: the `--stats` figures. Kept by the caller
/// (outside the run's future), so that a failed or interrupted run reports it too.
#[derive(Default)]
pub(crate) struct Recorded {
    pub dispatched: Dispatched,
    pub skipped: u64,
    /// Invocations that peaked over what they were allowed: (stage, batch, measured,
    /// allowed).
    pub over: Vec<(String, usize, u64, u64)>,
    /// Every invocation, as it answered.
    pub timeline: Vec<Invocation>,
    pub fits: Vec<FitReport>,
    /// The main stage's largest projected batch peak, and its projected wall seconds.
    pub projected_peak: u64,
    pub projected_main: f64,
}

/// The [`Observer`] that keeps the run's [`Recorded`] figures (Cubed's `HistoryCallback`).
#[derive(Default)]
pub(crate) struct History(Mutex<Recorded>);

impl History {
    fn with<T>(&self, f: impl FnOnce(&mut Recorded) -> T) -> T {
        f(&mut self.0.lock().unwrap_or_else(|p| p.into_inner()))
    }

    pub(crate) fn into_inner(self) -> Recorded {
        self.0.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

impl Observer for History {
    fn on_stage_start(&self, e: &StageStart<'_>) {
        self.with(|r| r.skipped += e.skipped)
    }
    fn on_invocation(&self, i: &Invocation) {
        self.with(|r| r.timeline.push(i.clone()))
    }
    fn on_batch_end(&self, e: &BatchEnd<'_>) {
        self.with(|r| {
            r.dispatched.stats.add(e.stats);
            // The functions spend the headroom between the projected peak and the memory
            // limit on reads ahead, writes behind and kept blocks: over is over both.
            if e.stats.peak_memory_bytes > e.allowed_peak {
                let over = (e.stats.peak_memory_bytes, e.allowed_peak);
                r.over.push((e.stage.to_string(), e.batch, over.0, over.1));
            }
        })
    }
    fn on_stage_end(&self, _stage: &str, counters: &Dispatched) {
        self.with(|r| {
            r.dispatched.merge(&Dispatched {
                stats: Default::default(),
                ..counters.clone()
            })
        })
    }
    fn on_planned(&self, what: &str, plan: &Plan, seconds: f64) {
        if what == "main" {
            self.with(|r| {
                r.projected_peak = r.projected_peak.max(plan.max_projected_peak());
                r.projected_main = seconds;
            })
        }
    }
    fn on_fit(&self, _node: graph::NodeId, fit: &FitReport) {
        self.with(|r| r.fits.push(fit.clone()))
    }
}

/// Runs the stages of one computation: a job's run (or, before the run exists, its CSV
/// count), or a session's compute.
pub(crate) struct Stages<'a> {
    /// What the stages run with (the compute settings, the store's spec).
    pub cfg: EngineConfig,
    /// The job file whose words the errors use (its name, its arrays' lines); `None` for
    /// a session's compute, whose errors name the user's expressions instead.
    pub origin: Option<&'a Job>,
    pub store: &'a Store,
    backend: &'a Backend,
    /// What the stages' arrays are stored under (`<job>/_runs/<run>`, a session's
    /// `<session>/c<N>`); `None` before a run exists (the CSV count plans no graph).
    prefix: Option<String>,
    /// The run whose journal records the finished batches (and whose resumed journal
    /// skips them); a session's computes are not resumed.
    journal: Option<&'a Run>,
    observer: &'a dyn Observer,
    /// What the arrays the stages keep say of themselves ([`Attrs`]); `None`: they get no
    /// `zarr.json` (a session's compute in its own process, whose arrays only it reads,
    /// with their metadata in hand).
    attrs: Option<&'a Attrs<'a>>,
    /// When the computation started: the records' times count from it.
    t0: Instant,
    /// What the backend's log folder is named after, if a stage of these starts it.
    log_id: String,
    /// The paths of the imports a finished stage wrote: later stages read them there
    /// (a CSV that a fit's X and y and the main stage all load is parsed once).
    made: Mutex<HashSet<String>>,
}

impl<'a> Stages<'a> {
    pub(crate) fn new(
        cfg: EngineConfig,
        origin: Option<&'a Job>,
        store: &'a Store,
        backend: &'a Backend,
        observer: &'a dyn Observer,
        t0: Instant,
        log_id: &str,
    ) -> Stages<'a> {
        Stages {
            cfg,
            origin,
            store,
            backend,
            prefix: None,
            journal: None,
            observer,
            attrs: Some(&no_attrs),
            t0,
            log_id: log_id.to_string(),
            made: Mutex::default(),
        }
    }

    /// These stages as run `run`'s: stored under its prefix, its journal kept.
    pub(crate) fn in_run(self, run: &'a Run) -> Stages<'a> {
        Stages {
            prefix: Some(run.prefix()),
            journal: Some(run),
            ..self
        }
    }

    /// These stages storing under `prefix`, with no journal (a session's compute).
    pub(crate) fn under(self, prefix: &str) -> Stages<'a> {
        Stages {
            prefix: Some(prefix.to_string()),
            ..self
        }
    }

    /// These stages describing the arrays they keep with `attrs`.
    pub(crate) fn describing(self, attrs: &'a Attrs<'a>) -> Stages<'a> {
        Stages {
            attrs: Some(attrs),
            ..self
        }
    }

    /// These stages writing no `zarr.json`: nothing but this process reads what they keep,
    /// and a metadata write is a store round trip a small compute must not make.
    pub(crate) fn undescribed(self) -> Stages<'a> {
        Stages {
            attrs: None,
            ..self
        }
    }

    /// Gives the array at `path` its `zarr.json` where these stages wrote none (see
    /// [`Stages::undescribed`]) and something is to read it as any Zarr array is read
    /// (a fit's passes load X and y so).
    pub(crate) async fn describe(
        &self,
        path: &str,
        meta: &nums_layout::ArrayMeta,
    ) -> anyhow::Result<()> {
        if self.attrs.is_some() {
            return Ok(());
        }
        let arr = StoredArray::new(path, meta.clone())?;
        if self.store.head(&arr.metadata_key()).await?.is_none() {
            arr.write_metadata(self.store).await?;
        }
        Ok(())
    }

    /// `g` with the imports an earlier stage of the run wrote read where they are.
    pub(crate) fn with_made_imports(&self, g: &Graph) -> anyhow::Result<Graph> {
        let made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        Ok(read_made_imports(g, &self.prefix()?, &made))
    }

    /// Passes a note on to the observer (see [`Observer::on_note`]).
    pub(crate) fn note(&self, text: &str) {
        self.observer.on_note(text)
    }

    /// Tells the observer what is still to come (see [`Observer::on_expect`]).
    pub(crate) fn expect(&self, what: &str, e: &Expected) {
        self.observer.on_expect(what, e)
    }

    /// What the stages' arrays are stored under (see [`Stages::in_run`]).
    pub(crate) fn prefix(&self) -> anyhow::Result<String> {
        self.prefix
            .clone()
            .ok_or_else(|| anyhow!("a stage of a graph runs within a run or a compute"))
    }

    /// Passes a fitted model on to the observer (see [`Observer::on_fit`]).
    pub(crate) fn fitted(&self, node: graph::NodeId, fit: &FitReport) {
        self.observer.on_fit(node, fit)
    }

    /// Tells the observer a stage's plan (see [`Observer::on_planned`]).
    pub(crate) fn planned(&self, what: &str, plan: &Plan) {
        let seconds = crate::plan::project(&self.cfg, plan, false).wall_seconds;
        self.observer.on_planned(what, plan, seconds)
    }

    /// The plan of `g` stored under `prefix`, placed where the backend's processes hold
    /// its inputs in memory.
    pub(crate) fn plan(
        &self,
        g: &Graph,
        prefix: &str,
        probes: &graph::Probes,
    ) -> anyhow::Result<Plan> {
        let held = self.backend.residency().filter(|r| !r.is_empty());
        crate::plan::plan_for(&self.cfg, g, prefix, probes, self.origin, held)
    }

    /// Plans `g` (a part of the job's graph) and runs it as stage `name`.
    pub(crate) async fn run_graph(
        &self,
        name: &str,
        g: &Graph,
        probes: &graph::Probes,
    ) -> anyhow::Result<()> {
        let prefix = self.prefix()?;
        let g = self.with_made_imports(g)?;
        let plan = self.plan(&g, &prefix, probes)?;
        self.run_plan(name, &g, &plan).await
    }

    /// Runs stage `name`, the plan of `g`: the arrays it keeps described as it runs, its
    /// batches resumable; a task's linear-algebra failure named by the job-file array.
    pub(crate) async fn run_plan(&self, name: &str, g: &Graph, plan: &Plan) -> anyhow::Result<()> {
        let prefix = self.prefix()?;
        // The metadata is written beside the batches: no task reads it.
        let (described, ran) = tokio::join!(
            describe_staged(g, &prefix, self.attrs, self.store),
            self.run(name, &plan.batches, plan.tasks as u64, Resume::Skip)
        );
        ran.map_err(|e| match self.origin {
            Some(job) => name_linalg_failure(e, job, g, &prefix),
            None => e,
        })?;
        described?;
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        made.extend(imports_of(g, &prefix));
        Ok(())
    }

    /// Runs `batches` as stage `name` (`tasks` block tasks): in dependency order on the
    /// run's backend, every invocation recorded and observed. With [`Resume::Skip`] the
    /// batches finished go to the run's journal, and a resumed run skips those an earlier
    /// run finished (verified: every block they write is in the store). Returns the
    /// stage's dispatch totals.
    pub(crate) async fn run(
        &self,
        name: &str,
        batches: &[PlannedBatch],
        tasks: u64,
        resume: Resume,
    ) -> anyhow::Result<Dispatched> {
        let (compute, store) = (&self.cfg.compute, self.store);
        let invoker = self.backend.start(&self.log_id).await?;
        let journal = self.journal.filter(|_| resume == Resume::Skip);
        let done = match journal.and_then(|r| Some((r, r.resumed.as_ref()?.done.get(name)?))) {
            Some((run, claimed)) if !claimed.is_empty() => {
                verified_done(batches, claimed, store, run).await?
            }
            _ => Default::default(),
        };
        let pending: Vec<usize> = (0..batches.len()).filter(|i| !done.contains(i)).collect();
        let mut new_index = vec![usize::MAX; batches.len()];
        for (k, &i) in pending.iter().enumerate() {
            new_index[i] = k;
        }
        let todo: Vec<PlannedBatch> = pending
            .iter()
            .map(|&i| {
                let mut b = batches[i].clone();
                b.deps = b
                    .deps
                    .iter()
                    .filter(|&&d| !done.contains(&d))
                    .map(|&d| new_index[d])
                    .collect();
                b
            })
            .collect();
        if let (false, Some(run)) = (done.is_empty(), journal) {
            tracing::info!(
                "resuming run {}: {} of {} of stage {name} finished before; {} to go",
                run.id,
                done.len(),
                plural(batches.len() as u64, "invocation", "invocations"),
                todo.len()
            );
        }
        tracing::debug!(
            "stage {name}: {} ({} to run), {}, scheduler {:?}",
            plural(batches.len() as u64, "invocation", "invocations"),
            todo.len(),
            plural(tasks, "task", "tasks"),
            compute.scheduler
        );
        let model = crate::cost::CostModel::for_config(&self.cfg);
        let projected = {
            let planned: Vec<_> = (todo.iter())
                .map(|b| (b.work(), b.deps.as_slice(), b.projected_peak, b.slot))
                .collect();
            let (workers, mb) = (compute.workers, compute.memory_mb);
            crate::cost::project(model, workers, mb, &planned, 0, 0).timeline
        };
        // What local function processes report while the stage's invocations run.
        let listening = (todo.first()).and_then(|b| self.backend.listen(&b.batch().job_prefix));
        self.observer.on_stage_start(&StageStart {
            stage: name,
            to_run: todo.len() as u64,
            skipped: done.len() as u64,
            tasks: todo.iter().map(|b| b.num_tasks() as u64).sum(),
            projected: &projected,
            reported: listening.is_some(),
        });
        let hear = || {
            for h in listening.iter().flat_map(|l| l.drain()) {
                self.observer.on_heard(name, &h);
            }
        };
        let on_done = |k: usize, stats: &Stats| {
            // Its reports were sent before it answered: they come first.
            hear();
            let i = pending[k];
            if let Some(run) = journal {
                run.done(name, i);
            }
            if let (Some(r), Some(p)) = (self.backend.residency(), stats.process) {
                r.ran(
                    p as usize,
                    stats.process_generation.unwrap_or(0),
                    &batches[i].batch(),
                );
            }
            self.observer.on_batch_end(&BatchEnd {
                stage: name,
                batch: i,
                stats,
                allowed_peak: batches[i].projected_peak.max(compute.memory_mb << 20),
            });
        };
        let on_sent = |s: &Sent<'_>| {
            let i = pending[s.batch];
            let mut r = record(name, i, &batches[i], s, self.t0);
            r.projected_seconds = model.batch_seconds(&batches[i].work());
            self.observer.on_invocation(&r);
        };
        let mut policy = crate::dispatch::Policy::default();
        if let Some(b) = &mut policy.backups {
            b.model = Some(crate::cost::CostModel::for_config(&self.cfg));
        }
        let workers = compute.workers;
        let dispatch = crate::dispatch::run_batches_observed(
            invoker, &todo, store, workers, &policy, on_done, on_sent,
        );
        let result = match &listening {
            None => dispatch.await,
            Some(l) => {
                tokio::pin!(dispatch);
                loop {
                    tokio::select! {
                        r = &mut dispatch => break r,
                        _ = l.heard() => hear(),
                    }
                }
            }
        };
        hear();
        if let Some(run) = journal {
            let _ = run.flush().await;
        }
        let d = result.map_err(|e| {
            crate::error::Explained::into_anyhow(explain(&e, compute, self.origin, name), e)
        })?;
        self.observer.on_stage_end(name, &d);
        Ok(d)
    }
}

/// Whether a stage's finished batches go to the run's journal, for a resumed run to skip.
/// A fit's passes never do: each sends the same batches with new parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Resume {
    Skip,
    Never,
}

/// One invocation's `--stats` record.
fn record(stage: &str, batch: usize, b: &PlannedBatch, s: &Sent<'_>, t0: Instant) -> Invocation {
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let zero = Stats::default();
    let st = s.result.unwrap_or(&zero);
    Invocation {
        stage: stage.to_string(),
        batch,
        slot: 0,
        planned_slot: b.slot,
        start: secs(s.started),
        end: secs(s.ended),
        tasks: b.num_tasks() as u64,
        bytes_read: st.bytes_read,
        bytes_written: st.bytes_written,
        function_seconds: st.wall_seconds,
        compute_seconds: st.compute_seconds,
        io_seconds: st.io_seconds,
        peak_memory_bytes: st.peak_memory_bytes,
        projected_peak_memory_bytes: b.projected_peak,
        projected_seconds: 0.0,
        attempt: s.attempt,
        backup: s.backup,
        status: match (&s.result, s.late) {
            (Err(_), _) => "failed",
            (Ok(_), true) => "late",
            (Ok(_), false) => "ok",
        }
        .into(),
        error: s.result.err().map(|e| e.to_string()),
    }
}

/// Of the batches an earlier run says it finished, those whose every written block is in
/// the store (one listing of the run's prefix).
async fn verified_done(
    batches: &[PlannedBatch],
    claimed: &BTreeSet<usize>,
    store: &Store,
    run: &Run,
) -> anyhow::Result<HashSet<usize>> {
    let present: HashSet<String> = store
        .list_sizes(&run.prefix())
        .await?
        .into_iter()
        .filter(|(_, size)| *size > 0)
        .map(|(k, _)| k)
        .collect();
    Ok(claimed
        .iter()
        .copied()
        .filter(|&i| i < batches.len())
        .filter(|&i| {
            let b = &batches[i].batch();
            b.tasks.iter().filter(|t| t.write_output).all(|t| {
                let a = &b.arrays[t.output.array as usize];
                present.contains(&nums_layout::zarr::chunk_key(&a.path, &t.output.index))
            })
        })
        .collect())
}

/// A failed dispatch in the job's words, with a hint where one helps. A failure of the
/// data (a malformed field, a missing or corrupt block, a singular matrix) leads with
/// what the function said of it (the array, file, line or block); the invocation that met
/// it follows on a line of its own.
fn explain(e: &DispatchError, compute: &Compute, origin: Option<&Job>, stage: &str) -> String {
    // A job's errors say which job; a session's are about the expression the user wrote.
    let job = origin.map_or(String::new(), |j| format!("job {}: ", j.name));
    if let InvokeError::Function {
        kind:
            ErrorKind::Kernel
            | ErrorKind::LinAlg
            | ErrorKind::ValueError
            | ErrorKind::TypeError
            | ErrorKind::ZeroDivisionError
            | ErrorKind::MissingBlock
            | ErrorKind::CorruptBlock
            | ErrorKind::BadArray,
        error_type,
        message,
    } = &e.error
    {
        // The function's `task N (block KEY): what` (`FnError::Kernel`).
        let (task, what) = match message
            .strip_prefix("task ")
            .and_then(|m| m.split_once("): "))
        {
            Some((task, what)) => (format!(", task {task})"), what),
            None => (String::new(), message.as_str()),
        };
        let what = if what.starts_with("array ") {
            what.to_string()
        } else {
            format!("{job}{what}")
        };
        return format!(
            "{what}\n  ({error_type} in invocation {} of stage {stage}{task}, after {})",
            e.batch,
            plural(u64::from(e.attempts), "attempt", "attempts")
        );
    }
    let hint = match &e.error {
        InvokeError::Function {
            kind: ErrorKind::OutOfMemory,
            ..
        } => format!(
            "\n  hint: a batch needs more than memory_mb = {}; raise [compute] memory_mb or give smaller `block` shapes",
            compute.memory_mb
        ),
        // Lambda reports a timeout as either, depending on the runtime's age.
        InvokeError::Function {
            kind: ErrorKind::TimedOut,
            ..
        } => {
            format!(
                "\n  hint: raise [compute] timeout_seconds (now {}) or give smaller `block` shapes",
                compute.timeout_seconds
            )
        }
        InvokeError::Throttled { .. } => format!(
            "\n  hint: Lambda kept throttling: lower [compute] workers (now {}) or raise the function's reserved concurrency",
            compute.workers
        ),
        _ => String::new(),
    };
    format!("{job}{e}{hint}")
}

/// A task's LinAlgError (a singular matrix, one not positive definite) as an error of the
/// job-file array whose definition made the failed block: its key and line, NumPy's words.
fn name_linalg_failure(e: anyhow::Error, job: &Job, g: &Graph, prefix: &str) -> anyhow::Error {
    const MARK: &str = nums_function::linalg::LINALG_ERROR;
    let msg = format!("{e:#}");
    let Some(at) = msg.rfind(MARK) else {
        return e;
    };
    // NumPy's words, up to the line that says which invocation met them.
    let words = msg[at..].lines().next().unwrap_or_default();
    let Some(node) = g
        .nodes
        .iter()
        .find(|n| msg.contains(&format!("{}/", tasks::node_path(prefix, g, n.id))))
    else {
        return e;
    };
    let Some(name) = node.def.as_ref().or(node.name.as_ref()) else {
        return e;
    };
    let line = job
        .arrays
        .iter()
        .find(|a| &a.name == name)
        .map_or(0, |a| a.line);
    anyhow!(job.err(line, format!("arrays.{name}"), words.to_string()))
}

/// What a computation's kept arrays say of themselves in their `zarr.json` attributes:
/// `complete`, what made them and nums-cloud's version are added to what this gives.
pub(crate) type Attrs<'a> = dyn Fn(&graph::Node) -> serde_json::Value + Send + Sync + 'a;

/// No attributes of one's own (a CSV count keeps no array).
fn no_attrs(_: &graph::Node) -> serde_json::Value {
    serde_json::json!({})
}

/// The attributes of a job's run's arrays: the job, the run, the array and its source.
pub(crate) fn job_attrs(
    job: &Job,
    run: String,
) -> impl Fn(&graph::Node) -> serde_json::Value + Send + Sync + '_ {
    move |n: &graph::Node| {
        let def = (n.name.as_ref()).and_then(|k| job.arrays.iter().find(|a| &a.name == k));
        serde_json::json!({
            "job": job.name,
            "run": run,
            "array": n.name,
            "source": def.map(|d| d.source.describe()),
        })
    }
}

/// Stages what a computation keeps: the `zarr.json` of every array it makes and keeps
/// (with attributes saying what made it). Its blocks come from the stage's tasks
/// (imports too). No `attrs`: nothing.
async fn describe_staged(
    g: &Graph,
    prefix: &str,
    attrs: Option<&Attrs<'_>>,
    store: &Store,
) -> anyhow::Result<()> {
    let Some(attrs) = attrs else {
        return Ok(());
    };
    for n in &g.nodes {
        if matches!(n.op, NodeOp::InPlace { .. }) || !n.persist {
            continue; // read in place: never written; intermediates need no metadata
        }
        let arr = StoredArray::new(&tasks::node_path(prefix, g, n.id), n.meta.clone())?;
        let mut a = attrs(n);
        if let Some(m) = a.as_object_mut() {
            m.insert("complete".into(), true.into());
            m.insert("version".into(), env!("CARGO_PKG_VERSION").into());
        }
        // Inputs (`.npy`, CSV, Parquet, foreign Zarr) are imported by the functions.
        arr.write_metadata_with(store, Some(a)).await?;
    }
    Ok(())
}

/// For `run --keep`: gives the intermediates the run wrote whole a `zarr.json` (saying
/// which job-file array made them), so that they can be opened after the run. One written
/// only in part (a plan writes a block only where another invocation reads it) gets none:
/// its missing blocks would read as the fill value.
pub(crate) async fn describe_kept(
    job: &Job,
    g: &Graph,
    run: &Run,
    store: &Store,
) -> anyhow::Result<()> {
    let prefix = run.prefix();
    let mut written: std::collections::HashMap<String, u64> = Default::default();
    for key in store.list(&format!("{prefix}/tmp/")).await? {
        if let Some((array, _)) = key.split_once("/c/") {
            *written.entry(array.to_string()).or_default() += 1;
        }
    }
    let (mut whole, mut part) = (0, 0);
    for n in &g.nodes {
        if n.persist || matches!(n.op, NodeOp::InPlace { .. }) {
            continue;
        }
        let path = tasks::node_path(&prefix, g, n.id);
        match written.get(&path) {
            Some(&k) if k == n.meta.num_blocks() => whole += 1,
            Some(_) => {
                part += 1;
                continue;
            }
            None => continue,
        }
        let attrs = serde_json::json!({
            "complete": true,
            "job": job.name,
            "run": run.id,
            "intermediate_of": n.def.as_ref().or(n.name.as_ref()),
            "version": env!("CARGO_PKG_VERSION"),
        });
        StoredArray::new(&path, n.meta.clone())?
            .write_metadata_with(store, Some(attrs))
            .await?;
    }
    tracing::info!(
        "--keep: {whole} intermediates written whole are described under {prefix}/tmp/ \
         ({part} written only in part have no zarr.json)"
    );
    Ok(())
}

/// Where the named imports of `g` are written during run `prefix` (`<prefix>/out/NAME`,
/// the same in any part of the job's graph).
pub(crate) fn imports_of<'g>(g: &'g Graph, prefix: &'g str) -> impl Iterator<Item = String> + 'g {
    (g.nodes.iter())
        .filter(|n| n.op.is_import() && n.persisted_name().is_some())
        .map(move |n| tasks::node_path(prefix, g, n.id))
}

/// `g` with the imports written at `made` (by an earlier stage of run `prefix`) read there
/// in place: still kept by the run, which commits them, but not imported again.
pub(crate) fn read_made_imports(g: &Graph, prefix: &str, made: &HashSet<String>) -> Graph {
    let mut out = g.clone();
    for n in &mut out.nodes {
        if !(n.op.is_import() && n.persisted_name().is_some()) {
            continue;
        }
        let path = tasks::node_path(prefix, g, n.id);
        if made.contains(&path) {
            n.op = NodeOp::InPlace {
                path,
                sparse: false,
                foreign: None,
            };
        }
    }
    out
}
