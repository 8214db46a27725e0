//! [`Array`]'s operations: each adds nodes at once
//! (an error is the operation's, kept in the array and returned by [`Array::check`] and
//! by every use of it); computing it runs what it needs and hands the values back.

use ndarray::{ArrayD, SliceInfoElem};
use nums_layout::{Block, DType};

use super::build::{Arg, Operands, label};
use super::handle::Array;
use super::{Element, Session, blocking};
use crate::error::Error;
use crate::expr::{Expr, Op, UnOp};

/// The other side of a binary operation: an array or a number.
#[derive(Clone, Debug)]
pub enum Operand {
    /// An array of the same session.
    Array(Array),
    /// A Python float (NumPy 2 keeps a float32 array float32 with it).
    F64(f64),
    /// A Python int (keeps an int64 array int64).
    I64(i64),
    /// A Python bool.
    Bool(bool),
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

impl From<f64> for Operand {
    fn from(v: f64) -> Operand {
        Operand::F64(v)
    }
}

impl From<i64> for Operand {
    fn from(v: i64) -> Operand {
        Operand::I64(v)
    }
}

impl From<bool> for Operand {
    fn from(v: bool) -> Operand {
        Operand::Bool(v)
    }
}

impl From<Operand> for Arg {
    fn from(o: Operand) -> Arg {
        match o {
            Operand::Array(a) => Arg::Array(a),
            Operand::F64(v) => Arg::Float(v),
            Operand::I64(v) => Arg::Int(v),
            Operand::Bool(v) => Arg::Bool(v),
        }
    }
}

/// The binary operator a Python symbol names.
fn binary_op(symbol: &str) -> Option<Op> {
    Some(match symbol {
        "+" => Op::Add,
        "-" => Op::Sub,
        "*" => Op::Mul,
        "/" => Op::Div,
        "//" => Op::FloorDiv,
        "%" => Op::Mod,
        "**" => Op::Pow,
        "@" => Op::MatMul,
        "<" => Op::Lt,
        "<=" => Op::Le,
        ">" => Op::Gt,
        ">=" => Op::Ge,
        "==" => Op::Eq,
        "!=" => Op::Ne,
        "&" => Op::And,
        "|" => Op::Or,
        "^" => Op::Xor,
        "<<" => Op::Shl,
        ">>" => Op::Shr,
        _ => return None,
    })
}

fn axes_arg(axes: Option<&[usize]>) -> Arg {
    match axes {
        None => Arg::None,
        Some(a) => Arg::Tuple(a.iter().map(|&x| Arg::Int(x as i64)).collect()),
    }
}

impl Array {
    /// The array `e` (operands `ops`) makes, or the first error among its operands and
    /// its own.
    pub(crate) fn from_eval(s: &Session, e: &Expr, ops: &Operands, label: String) -> Array {
        if let Some(err) = ops.0.iter().find_map(|a| a.h.as_ref().err()) {
            return Array {
                s: s.clone(),
                h: Err(err.clone()),
            };
        }
        let id = s.eval(e, ops, &label).and_then(|v| match v {
            crate::graph::Value::Array(id) => Ok(id),
            other => Err(Error::Job {
                raises: Default::default(),
                array: Some(label.clone()),
                message: format!("`{label}` is not an array but {other:?}"),
            }),
        });
        Array::made(s, id, label)
    }

    /// Gives the array a name for messages (`X` instead of the expression that made it).
    /// A name is an identifier, given once, one array per name in a session's messages.
    ///
    /// ```
    /// # use nums_cloud::{Error, api::Session};
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-named").unwrap();
    /// let x = s.ones(&[3]).named("X").unwrap();
    /// assert_eq!((&x * 2.0).label(), "X * 2.0");
    /// assert!(matches!(s.zeros(&[3]).named("2x"), Err(Error::Job { .. }))); // not an identifier
    /// assert!(matches!(s.zeros(&[3]).named("True"), Err(Error::Job { .. }))); // reserved
    /// assert!(matches!(x.clone().named("Y"), Err(Error::Job { .. }))); // named already
    /// ```
    pub fn named(self, name: &str) -> Result<Array, Error> {
        let refuse = |why: String| Error::Job {
            raises: Default::default(),
            array: Some(self.label()),
            message: format!("array `{}`: cannot be named {name:?}: {why}", self.label()),
        };
        let h = self.h.as_ref().map_err(Clone::clone)?;
        if !crate::job::is_identifier(name) {
            return Err(refuse(
                "a name is letters, digits and '_', not starting with a digit".into(),
            ));
        }
        if let Some(why) = crate::graph::reserved_name(name) {
            return Err(refuse(format!("it is {why}")));
        }
        if let Some(old) = h.name.get() {
            return Err(refuse(format!("it is named {old} already")));
        }
        h.name
            .set(name.to_string())
            .map_err(|_| refuse("it is named already".into()))?;
        Ok(self)
    }

