# A complete nums-cloud deployment: `terraform init && terraform apply` here, then
# `terraform output -json > terraform-output.json` and `nums-cloud run job.toml --infra terraform-output.json`.
# Step by step: docs/deploy.md.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0, < 7.0"
    }
  }
}

provider "aws" {
  region = var.region
}

variable "region" {
  description = "AWS region for the bucket and the function."
  type        = string
  default     = "us-east-1"
}

variable "bucket_name" {
  description = "A globally unique bucket name, e.g. nums-cloud-<account id>-<region>."
  type        = string
}

variable "zip_path" {
  description = "The zip made by `nums-cloud package`."
  type        = string
  default     = "../../../target/lambda/bootstrap-x86_64.zip"
}

variable "architecture" {
  description = "x86_64 or arm64, as packaged."
  type        = string
  default     = "x86_64"
}

module "nums_cloud" {
  source               = "../../modules/nums-cloud"
  bucket_name          = var.bucket_name
  zip_path             = var.zip_path
  architecture         = var.architecture
  memory_mb            = 2048
  timeout_seconds      = 900
  reserved_concurrency = 20
}

output "function_name" {
  value = module.nums_cloud.function_name
}

output "bucket" {
  value = module.nums_cloud.bucket
}

output "region" {
  value = module.nums_cloud.region
}

output "storage_url" {
  value = module.nums_cloud.storage_url
}

output "memory_mb" {
  value = module.nums_cloud.memory_mb
}

output "reserved_concurrency" {
  value = module.nums_cloud.reserved_concurrency
}

output "driver_policy_arn" {
  value = module.nums_cloud.driver_policy_arn
}
