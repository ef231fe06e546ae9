package dynamolock_test

// Issue 46: a seam where a path written before sessions met session
// locks. Each test here failed before its fix.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// v2Acquire writes item as dynamolock v2 acquires a key held by another
// owner that it saw expire: every attribute it does not know copied from
// the old item, its own owner, lease and record version number.
func v2Acquire(t *testing.T, db *dynamodb.Client, table, key, owner string) {
	t.Helper()
	item := rawItem(t, db, table, keyOf(key))
	require.NotEmpty(t, item)
	delete(item, "isReleased")
	item["ownerName"] = s(owner)
	item["leaseDuration"] = s("10s")
	item["recordVersionNumber"] = s("v2-" + owner + "-" + time.Now().Format(time.RFC3339Nano))
	putRaw(t, db, table, item)
}

// TestSeamForcedReleaseRemovesTheSession: seam 1. A forced release of a
// view of a session's lock (lock-example force-release) marks the item
// released and removes dynamolockSession; and an item another client wrote
// with that attribute copied in (dynamolock v2 copies what it does not
// know) is judged by its own lease, never by the session.
func TestSeamForcedReleaseRemovesTheSession(t *testing.T) {
	table := newTable(t, "")
	raw := mustDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	holder := newClient(t, mustDB(t), table, append(sessionOpts, dynamolock.WithOwnerName("op"))...)
	_, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	require.Contains(t, rawItem(t, raw, table, keyOf("k")), "dynamolockSession")

	admin := newClient(t, mustDB(t), table, dynamolock.WithOwnerName("op"))
	view, err := admin.GetWithContext(ctx, "k")
	require.NoError(t, err)
	ok, err := admin.ReleaseLockWithContext(ctx, view)
	require.NoError(t, err)
	require.True(t, ok)
	item := rawItem(t, raw, table, keyOf("k"))
	require.Contains(t, item, "isReleased")
	require.NotContains(t, item, "dynamolockSession", "a released item names no session")

	// dynamolock v2 takes the released key, then a second key whose item
	// still names the holder's session (written before this fix, or by a
	// tool that copied it), once that session has ended.
	v2Acquire(t, raw, table, "k", "v2")
	_, err = holder.AcquireLockWithContext(ctx, "k2")
	require.NoError(t, err)
	require.NoError(t, holder.Close())
	v2Acquire(t, raw, table, "k2", "v2")
	require.Contains(t, rawItem(t, raw, table, keyOf("k2")), "dynamolockSession", "v2 copied the attribute")

	other := newClient(t, mustDB(t), table, sessionOpts...)
	for _, key := range []string{"k", "k2"} {
		_, err = other.AcquireLockWithContext(ctx, key, dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held, "key %s: v2's lock is live by its own lease", key)
		assert.Equal(t, "v2", held.Owner)
		view, err := other.GetWithContext(ctx, key)
		require.NoError(t, err)
		assert.False(t, view.IsReleased(), "key %s", key)
		assert.Equal(t, 10*time.Second, view.LeaseDuration(), "key %s: v2's lease, not a session's", key)
	}
}

// TestSeamReentrantClientDoesNotAdoptALiveSessionsLock: seam 3. Another
// client with the same owner name and WithReentrant does not take a live
// session's lock (its holder has no heartbeat of its own that would learn
// of it): it is held, as by any other owner. Once the session ended, it
// takes it at once.
func TestSeamReentrantClientDoesNotAdoptALiveSessionsLock(t *testing.T) {
	table := newTable(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newClient(t, mustDB(t), table, append(sessionOpts, dynamolock.WithOwnerName("same"))...)
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	for _, opts := range [][]dynamolock.ClientOption{
		{dynamolock.WithOwnerName("same")},
		append(sessionOpts, dynamolock.WithOwnerName("same")),
	} {
		twin := newClient(t, mustDB(t), table, opts...)
		_, err = twin.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant(), dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held, "a live session's lock is not adoptable")
		_, err = twin.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant(), dynamolock.WithAdditionalTimeToWaitForLock(0))
		require.Error(t, err)
		require.NoError(t, l.Err(), "the holder still holds it")
		require.NoError(t, twin.Close())
	}

	twin := newClient(t, mustDB(t), table, dynamolock.WithOwnerName("same"))
	require.NoError(t, holder.Close())
	got, err := twin.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant(), dynamolock.FailIfLocked())
	require.NoError(t, err, "the session ended: the key is free")
	require.NoError(t, got.Close())
}

// TestSeamListingsReadASessionsLocksThroughTheirSession: seam 6. Listings
// judge a session's lock by its session, as Get does: held with the
// session's lease while it lives, released once it ended.
func TestSeamListingsReadASessionsLocksThroughTheirSession(t *testing.T) {
	table := newTable(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	holder := newClient(t, mustDB(t), table, sessionOpts...)
	for _, k := range []string{"a", "b"} {
		_, err := holder.AcquireLockWithContext(ctx, k)
		require.NoError(t, err)
	}
	reader := newClient(t, mustDB(t), table)
	check := func(released bool) {
		t.Helper()
		seen := 0
		for l, err := range reader.AllLocks(ctx) {
			require.NoError(t, err)
			if strings.HasPrefix(l.PartitionKey(), "dynamolock-session:") {
				continue
			}
			seen++
			assert.Equal(t, released, l.IsReleased(), "AllLocks: %s", l.PartitionKey())
			assert.Equal(t, released, l.IsExpired(), "AllLocks: %s", l.PartitionKey())
			if !released {
				assert.Equal(t, 3*time.Second, l.LeaseDuration(), "AllLocks: %s: the session's lease", l.PartitionKey())
			}
		}
		assert.Equal(t, 2, seen)
		for _, k := range []string{"a", "b"} {
			for l, err := range reader.LocksByPartitionKey(ctx, k) {
				require.NoError(t, err)
				assert.Equal(t, released, l.IsReleased(), "LocksByPartitionKey: %s", k)
			}
			g, err := reader.GetWithContext(ctx, k)
			require.NoError(t, err)
			assert.Equal(t, released, g.IsReleased(), "Get: %s", k)
		}
	}
	check(false)
	require.NoError(t, holder.Close())
	check(true)
}
