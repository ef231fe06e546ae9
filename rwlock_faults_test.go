package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// The orderings that could break a read/write lock, each played with SDK
// middleware below the SDK's retries (attemptScript):
//   - a lost answer after a write landed: the reader's or writer's
//     granting write (adopted from what the next answer shows, never
//     granted twice), and a release (the entry is gone: released);
//   - a replayed request: the SDK's retry of a write that landed (the
//     reader's heartbeat's IN list accepts its own beat; a replayed grant
//     writes the same entry again);
//   - a give-up after a write that may have landed (the entry is removed
//     again, so a writer is not held up for a lease);
//   - a pause past the lease: a reader whose entry a writer dropped as dead
//     cannot renew it back, and learns it lost the lock.

type attemptStep = func(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error)

func scriptedClient(t *testing.T, table string, retries int, opts ...dynamolock.ClientOption) (*dynamolock.Client, *attemptScript) {
	t.Helper()
	script := &attemptScript{op: "UpdateItem"}
	db, _ := newDB(t, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = retries
		o.APIOptions = append(o.APIOptions, script.register)
	})
	return newClient(t, db, table, opts...), script
}

func readersOf(t *testing.T, table, key string) map[string]types.AttributeValue {
	t.Helper()
	db, _ := newDB(t)
	m, _ := rawItem(t, db, table, keyOf(key))["readers"].(*types.AttributeValueMemberM)
	if m == nil {
		return nil
	}
	return m.Value
}

// A granting write lands and its answer is lost; with no SDK retry the
// call sees its own entry (or writer's slot) at the next read and adopts
// it: one reader entry, one held lock that renews and releases.
func TestRWLockLostGrantAnswerIsAdopted(t *testing.T) {
	for _, writer := range []bool{false, true} {
		t.Run(map[bool]string{false: "reader", true: "writer"}[writer], func(t *testing.T) {
			table := newTable(t, "")
			c, script := scriptedClient(t, table, 1, rwOpts...)
			rw := newRW(t, c, "k")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			// Make the item exist, so the first write is the one that lands.
			l0, err := rw.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, l0.Close())
			script.n.Store(0)
			script.steps = []attemptStep{landThenReset}
			var l *dynamolock.Lock
			if writer {
				l, err = rw.Lock(ctx, rwFast)
			} else {
				l, err = rw.RLock(ctx, rwFast)
			}
			require.NoError(t, err)
			require.EqualValues(t, 1, script.n.Load(), "adopted: no second granting write")
			if !writer {
				require.Len(t, readersOf(t, table, "k"), 1)
			} else {
				require.Greater(t, l.FencingToken(), l0.FencingToken())
			}
			require.NoError(t, c.SendHeartbeat(l))
			require.NoError(t, l.Close())
			require.Empty(t, readersOf(t, table, "k"))
		})
	}
}

// A granting write lands, its answer is lost, and the SDK's retries are
// throttled: the call gives up (FailIfLocked), and must take its write
// back, or a writer would wait a whole lease for a reader nobody holds.
func TestRWLockGiveUpUndoesALandedReader(t *testing.T) {
	table := newTable(t, "")
	c, script := scriptedClient(t, table, 3, rwOpts...)
	rw := newRW(t, c, "k")
	ctx := context.Background()
	l0, err := rw.Lock(ctx)
	require.NoError(t, err)
	require.NoError(t, l0.Close())
	script.n.Store(0)
	script.steps = []attemptStep{landThenReset, throttled, throttled}
	_, err = rw.RLock(ctx, dynamolock.FailIfLocked())
	require.Error(t, err)
	require.Empty(t, readersOf(t, table, "k"), "the landed entry was removed again")
	other := newClient(t, mustDB(t), table, rwOpts...)
	w, err := newRW(t, other, "k").Lock(ctx, dynamolock.FailIfLocked())
	require.NoError(t, err, "a writer gets the lock at once")
	require.NoError(t, w.Close())
}

// A reader's heartbeat and release land and their answers are lost; the
// SDK retries each (a replayed request): the heartbeat's retry finds its
// own new beat and succeeds, the release's retry finds the entry gone and
// reports it released.
func TestRWLockReplayedReaderHeartbeatAndRelease(t *testing.T) {
	table := newTable(t, "")
	c, script := scriptedClient(t, table, 3, dynamolock.WithLeaseDuration(rwLease), dynamolock.DisableHeartbeat())
	rw := newRW(t, c, "k")
	ctx := context.Background()
	r, err := rw.RLock(ctx)
	require.NoError(t, err)
	other, err := rw.RLock(ctx)
	require.NoError(t, err)
	script.n.Store(0)
	script.steps = []attemptStep{landThenReset}
	require.NoError(t, c.SendHeartbeat(r), "the retry of a heartbeat that landed succeeds")
	require.NoError(t, r.Err())
	script.n.Store(0)
	script.steps = []attemptStep{landThenReset}
	ok, err := c.ReleaseLockWithContext(ctx, r)
	require.NoError(t, err)
	require.True(t, ok, "the retry of a release that landed reports it released")
	readers := readersOf(t, table, "k")
	require.Len(t, readers, 1, "the other reader is untouched")
	require.NoError(t, other.Err())
	require.NoError(t, other.Close())
}

// A reader paused past its lease: a writer drops its entry and takes the
// lock; the reader's late heartbeat (a delayed request) cannot write the
// entry back, and the reader learns it lost the lock.
func TestRWLockPausedReaderCannotComeBack(t *testing.T) {
	table := newTable(t, "")
	db := mustDB(t)
	paused := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
	c := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := newRW(t, paused, "k").RLock(ctx)
	require.NoError(t, err)
	w, err := newRW(t, c, "k").Lock(ctx, rwFast)
	require.NoError(t, err)
	err = paused.SendHeartbeat(r)
	require.ErrorIs(t, err, dynamolock.ErrLockLost)
	require.Empty(t, readersOf(t, table, "k"), "no entry came back")
	require.NoError(t, w.Err())
	assert.NoError(t, w.Close())
}

func mustDB(t *testing.T) *dynamodb.Client {
	db, _ := newDB(t)
	return db
}
