package dynamolock_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Issue 21, finding 3: a short slowdown saturates the only heartbeat
// worker for a moment and sets the measured rate to about 2 beats/s; the
// beats are fast again afterwards, so admission control must open again
// within a few seconds. Before the fix the saturated rate was never
// measured again (windows with a free worker measure nothing) and every
// new acquisition failed with ErrHeartbeatCapacity after its lease.
func TestAdmissionReopensAfterShortSlowdown(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table,
		dynamolock.WithLeaseDuration(10*time.Second), dynamolock.WithHeartbeatPeriod(time.Second),
		dynamolock.WithHeartbeatConcurrency(1))
	locks := make([]*dynamolock.Lock, 20)
	for i := range locks {
		l, err := c.AcquireLock(fmt.Sprintf("held-%d", i))
		require.NoError(t, err)
		locks[i] = l
	}
	// Five heartbeats take 500 ms each: the worker is busy for 2.5 s while
	// the others queue.
	slow := &faults.Rule{Op: "UpdateItem", Match: isHeartbeat, Times: 5, Before: faults.Sleep(500 * time.Millisecond)}
	fdb.Add(slow)
	waitFor(t, 20*time.Second, "five slow heartbeats", func() bool { return fdb.Hits(slow) == 5 })
	// The slowdown is over; the fast beats that follow must reopen
	// admission. Its bound: the acquisition's lease (10 s).
	start := time.Now()
	l, err := c.AcquireLockWithContext(context.Background(), "free")
	require.NoError(t, err, "after %s", time.Since(start))
	_, err = c.ReleaseLock(l)
	require.NoError(t, err)
	for _, l := range locks {
		select {
		case <-l.Done():
			t.Fatalf("lock %q lost: %v", l.PartitionKey(), l.Err())
		default:
		}
	}
	t.Logf("admitted after %s; admission waits: %d", time.Since(start).Round(time.Millisecond), c.Stats().AdmissionWaits)
}
