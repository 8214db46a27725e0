//! The Rust library API: lazy arrays over the same engine as `nums-cloud run`.
//!
//! Every operation only records an expression; [`Array::compute`] writes the job those
//! expressions make (the same job-file language, checked and planned the same way), runs it
//! on the session's store and backend, and returns the values.
//!
//! ```
//! use nums_cloud::api::Session;
//! # fn main() -> anyhow::Result<()> {
//! let dir = std::env::temp_dir().join("nums-cloud-doc-api");
//! let s = Session::new(&format!("file://{}", dir.display()))?;
//! # let s = s.function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
//! let x = s.arange(12.0).reshape(&[4, 3]).block(&[3, 2]); // ragged blocks
//! let w = s.ones(&[3]);
//! let y = (&x.matmul(&w) * 2.0 - 1.0).sum(None);
//! // sum over rows of 2 * (x @ 1) - 1 = 2 * (0 + 1 + ... + 11) - 4
//! assert_eq!(y.compute_f64()?.into_raw_vec_and_offset().0, vec![128.0]);
//! let m = x.t().matmul(&x);
//! assert_eq!(m.shape()?, vec![3, 3]);
//! let big = x.gt(5.0);
//! assert_eq!(big.sum(Some(&[0])).compute_f64()?.into_raw_vec_and_offset().0, vec![2.0, 2.0, 2.0]);
//! # Ok(())
//! # }
//! ```

use std::cell::RefCell;
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, anyhow};
use ndarray::ArrayD;
use nums_layout::Block;

use crate::job::Job;

static JOBS: AtomicU64 = AtomicU64::new(0);

struct Inner {
    storage: String,
    endpoint: Option<String>,
    workers: usize,
    memory_mb: u64,
    function: Option<Vec<String>>,
    /// `name = value` lines of the job's `[arrays]`, in definition order.
    defs: Vec<(String, String)>,
}

/// Where arrays are stored and how jobs run; arrays made from it share it.
#[derive(Clone)]
pub struct Session(Rc<RefCell<Inner>>);

/// A lazy array: an expression over other arrays of its session.
#[derive(Clone)]
pub struct Array {
    s: Session,
    name: String,
}

impl Session {
    /// A session on a store URL (`file://...` or `s3://bucket/prefix`) with the local
    /// backend (function processes on this machine), 2 workers of 2048 MB.
    pub fn new(storage: &str) -> anyhow::Result<Session> {
        if !(storage.starts_with("file://") || storage.starts_with("s3://")) {
            return Err(anyhow!(
                "storage {storage:?} is neither a file:// nor an s3:// URL"
            ));
        }
        Ok(Session(Rc::new(RefCell::new(Inner {
            storage: storage.to_string(),
            endpoint: None,
            workers: 2,
            memory_mb: 2048,
            function: None,
            defs: Vec::new(),
        }))))
    }

    /// An S3-compatible endpoint for an `s3://` store.
    pub fn endpoint(self, url: &str) -> Session {
        self.0.borrow_mut().endpoint = Some(url.to_string());
        self
    }

    pub fn workers(self, n: usize) -> Session {
        self.0.borrow_mut().workers = n;
        self
    }

    pub fn memory_mb(self, mb: u64) -> Session {
        self.0.borrow_mut().memory_mb = mb;
        self
    }

    /// The `nums-cloud` binary whose `function` subcommand serves the local backend
    /// (default: `$NUMS_CLOUD_FUNCTION`, or `nums-cloud` next to this program).
    pub fn function_binary(self, path: &str) -> Session {
        self.0.borrow_mut().function = Some(vec![path.to_string(), "function".to_string()]);
        self
    }

    fn def(&self, value: String) -> Array {
        let mut inner = self.0.borrow_mut();
        let name = format!("a{}", inner.defs.len());
        inner.defs.push((name.clone(), value));
        Array {
            s: self.clone(),
            name,
        }
    }

    /// An array from any job-language expression over `args`, which it names `{0}`,
    /// `{1}`, ...:
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-expr");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap()
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let a = s.arange(6.0).reshape(&[2, 3]);
    /// let gram = s.expr("einsum('ij,kj->ik', {0}, {0})", &[&a]);
    /// assert_eq!(gram.compute_f64().unwrap().into_raw_vec_and_offset().0, vec![5.0, 14.0, 14.0, 50.0]);
    /// ```
    pub fn expr(&self, text: &str, args: &[&Array]) -> Array {
        let mut t = text.to_string();
        for (i, a) in args.iter().enumerate() {
            t = t.replace(&format!("{{{i}}}"), &a.name);
        }
        self.def(toml_str(&t))
    }

