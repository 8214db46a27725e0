//! [`Array`]: a lazy array of a session: how it is made (an expression over other arrays,
//! a creation, an input), its operations and operators, and computing it.

use std::sync::{Arc, OnceLock};

use ndarray::ArrayD;
use nums_layout::{Block, DType};

use super::job::{dims, expr_f64, substitute, toml_str};
use super::{Session, blocking};
use crate::error::Error;

/// How an array is made.
pub(crate) enum Def {
    /// A job-language expression; `{i}` stands for the i-th argument.
    Expr(String),
    /// A job-file array table (`{ zeros = [2, 3] }`), `{i}` standing for argument names,
    /// and how messages describe it (`{i}` for the arguments' descriptions).
    Table { toml: String, label: String },
    /// Values in memory (`Session::from_ndarray`), written to the store before the first
    /// job that reads them.
    Data(Block),
}

impl Def {
    /// The job-file value that defines the array (`args` named as the job names them).
    pub(crate) fn job_value(&self, args: &[Array]) -> String {
        let name = |k: usize, wrapped: bool| {
            let n = super::job::job_name(&args[k].node);
            if wrapped { format!("({n})") } else { n }
        };
        match self {
            // Placeholders were checked when the array was defined.
            Def::Expr(t) => toml_str(&substitute(t, args.len(), name).unwrap_or_default()),
            Def::Table { toml, .. } => substitute(toml, args.len(), name).unwrap_or_default(),
            Def::Data(_) => unreachable!("in-memory arrays are stored before a job is made"),
        }
    }
}

/// One array of a session: immutable once made, except for its name (given once) and its
/// place in the store (once persisted or written).
pub(crate) struct Node {
    pub id: u64,
    pub session: Session,
    pub def: Def,
    pub args: Vec<Array>,
    pub name: OnceLock<String>,
    /// Where the array is in the store (a path or `s3://` URL a job can `load`), once it is.
    pub stored: tokio::sync::OnceCell<String>,
}

/// A lazy array: an expression over other arrays of its [`Session`]. Cloning is cheap
/// (a shared handle); arrays are `Send + Sync`.
///
/// Operations only record what to compute. [`Array::compute`] (or
/// [`Array::compute_blocking`]) runs the job that makes the array and returns its values.
/// Arithmetic works with owned and borrowed arrays and with `f64` on either side
/// (NumPy's broadcasting and dtype rules apply):
///
/// ```
/// # use nums_cloud::api::Session;
/// # fn main() -> Result<(), nums_cloud::Error> {
/// # let dir = std::env::temp_dir().join("nums-cloud-doc-ops");
/// # let s = Session::new(&format!("file://{}", dir.display()))?
/// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
/// let a = s.arange(4.0); // [0, 1, 2, 3]
/// let b = s.ones(&[4]);
/// let c = &a + &b;                  // borrowed + borrowed
/// let d = 2.0 * &c - a.clone() / 2.0; // f64 on either side, owned and borrowed mixed
/// let e = -(d + f64::NAN * s.zeros(&[4]).gt(1.0)); // NaN * false is NaN, as in NumPy
/// let v = e.compute_f64_blocking()?;
/// assert!(v.iter().all(|x| x.is_nan()));
/// let v = (2.0 * &c - a / 2.0).compute_f64_blocking()?;
/// assert_eq!(v.into_raw_vec_and_offset().0, vec![2.0, 3.5, 5.0, 6.5]);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Array {
    pub(crate) node: Arc<Node>,
}

impl std::fmt::Debug for Array {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Array({})", self.label())
    }
}

/// The other operand of a comparison or of [`Array::maximum`]-like functions: an array
/// or a number (`x.gt(0.5)`, `x.gt(&y)`).
#[derive(Clone, Debug)]
pub enum Operand {
    /// An array of the same session.
    Array(Array),
    /// A number (NaN and infinities too).
    Scalar(f64),
}

impl From<f64> for Operand {
    fn from(v: f64) -> Operand {
        Operand::Scalar(v)
    }
}

impl From<&Array> for Operand {
    fn from(a: &Array) -> Operand {
        Operand::Array(a.clone())
    }
}

