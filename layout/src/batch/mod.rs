//! What travels between driver and function, in files of one idea each:
//! - `ops.rs`: the element ops' meaning (NumPy's loops: unary, binary, reductions,
//!   quantile methods), which kernels apply;
//! - `kernel.rs`: what a task computes ([`Kernel`]) and its parameters;
//! - `workspace.rs`: the kernels' memory model, what a kernel holds beyond its blocks;
//! - `wire.rs`: the batch of block tasks, the invocation payload that carries it, and the
//!   stats a function measures.
//!
//! Everything is re-exported here, so `batch::Kernel`, `batch::Batch` and the rest keep
//! their one path.

mod kernel;
mod ops;
mod wire;
mod workspace;

pub use kernel::{
    CSV_PIECE, DetOutput, ETAG_BYTES, FftKind, Frame, GLM_COUNTS, GlmCount, GlmLoss, Kernel,
    LstsqOutput, QrOutput, RandomDist, SvdOutput, Twiddle, is_linalg,
};
pub use ops::{
    BinaryOp, NEGATIVE_POWER, QuantileMethod, ReduceOp, UnaryOp, compute_dtype, divmod,
    floor_div_i64, logaddexp, maximum, minimum, mod_i64, nextafter, nextafter_f32, pow_i64,
    unary_compute_dtype,
};
pub use wire::{ArrayRef, Batch, BlockRef, PAYLOAD_LIMIT, Payload, Progress, Stats, Task};
pub use workspace::{
    binary_cast_bytes, cast_bytes, cast_workspace, element_workspace, kernel_workspace,
    workspace_bytes,
};
