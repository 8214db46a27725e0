//! The blocking forms (`compute_blocking`, ...): run a future to its end from code that is
//! not async, whether or not a tokio runtime is running around it.

use std::future::Future;

use tokio::runtime::{Handle, RuntimeFlavor};

use crate::error::Error;

fn own_runtime() -> Result<tokio::runtime::Runtime, Error> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::Runtime {
            message: format!("cannot start a tokio runtime: {e}"),
        })
}

/// Runs `f` to its end: outside a runtime on one of its own; in a multi-thread runtime on
/// that runtime (`block_in_place` hands this worker's other tasks to the other workers);
/// in a current-thread runtime on a thread and runtime of its own (blocking the caller's
/// thread, whose other tasks wait meanwhile, as with any blocking call).
pub(crate) fn block_on<F>(f: F) -> Result<F::Output, Error>
where
    F: Future + Send,
    F::Output: Send,
{
    match Handle::try_current() {
        Err(_) => Ok(own_runtime()?.block_on(f)),
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            Ok(tokio::task::block_in_place(|| h.block_on(f)))
        }
        Ok(_) => std::thread::scope(|scope| {
            let t = scope.spawn(|| own_runtime().map(|rt| rt.block_on(f)));
            t.join().unwrap_or_else(|p| std::panic::resume_unwind(p))
        }),
    }
}
