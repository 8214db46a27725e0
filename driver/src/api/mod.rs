//! The Rust library API: lazy arrays over the same engine as `nums-cloud run`.
//!
//! A [`Session`] holds where arrays are stored and how jobs run (backend, deployment,
//! scheduler, workers, memory, timeout). Every operation on an [`Array`] only records an
//! expression; [`Array::compute`] (async) or [`Array::compute_blocking`] writes the job
//! those expressions make (the job-file language, checked and planned as `nums-cloud run`
//! does), runs it on the session's store and backend, and returns the values.
//! [`Session::compute_many`] computes several arrays in one job, [`Session::persist`]
//! keeps an array in the store for later computes, [`Session::from_ndarray`] makes an
//! input of values in memory. Errors are a typed [`Error`](crate::Error) that names the
//! user's arrays.
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
//! assert_eq!(y.compute_f64_blocking()?.into_raw_vec_and_offset().0, vec![128.0]);
//! let big = x.gt(5.0);
//! let counts = big.sum(Some(&[0])).compute_f64_blocking()?;
//! assert_eq!(counts.into_raw_vec_and_offset().0, vec![2.0, 2.0, 2.0]);
//! # Ok(())
//! # }
//! ```
#![warn(missing_docs)]

mod array;
mod blocking;
mod job;
pub mod linalg;
pub mod models;

use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use nums_layout::{ArrayMeta, Block, Store, StoreSpec, StoredArray};

pub use self::array::{Array, Operand};
use self::array::{Def, Node};
use self::job::{Out, Rendered, dims, toml_f64, toml_str};
use crate::error::Error;
pub use crate::job::{Backend, SchedulerKind as Scheduler};

/// How jobs run: what [`Session`]'s setters set, read when a compute starts.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    /// The store URL, resolved (`file:///abs/` or `s3://bucket/prefix`).
    pub storage: String,
    pub endpoint: Option<String>,
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
}

impl Config {
    fn spec(&self) -> StoreSpec {
        StoreSpec {
            url: self.storage.clone(),
            endpoint: self.endpoint.clone(),
        }
    }

    /// Where `key` of the store is, as a job's `load` names it (a path or `s3://` URL).
    fn location(&self, key: &str) -> String {
        match url::Url::parse(&self.storage)
            .ok()
            .filter(|u| u.scheme() == "file")
            .and_then(|u| u.to_file_path().ok())
        {
            Some(root) => root.join(key).display().to_string(),
            None => format!("{}/{key}", self.storage.trim_end_matches('/')),
        }
    }
}

pub(crate) struct Inner {
    /// Prefix of every job and input this session makes in the store (`api-<random>`).
    id: String,
    /// The working directory when the session was made: relative paths resolve against it.
    cwd: PathBuf,
    cfg: RwLock<Config>,
    next: AtomicU64,
    names: Mutex<HashSet<String>>,
    /// Store prefixes that hold what the session keeps (persisted arrays, inputs).
    kept: Mutex<Vec<String>>,
    closed: AtomicBool,
}

/// Where arrays are stored and how jobs run; arrays made from it share it. A session is a
/// cheap handle (`Clone`, `Send + Sync`): clones and threads share one session.
///
/// Settings (builder style, each returning the session) apply to the computes that start
/// after them. Relative paths (the store, `load`) resolve against the working directory
/// when the session was made. What the session keeps in the store (persisted arrays,
/// inputs from memory) lies under `<store>/api-<random>*/` and is removed by
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
/// let s2 = s.clone();
/// std::thread::spawn(move || drop(s2.ones(&[2]))).join().unwrap(); // Send + Sync
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Session(pub(crate) Arc<Inner>);

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.0.id)
            .field("config", &*self.config())
            .finish()
    }
}

/// Values that [`Session::from_ndarray`] takes: any `ndarray` array (owned or a view) of
/// `f64`, `f32`, `i64` or `bool`, or a [`Block`].
pub trait IntoBlock {
    /// The values as a [`Block`].
    fn into_block(self) -> Block;
}

/// Element types a [`Block`] holds.
pub trait Element: Clone {
    /// An array of them as a block.
    fn block(a: ndarray::ArrayD<Self>) -> Block;
}

