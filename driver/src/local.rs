//! The local Lambda-compatible endpoint: the Invoke API in front (what aws-sdk-lambda
//! calls), the Lambda Runtime API behind (what function processes poll, exactly as on
//! Lambda), and a supervisor per function process that enforces what Lambda enforces:
//! the memory limit (a process over `memory_mb` is killed and its invocation fails as out
//! of memory), the timeout, and the 6 MB payload limit each way.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use nums_layout::ErrorKind;
use nums_layout::batch::PAYLOAD_LIMIT;
use tokio::sync::{Mutex, Notify, mpsc, oneshot};

/// What the local endpoint runs and enforces.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    pub function: String,
    pub workers: usize,
    pub memory_mb: u64,
    pub timeout: Duration,
    /// The function process: a program and its arguments (`nums-cloud function` or `bootstrap`).
    pub command: Vec<String>,
    /// Where each process's output goes (`slot-N.log`).
    pub log_dir: PathBuf,
}

#[derive(Debug)]
enum Outcome {
    Ok(Bytes),
    Error { error_type: String, message: String },
}

struct Invocation {
    id: String,
    body: Bytes,
    reply: oneshot::Sender<Outcome>,
}

struct InFlight {
    id: String,
    reply: oneshot::Sender<Outcome>,
    deadline: Instant,
}

#[derive(Default)]
struct Slot {
    inflight: std::sync::Mutex<Option<InFlight>>,
    /// Bumped each time the slot's process is replaced; a poll from an older process is stale.
    generation: AtomicU64,
}

struct Shared {
    cfg: LocalConfig,
    queue_tx: mpsc::UnboundedSender<Invocation>,
    queue_rx: Mutex<mpsc::UnboundedReceiver<Invocation>>,
    slots: Vec<Slot>,
    next_id: AtomicU64,
    shutdown: Notify,
    stopping: std::sync::atomic::AtomicBool,
}

/// A running endpoint; [`LocalEndpoint::stop`] kills the function processes.
pub struct LocalEndpoint {
    pub invoke_url: String,
    shared: Arc<Shared>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

fn error_json(error_type: &str, message: &str) -> Bytes {
    Bytes::from(serde_json::json!({"errorType": error_type, "errorMessage": message}).to_string())
}

impl LocalEndpoint {
    pub async fn start(cfg: LocalConfig) -> anyhow::Result<LocalEndpoint> {
        std::fs::create_dir_all(&cfg.log_dir)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            slots: (0..cfg.workers).map(|_| Slot::default()).collect(),
            cfg,
            queue_tx: tx,
            queue_rx: Mutex::new(rx),
            next_id: AtomicU64::new(1),
            shutdown: Notify::new(),
            stopping: false.into(),
        });
        let mut tasks = Vec::new();
        let invoke = Router::new()
            .route("/2015-03-31/functions/{name}/invocations", post(invoke))
            .layer(DefaultBodyLimit::max(64 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let invoke_addr = listener.local_addr()?;
        tasks.push(serve(listener, invoke, shared.clone()));
        for i in 0..shared.cfg.workers {
            let runtime = Router::new()
                .route("/2018-06-01/runtime/invocation/next", get(next))
                .route(
                    "/2018-06-01/runtime/invocation/{id}/response",
                    post(response),
                )
                .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
                .route("/2018-06-01/runtime/init/error", post(init_error))
                .layer(DefaultBodyLimit::max(64 << 20))
                .with_state((shared.clone(), i));
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = l.local_addr()?;
            tasks.push(serve(l, runtime, shared.clone()));
            tasks.push(tokio::spawn(supervise(shared.clone(), i, addr)));
        }
        Ok(LocalEndpoint {
            invoke_url: format!("http://{invoke_addr}"),
            shared,
            tasks,
        })
    }

    pub async fn stop(self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.shutdown.notify_waiters();
        for t in self.tasks {
            let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
        }
    }
}

fn serve(
    l: tokio::net::TcpListener,
    r: Router<()>,
    shared: Arc<Shared>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let stop = async move {
            loop {
                let notified = shared.shutdown.notified();
                if shared.stopping.load(Ordering::SeqCst) {
                    return;
                }
                notified.await;
            }
        };
        let _ = axum::serve(l, r).with_graceful_shutdown(stop).await;
    })
}

