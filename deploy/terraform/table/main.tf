# The lock table of github.com/arielsrv/dynamolock/v2, in one Region, with the
# IAM policy its clients need and, optionally, a resource-based policy that
# shares it with principals of other accounts (they name it by its ARN).
# docs/DEPLOY.md explains each choice; TestDeploymentsMatchTheLibrary
# (deploy_test.go) keeps the names and actions in step with the library.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0"
    }
  }
}

variable "table_name" {
  description = "The lock table's name: New(db, name), or its ARN from another account."
  type        = string
  default     = "locks"
}

variable "ttl_attribute" {
  description = "The attribute DynamoDB's TTL reads: give clients WithTTLAttribute with the same name."
  type        = string
  default     = "ttl"
}

variable "point_in_time_recovery" {
  description = "Off by default: a restored lock table rolls fencing tokens back and revives dead holders (docs/DEPLOY.md)."
  type        = bool
  default     = false
}

variable "shared_with" {
  description = "IAM principals (role ARNs) of other accounts allowed to use the table by its ARN; empty: not shared."
  type        = list(string)
  default     = []
}

data "aws_caller_identity" "current" {}
data "aws_region" "current" {}

resource "aws_dynamodb_table" "locks" {
  name         = var.table_name
  billing_mode = "PAY_PER_REQUEST"
  hash_key     = "key"

  attribute {
    name = "key"
    type = "S"
  }

  ttl {
    attribute_name = var.ttl_attribute
    enabled        = true
  }

  point_in_time_recovery {
    enabled = var.point_in_time_recovery
  }

  deletion_protection_enabled = true
}

locals {
  # The policies are the JSON documents of deploy/iam, their placeholders
  # replaced: one source for Terraform, the docs and the test.
  table_placeholder  = "arn:aws:dynamodb:REGION:ACCOUNT:table/locks"
  global_placeholder = "arn:aws:dynamodb::ACCOUNT:global-table/locks"
  global_table_arn   = "arn:aws:dynamodb::${data.aws_caller_identity.current.account_id}:global-table/${var.table_name}"
}

# What the lock clients of this account need (attach it to their role).
resource "aws_iam_policy" "dynamolock" {
  name        = "${var.table_name}-dynamolock"
  description = "dynamolock clients of table ${var.table_name}"
  policy = replace(replace(file("${path.module}/../../iam/dynamolock-policy.json"),
  local.table_placeholder, aws_dynamodb_table.locks.arn), local.global_placeholder, local.global_table_arn)
}

# Shares the table with the principals of other accounts: they also need
# the actions in their own identity policy, naming this table's ARN.
resource "aws_dynamodb_resource_policy" "shared" {
  count        = length(var.shared_with) > 0 ? 1 : 0
  resource_arn = aws_dynamodb_table.locks.arn
  policy = replace(replace(file("${path.module}/../../iam/lock-table-resource-policy.json"),
    local.table_placeholder, aws_dynamodb_table.locks.arn),
  "\"arn:aws:iam::CONSUMER_ACCOUNT:role/lock-clients\"", jsonencode(var.shared_with))
}

output "table_arn" {
  description = "What another account's clients give New."
  value       = aws_dynamodb_table.locks.arn
}

output "policy_arn" {
  value = aws_iam_policy.dynamolock.arn
}
