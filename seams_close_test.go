package dynamolock_test

// Issue 46: a seam where a path written before sessions met session
// locks. Each test here failed before its fix.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// writeStall makes every UpdateItem and DeleteItem wait, unanswered, until its
// context ends, while on is set; waiting counts the calls it holds.
type writeStall struct {
	on      atomic.Bool
	waiting atomic.Int32
}

func (st *writeStall) rules() []*faults.Rule {
	hold := func(ctx context.Context) error {
		if !st.on.Load() {
			return nil
		}
		st.waiting.Add(1)
		defer st.waiting.Add(-1)
		<-ctx.Done()
		return ctx.Err()
	}
	return []*faults.Rule{{Op: "UpdateItem", Before: hold}, {Op: "DeleteItem", Before: hold}}
}

// TestSeamCloseEndsAWaitForTheSessionStart: seam 5. With DynamoDB stalled
// while a session starts, Close ends the acquisition that waits for the
// start at once, and CloseWithContext returns by its context's deadline;
// the caller's own context ends such a wait too.
func TestSeamCloseEndsAWaitForTheSessionStart(t *testing.T) {
	table := newTable(t, "")

	t.Run("Close", func(t *testing.T) {
		st := &writeStall{}
		db := faults.Wrap(mustDB(t), st.rules()...)
		c, err := dynamolock.New(db, table, sessionOpts...)
		require.NoError(t, err)
		// The table check's DescribeTable goes first, unstalled.
		_, err = c.GetWithContext(context.Background(), "warm")
		require.NoError(t, err)
		st.on.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() {
			_, err := c.AcquireLockWithContext(ctx, "k")
			done <- err
		}()
		waitFor(t, 5*time.Second, "the session's start to be sent", func() bool { return st.waiting.Load() > 0 })
		cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer ccancel()
		began := time.Now()
		_ = c.CloseWithContext(cctx)
		assert.Less(t, time.Since(began), 1500*time.Millisecond, "CloseWithContext returns by its context's deadline")
		select {
		case err := <-done:
			require.Error(t, err)
			assert.Less(t, time.Since(began), 1500*time.Millisecond, "Close ended the wait for the session's start")
		case <-time.After(5 * time.Second):
			t.Fatal("the acquisition still waits for the session's start 5 s after Close began")
		}
	})

	t.Run("context", func(t *testing.T) {
		st := &writeStall{}
		db := faults.Wrap(mustDB(t), st.rules()...)
		c := newClient(t, db, table, sessionOpts...)
		_, err := c.GetWithContext(context.Background(), "warm")
		require.NoError(t, err)
		st.on.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		began := time.Now()
		_, err = c.AcquireLockWithContext(ctx, "k")
		require.Error(t, err)
		assert.True(t, errors.Is(err, context.DeadlineExceeded), "got %v", err)
		assert.Less(t, time.Since(began), 1500*time.Millisecond)
		st.on.Store(false)
	})
}
