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

// Fault tests with service errors injected by SDK middleware
// (internal/faults). Network faults through a TCP proxy (cuts, dropped
// answers, latency) are tested in the tools module's integration package,
// which may depend on the proxy.

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

// Heartbeats survive 500 errors on a third of their writes (the SDK makes
// one attempt per call, so the library's own retries handle them).
func TestHeartbeatsSurviveInternalServerErrors(t *testing.T) {
	const lease, beat = time.Second, 250 * time.Millisecond
	table := newTable(t, "")
	// Every third UpdateItem fails (one attempt each): the acquisition is
	// the first, so a third of the heartbeats meet a 500, never two in a
	// row. A random rate could inject none in a short run.
	se := &faults.ServiceErrors{Every: 3, Operations: []string{"UpdateItem"}, Kinds: []faults.Kind{faults.InternalServerError}}
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
