//! The local Lambda-compatible endpoint: the Invoke API in front (what aws-sdk-lambda
//! calls), the Lambda Runtime API behind (what function processes poll, exactly as on
//! Lambda), and a supervisor per function process that enforces what Lambda enforces:
//! the memory limit (a process over `memory_mb` is killed and its invocation fails as out
//! of memory), the timeout, and the 6 MB payload limit each way. A process that dies any
//! other way (a signal, an abort) fails its invocation as `Runtime.ExitError`, which the
//! driver sends again, and is replaced.
//!
//! `workers` processes run all the time. An invocation may name the process it is for
//! ([`crate::residency::SLOT_CONTEXT`] in the Invoke API's ClientContext: the driver sends a batch to the
//! process whose memory holds its blocks); it goes to that process when it is free, and to
//! any process if that one has not taken it within [`AFFINITY_GRACE`] (busy, frozen or
//! dead), so that nothing waits on one process. When an invocation waits and no process takes
//! it within [`GRACE`] — every process busy or frozen, as when the driver sends a backup
//! for a hung invocation — the endpoint starts another process, as Lambda starts another
//! execution environment (at most `workers` more); such a process is taken down after it
//! has been idle for a few seconds.
//!
//! Stopping kills the processes first and only then stops answering the runtime API, so
//! no process ever sees its `/next` poll answered without an invocation (lambda_runtime
//! panics on that).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use nums_layout::ErrorKind;
use nums_layout::batch::PAYLOAD_LIMIT;
use tokio::sync::{Mutex, mpsc, oneshot, watch};
use tokio::task::JoinHandle;

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
    /// The share of each invocation's headroom a process keeps blocks in across
    /// invocations, in percent (`nums_function::memory::tier_budget`).
    pub tier_percent: u64,
}

/// [`LocalConfig::tier_percent`] when nothing asks for another.
pub const DEFAULT_TIER_PERCENT: u64 = nums_function::memory::DEFAULT_TIER_PERCENT as u64;

/// The non-empty `slot-N.log` files in `dir`, in slot order.
pub fn logs_in(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut logs: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.metadata().is_ok_and(|m| m.len() > 0))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let n = name
                .strip_prefix("slot-")?
                .strip_suffix(".log")?
                .parse()
                .ok()?;
            Some((n, e.path()))
        })
        .collect();
    logs.sort();
    logs.into_iter().map(|(_, p)| p).collect()
}

/// How long an invocation for one process waits for it before any process may take it: a
/// free process takes an invocation within a millisecond, and a busy one is not waited for
/// long (a block read from the store costs milliseconds, not seconds).
const AFFINITY_GRACE: Duration = Duration::from_millis(50);
/// The same for a process that has not asked for work yet since the endpoint started (it
/// is starting: tens of milliseconds, more on a busy machine). Without it the first
/// invocations of a run all went to whichever process started first, and so did their
/// blocks, and every later plan with them.
const START_GRACE: Duration = Duration::from_secs(1);

/// The slot an invocation's ClientContext header names, if it names one.
fn slot_of(headers: &HeaderMap) -> Option<usize> {
    use base64::Engine;
    let v = headers.get("x-amz-client-context")?.to_str().ok()?;
    let json = base64::engine::general_purpose::STANDARD.decode(v).ok()?;
    let v: serde_json::Value = serde_json::from_slice(&json).ok()?;
    v.get("custom")?
        .get(crate::residency::SLOT_CONTEXT)?
        .as_str()?
        .parse()
        .ok()
}

/// How long an invocation may wait for a process before another one is started. A free
/// process takes an invocation within milliseconds; a process starts in tens.
const GRACE: Duration = Duration::from_millis(200);
/// How long a process started for a backup may sit idle before it is taken down.
const EXTRA_IDLE: Duration = Duration::from_secs(5);
/// How often a supervisor looks at its process's memory and deadline.
const POLL: Duration = Duration::from_millis(10);

#[derive(Debug)]
enum Outcome {
    Ok(Bytes),
    Error { error_type: String, message: String },
}

/// An invocation waiting for a process, in one queue or two (its own process's, then the
/// shared one): whichever process takes it first has it, the other finds it empty.
type Ticket = Arc<std::sync::Mutex<Option<Invocation>>>;

fn ticket(inv: Invocation) -> Ticket {
    Arc::new(std::sync::Mutex::new(Some(inv)))
}

/// A queue of tickets that several polls may wait on.
struct Queue {
    tx: mpsc::UnboundedSender<Ticket>,
    rx: Mutex<mpsc::UnboundedReceiver<Ticket>>,
}

