package dynamolock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// The dynamolock v2 quick start: acquire with data, read it, release.
func TestBasicFlow(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	ctx := context.Background()

	data := []byte("some content a")
	lock, err := c.AcquireLockWithContext(ctx, "spock", dynamolock.WithData(data), dynamolock.ReplaceData())
	require.NoError(t, err)
	assert.Equal(t, data, lock.Data())
	assert.Equal(t, c.OwnerName(), lock.OwnerName())
	assert.Equal(t, "spock", lock.PartitionKey())
	assert.Equal(t, 3*time.Second, lock.LeaseDuration())
	assert.NotZero(t, lock.FencingToken())
	assert.False(t, lock.IsExpired())
	assert.NoError(t, lock.Err())

	ok, err := c.ReleaseLockWithContext(ctx, lock)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.True(t, lock.IsExpired())
	assert.ErrorIs(t, lock.Err(), dynamolock.ErrLockAlreadyReleased)
	assert.True(t, closedWithin(lock.Done(), 0))

	ok, err = c.ReleaseLockWithContext(ctx, lock)
	assert.False(t, ok)
	assert.ErrorIs(t, err, dynamolock.ErrLockAlreadyReleased)

	view, err := c.GetWithContext(ctx, "spock")
	require.NoError(t, err)
	assert.True(t, view.IsReleased())
	assert.True(t, view.IsExpired())
	assert.Equal(t, data, view.Data(), "data stays in the released item")
}

func TestCallCounts(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	c := newClient(t, db, table, dynamolock.DisableHeartbeat())
	ctx := context.Background()

	calls.reset()
	lock, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, tableChecked(t, calls.reset()), "acquire of a free lock")

	ok, err := c.ReleaseLockWithContext(ctx, lock)
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, calls.reset(), "release")

	lock, err = c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"UpdateItem": 1}, calls.reset(), "acquire of a released lock")

	require.NoError(t, c.SendHeartbeatWithContext(ctx, lock))
	assert.Equal(t, map[string]int{"UpdateItem": 1}, calls.reset(), "heartbeat")

	_, err = c.GetWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Empty(t, calls.reset(), "get of a held lock")

	_, err = c.GetWithContext(ctx, "other")
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"GetItem": 1}, calls.reset(), "get of a lock not held")

	ok, err = c.ReleaseLockWithContext(ctx, lock, dynamolock.WithDeleteLock(true))
	require.NoError(t, err)
	require.True(t, ok)
	assert.Equal(t, map[string]int{"DeleteItem": 1}, calls.reset(), "release with delete")
}

func TestContendingClientsHandOver(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	db2, calls := newDB(t)
	b := newClient(t, db2, table, fast...)
	ctx := context.Background()

	la, err := a.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	type result struct {
		l   *dynamolock.Lock
		err error
	}
	got := make(chan result, 1)
	go func() {
		l, err := b.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond),
			dynamolock.WithAdditionalTimeToWaitForLock(10*time.Second))
		got <- result{l, err}
	}()
	waitFor(t, 5*time.Second, "b to poll the held lock", func() bool { return calls.get("GetItem") >= 1 })
	select {
	case r := <-got:
		t.Fatalf("b acquired a held lock: %v", r.err)
	default:
	}
	ok, err := a.ReleaseLockWithContext(ctx, la)
	require.NoError(t, err)
	require.True(t, ok)

	r := <-got
	require.NoError(t, r.err)
	assert.Equal(t, b.OwnerName(), r.l.OwnerName())
	assert.Equal(t, la.FencingToken()+1, r.l.FencingToken())
}

func TestDeadOwnerTakenOverAfterOneLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	// A dead owner: an item with a 1.5 s lease that nobody renews.
	const lease = 1500 * time.Millisecond
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("dead-host"), "leaseDuration": s("1500ms"), "recordVersionNumber": s("rvn-dead"),
	})
	c := newClient(t, db, table, fast...)
	start := time.Now()
	l, err := c.AcquireLockWithContext(context.Background(), "k", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	elapsed := time.Since(start)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, elapsed, lease, "never before a full lease")
	assert.Less(t, elapsed, lease+time.Second, "about one lease (floor) plus one refresh")
	assert.Equal(t, c.OwnerName(), l.OwnerName())
	assert.NotZero(t, l.FencingToken())
}

