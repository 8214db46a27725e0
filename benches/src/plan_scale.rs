//! Planning time and memory as jobs grow (issue 14): the job `X` random `[n, 16]` in blocks
//! of `[100, 16]`, `mu = 1 / (1 + exp(-(X @ w)))`, `g = X.T @ mu`, planned in-process
//! (job text → graph → block work → plan, as `nums-cloud plan` does without the store
//! check) for X of 1k to 1M blocks, workers 2, 64 and 1000, under both schedulers. Each
//! case runs in a child process of its own, so that its peak memory (VmHWM) is its own.
//! Prints wall time, time per block task and peak memory, next to the "before"
//! figures where it has them.
//!
//!     cargo run --release -p nums-benches --bin plan_scale [-- --blocks 1000,10000 --workers 2,64 --schedulers lshs]

use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use nums_cloud::job::Job;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn list(name: &str, default: &str) -> Vec<String> {
    arg(name)
        .unwrap_or_else(|| default.to_string())
        .split(',')
        .map(str::to_string)
        .collect()
}

fn job_text(blocks: u64, workers: u64, scheduler: &str) -> String {
    format!(
        "name = \"plan-scale\"\n[compute]\nworkers = {workers}\nmemory_mb = 2048\nscheduler = \"{scheduler}\"\n\
         [arrays]\nX = {{ random = \"normal\", shape = [{}, 16], seed = 1, block = [100, 16] }}\n\
         w = {{ random = \"normal\", shape = [16], seed = 2 }}\n\
         mu = \"1 / (1 + exp(-(X @ w)))\"\ng = \"X.T @ mu\"\n[outputs]\ng = \"out/g.npy\"\n",
        blocks * 100
    )
}

/// Peak resident memory of this process so far, in bytes.
fn vm_hwm() -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status")?;
    let line = status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .context("no VmHWM")?;
    let kb: u64 = line
        .split_whitespace()
        .nth(1)
        .context("VmHWM value")?
        .parse()?;
    Ok(kb * 1024)
}

/// One case, in this process: prints `seconds tasks batches peak_bytes`.
fn one(blocks: u64, workers: u64, scheduler: &str) -> anyhow::Result<()> {
    let text = job_text(blocks, workers, scheduler);
    let started = Instant::now();
    let job = Job::parse(std::path::Path::new("/tmp/plan-scale/job.toml"), &text)?;
    let g = nums_cloud::graph::build(&job, &Default::default())?;
    let kind = job.compute.scheduler;
    let prefix = nums_cloud::plan::dry_run_prefix(&job);
    let plan = nums_cloud::plan::plan_with(&job, &g, kind, &prefix, &Default::default())?;
    let secs = started.elapsed().as_secs_f64();
    println!("{secs} {} {} {}", plan.tasks, plan.batches.len(), vm_hwm()?);
    Ok(())
}

/// The measurements of `nums-cloud plan` before the rewrite: (seconds, MB).
fn before(blocks: u64, workers: u64, scheduler: &str) -> Option<(f64, Option<f64>)> {
    match (blocks, workers, scheduler) {
        (1_000, 64, "lshs") => Some((0.4, Some(29.0))),
        (10_000, 64, "lshs") => Some((21.7, Some(172.0))),
        (50_000, 64, "lshs") => Some((579.0, Some(787.0))),
        (10_000, 2, "lshs") => Some((768.0, Some(170.0))),
        (10_000, 1_000, "lshs") => Some((2.5, Some(175.0))),
        (10_000, 64, "naive") => Some((22.0, None)),
        _ => None,
    }
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--one") {
        let n = |i: usize| -> anyhow::Result<u64> { Ok(args.get(i).context("argument")?.parse()?) };
        return one(n(2)?, n(3)?, args.get(4).context("scheduler")?);
    }
    let blocks = list("--blocks", "1000,10000,50000,100000,1000000");
    let workers = list("--workers", "2,64,1000");
    let schedulers = list("--schedulers", "lshs,naive");
    for s in &schedulers {
        if !matches!(s.as_str(), "lshs" | "naive") {
            bail!("unknown scheduler {s}: lshs or naive");
        }
    }
    let exe = std::env::current_exe()?;
    println!(
        "{:>9} {:>7} {:>9} {:>10} {:>10} {:>9} {:>11} {:>10} | {:>10} {:>10}",
        "blocks",
        "workers",
        "scheduler",
        "tasks",
        "batches",
        "wall s",
        "us per task",
        "peak MB",
        "before s",
        "before MB"
    );
    for b in &blocks {
        for w in &workers {
            for s in &schedulers {
                let out = Command::new(&exe).args(["--one", b, w, s]).output()?;
                if !out.status.success() {
                    bail!(
                        "case {b} blocks, {w} workers, {s}: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                let text = String::from_utf8(out.stdout)?;
                let f: Vec<f64> = text
                    .split_whitespace()
                    .map(str::parse)
                    .collect::<Result<_, _>>()?;
                let (secs, tasks, batches, peak) = (f[0], f[1], f[2], f[3]);
                let (bs, bm) = match before(b.parse()?, w.parse()?, s) {
                    Some((t, m)) => (
                        format!("{t:.1}"),
                        m.map_or_else(|| "-".to_string(), |m| format!("{m:.0}")),
                    ),
                    None => ("-".to_string(), "-".to_string()),
                };
                println!(
                    "{b:>9} {w:>7} {s:>9} {tasks:>10} {batches:>10} {secs:>9.2} {:>11.2} {:>10.0} | {bs:>10} {bm:>10}",
                    secs * 1e6 / tasks.max(1.0),
                    peak / 1e6,
                );
            }
        }
    }
    Ok(())
}
