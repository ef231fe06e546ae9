package dynamolock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// rwOpts: a 3 s lease renewed every 500 ms.
var rwOpts = []dynamolock.ClientOption{
	dynamolock.WithLeaseDuration(rwLease),
	dynamolock.WithHeartbeatPeriod(500 * time.Millisecond),
}

const rwLease = 3 * time.Second

// rwFast polls: a waiter looks again every 100 ms.
var rwFast = dynamolock.WithRefreshPeriod(100 * time.Millisecond)

func newRW(t *testing.T, c *dynamolock.Client, name string) *dynamolock.RWLock {
	t.Helper()
	rw, err := c.NewRWLock(name)
	require.NoError(t, err)
	return rw
}

func TestRWLockBadInput(t *testing.T) {
	db, cc := newDB(t)
	c := newClient(t, db, "no-such-table", rwOpts...)
	for _, name := range []string{"", string(make([]byte, 2049)), "\xff"} {
		_, err := c.NewRWLock(name)
		var iae *dynamolock.InvalidArgumentError
		require.ErrorAs(t, err, &iae, "name %q", name)
	}
	rw := newRW(t, c, "config")
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		writer bool
		opt    dynamolock.AcquireLockOption
		names  string
	}{
		{"reentrant", false, dynamolock.WithReentrant(), "WithReentrant"},
		{"reentrant writer", true, dynamolock.WithReentrant(), "WithReentrant"},
		{"delete on release", true, dynamolock.WithDeleteLockOnRelease(), "WithDeleteLockOnRelease"},
		{"only if exists", false, dynamolock.WithAcquireOnlyIfLockAlreadyExists(), "WithAcquireOnlyIfLockAlreadyExists"},
		{"reader data", false, dynamolock.WithData([]byte("x")), "WithData"},
		{"reader attributes", false, dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{"a": s("b")}), "WithAdditionalAttributes"},
		{"refresh", false, dynamolock.WithRefreshPeriod(0), "WithRefreshPeriod"},
		{"wait", true, dynamolock.WithAdditionalTimeToWaitForLock(-time.Second), "WithAdditionalTimeToWaitForLock"},
		{"lease", true, dynamolock.WithLockLease(999 * time.Millisecond), "WithLockLease"},
		{"reserved", true, dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{"readers": s("b")}), "WithAdditionalAttributes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.writer {
				_, err = rw.Lock(ctx, tc.opt)
			} else {
				_, err = rw.RLock(ctx, tc.opt)
			}
			var iae *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &iae)
			require.Equal(t, tc.names, iae.Name)
		})
	}
	require.Zero(t, cc.total(), "bad input makes no DynamoDB call")
}

// A reader's heartbeat and release cannot carry data (the item's data is
// the writer's): typed bad input, before any call.
func TestRWLockReaderDataIsBadInput(t *testing.T) {
	table := newTable(t, "")
	db, cc := newDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(rwLease), dynamolock.DisableHeartbeat())
	r, err := newRW(t, c, "k").RLock(context.Background())
	require.NoError(t, err)
	cc.reset()
	var iae *dynamolock.InvalidArgumentError
	require.ErrorAs(t, c.SendHeartbeat(r, dynamolock.ReplaceHeartbeatData([]byte("x"))), &iae)
	require.Equal(t, "ReplaceHeartbeatData", iae.Name)
	require.ErrorAs(t, c.SendHeartbeat(r, dynamolock.DeleteData()), &iae)
	_, err = c.ReleaseLock(r, dynamolock.WithDataAfterRelease([]byte("x")))
	require.ErrorAs(t, err, &iae)
	require.Equal(t, "WithDataAfterRelease", iae.Name)
	_, err = c.ReleaseLock(r, dynamolock.WithDeleteLock(true))
	require.ErrorAs(t, err, &iae)
	require.Zero(t, cc.total(), "bad input makes no DynamoDB call")
	require.NoError(t, r.Err(), "still held")
	require.NoError(t, r.Close())
}

