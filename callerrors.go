package dynamolock

// The errors of DynamoDB calls that say what to fix: a table keyed otherwise
// than this client's key schema, and an endpoint that cannot be reached or
// spoken to. classify.go turns DynamoDB's and the SDK's errors into them.

import (
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// KeyAttribute is one key attribute of a lock table's key schema.
type KeyAttribute struct {
	Name    string
	KeyType types.KeyType             // HASH (partition key) or RANGE (sort key)
	Type    types.ScalarAttributeType // S, N or B; "" when not known
}

func (k KeyAttribute) String() string {
	role := "partition key"
	if k.KeyType == types.KeyTypeRange {
		role = "sort key"
	}
	if k.Type == "" {
		return fmt.Sprintf("%s %q", role, k.Name)
	}
	return fmt.Sprintf("%s %q (%s)", role, k.Name, k.Type)
}

// KeySchemaError reports that the lock table's key schema is not the one
// this client uses: DynamoDB rejected a call's key, or
// [Client.CreateTableIfNotExists] found an existing table keyed otherwise.
// It matches [ErrKeySchemaMismatch] with [errors.Is]. Its message names the
// fix: where only the key names differ, the call of [New] that uses the
// table, as Go code.
type KeySchemaError struct {
	Table    string
	Expected []KeyAttribute // the key attributes this client uses (always type S)
	Found    []KeyAttribute // the table's key schema; nil when it could not be read
	Err      error          // DynamoDB's error, if any

	sortKeyValue string // the client's default sort key value, for the advice
}

func (e *KeySchemaError) Error() string {
	var b strings.Builder
	wrongTypes := e.wrongTypes()
	if e.Found == nil {
		fmt.Fprintf(&b, "dynamolock: table %q is not keyed as this client expects: the client uses %s, and the table's key schema could not be read with DescribeTable; "+
			"give New the table's key attribute names with dynamolock.WithPartitionKeyName and dynamolock.WithSortKey", e.Table, keyNames(e.Expected))
	} else {
		fmt.Fprintf(&b, "dynamolock: table %q has %s, but this client uses %s", e.Table, keyNamesTypes(e.Found), keyNames(e.Expected))
		switch {
		case len(wrongTypes) > 0:
			// No option can fix a type: lock keys are strings.
			fmt.Fprintf(&b, "; %s: lock keys are strings and no option changes that, so use a table whose key attributes are of type S "+
				"(Client.CreateTableIfNotExists, or lock-example create-table, makes one)", strings.Join(wrongTypes, "; "))
		case !sameKeyNames(e.Expected, e.Found):
			fmt.Fprintf(&b, "; to use this table, make the client with %s", e.fix())
		}
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(oneLine(e.Err.Error()))
	}
	return b.String()
}

// fix is the call of New that makes a client keyed as the table is, as Go
// code to paste (with the program's other options added).
func (e *KeySchemaError) fix() string {
	var opts []string
	hadSortKey := false
	for _, k := range e.Expected {
		hadSortKey = hadSortKey || k.KeyType == types.KeyTypeRange
	}
	hasSortKey := false
	for _, k := range e.Found {
		switch k.KeyType {
		case types.KeyTypeHash:
			if k.Name != DefaultPartitionKeyName {
				opts = append(opts, fmt.Sprintf("dynamolock.WithPartitionKeyName(%q)", k.Name))
			}
		case types.KeyTypeRange:
			hasSortKey = true
			opts = append(opts, fmt.Sprintf("dynamolock.WithSortKey(%q, %q)", k.Name, e.sortKeyValue))
		}
	}
	code := fmt.Sprintf("dynamolock.New(client, %q", e.Table)
	for _, o := range opts {
		code += ", " + o
	}
	code += ")"
	if hadSortKey && !hasSortKey {
		code += ", without WithSortKey"
	}
	return code
}

// wrongTypes describes the table's key attributes whose type is not the
// one this client writes (S), e.g. `the table's partition key "key" is of
// type N, expected S`: no option can fix those.
func (e *KeySchemaError) wrongTypes() []string {
	var out []string
	for _, f := range e.Found {
		if f.Type == "" || f.Type == types.ScalarAttributeTypeS {
			continue
		}
		role := "partition key"
		if f.KeyType == types.KeyTypeRange {
			role = "sort key"
		}
		out = append(out, fmt.Sprintf("the table's %s %q is of type %s, expected %s", role, f.Name, f.Type, types.ScalarAttributeTypeS))
	}
	return out
}

// sameKeyNames reports whether two key schemas name the same attributes in
// the same roles, whatever their types.
func sameKeyNames(a, b []KeyAttribute) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].KeyType != b[i].KeyType {
			return false
		}
	}
	return true
}

