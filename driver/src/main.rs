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
        /// Keep the job's intermediate arrays in the store.
        #[arg(long)]
        keep: bool,
        /// No progress bar.
        #[arg(long, short)]
        quiet: bool,
    },
    /// Dry run: the batches, simulated loads, projected memory and estimated cost of LSHS
    /// and naive side by side; nothing runs and nothing is written.
    Plan {
        job: PathBuf,
        /// Also draw both plans as an SVG chart.
        #[arg(long)]
        svg: Option<PathBuf>,
    },
    /// Check a job file (names, shapes, dtypes, inputs, store) without running anything.
    Check { job: PathBuf },
    /// Serve batches as a function process (what the local endpoint starts).
    #[command(hide = true)]
    Function,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
    let result = rt.block_on(async {
        match cli.cmd {
            Cmd::Run {
                job,
                stats,
                keep,
                quiet,
            } => {
                let opts = nums_cloud::run::RunOptions {
                    keep,
                    progress: !quiet && std::io::stderr().is_terminal(),
                    function_command: None,
                };
                let report = nums_cloud::run::run(&job, &opts).await?;
                print!("{}", report.summary());
                if let Some(path) = stats {
                    std::fs::write(&path, serde_json::to_string_pretty(&report)?)
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
                anyhow::Ok(())
            }
            Cmd::Plan { job, svg } => {
                let c = nums_cloud::run::check(&job).await?;
                use nums_cloud::job::SchedulerKind;
                let lshs = nums_cloud::run::plan_with(&c.job, &c.graph, SchedulerKind::Lshs)?;
                let naive = nums_cloud::run::plan_with(&c.job, &c.graph, SchedulerKind::Naive)?;
                print!("{}", nums_cloud::planview::text(&c.job, &[&lshs, &naive]));
                if let Some(path) = svg {
                    std::fs::write(&path, nums_cloud::planview::svg(&c.job, &[&lshs, &naive]))
                        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
                }
                Ok(())
            }
            Cmd::Check { job } => {
                let c = nums_cloud::run::check(&job).await?;
                nums_cloud::run::plan_job(&c.job, &c.graph)?;
                println!(
                    "{}: ok ({} arrays, {} outputs)",
                    job.display(),
                    c.job.arrays.len(),
                    c.job.outputs.len()
                );
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
            ExitCode::FAILURE
        }
    }
}
