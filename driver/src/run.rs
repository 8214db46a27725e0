//! `nums-cloud run`: check the whole job, then import inputs, dispatch the batches,
//! export the outputs and report what was measured.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow};
use futures::{StreamExt, TryStreamExt};
use ndarray::SliceInfoElem;
use nums_layout::{ArrayMeta, Block, ErrorKind, Store, StoredArray};

use crate::dispatch::{Invoker, run_batches};
use crate::graph::{self, Graph, NodeOp};
use crate::job::{Backend, Defaults, Job, SchedulerKind, Target};
use crate::local::{LocalConfig, LocalEndpoint};
use crate::report::Report;
use crate::tasks;

#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub keep: bool,
    pub progress: bool,
    /// The local function process; default: [`default_function_command`].
    pub function_command: Option<Vec<String>>,
    /// What the job file leaves out (from `--infra`, or nums-cloud's own defaults).
    pub defaults: Defaults,
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

/// Everything that can be checked before anything runs: the file, names, shapes, dtypes,
/// input files, and that the store answers.
pub async fn check(path: &Path) -> anyhow::Result<Checked> {
    check_with(path, &Defaults::default()).await
}

/// [`check`], with `defaults` for what the job file leaves out.
pub async fn check_with(path: &Path, defaults: &Defaults) -> anyhow::Result<Checked> {
    check_job(Job::load_with(path, defaults)?).await
}

/// Checks a parsed job: probes its inputs (the only reads), builds the graph (pure), and
/// proves that every store it writes to answers.
pub async fn check_job(job: Job) -> anyhow::Result<Checked> {
    let probes = graph::probe(&job).await?;
    let (graph, mask) = match graph::build_staged(&job, &probes, &Default::default())? {
        graph::Built::Done(g) => (g, None),
        graph::Built::NeedMask { graph, mask } => (graph, Some(mask)),
    };
    let store = Store::open(&job.storage)
        .map_err(|e| job.err(job.storage_line, "storage.url", e.to_string()))?;
    store
        .check()
        .await
        .map_err(|e| job.err(job.storage_line, "storage.url", e.to_string()))?;
    for o in &job.outputs {
        if let Target::Zarr { store: spec, .. } = &o.target {
            let s = Store::open(spec)
                .map_err(|e| job.err(o.line, format!("outputs.{}", o.name), e.to_string()))?;
            s.check()
                .await
                .map_err(|e| job.err(o.line, format!("outputs.{}", o.name), e.to_string()))?;
        }
    }
    Ok(Checked {
        job,
        graph,
        probes,
        store,
        mask,
    })
}

/// Checks and runs the job file at `path`.
pub async fn run(path: &Path, opts: &RunOptions) -> anyhow::Result<Report> {
    run_job(Job::load_with(path, &opts.defaults)?, opts).await
}

/// Checks and runs a parsed job.
pub async fn run_job(job: Job, opts: &RunOptions) -> anyhow::Result<Report> {
    let started = Instant::now();
    let Checked {
        job,
        graph: g,
        probes,
        store,
        mask,
    } = check_job(job).await?;
    let prefix = job.name.clone();
    // Refused here, before anything runs, if it cannot fit (boolean masks assumed to
    // select everything: the largest the job can be).
    let plan = plan_job(&job, &g, &prefix)?;
    let scheduler = format!("{:?}", job.compute.scheduler).to_lowercase();

    let (invoker, endpoint) = match job.compute.backend {
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
                log_dir: std::env::temp_dir().join(format!("nums-cloud-{}", std::process::id())),
            })
            .await?;
            (
                Invoker::local(&ep.invoke_url, &job.compute.function),
                Some(ep),
            )
        }
        Backend::Lambda => (Invoker::lambda(&job.compute.function).await, None),
    };

    let result = async {
        let (g, plan, early) =
            resolve_masks(&job, &probes, g, plan, mask, &invoker, &store).await?;
        let batches = &plan.batches;
        import_and_describe(&g, &prefix, &store).await?;
        let bar = progress(opts.progress, batches.len() as u64);
        let mut over = Vec::new();
        let dispatched = run_batches(&invoker, batches, &store, job.compute.workers, |i, st| {
            bar.inc(1);
            if st.peak_memory_bytes > batches[i].projected_peak {
                over.push((i, st.peak_memory_bytes, batches[i].projected_peak));
            }
        })
        .await
        .map_err(|e| anyhow!(explain(&e, &job)))?;
        let mut dispatched = dispatched;
        dispatched.merge(&early);
        bar.finish_and_clear();
        let mut outputs = Vec::new();
        for o in &job.outputs {
            let id = g.named[&o.name];
            let arr =
                StoredArray::new(&tasks::node_path(&prefix, &g, id), g.nodes[id].meta.clone())?;
            let preview = export(&arr, &o.target, &store)
                .await
                .with_context(|| format!("output {}", o.name))?;
            outputs.push((o.name.clone(), o.target.clone(), arr.meta.clone(), preview));
        }
        anyhow::Ok((dispatched, outputs, over, plan))
    }
    .await;
    if let Some(ep) = endpoint {
        ep.stop().await;
    }
    if !opts.keep {
        // Intermediates go, whether the job succeeded or not; named arrays stay.
        for sub in ["_tmp", "_batches"] {
            let _ = store.delete_prefix(&format!("{prefix}/{sub}")).await;
        }
    }
    let (dispatched, outputs, over, plan) = result?;
    for (i, measured, projected) in &over {
        eprintln!(
            "warning: invocation {i} peaked at {:.1} MiB, over its projected {:.1} MiB",
            *measured as f64 / (1 << 20) as f64,
            *projected as f64 / (1 << 20) as f64
        );
    }
    let mut report = Report::new(
        &job,
        &scheduler,
        plan.tasks,
        dispatched,
        &store,
        started.elapsed(),
        outputs,
    );
    report.projected_peak_memory_bytes = plan.max_projected_peak();
    report.invocations_over_projection = over.len() as u64;
    Ok(report)
}

