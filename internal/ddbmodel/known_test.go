package ddbmodel_test

import (
	"errors"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// knownDifferences are the answers in which DynamoDB Local 3.3.1 differs
// from the service's documentation: there the model answers as the
// documentation says (the service is the contract, DynamoDB Local one
// implementation of it), and the differential test accepts the difference
// only in the shape listed here, counting each one it meets. TestRefusals
// sends a request of each, so that each is checked on every run; a
// difference DynamoDB Local stops making fails it.
var knownDifferences = []knownDifference{
	{
		name: "ttl-once-an-hour",
		doc: "Developer Guide, Service quotas, API-specific limits: UpdateTimeToLive supports one request to enable or disable " +
			"TTL per table per hour; further calls within the hour result in a ValidationException",
		local: "changes the setting again at once",
		match: func(op string, m, l error) bool {
			return op == "UpdateTimeToLive" && l == nil &&
				errMessage(m) == "Time to live has been modified multiple times within a fixed interval"
		},
	},
	{
		name:  "empty-client-request-token",
		doc:   "API reference, TransactWriteItems, ClientRequestToken: length constraints, minimum length of 1",
		local: "accepts an empty token and applies the transaction",
		match: func(op string, m, l error) bool {
			return op == "TransactWriteItems" && l == nil &&
				strings.HasPrefix(errMessage(m), "1 validation error detected: Value '' at 'clientRequestToken'")
		},
	},
	{
		name: "transaction-return-values-enum",
		doc: "API reference, ConditionCheck / Put / Update / Delete, ReturnValuesOnConditionCheckFailure: valid values " +
			"ALL_OLD | NONE (DynamoDB Local refuses another value in PutItem, UpdateItem and DeleteItem)",
		local: "accepts any value in a transaction's member",
		match: func(op string, m, l error) bool {
			return op == "TransactWriteItems" && l == nil && strings.Contains(errMessage(m), "at 'transactItems.") &&
				strings.Contains(errMessage(m), "returnValuesOnConditionCheckFailure' failed to satisfy constraint")
		},
	},
	{
		name: "pay-per-request-with-throughput",
		doc: "API reference, CreateTable, ProvisionedThroughput: if you set BillingMode as PAY_PER_REQUEST, you cannot " +
			"specify this property",
		local: "creates the table",
		match: func(op string, m, l error) bool {
			return op == "CreateTable" && l == nil &&
				strings.Contains(errMessage(m), "can be specified when BillingMode is PAY_PER_REQUEST")
		},
	},
	{
		name: "transaction-update-cannot-apply",
		doc: "API reference, TransactionCanceledException: an update that cannot be applied to its item (\"An operand in " +
			"the update expression has an incorrect data type\", \"The document path provided in the update expression is " +
			"invalid for update\", \"The provided expression refers to an attribute that does not exist in the item\", " +
			"number overflow, nesting levels) is a cancellation reason of code ValidationError",
		local: "fails the whole request with a ValidationException of the same message (but for an item over 400 KB, " +
			"which it also gives as a ValidationError reason)",
		match: func(op string, m, l error) bool {
			var tce *types.TransactionCanceledException
			if op != "TransactWriteItems" || errClass(l) != "ValidationException" || !errors.As(m, &tce) {
				return false
			}
			for _, r := range tce.CancellationReasons {
				if aws.ToString(r.Code) == "ValidationError" && aws.ToString(r.Message) == errMessage(l) {
					return true
				}
			}
			return false
		},
	},
}

type knownDifference struct {
	name  string
	doc   string // what the model follows
	local string // what DynamoDB Local 3.3.1 does instead
	match func(op string, model, local error) bool
}

// matchKnown returns the known difference that the two answers to one
// request of op make, or nil.
func matchKnown(op string, m, l error) *knownDifference {
	for i := range knownDifferences {
		if knownDifferences[i].match(op, m, l) {
			return &knownDifferences[i]
		}
	}
	return nil
}