    /// Shape, from the graph (nothing runs).
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-shape").unwrap();
    /// let x = s.zeros(&[4, 3]);
    /// assert_eq!(x.t().matmul(&x).shape().unwrap(), vec![3, 3]);
    /// assert_eq!(x.gt(0.0).dtype().unwrap(), nums_cloud::DType::Bool);
    /// ```
    pub fn shape(&self) -> Result<Vec<usize>, Error> {
        let id = self.id().map_err(Clone::clone)?;
        Ok(self.s.meta(id).shape.iter().map(|&d| d as usize).collect())
    }

    /// Its dtype, from the graph (nothing runs).
    pub fn dtype(&self) -> Result<DType, Error> {
        let id = self.id().map_err(Clone::clone)?;
        Ok(self.s.meta(id).dtype)
    }

    /// Its block shape.
    pub fn blocks(&self) -> Result<Vec<usize>, Error> {
        let id = self.id().map_err(Clone::clone)?;
        Ok(self.s.meta(id).block.iter().map(|&d| d as usize).collect())
    }

    /// Its number of dimensions.
    pub fn ndim(&self) -> Result<usize, Error> {
        Ok(self.shape()?.len())
    }

    /// A function of the expression language with this array first (NumPy's method form:
    /// `x.f(args)` is `f(x, args)`).
    pub fn call(&self, f: &str, args: &[Arg], kwargs: &[(&str, Arg)]) -> Array {
        let mut all = vec![Arg::Array(self.clone())];
        all.extend_from_slice(args);
        self.s.call_array(f, &all, kwargs)
    }

    fn expr(&self, build: impl FnOnce(&mut Operands) -> Expr) -> Array {
        let mut ops = Operands::default();
        let e = build(&mut ops);
        let l = label(&e, &ops.0);
        Array::from_eval(&self.s, &e, &ops, l)
    }

    fn binary(&self, op: Op, other: Arg) -> Array {
        self.expr(|o| o.binary(op, &Arg::Array(self.clone()), &other))
    }

    /// The same values in blocks of `block` (ragged at the ends).
    pub fn block(&self, block: &[usize]) -> Array {
        let Ok(id) = self.id() else {
            return self.clone();
        };
        let label = format!("{}.block({block:?})", self.label());
        let r = self
            .s
            .graph()
            .rechunk(id, super::dims(block))
            .map_err(|message| Error::Job {
                raises: Default::default(),
                array: Some(label.clone()),
                message: format!("`{label}`: {message}"),
            });
        Array::made(&self.s, r, label)
    }

    /// A binary operator by its Python symbol (`+ - * / // % ** @ < <= > >= == != & | ^`),
    /// `self` on the left: what Python's `x + other` is. An unknown symbol is the
    /// array's error.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-op").unwrap();
    /// let x = s.arange(4.0).named("x").unwrap();
    /// assert_eq!(x.op("//", 2).label(), "x // 2");
    /// assert_eq!(x.rop("-", 1.0).label(), "1.0 - x"); // Python's __rsub__
    /// assert_eq!(x.op("<=", &x).dtype().unwrap(), nums_cloud::DType::Bool);
    /// assert!(x.op("<>", 1).check().is_err());
    /// ```
    pub fn op(&self, symbol: &str, other: impl Into<Arg>) -> Array {
        self.op_sided(symbol, other.into(), false)
    }

    /// A binary operator by its Python symbol with `self` on the right: what Python's
    /// reflected `other + x` (`__radd__`) is.
    pub fn rop(&self, symbol: &str, other: impl Into<Arg>) -> Array {
        self.op_sided(symbol, other.into(), true)
    }

    fn op_sided(&self, symbol: &str, other: Arg, reflected: bool) -> Array {
        let Some(op) = binary_op(symbol) else {
            let label = format!("{} {symbol} ...", self.label());
            return Array::made(
                &self.s,
                Err(Error::Job {
                    raises: Default::default(),
                    array: Some(label.clone()),
                    message: format!("`{label}`: {symbol:?} is not an operator"),
                }),
                label,
            );
        };
        let me = Arg::Array(self.clone());
        let (a, b) = if reflected {
            (&other, &me)
        } else {
            (&me, &other)
        };
        self.expr(|o| o.binary(op, a, b))
    }

