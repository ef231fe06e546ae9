package dynamolock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// Issue 22: fn of the README's Do example returns context.Cause(ctx) when
// the lock is lost; Do reported that loss and, joined to it, the same loss
// found again by the release. The loss is told once.
func TestDoReportsALossOnce(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	waitForLoss := func(ctx context.Context, _ *dynamolock.Lock) error {
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(10 * time.Second):
			return nil
		}
	}
	check := func(t *testing.T, err error, cause error) {
		t.Helper()
		t.Log(err)
		require.ErrorIs(t, err, dynamolock.ErrLockLost)
		assert.ErrorIs(t, err, cause)
		assert.Equal(t, 1, strings.Count(err.Error(), "lock lost"), "the loss is told once: %v", err)
	}

	t.Run("lease ran out", func(t *testing.T) {
		c := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(300*time.Millisecond))
		check(t, c.Do(context.Background(), "lapsed", waitForLoss), dynamolock.ErrLeaseExpired)
	})
	t.Run("taken over", func(t *testing.T) {
		c := newClient(t, db, table, fast...)
		err := c.Do(context.Background(), "taken", func(ctx context.Context, l *dynamolock.Lock) error {
			putRaw(t, db, table, map[string]types.AttributeValue{
				"key": s("taken"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("thief-rvn"),
			})
			return waitForLoss(ctx, l)
		})
		check(t, err, dynamolock.ErrLockTakenOver)
	})
	t.Run("fn returns its own error after the loss", func(t *testing.T) {
		// fn's error says nothing of the loss: the release's report of it
		// stays.
		c := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(300*time.Millisecond))
		err := c.Do(context.Background(), "own-error", func(ctx context.Context, l *dynamolock.Lock) error {
			<-ctx.Done()
			return context.Canceled
		})
		check(t, err, dynamolock.ErrLeaseExpired)
		assert.ErrorIs(t, err, context.Canceled)
	})
}
