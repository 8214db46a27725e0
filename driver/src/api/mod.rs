//! The Rust library API: lazy arrays over the same engine as `nums-cloud run`, built on
//! the array graph directly.
//!
//! A [`Session`] holds where arrays are stored and how computes run (backend, deployment,
//! scheduler, workers, memory, timeout). Every operation on an [`Array`] adds its nodes to
//! the session's graph at once, lowered by the same builder and function table as a job
//! file's expressions, so a wrong shape or dtype is an error of the operation itself
//! ([`Array::check`]); nothing runs until [`Array::compute`] (async) or
//! [`Array::compute_blocking`], which plans the nodes the array needs with LSHS, runs them
//! on the session's backend and hands the values back in memory. A computed array stays
//! in the session's store while a handle to it lives: later computes read it in place
//! instead of computing it again (as Dask's `persist`; see [`Session`]).
//! [`Session::compute_many`] computes several arrays in one plan;
//! [`Session::from_ndarray`] makes an input of values in memory. No job file and no
//! `.npy` file is written on the way. Errors are a typed [`Error`](crate::Error) that
//! names the user's arrays.
//!
//! ```
//! use nums_cloud::api::Session;
//! # fn main() -> Result<(), nums_cloud::Error> {
//! let dir = std::env::temp_dir().join("nums-cloud-doc-api");
//! let s = Session::new(&format!("file://{}", dir.display()))?;
//! # let s = s.function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
//! let x = s.arange(12.0).reshape(&[4, 3]).block(&[3, 2]).named("X")?; // ragged blocks
//! let w = s.ones(&[3]);
//! let y = (&x.matmul(&w) * 2.0 - 1.0).sum(None);
//! // sum over rows of 2 * (x @ 1) - 1 = 2 * (0 + 1 + ... + 11) - 4
//! assert_eq!(y.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![128.0]);
//! let counts = x.gt(5.0).sum(Some(&[0])).compute_blocking::<i64>()?;
//! assert_eq!(counts.into_raw_vec_and_offset().0, vec![2, 2, 2]);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod array;
mod blocking;
mod build;
mod compute;
pub mod fft;
mod handle;
mod keep;
mod lease;
pub mod linalg;
pub mod models;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use nums_layout::{ArrayMeta, Block, DType, StoreSpec};

pub use self::array::Operand;
pub use self::build::Arg;
use self::build::Operands;
pub use self::compute::ReadCsv;
pub use self::handle::Array;
use crate::error::Error;
use crate::expr::Expr;
pub use crate::graph::Value as GraphValue;
use crate::graph::{Incremental, NodeId};
pub use crate::graph::{Signature, signatures as functions};
pub use crate::job::{Backend, ColumnRef as Column, SchedulerKind as Scheduler};
pub use crate::progress::Update as ProgressUpdate;
pub use nums_layout::tier::TierStats;

/// Where [`Session::progress_to`] sends the progress, and how often.
#[derive(Clone)]
pub(crate) struct ProgressTo(
    pub std::sync::Arc<dyn Fn(&ProgressUpdate) + Send + Sync>,
    pub std::time::Duration,
);

impl std::fmt::Debug for ProgressTo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ProgressTo(.., {:?})", self.1)
    }
}

/// The same display: the same function.
impl PartialEq for ProgressTo {
    fn eq(&self, o: &ProgressTo) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &o.0) && self.1 == o.1
    }
}

/// What this process's memory tier holds and has served ([`Session::memory_tier_bytes`]).
pub fn memory_tier() -> TierStats {
    nums_layout::tier::tier().stats()
}
use crate::job::{Compute, Job, Source};

/// How computes run: a [`Session`]'s settings, a value of its own (setting one on a clone
/// of a session leaves the session as it was).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Config {
    pub backend: Backend,
    pub function: String,
    pub scheduler: Scheduler,
    pub workers: usize,
    pub memory_mb: u64,
    pub timeout_seconds: u64,
    pub function_binary: Option<Vec<String>>,
    /// The deployment's region (from `from_infra`), which the environment must agree with.
    pub region: Option<String>,
    pub progress: bool,
    /// Where the progress goes instead of standard error ([`Session::progress_to`]).
    pub progress_to: Option<ProgressTo>,
    /// Computes whose arrays (read and made) come to at most this many bytes run in this
    /// process ([`Session::in_process_bytes`]).
    pub in_process_bytes: u64,
    /// The budget of this process's memory tier ([`Session::memory_tier_bytes`]).
    pub memory_tier_bytes: u64,
    /// The function processes' tier share ([`Session::function_tier_percent`]).
    pub function_tier_percent: u64,
    /// `workers` was set (else it follows the backend and `memory_mb`:
    /// [`crate::config::default_workers`]).
    pub workers_set: bool,
}

impl Config {
    fn compute(&self) -> Compute {
        Compute {
            backend: self.backend,
            workers: self.workers,
            memory_mb: self.memory_mb,
            timeout_seconds: self.timeout_seconds,
            scheduler: self.scheduler,
            function: self.function.clone(),
            function_tier_percent: self.function_tier_percent,
        }
    }

    /// What the engine runs a compute with: these settings and the session's store.
    fn engine(&self, storage: &StoreSpec) -> crate::config::EngineConfig {
        crate::config::EngineConfig {
            compute: self.compute(),
            storage: storage.clone(),
        }
    }