func TestTimeoutWhileHolderIsAlive(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	b := newClient(t, db, table, fast...)
	ctx := context.Background()
	_, err := a.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	start := time.Now()
	_, err = b.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond),
		dynamolock.WithAdditionalTimeToWaitForLock(500*time.Millisecond))
	elapsed := time.Since(start)
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te)
	assert.GreaterOrEqual(t, te.Age, 1500*time.Millisecond, "waits the holder's lease plus the additional time")
	assert.GreaterOrEqual(t, elapsed, 1500*time.Millisecond)
	assert.Contains(t, err.Error(), a.OwnerName())
}

func TestContextCancellationStopsTheWait(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	db2, calls := newDB(t)
	b := newClient(t, db2, table, fast...)
	_, err := a.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := b.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
		done <- err
	}()
	waitFor(t, 5*time.Second, "b to start waiting", func() bool { return calls.get("UpdateItem") >= 1 })
	cancel()
	select {
	case err := <-done:
		assert.ErrorIs(t, err, context.Canceled)
		var lng *dynamolock.LockNotGrantedError
		assert.ErrorAs(t, err, &lng)
	case <-time.After(2 * time.Second):
		t.Fatal("cancellation did not stop the wait")
	}
}

func TestFailIfLocked(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	b := newClient(t, db, table, fast...)
	ctx := context.Background()
	_, err := a.AcquireLockWithContext(ctx, "live")
	require.NoError(t, err)

	start := time.Now()
	_, err = b.AcquireLockWithContext(ctx, "live", dynamolock.FailIfLocked())
	assert.Less(t, time.Since(start), 500*time.Millisecond, "returns at once")
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, a.OwnerName(), held.Owner)
	var lng *dynamolock.LockNotGrantedError
	assert.ErrorAs(t, err, &lng)

	// A dead owner's lock: try-locks fail until this client has seen the
	// same RVN for a full lease, then one takes it over.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("dead"), "ownerName": s("dead-host"), "leaseDuration": s("800"), "recordVersionNumber": s("r1"),
	})
	first := time.Now()
	_, err = b.AcquireLockWithContext(ctx, "dead", dynamolock.FailIfLocked())
	require.ErrorAs(t, err, &held)
	var l *dynamolock.Lock
	waitFor(t, 5*time.Second, "a try-lock to take over the dead lock", func() bool {
		l, err = b.AcquireLockWithContext(ctx, "dead", dynamolock.FailIfLocked())
		return err == nil
	})
	assert.GreaterOrEqual(t, time.Since(first), 800*time.Millisecond)
	assert.Equal(t, b.OwnerName(), l.OwnerName())
}

func TestDataRules(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()

	l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("first")))
	require.NoError(t, err)
	assert.Equal(t, "first", string(l.Data()), "data is written when the item has none")
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	l, err = c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("second")))
	require.NoError(t, err)
	assert.Equal(t, "first", string(l.Data()), "without ReplaceData existing data is kept")
	_, err = c.ReleaseLockWithContext(ctx, l, dynamolock.WithDataAfterRelease([]byte("tombstone")))
	require.NoError(t, err)
	assert.Equal(t, "tombstone", string(l.Data()))

	l, err = c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("third")), dynamolock.ReplaceData())
	require.NoError(t, err)
	assert.Equal(t, "third", string(l.Data()), "ReplaceData overwrites")
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	l, err = c.AcquireLockWithContext(ctx, "k", dynamolock.ReplaceData())
	require.NoError(t, err)
	assert.Nil(t, l.Data(), "ReplaceData without data removes it")
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	// Additional attributes are merged with those already in the item.
	l, err = c.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{
		"team": s("payments"), "region": s("eu"),
	}))
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	l, err = c.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{
		"team": s("billing"),
	}))
	require.NoError(t, err)
	assert.Equal(t, map[string]types.AttributeValue{"team": s("billing"), "region": s("eu")}, l.AdditionalAttributes())
}

