# nums-cloud on AWS: one bucket for job data, one Lambda function that runs batches, a
# role that lets it touch only the bucket's job prefix and its own log group, and a
# policy for the driver (the user who runs `nums-cloud run`).

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  # The objects jobs use, and the prefix as ListBucket sees it.
  objects_arn = "${aws_s3_bucket.data.arn}/${var.prefix}/*"
  list_prefix = "${var.prefix}/*"
  log_group   = "/aws/lambda/${var.name}"
  # Intermediates (<job>/_tmp/ blocks and <job>/_batches/ staged payloads) carry this tag;
  # S3 lifecycle filters take no wildcard, so the tag is what lets one rule find them
  # under every job's prefix. Same pair as nums_layout::store::INTERMEDIATE_TAG.
  intermediate_tag = { key = "nums-cloud", value = "intermediate" }
}

# ---------------------------------------------------------------- bucket

resource "aws_s3_bucket" "data" {
  # checkov:skip=CKV_AWS_18:Server access logs would add one log object per block request; use CloudTrail data events where an audit trail is needed
  # checkov:skip=CKV_AWS_144:Job data is reproducible from the job file and its inputs; cross-region replication would double storage and PUT costs
  # checkov:skip=CKV_AWS_145:SSE-S3 (AES-256) encrypts at rest; a KMS CMK would add a KMS request to every block read and write
  # checkov:skip=CKV2_AWS_62:Nothing consumes bucket events; the driver learns of results from the invocations
  bucket        = var.bucket_name
  force_destroy = var.force_destroy
  tags          = var.tags
}

resource "aws_s3_bucket_public_access_block" "data" {
  bucket                  = aws_s3_bucket.data.id
  block_public_acls       = true
  block_public_policy     = true
  ignore_public_acls      = true
  restrict_public_buckets = true
}

resource "aws_s3_bucket_ownership_controls" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    object_ownership = "BucketOwnerEnforced"
  }
}

resource "aws_s3_bucket_server_side_encryption_configuration" "data" {
  bucket = aws_s3_bucket.data.id
  rule {
    apply_server_side_encryption_by_default {
      sse_algorithm = "AES256"
    }
  }
}

resource "aws_s3_bucket_versioning" "data" {
  bucket = aws_s3_bucket.data.id
  versioning_configuration {
    status = "Enabled"
  }
}

resource "aws_s3_bucket_lifecycle_configuration" "data" {
  bucket = aws_s3_bucket.data.id

  rule {
    id     = "expire-job-intermediates"
    status = "Enabled"
    filter {
      tag {
        key   = local.intermediate_tag.key
        value = local.intermediate_tag.value
      }
    }
    expiration {
      days = var.intermediate_expiry_days
    }
  }

  rule {
    id     = "expire-old-versions-and-uploads"
    status = "Enabled"
    filter {}
    noncurrent_version_expiration {
      noncurrent_days = var.noncurrent_version_expiry_days
    }
    expiration {
      expired_object_delete_marker = true
    }
    abort_incomplete_multipart_upload {
      days_after_initiation = 1
    }
  }

  depends_on = [aws_s3_bucket_versioning.data]
}

data "aws_iam_policy_document" "bucket" {
  statement {
    sid     = "DenyInsecureTransport"
    effect  = "Deny"
    actions = ["s3:*"]
    resources = [
      aws_s3_bucket.data.arn,
      "${aws_s3_bucket.data.arn}/*",
    ]
    principals {
      type        = "*"
      identifiers = ["*"]
    }
    condition {
      test     = "Bool"
      variable = "aws:SecureTransport"
      values   = ["false"]
    }
  }
}

resource "aws_s3_bucket_policy" "data" {
  bucket = aws_s3_bucket.data.id
  policy = data.aws_iam_policy_document.bucket.json
  # The public access block first, so the policy is never applied to an open bucket.
  depends_on = [aws_s3_bucket_public_access_block.data]
}

# ---------------------------------------------------------------- logs

resource "aws_cloudwatch_log_group" "function" {
  # checkov:skip=CKV_AWS_158:The logs hold error messages and start-up lines, no array data; the AWS-managed key encrypts them at rest
  # checkov:skip=CKV_AWS_338:Retention is a variable (default 30 days): logs of batch runs are for debugging, not audit
  name              = local.log_group
  retention_in_days = var.log_retention_days
  tags              = var.tags
}

