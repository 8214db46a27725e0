//! The `nums-cloud` command line: its arguments (clap) and what each command does with
//! the engine. `src/main.rs` only calls [`main`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::human::plural;

#[derive(Parser)]
#[command(
    name = "nums-cloud",
    version,
    about = "Run NumPy-like array jobs on serverless functions"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// More diagnostics on standard error: -v (debug: every invocation, stage and
    /// retry; replaces the progress bar), -vv (trace, and the libraries' debug).
    /// RUST_LOG (e.g. RUST_LOG=nums_cloud=debug) overrides both -v and -q.
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Only errors and results: no progress bar, notes or warnings.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    quiet: bool,
}

#[derive(Subcommand)]
enum Cmd {
    /// Check and run a job file.
    Run(RunArgs),
    /// Dry run: the batches, simulated loads, projected memory, wall time and cost of LSHS
    /// and naive side by side; nothing runs and nothing is written.
    Plan(PlanArgs),
    /// Check a job file (names, shapes, dtypes, inputs, store) without running anything.
    Check(CheckArgs),
    /// Draw the timeline of a past run from its `--stats` JSON (as `run --timeline` does).
    Timeline(TimelineArgs),
    /// Build the Lambda deployment zip: the `bootstrap` binary (provided.al2023) zipped at
    /// its root. Run inside the nums-cloud source tree (or pass --source).
    Package(PackageArgs),
    /// Serve a local Lambda-compatible endpoint (the Invoke API, with function processes
    /// behind it, as `backend = "local"` starts) until interrupted; prints its URL. Point
    /// the lambda backend at it with AWS_ENDPOINT_URL_LAMBDA=URL.
    Endpoint(EndpointArgs),
    /// List the arrays stored under a prefix: shape, dtype, block shape, stored bytes,
    /// compression ratio and the job (and run) that wrote them.
    Ls(LsArgs),
    /// Show one stored array: its metadata and its values as NumPy prints them
    /// (summarised past 1000 elements; only the blocks printed are read).
    Show(ShowArgs),
    /// Write a stored array to a .npy, .csv or .parquet file, streamed block-row by
    /// block-row.
    Get(GetArgs),
    /// Import a .npy, .csv, .parquet or Zarr file as the stored array JOB/NAME, as a job would
    /// (checked, written under a run, committed whole).
    Put(PutArgs),
    /// Delete stored arrays (or a whole job's prefix), after asking (or with --yes).
    Rm(RmArgs),
    /// Print a shell completion script, e.g.
    /// `nums-cloud completions bash > ~/.local/share/bash-completion/completions/nums-cloud`.
    Completions(CompletionsArgs),
    /// Serve batches as a function process (what the local endpoint starts).
    #[command(hide = true)]
    Function,
}

// The arguments of `nums-cloud run`.
#[derive(clap::Args)]
struct RunArgs {
    /// The job file (TOML).
    job: PathBuf,
    /// Write the measured figures as JSON to this file (`-`: to standard output, and
    /// the summary to standard error), with one record per invocation (`timeline`).
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Draw the run's timeline as an SVG: one lane per slot, compute / store I/O /
    /// waiting, and each invocation's peak memory against memory_mb.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Keep the run's intermediate arrays in the store, and a copy of every output at
    /// `<job>/<array>` there.
    #[arg(long)]
    keep: bool,
    /// Resume the latest unfinished run of this job (killed, failed or interrupted):
    /// only the invocations whose outputs are missing run again.
    #[arg(long)]
    resume: bool,
    /// A deployment's `terraform output -json`: fills the job's function, storage url,
    /// memory and backend (lambda) where the job file leaves them out; sets the region.
    #[arg(long)]
    infra: Option<PathBuf>,
}