    /// Whether a compute whose arrays come to `bytes` runs in this process: the one
    /// threshold ([`Session::in_process_bytes`]) every kind of compute asks.
    fn runs_here(&self, bytes: u64) -> bool {
        self.runs_here_with(bytes, 0)
    }

    /// [`Config::runs_here`] for a compute of `bytes` of which `warm` are blocks it reads
    /// that this process's memory tier holds: the rest within `in_process_bytes`, or,
    /// when it reads from memory at all, what it makes within the tier (work over data
    /// already here runs here, on this process's threads: no store read, no decode, no
    /// invocation; what it makes stays here too).
    fn runs_here_with(&self, bytes: u64, warm: u64) -> bool {
        if self.in_process_bytes == 0 {
            return bytes == 0; // every compute on the backend, as asked
        }
        let cold = bytes - warm.min(bytes);
        cold <= self.in_process_bytes || (warm > 0 && cold <= self.memory_tier_bytes / 2)
    }

    /// Makes this process's memory tier the size these settings ask (the tier is the
    /// process's: the session computing last sets it). Blocks a smaller tier cannot hold
    /// unwritten are written to the store first; if that fails they stay, and so does
    /// the budget (nothing is lost; the compute's own writes meet the store's error).
    async fn apply_tier(&self) {
        let _ = nums_layout::tier::tier()
            .set_budget(self.memory_tier_bytes)
            .await;
    }

    /// The settings, checked against the engine's limits as a job file's `[compute]` is.
    fn check(&self) -> Result<(), Error> {
        use crate::config::Setting;
        for (s, v) in [
            (Setting::Workers, self.workers as u64),
            (Setting::MemoryMb, self.memory_mb),
            (Setting::TimeoutSeconds, self.timeout_seconds),
            (Setting::FunctionTierPercent, self.function_tier_percent),
        ] {
            s.check(i64::try_from(v).unwrap_or(i64::MAX))
                .map_err(|r| Error::Config {
                    setting: s.name().into(),
                    message: r.to_string(),
                })?;
        }
        Ok(())
    }
}

/// What every clone of a session shares: its store, its graph, the arrays it keeps and
/// the backend its computes run on.
pub(crate) struct State {
    /// Prefix of everything this session puts in the store (`api-<random>`).
    id: String,
    /// The working directory when the session was made: relative paths resolve against it.
    cwd: PathBuf,
    spec: StoreSpec,
    graph: Mutex<Incremental>,
    /// Values in memory ([`Session::from_ndarray`]) not written to the store yet, by node.
    pending: Mutex<HashMap<NodeId, Block>>,
    next: AtomicU64,
    closed: AtomicBool,
    /// Whether the session has opened its store (to compute, write or read): a session
    /// that never did has nothing there to remove when it ends.
    touched: AtomicBool,
    /// Its store, opened once (an S3 client is costly to make; a local folder's path is
    /// resolved on the file system), handed out with fresh counters.
    opened: std::sync::OnceLock<nums_layout::Store>,
    /// Its claim on its prefix ([`lease`]), written before it stores anything there.
    claimed: tokio::sync::OnceCell<()>,
    /// The backend of the session's computes, started by the first and reused.
    backend: tokio::sync::Mutex<Option<Arc<compute::SessionBackend>>>,
    /// The runtime the backend's tasks (the local endpoint's server, its processes'
    /// supervisors) live on: a compute's own may end with it (a blocking form's runtime,
    /// or the caller's), the backend must not.
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// What each fit measured, by its node.
    fits: Mutex<compute::Fits>,
    /// The names of the columns of each loaded input that has them (a CSV's header, a
    /// Parquet file's), by its node: a save names its columns so.
    columns: Mutex<HashMap<NodeId, Vec<String>>>,
    /// What the session's computes sent.
    counts: compute::Counters,
    /// The array that made each node, by the node it ended with: a node belongs to the
    /// first registered at or after it (an operation's own nodes come just before the one
    /// it gives). Messages name arrays by these.
    owners: Mutex<std::collections::BTreeMap<NodeId, std::sync::Weak<handle::Handle>>>,
    /// The live handles of each node: what the session keeps stored ([`keep`]).
    holders: keep::Holders,
    /// Its computes in flight, and what is to be deleted when none is.
    running: Mutex<keep::Running>,
}