// Is reports whether target is [ErrKeySchemaMismatch].
func (e *KeySchemaError) Is(target error) bool { return target == ErrKeySchemaMismatch }

// Unwrap returns DynamoDB's error.
func (e *KeySchemaError) Unwrap() error { return e.Err }

// keyNames describes a key schema by its attribute names, e.g.
// `partition key "key" and no sort key`.
func keyNames(keys []KeyAttribute) string { return describeKeys(keys, false) }

// keyNamesTypes describes a key schema with its attribute types, e.g.
// `partition key "id" of type S and no sort key`.
func keyNamesTypes(keys []KeyAttribute) string { return describeKeys(keys, true) }

func describeKeys(keys []KeyAttribute, withTypes bool) string {
	parts := make([]string, 0, 2)
	sort := false
	for _, k := range keys {
		role := "partition key"
		if k.KeyType == types.KeyTypeRange {
			role, sort = "sort key", true
		}
		part := fmt.Sprintf("%s %q", role, k.Name)
		if withTypes && k.Type != "" {
			part += " of type " + string(k.Type)
		}
		parts = append(parts, part)
	}
	if !sort {
		parts = append(parts, "no sort key")
	}
	return strings.Join(parts, " and ")
}

// ConnectionError reports that a call could not reach DynamoDB, or could
// not speak to it: the connection was refused, the host name did not
// resolve, the dial timed out, the TLS handshake failed (a certificate not
// trusted, an https:// endpoint that answers plain HTTP), the client has no
// endpoint for its region, the endpoint took the request and did not
// answer within the call's bound (Reason "no answer within 5s": a silent
// network; a write's outcome is then unknown), or the endpoint answered,
// but not as DynamoDB does (a web server's HTML page, an error that names
// no DynamoDB error type, an HTTP status DynamoDB never sends, a success
// DynamoDB never gives, such as a DescribeTable without a table). Its
// message says what to check.
//
// What it does to a call that waits depends on whether DynamoDB had
// answered the client before. If not, the endpoint may be wrong: a
// configuration mistake (TLS, an unknown host, no endpoint, an endpoint that
// is not DynamoDB) ends the call at once, and a refused or timed-out
// connection after a few seconds of retrying. Once DynamoDB has answered the
// client, every such failure is taken as an outage of the network or of
// DynamoDB, and a call that waits retries it for as long as its wait lasts
// (see the README's table of waits).
type ConnectionError struct {
	Endpoint string // the URL called, or "region X" when only that is known
	Op       string // the DynamoDB operation, e.g. "UpdateItem"
	Reason   string // what went wrong, e.g. "connection refused"
	Err      error  // the SDK's error

	// answered: DynamoDB had answered this client before this call.
	answered bool
}