// The arguments of `nums-cloud plan`.
#[derive(clap::Args)]
struct PlanArgs {
    job: PathBuf,
    /// Also draw both plans as an SVG chart.
    #[arg(long)]
    svg: Option<PathBuf>,
    /// Also draw the LSHS plan's projected timeline (the backend's cost model) as SVG.
    #[arg(long)]
    timeline: Option<PathBuf>,
    /// Print the plans as JSON (every batch) instead of text.
    #[arg(long)]
    json: bool,
    /// A deployment's `terraform output -json` (as for `run`).
    #[arg(long)]
    infra: Option<PathBuf>,
}

// The arguments of `nums-cloud check`.
#[derive(clap::Args)]
struct CheckArgs {
    job: PathBuf,
    /// Print the result as JSON.
    #[arg(long)]
    json: bool,
    /// A deployment's `terraform output -json` (as for `run`).
    #[arg(long)]
    infra: Option<PathBuf>,
}

// The arguments of `nums-cloud timeline`.
#[derive(clap::Args)]
struct TimelineArgs {
    /// The `--stats` file of the run.
    stats: PathBuf,
    /// The SVG to write.
    svg: PathBuf,
}

// The arguments of `nums-cloud package`.
#[derive(clap::Args)]
struct PackageArgs {
    /// The Lambda architecture.
    #[arg(long, value_enum, default_value = "x86_64")]
    arch: crate::package::Arch,
    /// Where the zip goes (default: target/lambda in the source tree).
    #[arg(long)]
    out: Option<PathBuf>,
    /// The nums-cloud source tree (default: found from the current folder upwards).
    #[arg(long)]
    source: Option<PathBuf>,
    /// The cargo profile: `lambda` (fat LTO) for a deployment, `lambda-check` for a quick
    /// build of the same binary to try.
    #[arg(long, default_value = "lambda")]
    profile: String,
}

// The arguments of `nums-cloud endpoint`.
#[derive(clap::Args)]
struct EndpointArgs {
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
}

// The arguments of `nums-cloud ls`.
#[derive(clap::Args)]
struct LsArgs {
    /// A path under the store root (default: everything).
    prefix: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

// The arguments of `nums-cloud show`.
#[derive(clap::Args)]
struct ShowArgs {
    /// The array's path under the store root, e.g. job/X.
    array: String,
    #[command(flatten)]
    store: StoreArgs,
    #[arg(long)]
    json: bool,
}

// The arguments of `nums-cloud get`.
#[derive(clap::Args)]
struct GetArgs {
    array: String,
    file: PathBuf,
    #[command(flatten)]
    store: StoreArgs,
}

// The arguments of `nums-cloud put`.
#[derive(clap::Args)]
struct PutArgs {
    file: PathBuf,
    /// JOB/NAME: the array NAME under the job prefix JOB.
    array: String,
    /// The block shape, e.g. --block 1000,64 (default: as a job would choose).
    #[arg(long, value_delimiter = ',')]
    block: Option<Vec<u64>>,
    #[command(flatten)]
    load: LoadArgs,
    #[command(flatten)]
    store: StoreArgs,
}

// The arguments of `nums-cloud rm`.
#[derive(clap::Args)]
struct RmArgs {
    /// Array paths under the store root.
    arrays: Vec<String>,
    /// Delete everything under this job's prefix (its arrays and runs); with --imports,
    /// only the inputs its runs imported.
    #[arg(long)]
    job: Option<String>,
    /// Delete the input files runs imported into the store (kept so that later runs
    /// read them in place while the file is unchanged), of every job or of --job.
    #[arg(long)]
    imports: bool,
    /// Do not ask.
    #[arg(long, short)]
    yes: bool,
    #[command(flatten)]
    store: StoreArgs,
}

// The arguments of `nums-cloud completions`.
#[derive(clap::Args)]
struct CompletionsArgs {
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// Which store `ls`, `show`, `get`, `put` and `rm` work on.
#[derive(clap::Args)]
struct StoreArgs {
    /// The store: file://folder (relative to here) or s3://bucket/prefix
    /// (default: file://nums-data).
    #[arg(long)]
    storage: Option<String>,
    /// An S3-compatible endpoint for an s3:// store.
    #[arg(long)]
    endpoint: Option<String>,
    /// Take the store from this job file's [storage].
    #[arg(long = "job-file")]
    job_file: Option<PathBuf>,
}

/// How `put` reads its file: the job file's `load` keys (CSV options, dtype).
#[derive(clap::Args, Debug, Default)]
struct LoadArgs {
    /// The array's dtype (e.g. int64 for a CSV of integers; default float64 for CSV).
    #[arg(long)]
    dtype: Option<String>,
    /// CSV: the first line names the columns.
    #[arg(long)]
    header: bool,
    /// CSV: the field separator, one character ("\t" for tabs; default ",").
    #[arg(long)]
    delimiter: Option<String>,
    /// CSV or Parquet: the columns to read, by index (negative from the end) or name
    /// (a CSV's header, a Parquet file's columns), e.g. --usecols 0,2,-1 or
    /// --usecols price,size.
    #[arg(long, value_delimiter = ',', allow_hyphen_values = true)]
    usecols: Option<Vec<String>>,
}

impl LoadArgs {
    /// The keys as a job file writes them beside `load` (`, header = true, ...`).
    fn job_keys(&self) -> String {
        let q = |v: &str| serde_json::to_string(v).expect("a string");
        let mut out = String::new();
        if let Some(d) = &self.dtype {
            out += &format!(", dtype = {}", q(d));
        }
        if self.header {
            out += ", header = true";
        }
        if let Some(d) = &self.delimiter {
            out += &format!(", delimiter = {}", q(d));
        }
        if let Some(cols) = &self.usecols {
            let cols: Vec<String> = cols
                .iter()
                .map(|c| match c.trim().parse::<i64>() {
                    Ok(i) => i.to_string(),
                    Err(_) => q(c.trim()),
                })
                .collect();
            out += &format!(", usecols = [{}]", cols.join(", "));
        }
        out
    }
}

impl StoreArgs {
    fn spec(&self) -> anyhow::Result<nums_layout::StoreSpec> {
        crate::arrays::store_spec(
            self.storage.as_deref(),
            self.endpoint.as_deref(),
            self.job_file.as_deref(),
        )
    }

