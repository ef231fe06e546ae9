package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// queueLen is the number of entries in the item's fair queue.
func queueLen(t testing.TB, db *dynamodb.Client, table, key string) int {
	m, _ := rawItem(t, db, table, keyOf(key))["fairQueue"].(*types.AttributeValueMemberM)
	if m == nil {
		return 0
	}
	return len(m.Value)
}

// order records who acquired, in order.
type order struct {
	mu    sync.Mutex
	names []string
}

func (o *order) add(name string) {
	o.mu.Lock()
	o.names = append(o.names, name)
	o.mu.Unlock()
}

func (o *order) get() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.names...)
}

// heldByHolder returns a fresh table whose key "k" a client named
// "holder" holds.
func heldByHolder(t *testing.T) (string, *dynamodb.Client, *dynamolock.Client, *dynamolock.Lock) {
	table := newTable(t, "")
	db, _ := newDB(t)
	holder := newClient(t, db, table, dynamolock.WithOwnerName("holder"))
	h, err := holder.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)
	return table, db, holder, h
}

var fairPoll = []dynamolock.AcquireLockOption{
	dynamolock.WithFairness(),
	dynamolock.WithRefreshPeriod(100 * time.Millisecond),
	dynamolock.WithAdditionalTimeToWaitForLock(20 * time.Second),
}

// Fair waiters get the lock in the order they started waiting, and a holder
// that releases and at once acquires again goes behind them.
func TestFairOrder(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(5 * time.Second), dynamolock.WithHeartbeatPeriod(time.Second)}
	clients := map[string]*dynamolock.Client{}
	for _, n := range []string{"A", "B", "C"} {
		clients[n] = newClient(t, db, table, append(opts, dynamolock.WithOwnerName(n))...)
	}
	held, err := clients["A"].AcquireLockWithContext(ctx, "k", fairPoll...)
	require.NoError(t, err)

	var got order
	var wg sync.WaitGroup
	take := func(name string) {
		defer wg.Done()
		l, err := clients[name].AcquireLockWithContext(ctx, "k", fairPoll...)
		if !assert.NoError(t, err, name) {
			return
		}
		got.add(name)
		_, err = clients[name].ReleaseLockWithContext(ctx, l)
		assert.NoError(t, err)
	}
	wg.Add(2)
	go take("B")
	waitFor(t, 10*time.Second, "B in the queue", func() bool { return queueLen(t, db, table, "k") == 1 })
	go take("C")
	waitFor(t, 10*time.Second, "C in the queue", func() bool { return queueLen(t, db, table, "k") == 2 })

	// A releases and re-acquires at once: it must go behind B and C.
	_, err = clients["A"].ReleaseLockWithContext(ctx, held)
	require.NoError(t, err)
	wg.Add(1)
	take("A")
	wg.Wait()
	assert.Equal(t, []string{"B", "C", "A"}, got.get())
	assert.Zero(t, queueLen(t, db, table, "k"), "every waiter left the queue")
}

// An uncontended fair acquisition costs one write, like a plain one; a
// waiter pays one more write to join the queue.
func TestFairCalls(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, dynamolock.WithOwnerName("solo"))
	calls.reset()
	l, err := c.AcquireLockWithContext(ctx, "k", fairPoll...)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, tableChecked(t, calls.reset()), "a free lock: one write")
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	holderDB, _ := newDB(t)
	holder := newClient(t, holderDB, table, dynamolock.WithOwnerName("holder"))
	h, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	calls.reset()
	done := make(chan error, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", fairPoll...)
		if err == nil {
			_, err = c.ReleaseLockWithContext(ctx, l)
		}
		done <- err
	}()
	waitFor(t, 10*time.Second, "the waiter in the queue", func() bool { return queueLen(t, holderDB, table, "k") == 1 })
	_, err = holder.ReleaseLockWithContext(ctx, h)
	require.NoError(t, err)
	require.NoError(t, <-done)
	got := calls.reset()
	t.Logf("a waiting fair acquisition: %v", got)
	// The failed write, the join, the acquiring write and the release; the
	// rest are polls (the wait was shorter than a third of the lease, so no
	// renewal of the entry).
	assert.Equal(t, 4, got["UpdateItem"])
	assert.Positive(t, got["GetItem"])
}