/// Computes the boolean masks the job indexes with (each from the part of the graph it
/// depends on, stored under `_tmp/`), then builds the graph with the selections known.
/// `mask` is the first one the checked graph waits for; without one, nothing is redone.
async fn resolve_masks(
    job: &Job,
    probes: &graph::Probes,
    mut g: Graph,
    mut plan: crate::sched::Plan,
    mut mask: Option<graph::NodeId>,
    invoker: &Invoker,
    store: &Store,
) -> anyhow::Result<(Graph, crate::sched::Plan, crate::dispatch::Dispatched)> {
    let mut masks = std::collections::HashMap::new();
    let mut early = crate::dispatch::Dispatched::default();
    while let Some(m) = mask {
        let (sub, root) = g.subgraph(m, &format!("_tmp/mask{m}"));
        let sub_plan = plan_job(job, &sub, &job.name)?;
        import_and_describe(&sub, &job.name, store).await?;
        let d = run_batches(
            invoker,
            &sub_plan.batches,
            store,
            job.compute.workers,
            |_, _| {},
        )
        .await
        .map_err(|e| anyhow!(explain(&e, job)))?;
        early.merge(&d);
        let arr = StoredArray::new(
            &tasks::node_path(&job.name, &sub, root),
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
        mask = match graph::build_staged(job, probes, &masks)? {
            graph::Built::Done(done) => {
                g = done;
                plan = plan_job(job, &g, &job.name)?;
                None
            }
            graph::Built::NeedMask { graph, mask } => {
                g = graph;
                Some(mask)
            }
        };
    }
    Ok((g, plan, early))
}

/// The job's plan under its scheduler for the run with store prefix `prefix`; refused
/// before anything runs when it cannot fit.
pub fn plan_job(job: &Job, g: &Graph, prefix: &str) -> anyhow::Result<crate::sched::Plan> {
    plan_with(job, g, job.compute.scheduler, prefix)
}

/// The prefix a dry run (`check`, `plan`) plans under: a run that never happens.
pub fn dry_run_prefix(job: &Job) -> String {
    format!("{}/_runs/dry-run", job.name)
}

pub fn plan_with(
    job: &Job,
    g: &Graph,
    kind: SchedulerKind,
    prefix: &str,
) -> anyhow::Result<crate::sched::Plan> {
    let cx = crate::sched::Ctx {
        g,
        prefix,
        store: &job.storage,
        workers: job.compute.workers,
        memory_mb: job.compute.memory_mb,
    };
    let work = tasks::block_work(g);
    crate::sched::plan(kind, &cx, &work).map_err(|e| anyhow!("{}: {e}", job.file.display()))
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

fn progress(show: bool, n: u64) -> indicatif::ProgressBar {
    if !show {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(n);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:40} {pos}/{len} invocations {msg}",
        )
        .expect("template"),
    );
    bar.enable_steady_tick(Duration::from_millis(200));
    bar
}

/// Writes `zarr.json` for every array the job makes, and the blocks of imported arrays.
async fn import_and_describe(g: &Graph, prefix: &str, store: &Store) -> anyhow::Result<()> {
    for n in &g.nodes {
        if matches!(n.op, NodeOp::InPlace { .. }) {
            continue; // read in place: never written
        }
        let arr = StoredArray::new(&tasks::node_path(prefix, g, n.id), n.meta.clone())?;
        arr.write_metadata(store).await?;
        let full = match &n.op {
            NodeOp::ImportNpy { path } => {
                let p = PathBuf::from(path);
                tokio::task::spawn_blocking(move || crate::npy::read(&p))
                    .await?
                    .map_err(|e| anyhow!(e))?
            }
            NodeOp::ImportCsv { path } => {
                let p = PathBuf::from(path);
                tokio::task::spawn_blocking(move || crate::npy::read_csv(&p))
                    .await?
                    .map_err(|e| anyhow!(e))?
            }
            NodeOp::ImportZarr { store: spec, path } => {
                let src_store = Store::open(spec)?;
                let src = StoredArray::open(&src_store, path).await?;
                read_whole(&src, &src_store, true).await?
            }
            _ => continue,
        };
        let full = full.cast(n.meta.dtype);
        write_whole(&arr, store, &full).await?;
    }
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
    let mut full = Block::full(arr.meta.dtype, &shape, 0.0);
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

/// Writes an output; returns the values when the array is small enough to print.
async fn export(
    arr: &StoredArray,
    target: &Target,
    store: &Store,
) -> anyhow::Result<Option<Block>> {
    const PREVIEW: u64 = 64;
    match target {
        Target::Npy(path) => {
            let full = read_whole(arr, store, false).await?;
            let (p, f) = (path.clone(), full.clone());
            tokio::task::spawn_blocking(move || crate::npy::write(&p, &f))
                .await?
                .map_err(|e| anyhow!(e))?;
            Ok((arr.meta.len() <= PREVIEW).then_some(full))
        }
        Target::Zarr { store: spec, path }
            if crate::graph::relative_to(store.spec(), spec, path).as_deref()
                == Some(arr.path.as_str()) =>
        {
            // The output already is where it should be.
            Ok(None)
        }
        Target::Zarr { store: spec, path } => {
            let dst = Store::open(spec)?;
            let out = StoredArray::new(path, arr.meta.clone())?;
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
            out.write_metadata(&dst).await?;
            if arr.meta.len() <= PREVIEW {
                return Ok(Some(read_whole(arr, store, false).await?));
            }
            Ok(None)
        }
    }
}
