//! `nums-cloud run`: check the whole job, take its lease and start a run (`crate::runs`),
//! then import inputs, dispatch the batches, commit the outputs atomically, export them and
//! report what was measured — for a failed or interrupted run too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use futures::{StreamExt, TryStreamExt};
use ndarray::SliceInfoElem;
use nums_layout::{ArrayMeta, Block, ErrorKind, IoCounters, Store, StoredArray};

use crate::dispatch::{Dispatched, Invoker, run_batches_observed};
use crate::graph::{self, Graph, NodeOp};
use crate::job::{Backend, Defaults, Job, SchedulerKind, Target};
use crate::local::{LocalConfig, LocalEndpoint};
use crate::report::Report;
use crate::runs::Run;
use crate::sched::PlannedBatch;
use crate::tasks;

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Keep the run's intermediates in the store after it succeeds.
    pub keep: bool,
    pub progress: bool,
    /// Resume the latest earlier run of the same job (killed, failed or interrupted):
    /// only the batches whose outputs are missing run again.
    pub resume: bool,
    /// The local function process; default: [`default_function_command`].
    pub function_command: Option<Vec<String>>,
    /// What the job file leaves out (from `--infra`, or nums-cloud's own defaults).
    pub defaults: Defaults,
    /// Stop the run on Ctrl-C (SIGINT), keeping its state: the CLI's choice. A library
    /// leaves it off, as listening for SIGINT takes the default (exit) away from the
    /// whole program for good.
    pub ctrl_c: bool,
}

/// A checked job, ready to run: nothing has been written yet.
pub struct Checked {
    pub job: Job,
    /// With every boolean mask assumed to select everything (the largest the job can be).
    pub graph: Graph,
    /// What the job's inputs hold, as read before the graph was built.
    pub probes: graph::Probes,
    pub store: Store,
    /// The first boolean mask whose values the graph waits for, if any.
    pub mask: Option<graph::NodeId>,
}

