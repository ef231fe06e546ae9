package dynamolock

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
)

// isTransient reports whether retrying err may succeed: a network failure
// (the request may or may not have reached DynamoDB), throttling or a server
// error. Condition failures, validation errors, a missing table, the
// caller's cancellation and every error this package makes itself (an item
// it cannot decode, bad input, a lost lock) are not.
func isTransient(err error) bool {
	// A deadline inside err may be the HTTP client's or one attempt's, not
	// the caller's: callers check their own context before retrying.
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, errThrottledMember) {
		return true // a cancellation's reason said so (acquisition.transact)
	}
	var ccf *types.ConditionalCheckFailedException
	var rnf *types.ResourceNotFoundException
	var ce *ConnectionError
	if errors.As(err, &ccf) || errors.As(err, &rnf) || errors.As(err, &ce) && ce.permanent() {
		return false
	}
	if s := httpStatus(err); s >= 500 || s == 429 {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable", "TransactionInProgressException",
			// Another ongoing transaction includes the item (see
			// isTransactionConflict).
			"TransactionConflictException",
			// A multi-Region strongly consistent table: another Region was
			// writing the item; this write did not apply.
			"ReplicatedWriteConflictException":
			return true
		}
		return ae.ErrorFault() == smithy.FaultServer
	}
	// No answer from DynamoDB at all: a network error, unless the error is
	// one of this package's own decisions.
	return !ownError(err)
}

// ownError reports whether err was made by this package (bad input, an item
// it cannot decode, a lock's state) rather than by the network.
func ownError(err error) bool {
	var inv *InvalidArgumentError
	var format *ItemFormatError
	var lost *LockLostError
	var notGranted *LockNotGrantedError
	var global *GlobalTableError
	if errors.As(err, &inv) || errors.As(err, &format) || errors.As(err, &lost) || errors.As(err, &notGranted) || errors.As(err, &global) {
		return true
	}
	for _, sentinel := range []error{ErrOwnerMismatched, ErrReadOnlyLockHeartbeat, ErrLockAlreadyReleased,
		ErrLockNotHeld, ErrClientClosed, ErrUnsupportedOperation, ErrCannotReleaseNullLock} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}

// surelyNotApplied reports whether a failed write certainly did not change
// the item: it was never sent, or DynamoDB answered and rejected it (a
// condition, validation or throttling error) and no earlier attempt of the
// same call (an SDK retry) failed without an answer. Any other failure
// leaves the outcome unknown: the write may have landed, or may still land.
func surelyNotApplied(err error) bool {
	if mayHaveLanded(err) {
		return false
	}
	var ns *notSentError
	return errors.As(err, &ns) || neverSent(err) || rejected(err)
}

// rejected reports whether DynamoDB answered err and said that the request
// did not apply.
func rejected(err error) bool {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.ErrorCode() {
	case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded":
		return true
	}
	return ae.ErrorFault() == smithy.FaultClient
}

// httpStatus returns the HTTP status of a DynamoDB error, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// sleep is the client's one sleep: it waits d, or until woken is closed or
// sent to (nil: never), and returns ctx.Err() when ctx ends first, or
// ErrClientClosed when the client closes first.
//
// When several of these are ready at once (the timer fires at the instant
// ctx's deadline passes, a wake-up comes after Close started), the answer
// does not depend on the select's random choice: a closed client wins, then
// an ended ctx. (So one seed of the simulation is one run.)
func (c *Client) sleep(ctx context.Context, d time.Duration, woken <-chan struct{}) error {
	t := c.newTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C():
	case <-woken:
	case <-ctx.Done():
	case <-c.closing:
	}
	if deadlinePassed(ctx) {
		// ctx's own timer fires at this instant too: it ends ctx, rather
		// than race this goroutine's next look at it (the simulation's
		// replay; a poll timed to the end of a wait is one such instant).
		// A context that never ends past its deadline holds it briefly.
		bound := c.newTimer(deadlineGrace)
		select {
		case <-ctx.Done():
		case <-c.closing:
		case <-bound.C():
		}
		bound.Stop()
	}
	select {
	case <-c.closing:
		return ErrClientClosed
	default:
		return ctx.Err()
	}
}

// over reports whether ctx has ended or c is closing, counting a deadline
// that has passed as ended before ctx's own timer fires (as sleep does):
// a loop that looks at an instant where a timer or an answer meets the
// deadline ends the same way every time, not by which case of a select
// the Go runtime picked.
func (c *Client) over(ctx context.Context) bool {
	select {
	case <-c.closing:
		return true
	default:
		return ctx.Err() != nil || deadlinePassed(ctx)
	}
}

// deadlineGrace bounds how long sleep waits for a context whose deadline
// has passed to end.
const deadlineGrace = 10 * time.Millisecond

// pause is sleep in an acquiring call on what: the error that ends the
// wait is a *LockNotGrantedError.
func (c *Client) pause(ctx context.Context, d time.Duration, woken <-chan struct{}, what string) error {
	switch err := c.sleep(ctx, d, woken); {
	case err == nil:
		return nil
	case errors.Is(err, ErrClientClosed):
		return notGranted(err, "%s", what)
	default:
		return notGranted(err, "%s: context done while waiting", what)
	}
}

// randomUpTo returns a random duration in [0, d), or 0.
func randomUpTo(d time.Duration) time.Duration {
	if d < 1 {
		return 0
	}
	return time.Duration(entropy.Int64N(int64(d), "", ""))
}

// satAdd adds two non-negative durations, saturating instead of
// overflowing: "wait for ever" must not turn into "give up at once".
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// isTransactionConflict reports whether DynamoDB refused a write because an
// ongoing TransactWriteItems includes its item (HTTP 400, which the SDK
// does not retry): the write did not apply, and sending it again may
// succeed once that transaction ends. A holder's guarded writes
// (TransactionCondition), AcquireLocks and a fair semaphore put lock items
// in transactions.
func isTransactionConflict(err error) bool {
	var tce *types.TransactionConflictException
	return errors.As(err, &tce)
}

// invalidRequest reports whether DynamoDB refused a request as invalid (a
// ValidationException: a malformed request, an item over the size limit):
// sending it again cannot succeed.
func invalidRequest(err error) bool {
	var ae smithy.APIError
	return errors.As(err, &ae) && ae.ErrorCode() == "ValidationException"
}