    /// The store, and the guard that removes its folder again if opening it made one
    /// (`ls`, `show`, `get` and `rm` change nothing in it).
    fn open(&self) -> anyhow::Result<(nums_layout::Store, crate::plan::Untouched)> {
        let spec = self.spec()?;
        let untouched = crate::plan::Untouched::of([&spec]);
        Ok((nums_layout::Store::open(&spec)?, untouched))
    }
}

/// Writes `text` to standard output. A write that fails because the reader went away
/// (EPIPE: `nums-cloud plan --json | head -c 400`) comes back as that `io::Error`, which
/// [`main`] turns into a quiet exit, as ripgrep does; `print!` would panic.
fn out(text: &str) -> anyhow::Result<()> {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    o.write_all(text.as_bytes())?;
    o.flush()?;
    Ok(())
}

/// [`out`] with `format!`'s arguments and a line end.
macro_rules! outln {
    ($($arg:tt)*) => { out(&format!("{}\n", format_args!($($arg)*))) };
}

/// Writes to standard error, ignoring a failure (nothing else could tell it): `eprint!`
/// would panic on a closed pipe.
fn err_text(text: &str) {
    use std::io::Write;
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// Whether `e` is a write to a pipe whose reader went away.
fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Writes a file the user named, saying which when it cannot.
fn write_file(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    std::fs::write(path, text).map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))
}

/// Runs the command line of this process; the exit code says how it went.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let verbosity = if cli.quiet {
        -1
    } else {
        cli.verbose.min(2) as i8
    };
    crate::logs::init(verbosity);
    let defaults = match defaults(&cli.cmd) {
        Ok(d) => d,
        Err(e) => {
            err_text(&format!("error: {e:#}\n"));
            return ExitCode::FAILURE;
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            err_text(&format!("error: cannot start the runtime: {e}\n"));
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async {
        match cli.cmd {
            Cmd::Run(a) => run(a, defaults, verbosity).await,
            Cmd::Plan(a) => plan(a, defaults).await,
            Cmd::Check(a) => check(a, defaults).await,
            Cmd::Timeline(a) => timeline(a),
            Cmd::Package(a) => package(a).await,
            Cmd::Endpoint(a) => endpoint(a).await,
            Cmd::Ls(a) => ls(a).await,
            Cmd::Show(a) => show(a).await,
            Cmd::Get(a) => get(a).await,
            Cmd::Put(a) => put(a, defaults).await,
            Cmd::Rm(a) => rm(a).await,
            Cmd::Completions(a) => completions(a),
            Cmd::Function => nums_function::runtime::serve()
                .await
                .map_err(|e| anyhow::anyhow!(e)),
        }
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        // The reader of standard output went away (`| head`): what it wanted it has.
        Err(e) if closed_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            err_text(&format!("error: {e:#}\n"));
            // 130: stopped by SIGINT, as shells report it.
            match e.downcast_ref::<crate::report::RunFailed>() {
                Some(f) if f.interrupted => ExitCode::from(130),
                _ => ExitCode::FAILURE,
            }
        }
    }
}

