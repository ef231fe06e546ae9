package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// SendHeartbeat renews lock, as SendHeartbeatWithContext does with
// context.Background().
func (c *Client) SendHeartbeat(lock *Lock, opts ...SendHeartbeatOption) error {
	return c.SendHeartbeatWithContext(context.Background(), lock, opts...)
}

// SendHeartbeatWithContext renews a held lock now: one UpdateItem that
// writes a fresh record version number and the lease, conditioned on this
// owner and the lock's current record version number. If the condition
// fails, the lock is lost: it is marked so ([Lock.Done] closes) and the
// returned error matches [ErrLockLost].
//
// It returns [ErrReadOnlyLockHeartbeat] for a lock from [Client.Get] that
// this client does not hold, [ErrLockAlreadyReleased] for a released lock,
// and [ErrOwnerMismatched] for a lock of another owner.
func (c *Client) SendHeartbeatWithContext(ctx context.Context, lock *Lock, opts ...SendHeartbeatOption) error {
	if c.isClosed() {
		return ErrClientClosed
	}
	if lock == nil {
		return invalid("lock", nil, "must not be nil")
	}
	o := &sendHeartbeatOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	switch {
	case o.retries < 0:
		return invalid("HeartbeatRetries", o.retries, "retries must not be negative")
	case o.retryWait < 0:
		return invalid("HeartbeatRetries", o.retryWait, "wait must not be negative")
	case o.leaseDurationToEnsure < 0 || (o.leaseDurationToEnsure > 0 && o.leaseDurationToEnsure/2 < c.heartbeatPeriod):
		return invalid("WithLeaseDurationToEnsure", o.leaseDurationToEnsure,
			"must be at least twice the heartbeat period %s", c.heartbeatPeriod)
	case o.deleteData && o.data != nil:
		return invalid("ReplaceHeartbeatData", fmt.Sprintf("%d bytes", len(o.data)), "cannot be combined with DeleteData")
	}
	if o.data != nil {
		if err := c.validateItemSize("ReplaceHeartbeatData", lock.partitionKey, o.data, lock.AdditionalAttributes()); err != nil {
			return err
		}
	}
	return c.heartbeat(ctx, lock, o)
}

// Ensure makes sure the lock stays valid for at least d: when less than d of
// its lease is left, it sends a heartbeat (with a lease of d if d is longer
// than the lease); otherwise it does nothing.
func (l *Lock) Ensure(ctx context.Context, d time.Duration) error {
	if l == nil {
		return invalid("lock", nil, "must not be nil")
	}
	if l.client == nil {
		return ErrReadOnlyLockHeartbeat
	}
	l.mu.Lock()
	left := time.Until(l.leaseEndLocked())
	lease := l.leaseDuration
	l.mu.Unlock()
	if left >= d {
		return nil
	}
	return l.client.SendHeartbeatWithContext(ctx, l, WithLeaseDurationToEnsure(max(d, lease)))
}

// pendingWrite is a renewal whose answer never came: it may have landed.
// Every retry writes the same RVN, and the lease counts from the first send.
type pendingWrite struct {
	rvn  string
	sent time.Time
}

// heartbeat renews l, retrying as HeartbeatRetries says. It never holds
// opMu while waiting between tries.
func (c *Client) heartbeat(ctx context.Context, l *Lock, o *sendHeartbeatOptions) error {
	for try := 0; ; try++ {
		err := c.heartbeatOnce(ctx, l, o, false)
		if err == nil || errors.Is(err, ErrLockLost) || errors.Is(err, ErrInvalidArgument) ||
			errors.Is(err, ErrReadOnlyLockHeartbeat) || errors.Is(err, ErrOwnerMismatched) || errors.Is(err, ErrLockAlreadyReleased) {
			return err
		}
		if try >= o.retries || ctx.Err() != nil {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, err)
		}
		if !sleepCtx(ctx, o.retryWait) {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, ctx.Err())
		}
	}
}

// heartbeatOnce sends one renewal of l: a fresh RVN and the lease,
// conditioned on this owner and the RVN this holder knows (or the one a
// renewal whose answer was lost may already have set). It holds opMu for
// that one call only, so a release never waits for backoff sleeps.
//
// When the condition fails, the item that came back tells whether the lock
// is still this acquisition's (same owner and fencing token: a guarded
// refresh transaction moved the RVN), in which case the beat is sent again
// against the RVN it found, or whether someone else has it.
func (c *Client) heartbeatOnce(ctx context.Context, l *Lock, o *sendHeartbeatOptions, background bool) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()
	for adopt := 0; ; adopt++ {
		l.mu.Lock()
		now := time.Now()
		switch {
		case l.state == stateReadOnly:
			l.mu.Unlock()
			return ErrReadOnlyLockHeartbeat
		case l.state != stateHeld:
			err := l.err
			l.mu.Unlock()
			return err
		case l.ownerName != c.ownerName || l.client != c:
			l.mu.Unlock()
			return fmt.Errorf("%w: lock %q is held by %q, this client is %q", ErrOwnerMismatched, l.partitionKey, l.ownerName, c.ownerName)
		case !now.Before(l.leaseEndLocked()):
			l.mu.Unlock()
			return l.lose(ErrLeaseExpired, nil)
		}
		if l.pending == nil {
			l.pending = &pendingWrite{rvn: newRVN(), sent: now}
		}
		p := *l.pending
		id := l.identityLocked()
		lease := l.leaseDuration
		if o.leaseDurationToEnsure > 0 {
			lease = o.leaseDurationToEnsure
		}
		l.mu.Unlock()

		_, err := c.db.UpdateItem(ctx, c.heartbeatInput(l, id, p, lease, o))
		c.metrics.call(ctx, "UpdateItem")
		err = c.classify(ctx, err)
		if err == nil {
			l.renewed(p.rvn, p.sent, lease, o)
			c.metrics.heartbeat(ctx, "ok")
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if adopt < 2 && l.adoptMovedRVN(ccf.Item) {
				continue
			}
			c.metrics.heartbeat(ctx, "lost")
			return l.lose(ErrLockTakenOver, err)
		}
		c.metrics.heartbeat(ctx, "error")
		if background && c.holdLockOnServiceUnavailable && httpStatus(err) == 503 {
			// Amazon's Java client's holdLockOnServiceUnavailable: assume the
			// lock is still ours and extend the lease locally. Unsafe; see
			// the option's documentation.
			l.renewedLocally(time.Now())
			l.log(slog.LevelWarn, "heartbeat got 503, keeping the lease locally", slogErr(err))
			return nil
		}
		l.log(slog.LevelWarn, "heartbeat failed", slogErr(err))
		return err
	}
}

