package dynamolock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Throttling, as DynamoDB says why: since 2025 a throttled request's error
// (ProvisionedThroughputExceededException, ThrottlingException,
// RequestLimitExceeded) carries ThrottlingReasons, each a reason of the form
// ResourceType+OperationType+LimitType ("TableWriteKeyRangeThroughputExceeded")
// and the ARN of the resource. The limit type says what to do, and what the
// library does:
//
//   - KeyRangeThroughputExceeded: one partition's limit (3,000 reads or
//     1,000 writes a second): the lock key is hot. Its waiters read it
//     less often (watch.throttled), whatever the table could serve.
//   - ProvisionedThroughputExceeded, MaxOnDemandThroughputExceeded,
//     AccountLimitExceeded (and RequestLimitExceeded, the account's request
//     quota): the table or the account is at a limit someone set or can
//     raise. A throttled heartbeat lowers what admission lets in to what
//     the client's beats got through (renewals.Meter.Throttled), and a
//     refusal names the limit.
//
// An error without reasons (DynamoDB before 2025, DynamoDB Local, other
// services that speak DynamoDB's API) is "unspecified": treated as a hot
// key, by the waiters (read less often) and by admission (unchanged). A
// lock table's usual throttle is its hot item; and what a client's beats
// got through measures its demand, not the table's capacity, so lowering
// admission to it on a guess refused every new lock for 10 s after one
// stray throttle (the simulation's invariant 14).

// ThrottleLimit is what a throttled request met.
type ThrottleLimit uint8

// The limits a throttled request can meet.
const (
	ThrottleUnspecified ThrottleLimit = iota // no reason given (DynamoDB before 2025, DynamoDB Local)
	ThrottleKeyRange                         // one partition's limit: a hot key
	ThrottleProvisioned                      // a provisioned table's (or index's) capacity
	ThrottleMaxOnDemand                      // an on-demand table's configured maximum
	ThrottleAccount                          // the account's per-table quota, or its request quota
	numThrottleLimits
)

var throttleLimitNames = [numThrottleLimits]string{"unspecified", "key_range", "provisioned", "max_on_demand", "account"}

// String is the limit as the metrics name it: "key_range", "provisioned",
// "max_on_demand", "account" or "unspecified".
func (l ThrottleLimit) String() string {
	if l < numThrottleLimits {
		return throttleLimitNames[l]
	}
	return fmt.Sprintf("ThrottleLimit(%d)", uint8(l))
}

// advice is what to change for a request throttled at l.
func (l ThrottleLimit) advice() string {
	switch l {
	case ThrottleKeyRange:
		return "the lock key is hot (one partition serves at most 3,000 reads and 1,000 writes a second): spread the work over more keys, or wait on it with a longer WithRefreshPeriod"
	case ThrottleProvisioned:
		return "the table's provisioned capacity is used up: raise it, enable auto scaling, or switch the table to on-demand"
	case ThrottleMaxOnDemand:
		return "the table's on-demand maximum is reached: raise its MaxReadRequestUnits or MaxWriteRequestUnits (OnDemandThroughput)"
	case ThrottleAccount:
		return "the account's throughput quota for the table is reached: ask AWS for a higher quota (Service Quotas), or spread the locks over more tables"
	}
	return "DynamoDB gave no reason: check the table's capacity and the key's traffic"
}

// ThrottlingError is DynamoDB's refusal of a request for throughput, with
// the reasons it gave. It wraps the SDK's error (errors.As finds a
// *types.ProvisionedThroughputExceededException, *types.ThrottlingException
// or *types.RequestLimitExceeded); the library retries such a request where
// it can (a poll, a heartbeat, an acquiring write within its wait).
type ThrottlingError struct {
	Op      string                   // the DynamoDB operation, e.g. "UpdateItem"
	Limit   ThrottleLimit            // the limit the first reason names (or what the error code implies)
	Reasons []types.ThrottlingReason // as DynamoDB gave them; empty when it gave none
	Err     error                    // the SDK's error
}

func (e *ThrottlingError) Error() string {
	var b strings.Builder
	b.WriteString("dynamolock: DynamoDB throttled ")
	b.WriteString(e.Op)
	if len(e.Reasons) > 0 {
		b.WriteString(" (")
		for i, r := range e.Reasons {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(aws.ToString(r.Reason))
			if res := aws.ToString(r.Resource); res != "" {
				b.WriteString(" on " + res)
			}
		}
		b.WriteString(")")
	}
	b.WriteString(": " + e.Limit.advice())
	if e.Err != nil {
		b.WriteString(": " + oneLine(e.Err.Error()))
	}
	return b.String()
}

func (e *ThrottlingError) Unwrap() error { return e.Err }

// throttled returns what DynamoDB said of err if it is a throttled
// request's error: its reasons and the limit they name.
func throttled(err error) (limit ThrottleLimit, reasons []types.ThrottlingReason, ok bool) {
	var te *ThrottlingError
	if errors.As(err, &te) {
		return te.Limit, te.Reasons, true
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return 0, nil, false
	}
	var pte *types.ProvisionedThroughputExceededException
	var tte *types.ThrottlingException
	var rle *types.RequestLimitExceeded
	switch {
	case errors.As(err, &pte):
		reasons, limit = pte.ThrottlingReasons, ThrottleUnspecified
	case errors.As(err, &tte):
		reasons, limit = tte.ThrottlingReasons, ThrottleUnspecified
	case errors.As(err, &rle):
		reasons, limit = rle.ThrottlingReasons, ThrottleAccount
	default:
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException":
		case "RequestLimitExceeded":
			limit = ThrottleAccount
		default:
			return 0, nil, false
		}
	}
	if len(reasons) > 0 {
		limit = limitOf(aws.ToString(reasons[0].Reason))
	}
	return limit, reasons, true
}

// limitOf reads the limit type at the end of a throttling reason.
func limitOf(reason string) ThrottleLimit {
	switch {
	case strings.HasSuffix(reason, "KeyRangeThroughputExceeded"):
		return ThrottleKeyRange
	case strings.HasSuffix(reason, "MaxOnDemandThroughputExceeded"):
		return ThrottleMaxOnDemand
	case strings.HasSuffix(reason, "ProvisionedThroughputExceeded"):
		return ThrottleProvisioned
	case strings.HasSuffix(reason, "AccountLimitExceeded"):
		return ThrottleAccount
	}
	return ThrottleUnspecified
}

// throttlingError wraps err, a throttled request's error of op, as a
// *ThrottlingError; nil when err is not one.
func throttlingError(op string, err error) *ThrottlingError {
	limit, reasons, ok := throttled(err)
	if !ok {
		return nil
	}
	return &ThrottlingError{Op: op, Limit: limit, Reasons: reasons, Err: err}
}

// hotKey reports whether a throttled request's limit is (or may be) its
// key's partition: its waiters then read it less often.
func (l ThrottleLimit) hotKey() bool { return l == ThrottleKeyRange || l == ThrottleUnspecified }

// tableLimit reports whether a throttled request's limit is the table's
// or the account's, as DynamoDB named it: admission then lets in no more
// than the client's beats got through.
func (l ThrottleLimit) tableLimit() bool {
	return l == ThrottleProvisioned || l == ThrottleMaxOnDemand || l == ThrottleAccount
}
