package dynamolock_test

import (
	"context"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Fault tests: a toxiproxy run in this process sits between the holder's
// SDK client and DynamoDB Local; other clients talk to DynamoDB Local
// directly. The holder's SDK client gives up on an HTTP attempt after
// faultHTTPTimeout, so that a silently cut network is noticed.

const faultHTTPTimeout = 250 * time.Millisecond

// newFaultProxy starts a proxy in front of DynamoDB Local, closed when the
// test ends (after the clients, which are cleaned up first).
func newFaultProxy(t *testing.T) *faults.Proxy {
	t.Helper()
	p, err := faults.NewProxy(endpoint)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// proxiedDB returns an SDK client that reaches DynamoDB Local through p,
// with short HTTP timeouts and at most attempts attempts per call.
func proxiedDB(t *testing.T, p *faults.Proxy, attempts int, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, *callCounter) {
	t.Helper()
	optFns = append([]func(*dynamodb.Options){
		faults.Endpoint(p.Endpoint()),
		faults.Timeouts(faultHTTPTimeout, attempts, 50*time.Millisecond),
	}, optFns...)
	return newDB(t, optFns...)
}

// guardedPut writes v to item "data#<name>" in one transaction with the
// lock's TransactionCondition.
func guardedPut(ctx context.Context, db *dynamodb.Client, table string, l *dynamolock.Lock, name string, v int) error {
	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		l.TransactionCondition(),
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"key": s("data#" + name), "v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)},
		}}},
	}})
	return err
}

// storedRVN reads the record version number stored for key.
func storedRVN(t *testing.T, db *dynamodb.Client, table, key string) string {
	t.Helper()
	v, _ := rawItem(t, db, table, keyOf(key))["recordVersionNumber"].(*types.AttributeValueMemberS)
	if v == nil {
		return ""
	}
	return v.Value
}

// assertHeld checks that l is held and that another client cannot acquire
// it right now.
func assertHeld(t *testing.T, l *dynamolock.Lock, other *dynamolock.Client) {
	t.Helper()
	require.NoError(t, l.Err())
	require.False(t, l.IsExpired(), "the holder's lease ran out")
	select {
	case <-l.Done():
		t.Fatal("Done closed")
	default:
	}
	_, err := other.AcquireLockWithContext(context.Background(), l.PartitionKey(), dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held, "another client acquired a held lock")
}

// A cut shorter than the lease: heartbeats fail while it lasts and succeed
// after it, the lock stays held throughout, and a contender that watched the
// item during the whole cut and a full lease gives up.
func TestNetworkCutShorterThanLeaseKeepsTheLock(t *testing.T) {
	const lease, beat, cut = 2 * time.Second, 300 * time.Millisecond, 700 * time.Millisecond
	table := newTable(t, "")
	p := newFaultProxy(t)
	pdb, _ := proxiedDB(t, p, 2)
	db, _ := newDB(t)
	holder := newClient(t, pdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	ctx := context.Background()

	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	waitFor(t, 5*time.Second, "a first heartbeat", func() bool { return holder.Stats().HeartbeatsSent >= 1 })

	// The contender starts watching when the cut starts; it may take the
	// lock only if the RVN stays the same for a full lease.
	contender := make(chan error, 1)
	go func() {
		_, err := other.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(0),
			dynamolock.WithRefreshPeriod(100*time.Millisecond))
		contender <- err
	}()
	errsBefore := holder.Stats().HeartbeatErrors
	require.NoError(t, p.Cut())
	cutAt := time.Now()
	waitFor(t, 3*time.Second, "a heartbeat to fail on the cut network", func() bool {
		return holder.Stats().HeartbeatErrors > errsBefore
	})
	for time.Since(cutAt) < cut { // the cut lasts `cut`; the holder is probed all along
		assertHeld(t, l, other)
		time.Sleep(100 * time.Millisecond)
	}
	require.NoError(t, p.Heal())
	sent := holder.Stats().HeartbeatsSent
	waitFor(t, lease, "a heartbeat after the cut", func() bool { return holder.Stats().HeartbeatsSent > sent })
	assertHeld(t, l, other)

	err = <-contender
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te, "the contender must give up: the holder renewed within a lease")
	assertHeld(t, l, other)
	require.NoError(t, guardedPut(ctx, db, table, l, "k", 1), "guarded writes still pass")
	assert.Zero(t, holder.Stats().LocksLost)
}

