// Renewals and releases under interleavings: a guarded refresh beside a
// heartbeat, a release whose answer was lost or throttled, 503s with
// WithHoldLockOnServiceUnavailable, a reentrant acquisition beside another.
// Each test failed before its fix.
package dynamolock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// bothHold fails the test when two locks on one key both look held.
func bothHold(t *testing.T, a, b *dynamolock.Lock) {
	t.Helper()
	if a.Err() == nil && !a.IsExpired() && b.Err() == nil && !b.IsExpired() {
		t.Errorf("two holders: holder believes its lease ends at %s (%.1fs from now), taker token %d > holder token %d",
			a.Expiration().Format("15:04:05.000"), time.Until(a.Expiration()).Seconds(), b.FencingToken(), a.FencingToken())
	}
}

// Found by review: a guarded refresh's success callback that arrives after
// a heartbeat with a shorter lease (whose answer was lost) was sent cleared
// the pending heartbeat and raised the lease to the refresh's, although the
// heartbeat landed after the refresh and an observer times 1 s from it.
func TestLateRefreshCallbackKeepsALaterShorterHeartbeat(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	w := &answerLost{Client: db}
	c := newClient(t, w, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	item, done := l.TransactionWithRefresh()
	out, terr := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}})
	require.NoError(t, terr) // landed; the caller has not yet handed the answer to done

	w.lose.Store(true)
	require.Error(t, c.SendHeartbeatWithContext(ctx, l, dynamolock.WithLeaseDurationToEnsure(time.Second))) // adopts T, lands H' (1 s), answer lost
	t.Logf("after the 1s heartbeat: holder lease ends in %.1fs", time.Until(l.Expiration()).Seconds())

	_, _ = done(out, terr) // the refresh's answer is handed over now
	t.Logf("after the refresh callback: holder lease ends in %.1fs", time.Until(l.Expiration()).Seconds())

	nl, err := other.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err, "the observer takes over after the 1 s lease it saw")
	bothHold(t, l, nl)
}

// Found by review: a guarded refresh built while a longer-lease heartbeat was pending
// lands after that heartbeat succeeded; its answer is lost. The refresh was
// never counted as a write that may land, so the holder keeps the 10 s lease
// while the item carries the refresh's 2 s lease.
func TestRefreshThatMayLandBoundsTheLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	w := &answerLost{Client: db}
	c := newClient(t, w, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.DisableHeartbeat())
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	w.lose.Store(true)
	require.Error(t, c.SendHeartbeatWithContext(ctx, l, dynamolock.WithLeaseDurationToEnsure(10*time.Second)))   // H lands, answer lost
	item, _ := l.TransactionWithRefresh()                                                                        // IN(C, H, T), lease 2 s
	require.NoError(t, c.SendHeartbeatWithContext(ctx, l, dynamolock.WithLeaseDurationToEnsure(10*time.Second))) // resend of H: ok, lease 10 s
	_, terr := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}})
	require.NoError(t, terr) // landed H -> T (2 s); its answer never reaches the callback
	t.Logf("holder lease ends in %.1fs; item lease %s", time.Until(l.Expiration()).Seconds(),
		rawItem(t, db, table, keyOf("k"))["leaseDuration"].(*types.AttributeValueMemberS).Value)

	nl, err := other.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err)
	bothHold(t, l, nl)
}

// replayRelease applies the armed release, lets hook run (a contender), and
// returns the answer of a second send of the same request: an SDK retry
// after the first answer was lost.
type replayRelease struct {
	*dynamodb.Client
	armed atomic.Bool
	hook  func()
}

func (r *replayRelease) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.Client.UpdateItem(ctx, in, o...)
	if err == nil && strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #r") && r.armed.CompareAndSwap(true, false) {
		r.hook()
		return r.Client.UpdateItem(ctx, in, o...)
	}
	return out, err
}

// Found by review: the release landed, its answer was lost, a contender acquired the
// released item, the SDK's retry met the contender's item: Release reports
// (false, ErrLockLost "taken over") although its release took effect.
func TestReleaseRetriedAfterAContenderAcquiredSucceeds(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	r := &replayRelease{Client: db}
	c := newClient(t, r, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	var nl *dynamolock.Lock
	r.hook = func() {
		var err error
		nl, err = other.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
	}
	r.armed.Store(true)
	ok, err := c.ReleaseLockWithContext(ctx, l)
	require.NotNil(t, nl)
	assert.True(t, ok, "the release took effect")
	assert.NoError(t, err)
	assert.NotErrorIs(t, err, dynamolock.ErrLockLost)
	t.Logf("Release = %v, %v; holder Err = %v", ok, err, l.Err())
}

// Found by review: with WithHoldLockOnServiceUnavailable, one 503 moves sentAt past
// the pending heartbeat's send time; every later successful resend of that
// heartbeat is then ignored by renewed(), so beats run back to back and the
// lock is lost one lease after the outage, with DynamoDB healthy.
func TestHoldLockOn503ThenHealthyKeepsTheLock(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	ctx := context.Background()
	se := &faults.ServiceErrors{Kinds: []faults.Kind{faults.ServiceUnavailable}, Operations: []string{"UpdateItem"}}
	fdb, _ := newDB(t, faults.Timeouts(time.Second, 1, 10*time.Millisecond), faults.Inject(se))
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat),
		dynamolock.WithHoldLockOnServiceUnavailable())
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	se.SetRate(1)
	errs := c.Stats().HeartbeatErrors
	waitFor(t, 3*time.Second, "a beat to meet a 503", func() bool { return c.Stats().HeartbeatErrors > errs })
	se.SetRate(0)
	sent := c.Stats().HeartbeatsSent
	time.Sleep(3 * lease) // the span observed: beats must go on at their period, and the lock stay held
	t.Logf("heartbeats in 3 leases after the outage: %d (expected about %d); Err = %v", c.Stats().HeartbeatsSent-sent, 3*lease/beat, l.Err())
	assert.NoError(t, l.Err(), "DynamoDB is healthy again: the lock must still be held")
}

