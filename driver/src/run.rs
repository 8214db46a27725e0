//! `nums-cloud run`: what a job's run adds around the one executor (`engine`). The job is
//! checked (`plan`; CSV rows counted first by `csv_count`), its lease taken and a run
//! started (`runs`), then `engine::execute` runs the computation through the stage runner
//! (`stage`) on one backend (`backend`) — boolean masks computed, models fitted, the
//! main stage — with the run's journal, under Ctrl-C; the inputs are proven unchanged,
//! the outputs committed atomically and exported (`export`), and what was measured
//! reported (`report`), for a failed or interrupted run too.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use nums_layout::StoredArray;

use crate::backend::Backend;
use crate::export::Output;
use crate::graph::{self, Graph, NodeOp};
use crate::job::{Defaults, Job};
use crate::plan::Checked;
use crate::progress::Progress;
use crate::report::{Report, RunFailed};
use crate::runs::Run;
use crate::stage::{History, Observer, Stages};
use crate::tasks;

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Keep the run's intermediates in the store after it succeeds.
    pub keep: bool,
    pub progress: bool,
    /// Resume the latest earlier run of the same job (killed, failed or interrupted):
    /// only the batches whose outputs are missing run again.
    pub resume: bool,
    /// The local function process; default: [`crate::backend::default_function_command`].
    pub function_command: Option<Vec<String>>,
    /// What the job file leaves out (from `--infra`, or nums-cloud's own defaults).
    pub defaults: Defaults,
    /// Stop the run on Ctrl-C (SIGINT), keeping its state: the CLI's choice. A library
    /// leaves it off, as listening for SIGINT takes the default (exit) away from the
    /// whole program for good.
    pub ctrl_c: bool,
}

/// Checks and runs the job file at `path`.
pub async fn run(path: &Path, opts: &RunOptions) -> anyhow::Result<Report> {
    run_job(Job::load_with(path, &opts.defaults)?, opts).await
}

