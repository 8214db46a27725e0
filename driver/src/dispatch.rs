//! The one dispatch path: aws-sdk-lambda's Invoke, against AWS Lambda or the local
//! endpoint. Batches go out in dependency order, `workers` at a time, with retries.

use std::collections::VecDeque;
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use nums_layout::Store;
use nums_layout::batch::{PAYLOAD_LIMIT, Payload, Stats};

use crate::sched::PlannedBatch;

/// Why an invocation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvokeError {
    /// The function ran and failed (Lambda's `X-Amz-Function-Error`).
    #[error("{error_type}: {message}")]
    Function { error_type: String, message: String },
    /// The Invoke API call itself failed (network, throttling beyond retries, limits).
    #[error("{0}")]
    Api(String),
}

impl InvokeError {
    /// Store hiccups and API errors may pass; out-of-memory, timeouts and bad data do not.
    pub fn retryable(&self) -> bool {
        match self {
            InvokeError::Function { error_type, .. } => {
                matches!(
                    error_type.as_str(),
                    "StoreError" | "Runtime.ExitError" | "Runtime.Unknown"
                )
            }
            InvokeError::Api(_) => true,
        }
    }
}

/// A client for one function.
#[derive(Clone)]
pub struct Invoker {
    client: aws_sdk_lambda::Client,
    function: String,
}

impl Invoker {
    /// For the local endpoint: it checks no signature, but the SDK still signs, so give it
    /// throwaway credentials rather than the user's.
    pub fn local(endpoint_url: &str, function: &str) -> Invoker {
        let creds = aws_sdk_lambda::config::Credentials::new(
            "local",
            "local",
            None,
            None,
            "nums-cloud-local",
        );
        let conf = aws_sdk_lambda::Config::builder()
            .behavior_version(aws_sdk_lambda::config::BehaviorVersion::latest())
            .region(aws_sdk_lambda::config::Region::new("us-east-1"))
            .credentials_provider(creds)
            .endpoint_url(endpoint_url)
            .timeout_config(
                aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
                    .operation_attempt_timeout(Duration::from_secs(960))
                    .build(),
            )
            .build();
        Invoker {
            client: aws_sdk_lambda::Client::from_conf(conf),
            function: function.to_string(),
        }
    }

    /// For AWS Lambda, with the standard credential and region chain.
    pub async fn lambda(function: &str) -> Invoker {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .load()
            .await;
        Invoker {
            client: aws_sdk_lambda::Client::new(&conf),
            function: function.to_string(),
        }
    }

    pub async fn invoke(&self, payload: Vec<u8>) -> Result<Stats, InvokeError> {
        let out = self
            .client
            .invoke()
            .function_name(&self.function)
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(|e| {
                InvokeError::Api(aws_sdk_lambda::error::DisplayErrorContext(&e).to_string())
            })?;
        let body = out
            .payload()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        if out.function_error().is_some() {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            return Err(InvokeError::Function {
                error_type: field("errorType"),
                message: field("errorMessage"),
            });
        }
        serde_json::from_slice(&body)
            .map_err(|e| InvokeError::Api(format!("function answered with no stats: {e}")))
    }
}

/// A batch that failed for good.
#[derive(Debug, thiserror::Error)]
#[error("invocation {batch} failed after {attempts} attempt(s): {error}")]
pub struct DispatchError {
    pub batch: usize,
    pub attempts: u32,
    pub error: InvokeError,
}

/// Totals of a dispatch.
#[derive(Debug, Default, Clone)]
pub struct Dispatched {
    pub stats: Stats,
    pub retries: u64,
}

const ATTEMPTS: u32 = 3;

/// The payload for a batch: inline, or through the store when it would pass the limit.
pub async fn payload_for(b: &PlannedBatch, n: usize, store: &Store) -> anyhow::Result<Vec<u8>> {
    let inline = serde_json::to_vec(&Payload::Inline(b.batch.clone()))?;
    if inline.len() <= PAYLOAD_LIMIT - 1024 {
        return Ok(inline);
    }
    let key = format!("{}/_batches/{n}.json", b.batch.job_prefix);
    store
        .put(&key, serde_json::to_vec(&b.batch)?.into())
        .await?;
    Ok(serde_json::to_vec(&Payload::Stored {
        store: b.batch.store.clone(),
        job_prefix: b.batch.job_prefix.clone(),
        key,
    })?)
}