    /// A unary operator by its Python symbol: `-`, `+` or `~`.
    pub fn unary(&self, symbol: &str) -> Array {
        let op = match symbol {
            "-" => UnOp::Neg,
            "+" => UnOp::Pos,
            "~" => UnOp::Invert,
            _ => return self.op_sided(symbol, Arg::None, false),
        };
        self.expr(|o| o.unary(op, &Arg::Array(self.clone())))
    }

    /// Its number of elements (the product of its shape).
    pub fn size(&self) -> Result<usize, Error> {
        Ok(self.shape()?.iter().product())
    }

    /// The matrix product (`@`), with NumPy's rules for 1-D and stacked operands.
    pub fn matmul(&self, other: &Array) -> Array {
        self.binary(Op::MatMul, Arg::Array(other.clone()))
    }

    /// The transpose (`.T`: axes reversed).
    pub fn t(&self) -> Array {
        self.expr(|o| o.attr(self, "T"))
    }

    /// Axes permuted: output axis i is axis `axes[i]`.
    pub fn transpose(&self, axes: &[usize]) -> Array {
        self.call("transpose", &[axes_arg(Some(axes))], &[])
    }

    /// The same elements in C order under `shape`.
    pub fn reshape(&self, shape: &[usize]) -> Array {
        self.call("reshape", &[Arg::from(shape)], &[])
    }

    /// The values as `dtype` (NumPy's `astype`).
    pub fn astype(&self, dtype: DType) -> Array {
        self.call("astype", &[Arg::Str(dtype.to_string())], &[])
    }

    /// Indexing as NumPy's `x[items]`: integers, slices, `None` (a new axis), `...`, and
    /// integer arrays (a boolean mask: [`Array::select`]).
    ///
    /// ```
    /// # use nums_cloud::api::{Arg, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-index")?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(12.0).reshape(&[3, 4]);
    /// let col = x.index(&[Arg::Slice(None, None, None), Arg::Int(-1)]); // x[:, -1]
    /// assert_eq!(col.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![3.0, 7.0, 11.0]);
    /// let corner = x.slice(ndarray::s![1.., ..2]); // x[1:, :2], with ndarray's s!
    /// assert_eq!(corner.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![4.0, 5.0, 8.0, 9.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn index(&self, items: &[Arg]) -> Array {
        self.expr(|o| o.index(self, items))
    }

    /// Slicing with ndarray's `s![]` (steps must be positive, as NumPy's slices of a
    /// view are not: a negative step reverses as NumPy's `::-1` does).
    pub fn slice(&self, info: impl AsRef<[SliceInfoElem]>) -> Array {
        let items: Vec<Arg> = info
            .as_ref()
            .iter()
            .map(|e| match *e {
                SliceInfoElem::Index(i) => Arg::Int(i as i64),
                SliceInfoElem::NewAxis => Arg::None,
                SliceInfoElem::Slice { start, end, step } => Arg::Slice(
                    (start != 0).then_some(start as i64),
                    end.map(|e| e as i64),
                    (step != 1).then_some(step as i64),
                ),
            })
            .collect();
        self.index(&items)
    }

    /// NumPy's `x[index]` with an array whose values decide the shape: a bool mask of x's
    /// first axes (`x[x > 0]`: those axes become one of the selected elements, C order),
    /// or an integer array (positions along the first axis; NumPy's result shape,
    /// `index.shape + x.shape[1..]`). Any length: what is computed first is a count per
    /// block (how many a mask's blocks select, how many indices fall in each block of x),
    /// never the positions.
    pub async fn select(&self, index: &Array) -> Result<Array, Error> {
        index.check()?;
        self.check()?;
        let (dtype, shape) = (index.dtype()?, index.shape()?);
        let label = index.label();
        let fail = |message: String| Error::Job {
            raises: Default::default(),
            array: Some(label.clone()),
            message,
        };
        if dtype != DType::Bool && !dtype.is_int() {
            return Err(fail(format!(
                "`{label}` is {dtype}: an index is a bool mask or an integer array"
            )));
        }
        let mine = self.shape()?;
        if dtype == DType::Bool
            && (shape.is_empty() || shape.len() > mine.len() || mine[..shape.len()] != shape[..])
        {
            return Err(fail(format!(
                "the mask `{label}` of shape {shape:?} does not match the first axes of {mine:?}"
            )));
        }
        let a = self.index(&[Arg::Array(index.clone())]);
        a.check()?;
        Ok(a)
    }