macro_rules! element {
    ($($t:ty => $v:ident),*) => {$(
        impl Element for $t {
            fn block(a: ndarray::ArrayD<$t>) -> Block {
                Block::$v(a)
            }
        }
    )*};
}
element!(
    f64 => F64, f32 => F32, i64 => I64, bool => Bool, i8 => I8, i16 => I16, i32 => I32,
    u8 => U8, u16 => U16, u32 => U32, u64 => U64, nums_layout::C64 => C64,
    nums_layout::C128 => C128
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

impl Session {
    /// A session on a store URL: `file://folder` (relative to the working directory) or
    /// `s3://bucket/prefix` (credentials from the standard AWS chain). The local backend
    /// (function processes on this machine), the LSHS scheduler, 2 workers of 2048 MB,
    /// 900 s per invocation.
    ///
    /// ```
    /// # use nums_cloud::{Error, api::Session};
    /// assert!(Session::new("s3://my-bucket/jobs").is_ok());
    /// let e = Session::new("ftp://x").unwrap_err();
    /// assert!(matches!(e, Error::Config { ref setting, .. } if setting == "storage"), "{e}");
    /// ```
    pub fn new(storage: &str) -> Result<Session, Error> {
        let cwd = std::env::current_dir().map_err(|e| Error::Config {
            setting: "storage".into(),
            message: format!("no working directory to resolve paths against: {e}"),
        })?;
        let spec = crate::job::resolve_store_url(&cwd, storage, None).map_err(|message| {
            Error::Config {
                setting: "storage".into(),
                message,
            }
        })?;
        let d = crate::job::Defaults::default();
        Ok(Session(Arc::new(Inner {
            id: format!("api-{:012x}", fastrand::u64(..) >> 16),
            cwd,
            cfg: RwLock::new(Config {
                storage: spec.url,
                endpoint: None,
                backend: d.backend,
                function: d.function,
                scheduler: Scheduler::Lshs,
                workers: 2,
                memory_mb: d.memory_mb,
                timeout_seconds: 900,
                function_binary: None,
                region: None,
                progress: false,
            }),
            next: AtomicU64::new(0),
            names: Mutex::new(HashSet::new()),
            kept: Mutex::new(Vec::new()),
            closed: AtomicBool::new(false),
        })))
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
    /// let total = s.random_normal(&[100_000_000, 10], 1).sum(Some(&[0])).compute_blocking()?;
    /// # Ok::<(), nums_cloud::Error>(())
    /// ```
    pub fn from_infra(path: impl AsRef<Path>) -> Result<Session, Error> {
        let infra = crate::infra::Infra::load(path.as_ref()).map_err(|e| Error::Config {
            setting: "from_infra".into(),
            message: format!("{e:#}"),
        })?;
        let s = Session::new(&infra.storage_url)?;
        {
            let d = infra.defaults();
            let mut c = s.0.cfg.write().expect("config lock");
            c.backend = d.backend;
            c.function = d.function;
            c.memory_mb = d.memory_mb;
            c.region = infra.region.clone();
        }
        Ok(s)
    }

    fn set(self, f: impl FnOnce(&mut Config)) -> Session {
        f(&mut self.0.cfg.write().expect("config lock"));
        self
    }

    fn config(&self) -> std::sync::RwLockReadGuard<'_, Config> {
        self.0.cfg.read().expect("config lock")
    }

    /// An S3-compatible endpoint for an `s3://` store (any server: path-style requests;
    /// plain `http://` only on a loopback address).
    pub fn endpoint(self, url: &str) -> Session {
        self.set(|c| c.endpoint = Some(url.to_string()))
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

    /// Concurrent invocations (1 to 1000; default 2).
    pub fn workers(self, n: usize) -> Session {
        self.set(|c| c.workers = n)
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

    /// Show `nums-cloud run`'s progress bar on standard error while computing (default
    /// off).
    pub fn progress(self, show: bool) -> Session {
        self.set(|c| c.progress = show)
    }

    fn next(&self) -> u64 {
        self.0.next.fetch_add(1, Ordering::Relaxed)
    }

    /// A node id unique in the process (so that arrays of two sessions never share one).
    fn node_id() -> u64 {
        static NODES: AtomicU64 = AtomicU64::new(0);
        NODES.fetch_add(1, Ordering::Relaxed)
    }

    /// Reserves `name` for one array of the session; false if it is taken.
    fn claim_name(&self, name: &str) -> bool {
        self.0
            .names
            .lock()
            .expect("names lock")
            .insert(name.to_string())
    }

    fn def(&self, def: Def, args: Vec<Array>) -> Array {
        Array {
            node: Arc::new(Node {
                id: Self::node_id(),
                session: self.clone(),
                def,
                args,
                name: OnceLock::new(),
                stored: tokio::sync::OnceCell::new(),
            }),
        }
    }

    fn table(&self, toml: String, label: String) -> Array {
        self.def(Def::Table { toml, label }, Vec::new())
    }

    /// An array from any expression of the job language (NumPy's syntax and functions:
    /// see the README's function table) over `args`, which it names `{0}`, `{1}`, ...
    /// The expression's syntax is checked here; names, shapes and dtypes when it is
    /// computed.
    ///
    /// ```
    /// # use nums_cloud::{Error, api::Session};
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-expr");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap()
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let a = s.arange(6.0).reshape(&[2, 3]);
    /// let gram = s.expr("einsum('ij,kj->ik', {0}, {0})", &[&a]).unwrap();
    /// assert_eq!(gram.compute_f64_blocking().unwrap().into_raw_vec_and_offset().0, vec![5.0, 14.0, 14.0, 50.0]);
    /// let e = s.expr("{0} + * 2", &[&a]).unwrap_err();
    /// assert!(matches!(e, Error::Job { .. }));
    /// assert!(e.to_string().contains("{0} + * 2\n          ^"), "{e}");
    /// ```
    pub fn expr(&self, text: &str, args: &[&Array]) -> Result<Array, Error> {
        let refuse = |message: String| Error::Job {
            array: None,
            message: format!("expression {text:?}: {message}"),
        };
        // Checked with each `{i}` spelt `a_i` (as long), so positions are the user's.
        let probe = job::substitute(text, args.len(), |k, wrapped| {
            if wrapped {
                format!("(a_{k})")
            } else {
                format!("a_{k}")
            }
        })
        .map_err(refuse)?;
        if let Err(e) = crate::expr::parse(&probe) {
            return Err(Error::Job {
                array: None,
                message: format!("expression: {}", e.render(text)),
            });
        }
        if let Some(a) = args
            .iter()
            .find(|a| !Arc::ptr_eq(&a.node.session.0, &self.0))
        {
            return Err(refuse(format!(
                "array `{}` belongs to another session",
                a.label()
            )));
        }
        Ok(self.def(
            Def::Expr(text.to_string()),
            args.iter().map(|a| (*a).clone()).collect(),
        ))
    }

    /// Zeros (float64) of `shape`.
    pub fn zeros(&self, shape: &[u64]) -> Array {
        self.table(
            format!("{{ zeros = {} }}", dims(shape)),
            format!("zeros({})", dims(shape)),
        )
    }

    /// Ones (float64) of `shape`.
    pub fn ones(&self, shape: &[u64]) -> Array {
        self.table(
            format!("{{ ones = {} }}", dims(shape)),
            format!("ones({})", dims(shape)),
        )
    }

    /// `value` (float64; NaN and infinities too) everywhere in `shape`.
    pub fn full(&self, shape: &[u64], value: f64) -> Array {
        self.table(
            format!("{{ full = {}, value = {} }}", dims(shape), toml_f64(value)),
            format!("full({}, {value:?})", dims(shape)),
        )
    }

    /// `0.0, 1.0, ...` below `stop` (float64), as `np.arange(stop)`.
    pub fn arange(&self, stop: f64) -> Array {
        self.def(
            Def::Expr(format!("arange({})", job::expr_f64(stop))),
            Vec::new(),
        )
    }

    fn random(&self, kind: &str, extra: &str, shape: &[u64], seed: u64) -> Array {
        self.table(
            format!(
                "{{ random = \"{kind}\", shape = {}, seed = {seed}{extra} }}",
                dims(shape)
            ),
            format!("random_{kind}({}, seed={seed}{extra})", dims(shape)),
        )
    }

    /// Normal(0, 1) values (float64); deterministic for `seed`, independent of the block
    /// shape (not NumPy's generator).
    pub fn random_normal(&self, shape: &[u64], seed: u64) -> Array {
        self.random("normal", "", shape, seed)
    }

    /// Uniform [0, 1) values (float64); deterministic for `seed`, independent of the
    /// block shape.
    pub fn random_uniform(&self, shape: &[u64], seed: u64) -> Array {
        self.random("uniform", "", shape, seed)
    }

    /// Integers (int64) in `[low, high)`; deterministic for `seed`, independent of the
    /// block shape.
    pub fn random_integers(&self, shape: &[u64], low: i64, high: i64, seed: u64) -> Array {
        self.random(
            "integers",
            &format!(", low = {low}, high = {high}"),
            shape,
            seed,
        )
    }

    /// A `.npy`, `.csv`, `.parquet` file or Zarr v3 array (a folder, or an `s3://` URL). A Zarr array in
    /// the session's store that nums-cloud wrote (another job's output) is read in place;
    /// any other input is imported into the job first. Relative paths resolve against the
    /// working directory when the session was made.
    pub fn load(&self, path: &str) -> Array {
        self.table(
            format!("{{ load = {} }}", toml_str(path)),
            format!("load({path:?})"),
        )
    }

    /// A `.csv` file read with NumPy's `loadtxt` options: `header` (the first line names
    /// the columns and is not data), `delimiter` (one ASCII character) and `usecols` (the
    /// columns kept, in that order; negative from the end). As for [`Session::load`].
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-csv");
    /// # std::fs::create_dir_all(&dir).unwrap();
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let file = dir.join("prices.csv");
    /// std::fs::write(&file, "id;price;qty\n1;2.5;4\n2;0.5;10\n").unwrap();
    /// let x = s.load_csv(file.to_str().unwrap(), true, ';', Some(&[-1, 1]));
    /// assert_eq!(x.compute_f64_blocking()?.into_raw_vec_and_offset().0, vec![4.0, 2.5, 10.0, 0.5]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn load_csv(
        &self,
        path: &str,
        header: bool,
        delimiter: char,
        usecols: Option<&[i64]>,
    ) -> Array {
        let mut t = format!(
            "{{ load = {}, header = {header}, delimiter = {}",
            toml_str(path),
            toml_str(&delimiter.to_string())
        );
        if let Some(cols) = usecols {
            let cols: Vec<String> = cols.iter().map(i64::to_string).collect();
            t += &format!(", usecols = [{}]", cols.join(", "));
        }
        t += " }";
        self.table(t, format!("load_csv({path:?})"))
    }

    /// An input made of values in memory (an `ndarray` array of `f64`, `f32`, `i64` or
    /// `bool`, or a [`Block`]): the session writes it into its store once, as a Zarr
    /// array, before the first compute that reads it, and jobs read it in place.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-ndarray");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let w = s.from_ndarray(ndarray::array![1.0, -2.0, 0.5]).named("w")?;
    /// let x = s.ones(&[4, 3]);
    /// assert_eq!(x.matmul(&w).compute_f64_blocking()?.into_raw_vec_and_offset().0, vec![-0.5; 4]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn from_ndarray(&self, values: impl IntoBlock) -> Array {
        self.def(Def::Data(values.into_block()), Vec::new())
    }

    /// Computes several arrays in one job (one plan, one pass over the inputs they share)
    /// and returns their values in the order asked.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-many");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(10.0);
    /// let (lo, hi) = (x.min(None), x.max(None));
    /// let v = s.compute_many_blocking(&[&lo, &hi, &x.sum(None)])?;
    /// let v: Vec<f64> = v.iter().map(|b| b.to_f64().sum()).collect();
    /// assert_eq!(v, vec![0.0, 9.0, 45.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn compute_many(&self, arrays: &[&Array]) -> Result<Vec<Block>, Error> {
        Ok(self.compute_with_report(arrays).await?.0)
    }

    /// [`Session::compute_many`], with the run's report (what the fits measured, say).
    pub(crate) async fn compute_with_report(
        &self,
        arrays: &[&Array],
    ) -> Result<(Vec<Block>, crate::report::Report), Error> {
        let name = format!("{}-{}", self.0.id, self.next());
        let tmp = std::env::temp_dir().join(format!("nums-{name}"));
        std::fs::create_dir_all(&tmp).map_err(|e| Error::Other {
            message: format!("cannot create {}: {e}", tmp.display()),
        })?;
        let outs: Vec<(&Node, Out)> = arrays
            .iter()
            .map(|a| (&*a.node, Out::Npy(tmp.join(format!("{}.npy", a.node.id)))))
            .collect();
        let result = self
            .run(&name, arrays, &outs, false)
            .await
            .and_then(|report| {
                let blocks = outs
                    .iter()
                    .map(|(_, out)| {
                        let Out::Npy(p) = out else {
                            unreachable!("npy outputs")
                        };
                        crate::npy::read(p).map_err(|e| Error::Other { message: e })
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((blocks, report))
            });
        let _ = std::fs::remove_dir_all(&tmp);
        result
    }

    /// [`Session::compute_many`] for code that is not async (see
    /// [`Array::compute_blocking`]).
    pub fn compute_many_blocking(&self, arrays: &[&Array]) -> Result<Vec<Block>, Error> {
        blocking::block_on(self.compute_many(arrays))?
    }

    /// Computes `a` now and keeps it in the session's store: later computes of `a`, and of
    /// every array made from it, read it in place instead of computing it again. It stays
    /// there until the session is closed. Persisting an array twice does nothing.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-persist");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.random_normal(&[10_000, 8], 3).named("X")?;
    /// let g = x.t().matmul(&x).named("G")?; // computed once, by persist
    /// s.persist(&g).await?;
    /// let trace = s.expr("trace({0})", &[&g])?.compute_f64().await?;
    /// let diag_sum = (&x * &x).sum(None).compute_f64().await?;
    /// assert!((trace.sum() - diag_sum.sum()).abs() < 1e-6 * diag_sum.sum());
    /// s.close().await?; // removes what the session kept
    /// # Ok(())
    /// # }
    /// ```
    pub async fn persist(&self, a: &Array) -> Result<(), Error> {
        self.same_session(a)?;
        self.stored(&a.node).await.map(|_| ())
    }

    /// [`Session::persist`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn persist_blocking(&self, a: &Array) -> Result<(), Error> {
        blocking::block_on(self.persist(a))?
    }

    /// Removes what the session keeps in the store (persisted arrays, inputs from
    /// memory). Arrays of the session cannot be computed afterwards.
    pub async fn close(&self) -> Result<(), Error> {
        self.0.closed.store(true, Ordering::SeqCst);
        let prefixes = std::mem::take(&mut *self.0.kept.lock().expect("kept lock"));
        let store = Store::open(&self.config().spec()).map_err(store_error)?;
        for p in prefixes {
            store.delete_prefix(&p).await.map_err(store_error)?;
        }
        Ok(())
    }

    /// [`Session::close`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn close_blocking(&self) -> Result<(), Error> {
        blocking::block_on(self.close())?
    }

    fn same_session(&self, a: &Array) -> Result<(), Error> {
        if Arc::ptr_eq(&a.node.session.0, &self.0) {
            Ok(())
        } else {
            Err(Error::Job {
                array: Some(a.label()),
                message: format!("array `{}` belongs to another session", a.label()),
            })
        }
    }

    fn keep(&self, prefix: &str) {
        self.0
            .kept
            .lock()
            .expect("kept lock")
            .push(prefix.to_string());
    }

    /// Where `node` is in the store, putting it there first: an input from memory is
    /// written; any other array is computed by a job of its own, which keeps it.
    async fn stored(&self, node: &Arc<Node>) -> Result<String, Error> {
        if let Def::Data(values) = &node.def {
            return self.write_input(node, values).await;
        }
        node.stored
            .get_or_try_init(|| async {
                self.refuse_closed()?;
                let name = format!("{}-{}", self.0.id, self.next());
                self.keep(&name);
                let location = self
                    .config()
                    .location(&format!("{name}/{}", job::job_name(node)));
                let target = Array { node: node.clone() };
                let out = [(&**node, Out::Store(location.clone()))];
                self.run(&name, &[&target], &out, true).await?;
                Ok(location)
            })
            .await
            .cloned()
    }

    /// Where an input from memory is in the store, writing it there first as nums-cloud
    /// writes arrays (so that jobs read it in place).
    async fn write_input(&self, node: &Node, values: &Block) -> Result<String, Error> {
        node.stored
            .get_or_try_init(|| async {
                self.refuse_closed()?;
                let name = format!("{}-{}", self.0.id, self.next());
                self.keep(&name);
                let key = format!("{name}/_{}", node.id);
                self.write_values(&key, values).await?;
                Ok(self.config().location(&key))
            })
            .await
            .cloned()
    }

    async fn write_values(&self, key: &str, values: &Block) -> Result<(), Error> {
        let cfg = self.config().clone();
        let store = Store::open(&cfg.spec()).map_err(store_error)?;
        let shape: Vec<u64> = values.shape().iter().map(|&s| s as u64).collect();
        let block =
            crate::graph::default_block(&shape, values.dtype(), cfg.workers.max(1), cfg.memory_mb);
        let arr =
            StoredArray::new(key, ArrayMeta::new(shape, block, values.dtype())).map_err(|e| {
                Error::Data {
                    message: e.to_string(),
                }
            })?;
        arr.write_whole(&store, values).await.map_err(store_error)?;
        let attrs = serde_json::json!({
            "complete": true,
            "source": "from_ndarray",
            "version": env!("CARGO_PKG_VERSION"),
        });
        arr.write_metadata_with(&store, Some(attrs))
            .await
            .map_err(store_error)
    }

    fn refuse_closed(&self) -> Result<(), Error> {
        if self.0.closed.load(Ordering::SeqCst) {
            return Err(Error::Config {
                setting: "close".into(),
                message: "the session is closed: what it kept in the store is gone".into(),
            });
        }
        Ok(())
    }

    /// The deployment's region must be the environment's (the AWS SDK reads it there).
    fn check_region(cfg: &Config) -> Result<(), Error> {
        let Some(want) = cfg
            .region
            .as_deref()
            .filter(|_| cfg.backend == Backend::Lambda)
        else {
            return Ok(());
        };
        let have = std::env::var("AWS_REGION").or_else(|_| std::env::var("AWS_DEFAULT_REGION"));
        match have {
            Ok(r) if r == want => Ok(()),
            have => Err(Error::Config {
                setting: "from_infra".into(),
                message: format!(
                    "the deployment is in region {want}, but AWS_REGION is {}: set AWS_REGION={want} in the \
                     program's environment (the AWS SDK reads the region there)",
                    have.map(|r| format!("{r:?}"))
                        .unwrap_or_else(|_| "not set".into())
                ),
            }),
        }
    }

    /// Runs the job `name` that makes `targets` into `outs`. Its store prefix is removed
    /// afterwards unless `keep` (a persist) and it succeeded.
    async fn run(
        &self,
        name: &str,
        targets: &[&Array],
        outs: &[(&Node, Out)],
        keep: bool,
    ) -> Result<crate::report::Report, Error> {
        self.refuse_closed()?;
        let nodes = job::closure(self, targets)?;
        for n in &nodes {
            if let Def::Data(values) = &n.def {
                self.write_input(n, values).await?;
            }
        }
        let cfg = self.config().clone();
        Self::check_region(&cfg)?;
        let r = Rendered::new(name, self, &cfg, &nodes, outs);
        let job = r.parse()?;
        let opts = crate::run::RunOptions {
            progress: cfg.progress,
            function_command: cfg.function_binary.clone(),
            ..Default::default()
        };
        let result = crate::run::run_job(job, &opts).await;
        if !(keep && result.is_ok()) {
            // Outputs stay in the store after a job (and a failed run's state): the
            // library keeps only the values.
            if let Ok(store) = Store::open(&cfg.spec()) {
                let _ = store.delete_prefix(name).await;
            }
        }
        result.map_err(|e| r.error(&e))
    }

    /// The shape and dtype of `a`, from checking its job.
    async fn meta(&self, a: &Array) -> Result<ArrayMeta, Error> {
        self.refuse_closed()?;
        let nodes = job::closure(self, &[a])?;
        for n in &nodes {
            if let Def::Data(values) = &n.def {
                self.write_input(n, values).await?;
            }
        }
        let cfg = self.config().clone();
        let r = Rendered::new(
            &format!("{}-{}", self.0.id, self.next()),
            self,
            &cfg,
            &nodes,
            &[],
        );
        let job = r.parse()?;
        let probes = crate::graph::probe(&job)
            .await
            .map_err(|j| r.job_error(&j))?;
        let g = crate::graph::build(&job, &probes).map_err(|j| r.job_error(&j))?;
        Ok(g.nodes[g.named[&job::job_name(&a.node)]].meta.clone())
    }
}

impl Drop for Inner {
    /// What the session kept goes with its last handle (best effort, at most 30 s; use
    /// [`Session::close`] to see errors).
    fn drop(&mut self) {
        let kept = std::mem::take(&mut *self.kept.lock().unwrap_or_else(|p| p.into_inner()));
        if kept.is_empty() || *self.closed.get_mut() {
            return;
        }
        let spec = self.cfg.read().unwrap_or_else(|p| p.into_inner()).spec();
        // On a thread of its own: this may run inside an async runtime, which must not
        // block on another.
        let cleanup = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async {
                let Ok(store) = Store::open(&spec) else {
                    return;
                };
                let all = async {
                    for p in kept {
                        let _ = store.delete_prefix(&p).await;
                    }
                };
                let _ = tokio::time::timeout(std::time::Duration::from_secs(30), all).await;
            });
        });
        let _ = cleanup.join();
    }
}