/// What job files leave out: from `--infra` (`run`, `plan`, `check`), else nums-cloud's
/// own defaults. A deployment's region is set for the AWS clients here, before any thread
/// exists.
fn defaults(cmd: &Cmd) -> anyhow::Result<crate::job::Defaults> {
    let infra = match cmd {
        Cmd::Run(RunArgs { infra, .. })
        | Cmd::Plan(PlanArgs { infra, .. })
        | Cmd::Check(CheckArgs { infra, .. }) => infra.as_deref(),
        _ => None,
    };
    let Some(infra) = infra.map(crate::infra::Infra::load).transpose()? else {
        return Ok(crate::job::Defaults::default());
    };
    if let Some(region) = &infra.region {
        // The deployment's region for both the Lambda client and the store: the AWS chain
        // reads it from the environment.
        // SAFETY: single-threaded still (the runtime starts after this).
        unsafe {
            std::env::set_var("AWS_REGION", region);
            std::env::set_var("AWS_DEFAULT_REGION", region);
        }
    }
    // The profile it was deployed with, unless the caller chose one (as Python's init does).
    if let Some(profile) = &infra.profile
        && std::env::var_os("AWS_PROFILE").is_none()
    {
        // SAFETY: as above.
        unsafe { std::env::set_var("AWS_PROFILE", profile) };
    }
    Ok(infra.defaults())
}

/// `nums-cloud run`: the summary on standard output (standard error with `--stats -`),
/// `--stats` and `--timeline` written for a failed run too.
async fn run(a: RunArgs, defaults: crate::job::Defaults, verbosity: i8) -> anyhow::Result<()> {
    let opts = crate::run::RunOptions {
        keep: a.keep,
        resume: a.resume,
        // With -v the log lines say what the bar would, and would tear it.
        // A bar on a terminal; NUMS_CLOUD_PROGRESS=1 forces lines on a pipe, 0 nothing.
        progress: verbosity == 0,
        function_command: None,
        defaults,
        ctrl_c: true,
    };
    let to_stdout = a.stats.as_deref() == Some(std::path::Path::new("-"));
    let write_stats = |report: &crate::report::Report| {
        if let Some(path) = &a.timeline {
            let t = crate::timeline::Timeline::from_report(report);
            write_file(path, &crate::timeline::svg(&t))?;
        }
        match &a.stats {
            Some(_) if to_stdout => outln!("{}", serde_json::to_string_pretty(report)?),
            Some(path) => write_file(path, &serde_json::to_string_pretty(report)?),
            None => Ok(()),
        }
    };
    match crate::run::run(&a.job, &opts).await {
        Ok(report) => {
            // The files first: a closed standard output must not lose them.
            write_stats(&report)?;
            // Standard output is the JSON's with `--stats -`.
            if to_stdout {
                err_text(&report.summary());
                Ok(())
            } else {
                out(&report.summary())
            }
        }
        Err(e) => {
            // A run that started reports what it measured, with its error.
            if let Some(f) = e.downcast_ref::<crate::report::RunFailed>() {
                write_stats(&f.report)?;
            }
            Err(e)
        }
    }
}

