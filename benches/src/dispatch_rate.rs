//! Dispatch at scale: how many invocations per second the driver keeps going, and what
//! each costs it. `--batches` no-op batches (a batch with no tasks: the function returns
//! at once) go through `run_batches` and the local Lambda-compatible endpoint to real
//! function processes (`nums-cloud function`), for each worker count; printed side by
//! side with the dispatcher alone (the same batches through an in-process no-op
//! [`Invoke`], no HTTP, no process), so the dispatcher's own share shows, and with the
//! endpoint in a process of its own (`nums-cloud endpoint`), so the driver's CPU is what
//! it would spend against AWS Lambda (the dispatcher and the SDK's Invoke calls).
//!
//!     cargo build --release -p nums-cloud -p nums-benches
//!     target/release/dispatch_rate [--batches 100000] [--workers 2,4,8]
//!
//! A second table shows the dispatcher's own cost per invocation staying flat from 10,000
//! to 1,000,000 batches, with dependencies (batch i waits for i/2 and i-1000) and 1,000
//! workers in flight, as against Lambda.
//!
//! CPU per invocation is from getrusage: the driver's (RUSAGE_SELF: the dispatcher, the
//! SDK's HTTP client and, as `nums-cloud run` does it, the endpoint inside the driver) and
//! its children's (RUSAGE_CHILDREN, counted once stopped and reaped: the function
//! processes, and the endpoint process with them when it runs apart).

use std::time::{Duration, Instant};

use anyhow::Context;
use nums_cloud::dispatch::{Invoke, InvokeError, Invoker, run_batches};
use nums_cloud::local::{LocalConfig, LocalEndpoint};
use nums_cloud::sched::PlannedBatch;
use nums_layout::batch::{Batch, Stats};
use nums_layout::{Store, StoreSpec};

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// CPU seconds (user + system) of this process or of its reaped children.
fn cpu(who: libc::c_int) -> f64 {
    // SAFETY: rusage is plain integers (zero is a valid value), and getrusage only
    // writes the struct it is given.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(who, &mut u) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 * 1e-6;
    t(u.ru_utime) + t(u.ru_stime)
}

/// Answers every payload at once: the dispatcher alone.
struct NoOp;

impl Invoke for NoOp {
    async fn invoke(&self, _payload: Vec<u8>) -> Result<Stats, InvokeError> {
        Ok(Stats {
            invocations: 1,
            ..Stats::default()
        })
    }
}

struct Round {
    seconds: f64,
    invocations: u64,
    driver_cpu: f64,
    function_cpu: f64,
}

async fn round<I: Invoke>(
    inv: &I,
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
) -> anyhow::Result<Round> {
    let (t, c) = (Instant::now(), cpu(libc::RUSAGE_SELF));
    let d = run_batches(inv, batches, store, workers, |_, _| {}).await?;
    Ok(Round {
        seconds: t.elapsed().as_secs_f64(),
        invocations: d.stats.invocations,
        driver_cpu: cpu(libc::RUSAGE_SELF) - c,
        function_cpu: 0.0,
    })
}

