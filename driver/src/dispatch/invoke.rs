//! The transport: one payload to a function and its answer back. [`Invoke`] is the seam
//! the dispatch loop (`super`) sends through; [`Invoker`] is the real one, aws-sdk-lambda's
//! Invoke against AWS Lambda or the local endpoint, or the function's handler in this
//! process. What each failure means for a resend is ruled here ([`InvokeError::retry`]);
//! what to do about it, in the loop. [`payload_for`] makes a batch's payload: inline, or
//! by key through the store when over Lambda's limit.

use std::future::Future;
use std::time::Duration;

use aws_sdk_lambda::primitives::Blob;
use nums_layout::batch::{Batch, PAYLOAD_LIMIT, Payload, Stats};
use nums_layout::failure::Retry;
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
    /// The batch could not be written to the store to travel by key (a store outage).
    #[error("cannot stage the batch: {message}")]
    Stage { message: String },
}

impl InvokeError {
    /// How sending the same invocation again is ruled. Function errors: by their kind
    /// ([`ErrorKind::retry`]). API errors: no answer (network) or a 5xx may pass, except
    /// the 5xx that report a broken deployment (an invalid zip, KMS or VPC set-up); other
    /// 4xx (not found, access denied, bad request) will not. Throttling always may (with
    /// its own count); a batch that cannot be staged waits for the store like a
    /// function's store error.
    pub fn retry(&self) -> Retry {
        match self {
            InvokeError::Function { kind, .. } => kind.retry(),
            InvokeError::Throttled { .. } => Retry::Attempts,
            InvokeError::Stage { .. } => Retry::WithinBudget,
            InvokeError::Api { status, code, .. } => {
                let permanent = code.as_deref().is_some_and(|c| {
                    c.starts_with("Invalid")
                        || c.starts_with("KMS")
                        || c.contains("AccessDenied")
                        || c.contains("LimitReached")
                });
                match status {
                    None => Retry::Attempts,
                    Some(s) if *s >= 500 && !permanent => Retry::Attempts,
                    Some(_) => Retry::Never,
                }
            }
        }
    }

    /// Whether the same invocation may succeed if sent again.
    pub fn retryable(&self) -> bool {
        self.retry() != Retry::Never
    }

    /// Lambda refused the payload as too large (413): it must travel through the store.
    pub(super) fn too_large(&self) -> bool {
        matches!(
            self,
            InvokeError::Api {
                status: Some(413),
                ..
            }
        )
    }
}

/// "Invoke this payload": the seam between the dispatcher and whatever runs a batch.
/// [`Invoker`] is the real one (AWS Lambda or the local endpoint); tests use a fake.
pub trait Invoke: Sync {
    /// Sends one payload and waits for the function's stats, or why it failed.
    fn invoke(&self, payload: Vec<u8>) -> impl Future<Output = Result<Stats, InvokeError>> + Send;

    /// [`Invoke::invoke`], for the function process of slot `slot` where the endpoint
    /// can address one ([`Invoke::addresses_slots`]); elsewhere any.
    fn invoke_on(
        &self,
        payload: Vec<u8>,
        slot: Option<usize>,
    ) -> impl Future<Output = Result<Stats, InvokeError>> + Send {
        let _ = slot;
        self.invoke(payload)
    }

    /// Whether [`Invoke::invoke_on`] reaches the slot's own process (the local endpoint;
    /// not Lambda, whose warm environments cannot be addressed).
    fn addresses_slots(&self) -> bool {
        false
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

/// A function's name from what the job gives: a name, or an ARN
/// (`arn:aws:lambda:REGION:ACCOUNT:function:NAME[:QUALIFIER]`), or `NAME:QUALIFIER`.
fn function_name(f: &str) -> &str {
    match f.split_once(":function:") {
        Some((_, rest)) => rest.split(':').next().unwrap_or(rest),
        None => f.split(':').next().unwrap_or(f),
    }
}

/// A client for one function, or the function's handler in this process.
#[derive(Clone)]
pub struct Invoker {
    how: How,
}

#[derive(Clone)]
enum How {
    /// Lambda's Invoke API (AWS Lambda, or the local endpoint).
    Api {
        client: aws_sdk_lambda::Client,
        function: String,
        /// Where a failed invocation's logs are: on AWS Lambda, CloudWatch (the
        /// function's log group, found by request id); the local backend lists its own
        /// log files.
        cloudwatch: bool,
        /// Invocations may name their process (the local endpoint, [`crate::residency::SLOT_CONTEXT`]).
        slots: bool,
    },
    /// `nums_function::handle` called here, on the caller's runtime: the same kernels
    /// over the same store, without a process or a request in between (small computes
    /// of the library, `api::Session::in_process_bytes`).
    InProcess,
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
            how: How::Api {
                client: aws_sdk_lambda::Client::from_conf(conf),
                function: function.to_string(),
                cloudwatch: false,
                slots: true,
            },
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
            how: How::Api {
                client: aws_sdk_lambda::Client::new(&conf),
                function: function.to_string(),
                cloudwatch: true,
                slots: false,
            },
        }
    }

    /// Runs each payload in this process: [`nums_function::handle`] on the caller's
    /// runtime, its failures typed as a function's would be.
    pub fn in_process() -> Invoker {
        Invoker {
            how: How::InProcess,
        }
    }
}