/// Where arrays are stored and how computes run; arrays made from it share its store and
/// graph. A session is a cheap handle (`Clone`, `Send + Sync`).
///
/// Settings (builder style, each returning a session) are values: a session's clone with
/// other settings shares the store and the arrays, and leaves the original as it was.
/// An array computes with the settings of the session it was made from. Relative paths
/// (the store, `load`) resolve against the working directory when the session was made.
/// What the session keeps in the store (computed arrays, inputs from memory, imports)
/// lies under `<store>/api-<random>/`. As Dask keeps persisted arrays, a computed array's
/// blocks stay while a handle to it lives (the array, a clone, or another array that is
/// the same node); once the last is dropped, the next compute that starts while none runs
/// deletes them in the background, beside its own work ([`Session::collect`] deletes them
/// now and waits), and an array made from it before computes it again from its operation
/// (the same values: the engine is deterministic, random arrays too). Deletion never
/// races a compute that reads them: they are let go only while no compute of the session
/// runs, and no compute that starts later reads them (one that computes them again
/// writes under its own prefix). A model's fit is such an array: let go, a later
/// compute that needs it fits again. An input from memory ([`Session::from_ndarray`]) or
/// an import ([`Session::load`]), which nothing could make again, stays while an array
/// that is held is made from it (through arrays let go too). Everything goes with
/// [`Session::close`], or when the last handle to the session and its arrays is dropped.
///
/// ```
/// use nums_cloud::api::{Backend, Scheduler, Session};
/// # fn main() -> Result<(), nums_cloud::Error> {
/// let s = Session::new("file://nums-data")? // relative to the working directory
///     .backend(Backend::Local)              // or Backend::Lambda (with .function(name))
///     .scheduler(Scheduler::Lshs)
///     .workers(2)
///     .memory_mb(1024)
///     .timeout_seconds(300);
/// let wide = s.clone().workers(8);
/// assert_eq!((s.settings().workers, wide.settings().workers), (2, 8)); // s is unchanged
/// let s2 = s.clone();
/// std::thread::spawn(move || drop(s2.ones(&[2]))).join().unwrap(); // Send + Sync
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Session {
    st: Arc<State>,
    /// Shared until a setting changes (an array holds its session: kept small).
    cfg: Arc<Config>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.st.id)
            .field("storage", &self.st.spec.url)
            .field("config", &self.cfg)
            .finish()
    }
}

/// A session's settings, as [`Session::settings`] reads them.
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Settings {
    /// The store URL (`file:///abs/` or `s3://bucket/prefix`).
    pub storage: String,
    /// The S3-compatible endpoint, if one is set.
    pub endpoint: Option<String>,
    /// Where invocations run.
    pub backend: Backend,
    /// The Lambda function's name.
    pub function: String,
    /// The scheduler.
    pub scheduler: Scheduler,
    /// Concurrent invocations.
    pub workers: usize,
    /// Memory of one invocation in MB.
    pub memory_mb: u64,
    /// The longest one invocation may run, in seconds.
    pub timeout_seconds: u64,
    /// Computes of at most this many bytes of arrays run in this process.
    pub in_process_bytes: u64,
    /// Bytes of decoded blocks this process keeps in memory between computes.
    pub memory_tier_bytes: u64,
    /// Percent of each invocation's headroom a function process keeps blocks in.
    pub function_tier_percent: u64,
}

/// Computes whose arrays (every array they read or make) come to at most this many bytes
/// run in the calling process by default: 16 MiB ([`Session::in_process_bytes`]).
pub const IN_PROCESS_BYTES: u64 = 16 << 20;

/// A session's default memory tier ([`Session::memory_tier_bytes`]): a quarter of this
/// machine's memory (of its cgroup's limit, where lower), 1 GiB where neither can be read.
pub fn default_memory_tier_bytes() -> u64 {
    crate::config::machine_memory_bytes() / 4
}

/// The error for `theirs`, an array of another session, used in `label` (beside `ours`,
/// where one is): what happened and what to do, since a user meets it after `init()`.
pub(crate) fn other_session(label: Option<&str>, ours: Option<&Array>, theirs: &Array) -> Error {
    let what = match ours {
        Some(o) => format!(
            "`{}` and `{}` belong to different sessions",
            o.label(),
            theirs.label()
        ),
        None => format!("`{}` belongs to another session", theirs.label()),
    };
    let at = label.map_or(String::new(), |l| format!("`{l}`: "));
    Error::Job {
        raises: Default::default(),
        array: Some(label.map_or_else(|| theirs.label(), str::to_string)),
        message: format!(
            "{at}{what} (init() starts a new session; arrays made before it stay in theirs, \
             which close() ends). Make the array again after init(), or bring its values \
             over: nps.asarray(x.get()) for one that fits in memory, or nps.save(url, x) \
             and nps.load(url) in the new session"
        ),
    }
}

/// What a session's computes have sent ([`Session::counts`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Counts {
    /// Invocations, wherever they ran (retries and backups count).
    pub invocations: u64,
    /// Of those, the ones run in this process.
    pub in_process: u64,
    /// Block tasks of those invocations.
    pub tasks: u64,
    /// Bytes the functions' invocations read from the store (the winning invocation of
    /// each batch; this process's own memory tier is [`memory_tier`]'s).
    pub bytes_read: u64,
    /// Blocks those invocations read from their function process's memory instead
    /// ([`Session::function_tier_percent`]), and their bytes.
    pub memory_hits: u64,
    /// The decoded bytes of those blocks.
    pub memory_bytes_read: u64,
}

/// Where a compute runs ([`Session::explain`]).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub enum Place {
    /// Nowhere: every array asked for is computed already (read from the store).
    Stored,
    /// In this process: the function's kernels called here over the session's store, no
    /// function process or request (the compute is at most
    /// [`Session::in_process_bytes`]).
    InProcess,
    /// On the session's backend: local function processes or AWS Lambda.
    Backend(Backend),
}

