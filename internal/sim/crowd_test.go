package sim

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// A crowd (issue 60, items 2 and 3): in one seed in three (from a stream
// of its own; -sim.avoid=crowd, or fair, leaves it out), every client also
// runs one actor that only waits for the seed's first key, fairly two
// times in three, so that queues of several clients form: a fair head with
// fair waiters of other clients behind it (whose reads invariant 22 counts
// when the head dies with the key free), and fair waiters behind the plain
// places of others (invariant 23). Targeted stalls (targets_test.go) kill
// their heads and hosts.

// hasCrowd reports whether the seed has a fair crowd.
func (w *world) hasCrowd() bool {
	return !avoid("crowd") && !avoid("fair") && rand.New(rand.NewPCG(w.seed, 0xc20d)).IntN(3) == 0
}

// crowdActors starts the crowd's actors, when the seed has one.
func (w *world) crowdActors(wg *sync.WaitGroup, deadline time.Time) {
	if !w.hasCrowd() {
		return
	}
	for i := range w.slots {
		r := rand.New(rand.NewPCG(w.seed, uint64(0xc20d00+i)))
		wg.Go(func() {
			nest(i, func() {
				time.Sleep(time.Duration(r.Int64N(int64(50 * time.Millisecond))))
				for time.Now().Before(deadline) {
					w.client(i).clock.resume() // a paused process calls nothing
					w.step(fmt.Sprintf("crowd %d", i))
					w.crowd(w.client(i), r)
					w.sleep(time.Millisecond + time.Duration(r.IntN(50))*time.Millisecond)
				}
			})
		})
	}
}

// crowd waits for the first key (fairly two times in three), holds it a
// while, and releases it (or, one time in eight, abandons it to its
// heartbeats and Close).
func (w *world) crowd(cl *simClient, r *rand.Rand) {
	key := w.keys[0]
	rp := time.Duration(1+r.Int64N(int64(cl.lease/2))) + 10*time.Millisecond
	wait := 3*cl.lease + time.Duration(r.Int64N(int64(3*cl.lease))) // past a dead holder's lease, mostly
	plan := waitPlan{refresh: rp, wait: wait, fair: r.IntN(3) > 0}
	opts := []dynamolock.AcquireLockOption{dynamolock.WithRefreshPeriod(rp), dynamolock.WithAdditionalTimeToWaitForLock(wait)}
	how := "plain"
	if plan.fair {
		opts, how = append(opts, dynamolock.WithFairness()), "fair"
	}
	ctx, returned := w.begin(context.Background(), cl, "crowd", plan)
	w.note("%s crowd acquire %s (refresh %s wait %s, %s)", cl.name, key, rp.Round(time.Millisecond), wait.Round(time.Millisecond), how)
	done := w.asking(cl, 1)
	l, err := cl.c.AcquireLockWithContext(ctx, key, opts...)
	returned()
	done(err)
	if err != nil {
		w.note("%s crowd acquire %s failed: %v", cl.name, key, err)
		return
	}
	w.track(cl, l, "crowd acquire")
	w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
	if r.IntN(8) == 0 {
		w.note("%s abandons %s (token %d) to its heartbeats and Close", cl.name, key, l.FencingToken())
		return
	}
	w.release(cl, r, l)
}