// Readers share the lock; a writer waits for them; readers that come while
// the writer waits wait behind it; the writer's token is above every token
// before it.
func TestRWLockReadersShareAndWriterWaits(t *testing.T) {
	table := newTable(t, "")
	db, cc := newDB(t)
	c1 := newClient(t, db, table, rwOpts...)
	c2 := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rw1, rw2 := newRW(t, c1, "config"), newRW(t, c2, "config")

	cc.reset()
	r1, err := rw1.RLock(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"UpdateItem": 2}, tableChecked(t, cc.reset()), "a new item costs two writes (the blind one fails)")
	r2, err := rw2.RLock(ctx)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"UpdateItem": 1}, tableChecked(t, cc.reset()), "a reader of a lock in use costs one write")
	r3, err := rw1.RLock(ctx)
	require.NoError(t, err, "one client may hold several readers of one lock")
	require.Equal(t, r1.FencingToken(), r2.FencingToken(), "readers between two writers share the token")

	_, err = rw2.Lock(ctx, dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held, "FailIfLocked returns at once while readers hold")

	got := make(chan *dynamolock.Lock, 1)
	go func() {
		w, err := rw2.Lock(ctx, rwFast)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	// Wait until the writer is queued: then a new reader must wait too.
	waitFor(t, 10*time.Second, "the writer in the queue", func() bool {
		item := rawItem(t, db, table, keyOf("config"))
		q, _ := item["fairQueue"].(*types.AttributeValueMemberM)
		return q != nil && len(q.Value) == 1
	})
	_, err = rw1.RLock(ctx, dynamolock.FailIfLocked())
	require.ErrorAs(t, err, &held, "a writer waits: new readers wait behind it")
	late := make(chan *dynamolock.Lock, 1)
	go func() {
		r, err := rw1.RLock(ctx, rwFast)
		if err != nil {
			t.Error(err)
		}
		late <- r
	}()
	select {
	case <-got:
		t.Fatal("the writer got the lock while readers held it")
	case <-time.After(300 * time.Millisecond):
	}
	for _, r := range []*dynamolock.Lock{r1, r2, r3} {
		require.NoError(t, r.Close())
	}
	var w *dynamolock.Lock
	select {
	case w = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not get the lock after the readers left")
	}
	require.Greater(t, w.FencingToken(), r1.FencingToken())
	select {
	case <-late:
		t.Fatal("a reader got the lock while the writer held it")
	case <-time.After(300 * time.Millisecond):
	}
	require.NoError(t, w.Close())
	select {
	case r := <-late:
		require.NoError(t, r.Close())
		require.Equal(t, w.FencingToken(), r.FencingToken(), "a reader after a writer has the writer's token")
	case <-time.After(10 * time.Second):
		t.Fatal("the reader behind the writer did not get the lock")
	}
}

// Many goroutines in three clients take the lock as readers and writers:
// never a writer with anyone else; everyone gets turns.
func TestRWLockExclusionUnderContention(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var readers, writers, maxReaders atomic.Int64
	var reads, writes atomic.Int64
	var wg sync.WaitGroup
	fail := func(format string, args ...any) { t.Errorf(format, args...) }
	for range 3 {
		c := newClient(t, db, table, rwOpts...)
		rw := newRW(t, c, "shared")
		for g := range 4 {
			wg.Go(func() {
				for range 4 {
					if g == 0 {
						w, err := rw.Lock(ctx, rwFast)
						if err != nil {
							fail("writer: %v", err)
							return
						}
						if writers.Add(1) != 1 || readers.Load() != 0 {
							fail("a writer with %d writers and %d readers", writers.Load(), readers.Load())
						}
						time.Sleep(20 * time.Millisecond)
						writers.Add(-1)
						writes.Add(1)
						if err := w.Close(); err != nil {
							fail("writer release: %v", err)
						}
						continue
					}
					r, err := rw.RLock(ctx, rwFast)
					if err != nil {
						fail("reader: %v", err)
						return
					}
					n := readers.Add(1)
					for m := maxReaders.Load(); n > m && !maxReaders.CompareAndSwap(m, n); m = maxReaders.Load() {
					}
					if writers.Load() != 0 {
						fail("a reader with a writer")
					}
					time.Sleep(30 * time.Millisecond)
					readers.Add(-1)
					reads.Add(1)
					if err := r.Close(); err != nil {
						fail("reader release: %v", err)
					}
				}
			})
		}
	}
	wg.Wait()
	require.EqualValues(t, 12, writes.Load())
	require.EqualValues(t, 36, reads.Load())
	t.Logf("at most %d readers at once", maxReaders.Load())
}

// A reader whose client stops renewing (closed without release: heartbeats
// off) is dropped after its lease: a writer then gets the lock.
func TestRWLockDeadReaderDroppedAfterLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	dead := newClient(t, db, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.DisableHeartbeat())
	c := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := newRW(t, dead, "k").RLock(ctx)
	require.NoError(t, err)
	start := time.Now()
	w, err := newRW(t, c, "k").Lock(ctx, rwFast)
	require.NoError(t, err)
	waited := time.Since(start)
	require.GreaterOrEqual(t, waited, 2*time.Second, "not before the reader's lease")
	require.Less(t, waited, 5*time.Second, "within the lease plus polls")
	require.Eventually(t, func() bool { return r.Err() != nil }, 5*time.Second, 10*time.Millisecond)
	require.NoError(t, w.Close())
}

// A writer that stops renewing is dropped after its lease: a reader then
// gets the lock.
func TestRWLockDeadWriterDroppedAfterLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	dead := newClient(t, db, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.DisableHeartbeat())
	c := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	w, err := newRW(t, dead, "k").Lock(ctx)
	require.NoError(t, err)
	start := time.Now()
	r, err := newRW(t, c, "k").RLock(ctx, rwFast)
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(start), 2*time.Second)
	require.Greater(t, w.FencingToken(), uint64(0))
	require.Equal(t, w.FencingToken(), r.FencingToken())
	require.NoError(t, r.Close())
}

