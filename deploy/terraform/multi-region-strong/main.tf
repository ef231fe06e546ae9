# The lock table as a global table with multi-Region strong consistency
# (MRSC): a conditional write is linearizable across its Regions, so
# clients in all three may share locks (the library accepts such a table;
# one with multi-Region eventual consistency it refuses). MRSC needs three
# Regions of one set (here us-east-1, us-east-2, us-west-2) and has no
# transactions: AcquireLocks and a fair semaphore of more than one slot
# return ErrUnsupportedOperation on it. docs/DEPLOY.md has the rest.

terraform {
  required_version = ">= 1.5"
  required_providers {
    aws = {
      source  = "hashicorp/aws"
      version = ">= 6.0"
    }
  }
}

provider "aws" {
  region = "us-east-1"
}

variable "table_name" {
  type    = string
  default = "locks"
}

variable "ttl_attribute" {
  description = "Give clients WithTTLAttribute with the same name."
  type        = string
  default     = "ttl"
}

variable "point_in_time_recovery" {
  description = "Off by default: see docs/DEPLOY.md."
  type        = bool
  default     = false
}

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

  replica {
    region_name      = "us-east-2"
    consistency_mode = "STRONG"
  }

  replica {
    region_name      = "us-west-2"
    consistency_mode = "STRONG"
  }

  deletion_protection_enabled = true
}
