//! `nums_cloud::Error`: the library's typed error, which a caller can match on (a bad
//! setting, a refused job, a plan that does not fit, a failed invocation, the store, the
//! data), made by classifying the engine's errors.
#![warn(missing_docs)]

use crate::dispatch::{DispatchError, InvokeError};
use crate::job::JobError;
use nums_layout::ErrorKind;

/// What can go wrong when arrays of a [`Session`](crate::api::Session) are defined or
/// computed.
///
/// Every message names the arrays by the names given with
/// [`Array::named`](crate::api::Array::named), or by the expression that made them
/// (`` `sum(X * 2.0)` ``); never by a temporary job file or an internal name.
///
/// ```
/// use nums_cloud::{Error, api::Session};
/// # fn main() -> Result<(), Error> {
/// # let dir = std::env::temp_dir().join("nums-cloud-doc-error");
/// # let s = Session::new(&format!("file://{}", dir.display()))?
/// #     .function_binary(concat!(env!("CARGO_MANIFEST_DIR"), "/../target/debug/nums-cloud"));
/// let x = s.ones(&[7, 5]).named("X")?;
/// let w = s.ones(&[5, 7]).named("W")?;
/// match (&x + &w).compute_blocking::<f64>() {
///     Err(Error::Job { array, message, .. }) => {
///         assert_eq!(array.as_deref(), Some("X + W"));
///         assert!(message.contains("(7, 5) and (5, 7)"), "{message}");
///     }
///     other => panic!("expected a job error, got {other:?}"),
/// }
/// // The session is not poisoned: other arrays still compute.
/// assert_eq!(x.sum(None).compute_blocking::<f64>()?.sum(), 35.0);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A setting of the session is refused: the storage URL, `workers`, `memory_mb`,
    /// `timeout_seconds`, the deployment file, the AWS region. `setting` is the
    /// [`Session`](crate::api::Session) method's name.
    #[error("{setting}: {message}")]
    Config {
        /// The setting, as the `Session` method that sets it (`memory_mb`, `storage`).
        setting: String,
        /// What is wrong with it.
        message: String,
    },
    /// The arrays are refused as defined, before anything runs (what `nums-cloud check`
    /// refuses): a bad name, expression syntax, an unknown function, shapes that do not
    /// broadcast, dtypes, an input that cannot be read, arrays of two sessions combined.
    #[error("{message}")]
    Job {
        /// The array the error is about (its name, or the expression that made it),
        /// when one is.
        array: Option<String>,
        /// The whole message, naming the array.
        message: String,
        /// The exception NumPy raises for it (a binding raises that class).
        raises: PyException,
    },
    /// The plan does not fit: a block needs more memory than `memory_mb` in one
    /// invocation. The message says the least `memory_mb` with which the arrays plan.
    #[error("{message}")]
    Plan {
        /// The array whose block does not fit, when it is one of the session's arrays.
        array: Option<String>,
        /// The memory the block needs in one invocation, in MiB.
        need_mib: u64,
        /// The session's `memory_mb`.
        memory_mb: u64,
        /// The whole message.
        message: String,
    },
    /// An invocation failed for good (after the retries that could help): out of
    /// memory, timed out, crashed, throttled, refused by Lambda's API. Failures that are
    /// about the store or the data are [`Error::Store`] and [`Error::Data`] instead.
    #[error("{message}")]
    Dispatch {
        /// Why the last attempt failed.
        error: InvokeError,
        /// How many times the invocation was sent.
        attempts: u32,
        /// The whole message, with a hint where one helps.
        message: String,
    },
    /// The store failed: it does not answer, refuses the credentials or writes, or an
    /// array lies outside the function's store.
    #[error("{message}")]
    Store {
        /// The whole message, naming the store and key.
        message: String,
    },
    /// The data is wrong: a block missing or corrupt, unusable array metadata, an input
    /// replaced while it was read. (A singular matrix is NumPy's refusal:
    /// [`Error::Refused`] with [`PyException::LinAlgError`].)
    #[error("{message}")]
    Data {
        /// The whole message, naming the array, block and key.
        message: String,
    },
    /// NumPy's refusal that only the data could show, found while the arrays computed: a
    /// histogram's autodetected range that is not finite, weights that add up to zero.
    /// `raises` is the exception NumPy raises for it.
    #[error("{message}")]
    Refused {
        /// The exception NumPy raises for it.
        raises: PyException,
        /// The whole message, naming the array and block.
        message: String,
    },
    /// The run was stopped by Ctrl-C (SIGINT).
    #[error("interrupted (Ctrl-C)")]
    Interrupted,
    /// A blocking call (`compute_blocking`) could not run: no runtime could be started.
    #[error("{message}")]
    Runtime {
        /// What went wrong.
        message: String,
    },
    /// Anything else (a local file that cannot be written, the local backend's
    /// function processes that cannot be started, ...).
    #[error("{message}")]
    Other {
        /// The whole message.
        message: String,
    },
}

pub use crate::refusal::PyException;
pub(crate) use crate::refusal::Refusal;