func (c *Client) heartbeatInput(l *Lock, id identity, p pendingWrite, lease time.Duration, o *sendHeartbeatOptions) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	update := "SET " + b.name("#v", attrRVN) + " = " + b.value(":v", attrS(p.rvn)) +
		", " + b.name("#l", attrLeaseDuration) + " = " + b.value(":l", attrS(formatLease(lease)))
	if o.data != nil {
		update += ", " + b.name("#d", attrData) + " = " + b.value(":d", &types.AttributeValueMemberB{Value: o.data})
	}
	update += c.expirySets(b, p.sent, lease)
	if o.deleteData {
		update += " REMOVE " + b.name("#d", attrData)
	}
	var cond string
	if o.matchOwnerOnly {
		cond = b.name("#o", attrOwnerName) + " = " + b.value(":o", attrS(id.owner)) +
			" AND attribute_not_exists(" + b.name("#r", attrIsReleased) + ")"
	} else {
		cond = id.condition(b, p.rvn)
	}
	return c.guardedUpdate(l.itemKey(), b, update, cond)
}

// renewed records a successful write of rvn first sent at sent: the lease
// counts from then, so the holder never believes it lasts longer than an
// observer of the new RVN does. A write sent before the latest one recorded
// changes nothing but the RVN: the later write defines the lease.
func (l *Lock) renewed(rvn string, sent time.Time, lease time.Duration, o *sendHeartbeatOptions) {
	l.mu.Lock()
	if l.state == stateHeld {
		// Whatever was pending is settled: it landed, or this write replaced
		// the RVN it expected. Never sending it again keeps an RVN from
		// coming back after another replaced it.
		l.pending = nil
		if !sent.Before(l.lookupTime) {
			l.rvn = rvn
			l.lookupTime = sent
			l.leaseDuration = lease
		}
		switch {
		case o != nil && o.deleteData:
			l.data = nil
		case o != nil && o.data != nil:
			l.data = o.data
		}
	}
	l.mu.Unlock()
	l.client.sched.notify(l)
}

func (l *Lock) renewedLocally(now time.Time) {
	l.mu.Lock()
	if l.state == stateHeld {
		l.lookupTime = now
	}
	l.mu.Unlock()
	l.client.sched.notify(l)
}

// adoptMovedRVN looks at the item a failed conditional write returned. If
// it is still this acquisition (same owner and fencing token, not released)
// its RVN was moved by this holder's own guarded refresh: the lock takes
// that RVN and the write can be sent again. Fencing tokens never repeat on a
// key (see acquireInput), so owner and token identify one acquisition.
func (l *Lock) adoptMovedRVN(item map[string]types.AttributeValue) bool {
	if len(item) == 0 {
		return false
	}
	rec, err := l.client.schema.decodeItem(item)
	if err != nil || rec.released {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != stateHeld || l.fencingToken == 0 || rec.owner != l.ownerName || rec.fencingToken != l.fencingToken {
		return false
	}
	l.rvn = rec.rvn
	l.pending = nil // the next write starts from the RVN found, with a fresh one
	return true
}

func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// httpStatus returns the HTTP status of a DynamoDB error, or 0.
func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// isTransient reports whether retrying err may succeed: network failures,
// throttling and server errors. Condition failures, validation errors and a
// missing table are not.
func isTransient(err error) bool {
	// A deadline inside err may be the HTTP client's or one attempt's, not
	// the caller's: callers check their own context before retrying.
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	var ccf *types.ConditionalCheckFailedException
	var rnf *types.ResourceNotFoundException
	if errors.As(err, &ccf) || errors.As(err, &rnf) {
		return false
	}
	if s := httpStatus(err); s >= 500 || s == 429 {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "ProvisionedThroughputExceededException", "ThrottlingException", "RequestLimitExceeded",
			"InternalServerError", "ServiceUnavailable", "TransactionInProgressException":
			return true
		}
		return ae.ErrorFault() == smithy.FaultServer
	}
	return true // no API answer at all: a network error
}