/// One payload run by this process's own copy of the function.
async fn invoke_here(payload: &[u8]) -> Result<Stats, InvokeError> {
    let failed = |e: nums_function::FnError| InvokeError::Function {
        kind: e.kind(),
        error_type: e.kind().wire_name().to_string(),
        message: e.to_string(),
    };
    let payload: Payload = serde_json::from_slice(payload)
        .map_err(|e| failed(nums_function::FnError::Payload(e.to_string())))?;
    let (batch, store) = nums_function::runtime::resolve(payload)
        .await
        .map_err(failed)?;
    // The driver's own work: what it makes stays in this process's memory tier.
    nums_function::handle_here(&batch, &store)
        .await
        .map_err(failed)
}

impl Invoke for Invoker {
    async fn invoke(&self, payload: Vec<u8>) -> Result<Stats, InvokeError> {
        self.invoke_on(payload, None).await
    }

    fn addresses_slots(&self) -> bool {
        matches!(self.how, How::Api { slots: true, .. })
    }

    async fn invoke_on(&self, payload: Vec<u8>, slot: Option<usize>) -> Result<Stats, InvokeError> {
        let (client, function, cloudwatch, slots) = match &self.how {
            How::Api {
                client,
                function,
                cloudwatch,
                slots,
            } => (client, function, *cloudwatch, *slots),
            How::InProcess => return invoke_here(&payload).await,
        };
        let out = client
            .invoke()
            .function_name(function)
            .set_client_context(slot.filter(|_| slots).map(crate::residency::slot_context))
            .payload(Blob::new(payload))
            .send()
            .await
            .map_err(classify)?;
        let body = out.payload().map(|b| b.as_ref()).unwrap_or_default();
        if out.function_error().is_some() {
            let v: serde_json::Value = serde_json::from_slice(body).unwrap_or_default();
            let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
            let error_type = field("errorType");
            let mut message = field("errorMessage");
            if cloudwatch {
                use aws_sdk_lambda::operation::RequestId;
                message += &format!(
                    " (logs: CloudWatch log group /aws/lambda/{}, request id {})",
                    function_name(function),
                    out.request_id().unwrap_or("unknown")
                );
            }
            return Err(InvokeError::Function {
                kind: ErrorKind::from_wire(&error_type),
                error_type,
                message,
            });
        }
        serde_json::from_slice(body).map_err(|e| InvokeError::Api {
            status: Some(out.status_code() as u16),
            code: None,
            message: format!("function answered with no stats: {e}"),
        })
    }
}

/// `Payload::Inline` without cloning the batch (the same JSON).
#[derive(serde::Serialize)]
#[serde(rename_all = "snake_case")]
enum InlineRef<'a> {
    Inline(&'a Batch),
}

/// The payload for a batch: inline, or through the store when it would pass the limit
/// (or `force_stored`, after Lambda refused it as too large).
pub async fn payload_for(
    b: &PlannedBatch,
    n: usize,
    store: &Store,
    force_stored: bool,
) -> anyhow::Result<Vec<u8>> {
    let batch = b.batch();
    if !force_stored {
        let inline = serde_json::to_vec(&InlineRef::Inline(&batch))?;
        if inline.len() <= PAYLOAD_LIMIT - 1024 {
            return Ok(inline);
        }
    }
    let key = format!("{}/{}/{n}.json", batch.job_prefix, crate::runs::BATCHES);
    store
        .put_intermediate(&key, serde_json::to_vec(&batch)?.into())
        .await?;
    Ok(serde_json::to_vec(&Payload::Stored {
        store: batch.store.clone(),
        job_prefix: batch.job_prefix.clone(),
        key,
    })?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{LocalConfig, LocalEndpoint};
    use nums_layout::batch::ArrayRef;
    use nums_layout::{ArrayMeta, DType, StoreSpec};

    fn temp_store(tag: &str) -> (Store, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("nums-dispatch-{tag}-{}", std::process::id()));
        let spec = StoreSpec {
            url: url::Url::from_directory_path(&dir).unwrap().to_string(),
            endpoint: None,
        };
        (Store::open(&spec).unwrap(), dir)
    }

    #[test]
    fn function_names_for_log_groups() {
        assert_eq!(function_name("nums"), "nums");
        assert_eq!(function_name("nums:prod"), "nums");
        assert_eq!(
            function_name("arn:aws:lambda:us-east-1:123456789012:function:nums:7"),
            "nums"
        );
        assert_eq!(
            function_name("arn:aws:lambda:us-east-1:123456789012:function:nums"),
            "nums"
        );
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
        // What is waited out for a time, what is counted.
        assert_eq!(f("StoreError").retry(), Retry::WithinBudget);
        let stage = InvokeError::Stage {
            message: String::new(),
        };
        assert_eq!(stage.retry(), Retry::WithinBudget);
        assert_eq!(f("Runtime.ExitError").retry(), Retry::Attempts);
        assert_eq!(api(None, None).retry(), Retry::Attempts);
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
                foreign: None,
            })
            .collect();
        let b = PlannedBatch::from_batch(
            Batch {
                store: store.spec().clone(),
                job_prefix: "job".into(),
                arrays,
                tasks: vec![],
                prefetch_budget: 0,
            },
            vec![],
        );
        let payload = payload_for(&b, 7, &store, false).await.unwrap();
        assert!(payload.len() < 1024, "payload is {} bytes", payload.len());
        let p: Payload = serde_json::from_slice(&payload).unwrap();
        let (resolved, _) = nums_function::runtime::resolve(p).await.unwrap();
        assert_eq!(resolved, b.batch());
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
            tier_percent: 0,
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
            tier_percent: 0,
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
            tier_percent: 0,
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
