package dynamolock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// TestLockRelease: Lock.Release(ctx) releases as ReleaseLockWithContext
// does, with its options, and refuses what Close refuses.
func TestLockRelease(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, db, table)
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	calls.reset()
	require.NoError(t, l.Release(ctx, dynamolock.WithDeleteLock(true)))
	require.Equal(t, 1, calls.get("DeleteItem"), "WithDeleteLock reached the release")
	require.True(t, l.IsReleased())
	require.ErrorIs(t, l.Release(ctx), dynamolock.ErrLockAlreadyReleased)

	var nilLock *dynamolock.Lock
	require.ErrorIs(t, nilLock.Release(ctx), dynamolock.ErrCannotReleaseNullLock)
	require.ErrorIs(t, (&dynamolock.Lock{}).Release(ctx), dynamolock.ErrLockNotHeld)
	var nilCtx context.Context // what a caller passes by mistake
	require.ErrorIs(t, l.Release(nilCtx), dynamolock.ErrInvalidArgument)
	require.ErrorIs(t, newRW(t, c, "rw").Unlock(nilCtx, l), dynamolock.ErrInvalidArgument)

	// A release whose ctx already ended sends nothing and keeps the lock.
	l2, err := c.AcquireLockWithContext(ctx, "k2")
	require.NoError(t, err)
	done, stop := context.WithCancel(ctx)
	stop()
	calls.reset()
	require.ErrorIs(t, l2.Release(done), context.Canceled)
	require.False(t, l2.IsReleased())
	require.NoError(t, l2.Release(ctx))
}

// TestRWLockUnlock: Unlock and RUnlock release their own kind of lock of
// their own RWLock, and refuse any other before a call.
func TestRWLockUnlock(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c := newClient(t, db, table, rwOpts...)
	rw := newRW(t, c, "rw")
	other := newRW(t, c, "other")

	r1, err := rw.RLock(ctx)
	require.NoError(t, err)
	r2, err := rw.RLock(ctx)
	require.NoError(t, err)
	calls.reset()
	for _, bad := range []error{
		rw.Unlock(ctx, r1),     // a reader's lock given to Unlock
		other.RUnlock(ctx, r1), // another RWLock's
		rw.RUnlock(ctx, nil),
	} {
		require.ErrorIs(t, bad, dynamolock.ErrInvalidArgument)
	}
	require.Zero(t, calls.total(), "refused before any call")
	require.NoError(t, rw.RUnlock(ctx, r1))
	require.NoError(t, rw.RUnlock(ctx, r2))

	w, err := rw.Lock(ctx, dynamolock.FailIfLocked())
	require.NoError(t, err)
	require.ErrorIs(t, rw.RUnlock(ctx, w), dynamolock.ErrInvalidArgument)
	plain, err := c.AcquireLockWithContext(ctx, "plain")
	require.NoError(t, err)
	require.ErrorIs(t, rw.Unlock(ctx, plain), dynamolock.ErrInvalidArgument)
	require.NoError(t, rw.Unlock(ctx, w))
	require.True(t, w.IsReleased())
	err = rw.Unlock(ctx, w)
	require.True(t, errors.Is(err, dynamolock.ErrLockAlreadyReleased), "second Unlock: %v", err)
	// Free again: a writer gets it at once.
	w2, err := rw.Lock(ctx, dynamolock.FailIfLocked())
	require.NoError(t, err)
	require.NoError(t, rw.Unlock(ctx, w2))
	require.NoError(t, plain.Release(ctx))
}
