variable "name" {
  description = "Name of the function, its role, log group and policies."
  type        = string
  default     = "nums-cloud"
  validation {
    condition     = can(regex("^[A-Za-z0-9_-]{1,56}$", var.name))
    error_message = "name: letters, digits, '-' or '_', at most 56 characters (Lambda and IAM names)."
  }
}

variable "bucket_name" {
  description = "Name of the S3 bucket the module creates for job data (globally unique)."
  type        = string
}

variable "prefix" {
  description = "Key prefix inside the bucket that jobs use (the job file's storage url is s3://BUCKET/PREFIX); the function and the driver may touch nothing else."
  type        = string
  default     = "jobs"
  validation {
    condition     = can(regex("^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$", var.prefix))
    error_message = "prefix: a non-empty key prefix without leading or trailing '/', such as \"jobs\"."
  }
}

variable "zip_path" {
  description = "The deployment zip made by `nums-cloud package` (bootstrap at its root)."
  type        = string
}

variable "architecture" {
  description = "Lambda architecture; must match `nums-cloud package --arch`."
  type        = string
  default     = "x86_64"
  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture: x86_64 or arm64."
  }
}

variable "memory_mb" {
  description = "Memory of one invocation in MB; the job file's [compute] memory_mb should match it."
  type        = number
  default     = 2048
  validation {
    condition     = var.memory_mb >= 128 && var.memory_mb <= 10240
    error_message = "memory_mb: 128 to 10240 (Lambda's limits)."
  }
}

variable "timeout_seconds" {
  description = "Timeout of one invocation in seconds."
  type        = number
  default     = 900
  validation {
    condition     = var.timeout_seconds >= 1 && var.timeout_seconds <= 900
    error_message = "timeout_seconds: 1 to 900 (Lambda's limits)."
  }
}

variable "reserved_concurrency" {
  description = "Concurrent executions reserved for (and capping) the function; [compute] workers above it are throttled (and backed off from)."
  type        = number
  default     = 20
  validation {
    condition     = var.reserved_concurrency >= 1
    error_message = "reserved_concurrency: at least 1."
  }
}

variable "log_retention_days" {
  description = "Days CloudWatch keeps the function's logs."
  type        = number
  default     = 30
}

variable "intermediate_expiry_days" {
  description = "Days after which job intermediates (objects tagged nums-cloud=intermediate) left by an interrupted or --keep run expire."
  type        = number
  default     = 7
}

variable "noncurrent_version_expiry_days" {
  description = "Days an overwritten or deleted object version is kept (versioning is on, to undo an accidental delete)."
  type        = number
  default     = 1
}

variable "force_destroy" {
  description = "Let `terraform destroy` delete a bucket that still holds objects."
  type        = bool
  default     = false
}

variable "tags" {
  description = "Tags for every resource."
  type        = map(string)
  default     = {}
}
