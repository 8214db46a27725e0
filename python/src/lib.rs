//! `nums_cloud._native`: the Python package's bindings over the driver's library API
//! (`nums_cloud::api`). A thin layer: Python values to the API's arguments and back
//! (NumPy arrays out without a copy), the API's errors as Python exceptions, computes
//! with the GIL released and Ctrl-C honoured, and the function loop that the local
//! backend's processes run (`python -m nums_cloud._function`). The NumPy-like surface is
//! Python (`nums_cloud/numpy/`), built on these few types.

use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use numpy::{PyArray, PyArrayDyn, PyArrayMethods, PyUntypedArrayMethods};
use nums_cloud::api::{self, Arg, Value};
use nums_cloud::{Block, Error};
use pyo3::exceptions::{PyKeyboardInterrupt, PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyComplex, PyDict, PyFloat, PyInt, PyList, PySlice, PyString, PyTuple};

/// The functions' allocator (freed blocks kept for reuse), as the `nums-cloud` binary
/// has it: it matters in a function process (`serve_function`); elsewhere it passes
/// straight to the system's allocator.
#[global_allocator]
static ALLOC: nums_function::memory::BlockAllocator = nums_function::memory::BlockAllocator;

/// The runtime computes run on (one for the process, started by the first).
fn runtime() -> PyResult<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    if let Some(rt) = RT.get() {
        return Ok(rt);
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("nums-cloud")
        .build()
        .map_err(|e| PyRuntimeError::new_err(format!("cannot start a tokio runtime: {e}")))?;
    Ok(RT.get_or_init(|| rt))
}

/// How often a compute looks for Ctrl-C (Python's signal handlers run then).
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// How often a notebook's progress display is updated (an HTML display redrawn).
const PROGRESS_EVERY: Duration = Duration::from_millis(250);

