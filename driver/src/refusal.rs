//! What NumPy raises for a refusal: the one table from a refused operation to the Python
//! exception class a binding raises (never chosen from a message's words), and a refusal
//! with its class for the checks that have no position to point at.

/// The Python exception NumPy raises for a refused operation, which a binding raises for
/// [`Error::Job`](crate::Error::Job): the one table from refusal to exception class (a binding never reads
/// the message to choose).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum PyException {
    /// A value, shape or argument NumPy refuses (the default).
    #[default]
    ValueError,
    /// An operation NumPy's dtypes have no loop or cast for (`ones(3) & ones(3)`).
    TypeError,
    /// An index out of bounds.
    IndexError,
    /// A Python int that does not fit the array's dtype (`int8_array + 300`).
    OverflowError,
    /// A division by a zero total (`average` with weights adding up to 0).
    ZeroDivisionError,
    /// An axis out of bounds: NumPy's `AxisError`, both a ValueError and an IndexError.
    AxisError,
    /// A linear-algebra failure (a singular matrix, one not positive definite, a fit's
    /// linearly dependent columns): `numpy.linalg.LinAlgError`.
    LinAlgError,
}

impl PyException {
    /// Python's name of the class.
    pub fn name(self) -> &'static str {
        match self {
            PyException::ValueError => "ValueError",
            PyException::TypeError => "TypeError",
            PyException::IndexError => "IndexError",
            PyException::OverflowError => "OverflowError",
            PyException::ZeroDivisionError => "ZeroDivisionError",
            PyException::AxisError => "AxisError",
            PyException::LinAlgError => "LinAlgError",
        }
    }
}

/// A refusal with the exception NumPy (or Python, for two Python numbers) raises for it:
/// what the engine's checks return where they have no position to point at.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Refusal {
    pub raises: PyException,
    pub message: String,
}

impl Refusal {
    pub(crate) fn new(raises: PyException, message: impl Into<String>) -> Refusal {
        Refusal {
            raises,
            message: message.into(),
        }
    }

    /// The same refusal, its message after `what` (the function's name: `trace(): `).
    pub(crate) fn after(self, what: &str) -> Refusal {
        Refusal::new(self.raises, format!("{what}{}", self.message))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// An engine step that refuses what the data holds (a fit's labels) returns it inside an
/// `anyhow` error: `Error::classify` makes it an `Error::Refused`.
impl std::error::Error for Refusal {}

/// A refusal NumPy makes with a ValueError.
impl From<String> for Refusal {
    fn from(message: String) -> Refusal {
        Refusal::new(PyException::ValueError, message)
    }
}

impl From<&str> for Refusal {
    fn from(message: &str) -> Refusal {
        Refusal::new(PyException::ValueError, message)
    }
}