func TestReleaseKeepsOrDeletesTheItem(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()

	l, err := c.AcquireLockWithContext(ctx, "keep")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	item := rawItem(t, db, table, keyOf("keep"))
	require.NotNil(t, item, "kept by default")
	assert.Equal(t, s("1"), item["isReleased"])

	l, err = c.AcquireLockWithContext(ctx, "del", dynamolock.WithDeleteLockOnRelease())
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	assert.Nil(t, rawItem(t, db, table, keyOf("del")), "WithDeleteLockOnRelease deletes")

	l, err = c.AcquireLockWithContext(ctx, "override", dynamolock.WithDeleteLockOnRelease())
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l, dynamolock.WithDeleteLock(false))
	require.NoError(t, err)
	assert.NotNil(t, rawItem(t, db, table, keyOf("override")), "WithDeleteLock(false) overrides")

	l, err = c.AcquireLockWithContext(ctx, "del2")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l, dynamolock.WithDeleteLock(true))
	require.NoError(t, err)
	assert.Nil(t, rawItem(t, db, table, keyOf("del2")))
}

func TestReleaseOfALockNoLongerOurs(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute))
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
	})
	ok, err := c.ReleaseLockWithContext(ctx, l)
	assert.False(t, ok)
	assert.ErrorIs(t, err, dynamolock.ErrLockLost)
	assert.ErrorIs(t, err, dynamolock.ErrLockTakenOver)
	assert.True(t, closedWithin(l.Done(), 0))
	assert.Equal(t, "thief", rawItem(t, db, table, keyOf("k"))["ownerName"].(*types.AttributeValueMemberS).Value)
}

func TestGet(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	b := newClient(t, db, table, fast...)
	ctx := context.Background()
	la, err := a.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("payload")))
	require.NoError(t, err)

	got, err := a.GetWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Same(t, la, got, "the holder gets its live lock")

	view, err := b.GetWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, a.OwnerName(), view.OwnerName())
	assert.Equal(t, "payload", string(view.Data()))
	assert.False(t, view.IsExpired())
	assert.ErrorIs(t, view.Err(), dynamolock.ErrLockNotHeld)
	assert.ErrorIs(t, b.SendHeartbeatWithContext(ctx, view), dynamolock.ErrReadOnlyLockHeartbeat)
	_, err = b.ReleaseLockWithContext(ctx, view)
	assert.ErrorIs(t, err, dynamolock.ErrOwnerMismatched)

	missing, err := b.GetWithContext(ctx, "missing")
	require.NoError(t, err)
	require.NotNil(t, missing)
	assert.Equal(t, "", missing.OwnerName())
	assert.True(t, missing.IsExpired())
}

func TestSortKeyValuesAreIndependentLocks(t *testing.T) {
	table := newTable(t, "scope")
	db, _ := newDB(t)
	a := newClient(t, db, table, append(fast, dynamolock.WithSortKey("scope", "tenant-1"))...)
	b := newClient(t, db, table, append(fast, dynamolock.WithSortKey("scope", "tenant-2"))...)
	c := newClient(t, db, table, append(fast, dynamolock.WithSortKey("scope", "tenant-1"))...)
	ctx := context.Background()
	la, err := a.AcquireLockWithContext(ctx, "jobs")
	require.NoError(t, err)
	lb, err := b.AcquireLockWithContext(ctx, "jobs")
	require.NoError(t, err)
	assert.Equal(t, "tenant-1", la.SortKey())
	assert.Equal(t, "tenant-2", lb.SortKey())
	_, err = c.AcquireLockWithContext(ctx, "jobs", dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	assert.ErrorAs(t, err, &held, "same sort value: same lock")
}

func TestReentrant(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	calls.reset()
	again, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant())
	require.NoError(t, err)
	assert.Same(t, l, again)
	assert.Zero(t, calls.reset()["UpdateItem"])

	_, err = c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
	assert.Error(t, err, "not reentrant: held, even by ourselves")

	// An item naming our owner that this client does not hold (a previous
	// process with the same owner name) is taken at once.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("mine"), "ownerName": s(c.OwnerName()), "leaseDuration": s("20s"), "recordVersionNumber": s("old"),
	})
	m, err := c.AcquireLockWithContext(ctx, "mine", dynamolock.WithReentrant(), dynamolock.FailIfLocked())
	require.NoError(t, err)
	assert.NotEqual(t, "old", m.RecordVersionNumber())
}

