package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
	case o.leaseDurationToEnsure < 0:
		return invalid("WithLeaseDurationToEnsure", o.leaseDurationToEnsure, "must not be negative")
	case o.deleteData && o.data != nil:
		return invalid("ReplaceHeartbeatData", fmt.Sprintf("%d bytes", len(o.data)), "cannot be combined with DeleteData")
	}
	if o.data != nil {
		if err := c.validateItemSize(lock.partitionKey, o.data, lock.AdditionalAttributes()); err != nil {
			return err
		}
	}
	return c.heartbeat(ctx, lock, o, false)
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

// heartbeat renews l. Background beats retry transient failures with backoff
// until the lease runs out; manual ones as HeartbeatRetries says.
func (c *Client) heartbeat(ctx context.Context, l *Lock, o *sendHeartbeatOptions, background bool) error {
	l.opMu.Lock()
	defer l.opMu.Unlock()

	l.mu.Lock()
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
	}
	id := l.identityLocked()
	lease := l.leaseDuration
	if o.leaseDurationToEnsure > 0 {
		lease = o.leaseDurationToEnsure
	}
	leaseEnd := l.leaseEndLocked()
	l.mu.Unlock()

	// One new RVN for every try of this beat: if a try lands but its answer
	// is lost, the next try's condition still matches (RVN IN (old, new)).
	rvn := newRVN()
	first := time.Now()
	in := c.heartbeatInput(l.partitionKey, id, rvn, lease, o, first)
	backoff := min(50*time.Millisecond, c.leaseDuration/20)
	for try := 0; ; try++ {
		_, err := c.db.UpdateItem(ctx, in)
		c.metrics.call(ctx, "UpdateItem")
		if err == nil {
			l.renewed(rvn, first, lease, o)
			c.metrics.heartbeat(ctx, "ok")
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
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
		if background {
			if ctx.Err() != nil || !time.Now().Add(backoff).Before(leaseEnd) {
				return err // the scheduler marks the lock lost when its lease runs out
			}
			wait := backoff + jitter(backoff)
			backoff = min(2*backoff, c.heartbeatPeriod/2)
			if !sleepCtx(ctx, wait) {
				return err
			}
			continue
		}
		if try >= o.retries || ctx.Err() != nil {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, err)
		}
		if !sleepCtx(ctx, o.retryWait) {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, ctx.Err())
		}
	}
}

func (c *Client) heartbeatInput(key string, id identity, rvn string, lease time.Duration, o *sendHeartbeatOptions, now time.Time) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	update := "SET " + b.name("#v", attrRVN) + " = " + b.value(":v", attrS(rvn)) +
		", " + b.name("#l", attrLeaseDuration) + " = " + b.value(":l", attrS(formatLease(lease)))
	if o.data != nil {
		update += ", " + b.name("#d", attrData) + " = " + b.value(":d", &types.AttributeValueMemberB{Value: o.data})
	}
	update += c.expirySets(b, now, lease)
	if o.deleteData {
		update += " REMOVE " + b.name("#d", attrData)
	}
	var cond string
	if o.matchOwnerOnly {
		cond = b.name("#o", attrOwnerName) + " = " + b.value(":o", attrS(id.owner)) +
			" AND attribute_not_exists(" + b.name("#r", attrIsReleased) + ")"
	} else {
		cond = id.condition(b, rvn)
	}
	return &dynamodb.UpdateItemInput{
		TableName:                 aws.String(c.tableName),
		Key:                       c.itemKey(key),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  b.names,
		ExpressionAttributeValues: b.values,
	}
}

// renewed records a successful write of rvn whose first try was sent at
// sent: the lease counts from then, so the holder never believes it lasts
// longer than an observer of the new RVN does.
func (l *Lock) renewed(rvn string, sent time.Time, lease time.Duration, o *sendHeartbeatOptions) {
	l.mu.Lock()
	if l.state == stateHeld {
		l.rvn = rvn
		if sent.After(l.lookupTime) {
			l.lookupTime = sent
		}
		l.leaseDuration = lease
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
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
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
