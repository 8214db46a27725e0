//! The functions a run invokes, owned in one place ([`Backend`]): the invoker (AWS Lambda,
//! or the local Lambda-compatible endpoint with its function processes), started once per
//! run and handed to every stage (the CSV count, the masks, the fits, the main stage, the
//! exports), stopped once at the end; and the rules for the local processes' logs, kept
//! after a run that did not succeed and removed after one that did.

use std::path::{Path, PathBuf};
#[cfg(feature = "local")]
use std::time::Duration;

use anyhow::{Context, anyhow};

use crate::dispatch::Invoker;
use crate::job::{self, Compute};
#[cfg(feature = "local")]
use crate::local::{LocalConfig, LocalEndpoint};

/// Built without the `local` feature (a library user who invokes AWS Lambda only), there
/// is no local endpoint: a type with no values stands in for it.
#[cfg(not(feature = "local"))]
enum LocalEndpoint {}

#[cfg(not(feature = "local"))]
impl LocalEndpoint {
    fn log_dir(&self) -> &Path {
        match *self {}
    }
    fn reports(&self) -> &std::sync::Arc<crate::reports::Reports> {
        match *self {}
    }
}

/// The functions of one run: nothing runs until [`Backend::start`], and
/// [`Backend::stop`] ends them.
pub(crate) struct Backend {
    compute: Compute,
    /// The local function process; `None`: [`default_function_command`].
    command: Option<Vec<String>>,
    /// The function runs in this process ([`Backend::in_process`]), whatever the backend.
    in_process: bool,
    started: tokio::sync::OnceCell<(Invoker, Option<LocalEndpoint>)>,
    /// What its function processes hold in memory, as far as it knows.
    residency: crate::residency::Residency,
}

impl Backend {
    /// The backend of `compute` (a job's `[compute]`, a session's settings), not started.
    pub(crate) fn new(compute: &Compute, command: Option<Vec<String>>) -> Backend {
        Backend {
            compute: compute.clone(),
            command,
            in_process: false,
            started: Default::default(),
            residency: crate::residency::Residency::new(compute.function_tier_percent),
        }
    }

    /// The function run in this process: its batches go to `nums_function::handle` on
    /// the caller's runtime (the library's small computes), with no endpoint, process or
    /// request in between.
    pub(crate) fn in_process(compute: &Compute) -> Backend {
        Backend {
            in_process: true,
            ..Backend::new(compute, None)
        }
    }

    /// Starts the functions the first time it is called (the local processes' logs go to
    /// [`local_log_dir`]`(id)`); every later call returns the same invoker.
    pub(crate) async fn start(&self, id: &str) -> anyhow::Result<&Invoker> {
        let (invoker, _) = self
            .started
            .get_or_try_init(|| async {
                let c = &self.compute;
                if self.in_process {
                    return Ok((Invoker::in_process(), None));
                }
                Ok::<_, anyhow::Error>(match c.backend {
                    #[cfg(not(feature = "local"))]
                    job::Backend::Local => {
                        let _ = (id, &self.command);
                        anyhow::bail!(
                            "backend \"local\" needs nums-cloud built with its `local` feature \
                             (on by default); this build invokes AWS Lambda only"
                        )
                    }
                    #[cfg(feature = "local")]
                    job::Backend::Local => {
                        let command = match &self.command {
                            Some(c) => c.clone(),
                            None => default_function_command()?,
                        };
                        let ep = LocalEndpoint::start(LocalConfig {
                            function: c.function.clone(),
                            workers: c.workers,
                            memory_mb: c.memory_mb,
                            timeout: Duration::from_secs(c.timeout_seconds),
                            command,
                            log_dir: local_log_dir(id),
                            tier_percent: c.function_tier_percent,
                        })
                        .await?;
                        (Invoker::local(&ep.invoke_url, &c.function), Some(ep))
                    }
                    job::Backend::Lambda => (Invoker::lambda(&c.function).await, None),
                })
            })
            .await?;
        Ok(invoker)
    }

    /// What its function processes hold in memory (the local backend's; Lambda's warm
    /// environments cannot be addressed, and this process's own tier is the session's).
    pub(crate) fn residency(&self) -> Option<&crate::residency::Residency> {
        let local = !self.in_process && self.compute.backend == job::Backend::Local;
        local.then_some(&self.residency)
    }

    /// Listens for what the functions report of the batches under `job_prefix` while they
    /// run: the local endpoint's processes do ([`crate::reports`]); Lambda cannot, and
    /// this process's own run needs no report (`None`).
    pub(crate) fn listen(&self, job_prefix: &str) -> Option<crate::reports::Listening> {
        let ep = self.started.get()?.1.as_ref()?;
        Some(ep.reports().listen(job_prefix))
    }

    /// The folder of the local function processes' logs, once they started.
    pub(crate) fn log_dir(&self) -> Option<&Path> {
        self.started.get()?.1.as_ref().map(LocalEndpoint::log_dir)
    }

    /// Stops the functions (the local processes killed and waited for). Their logs are
    /// removed when `succeeded`; else kept, and their files returned (for the error and
    /// `--stats`' `function_logs`).
    pub(crate) async fn stop(self, succeeded: bool) -> Vec<PathBuf> {
        let Some((_, Some(ep))) = self.started.into_inner() else {
            return Vec::new();
        };
        stop_local(ep, succeeded).await
    }
}

#[cfg(feature = "local")]
async fn stop_local(ep: LocalEndpoint, succeeded: bool) -> Vec<PathBuf> {
    let dir = ep.log_dir().to_path_buf();
    ep.stop().await;
    if succeeded {
        let _ = std::fs::remove_dir_all(&dir);
        return Vec::new();
    }
    crate::local::logs_in(&dir)
}

#[cfg(not(feature = "local"))]
async fn stop_local(ep: LocalEndpoint, _succeeded: bool) -> Vec<PathBuf> {
    match ep {}
}

/// Where the local function processes of run `run_id` write their output:
/// `nums-cloud-<pid>-<run>` in the system's temporary folder (`$TMPDIR`, else `/tmp`).
pub fn local_log_dir(run_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("nums-cloud-{}-{run_id}", std::process::id()))
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