func TestAcquireOnlyIfLockAlreadyExists(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()
	_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithAcquireOnlyIfLockAlreadyExists())
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	assert.Contains(t, err.Error(), "no lock item")

	first, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, first)
	require.NoError(t, err)
	l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithAcquireOnlyIfLockAlreadyExists())
	require.NoError(t, err)
	assert.Equal(t, first.FencingToken()+1, l.FencingToken())
}

func TestFencingTokensIncreaseAcrossOwners(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	a := newClient(t, db, table, fast...)
	b := newClient(t, db, table, fast...)
	ctx := context.Background()
	var tokens []uint64
	for i := range 6 {
		c := a
		if i%2 == 1 {
			c = b
		}
		l, err := c.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		tokens = append(tokens, l.FencingToken())
		_, err = c.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
	}
	for i, tok := range tokens {
		assert.Equal(t, tokens[0]+uint64(i), tok, "exactly one more on every acquisition")
	}
	assert.Greater(t, tokens[0], uint64(time.Now().Add(-time.Hour).UnixMicro()), "a new item starts from the time in µs")

	// Deleting the item does not make tokens start over.
	l, err := a.AcquireLockWithContext(ctx, "k", dynamolock.WithDeleteLockOnRelease())
	require.NoError(t, err)
	_, err = a.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	l, err = b.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Greater(t, l.FencingToken(), tokens[5]+1)
}

func TestCloseReleasesEveryLock(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c, err := dynamolock.New(db, table, fast...)
	require.NoError(t, err)
	ctx := context.Background()
	var locks []*dynamolock.Lock
	for _, k := range []string{"a", "b", "c", "d"} {
		l, err := c.AcquireLockWithContext(ctx, k)
		require.NoError(t, err)
		locks = append(locks, l)
	}
	// One lock is stolen: Close must go on past its failure.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("d"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
	})
	err = c.Close()
	for _, l := range locks[:3] {
		assert.ErrorIs(t, l.Err(), dynamolock.ErrLockAlreadyReleased)
		assert.Equal(t, s("1"), rawItem(t, db, table, keyOf(l.PartitionKey()))["isReleased"])
	}
	assert.True(t, closedWithin(locks[3].Done(), 0))
	assert.ErrorIs(t, locks[3].Err(), dynamolock.ErrLockLost)
	assert.NoError(t, err, "the stolen lock is reported through its own Err, not as a Close failure")

	assert.ErrorIs(t, c.Close(), dynamolock.ErrClientClosed)
	_, err = c.AcquireLockWithContext(ctx, "e")
	assert.ErrorIs(t, err, dynamolock.ErrClientClosed)
	_, err = c.GetWithContext(ctx, "a")
	assert.ErrorIs(t, err, dynamolock.ErrClientClosed)
	_, err = c.ReleaseLockWithContext(ctx, locks[0])
	assert.ErrorIs(t, err, dynamolock.ErrClientClosed)
	assert.ErrorIs(t, c.SendHeartbeatWithContext(ctx, locks[0]), dynamolock.ErrClientClosed)
}

