//! What a computation may ask of the engine, whichever front end asks: the compute
//! settings' limits and defaults, checked in one place for a job file's `[compute]`, a
//! session's settings and a deployment's Terraform outputs alike.

use std::ops::RangeInclusive;

use nums_layout::StoreSpec;
use serde::Deserialize;

/// The most elements an array may have (2^50: its byte count stays far inside u64).
pub(crate) const MAX_ELEMENTS: u64 = 1 << 50;

/// Workers on Lambda when none are asked for (and no deployment reserves more).
pub(crate) const DEFAULT_WORKERS: u64 = 2;

/// This machine's memory in bytes (its cgroup's limit where lower); 4 GiB where neither
/// can be read.
pub(crate) fn machine_memory_bytes() -> u64 {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
            Some(kb << 10)
        })
        .unwrap_or(4 << 30);
    let limit = [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|f| std::fs::read_to_string(f).ok()?.trim().parse::<u64>().ok())
    .unwrap_or(u64::MAX);
    total.min(limit)
}

/// Workers when none are asked for: local function processes run on this machine, so
/// one per core it gives the process, and no more than three quarters of its memory holds
/// at `memory_mb` each (at least 1); on Lambda, [`DEFAULT_WORKERS`].
pub(crate) fn default_workers(backend: crate::job::Backend, memory_mb: u64) -> u64 {
    match backend {
        crate::job::Backend::Local => {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
            let fit = machine_memory_bytes() / 4 * 3 / (memory_mb.max(1) << 20);
            cores.min(fit).clamp(1, *Setting::Workers.range().end())
        }
        _ => DEFAULT_WORKERS,
    }
}
/// `memory_mb` when none is asked for.
pub(crate) const DEFAULT_MEMORY_MB: u64 = 2048;
/// `timeout_seconds` when none is asked for: Lambda's longest.
pub(crate) const DEFAULT_TIMEOUT_SECONDS: u64 = 900;

/// A compute setting with limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Setting {
    /// Functions running at once.
    Workers,
    /// Each function's memory (Lambda's range).
    MemoryMb,
    /// Each invocation's longest run (Lambda's range).
    TimeoutSeconds,
    /// The share of each invocation's headroom a function process's memory tier may
    /// hold, in percent ([`nums_function::memory::tier_budget`]).
    FunctionTierPercent,
}

impl Setting {
    /// The values it may take.
    pub(crate) const fn range(self) -> RangeInclusive<u64> {
        match self {
            Setting::Workers => 1..=1000,
            Setting::MemoryMb => 128..=10240,
            Setting::TimeoutSeconds => 1..=900,
            Setting::FunctionTierPercent => 0..=100,
        }
    }

    /// Its name, as a job file's `[compute]` and a session's settings spell it.
    pub(crate) const fn name(self) -> &'static str {
        match self {
            Setting::Workers => "workers",
            Setting::MemoryMb => "memory_mb",
            Setting::TimeoutSeconds => "timeout_seconds",
            Setting::FunctionTierPercent => "function_tier_percent",
        }
    }

    /// `value`, if within [`Setting::range`].
    pub(crate) fn check(self, value: i64) -> Result<u64, OutOfRange> {
        let r = self.range();
        u64::try_from(value)
            .ok()
            .filter(|v| r.contains(v))
            .ok_or(OutOfRange {
                setting: self,
                value,
            })
    }
}

/// A setting given a value outside its range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct OutOfRange {
    pub(crate) setting: Setting,
    pub(crate) value: i64,
}

impl std::fmt::Display for OutOfRange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let r = self.setting.range();
        write!(
            f,
            "{} is out of range: it must be between {} and {}",
            self.value,
            r.start(),
            r.end()
        )
    }
}

impl std::error::Error for OutOfRange {}

/// Where the functions run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Function processes on this machine, behind a local Lambda-compatible endpoint.
    Local,
    /// AWS Lambda.
    Lambda,
}

