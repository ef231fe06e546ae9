package dynamolock_test

import (
	"context"
	"flag"
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

// semOpts: a 3 s lease renewed every 500 ms.
var semOpts = []dynamolock.ClientOption{
	dynamolock.WithLeaseDuration(semLease),
	dynamolock.WithHeartbeatPeriod(500 * time.Millisecond),
}

const semLease = 3 * time.Second

func TestSemaphoreBadInput(t *testing.T) {
	db, cc := newDB(t)
	c := newClient(t, db, "no-such-table", semOpts...)
	for _, size := range []int{-1, 0, dynamolock.MaxSemaphoreSize + 1} {
		_, err := c.NewSemaphore("jobs", size)
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "size %d", size)
		require.ErrorContains(t, err, "size")
	}
	_, err := c.NewSemaphore("", 2)
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	_, err = c.NewSemaphore(string(make([]byte, 2047)), 2)
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "name#1 is longer than a key may be")
	s, err := c.NewSemaphore("jobs", dynamolock.MaxSemaphoreSize)
	require.NoError(t, err)
	_, err = s.Acquire(context.Background(), dynamolock.WithReentrant())
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	_, err = s.Acquire(context.Background(), dynamolock.WithRefreshPeriod(0))
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	require.Zero(t, cc.total(), "bad input makes no DynamoDB call")
}

// Several clients, several goroutines each, contend for a semaphore of
// size 2: at no instant do more than 2 hold it, and everyone gets a turn.
func TestSemaphoreNeverMoreThanSizeHolders(t *testing.T) {
	const size, clients, workers, rounds = 2, 3, 2, 4
	table := newTable(t, "")
	db, _ := newDB(t)
	var holders, maxHolders, turns atomic.Int64
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for range clients {
		c := newClient(t, db, table, semOpts...)
		sem, err := c.NewSemaphore("jobs", size)
		require.NoError(t, err)
		for range workers {
			wg.Go(func() {
				for range rounds {
					l, err := sem.Acquire(ctx, dynamolock.WithRefreshPeriod(250*time.Millisecond),
						dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
					if !assert.NoError(t, err) {
						return
					}
					n := holders.Add(1)
					for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
					}
					time.Sleep(50 * time.Millisecond) // the work done under the semaphore
					assert.NoError(t, l.Err(), "the slot was held all along")
					holders.Add(-1)
					turns.Add(1)
					_, err = c.ReleaseLockWithContext(ctx, l)
					assert.NoError(t, err)
				}
			})
		}
	}
	wg.Wait()
	t.Logf("%d turns, at most %d holders at once", turns.Load(), maxHolders.Load())
	require.Equal(t, int64(clients*workers*rounds), turns.Load())
	require.LessOrEqual(t, maxHolders.Load(), int64(size))
	require.Equal(t, int64(size), maxHolders.Load(), "with this much contention both slots were in use at once")
}

