//! Checking and planning a job, before anything runs: the job file read, its inputs
//! probed (the only reads), the graph built, every store it writes proven to take writes
//! ([`check_job`]); then its plan under a scheduler ([`plan_job`], [`plan_with`]), refused
//! with the user's array, line and the least `memory_mb` that fits when it cannot fit, and
//! the plan's projection by the cost model ([`projection`]). `check`, `plan`, `run`, the
//! model fits, the benches and the fuzz tests all plan through here.

use std::path::Path;
use std::sync::Arc;

use nums_layout::{IoCounters, Store};

use crate::config::EngineConfig;
use crate::cost::{CostModel, Projection};
use crate::graph::{self, Graph};
use crate::job::{Defaults, Job, SchedulerKind, Target};
use crate::sched::{Plan, PlanError};
use crate::tasks;

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
    /// Or the first small node whose values it waits for (a sample sort's samples).
    pub values: Option<graph::NodeId>,
}

impl Checked {
    /// The job's fingerprint: `--resume` continues only a run of the same job on the same
    /// inputs (the probes hold each input file's version).
    pub(crate) fn fingerprint(&self) -> crate::runs::Fingerprint {
        let mut probes: Vec<_> = self.probes.0.iter().collect();
        probes.sort_by(|a, b| a.0.cmp(b.0));
        let text = format!("{:?}{probes:?}", self.job);
        crate::runs::Fingerprint {
            hash: format!("{:016x}", crate::runs::fnv(text.as_bytes())),
            inputs: probes.iter().map(|(_, p)| p.version()).collect(),
        }
    }
}

/// Everything that can be checked before anything runs: the file, names, shapes, dtypes,
/// input files, and that the store answers.
pub async fn check(path: &Path) -> anyhow::Result<Checked> {
    check_with(path, &Defaults::default()).await
}

/// [`check`], with `defaults` for what the job file leaves out. Leaves nothing behind: a
/// local store's folder it had to make (to prove it takes writes) is removed again.
pub async fn check_with(path: &Path, defaults: &Defaults) -> anyhow::Result<Checked> {
    let job = Job::load_with(path, defaults)?;
    let _untouched = Untouched::of_job(&job);
    check_job(job).await
}

/// What `plan` needs of [`check_with`]: the inputs probed and the graph built, without
/// proving that the stores take writes, so that planning a job that reads nothing stored
/// needs no store and no credentials. Leaves nothing behind.
pub async fn check_for_plan(path: &Path, defaults: &Defaults) -> anyhow::Result<Checked> {
    let job = Job::load_with(path, defaults)?;
    let _untouched = Untouched::of_job(&job);
    check_parts(job, false).await
}

/// The local folders a command that changes nothing (`check`, `plan`, `ls`, `show`) must
/// not leave behind: of each local store's folder, the part of its path that did not
/// exist (opening a store makes its folder; proving it takes writes writes in it). When
/// dropped, removes those folders again, deepest first, each only if it is empty.
pub(crate) struct Untouched(Vec<(std::path::PathBuf, std::path::PathBuf)>);

impl Untouched {
    /// For the stores `specs` name.
    pub(crate) fn of<'a>(specs: impl IntoIterator<Item = &'a nums_layout::StoreSpec>) -> Untouched {
        let missing = specs.into_iter().filter_map(|spec| {
            let dir = url::Url::parse(&spec.url)
                .ok()
                .filter(|u| u.scheme() == "file")?
                .to_file_path()
                .ok()?;
            // The outermost folder of its path that does not exist yet.
            let first = dir.ancestors().take_while(|d| !d.exists()).last()?;
            Some((dir.clone(), first.to_path_buf()))
        });
        Untouched(missing.collect())
    }

    /// Whether a folder was missing: the store does not exist yet.
    pub(crate) fn made(&self) -> bool {
        !self.0.is_empty()
    }

    /// For the job's store and its outputs' stores.
    pub(crate) fn of_job(job: &Job) -> Untouched {
        let outputs = job.outputs.iter().filter_map(|o| match &o.target {
            Target::Zarr { store, .. } | Target::NpyStore { store, .. } => Some(store),
            _ => None,
        });
        Untouched::of(std::iter::once(&job.storage).chain(outputs))
    }
}

