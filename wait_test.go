package dynamolock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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

// A timeout says "stayed held by X" only when one holder held the key for
// the whole wait; otherwise it says how many times the key changed hands.
func TestTimeoutSaysWhetherTheKeyChangedHands(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	// A live holder renews (a fresh RVN) every 200 ms; a new holder has
	// a new owner and fencing token.
	holder := func(key, owner string, token, beat int) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			"key": s(key), "ownerName": s(owner), "leaseDuration": s("3s"),
			"recordVersionNumber": s(fmt.Sprintf("%s-%d", owner, beat)), "fencingToken": &types.AttributeValueMemberN{Value: strconv.Itoa(token)},
		}
	}
	for name, acquire := range map[string]func(c *dynamolock.Client, key string) error{
		"AcquireLockWithContext": func(c *dynamolock.Client, key string) error {
			_, err := c.AcquireLockWithContext(context.Background(), key, dynamolock.WithAdditionalTimeToWaitForLock(0),
				dynamolock.WithRefreshPeriod(100*time.Millisecond))
			return err
		},
		"AcquireLocks": func(c *dynamolock.Client, key string) error {
			_, err := c.AcquireLocks(context.Background(), []string{key}, dynamolock.WithAdditionalTimeToWaitForLock(0),
				dynamolock.WithRefreshPeriod(100*time.Millisecond))
			return err
		},
		"Semaphore.Acquire": func(c *dynamolock.Client, key string) error {
			sem, err := c.NewSemaphore(key[:len(key)-2], 1)
			require.NoError(t, err)
			_, err = sem.Acquire(context.Background(), dynamolock.WithAdditionalTimeToWaitForLock(0),
				dynamolock.WithRefreshPeriod(100*time.Millisecond))
			return err
		},
	} {
		for _, changes := range []int{0, 2} {
			t.Run(fmt.Sprintf("%s/%d changes", name, changes), func(t *testing.T) {
				t.Parallel()
				key := fmt.Sprintf("%s-%d#0", name, changes)
				putRaw(t, db, table, holder(key, "holder0", 1, 0))
				c := newClient(t, db, table, fast...)
				done := make(chan error, 1)
				go func() { done <- acquire(c, key) }()
				var err error
				for beat := 1; ; beat++ {
					select {
					case err = <-done:
					case <-time.After(200 * time.Millisecond): // the waiter polls every 100 ms
						h := min(beat/3, changes) // a new holder at 600 ms and 1.2 s
						putRaw(t, db, table, holder(key, fmt.Sprintf("holder%d", h), h+1, beat))
						continue
					}
					break
				}
				var te *dynamolock.TimeoutError
				require.ErrorAs(t, err, &te)
				if changes == 0 {
					require.ErrorContains(t, err, "stayed held")
					require.NotContains(t, err.Error(), "changed hands")
				} else {
					require.ErrorContains(t, err, "changed hands 2 times")
					require.NotContains(t, err.Error(), "stayed held")
				}
			})
		}
	}
}
