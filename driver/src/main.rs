//! `nums-cloud`: run NumPy-like array jobs on serverless functions. The command line is
//! [`nums_cloud::cli`].

/// The function processes this program serves (`nums-cloud function`) keep freed blocks
/// for reuse; the driver's allocations pass straight to the system's allocator.
#[global_allocator]
static ALLOC: nums_function::memory::BlockAllocator = nums_function::memory::BlockAllocator;

fn main() -> std::process::ExitCode {
    nums_cloud::cli::main()
}
