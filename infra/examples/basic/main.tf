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
  region  = var.region
  profile = var.profile
}

variable "region" {
  description = "AWS region for the bucket and the function."
  type        = string
  default     = "us-east-1"
}

variable "profile" {
  description = "The AWS profile (~/.aws/config) to deploy with; null: AWS_PROFILE, else the default chain."
  type        = string
  default     = null
}

variable "bucket_name" {
  description = "A globally unique bucket name; null: nums-cloud-<account id>-<region>."
  type        = string
  default     = null
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

variable "memory_mb" {
  description = "Memory of one invocation in MB (128 to 10240): what every batch is planned to fit."
  type        = number
  default     = 2048
}

data "aws_caller_identity" "current" {}

locals {
  # The account id makes the default name globally unique without asking for one.
  bucket_name = coalesce(var.bucket_name, "nums-cloud-${data.aws_caller_identity.current.account_id}-${var.region}")
}

module "nums_cloud" {
  source               = "../../modules/nums-cloud"
  bucket_name          = local.bucket_name
  zip_path             = var.zip_path
  architecture         = var.architecture
  memory_mb            = var.memory_mb
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

# The profile it was deployed with: nums_cloud.init(infra=...) uses it when AWS_PROFILE is
# not set (a null profile is no output).
output "profile" {
  value = var.profile
}