// The context bounds the wait; an explicit additional wait bounds it too.
func TestRWLockContextBoundsTheWait(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, rwOpts...)
	rw := newRW(t, c, "k")
	w, err := rw.Lock(context.Background())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err = rw.RLock(ctx, rwFast)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	require.Less(t, time.Since(start), 2*time.Second)

	start = time.Now()
	_, err = rw.Lock(context.Background(), rwFast, dynamolock.WithAdditionalTimeToWaitForLock(200*time.Millisecond))
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te)
	require.Less(t, time.Since(start), rwLease+2*time.Second)
	// The queue is left (by the first call in the background: its
	// context had ended): the holder releases and the item has no waiter.
	require.NoError(t, w.Close())
	waitFor(t, 5*time.Second, "the waiters to leave the queue", func() bool {
		q, _ := rawItem(t, db, table, keyOf("k"))["fairQueue"].(*types.AttributeValueMemberM)
		return q == nil || len(q.Value) == 0
	})
}

// More readers than MaxReaders are refused with a typed error.
func TestRWLockTooManyReaders(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Minute), dynamolock.DisableHeartbeat())
	rw := newRW(t, c, "k")
	ctx := context.Background()
	for range dynamolock.MaxReaders {
		_, err := rw.RLock(ctx)
		require.NoError(t, err)
	}
	_, err := rw.RLock(ctx)
	var tm *dynamolock.TooManyReadersError
	require.ErrorAs(t, err, &tm)
	require.Equal(t, dynamolock.MaxReaders, tm.Max)
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	require.False(t, errors.Is(err, context.Canceled))
}

// Eight readers in two clients take and release the lock without pause;
// a writer that arrives among them is not starved: it gets the lock within
// the readers' hold time plus a few polls, and the readers go on after it.
func TestRWLockWriterNotStarvedByCyclingReaders(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var reads atomic.Int64
	for i := range 2 {
		c := newClient(t, db, table, rwOpts...)
		rw := newRW(t, c, "hot")
		for range 4 {
			wg.Go(func() {
				for rctx.Err() == nil {
					r, err := rw.RLock(rctx, rwFast)
					if err != nil {
						if rctx.Err() == nil {
							t.Errorf("reader %d: %v", i, err)
						}
						return
					}
					reads.Add(1)
					time.Sleep(50 * time.Millisecond)
					if err := r.Close(); err != nil {
						t.Errorf("reader release: %v", err)
					}
				}
			})
		}
	}
	waitFor(t, 10*time.Second, "readers cycling", func() bool { return reads.Load() > 20 })
	wc := newClient(t, db, table, rwOpts...)
	rw := newRW(t, wc, "hot")
	for range 3 {
		start := time.Now()
		w, err := rw.Lock(ctx, rwFast)
		require.NoError(t, err)
		waited := time.Since(start)
		t.Logf("writer waited %s among 8 cycling readers", waited)
		require.Less(t, waited, 3*time.Second, "the writer is not starved")
		before := reads.Load()
		time.Sleep(100 * time.Millisecond)
		require.Equal(t, before, reads.Load(), "no reader while the writer holds")
		require.NoError(t, w.Close())
		waitFor(t, 10*time.Second, "readers go on after the writer", func() bool { return reads.Load() > before+8 })
	}
	stop()
	wg.Wait()
}

// Close releases the client's readers (their entries leave the item), and a
// reader's TransactionCondition commits only while its entry is there.
func TestRWLockCloseAndTransactionCondition(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
	rw := newRW(t, c, "k")
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	_, err = rw.RLock(ctx)
	require.NoError(t, err)
	require.NoError(t, guardedPut(ctx, db, table, r, "k", 1), "the reader's entry is there: the transaction commits")
	require.Len(t, readersOf(t, table, "k"), 2)

	// A writer drops the reader once it stopped renewing for its lease; the
	// reader's guarded write then fails.
	other := newClient(t, db, table, rwOpts...)
	w, err := newRW(t, other, "k").Lock(ctx, rwFast)
	require.NoError(t, err)
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guardedPut(ctx, db, table, r, "k", 2), &tce, "the entry is gone: the transaction is cancelled")
	require.NoError(t, w.Close())

	c2 := newClient(t, db, table, rwOpts...)
	rw2 := newRW(t, c2, "k")
	for range 3 {
		_, err := rw2.RLock(ctx)
		require.NoError(t, err)
	}
	require.Len(t, readersOf(t, table, "k"), 3)
	require.NoError(t, c2.Close())
	require.Empty(t, readersOf(t, table, "k"), "Close released every reader")
}
