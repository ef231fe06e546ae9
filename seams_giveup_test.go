package dynamolock_test

// Issue 46: a seam where a path written before sessions met session
// locks. Each test here failed before its fix.

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// TestSeamGiveUpsUnderASessionAreFreedWithinALease: seam 2. A lock this
// client gave up without a confirmed release (a best-effort release whose
// send failed, a release whose outcome is unknown, a reader's, an
// acquisition whose undo failed) is free to others within about one lease,
// under a session as without one.
func TestSeamGiveUpsUnderASessionAreFreedWithinALease(t *testing.T) {
	const lease = 3 * time.Second // sessionOpts
	dropRelease := func() *faults.Rule {
		return &faults.Rule{Op: "UpdateItem", Match: faults.Sets("isReleased"), Times: 1, Drop: true}
	}
	freedWithin := func(t *testing.T, table, key string, rw bool) {
		t.Helper()
		other := newClient(t, mustDB(t), table, fast...)
		ctx, cancel := context.WithTimeout(context.Background(), lease+3*time.Second)
		defer cancel()
		began := time.Now()
		var err error
		var l *dynamolock.Lock
		if rw {
			var lk *dynamolock.RWLock
			lk, err = other.NewRWLock(key)
			require.NoError(t, err)
			l, err = lk.Lock(ctx)
		} else {
			l, err = other.AcquireLockWithContext(ctx, key, dynamolock.WithAdditionalTimeToWaitForLock(lease+3*time.Second))
		}
		require.NoError(t, err, "the key given up is free to others within about one lease")
		t.Logf("taken by another client %s after the give-up", time.Since(began).Round(time.Millisecond))
		require.NoError(t, l.Close())
	}

	t.Run("best effort", func(t *testing.T) {
		table, db, c, l := sessionLockOn(t)
		db.Add(dropRelease())
		ok, err := c.ReleaseLockWithContext(context.Background(), l, dynamolock.WithBestEffort())
		require.NoError(t, err)
		require.True(t, ok)
		freedWithin(t, table, "k", false)
	})
	t.Run("outcome unknown", func(t *testing.T) {
		table, db, c, l := sessionLockOn(t)
		db.Add(dropRelease())
		_, err := c.ReleaseLockWithContext(context.Background(), l)
		require.ErrorIs(t, err, dynamolock.ErrReleaseOutcomeUnknown)
		freedWithin(t, table, "k", false)
	})
	t.Run("landed, answer lost", func(t *testing.T) {
		// The release landed and its answer was lost; another client took
		// the key at once. The take-back sent again must not free that
		// client's lock: its condition (this acquisition's record version
		// number and fencing token) fails, and it stops.
		table, db, c, l := sessionLockOn(t)
		db.Add(&faults.Rule{Op: "UpdateItem", Match: faults.Sets("isReleased"), Times: 1, LoseAnswer: true})
		again := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("isReleased")} // counts the take-backs sent again
		db.Add(again)
		_, err := c.ReleaseLockWithContext(context.Background(), l)
		require.ErrorIs(t, err, dynamolock.ErrReleaseOutcomeUnknown)
		other := newClient(t, mustDB(t), table, fast...)
		taken, err := other.AcquireLockWithContext(context.Background(), "k", dynamolock.FailIfLocked())
		require.NoError(t, err, "the release had landed")
		waitFor(t, 10*time.Second, "the take-back to be sent again", func() bool { return db.Hits(again) >= 1 })
		n := db.Hits(again)
		time.Sleep(2 * time.Second) // an absence: four heartbeat periods in which no take-back may be sent again
		require.Equal(t, n, db.Hits(again), "the take-back stops once its condition failed")
		require.NoError(t, taken.Err(), "the other client's lock is not freed by the take-back")
		item := rawItem(t, mustDB(t), table, keyOf("k"))
		require.Equal(t, other.OwnerName(), item["ownerName"].(*types.AttributeValueMemberS).Value)
		require.NotContains(t, item, "isReleased")
		require.NoError(t, taken.Close())
	})
	t.Run("reader", func(t *testing.T) {
		table := newTable(t, "")
		db := faults.Wrap(mustDB(t))
		c := newClient(t, db, table, sessionOpts...)
		rw, err := c.NewRWLock("k")
		require.NoError(t, err)
		l, err := rw.RLock(context.Background())
		require.NoError(t, err)
		db.Add(&faults.Rule{Op: "UpdateItem", Match: faults.ConditionOn("readers"), Times: 1, Drop: true})
		_, err = c.ReleaseLockWithContext(context.Background(), l)
		require.ErrorIs(t, err, dynamolock.ErrReleaseOutcomeUnknown)
		freedWithin(t, table, "k", true)
	})
	t.Run("undo failed", func(t *testing.T) {
		table := newTable(t, "")
		script := &attemptScript{op: "UpdateItem"}
		sdb, _ := newDB(t, func(o *dynamodb.Options) {
			o.RetryMaxAttempts = 1
			o.APIOptions = append(o.APIOptions, script.register)
		})
		db := faults.Wrap(sdb)
		c := newClient(t, db, table, sessionOpts...)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.Session(ctx)
		require.NoError(t, err)
		script.play(landThenReset)
		db.Add(&faults.Rule{Op: "UpdateItem", Match: faults.Sets("isReleased"), Times: 1, Drop: true})
		_, err = c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		require.Error(t, err, "its answer was lost: FailIfLocked gives up, and its undo is dropped")
		item := rawItem(t, mustDB(t), table, keyOf("k"))
		require.NotEmpty(t, item)
		freedWithin(t, table, "k", false)
	})
}

// sessionLockOn returns a fresh table, a fault-injecting client of it
// (closed at the end of the test), holding key "k" through a session.
func sessionLockOn(t *testing.T) (string, *faults.Client, *dynamolock.Client, *dynamolock.Lock) {
	t.Helper()
	table := newTable(t, "")
	db := faults.Wrap(mustDB(t))
	c := newClient(t, db, table, sessionOpts...)
	l, err := c.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)
	return table, db, c, l
}