    /// Indexing as [`Array::index`], where items may also be 1-D boolean masks (NumPy's
    /// `x[:, mask]`, each selecting along its axis), of any length.
    ///
    /// ```
    /// # use nums_cloud::api::{Arg, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-masked")?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(12.0).reshape(&[3, 4]);
    /// let w = s.arange(4.0);
    /// let cols = x.index_masked_blocking(&[Arg::Slice(None, None, None), w.gt(1.0).into()])?; // x[:, w > 1]
    /// assert_eq!(cols.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![2.0, 3.0, 6.0, 7.0, 10.0, 11.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn index_masked(&self, items: &[Arg]) -> Result<Array, Error> {
        self.check()?;
        let a = self.index(items);
        a.check()?;
        Ok(a)
    }

    /// [`Array::index_masked`] for code that is not async.
    pub fn index_masked_blocking(&self, items: &[Arg]) -> Result<Array, Error> {
        blocking::block_on(self.index_masked(items))?
    }

    /// NumPy's `x[index] = value` as a new array version (JAX's `x.at[index].set(value)`,
    /// the job language's form): `index` as [`Array::index`] takes it (integers, slices,
    /// `None`, `...`, one integer list) or one bool mask; `value` broadcasts to what the
    /// index selects and is cast to x's dtype. x is unchanged; the blocks the index does
    /// not touch are x's own, read in place by what is computed from the new version.
    ///
    /// ```
    /// # use nums_cloud::api::{Arg, Session};
    /// # fn main() -> Result<(), nums_cloud::Error> {
    /// # let s = Session::new("file:///tmp/nums-cloud-doc-set")?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.arange(6.0).reshape(&[2, 3]);
    /// let y = x.set(&[Arg::Slice(None, None, None), Arg::Int(0)], -1.0); // y = x.copy(); y[:, 0] = -1
    /// assert_eq!(y.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![-1.0, 1.0, 2.0, -1.0, 4.0, 5.0]);
    /// let z = y.set(&[Arg::Array(y.gt(3.0))], 0.0); // z[z > 3] = 0
    /// assert_eq!(z.compute_blocking::<f64>()?.into_raw_vec_and_offset().0, vec![-1.0, 1.0, 2.0, -1.0, 0.0, 0.0]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn set(&self, index: &[Arg], value: impl Into<Operand>) -> Array {
        self.set_arg(index, value.into().into())
    }

    /// [`Array::set`] of any value a call takes: a NumPy scalar (converted as NumPy's
    /// `x[index] = v` converts it), a complex number, an array.
    pub fn set_arg(&self, index: &[Arg], value: Arg) -> Array {
        self.expr(|o| o.at_set(self, index, &value))
    }

    /// Reductions over `axes` (all axes when `None`), NumPy's dtypes.
    pub fn sum(&self, axes: Option<&[usize]>) -> Array {
        self.call("sum", &[], &[("axis", axes_arg(axes))])
    }

    /// The mean over `axes` (all when `None`).
    pub fn mean(&self, axes: Option<&[usize]>) -> Array {
        self.call("mean", &[], &[("axis", axes_arg(axes))])
    }

    /// The largest element over `axes` (all when `None`).
    pub fn max(&self, axes: Option<&[usize]>) -> Array {
        self.call("max", &[], &[("axis", axes_arg(axes))])
    }

    /// The smallest element over `axes` (all when `None`).
    pub fn min(&self, axes: Option<&[usize]>) -> Array {
        self.call("min", &[], &[("axis", axes_arg(axes))])
    }

    /// The product over `axes` (all when `None`).
    pub fn prod(&self, axes: Option<&[usize]>) -> Array {
        self.call("prod", &[], &[("axis", axes_arg(axes))])
    }

    /// The standard deviation over `axes` (all when `None`; NumPy's `ddof=0`).
    pub fn std(&self, axes: Option<&[usize]>) -> Array {
        self.call("std", &[], &[("axis", axes_arg(axes))])
    }

    /// The variance over `axes` (all when `None`; NumPy's `ddof=0`).
    pub fn var(&self, axes: Option<&[usize]>) -> Array {
        self.call("var", &[], &[("axis", axes_arg(axes))])
    }

    /// `e` to the power of each element.
    pub fn exp(&self) -> Array {
        self.call("exp", &[], &[])
    }

    /// The natural logarithm of each element.
    pub fn log(&self) -> Array {
        self.call("log", &[], &[])
    }

    /// The square root of each element.
    pub fn sqrt(&self) -> Array {
        self.call("sqrt", &[], &[])
    }

    /// The absolute value of each element.
    pub fn abs(&self) -> Array {
        self.call("abs", &[], &[])
    }

    /// The real part of each element (`x.real`; a real array's own values).
    pub fn real(&self) -> Array {
        self.call("real", &[], &[])
    }

    /// The imaginary part of each element (`x.imag`; zeros for a real array).
    pub fn imag(&self) -> Array {
        self.call("imag", &[], &[])
    }

    /// The complex conjugate of each element (`np.conj`).
    pub fn conj(&self) -> Array {
        self.call("conj", &[], &[])
    }

    /// `1 / (1 + exp(-x))` of each element.
    pub fn sigmoid(&self) -> Array {
        self.call("sigmoid", &[], &[])
    }

    /// Each element to the power `other`.
    pub fn pow(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Pow, other.into().into())
    }

    /// The larger of each pair (NaN if either is).
    pub fn maximum(&self, other: impl Into<Operand>) -> Array {
        self.call("maximum", &[other.into().into()], &[])
    }

    /// The smaller of each pair (NaN if either is).
    pub fn minimum(&self, other: impl Into<Operand>) -> Array {
        self.call("minimum", &[other.into().into()], &[])
    }

    /// `self > other`, elementwise (bool).
    pub fn gt(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Gt, other.into().into())
    }

    /// `self >= other`, elementwise (bool).
    pub fn ge(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Ge, other.into().into())
    }

    /// `self < other`, elementwise (bool).
    pub fn lt(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Lt, other.into().into())
    }

    /// `self <= other`, elementwise (bool).
    pub fn le(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Le, other.into().into())
    }

    /// `self == other`, elementwise (bool).
    pub fn equal(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Eq, other.into().into())
    }

    /// `self != other`, elementwise (bool).
    pub fn not_equal(&self, other: impl Into<Operand>) -> Array {
        self.binary(Op::Ne, other.into().into())
    }

    /// Computes the array (and what it needs that is not computed yet) and returns its
    /// values as `T`, which must be its dtype (`astype` first to convert). It stays in the
    /// session's store: computing it again, or an array made from it, reads it in place.
    ///
    /// ```
    /// # use nums_cloud::api::Session;
    /// # #[tokio::main(flavor = "multi_thread")]
    /// # async fn main() -> Result<(), nums_cloud::Error> {
    /// # let dir = std::env::temp_dir().join("nums-cloud-doc-compute");
    /// # let s = Session::new(&format!("file://{}", dir.display()))?
    /// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
    /// let x = s.random_normal(&[1000, 4], 7);
    /// let m = x.mean(Some(&[0])).compute::<f64>().await?; // in async code
    /// assert_eq!(m.shape(), &[4]);
    /// // Computes are futures like any other: two at once.
    /// let (hi, lo) = (x.max(None), x.min(None));
    /// let (a, b) = tokio::join!(hi.compute::<f64>(), lo.compute::<f64>());
    /// assert!(a?.sum() > b?.sum());
    /// // The dtype is checked:
    /// assert!(x.gt(0.0).compute::<f64>().await.is_err());
    /// # Ok(())
    /// # }
    /// ```
    pub async fn compute<T: Element>(&self) -> Result<ArrayD<T>, Error> {
        let b = self.compute_any().await?;
        let dtype = b.dtype();
        T::from_block(b).ok_or_else(|| Error::Job {
            raises: Default::default(),
            array: Some(self.label()),
            message: format!(
                "`{}` is {dtype}, not {}: compute it as {dtype}, or convert it with astype",
                self.label(),
                T::DTYPE
            ),
        })
    }

    /// [`Array::compute`] for code that is not async. It works everywhere: outside a
    /// tokio runtime it runs on a runtime of its own; inside a multi-thread runtime it
    /// runs on it (with `tokio::task::block_in_place`); inside a current-thread runtime
    /// (`#[tokio::test]`'s default) it runs on a thread of its own while that runtime's
    /// other tasks wait, as they would for any blocking call: prefer `.await` there.
    pub fn compute_blocking<T: Element>(&self) -> Result<ArrayD<T>, Error> {
        blocking::block_on(self.compute::<T>())?
    }

    /// [`Array::compute`], whatever the dtype: a [`Block`] of it.
    pub async fn compute_any(&self) -> Result<Block, Error> {
        let mut v = self.s.compute_many(&[self]).await?;
        Ok(v.pop().expect("one value"))
    }

    /// [`Array::compute_any`] for code that is not async.
    pub fn compute_any_blocking(&self) -> Result<Block, Error> {
        blocking::block_on(self.compute_any())?
    }
}