# ---------------------------------------------------------------- function role

data "aws_iam_policy_document" "assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["lambda.amazonaws.com"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [data.aws_caller_identity.current.account_id]
    }
  }
}

resource "aws_iam_role" "function" {
  name               = "${var.name}-function"
  assume_role_policy = data.aws_iam_policy_document.assume.json
  tags               = var.tags
}

# What the function does: reads blocks and staged batches, writes blocks (tagging the
# intermediates), and lists only under the job prefix (which also makes a missing key a
# 404, not a 403). It never deletes: clean-up is the driver's.
data "aws_iam_policy_document" "function" {
  statement {
    sid       = "JobObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging"]
    resources = [local.objects_arn]
  }
  statement {
    sid       = "ListJobPrefix"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [local.list_prefix]
    }
  }
  statement {
    sid       = "OwnLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = ["${aws_cloudwatch_log_group.function.arn}:*"]
  }
}

resource "aws_iam_role_policy" "function" {
  name   = "${var.name}-function"
  role   = aws_iam_role.function.id
  policy = data.aws_iam_policy_document.function.json
}

# ---------------------------------------------------------------- function

resource "aws_lambda_function" "batch" {
  # checkov:skip=CKV_AWS_116:Invoked synchronously by the driver, which retries and reports; a dead-letter queue only serves asynchronous invocations
  # checkov:skip=CKV_AWS_117:The function talks only to S3 and CloudWatch Logs; a VPC would need NAT or endpoints and adds cold-start time for no isolation gain
  # checkov:skip=CKV_AWS_173:The environment holds no secret (the allowed store URL); the AWS-managed key encrypts it at rest
  # checkov:skip=CKV_AWS_272:The zip is built from source by `nums-cloud package` on the deployer's machine; code signing needs an AWS Signer profile, left to who needs it
  function_name                  = var.name
  description                    = "nums-cloud: runs one batch of block tasks per invocation"
  role                           = aws_iam_role.function.arn
  runtime                        = "provided.al2023"
  handler                        = "bootstrap"
  architectures                  = [var.architecture]
  filename                       = var.zip_path
  source_code_hash               = filebase64sha256(var.zip_path)
  memory_size                    = var.memory_mb
  timeout                        = var.timeout_seconds
  reserved_concurrent_executions = var.reserved_concurrency

  environment {
    variables = {
      # The function refuses a batch naming any other store (see docs/deploy.md).
      NUMS_ALLOWED_STORE = "s3://${aws_s3_bucket.data.id}/${var.prefix}"
    }
  }

  tracing_config {
    mode = "PassThrough"
  }

  logging_config {
    log_format = "Text"
    log_group  = aws_cloudwatch_log_group.function.name
  }

  tags       = var.tags
  depends_on = [aws_iam_role_policy.function]
}

# ---------------------------------------------------------------- driver policy

# What `nums-cloud run` needs: invoke this one function, and read, write, list and delete
# (intermediates, at the end of a job) under the job prefix. Attach it to the user or role
# that runs the driver.
data "aws_iam_policy_document" "driver" {
  statement {
    sid       = "InvokeFunction"
    actions   = ["lambda:InvokeFunction"]
    resources = [aws_lambda_function.batch.arn]
  }
  statement {
    sid       = "JobObjects"
    actions   = ["s3:GetObject", "s3:PutObject", "s3:PutObjectTagging", "s3:DeleteObject"]
    resources = [local.objects_arn]
  }
  statement {
    sid       = "ListJobPrefix"
    actions   = ["s3:ListBucket"]
    resources = [aws_s3_bucket.data.arn]
    condition {
      test     = "StringLike"
      variable = "s3:prefix"
      values   = [local.list_prefix]
    }
  }
}

resource "aws_iam_policy" "driver" {
  name        = "${var.name}-driver"
  description = "Run nums-cloud jobs: invoke ${var.name}, use s3://${var.bucket_name}/${var.prefix}"
  policy      = data.aws_iam_policy_document.driver.json
  tags        = var.tags
}
