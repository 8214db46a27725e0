# The names `nums-cloud run --infra` reads (from `terraform output -json`).

output "function_name" {
  description = "The Lambda function: the job file's [compute] function."
  value       = aws_lambda_function.batch.function_name
}

output "bucket" {
  description = "The S3 bucket for job data."
  value       = aws_s3_bucket.data.id
}

output "region" {
  description = "The region of the function and the bucket."
  value       = data.aws_region.current.region
}

output "storage_url" {
  description = "The job file's [storage] url."
  value       = "s3://${aws_s3_bucket.data.id}/${var.prefix}"
}

output "memory_mb" {
  description = "The function's memory: the job file's [compute] memory_mb should not exceed it."
  value       = var.memory_mb
}

output "reserved_concurrency" {
  description = "The function's concurrency cap: keep [compute] workers at or below it."
  value       = var.reserved_concurrency
}

output "driver_policy_arn" {
  description = "Attach to the user or role that runs nums-cloud."
  value       = aws_iam_policy.driver.arn
}

output "driver_policy_json" {
  description = "The same driver policy as JSON."
  value       = data.aws_iam_policy_document.driver.json
}