/// `+ - * / % & | ^` between every owned/borrowed pair of arrays and with `f64` on either
/// side.
macro_rules! binary_ops {
    ($($tr:ident $f:ident $op:ident),*) => {$(
        impl std::ops::$tr<&Array> for &Array {
            type Output = Array;
            fn $f(self, o: &Array) -> Array {
                self.binary(Op::$op, Arg::Array(o.clone()))
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
                self.binary(Op::$op, Arg::Float(v))
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
                a.expr(|o| o.binary(Op::$op, &Arg::Float(self), &Arg::Array(a.clone())))
            }
        }
        impl std::ops::$tr<Array> for f64 {
            type Output = Array;
            fn $f(self, a: Array) -> Array {
                std::ops::$tr::$f(self, &a)
            }
        }
    )*};
}
binary_ops!(Add add Add, Sub sub Sub, Mul mul Mul, Div div Div, Rem rem Mod);

/// `& | ^ << >>` between arrays (bool or ints, NumPy's bitwise operators).
macro_rules! bit_ops {
    ($($tr:ident $f:ident $op:ident),*) => {$(
        impl std::ops::$tr<&Array> for &Array {
            type Output = Array;
            fn $f(self, o: &Array) -> Array {
                self.binary(Op::$op, Arg::Array(o.clone()))
            }
        }
        impl std::ops::$tr<Array> for Array {
            type Output = Array;
            fn $f(self, o: Array) -> Array {
                std::ops::$tr::$f(&self, &o)
            }
        }
    )*};
}
bit_ops!(BitAnd bitand And, BitOr bitor Or, BitXor bitxor Xor, Shl shl Shl, Shr shr Shr);

