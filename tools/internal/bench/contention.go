package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// ContentionMode is one way the contenders acquire: its options are added
// to every AcquireLock of a run, next to the refresh period.
type ContentionMode struct {
	Name string
	Opts []dynamolock.AcquireLockOption
	// Fair marks a mode held to the fairness goal: with no pause
	// between release and re-acquire, Jain's index ≥ FairJainTarget for 2,
	// 8 and 32 contenders and no timeouts. Other modes have no target.
	Fair bool
}

// DefaultMode is AcquireLock as it is, with no extra option.
var DefaultMode = ContentionMode{Name: "default"}

// ContentionModes are the modes `lockbench contention` and `lockbench all`
// run, each beside the others with the same contenders, refresh, hold,
// pause and duration.
var ContentionModes = []ContentionMode{
	DefaultMode,
	{Name: "fair", Opts: []dynamolock.AcquireLockOption{dynamolock.WithFairness()}, Fair: true},
}

// ModesNamed returns the modes of ContentionModes named in names, in that
// order.
func ModesNamed(names []string) ([]ContentionMode, error) {
	var out []ContentionMode
	for _, n := range names {
		i := slices.IndexFunc(ContentionModes, func(m ContentionMode) bool { return m.Name == n })
		if i < 0 {
			var known []string
			for _, m := range ContentionModes {
				known = append(known, m.Name)
			}
			return nil, fmt.Errorf("contention mode %q unknown (this build has: %s)", n, strings.Join(known, ", "))
		}
		out = append(out, ContentionModes[i])
	}
	return out, nil
}

// ContentionConfig is one contention run: Contenders clients, each with
// Goroutines goroutines (1 when 0) in a loop of acquire (in Mode), hold
// for Hold, release, pause for Pause, on one key.
type ContentionConfig struct {
	Mode       ContentionMode
	Contenders int
	Goroutines int
	Duration   time.Duration
	Hold       time.Duration
	Pause      time.Duration
	Refresh    time.Duration
}

// WithModes returns every config of cfgs in every mode: the modes of one
// config next to each other.
func WithModes(cfgs []ContentionConfig, modes []ContentionMode) []ContentionConfig {
	var out []ContentionConfig
	for _, c := range cfgs {
		for _, m := range modes {
			c.Mode = m
			out = append(out, c)
		}
	}
	return out
}

// MeetsFairTarget reports whether the run is held to the fairness target
// (a fair mode, no pause) and whether it met it.
func (r *ContentionRun) MeetsFairTarget() (held, met bool) {
	if !r.Mode.Fair || r.Pause != 0 {
		return false, false
	}
	return true, r.Jain() >= FairJainTarget && r.Timeouts == 0 && r.Errors == 0
}

// FairJainTarget is the fairness goal of a fair mode.
const FairJainTarget = 0.95

// ContentionRun is what one run measured.
type ContentionRun struct {
	ContentionConfig
	Elapsed      time.Duration
	PerContender []int
	// Waits are from the moment a contender wants the lock until it holds
	// it, across timeouts; a contender still waiting at the end contributes
	// its wait so far (so starvation shows in the tail).
	Waits    Dist
	Timeouts int // acquisitions that gave up (LockNotGranted after the wait), then retried
	Errors   int // other failures
}

// Acquisitions is the total number of acquisitions.
func (r *ContentionRun) Acquisitions() int {
	n := 0
	for _, v := range r.PerContender {
		n += v
	}
	return n
}

// PerSec is the acquisition rate.
func (r *ContentionRun) PerSec() float64 { return float64(r.Acquisitions()) / r.Elapsed.Seconds() }

// Jain is Jain's fairness index of the acquisitions per contender: 1 when
// all got the same number, 1/n when one got them all.
func (r *ContentionRun) Jain() float64 {
	var s, s2 float64
	for _, v := range r.PerContender {
		s += float64(v)
		s2 += float64(v) * float64(v)
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(r.PerContender)) * s2)
}

// MaxShare is the largest fraction of acquisitions one contender made.
func (r *ContentionRun) MaxShare() float64 {
	m, n := 0, r.Acquisitions()
	for _, v := range r.PerContender {
		m = max(m, v)
	}
	if n == 0 {
		return 0
	}
	return float64(m) / float64(n)
}

// Who names the contenders: "8" clients, or "2 × 8" clients × goroutines.
func (c ContentionConfig) Who() string {
	if c.Goroutines > 1 {
		return fmt.Sprintf("%d × %d", c.Contenders, c.Goroutines)
	}
	return fmt.Sprint(c.Contenders)
}

// Starved is the number of contenders that never acquired the lock.
func (r *ContentionRun) Starved() int {
	z := 0
	for _, v := range r.PerContender {
		if v == 0 {
			z++
		}
	}
	return z
}

// RunContention runs cfg against a fresh table.
func RunContention(ctx context.Context, e *Env, cfg ContentionConfig) (*ContentionRun, error) {
	table, drop, err := e.NewTable(ctx, "contention")
	if err != nil {
		return nil, err
	}
	defer drop()
	db, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	clients := make([]*dynamolock.Client, cfg.Contenders)
	for i := range clients {
		c, err := dynamolock.New(db, table, dynamolock.WithLeaseDuration(3*time.Second),
			dynamolock.WithHeartbeatPeriod(time.Second), dynamolock.WithOwnerName(fmt.Sprintf("contender-%d", i)))
		if err != nil {
			return nil, err
		}
		clients[i] = c
		defer c.Close()
	}
	const key = "hot"
	opts := append([]dynamolock.AcquireLockOption{dynamolock.WithRefreshPeriod(cfg.Refresh)}, cfg.Mode.Opts...)
	g := max(cfg.Goroutines, 1)
	run := &ContentionRun{ContentionConfig: cfg, PerContender: make([]int, cfg.Contenders*g)}
	var mu sync.Mutex
	var waits []time.Duration
	rctx, cancel := context.WithTimeout(ctx, cfg.Duration)
	defer cancel()
	start := time.Now()
	var wg sync.WaitGroup
	for j := range cfg.Contenders * g {
		c, i := clients[j/g], j
		wg.Go(func() {
			for rctx.Err() == nil {
				want := time.Now()
				var l *dynamolock.Lock
				for rctx.Err() == nil {
					var err error
					l, err = c.AcquireLockWithContext(rctx, key, opts...)
					if err == nil {
						break
					}
					var te *dynamolock.TimeoutError
					mu.Lock()
					switch {
					case rctx.Err() != nil:
					case errors.As(err, &te):
						run.Timeouts++
					default:
						run.Errors++
					}
					mu.Unlock()
				}
				if l == nil {
					mu.Lock()
					waits = append(waits, time.Since(want))
					mu.Unlock()
					return
				}
				mu.Lock()
				waits = append(waits, time.Since(want))
				run.PerContender[i]++
				mu.Unlock()
				sleepCtx(rctx, cfg.Hold)
				_, _ = c.ReleaseLockWithContext(context.WithoutCancel(rctx), l)
				sleepCtx(rctx, cfg.Pause)
			}
		})
	}
	wg.Wait()
	run.Elapsed = time.Since(start)
	run.Waits = NewDist(waits)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return run, nil
}

func sleepCtx(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