/// `nums-cloud plan`: LSHS and naive side by side, as text or JSON, and as SVG.
async fn plan(a: PlanArgs, defaults: crate::job::Defaults) -> anyhow::Result<()> {
    use crate::job::SchedulerKind;
    let c = crate::plan::check_for_plan(&a.job, &defaults).await?;
    let prefix = crate::plan::dry_run_prefix(&c.job);
    // The main stage reads the imports the fits make in place.
    let main = crate::iterate::main_graph(&c.graph, &prefix);
    let main = crate::export::with_file_outputs(&c.job, main, None, false);
    let plan = |kind| crate::plan::plan_with(&c.job, &main, kind, &prefix, &c.probes);
    let (lshs, naive) = (plan(SchedulerKind::Lshs)?, plan(SchedulerKind::Naive)?);
    let fits = |kind| crate::iterate::plan_fits(&c.job, &c.graph, &c.probes, kind, &prefix);
    let (lshs_fits, naive_fits) = (fits(SchedulerKind::Lshs)?, fits(SchedulerKind::Naive)?);
    let planned = [
        crate::planview::Planned {
            main: &lshs,
            fits: &lshs_fits,
        },
        crate::planview::Planned {
            main: &naive,
            fits: &naive_fits,
        },
    ];
    let provisional = crate::planview::provisional(&c);
    let factorizations = crate::graph::factorizations_text(&c.graph);
    if a.json {
        let j = crate::planview::json(&c.job, &planned, provisional);
        outln!("{}", serde_json::to_string_pretty(&j)?)?;
    } else {
        let mut text = crate::planview::text(&c.job, &planned);
        text += &factorizations;
        let stages = crate::planview::stages_text(&c);
        if !stages.is_empty() {
            text += &format!("\n{stages}");
        }
        if let Some(why) = provisional {
            text += &format!("\nprovisional: {why}\n");
        }
        out(&text)?;
    }
    if let Some(path) = a.svg {
        write_file(
            &path,
            &crate::planview::svg(&c.job, &planned, &factorizations),
        )?;
    }
    if let Some(path) = a.timeline {
        let t = crate::timeline::Timeline::projected(&c.job, &lshs);
        write_file(&path, &crate::timeline::svg(&t))?;
    }
    Ok(())
}

/// `nums-cloud check`: the job checked and planned, nothing run.
async fn check(a: CheckArgs, defaults: crate::job::Defaults) -> anyhow::Result<()> {
    let c = crate::plan::check_with(&a.job, &defaults).await?;
    crate::plan::plan_job(
        &c.job,
        &c.graph,
        &crate::plan::dry_run_prefix(&c.job),
        &c.probes,
    )?;
    let provisional = crate::planview::provisional(&c);
    // Each output's shape and dtype as the graph gives them (NumPy's result types).
    let outputs: Vec<(&str, &nums_layout::ArrayMeta)> = c
        .job
        .outputs
        .iter()
        .filter_map(|o| {
            let id = c.graph.named.get(&o.name)?;
            Some((o.name.as_str(), &c.graph.nodes[*id].meta))
        })
        .collect();
    if a.json {
        let j = serde_json::json!({
            "file": a.job.display().to_string(),
            "job": c.job.name,
            "ok": true,
            "arrays": c.job.arrays.len(),
            "outputs": c.job.outputs.len(),
            "output_arrays": outputs.iter().map(|(name, m)| serde_json::json!({
                "name": name,
                "shape": m.shape,
                "dtype": m.dtype.name(),
            })).collect::<Vec<_>>(),
            "provisional": provisional,
        });
        outln!("{}", serde_json::to_string_pretty(&j)?)?;
    } else {
        outln!(
            "{}: ok ({}, {})",
            a.job.display(),
            plural(c.job.arrays.len() as u64, "array", "arrays"),
            plural(c.job.outputs.len() as u64, "output", "outputs")
        )?;
        for (name, m) in &outputs {
            outln!("  output {name} {:?} {}", m.shape, m.dtype)?;
        }
        if let Some(why) = provisional {
            outln!("provisional plan: {why}")?;
        }
    }
    Ok(())
}

