package dynamolock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Refuse, never lose (issue 24), in virtual time against a backend shaped
// like DynamoDB Local on a small machine: one request served at a time, at
// a rate that moves. Every half second the rate is drawn anew within ±30 %
// of 500 writes/s, and for 10 s in the middle of the asking it falls by a
// further fifth. 256 goroutines ask for 3,000 free keys unpaced (lease 3 s,
// heartbeat 1 s): at most 1,500 could be renewed at the nominal rate, and
// admission must refuse what cannot be renewed through the moves.
//
// The test tells the default apart from what loses. Without admission
// 2,164 of the 3,000 were lost here, in the first 6 s (every key taken at
// once, far more than the backend renews). At a fraction of 0.95, 55 were
// lost, at 1.0 106, and at 0.9 6, all in the slowdown: a fall of a fifth
// is more than the margin those fractions leave. (With other seeds of the
// rate, found in review: the default of then, 0.8, held 822–950 and lost
// none in 12; 0.9 lost locks with 3 of them, 1.0 with 10.) Those figures
// are of the rule before issue 60 (the worst half-second window of 10 s);
// with the worst span of a minute, counted on less while young, and the
// default of 0.6, the default holds 658 here and loses none. What it must
// not fall under: two thirds of its fraction of the bound (the worst span
// of this backend is about three quarters of its nominal rate).
func TestUnpacedAskAtAMovingRateLosesNone(t *testing.T) {
	const (
		n       = 3000
		rate    = 500.0 // writes/s, nominal
		jitter  = 0.3   // ± per half-second window
		lease   = 3 * time.Second
		slowAt  = 20 * time.Second
		slowFor = 10 * time.Second
		slowBy  = 0.8
	)
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		start := time.Now()
		rng := rand.New(rand.NewPCG(1, 2))
		window, factor := int64(-1), 1.0
		ddb := dynamolocktest.New()
		// pace runs while its request holds the backend's turn, one at a
		// time: the draws need no lock of their own.
		db := &serialDB{Conn: ddb.Conn(), turn: make(chan struct{}, 1), pace: func() time.Duration {
			el := time.Since(start)
			for w := int64(el / (500 * time.Millisecond)); window < w; window++ {
				factor = 1 + jitter*(2*rng.Float64()-1) // one draw per window, in order: the same schedule every run
			}
			f := factor
			if el >= slowAt && el < slowAt+slowFor {
				f *= slowBy
			}
			return time.Duration(float64(time.Second) / (rate * f))
		}}
		c, err := dynamolock.New(db, "locks", dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() }) // on a failure before the end: no goroutine left in the bubble
		if _, err := c.CreateTableWithContext(ctx, "locks"); err != nil {
			t.Fatal(err)
		}
		var next, refused atomic.Int64
		var wg sync.WaitGroup
		for range 256 {
			wg.Go(func() {
				for i := next.Add(1); i <= n; i = next.Add(1) {
					_, err := c.AcquireLockWithContext(ctx, "k"+strconv.FormatInt(i, 10), dynamolock.FailIfLocked())
					switch {
					case err == nil:
					case errors.Is(err, dynamolock.ErrHeartbeatCapacity):
						refused.Add(1)
					default:
						t.Errorf("key %d: %v", i, err)
					}
				}
			})
		}
		wg.Wait()
		asked := time.Since(start)
		if asked < slowAt+slowFor {
			t.Errorf("the asking took %s, ending before the slowdown did (%s to %s): the test no longer asks through it", asked, slowAt, slowAt+slowFor)
		}
		time.Sleep(10 * time.Second) // more than three leases of holding after the last acquisition
		st := c.Stats()
		bound := min(n, rate*lease.Seconds())
		t.Logf("asked in %s; held %d (%.0f%% of the bound, %.0f), lost %d, refused %d",
			asked.Round(time.Second), st.HeldLocks, 100*float64(st.HeldLocks)/bound, bound, st.LocksLost, refused.Load())
		if st.LocksLost != 0 {
			t.Errorf("%d locks lost while the backend answered", st.LocksLost)
		}
		if refused.Load() == 0 {
			t.Errorf("none refused: %d locks cannot all be renewed at %.0f writes/s", n, rate)
		}
		if floor := 2.0 / 3 * dynamolock.DefaultHeartbeatAdmission * bound; float64(st.HeldLocks) < floor {
			t.Errorf("held %d, under two thirds of %g of the bound %.0f (%.0f): admission refuses what could be renewed", st.HeldLocks, dynamolock.DefaultHeartbeatAdmission, bound, floor)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if lost := c.Stats().LocksLost - st.LocksLost; lost != 0 {
			t.Errorf("%d locks lost in Close", lost)
		}
		if released := releasedItems(ddb, "locks"); released != st.HeldLocks {
			t.Errorf("Close released %d items, %d locks were held", released, st.HeldLocks)
		}
	})
}