impl From<Array> for Operand {
    fn from(a: Array) -> Operand {
        Operand::Array(a)
    }
}

impl Array {
    pub(super) fn session(&self) -> &Session {
        &self.node.session
    }

    /// A job-language expression over this array (`{0}`) and `args` (`{1}`, ...); the
    /// templates are the API's own, so they are known to be well formed.
    pub(super) fn op(&self, template: &str, args: &[&Array]) -> Array {
        let mut all = vec![self.clone()];
        all.extend(args.iter().map(|a| (*a).clone()));
        self.session().def(Def::Expr(template.into()), all)
    }

    fn with(&self, template: &str, other: Operand) -> Array {
        match other {
            Operand::Array(o) => self.op(&template.replace("{b}", "({1})"), &[&o]),
            Operand::Scalar(v) => self.op(&template.replace("{b}", &expr_f64(v)), &[]),
        }
    }

    fn scalar_left(&self, op: &str, v: f64) -> Array {
        self.op(&format!("{} {op} ({{0}})", expr_f64(v)), &[])
    }

    fn axes(&self, f: &str, axes: Option<&[i64]>) -> Array {
        match axes {
            None => self.op(&format!("{f}({{0}})"), &[]),
            Some(a) => {
                let items: Vec<String> = a.iter().map(i64::to_string).collect();
                self.op(&format!("{f}({{0}}, axis=({},))", items.join(", ")), &[])
            }
        }
    }

    /// Gives the array a name: messages and errors name it so, and jobs define it under
    /// it. A name is an identifier (letters, digits, `_`, not starting with a digit), not
    /// of the form `_7` (the session's own for unnamed arrays), and unique in its session.
    ///
    /// ```
    /// # use nums_cloud::{Error, api::Session};
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-named");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap();
    /// let x = s.ones(&[3]).named("X").unwrap();
    /// assert_eq!((&x * 2.0).label(), "X * 2.0");
    /// assert!(matches!(s.zeros(&[3]).named("X"), Err(Error::Job { .. }))); // taken
    /// assert!(matches!(s.zeros(&[3]).named("2x"), Err(Error::Job { .. }))); // not an identifier
    /// assert!(matches!(s.zeros(&[3]).named("True"), Err(Error::Job { .. }))); // reserved
    /// ```
    pub fn named(self, name: &str) -> Result<Array, Error> {
        let refuse = |why: String| Error::Job {
            array: Some(self.label()),
            message: format!("array `{}`: cannot be named {name:?}: {why}", self.label()),
        };
        if !crate::job::is_identifier(name) || super::job::is_internal_name(name) {
            return Err(refuse(
                "a name is letters, digits and '_', not starting with a digit, and not of the form _7".into(),
            ));
        }
        if let Some(why) = crate::graph::reserved_name(name) {
            return Err(refuse(format!("it is {why}")));
        }
        if let Some(old) = self.node.name.get() {
            return Err(refuse(format!("it is named {old} already")));
        }
        if !self.session().claim_name(name) {
            return Err(refuse(format!(
                "another array of this session is named {name}"
            )));
        }
        self.node
            .name
            .set(name.to_string())
            .map_err(|_| refuse("it was named meanwhile".into()))?;
        Ok(self)
    }

    /// How messages name this array: its name, or the expression that made it.
    pub fn label(&self) -> String {
        super::job::display(&self.node)
    }

    /// The same values in blocks of `block` (the explicit re-blocking of the job file's
    /// `block` key): blocks are the unit of work and of storage.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-block");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap()
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(12.0).reshape(&[4, 3]).block(&[3, 2]); // ragged edge blocks
    /// assert_eq!(x.sum(None).compute_f64_blocking().unwrap().sum(), 66.0);
    /// ```
    pub fn block(&self, block: &[u64]) -> Array {
        self.session().def(
            Def::Table {
                toml: format!("{{ expr = \"{{0}}\", block = {} }}", dims(block)),
                label: format!("{{0}}.block({})", dims(block)),
            },
            vec![self.clone()],
        )
    }