/// Runs `f` to its end with the GIL released, so other Python threads run meanwhile. On
/// the main thread, Python's signal handlers run every [`SIGNAL_POLL`]: one that raises
/// (Ctrl-C's `KeyboardInterrupt`) drops `f` — the API then removes what the compute
/// wrote and stops its function processes — and the exception is raised.
fn wait<F>(py: Python<'_>, f: F) -> PyResult<F::Output>
where
    F: Future + Send,
    F::Output: Send,
{
    let rt = runtime()?;
    py.detach(|| {
        rt.block_on(async move {
            tokio::pin!(f);
            // The first tick one period on: awaiting an immediate first tick waits for the
            // timer wheel (a millisecond), longer than a small compute.
            let start = tokio::time::Instant::now() + SIGNAL_POLL;
            let mut tick = tokio::time::interval_at(start, SIGNAL_POLL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let r = loop {
                tokio::select! {
                    biased;
                    r = &mut f => break r,
                    _ = tick.tick() => Python::attach(|py| {
                        show_progress(py);
                        py.check_signals()
                    })?,
                }
            };
            // The compute's last update.
            Python::attach(show_progress);
            Ok(r)
        })
    })
}

/// The latest progress update of a compute and the Python callable that shows it
/// (`init(progress=...)`'s notebook display), kept until the thread that waits for the
/// compute shows it: Python code runs on the caller's thread, with the GIL it polls
/// signals with, never on the engine's threads.
type PendingProgress = (Arc<pyo3::Py<PyAny>>, api::ProgressUpdate);
static PROGRESS: std::sync::Mutex<Option<PendingProgress>> = std::sync::Mutex::new(None);

/// Hands the latest progress update, if any, to its callable (a dict; an error in the
/// display is not the compute's, and is written as an unraisable exception).
fn show_progress(py: Python<'_>) {
    let pending = PROGRESS.lock().unwrap_or_else(|p| p.into_inner()).take();
    let Some((f, u)) = pending else {
        return;
    };
    let d = PyDict::new(py);
    let set = || -> PyResult<()> {
        d.set_item("stage", &u.stage)?;
        d.set_item("tasks_done", u.tasks_done)?;
        d.set_item("tasks_total", u.tasks_total)?;
        d.set_item("invocations_done", u.invocations_done)?;
        d.set_item("bytes_moved", u.bytes_moved)?;
        d.set_item("eta_seconds", u.eta_seconds)?;
        d.set_item("elapsed_seconds", u.elapsed_seconds)?;
        d.set_item("note", &u.note)?;
        d.set_item("finished", u.finished)?;
        d.set_item("line", u.line())?;
        f.call1(py, (&d,))?;
        Ok(())
    };
    if let Err(e) = set() {
        e.write_unraisable(py, None);
    }
}

/// The exception class `name` of `nums_cloud._errors`.
fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
    py.import("nums_cloud._errors")?.getattr(name)
}

/// An API error as the Python exception it is (see `nums_cloud/_errors.py`).
fn py_err(e: Error) -> PyErr {
    Python::attach(|py| {
        let (class, message) = match &e {
            Error::Interrupted => return PyKeyboardInterrupt::new_err(e.to_string()),
            Error::Runtime { message } => return PyRuntimeError::new_err(message.clone()),
            Error::Config { .. } => return PyValueError::new_err(e.to_string()),
            Error::Job {
                message, raises, ..
            }
            | Error::Refused { message, raises } => return numpy_exception(py, *raises, message),
            Error::Plan { message, .. } => ("PlanError", message.clone()),
            Error::Store { message } => ("StoreError", message.clone()),
            other => ("RunError", other.to_string()),
        };
        match error_class(py, class).and_then(|c| c.call1((message.clone(),))) {
            Ok(v) => PyErr::from_value(v),
            Err(_) => PyRuntimeError::new_err(message),
        }
    })
}

/// A linear-algebra failure as NumPy words it (`Singular matrix`), then the array it
/// happened in: the engine's message names the invocation and task first.
fn linalg_message(message: &str) -> String {
    let what = message
        .rsplit("LinAlgError: ")
        .next()
        .unwrap_or(message)
        .trim();
    let array = message
        .split('`')
        .nth(1)
        .map(|a| format!(" (in `{a}`)"))
        .unwrap_or_default();
    format!("{what}{array}")
}

/// The Python exception NumPy raises for a refusal: the engine's one table
/// ([`nums_cloud::PyException`]), never the message's words.
fn numpy_exception(py: Python<'_>, raises: nums_cloud::PyException, message: &str) -> PyErr {
    use nums_cloud::PyException as E;
    // A kernel's refusal carries its class as a prefix (how the function tells it); the
    // exception's own class says it, so the message need not again.
    let m = message
        .strip_prefix(raises.name())
        .and_then(|r| r.strip_prefix(": "))
        .unwrap_or(message)
        .to_string();
    match raises {
        E::TypeError => PyTypeError::new_err(m),
        E::IndexError => pyo3::exceptions::PyIndexError::new_err(m),
        E::OverflowError => pyo3::exceptions::PyOverflowError::new_err(m),
        E::ZeroDivisionError => pyo3::exceptions::PyZeroDivisionError::new_err(m),
        // nums_cloud.LinAlgError (a numpy.linalg.LinAlgError), in NumPy's words.
        E::LinAlgError => {
            match error_class(py, "LinAlgError").and_then(|c| c.call1((linalg_message(message),))) {
                Ok(v) => PyErr::from_value(v),
                Err(_) => PyValueError::new_err(m),
            }
        }
        // NumPy's own class (a ValueError and an IndexError), given the whole message.
        E::AxisError => match py
            .import("numpy.exceptions")
            .and_then(|n| n.getattr("AxisError"))
            .and_then(|c| c.call1((m.clone(),)))
        {
            Ok(v) => PyErr::from_value(v),
            Err(_) => PyValueError::new_err(m),
        },
        _ => PyValueError::new_err(m),
    }
}

trait Py<T> {
    fn py(self) -> PyResult<T>;
}

impl<T> Py<T> for Result<T, Error> {
    fn py(self) -> PyResult<T> {
        self.map_err(py_err)
    }
}

/// A Python value as an argument of the API: arrays, numbers, strings, `None`, tuples
/// and lists (of those), slices and `...`.
fn arg(o: &Bound<'_, PyAny>) -> PyResult<Arg> {
    if let Ok(a) = o.cast::<PyArr>() {
        return Ok(Arg::Array(a.get().a.clone()));
    }
    if o.is_none() {
        return Ok(Arg::None);
    }
    if let Ok(b) = o.cast::<PyBool>() {
        return Ok(Arg::Bool(b.is_true()));
    }
    // Before Python's numbers: np.float64 is a float, np.complex128 a complex.
    if let Some(a) = numpy_scalar(o)? {
        return Ok(a);
    }
    if o.cast::<PyInt>().is_ok() {
        if let Ok(i) = o.extract::<i64>() {
            return Ok(Arg::Int(i));
        }
        // Past int64, a uint64 as NumPy makes it.
        return o.extract::<u64>().map(Arg::UInt).map_err(|_| {
            pyo3::exceptions::PyOverflowError::new_err(format!(
                "Python integer {o} out of bounds for int64 and uint64"
            ))
        });
    }
    if let Ok(f) = o.cast::<PyFloat>() {
        return Ok(Arg::Float(f.value()));
    }
    if let Ok(c) = o.cast::<PyComplex>() {
        return Ok(Arg::Complex(c.real(), c.imag()));
    }
    if o.cast::<PyString>().is_ok() {
        return Ok(Arg::Str(o.extract::<String>()?));
    }
    if let Ok(t) = o.cast::<PyTuple>() {
        return t
            .iter()
            .map(|x| arg(&x))
            .collect::<PyResult<_>>()
            .map(Arg::Tuple);
    }
    if let Ok(l) = o.cast::<PyList>() {
        return l
            .iter()
            .map(|x| arg(&x))
            .collect::<PyResult<_>>()
            .map(Arg::Tuple);
    }
    if o.cast::<PySlice>().is_ok() {
        let bound = |k: &str| -> PyResult<Option<i64>> {
            let v = o.getattr(k)?;
            if v.is_none() {
                Ok(None)
            } else {
                v.extract::<i64>().map(Some).map_err(|_| {
                    PyTypeError::new_err(
                        "slice indices must be integers or None or have an __index__ method",
                    )
                })
            }
        };
        return Ok(Arg::Slice(bound("start")?, bound("stop")?, bound("step")?));
    }
    if o.is(o.py().Ellipsis()) {
        return Ok(Arg::Ellipsis);
    }
    Err(PyTypeError::new_err(format!(
        "nums-cloud cannot take a {} here",
        o.get_type().name()?
    )))
}

/// A NumPy scalar of one of the engine's dtypes (`np.int32(-1)`) as one that keeps its
/// dtype in promotion (NEP 50), as NumPy's own do (one of another dtype, float16 say, is
/// taken by its Python value); `None` for anything but a NumPy scalar.
fn numpy_scalar(o: &Bound<'_, PyAny>) -> PyResult<Option<Arg>> {
    let py = o.py();
    let generic = py.import("numpy")?.getattr("generic")?;
    if !o.is_instance(&generic)? {
        return Ok(None);
    }
    let name: String = o.getattr("dtype")?.getattr("name")?.extract()?;
    let value = arg(&o.call_method0("item")?)?;
    let Some(dtype) = nums_layout::DType::parse(&name) else {
        return Ok(Some(value));
    };
    let scalar = match value {
        Arg::Bool(b) => nums_layout::Scalar::Bool(b),
        Arg::Int(i) => nums_layout::Scalar::Int(i),
        Arg::UInt(u) => nums_layout::Scalar::UInt(u),
        Arg::Float(f) => nums_layout::Scalar::Float(f),
        Arg::Complex(re, im) => nums_layout::Scalar::Complex(re, im),
        _ => return Ok(None),
    };
    Ok(Some(Arg::NumPy(scalar, dtype)))
}

fn args(items: &Bound<'_, PyAny>) -> PyResult<Vec<Arg>> {
    items.try_iter()?.map(|x| arg(&x?)).collect()
}

/// Keywords as the API takes them (`None`: none).
fn kwargs(kw: Option<&Bound<'_, PyDict>>) -> PyResult<Vec<(String, Arg)>> {
    let Some(kw) = kw else {
        return Ok(Vec::new());
    };
    kw.iter()
        .map(|(k, v)| Ok((k.extract::<String>()?, arg(&v)?)))
        .collect()
}

fn kw_refs(kw: &[(String, Arg)]) -> Vec<(&str, Arg)> {
    kw.iter().map(|(k, v)| (k.as_str(), v.clone())).collect()
}

/// A value of a call as Python's: an array, a number, or for a tuple `(names, values)`
/// (`names` None for a plain tuple; NumPy's named tuples otherwise).
fn value(py: Python<'_>, v: Value) -> PyResult<Bound<'_, PyAny>> {
    Ok(match v {
        Value::Array(a) => Bound::new(py, PyArr { a })?.into_any(),
        Value::Number(nums_layout::Scalar::Float(f)) => f.into_pyobject(py)?.into_any(),
        Value::Number(nums_layout::Scalar::Int(i)) => i.into_pyobject(py)?.into_any(),
        Value::Number(nums_layout::Scalar::Bool(b)) => PyBool::new(py, b).to_owned().into_any(),
        Value::Number(nums_layout::Scalar::UInt(u)) => u.into_pyobject(py)?.into_any(),
        Value::Number(nums_layout::Scalar::Complex(re, im)) => {
            PyComplex::from_doubles(py, re, im).into_any()
        }
        // NumPy's scalar of that dtype, as NumPy's function of numbers returns.
        Value::NumPy(x, d) => {
            let number = value(py, Value::Number(x))?;
            py.import("numpy")?
                .getattr("dtype")?
                .call1((d.name(),))?
                .getattr("type")?
                .call1((number,))?
        }
        Value::Tuple(items) => {
            let named = items.iter().all(|(n, _)| n.is_some()) && !items.is_empty();
            let names: Vec<&str> = items.iter().map(|(n, _)| n.unwrap_or("")).collect();
            let values = items
                .into_iter()
                .map(|(_, v)| value(py, v))
                .collect::<PyResult<Vec<_>>>()?;
            let values = PyTuple::new(py, values)?.into_any();
            let names = if named {
                PyTuple::new(py, names)?.into_any()
            } else {
                py.None().into_bound(py)
            };
            PyTuple::new(py, [names, values])?.into_any()
        }
        #[allow(unreachable_patterns)]
        other => {
            return Err(PyTypeError::new_err(format!(
                "nums-cloud gave a value Python cannot take: {other:?}"
            )));
        }
    })
}

/// A block of values as a NumPy array: the block's own buffer, not a copy.
fn to_numpy(py: Python<'_>, b: Block) -> PyResult<Bound<'_, PyAny>> {
    Ok(match b {
        Block::F64(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::F32(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::I64(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::Bool(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::I8(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::I16(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::I32(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::U8(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::U16(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::U32(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::U64(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::C64(a) => PyArray::from_owned_array(py, a).into_any(),
        Block::C128(a) => PyArray::from_owned_array(py, a).into_any(),
    })
}

/// A NumPy array of a dtype nums-cloud has, as a block (copied: it goes to the store).
fn from_numpy(o: &Bound<'_, PyAny>) -> PyResult<Block> {
    fn get<T: numpy::Element + Clone>(
        o: &Bound<'_, PyAny>,
    ) -> Option<PyResult<ndarray::ArrayD<T>>> {
        let a = o.cast::<PyArrayDyn<T>>().ok()?;
        Some(
            a.try_readonly()
                .map(|r| r.as_array().to_owned())
                .map_err(|e| PyValueError::new_err(e.to_string())),
        )
    }
    macro_rules! each {
        ($($v:ident: $t:ty),*) => {$(
            if let Some(a) = get::<$t>(o) {
                return Ok(Block::$v(a?));
            }
        )*};
    }
    each!(F64: f64, F32: f32, I64: i64, Bool: bool, I8: i8, I16: i16, I32: i32, U8: u8,
          U16: u16, U32: u32, U64: u64, C64: nums_layout::C64, C128: nums_layout::C128);
    let dtype = match o.cast::<numpy::PyUntypedArray>() {
        Ok(a) => a.dtype().to_string(),
        Err(_) => o.get_type().name()?.to_string(),
    };
    Err(PyTypeError::new_err(format!(
        "nums-cloud has no dtype {dtype}: its dtypes are {}",
        nums_layout::DType::supported()
    )))
}

/// `a` for Python: the error of the operation that made it raised now, as NumPy raises.
fn ok(a: api::Array) -> PyResult<PyArr> {
    a.check().py()?;
    Ok(PyArr { a })
}

/// A lazy array of a session: a node of its graph (`nums_cloud.numpy.BlockArray` wraps
/// it).
#[pyclass(frozen, name = "Array", module = "nums_cloud._native")]
struct PyArr {
    a: api::Array,
}

#[pymethods]
impl PyArr {
    /// `self <symbol> other` (Python's binary operators by symbol).
    fn op(&self, symbol: &str, other: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        ok(self.a.op(symbol, arg(other)?))
    }

    /// `other <symbol> self` (Python's reflected operators).
    fn rop(&self, symbol: &str, other: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        ok(self.a.rop(symbol, arg(other)?))
    }

    /// `-self`, `+self`, `~self`.
    fn unary(&self, symbol: &str) -> PyResult<PyArr> {
        ok(self.a.unary(symbol))
    }

    /// `name(self, *args, **kwargs)` of the function table; its value as [`value`] gives it.
    #[pyo3(signature = (name, args, kwargs=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut all = vec![Arg::Array(self.a.clone())];
        all.extend(self::args(args)?);
        let kw = self::kwargs(kwargs)?;
        let v = self.a.session().call(name, &all, &kw_refs(&kw)).py()?;
        value(py, v)
    }

    /// `self[items]`: integers, slices, `None`, `...`, integer arrays and lists.
    fn index(&self, items: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        ok(self.a.index(&args(items)?))
    }

    /// `self[items]` where items may be boolean masks (each computed first: its values
    /// decide the shape).
    fn index_masked(&self, py: Python<'_>, items: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        let (a, items) = (self.a.clone(), args(items)?);
        let a = wait(py, async move { a.index_masked(&items).await })?.py()?;
        Ok(PyArr { a })
    }

    /// NumPy's `self[items] = value` on a new array (JAX's `x.at[items].set(value)`).
    fn set(&self, items: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        ok(self.a.set_arg(&args(items)?, arg(value)?))
    }

    /// The transpose (axes reversed).
    #[getter(T)]
    fn t(&self) -> PyResult<PyArr> {
        ok(self.a.t())
    }

    /// The same values in blocks of `shape`.
    fn block(&self, shape: Vec<usize>) -> PyResult<PyArr> {
        ok(self.a.block(&shape))
    }

    /// Names the array for messages; returns it.
    fn named(&self, name: &str) -> PyResult<PyArr> {
        Ok(PyArr {
            a: self.a.clone().named(name).py()?,
        })
    }

    /// Raises the error of the operation that made it, if any.
    fn check(&self) -> PyResult<()> {
        self.a.check().py()
    }

    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.a.shape().py()?)
    }

    #[getter]
    fn dtype(&self) -> PyResult<String> {
        Ok(self.a.dtype().py()?.to_string())
    }

    #[getter]
    fn blocks<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.a.blocks().py()?)
    }

    #[getter]
    fn ndim(&self) -> PyResult<usize> {
        self.a.ndim().py()
    }

    #[getter]
    fn size(&self) -> PyResult<usize> {
        self.a.size().py()
    }

    /// Whether its values are in the store (computed, or read in place).
    #[getter]
    fn computed(&self) -> bool {
        self.a.computed()
    }

    /// Its name, or the expression that made it.
    #[getter]
    fn label(&self) -> String {
        self.a.label()
    }

    /// Computes it (what it needs that is not stored yet) and returns a NumPy array.
    fn compute<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let a = self.a.clone();
        let b = wait(py, async move { a.compute_any().await })?.py()?;
        to_numpy(py, b)
    }

    fn __repr__(&self) -> String {
        format!("{:?}", self.a)
    }
}

/// A session: where arrays are stored and how computes run.
#[pyclass(frozen, name = "Session", module = "nums_cloud._native")]
struct PySession {
    s: api::Session,
}

fn parse_backend(name: &str) -> PyResult<api::Backend> {
    match name {
        "local" => Ok(api::Backend::Local),
        "lambda" => Ok(api::Backend::Lambda),
        other => Err(PyValueError::new_err(format!(
            "backend {other:?}: use \"local\" or \"lambda\""
        ))),
    }
}

fn parse_scheduler(name: &str) -> PyResult<api::Scheduler> {
    match name {
        "lshs" => Ok(api::Scheduler::Lshs),
        "naive" => Ok(api::Scheduler::Naive),
        other => Err(PyValueError::new_err(format!(
            "scheduler {other:?}: use \"lshs\" or \"naive\""
        ))),
    }
}

#[pymethods]
impl PySession {
    /// A session on `storage` (`file://folder` or `s3://bucket/prefix`), or on the
    /// deployment `infra` (`terraform output -json`); every other setting as
    /// `nums_cloud.init` takes it (`None`: the default).
    #[new]
    #[pyo3(signature = (storage=None, *, infra=None, endpoint=None, backend=None, function=None,
        scheduler=None, workers=None, memory_mb=None, timeout_seconds=None, progress=None,
        progress_to=None, function_command=None, in_process_bytes=None, memory_tier_bytes=None,
        function_tier_percent=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        storage: Option<&str>,
        infra: Option<&str>,
        endpoint: Option<&str>,
        backend: Option<&str>,
        function: Option<&str>,
        scheduler: Option<&str>,
        workers: Option<usize>,
        memory_mb: Option<u64>,
        timeout_seconds: Option<u64>,
        progress: Option<bool>,
        progress_to: Option<pyo3::Py<PyAny>>,
        function_command: Option<Vec<String>>,
        in_process_bytes: Option<u64>,
        memory_tier_bytes: Option<u64>,
        function_tier_percent: Option<u64>,
    ) -> PyResult<PySession> {
        let mut s = match (infra, storage) {
            (Some(path), _) => {
                let s = api::Session::from_infra(path).py()?;
                match storage {
                    // The deployment's settings, on another store.
                    Some(url) if url != s.settings().storage => {
                        return Err(PyValueError::new_err(format!(
                            "storage {url:?} is not the deployment's ({}): give one of them",
                            s.settings().storage
                        )));
                    }
                    _ => s,
                }
            }
            (None, Some(url)) => api::Session::new(url).py()?,
            (None, None) => {
                return Err(PyValueError::new_err("a session needs storage or infra"));
            }
        };
        if let Some(e) = endpoint {
            s = s.endpoint(e).py()?;
        }
        if let Some(b) = backend {
            s = s.backend(parse_backend(b)?);
        }
        if let Some(f) = function {
            s = s.function(f);
        }
        if let Some(k) = scheduler {
            s = s.scheduler(parse_scheduler(k)?);
        }
        if let Some(w) = workers {
            s = s.workers(w);
        }
        if let Some(m) = memory_mb {
            s = s.memory_mb(m);
        }
        if let Some(t) = timeout_seconds {
            s = s.timeout_seconds(t);
        }
        if let Some(p) = progress {
            s = s.progress(p);
        }
        // A display of the caller's own (a notebook's): shown by the waiting thread.
        if let Some(f) = progress_to.filter(|_| progress != Some(false)) {
            let f = Arc::new(f);
            let keep = move |u: &api::ProgressUpdate| {
                let mut g = PROGRESS.lock().unwrap_or_else(|p| p.into_inner());
                *g = Some((f.clone(), u.clone()));
            };
            s = s.progress_to(keep, PROGRESS_EVERY);
        }
        if let Some(c) = function_command {
            let c: Vec<&str> = c.iter().map(String::as_str).collect();
            s = s.function_command(&c);
        }
        if let Some(b) = in_process_bytes {
            s = s.in_process_bytes(b);
        }
        if let Some(b) = memory_tier_bytes {
            s = s.memory_tier_bytes(b);
        }
        if let Some(p) = function_tier_percent {
            s = s.function_tier_percent(p);
        }
        Ok(PySession { s })
    }

    /// The settings, as a dict.
    fn settings<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let st = self.s.settings();
        let d = PyDict::new(py);
        d.set_item("storage", st.storage)?;
        d.set_item("endpoint", st.endpoint)?;
        d.set_item(
            "backend",
            match st.backend {
                api::Backend::Local => "local",
                api::Backend::Lambda => "lambda",
            },
        )?;
        d.set_item("function", st.function)?;
        d.set_item(
            "scheduler",
            match st.scheduler {
                api::Scheduler::Lshs => "lshs",
                api::Scheduler::Naive => "naive",
            },
        )?;
        d.set_item("workers", st.workers)?;
        d.set_item("memory_mb", st.memory_mb)?;
        d.set_item("timeout_seconds", st.timeout_seconds)?;
        d.set_item("in_process_bytes", st.in_process_bytes)?;
        d.set_item("memory_tier_bytes", st.memory_tier_bytes)?;
        d.set_item("function_tier_percent", st.function_tier_percent)?;
        Ok(d)
    }

    /// What the session's computes sent so far: a dict of `invocations` (in this
    /// process or to the backend), `in_process` (of those, here) and `tasks`.
    fn counts<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.s.counts();
        let d = PyDict::new(py);
        d.set_item("invocations", c.invocations)?;
        d.set_item("in_process", c.in_process)?;
        d.set_item("tasks", c.tasks)?;
        d.set_item("bytes_read", c.bytes_read)?;
        d.set_item("memory_hits", c.memory_hits)?;
        d.set_item("memory_bytes_read", c.memory_bytes_read)?;
        Ok(d)
    }

    /// What this process's memory tier holds and has served: a dict of `budget`,
    /// `bytes`, `blocks`, `hits`, `misses`, `evicted` and `stale`.
    #[staticmethod]
    fn memory_tier<'py>(py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let t = api::memory_tier();
        let d = PyDict::new(py);
        for (k, v) in [
            ("budget", t.budget),
            ("bytes", t.bytes),
            ("blocks", t.blocks),
            ("hits", t.hits),
            ("misses", t.misses),
            ("evicted", t.evicted),
            ("stale", t.stale),
            ("unwritten", t.unwritten),
            ("written_back", t.written_back),
        ] {
            d.set_item(k, v)?;
        }
        Ok(d)
    }

    /// `name(*args, **kwargs)` of the function table.
    #[pyo3(signature = (name, args, kwargs=None))]
    fn call<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyAny>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let a = self::args(args)?;
        let kw = self::kwargs(kwargs)?;
        let v = self.s.call(name, &a, &kw_refs(&kw)).py()?;
        value(py, v)
    }

    /// An input of the values of a NumPy array (float64, float32, int64 or bool).
    #[pyo3(name = "from_numpy")]
    fn input(&self, values: &Bound<'_, PyAny>) -> PyResult<PyArr> {
        ok(self.s.from_ndarray(from_numpy(values)?))
    }

    /// Random values: `dist` "normal", "uniform" or "integers" (in `[low, high)`).
    #[pyo3(signature = (dist, shape, seed, low=0, high=0))]
    fn random(
        &self,
        dist: &str,
        shape: Vec<usize>,
        seed: u64,
        low: i64,
        high: i64,
    ) -> PyResult<PyArr> {
        let a = match dist {
            "normal" => self.s.random_normal(&shape, seed),
            "uniform" => self.s.random_uniform(&shape, seed),
            "integers" => self.s.random_integers(&shape, low, high, seed),
            other => return Err(PyValueError::new_err(format!("no distribution {other:?}"))),
        };
        ok(a)
    }

    /// A `.npy`, `.csv`, `.parquet` file or Zarr array (local or `s3://`), as it is
    /// (`read_csv` takes CSV options).
    fn load(&self, py: Python<'_>, path: String) -> PyResult<PyArr> {
        let s = self.s.clone();
        let a = wait(py, async move { s.load(&path).await })?.py()?;
        Ok(PyArr { a })
    }

    /// A `.csv` file read as `api::ReadCsv` says: `usecols` and the keys of `dtypes` are
    /// column numbers or header names; dtypes by NumPy's names; `call` names the array in
    /// messages (`read_csv('f.csv')`).
    #[pyo3(signature = (path, header, delimiter, usecols, pandas_usecols, dtype, dtypes, call))]
    #[allow(clippy::too_many_arguments)]
    fn read_csv(
        &self,
        py: Python<'_>,
        path: String,
        header: bool,
        delimiter: char,
        usecols: Option<Vec<Bound<'_, PyAny>>>,
        pandas_usecols: bool,
        dtype: Option<String>,
        dtypes: Vec<(Bound<'_, PyAny>, String)>,
        call: String,
    ) -> PyResult<PyArr> {
        let column = |c: &Bound<'_, PyAny>| -> PyResult<api::Column> {
            if c.is_instance_of::<PyString>() {
                Ok(api::Column::Name(c.extract()?))
            } else if c.is_instance_of::<PyBool>() {
                Err(PyTypeError::new_err(format!(
                    "a column is a number or a header name, not {c}"
                )))
            } else {
                c.extract::<i64>().map(api::Column::Index).map_err(|_| {
                    PyTypeError::new_err(format!(
                        "a column is a number or a header name, not {}",
                        c.repr().map_or("?".into(), |r| r.to_string())
                    ))
                })
            }
        };
        let o = api::ReadCsv {
            header,
            delimiter,
            usecols: usecols
                .map(|u| u.iter().map(column).collect::<PyResult<Vec<_>>>())
                .transpose()?,
            pandas_usecols,
            dtype: dtype.as_deref().map(dtype_of).transpose()?,
            dtypes: dtypes
                .iter()
                .map(|(c, d)| Ok((column(c)?, dtype_of(d)?)))
                .collect::<PyResult<Vec<_>>>()?,
            call,
        };
        let s = self.s.clone();
        let a = wait(py, async move { s.read_csv(&path, &o).await })?.py()?;
        Ok(PyArr { a })
    }

    /// Writes `array` to `path` (`.npy`, `.csv`, a Zarr folder, or `s3://`).
    fn save(&self, py: Python<'_>, array: &PyArr, path: String) -> PyResult<()> {
        let (s, a) = (self.s.clone(), array.a.clone());
        wait(py, async move { s.save(&a, &path).await })?.py()
    }

    /// Writes `array` into the existing Zarr array at `location` from element `offset`
    /// (a region write of whole chunks, by the functions).
    fn write_zarr(
        &self,
        py: Python<'_>,
        array: &PyArr,
        location: String,
        offset: Vec<u64>,
    ) -> PyResult<()> {
        let (s, a) = (self.s.clone(), array.a.clone());
        wait(
            py,
            async move { s.write_zarr(&a, &location, &offset).await },
        )?
        .py()
    }

    /// Computes `arrays` in one plan; their values as NumPy arrays.
    fn compute_many<'py>(
        &self,
        py: Python<'py>,
        arrays: Vec<Bound<'py, PyArr>>,
    ) -> PyResult<Vec<Bound<'py, PyAny>>> {
        let s = self.s.clone();
        let arrays: Vec<api::Array> = arrays.iter().map(|a| a.get().a.clone()).collect();
        let blocks = wait(py, async move {
            let refs: Vec<&api::Array> = arrays.iter().collect();
            s.compute_many(&refs).await
        })?
        .py()?;
        blocks.into_iter().map(|b| to_numpy(py, b)).collect()
    }

    /// Computes `array` now and keeps it (as every compute does).
    fn persist(&self, py: Python<'_>, array: &PyArr) -> PyResult<()> {
        let (s, a) = (self.s.clone(), array.a.clone());
        wait(py, async move { s.persist(&a).await })?.py()
    }

    /// How a compute of `arrays` would run: `(place, text, work_bytes)`; `place` is
    /// "stored", "in-process" or the backend's name.
    fn explain(&self, arrays: Vec<Bound<'_, PyArr>>) -> PyResult<(String, String, u64)> {
        let arrays: Vec<api::Array> = arrays.iter().map(|a| a.get().a.clone()).collect();
        let refs: Vec<&api::Array> = arrays.iter().collect();
        let e = self.s.explain(&refs).py()?;
        let place = match &e.place {
            api::Place::Stored => "stored".to_string(),
            api::Place::InProcess => "in-process".to_string(),
            api::Place::Backend(api::Backend::Local) => "local".to_string(),
            api::Place::Backend(api::Backend::Lambda) => "lambda".to_string(),
            #[allow(unreachable_patterns)]
            _ => "unknown".to_string(),
        };
        Ok((place, e.to_string(), e.work_bytes))
    }

    /// Fits the table's model `model` (`logistic_regression`, `poisson_regression`,
    /// `ridge`, `linear_regression`) to `x` and `y` with the keywords as they are (the
    /// engine decides their defaults, ranges and solver names): a dict of `coef`,
    /// `intercept`, `intercepts` and `classes` (a multinomial fit's `coef` is `classes`
    /// rows of coefficients, one after the other), `n_iter`, `converged`, `why_not` (None when it converged),
    /// `grad_max` and `loss`.
    #[pyo3(signature = (model, x, y, **kw))]
    fn fit<'py>(
        &self,
        py: Python<'py>,
        model: &str,
        x: &PyArr,
        y: &PyArr,
        kw: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let kw = kwargs(kw)?;
        let (x, y) = (x.a.clone(), y.a.clone());
        let model = model.to_string();
        let fit = wait(py, async move {
            let kw: Vec<(&str, Arg)> = kw.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
            api::models::fit_model(&model, &x, &y, &kw).await
        })?
        .py()?;
        let d = PyDict::new(py);
        d.set_item("coef", fit.coef)?;
        d.set_item("intercept", fit.intercept)?;
        d.set_item("intercepts", fit.intercepts)?;
        d.set_item("classes", fit.classes)?;
        d.set_item("n_iter", fit.n_iter)?;
        d.set_item("converged", fit.converged)?;
        d.set_item("why_not", fit.why_not)?;
        d.set_item("grad_max", fit.grad_max)?;
        d.set_item("loss", fit.loss)?;
        Ok(d)
    }

    /// Deletes now what no array holds any more, and waits for it.
    fn collect(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.s.clone();
        wait(py, async move { s.collect().await })
    }

    /// Removes what the session keeps in the store and stops its functions.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.s.clone();
        wait(py, async move { s.close().await })?.py()
    }

    fn __repr__(&self) -> String {
        let st = self.s.settings();
        format!(
            "Session(storage={:?}, backend={:?}, workers={}, memory_mb={})",
            st.storage, st.backend, st.workers, st.memory_mb
        )
    }
}