    fn dims(shape: &[u64]) -> String {
        format!(
            "[{}]",
            shape
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    pub fn zeros(&self, shape: &[u64]) -> Array {
        self.def(format!("{{ zeros = {} }}", Self::dims(shape)))
    }

    pub fn ones(&self, shape: &[u64]) -> Array {
        self.def(format!("{{ ones = {} }}", Self::dims(shape)))
    }

    pub fn full(&self, shape: &[u64], value: f64) -> Array {
        self.def(format!(
            "{{ full = {}, value = {value:?} }}",
            Self::dims(shape)
        ))
    }

    /// `0.0, 1.0, ...` below `stop` (float64).
    pub fn arange(&self, stop: f64) -> Array {
        self.expr(&format!("arange({stop:?})"), &[])
    }

    /// Normal(0, 1) values; deterministic for `seed`, independent of the block shape.
    pub fn random_normal(&self, shape: &[u64], seed: u64) -> Array {
        self.def(format!(
            "{{ random = \"normal\", shape = {}, seed = {seed} }}",
            Self::dims(shape)
        ))
    }

    /// Uniform [0, 1) values; deterministic for `seed`, independent of the block shape.
    pub fn random_uniform(&self, shape: &[u64], seed: u64) -> Array {
        self.def(format!(
            "{{ random = \"uniform\", shape = {}, seed = {seed} }}",
            Self::dims(shape)
        ))
    }

    /// A `.npy`, `.csv` or Zarr v3 array.
    pub fn load(&self, path: &str) -> Array {
        self.def(format!("{{ load = {} }}", toml_str(path)))
    }
}

/// A TOML string literal.
fn toml_str(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

impl Array {
    fn unary(&self, f: &str) -> Array {
        self.s.expr(&format!("{f}({{0}})"), &[self])
    }

    fn binary(&self, op: &str, other: &Array) -> Array {
        self.s
            .expr(&format!("({{0}}) {op} ({{1}})"), &[self, other])
    }

    fn scalar(&self, op: &str, v: f64, left: bool) -> Array {
        if left {
            self.s.expr(&format!("{v:?} {op} ({{0}})"), &[self])
        } else {
            self.s.expr(&format!("({{0}}) {op} {v:?}"), &[self])
        }
    }

    fn axes(f: &str, axes: Option<&[i64]>) -> String {
        match axes {
            None => format!("{f}({{0}})"),
            Some(a) => format!(
                "{f}({{0}}, axis=({},))",
                a.iter().map(i64::to_string).collect::<Vec<_>>().join(", ")
            ),
        }
    }

    /// The same values in blocks of `block` (the explicit re-blocking of the job file).
    pub fn block(&self, block: &[u64]) -> Array {
        self.s.def(format!(
            "{{ expr = {}, block = {} }}",
            toml_str(&self.name),
            Session::dims(block)
        ))
    }

    pub fn matmul(&self, other: &Array) -> Array {
        self.binary("@", other)
    }

    pub fn t(&self) -> Array {
        self.s.expr("({0}).T", &[self])
    }

    pub fn reshape(&self, shape: &[u64]) -> Array {
        self.s.expr(
            &format!(
                "reshape({{0}}, ({},))",
                Session::dims(shape).trim_matches(['[', ']'])
            ),
            &[self],
        )
    }

    pub fn astype(&self, dtype: &str) -> Array {
        self.s
            .expr(&format!("astype({{0}}, {})", toml_str(dtype)), &[self])
    }

    pub fn sum(&self, axes: Option<&[i64]>) -> Array {
        self.s.expr(&Self::axes("sum", axes), &[self])
    }

    pub fn mean(&self, axes: Option<&[i64]>) -> Array {
        self.s.expr(&Self::axes("mean", axes), &[self])
    }

    pub fn max(&self, axes: Option<&[i64]>) -> Array {
        self.s.expr(&Self::axes("max", axes), &[self])
    }

    pub fn min(&self, axes: Option<&[i64]>) -> Array {
        self.s.expr(&Self::axes("min", axes), &[self])
    }

    pub fn exp(&self) -> Array {
        self.unary("exp")
    }

    pub fn log(&self) -> Array {
        self.unary("log")
    }

    pub fn sqrt(&self) -> Array {
        self.unary("sqrt")
    }

    pub fn abs(&self) -> Array {
        self.unary("abs")
    }

    pub fn sigmoid(&self) -> Array {
        self.unary("sigmoid")
    }

    /// `self > v`, a bool array.
    pub fn gt(&self, v: f64) -> Array {
        self.scalar(">", v, false)
    }

    /// `self < v`, a bool array.
    pub fn lt(&self, v: f64) -> Array {
        self.scalar("<", v, false)
    }

    /// The job that computes this array, as job-file text (what `compute` runs).
    pub fn job_text(&self, out: &std::path::Path) -> String {
        let inner = self.s.0.borrow();
        let mut t = format!("[storage]\nurl = {}\n", toml_str(&inner.storage));
        if let Some(e) = &inner.endpoint {
            t += &format!("endpoint = {}\n", toml_str(e));
        }
        t += &format!(
            "[compute]\nworkers = {}\nmemory_mb = {}\n[arrays]\n",
            inner.workers, inner.memory_mb
        );
        for (k, v) in &inner.defs {
            t += &format!("{k} = {v}\n");
        }
        t += &format!(
            "[outputs]\n{} = {}\n",
            self.name,
            toml_str(&out.display().to_string())
        );
        t
    }

    /// The array's shape, from checking its job (nothing runs).
    pub fn shape(&self) -> anyhow::Result<Vec<u64>> {
        let (dir, j) = self.job()?;
        let probes = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(crate::graph::probe(&j))?;
        let g = crate::graph::build(&j, &probes)?;
        let _ = std::fs::remove_dir_all(dir);
        Ok(g.nodes[g.named[&self.name]].meta.shape.clone())
    }

    /// The job that computes this array (its values go to `out.npy` in a new temporary
    /// folder, returned too). Relative paths resolve against the working directory, as
    /// they would for a job file there.
    fn job(&self) -> anyhow::Result<(PathBuf, Job)> {
        let n = JOBS.fetch_add(1, Ordering::Relaxed);
        let id = format!("api-{}-{n}", std::process::id());
        let dir = std::env::temp_dir().join(format!("nums-{id}"));
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let cwd = std::env::current_dir().context("no working directory")?;
        let job = Job::parse(
            &cwd.join(format!("{id}.toml")),
            &self.job_text(&dir.join("out.npy")),
        )?;
        Ok((dir, job))
    }

    /// Runs the job that makes this array and returns its values.
    pub fn compute(&self) -> anyhow::Result<Block> {
        let (dir, job) = self.job()?;
        let function = self.s.0.borrow().function.clone();
        let opts = crate::run::RunOptions {
            keep: false,
            resume: false,
            progress: false,
            function_command: function,
            defaults: Default::default(),
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?;
        let out = rt.block_on(async {
            let storage = job.storage.clone();
            let report = crate::run::run_job(job, &opts).await?;
            // Outputs stay in the store after a job; the library keeps only the values.
            let store = nums_layout::Store::open(&storage)?;
            store.delete_prefix(&report.job).await?;
            anyhow::Ok(())
        });
        let block =
            out.and_then(|_| crate::npy::read(&dir.join("out.npy")).map_err(|e| anyhow!(e)));
        let _ = std::fs::remove_dir_all(&dir);
        block
    }

    /// [`Array::compute`] as float64 values.
    pub fn compute_f64(&self) -> anyhow::Result<ArrayD<f64>> {
        Ok(self.compute()?.to_f64().into_owned())
    }
}

macro_rules! ops {
    ($($tr:ident $f:ident $sym:literal),*) => {$(
        impl std::ops::$tr<&Array> for &Array {
            type Output = Array;
            fn $f(self, o: &Array) -> Array {
                self.binary($sym, o)
            }
        }
        impl std::ops::$tr<f64> for &Array {
            type Output = Array;
            fn $f(self, v: f64) -> Array {
                self.scalar($sym, v, false)
            }
        }
        impl std::ops::$tr<Array> for Array {
            type Output = Array;
            fn $f(self, o: Array) -> Array {
                self.binary($sym, &o)
            }
        }
        impl std::ops::$tr<f64> for Array {
            type Output = Array;
            fn $f(self, v: f64) -> Array {
                self.scalar($sym, v, false)
            }
        }
        impl std::ops::$tr<&Array> for f64 {
            type Output = Array;
            fn $f(self, a: &Array) -> Array {
                a.scalar($sym, self, true)
            }
        }
    )*};
}
ops!(Add add "+", Sub sub "-", Mul mul "*", Div div "/");

impl std::ops::Neg for &Array {
    type Output = Array;
    fn neg(self) -> Array {
        self.s.expr("-({0})", &[self])
    }
}