// A fair waiter that stops (its process dies: it sends nothing more, not
// even its leave) holds up the waiters behind it for its lease, as they see
// it, and no longer.
func TestFairWaiterCrash(t *testing.T) {
	table, db, holder, h := heldByHolder(t)
	ctx := context.Background()

	// B's client dies after its join: every later call fails without being
	// sent.
	var dead atomic.Bool
	crash := &faults.Rule{Op: "UpdateItem", Match: func(any) bool { return dead.Load() }, Drop: true}
	getCrash := &faults.Rule{Op: "GetItem", Match: func(any) bool { return dead.Load() }, Drop: true}
	bDB := faults.Wrap(db, crash, getCrash)
	const waiterLease = 2 * time.Second
	b := newClient(t, bDB, table, dynamolock.WithOwnerName("B"), dynamolock.WithLeaseDuration(waiterLease),
		dynamolock.WithHeartbeatPeriod(waiterLease/4))
	bCtx, stopB := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() {
		_, err := b.AcquireLockWithContext(bCtx, "k", fairPoll...)
		bDone <- err
	}()
	waitFor(t, 10*time.Second, "B in the queue", func() bool { return queueLen(t, db, table, "k") == 1 })
	dead.Store(true)
	stopB()
	require.Error(t, <-bDone)
	require.Equal(t, 1, queueLen(t, db, table, "k"), "B's leave was never sent")
	crashed := time.Now()

	c := newClient(t, db, table, dynamolock.WithOwnerName("C"))
	cGot := make(chan time.Time, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", fairPoll...)
		if assert.NoError(t, err) {
			cGot <- time.Now()
			_, _ = c.ReleaseLockWithContext(ctx, l)
		}
	}()
	waitFor(t, 10*time.Second, "C in the queue", func() bool { return queueLen(t, db, table, "k") == 2 })
	_, err := holder.ReleaseLockWithContext(ctx, h)
	require.NoError(t, err)
	select {
	case at := <-cGot:
		took := at.Sub(crashed)
		t.Logf("C got the lock %s after B crashed (B's lease %s)", took, waiterLease)
		assert.GreaterOrEqual(t, took, waiterLease, "B's entry is respected for its lease")
		assert.Less(t, took, waiterLease+5*time.Second, "and skipped after it")
	case <-time.After(waiterLease + 15*time.Second):
		t.Fatal("the crashed waiter blocked the lock")
	}
	assert.Zero(t, queueLen(t, db, table, "k"), "C removed the dead entry with its own")
}

// A fair waiter whose context ends leaves the queue at once, so the next
// waiter is not held up.
func TestFairWaiterGivesUp(t *testing.T) {
	table, db, holder, h := heldByHolder(t)
	ctx := context.Background()
	b := newClient(t, db, table, dynamolock.WithOwnerName("B"))
	bCtx, stopB := context.WithCancel(ctx)
	bDone := make(chan error, 1)
	go func() {
		_, err := b.AcquireLockWithContext(bCtx, "k", fairPoll...)
		bDone <- err
	}()
	waitFor(t, 10*time.Second, "B in the queue", func() bool { return queueLen(t, db, table, "k") == 1 })
	stopB()
	err := <-bDone
	require.ErrorIs(t, err, context.Canceled)
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	// B returned at once; its client removes its entry right after, in the
	// background (its context had ended).
	waitFor(t, 5*time.Second, "B to leave the queue", func() bool { return queueLen(t, db, table, "k") == 0 })

	_, err = holder.ReleaseLockWithContext(ctx, h)
	require.NoError(t, err)
	c := newClient(t, db, table, dynamolock.WithOwnerName("C"))
	start := time.Now()
	l, err := c.AcquireLockWithContext(ctx, "k", fairPoll...)
	require.NoError(t, err)
	assert.Less(t, time.Since(start), time.Second, "nobody left to wait for")
	assert.NoError(t, l.Close())
}

