//! The Lambda entry point (provided.al2023 runtime): serves batches until Lambda stops it.

#[global_allocator]
static ALLOC: nums_function::memory::BlockAllocator = nums_function::memory::BlockAllocator;

/// glibc 2.35 gave `hypot` a new symbol version, so a bootstrap linked on a newer glibc
/// would ask for `hypot@GLIBC_2.35`, which Amazon Linux 2023 (glibc 2.34) lacks, and fail
/// to start. Defined here, the binary's own `hypot` (musl's, through `libm`) is the one
/// every call binds to (complex `abs`, `hypot`), and nothing is looked up at load time.
#[unsafe(no_mangle)]
pub extern "C" fn hypot(x: f64, y: f64) -> f64 {
    libm::hypot(x, y)
}

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    nums_function::runtime::serve().await
}