impl Queue {
    fn new() -> Queue {
        let (tx, rx) = mpsc::unbounded_channel();
        Queue {
            tx,
            rx: Mutex::new(rx),
        }
    }

    fn send(&self, t: Ticket) {
        let _ = self.tx.send(t);
    }

    /// The next ticket (cancel-safe: a ticket is received whole or not at all).
    async fn recv(&self) -> Ticket {
        let t = self.rx.lock().await.recv().await;
        t.expect("the queue's sender lives beside it")
    }

    /// Fails every invocation still queued (when no poll holds the queue: `wait` for it).
    async fn fail_all(&self, wait: bool, error_type: &str, message: &str) {
        let mut rx = match wait {
            true => self.rx.lock().await,
            false => match self.rx.try_lock() {
                Ok(rx) => rx,
                Err(_) => return,
            },
        };
        while let Ok(t) = rx.try_recv() {
            if let Some(inv) = t.lock().expect("ticket").take() {
                let _ = inv.reply.send(Outcome::Error {
                    error_type: error_type.into(),
                    message: message.into(),
                });
            }
        }
    }
}

struct Invocation {
    id: String,
    body: Bytes,
    reply: oneshot::Sender<Outcome>,
    /// Set once a process has it.
    taken: Arc<AtomicBool>,
}

struct InFlight {
    id: String,
    reply: oneshot::Sender<Outcome>,
    deadline: Instant,
}

/// One function process's place: its own runtime API port (the API does not say who
/// polls), its invocation in flight, and its supervisor.
struct Slot {
    n: usize,
    /// Started because an invocation found no process; taken down when idle.
    extra: bool,
    inflight: std::sync::Mutex<Option<InFlight>>,
    /// Bumped (under `inflight`'s lock) each time the slot's process dies; a poll from an
    /// older process is stale. Each process is started with its number.
    generation: AtomicU64,
    /// The current process has polled for work: it started.
    polled: AtomicBool,
    /// An idle extra slot being taken down: its process gets no more work.
    retiring: AtomicBool,
    /// Set once the slot's process is gone for good: its server may stop.
    closed: watch::Sender<bool>,
}

struct Shared {
    cfg: LocalConfig,
    /// Invocations any process may take.
    queue: Queue,
    /// Per slot of the `workers` always running, the invocations for its process, and
    /// whether a process of it has asked for work yet.
    own: Vec<Queue>,
    started: Vec<AtomicBool>,
    /// Extra slots alive.
    extras: AtomicUsize,
    next_id: AtomicU64,
    next_slot: AtomicUsize,
    /// First the processes stop, then the servers.
    stop_processes: watch::Sender<bool>,
    stop_servers: watch::Sender<bool>,
    supervisors: std::sync::Mutex<Vec<JoinHandle<()>>>,
    servers: std::sync::Mutex<Vec<JoinHandle<()>>>,
    /// What the processes report of their invocations as they run.
    reports: Arc<crate::reports::Reports>,
}

impl Shared {
    fn stopping(&self) -> bool {
        *self.stop_processes.borrow()
    }
}

/// A running endpoint; [`LocalEndpoint::stop`] kills the function processes.
pub struct LocalEndpoint {
    pub invoke_url: String,
    shared: Arc<Shared>,
}

fn error_json(error_type: &str, message: &str) -> Bytes {
    Bytes::from(serde_json::json!({"errorType": error_type, "errorMessage": message}).to_string())
}

impl LocalEndpoint {
    pub async fn start(cfg: LocalConfig) -> anyhow::Result<LocalEndpoint> {
        std::fs::create_dir_all(&cfg.log_dir)?;
        let shared = Arc::new(Shared {
            own: (0..cfg.workers).map(|_| Queue::new()).collect(),
            started: (0..cfg.workers).map(|_| AtomicBool::new(false)).collect(),
            cfg,
            queue: Queue::new(),
            extras: AtomicUsize::new(0),
            next_id: AtomicU64::new(1),
            next_slot: AtomicUsize::new(0),
            stop_processes: watch::Sender::new(false),
            stop_servers: watch::Sender::new(false),
            supervisors: Default::default(),
            servers: Default::default(),
            reports: Default::default(),
        });
        let invoke = Router::new()
            .route("/2015-03-31/functions/{name}/invocations", post(invoke))
            .layer(DefaultBodyLimit::max(64 << 20))
            .with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let invoke_addr = listener.local_addr()?;
        let server = serve(listener, invoke, shared.stop_servers.subscribe(), None);
        shared.servers.lock().expect("servers").push(server);
        let ep = LocalEndpoint {
            invoke_url: format!("http://{invoke_addr}"),
            shared,
        };
        for _ in 0..ep.shared.cfg.workers {
            start_slot(&ep.shared, false).await?;
        }
        Ok(ep)
    }