impl Drop for Untouched {
    fn drop(&mut self) {
        for (dir, first) in &self.0 {
            for d in dir.ancestors() {
                if std::fs::remove_dir(d).is_err() || d == first {
                    break;
                }
            }
        }
    }
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
pub(crate) async fn check_counted(
    job: Job,
    writable: bool,
    counted: &graph::Counted,
    io: &Arc<IoCounters>,
) -> anyhow::Result<Checked> {
    let probes = graph::probe_with(&job, counted, io).await?;
    let (graph, mask, values) = match graph::build_staged(&job, &probes, &Default::default())? {
        graph::Built::Done(g) => (g, None, None),
        graph::Built::NeedMask { graph, mask } => (graph, Some(mask), None),
        graph::Built::NeedValues { graph, node } => (graph, None, Some(node)),
    };
    let store = Store::open_counted(&job.storage, io)
        .map_err(|e| job.err(job.storage_line, "storage.url", e.to_string()))?;
    if writable {
        check_stores_take_writes(&job, &store).await?;
    }
    if job.outputs.is_empty() {
        tracing::warn!(
            "{}: no [outputs]: a run computes the job's arrays and keeps none; name where each \
             array goes in an [outputs] table (X = \"out/X.npy\")",
            job.file.display()
        );
    }
    Ok(Checked {
        job,
        graph,
        probes,
        store,
        mask,
        values,
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

/// The job's plan under its scheduler for the run with store prefix `prefix`; refused
/// before anything runs when it cannot fit.
pub fn plan_job(
    job: &Job,
    g: &Graph,
    prefix: &str,
    probes: &graph::Probes,
) -> anyhow::Result<Plan> {
    plan_with(job, g, job.compute.scheduler, prefix, probes)
}

/// The plan of `g` under `cfg`'s scheduler, stored under `prefix`, whichever front end
/// asks: refused when it cannot fit, in the words of the job file it came from
/// (`origin`), or of the settings when it came from none.
pub(crate) fn plan_for(
    cfg: &EngineConfig,
    g: &Graph,
    prefix: &str,
    probes: &graph::Probes,
    origin: Option<&Job>,
    held: Option<&crate::residency::Residency>,
) -> anyhow::Result<Plan> {
    let kind = cfg.compute.scheduler;
    plan_raw(cfg, g, kind, prefix, held).map_err(|e| {
        let words = match origin {
            Some(job) => explain_plan(job, g, kind, probes, &e),
            None => explain_settings(g, &e),
        };
        crate::error::Explained::into_anyhow(words, e)
    })
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
) -> anyhow::Result<Plan> {
    plan_raw(&job.engine(), g, kind, prefix, None).map_err(|e| {
        crate::error::Explained::into_anyhow(explain_plan(job, g, kind, probes, &e), e)
    })
}

fn plan_raw(
    cfg: &EngineConfig,
    g: &Graph,
    kind: SchedulerKind,
    prefix: &str,
    held: Option<&crate::residency::Residency>,
) -> Result<Plan, PlanError> {
    let cx = crate::sched::Ctx {
        held,
        g,
        prefix,
        store: &cfg.storage,
        workers: cfg.compute.workers,
        memory_mb: cfg.compute.memory_mb,
        model: CostModel::for_config(cfg),
        timeout_seconds: cfg.compute.timeout_seconds,
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
            .map(|g| plan_raw(&j.engine(), &g, kind, &dry_run_prefix(&j), None).is_ok())
            .unwrap_or(false)
    };
    let most = *crate::config::Setting::MemoryMb.range().end();
    let (mut lo, mut hi) = (job.compute.memory_mb, from.div_ceil(64) * 64);
    while !fits(hi) {
        if hi >= most {
            return None;
        }
        lo = hi;
        hi = (hi * 2).min(most);
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
    e: &PlanError,
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

/// A plan that does not fit, in the words of the settings (a computation no job file
/// made: its block's need, and the least `memory_mb` that need asks for).
fn explain_settings(g: &Graph, e: &PlanError) -> String {
    let what = match &g.nodes[e.node].name {
        Some(name) => format!("array {name}"),
        None => "a part of its expression".to_string(),
    };
    let most = *crate::config::Setting::MemoryMb.range().end();
    let hint = match e.need_mib.div_ceil(64) * 64 {
        mb if mb <= most => format!("give memory_mb = {mb} or more"),
        _ => format!("no memory_mb up to {most} fits it"),
    };
    format!(
        "memory_mb: block {} of {what} (block shape {:?}) needs {} MiB in one invocation, over memory_mb = {}; {hint}, or make its blocks smaller",
        e.block, e.shape, e.need_mib, e.limit_mb
    )
}

/// The plan's projection by the cost model of the configuration's backend
/// ([`crate::cost`]).
pub(crate) fn project(cfg: &EngineConfig, plan: &Plan, warm: bool) -> Projection {
    let c = &cfg.compute;
    let mut model = CostModel::for_config(cfg);
    if warm {
        model.cold_start_s = 0.0;
    }
    plan.project(model, c.workers, c.memory_mb)
}

/// The plan's projection on the job's backend.
pub(crate) fn projection(job: &Job, plan: &Plan) -> Projection {
    project(&job.engine(), plan, false)
}

/// [`projection`] on workers already started (no cold start): a stage after the run's
/// first, such as a fit's passes.
pub(crate) fn projection_warm(job: &Job, plan: &Plan) -> Projection {
    project(&job.engine(), plan, true)
}
