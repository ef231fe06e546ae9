package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// TestContentionCosts measures what each mechanism of the client costs on
// one contended key (issue 24, item 3): 2 clients × 8 goroutines loop on
// acquire → release with no hold, as the harness does, once as the
// library is and once with one mechanism switched off, each variant in
// turn and the rounds repeated so that the machine's load moves them
// alike. Switches that are not options exist only for this test
// (noSameProcessHandover); no default changes. It runs only with
// CONTENTION_COSTS=1:
//
//	CONTENTION_COSTS=1 DYNAMODB_ENDPOINT=http://127.0.0.1:8002 go test -count=1 -run '^TestContentionCosts$' -v .
//
// CONTENTION_COSTS_DURATION (default 10s) and CONTENTION_COSTS_ROUNDS
// (default 2) set each run's length and the rounds.
func TestContentionCosts(t *testing.T) {
	if os.Getenv("CONTENTION_COSTS") == "" {
		t.Skip("set CONTENTION_COSTS=1 to measure")
	}
	dur := 10 * time.Second
	if s := os.Getenv("CONTENTION_COSTS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		dur = d
	}
	rounds := 2
	if s := os.Getenv("CONTENTION_COSTS_ROUNDS"); s != "" {
		if _, err := fmt.Sscan(s, &rounds); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	db, err := ddblocal.NewClient(ctx, os.Getenv("DYNAMODB_ENDPOINT"))
	if err != nil {
		t.Fatal(err)
	}
	table := fmt.Sprintf("contention_costs_%d", rand.Uint32())
	mk, err := New(db, table)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mk.CreateTableWithContext(ctx, table, WithCustomPartitionKeyName("key")); err != nil {
		t.Fatal(err)
	}
	_ = mk.Close()

	type variant struct {
		name    string
		opts    []ClientOption
		acquire []AcquireLockOption
		switchF func(off bool)
	}
	variants := []variant{
		{name: "as is"},
		{name: "no same-process hand-over", switchF: func(off bool) { noSameProcessHandover = off }},
		{name: "no admission control", opts: []ClientOption{WithHeartbeatAdmission(0)}},
		{name: "no background heartbeats", opts: []ClientOption{DisableHeartbeat()}},
		{name: "fair mode", acquire: []AcquireLockOption{WithFairness()}},
	}
	refreshes := []time.Duration{time.Second, 100 * time.Millisecond}
	if s := os.Getenv("CONTENTION_COSTS_REFRESH"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		refreshes = []time.Duration{d}
	}
	for _, refresh := range refreshes {
		per := make([][]float64, len(variants))
		for r := range rounds {
			for i, v := range variants {
				if v.switchF != nil {
					v.switchF(true)
				}
				n, top, errs := contend(t, db, table, fmt.Sprintf("hot-%d-%d-%d", refresh.Milliseconds(), r, i), 2, 8, dur, refresh, v.opts, v.acquire)
				if v.switchF != nil {
					v.switchF(false)
				}
				rate := float64(n) / dur.Seconds()
				per[i] = append(per[i], rate)
				t.Logf("refresh %s, round %d, %s: %d acquisitions in %s = %.1f/s, top goroutine %.0f%% (%d errors)",
					refresh, r+1, v.name, n, dur, rate, 100*float64(top)/float64(max(n, 1)), errs)
			}
		}
		for i, v := range variants {
			t.Logf("refresh %s, %s: acquisitions/s per round %.1f", refresh, v.name, per[i])
		}
	}
}

// contend runs clients × goroutines loops of acquire → release on key for
// d and returns the acquisitions made, the most one goroutine made, and the
// errors other than a wait that ran out.
func contend(t *testing.T, db DynamoDBClient, table, key string, clients, goroutines int, d, refresh time.Duration,
	opts []ClientOption, acquire []AcquireLockOption) (n, top, errs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	acquire = append([]AcquireLockOption{WithRefreshPeriod(refresh)}, acquire...)
	var total, failed atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range clients {
		c, err := New(db, table, append([]ClientOption{WithLeaseDuration(3 * time.Second), WithHeartbeatPeriod(time.Second),
			WithOwnerName(fmt.Sprintf("contender-%d", i))}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		for range goroutines {
			wg.Go(func() {
				mine := int64(0)
				defer func() {
					mu.Lock()
					top = max(top, mine)
					mu.Unlock()
				}()
				for ctx.Err() == nil {
					l, err := c.AcquireLockWithContext(ctx, key, acquire...)
					if err != nil {
						var te *TimeoutError
						if ctx.Err() == nil && !errors.As(err, &te) {
							failed.Add(1)
						}
						continue
					}
					total.Add(1)
					mine++
					_, _ = c.ReleaseLockWithContext(context.WithoutCancel(ctx), l)
				}
			})
		}
	}
	wg.Wait()
	return total.Load(), top, failed.Load()
}