func TestSemaphoreFailIfLockedAndCost(t *testing.T) {
	ctx := context.Background()
	table := newTable(t, "")
	db, _ := newDB(t)
	mdb, cc := newDB(t) // counts the calls of m only, which holds nothing while measured
	h := newClient(t, db, table, semOpts...)
	m := newClient(t, mdb, table, semOpts...)
	semH, err := h.NewSemaphore("jobs", 3)
	require.NoError(t, err)
	semM, err := m.NewSemaphore("jobs", 3)
	require.NoError(t, err)

	l, err := semM.Acquire(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"UpdateItem": 1}, tableChecked(t, cc.reset()), "a free semaphore costs one write")
	_, err = m.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	held := map[string]*dynamolock.Lock{}
	for range 3 {
		l, err := semH.Acquire(ctx)
		require.NoError(t, err)
		held[l.PartitionKey()] = l
	}
	require.Len(t, held, 3, "three holders, three slots")

	cc.reset()
	start := time.Now()
	_, err = semM.Acquire(ctx, dynamolock.FailIfLocked())
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	require.Less(t, time.Since(start), time.Second, "FailIfLocked returns at once")
	require.Equal(t, map[string]int{"UpdateItem": 3}, cc.reset(), "a full semaphore costs one failed write per slot")

	// A waiter gets the slot released first.
	const refresh = 200 * time.Millisecond
	got := make(chan *dynamolock.Lock, 1)
	start = time.Now()
	go func() {
		l, err := semM.Acquire(ctx, dynamolock.WithRefreshPeriod(refresh))
		assert.NoError(t, err)
		got <- l
	}()
	waitFor(t, 5*time.Second, "the waiter to watch every slot", func() bool { return cc.get("GetItem") >= 3 })
	victim := held["jobs#1"]
	released := time.Now()
	_, err = h.ReleaseLockWithContext(ctx, victim)
	require.NoError(t, err)
	var won *dynamolock.Lock
	select {
	case won = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter did not get the released slot")
	}
	calls := cc.reset()
	t.Logf("size 3, refresh %s: the waiter got the slot %s after its release; calls during its wait of %s: %v",
		refresh, time.Since(released), time.Since(start), calls)
	require.Equal(t, "jobs#1", won.PartitionKey())
	require.NoError(t, won.Err())
	require.Equal(t, 1, m.Stats().HeldLocks, "no extra slot is left held")
	// probe 3 + the win 1: one wait watches every slot, and the probe's
	// failed writes already told it each slot's holder (the wait with a
	// goroutine per slot wrote every slot once more: 7)
	require.Equal(t, 4, calls["UpdateItem"])
}

// A dead holder's slot is taken over once its lease has run out.
func TestSemaphoreDeadHolder(t *testing.T) {
	ctx := context.Background()
	table := newTable(t, "")
	raw, _ := newDB(t)
	dying := &severableDB{Client: raw}
	a := newClient(t, dying, table, semOpts...)
	b := newClient(t, raw, table, semOpts...)
	semA, err := a.NewSemaphore("jobs", 1)
	require.NoError(t, err)
	semB, err := b.NewSemaphore("jobs", 1)
	require.NoError(t, err)
	la, err := semA.Acquire(ctx)
	require.NoError(t, err)
	dying.severed.Store(true)
	diedAt := time.Now()
	lb, err := semB.Acquire(ctx, dynamolock.WithRefreshPeriod(200*time.Millisecond))
	require.NoError(t, err)
	t.Logf("dead holder's slot taken after %s", time.Since(diedAt))
	require.Less(t, time.Since(diedAt), semLease+200*time.Millisecond+slack)
	require.True(t, closedWithin(la.Done(), slack))
	require.Greater(t, lb.FencingToken(), la.FencingToken())
}

var semFairDuration = flag.Duration("semfair.duration", 8*time.Second, "how long TestSemaphoreFairness runs each mode")

// jain is Jain's fairness index of xs: 1 when all are equal, 1/n when one
// gets everything.
func jain(xs []int64) float64 {
	var sum, sq float64
	for _, x := range xs {
		sum += float64(x)
		sq += float64(x) * float64(x)
	}
	if sq == 0 {
		return 1
	}
	return sum * sum / (float64(len(xs)) * sq)
}

