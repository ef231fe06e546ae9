package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// A goroutine waiting for a key that another goroutine of the same client
// holds gets it as soon as it is released, not at its next poll; a waiter
// in another client still polls.
func TestSameProcessHandOver(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second))
	held, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	const refresh = 10 * time.Second // far longer than a hand-over may take
	got := make(chan *dynamolock.Lock, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(refresh))
		assert.NoError(t, err)
		got <- l
	}()
	// The waiter's write failed on the held item (its second call): it
	// sleeps until its next poll, ten seconds away.
	calls := c.Stats().DynamoDBCalls
	waitFor(t, 5*time.Second, "the waiter to see the lock held", func() bool { return c.Stats().DynamoDBCalls > calls })
	released := time.Now()
	ok, err := c.ReleaseLockWithContext(ctx, held)
	require.NoError(t, err)
	require.True(t, ok)
	select {
	case l := <-got:
		took := time.Since(released)
		t.Logf("hand-over took %s (refresh period %s)", took, refresh)
		assert.Less(t, took, refresh/2, "woken by the release, not by its poll")
		assert.NoError(t, l.Err())
		assert.Greater(t, l.FencingToken(), held.FencingToken())
	case <-time.After(refresh):
		t.Fatal("the waiter was not handed the lock")
	}
}