func (e *ConnectionError) Error() string {
	what := "reach"
	if e.Reason != "" && !retriedReason(e.Reason) {
		what = "talk to"
	}
	msg := fmt.Sprintf("dynamolock: could not %s DynamoDB at %s", what, e.Endpoint)
	if e.Op != "" {
		msg += " (" + e.Op + ")"
	}
	if e.Reason != "" {
		msg += ": " + e.Reason
	}
	if advice := e.advice(); advice != "" {
		msg += "; " + advice
	}
	if e.Err == nil {
		return msg
	}
	return msg + ": " + oneLine(fmt.Sprint(e.Err))
}

// advice says what to check, or what the failure is taken as.
func (e *ConnectionError) advice() string {
	switch {
	case e.answered:
		return "DynamoDB answered this client before, so this is taken as an outage of the network or of DynamoDB"
	case retriedReason(e.Reason):
		return "nothing at this endpoint has answered this client yet: check the endpoint (the SDK client's BaseEndpoint, or its Region) and that DynamoDB runs there"
	case e.Reason == reasonNoSuchHost:
		return "check the host name of the endpoint (BaseEndpoint)"
	case e.Reason == reasonCertificate:
		return "check the endpoint's host name, and the certificates this host trusts"
	case e.Reason == reasonTLS:
		return "check that the endpoint speaks TLS, or use http:// for one that does not (DynamoDB Local)"
	case strings.HasPrefix(e.Reason, reasonNotDynamoDBPrefix):
		return "point BaseEndpoint at DynamoDB (DynamoDB Local listens on http://localhost:8000 unless told otherwise), or leave it unset to use the Region's"
	}
	return ""
}

// Unwrap returns the SDK's error.
func (e *ConnectionError) Unwrap() error { return e.Err }

// The reasons of a ConnectionError.
const (
	reasonRefused           = "connection refused"
	reasonUnreachable       = "no route to the host"
	reasonDial              = "could not connect"
	reasonNoSuchHost        = "host name not found"
	reasonScheme            = "the endpoint answered plain HTTP to an https:// request (use http://, or the endpoint's TLS port)"
	reasonCertificate       = "TLS certificate not accepted"
	reasonTLS               = "TLS handshake failed"
	reasonNoEndpoint        = "no endpoint: set the client's Region, or BaseEndpoint"
	reasonNotDynamoDBPrefix = "the endpoint did not answer as DynamoDB does"
	reasonNoAnswer          = "no answer within " // + callTimeout
)

// noAnswer is the error of a call of op that the library's own bound
// (callTimeout, or the end of the wait it served) ended after d: the
// endpoint took the request, or the connection, and did not answer. A write's outcome is then unknown.
func (c *Client) noAnswer(op string, d time.Duration, err error) *ConnectionError {
	return &ConnectionError{Endpoint: c.endpointOf(err), Op: op, Reason: reasonNoAnswer + d.Round(time.Millisecond).String(), Err: err, answered: c.answered.Load()}
}

// wrongAnswer is the error of a call of op that succeeded with an answer
// DynamoDB never gives (what says which): whatever answered is not
// DynamoDB, and its success grants nothing.
func (c *Client) wrongAnswer(op, what string) *ConnectionError {
	return &ConnectionError{Endpoint: c.endpointOf(nil), Op: op, Reason: reasonNotDynamoDBPrefix + ": " + what, answered: c.answered.Load()}
}

// retriedReason reports whether a failure for reason may be a server that
// is down for a while rather than a configuration mistake: retried for a
// few seconds even before DynamoDB has answered the client.
func retriedReason(reason string) bool {
	switch reason {
	case reasonRefused, reasonUnreachable, reasonDial:
		return true
	}
	return strings.HasPrefix(reason, reasonNoAnswer)
}

// permanent reports whether retrying cannot help: a configuration mistake
// (TLS, an unknown host, no endpoint, an endpoint that is not DynamoDB)
// before DynamoDB ever answered the client. Once it has, the endpoint is
// right and every failure to reach it is the network's, or DynamoDB's.
func (e *ConnectionError) permanent() bool {
	return !e.answered && e.Reason != "" && !retriedReason(e.Reason)
}