/// How a compute would run, as [`Session::explain`] tells it (nothing runs).
#[derive(Clone, Debug, PartialEq)]
#[non_exhaustive]
pub struct Explain {
    /// Where it runs.
    pub place: Place,
    /// Bytes of the arrays it reads and makes (inputs read in place included).
    pub work_bytes: u64,
    /// Of those, the bytes of blocks it reads that this process's memory tier holds.
    pub warm_bytes: u64,
    /// The session's threshold for running in this process.
    pub in_process_bytes: u64,
    /// Invocations (batches) of its plan, when it can be planned before it runs (not
    /// when it needs a model fitted first, or an imported input counted).
    pub invocations: Option<usize>,
    /// Block tasks of its plan, likewise.
    pub tasks: Option<usize>,
    /// Model fits it runs first (each its own stages of passes).
    pub fits: usize,
}

impl std::fmt::Display for Explain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let size = crate::human::human(self.work_bytes);
        let limit = crate::human::human(self.in_process_bytes);
        let warm = match self.warm_bytes {
            0 => String::new(),
            w => format!(" ({} of them in memory here)", crate::human::human(w)),
        };
        match &self.place {
            Place::Stored => return write!(f, "computed already: read from the store"),
            Place::InProcess if self.warm_bytes > 0 => write!(
                f,
                "in this process: {size} of arrays{warm}, the rest within in_process_bytes \
                 = {limit} or half the memory tier"
            )?,
            Place::InProcess => write!(
                f,
                "in this process: {size} of arrays, within in_process_bytes = {limit}"
            )?,
            Place::Backend(b) => write!(
                f,
                "on the {} backend: {size} of arrays{warm}, over in_process_bytes = {limit}",
                match b {
                    Backend::Local => "local (function processes)",
                    Backend::Lambda => "lambda",
                }
            )?,
        }
        if let (Some(i), Some(t)) = (self.invocations, self.tasks) {
            write!(f, "; {i} invocations of {t} tasks")?;
        }
        if self.fits > 0 {
            write!(f, "; {} model fit(s) first", self.fits)?;
        }
        Ok(())
    }
}

/// Values that [`Session::from_ndarray`] takes: any `ndarray` array (owned or a view) of
/// any of the thirteen dtypes' element types (`f64`, `f32`, `i8` ... `u64`, `bool`,
/// [`nums_layout::C64`], [`nums_layout::C128`]), or a [`Block`].
pub trait IntoBlock {
    /// The values as a [`Block`].
    fn into_block(self) -> Block;
}

/// Element types a [`Block`] holds, for values in and out.
pub trait Element: Clone + Send + Sync + 'static {
    /// Its dtype.
    const DTYPE: DType;
    /// An array of them as a block.
    fn block(a: ndarray::ArrayD<Self>) -> Block;
    /// The block's values, if it holds this type.
    fn from_block(b: Block) -> Option<ndarray::ArrayD<Self>>;
}

macro_rules! element {
    ($($t:ty => $v:ident $d:ident),*) => {$(
        impl Element for $t {
            const DTYPE: DType = DType::$d;
            fn block(a: ndarray::ArrayD<$t>) -> Block {
                Block::$v(a)
            }
            fn from_block(b: Block) -> Option<ndarray::ArrayD<$t>> {
                match b {
                    Block::$v(a) => Some(a),
                    _ => None,
                }
            }
        }
    )*};
}
element!(
    f64 => F64 Float64, f32 => F32 Float32, i64 => I64 Int64, bool => Bool Bool,
    i8 => I8 Int8, i16 => I16 Int16, i32 => I32 Int32, u8 => U8 UInt8, u16 => U16 UInt16,
    u32 => U32 UInt32, u64 => U64 UInt64, nums_layout::C64 => C64 Complex64,
    nums_layout::C128 => C128 Complex128
);

impl<A, S, D> IntoBlock for ndarray::ArrayBase<S, D>
where
    A: Element,
    S: ndarray::Data<Elem = A>,
    D: ndarray::Dimension,
{
    fn into_block(self) -> Block {
        A::block(self.into_owned().into_dyn())
    }
}

impl<A, S, D> IntoBlock for &ndarray::ArrayBase<S, D>
where
    A: Element,
    S: ndarray::Data<Elem = A>,
    D: ndarray::Dimension,
{
    fn into_block(self) -> Block {
        A::block(self.to_owned().into_dyn())
    }
}

impl IntoBlock for Block {
    fn into_block(self) -> Block {
        self
    }
}

fn store_error(e: impl std::fmt::Display) -> Error {
    Error::Store {
        message: e.to_string(),
    }
}

/// `shape` in the graph's integer type.
fn dims(shape: &[usize]) -> Vec<u64> {
    shape.iter().map(|&s| s as u64).collect()
}

impl Session {
    /// A session on a store URL: `file://folder` (relative to the working directory) or
    /// `s3://bucket/prefix` (credentials from the standard AWS chain). The local backend
    /// (function processes on this machine), the LSHS scheduler, invocations of 2048 MB
    /// and 900 s, one worker per core (as many as the machine's memory holds).
    ///
    /// ```
    /// # use nums_cloud::{Error, api::Session};
    /// assert!(Session::new("s3://my-bucket/jobs").is_ok());
    /// let e = Session::new("ftp://x").unwrap_err();
    /// assert!(matches!(e, Error::Config { ref setting, .. } if setting == "storage"), "{e}");
    /// ```
    pub fn new(storage: &str) -> Result<Session, Error> {
        Self::with_endpoint(storage, None)
    }