/// `nums-cloud timeline`: a past run's timeline from its `--stats`.
fn timeline(a: TimelineArgs) -> anyhow::Result<()> {
    let t = crate::timeline::Timeline::load(&a.stats)?;
    write_file(&a.svg, &crate::timeline::svg(&t))?;
    outln!(
        "{} ({} in {} s)",
        a.svg.display(),
        plural(t.timeline.len() as u64, "invocation", "invocations"),
        format_args!("{:.2}", t.wall_seconds)
    )
}

/// `nums-cloud package`: the Lambda deployment zip.
async fn package(a: PackageArgs) -> anyhow::Result<()> {
    let opts = crate::package::PackageOptions {
        arch: a.arch,
        out: a.out,
        source: a.source,
        profile: a.profile,
    };
    let p = tokio::task::spawn_blocking(move || crate::package::package(&opts)).await??;
    outln!(
        "{} ({}, bootstrap {}, built in {:.0} s)",
        p.zip.display(),
        crate::human::human(p.zip_bytes),
        crate::human::human(p.binary_bytes),
        p.build_seconds
    )
}

/// `nums-cloud endpoint`: a local Lambda-compatible endpoint until SIGINT or SIGTERM.
async fn endpoint(a: EndpointArgs) -> anyhow::Result<()> {
    let command = match a.command {
        Some(c) => c,
        None => crate::backend::default_function_command()?,
    };
    let ep = crate::local::LocalEndpoint::start(crate::local::LocalConfig {
        function: a.function,
        workers: a.workers,
        memory_mb: a.memory_mb,
        timeout: std::time::Duration::from_secs(a.timeout_seconds),
        command,
        log_dir: std::env::temp_dir().join(format!("nums-cloud-endpoint-{}", std::process::id())),
        tier_percent: crate::local::DEFAULT_TIER_PERCENT,
    })
    .await?;
    outln!("{}", ep.invoke_url)?;
    tracing::info!(
        "the function processes' logs go to {}/slot-N.log",
        ep.log_dir().display()
    );
    // Stop on SIGINT or SIGTERM, and take the function processes down too.
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r?,
        _ = term.recv() => {}
    }
    ep.stop().await;
    Ok(())
}

/// `nums-cloud ls`: the arrays under a prefix, as a table or JSON.
async fn ls(a: LsArgs) -> anyhow::Result<()> {
    let (s, untouched) = a.store.open()?;
    let prefix = a.prefix.as_deref().unwrap_or("");
    let infos = if untouched.made() {
        tracing::info!(
            "store {} does not exist: no job has written to it (a job's store is its \
             [storage] url, default file://nums-data beside the job file; give --storage URL \
             or --job-file job.toml)",
            s.spec()
        );
        Vec::new()
    } else {
        let infos = crate::arrays::list(&s, prefix).await?;
        if infos.is_empty() {
            tracing::info!("{}", crate::arrays::why_none(&s, prefix).await?);
        }
        infos
    };
    if a.json {
        outln!("{}", serde_json::to_string_pretty(&infos)?)
    } else if infos.is_empty() {
        Ok(())
    } else {
        out(&crate::arrays::ls_table(&infos))
    }
}