/// The function table: `(family, name, aliases, params, star, arrays)` for each
/// function; `arrays` are NumPy's array_like parameters (a list given for one is an
/// array of its values).
#[allow(clippy::type_complexity)]
#[pyfunction]
fn functions() -> Vec<(
    &'static str,
    &'static str,
    Vec<&'static str>,
    Vec<&'static str>,
    bool,
    Vec<&'static str>,
)> {
    api::functions()
        .into_iter()
        .map(|f| {
            (
                f.family,
                f.name,
                f.aliases.to_vec(),
                f.params.to_vec(),
                f.star,
                f.arrays,
            )
        })
        .collect()
}

/// A dtype name of the engine's (NumPy's names, type codes): TypeError naming the
/// supported ones for another, as NumPy raises for a dtype it lacks.
fn dtype_of(name: &str) -> PyResult<nums_layout::DType> {
    nums_layout::DType::parse(name).ok_or_else(|| {
        PyTypeError::new_err(format!(
            "nums-cloud has no dtype {name}: its dtypes are {}",
            nums_layout::DType::supported()
        ))
    })
}

/// The engine's name of a dtype name (`double`, `f8`, `<f8` are `float64`).
#[pyfunction]
fn dtype_name(name: &str) -> PyResult<&'static str> {
    Ok(dtype_of(name)?.name())
}