// Fair and plain clients loop on one key: they never hold it together, and
// every fair client gets it.
func TestFairMixedClients(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	var inside atomic.Int32
	var overlaps atomic.Int32
	counts := make([]atomic.Int32, 5)
	stop := time.Now().Add(4 * time.Second)
	var wg sync.WaitGroup
	for i := range counts {
		fair := i < 3
		c := newClient(t, db, table, dynamolock.WithOwnerName(fmt.Sprintf("c%d-fair=%v", i, fair)),
			dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		opts := []dynamolock.AcquireLockOption{dynamolock.WithRefreshPeriod(50 * time.Millisecond),
			dynamolock.WithAdditionalTimeToWaitForLock(time.Minute)}
		if fair {
			opts = append(opts, dynamolock.WithFairness())
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				l, err := c.AcquireLockWithContext(ctx, "k", opts...)
				if !assert.NoError(t, err) {
					return
				}
				if inside.Add(1) != 1 {
					overlaps.Add(1)
				}
				counts[i].Add(1)
				time.Sleep(5 * time.Millisecond) // the work under the lock
				inside.Add(-1)
				_, err = c.ReleaseLockWithContext(ctx, l)
				assert.NoError(t, err)
				if !fair {
					time.Sleep(20 * time.Millisecond) // plain clients pause, or they starve everyone
				}
			}
		}()
	}
	wg.Wait()
	assert.Zero(t, overlaps.Load(), "the lock was never held twice")
	for i := range counts {
		t.Logf("client %d (fair=%v): %d acquisitions", i, i < 3, counts[i].Load())
		if i < 3 {
			assert.Positive(t, counts[i].Load(), "fair client %d got the lock", i)
		}
	}
	assert.Zero(t, queueLen(t, db, table, "k"), "no entry left behind")
}

// Amazon's Java client and dynamolock v2 replace the item when they acquire
// it, clearing the queue: the waiters add themselves again with their
// tickets, so their order holds.
func TestFairQueueClearedByForeignWriter(t *testing.T) {
	table, db, _, h := heldByHolder(t)
	ctx := context.Background()
	var got order
	var wg sync.WaitGroup
	for i, n := range []string{"B", "C"} {
		c := newClient(t, db, table, dynamolock.WithOwnerName(n))
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := c.AcquireLockWithContext(ctx, "k", fairPoll...)
			if assert.NoError(t, err, n) {
				got.add(n)
				time.Sleep(50 * time.Millisecond)
				_, err = c.ReleaseLockWithContext(ctx, l)
				assert.NoError(t, err)
			}
		}()
		waitFor(t, 10*time.Second, n+" in the queue", func() bool { return queueLen(t, db, table, "k") == i+1 })
	}
	// The Java client takes the lock over (as if the holder were dead) with
	// a PutItem: the queue is gone; it never renews, so its lease of one
	// second runs out. Our holder is closed only after that (its release
	// finds the item taken): a release first would let B, the head,
	// take the free lock before the PutItem replaced B's hold.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("java"), "leaseDuration": s("1000"), "recordVersionNumber": s("java-rvn"),
	})
	_ = h.Close() // stops its heartbeats; the item is not its own any more
	waitFor(t, 10*time.Second, "the waiters back in the queue", func() bool { return queueLen(t, db, table, "k") == 2 })
	wg.Wait()
	assert.Equal(t, []string{"B", "C"}, got.get())
}

// WithFairness is refused where it cannot keep its promise, before any call.
func TestFairBadInput(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	c := newClient(t, db, table)
	calls.reset()
	_, err := c.AcquireLock("k", dynamolock.WithFairness(), dynamolock.FailIfLocked())
	var inv *dynamolock.InvalidArgumentError
	require.ErrorAs(t, err, &inv)
	assert.Equal(t, "WithFairness", inv.Name)
	_, err = c.AcquireLocks(context.Background(), []string{"a", "b"}, dynamolock.WithFairness())
	require.ErrorAs(t, err, &inv)
	assert.True(t, errors.Is(err, dynamolock.ErrInvalidArgument))
	_, err = dynamolock.New(db, table, dynamolock.WithTTLAttribute("fairQueue"))
	require.ErrorAs(t, err, &inv, "the queue's attribute is the lock's own")
	_, err = dynamolock.New(db, table, dynamolock.WithPartitionKeyName("fairQueue"))
	require.ErrorAs(t, err, &inv)
	assert.Zero(t, calls.total())
}