    /// Kills the function processes (and waits for them), fails what they had not
    /// answered, then stops the servers.
    /// Where the function processes' output goes (`slot-N.log`, one per process slot).
    pub fn log_dir(&self) -> &std::path::Path {
        &self.shared.cfg.log_dir
    }

    /// What the function processes report of their invocations as they run
    /// (`POST /2018-06-01/runtime/invocation/{id}/progress`), for stages to listen to.
    pub(crate) fn reports(&self) -> &Arc<crate::reports::Reports> {
        &self.shared.reports
    }

    /// The function processes' log files that hold anything, in slot order.
    pub fn logs(&self) -> Vec<PathBuf> {
        logs_in(self.log_dir())
    }

    pub async fn stop(self) {
        let s = self.shared.clone();
        s.stop_processes.send_replace(true);
        loop {
            let sups: Vec<_> = std::mem::take(&mut *s.supervisors.lock().expect("supervisors"));
            if sups.is_empty() {
                break;
            }
            for t in sups {
                let _ = tokio::time::timeout(Duration::from_secs(5), t).await;
            }
        }
        // No process is left to poll. Polls still pending (from processes now dead) give
        // up the queue; then every caller still waiting is answered.
        s.stop_servers.send_replace(true);
        for q in std::iter::once(&s.queue).chain(&s.own) {
            let stopped = "the local endpoint stopped";
            q.fail_all(true, ErrorKind::Other.wire_name(), stopped)
                .await;
        }
        let servers: Vec<_> = std::mem::take(&mut *s.servers.lock().expect("servers"));
        for t in servers {
            let abort = t.abort_handle();
            if tokio::time::timeout(Duration::from_secs(5), t)
                .await
                .is_err()
            {
                abort.abort();
            }
        }
    }
}

impl Drop for LocalEndpoint {
    /// Without [`LocalEndpoint::stop`] (a run future dropped), the supervisors still kill
    /// their processes and remove their cgroups, in the background.
    fn drop(&mut self) {
        self.shared.stop_processes.send_replace(true);
    }
}

/// Resolves once the flag is set (or its sender is gone).
async fn until_set(rx: &mut watch::Receiver<bool>) {
    let _ = rx.wait_for(|v| *v).await;
}

/// Serves `r` on `l` until `stop` (or, for a slot's runtime API, the slot closing).
fn serve(
    l: tokio::net::TcpListener,
    r: Router<()>,
    mut stop: watch::Receiver<bool>,
    slot: Option<Arc<Slot>>,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut closed = slot.map(|s| s.closed.subscribe());
        let until = async move {
            let closed = async {
                match closed.as_mut() {
                    Some(c) => until_set(c).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = until_set(&mut stop) => {}
                _ = closed => {}
            }
        };
        let _ = axum::serve(l, r).with_graceful_shutdown(until).await;
    })
}

/// Starts a slot: its runtime API server and its supervisor (which starts the process).
async fn start_slot(s: &Arc<Shared>, extra: bool) -> anyhow::Result<()> {
    let slot = Arc::new(Slot {
        n: s.next_slot.fetch_add(1, SeqCst),
        extra,
        inflight: Default::default(),
        generation: AtomicU64::new(0),
        polled: AtomicBool::new(false),
        retiring: AtomicBool::new(false),
        closed: watch::Sender::new(false),
    });
    let runtime = Router::new()
        .route("/2018-06-01/runtime/invocation/next", get(next))
        .route(
            "/2018-06-01/runtime/invocation/{id}/response",
            post(response),
        )
        .route("/2018-06-01/runtime/invocation/{id}/error", post(error))
        .route(
            "/2018-06-01/runtime/invocation/{id}/progress",
            post(progress),
        )
        .route("/2018-06-01/runtime/init/error", post(init_error))
        .layer(DefaultBodyLimit::max(64 << 20))
        .with_state((s.clone(), slot.clone()));
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = l.local_addr()?;
    let server = serve(l, runtime, s.stop_servers.subscribe(), Some(slot.clone()));
    s.servers.lock().expect("servers").push(server);
    let sup = tokio::spawn(supervise(s.clone(), slot, addr));
    s.supervisors.lock().expect("supervisors").push(sup);
    Ok(())
}