    /// Matrix product (`@`): 1-D, 2-D and stacks of equal batch shape, as `np.matmul`.
    pub fn matmul(&self, other: &Array) -> Array {
        self.op("({0}) @ ({1})", &[other])
    }

    /// `np.linalg.qr` (reduced) of a matrix with rows >= columns, by TSQR: `(Q, R)`. Q is
    /// computed only by the jobs that use it; both share one factorization in a job.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-qr");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let a = s.random_normal(&[50, 3], 1).block(&[7, 3]);
    /// let (q, r) = a.qr();
    /// let err = (q.matmul(&r) - &a).abs().max(None).compute_f64_blocking()?;
    /// assert!(err.sum() < 1e-12);
    /// let x = nums_cloud::api::linalg::lstsq(&a, &s.ones(&[50]));
    /// assert_eq!(x.compute_f64_blocking()?.shape(), &[3]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn qr(&self) -> (Array, Array) {
        (
            self.op("np.linalg.qr({0}).Q", &[]),
            self.op("np.linalg.qr({0}).R", &[]),
        )
    }

    /// `np.linalg.svd(a, full_matrices=False)` of a matrix (TSQR, then the SVD of R):
    /// `(U, S, Vh)`.
    pub fn svd(&self) -> (Array, Array, Array) {
        let part = |p: &str| {
            self.op(
                &format!("np.linalg.svd({{0}}, full_matrices=False).{p}"),
                &[],
            )
        };
        (part("U"), part("S"), part("Vh"))
    }

    /// `np.linalg.svdvals`: the singular values, largest first.
    pub fn svdvals(&self) -> Array {
        self.op("np.linalg.svdvals({0})", &[])
    }

    /// `np.linalg.norm` with no `ord` or `axis`: the 2-norm of all elements (Frobenius).
    pub fn norm(&self) -> Array {
        self.op("np.linalg.norm({0})", &[])
    }

    /// `np.linalg.cholesky`: L, lower triangular, with L L^T = self.
    pub fn cholesky(&self) -> Array {
        self.op("np.linalg.cholesky({0})", &[])
    }

    /// `np.linalg.inv`.
    pub fn inv(&self) -> Array {
        self.op("np.linalg.inv({0})", &[])
    }

    /// `np.linalg.det`.
    pub fn det(&self) -> Array {
        self.op("np.linalg.det({0})", &[])
    }

    /// `np.linalg.solve(self, b)`.
    pub fn solve(&self, b: &Array) -> Array {
        self.op("np.linalg.solve({0}, {1})", &[b])
    }

    /// `np.linalg.lstsq(self, b)[0]`: the least-squares solution (TSQR of `[self | b]`).
    pub fn lstsq(&self, b: &Array) -> Array {
        self.op("np.linalg.lstsq({0}, {1})[0]", &[b])
    }

    /// The transpose (`.T`): axes reversed.
    pub fn t(&self) -> Array {
        self.op("({0}).T", &[])
    }

    /// The same values in `shape` (one size may be `-1`: inferred), as `np.reshape`.
    pub fn reshape(&self, shape: &[i64]) -> Array {
        let items: Vec<String> = shape.iter().map(i64::to_string).collect();
        self.op(&format!("reshape({{0}}, ({},))", items.join(", ")), &[])
    }

    /// The values converted to `dtype`, as NumPy's `astype`.
    pub fn astype(&self, dtype: DType) -> Array {
        self.op(&format!("astype({{0}}, {})", toml_str(dtype.name())), &[])
    }

    /// Sum over `axes` (all of them for `None`), as `np.sum`.
    pub fn sum(&self, axes: Option<&[i64]>) -> Array {
        self.axes("sum", axes)
    }

    /// Mean over `axes` (all of them for `None`), as `np.mean`.
    pub fn mean(&self, axes: Option<&[i64]>) -> Array {
        self.axes("mean", axes)
    }

    /// Maximum over `axes` (all of them for `None`), as `np.max`.
    pub fn max(&self, axes: Option<&[i64]>) -> Array {
        self.axes("max", axes)
    }

    /// Minimum over `axes` (all of them for `None`), as `np.min`.
    pub fn min(&self, axes: Option<&[i64]>) -> Array {
        self.axes("min", axes)
    }

    /// `e^x`, element by element.
    pub fn exp(&self) -> Array {
        self.op("exp({0})", &[])
    }

    /// Natural logarithm, element by element.
    pub fn log(&self) -> Array {
        self.op("log({0})", &[])
    }

    /// Square root, element by element.
    pub fn sqrt(&self) -> Array {
        self.op("sqrt({0})", &[])
    }

    /// Absolute value, element by element.
    pub fn abs(&self) -> Array {
        self.op("abs({0})", &[])
    }

    /// The real part, element by element (`x.real`; a real array's own values).
    pub fn real(&self) -> Array {
        self.op("real({0})", &[])
    }

    /// The imaginary part, element by element (`x.imag`; zeros for a real array).
    pub fn imag(&self) -> Array {
        self.op("imag({0})", &[])
    }

    /// The complex conjugate, element by element (`np.conj`).
    pub fn conj(&self) -> Array {
        self.op("conj({0})", &[])
    }

    /// The logistic function `1 / (1 + e^-x)` (`scipy.special.expit`).
    pub fn sigmoid(&self) -> Array {
        self.op("sigmoid({0})", &[])
    }

    /// `self ** other`, element by element.
    pub fn pow(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) ** {b}", other.into())
    }

    /// Element-wise maximum (NaN propagates), as `np.maximum`.
    pub fn maximum(&self, other: impl Into<Operand>) -> Array {
        self.with("maximum({0}, {b})", other.into())
    }

    /// Element-wise minimum (NaN propagates), as `np.minimum`.
    pub fn minimum(&self, other: impl Into<Operand>) -> Array {
        self.with("minimum({0}, {b})", other.into())
    }

    /// `self > other`, a bool array.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-gt");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap()
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(6.0);
    /// let n = x.gt(2.0).sum(None).compute_blocking().unwrap(); // sum of bools is int64
    /// assert_eq!(n, nums_cloud::Block::I64(ndarray::arr0(3).into_dyn()));
    /// ```
    pub fn gt(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) > {b}", other.into())
    }

    /// `self >= other`, a bool array.
    pub fn ge(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) >= {b}", other.into())
    }

    /// `self < other`, a bool array.
    pub fn lt(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) < {b}", other.into())
    }

    /// `self <= other`, a bool array.
    pub fn le(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) <= {b}", other.into())
    }

    /// `self == other`, a bool array (`eq` is `PartialEq`'s, so this is `equal`).
    pub fn equal(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) == {b}", other.into())
    }

    /// `self != other`, a bool array.
    pub fn not_equal(&self, other: impl Into<Operand>) -> Array {
        self.with("({0}) != {b}", other.into())
    }

    /// Runs the job that makes this array and returns its values. The job is checked
    /// whole first (nothing runs if it is refused); it runs on the session's store and
    /// backend and leaves nothing in the store.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-compute");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.random_normal(&[1000, 4], 7);
    /// let m = x.mean(Some(&[0])).compute().await?; // in async code
    /// assert_eq!(m.shape(), &[4]);
    /// // Computes are futures like any other: two at once.
    /// let (hi, lo) = (x.max(None), x.min(None));
    /// let (a, b) = tokio::join!(hi.compute(), lo.compute());
    /// assert!(a?.to_f64().sum() > b?.to_f64().sum());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn compute(&self) -> Result<Block, Error> {
        let mut v = self.session().compute_many(&[self]).await?;
        Ok(v.pop().expect("one output"))
    }

    /// [`Array::compute`] for code that is not async. It works everywhere: outside a
    /// tokio runtime it runs on a runtime of its own; inside a multi-thread runtime it
    /// runs on it (with `tokio::task::block_in_place`); inside a current-thread runtime
    /// (`#[tokio::test]`'s default) it runs on a thread of its own while that runtime's
    /// other tasks wait, as they would for any blocking call: prefer `.await` there.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-blocking");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let total = s.ones(&[10, 10]).sum(None).compute_blocking()?;
    /// assert_eq!(total.to_f64().sum(), 100.0);
    /// # Ok(())
    /// # }
    /// ```
    pub fn compute_blocking(&self) -> Result<Block, Error> {
        blocking::block_on(self.compute())?
    }

    /// [`Array::compute`] as float64 values (bools as 0 and 1).
    pub async fn compute_f64(&self) -> Result<ArrayD<f64>, Error> {
        Ok(self.compute().await?.to_f64().into_owned())
    }

    /// [`Array::compute_blocking`] as float64 values (bools as 0 and 1).
    pub fn compute_f64_blocking(&self) -> Result<ArrayD<f64>, Error> {
        Ok(self.compute_blocking()?.to_f64().into_owned())
    }

    /// The array's shape, from checking its job (nothing runs). An array indexed by a
    /// boolean mask has the shape it would have if the mask selected everything (its
    /// largest), until it is computed.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-shape");
    /// # let s = Session::new(&format!("file://{}", dir.display())).unwrap();
    /// let x = s.zeros(&[4, 3]);
    /// assert_eq!(x.t().matmul(&x).shape_blocking().unwrap(), vec![3, 3]);
    /// assert_eq!(x.gt(0.0).dtype_blocking().unwrap(), nums_cloud::DType::Bool);
    /// ```
    pub async fn shape(&self) -> Result<Vec<u64>, Error> {
        Ok(self.session().meta(self).await?.shape)
    }

    /// [`Array::shape`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn shape_blocking(&self) -> Result<Vec<u64>, Error> {
        blocking::block_on(self.shape())?
    }

    /// The array's dtype, from checking its job (nothing runs).
    pub async fn dtype(&self) -> Result<DType, Error> {
        Ok(self.session().meta(self).await?.dtype)
    }

    /// [`Array::dtype`] for code that is not async (see [`Array::compute_blocking`]).
    pub fn dtype_blocking(&self) -> Result<DType, Error> {
        blocking::block_on(self.dtype())?
    }
}