    fn with_endpoint(storage: &str, endpoint: Option<String>) -> Result<Session, Error> {
        let cwd = std::env::current_dir().map_err(|e| Error::Config {
            setting: "storage".into(),
            message: format!("no working directory to resolve paths against: {e}"),
        })?;
        let spec = crate::job::resolve_store_url(&cwd, storage, endpoint).map_err(|message| {
            Error::Config {
                setting: "storage".into(),
                message,
            }
        })?;
        let d = crate::job::Defaults::default();
        let cfg = Config {
            backend: d.backend,
            function: d.function,
            scheduler: Scheduler::Lshs,
            workers: crate::config::default_workers(d.backend, d.memory_mb) as usize,
            memory_mb: d.memory_mb,
            timeout_seconds: crate::config::DEFAULT_TIMEOUT_SECONDS,
            function_binary: None,
            region: None,
            progress: false,
            progress_to: None,
            in_process_bytes: IN_PROCESS_BYTES,
            memory_tier_bytes: default_memory_tier_bytes(),
            function_tier_percent: nums_function::memory::DEFAULT_TIER_PERCENT.into(),
            workers_set: false,
        };
        let id = format!("api-{:012x}", fastrand::u64(..) >> 16);
        // The program the session's arrays are defined in, as a job file's are.
        let job = Job::program(cfg.engine(&spec), &id, &cwd);
        Ok(Session {
            st: Arc::new(State {
                id,
                cwd,
                spec,
                graph: Mutex::new(Incremental::new(job)),
                pending: Mutex::new(HashMap::new()),
                next: AtomicU64::new(0),
                closed: AtomicBool::new(false),
                touched: AtomicBool::new(false),
                opened: Default::default(),
                claimed: Default::default(),
                backend: tokio::sync::Mutex::new(None),
                runtime: Default::default(),
                fits: Mutex::new(HashMap::new()),
                columns: Mutex::new(HashMap::new()),
                counts: Default::default(),
                owners: Mutex::new(Default::default()),
                holders: Default::default(),
                running: Default::default(),
            }),
            cfg: Arc::new(cfg),
        })
    }

    /// A session on a deployment made with `infra/` (`terraform output -json` saved to
    /// `path`, as `nums-cloud run --infra` takes it): its bucket, its Lambda function
    /// (backend [`Backend::Lambda`]) and its memory. The AWS SDK reads the region from
    /// the environment, which a library cannot set safely for a running program: when the
    /// deployment names a region, computes refuse to start ([`Error::Config`]) unless
    /// `AWS_REGION` (or `AWS_DEFAULT_REGION`) names the same one.
    ///
    /// ```no_run
    /// # use nums_cloud::api::Session;
    /// let s = Session::from_infra("terraform-output.json")?.workers(64);
    /// let total = s.random_normal(&[100_000_000, 10], 1).sum(Some(&[0])).compute_blocking::<f64>()?;
    /// # Ok::<(), nums_cloud::Error>(())
    /// ```
    pub fn from_infra(path: impl AsRef<Path>) -> Result<Session, Error> {
        let infra = crate::infra::Infra::load(path.as_ref()).map_err(|e| Error::Config {
            setting: "from_infra".into(),
            message: format!("{e:#}"),
        })?;
        let d = infra.defaults();
        Ok(Session::new(&infra.storage_url)?.set(|c| {
            c.backend = d.backend;
            c.function = d.function;
            c.memory_mb = d.memory_mb;
            c.region = infra.region.clone();
            // The deployment's reserved concurrency, as a job run with it takes.
            if let Some(w) = d.workers {
                c.workers = w as usize;
                c.workers_set = true;
            }
        }))
    }

    fn set(mut self, f: impl FnOnce(&mut Config)) -> Session {
        let c = Arc::make_mut(&mut self.cfg);
        f(c);
        if !c.workers_set {
            c.workers = crate::config::default_workers(c.backend, c.memory_mb) as usize;
        }
        self
    }

    /// The session's settings.
    pub fn settings(&self) -> Settings {
        Settings {
            storage: self.st.spec.url.clone(),
            endpoint: self.st.spec.endpoint.clone(),
            backend: self.cfg.backend,
            function: self.cfg.function.clone(),
            scheduler: self.cfg.scheduler,
            workers: self.cfg.workers,
            memory_mb: self.cfg.memory_mb,
            timeout_seconds: self.cfg.timeout_seconds,
            in_process_bytes: self.cfg.in_process_bytes,
            memory_tier_bytes: self.cfg.memory_tier_bytes,
            function_tier_percent: self.cfg.function_tier_percent,
        }
    }

    /// A new session on the same storage URL through an S3-compatible endpoint (any
    /// server: path-style requests; plain `http://` only on a loopback address), with
    /// this session's settings. Arrays of this session do not move to it.
    pub fn endpoint(self, url: &str) -> Result<Session, Error> {
        let s = Self::with_endpoint(&self.st.spec.url, Some(url.to_string()))?;
        Ok(Session {
            st: s.st,
            cfg: self.cfg,
        })
    }

    /// Where invocations run: [`Backend::Local`] (function processes on this machine,
    /// the default) or [`Backend::Lambda`] (the function named by [`Session::function`]).
    pub fn backend(self, backend: Backend) -> Session {
        self.set(|c| c.backend = backend)
    }