async fn invoke(State(s): State<Arc<Shared>>, Path(name): Path<String>, body: Bytes) -> Response {
    let aws_error = |status: StatusCode, kind: &str, message: String| {
        let mut r = (
            status,
            serde_json::json!({"Type": "User", "message": message}).to_string(),
        )
            .into_response();
        r.headers_mut().insert(
            "x-amzn-ErrorType",
            HeaderValue::from_str(kind).expect("ascii"),
        );
        r
    };
    if name != s.cfg.function {
        return aws_error(
            StatusCode::NOT_FOUND,
            "ResourceNotFoundException",
            format!("Function not found: {name}"),
        );
    }
    if body.len() > PAYLOAD_LIMIT {
        return aws_error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "RequestEntityTooLargeException",
            format!(
                "Request must be smaller than {PAYLOAD_LIMIT} bytes for the InvokeFunction operation"
            ),
        );
    }
    let (tx, rx) = oneshot::channel();
    let id = format!("{:08x}-local", s.next_id.fetch_add(1, Ordering::Relaxed));
    if s.queue_tx
        .send(Invocation {
            id,
            body,
            reply: tx,
        })
        .is_err()
    {
        return aws_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceException",
            "endpoint stopping".into(),
        );
    }
    let outcome = rx.await.unwrap_or(Outcome::Error {
        error_type: ErrorKind::Other.wire_name().into(),
        message: "the invocation was dropped".into(),
    });
    let (body, function_error) = match outcome {
        Outcome::Ok(b) if b.len() > PAYLOAD_LIMIT => (
            error_json(
                ErrorKind::ResponseTooLarge.wire_name(),
                &format!(
                    "Response payload size ({} bytes) exceeded maximum allowed payload size ({PAYLOAD_LIMIT} bytes).",
                    b.len()
                ),
            ),
            true,
        ),
        Outcome::Ok(b) => (b, false),
        Outcome::Error {
            error_type,
            message,
        } => (error_json(&error_type, &message), true),
    };
    let mut r = (StatusCode::OK, body).into_response();
    r.headers_mut().insert(
        "X-Amz-Executed-Version",
        HeaderValue::from_static("$LATEST"),
    );
    if function_error {
        r.headers_mut().insert(
            "X-Amz-Function-Error",
            HeaderValue::from_static("Unhandled"),
        );
    }
    r
}

async fn next(State((s, i)): State<(Arc<Shared>, usize)>) -> Response {
    let generation = s.slots[i].generation.load(Ordering::SeqCst);
    let inv = {
        let mut rx = s.queue_rx.lock().await;
        tokio::select! {
            inv = rx.recv() => inv,
            _ = s.shutdown.notified() => None,
        }
    };
    let Some(inv) = inv else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    if s.slots[i].generation.load(Ordering::SeqCst) != generation {
        // The process that asked has died meanwhile: give the work to another one.
        let _ = s.queue_tx.send(inv);
        return StatusCode::GONE.into_response();
    }
    let deadline = Instant::now() + s.cfg.timeout;
    let deadline_ms = (std::time::SystemTime::now() + s.cfg.timeout)
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let mut h = HeaderMap::new();
    h.insert(
        "Lambda-Runtime-Aws-Request-Id",
        HeaderValue::from_str(&inv.id).expect("ascii"),
    );
    h.insert(
        "Lambda-Runtime-Deadline-Ms",
        HeaderValue::from_str(&deadline_ms.to_string()).expect("ascii"),
    );
    h.insert(
        "Lambda-Runtime-Invoked-Function-Arn",
        HeaderValue::from_str(&format!(
            "arn:aws:lambda:local:000000000000:function:{}",
            s.cfg.function
        ))
        .unwrap_or(HeaderValue::from_static(
            "arn:aws:lambda:local:000000000000:function:local",
        )),
    );
    h.insert(
        "Lambda-Runtime-Trace-Id",
        HeaderValue::from_static("Root=1-00000000-000000000000000000000000"),
    );
    h.insert("Content-Type", HeaderValue::from_static("application/json"));
    *s.slots[i].inflight.lock().expect("slot") = Some(InFlight {
        id: inv.id,
        reply: inv.reply,
        deadline,
    });
    (StatusCode::OK, h, inv.body).into_response()
}

fn finish(s: &Shared, i: usize, id: &str, outcome: Outcome) -> StatusCode {
    let mut g = s.slots[i].inflight.lock().expect("slot");
    match g.take() {
        Some(f) if f.id == id => {
            let _ = f.reply.send(outcome);
            StatusCode::ACCEPTED
        }
        other => {
            *g = other;
            StatusCode::BAD_REQUEST
        }
    }
}

async fn response(
    State((s, i)): State<(Arc<Shared>, usize)>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    finish(&s, i, &id, Outcome::Ok(body))
}

async fn error(
    State((s, i)): State<(Arc<Shared>, usize)>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let outcome = Outcome::Error {
        error_type: field("errorType"),
        message: field("errorMessage"),
    };
    finish(&s, i, &id, outcome)
}

async fn init_error(State((_s, i)): State<(Arc<Shared>, usize)>, body: Bytes) -> StatusCode {
    eprintln!(
        "function process {i} failed to start: {}",
        String::from_utf8_lossy(&body)
    );
    StatusCode::ACCEPTED
}

