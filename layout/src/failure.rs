//! Why an invocation failed, as the function reports it (Lambda's `errorType`) and the
//! driver reads it: the one list of failure kinds and their wire names, shared by the
//! function, the local endpoint and the dispatcher.

/// A failed invocation's kind. Its wire name is what Lambda carries as `errorType`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// A store request failed (network, throttling, an outage): another try may pass.
    Store,
    /// A write found the store's disk full (or a quota reached): no retry helps.
    StoreFull,
    /// A block that should exist is not in the store.
    MissingBlock,
    /// A block's bytes do not decode (checksum, size).
    CorruptBlock,
    /// An array's metadata is unusable.
    BadArray,
    /// The batch names an array outside its job prefix, or a store the function may not use.
    OutsideJobPrefix,
    /// A kernel refused its inputs.
    Kernel,
    /// A linear-algebra kernel found its input singular or not positive definite.
    LinAlg,
    /// A kernel refused its values as NumPy refuses them with a ValueError (a histogram's
    /// autodetected range that is not finite): only the data could show it.
    ValueError,
    /// A kernel refused its values as NumPy does with a TypeError.
    TypeError,
    /// A kernel divided by a zero total as NumPy refuses to (`average`'s weights).
    ZeroDivisionError,
    /// The payload is not a batch.
    BadPayload,
    /// The process went over `memory_mb` (Lambda's `Runtime.OutOfMemory`).
    OutOfMemory,
    /// The invocation ran past `timeout_seconds` (`Function.TimedOut`; older Lambda
    /// runtimes say `Sandbox.Timedout`).
    TimedOut,
    /// The process died some other way: a signal, an abort (`Runtime.ExitError`).
    Crashed,
    /// The response was over the payload limit (`Function.ResponseSizeTooLarge`).
    ResponseTooLarge,
    /// The function process could not be started (`Runtime.InvalidEntrypoint`).
    CannotStart,
    /// Anything else Lambda reports (`Runtime.Unknown`, ...).
    Other,
}

impl ErrorKind {
    /// Every kind, for tests and docs.
    pub const ALL: [ErrorKind; 18] = [
        ErrorKind::Store,
        ErrorKind::StoreFull,
        ErrorKind::MissingBlock,
        ErrorKind::CorruptBlock,
        ErrorKind::BadArray,
        ErrorKind::OutsideJobPrefix,
        ErrorKind::Kernel,
        ErrorKind::LinAlg,
        ErrorKind::ValueError,
        ErrorKind::TypeError,
        ErrorKind::ZeroDivisionError,
        ErrorKind::BadPayload,
        ErrorKind::OutOfMemory,
        ErrorKind::TimedOut,
        ErrorKind::Crashed,
        ErrorKind::ResponseTooLarge,
        ErrorKind::CannotStart,
        ErrorKind::Other,
    ];

    /// The `errorType` string on the wire.
    pub fn wire_name(self) -> &'static str {
        match self {
            ErrorKind::Store => "StoreError",
            ErrorKind::StoreFull => "StoreFull",
            ErrorKind::MissingBlock => "MissingBlock",
            ErrorKind::CorruptBlock => "CorruptBlock",
            ErrorKind::BadArray => "BadArray",
            ErrorKind::OutsideJobPrefix => "OutsideJobPrefix",
            ErrorKind::Kernel => "KernelError",
            ErrorKind::LinAlg => "LinAlgError",
            ErrorKind::ValueError => "ValueError",
            ErrorKind::TypeError => "TypeError",
            ErrorKind::ZeroDivisionError => "ZeroDivisionError",
            ErrorKind::BadPayload => "BadPayload",
            ErrorKind::OutOfMemory => "Runtime.OutOfMemory",
            ErrorKind::TimedOut => "Function.TimedOut",
            ErrorKind::Crashed => "Runtime.ExitError",
            ErrorKind::ResponseTooLarge => "Function.ResponseSizeTooLarge",
            ErrorKind::CannotStart => "Runtime.InvalidEntrypoint",
            ErrorKind::Other => "Runtime.Unknown",
        }
    }

    /// The kind of an `errorType` string (unknown strings are [`ErrorKind::Other`]).
    pub fn from_wire(s: &str) -> ErrorKind {
        if s == "Sandbox.Timedout" {
            return ErrorKind::TimedOut;
        }
        ErrorKind::ALL
            .into_iter()
            .find(|k| k.wire_name() == s)
            .unwrap_or(ErrorKind::Other)
    }

    /// The kind of a kernel's error message: one that starts with the wire name of a
    /// refusal NumPy makes (`"LinAlgError: Singular matrix"`, `"ValueError: ..."`) is that
    /// refusal, any other a [`ErrorKind::Kernel`] error.
    pub fn of_kernel_message(message: &str) -> ErrorKind {
        [
            ErrorKind::LinAlg,
            ErrorKind::ValueError,
            ErrorKind::TypeError,
            ErrorKind::ZeroDivisionError,
        ]
        .into_iter()
        .find(|k| {
            message
                .strip_prefix(k.wire_name())
                .is_some_and(|r| r.starts_with(": "))
        })
        .unwrap_or(ErrorKind::Kernel)
    }

    /// How the driver retries an invocation that failed this way.
    pub fn retry(self) -> Retry {
        match self {
            // The function's store client has already retried each request; what reaches
            // the driver is an outage, waited out for a time budget, not a count.
            ErrorKind::Store => Retry::WithinBudget,
            // A process that died without going over memory_mb (a signal, an abort, a lost
            // host) or an unknown runtime failure: another process may well succeed.
            ErrorKind::Crashed | ErrorKind::Other => Retry::Attempts,
            // Out of memory, timeouts, refused keys and bad data fail the same way again.
            _ => Retry::Never,
        }
    }

    /// Whether sending the same invocation again may succeed.
    pub fn retryable(self) -> bool {
        self.retry() != Retry::Never
    }
}

/// How a failure is retried (see [`ErrorKind::retry`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Not at all: the same invocation fails the same way.
    Never,
    /// A few times, with backoff.
    Attempts,
    /// With backoff until a time budget has passed since the batch first failed so.
    WithinBudget,
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.wire_name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_names_round_trip() {
        for k in ErrorKind::ALL {
            assert_eq!(ErrorKind::from_wire(k.wire_name()), k);
        }
        assert_eq!(
            ErrorKind::from_wire("Sandbox.Timedout"),
            ErrorKind::TimedOut
        );
        assert_eq!(ErrorKind::from_wire("Something.New"), ErrorKind::Other);
    }

    /// A store outage is waited out, a crash retried a few times, the rest never.
    #[test]
    fn retry_rules() {
        assert_eq!(ErrorKind::Store.retry(), Retry::WithinBudget);
        assert_eq!(ErrorKind::Crashed.retry(), Retry::Attempts);
        assert_eq!(ErrorKind::Other.retry(), Retry::Attempts);
        for k in ErrorKind::ALL {
            assert_eq!(k.retryable(), k.retry() != Retry::Never, "{k}");
        }
        assert!(!ErrorKind::OutOfMemory.retryable());
        assert!(!ErrorKind::TimedOut.retryable());
    }
}