    /// The Lambda function's name (default `nums-cloud`).
    pub fn function(self, name: &str) -> Session {
        self.set(|c| c.function = name.to_string())
    }

    /// The scheduler: [`Scheduler::Lshs`] (default) or [`Scheduler::Naive`] (one task per
    /// invocation: the baseline).
    pub fn scheduler(self, scheduler: Scheduler) -> Session {
        self.set(|c| c.scheduler = scheduler)
    }

    /// Concurrent invocations (1 to 1000; default: local function processes, one per core
    /// that the machine's memory holds at `memory_mb`; Lambda, 2 or the deployment's
    /// reserved concurrency).
    pub fn workers(self, n: usize) -> Session {
        self.set(|c| {
            c.workers = n;
            c.workers_set = true;
        })
    }

    /// Memory of one invocation in MB (128 to 10240; default 2048, or the deployment's):
    /// what batches are planned to fit, enforced locally as Lambda enforces it.
    pub fn memory_mb(self, mb: u64) -> Session {
        self.set(|c| c.memory_mb = mb)
    }

    /// The longest one invocation may run, in seconds (1 to 900; default 900).
    pub fn timeout_seconds(self, seconds: u64) -> Session {
        self.set(|c| c.timeout_seconds = seconds)
    }

    /// The `nums-cloud` binary whose `function` subcommand serves the local backend
    /// (default: `$NUMS_CLOUD_FUNCTION`, or `nums-cloud` next to this program or on the
    /// `PATH`).
    pub fn function_binary(self, path: &str) -> Session {
        self.set(|c| c.function_binary = Some(vec![path.to_string(), "function".to_string()]))
    }

    /// The whole command of the local backend's function processes, program first: for a
    /// program that serves the function loop otherwise than as `nums-cloud function` (the
    /// Python package runs `python -m nums_cloud._function`).
    pub fn function_command(self, command: &[&str]) -> Session {
        let command = command.iter().map(|a| a.to_string()).collect();
        self.set(|c| c.function_binary = Some(command))
    }

    /// Computes whose arrays (every array they read or make, inputs read in place
    /// included) come to at most `bytes` run in this process: the function's own kernels
    /// called here over the session's store, with no function process or request in
    /// between (a small compute takes a millisecond or so, not the tens an invocation
    /// costs). Larger ones run on the session's backend. Default [`IN_PROCESS_BYTES`]; 0
    /// sends every compute to the backend. [`Session::explain`] tells which a compute gets.
    pub fn in_process_bytes(self, bytes: u64) -> Session {
        self.set(|c| c.in_process_bytes = bytes)
    }

    /// Bytes of decoded blocks this process keeps in memory between computes (its memory
    /// tier, [`nums_layout::tier`]): blocks it made, read or was given stay here, least
    /// recently used evicted first, and a later compute over them reads memory instead of
    /// the store, and runs here when what it reads from the store and makes fits
    /// ([`Session::in_process_bytes`], or half the tier when it reads from memory at all).
    /// A kept block is served only while the store still holds the version it was kept
    /// at; an evicted one is read back. Default: a quarter of this machine's memory
    /// ([`default_memory_tier_bytes`]); 0 turns it off. The tier is the process's: the
    /// session that computes last sets its size.
    pub fn memory_tier_bytes(self, bytes: u64) -> Session {
        self.set(|c| c.memory_tier_bytes = bytes)
    }

    /// The share of each invocation's headroom (its `memory_mb` less its batch's
    /// projected peak) that a local function process (or a warm Lambda container) keeps
    /// the blocks it read or wrote in, across invocations, in percent (0 to 100; default
    /// 50; 0: none). The scheduler then sends work over those blocks to the process that
    /// holds them (slot affinity, local backend). The share never makes a batch fail for
    /// memory: it is taken out of what the batch leaves, before the batch runs
    /// ([`nums_function::memory::tier_budget`]). A block is served from a process's memory
    /// only while the store holds the version it was kept at.
    pub fn function_tier_percent(self, percent: u64) -> Session {
        self.set(|c| c.function_tier_percent = percent)
    }

    /// Show the progress of computes on the backend while computing (default off): a bar
    /// on standard error when it is a terminal, else a line now and then; or wherever
    /// [`Session::progress_to`] sends it. It counts block tasks with the plan's totals and
    /// store bytes moved, names the stage that runs and projects an ETA.
    pub fn progress(self, show: bool) -> Session {
        self.set(|c| c.progress = show)
    }

    /// Hands each [`ProgressUpdate`] to `show` instead of standard error (a front end's
    /// own display, such as a notebook's), at most every `every` and at each stage's
    /// start and the end; turns the progress on.
    pub fn progress_to(
        self,
        show: impl Fn(&ProgressUpdate) + Send + Sync + 'static,
        every: std::time::Duration,
    ) -> Session {
        let to = ProgressTo(std::sync::Arc::new(show), every);
        self.set(|c| {
            c.progress = true;
            c.progress_to = Some(to)
        })
    }

    pub(crate) fn next(&self) -> u64 {
        self.st.next.fetch_add(1, Ordering::Relaxed)
    }

    fn same(&self, other: &Session) -> bool {
        Arc::ptr_eq(&self.st, &other.st)
    }