// Five clients (five owners) loop on a semaphore of 2 (acquire, hold
// 50 ms, release, acquire again at once) for a fixed time. With
// WithFairness each gets about the same number of sections; without it
// the split is logged.
func TestSemaphoreFairness(t *testing.T) {
	const clients, size = 5, 2
	for _, fair := range []bool{true, false} {
		t.Run(fmt.Sprintf("fair=%v", fair), func(t *testing.T) {
			table := newTable(t, "")
			db, _ := newDB(t)
			ctx, cancel := context.WithTimeout(context.Background(), *semFairDuration)
			defer cancel()
			counts := make([]int64, clients)
			var holders, maxHolders atomic.Int64
			var wg sync.WaitGroup
			for i := range clients {
				c := newClient(t, db, table, semOpts...)
				sem, err := c.NewSemaphore("fair", size)
				require.NoError(t, err)
				opts := []dynamolock.AcquireLockOption{dynamolock.WithRefreshPeriod(100 * time.Millisecond)}
				if fair {
					opts = append(opts, dynamolock.WithFairness())
				}
				wg.Go(func() {
					for ctx.Err() == nil {
						l, err := sem.Acquire(ctx, opts...)
						if err != nil {
							if ctx.Err() == nil {
								t.Errorf("client %d: %v", i, err)
							}
							return
						}
						n := holders.Add(1)
						for m := maxHolders.Load(); n > m && !maxHolders.CompareAndSwap(m, n); m = maxHolders.Load() {
						}
						time.Sleep(50 * time.Millisecond) // the work done in the section
						holders.Add(-1)
						if l.Err() == nil {
							counts[i]++
						}
						_, _ = c.ReleaseLockWithContext(context.WithoutCancel(ctx), l)
					}
				})
			}
			wg.Wait()
			idx := jain(counts)
			t.Logf("fair=%v, %d clients, semaphore of %d, %s: sections per client %v, Jain's index %.3f",
				fair, clients, size, *semFairDuration, counts, idx)
			require.LessOrEqual(t, maxHolders.Load(), int64(size))
			if fair {
				require.GreaterOrEqual(t, idx, 0.9, "sections per client %v", counts)
			}
		})
	}
}

func TestSemaphoreFairnessInput(t *testing.T) {
	db, cc := newDB(t)
	c := newClient(t, db, "no-such-table", semOpts...)
	sem, err := c.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	_, err = sem.Acquire(context.Background(), dynamolock.WithFairness(), dynamolock.FailIfLocked())
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	require.ErrorContains(t, err, "FailIfLocked", "names the option the caller gave")
	plain := newClient(t, itemOnly{db}, "no-such-table", semOpts...)
	psem, err := plain.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	_, err = psem.Acquire(context.Background(), dynamolock.WithFairness())
	require.ErrorIs(t, err, dynamolock.ErrUnsupportedOperation)
	require.Zero(t, cc.total(), "no DynamoDB call")
}

// The answer to the write on the first slot tried is lost (the write
// landed): the wait goes on to the other slot and takes it, and the first
// slot's write is released again, so the caller holds one slot.
func TestSemaphoreLostAnswerOnOneSlot(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	lose := &faults.Rule{Op: "UpdateItem", Times: 1, LoseAnswer: true}
	c := newClient(t, faults.Wrap(db, lose), table, semOpts...)
	sem, err := c.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	l, err := sem.Acquire(context.Background())
	require.NoError(t, err, "a lost answer on one slot does not fail the call")
	require.Equal(t, 1, c.Stats().HeldLocks)
	held := 0
	for _, k := range []string{"jobs#0", "jobs#1"} {
		item := rawItem(t, db, table, keyOf(k))
		_, released := item["isReleased"]
		if !released {
			held++
			require.Equal(t, l.PartitionKey(), k)
		}
	}
	require.Equal(t, 1, held, "the other slot's write was released again")
}

// Found by the simulation (invariant 13, seed 93): a lost answer on one
// slot, the next slot taken, then the undo of the first slot's write (and
// every heartbeat) stalled past the lease: Acquire returned the second
// slot's lock already lost. A lock lost while the call undid its other
// writes is not returned: the call takes a slot anew, or fails.
func TestSemaphoreNeverReturnsALockLostDuringItsUndo(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	var stallUntil atomic.Int64
	lose := &faults.Rule{Op: "UpdateItem", Times: 1, LoseAnswer: true}
	taken := &faults.Rule{Op: "UpdateItem", Times: 1, After: func(context.Context) {
		stallUntil.Store(time.Now().Add(semLease + 500*time.Millisecond).UnixNano())
	}}
	stall := &faults.Rule{Op: "UpdateItem", Before: func(ctx context.Context) error {
		return faults.Sleep(time.Until(time.Unix(0, stallUntil.Load())))(ctx)
	}}
	c := newClient(t, faults.Wrap(db, lose, taken, stall), table, semOpts...)
	sem, err := c.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 4*semLease)
	defer cancel()
	l, err := sem.Acquire(ctx)
	if err != nil {
		t.Logf("Acquire failed (allowed): %v", err)
		return
	}
	require.NoError(t, l.Err(), "Acquire returned %s's lock already lost", l.PartitionKey())
}

