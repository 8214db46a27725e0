//! The one dispatch path: aws-sdk-lambda's Invoke, against AWS Lambda or the local
//! endpoint. Batches go out in dependency order, `workers` at a time, with retries.

use std::collections::VecDeque;
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use futures::StreamExt;
use futures::stream::FuturesUnordered;
use nums_layout::batch::{PAYLOAD_LIMIT, Payload, Stats};
use nums_layout::{ErrorKind, Store};

use crate::sched::PlannedBatch;

/// Why an invocation failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum InvokeError {
    /// The function ran and failed (Lambda's `X-Amz-Function-Error`); `error_type` is
    /// Lambda's `errorType` as sent, `kind` what it means.
    #[error("{error_type}: {message}")]
    Function {
        kind: ErrorKind,
        error_type: String,
        message: String,
    },
    /// Lambda refused the call for now (429 TooManyRequestsException): concurrency or
    /// request-rate limits. Always worth another try after a pause.
    #[error("throttled: {message}")]
    Throttled {
        message: String,
        /// Lambda's Retry-After, when it sent one.
        retry_after: Option<Duration>,
    },
    /// The Invoke API call itself failed; `status` is the HTTP status when there was an
    /// answer at all, `code` Lambda's error code.
    #[error("{message}")]
    Api {
        status: Option<u16>,
        code: Option<String>,
        message: String,
    },
}

impl InvokeError {
    fn api(message: String) -> InvokeError {
        InvokeError::Api {
            status: None,
            code: None,
            message,
        }
    }

    /// Whether the same invocation may succeed if sent again. Function errors: store
    /// hiccups and a crashed process may pass; out-of-memory, timeouts, refused keys and
    /// bad data do not. API errors: no answer (network) or a 5xx may pass, except the
    /// 5xx that report a broken deployment (an invalid zip, KMS or VPC set-up); other
    /// 4xx (not found, access denied, bad request) will not. Throttling always may.
    pub fn retryable(&self) -> bool {
        match self {
            InvokeError::Function { kind, .. } => kind.retryable(),
            InvokeError::Throttled { .. } => true,
            InvokeError::Api { status, code, .. } => {
                let permanent = code.as_deref().is_some_and(|c| {
                    c.starts_with("Invalid")
                        || c.starts_with("KMS")
                        || c.contains("AccessDenied")
                        || c.contains("LimitReached")
                });
                match status {
                    None => true,
                    Some(s) => *s >= 500 && !permanent,
                }
            }
        }
    }

    /// Lambda refused the payload as too large (413): it must travel through the store.
    fn too_large(&self) -> bool {
        matches!(
            self,
            InvokeError::Api {
                status: Some(413),
                ..
            }
        )
    }
}

/// An Invoke API error, classified: 429 as throttling (with Lambda's Retry-After), the
/// rest with their HTTP status and error code.
fn classify(
    e: aws_sdk_lambda::error::SdkError<
        aws_sdk_lambda::operation::invoke::InvokeError,
        aws_sdk_lambda::config::http::HttpResponse,
    >,
) -> InvokeError {
    use aws_sdk_lambda::error::ProvideErrorMetadata;
    use aws_sdk_lambda::operation::invoke::InvokeError as E;
    let status = e.raw_response().map(|r| r.status().as_u16());
    let message = aws_sdk_lambda::error::DisplayErrorContext(&e).to_string();
    let code = e
        .as_service_error()
        .and_then(|s| s.code())
        .map(str::to_string);
    match e.as_service_error() {
        Some(E::TooManyRequestsException(t)) => InvokeError::Throttled {
            retry_after: t
                .retry_after_seconds()
                .and_then(|s| s.trim().parse::<u64>().ok())
                .map(Duration::from_secs),
            message,
        },
        _ if status == Some(429) => InvokeError::Throttled {
            retry_after: None,
            message,
        },
        _ => InvokeError::Api {
            status,
            code,
            message,
        },
    }
}

/// A client for one function.
#[derive(Clone)]
pub struct Invoker {
    client: aws_sdk_lambda::Client,
    function: String,
}

