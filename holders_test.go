package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// Holders shows every held slot of a semaphore and no released one: the
// holder's own lock in its client, views elsewhere.
func TestSemaphoreHolders(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	a := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("a"))...)
	b := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("b"))...)
	odb, cc := newDB(t)
	operator := newClient(t, odb, table, append(fast, dynamolock.WithOwnerName("operator"))...)
	semA, err := a.NewSemaphore("encoders", 4)
	require.NoError(t, err)
	semB, err := b.NewSemaphore("encoders", 4)
	require.NoError(t, err)
	semOp, err := operator.NewSemaphore("encoders", 4)
	require.NoError(t, err)

	none, err := semOp.Holders(ctx)
	require.NoError(t, err)
	assert.Empty(t, none)
	la1, err := semA.Acquire(ctx)
	require.NoError(t, err)
	la2, err := semA.Acquire(ctx)
	require.NoError(t, err)
	lb, err := semB.Acquire(ctx)
	require.NoError(t, err)

	cc.reset()
	seen, err := semOp.Holders(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"GetItem": 4}, cc.reset(), "one read per slot")
	owners := map[string]uint64{}
	for _, l := range seen {
		owners[l.PartitionKey()+"/"+l.OwnerName()] = l.FencingToken()
		assert.Equal(t, time.Second, l.LeaseDuration())
		assert.False(t, l.IsExpired())
	}
	assert.Equal(t, map[string]uint64{
		la1.PartitionKey() + "/a": la1.FencingToken(), la2.PartitionKey() + "/a": la2.FencingToken(), lb.PartitionKey() + "/b": lb.FencingToken(),
	}, owners)

	own, err := semA.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, own, 3)
	for _, l := range own {
		if l.OwnerName() == "a" {
			assert.True(t, l == la1 || l == la2, "the holder's own lock, not a view")
		}
	}

	require.NoError(t, la1.Close())
	seen, err = semOp.Holders(ctx)
	require.NoError(t, err)
	require.Len(t, seen, 2, "a released slot is not listed")
	for _, l := range seen {
		assert.NotEqual(t, la1.PartitionKey(), l.PartitionKey())
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, err = semOp.Holders(cctx)
	require.ErrorIs(t, err, context.Canceled)
}

// Readers shows every reader of a read/write lock: this client's own
// reader locks, and a view of each other entry (its lease and beat, no
// owner); released readers are gone, and a writer is not a reader.
func TestRWLockReaders(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	a := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("a"))...)
	odb, cc := newDB(t)
	operator := newClient(t, odb, table, append(fast, dynamolock.WithOwnerName("operator"))...)
	rwA, err := a.NewRWLock("shards")
	require.NoError(t, err)
	rwOp, err := operator.NewRWLock("shards")
	require.NoError(t, err)

	none, err := rwOp.Readers(ctx)
	require.NoError(t, err)
	assert.Empty(t, none)
	r1, err := rwA.RLock(ctx)
	require.NoError(t, err)
	r2, err := rwA.RLock(ctx, dynamolock.WithLockLease(3*time.Second))
	require.NoError(t, err)
	mine, err := rwOp.RLock(ctx)
	require.NoError(t, err)

	cc.reset()
	seen, err := rwOp.Readers(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{"GetItem": 1}, cc.reset())
	require.Len(t, seen, 3)
	views := map[string]time.Duration{}
	for _, l := range seen {
		if l == mine {
			continue
		}
		assert.Empty(t, l.OwnerName(), "a reader's entry names no owner")
		assert.False(t, l.IsExpired())
		views[l.RecordVersionNumber()] = l.LeaseDuration()
	}
	assert.Equal(t, map[string]time.Duration{r1.RecordVersionNumber(): time.Second, r2.RecordVersionNumber(): 3 * time.Second}, views,
		"each view is one reader's entry: its beat and lease")
	assert.Contains(t, seen, mine, "this client's own reader lock")

	require.NoError(t, r1.Close())
	require.NoError(t, mine.Close())
	seen, err = rwOp.Readers(ctx)
	require.NoError(t, err)
	require.Len(t, seen, 1)
	require.NoError(t, r2.Close())
	w, err := rwOp.Lock(ctx)
	require.NoError(t, err)
	seen, err = rwOp.Readers(ctx)
	require.NoError(t, err)
	assert.Empty(t, seen, "a writer is not a reader")
	require.NoError(t, w.Close())
}
