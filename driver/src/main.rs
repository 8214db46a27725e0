//! `nums-cloud`: run NumPy-like array jobs on serverless functions.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "nums-cloud",
    version,
    about = "Run NumPy-like array jobs on serverless functions"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check and run a job file.
    Run {
        /// The job file (TOML).
        job: PathBuf,
        /// Write the measured figures as JSON to this file.
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Keep the run's intermediate arrays in the store.
        #[arg(long)]
        keep: bool,
        /// Resume the latest unfinished run of this job (killed, failed or interrupted):
        /// only the invocations whose outputs are missing run again.
        #[arg(long)]
        resume: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
        /// A deployment's `terraform output -json`: fills the job's function, storage url,
        /// memory and backend (lambda) where the job file leaves them out; sets the region.
        #[arg(long)]
        infra: Option<PathBuf>,
    },
    /// Dry run: the batches, simulated loads, projected memory and estimated cost of LSHS
    /// and naive side by side; nothing runs and nothing is written.
    Plan {
        job: PathBuf,
        /// Also draw both plans as an SVG chart.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// A deployment's `terraform output -json` (as for `run`).
        #[arg(long)]
        infra: Option<PathBuf>,
    },
    /// Check a job file (names, shapes, dtypes, inputs, store) without running anything.
    Check {
        job: PathBuf,
        /// A deployment's `terraform output -json` (as for `run`).
        #[arg(long)]
        infra: Option<PathBuf>,
    },
    /// Build the Lambda deployment zip: the `bootstrap` binary (provided.al2023) zipped at
    /// its root. Run inside the nums-cloud source tree (or pass --source).
    Package {
        /// The Lambda architecture.
        #[arg(long, value_enum, default_value = "x86_64")]
        arch: nums_cloud::package::Arch,
        /// Where the zip goes (default: target/lambda in the source tree).
        #[arg(long)]
        out: Option<PathBuf>,
        /// The nums-cloud source tree (default: found from the current folder upwards).
        #[arg(long)]
        source: Option<PathBuf>,
    },
    /// Serve a local Lambda-compatible endpoint (the Invoke API, with function processes
    /// behind it, as `backend = "local"` starts) until interrupted; prints its URL. Point
    /// the lambda backend at it with AWS_ENDPOINT_URL_LAMBDA=URL.
    Endpoint {
        /// The function name it answers to.
        #[arg(long, default_value = "nums-cloud")]
        function: String,
        #[arg(long, default_value_t = 2)]
        workers: usize,
        #[arg(long, default_value_t = 2048)]
        memory_mb: u64,
        #[arg(long, default_value_t = 900)]
        timeout_seconds: u64,
        /// The function process (for example an unzipped `bootstrap`); default: this
        /// executable's own function loop.
        #[arg(long, num_args = 1.., allow_hyphen_values = true)]
        command: Option<Vec<String>>,
    },
    /// Serve batches as a function process (what the local endpoint starts).
    #[command(hide = true)]
    Function,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let infra = match &cli.cmd {
        Cmd::Run { infra, .. } | Cmd::Plan { infra, .. } | Cmd::Check { infra, .. } => {
            infra.as_deref()
        }
        _ => None,
    };
    let defaults = match infra.map(nums_cloud::infra::Infra::load).transpose() {
        Ok(Some(i)) => {
            if let Some(region) = &i.region {
                // The deployment's region for both the Lambda client and the store: set
                // here, before any thread exists, as the AWS chain reads it from the env.
                // SAFETY: single-threaded still (the runtime starts below).
                unsafe {
                    std::env::set_var("AWS_REGION", region);
                    std::env::set_var("AWS_DEFAULT_REGION", region);
                }
            }
            i.defaults()
        }
        Ok(None) => nums_cloud::job::Defaults::default(),
        Err(e) => {
            eprintln!("error: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut interrupted = false;
    let result = rt.block_on(async {
        match cli.cmd {
            Cmd::Run {
                job,
                stats,
                keep,
                resume,
                quiet,
                infra: _,
            } => {
                let opts = nums_cloud::run::RunOptions {
                    keep,
                    resume,
                    progress: !quiet && std::io::stderr().is_terminal(),
                    function_command: None,
                    defaults,
                };
                let write_stats = |report: &nums_cloud::report::Report| match &stats {
                    Some(path) => std::fs::write(path, serde_json::to_string_pretty(report)?)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display())),
                    None => Ok(()),
                };
                match nums_cloud::run::run(&job, &opts).await {
                    Ok(report) => {
                        print!("{}", report.summary());
                        write_stats(&report)
                    }
                    Err(e) => {
                        // A run that started reports what it measured, with its error.
                        if let Some(f) = e.downcast_ref::<nums_cloud::run::RunFailed>() {
                            write_stats(&f.report)?;
                            if f.interrupted {
                                interrupted = true;
                            }
                        }
                        Err(e)
                    }
                }
            }
            Cmd::Plan { job, svg, .. } => {
                let c = nums_cloud::run::check_with(&job, &defaults).await?;
                use nums_cloud::job::SchedulerKind;
                let prefix = nums_cloud::run::dry_run_prefix(&c.job);
                let plan =
                    |kind| nums_cloud::run::plan_with(&c.job, &c.graph, kind, &prefix, &c.probes);
                let (lshs, naive) = (plan(SchedulerKind::Lshs)?, plan(SchedulerKind::Naive)?);
                print!("{}", nums_cloud::planview::text(&c.job, &[&lshs, &naive]));
                if let Some(path) = svg {
                    std::fs::write(&path, nums_cloud::planview::svg(&c.job, &[&lshs, &naive]))
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
                Ok(())
            }
            Cmd::Check { job, .. } => {
                let c = nums_cloud::run::check_with(&job, &defaults).await?;
                nums_cloud::run::plan_job(
                    &c.job,
                    &c.graph,
                    &nums_cloud::run::dry_run_prefix(&c.job),
                    &c.probes,
                )?;
                println!(
                    "{}: ok ({} arrays, {} outputs)",
                    job.display(),
                    c.job.arrays.len(),
                    c.job.outputs.len()
                );
                Ok(())
            }
            Cmd::Package { arch, out, source } => {
                let opts = nums_cloud::package::PackageOptions { arch, out, source };
                let p = tokio::task::spawn_blocking(move || nums_cloud::package::package(&opts))
                    .await??;
                println!(
                    "{} ({}, bootstrap {}, built in {:.0} s)",
                    p.zip.display(),
                    nums_cloud::report::human(p.zip_bytes),
                    nums_cloud::report::human(p.binary_bytes),
                    p.build_seconds
                );
                Ok(())
            }
            Cmd::Endpoint {
                function,
                workers,
                memory_mb,
                timeout_seconds,
                command,
            } => {
                let command = match command {
                    Some(c) => c,
                    None => nums_cloud::run::default_function_command()?,
                };
                let ep = nums_cloud::local::LocalEndpoint::start(nums_cloud::local::LocalConfig {
                    function,
                    workers,
                    memory_mb,
                    timeout: std::time::Duration::from_secs(timeout_seconds),
                    command,
                    log_dir: std::env::temp_dir()
                        .join(format!("nums-cloud-endpoint-{}", std::process::id())),
                })
                .await?;
                println!("{}", ep.invoke_url);
                // Stop on SIGINT or SIGTERM, and take the function processes down too.
                let mut term =
                    tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
                tokio::select! {
                    r = tokio::signal::ctrl_c() => r?,
                    _ = term.recv() => {}
                }
                ep.stop().await;
                Ok(())
            }
            Cmd::Function => nums_function::runtime::serve()
                .await
                .map_err(|e| anyhow::anyhow!(e)),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            // 130: stopped by SIGINT, as shells report it.
            if interrupted {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
