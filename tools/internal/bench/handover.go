package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// HandoverConfig is the same-process hand-over measurement: in each of
// Trials clients (side by side, one key each), a holder and Waiters
// goroutines of that same client wait for one key; at every refresh period
// of Refreshes.
type HandoverConfig struct {
	Trials    int
	Waiters   int
	Refreshes []time.Duration
	// FloorSamples is the number of raw conditional UpdateItems timed first
	// (the floor the hand-over is divided by).
	FloorSamples int
}

// DefaultHandover is what `lockbench all` and `lockbench handover` run.
func DefaultHandover() HandoverConfig {
	return HandoverConfig{Trials: 8, Waiters: 4, Refreshes: []time.Duration{time.Second, 10 * time.Second}, FloorSamples: 200}
}

// handoverWarmup is the raw UpdateItems sent before the floor is timed.
const handoverWarmup = 200

// HandoverTarget is the goal of the same-process hand-over: p50
// within a few DynamoDB round trips, read as at most this many raw
// conditional UpdateItem p50s (measured in the same run), at any refresh.
const HandoverTarget = 5.0

// HandoverRun is one refresh period's hand-overs.
type HandoverRun struct {
	Refresh time.Duration
	// D: from the start of a release call to a waiting goroutine of the
	// same client holding the lock, one sample per hand-over.
	D Dist
	// Missing is the hand-overs that did not happen within the bound
	// (several refresh periods): counted, not in D.
	Missing int
}

// Polled is the number of hand-overs that took half a refresh period or
// more: the waiter most likely got the lock at a poll, not woken by the
// release.
func (r HandoverRun) Polled() int {
	n := 0
	for _, d := range r.D {
		if d >= r.Refresh/2 {
			n++
		}
	}
	return n
}

// HandoverResult is the same-process part of section 4.
type HandoverResult struct {
	HandoverConfig
	Lease, Heartbeat time.Duration
	// Floor is the raw conditional UpdateItem, timed in this measurement
	// on the same SDK settings, before the hand-overs.
	Floor Dist
	Runs  []HandoverRun
}

// Ratio is run's p50 over the raw conditional UpdateItem p50.
func (r *HandoverResult) Ratio(run HandoverRun) float64 {
	if r.Floor.Q(0.5) == 0 {
		return 0
	}
	return float64(run.D.Q(0.5)) / float64(r.Floor.Q(0.5))
}

// Met reports whether run meets HandoverTarget with every hand-over done.
func (r *HandoverResult) Met(run HandoverRun) bool {
	return run.Missing == 0 && len(run.D) > 0 && r.Ratio(run) <= HandoverTarget
}

// MeasureHandover runs cfg: for each refresh period, Trials clients side
// by side, each on its own key. In a trial the holder takes the key,
// Waiters goroutines of the same client start acquiring it (their first
// write fails and they wait for their next poll), and at a random moment
// within one refresh period the holder releases. Each waiter that gets
// the lock releases it at once, so a trial is a chain of Waiters
// hand-overs, each timed from the start of the release call to the next
// goroutine holding the lock.
func MeasureHandover(ctx context.Context, e *Env, cfg HandoverConfig) (*HandoverResult, error) {
	table, drop, err := e.NewTable(ctx, "handover")
	if err != nil {
		return nil, err
	}
	defer drop()
	res := &HandoverResult{HandoverConfig: cfg, Lease: dynamolock.DefaultLeaseDuration, Heartbeat: dynamolock.DefaultHeartbeatPeriod}
	db, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	// The floor: raw conditional UpdateItems on the same SDK settings, half
	// before the hand-overs and half after, after a warm-up (DynamoDB Local's
	// JIT is cold when this runs alone).
	var floor []time.Duration
	next := 0
	timeRaw := func(n int, keep bool) error {
		for range n {
			t := time.Now()
			if _, err := db.UpdateItem(ctx, rawWrite(table, "raw-"+strconv.Itoa(next), "lockbench-handover-floor")); err != nil {
				return fmt.Errorf("raw UpdateItem: %w", err)
			}
			next++
			if keep {
				floor = append(floor, time.Since(t))
			}
		}
		return nil
	}
	if err := timeRaw(handoverWarmup, false); err != nil {
		return nil, err
	}
	if err := timeRaw(cfg.FloorSamples/2, true); err != nil {
		return nil, err
	}
	for _, refresh := range cfg.Refreshes {
		e.logf("same-process hand-over: refresh %s, %d trials of %d waiters", refresh, cfg.Trials, cfg.Waiters)
		chains, err := parallel(cfg.Trials, func(i int) (handoverChain, error) {
			return handoverTrial(ctx, e, table, fmt.Sprintf("handover-%s-%d", refresh, i), refresh, cfg.Waiters)
		})
		if err != nil {
			return nil, err
		}
		run := HandoverRun{Refresh: refresh}
		var ds []time.Duration
		for _, c := range chains {
			ds = append(ds, c.took...)
			run.Missing += c.missing
		}
		run.D = NewDist(ds)
		res.Runs = append(res.Runs, run)
	}
	if err := timeRaw(cfg.FloorSamples-cfg.FloorSamples/2, true); err != nil {
		return nil, err
	}
	res.Floor = NewDist(floor)
	return res, nil
}

