//! The Lambda entry point (provided.al2023 runtime): serves batches until Lambda stops it.

#[global_allocator]
static ALLOC: nums_function::memory::BlockAllocator = nums_function::memory::BlockAllocator;

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    nums_function::runtime::serve().await
}
