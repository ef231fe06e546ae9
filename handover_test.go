package dynamolock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// A goroutine waiting for a key that another goroutine of the same client
// holds gets it as soon as it is released, not at its next poll; a waiter
// in another client still polls.
func TestSameProcessHandOver(t *testing.T) {
	ctx := context.Background()
	c, held := clientHolding(t)

	const refresh = 10 * time.Second // far longer than a hand-over may take
	got := make(chan *dynamolock.Lock, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh))
		assert.NoError(t, err)
		got <- l
	}()
	// The waiter's write failed on the held item (its second call): it
	// sleeps until its next poll, ten seconds away.
	calls := c.Stats().DynamoDBCalls
	waitFor(t, 5*time.Second, "the waiter to see the lock held", func() bool { return c.Stats().DynamoDBCalls > calls })
	released := time.Now()
	ok, err := c.ReleaseLockWithContext(ctx, held)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case l := <-got:
		took := time.Since(released)
		t.Logf("hand-over took %s (refresh period %s)", took, refresh)
		assert.Less(t, took, refresh/2, "woken by the release, not by its poll")
		assert.NoError(t, l.Err())
		assert.Greater(t, l.FencingToken(), held.FencingToken())
	case <-time.After(refresh):
		t.Fatal("the waiter was not handed the lock")
	}
}

// Several goroutines of one client wait for a key it holds: each release
// hands the lock to the next one at once. A waiter that loses the race to
// another waiter here sees the item name this client while the winner is
// still between its write and holding the lock; it must still be woken
// when the winner releases, not sleep to its next poll.
func TestSameProcessHandOverChain(t *testing.T) {
	ctx := context.Background()
	c, held := clientHolding(t)

	const refresh = 20 * time.Second // far longer than the chain may take
	const waiters = 4
	done := make(chan time.Time, waiters)
	for range waiters {
		go func() {
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh))
			if !assert.NoError(t, err) {
				return
			}
			_, err = c.ReleaseLockWithContext(ctx, l)
			assert.NoError(t, err)
			done <- time.Now()
		}()
	}
	calls := c.Stats().DynamoDBCalls
	waitFor(t, 5*time.Second, "every waiter to see the lock held", func() bool { return c.Stats().DynamoDBCalls >= calls+waiters })
	released := time.Now()
	_, err := c.ReleaseLockWithContext(ctx, held)
	require.NoError(t, err)
	for i := range waiters {
		select {
		case at := <-done:
			t.Logf("waiter %d done %s after the first release", i+1, at.Sub(released))
		case <-time.After(refresh / 2):
			t.Fatalf("only %d of %d waiters got the lock by hand-over; the others sleep to their next poll", i, waiters)
		}
	}
}

// clientHolding returns a client (lease 20 s) holding key "k" of a fresh
// table.
func clientHolding(t *testing.T) (*dynamolock.Client, *dynamolock.Lock) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second))
	held, err := c.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)
	return c, held
}

// A waiter woken because the lock ended here writes at once instead of
// reading first. When the lock ended by being taken over, that write must
// fail on the new holder's item, and the waiter go on waiting for it.
func TestSameProcessWakeOnLossDoesNotTakeTheLock(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	acquiring := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("ownerName")} // counts acquiring writes only
	fdb := faults.Wrap(db, acquiring)
	c := newClient(t, fdb, table, fast...)
	held, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := c.AcquireLockWithContext(wctx, "k", dynamolock.WithRefreshPeriod(time.Minute),
			dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
		waited <- err
	}()
	waitFor(t, 5*time.Second, "the waiter's first write, failed on the lock held here", func() bool { return fdb.Hits(acquiring) == 2 })
	// Another owner takes the item over; the next heartbeat finds it and
	// ends the lock here, which wakes the waiter.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("thief-rvn"),
	})
	require.True(t, closedWithin(held.Done(), 5*time.Second), "the heartbeat finds the takeover")
	waitFor(t, 5*time.Second, "the woken waiter's write (its refresh period is a minute)", func() bool { return fdb.Hits(acquiring) == 3 })
	item := rawItem(t, db, table, keyOf("k"))
	assert.Equal(t, "thief", item["ownerName"].(*types.AttributeValueMemberS).Value, "the waiter's write failed on the thief's item")
	select {
	case err := <-waited:
		t.Fatalf("the waiter returned (%v) while the thief holds the lock", err)
	default:
	}
	cancel()
	require.ErrorIs(t, <-waited, context.Canceled)
}

// A release here wakes one plain waiter, not all of them (see the
// contention figures in docs/BENCHMARKS.md). If the woken one gives up
// without the lock (here: its context ends as it writes), the next waiter
// must be woken, not left to its next poll a minute away.
func TestSameProcessWakePassesOnWhenTheWokenWaiterGivesUp(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	type cancelKey struct{}
	var armed atomic.Bool
	acquiring := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("ownerName"), Before: func(ctx context.Context) error {
		if armed.CompareAndSwap(true, false) {
			// The first waiter woken by the release: it gives up now.
			ctx.Value(cancelKey{}).(context.CancelFunc)()
			return faults.Canceled("UpdateItem", context.Canceled)
		}
		return nil
	}}
	fdb := faults.Wrap(db, acquiring)
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second))
	held, err := c.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)

	const refresh = time.Minute
	type result struct {
		l   *dynamolock.Lock
		err error
	}
	results := make(chan result, 2)
	for range 2 {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		ctx = context.WithValue(ctx, cancelKey{}, context.CancelFunc(cancel))
		go func() {
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh),
				dynamolock.WithAdditionalTimeToWaitForLock(refresh))
			results <- result{l, err}
		}()
	}
	waitFor(t, 5*time.Second, "both waiters' first writes, failed on the lock held here", func() bool { return fdb.Hits(acquiring) == 3 })
	// Each waiter is asleep by now, or sees at once that a lock ended
	// here since its write and writes again: either way the first of them
	// to write after the release gives up, and the other must get the lock.
	armed.Store(true)
	_, err = c.ReleaseLockWithContext(context.Background(), held)
	require.NoError(t, err)
	var gaveUp, got int
	for range 2 {
		select {
		case r := <-results:
			if r.err != nil {
				require.ErrorIs(t, r.err, context.Canceled, "the woken waiter gave up")
				gaveUp++
				continue
			}
			assert.NoError(t, r.l.Err())
			got++
		case <-time.After(10 * time.Second):
			t.Fatal("the other waiter was not woken when the first gave up: it sleeps to its next poll")
		}
	}
	assert.Equal(t, 1, gaveUp)
	assert.Equal(t, 1, got)
}