    /// Adds `e` (operands `ops`) to the graph: the value it makes, or the error, naming
    /// the operation by `label`.
    pub(crate) fn eval(&self, e: &Expr, ops: &Operands, label: &str) -> Result<GraphValue, Error> {
        if let Some(a) = ops.0.iter().find(|a| !a.session().same(self)) {
            let ours = ops.0.iter().find(|o| o.session().same(self));
            return Err(other_session(Some(label), ours, a));
        }
        let ids = ops
            .0
            .iter()
            .map(|a| a.id().map_err(Clone::clone))
            .collect::<Result<Vec<_>, _>>()?;
        // Each value asked for is one more stage of the function (a sort's sample, then
        // its counts): a few at most.
        for _ in 0..8 {
            let (need, sorts) = {
                let mut g = self.graph();
                g.set_compute(self.cfg.compute());
                let need = match g.eval(e, &ids) {
                    Ok(v) => return Ok(v),
                    Err(message) => g.need_values().ok_or_else(|| Error::Job {
                        raises: g.raises(),
                        array: Some(label.to_string()),
                        message: format!("`{label}`: {message}"),
                    })?,
                };
                (need, g.graph().reread_under(need))
            };
            // Its shape depends on a small node's values (a sort's sample, a selection's
            // counts): computed first, as a job's stage computes them, then built again.
            // What that build reads again is kept, while an array may read it: the sorts
            // it is made from, a selection's mask (unique's values, counts and positions
            // read one sorted array and one mask of where values change).
            let values = blocking::block_on(self.values_with(&[need], &sorts))??;
            let values = values.into_iter().next().expect("one node asked");
            let mut g = self.graph();
            g.keep_while_needed(&sorts);
            g.set_values(need, values);
        }
        Err(Error::Job {
            raises: Default::default(),
            array: Some(label.to_string()),
            message: format!("`{label}`: its shape still depends on values after 8 stages"),
        })
    }

    fn graph(&self) -> std::sync::MutexGuard<'_, Incremental> {
        self.st.graph.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn meta(&self, id: NodeId) -> ArrayMeta {
        self.graph().graph().nodes[id].meta.clone()
    }

    /// An array the session defines as a job file's array table would (`source`, with a
    /// `block` and `dtype` if given), labelled `label`.
    fn define(&self, source: Source, block: Option<Vec<u64>>, label: String) -> Array {
        let def = crate::job::ArrayDef {
            name: format!("$def{}", self.next()),
            line: 0,
            source,
            block,
            dtype: None,
        };
        let r = {
            let mut g = self.graph();
            g.set_compute(self.cfg.compute());
            g.define(&def, &Default::default())
        };
        Array::made(
            self,
            r.map_err(|message| Error::Job {
                raises: Default::default(),
                array: Some(label.clone()),
                message: format!("`{label}`: {message}"),
            }),
            label,
        )
    }