/// A synchronous invocation may run for Lambda's 15 minutes; allow that and a margin.
fn timeouts() -> aws_sdk_lambda::config::timeout::TimeoutConfig {
    aws_sdk_lambda::config::timeout::TimeoutConfig::builder()
        .operation_attempt_timeout(Duration::from_secs(960))
        .build()
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
            .timeout_config(timeouts())
            // run_batches retries, counts and backs off itself.
            .retry_config(aws_sdk_lambda::config::retry::RetryConfig::disabled())
            .build();
        Invoker {
            client: aws_sdk_lambda::Client::from_conf(conf),
            function: function.to_string(),
        }
    }

    /// For AWS Lambda, with the standard credential, region and endpoint chain
    /// (AWS_ENDPOINT_URL_LAMBDA points it at any Lambda-compatible endpoint).
    pub async fn lambda(function: &str) -> Invoker {
        let conf = aws_config::defaults(aws_config::BehaviorVersion::latest())
            .timeout_config(timeouts())
            // run_batches retries, counts and backs off itself.
            .retry_config(aws_config::retry::RetryConfig::disabled())
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
            .map_err(classify)?;
        let body = out
            .payload()
            .map(|b| b.as_ref().to_vec())
            .unwrap_or_default();
        if out.function_error().is_some() {
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            let error_type = field("errorType");
            return Err(InvokeError::Function {
                kind: ErrorKind::from_wire(&error_type),
                error_type,
                message: field("errorMessage"),
            });
        }
        serde_json::from_slice(&body).map_err(|e| InvokeError::Api {
            status: Some(out.status_code() as u16),
            code: None,
            message: format!("function answered with no stats: {e}"),
        })
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
    /// Invocations sent again, for any reason (throttling included).
    pub retries: u64,
    /// Of `retries`, those after Lambda throttled the call (429).
    pub throttled: u64,
}

/// Sends of one batch that may fail with a retryable error before it fails for good.
const ATTEMPTS: u32 = 3;
/// Throttled sends of one batch waited out before giving up: with the backoff below, a
/// batch waits up to about a minute for a concurrency slot.
const THROTTLED_ATTEMPTS: u32 = 8;
const BACKOFF_BASE: Duration = Duration::from_millis(200);
const BACKOFF_CAP: Duration = Duration::from_secs(20);

/// The pause before the `n`th resend (n >= 1): exponential, capped, with "equal jitter"
/// (half fixed, half random) so that workers throttled together do not return together.
pub fn backoff(n: u32, floor: Option<Duration>) -> Duration {
    let exp = BACKOFF_BASE
        .saturating_mul(1u32 << (n - 1).min(16))
        .min(BACKOFF_CAP);
    let half = exp / 2;
    let d = half + half.mul_f64(fastrand::f64());
    d.max(floor.unwrap_or_default().min(BACKOFF_CAP))
}

/// The payload for a batch: inline, or through the store when it would pass the limit
/// (or `force_stored`, after Lambda refused it as too large).
pub async fn payload_for(
    b: &PlannedBatch,
    n: usize,
    store: &Store,
    force_stored: bool,
) -> anyhow::Result<Vec<u8>> {
    let inline = serde_json::to_vec(&Payload::Inline(b.batch.clone()))?;
    if inline.len() <= PAYLOAD_LIMIT - 1024 && !force_stored {
        return Ok(inline);
    }
    let key = format!("{}/_batches/{n}.json", b.batch.job_prefix);
    store
        .put_intermediate(&key, serde_json::to_vec(&b.batch)?.into())
        .await?;
    Ok(serde_json::to_vec(&Payload::Stored {
        store: b.batch.store.clone(),
        job_prefix: b.batch.job_prefix.clone(),
        key,
    })?)
}

/// How one batch's invocation went, after its retries.
struct Sent {
    batch: usize,
    attempts: u32,
    throttled: u32,
    result: Result<Stats, InvokeError>,
}