/// The engine's dtypes, in NumPy's order of kinds.
#[pyfunction]
fn dtypes() -> Vec<&'static str> {
    nums_layout::DType::ALL
        .map(nums_layout::DType::name)
        .to_vec()
}

/// The Array API's default dtypes: those of Python's numbers as arrays.
#[pyfunction]
fn default_dtypes() -> Vec<(&'static str, &'static str)> {
    use nums_layout::{DType, meta::ScalarKind as K};
    vec![
        ("real floating", DType::of_kind(K::Float).name()),
        ("complex floating", DType::of_kind(K::Complex).name()),
        ("integral", DType::of_kind(K::Int).name()),
        ("indexing", DType::of_kind(K::Int).name()),
    ]
}

/// Whether the dtype `name` is of the Array API's `kind` (ValueError for another kind).
#[pyfunction]
fn isdtype(name: &str, kind: &str) -> PyResult<bool> {
    dtype_of(name)?
        .is_kind(kind)
        .ok_or_else(|| PyValueError::new_err(format!("unknown data type kind {kind:?}")))
}

/// NumPy's "safe" cast between two dtype names.
#[pyfunction]
fn can_cast(from: &str, to: &str) -> PyResult<bool> {
    Ok(dtype_of(from)?.can_cast(dtype_of(to)?))
}

