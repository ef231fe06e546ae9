package dynamolock_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Issue 47: waiters in other processes (clients that share nothing but
// the table) poll by their rank in the key's queue, so that a release is
// taken within one poll of the head (at most 70 ms after a long hold), and
// the key costs at most 20 reads per second while its holder keeps it,
// whatever the number of waiters. In virtual time on the in-memory
// DynamoDB, each connection 1 ms away: the figures are exact, not timed.
//
// Before issue 47 each waiter polled once a refresh period (1 s), so the
// hand-over took up to 1 s and the bound on it below failed.
func TestWaitersInOtherProcessesPollByRank(t *testing.T) {
	for _, fair := range []bool{false, true} {
		for _, n := range []int{1, 8, 32} {
			t.Run(fmt.Sprintf("fair=%t/waiters=%d", fair, n), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) { pollByRank(t, fair, n) })
			})
		}
	}
}

func pollByRank(t *testing.T, fair bool, n int) {
	ctx := context.Background()
	db := dynamolocktest.New()
	newClient := func(name string) (*dynamolock.Client, *dynamolocktest.Conn) {
		conn := db.Conn()
		conn.Delay(time.Millisecond)
		c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(name))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c, conn
	}
	holder, _ := newClient("holder")
	_, err := holder.CreateTableWithContext(ctx, "locks")
	require.NoError(t, err)
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	type got struct {
		i  int
		at time.Time
		l  *dynamolock.Lock
	}
	results := make(chan got, n)
	conns := make([]*dynamolocktest.Conn, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c, conn := newClient(fmt.Sprintf("waiter-%02d", i))
		conns[i] = conn
		opts := []dynamolock.AcquireLockOption{dynamolock.WithAdditionalTimeToWaitForLock(5 * time.Minute)}
		if fair {
			opts = append(opts, dynamolock.WithFairness())
		}
		wg.Go(func() {
			l, err := c.AcquireLockWithContext(ctx, "k", opts...)
			results <- got{i, time.Now(), l}
			if !assert.NoError(t, err) {
				return
			}
			<-release
			time.Sleep(10 * time.Millisecond) // a short hold, then the next
			_, err = c.ReleaseLockWithContext(ctx, l)
			assert.NoError(t, err)
		})
		time.Sleep(10 * time.Millisecond) // they arrive in order
	}
	reads := func() int {
		r := 0
		for _, c := range conns {
			r += c.Calls()["GetItem"]
		}
		return r
	}
	time.Sleep(2 * time.Second) // every waiter has its place
	before := reads()
	time.Sleep(10 * time.Second)
	perSec := float64(reads()-before) / 10
	if testing.Verbose() {
		var each []int
		for _, c := range conns {
			each = append(each, c.Calls()["GetItem"])
		}
		t.Logf("reads by waiter, in arrival order, since they came: %v", each)
	}
	t.Logf("%d waiters, fair %t: %.1f reads/s while the holder kept the key for 10 s", n, fair, perSec)
	require.LessOrEqual(t, perSec, 20.0, "reads per second of the key's waiters while its holder keeps it")

	close(release)
	released := time.Now()
	_, err = holder.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	prev := released
	var handovers []time.Duration
	for k := range n {
		g := <-results
		d := g.at.Sub(prev)
		handovers = append(handovers, d)
		if fair {
			require.Equal(t, k, g.i, "fair waiters take the key in the order they came")
		}
		// The first comes after a 12 s hold: at most one poll of the head
		// (70 ms) and a few round trips. The next head learns of its turn
		// within half a refresh period; the others, each at its next read
		// (a rank r at most r refresh periods after the long hold began).
		switch k {
		case 0:
			require.LessOrEqual(t, d, 80*time.Millisecond, "hand-over %d (%v)", k, handovers)
		case 1:
			require.LessOrEqual(t, d, 10*time.Millisecond+500*time.Millisecond+10*time.Millisecond, "hand-over %d (%v)", k, handovers)
		}
		prev = g.at
	}
	t.Logf("hand-overs: %v", handovers)
	wg.Wait()
}