/// An invocation found no process: start one more, as Lambda would start another
/// environment (at most `workers` more than `workers`).
fn start_extra(s: &Arc<Shared>) {
    if s.stopping() {
        return;
    }
    let cap = s.cfg.workers.max(1);
    if s.extras
        .fetch_update(SeqCst, SeqCst, |e| (e < cap).then_some(e + 1))
        .is_err()
    {
        return;
    }
    let s = s.clone();
    tokio::spawn(async move {
        if let Err(e) = start_slot(&s, true).await {
            s.extras.fetch_sub(1, SeqCst);
            tracing::warn!("cannot start another function process: {e}");
        }
    });
}

async fn invoke(
    State(s): State<Arc<Shared>>,
    Path(name): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
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
    if s.stopping() {
        return aws_error(
            StatusCode::SERVICE_UNAVAILABLE,
            "ServiceException",
            "endpoint stopping".into(),
        );
    }
    let (tx, rx) = oneshot::channel();
    let id = format!("{:08x}-local", s.next_id.fetch_add(1, SeqCst));
    let taken = Arc::new(AtomicBool::new(false));
    let t = ticket(Invocation {
        id: id.clone(),
        body,
        reply: tx,
        taken: taken.clone(),
    });
    let mut rx = rx;
    // For one process: its own queue first, any process's after the grace.
    let target = slot_of(&headers).filter(|&k| k < s.own.len());
    let mut aside = match target {
        Some(k) => {
            s.own[k].send(t.clone());
            Some(t)
        }
        None => {
            s.queue.send(t);
            None
        }
    };
    let grace = match target.is_some_and(|k| !s.started[k].load(SeqCst)) {
        true => START_GRACE,
        false => AFFINITY_GRACE,
    };
    let outcome = loop {
        tokio::select! {
            r = &mut rx => break r.unwrap_or(Outcome::Error {
                error_type: ErrorKind::Other.wire_name().into(),
                message: "the invocation was dropped".into(),
            }),
            _ = tokio::time::sleep(grace), if aside.is_some() => {
                let t = aside.take().expect("checked");
                if !taken.load(SeqCst) {
                    s.queue.send(t);
                }
            }
            _ = tokio::time::sleep(GRACE), if aside.is_none() && !taken.load(SeqCst) => {
                if !taken.load(SeqCst) {
                    start_extra(&s);
                }
            }
        }
    };
    // Before the caller hears the answer: its reports no longer count.
    s.reports.ended(&id);
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
    // As Lambda does: the invocation's request id (the one its runtime API handed out).
    if let Ok(v) = HeaderValue::from_str(&id) {
        r.headers_mut().insert("x-amzn-RequestId", v);
    }
    if function_error {
        r.headers_mut().insert(
            "X-Amz-Function-Error",
            HeaderValue::from_static("Unhandled"),
        );
    }
    r
}

/// The next queued invocation for slot `n`'s process (its own first, then any process's)
/// whose caller still waits for it.
async fn dequeue(s: &Shared, n: usize) -> Invocation {
    loop {
        let t = match s.own.get(n) {
            Some(own) => tokio::select! {
                biased;
                t = own.recv() => t,
                t = s.queue.recv() => t,
            },
            None => s.queue.recv().await,
        };
        let inv = t.lock().expect("ticket").take();
        if let Some(inv) = inv.filter(|i| !i.reply.is_closed()) {
            return inv;
        }
    }
}

/// Resolves once the servers stop or `slot` is closed; every process is dead by then.
async fn servers_stopped(s: &Shared, slot: &Slot) {
    let (mut a, mut b) = (s.stop_servers.subscribe(), slot.closed.subscribe());
    tokio::select! {
        _ = until_set(&mut a) => {}
        _ = until_set(&mut b) => {}
    }
}

