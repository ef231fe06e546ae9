package ddbmodel_test

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
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
		name:  "return-consumed-capacity-enum",
		doc:   "API reference, ReturnConsumedCapacity: valid values INDEXES | TOTAL | NONE",
		local: "accepts any value",
		match: func(op string, m, l error) bool {
			return l == nil && strings.Contains(errMessage(m), "at 'returnConsumedCapacity' failed to satisfy constraint")
		},
	},
	{
		name: "transaction-table-arn",
		doc: "Developer Guide, DynamoDB API operations supported by resource-based policies: TransactWriteItems supports " +
			"table name overloading (a table ARN in TableName), as the other data plane operations do",
		local: "answers ResourceNotFoundException to a transaction whose member names its table by ARN",
		match: func(op string, m, l error) bool {
			return op == "TransactWriteItems" && errClass(l) == "ResourceNotFound" && errClass(m) != "ResourceNotFound"
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

// knownCapacityDifferences are the consumed capacities in which DynamoDB
// Local differs from the service's documentation, as knownDifferences are
// for errors: match gets the request and the capacity each side reported
// (outCapacity's text).
var knownCapacityDifferences = []struct {
	name, doc, local string
	match            func(in any, model, local string) bool
}{
	{
		name: "transaction-condition-check-of-no-item",
		doc: "Developer Guide, DynamoDB read and write operations: a read of an item that does not exist still consumes " +
			"read capacity as one of up to 4 KB; a transactional read costs twice a strongly consistent one",
		local: "charges nothing for a transaction's ConditionCheck of an item that does not exist",
		match: func(in any, m, l string) bool {
			tx, ok := in.(*dynamodb.TransactWriteItemsInput)
			if !ok {
				return false
			}
			checks := 0
			for _, it := range tx.TransactItems {
				if it.ConditionCheck != nil {
					checks++
				}
			}
			mt, mu, ok1 := oneCapacity(m)
			lt, lu, ok2 := oneCapacity(l)
			diff := mu - lu
			return ok1 && ok2 && mt == lt && diff > 0 && diff <= float64(2*checks) && math.Mod(diff, 2) == 0
		},
	},
	{
		name: "read-of-no-items",
		doc: "Developer Guide, DynamoDB read and write operations: for Query and Scan you are charged read throughput " +
			"even if no data exists (the model charges one unit, a half for an eventually consistent read)",
		local: "reports 0 units for a Query or Scan that returns no item",
		match: func(in any, m, l string) bool {
			switch in.(type) {
			case *dynamodb.QueryInput, *dynamodb.ScanInput:
			default:
				return false
			}
			mt, mu, ok1 := oneCapacity(m)
			lt, lu, ok2 := oneCapacity(l)
			return ok1 && ok2 && mt == lt && lu == 0 && (mu == 1 || mu == 0.5)
		},
	},
	{
		name:  "capacity-unasked",
		doc:   "API reference, DeleteItem, ConsumedCapacity: returned only if the ReturnConsumedCapacity parameter was specified",
		local: "returns it for a DeleteItem of an item that does not exist, asked or not",
		match: func(in any, m, l string) bool {
			d, ok := in.(*dynamodb.DeleteItemInput)
			return ok && m == "" && l != "" &&
				(d.ReturnConsumedCapacity == "" || d.ReturnConsumedCapacity == types.ReturnConsumedCapacityNone)
		},
	},
}

// matchKnownCapacity returns the name of the known difference that the
// capacities model and local reported for in make, or "".
func matchKnownCapacity(in any, m, l string) string {
	for _, k := range knownCapacityDifferences {
		if k.match(in, m, l) {
			return k.name
		}
	}
	return ""
}

// oneCapacity parses outCapacity's text of one entry.
func oneCapacity(s string) (table string, units float64, ok bool) {
	_, err := fmt.Sscanf(strings.ReplaceAll(s, "=", " "), "%s %g", &table, &units)
	return table, units, err == nil
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
