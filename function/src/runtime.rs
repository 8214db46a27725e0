//! The Lambda runtime loop around [`crate::handle`]: the same code on AWS Lambda (the
//! `bootstrap` binary) and in local function processes.

use std::collections::HashMap;
use std::sync::Mutex;

use lambda_runtime::{Diagnostic, LambdaEvent, service_fn};
use nums_layout::batch::{Batch, Payload, Stats};
use nums_layout::{Store, StoreSpec};

use crate::FnError;

/// Stores are opened once per process and reused by warm invocations (connection reuse).
static STORES: Mutex<Option<HashMap<StoreSpec, Store>>> = Mutex::new(None);

/// Where infra/ deploys the function it sets `NUMS_ALLOWED_STORE` (`s3://bucket/prefix`):
/// a batch naming another store, or an endpoint other than `NUMS_ALLOWED_ENDPOINT`, is
/// refused before any request, whatever the function's role could reach.
pub fn check_allowed_store(spec: &StoreSpec) -> Result<(), FnError> {
    let Ok(allowed) = std::env::var("NUMS_ALLOWED_STORE") else {
        return Ok(());
    };
    let allowed = allowed.trim_end_matches('/');
    let url = spec.url.trim_end_matches('/');
    let inside = (url == allowed || url.starts_with(&format!("{allowed}/")))
        && !url.split('/').any(|s| s == ".." || s == ".");
    let endpoint_ok = spec.endpoint == std::env::var("NUMS_ALLOWED_ENDPOINT").ok();
    if inside && endpoint_ok {
        Ok(())
    } else {
        Err(nums_layout::Error::OutsidePrefix {
            key: spec.to_string(),
            prefix: allowed.to_string(),
        }
        .into())
    }
}

fn store_for(spec: &StoreSpec) -> Result<Store, FnError> {
    check_allowed_store(spec)?;
    let mut g = STORES.lock().expect("store cache");
    let map = g.get_or_insert_with(HashMap::new);
    if let Some(s) = map.get(spec) {
        return Ok(s.clone());
    }
    let s = Store::open(spec)?;
    map.insert(spec.clone(), s.clone());
    Ok(s)
}

/// Resolves a payload to its batch (fetching it from the store when it travelled by key).
pub async fn resolve(payload: Payload) -> Result<(Batch, Store), FnError> {
    match payload {
        Payload::Inline(b) => {
            let s = store_for(&b.store)?;
            Ok((b, s))
        }
        Payload::Stored {
            store,
            job_prefix,
            key,
        } => {
            let prefix = format!("{}/", job_prefix.trim_matches('/'));
            if !key.starts_with(&prefix) || key.split('/').any(|s| s == ".." || s == ".") {
                return Err(nums_layout::Error::OutsidePrefix {
                    key,
                    prefix: job_prefix,
                }
                .into());
            }
            let s = store_for(&store)?;
            let bytes = s.get(&key).await?;
            let b: Batch = serde_json::from_slice(&bytes)
                .map_err(|e| FnError::Payload(format!("{key}: {e}")))?;
            if b.job_prefix != job_prefix || b.store != store {
                return Err(FnError::Payload(format!(
                    "{key}: batch names another job or store"
                )));
            }
            Ok((b, s))
        }
    }
}

/// This process's settings, read once from its environment.
struct Process {
    /// Its tier's share of each batch's headroom ([`crate::memory::tier_budget`]).
    tier_percent: u32,
    /// Its slot under the local endpoint (`NUMS_LOCAL_SLOT`), and which of the slot's
    /// processes it is (`NUMS_LOCAL_GENERATION`), reported in its stats.
    slot: Option<u32>,
    generation: Option<u64>,
}

fn process() -> &'static Process {
    static P: std::sync::OnceLock<Process> = std::sync::OnceLock::new();
    P.get_or_init(|| {
        let var = |k: &str| std::env::var(k).ok().and_then(|v| v.trim().parse().ok());
        Process {
            tier_percent: var(crate::memory::TIER_PERCENT_ENV)
                .unwrap_or(crate::memory::DEFAULT_TIER_PERCENT),
            slot: var(SLOT_ENV),
            generation: var(GENERATION_ENV).map(u64::from),
        }
    })
}

/// The environment variable naming a local function process's slot.
pub const SLOT_ENV: &str = "NUMS_LOCAL_SLOT";

/// The environment variable numbering the processes the local endpoint starts for a slot.
pub const GENERATION_ENV: &str = "NUMS_LOCAL_GENERATION";

