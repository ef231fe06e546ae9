package dynamolock_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Issue 63, items 1 and 3: a duration written as a bare number (Go reads
// it as nanoseconds: WithLeaseDuration(10) is 10ns, not ten seconds) is
// refused before any DynamoDB call, in every place a duration is given,
// with the value and the duration the caller likely meant. Before, a
// 10ns lease was accepted and its acquisition of a free key never
// returned, sending a write per round trip; a 5ns heartbeat renewed each
// lock a thousand times a second.
func TestDurationsWrittenAsNumbersAreRefused(t *testing.T) {
	ctx := context.Background()
	db := dynamolocktest.New().Conn()
	admin := newClient(t, db, "durations")
	_, err := admin.CreateTableWithContext(ctx, "durations")
	require.NoError(t, err)
	c := newClient(t, db, "durations", dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(20*time.Second))
	held, err := c.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	newErr := func(opts ...dynamolock.ClientOption) func() error {
		return func() error {
			cl, err := dynamolock.New(db, "durations", opts...)
			if err == nil {
				_ = cl.Close()
			}
			return err
		}
	}
	acquire := func(opts ...dynamolock.AcquireLockOption) func() error {
		return func() error {
			l, err := c.AcquireLockWithContext(ctx, "k", opts...)
			if err == nil {
				_, _ = c.ReleaseLockWithContext(ctx, l)
			}
			return err
		}
	}
	for _, tc := range []struct {
		name   string
		call   func() error
		option string   // InvalidArgumentError.Name
		says   []string // in the message
	}{
		{"lease of 10, meant as seconds", newErr(dynamolock.WithLeaseDuration(10), dynamolock.WithHeartbeatPeriod(3)),
			"WithLeaseDuration", []string{"invalid WithLeaseDuration 10ns", "too short", "did you mean 10*time.Second?", "nanoseconds", "100ms"}},
		{"lease of 10 without heartbeats", newErr(dynamolock.WithLeaseDuration(10), dynamolock.DisableHeartbeat()),
			"WithLeaseDuration", []string{"10ns", "did you mean 10*time.Second?"}},
		{"lease of 1ms", newErr(dynamolock.WithLeaseDuration(time.Millisecond), dynamolock.DisableHeartbeat()),
			"WithLeaseDuration", []string{"invalid WithLeaseDuration 1ms: is too short", "the least is 100ms"}},
		{"lease of 500, seconds or milliseconds", newErr(dynamolock.WithLeaseDuration(500), dynamolock.DisableHeartbeat()),
			"WithLeaseDuration", []string{"did you mean 500*time.Second or 500*time.Millisecond?"}},
		{"heartbeat of 5 with a 20s lease", newErr(dynamolock.WithHeartbeatPeriod(5)),
			"WithHeartbeatPeriod", []string{"invalid WithHeartbeatPeriod 5ns", "did you mean 5*time.Second?", "50ms", "billed write"}},
		{"heartbeat of 10ms", newErr(dynamolock.WithHeartbeatPeriod(10 * time.Millisecond)),
			"WithHeartbeatPeriod", []string{"invalid WithHeartbeatPeriod 10ms: is too short; the least is 50ms"}},
		{"lock lease of 30", acquire(dynamolock.WithLockLease(30)),
			"WithLockLease", []string{"invalid WithLockLease 30ns", "did you mean 30*time.Second?"}},
		{"refresh period of 100, meant as milliseconds", acquire(dynamolock.WithRefreshPeriod(100)),
			"WithRefreshPeriod", []string{"invalid WithRefreshPeriod 100ns", "did you mean 100*time.Millisecond?", "the least is 1ms"}},
		{"refresh period of 1", acquire(dynamolock.WithRefreshPeriod(1)),
			"WithRefreshPeriod", []string{"did you mean 1*time.Second or 1*time.Millisecond?"}},
		{"additional wait of 5", acquire(dynamolock.WithAdditionalTimeToWaitForLock(5)),
			"WithAdditionalTimeToWaitForLock", []string{"invalid WithAdditionalTimeToWaitForLock 5ns", "did you mean 5*time.Second or 5*time.Millisecond?"}},
		{"lease to ensure of 60", func() error { return c.SendHeartbeatWithContext(ctx, held, dynamolock.WithLeaseDurationToEnsure(60)) },
			"WithLeaseDurationToEnsure", []string{"invalid WithLeaseDurationToEnsure 60ns", "did you mean 60*time.Second?"}},
		{"Do, refresh period of 20", func() error {
			return c.Do(ctx, "k", func(context.Context, *dynamolock.Lock) error { return nil }, dynamolock.WithRefreshPeriod(20))
		}, "WithRefreshPeriod", []string{"20ns", "20*time.Millisecond"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := db.Calls()
			err := tc.call()
			var ie *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &ie)
			assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
			assert.Equal(t, tc.option, ie.Name)
			for _, s := range tc.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.Equal(t, before, db.Calls(), "refused before any DynamoDB call")
		})
	}

	// The floors, and zero where it has a meaning, are accepted.
	for _, opts := range [][]dynamolock.ClientOption{
		{dynamolock.WithLeaseDuration(100 * time.Millisecond), dynamolock.WithHeartbeatPeriod(50 * time.Millisecond)},
		{dynamolock.WithLeaseDuration(100 * time.Millisecond), dynamolock.DisableHeartbeat()},
	} {
		require.NoError(t, newErr(opts...)())
	}
	require.NoError(t, acquire(dynamolock.WithRefreshPeriod(time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(0))())
	nobeat := newClient(t, db, "durations", dynamolock.DisableHeartbeat())
	l, err := nobeat.AcquireLockWithContext(ctx, "short", dynamolock.WithLockLease(100*time.Millisecond))
	require.NoError(t, err)
	_, err = nobeat.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	require.NoError(t, acquire(dynamolock.WithRefreshPeriod(10*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(time.Millisecond))())
	require.NoError(t, c.SendHeartbeatWithContext(ctx, held, dynamolock.WithLeaseDurationToEnsure(time.Minute)))
}

// Issue 63, item 1: when every answer to an acquiring write comes after
// the lease it granted has run out (a lease shorter than a round trip:
// here 100ms, the shortest accepted, against answers 300ms late), the
// acquisition no longer writes again at once, for ever: it rewrites at
// most once a refresh period, and AcquireLock gives up when its wait ends,
// saying that the lease ran out before the answer came. Before, a free key
// was written back to back until the caller's context ended.
func TestAnswersLaterThanTheLeaseAreNotRetriedBackToBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		conn := db.Conn()
		admin, err := dynamolock.New(conn, "slow")
		require.NoError(t, err)
		_, err = admin.CreateTableWithContext(ctx, "slow")
		require.NoError(t, err)
		require.NoError(t, admin.Close())
		c, err := dynamolock.New(conn, "slow", dynamolock.WithLeaseDuration(100*time.Millisecond), dynamolock.DisableHeartbeat())
		require.NoError(t, err)
		defer func() { _ = c.Close() }()
		conn.Delay(300 * time.Millisecond)

		// AcquireLock's bound: its lease plus the additional second, even
		// with a context that never ends.
		before := conn.Calls()["UpdateItem"]
		start := time.Now()
		wctx, cancel := context.WithTimeout(ctx, time.Minute) // only a guard: the call must end long before
		_, err = c.AcquireLockWithContext(wctx, "k")
		cancel()
		took := time.Since(start)
		var te *dynamolock.TimeoutError
		require.ErrorAs(t, err, &te, "%v", err)
		assert.False(t, errors.Is(err, context.DeadlineExceeded), "ended by its own bound, not the guard: %v", err)
		assert.Contains(t, err.Error(), "after the lease it granted (100ms) had run out")
		assert.Less(t, took, 5*time.Second)
		// The writes of the call and the undo of each.
		assert.LessOrEqual(t, conn.Calls()["UpdateItem"]-before, 6, "UpdateItems in %s", took)

		// Do waits as long as its context allows: its writes come a refresh
		// period (1s) apart, not a round trip (300ms).
		before = conn.Calls()["UpdateItem"]
		wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		err = c.Do(wctx, "k2", func(context.Context, *dynamolock.Lock) error { return nil })
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		assert.LessOrEqual(t, conn.Calls()["UpdateItem"]-before, 14, "UpdateItems in 10s at one refresh period (1s) apart, undo included")

		// So do a read/write lock's writer and reader.
		rw, err := c.NewRWLock("rw")
		require.NoError(t, err)
		for _, lock := range []func(context.Context, ...dynamolock.AcquireLockOption) (*dynamolock.Lock, error){rw.Lock, rw.RLock} {
			before = conn.Calls()["UpdateItem"]
			wctx, cancel = context.WithTimeout(ctx, 10*time.Second)
			_, err = lock(wctx)
			cancel()
			require.ErrorIs(t, err, context.DeadlineExceeded)
			assert.LessOrEqual(t, conn.Calls()["UpdateItem"]-before, 14, "UpdateItems in 10s, undo included")
		}
	})
}