    /// Any function of the expression language (NumPy's names and parameters: see the
    /// README's function table) called with `args` and `kwargs`: the way to every function
    /// this API has no method for. Its value may be an array, a number or a tuple of them
    /// (a factorization's named fields).
    ///
    /// ```
    /// # use nums_cloud::api::{Arg, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-call");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let a = s.arange(6.0).reshape(&[2, 3]);
    /// let gram = s.call("einsum", &["ij,kj->ik".into(), (&a).into(), (&a).into()], &[])?.array()?;
    /// assert_eq!(gram.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![5.0, 14.0, 14.0, 50.0]);
    /// let v = s.call("var", &[(&a).into()], &[("axis", 0.into()), ("ddof", 1.into())])?.array()?;
    /// assert_eq!(v.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![4.5; 3]);
    /// assert!(s.call("sort_of", &[(&a).into()], &[]).is_err()); // unknown: named in the error
    /// # Ok(())
    /// # }
    /// ```
    pub fn call(&self, f: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> Result<Value, Error> {
        let mut ops = Operands::default();
        let e = ops.call(f, args, kwargs);
        let label = build::label(&e, &ops.0);
        let v = self.eval(&e, &ops, &label)?;
        Ok(Value::of(self, v, &label))
    }

    /// Zeros (float64) of `shape`.
    pub fn zeros(&self, shape: &[usize]) -> Array {
        self.filled(shape, 0.0, format!("zeros({shape:?})"))
    }

    /// Ones (float64) of `shape`.
    pub fn ones(&self, shape: &[usize]) -> Array {
        self.filled(shape, 1.0, format!("ones({shape:?})"))
    }

    /// `value` (float64; NaN and infinities too) everywhere in `shape`.
    pub fn full(&self, shape: &[usize], value: f64) -> Array {
        let label = format!("full({:?}, {})", shape, build::python_float(value));
        self.filled(shape, value, label)
    }

    fn filled(&self, shape: &[usize], value: f64, label: String) -> Array {
        self.define(
            Source::Full {
                shape: dims(shape),
                value: nums_layout::Scalar::Float(value),
            },
            None,
            label,
        )
    }

    /// The label of the array that made node `id` (see [`State::owners`]).
    pub(crate) fn owner(&self, id: NodeId) -> Option<String> {
        let owners = self.st.owners.lock().unwrap_or_else(|p| p.into_inner());
        let (_, h) = owners.range(id..).next()?;
        let h = h.upgrade()?;
        Some(h.name.get().cloned().unwrap_or_else(|| h.label.clone()))
    }

    /// `0.0, 1.0, ...` below `stop` (float64), as `np.arange(stop)`.
    pub fn arange(&self, stop: f64) -> Array {
        self.call_array("arange", &[Arg::Float(stop)], &[])
    }

    fn random(&self, dist: nums_layout::RandomDist, shape: &[usize], seed: u64) -> Array {
        let label = format!("random_{}({shape:?}, seed={seed})", dist.name());
        self.define(
            Source::Random {
                dist,
                shape: dims(shape),
                seed,
            },
            None,
            label,
        )
    }

    /// Normal(0, 1) values (float64); deterministic for `seed`, independent of the block
    /// shape (not NumPy's generator).
    pub fn random_normal(&self, shape: &[usize], seed: u64) -> Array {
        self.random(nums_layout::RandomDist::Normal, shape, seed)
    }

    /// Uniform [0, 1) values (float64); deterministic for `seed`, independent of the
    /// block shape.
    pub fn random_uniform(&self, shape: &[usize], seed: u64) -> Array {
        self.random(nums_layout::RandomDist::Uniform, shape, seed)
    }

    /// Integers (int64) in `[low, high)`; deterministic for `seed`, independent of the
    /// block shape.
    pub fn random_integers(&self, shape: &[usize], low: i64, high: i64, seed: u64) -> Array {
        self.random(nums_layout::RandomDist::Integers { low, high }, shape, seed)
    }

    /// A function call whose value is one array (an error otherwise, kept in the array).
    /// A method of NumPy's Generator, `random.default_rng(seed).f(args, kwargs)`
    /// (`normal`, `uniform`, `integers`, `poisson`, `choice`, `permutation`, ...): drawn
    /// from (seed, index) per element, the same for any blocks; NumPy's distributions, not
    /// its bit streams. NumS's `random.rand`, `randn`, ... are [`Session::call`]'s
    /// (`"random.randn"`, with `seed`).
    ///
    /// ```
    /// # use nums_cloud::api::{Arg, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-generator")?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.generator(7, "normal", &[Arg::Float(2.0), Arg::Float(0.5), Arg::from(&[1000usize, 4][..])], &[]);
    /// let m = x.mean(None).compute_blocking::<f64>()?;
    /// assert!((m.sum() - 2.0).abs() < 0.05);
    /// # Ok(())
    /// # }
    /// ```
    pub fn generator(&self, seed: u64, f: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> Array {
        let mut ops = Operands::default();
        let rng = ops.call("random.default_rng", &[Arg::Int(seed as i64)], &[]);
        let mut e = ops.call(f, args, kwargs);
        if let crate::expr::ExprKind::Call(_, a, _) = &mut e.kind {
            a.insert(0, rng);
        }
        let label = build::label(&e, &ops.0);
        Array::from_eval(self, &e, &ops, label)
    }

    pub(crate) fn call_array(&self, f: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> Array {
        let mut ops = Operands::default();
        let e = ops.call(f, args, kwargs);
        let label = build::label(&e, &ops.0);
        Array::from_eval(self, &e, &ops, label)
    }
}

/// What [`Session::call`] gives: an array, a number, or several (NumPy's tuples and named
/// tuples).
#[derive(Clone, Debug)]
pub enum Value {
    /// An array of the session.
    Array(Array),
    /// A number (a shape's size, say).
    Number(nums_layout::Scalar),
    /// A NumPy scalar: its value (exact in its dtype) and its dtype, which promotes as a
    /// 0-d array's (`sqrt(2)` is a float64, strong against float32 arrays).
    NumPy(nums_layout::Scalar, nums_layout::DType),
    /// A tuple, or a named tuple's fields (with their names).
    Tuple(Vec<(Option<&'static str>, Value)>),
}

impl Value {
    fn of(s: &Session, v: GraphValue, label: &str) -> Value {
        match v {
            GraphValue::Array(id) => Value::Array(Array::made(s, Ok(id), label.to_string())),
            GraphValue::Number(x) => Value::Number(x),
            GraphValue::NumPy(x, d) => Value::NumPy(x, d),
            GraphValue::Tuple(t) => Value::Tuple(
                t.into_iter()
                    .enumerate()
                    .map(|(k, v)| (None, Value::of(s, v, &format!("{label}[{k}]"))))
                    .collect(),
            ),
            GraphValue::Fields(f) => Value::Tuple(
                f.into_iter()
                    .map(|(n, v)| (Some(n), Value::of(s, v, &format!("{label}.{n}"))))
                    .collect(),
            ),
        }
    }

    /// The array it is, or an error saying what it is instead.
    pub fn array(self) -> Result<Array, Error> {
        match self {
            Value::Array(a) => Ok(a),
            other => Err(Error::Job {
                raises: Default::default(),
                array: None,
                message: format!("expected an array, got {other:?}"),
            }),
        }
    }

    /// The value's `k`-th item (a tuple's), or its field `name`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Tuple(items) => match key.parse::<usize>() {
                Ok(k) => items.get(k).map(|(_, v)| v),
                Err(_) => items.iter().find(|(n, _)| *n == Some(key)).map(|(_, v)| v),
            },
            _ => None,
        }
    }
}
