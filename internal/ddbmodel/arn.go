package ddbmodel

import (
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// Table ARNs. DynamoDB accepts a table's ARN wherever a data plane
// operation or DescribeTable takes a table name ("table name
// overloading", the Developer Guide's "DynamoDB API operations supported
// by resource-based policies"): how a table shared with another account
// is named. CreateTable takes a name only. The model is one account in one
// Region of the aws partition: an ARN names its table by the name after
// "table/", whatever its Region and account, as DynamoDB Local resolves
// one; an ARN of another partition, service or resource type is refused
// with the service's message.

const msgBadARN = "Valid ARN format is 'arn:<awsPartition>:<vendor>:<region>:<subscriber>:resourceType/resourceName', " +
	"where Resource name must have length less than or equal to 255, Resource name must have length greater than or equal to 3, " +
	"Resource name must satisfyregular expression pattern: [a-zA-Z0-9_.-]+"

const msgBadTableName = "Invalid table/index name.  Table/index names must be between 3 and 255 characters long, and may contain only the characters a-z, A-Z, 0-9, '_', '-', and '.'"

// tableNameOf returns the name of the table that name (a request's
// TableName) names: itself, or the name in a table ARN.
func tableNameOf(name *string) (string, error) {
	s := aws.ToString(name)
	if strings.HasPrefix(s, "arn:") {
		parts := strings.SplitN(s, ":", 6)
		if len(parts) != 6 || parts[1] != "aws" || parts[2] != "dynamodb" || strings.Contains(parts[5], ":") ||
			!strings.HasPrefix(parts[5], "table/") {
			return "", validation("%s", msgBadARN)
		}
		s = strings.TrimPrefix(parts[5], "table/")
	}
	if !tableNamePattern.MatchString(s) {
		return "", validation("%s", msgBadTableName)
	}
	return s, nil
}

// checkTableName validates a request's TableName: a table name or a table
// ARN.
func checkTableName(name *string) error {
	_, err := tableNameOf(name)
	return err
}

// checkNewTableName validates the name of a table to create: a name, not
// an ARN.
func checkNewTableName(name *string) error {
	if !tableNamePattern.MatchString(aws.ToString(name)) {
		return validation("%s", msgBadTableName)
	}
	return nil
}