// A cut longer than the lease: Done closes with the "unreachable" cause no
// later than one lease after the last heartbeat, another client then takes
// the lock, and the old holder's guarded writes fail even after the network
// comes back.
func TestNetworkCutLongerThanLeaseLosesTheLock(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	p := newFaultProxy(t)
	pdb, _ := proxiedDB(t, p, 2)
	db, _ := newDB(t)
	holder := newClient(t, pdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	ctx := context.Background()

	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	waitFor(t, 5*time.Second, "a first heartbeat", func() bool { return holder.Stats().HeartbeatsSent >= 1 })

	require.NoError(t, p.Cut())
	cutAt := time.Now()
	require.True(t, closedWithin(l.Done(), lease+time.Second), "Done closes once the lease runs out")
	lostAfter := time.Since(cutAt)
	assert.LessOrEqual(t, lostAfter, lease+200*time.Millisecond, "lost no later than one lease after the last beat")
	err = l.Err()
	assert.ErrorIs(t, err, dynamolock.ErrLockLost)
	assert.ErrorIs(t, err, dynamolock.ErrLeaseExpired, "the cause is \"could not reach DynamoDB\"")
	assert.NotErrorIs(t, err, dynamolock.ErrLockTakenOver)
	assert.True(t, l.IsExpired())

	nl, err := other.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err, "a direct client takes the lock after the holder's lease")
	assert.Greater(t, nl.FencingToken(), l.FencingToken())

	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guardedPut(ctx, db, table, l, "k", 1), &tce, "the old holder's guarded write fails")
	require.NoError(t, p.Heal())
	require.ErrorAs(t, guardedPut(ctx, pdb, table, l, "k", 2), &tce, "and still fails through the healed network")
	require.NoError(t, guardedPut(ctx, db, table, nl, "k", 3))

	// The healed holder does nothing that disturbs the new holder.
	sent := other.Stats().HeartbeatsSent
	waitFor(t, 3*time.Second, "two heartbeats of the new holder", func() bool { return other.Stats().HeartbeatsSent >= sent+2 })
	assert.NoError(t, nl.Err())
	assert.Equal(t, uint64(1), holder.Stats().LocksLost)
	assert.NoError(t, holder.Close(), "closing a client whose lock was lost")
}