// The orderings a fair acquisition must survive: its join's answer lost
// after the entry landed, the join applied twice (an SDK retry), and the
// answer of its acquiring write (which also removes its entry) lost after
// it landed. It must still get the lock once, and leave no entry behind.
func TestFairLostAnswers(t *testing.T) {
	for _, tc := range []struct {
		name   string
		replay bool
	}{{"lost answers", false}, {"replayed join", true}} {
		t.Run(tc.name, func(t *testing.T) {
			table, db, holder, h := heldByHolder(t)
			ctx := context.Background()
			var released atomic.Bool
			join := &faults.Rule{Op: "UpdateItem", Times: 1, LoseAnswer: !tc.replay, Replay: tc.replay,
				Match: faults.All(faults.ConditionOn("fairQueue"), faults.Not(faults.Sets("ownerName")))}
			take := &faults.Rule{Op: "UpdateItem", Times: 1, LoseAnswer: true,
				Match: faults.All(faults.Sets("ownerName"), func(any) bool { return released.Load() })}
			bDB := faults.Wrap(db, join, take)
			b := newClient(t, bDB, table, dynamolock.WithOwnerName("B"))
			got := make(chan *dynamolock.Lock, 1)
			go func() {
				l, err := b.AcquireLockWithContext(ctx, "k", fairPoll...)
				assert.NoError(t, err)
				got <- l
			}()
			waitFor(t, 10*time.Second, "B in the queue", func() bool { return queueLen(t, db, table, "k") == 1 })
			released.Store(true)
			_, err := holder.ReleaseLockWithContext(ctx, h)
			require.NoError(t, err)
			l := <-got
			require.NotNil(t, l)
			assert.Equal(t, 1, bDB.Hits(join))
			assert.Equal(t, 1, bDB.Hits(take), "the acquiring write's answer was lost")
			assert.NoError(t, l.Err())
			assert.Greater(t, l.FencingToken(), h.FencingToken())
			item := rawItem(t, db, table, keyOf("k"))
			assert.Equal(t, "B", item["ownerName"].(*types.AttributeValueMemberS).Value)
			assert.Zero(t, queueLen(t, db, table, "k"), "the landed write removed B's entry")
			assert.NoError(t, l.Close())
		})
	}
}

// A dead entry whose lease is longer than a fair acquisition's whole wait
// does not fail the acquisitions of a free lock: they wait until it counts
// as gone, then take the lock and remove it.
func TestFairDeadEntryLongerThanTheWait(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	entry := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"t": &types.AttributeValueMemberN{Value: "1"}, "b": s("x"), "l": &types.AttributeValueMemberN{Value: "3000"}}}
	putRaw(t, db, table, map[string]types.AttributeValue{"key": s("k"), "ownerName": s("old"), "leaseDuration": s("1s"),
		"recordVersionNumber": s("r"), "isReleased": s("1"),
		"fairQueue": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"crashed": entry}}})
	c := newClient(t, db, table, fast...)
	start := time.Now()
	l, err := c.AcquireLockWithContext(context.Background(), "k", dynamolock.WithFairness(),
		dynamolock.WithRefreshPeriod(100*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(0))
	require.NoError(t, err, "a dead entry must not make a free lock unobtainable")
	took := time.Since(start)
	t.Logf("took %s (the dead entry's lease: 3s; this acquisition's wait: 1s)", took)
	assert.GreaterOrEqual(t, took, 3*time.Second, "the entry is respected for its lease")
	assert.Zero(t, queueLen(t, db, table, "k"), "and removed with the acquiring write")
	assert.NoError(t, l.Close())
}

// A fair waiter that takes the lock over as reentrant (the item came to
// name its own owner) takes its entry out with it.
func TestFairReentrantTakeoverLeavesNoEntry(t *testing.T) {
	table, db, _, _ := heldByHolder(t)
	ctx := context.Background()
	y := newClient(t, db, table, dynamolock.WithOwnerName("same"))
	got := make(chan *dynamolock.Lock, 1)
	go func() {
		l, err := y.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness(), dynamolock.WithReentrant(),
			dynamolock.WithRefreshPeriod(time.Second), dynamolock.WithAdditionalTimeToWaitForLock(20*time.Second))
		assert.NoError(t, err)
		got <- l
	}()
	waitFor(t, 10*time.Second, "Y in the queue", func() bool { return queueLen(t, db, table, "k") == 1 })
	// Another process with the same owner name takes the key over while Y
	// waits (as a restarted one, or v2, would): written as such a process
	// writes it, with Y's entry kept. Before issue 47 this was a release
	// and z's acquisition before Y's next poll; Y, the queue's head, now
	// polls every few milliseconds and would take the free key first.
	item := rawItem(t, db, table, keyOf("k"))
	item["ownerName"], item["recordVersionNumber"] = s("same"), s("z-rvn")
	putRaw(t, db, table, item)
	l := <-got
	require.NotNil(t, l)
	assert.Equal(t, "same", l.OwnerName())
	assert.Zero(t, queueLen(t, db, table, "k"), "Y's entry went with its write")
	assert.NoError(t, l.Close())
}