impl std::ops::Neg for &Array {
    type Output = Array;
    fn neg(self) -> Array {
        self.expr(|o| o.unary(UnOp::Neg, &Arg::Array(self.clone())))
    }
}

impl std::ops::Neg for Array {
    type Output = Array;
    fn neg(self) -> Array {
        -&self
    }
}

impl std::ops::Not for &Array {
    type Output = Array;
    /// `~x`: logical not of a bool array, bitwise not of an int one.
    fn not(self) -> Array {
        self.expr(|o| o.unary(UnOp::Invert, &Arg::Array(self.clone())))
    }
}

impl std::ops::Not for Array {
    type Output = Array;
    fn not(self) -> Array {
        !&self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> Session {
        Session::new("file:///tmp/nums-cloud-api-unit").unwrap()
    }

    #[test]
    fn operations_check_shapes_at_once_and_label_as_numpy_writes() {
        let s = session();
        let x = s.ones(&[4, 3]).named("X").unwrap();
        let w = s.ones(&[3]).named("w").unwrap();
        let y = (&x.matmul(&w) * 2.0 - 1.0).sum(None);
        // (As Python reads it: @ and * bind alike, left to right.)
        assert_eq!(y.label(), "sum(X @ w * 2.0 - 1.0, axis=None)");
        assert_eq!(y.shape().unwrap(), Vec::<usize>::new());
        let bad = x.matmul(&s.ones(&[4]));
        let e = bad.check().unwrap_err().to_string();
        assert!(e.contains("X @ ones([4])"), "{e}");
        // The error travels to what is made from it.
        assert!((&bad + 1.0).check().is_err());
        assert!(s.call("no_such_function", &[], &[]).is_err());
    }

    #[test]
    fn settings_are_values() {
        let s = session();
        let t = s.clone().workers(8).memory_mb(512);
        assert_eq!((s.settings().workers, s.settings().memory_mb), (2, 2048));
        assert_eq!((t.settings().workers, t.settings().memory_mb), (8, 512));
        // One store and graph: arrays of both combine.
        let a = s.ones(&[2]);
        let b = t.ones(&[2]);
        assert!((&a + &b).check().is_ok());
        // Another session's arrays do not.
        let c = session().ones(&[2]);
        assert!(
            (&a + &c)
                .check()
                .unwrap_err()
                .to_string()
                .contains("belong to different sessions (init() starts a new session")
        );
    }
}