/// NumPy's `result_type` (NEP 50) of arrays, dtype names, NumPy scalars (their dtype)
/// and Python numbers (weak: their kind only).
#[pyfunction]
#[pyo3(signature = (*items))]
fn result_type(items: &Bound<'_, PyTuple>) -> PyResult<&'static str> {
    use nums_layout::meta::ScalarKind as K;
    let (mut dtypes, mut scalars) = (Vec::new(), Vec::new());
    for o in items.iter() {
        if let Ok(a) = o.cast::<PyArr>() {
            dtypes.push(dtype_of(&a.get().a.dtype().py()?.to_string())?);
        } else if let Ok(name) = o.extract::<String>() {
            dtypes.push(dtype_of(&name)?);
        } else {
            match arg(&o)? {
                Arg::NumPy(_, d) => dtypes.push(d),
                Arg::Bool(_) => scalars.push(K::Bool),
                Arg::Int(_) | Arg::UInt(_) => scalars.push(K::Int),
                Arg::Float(_) => scalars.push(K::Float),
                Arg::Complex(..) => scalars.push(K::Complex),
                _ => {
                    return Err(PyTypeError::new_err(format!(
                        "result_type() cannot take a {}",
                        o.get_type().name()?
                    )));
                }
            }
        }
    }
    nums_layout::DType::result_type(&dtypes, &scalars)
        .map(nums_layout::DType::name)
        .ok_or_else(|| PyValueError::new_err("at least one array or dtype is required"))
}

/// Each model of the table and its keywords' defaults (the Python estimators' are
/// checked against these).
#[pyfunction]
fn models(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    use api::models::ParamDefault as D;
    let out = PyDict::new(py);
    for m in api::models::MODELS {
        let params = PyDict::new(py);
        for &(name, d) in m.params {
            match d {
                D::Number(v) => params.set_item(name, v)?,
                D::Int(v) => params.set_item(name, v)?,
                D::Bool(v) => params.set_item(name, v)?,
                D::Str(v) => params.set_item(name, v)?,
            }
        }
        out.set_item(m.function, params)?;
    }
    Ok(out)
}

/// Every name a fit's `solver` may be.
#[pyfunction]
fn solvers() -> Vec<&'static str> {
    api::models::SOLVER_NAMES.iter().map(|(n, _)| *n).collect()
}