/// Runs one batch in this process: its memory tier shrunk first to its share of the
/// batch's headroom, which the pipeline then does without. Under the local endpoint it
/// reports its progress as it goes ([`crate::live`]), every report sent before it answers.
async fn run(mut batch: Batch, store: &Store, request_id: &str) -> Result<Stats, FnError> {
    let p = process();
    let tier = crate::memory::tier_budget(batch.prefetch_budget, p.tier_percent);
    batch.prefetch_budget -= tier;
    // A function process keeps no unwritten block: nothing to write, nothing to fail.
    nums_layout::tier::tier().set_budget(tier).await?;
    // What the tier let go goes back to the system now, not at the batch's end: its
    // blocks' pages are resident until trimmed, and a batch whose blocks are mapped
    // afresh (larger ones) would be counted on top of them (killed over memory_mb).
    crate::memory::release_kept_blocks();
    let endpoint = p.slot.and(progress_endpoint(request_id));
    let mut stats = match endpoint {
        None => crate::handle(&batch, store).await?,
        Some(to) => {
            let (live, heard) = crate::live::Live::new();
            let total = batch.tasks.len() as u64;
            let run = async {
                let r = crate::handle_live(&batch, store, &live).await;
                drop(live);
                r
            };
            let reports = crate::live::report(heard, &batch.job_prefix, total, &to);
            tokio::join!(run, reports).0?
        }
    };
    stats.process = p.slot;
    stats.process_generation = p.generation;
    Ok(stats)
}

async fn invoke(event: LambdaEvent<Payload>) -> Result<Stats, Diagnostic> {
    let run = async {
        let (batch, store) = resolve(event.payload).await?;
        let stats = run(batch, &store, &event.context.request_id).await;
        crate::memory::release_kept_blocks();
        stats
    };
    run.await.map_err(|e| Diagnostic {
        error_type: e.kind().wire_name().to_string(),
        error_message: e.to_string(),
    })
}

/// The local endpoint's progress route for invocation `request_id`
/// (`AWS_LAMBDA_RUNTIME_API`'s `/2018-06-01/runtime/invocation/{id}/progress`).
struct ProgressRoute {
    client: &'static lambda_runtime_api_client::Client,
    path: String,
}

impl crate::live::Sink for ProgressRoute {
    async fn send(&self, p: nums_layout::batch::Progress) {
        let Ok(body) = serde_json::to_vec(&p) else {
            return;
        };
        let req = lambda_runtime_api_client::build_request()
            .method("POST")
            .uri(self.path.as_str())
            .header("Content-Type", "application/json")
            .body(lambda_runtime_api_client::body::Body::from(body));
        if let Ok(req) = req {
            // The endpoint's answer is of no use; a failed report is not the batch's.
            let _ = self.client.call(req).await;
        }
    }
}

fn progress_endpoint(request_id: &str) -> Option<ProgressRoute> {
    static CLIENT: std::sync::OnceLock<Option<lambda_runtime_api_client::Client>> =
        std::sync::OnceLock::new();
    let client = CLIENT.get_or_init(|| {
        let api = std::env::var("AWS_LAMBDA_RUNTIME_API").ok()?;
        let uri = format!("http://{api}").parse().ok()?;
        lambda_runtime_api_client::Client::builder()
            .with_endpoint(uri)
            .build()
            .ok()
    });
    Some(ProgressRoute {
        client: client.as_ref()?,
        path: format!("/2018-06-01/runtime/invocation/{request_id}/progress"),
    })
}

/// Polls the runtime API named by `AWS_LAMBDA_RUNTIME_API` until the process is stopped.
pub async fn serve() -> Result<(), lambda_runtime::Error> {
    die_with_driver();
    let limit_mb = std::env::var("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
        .ok()
        .and_then(|m| m.parse::<u64>().ok())
        .unwrap_or(0);
    crate::memory::setup_block_memory(limit_mb << 20);
    lambda_runtime::run(service_fn(invoke)).await
}

/// Under the local endpoint (`NUMS_DRIVER_PID` set): a driver killed outright (SIGKILL, the
/// OOM killer) takes this process with it, rather than leaving it to finish and write for a
/// run that is gone. Set here, not in a `pre_exec` of the driver's spawn: a `pre_exec` makes
/// the spawn a real fork, whose OpenBLAS fork handler can hang the driver.
fn die_with_driver() {
    #[cfg(target_os = "linux")]
    if let Some(driver) = std::env::var("NUMS_DRIVER_PID")
        .ok()
        .and_then(|p| p.parse::<i32>().ok())
    {
        // SAFETY: plain system calls on this process.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // The driver may have died before the line above: then the signal never comes.
            // (Its pid, not the parent's: a wrapper command may stand between the two.)
            if libc::kill(driver, 0) != 0 {
                libc::_exit(1);
            }
        }
    }
}