// A fair semaphore's write to a slot other than the first is a
// transaction, read back after it. When the read-back answers after the
// lease the transaction granted ran out (a pause, a slow read), the lock
// it would return is already lost: the call takes the slot anew instead,
// as an UpdateItem whose answer comes late does.
func TestFairSemaphoreReadBackPastTheLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	holder := newClient(t, db, table, semOpts...)
	h, err := holder.AcquireLock("jobs#0") // slot 0 (the queue's) is held: slot 1 is written beside it
	require.NoError(t, err)
	defer func() { _, _ = holder.ReleaseLock(h) }()
	var written atomic.Bool
	wrote := &faults.Rule{Op: "TransactWriteItems", After: func(context.Context) { written.Store(true) }}
	slow := &faults.Rule{Op: "GetItem", Times: 1, Before: faults.Sleep(semLease + 500*time.Millisecond),
		Match: func(in any) bool {
			k, ok := in.(*dynamodb.GetItemInput).Key["key"].(*types.AttributeValueMemberS)
			return written.Load() && ok && k.Value == "jobs#1"
		}}
	fdb := faults.Wrap(db, wrote, slow)
	c := newClient(t, fdb, table, semOpts...)
	sem, err := c.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	l, err := sem.Acquire(context.Background(), dynamolock.WithFairness())
	require.NoError(t, err)
	require.Equal(t, 1, fdb.Hits(slow), "the read-back was slowed")
	require.Equal(t, "jobs#1", l.PartitionKey())
	require.False(t, l.IsExpired(), "the returned lock's lease ran out before it was returned")
	require.NoError(t, l.Err())
	_, err = c.ReleaseLock(l)
	require.NoError(t, err)
}

// When the read-back after a fair semaphore's transaction finds the slot
// in other hands, the call fails with a *LockNotGrantedError naming the
// semaphore and the slot, as every failed acquisition does.
func TestFairSemaphoreReadBackFindsAnotherHolder(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	holder := newClient(t, db, table, semOpts...)
	h, err := holder.AcquireLock("jobs#0")
	require.NoError(t, err)
	defer func() { _, _ = holder.ReleaseLock(h) }()
	var written atomic.Bool
	wrote := &faults.Rule{Op: "TransactWriteItems", After: func(context.Context) { written.Store(true) }}
	other := &faults.Rule{Op: "GetItem", Times: 1,
		Before: func(context.Context) error {
			putRaw(t, db, table, map[string]types.AttributeValue{
				"key": s("jobs#1"), "ownerName": s("other-host"), "leaseDuration": s("3s"), "recordVersionNumber": s("rvn-other"),
			})
			return nil
		},
		Match: func(in any) bool {
			k, ok := in.(*dynamodb.GetItemInput).Key["key"].(*types.AttributeValueMemberS)
			return written.Load() && ok && k.Value == "jobs#1"
		}}
	fdb := faults.Wrap(db, wrote, other)
	c := newClient(t, fdb, table, semOpts...)
	sem, err := c.NewSemaphore("jobs", 2)
	require.NoError(t, err)
	_, err = sem.Acquire(context.Background(), dynamolock.WithFairness())
	require.Equal(t, 1, fdb.Hits(other))
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng, "got %T: %v", err, err)
	require.ErrorContains(t, err, `semaphore "jobs"`)
	require.ErrorContains(t, err, `"jobs#1"`)
}
