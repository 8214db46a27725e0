//! What a run measured: the `--stats` JSON and the one-screen summary.

use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::Duration;

use nums_layout::{ArrayMeta, Block, Store};
use serde::Serialize;

use crate::dispatch::Dispatched;
use crate::human::{human, mib, plural};

fn iterations(n: u32) -> String {
    plural(n as u64, "iteration", "iterations")
}
use crate::invocation::Invocation;
use crate::job::{Job, Target};
use crate::models::solver::Fitted;

/// What one fit measured, for `--stats`.
#[derive(Debug, Clone, Serialize)]
pub struct FitReport {
    /// The job's array the fit makes.
    pub array: String,
    pub model: String,
    #[serde(flatten)]
    pub fitted: Fitted,
    /// Per pass: its kind, wall seconds, invocations and store bytes read.
    pub passes: Vec<PassReport>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PassReport {
    pub kind: String,
    pub wall_seconds: f64,
    pub invocations: u64,
    pub bytes_read: u64,
}

/// A run that did not finish: what it measured until then, and why it stopped. Its
/// state stays in the store for `--resume`.
#[derive(Debug)]
pub(crate) struct RunFailed {
    pub report: Box<Report>,
    /// Why it stopped: the first line of the message.
    pub error: anyhow::Error,
    /// What to do about the run's state (`--resume`), on a line after the cause.
    pub advice: Option<String>,
    /// Stopped by Ctrl-C (SIGINT) rather than by an error.
    pub interrupted: bool,
    /// The local function processes' logs (kept after a failed run; removed after a
    /// successful one).
    pub logs: Vec<PathBuf>,
}

impl std::fmt::Display for RunFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:#}", self.error)?;
        if let Some(a) = &self.advice {
            write!(f, "\n  {a}")?;
        }
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

/// The `--stats` JSON: every figure measured (by the functions or the driver).
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub job: String,
    /// The run's id (its state lives under `<job>/_runs/<run>/` while it runs).
    pub run: String,
    /// "ok", "failed" or "interrupted".
    pub status: String,
    /// Why the run did not finish.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Invocations a resumed run did not need to send again (finished before, verified).
    pub skipped_batches: u64,
    pub backend: String,
    pub scheduler: String,
    pub workers: usize,
    pub wall_seconds: f64,
    pub invocations: u64,
    pub tasks: u64,
    pub s3_bytes_read: u64,
    pub s3_bytes_written: u64,
    pub s3_requests: u64,
    /// Intermediate bytes in the store at the end of the run, before clean-up (the most
    /// it held: intermediates are only removed when the job ends).
    pub peak_intermediate_bytes: u64,
    /// The driver's own store traffic (imports, metadata, outputs, clean-up).
    pub driver_bytes_read: u64,
    pub driver_bytes_written: u64,
    pub driver_requests: u64,
    pub peak_memory_bytes: u64,
    pub memory_limit_bytes: u64,
    /// The plan's largest projected batch peak, and how many invocations measured more
    /// than their own projection and than `memory_mb` (the headroom between the two is
    /// the functions' to spend on reads ahead, writes behind and kept blocks).
    pub projected_peak_memory_bytes: u64,
    pub invocations_over_projection: u64,
    /// The cost model's projection of the main stage's wall seconds (`nums-cloud plan`'s
    /// "projected wall time"), to set against the main stage's invocations in `timeline`.
    pub projected_main_seconds: f64,
    pub function_seconds: f64,
    pub compute_seconds: f64,
    pub io_seconds: f64,
    pub gb_seconds: f64,
    pub cost_usd: f64,
    pub retries: u64,
    /// Of `retries`, the invocations Lambda throttled (429) and that were sent again.
    pub throttled: u64,
    pub backups: u64,
    /// The models the job fitted: coefficients, iterations, loss history, passes.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fits: Vec<FitReport>,
    /// Every invocation, by start time.
    pub timeline: Vec<Invocation>,
    /// The local function processes' log files, kept when the run did not succeed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub function_logs: Vec<std::path::PathBuf>,
    #[serde(skip)]
    pub outputs: Vec<(String, Target, ArrayMeta, Option<Block>)>,
}