type handoverChain struct {
	took    []time.Duration
	missing int
}

// handoverTrial is one chain of hand-overs within one client.
func handoverTrial(ctx context.Context, e *Env, table, key string, refresh time.Duration, waiters int) (handoverChain, error) {
	db, err := e.NewDB(ctx)
	if err != nil {
		return handoverChain{}, err
	}
	c, err := dynamolock.New(db, table) // the default lease and heartbeat

	if err != nil {
		return handoverChain{}, err
	}
	defer c.Close()
	held, err := c.AcquireLockWithContext(ctx, key)
	if err != nil {
		return handoverChain{}, err
	}
	calls, began := c.Stats().DynamoDBCalls, time.Now()

	// Every hand-over must happen within a few refresh periods (a waiter
	// that is not woken still gets the lock at a poll); past that, the
	// rest of the chain counts as missing.
	bound := 3*refresh + 5*time.Second
	wctx, cancel := context.WithTimeout(ctx, time.Duration(waiters)*bound)
	defer cancel()
	var (
		mu       sync.Mutex
		released time.Time // start of the latest release call
		took     []time.Duration
		errs     []error
		wg       sync.WaitGroup
	)
	for range waiters {
		wg.Go(func() {
			l, err := c.AcquireLockWithContext(wctx, key, dynamolock.WithRefreshPeriod(refresh),
				dynamolock.WithAdditionalTimeToWaitForLock(time.Duration(waiters)*bound))
			at := time.Now()
			if err != nil {
				if wctx.Err() == nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
				return
			}
			mu.Lock()
			took = append(took, at.Sub(released))
			released = time.Now()
			mu.Unlock()
			if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		})
	}
	// Wait until every waiter's first write has failed on the held item
	// (one call each; the holder's first heartbeat is a period away), so
	// that all of them are waiting for a poll.
	for c.Stats().DynamoDBCalls < calls+uint64(waiters) {
		if err := ctx.Err(); err != nil {
			return handoverChain{}, err
		}
		if time.Since(began) > bound {
			return handoverChain{}, errors.New("handover: the waiters did not start")
		}
		time.Sleep(time.Millisecond)
	}
	// Release at a random phase of the waiters' polling.
	time.Sleep(rand.N(refresh))
	mu.Lock()
	released = time.Now()
	mu.Unlock()
	if _, err := c.ReleaseLockWithContext(ctx, held); err != nil {
		return handoverChain{}, err
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return handoverChain{}, err
	}
	if err := errors.Join(errs...); err != nil {
		return handoverChain{}, fmt.Errorf("handover %s: %w", key, err)
	}
	return handoverChain{took: took, missing: waiters - len(took)}, nil
}

// Markdown renders the same-process hand-over, the second part of
// section 4.
func (r *HandoverResult) Markdown(cmd string) string {
	var b md
	b.w("**Same-process hand-over.** Command: `%s`. In each of %d clients side by side (lease %s, heartbeat %s, the defaults), one goroutine holds a key and %d goroutines of the same client wait for it "+
		"(AcquireLock with the refresh period below); once every waiter's first write has failed, the holder releases at a random moment within one refresh period, "+
		"and each waiter that gets the lock releases it at once: %d hand-overs per client, each timed from the start of the release call to the next goroutine holding the lock. "+
		"Floor: %d raw conditional UpdateItems (the one of §2) on the same SDK settings, half timed just before the hand-overs and half just after, p50 %s ms. '≥ ½ refresh': hand-overs that took half a refresh period or more (most likely a poll, not a wake-up). Goal: p50 within a few DynamoDB round trips at any refresh period, read as p50 ≤ %.0f× the raw conditional UpdateItem p50.",
		cmd, r.Trials, r.Lease, r.Heartbeat, r.Waiters, r.Waiters, len(r.Floor), ms(r.Floor.Q(0.5)), HandoverTarget)
	b.w("")
	b.w("| refresh period | hand-overs | p50 | p95 | max | p50 ÷ raw UpdateItem p50 | p50 ÷ refresh | ≥ ½ refresh | not handed over | met |")
	b.w("|---|---|---|---|---|---|---|---|---|---|")
	for _, run := range r.Runs {
		b.w("| %s | %d | %s ms | %s ms | %s ms | %.1f× | %.3f | %d | %d | %s |", run.Refresh, len(run.D), ms(run.D.Q(0.5)), ms(run.D.Q(0.95)), ms(run.D.Max()),
			r.Ratio(run), run.D.Q(0.5).Seconds()/run.Refresh.Seconds(), run.Polled(), run.Missing, yes(r.Met(run)))
	}
	b.w("")
	b.w("A hand-over takes at least two DynamoDB writes in a row: the release, then the waiter's acquiring write; a waiter in another process learns of it at its next poll, at most 18 times a second at the head of the queue (every 55.6 ms for a lone waiter) (the cross-process table above and §4c).")
	return b.String()
}
