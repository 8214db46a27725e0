//! What a run measured: the `--stats` JSON and the one-screen summary.

use std::sync::atomic::Ordering;
use std::time::Duration;

use nums_layout::{ArrayMeta, Block, Store};
use serde::{Deserialize, Serialize};

use crate::dispatch::Dispatched;
use crate::job::{Job, Target};

/// AWS list prices (us-east-1, x86_64) used for `cost_usd`; docs/deploy.md explains them.
pub(crate) const USD_PER_GB_SECOND: f64 = 0.000_016_666_7;
pub(crate) const USD_PER_INVOCATION: f64 = 0.20 / 1e6;
pub(crate) const USD_PER_S3_PUT: f64 = 0.005 / 1000.0;
pub(crate) const USD_PER_S3_GET: f64 = 0.0004 / 1000.0;

/// Bytes for people: B, kB, MB or GB (powers of 1000), three significant figures or so.
pub(crate) fn human(b: u64) -> String {
    let v = b as f64;
    match b {
        0..1_000 => format!("{b} B"),
        1_000..1_000_000 => format!("{:.1} kB", v / 1e3),
        1_000_000..1_000_000_000 => format!("{:.1} MB", v / 1e6),
        _ => format!("{:.2} GB", v / 1e9),
    }
}

/// Memory for people, in MiB as Lambda's memory setting is.
pub(crate) fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// One invocation of a run, as `--stats` lists it (`timeline`) and `nums-cloud timeline`
/// draws it. Times are seconds since the run started (on the driver's clock: from the
/// send to the answer).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// The stage it belongs to: `main`, `mask-N` for a boolean mask computed first,
    /// `export-NAME-TAG` for an output written to an s3:// `.npy` file, or `csv-count` for
    /// the rows of large CSV inputs counted before the job is checked.
    pub stage: String,
    /// The batch's number in its stage's plan (as `nums-cloud plan` numbers them).
    pub batch: usize,
    /// The concurrency slot it ran in: the lowest-numbered one free when it was sent
    /// (0..workers, and more while backups run).
    pub slot: usize,
    /// The slot the scheduler planned it for.
    pub planned_slot: usize,
    pub start: f64,
    pub end: f64,
    pub tasks: u64,
    /// Store bytes the function read and wrote (0 when it failed).
    pub bytes_read: u64,
    pub bytes_written: u64,
    /// Inside the handler: all of it, in kernels, and waiting on the store.
    pub function_seconds: f64,
    pub compute_seconds: f64,
    pub io_seconds: f64,
    pub peak_memory_bytes: u64,
    /// Which send of its batch, from 1.
    pub attempt: u32,
    /// A backup sent for a straggler.
    pub backup: bool,
    /// `ok`; `late` (it answered after its batch was done by another copy: not used); or
    /// `failed`, with `error`.
    pub status: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Gives each invocation the lowest-numbered slot free when it started (an invocation
/// ending at an instant frees its slot for one starting then), and sorts them by start.
pub(crate) fn assign_slots(inv: &mut [Invocation]) {
    inv.sort_by(|a, b| a.start.total_cmp(&b.start).then(a.end.total_cmp(&b.end)));
    let mut free_at: Vec<f64> = Vec::new();
    for i in inv.iter_mut() {
        i.slot = match free_at.iter().position(|&f| f <= i.start) {
            Some(k) => k,
            None => {
                free_at.push(0.0);
                free_at.len() - 1
            }
        };
        free_at[i.slot] = i.end;
    }
}

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
    /// The plan's largest projected batch peak, and how many invocations measured more.
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
    pub fits: Vec<crate::iterate::FitReport>,
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
            cost_usd: gb_seconds * USD_PER_GB_SECOND
                + s.invocations as f64 * USD_PER_INVOCATION
                + puts as f64 * USD_PER_S3_PUT
                + others as f64 * USD_PER_S3_GET,
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
        let retries = match (self.retries, self.throttled) {
            (1, 0) => "1 retry".to_string(),
            (r, 0) => format!("{r} retries"),
            (r, t) => format!("{r} retries, {t} of them throttled"),
        };
        s += &format!(
            "  invocations  {} ({} tasks, {retries}) on {} with {} workers, scheduler {}\n",
            self.invocations, self.tasks, self.backend, self.workers, self.scheduler
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
                format!("converged in {} iterations", f.fitted.n_iter)
            } else {
                format!("NOT converged after {} iterations", f.fitted.n_iter)
            };
            let loss = match f.fitted.loss.last() {
                Some(l) if l.is_finite() => format!(", loss {l:.6e}"),
                _ => String::new(),
            };
            let seconds: f64 = f.passes.iter().map(|p| p.wall_seconds).sum();
            s += &format!(
                "  fit          {} = {}: {how}{loss}, {} passes in {seconds:.2} s\n",
                f.array,
                f.model,
                f.passes.len()
            );
        }
        for (name, target, meta, preview) in &self.outputs {
            let dest = match target {
                Target::Npy(p) | Target::Csv(p) => p.display().to_string(),
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
                let text = crate::arrays::format_block(b);
                for line in text.lines() {
                    s += &format!("               {line}\n");
                }
            }
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inv(start: f64, end: f64) -> Invocation {
        Invocation {
            stage: "main".into(),
            batch: 0,
            slot: usize::MAX,
            planned_slot: 0,
            start,
            end,
            tasks: 1,
            bytes_read: 0,
            bytes_written: 0,
            function_seconds: 0.0,
            compute_seconds: 0.0,
            io_seconds: 0.0,
            peak_memory_bytes: 0,
            attempt: 1,
            backup: false,
            status: "ok".into(),
            error: None,
        }
    }

    /// Slots never hold two invocations at once, and a freed slot is reused first.
    #[test]
    fn slots_do_not_overlap_and_are_reused() {
        let mut v = vec![
            inv(0.5, 1.5),
            inv(0.0, 1.0),
            inv(1.0, 2.0),
            inv(0.2, 0.4),
            inv(1.6, 1.7),
        ];
        assign_slots(&mut v);
        let got: Vec<(f64, usize)> = v.iter().map(|i| (i.start, i.slot)).collect();
        assert_eq!(got, vec![(0.0, 0), (0.2, 1), (0.5, 1), (1.0, 0), (1.6, 1)]);
        for a in &v {
            for b in &v {
                if a != b && a.slot == b.slot {
                    assert!(a.end <= b.start || b.end <= a.start, "{a:?} {b:?}");
                }
            }
        }
    }
}