// A waiter for a key that another client with the same owner name holds
// polls on its schedule (once per refresh period before issue 47; now as
// its queue's head), not in a loop, even while this client's other locks
// come and go.
func TestSameOwnerElsewherePolledAtTheRefreshPeriod(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	other := newClient(t, db, table, dynamolock.WithOwnerName("same"))
	_, err := other.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	slowGet := &faults.Rule{Op: "GetItem", Before: faults.Sleep(20 * time.Millisecond)}
	wdb := faults.Wrap(db, slowGet)
	c := newClient(t, wdb, table, dynamolock.WithOwnerName("same"))
	stop := make(chan struct{})
	churned := make(chan struct{})
	go func() { // this client's other locks come and go
		defer close(churned)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if l, err := c.AcquireLockWithContext(ctx, "other"); err == nil {
				_, _ = c.ReleaseLockWithContext(ctx, l)
			}
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err = c.AcquireLockWithContext(wctx, "k", dynamolock.WithRefreshPeriod(time.Second))
	require.Error(t, err)
	close(stop)
	<-churned
	reads := wdb.Hits(slowGet)
	t.Logf("%d reads in 3 s at a 1 s refresh period", reads)
	// The waiter is its key's queue's only one: it reads at most 18 times
	// a second once the hold it sees is 222 ms old (issue 47), and the
	// churn of this client's other locks adds no read.
	assert.LessOrEqual(t, reads, int(3*time.Second/(time.Second/18))+8, "no busy polling")
}

// Found by the simulation (invariant 13, seed 281 of a run with fair
// semaphores): a fair reentrant waiter that found the key held here left
// the queue (one write) and returned that lock, which another goroutine of
// the client had released while the write was on its way: the call
// returned a lock already released. It now returns the lock only if it is
// still held, and otherwise decides on what the item shows.
func TestFairReentrantWaiterDoesNotReturnALockReleasedMeanwhile(t *testing.T) {
	table, raw, holder, h := heldByHolder(t)
	ctx := context.Background()
	gate := faults.NewGate()
	t.Cleanup(gate.Open)
	var armed atomic.Bool
	leave := &faults.Rule{Op: "UpdateItem", Match: func(any) bool { return armed.Load() }, Times: 1, Before: gate.Wait}
	// The waiter is its queue's head and polls every few milliseconds
	// (issue 47): its reads wait while the other goroutine takes the key.
	reads := faults.NewGate()
	t.Cleanup(reads.Open)
	var readsHeld atomic.Bool
	held := &faults.Rule{Op: "GetItem", Match: func(any) bool { return readsHeld.Load() }, Before: reads.Wait}
	y := newClient(t, faults.Wrap(raw, leave, held), table, dynamolock.WithOwnerName("same"), dynamolock.DisableHeartbeat())
	got := make(chan *dynamolock.Lock, 1)
	go func() {
		l, err := y.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness(), dynamolock.WithReentrant(),
			dynamolock.WithRefreshPeriod(200*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(20*time.Second))
		assert.NoError(t, err)
		got <- l
	}()
	waitFor(t, 10*time.Second, "the waiter in the queue", func() bool { return queueLen(t, raw, table, "k") == 1 })
	readsHeld.Store(true)
	_, err := holder.ReleaseLockWithContext(ctx, h)
	require.NoError(t, err)
	// Another goroutine of the same client takes the key plainly before the
	// waiter's next poll; the waiter's next write (leaving the queue) waits.
	mine, err := y.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	armed.Store(true)
	readsHeld.Store(false)
	reads.Open()
	select {
	case <-gate.Arrived():
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not leave the queue within 10 s")
	}
	_, err = y.ReleaseLockWithContext(ctx, mine) // released while the waiter leaves the queue
	require.NoError(t, err)
	gate.Open()
	l := <-got
	require.NotNil(t, l)
	assert.NoError(t, l.Err(), "the waiter returned a lock already released")
	if l.Err() == nil {
		assert.NoError(t, l.Close())
	}
}