/// Runs slot `i`'s function process, replaces it when it dies, and kills it when it
/// exceeds the memory limit or its invocation's deadline.
async fn supervise(s: Arc<Shared>, i: usize, runtime_addr: SocketAddr) {
    let cfg = &s.cfg;
    let limit = cfg.memory_mb << 20;
    let cgroup = crate::cgroup::MemoryCgroup::create(
        &format!("nums-cloud-{}-{i}", std::process::id()),
        limit,
    );
    let threads = (std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        / cfg.workers)
        .max(1);
    let mut failures = 0u32;
    loop {
        if s.stopping.load(Ordering::SeqCst) {
            break;
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(cfg.log_dir.join(format!("slot-{i}.log")));
        let mut cmd = tokio::process::Command::new(&cfg.command[0]);
        cmd.args(&cfg.command[1..])
            .env("AWS_LAMBDA_RUNTIME_API", runtime_addr.to_string())
            .env("AWS_LAMBDA_FUNCTION_NAME", &cfg.function)
            .env("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", cfg.memory_mb.to_string())
            .env("AWS_LAMBDA_FUNCTION_VERSION", "$LATEST")
            .env(
                "AWS_LAMBDA_LOG_GROUP_NAME",
                format!("/aws/lambda/{}", cfg.function),
            )
            .env("AWS_LAMBDA_LOG_STREAM_NAME", format!("local/slot-{i}"))
            .env("RAYON_NUM_THREADS", threads.to_string())
            .env("OPENBLAS_NUM_THREADS", threads.to_string())
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Ok(log) = log {
            if let Ok(l2) = log.try_clone() {
                cmd.stdout(l2);
            }
            cmd.stderr(log);
        }
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                fail_inflight(
                    &s,
                    i,
                    ErrorKind::CannotStart.wire_name(),
                    &format!("cannot start {}: {e}", cfg.command[0]),
                );
                fail_queue_if_hopeless(
                    &s,
                    &mut failures,
                    &format!("cannot start {}: {e}", cfg.command[0]),
                )
                .await;
                continue;
            }
        };
        let pid = child.id().unwrap_or(0);
        if let Some(cg) = &cgroup {
            cg.add(pid);
        }
        let started = Instant::now();
        let mut killed_for: Option<(ErrorKind, String)> = None;
        let status = loop {
            tokio::select! {
                st = child.wait() => break st,
                _ = s.shutdown.notified() => {
                    let _ = child.kill().await;
                    return;
                }
                _ = tokio::time::sleep(Duration::from_millis(10)) => {
                    if s.stopping.load(Ordering::SeqCst) {
                        let _ = child.kill().await;
                        return;
                    }
                    let over_memory = nums_function::memory::rss_of(pid).is_some_and(|r| r > limit);
                    let timed_out = s.slots[i].inflight.lock().expect("slot").as_ref().is_some_and(|f| Instant::now() > f.deadline);
                    if over_memory {
                        killed_for = Some((ErrorKind::OutOfMemory, format!(
                            "the function process exceeded memory_mb = {} and was killed", cfg.memory_mb)));
                    } else if timed_out {
                        killed_for = Some((ErrorKind::TimedOut, format!(
                            "Task timed out after {:.2} seconds", cfg.timeout.as_secs_f64())));
                    }
                    if killed_for.is_some() {
                        let _ = child.kill().await;
                    }
                }
            }
        };
        s.slots[i].generation.fetch_add(1, Ordering::SeqCst);
        let (kind, message) = match (killed_for, status) {
            (Some((k, m)), _) => (k, m),
            (None, Ok(st)) if signal_of(&st) == Some(9) => (
                ErrorKind::OutOfMemory,
                format!(
                    "the function process exceeded memory_mb = {} and was killed by the kernel",
                    cfg.memory_mb
                ),
            ),
            (None, Ok(st)) => (
                ErrorKind::Crashed,
                format!("Runtime exited with error: {st}"),
            ),
            (None, Err(e)) => (ErrorKind::Crashed, format!("Runtime exited: {e}")),
        };
        fail_inflight(&s, i, kind.wire_name(), &message);
        if started.elapsed() < Duration::from_secs(2) && kind == ErrorKind::Crashed {
            fail_queue_if_hopeless(&s, &mut failures, &message).await;
        } else {
            failures = 0;
        }
    }
    if let Some(cg) = cgroup {
        cg.remove();
    }
}

fn signal_of(st: &std::process::ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    st.signal()
}

fn fail_inflight(s: &Shared, i: usize, error_type: &str, message: &str) {
    if let Some(f) = s.slots[i].inflight.lock().expect("slot").take() {
        let _ = f.reply.send(Outcome::Error {
            error_type: error_type.into(),
            message: message.into(),
        });
    }
}

/// A process that keeps dying at start would leave invocations waiting forever: after a
/// few tries, fail what is queued with the reason.
async fn fail_queue_if_hopeless(s: &Shared, failures: &mut u32, message: &str) {
    *failures += 1;
    if *failures >= 3
        && let Ok(mut rx) = s.queue_rx.try_lock()
    {
        while let Ok(inv) = rx.try_recv() {
            let _ = inv.reply.send(Outcome::Error {
                error_type: ErrorKind::Crashed.wire_name().into(),
                message: format!("the function process cannot start: {message}"),
            });
        }
    }
    tokio::time::sleep(Duration::from_millis(200 * (*failures as u64).min(10))).await;
}