// A heartbeat whose write lands but whose answer is lost: the library's
// retry of the same beat (same new RVN, condition RVN IN (old, new) or the
// fencing token) succeeds, and the lock stays held across it. The SDK makes
// one attempt per call, so every lost answer reaches the library.
func TestHeartbeatAnswerLostAfterTheWriteLanded(t *testing.T) {
	const lease, beat = 2 * time.Second, 300 * time.Millisecond
	for _, tc := range []struct {
		name  string
		fault func(p *faults.Proxy, se *faults.ServiceErrors) error
	}{
		{"response dropped (timeout)", func(p *faults.Proxy, _ *faults.ServiceErrors) error { return p.DropResponses() }},
		{"connection reset after the request (reset_peer)", func(p *faults.Proxy, _ *faults.ServiceErrors) error {
			return p.ResetResponses(0)
		}},
		{"answer replaced by a 500 (SDK middleware)", func(_ *faults.Proxy, se *faults.ServiceErrors) error {
			se.SetRate(1)
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := newTable(t, "")
			p := newFaultProxy(t)
			se := &faults.ServiceErrors{AfterSend: true, Operations: []string{"UpdateItem"}}
			pdb, _ := proxiedDB(t, p, 1, faults.Inject(se))
			db, _ := newDB(t)
			holder := newClient(t, pdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
			other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
			ctx := context.Background()

			l, err := holder.AcquireLockWithContext(ctx, "k")
			require.NoError(t, err)
			waitFor(t, 5*time.Second, "a first heartbeat", func() bool { return holder.Stats().HeartbeatsSent >= 1 })

			local := l.RecordVersionNumber()
			require.NoError(t, tc.fault(p, se))
			// Wait until a heartbeat landed that the holder did not hear of.
			var landed string
			waitFor(t, lease/2, "a heartbeat write to land unanswered", func() bool {
				landed = storedRVN(t, db, table, "k")
				local = l.RecordVersionNumber()
				return landed != local
			})
			assertHeld(t, l, other)
			se.SetRate(0)
			require.NoError(t, p.Heal())

			waitFor(t, lease/2, "the holder to catch up with the stored RVN", func() bool {
				return l.RecordVersionNumber() == storedRVN(t, db, table, "k")
			})
			assertHeld(t, l, other)
			assert.NotEqual(t, local, l.RecordVersionNumber())
			assert.Positive(t, holder.Stats().HeartbeatErrors, "the lost answer was seen as an error")
			assert.Zero(t, holder.Stats().LocksLost)
			require.NoError(t, guardedPut(ctx, db, table, l, "k", 1))
		})
	}
}

// Heartbeats survive a 30% rate of 500 errors on every call (the SDK makes
// one attempt per call, so the library's own retries handle them).
func TestHeartbeatsSurviveInternalServerErrors(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	se := &faults.ServiceErrors{Rate: 0.3, Kinds: []faults.Kind{faults.InternalServerError}}
	fdb, _ := newDB(t, faults.Timeouts(time.Second, 1, 10*time.Millisecond), faults.Inject(se))
	db, _ := newDB(t)
	holder := newClient(t, fdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	ctx := context.Background()

	l, err := holder.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	// A contender watching for three leases never sees the item go stale.
	_, err = other.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(2*lease),
		dynamolock.WithRefreshPeriod(100*time.Millisecond))
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te)
	assertHeld(t, l, other)
	st := holder.Stats()
	assert.GreaterOrEqual(t, st.HeartbeatsSent, uint64(8))
	assert.Positive(t, st.HeartbeatErrors, "some heartbeats met a 500")
	assert.Positive(t, se.Injected())
	assert.Zero(t, st.LocksLost)
	t.Logf("heartbeats: %d ok, %d failed attempts; %d errors injected", st.HeartbeatsSent, st.HeartbeatErrors, se.Injected())
}

// WithHoldLockOnServiceUnavailable keeps the lease locally through 503s
// that last longer than the lease; without it the lock is lost.
func TestHoldLockOnServiceUnavailable(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	ctx := context.Background()
	se := &faults.ServiceErrors{Kinds: []faults.Kind{faults.ServiceUnavailable}, Operations: []string{"UpdateItem"}}
	fdb, _ := newDB(t, faults.Timeouts(time.Second, 1, 10*time.Millisecond), faults.Inject(se))
	holding := newClient(t, fdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat),
		dynamolock.WithHoldLockOnServiceUnavailable())
	plain := newClient(t, fdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))

	hl, err := holding.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	pl, err := plain.AcquireLockWithContext(ctx, "plain")
	require.NoError(t, err)

	se.SetRate(1)
	outage := time.Now()
	require.True(t, closedWithin(pl.Done(), 2*lease), "without the option the lease runs out")
	assert.ErrorIs(t, pl.Err(), dynamolock.ErrLeaseExpired)
	for time.Since(outage) < 2*lease { // the outage lasts two leases; the holder is checked all along
		require.NoError(t, hl.Err())
		require.False(t, hl.IsExpired())
		time.Sleep(50 * time.Millisecond)
	}
	assert.Positive(t, se.Injected())
	se.SetRate(0)
	sent := holding.Stats().HeartbeatsSent
	waitFor(t, 2*time.Second, "a heartbeat after the outage", func() bool { return holding.Stats().HeartbeatsSent > sent })
	require.NoError(t, hl.Err())
	require.NoError(t, guardedPut(ctx, fdb, table, hl, "held", 1), "the lock is still this acquisition's")
	assert.Zero(t, holding.Stats().LocksLost)
}

