package dynamolock_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// TestRWLockFigures measures the figures of docs/BENCHMARKS.md's
// "Read/write locks" section against the DynamoDB at DYNAMODB_ENDPOINT.
// It runs only with RWLOCK_FIGURES=1:
//
//	RWLOCK_FIGURES=1 DYNAMODB_ENDPOINT=http://127.0.0.1:8000 go test -count=1 -run '^TestRWLockFigures$' -v .
func TestRWLockFigures(t *testing.T) {
	if os.Getenv("RWLOCK_FIGURES") == "" {
		t.Skip("set RWLOCK_FIGURES=1 to measure")
	}
	table := newTable(t, "")
	db, cc := newDB(t)
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(3 * time.Second), dynamolock.WithHeartbeatPeriod(time.Second)}
	refresh := dynamolock.WithRefreshPeriod(100 * time.Millisecond)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Readers cycling without pause between holds: 8 of them in 2 clients.
	cycle := func(name string, hold time.Duration, rctx context.Context, reads *atomic.Int64) *sync.WaitGroup {
		var wg sync.WaitGroup
		for range 2 {
			rw := newRW(t, newClient(t, db, table, opts...), name)
			for range 4 {
				wg.Go(func() {
					for rctx.Err() == nil {
						r, err := rw.RLock(rctx, refresh)
						if err != nil {
							return
						}
						reads.Add(1)
						time.Sleep(hold)
						_ = r.Close()
					}
				})
			}
		}
		return &wg
	}

	// 1. Reader throughput, no writer: 8 readers, each RLock then release
	// at once, for 10 s.
	{
		var reads atomic.Int64
		rctx, stop := context.WithCancel(ctx)
		cc.reset()
		start := time.Now()
		wg := cycle("throughput", 0, rctx, &reads)
		time.Sleep(10 * time.Second)
		stop()
		wg.Wait()
		el := time.Since(start)
		calls := cc.reset()
		t.Logf("reader throughput: 8 readers in 2 clients, RLock+release in a loop for %s: %d read locks, %.0f/s; %.2f UpdateItem and %.2f GetItem per read lock",
			el.Round(time.Millisecond), reads.Load(), float64(reads.Load())/el.Seconds(),
			float64(calls["UpdateItem"])/float64(reads.Load()), float64(calls["GetItem"])/float64(reads.Load()))
	}

	// 2. Writer wait among 8 readers cycling continuously (each holds 50
	// ms or 500 ms, then takes the lock again at once): 20 writes, one
	// every 300 ms.
	for _, hold := range []time.Duration{50 * time.Millisecond, 500 * time.Millisecond} {
		var reads atomic.Int64
		rctx, stop := context.WithCancel(ctx)
		name := fmt.Sprintf("writer-wait-%s", hold)
		wg := cycle(name, hold, rctx, &reads)
		waitFor(t, 10*time.Second, "readers cycling", func() bool { return reads.Load() > 16 })
		rw := newRW(t, newClient(t, db, table, opts...), name)
		var waits []time.Duration
		before := reads.Load()
		start := time.Now()
		for range 20 {
			s := time.Now()
			w, err := rw.Lock(ctx, refresh)
			require.NoError(t, err)
			waits = append(waits, time.Since(s))
			require.NoError(t, w.Close())
			time.Sleep(300 * time.Millisecond)
		}
		el := time.Since(start)
		stop()
		wg.Wait()
		slices.Sort(waits)
		t.Logf("writer wait, 8 readers cycling with %s holds, refresh 100 ms: min %s, median %s, p90 %s, max %s over %d writes; readers meanwhile %.0f read locks/s",
			hold, waits[0].Round(time.Millisecond), waits[len(waits)/2].Round(time.Millisecond), waits[len(waits)*9/10].Round(time.Millisecond),
			waits[len(waits)-1].Round(time.Millisecond), len(waits), float64(reads.Load()-before)/el.Seconds())
	}

	// 3. Renewals one item takes per second: n readers held (heartbeats
	// off), 16 goroutines sending their heartbeats in a loop for 5 s.
	for _, n := range []int{10, dynamolock.MaxReaders} {
		c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Minute), dynamolock.DisableHeartbeat())
		rw := newRW(t, c, fmt.Sprintf("renewals-%d", n))
		locks := make([]*dynamolock.Lock, n)
		for i := range n {
			l, err := rw.RLock(ctx)
			require.NoError(t, err)
			locks[i] = l
		}
		var beats, errs atomic.Int64
		var wg sync.WaitGroup
		deadline := time.Now().Add(5 * time.Second)
		for g := range 16 {
			wg.Go(func() {
				for i := g; time.Now().Before(deadline); i += 16 {
					if err := c.SendHeartbeat(locks[i%n]); err != nil {
						errs.Add(1)
						continue
					}
					beats.Add(1)
				}
			})
		}
		wg.Wait()
		t.Logf("renewals of one item with %d readers: %.0f/s from 16 goroutines (%d failed)", n, float64(beats.Load())/5, errs.Load())
	}
}
