package dynamolock_test

// Issue 46: a seam where a path written before sessions met session
// locks. Each test here failed before its fix.

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// TestSeamAdmissionKeepsWhatItAdmitsAtASteadyBackend: seam 4, in virtual
// time on the model. 4 heartbeat workers, a 1 s lease renewed every
// 250 ms, every write answered in a steady 200 ms, and an acquisition of a
// new key every 300 ms: admission control uses the scheduler's own rule, so
// none of the locks it admits is lost (it refuses the rest).
func TestSeamAdmissionKeepsWhatItAdmitsAtASteadyBackend(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := steadyBackendClient(t)

		var locks []*dynamolock.Lock
		refused := 0
		for i := range 24 {
			l, err := c.AcquireLockWithContext(ctx, fmt.Sprintf("k%d", i))
			switch {
			case errors.Is(err, dynamolock.ErrHeartbeatCapacity):
				refused++
			case err != nil:
				t.Fatalf("key k%d: %v", i, err)
			default:
				locks = append(locks, l)
			}
			time.Sleep(300 * time.Millisecond)
		}
		time.Sleep(5 * time.Second) // held: the renewals of what was admitted
		lost := 0
		for _, l := range locks {
			if l.Err() != nil {
				lost++
				t.Logf("%s: %v", l.PartitionKey(), l.Err())
			}
		}
		t.Logf("admitted %d, refused %d, lost %d", len(locks), refused, lost)
		require.NotEmpty(t, locks)
		require.Zero(t, lost, "a lock admitted at a steady backend is kept")
	})
}

// TestSeamAdmissionCountsAnAcquisitionByTheSchedulersRule: seam 4, the
// acquisition's own share. At the backend above, a client renewing one
// lock asks for 13 keys at once (AcquireLocks): by the scheduler's rule
// they need more than its workers give, and admission refuses them rather
// than grant locks the scheduler then gives up.
func TestSeamAdmissionCountsAnAcquisitionByTheSchedulersRule(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c := steadyBackendClient(t)
		warm, err := c.AcquireLockWithContext(ctx, "warm")
		require.NoError(t, err)
		waitFor(t, 10*time.Second, "three heartbeats", func() bool { return c.Stats().HeartbeatsSent >= 3 })

		keys := make([]string, 13)
		for i := range keys {
			keys[i] = fmt.Sprintf("k%d", i)
		}
		locks, err := c.AcquireLocks(ctx, keys, dynamolock.WithAdditionalTimeToWaitForLock(0))
		if err != nil {
			require.ErrorIs(t, err, dynamolock.ErrHeartbeatCapacity)
			t.Logf("refused: %v", err)
		}
		time.Sleep(5 * time.Second) // held: the renewals of what was admitted
		lost := 0
		for _, l := range append(locks, warm) {
			if l.Err() != nil {
				lost++
			}
		}
		t.Logf("admitted %d, lost %d", len(locks), lost)
		require.Zero(t, lost, "a lock admitted at a steady backend is kept")
	})
}

// steadyBackendClient is a client on the model (in a synctest bubble) whose
// every UpdateItem is answered in a steady 200 ms: 4 heartbeat workers, a
// 1 s lease renewed every 250 ms, admission at a fraction of 1 (all of the
// rate it measures). At a steady backend nothing but the rule admission
// counts a lock's renewals by stands between a grant and a loss; the
// default fraction (0.6 since issue 60) leaves a margin that hid a wrong
// rule from these tests (mutations M47 and M48 went unfound). Closed at the
// end of the test.
func steadyBackendClient(t *testing.T) *dynamolock.Client {
	t.Helper()
	slow := func(ctx context.Context) error {
		select {
		case <-time.After(200 * time.Millisecond):
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	db := faults.Wrap(dynamolocktest.New().Conn(), &faults.Rule{Op: "UpdateItem", Before: slow})
	c, err := dynamolock.New(db, "locks", dynamolock.WithLeaseDuration(time.Second),
		dynamolock.WithHeartbeatPeriod(250*time.Millisecond), dynamolock.WithHeartbeatConcurrency(4),
		dynamolock.WithHeartbeatAdmission(1))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.CreateTableWithContext(context.Background(), "locks")
	require.NoError(t, err)
	return c
}