/// An engine error explained for the user (`message`, what the CLI prints) that keeps the
/// typed `error` for the library to classify; its message shows nothing more than
/// `message`.
#[derive(Debug)]
pub(crate) struct Explained<E> {
    pub message: String,
    pub error: E,
}

impl<E> std::fmt::Display for Explained<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::fmt::Debug> std::error::Error for Explained<E> {}

impl<E: std::fmt::Debug + Send + Sync + 'static> Explained<E> {
    /// As an `anyhow` error whose text is `message`.
    pub(crate) fn into_anyhow(message: String, error: E) -> anyhow::Error {
        anyhow::Error::new(Explained { message, error })
    }
}

/// Turns an engine message into the user's words: returns the message and the array it
/// is about.
pub(crate) type Humanize<'a> = &'a dyn Fn(&str) -> (String, Option<String>);

impl Error {
    /// Classifies an engine error. `message` is its text with the context that only a
    /// CLI user can act on (`--resume`) left out.
    pub(crate) fn classify(e: &anyhow::Error, message: &str, human: Humanize) -> Error {
        if let Some(f) = e.downcast_ref::<crate::report::RunFailed>() {
            if f.interrupted {
                return Error::Interrupted;
            }
            return Error::classify(&f.error, message, human);
        }
        let (message, array) = human(message);
        if let Some(x) = e.downcast_ref::<Explained<crate::sched::PlanError>>() {
            return Error::Plan {
                array,
                need_mib: x.error.need_mib,
                memory_mb: x.error.limit_mb,
                message,
            };
        }
        if let Some(x) = e.downcast_ref::<Explained<DispatchError>>() {
            return Error::dispatch(&x.error, message);
        }
        if let Some(x) = e.downcast_ref::<DispatchError>() {
            return Error::dispatch(x, message);
        }
        if let Some(j) = e.downcast_ref::<JobError>() {
            if j.key == "storage.url" {
                // The store does not answer or take writes (checked before anything runs).
                return Error::Store { message };
            }
            return Error::job(j, array, message);
        }
        if let Some(x) = e.downcast_ref::<nums_layout::Error>() {
            return Error::layout(x, message);
        }
        if let Some(r) = e.downcast_ref::<Refusal>() {
            return Error::Refused {
                raises: r.raises,
                message,
            };
        }
        if let Some(x) = e.downcast_ref::<crate::runs::RunError>() {
            return match x {
                crate::runs::RunError::Store(l) => Error::layout(l, message),
                _ => Error::Other { message },
            };
        }
        Error::Other { message }
    }

    /// A job-file error: about a setting (`[storage]`, `[compute]`) or an array.
    pub(crate) fn job(j: &JobError, array: Option<String>, message: String) -> Error {
        let setting = |k: &str| match k {
            "storage.url" => "storage".to_string(),
            k => k.rsplit('.').next().unwrap_or(k).to_string(),
        };
        if j.key.starts_with("storage.") || j.key.starts_with("compute.") {
            return Error::Config {
                setting: setting(&j.key),
                message: j.message.clone(),
            };
        }
        Error::Job {
            array,
            message,
            raises: PyException::ValueError,
        }
    }

    fn dispatch(d: &DispatchError, message: String) -> Error {
        match &d.error {
            InvokeError::Function { kind, .. } => match kind {
                ErrorKind::Store | ErrorKind::StoreFull | ErrorKind::OutsideJobPrefix => {
                    Error::Store { message }
                }
                ErrorKind::MissingBlock | ErrorKind::CorruptBlock | ErrorKind::BadArray => {
                    Error::Data { message }
                }
                ErrorKind::LinAlg => Error::Refused {
                    raises: PyException::LinAlgError,
                    message,
                },
                ErrorKind::ValueError => Error::Refused {
                    raises: PyException::ValueError,
                    message,
                },
                ErrorKind::TypeError => Error::Refused {
                    raises: PyException::TypeError,
                    message,
                },
                ErrorKind::ZeroDivisionError => Error::Refused {
                    raises: PyException::ZeroDivisionError,
                    message,
                },
                _ => Error::Dispatch {
                    error: d.error.clone(),
                    attempts: d.attempts,
                    message,
                },
            },
            _ => Error::Dispatch {
                error: d.error.clone(),
                attempts: d.attempts,
                message,
            },
        }
    }

    fn layout(e: &nums_layout::Error, message: String) -> Error {
        match e {
            nums_layout::Error::Store { .. }
            | nums_layout::Error::StoreFull { .. }
            | nums_layout::Error::OutsidePrefix { .. } => Error::Store { message },
            nums_layout::Error::NotFound { .. }
            | nums_layout::Error::Corrupt { .. }
            | nums_layout::Error::Meta { .. } => Error::Data { message },
        }
    }

    /// The array the error is about, for the variants that name one.
    pub fn array(&self) -> Option<&str> {
        match self {
            Error::Job { array, .. } | Error::Plan { array, .. } => array.as_deref(),
            _ => None,
        }
    }
}