// 20 goroutines on 2 clients contend for one key; never more than one is
// inside the critical section.
func TestMutualExclusionUnderContention(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(2 * time.Second), dynamolock.WithHeartbeatPeriod(500 * time.Millisecond)}
	clients := []*dynamolock.Client{newClient(t, db, table, opts...), newClient(t, db, table, opts...)}
	var inside, maxInside, entries atomic.Int64
	var tokens sync.Map
	var wg sync.WaitGroup
	for g := range 20 {
		wg.Go(func() {
			c := clients[g%2]
			for range 3 {
				l, err := c.AcquireLockWithContext(context.Background(), "hot",
					dynamolock.WithRefreshPeriod(20*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
				if !assert.NoError(t, err) {
					return
				}
				n := inside.Add(1)
				for {
					m := maxInside.Load()
					if n <= m || maxInside.CompareAndSwap(m, n) {
						break
					}
				}
				_, dup := tokens.LoadOrStore(l.FencingToken(), true)
				assert.False(t, dup, "fencing token %d granted twice", l.FencingToken())
				entries.Add(1)
				time.Sleep(time.Millisecond) // hold it briefly: the section's work
				inside.Add(-1)
				ok, err := c.ReleaseLockWithContext(context.Background(), l)
				assert.NoError(t, err)
				assert.True(t, ok)
			}
		})
	}
	wg.Wait()
	assert.Equal(t, int64(1), maxInside.Load())
	assert.Equal(t, int64(60), entries.Load())
}

func TestNoCallsForBadInput(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()
	big := make([]byte, 400*1024)

	type check struct {
		name string
		run  func() error
	}
	checks := []check{
		{"empty key", func() error { _, err := c.AcquireLockWithContext(ctx, ""); return err }},
		{"key over 2048 bytes", func() error { _, err := c.AcquireLockWithContext(ctx, string(make([]byte, 2049))); return err }},
		{"non-positive refresh", func() error {
			_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(0))
			return err
		}},
		{"negative additional wait", func() error {
			_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(-time.Second))
			return err
		}},
		{"data over 400 KB", func() error { _, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithData(big)); return err }},
		{"get with empty key", func() error { _, err := c.GetWithContext(ctx, ""); return err }},
		{"safe time zero", func() error {
			_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithSessionMonitor(0, nil))
			return err
		}},
	}
	for _, name := range []string{"key", "ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken", ""} {
		checks = append(checks, check{"reserved attribute " + name, func() error {
			_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{name: s("x")}))
			return err
		}})
	}
	calls.reset()
	for _, ch := range checks {
		t.Run(ch.name, func(t *testing.T) {
			err := ch.run()
			assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
			var inv *dynamolock.InvalidArgumentError
			if assert.ErrorAs(t, err, &inv) {
				assert.NotEmpty(t, inv.Name)
				assert.Contains(t, err.Error(), inv.Name)
			}
		})
	}
	ok, err := c.ReleaseLockWithContext(ctx, nil)
	assert.False(t, ok)
	assert.ErrorIs(t, err, dynamolock.ErrCannotReleaseNullLock)
	assert.Zero(t, calls.total(), "bad input must not reach DynamoDB")

	// Bad client options fail in New.
	for name, opts := range map[string][]dynamolock.ClientOption{
		"lease under twice the heartbeat": {dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(600 * time.Millisecond)},
		"negative heartbeat":              {dynamolock.WithHeartbeatPeriod(-time.Second)},
		"zero lease":                      {dynamolock.WithLeaseDuration(0)},
		"empty partition key name":        {dynamolock.WithPartitionKeyName("")},
		"empty sort key name":             {dynamolock.WithSortKey("", "v")},
		"sort key named like partition":   {dynamolock.WithSortKey("key", "v")},
		"zero heartbeat concurrency":      {dynamolock.WithHeartbeatConcurrency(0)},
	} {
		_, err := dynamolock.New(db, table, opts...)
		assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument, name)
	}
	_, err = dynamolock.New(db, "x")
	assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "table name too short")
	_, err = dynamolock.New(nil, table)
	assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "nil client")
	assert.Zero(t, calls.total())
}

func TestErrorsMatchTheirSentinels(t *testing.T) {
	err := &dynamolock.LockLostError{Key: "k", Owner: "o", Cause: dynamolock.ErrLeaseExpired, Err: errors.New("boom")}
	assert.ErrorIs(t, err, dynamolock.ErrLockLost)
	assert.ErrorIs(t, err, dynamolock.ErrLeaseExpired)
	assert.NotErrorIs(t, err, dynamolock.ErrLockTakenOver)
	assert.Contains(t, err.Error(), "could not reach DynamoDB")
	assert.Contains(t, err.Error(), "this process did not run", "a paused process is a cause too")
}
