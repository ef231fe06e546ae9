package bench

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"
)

// SteadinessResult is the backend's raw write rate second by second under a
// constant load: how far it moves on its own, with no lock client beside it.
// A lease lock survives only while the renewals made over about one lease
// cover the locks held, so the slowest lease-long window's rate × lease
// bounds what a client can hold without loss, whatever it measured before
// (an upper bound: jitter within the lease costs more). The counts are
// taken on a 1 s ticker, in this process, whose own pauses are not
// separated out: short windows can read wider than the backend is.
type SteadinessResult struct {
	Writers   int
	WarmupFor time.Duration
	PerSecond []int // successful writes in each whole second after the warm-up
	Errors    int
}

// SteadinessWindows are the window lengths, in seconds, the report gives.
var SteadinessWindows = []int{1, 2, 3, 5, 10, 30}

// MeasureSteadiness runs writers goroutines renewing 64 items each with
// heartbeat-shaped conditional UpdateItems (the ceiling's write, see
// MeasureCeiling) for warmup, uncounted, then counts the successful writes
// of every second for d (writers > 0 and d ≥ 1 s: the command checks).
func MeasureSteadiness(ctx context.Context, e *Env, writers int, warmup, d time.Duration) (*SteadinessResult, error) {
	db, table, drop, err := rawItems(ctx, e, "steadiness", writers)
	if err != nil {
		return nil, err
	}
	defer drop()
	rw := startRawWriters(ctx, db, table, writers)
	defer rw.stop()
	r := &SteadinessResult{Writers: writers, WarmupFor: warmup}
	select {
	case <-time.After(warmup):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last, lastErrs := rw.writes.Load(), rw.errs.Load()
	for range int(d / time.Second) {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		n := rw.writes.Load()
		r.PerSecond = append(r.PerSecond, int(n-last))
		last = n
	}
	r.Errors = int(rw.errs.Load() - lastErrs)
	return r, nil
}

// Mean is the mean rate, writes per second.
func (r *SteadinessResult) Mean() float64 { return meanOf(r.PerSecond) }

// meanOf is the mean of s; 0 for none.
func meanOf(s []int) float64 {
	if len(s) == 0 {
		return 0
	}
	sum := 0
	for _, n := range s {
		sum += n
	}
	return float64(sum) / float64(len(s))
}

// Window is the slowest and the fastest mean rate over w consecutive
// seconds, each ÷ the mean; ok is false when fewer than w seconds were
// measured or nothing was written.
func (r *SteadinessResult) Window(w int) (worst, best float64, ok bool) {
	mean := r.Mean()
	if w <= 0 || len(r.PerSecond) < w || mean == 0 {
		return 0, 0, false
	}
	sum := 0
	for _, n := range r.PerSecond[:w] {
		sum += n
	}
	lo, hi := sum, sum
	for i := w; i < len(r.PerSecond); i++ {
		sum += r.PerSecond[i] - r.PerSecond[i-w]
		lo, hi = min(lo, sum), max(hi, sum)
	}
	return float64(lo) / float64(w) / mean, float64(hi) / float64(w) / mean, true
}

// Thirds is the mean rate of the first and the last third of the seconds,
// each ÷ the mean: a backend that drifts shows it here.
func (r *SteadinessResult) Thirds() (first, last float64, ok bool) {
	k := len(r.PerSecond) / 3
	mean := r.Mean()
	if k == 0 || mean == 0 {
		return 0, 0, false
	}
	return meanOf(r.PerSecond[:k]) / mean, meanOf(r.PerSecond[len(r.PerSecond)-k:]) / mean, true
}

// Markdown reports the result; cmd is the command line that produced it.
func (r *SteadinessResult) Markdown(cmd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Command: `%s`. %d writers renewing 64 items each with the ceiling's heartbeat-shaped conditional UpdateItem (see `capacity`), %s of warm-up not counted, then the successful writes of every second for %d s; no lock client runs beside them.\n\n",
		cmd, r.Writers, r.WarmupFor, len(r.PerSecond))
	fmt.Fprintf(&b, "Mean **%s writes/s** (%d errors).", commas(int64(math.Round(r.Mean()))), r.Errors)
	if first, last, ok := r.Thirds(); ok {
		fmt.Fprintf(&b, " First third of the seconds %.2f× the mean, last third %.2f×.", first, last)
	}
	b.WriteString("\n\n| window | slowest ÷ mean | fastest ÷ mean |\n|---|---|---|\n")
	for _, w := range SteadinessWindows {
		if worst, best, ok := r.Window(w); ok {
			fmt.Fprintf(&b, "| %d s | %.2f | %.2f |\n", w, worst, best)
		}
	}
	b.WriteString("\nA lease lock loses a lock when the renewals over about one lease fall short of the locks held. A client renewing each of its locks once per lease (lease L) can hold without loss at most the slowest L-long window's rate × L; held ÷ (a measured rate × L) is at most that window ÷ the measure.\n")
	return b.String()
}