/// `+ - * / %` between every owned/borrowed pair of arrays and with `f64` on either side.
macro_rules! binary_ops {
    ($($tr:ident $f:ident $sym:literal),*) => {$(
        impl std::ops::$tr<&Array> for &Array {
            type Output = Array;
            fn $f(self, o: &Array) -> Array {
                self.op(concat!("({0}) ", $sym, " ({1})"), &[o])
            }
        }
        impl std::ops::$tr<Array> for &Array {
            type Output = Array;
            fn $f(self, o: Array) -> Array {
                std::ops::$tr::$f(self, &o)
            }
        }
        impl std::ops::$tr<&Array> for Array {
            type Output = Array;
            fn $f(self, o: &Array) -> Array {
                std::ops::$tr::$f(&self, o)
            }
        }
        impl std::ops::$tr<Array> for Array {
            type Output = Array;
            fn $f(self, o: Array) -> Array {
                std::ops::$tr::$f(&self, &o)
            }
        }
        impl std::ops::$tr<f64> for &Array {
            type Output = Array;
            fn $f(self, v: f64) -> Array {
                self.op(&format!(concat!("({{0}}) ", $sym, " {}"), expr_f64(v)), &[])
            }
        }
        impl std::ops::$tr<f64> for Array {
            type Output = Array;
            fn $f(self, v: f64) -> Array {
                std::ops::$tr::$f(&self, v)
            }
        }
        impl std::ops::$tr<&Array> for f64 {
            type Output = Array;
            fn $f(self, a: &Array) -> Array {
                a.scalar_left($sym, self)
            }
        }
        impl std::ops::$tr<Array> for f64 {
            type Output = Array;
            fn $f(self, a: Array) -> Array {
                a.scalar_left($sym, self)
            }
        }
    )*};
}
binary_ops!(Add add "+", Sub sub "-", Mul mul "*", Div div "/", Rem rem "%");

impl std::ops::Neg for &Array {
    type Output = Array;
    fn neg(self) -> Array {
        self.op("-({0})", &[])
    }
}

impl std::ops::Neg for Array {
    type Output = Array;
    fn neg(self) -> Array {
        -&self
    }
}