/// Sends every batch once its dependencies have finished, at most `workers` at a time.
pub async fn run_batches(
    inv: &Invoker,
    batches: &[PlannedBatch],
    store: &Store,
    workers: usize,
    mut on_done: impl FnMut(usize, &Stats),
) -> Result<Dispatched, DispatchError> {
    let n = batches.len();
    let mut waiting: Vec<usize> = batches.iter().map(|b| b.deps.len()).collect();
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (i, b) in batches.iter().enumerate() {
        for &d in &b.deps {
            dependents[d].push(i);
        }
    }
    let mut ready: VecDeque<usize> = (0..n).filter(|&i| waiting[i] == 0).collect();
    let mut running = FuturesUnordered::new();
    let mut total = Dispatched::default();
    let mut done = 0;
    while done < n {
        while running.len() < workers {
            let Some(i) = ready.pop_front() else { break };
            let inv = inv.clone();
            let b = &batches[i];
            running.push(async move {
                let payload = match payload_for(b, i, store).await {
                    Ok(p) => p,
                    Err(e) => {
                        return (
                            i,
                            1,
                            Err(InvokeError::Api(format!("cannot stage the batch: {e}"))),
                        );
                    }
                };
                let mut attempt = 1;
                loop {
                    match inv.invoke(payload.clone()).await {
                        Err(e) if e.retryable() && attempt < ATTEMPTS => {
                            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
                            attempt += 1;
                        }
                        r => return (i, attempt, r),
                    }
                }
            });
        }
        let Some((i, attempts, r)) = running.next().await else {
            unreachable!("dependency cycle in the batch graph");
        };
        let stats = r.map_err(|error| DispatchError {
            batch: i,
            attempts,
            error,
        })?;
        total.retries += (attempts - 1) as u64;
        total.stats.add(&stats);
        on_done(i, &stats);
        done += 1;
        for &d in &dependents[i] {
            waiting[d] -= 1;
            if waiting[d] == 0 {
                ready.push_back(d);
            }
        }
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{LocalConfig, LocalEndpoint};
    use nums_layout::batch::{ArrayRef, Batch};
    use nums_layout::{ArrayMeta, DType, StoreSpec};

    fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("nums-dispatch-{tag}-{}", std::process::id()));
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        (Store::open(&spec).unwrap(), dir)
    }

    /// A batch description over 6 MB travels through the store; the function fetches it.
    #[tokio::test(flavor = "multi_thread")]
    async fn large_batch_goes_through_the_store() {
        let (store, dir) = temp_store("payload");
        let meta = ArrayMeta::new(vec![10], vec![10], DType::Float64);
        let arrays = (0..60_000)
            .map(|i| ArrayRef {
                path: format!("job/_tmp/a-long-array-name-{i:08}-padding-padding-padding-padding"),
                meta: meta.clone(),
                read_only: false,
            })
            .collect();
        let b = PlannedBatch {
            slot: 0,
            projected_peak: 0,
            bytes_in: 0,
            bytes_out: 0,
            gets: 0,
            puts: 0,
            batch: Batch {
                store: store.spec().clone(),
                job_prefix: "job".into(),
                arrays,
                tasks: vec![],
            },
            deps: vec![],
        };
        let payload = payload_for(&b, 7, &store).await.unwrap();
        assert!(payload.len() < 1024, "payload is {} bytes", payload.len());
        let p: Payload = serde_json::from_slice(&payload).unwrap();
        let (resolved, _) = nums_function::runtime::resolve(p).await.unwrap();
        assert_eq!(resolved, b.batch);
        // A stored batch outside the job prefix is refused.
        let bad = Payload::Stored {
            store: store.spec().clone(),
            job_prefix: "other".into(),
            key: "job/_batches/7.json".into(),
        };
        assert!(nums_function::runtime::resolve(bad).await.is_err());
        std::fs::remove_dir_all(dir).ok();
    }

    /// The local endpoint refuses what Lambda refuses: payloads over 6 MB, unknown functions.
    #[tokio::test(flavor = "multi_thread")]
    async fn endpoint_enforces_payload_limit_and_function_name() {
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 1,
            memory_mb: 128,
            timeout: Duration::from_secs(5),
            command: vec!["sleep".into(), "30".into()],
            log_dir: std::env::temp_dir().join("nums-dispatch-ep"),
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        let e = inv.invoke(vec![b' '; PAYLOAD_LIMIT + 1]).await.unwrap_err();
        assert!(e.to_string().contains("RequestEntityTooLarge"), "{e}");
        let e = Invoker::local(&ep.invoke_url, "g")
            .invoke(b"{}".to_vec())
            .await
            .unwrap_err();
        assert!(e.to_string().contains("ResourceNotFound"), "{e}");
        ep.stop().await;
    }

    /// A function process that exceeds its deadline is killed and the invocation fails as timed out.
    #[tokio::test(flavor = "multi_thread")]
    async fn endpoint_times_out_a_stuck_function() {
        // `sleep` never polls: use a process that polls once and hangs, emulated by curl-less
        // bash reading the next invocation and then sleeping.
        let script = "exec 3<>/dev/tcp/${AWS_LAMBDA_RUNTIME_API%:*}/${AWS_LAMBDA_RUNTIME_API#*:}; \
            printf 'GET /2018-06-01/runtime/invocation/next HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3; sleep 30";
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 1,
            memory_mb: 128,
            timeout: Duration::from_secs(1),
            command: vec!["bash".into(), "-c".into(), script.into()],
            log_dir: std::env::temp_dir().join("nums-dispatch-ep2"),
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        let t = std::time::Instant::now();
        let e = inv.invoke(b"{}".to_vec()).await.unwrap_err();
        assert!(
            matches!(&e, InvokeError::Function { error_type, .. } if error_type == "Function.TimedOut"),
            "{e}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
        ep.stop().await;
    }

    /// A function process over memory_mb is killed and its invocation fails as out of memory.
    #[tokio::test(flavor = "multi_thread")]
    async fn endpoint_kills_a_function_over_memory() {
        let script = "exec 3<>/dev/tcp/${AWS_LAMBDA_RUNTIME_API%:*}/${AWS_LAMBDA_RUNTIME_API#*:}; \
            printf 'GET /2018-06-01/runtime/invocation/next HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n' >&3; \
            exec python3 -c 'import time; b = bytearray(400 << 20); b[::4096] = b\"x\" * len(b[::4096]); time.sleep(30)'";
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 1,
            memory_mb: 128,
            timeout: Duration::from_secs(20),
            command: vec!["bash".into(), "-c".into(), script.into()],
            log_dir: std::env::temp_dir().join("nums-dispatch-ep3"),
        })
        .await
        .unwrap();
        let e = Invoker::local(&ep.invoke_url, "f")
            .invoke(b"{}".to_vec())
            .await
            .unwrap_err();
        assert!(
            matches!(&e, InvokeError::Function { error_type, message } if error_type == "Runtime.OutOfMemory" && message.contains("memory_mb = 128")),
            "{e}"
        );
        ep.stop().await;
    }
}
