package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// Issue 63, item 2: two replicas configured alike (WithOwnerName("worker"))
// are two holders, and the error the second one gets says so and names the
// fix that keeps them apart (distinct owner names), never WithReentrant as
// the way to the lock: that would hand it a lock the first still holds.
// Before, the second was told the key "is held by this client (or another
// with the same owner name); use WithReentrant to get the held lock", and
// following that granted it the lock at once. A key held by this very
// client keeps its advice: release it first, or WithReentrant.
func TestSameOwnerNameAdviceKeepsMutualExclusion(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	first := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("worker"))...)
	second := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("worker"))...)
	held, err := first.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	anotherClient := func(t *testing.T, err error) {
		t.Helper()
		var lng *dynamolock.LockNotGrantedError
		require.ErrorAs(t, err, &lng, "%v", err)
		msg := err.Error()
		for _, s := range []string{`"worker"`, "this client's own owner name", "but not by this client", "same owner name",
			"give each process its own owner name (WithOwnerName)", "use WithReentrant only for a lock this very process holds"} {
			assert.Contains(t, msg, s)
		}
		for _, s := range []string{"held by this client", "use WithReentrant to get the held lock"} {
			assert.NotContains(t, msg, s)
		}
	}
	t.Run("FailIfLocked", func(t *testing.T) {
		_, err := second.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		var lhe *dynamolock.LockHeldError
		require.ErrorAs(t, err, &lhe)
		assert.Equal(t, "worker", lhe.Owner)
		anotherClient(t, err)
	})
	t.Run("a wait that runs out", func(t *testing.T) {
		_, err := second.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(100*time.Millisecond),
			dynamolock.WithAdditionalTimeToWaitForLock(0))
		var te *dynamolock.TimeoutError
		require.ErrorAs(t, err, &te)
		anotherClient(t, err)
	})
	t.Run("held by this very client", func(t *testing.T) {
		_, err := first.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		require.Error(t, err)
		assert.Contains(t, err.Error(), "this client's own owner name: the key is held by this client; release it first, or use WithReentrant to get the held lock")
		assert.NotContains(t, err.Error(), "another client")
	})
	require.NoError(t, held.Err(), "the first replica still holds its lock")
}
