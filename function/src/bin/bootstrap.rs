//! The Lambda entry point (provided.al2023 runtime): serves batches until Lambda stops it.

#[tokio::main]
async fn main() -> Result<(), lambda_runtime::Error> {
    nums_function::runtime::serve().await
}