/// Checks and runs a parsed job. On failure the error is a [`RunFailed`] carrying the
/// report of what ran.
pub async fn run_job(job: Job, opts: &RunOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    // What the stages measure, and the bar: outside the run's future, so that a failed or
    // interrupted run reports what it measured.
    let (history, progress) = (
        History::default(),
        Progress::new(crate::progress::Show::on_stderr(opts.progress)),
    );
    let observer = (&history, &progress);
    // One backend for every stage of the run, started by the first that needs it.
    let backend = Backend::new(&job.compute, opts.function_command.clone());
    // The driver's own requests, to every store it touches.
    let io = Arc::default();
    let counted = match crate::csv_count::count(&job, &backend, &observer, started, &io).await {
        Ok(counted) => counted,
        Err(e) => {
            // A count that failed keeps the function processes' logs, and says where.
            let dir = backend.log_dir().map(Path::to_path_buf);
            backend.stop(false).await;
            return Err(match dir {
                Some(d) => anyhow!("{e:#} (the function processes' logs: {})", d.display()),
                None => e,
            });
        }
    };
    let checked = match crate::plan::check_counted(job, true, &counted, &io).await {
        Ok(c) => c,
        Err(e) => {
            backend.stop(true).await;
            return Err(e);
        }
    };
    let (job, store) = (&checked.job, &checked.store);
    // Refused here, before the run makes anything, if it cannot fit (boolean masks
    // assumed to select everything: the largest the job can be).
    let dry_run = crate::plan::dry_run_prefix(job);
    let main_estimate = crate::plan::plan_job(
        job,
        &crate::export::with_file_outputs(
            job,
            crate::iterate::main_graph(&checked.graph, &dry_run),
            None,
            opts.keep,
        ),
        &dry_run,
        &checked.probes,
    )?;
    progress.on_expect(
        "main",
        &crate::stage::Expected::of(&job.engine(), &main_estimate),
    );
    let fits = crate::iterate::plan_fits(
        job,
        &checked.graph,
        &checked.probes,
        job.compute.scheduler,
        &dry_run,
    )?;
    for f in &fits {
        let t = f.totals(job, false);
        let e = crate::stage::Expected {
            invocations: t.invocations,
            tasks: t.tasks,
            seconds: t.wall_seconds,
        };
        progress.on_expect(&f.stage, &e);
    }
    let run = Run::start(
        store,
        &job.name,
        &checked.fingerprint(),
        opts.resume,
        crate::export::output_leases(job, store)?,
    )
    .await;
    let run = match run {
        Ok(run) => run,
        Err(e) => {
            backend.stop(true).await;
            return Err(anyhow!("{}: {e}", job.file.display()));
        }
    };
    // Partial files a killed writer of the job's `.npy` and `.csv` outputs left (their
    // leases are this run's now).
    for o in &job.outputs {
        if let Some(p) = o.target.local_file() {
            let _ = std::fs::remove_file(crate::npy::partial_path(p));
        }
    }
    if !run.removed.is_empty() {
        tracing::info!(
            "removed the state of {} of job {} ({})",
            crate::human::plural(
                run.removed.len() as u64,
                "earlier unfinished run",
                "earlier unfinished runs"
            ),
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
    if let Err(e) = backend.start(&run.id).await {
        backend.stop(false).await;
        let _ = run.finish(true).await;
        return Err(e);
    }
    let attrs = crate::stage::job_attrs(job, run.id.clone());
    let stages = Stages::new(
        job.engine(),
        Some(job),
        store,
        &backend,
        &observer,
        started,
        &run.id,
    )
    .in_run(&run)
    .describing(&attrs);
    // Ctrl-C's handler first: it is in place before the run makes anything (a partial
    // output file is made before the first invocation).
    let result = tokio::select! {
        biased;
        _ = ctrl_c(opts.ctrl_c, &run) => Err((anyhow!("interrupted (Ctrl-C)"), true)),
        r = execute(&checked, &run, &stages, opts) => r.map_err(|e| (e, false)),
    };
    progress.finish();
    drop(stages);
    let logs = backend.stop(result.is_ok()).await;
    let m = history.into_inner();
    let report = |outputs| {
        let scheduler = format!("{:?}", job.compute.scheduler).to_lowercase();
        let mut r = Report::new(
            job,
            &scheduler,
            // The tasks the invocations ran: the records' sum.
            m.dispatched.stats.tasks as usize,
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
        crate::invocation::assign_slots(&mut r.timeline);
        r
    };
    match result {
        Ok(outputs) => {
            let report = report(outputs);
            let prefix = run.prefix();
            run.finish(!opts.keep)
                .await
                .map_err(|e| anyhow!("job {}: {e}", job.name))?;
            if opts.keep {
                tracing::info!("the run's intermediates are kept under {prefix}/");
            }
            for (stage, i, measured, projected) in &m.over {
                tracing::warn!(
                    "invocation {i} of stage {stage} peaked at {:.1} MiB, over the {:.1} MiB it \
                     was planned within",
                    *measured as f64 / (1 << 20) as f64,
                    *projected as f64 / (1 << 20) as f64
                );
            }
            Ok(report)
        }
        Err((error, interrupted)) => {
            // Made before `finish` takes the run.
            let mut report = report(Vec::new());
            let prefix = run.prefix();
            // A run that lost the race for the job's lease (it started before learning
            // so) fails for that reason, whatever else went wrong; its state is dropped.
            // The cause leads; what to do about the run's state follows on a line of its
            // own (and stays out of --stats).
            let (error, advice) = match run.confirm_lease().await {
                Err(lost) => {
                    let _ = run.finish(true).await;
                    (anyhow!("{}: {lost}", job.file.display()), None)
                }
                Ok(()) => match run.finish(false).await {
                    Ok(()) => (error, Some(resume_advice(job, &prefix))),
                    Err(e) => (error, Some(format!("job {}: {e}", job.name))),
                },
            };
            report.status = if interrupted { "interrupted" } else { "failed" }.into();
            report.error = Some(format!("{error:#}"));
            report.function_logs = logs.clone();
            Err(RunFailed {
                report: Box::new(report),
                error,
                advice,
                interrupted,
                logs,
            }
            .into())
        }
    }
}

/// What a failed run's kept state is for: `--resume` of its job file, when there is one
/// (`put` makes its job up).
fn resume_advice(job: &Job, prefix: &str) -> String {
    if job.file.is_file() {
        format!(
            "the run's state is kept under {prefix}/: `nums-cloud run --resume {}` recomputes \
             only what is missing (a run without --resume removes it)",
            job.file.display()
        )
    } else {
        format!(
            "the run's state is kept under {prefix}/ until the next run of job {}",
            job.name
        )
    }
}

/// Resolves at Ctrl-C when `listen`; never otherwise.
async fn ctrl_c(listen: bool, run: &Run) {
    if !listen || tokio::signal::ctrl_c().await.is_err() {
        std::future::pending::<()>().await
    }
    // A commit cut short would leave the job's arrays half moved until its next run.
    while run.committing() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Everything a run does between taking its lease and giving it back: the inputs
/// uploaded, the masks' stages, the fits, the main stage, the check that inputs read in
/// place did not change, the commit, and the exports. Returns the outputs for the summary.
async fn execute(
    c: &Checked,
    run: &Run,
    stages: &Stages<'_>,
    opts: &RunOptions,
) -> anyhow::Result<Vec<Output>> {
    let (job, store) = (&c.job, &c.store);
    let prefix = run.prefix();
    upload_local_inputs(c, run).await?;
    let first = match (c.mask, c.values) {
        (Some(m), _) => Some((m, true)),
        (None, Some(v)) => Some((v, false)),
        (None, None) => None,
    };
    // The large `.npy` outputs the functions write into their files as they make them.
    let mut files = None;
    let executed = crate::engine::execute(
        crate::engine::Computation {
            graph: c.graph.clone(),
            settle: first.map(|first| crate::engine::Settle {
                first,
                rebuild: Box::new(|known: &graph::Known| {
                    Ok(graph::build_known(job, &c.probes, known)?)
                }),
            }),
            main: Some(Box::new(|main| {
                let made = crate::export::make_file_outputs(job, &main, opts.resume)?;
                let main = crate::export::with_file_outputs(job, main, Some(&made), opts.keep);
                files = Some(made);
                Ok(main)
            })),
            unconverged: crate::engine::Unconverged::Fail,
        },
        stages,
        &c.probes,
    )
    .await?;
    let g = executed.graph;
    let mut files = files.unwrap_or_default();
    check_inputs_unchanged(c).await?;
    if opts.keep {
        crate::stage::describe_kept(job, &g, run, store).await?;
    }
    // An output written elsewhere (a .npy file, another Zarr path) is exported from the
    // run's staged copy, which goes with the run's state: the store keeps no second copy
    // at `<job>/<name>` unless `--keep` asks for it.
    let elsewhere: std::collections::HashSet<&str> = job
        .outputs
        .iter()
        .filter(|o| {
            !opts.keep
                && !crate::export::writes_home(job, store, o)
                && !g.nodes[g.named[&o.name]].op.is_import()
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
    record_imports(c, &g, &names).await;
    let mut outputs = Vec::new();
    for o in &job.outputs {
        let id = g.named[&o.name];
        if let Some(i) = files.iter().position(|f| f.name == o.name) {
            outputs.push(files.swap_remove(i).finish(o, g.nodes[id].meta.clone())?);
            continue;
        }
        let path = match &g.nodes[id].op {
            NodeOp::InPlace { path, .. } => path.clone(),
            _ if elsewhere.contains(o.name.as_str()) => tasks::node_path(&prefix, &g, id),
            _ => format!("{}/{}", job.name, o.name),
        };
        let arr = StoredArray::new(&path, g.nodes[id].meta.clone())?;
        let names = crate::export::job_column_names(job, &c.probes, &g, id);
        let loaded = job
            .arrays
            .iter()
            .any(|a| a.name == o.name && matches!(a.source, crate::job::Source::Load { .. }));
        outputs.push(
            crate::export::write_output(stages, &c.probes, o, arr, (names, loaded), None).await?,
        );
    }
    Ok(outputs)
}

/// Adds the input files this run imported (and committed, at `<job>/<name>`) to the
/// store's index of imports (`runs::Imported`), so that a later run of any job that loads
/// one of them, unchanged and read the same way, reads the array in place. Best effort:
/// an entry not written costs a later run an import, nothing else.
async fn record_imports(c: &Checked, g: &Graph, committed: &[String]) {
    for def in &c.job.arrays {
        let crate::job::Source::Load { path, csv } = &def.source else {
            continue;
        };
        let imported = g
            .named
            .get(&def.name)
            .is_some_and(|&id| g.nodes[id].op.is_import());
        // An input the job also keeps as its output is the job's, not a copy to reuse or
        // to remove with `rm --imports`.
        let output = (c.job.outputs.iter())
            .any(|o| o.name == def.name && crate::export::writes_home(&c.job, &c.store, o));
        if !graph::is_file(path) || !imported || output || !committed.contains(&def.name) {
            continue;
        }
        let Some(probe) = c.probes.0.get(&def.name) else {
            continue;
        };
        let array = format!("{}/{}", c.job.name, def.name);
        let Ok((_, stamp)) = StoredArray::open_stamped(&c.store, &array).await else {
            continue;
        };
        let options = graph::import_options(csv, def.dtype);
        let entry = crate::runs::Imported {
            file: path.clone(),
            version: probe.version().1,
            array,
            stamp,
            options: options.clone(),
        };
        if let Ok(bytes) = serde_json::to_vec_pretty(&entry) {
            let key = crate::runs::import_key(path, &options, &entry.array);
            if let Err(e) = c.store.put(&key, bytes.into()).await {
                tracing::debug!("{path}: the index of imports not written ({e})");
            }
        }
    }
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
                    in_place: Some(_),
                    foreign: None,
                    ..
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