// The hazard WithHoldLockOnServiceUnavailable documents: while the holder
// sees 503s and keeps its lease locally, a client that reaches DynamoDB
// takes the lock after a lease. The holder learns of it at its first
// heartbeat after the outage (Done closes, cause "taken over"), and its
// guarded writes fail from the takeover on.
func TestHoldLockOnServiceUnavailableHazard(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	ctx := context.Background()
	se := &faults.ServiceErrors{Kinds: []faults.Kind{faults.ServiceUnavailable}, Operations: []string{"UpdateItem"}}
	fdb, _ := newDB(t, faults.Timeouts(time.Second, 1, 10*time.Millisecond), faults.Inject(se))
	db, _ := newDB(t)
	holding := newClient(t, fdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat),
		dynamolock.WithHoldLockOnServiceUnavailable())
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))

	hl, err := holding.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	se.SetRate(1)
	nl, err := other.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err, "the other client takes the lock after a lease")
	assert.NoError(t, hl.Err(), "the holder still believes it holds the lock: the documented hazard")
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guardedPut(ctx, db, table, hl, "k", 1), &tce, "guarded writes protect the data")
	se.SetRate(0)
	require.True(t, closedWithin(hl.Done(), 2*time.Second), "the first heartbeat after the outage reveals the loss")
	assert.ErrorIs(t, hl.Err(), dynamolock.ErrLockTakenOver)
	assert.NoError(t, nl.Err())
}

// Latency spikes longer than an HTTP attempt but shorter than the lease do
// not lose the lock.
func TestLatencySpikesKeepTheLock(t *testing.T) {
	const lease, beat = 2 * time.Second, 300 * time.Millisecond
	table := newTable(t, "")
	p := newFaultProxy(t)
	pdb, _ := proxiedDB(t, p, 3)
	db, _ := newDB(t)
	holder := newClient(t, pdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	ctx := context.Background()
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	for range 3 {
		name, err := p.Latency(faults.Downstream, 400*time.Millisecond, 100*time.Millisecond)
		require.NoError(t, err)
		errs := holder.Stats().HeartbeatErrors
		waitFor(t, 3*time.Second, "a heartbeat to time out in the spike", func() bool { return holder.Stats().HeartbeatErrors > errs })
		require.NoError(t, p.Remove(name))
		sent := holder.Stats().HeartbeatsSent
		waitFor(t, lease, "a heartbeat after the spike", func() bool { return holder.Stats().HeartbeatsSent > sent })
		assertHeld(t, l, other)
	}
	assert.Zero(t, holder.Stats().LocksLost)
}

// A holder that checks Done before each step of guarded work must see it
// closed as soon as its lease has run out. A process paused past its lease
// resumes with every timer overdue; if Done is closed only when the
// heartbeat scheduler's goroutine gets to run, the holder's own goroutine
// can check first, find Done open, and go on with guarded work (the
// reliability suite's pause scenario caught exactly that). Here the holder
// goroutine spins past the end of its lease with GOMAXPROCS(1), so that,
// as after a SIGCONT, it runs before the scheduler does; its first Done()
// after the lease must already be closed.
func TestDoneIsClosedOnceTheLeaseHasRunOut(t *testing.T) {
	const lease = 300 * time.Millisecond
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(lease))
	ctx := context.Background()
	locks := make([]*dynamolock.Lock, 3)
	acquired := make([]time.Time, 3)
	for i := range locks {
		var err error
		locks[i], err = c.AcquireLockWithContext(ctx, "k"+strconv.Itoa(i))
		require.NoError(t, err)
		acquired[i] = time.Now() // the lease counts from before the write: it ends before acquired+lease
	}
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	for i, l := range locks {
		for time.Since(acquired[i]) <= lease { // spin, as a holder busy with work would
		}
		select {
		case <-l.Done():
		default:
			t.Fatalf("lock %d: the lease ran out %s ago but Done() is still open", i, time.Since(acquired[i])-lease)
		}
	}
}
