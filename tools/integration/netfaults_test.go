package integration_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
	"github.com/arielsrv/dynamolock/v2/tools/internal/netfaults"
)

// Network fault tests: a toxiproxy run in this process sits between the holder's
// SDK client and DynamoDB Local; other clients talk to DynamoDB Local
// directly. The holder's SDK client gives up on an HTTP attempt after
// faultHTTPTimeout, so that a silently cut network is noticed.

const faultHTTPTimeout = 250 * time.Millisecond

// newFaultProxy starts a proxy in front of DynamoDB Local, closed when the
// test ends (after the clients, which are cleaned up first).
func newFaultProxy(t *testing.T) *netfaults.Proxy {
	t.Helper()
	p, err := netfaults.NewProxy(endpoint)
	require.NoError(t, err)
	t.Cleanup(p.Close)
	return p
}

// proxiedDB returns an SDK client that reaches DynamoDB Local through p,
// with short HTTP timeouts and at most attempts attempts per call.
func proxiedDB(t *testing.T, p *netfaults.Proxy, attempts int, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	optFns = append([]func(*dynamodb.Options){
		faults.Endpoint(p.Endpoint()),
		faults.Timeouts(faultHTTPTimeout, attempts, 50*time.Millisecond),
	}, optFns...)
	return newDB(t, optFns...)
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

// A cut shorter than the lease: heartbeats fail while it lasts and succeed
// after it, the lock stays held throughout, and a contender that watched the
// item during the whole cut and a full lease gives up.
func TestNetworkCutShorterThanLeaseKeepsTheLock(t *testing.T) {
	const lease, beat, cut = 2 * time.Second, 300 * time.Millisecond, 700 * time.Millisecond
	table := newTable(t, "")
	p := newFaultProxy(t)
	pdb := proxiedDB(t, p, 2)
	db := newDB(t)
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
	pdb := proxiedDB(t, p, 2)
	db := newDB(t)
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
		fault func(p *netfaults.Proxy, se *faults.ServiceErrors) error
	}{
		{"response dropped (timeout)", func(p *netfaults.Proxy, _ *faults.ServiceErrors) error { return p.DropResponses() }},
		{"connection reset after the request (reset_peer)", func(p *netfaults.Proxy, _ *faults.ServiceErrors) error {
			return p.ResetResponses(0)
		}},
		{"answer replaced by a 500 (SDK middleware)", func(_ *netfaults.Proxy, se *faults.ServiceErrors) error {
			se.SetRate(1)
			return nil
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := newTable(t, "")
			p := newFaultProxy(t)
			se := &faults.ServiceErrors{AfterSend: true, Operations: []string{"UpdateItem"}}
			pdb := proxiedDB(t, p, 1, faults.Inject(se))
			db := newDB(t)
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

// Latency spikes longer than an HTTP attempt but shorter than the lease do
// not lose the lock.
func TestLatencySpikesKeepTheLock(t *testing.T) {
	const lease, beat = 2 * time.Second, 300 * time.Millisecond
	table := newTable(t, "")
	p := newFaultProxy(t)
	pdb := proxiedDB(t, p, 3)
	db := newDB(t)
	holder := newClient(t, pdb, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(beat))
	ctx := context.Background()
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	for range 3 {
		name, err := p.Latency(netfaults.Downstream, 400*time.Millisecond, 100*time.Millisecond)
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