/// The function loop of a local function process (what `nums-cloud function` runs):
/// polls the local endpoint named by `AWS_LAMBDA_RUNTIME_API` until the process is
/// stopped. Run by `python -m nums_cloud._function`.
#[pyfunction]
fn serve_function(py: Python<'_>) -> PyResult<()> {
    py.detach(|| {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        rt.block_on(nums_function::runtime::serve())
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))
    })
}

#[pymodule]
#[pyo3(name = "_native")]
fn native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Computes in this process reuse the blocks the ones before them freed (a share of
    // the memory tier's default budget), as the function processes do.
    nums_function::memory::keep_freed_blocks(nums_cloud::api::default_memory_tier_bytes());
    m.add_class::<PyArr>()?;
    m.add_class::<PySession>()?;
    m.add_function(wrap_pyfunction!(functions, m)?)?;
    for f in [
        wrap_pyfunction!(dtype_name, m)?,
        wrap_pyfunction!(dtypes, m)?,
        wrap_pyfunction!(default_dtypes, m)?,
        wrap_pyfunction!(isdtype, m)?,
        wrap_pyfunction!(can_cast, m)?,
        wrap_pyfunction!(result_type, m)?,
        wrap_pyfunction!(models, m)?,
        wrap_pyfunction!(solvers, m)?,
    ] {
        m.add_function(f)?;
    }
    m.add_function(wrap_pyfunction!(serve_function, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("IN_PROCESS_BYTES", api::IN_PROCESS_BYTES)?;
    Ok(())
}