async fn next(State((s, slot)): State<(Arc<Shared>, Arc<Slot>)>) -> Response {
    let generation = slot.generation.load(SeqCst);
    slot.polled.store(true, SeqCst);
    if let Some(started) = s.started.get(slot.n) {
        started.store(true, SeqCst);
    }
    let idle = async {
        if slot.extra {
            tokio::time::sleep(EXTRA_IDLE).await
        } else {
            std::future::pending().await
        }
    };
    let inv = tokio::select! {
        inv = dequeue(&s, slot.n) => Some(inv),
        _ = idle => {
            // Its supervisor kills the process; this poll is never answered.
            slot.retiring.store(true, SeqCst);
            None
        }
        _ = servers_stopped(&s, &slot) => None,
    };
    let Some(inv) = inv else {
        servers_stopped(&s, &slot).await;
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
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
    {
        // Under the lock the supervisor bumps the generation with: either it failed the
        // process's invocation already, or it will find this one.
        let mut g = slot.inflight.lock().expect("slot");
        if slot.generation.load(SeqCst) != generation {
            drop(g);
            // The process that asked has died meanwhile: give the work to another one.
            s.queue.send(ticket(inv));
            return StatusCode::GONE.into_response();
        }
        inv.taken.store(true, SeqCst);
        *g = Some(InFlight {
            id: inv.id,
            reply: inv.reply,
            deadline,
        });
    }
    (StatusCode::OK, h, inv.body).into_response()
}

fn finish(slot: &Slot, id: &str, outcome: Outcome) -> StatusCode {
    let mut g = slot.inflight.lock().expect("slot");
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
    State((_, slot)): State<(Arc<Shared>, Arc<Slot>)>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    finish(&slot, &id, Outcome::Ok(body))
}

async fn error(
    State((_, slot)): State<(Arc<Shared>, Arc<Slot>)>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let field = |k: &str| v.get(k).and_then(|x| x.as_str()).unwrap_or("").to_string();
    let outcome = Outcome::Error {
        error_type: field("errorType"),
        message: field("errorMessage"),
    };
    finish(&slot, &id, outcome)
}

/// What the slot's invocation `id` has done so far (nums-cloud's addition to the runtime
/// API; a report of an invocation the slot no longer runs is dropped).
async fn progress(
    State((s, slot)): State<(Arc<Shared>, Arc<Slot>)>,
    Path(id): Path<String>,
    body: Bytes,
) -> StatusCode {
    let Ok(p) = serde_json::from_slice::<nums_layout::batch::Progress>(&body) else {
        return StatusCode::BAD_REQUEST;
    };
    let g = slot.inflight.lock().expect("slot");
    if g.as_ref().is_none_or(|f| f.id != id) {
        return StatusCode::GONE;
    }
    // Under the slot's lock: the invocation cannot end (and be heard to) before this is.
    s.reports.progress(&id, p);
    StatusCode::ACCEPTED
}

async fn init_error(State((_s, slot)): State<(Arc<Shared>, Arc<Slot>)>, body: Bytes) -> StatusCode {
    tracing::error!(
        "function process {} failed to start: {}",
        slot.n,
        String::from_utf8_lossy(&body)
    );
    StatusCode::ACCEPTED
}

/// Marks the slot's process dead (polls from it are stale from now on) and fails its
/// invocation in flight, if any.
fn process_died(slot: &Slot, kind: ErrorKind, message: &str) {
    let f = {
        let mut g = slot.inflight.lock().expect("slot");
        slot.generation.fetch_add(1, SeqCst);
        g.take()
    };
    if let Some(f) = f {
        let _ = f.reply.send(Outcome::Error {
            error_type: kind.wire_name().into(),
            message: message.into(),
        });
    }
}

/// Why a process the supervisor did not kill died. Out of memory only when it was: the
/// kernel killed a process of its cgroup for memory, or its peak resident memory (as last
/// polled) was over the limit. Any other death is a crash, which the driver retries.
fn classify_death(
    status: std::io::Result<std::process::ExitStatus>,
    oom_killed: bool,
    peak: u64,
    memory_mb: u64,
) -> (ErrorKind, String) {
    use std::os::unix::process::ExitStatusExt;
    let mib = peak >> 20;
    let status = match status {
        Ok(st) => st,
        Err(e) => return (ErrorKind::Crashed, format!("Runtime exited: {e}")),
    };
    if oom_killed || peak > memory_mb << 20 {
        return (
            ErrorKind::OutOfMemory,
            format!(
                "the function process exceeded memory_mb = {memory_mb} (peak {mib} MiB) and was killed by the kernel"
            ),
        );
    }
    match status.signal() {
        Some(sig) => (
            ErrorKind::Crashed,
            format!(
                "Runtime exited with error: signal {sig} ({}), at a peak of {mib} MiB of memory_mb = {memory_mb}",
                signal_name(sig)
            ),
        ),
        None => (
            ErrorKind::Crashed,
            format!("Runtime exited with error: {status}"),
        ),
    }
}

fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGKILL => "SIGKILL",
        libc::SIGTERM => "SIGTERM",
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGABRT => "SIGABRT",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGINT => "SIGINT",
        _ => "a signal",
    }
}