/// A round against `nums-cloud endpoint` run as a process of its own.
async fn apart(
    command: &[String],
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
) -> anyhow::Result<Round> {
    use tokio::io::AsyncBufReadExt;
    let children = cpu(libc::RUSAGE_CHILDREN);
    let mut ep = tokio::process::Command::new(&command[0])
        .args([
            "endpoint",
            "--function",
            "rate",
            "--workers",
            &workers.to_string(),
        ])
        .args(["--memory-mb", "256", "--timeout-seconds", "60", "--command"])
        .args(command)
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let mut lines = tokio::io::BufReader::new(ep.stdout.take().context("stdout")?).lines();
    let url = lines
        .next_line()
        .await?
        .context("the endpoint printed no URL")?;
    let inv = Invoker::local(&url, "rate");
    round(&inv, &batches[..4 * workers], store, workers).await?;
    let mut r = round(&inv, batches, store, workers).await?;
    // SIGTERM: the endpoint stops its function processes and reaps them.
    let pid = ep.id().context("endpoint pid")? as i32;
    // SAFETY: kill only sends a signal, to the child started above.
    unsafe { libc::kill(pid, libc::SIGTERM) };
    ep.wait().await?;
    r.function_cpu = cpu(libc::RUSAGE_CHILDREN) - children;
    Ok(r)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = arg("--batches").map_or(Ok(100_000), |s| s.parse())?;
    let workers: Vec<usize> = arg("--workers")
        .unwrap_or_else(|| "2,4,8".into())
        .split(',')
        .map(|w| w.trim().parse())
        .collect::<Result<_, _>>()
        .context("--workers: a list like 2,4,8")?;
    let dir = std::env::temp_dir().join(format!("nums-bench-dispatch-{}", std::process::id()));
    let spec = StoreSpec {
        url: url::Url::from_directory_path(&dir)
            .map_err(|_| anyhow::anyhow!("temp dir"))?
            .to_string(),
        endpoint: None,
    };
    let store = Store::open(&spec)?;
    let batches: Vec<PlannedBatch> = (0..n)
        .map(|_| {
            PlannedBatch::from_batch(
                Batch {
                    store: spec.clone(),
                    job_prefix: "rate".into(),
                    arrays: vec![],
                    tasks: vec![],
                    prefetch_budget: 0,
                },
                vec![],
            )
        })
        .collect();
    let command = nums_cloud::backend::default_function_command()?;
    println!(
        "{n} no-op batches; {} cores; function: {}",
        std::thread::available_parallelism().map_or(1, |c| c.get()),
        command.join(" ")
    );
    println!(
        "| workers | path | seconds | invocations/s | driver CPU µs/invocation | children's CPU µs/invocation |"
    );
    println!("|---|---|---|---|---|---|");
    for &w in &workers {
        let alone = round(&NoOp, &batches, &store, w).await?;
        let ep = LocalEndpoint::start(LocalConfig {
            function: "rate".into(),
            workers: w,
            memory_mb: 256,
            timeout: Duration::from_secs(60),
            command: command.clone(),
            log_dir: dir.join("logs"),
            tier_percent: 0,
        })
        .await?;
        let inv = Invoker::local(&ep.invoke_url, "rate");
        // Warm: every process started and polling, connections open.
        round(&inv, &batches[..4 * w], &store, w).await?;
        let children = cpu(libc::RUSAGE_CHILDREN);
        let mut local = round(&inv, &batches, &store, w).await?;
        ep.stop().await;
        local.function_cpu = cpu(libc::RUSAGE_CHILDREN) - children;
        let apart = apart(&command, &batches, &store, w).await?;
        for (path, r) in [
            ("dispatcher alone", &alone),
            ("endpoint in the driver", &local),
            ("endpoint apart", &apart),
        ] {
            anyhow::ensure!(
                r.invocations == n as u64,
                "{path}: {} invocations",
                r.invocations
            );
            let per = |s: f64| s / r.invocations as f64 * 1e6;
            println!(
                "| {w} | {path} | {:.2} | {:.0} | {:.1} | {} |",
                r.seconds,
                r.invocations as f64 / r.seconds,
                per(r.driver_cpu),
                if path == "dispatcher alone" {
                    "-".into()
                } else {
                    format!("{:.1}", per(r.function_cpu))
                },
            );
        }
    }
    println!();
    println!("| batches (with dependencies) | workers | seconds | dispatcher CPU µs/invocation |");
    println!("|---|---|---|---|");
    for n in [10_000, 100_000, 1_000_000] {
        let mut dag = vec![batches[0].clone(); n];
        for (i, b) in dag.iter_mut().enumerate() {
            b.deps = if i >= 1000 {
                vec![i / 2, i - 1000]
            } else {
                vec![]
            };
        }
        let r = round(&NoOp, &dag, &store, 1000).await?;
        anyhow::ensure!(r.invocations == n as u64);
        println!(
            "| {n} | 1000 | {:.2} | {:.2} |",
            r.seconds,
            r.driver_cpu / n as f64 * 1e6
        );
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