impl Report {
    pub fn new(
        job: &Job,
        scheduler: &str,
        tasks: usize,
        d: Dispatched,
        store: &Store,
        wall: Duration,
        outputs: Vec<(String, Target, ArrayMeta, Option<Block>)>,
    ) -> Report {
        let c = &store.counters;
        let s = &d.stats;
        let gb_seconds = s.wall_seconds * job.compute.memory_mb as f64 / 1024.0;
        let puts = s.put_requests + c.put_requests.load(Ordering::Relaxed);
        let others = s.requests + c.requests() - puts;
        Report {
            job: job.name.clone(),
            run: String::new(),
            status: "ok".into(),
            error: None,
            skipped_batches: 0,
            backend: format!("{:?}", job.compute.backend).to_lowercase(),
            scheduler: scheduler.to_string(),
            workers: job.compute.workers,
            wall_seconds: wall.as_secs_f64(),
            invocations: s.invocations,
            tasks: tasks as u64,
            s3_bytes_read: s.bytes_read,
            s3_bytes_written: s.bytes_written,
            s3_requests: s.requests,
            peak_intermediate_bytes: s.intermediate_bytes_written,
            driver_bytes_read: c.bytes_read.load(Ordering::Relaxed),
            driver_bytes_written: c.bytes_written.load(Ordering::Relaxed),
            driver_requests: c.requests(),
            peak_memory_bytes: s.peak_memory_bytes,
            memory_limit_bytes: job.compute.memory_mb << 20,
            projected_peak_memory_bytes: 0,
            projected_main_seconds: 0.0,
            invocations_over_projection: 0,
            function_seconds: s.wall_seconds,
            compute_seconds: s.compute_seconds,
            io_seconds: s.io_seconds,
            gb_seconds,
            cost_usd: crate::invocation::usd(gb_seconds, s.invocations, others, puts),
            retries: d.retries,
            throttled: d.throttled,
            backups: d.backups,
            fits: Vec::new(),
            timeline: Vec::new(),
            function_logs: Vec::new(),
            outputs,
        }
    }

    /// The one-screen summary.
    pub fn summary(&self) -> String {
        let mut s = String::new();
        let mb = human;
        s += &format!("job {} finished in {:.2} s\n", self.job, self.wall_seconds);
        let retries = crate::human::plural(self.retries, "retry", "retries");
        let retries = match self.throttled {
            0 => retries,
            t => format!("{retries}, {t} of them throttled"),
        };
        s += &format!(
            "  invocations  {} ({}, {retries}) on {} with {}, scheduler {}\n",
            self.invocations,
            plural(self.tasks, "task", "tasks"),
            self.backend,
            plural(self.workers as u64, "worker", "workers"),
            self.scheduler
        );
        s += &format!(
            "  store        functions read {} and wrote {} in {} requests; driver read {} and wrote {}\n",
            mb(self.s3_bytes_read),
            mb(self.s3_bytes_written),
            self.s3_requests,
            mb(self.driver_bytes_read),
            mb(self.driver_bytes_written)
        );
        s += &format!(
            "  memory       peak {} of the {} limit per invocation ({:.1}%)\n",
            mib(self.peak_memory_bytes),
            mib(self.memory_limit_bytes),
            100.0 * self.peak_memory_bytes as f64 / self.memory_limit_bytes as f64
        );
        s += &format!(
            "  time         {:.2} s in functions ({:.2} s compute, {:.2} s store I/O)\n",
            self.function_seconds, self.compute_seconds, self.io_seconds
        );
        s += &format!(
            "  cost         {:.3} GB-s, ${:.6} at Lambda and S3 list prices\n",
            self.gb_seconds, self.cost_usd
        );
        for f in &self.fits {
            let how = if f.fitted.converged {
                format!("converged in {}", iterations(f.fitted.n_iter))
            } else {
                format!("NOT converged after {}", iterations(f.fitted.n_iter))
            };
            let loss = match f.fitted.loss.last() {
                Some(l) if l.is_finite() => format!(", loss {l:.6e}"),
                _ => String::new(),
            };
            let seconds: f64 = f.passes.iter().map(|p| p.wall_seconds).sum();
            s += &format!(
                "  fit          {} = {}: {how}{loss}, {} in {seconds:.2} s\n",
                f.array,
                f.model,
                plural(f.passes.len() as u64, "pass", "passes")
            );
        }
        for (name, target, meta, preview) in &self.outputs {
            let dest = match target {
                Target::Npy(p) | Target::Csv(p) | Target::Parquet(p) => p.display().to_string(),
                Target::NpyStore { store, key } => {
                    format!("{}/{key}", store.url.trim_end_matches('/'))
                }
                Target::Zarr { store, path } => {
                    format!("{}/{path}", store.url.trim_end_matches('/'))
                }
            };
            s += &format!(
                "  output       {name} {:?} {} -> {dest}\n",
                meta.shape, meta.dtype
            );
            if let Some(b) = preview {
                // Under the label column, within NumPy's line width.
                const INDENT: &str = "               ";
                let width = crate::human::LINE_WIDTH - INDENT.len();
                for line in crate::human::format_block(b, width).lines() {
                    s += &format!("{INDENT}{line}\n");
                }
            }
        }
        s
    }
}