/// Runs slot's function process, replaces it when it dies, and kills it when it exceeds
/// the memory limit or its invocation's deadline; ends when the endpoint stops (or an
/// extra slot has been idle), with its process killed and reaped.
async fn supervise(s: Arc<Shared>, slot: Arc<Slot>, runtime_addr: SocketAddr) {
    let cfg = &s.cfg;
    let limit = cfg.memory_mb << 20;
    let cgroup = crate::cgroup::MemoryCgroup::create(
        &format!("nums-cloud-{}-{}", std::process::id(), slot.n),
        limit,
    );
    let threads = (std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        / cfg.workers.max(1))
    .max(1);
    let mut stop = s.stop_processes.subscribe();
    let mut failures = 0u32;
    let i = slot.n;
    'process: loop {
        if s.stopping() || slot.retiring.load(SeqCst) {
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
            // The process dies with the driver (nums_function::runtime::serve). No
            // `pre_exec` here: it would make the spawn a real fork, which runs OpenBLAS's
            // fork handler, and that hangs now and then in a process that has used BLAS
            // (seen as a hung `cargo test` of the API, one run in ten); without it the
            // spawn is a posix_spawn, which runs no fork handlers.
            .env("NUMS_DRIVER_PID", std::process::id().to_string())
            .env(nums_function::runtime::SLOT_ENV, i.to_string())
            // The driver's view of what the slot holds starts again with this process
            // (`Residency::ran`).
            .env(
                nums_function::runtime::GENERATION_ENV,
                slot.generation.load(SeqCst).to_string(),
            )
            .env(
                nums_function::memory::TIER_PERCENT_ENV,
                cfg.tier_percent.to_string(),
            )
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        if let Ok(log) = log {
            if let Ok(l2) = log.try_clone() {
                cmd.stdout(l2);
            }
            cmd.stderr(log);
        }
        slot.polled.store(false, SeqCst);
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                let message = format!("cannot start {}: {e}", cfg.command[0]);
                process_died(&slot, ErrorKind::CannotStart, &message);
                fail_queue_if_hopeless(&s, &mut failures, &message).await;
                continue;
            }
        };
        let pid = child.id().unwrap_or(0);
        let oom_before = cgroup.as_ref().and_then(|cg| {
            cg.add(pid);
            cg.oom_kills()
        });
        let mut peak = 0u64;
        let mut was_busy = true;
        let mut killed_for: Option<(ErrorKind, String)> = None;
        let status = loop {
            tokio::select! {
                st = child.wait() => break st,
                _ = until_set(&mut stop) => {
                    let _ = child.kill().await;
                    process_died(&slot, ErrorKind::Other, "the local endpoint stopped");
                    break 'process;
                }
                _ = tokio::time::sleep(POLL) => {
                    if slot.retiring.load(SeqCst) {
                        let _ = child.kill().await;
                        process_died(&slot, ErrorKind::Other, "an idle function process was retired");
                        break 'process;
                    }
                    // Memory is read while an invocation runs and once after it (its peak
                    // is the process's high-water mark): an idle process does not grow,
                    // and reading /proc every POLL for it is wasted work.
                    let (busy, timed_out) = match slot.inflight.lock().expect("slot").as_ref() {
                        Some(f) => (true, Instant::now() > f.deadline),
                        None => (false, false),
                    };
                    if (busy || was_busy)
                        && let Some((_, p)) = nums_function::memory::usage_of(pid)
                    {
                        peak = peak.max(p);
                    }
                    was_busy = busy;
                    if peak > limit {
                        killed_for = Some((ErrorKind::OutOfMemory, format!(
                            "the function process exceeded memory_mb = {} (peak {} MiB) and was killed",
                            cfg.memory_mb, peak >> 20)));
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
        let (kind, message) = match killed_for {
            Some(k) => k,
            None => {
                let oom_after = cgroup.as_ref().and_then(|cg| cg.oom_kills());
                let oom_killed = matches!((oom_before, oom_after), (Some(a), Some(b)) if b > a);
                classify_death(status, oom_killed, peak, cfg.memory_mb)
            }
        };
        process_died(&slot, kind, &message);
        if !slot.polled.load(SeqCst) && kind == ErrorKind::Crashed {
            // It died before asking for work: it cannot start.
            fail_queue_if_hopeless(&s, &mut failures, &message).await;
        } else {
            failures = 0;
        }
    }
    if let Some(cg) = cgroup {
        cg.remove();
    }
    if slot.extra {
        s.extras.fetch_sub(1, SeqCst);
    }
    slot.closed.send_replace(true);
}

/// A process that keeps dying at start would leave invocations waiting forever: after a
/// few tries, fail what is queued with the reason.
async fn fail_queue_if_hopeless(s: &Shared, failures: &mut u32, message: &str) {
    *failures += 1;
    if *failures >= 3 {
        let message = format!("the function process cannot start: {message}");
        for q in std::iter::once(&s.queue).chain(&s.own) {
            q.fail_all(false, ErrorKind::Crashed.wire_name(), &message)
                .await;
        }
    }
    tokio::time::sleep(Duration::from_millis(200 * (*failures as u64).min(10))).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::{Invoke, Invoker};

    /// A function process that polls /next and answers every invocation with empty stats.
    const ANSWERS: &str = r#"
import json, os, urllib.request
api = "http://" + os.environ["AWS_LAMBDA_RUNTIME_API"] + "/2018-06-01/runtime/invocation/"
stats = {k: 0 for k in ["invocations", "tasks", "bytes_read", "bytes_written", "requests",
    "intermediate_bytes_written", "put_requests", "wall_seconds", "compute_seconds",
    "io_seconds", "peak_memory_bytes"]}
stats["invocations"] = 1
while True:
    r = urllib.request.urlopen(api + "next")
    rid = r.headers["Lambda-Runtime-Aws-Request-Id"]
    r.read()
    urllib.request.urlopen(api + rid + "/response", data=json.dumps(stats).encode()).read()
"#;

    /// The only process is frozen without having asked for work: an invocation nobody
    /// takes gets another process, as Lambda would start another environment.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_invocation_no_process_takes_gets_another_process() {
        let dir = std::env::temp_dir().join(format!("nums-local-extra-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        // The first process ever started hangs (a frozen one); later ones answer.
        let script = format!(
            "import os, time\ntry:\n    os.mkdir({:?})\n    time.sleep(60)\nexcept FileExistsError:\n    pass\n{ANSWERS}",
            dir.join("first").to_str().unwrap()
        );
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 1,
            memory_mb: 256,
            timeout: Duration::from_secs(60),
            command: vec!["python3".into(), "-c".into(), script],
            log_dir: dir.join("logs"),
            tier_percent: 0,
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        let t = Instant::now();
        let stats = inv.invoke(b"{}".to_vec()).await.unwrap();
        assert_eq!(stats.invocations, 1);
        assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
        assert_eq!(ep.shared.extras.load(SeqCst), 1);
        ep.stop().await;
        std::fs::remove_dir_all(&dir).ok();
    }

    /// An invocation for one process goes to it when it is free, and to another process
    /// when it is busy (nothing waits on a busy or frozen process). Each process answers
    /// with its slot; slot 0's hangs on a `"hang"` payload.
    #[tokio::test(flavor = "multi_thread")]
    async fn an_invocation_goes_to_its_process_or_to_a_free_one() {
        let dir = std::env::temp_dir().join(format!("nums-local-affinity-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = ANSWERS
            .replace(
                "    r.read()\n",
                "    if r.read() == b'\"hang\"' and os.environ[\"NUMS_LOCAL_SLOT\"] == \"0\":\n        \
                 open(os.environ[\"HANG_MARK\"], \"w\").close()\n        time.sleep(60)\n",
            )
            .replace(
                "stats[\"invocations\"] = 1",
                "stats[\"invocations\"] = 1\nstats[\"process\"] = int(os.environ[\"NUMS_LOCAL_SLOT\"])",
            );
        let mark = dir.join("hung");
        let script = format!("import time\n{script}");
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 2,
            memory_mb: 256,
            timeout: Duration::from_secs(120),
            command: vec![
                "env".into(),
                format!("HANG_MARK={}", mark.display()),
                "python3".into(),
                "-c".into(),
                script,
            ],
            log_dir: dir.join("logs"),
            tier_percent: 0,
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        let ran_on = async |slot: usize| {
            let st = inv.invoke_on(b"{}".to_vec(), Some(slot)).await.unwrap();
            st.process
        };
        // Each to its own process when that one waits for work: on a loaded machine it may
        // not be back at its poll yet, and the invocation goes to the free one; within
        // some tries it is there (routing that ignored the slot would never reach slot 1).
        for slot in [1, 0, 1, 1, 0] {
            let deadline = std::time::Instant::now() + Duration::from_secs(60);
            while ran_on(slot).await != Some(slot as u32) {
                assert!(
                    std::time::Instant::now() < deadline,
                    "slot {slot} never ran its own"
                );
            }
        }
        // Slot 0's process is busy (sent until it is the one that took it, as a loaded
        // machine may hand it to slot 1): what is for it goes to slot 1's.
        let mut hung = Vec::new();
        while !mark.exists() {
            let busy = inv.clone();
            hung.push(tokio::spawn(async move {
                busy.invoke_on(b"\"hang\"".to_vec(), Some(0)).await
            }));
            for _ in 0..50 {
                if mark.exists() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
        for _ in 0..3 {
            assert_eq!(ran_on(0).await, Some(1));
        }
        hung.iter().for_each(|h| h.abort());
        ep.stop().await;
        std::fs::remove_dir_all(&dir).ok();
    }

    /// A slot's process that dies is replaced by one started with the slot's next number,
    /// which its stats report: the driver's view of what the slot holds starts again
    /// from that process ([`crate::residency::Residency::ran`]).
    #[tokio::test(flavor = "multi_thread")]
    async fn a_replaced_process_reports_its_number() {
        let dir = std::env::temp_dir().join(format!("nums-local-replaced-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let script = ANSWERS
            .replace(
                "    r.read()\n",
                "    if r.read() == b'\"die\"' and os.environ[\"NUMS_LOCAL_SLOT\"] == \"0\":\n        \
                 os._exit(1)\n",
            )
            .replace(
                "stats[\"invocations\"] = 1",
                "stats[\"invocations\"] = 1\n\
                 stats[\"process\"] = int(os.environ[\"NUMS_LOCAL_SLOT\"])\n\
                 stats[\"process_generation\"] = int(os.environ[\"NUMS_LOCAL_GENERATION\"])",
            );
        let ep = LocalEndpoint::start(LocalConfig {
            function: "f".into(),
            workers: 1,
            memory_mb: 256,
            timeout: Duration::from_secs(60),
            command: vec!["python3".into(), "-c".into(), script],
            log_dir: dir.join("logs"),
            tier_percent: 0,
        })
        .await
        .unwrap();
        let inv = Invoker::local(&ep.invoke_url, "f");
        // Which of slot 0's processes answers (sent until one does: a loaded machine may
        // start an extra slot, which answers with its own while slot 0's replacement is
        // still starting; bounded by time, not by a count, for a busy machine).
        let slot_0 = async || {
            let until = Instant::now() + Duration::from_secs(60);
            while Instant::now() < until {
                let st = inv.invoke(b"{}".to_vec()).await.unwrap();
                if st.process == Some(0) {
                    return st.process_generation;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None
        };
        assert_eq!(slot_0().await, Some(0));
        // Slot 0's process dies on "die" (an extra slot's answers it).
        let mut died = false;
        for _ in 0..50 {
            if inv.invoke(b"\"die\"".to_vec()).await.is_err() {
                died = true;
                break;
            }
        }
        assert!(died);
        assert_eq!(slot_0().await, Some(1));
        ep.stop().await;
        std::fs::remove_dir_all(&dir).ok();
    }

    fn exit(code: i32) -> std::io::Result<std::process::ExitStatus> {
        use std::os::unix::process::ExitStatusExt;
        Ok(std::process::ExitStatus::from_raw(code))
    }

    /// A killed process is out of memory only when it was; otherwise a crash, retried.
    #[test]
    fn a_death_is_out_of_memory_only_over_the_limit() {
        let mib = |m: u64| m << 20;
        // SIGKILL (raw wait status 9) at a fifth of the limit: a crash.
        let (k, m) = classify_death(exit(9), false, mib(100), 512);
        assert_eq!(k, ErrorKind::Crashed, "{m}");
        assert!(m.contains("SIGKILL") && m.contains("100 MiB"), "{m}");
        assert!(k.retryable());
        // The same signal from the kernel's OOM killer for the cgroup, or over the limit.
        assert_eq!(
            classify_death(exit(9), true, mib(100), 512).0,
            ErrorKind::OutOfMemory
        );
        let (k, m) = classify_death(exit(9), false, mib(600), 512);
        assert_eq!(k, ErrorKind::OutOfMemory);
        assert!(m.contains("memory_mb = 512"), "{m}");
        // SIGSEGV, an abort, an exit code: crashes.
        assert_eq!(
            classify_death(exit(11), false, 0, 512).0,
            ErrorKind::Crashed
        );
        assert_eq!(classify_death(exit(6), false, 0, 512).0, ErrorKind::Crashed);
        let (k, m) = classify_death(exit(1 << 8), false, 0, 512);
        assert_eq!(k, ErrorKind::Crashed);
        assert!(m.contains("exit status: 1"), "{m}");
    }
}