// throttledAfterLanding makes the SDK itself retry the armed release: its
// first attempt lands and its answer is lost (a reset connection), every
// later attempt is throttled, so the call ends with a ThrottlingException
// although the release took effect.
type throttledAfterLanding struct {
	*dynamodb.Client
	armed atomic.Bool
}

func (r *throttledAfterLanding) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #r") && r.armed.CompareAndSwap(true, false) {
		var attempt atomic.Int32
		o = append(o, func(opts *dynamodb.Options) {
			opts.APIOptions = append(opts.APIOptions, func(stack *middleware.Stack) error {
				return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("landThenThrottle",
					func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
						if attempt.Add(1) == 1 {
							out, md, err := next.HandleFinalize(ctx, in)
							if err == nil {
								err = &smithyhttp.RequestSendError{Err: errors.New("read: connection reset by peer")}
							}
							return out, md, err
						}
						return middleware.FinalizeOutput{}, middleware.Metadata{},
							&smithy.GenericAPIError{Code: "ThrottlingException", Message: "Rate exceeded", Fault: smithy.FaultClient}
					}), middleware.After)
			})
		})
	}
	return r.Client.UpdateItem(ctx, in, o...)
}

// Found by review: the release's error was trusted to mean "not applied"
// from the last attempt alone; an earlier attempt had landed, and the lock
// stayed held here while another client acquired the released item.
func TestReleaseThrottledAfterLandingDoesNotLeaveTheLockHeld(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	r := &throttledAfterLanding{Client: db}
	c := newClient(t, r, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	r.armed.Store(true)
	ok, err := c.ReleaseLockWithContext(ctx, l)
	t.Logf("Release = %v, %v", ok, err)
	nl, err := other.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err, "the item was released")
	bothHold(t, l, nl)
}

// slowAnswer lets the armed UpdateItem land and delays its answer.
type slowAnswer struct {
	*dynamodb.Client
	armed  atomic.Bool
	delay  time.Duration
	landed chan struct{} // closed when the armed call has landed, if not nil
}

func (r *slowAnswer) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := r.Client.UpdateItem(ctx, in, o...)
	if r.armed.CompareAndSwap(true, false) {
		if r.landed != nil {
			close(r.landed)
		}
		time.Sleep(r.delay)
	}
	return out, err
}

// Found by review: a heartbeat with a shorter lease lowers leaseEnd but notifies the
// scheduler only when the call returns; a Done channel taken earlier (and
// Do's context, and contexts derived from it) stays open after Err reports
// the loss.
func TestShorterHeartbeatClosesDoneInTime(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	r := &slowAnswer{Client: db, delay: 4 * time.Second}
	c := newClient(t, r, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	done := l.Done()
	r.armed.Store(true)
	beat := make(chan error, 1)
	go func() { beat <- c.SendHeartbeatWithContext(ctx, l, dynamolock.WithLeaseDurationToEnsure(time.Second)) }()
	waitFor(t, 3*time.Second, "the 1 s lease to run out", func() bool { return l.Err() != nil })
	assert.True(t, closedWithin(done, 100*time.Millisecond), "Err = %v, but the Done channel taken before is still open", l.Err())
	<-beat
}

// Found by review: a reentrant acquisition takes over the item of a concurrent
// non-reentrant acquisition of the same client whose answer has not come
// back yet (not registered): both callers get a lock that looks held.
func TestReentrantDoesNotTakeAConcurrentAcquisition(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	r := &slowAnswer{Client: db, delay: time.Second, landed: make(chan struct{})}
	c := newClient(t, r, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	r.armed.Store(true)
	first := make(chan *dynamolock.Lock)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k")
		assert.NoError(t, err)
		first <- l
	}()
	<-r.landed // the non-reentrant acquisition's write landed; its answer is on the way
	again, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant())
	require.NoError(t, err)
	l := <-first
	require.NotNil(t, l)
	if l != again {
		bothHold(t, l, again) // one lock, or two of which at most one looks held
	}
}

// Found by review: Ensure reports success on a released lock.
func TestEnsureOnAReleasedLock(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	assert.Error(t, l.Ensure(ctx, time.Second), "Err = %v", l.Err())
}