/// How block tasks are grouped into invocations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SchedulerKind {
    /// Locality-aware batches (NumS's LSHS).
    Lshs,
    /// One batch per block task, in order.
    Naive,
}

/// `[compute]` of a job file, or a session's settings: with defaults filled in.
#[derive(Debug, Clone)]
pub struct Compute {
    /// Where the functions run.
    pub backend: Backend,
    /// Functions running at once.
    pub workers: usize,
    /// Each function's memory.
    pub memory_mb: u64,
    /// Each invocation's longest run.
    pub timeout_seconds: u64,
    /// How block tasks are grouped into invocations.
    pub scheduler: SchedulerKind,
    /// The Lambda function's name (the lambda backend).
    pub function: String,
    /// Percent of each invocation's headroom (its memory limit less its batch's projected
    /// peak) that the function process keeps blocks in across invocations
    /// ([`nums_function::memory::tier_budget`]); 0: none.
    pub function_tier_percent: u64,
}

/// What the engine runs a computation with, whichever front end asks: the compute
/// settings and the store. A job file is one producer of it, a session's settings another.
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// The compute settings.
    pub compute: Compute,
    /// The store the arrays live in.
    pub storage: StoreSpec,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Local workers default to the cores this process may use, fewer where the machine's
    /// memory holds fewer invocations, never 0; Lambda's to 2. A session follows
    /// `memory_mb` until `workers` is set; a job file's `[compute]` likewise.
    #[test]
    fn default_workers_are_the_cores_the_memory_holds() {
        use crate::api::Session;
        use crate::job::Backend;
        let cores = std::thread::available_parallelism().unwrap().get() as u64;
        let small = default_workers(Backend::Local, 128);
        let big = default_workers(Backend::Local, 10240);
        assert!((1..=cores).contains(&small) && (1..=small).contains(&big));
        let held = machine_memory_bytes() / 4 * 3 / (10240 << 20);
        assert_eq!(big, cores.min(held).max(1));
        assert_eq!(default_workers(Backend::Lambda, 2048), DEFAULT_WORKERS);
        let s = Session::new("file:///tmp/nums-default-workers").unwrap();
        assert_eq!(
            s.settings().workers as u64,
            default_workers(Backend::Local, 2048)
        );
        let s = s.memory_mb(10240);
        assert_eq!(s.settings().workers as u64, big);
        let s = s.workers(7).memory_mb(128).backend(Backend::Lambda);
        assert_eq!(s.settings().workers, 7);
        let job = |compute: &str| {
            let text = format!("[compute]\n{compute}\n[arrays]\nx = \"ones(2)\"\n");
            crate::job::Job::parse(std::path::Path::new("/tmp/j/job.toml"), &text)
                .unwrap()
                .compute
                .workers as u64
        };
        assert_eq!(job("memory_mb = 10240"), big);
        assert_eq!(job("backend = \"lambda\""), DEFAULT_WORKERS);
        assert_eq!(job("workers = 3"), 3);
    }

    #[test]
    fn each_setting_takes_its_edges_and_refuses_past_them() {
        for s in [Setting::Workers, Setting::MemoryMb, Setting::TimeoutSeconds] {
            let r = s.range();
            let (lo, hi) = (*r.start() as i64, *r.end() as i64);
            assert_eq!(s.check(lo), Ok(lo as u64));
            assert_eq!(s.check(hi), Ok(hi as u64));
            for bad in [lo - 1, hi + 1, -1, i64::MIN] {
                let e = s.check(bad).unwrap_err();
                assert_eq!(
                    e.to_string(),
                    format!("{bad} is out of range: it must be between {lo} and {hi}")
                );
            }
        }
        assert_eq!(
            Setting::MemoryMb.check(64).unwrap_err().to_string(),
            "64 is out of range: it must be between 128 and 10240"
        );
    }
}