/// A run that did not finish: what it measured until then, and why it stopped. Its
/// state stays in the store for `--resume`.
#[derive(Debug)]
pub struct RunFailed {
    pub report: Box<Report>,
    pub error: anyhow::Error,
    /// Stopped by Ctrl-C (SIGINT) rather than by an error.
    pub interrupted: bool,
    /// The local function processes' logs (kept after a failed run; removed after a
    /// successful one).
    pub logs: Vec<PathBuf>,
}

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)?;
        if !self.logs.is_empty() {
            write!(f, "\n  function logs (kept):")?;
            for l in &self.logs {
                write!(f, "\n    {}", l.display())?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for RunFailed {}

/// Everything that can be checked before anything runs: the file, names, shapes, dtypes,
/// input files, and that the store answers.
pub async fn check(path: &Path) -> anyhow::Result<Checked> {
    check_with(path, &Defaults::default()).await
}

/// [`check`], with `defaults` for what the job file leaves out.
pub async fn check_with(path: &Path, defaults: &Defaults) -> anyhow::Result<Checked> {
    check_job(Job::load_with(path, defaults)?).await
}

/// What `plan` needs of [`check_with`]: the inputs probed and the graph built, without
/// proving that the stores take writes, so that planning a job that reads nothing stored
/// needs no store and no credentials.
pub async fn check_for_plan(path: &Path, defaults: &Defaults) -> anyhow::Result<Checked> {
    check_parts(Job::load_with(path, defaults)?, false).await
}

/// Checks a parsed job: probes its inputs (the only reads), builds the graph (pure), and
/// proves that every store it writes to answers and takes writes.
pub async fn check_job(job: Job) -> anyhow::Result<Checked> {
    check_parts(job, true).await
}

async fn check_parts(job: Job, writable: bool) -> anyhow::Result<Checked> {
    check_counted(job, writable, &Default::default(), &Default::default()).await
}

/// [`check_parts`] with the rows of large CSV inputs counted by the functions; the
/// driver's requests (the probe's too) count into `io`.
async fn check_counted(
    job: Job,
    writable: bool,
    counted: &graph::Counted,
    io: &Arc<IoCounters>,
) -> anyhow::Result<Checked> {
    let probes = graph::probe_with(&job, counted, io).await?;
    let (graph, mask) = match graph::build_staged(&job, &probes, &Default::default())? {
        graph::Built::Done(g) => (g, None),
        graph::Built::NeedMask { graph, mask } => (graph, Some(mask)),
    };
    let store = Store::open_counted(&job.storage, io)
        .map_err(|e| job.err(job.storage_line, "storage.url", e.to_string()))?;
    if writable {
        check_stores_take_writes(&job, &store).await?;
    }
    Ok(Checked {
        job,
        graph,
        probes,
        store,
        mask,
    })
}

/// The job's store and every Zarr output's store take writes (`check` and `run`).
async fn check_stores_take_writes(job: &Job, store: &Store) -> anyhow::Result<()> {
    check_writable(store, &format!("{}/{}", job.name, crate::runs::RUNS))
        .await
        .map_err(|e| job.err(job.storage_line, "storage.url", e))?;
    for o in &job.outputs {
        let (spec, path) = match &o.target {
            Target::Zarr { store, path: key } | Target::NpyStore { store, key } => {
                (store, key.as_str())
            }
            _ => continue,
        };
        // The probe object goes in the folder the output goes in, never inside an array
        // (another writer of it would find a stranger there).
        let folder = path.rsplit_once('/').map_or("", |k| k.0);
        {
            let key = format!("outputs.{}", o.name);
            let s = Store::open_counted(spec, &store.counters)
                .map_err(|e| job.err(o.line, &key, e.to_string()))?;
            if matches!(o.target, Target::Zarr { .. }) {
                replaceable(&s, path)
                    .await
                    .map_err(|e| job.err(o.line, &key, e))?;
            }
            check_writable(&s, folder)
                .await
                .map_err(|e| job.err(o.line, &key, e))?;
        }
    }
    Ok(())
}

/// Whether an output may replace what is at `path` in `store`: nothing, a Zarr array, or
/// the chunks an interrupted write of one leaves (`c/...` without metadata); never a file,
/// a group, a part of an array, or a folder of other files or arrays (all of which the
/// output's write would delete).
pub(crate) async fn replaceable(store: &Store, path: &str) -> Result<(), String> {
    let at = format!("{}/{}", store.spec().url.trim_end_matches('/'), path);
    let refused = |what: String| {
        Err(format!(
            "{at} is {what}: an output replaces a Zarr array (or a new path), never anything else"
        ))
    };
    let e = |e: nums_layout::Error| e.to_string();
    if let Some(array) = enclosing_array(store, path).await? {
        return refused(format!("inside the Zarr array {array}"));
    }
    if store.head(path).await.map_err(e)?.is_some() {
        return refused("a file, not a Zarr array".into());
    }
    let (objects, folders) = store.list_dir(path).await.map_err(e)?;
    let (v3, v2) = (
        objects.iter().any(|n| n == "zarr.json"),
        objects.iter().any(|n| n == ".zarray"),
    );
    let digits = |n: &str| {
        n.split('.')
            .all(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    // Chunk keys: `c/0/1` and `c.0.1` (Zarr v3), `0.1` and `0/1` (v2, and v3 with v2 keys).
    let chunk = |n: &str| n == "c" || n.starts_with("c.") || ((v3 || v2) && digits(n));
    let others: Vec<&str> = objects
        .iter()
        .filter(|n| !matches!(n.as_str(), "zarr.json" | ".zarray" | ".zattrs") && !chunk(n))
        .chain(folders.iter().filter(|n| !chunk(n)))
        .map(String::as_str)
        .collect();
    if !others.is_empty() {
        let shown: Vec<&str> = others.iter().take(3).copied().collect();
        return refused(format!(
            "a folder that holds {}{}, not a Zarr array",
            shown.join(", "),
            if others.len() > 3 { ", ..." } else { "" }
        ));
    }
    if v3 {
        let meta = store.get(&format!("{path}/zarr.json")).await.map_err(e)?;
        match zarr_node_type(&meta).as_deref() {
            Some("array") => {}
            kind => {
                return refused(format!(
                    "a Zarr {}",
                    kind.unwrap_or("node of unreadable metadata")
                ));
            }
        }
    } else if !v2 && folders.iter().any(|f| f == "c") {
        // No metadata: only what an interrupted write of an array leaves, chunks.
        let keys = store.list(&format!("{path}/c")).await.map_err(e)?;
        let below = |k: &String| k.get(path.len() + 3..).unwrap_or("").to_string();
        if let Some(k) = keys.iter().find(|k| !below(k).split('/').all(digits)) {
            return refused(format!("a folder without Zarr metadata that holds {k}"));
        }
    }
    Ok(())
}

/// The `node_type` a `zarr.json` says.
fn zarr_node_type(meta: &[u8]) -> Option<String> {
    serde_json::from_slice::<serde_json::Value>(meta)
        .ok()?
        .get("node_type")?
        .as_str()
        .map(str::to_string)
}

/// The Zarr array that `path` of `store` lies inside, if any: one whose metadata is in a
/// folder above it (in the store, or above a local store's folder).
async fn enclosing_array(store: &Store, path: &str) -> Result<Option<String>, String> {
    let segs: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    for n in 0..segs.len() {
        let dir = segs[..n].join("/");
        let key = |f: &str| {
            if dir.is_empty() {
                f.to_string()
            } else {
                format!("{dir}/{f}")
            }
        };
        let v2 = store
            .head(&key(".zarray"))
            .await
            .map_err(|e| e.to_string())?;
        let v3 = store
            .get_opt(&key("zarr.json"))
            .await
            .map_err(|e| e.to_string())?;
        if v2.is_some() || v3.is_some_and(|m| zarr_node_type(&m).as_deref() == Some("array")) {
            return Ok(Some(format!(
                "{}/{dir}",
                store.spec().url.trim_end_matches('/')
            )));
        }
    }
    let above = store.local_folder().into_iter().flat_map(Path::ancestors);
    for d in above {
        let v3 = std::fs::read(d.join("zarr.json")).ok();
        if d.join(".zarray").is_file()
            || v3.is_some_and(|m| zarr_node_type(&m).as_deref() == Some("array"))
        {
            return Ok(Some(d.display().to_string()));
        }
    }
    Ok(None)
}

/// Proves that a store answers and takes writes under `prefix` (a small object written
/// and removed), so that a read-only store or bucket fails at `check`, not mid-run.
async fn check_writable(store: &Store, prefix: &str) -> Result<(), String> {
    store.check().await.map_err(|e| e.to_string())?;
    let key = format!(
        "{}/.nums-cloud-check-{}",
        prefix.trim_matches('/'),
        std::process::id()
    );
    store
        .put(&key, bytes::Bytes::from_static(b"check"))
        .await
        .map_err(|e| format!("the store does not take writes: {e}"))?;
    store
        .delete(&key)
        .await
        .map_err(|e| format!("the store does not take deletes: {e}"))
}

/// Checks and runs the job file at `path`.
pub async fn run(path: &Path, opts: &RunOptions) -> anyhow::Result<Report> {
    run_job(Job::load_with(path, &opts.defaults)?, opts).await
}

/// A job's fingerprint: `--resume` continues only a run of the same job on the same inputs
/// (the probes hold each input file's version).
fn fingerprint(job: &Job, probes: &graph::Probes) -> crate::runs::Fingerprint {
    let mut probes: Vec<_> = probes.0.iter().collect();
    probes.sort_by(|a, b| a.0.cmp(b.0));
    let text = format!("{job:?}{probes:?}");
    crate::runs::Fingerprint {
        hash: format!("{:016x}", fnv(text.as_bytes())),
        inputs: probes.iter().map(|(_, p)| p.version()).collect(),
    }
}

/// What a run has measured so far (kept outside the run's future, so that a failed or
/// interrupted run still reports it).
#[derive(Default)]
struct Measured {
    dispatched: Dispatched,
    tasks: usize,
    projected_peak: u64,
    /// The cost model's projection of the main stage's wall seconds.
    projected_main: f64,
    over: Vec<(usize, u64, u64)>,
    skipped: u64,
    fits: Vec<crate::iterate::FitReport>,
    /// When the run started, and every invocation since (`--stats`' timeline).
    t0: Option<Instant>,
    timeline: Vec<crate::report::Invocation>,
    /// One progress bar for every stage of the run (hidden when off), and the main
    /// stage's invocations as first planned (counted in the bar's total until it runs).
    bar: Option<indicatif::ProgressBar>,
    main_estimate: u64,
}

/// Checks and runs a parsed job. On failure the error is a [`RunFailed`] carrying the
/// report of what ran.
pub async fn run_job(job: Job, opts: &RunOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    let bar = progress_bar(opts.progress, 0);
    // The driver's own requests, to every store it touches.
    let io = Arc::default();
    let (counted, counting, count_timeline) =
        crate::csv_count::count(&job, opts, started, &bar, &io).await?;
    let checked = check_counted(job, true, &counted, &io).await?;
    let job = &checked.job;
    let store = &checked.store;
    // Refused here, before the run makes anything, if it cannot fit (boolean masks
    // assumed to select everything: the largest the job can be).
    let main_estimate = plan_job(job, &checked.graph, &dry_run_prefix(job), &checked.probes)?
        .batches
        .len() as u64;
    let run = Run::start(
        store,
        &job.name,
        &fingerprint(job, &checked.probes),
        opts.resume,
        output_leases(job, store)?,
    )
    .await
    .map_err(|e| anyhow!("{}: {e}", job.file.display()))?;
    // Partial files a killed writer of the job's `.npy` and `.csv` outputs left (their
    // leases are this run's now).
    for o in &job.outputs {
        if let Target::Npy(p) | Target::Csv(p) = &o.target {
            let _ = std::fs::remove_file(crate::npy::partial_path(p));
        }
    }
    if !run.removed.is_empty() {
        tracing::info!(
            "removed the state of {} earlier unfinished run(s) of job {} ({})",
            run.removed.len(),
            job.name,
            run.removed.join(", ")
        );
    }
    match &run.not_resumed {
        Some(why) => tracing::warn!("not resuming job {}: {why}; running it afresh", job.name),
        None if opts.resume && run.resumed.is_none() => tracing::info!(
            "no earlier run of job {} to resume; running it whole",
            job.name
        ),
        None => {}
    }
    let scheduler = format!("{:?}", job.compute.scheduler).to_lowercase();
    let backend = match start_backend(job, opts, &run.id).await {
        Ok(b) => b,
        Err(e) => {
            let _ = run.finish(true).await;
            return Err(e);
        }
    };
    let measured = std::sync::Mutex::new(Measured {
        // The CSV counts' invocations are the run's too.
        dispatched: counting,
        timeline: count_timeline,
        t0: Some(started),
        bar: Some(bar.clone()),
        main_estimate,
        ..Measured::default()
    });
    let result = tokio::select! {
        r = execute(&checked, &run, &backend.0, opts, &measured) => r.map_err(|e| (e, false)),
        _ = ctrl_c(opts.ctrl_c, &run) => Err((anyhow!("interrupted (Ctrl-C)"), true)),
    };
    bar.finish_and_clear();
    // The local function processes' logs: removed after a successful run, listed with
    // the error of a failed one.
    let log_dir = backend.1.as_ref().map(|ep| ep.log_dir().to_path_buf());
    if let Some(ep) = backend.1 {
        ep.stop().await;
    }
    let m = measured.into_inner().unwrap_or_else(|p| p.into_inner());
    let report = |outputs| {
        let mut r = Report::new(
            job,
            &scheduler,
            m.tasks,
            m.dispatched.clone(),
            store,
            started.elapsed(),
            outputs,
        );
        r.run = run.id.clone();
        r.projected_peak_memory_bytes = m.projected_peak;
        r.projected_main_seconds = m.projected_main;
        r.invocations_over_projection = m.over.len() as u64;
        r.skipped_batches = m.skipped;
        r.fits = m.fits.clone();
        r.timeline = m.timeline.clone();
        crate::report::assign_slots(&mut r.timeline);
        r
    };
    match result {
        Ok(outputs) => {
            if let Some(d) = &log_dir {
                let _ = std::fs::remove_dir_all(d);
            }
            let report = report(outputs);
            let prefix = run.prefix();
            run.finish(!opts.keep)
                .await
                .map_err(|e| anyhow!("job {}: {e}", job.name))?;
            if opts.keep {
                tracing::info!("the run's intermediates are kept under {prefix}/");
            }
            for (i, measured, projected) in &m.over {
                tracing::warn!(
                    "invocation {i} peaked at {:.1} MiB, over the {:.1} MiB it was planned within",
                    *measured as f64 / (1 << 20) as f64,
                    *projected as f64 / (1 << 20) as f64
                );
            }
            Ok(report)
        }
        Err((error, interrupted)) => {
            // Made before `finish` takes the run.
            let mut report = report(Vec::new());
            let logs = log_dir
                .as_deref()
                .map(crate::local::logs_in)
                .unwrap_or_default();
            let prefix = run.prefix();
            // --stats gives the error itself, without the advice added below.
            let mut stated = format!("{error:#}");
            // A run that lost the race for the job's lease (it started before learning
            // so) fails for that reason, whatever else went wrong; its state is dropped.
            let error = match run.confirm_lease().await {
                Err(lost) => {
                    let _ = run.finish(true).await;
                    let error = anyhow!("{}: {lost}", job.file.display());
                    stated = format!("{error:#}");
                    error
                }
                Ok(()) => match run.finish(false).await {
                    Ok(()) => error.context(format!(
                        "job {}: the run's state is kept under {prefix}/: `nums-cloud run --resume {}` \
                         recomputes only what is missing (a run without --resume removes it)",
                        job.name,
                        job.file.display()
                    )),
                    Err(e) => error.context(format!("job {}: {e}", job.name)),
                },
            };
            report.status = if interrupted { "interrupted" } else { "failed" }.into();
            report.error = Some(stated);
            report.function_logs = logs.clone();
            Err(RunFailed {
                report: Box::new(report),
                error,
                interrupted,
                logs,
            }
            .into())
        }
    }
}

/// A task's LinAlgError (a singular matrix, one not positive definite) as an error of the
/// job-file array whose definition made the failed block: its key and line, NumPy's words.
fn name_linalg_failure(e: anyhow::Error, job: &Job, g: &Graph, prefix: &str) -> anyhow::Error {
    const MARK: &str = nums_function::linalg::LINALG_ERROR;
    let msg = format!("{e:#}");
    let Some(at) = msg.rfind(MARK) else {
        return e;
    };
    let words = &msg[at..];
    let Some(node) = g
        .nodes
        .iter()
        .find(|n| msg.contains(&format!("{}/", crate::tasks::node_path(prefix, g, n.id))))
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

/// Resolves at Ctrl-C when `listen`; never otherwise.
async fn ctrl_c(listen: bool, run: &crate::runs::Run) {
    if !listen || tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await
    }
    // A commit cut short would leave the job's arrays half moved until its next run.
    while run.committing() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Where the local function processes of run `run_id` write their output:
/// `nums-cloud-<pid>-<run>` in the system's temporary folder (`$TMPDIR`, else `/tmp`).
pub fn local_log_dir(run_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nums-cloud-{}-{run_id}", std::process::id()))
}

/// The invoker for the job's backend, and the local endpoint when it is local.
pub(crate) async fn start_backend(
    job: &Job,
    opts: &RunOptions,
    run_id: &str,
) -> anyhow::Result<(Invoker, Option<LocalEndpoint>)> {
    Ok(match job.compute.backend {
        Backend::Local => {
            let command = match &opts.function_command {
                Some(c) => c.clone(),
                None => default_function_command()?,
            };
            let ep = LocalEndpoint::start(LocalConfig {
                function: job.compute.function.clone(),
                workers: job.compute.workers,
                memory_mb: job.compute.memory_mb,
                timeout: Duration::from_secs(job.compute.timeout_seconds),
                command,
                log_dir: local_log_dir(run_id),
            })
            .await?;
            (
                Invoker::local(&ep.invoke_url, &job.compute.function),
                Some(ep),
            )
        }
        Backend::Lambda => (Invoker::lambda(&job.compute.function).await, None),
    })
}

/// Everything a run does between taking its lease and giving it back: the masks' stages,
/// imports, the main stage, the check that inputs read in place did not change, the
/// commit, and the exports. Returns the outputs for the summary.
async fn execute(
    c: &Checked,
    run: &Run,
    invoker: &Invoker,
    opts: &RunOptions,
    measured: &std::sync::Mutex<Measured>,
) -> anyhow::Result<Vec<Output>> {
    let (job, store) = (&c.job, &c.store);
    let prefix = run.prefix();
    upload_local_inputs(c, run).await?;
    let g = resolve_masks(c, run, invoker, measured).await?;
    let plan = plan_job(job, &g, &prefix, &c.probes)?;
    {
        let mut m = measured.lock().expect("measured");
        m.tasks += plan.tasks;
        m.projected_peak = m.projected_peak.max(plan.max_projected_peak());
        m.projected_main = crate::planview::projection(job, &plan).wall_seconds;
    }
    fit_models(c, &g, run, invoker, opts, measured).await?;
    describe_staged(job, &g, run, store).await?;
    dispatch_stage(job, "main", &plan, run, invoker, store, measured)
        .await
        .map_err(|e| name_linalg_failure(e, job, &g, &prefix))?;
    check_inputs_unchanged(c).await?;
    if opts.keep {
        describe_kept(job, &g, run, store).await?;
    }
    // An output written elsewhere (a .npy file, another Zarr path) is exported from the
    // run's staged copy, which goes with the run's state: the store keeps no second copy
    // at `<job>/<name>` unless `--keep` asks for it.
    let elsewhere: std::collections::HashSet<&str> = job
        .outputs
        .iter()
        .filter(|o| {
            !opts.keep && !writes_home(job, store, o) && !g.nodes[g.named[&o.name]].op.is_import()
        })
        .map(|o| o.name.as_str())
        .collect();
    let names: Vec<String> = g
        .nodes
        .iter()
        .filter(|n| n.persist && !matches!(n.op, NodeOp::InPlace { .. }))
        .filter_map(|n| n.name.clone())
        .filter(|n| !elsewhere.contains(n.as_str()))
        .collect();
    run.commit(&names)
        .await
        .map_err(|e| anyhow!("job {}: {e}", job.name))?;
    let mut outputs = Vec::new();
    for o in &job.outputs {
        let id = g.named[&o.name];
        let path = match &g.nodes[id].op {
            NodeOp::InPlace { path, .. } => path.clone(),
            _ if elsewhere.contains(o.name.as_str()) => tasks::node_path(&prefix, &g, id),
            _ => format!("{}/{}", job.name, o.name),
        };
        let arr = StoredArray::new(&path, g.nodes[id].meta.clone())?;
        if let Target::NpyStore { store: spec, key } = &o.target {
            let stage = Stage {
                job,
                run,
                invoker,
                store,
                measured,
                probes: &c.probes,
            };
            export_npy_to_s3(&stage, &arr, spec, key, &o.name)
                .await
                .with_context(|| format!("output {}", o.name))?;
        }
        let preview = export(&arr, &o.target, store)
            .await
            .with_context(|| format!("output {}", o.name))?;
        outputs.push((o.name.clone(), o.target.clone(), arr.meta.clone(), preview));
    }
    Ok(outputs)
}

type Output = (String, Target, ArrayMeta, Option<Block>);

/// The leases a run of `job` takes for its outputs that are not its own arrays (those
/// are the job lease's), so that no other writer writes one at once: `(store, key, output)`.
fn output_leases(job: &Job, store: &Store) -> anyhow::Result<Vec<(Store, String, String)>> {
    let mut leases = Vec::new();
    for o in job.outputs.iter().filter(|o| !writes_home(job, store, o)) {
        let (spec, key) = lease_beside(&o.target);
        let s = Store::open_counted(&spec, &store.counters)
            .with_context(|| format!("output {}", o.name))?;
        leases.push((s, key, o.target.place().display().to_string()));
    }
    Ok(leases)
}

/// The store and key of the lease of an output at `target`: `.<name>.nums-cloud-lease.json`
/// in the folder the output goes in, in the output's own store.
pub(crate) fn lease_beside(target: &Target) -> (nums_layout::StoreSpec, String) {
    let (spec, path) = match target {
        Target::Npy(p) | Target::Csv(p) => {
            let dir = p.parent().unwrap_or(Path::new("/"));
            let spec = nums_layout::StoreSpec {
                url: url::Url::from_directory_path(dir)
                    .map(|u| u.to_string())
                    .unwrap_or_default(),
                endpoint: None,
            };
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            (spec, name.into_owned())
        }
        Target::NpyStore { store, key: path } | Target::Zarr { store, path } => {
            (store.clone(), path.clone())
        }
    };
    let key = match path.rsplit_once('/') {
        Some((dir, name)) => format!("{dir}/.{name}.nums-cloud-lease.json"),
        None => format!(".{path}.nums-cloud-lease.json"),
    };
    (spec, key)
}

/// Whether output `o` is the job's own array `<job>/<name>` in the job's store.
fn writes_home(job: &Job, store: &Store, o: &crate::job::OutputDef) -> bool {
    matches!(&o.target, Target::Zarr { store: spec, path }
        if graph::relative_to(store.spec(), spec, path) == Some(format!("{}/{}", job.name, o.name)))
}

/// Uploads the local `.npy`, CSV and Parquet inputs that the functions read from the
/// job's bucket (the lambda backend), streamed in parts.
async fn upload_local_inputs(c: &Checked, run: &Run) -> anyhow::Result<()> {
    let uploads: Vec<_> = (c.probes.0.iter())
        .filter_map(|(name, p)| Some((name, p.upload()?)))
        .collect();
    if !uploads.is_empty() {
        // Their keys are shared by every run of the job: the lease must be ours.
        run.confirm_lease().await?;
    }
    for (name, (file, key)) in uploads {
        c.store
            .put_file(key, file)
            .await
            .with_context(|| format!("input {name}: uploading {}", file.display()))?;
    }
    Ok(())
}

/// Runs one stage (a plan) of the run, skipping the batches a resumed run finished
/// already — verified: every block such a batch writes is in the store.
#[allow(clippy::too_many_arguments)]
async fn dispatch_stage(
    job: &Job,
    stage: &str,
    plan: &crate::sched::Plan,
    run: &Run,
    invoker: &Invoker,
    store: &Store,
    measured: &std::sync::Mutex<Measured>,
) -> anyhow::Result<()> {
    let batches = &plan.batches;
    let done = match run.resumed.as_ref().and_then(|j| j.done.get(stage)) {
        Some(claimed) if !claimed.is_empty() => verified_done(batches, claimed, store, run).await?,
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
    measured.lock().expect("measured").skipped += done.len() as u64;
    if !done.is_empty() {
        tracing::info!(
            "resuming run {}: {} of {} invocations of stage {stage} finished before; {} to go",
            run.id,
            done.len(),
            batches.len(),
            todo.len()
        );
    }
    tracing::debug!(
        "stage {stage}: {} invocations ({} to run), {} tasks, scheduler {:?}",
        batches.len(),
        todo.len(),
        plan.tasks,
        job.compute.scheduler
    );
    // The bar's total: what ran, this stage, and the main stage as planned when this is
    // a boolean mask's stage (the main plan waits for the mask's values).
    let bar = {
        let mut m = measured.lock().expect("measured");
        let bar = m.bar.clone().unwrap_or_else(indicatif::ProgressBar::hidden);
        if stage == "main" {
            m.main_estimate = 0; // running now: stages after it add only their own
        }
        let after = m.main_estimate;
        bar.set_length(bar.position() + todo.len() as u64 + after);
        bar
    };
    let on_done = |k: usize, st: &nums_layout::batch::Stats| {
        bar.inc(1);
        let i = pending[k];
        run.done(stage, i);
        let mut m = measured.lock().expect("measured");
        m.dispatched.stats.add(st);
        let moved = m.dispatched.stats.bytes_read + m.dispatched.stats.bytes_written;
        bar.set_message(crate::report::human(moved));
        // The functions spend the headroom between the projected peak and the memory
        // limit on reads ahead, writes behind and kept blocks: over is over both.
        let allowed = batches[i].projected_peak.max(job.compute.memory_mb << 20);
        if st.peak_memory_bytes > allowed {
            m.over.push((i, st.peak_memory_bytes, allowed));
        }
    };
    let on_sent = |s: &crate::dispatch::Sent<'_>| {
        let mut m = measured.lock().expect("measured");
        let t0 = m.t0.unwrap_or(s.started);
        m.timeline.push(record(
            stage,
            pending[s.batch],
            &batches[pending[s.batch]],
            s,
            t0,
        ));
    };
    let mut policy = crate::dispatch::Policy::default();
    if let Some(b) = &mut policy.backups {
        b.model = Some(crate::cost::CostModel::for_job(job));
    }
    let workers = job.compute.workers;
    let result =
        run_batches_observed(invoker, &todo, store, workers, &policy, on_done, on_sent).await;
    let _ = run.flush().await;
    let d = result.map_err(|e| crate::error::Explained::into_anyhow(explain(&e, job), e))?;
    // The stats were added per invocation above; the counters come from the dispatcher.
    let mut m = measured.lock().expect("measured");
    m.dispatched.merge(&crate::dispatch::Dispatched {
        stats: Default::default(),
        ..d
    });
    Ok(())
}

/// One invocation's `--stats` record.
pub(crate) fn record(
    stage: &str,
    batch: usize,
    b: &PlannedBatch,
    s: &crate::dispatch::Sent<'_>,
    t0: Instant,
) -> crate::report::Invocation {
    let secs = |t: Instant| t.saturating_duration_since(t0).as_secs_f64();
    let zero = nums_layout::batch::Stats::default();
    let st = s.result.unwrap_or(&zero);
    crate::report::Invocation {
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
    claimed: &std::collections::BTreeSet<usize>,
    store: &Store,
    run: &Run,
) -> anyhow::Result<std::collections::HashSet<usize>> {
    let present: std::collections::HashSet<String> = store
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

/// No input may have changed while the run read it (a file written again, a Zarr array
/// replaced by another run or job): a mix of old and new blocks would be a wrong answer.
async fn check_inputs_unchanged(c: &Checked) -> anyhow::Result<()> {
    // Read at once: on S3 each is a round trip after the main stage.
    let checks = c.probes.0.iter().map(|(name, probe)| async move {
        let (path, then) = probe.version();
        if probe
            .version_now(&c.job, &c.store.counters)
            .await?
            .as_deref()
            != Some(&then)
        {
            let why = match probe {
                graph::Probe::Zarr {
                    in_place: Some(_), ..
                } => " (another run of its job committed)",
                _ => "",
            };
            return Err(anyhow!(
                "input {name} ({path}) changed while this run read it{why}; nothing was \
                 committed: run this job again"
            ));
        }
        Ok(())
    });
    futures::future::try_join_all(checks).await?;
    Ok(())
}

/// Fits the job's models (`Fit` nodes) before the main stage, which reads their
/// coefficients like stored blocks: X and y are made once in a stage of their own when
/// the job makes them (read in place when they are stored), then `iterate::fit` runs the
/// passes.
async fn fit_models(
    c: &Checked,
    g: &Graph,
    run: &Run,
    invoker: &Invoker,
    opts: &RunOptions,
    measured: &std::sync::Mutex<Measured>,
) -> anyhow::Result<()> {
    let (job, store) = (&c.job, &c.store);
    let prefix = run.prefix();
    let work = tasks::block_work(g);
    for n in &g.nodes {
        let NodeOp::Fit { x, y, spec } = &n.op else {
            continue;
        };
        if !(n.persist || work.needed(n.id)) {
            continue;
        }
        let array = n
            .name
            .clone()
            .or_else(|| n.def.clone())
            .unwrap_or_else(|| "a model".into());
        let about = |e: anyhow::Error| {
            e.context(format!(
                "array `{array}`: {}",
                crate::models::describe(spec)
            ))
        };
        let mut paths = [String::new(), String::new()];
        let mut made = Vec::new();
        for (i, (v, what)) in [(*x, "X"), (*y, "y")].into_iter().enumerate() {
            paths[i] = match &g.nodes[v].op {
                NodeOp::InPlace { path, .. } => path.clone(),
                _ => {
                    // Not an identifier, so never the name of one of the job's arrays.
                    let name = format!("fit{}-{what}", n.id);
                    let (sub, root) = g.subgraph(v, &name);
                    let sub_plan = plan_job(job, &sub, &prefix, &c.probes)?;
                    measured.lock().expect("measured").tasks += sub_plan.tasks;
                    describe_staged(job, &sub, run, store).await?;
                    dispatch_stage(job, &name, &sub_plan, run, invoker, store, measured).await?;
                    let path = tasks::node_path(&prefix, &sub, root);
                    made.push(path.clone());
                    path
                }
            };
        }
        let mx = &g.nodes[*x].meta;
        let data = crate::iterate::Data {
            job,
            x_path: &paths[0],
            y_path: &paths[1],
            n: mx.shape[0],
            d: mx.shape[1] as usize,
            prefix: format!("{prefix}/fit{}", n.id),
            invoker,
            store,
        };
        let bar = progress_bar(opts.progress, 0);
        let (fitted, passes) = crate::iterate::fit(&data, spec, |d, it, loss, grad| {
            measured.lock().expect("measured").dispatched.merge(d);
            if let (Some(l), Some(gm)) = (loss, grad) {
                bar.set_message(format!(
                    "{array}: iteration {it}, loss {l:.6e}, largest gradient {gm:.2e}"
                ));
            }
            bar.inc(1);
        })
        .await
        .map_err(about)?;
        bar.finish_and_clear();
        for p in made {
            let _ = store.delete_prefix(&p).await;
        }
        if !fitted.converged {
            tracing::warn!(
                "array `{array}`: {} did not converge in max_iter = {} iterations \
                 (largest gradient {:.3e} > tol {}); raise max_iter or scale X",
                crate::models::describe(spec),
                spec.max_iter,
                fitted.grad_max.last().copied().unwrap_or(f64::NAN),
                spec.tol
            );
        }
        let out = StoredArray::new(&tasks::node_path(&prefix, g, n.id), n.meta.clone())?;
        let coef = Block::F64(ndarray::Array1::from(fitted.theta.clone()).into_dyn());
        out.write_block(store, &[0], &coef).await?;
        measured
            .lock()
            .expect("measured")
            .fits
            .push(crate::iterate::FitReport {
                array: array.clone(),
                model: crate::models::describe(spec),
                fitted,
                passes,
            });
    }
    Ok(())
}

/// Computes the boolean masks the job indexes with (each from the part of the graph it
/// depends on, in its own stage), then builds the graph with the selections known.
async fn resolve_masks(
    c: &Checked,
    run: &Run,
    invoker: &Invoker,
    measured: &std::sync::Mutex<Measured>,
) -> anyhow::Result<Graph> {
    let (job, store) = (&c.job, &c.store);
    let prefix = run.prefix();
    let mut g = c.graph.clone();
    let mut mask = c.mask;
    let mut masks = std::collections::HashMap::new();
    while let Some(m) = mask {
        // Not an identifier, so never the name of one of the job's arrays.
        let name = format!("mask-{m}");
        let (sub, root) = g.subgraph(m, &name);
        let sub_plan = plan_job(job, &sub, &prefix, &c.probes)?;
        measured.lock().expect("measured").tasks += sub_plan.tasks;
        describe_staged(job, &sub, run, store).await?;
        dispatch_stage(job, &name, &sub_plan, run, invoker, store, measured).await?;
        let arr = StoredArray::new(
            &tasks::node_path(&prefix, &sub, root),
            sub.nodes[root].meta.clone(),
        )?;
        let Block::Bool(values) = read_whole(&arr, store, false).await? else {
            return Err(anyhow!("mask {m} is not bool"));
        };
        let picked: Vec<u64> = values
            .iter()
            .enumerate()
            .filter(|(_, v)| **v)
            .map(|(i, _)| i as u64)
            .collect();
        masks.insert(m, picked);
        mask = match graph::build_staged(job, &c.probes, &masks)? {
            graph::Built::Done(done) => {
                g = done;
                None
            }
            graph::Built::NeedMask { graph, mask } => {
                g = graph;
                Some(mask)
            }
        };
    }
    Ok(g)
}

/// The job's plan under its scheduler for the run with store prefix `prefix`; refused
/// before anything runs when it cannot fit.
pub fn plan_job(
    job: &Job,
    g: &Graph,
    prefix: &str,
    probes: &graph::Probes,
) -> anyhow::Result<crate::sched::Plan> {
    plan_with(job, g, job.compute.scheduler, prefix, probes)
}

/// The prefix a dry run (`check`, `plan`) plans under: a run that never happens.
pub fn dry_run_prefix(job: &Job) -> String {
    crate::runs::run_prefix(&job.name, "dry-run")
}

/// The job's plan under scheduler `kind`. A plan that cannot fit `memory_mb` is refused
/// with the user's array and line, and the least `memory_mb` that plans the job — found by
/// planning it again as it would be with that setting (default blocks grow with it), so
/// the hint is right the first time.
pub fn plan_with(
    job: &Job,
    g: &Graph,
    kind: SchedulerKind,
    prefix: &str,
    probes: &graph::Probes,
) -> anyhow::Result<crate::sched::Plan> {
    plan_raw(job, g, kind, prefix).map_err(|e| {
        crate::error::Explained::into_anyhow(explain_plan(job, g, kind, probes, &e), e)
    })
}

fn plan_raw(
    job: &Job,
    g: &Graph,
    kind: SchedulerKind,
    prefix: &str,
) -> Result<crate::sched::Plan, crate::sched::PlanError> {
    let cx = crate::sched::Ctx {
        g,
        prefix,
        store: &job.storage,
        workers: job.compute.workers,
        memory_mb: job.compute.memory_mb,
        model: crate::cost::CostModel::for_job(job),
        timeout_seconds: job.compute.timeout_seconds,
    };
    crate::sched::plan(kind, &cx, &tasks::block_work(g))
}

/// The least `memory_mb` (a multiple of 64, at most Lambda's 10240) with which the job
/// plans under `kind`, if any.
fn least_memory(job: &Job, kind: SchedulerKind, probes: &graph::Probes, from: u64) -> Option<u64> {
    let fits = |mb: u64| {
        let mut j = job.clone();
        j.compute.memory_mb = mb;
        graph::build(&j, probes)
            .map(|g| plan_raw(&j, &g, kind, &dry_run_prefix(&j)).is_ok())
            .unwrap_or(false)
    };
    let (mut lo, mut hi) = (job.compute.memory_mb, from.div_ceil(64) * 64);
    while !fits(hi) {
        if hi >= 10240 {
            return None;
        }
        lo = hi;
        hi = (hi * 2).min(10240);
    }
    // lo fails, hi fits: narrow down to 64 MB.
    while hi - lo > 64 {
        let mid = (lo + (hi - lo) / 2).div_ceil(64) * 64;
        if mid >= hi {
            break;
        }
        if fits(mid) { hi = mid } else { lo = mid }
    }
    Some(hi)
}

fn explain_plan(
    job: &Job,
    g: &Graph,
    kind: SchedulerKind,
    probes: &graph::Probes,
    e: &crate::sched::PlanError,
) -> String {
    let n = &g.nodes[e.node];
    let what = match &n.name {
        Some(name) => format!("array {name}"),
        None => "a part of its expression".to_string(),
    };
    let def = n.def.as_ref().or(n.name.as_ref());
    let (line, key) = match def.and_then(|d| job.arrays.iter().find(|a| &a.name == d)) {
        Some(a) => (a.line, format!("arrays.{}", a.name)),
        None => (job.name_line, "compute.memory_mb".to_string()),
    };
    let hint = match least_memory(job, kind, probes, e.need_mib.max(job.compute.memory_mb + 1)) {
        Some(mb) => format!(
            "give memory_mb = {mb} (the least with which this job plans), or a smaller `block` for the arrays it reads"
        ),
        None => {
            "no memory_mb up to 10240 fits it: give the arrays it reads a smaller `block`".into()
        }
    };
    job.err(
        line,
        key,
        format!(
            "block {} of {what} (block shape {:?}) needs {} MiB in one invocation, over memory_mb = {}; {hint}",
            e.block, e.shape, e.need_mib, e.limit_mb
        ),
    )
    .to_string()
}

/// The function process of the local backend: `nums-cloud function` — this executable
/// when it is nums-cloud, else a `nums-cloud` next to it (or one folder up, as cargo lays
/// out test binaries) or on the PATH; `$NUMS_CLOUD_FUNCTION` overrides.
pub fn default_function_command() -> anyhow::Result<Vec<String>> {
    if let Ok(p) = std::env::var("NUMS_CLOUD_FUNCTION") {
        return Ok(p.split_whitespace().map(str::to_string).collect());
    }
    let exe = std::env::current_exe().context("cannot find the nums-cloud executable")?;
    let name = format!("nums-cloud{}", std::env::consts::EXE_SUFFIX);
    let found = if exe.file_name().is_some_and(|n| n == name.as_str()) {
        Some(exe.clone())
    } else {
        let near = exe
            .parent()
            .into_iter()
            .flat_map(|d| [d.join(&name), d.join("..").join(&name)]);
        let path = std::env::var_os("PATH")
            .map(|p| {
                std::env::split_paths(&p)
                    .map(|d| d.join(&name))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        near.chain(path).find(|p| p.is_file())
    };
    let exe = found.ok_or_else(|| {
        anyhow!("cannot find the nums-cloud binary to run local functions; set NUMS_CLOUD_FUNCTION to its path")
    })?;
    Ok(vec![exe.to_string_lossy().into_owned(), "function".into()])
}

fn explain(e: &crate::dispatch::DispatchError, job: &Job) -> String {
    use crate::dispatch::InvokeError;
    let hint = match &e.error {
        InvokeError::Function {
            kind: ErrorKind::OutOfMemory,
            ..
        } => format!(
            "\n  hint: a batch needs more than memory_mb = {}; raise [compute] memory_mb or give smaller `block` shapes",
            job.compute.memory_mb
        ),
        // Lambda reports a timeout as either, depending on the runtime's age.
        InvokeError::Function {
            kind: ErrorKind::TimedOut,
            ..
        } => {
            format!(
                "\n  hint: raise [compute] timeout_seconds (now {}) or give smaller `block` shapes",
                job.compute.timeout_seconds
            )
        }
        InvokeError::Throttled { .. } => format!(
            "\n  hint: Lambda kept throttling: lower [compute] workers (now {}) or raise the function's reserved concurrency",
            job.compute.workers
        ),
        _ => String::new(),
    };
    format!("job {}: {e}{hint}", job.name)
}

pub(crate) fn progress_bar(show: bool, n: u64) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n);
    bar.set_message("0 B");
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} invocations, {msg} moved, ETA {eta}",
        )
        .expect("template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    crate::logs::above(&bar);
    bar
}

/// Stages what the run keeps: the `zarr.json` of every array it makes and keeps (with
/// attributes saying what made it). Its blocks come from the stage's tasks (imports too).
async fn describe_staged(job: &Job, g: &Graph, run: &Run, store: &Store) -> anyhow::Result<()> {
    let prefix = run.prefix();
    for n in &g.nodes {
        if matches!(n.op, NodeOp::InPlace { .. }) || !n.persist {
            continue; // read in place: never written; intermediates need no metadata
        }
        let arr = StoredArray::new(&tasks::node_path(&prefix, g, n.id), n.meta.clone())?;
        let attrs = n.persist.then(|| {
            let def = n
                .name
                .as_ref()
                .and_then(|k| job.arrays.iter().find(|a| &a.name == k));
            serde_json::json!({
                "complete": true,
                "job": job.name,
                "run": run.id,
                "array": n.name,
                "source": def.map(|d| d.source.describe()),
                "version": env!("CARGO_PKG_VERSION"),
            })
        });
        // Inputs (`.npy`, CSV, Parquet, foreign Zarr) are imported by the functions.
        arr.write_metadata_with(store, attrs).await?;
    }
    Ok(())
}

/// For `run --keep`: gives the intermediates the run wrote whole a `zarr.json` (saying
/// which job-file array made them), so that they can be opened after the run. One written
/// only in part (a plan writes a block only where another invocation reads it) gets none:
/// its missing blocks would read as the fill value.
async fn describe_kept(job: &Job, g: &Graph, run: &Run, store: &Store) -> anyhow::Result<()> {
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

fn slice_info(meta: &ArrayMeta, idx: &[u64]) -> Vec<SliceInfoElem> {
    let o = meta.block_origin(idx);
    let s = meta.block_shape(idx);
    o.iter()
        .zip(&s)
        .map(|(&o, &s)| SliceInfoElem::from(o as isize..(o as isize + s as isize)))
        .collect()
}

/// Splits an in-memory array into blocks and writes them.
pub async fn write_whole(arr: &StoredArray, store: &Store, full: &Block) -> anyhow::Result<()> {
    futures::stream::iter(arr.meta.blocks())
        .map(|idx| async move {
            let info = slice_info(&arr.meta, &idx);
            let block = nums_layout::map_block!(full, a => a.slice(info.as_slice()).to_owned());
            arr.write_block(store, &idx, &block).await.map(|_| ())
        })
        .buffer_unordered(8)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// Reads every block of an array into one in-memory array.
pub async fn read_whole(
    arr: &StoredArray,
    store: &Store,
    missing_is_fill: bool,
) -> anyhow::Result<Block> {
    let blocks: Vec<(Vec<u64>, Block)> = futures::stream::iter(arr.meta.blocks())
        .map(|idx| async move {
            let b = if missing_is_fill {
                arr.read_block_or_fill(store, &idx).await?
            } else {
                arr.read_block(store, &idx).await?
            };
            Ok::<_, nums_layout::Error>((idx, b))
        })
        .buffer_unordered(8)
        .try_collect()
        .await?;
    let shape: Vec<usize> = arr.meta.shape.iter().map(|&s| s as usize).collect();
    let mut full = Block::zeros(arr.meta.dtype, &shape);
    for (idx, b) in blocks {
        let info = slice_info(&arr.meta, &idx);
        match (&mut full, b) {
            (Block::F64(f), Block::F64(b)) => f.slice_mut(info.as_slice()).assign(&b),
            (Block::F32(f), Block::F32(b)) => f.slice_mut(info.as_slice()).assign(&b),
            (Block::I64(f), Block::I64(b)) => f.slice_mut(info.as_slice()).assign(&b),
            (Block::Bool(f), Block::Bool(b)) => f.slice_mut(info.as_slice()).assign(&b),
            _ => {
                return Err(anyhow!(
                    "{}: block dtype differs from the array's",
                    arr.path
                ));
            }
        }
    }
    Ok(full)
}

/// What a stage of a run dispatches with.
struct Stage<'a> {
    job: &'a Job,
    run: &'a Run,
    invoker: &'a Invoker,
    store: &'a Store,
    measured: &'a std::sync::Mutex<Measured>,
    probes: &'a graph::Probes,
}

/// Writes an output to a `.npy` file on S3. One of at most 5 MiB is written by the driver
/// with one PUT; a larger one by the functions in a stage of its own, each task writing
/// whole rows as one part of a multipart upload the driver starts and completes (parts of
/// at least 5 MiB, at most 10,000 of them), so the file appears whole or not at all (an
/// upload that fails is aborted).
async fn export_npy_to_s3(
    st: &Stage<'_>,
    arr: &StoredArray,
    spec: &nums_layout::StoreSpec,
    key: &str,
    name: &str,
) -> anyhow::Result<()> {
    const MIN_PART: u64 = 5 << 20;
    let dst = Store::open_counted(spec, &st.store.counters)?;
    let meta = &arr.meta;
    let header = crate::npy::header(meta.dtype, &meta.shape);
    let size = meta.dtype.size() as u64;
    if meta.ndim() == 0 || meta.len() * size <= MIN_PART {
        let mut bytes = header;
        bytes.extend_from_slice(&read_whole(arr, st.store, false).await?.le_bytes());
        return Ok(dst.put(key, bytes.into()).await?);
    }
    // Rows per part: about 64 MiB (a sixteenth of memory_mb if less: a re-blocking task
    // holds the blocks it reads and its part, three times over), at least 5 MiB.
    let row = meta.shape[1..].iter().product::<u64>() * size;
    let target = ((st.job.compute.memory_mb << 20) / 16).clamp(MIN_PART, 64 << 20);
    let rows = (target / row)
        .max(MIN_PART.div_ceil(row))
        .max(meta.shape[0].div_ceil(10_000))
        .min(meta.shape[0]);
    let parts = meta.shape[0].div_ceil(rows);
    let upload = dst.create_multipart(key).await?;
    let etags = async {
        let mut g = Graph::default();
        let node = |g: &Graph, meta: ArrayMeta, op: NodeOp| graph::Node {
            id: g.nodes.len(),
            meta,
            op,
            name: None,
            persist: false,
            def: Some(name.to_string()),
        };
        let n = node(
            &g,
            meta.clone(),
            NodeOp::InPlace {
                path: arr.path.clone(),
                sparse: false,
            },
        );
        g.nodes.push(n);
        let mut block = meta.shape.clone();
        block[0] = rows;
        if meta.block != block {
            let m = ArrayMeta::new(meta.shape.clone(), block, meta.dtype);
            let n = node(&g, m, NodeOp::Rechunk { x: 0 });
            g.nodes.push(n);
        }
        let etag_meta = ArrayMeta::new(
            vec![parts, nums_layout::batch::ETAG_BYTES as u64],
            vec![1, nums_layout::batch::ETAG_BYTES as u64],
            nums_layout::DType::Int64,
        );
        let op = NodeOp::ExportNpy {
            x: g.nodes.len() - 1,
            dest: spec.clone(),
            key: key.to_string(),
            upload: upload.clone(),
            header,
        };
        let mut n = node(&g, etag_meta, op);
        // Named after the upload: a resumed run never takes another upload's parts as done.
        let tag = format!("export-{name}-{:08x}", fnv(upload.as_bytes()) as u32);
        (n.name, n.persist) = (Some(tag.clone()), true);
        let id = n.id;
        g.named.insert(tag.clone(), id);
        g.nodes.push(n);
        let prefix = st.run.prefix();
        let plan = plan_job(st.job, &g, &prefix, st.probes)?;
        st.measured.lock().expect("measured").tasks += plan.tasks;
        describe_staged(st.job, &g, st.run, st.store).await?;
        dispatch_stage(
            st.job,
            &tag,
            &plan,
            st.run,
            st.invoker,
            st.store,
            st.measured,
        )
        .await?;
        let tags = StoredArray::new(&tasks::node_path(&prefix, &g, id), g.nodes[id].meta.clone())?;
        let Block::I64(values) = read_whole(&tags, st.store, false).await? else {
            return Err(anyhow!("the parts' ETags are not int64"));
        };
        values
            .rows()
            .into_iter()
            .map(|r| {
                let b = Block::I64(r.to_owned().into_dyn());
                nums_function::export::etag_of(&b).map_err(|e| anyhow!(e))
            })
            .collect::<anyhow::Result<Vec<String>>>()
    }
    .await;
    let done = match etags {
        Ok(etags) => dst
            .complete_multipart(key, &upload, etags)
            .await
            .map_err(Into::into),
        Err(e) => Err(e),
    };
    if done.is_err() {
        let _ = dst.abort_multipart(key, &upload).await;
    }
    done
}

/// FNV-1a of some bytes (a short stable tag).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ b as u64).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Writes an output; returns the values when the array is small enough to print.
async fn export(
    arr: &StoredArray,
    target: &Target,
    store: &Store,
) -> anyhow::Result<Option<Block>> {
    const PREVIEW: u64 = 64;
    match target {
        Target::Npy(path) | Target::Csv(path) => {
            if matches!(target, Target::Csv(_)) {
                crate::arrays::export_csv(arr, store, path).await?;
            } else {
                crate::arrays::export_npy(arr, store, path).await?;
            }
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(crate::arrays::read_small(arr, store).await?));
            }
            Ok(None)
        }
        Target::NpyStore { .. } => {
            // Written by `export_npy_to_s3`.
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(crate::arrays::read_small(arr, store).await?));
            }
            Ok(None)
        }
        Target::Zarr { store: spec, path }
            if crate::graph::relative_to(store.spec(), spec, path).as_deref()
                == Some(arr.path.as_str()) =>
        {
            // The output already is where it should be.
            Ok(None)
        }
        Target::Zarr { store: spec, path } => {
            let dst = Store::open_counted(spec, &store.counters)?;
            // Checked again now: it may have changed since the run began.
            replaceable(&dst, path).await.map_err(|e| anyhow!(e))?;
            let out = StoredArray::new(path, arr.meta.clone())?;
            // As a commit does: the old array goes (its metadata first), the chunks come,
            // the metadata last, so a reader never sees old and new chunks mixed.
            dst.delete(&out.metadata_key()).await?;
            dst.delete_prefix(path).await?;
            // Same format on both sides: copy the encoded chunks as they are.
            futures::stream::iter(arr.meta.blocks())
                .map(|idx| {
                    let (dst, src) = (&dst, store);
                    let (from, to) = (arr.block_key(&idx), out.block_key(&idx));
                    async move {
                        let bytes = src.get(&from).await?;
                        dst.put(&to, bytes).await
                    }
                })
                .buffer_unordered(8)
                .try_collect::<Vec<()>>()
                .await?;
            let src_meta = store.get(&arr.metadata_key()).await?;
            dst.put(&out.metadata_key(), src_meta).await?;
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(read_whole(arr, store, false).await?));
            }
            Ok(None)
        }
    }
}
