package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// The calls that are this package's own wait for a held key as long as
// their context allows; AcquireLockWithContext keeps v2's bound (the
// holder's lease plus the additional wait: 1 s + 1 s here).
func TestWaitsAreBoundedByTheContext(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	const ctxWait = 3500 * time.Millisecond // well past v2's bound of 2 s
	for name, acquire := range map[string]func(ctx context.Context, c *dynamolock.Client, key string) error{
		"Do": func(ctx context.Context, c *dynamolock.Client, key string) error {
			return c.Do(ctx, key, func(context.Context, *dynamolock.Lock) error { return nil })
		},
		"AcquireLocks": func(ctx context.Context, c *dynamolock.Client, key string) error {
			_, err := c.AcquireLocks(ctx, []string{key + "-free", key})
			return err
		},
		"Semaphore.Acquire": func(ctx context.Context, c *dynamolock.Client, key string) error {
			s, err := c.NewSemaphore(key[:len(key)-2], 1) // its slot 0 is key
			require.NoError(t, err)
			_, err = s.Acquire(ctx)
			return err
		},
		"AcquireLockWithContext": func(ctx context.Context, c *dynamolock.Client, key string) error {
			_, err := c.AcquireLockWithContext(ctx, key)
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			key := name + "#0"
			holder := newClient(t, db, table, fast...)
			_, err := holder.AcquireLockWithContext(context.Background(), key)
			require.NoError(t, err)
			waiter := newClient(t, db, table, fast...)
			ctx, cancel := context.WithTimeout(context.Background(), ctxWait)
			defer cancel()
			start := time.Now()
			err = acquire(ctx, waiter, key)
			waited := time.Since(start)
			var lng *dynamolock.LockNotGrantedError
			require.ErrorAs(t, err, &lng)
			if name == "AcquireLockWithContext" {
				var te *dynamolock.TimeoutError
				require.ErrorAs(t, err, &te, "v2's bound")
				require.NotErrorIs(t, err, context.DeadlineExceeded)
				return
			}
			require.ErrorIs(t, err, context.DeadlineExceeded, "after %s: %v", waited, err)
			require.GreaterOrEqual(t, waited, ctxWait-50*time.Millisecond)
		})
	}
}
