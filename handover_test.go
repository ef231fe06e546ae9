package dynamolock_test

import (
	"context"
	"log/slog"
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
	waiting := &logCounter{msg: "waiting for lock"}
	c, held := clientHolding(t, dynamolock.WithSlog(slog.New(waiting)))

	const refresh = 10 * time.Second // far longer than a hand-over may take
	got := make(chan *dynamolock.Lock, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh))
		assert.NoError(t, err)
		got <- l
	}()
	// The key is held here: the waiter sends no write that would fail on
	// the held item, and sleeps until the lock ends here or its next poll,
	// ten seconds away.
	calls := c.Stats().DynamoDBCalls
	waitFor(t, 5*time.Second, "the waiter to wait", func() bool { return waiting.count() == 1 })
	assert.Equal(t, calls, c.Stats().DynamoDBCalls, "no call while the lock is held here")
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
	waiting := &logCounter{msg: "waiting for lock"}
	c, held := clientHolding(t, dynamolock.WithSlog(slog.New(waiting)))

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
	waitFor(t, 5*time.Second, "every waiter to wait", func() bool { return waiting.count() >= waiters })
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

// clientHolding returns a client (lease 20 s, and opts) holding key "k" of
// a fresh table.
func clientHolding(t *testing.T, opts ...dynamolock.ClientOption) (*dynamolock.Client, *dynamolock.Lock) {
	table := newTable(t, "")
	db, _ := newDB(t)
	opts = append([]dynamolock.ClientOption{dynamolock.WithLeaseDuration(20 * time.Second), dynamolock.WithHeartbeatPeriod(5 * time.Second)}, opts...)
	c := newClient(t, db, table, opts...)
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
	waiting := &logCounter{msg: "waiting for lock"}
	c := newClient(t, fdb, table, append(fast, dynamolock.WithSlog(slog.New(waiting)))...)
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
	// The key is held here: the waiter waits without a write.
	waitFor(t, 5*time.Second, "the waiter to wait", func() bool { return waiting.count() == 1 })
	require.Equal(t, 1, fdb.Hits(acquiring), "no write while the lock is held here")
	// Another owner takes the item over; the next heartbeat finds it and
	// ends the lock here, which wakes the waiter.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("thief-rvn"),
	})
	require.True(t, closedWithin(held.Done(), 5*time.Second), "the heartbeat finds the takeover")
	waitFor(t, 5*time.Second, "the woken waiter's write (its refresh period is a minute)", func() bool { return fdb.Hits(acquiring) == 2 })
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
	waiting := &logCounter{msg: "waiting for lock"}
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second),
		dynamolock.WithSlog(slog.New(waiting)))
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
	// The key is held here: both wait without a write.
	waitFor(t, 5*time.Second, "both waiters to wait", func() bool { return waiting.count() == 2 })
	require.Equal(t, 1, fdb.Hits(acquiring), "no write while the lock is held here")
	// The release wakes the waiter that watched first; it gives up as it
	// writes, and the other must get the lock.
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

// logCounter is a slog handler that counts the client's records with
// message msg, at every level: how a test learns that an acquisition is
// waiting without a DynamoDB call to count.
type logCounter struct {
	msg string
	n   atomic.Int64
}

func (h *logCounter) count() int { return int(h.n.Load()) }

func (h *logCounter) Enabled(context.Context, slog.Level) bool { return true }

func (h *logCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.n.Add(1)
	}
	return nil
}

func (h *logCounter) WithAttrs([]slog.Attr) slog.Handler { return h }

func (h *logCounter) WithGroup(string) slog.Handler { return h }

// A goroutine that releases a lock that a waiter here watches, and asks
// for it again at once, goes behind that waiter: the woken waiter takes
// the key with its one write, and the releaser's acquisition sends nothing
// while the key is being handed over or held here. Before, the releaser
// wrote at once and raced the woken waiter for the released item: one of
// the two writes failed, and the releaser, already running, mostly won, so
// that one goroutine kept the key while the others waited (2 clients × 8
// goroutines on one key: docs/BENCHMARKS.md §5b).
func TestSameProcessReleaserAsksAgainBehindTheWokenWaiter(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	var slowNext atomic.Bool
	acquiring := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("ownerName"), Before: func(ctx context.Context) error {
		if slowNext.CompareAndSwap(true, false) {
			// The woken waiter's write: time for the releaser to write first.
			return faults.Sleep(200 * time.Millisecond)(ctx)
		}
		return nil
	}}
	fdb := faults.Wrap(db, acquiring)
	waiting := &logCounter{msg: "waiting for lock"}
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second),
		dynamolock.WithSlog(slog.New(waiting)))
	held, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	const refresh = time.Minute // only a hand-over can end a wait within the test
	acquire := func(into chan<- *dynamolock.Lock) {
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh), dynamolock.WithAdditionalTimeToWaitForLock(refresh))
		assert.NoError(t, err)
		into <- l
	}
	waiter, again := make(chan *dynamolock.Lock, 1), make(chan *dynamolock.Lock, 1)
	go acquire(waiter)
	waitFor(t, 5*time.Second, "the waiter to wait", func() bool { return waiting.count() == 1 })
	slowNext.Store(true)
	ok, err := c.ReleaseLockWithContext(ctx, held)
	require.NoError(t, err)
	require.True(t, ok)
	go acquire(again) // the releaser asks again at once
	var first *dynamolock.Lock
	select {
	case first = <-waiter:
	case <-again:
		t.Fatal("the releaser took the key ahead of the waiter its release woke")
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter was not handed the lock")
	}
	assert.Equal(t, held.FencingToken()+1, first.FencingToken())
	assert.Equal(t, 2, fdb.Hits(acquiring), "one write per acquisition so far, the releaser's none")
	ok, err = c.ReleaseLockWithContext(ctx, first)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case second := <-again:
		assert.Equal(t, held.FencingToken()+2, second.FencingToken())
	case <-time.After(10 * time.Second):
		t.Fatal("the releaser, waiting here, was not handed the lock in its turn")
	}
	assert.Equal(t, 3, fdb.Hits(acquiring), "one write per acquisition, none failed")
}
