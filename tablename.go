package dynamolock

import (
	"regexp"
)

// Table names and ARNs. DynamoDB accepts a table's ARN wherever a data
// plane operation or DescribeTable takes its name (since 2024, with
// resource-based policies): a table of another account is named so. The
// client takes either, and sends what it was given; creating a table
// takes a name, in the caller's own account and Region (CreateTable has
// no ARN form).

// tableARNPattern is a table's ARN: arn:PARTITION:dynamodb:REGION:ACCOUNT:table/NAME.
var tableARNPattern = regexp.MustCompile(`^arn:(aws[a-z-]*):dynamodb:([a-z0-9-]+):([0-9]{12}):table/([a-zA-Z0-9_.-]{3,255})$`)

// tableARN is a table ARN's parts.
type tableARN struct {
	region, account, name string
}

// parseTableARN returns the parts of s when it is a table ARN.
func parseTableARN(s string) (tableARN, bool) {
	m := tableARNPattern.FindStringSubmatch(s)
	if m == nil {
		return tableARN{}, false
	}
	return tableARN{region: m[2], account: m[3], name: m[4]}, true
}

// validTable reports whether s names a table: a table name or a table ARN.
func validTable(s string) bool {
	if tableNamePattern.MatchString(s) {
		return true
	}
	_, ok := parseTableARN(s)
	return ok
}

const tableNameRule = "must be a table name (3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.') or a table ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME)"