/// Invokes one batch until it succeeds, fails for good, or runs out of attempts.
async fn send(inv: &Invoker, b: &PlannedBatch, i: usize, store: &Store) -> Sent {
    let (mut attempts, mut failures, mut throttled) = (0u32, 0u32, 0u32);
    let mut stored = false;
    let mut payload = None;
    loop {
        let p = match payload.take() {
            Some(p) => p,
            None => match payload_for(b, i, store, stored).await {
                Ok(p) => p,
                Err(e) => {
                    return Sent {
                        batch: i,
                        attempts: attempts.max(1),
                        throttled,
                        result: Err(InvokeError::api(format!("cannot stage the batch: {e}"))),
                    };
                }
            },
        };
        attempts += 1;
        let result = inv.invoke(p.clone()).await;
        let pause = match &result {
            Err(e) if e.too_large() && !stored => {
                stored = true; // send it again by key, at once
                continue;
            }
            Err(InvokeError::Throttled { retry_after, .. }) if throttled < THROTTLED_ATTEMPTS => {
                throttled += 1;
                backoff(throttled, *retry_after)
            }
            Err(e) if e.retryable() && !matches!(e, InvokeError::Throttled { .. }) => {
                failures += 1;
                if failures >= ATTEMPTS {
                    return Sent {
                        batch: i,
                        attempts,
                        throttled,
                        result,
                    };
                }
                backoff(failures, None)
            }
            _ => {
                return Sent {
                    batch: i,
                    attempts,
                    throttled,
                    result,
                };
            }
        };
        payload = Some(p);
        tokio::time::sleep(pause).await;
    }
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
            running.push(send(inv, &batches[i], i, store));
        }
        let Some(sent) = running.next().await else {
            unreachable!("dependency cycle in the batch graph");
        };
        let i = sent.batch;
        total.retries += (sent.attempts - 1) as u64;
        total.throttled += sent.throttled as u64;
        let stats = sent.result.map_err(|error| DispatchError {
            batch: i,
            attempts: sent.attempts,
            error,
        })?;
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

    /// Which failures are worth another send, as docs/deploy.md lists them.
    #[test]
    fn retry_classification() {
        let f = |t: &str| InvokeError::Function {
            kind: ErrorKind::from_wire(t),
            error_type: t.into(),
            message: String::new(),
        };
        let api = |status: Option<u16>, code: Option<&str>| InvokeError::Api {
            status,
            code: code.map(str::to_string),
            message: String::new(),
        };
        for t in ["StoreError", "Runtime.ExitError", "Runtime.Unknown"] {
            assert!(f(t).retryable(), "{t}");
        }
        for t in [
            "Runtime.OutOfMemory",
            "Function.TimedOut",
            "OutsideJobPrefix",
            "MissingBlock",
            "CorruptBlock",
            "KernelError",
            "BadPayload",
        ] {
            assert!(!f(t).retryable(), "{t}");
        }
        let throttled = InvokeError::Throttled {
            message: String::new(),
            retry_after: None,
        };
        assert!(throttled.retryable());
        assert!(api(None, None).retryable()); // no answer at all
        assert!(api(Some(500), Some("ServiceException")).retryable());
        assert!(api(Some(502), Some("ResourceNotReadyException")).retryable());
        assert!(!api(Some(502), Some("InvalidZipFileException")).retryable());
        assert!(!api(Some(502), Some("KMSAccessDeniedException")).retryable());
        assert!(!api(Some(404), Some("ResourceNotFoundException")).retryable());
        assert!(!api(Some(403), Some("AccessDeniedException")).retryable());
        assert!(!api(Some(413), Some("RequestTooLargeException")).retryable());
        assert!(api(Some(413), None).too_large());
    }

    /// Backoff doubles from 200 ms to a 20 s cap, half of it random, never under Retry-After.
    #[test]
    fn backoff_grows_with_jitter_and_a_cap() {
        for n in 1..=12u32 {
            let exp = (200u64 << (n - 1).min(16)).min(20_000);
            for _ in 0..50 {
                let d = backoff(n, None).as_millis() as u64;
                assert!(d >= exp / 2 && d <= exp, "n={n}: {d} ms");
            }
        }
        let spread: std::collections::HashSet<_> = (0..20).map(|_| backoff(5, None)).collect();
        assert!(spread.len() > 1, "no jitter");
        assert!(backoff(1, Some(Duration::from_secs(3))) >= Duration::from_secs(3));
        assert!(backoff(1, Some(Duration::from_secs(3600))) <= BACKOFF_CAP);
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
                sparse: false,
                intermediate: true,
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
                prefetch_budget: 0,
            },
            deps: vec![],
        };
        let payload = payload_for(&b, 7, &store, false).await.unwrap();
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
            matches!(
                &e,
                InvokeError::Function {
                    kind: ErrorKind::TimedOut,
                    ..
                }
            ),
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
            matches!(&e, InvokeError::Function { kind: ErrorKind::OutOfMemory, message, .. } if message.contains("memory_mb = 128")),
            "{e}"
        );
        ep.stop().await;
    }
}