/// `nums-cloud show`: one array's metadata and values.
async fn show(a: ShowArgs) -> anyhow::Result<()> {
    let (s, _untouched) = a.store.open()?;
    let path = crate::arrays::array_path(&a.array)?;
    let arr = crate::arrays::open(&s, &path).await?;
    let info = crate::arrays::list(&s, &path)
        .await?
        .into_iter()
        .find(|i| i.path == path);
    let values = crate::arrays::preview(&arr, &s).await?;
    if a.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({
                "array": info, "preview": values,
            }))?
        )
    } else {
        let table = info.map(|i| crate::arrays::table(&[i], "job (run)"));
        outln!("{}{values}", table.unwrap_or_default())
    }
}

/// `nums-cloud get`: an array to a `.npy`, `.csv` or `.parquet` file.
async fn get(a: GetArgs) -> anyhow::Result<()> {
    let (s, _untouched) = a.store.open()?;
    let path = crate::arrays::array_path(&a.array)?;
    let meta = crate::arrays::get(&s, &path, &a.file).await?;
    outln!(
        "{path} {:?} {} -> {}",
        meta.shape,
        meta.dtype,
        a.file.display()
    )
}

/// `nums-cloud put`: a file imported as an array, by a job of one array.
async fn put(a: PutArgs, defaults: crate::job::Defaults) -> anyhow::Result<()> {
    let spec = a.store.spec()?;
    let path = crate::arrays::array_path(&a.array)?;
    let job = crate::arrays::put_job(
        &spec,
        &a.file,
        &path,
        a.block.as_deref(),
        &a.load.job_keys(),
    )?;
    let opts = crate::run::RunOptions {
        defaults,
        ctrl_c: true,
        ..Default::default()
    };
    let report = crate::run::run_job(job, &opts)
        .await
        .map_err(|e| crate::arrays::put_error(e, &a.file))?;
    outln!(
        "{} -> {path} ({}, {:.2} s)",
        a.file.display(),
        plural(report.invocations, "invocation", "invocations"),
        report.wall_seconds
    )
}

/// `nums-cloud rm`: arrays or a job's prefix deleted, after asking.
async fn rm(a: RmArgs) -> anyhow::Result<()> {
    let (s, _untouched) = a.store.open()?;
    if a.arrays.is_empty() && a.job.is_none() && !a.imports {
        anyhow::bail!("rm: name the arrays to delete, or --job NAME, or --imports");
    }
    if a.imports && !a.arrays.is_empty() {
        anyhow::bail!(
            "rm: --imports deletes imported inputs (of --job NAME); name no arrays with it"
        );
    }
    let targets = crate::arrays::rm_targets(&s, &a.arrays, a.job.as_deref(), a.imports).await?;
    if !a.yes {
        use std::io::Write;
        let mut question: String = targets
            .prefixes
            .iter()
            .map(|(p, n)| format!("  {p} ({})\n", plural(*n as u64, "object", "objects")))
            .collect();
        question += &format!("delete these from {}? [y/N] ", s.spec());
        let mut answer = String::new();
        // Not a quiet exit: a closed standard error means no one was asked.
        (|| {
            let mut e = std::io::stderr().lock();
            e.write_all(question.as_bytes())?;
            e.flush()?;
            std::io::stdin().read_line(&mut answer)
        })()
        .map_err(|e| {
            anyhow::anyhow!("rm: cannot ask ({e}); nothing deleted (--yes does not ask)")
        })?;
        if !matches!(answer.trim(), "y" | "Y" | "yes") {
            anyhow::bail!("nothing deleted");
        }
    }
    for (p, _) in &targets.prefixes {
        let n = s.delete_prefix(p).await?;
        outln!("deleted {p} ({})", plural(n as u64, "object", "objects"))?;
    }
    for k in &targets.index {
        s.delete(k).await?;
    }
    Ok(())
}

/// `nums-cloud completions`: a shell's completion script.
fn completions(a: CompletionsArgs) -> anyhow::Result<()> {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    // Into memory first: clap_complete panics when its writer fails.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "nums-cloud", &mut script);
    out(&String::from_utf8_lossy(&script))
}
