package bench

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// CapacityConfig is one heartbeat-capacity run: hold N locks in one client
// for Hold.
type CapacityConfig struct {
	N              int
	Hold           time.Duration
	Lease          time.Duration
	Heartbeat      time.Duration
	Concurrency    int     // WithHeartbeatConcurrency; 0: the default
	Admission      float64 // WithHeartbeatAdmission; 0: the default (0.6)
	AcquireWorkers int     // acquisitions in flight while taking the N locks
	// Unpaced asks for the N locks as fast as AcquireWorkers allow, with
	// no pause for the heartbeat backlog: whether they can be renewed is
	// then the library's own decision (admission control refuses or makes
	// them wait), as for an application that simply asks.
	Unpaced bool
	// HeapProfile, when set, is a file to write a heap profile to while
	// the locks are held.
	HeapProfile string
	// Trace, when set, receives one line of the client's Stats every
	// quarter second, from the first acquisition to the end of the hold.
	Trace io.Writer
}

// CapacityRun is what one run measured. Counters cover the hold window
// unless their name says otherwise.
type CapacityRun struct {
	CapacityConfig
	Acquired      int // locks acquired
	AcquireErrors int // acquisitions that failed
	Refused       int // of which with ErrHeartbeatCapacity
	// RefusedWhy counts the refusals by the cause their error names:
	// "rate" (the held locks' need), "slack" (the most overdue heartbeat's
	// lease left), "slots" (acquisitions let go at once), "other".
	RefusedWhy    map[string]int
	AcquireTime   time.Duration // to acquire all N
	Lost          int           // locks lost, from the first acquisition to the end of the hold
	LostAcquiring int           // of which while the N locks were being acquired
	// FailedBeats counts heartbeat writes that failed without an answer
	// from DynamoDB, over the whole run: under overload, beats sent too
	// close to the end of their lease, cancelled when it ran out.
	FailedBeats uint64
	HeldAtEnd   int // Stats().HeldLocks at the end of the hold
	BeatsSent   uint64
	BeatErrors  uint64
	LateBeats   uint64
	Calls       uint64 // DynamoDB calls the client made
	MaxBacklog  int
	// Renewal gaps: time between the sends of two successful writes of the
	// same lock (the acquisition counts as the first), and for the last one
	// until the end of the hold. The lease must stay longer than the largest.
	GapP50, GapP99, GapMax time.Duration
	GoroutinesBase         int // before the client was created
	GoroutinesMax          int // during the hold
	HeapBytes              int64
	CPUClient              time.Duration // this process
	CPUServer              time.Duration // DynamoDB Local, when its pid is known
	CloseTime              time.Duration // Close releasing all locks
	LostInClose            int           // locks whose leases ran out during Close instead of being released
	// LongestPause is the longest delay of a 10 ms ticker in this process,
	// from the first acquisition to the end of the hold;
	// FirstLoss when the first lock was lost (since the first
	// acquisition; 0: none), and PauseBeforeLoss the longest pause until
	// then (see pauseWatch).
	LongestPause, FirstLoss, PauseBeforeLoss time.Duration
	// The machine's CPU steal in percent of all cores (see pauseWatch):
	// the most in any 250 ms, the most in the 5 s before the first loss,
	// and the share over the run; -1: unknown.
	StealMax, StealBeforeLoss, StealAll int

	CloseErr string
}

// BeatsPerSec is the heartbeat rate achieved during the hold.
func (r *CapacityRun) BeatsPerSec() float64 { return float64(r.BeatsSent) / r.Hold.Seconds() }

// OK reports whether every lock was acquired and held to the end.
func (r *CapacityRun) OK() bool {
	return r.Acquired == r.N && r.Lost == 0 && r.HeldAtEnd == r.N
}

// acquireBudget bounds the paced acquisition of a capacity run; a run that
// cannot acquire all its locks in it fails.
const acquireBudget = 90 * time.Second

// RunCapacity acquires cfg.N locks in one client, holds them for cfg.Hold
// and releases them with Close.
func RunCapacity(ctx context.Context, e *Env, cfg CapacityConfig) (*CapacityRun, error) {
	table, drop, err := e.NewTable(ctx, "capacity")
	if err != nil {
		return nil, err
	}
	defer drop()
	const prefix = "cap-"
	gaps := newGapTracker(prefix, cfg.N)
	// Room in the idle pool for every connection the heartbeats use, so
	// that Close does not close some of them: their buffers would leave
	// the heap between the two measures and count as the locks'.
	idle := max(e.IdleConns, 2*dynamolock.DefaultHeartbeatConcurrency, 2*cfg.Concurrency)
	db, err := e.newDB(ctx, idle, gaps.option)
	if err != nil {
		return nil, err
	}
	keys := make([]string, cfg.N)
	for i := range keys {
		keys[i] = prefix + strconv.Itoa(i)
	}
	locks := make([]*dynamolock.Lock, cfg.N)
	r := &CapacityRun{CapacityConfig: cfg}
	e.CloseIdle()
	r.GoroutinesBase = runtime.NumGoroutine()

	opts := []dynamolock.ClientOption{
		dynamolock.WithLeaseDuration(cfg.Lease), dynamolock.WithHeartbeatPeriod(cfg.Heartbeat),
	}
	if cfg.Concurrency > 0 {
		opts = append(opts, dynamolock.WithHeartbeatConcurrency(cfg.Concurrency))
	}
	if cfg.Admission > 0 {
		opts = append(opts, dynamolock.WithHeartbeatAdmission(cfg.Admission))
	}
	var logged *firstErrors
	if cfg.Trace != nil {
		logged = &firstErrors{w: cfg.Trace, left: 20}
		opts = append(opts, dynamolock.WithSlog(slog.New(logged)))
	}
	c, err := dynamolock.New(db, table, opts...)
	if err != nil {
		return nil, err
	}
	closed := false
	defer func() {
		if !closed {
			_ = c.Close()
		}
	}()

	// Acquire with bounded parallelism, and pace the acquisitions so that
	// they do not starve heartbeats, as an application ramping up should:
	// workers pause while the heartbeat queue would take more than half the
	// lease's slack (lease − heartbeat period) to drain at the rate beats
	// complete, and whenever a heartbeat started late.
	began := time.Now()
	stopTrace := traceStats(c, cfg.Trace, logged, began)
	defer stopTrace()
	pauses := watchPauses(c, began)
	defer pauses.stop()
	var next, failed, refused atomic.Int64
	why := map[string]*atomic.Int64{"rate": new(atomic.Int64), "slack": new(atomic.Int64), "slots": new(atomic.Int64), "other": new(atomic.Int64)}
	var pauseUntil atomic.Int64 // unix nanoseconds
	var firstErr atomic.Value
	sampled := make(chan struct{})
	acquiring := make(chan struct{}) // closed when every acquisition worker returned
	go func() {
		defer close(sampled)
		const tick = 50 * time.Millisecond
		t := time.NewTicker(tick)
		defer t.Stop()
		var window [20]uint64 // beats sent at each of the last 20 ticks (1 s)
		slack := (cfg.Lease - cfg.Heartbeat).Seconds() / 2
		var late uint64
		// Until the workers are done: they may stop before taking all N
		// (the acquisition budget), when next stays below N.
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-t.C:
			case <-acquiring:
				return
			}
			st := c.Stats()
			prev := window[i%len(window)]
			window[i%len(window)] = st.HeartbeatsSent
			rate := float64(st.HeartbeatsSent-prev) / (tick * time.Duration(len(window))).Seconds()
			drain := float64(st.HeartbeatBacklog) / max(rate, 1)
			if !cfg.Unpaced && (st.LateHeartbeats > late || (i >= len(window) && drain > slack)) {
				pauseUntil.Store(time.Now().Add(250 * time.Millisecond).UnixNano())
			}
			late = st.LateHeartbeats
		}
	}()
	var wg sync.WaitGroup
	for range max(cfg.AcquireWorkers, 1) {
		wg.Go(func() {
			for {
				if d := time.Until(time.Unix(0, pauseUntil.Load())); d > 0 {
					time.Sleep(d)
				}
				if time.Since(began) > acquireBudget && !cfg.Unpaced {
					return // the run fails: not all N acquired
				}
				i := int(next.Add(1) - 1)
				if i >= cfg.N || ctx.Err() != nil {
					return
				}
				l, err := c.AcquireLockWithContext(ctx, keys[i], dynamolock.FailIfLocked())
				if err != nil {
					failed.Add(1)
					if errors.Is(err, dynamolock.ErrHeartbeatCapacity) {
						refused.Add(1)
						why[refusalCause(err)].Add(1)
					} else {
						firstErr.CompareAndSwap(nil, err.Error())
					}
					continue
				}
				locks[i] = l
			}
		})
	}
	wg.Wait()
	close(acquiring)
	<-sampled
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.AcquireTime = time.Since(began)
	r.AcquireErrors = int(failed.Load())
	r.Refused = int(refused.Load())
	r.RefusedWhy = map[string]int{}
	for k, n := range why {
		if v := int(n.Load()); v > 0 {
			r.RefusedWhy[k] = v
		}
	}
	for _, l := range locks {
		if l != nil {
			r.Acquired++
		}
	}
	if r.AcquireErrors > r.Refused {
		e.logf("capacity N=%d: %d acquisitions failed, first: %v", cfg.N, r.AcquireErrors, firstErr.Load())
	}

	// Hold.
	s0 := c.Stats()
	r.LostAcquiring = int(s0.LocksLost)
	cpu0, srv0 := cpuTime(), procCPU(e.ServerPID)
	holdStart := time.Now()
	gaps.start(holdStart)
	tick := time.NewTicker(100 * time.Millisecond)
	deadline := time.NewTimer(cfg.Hold)
hold:
	for {
		select {
		case <-ctx.Done():
			tick.Stop()
			return nil, ctx.Err()
		case <-deadline.C:
			break hold
		case <-tick.C:
			st := c.Stats()
			r.MaxBacklog = max(r.MaxBacklog, st.HeartbeatBacklog)
			r.GoroutinesMax = max(r.GoroutinesMax, runtime.NumGoroutine())
		}
	}
	tick.Stop()
	holdEnd := time.Now()
	pauses.stop()
	r.LongestPause, r.FirstLoss, r.PauseBeforeLoss = pauses.longest, pauses.firstLoss, pauses.longestBeforeLoss
	r.StealMax, r.StealBeforeLoss, r.StealAll = pauses.stealMax, pauses.stealBeforeLoss, pauses.stealAll
	r.CPUClient = cpuTime() - cpu0
	if e.ServerPID > 0 {
		r.CPUServer = procCPU(e.ServerPID) - srv0
	}
	r.Hold = holdEnd.Sub(holdStart)
	s1 := c.Stats()
	r.GapP50, r.GapP99, r.GapMax = gaps.finish(holdEnd)
	r.BeatsSent = s1.HeartbeatsSent - s0.HeartbeatsSent
	r.BeatErrors = s1.HeartbeatErrors - s0.HeartbeatErrors
	r.LateBeats = s1.LateHeartbeats - s0.LateHeartbeats
	r.Calls = s1.DynamoDBCalls - s0.DynamoDBCalls
	r.HeldAtEnd = s1.HeldLocks
	r.FailedBeats = s1.HeartbeatErrors
	lost := 0
	for _, l := range locks {
		if l != nil && l.Err() != nil {
			lost++
		}
	}
	r.Lost = max(lost, int(s1.LocksLost))
	// In-flight beats allocate too: take the smallest of a few samples.
	// Idle connections are closed before each measure, here and after
	// Close: their buffers are the HTTP pool's, whose size depends on how
	// many calls ran at once (Close's releases open more than the beats
	// use), not on the locks held.
	e.CloseIdle()
	heldHeap := heapInUse()
	for range 9 {
		time.Sleep(20 * time.Millisecond)
		e.CloseIdle()
		heldHeap = min(heldHeap, heapInUse())
	}
	if cfg.HeapProfile != "" {
		if err := writeHeapProfile(cfg.HeapProfile); err != nil {
			return nil, err
		}
	}

	lostBefore := c.Stats().LocksLost
	t := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = c.CloseWithContext(cctx)
	closed = true
	r.CloseTime = time.Since(t)
	r.LostInClose = int(c.Stats().LocksLost - lostBefore)
	if err != nil {
		r.CloseErr = firstLine(err)
	}
	// Heap per lock: what the held locks kept alive, measured as the heap
	// with them held minus the heap once they and the client are gone
	// (connection buffers and this benchmark's own tables stay in both).
	stopTrace()
	clear(locks)
	c = nil
	e.CloseIdle()
	r.HeapBytes = int64(heldHeap) - int64(heapInUse())
	// Keep them alive through the second measure, or the collector frees
	// them after their last use above and their bytes (the gap histogram
	// alone is ~1 MB; the SDK client holds the connection buffers) count
	// as the locks'.
	runtime.KeepAlive(gaps)
	runtime.KeepAlive(db)
	return r, nil
}

// CapacityResult is section 3.
type CapacityResult struct {
	Ceiling *CeilingResult
	Runs    []*CapacityRun
	// MaxHeld is the largest N held with zero losses (0: none).
	MaxHeld int
	// Held is the most locks one run held for the whole hold with zero
	// losses, counting a run in which admission control refused some of
	// its N (the capacity goal's figure: refusing is what it is for).
	Held int
}

// HeapPerLock is the heap per held lock, in bytes.
func (r *CapacityRun) HeapPerLock() int64 { return r.HeapBytes / int64(max(r.N, 1)) }

// HeapRun returns the run that held n locks without loss, or nil.
func (r *CapacityResult) HeapRun(n int) *CapacityRun {
	for _, x := range r.Runs {
		if x.N == n && x.OK() {
			return x
		}
	}
	return nil
}

// Bound is the backend bound: the raw ceiling (writes/s) × the lease, the
// most locks any client could renew against this backend (0: no ceiling).
func (r *CapacityResult) Bound() float64 {
	if r.Ceiling == nil || len(r.Runs) == 0 {
		return 0
	}
	return r.Ceiling.BoundPerSec() * r.Runs[0].Lease.Seconds()
}

// RunBound is the bound of an unpaced ask for x: min(N, raw ceiling × lease), the
// most locks x could hold (0: no ceiling measured).
func (r *CapacityResult) RunBound(x *CapacityRun) float64 {
	if r.Ceiling == nil {
		return 0
	}
	return min(float64(x.N), r.Ceiling.BoundPerSec()*x.Lease.Seconds())
}

// NeverLoseTarget is the goal of an unpaced ask: with zero locks lost, hold at
// least this fraction of RunBound.
const NeverLoseTarget = 0.85

// BoundFraction is Held ÷ Bound, when a ceiling was measured.
func (r *CapacityResult) BoundFraction() (float64, bool) {
	b := r.Bound()
	if b <= 0 {
		return 0, false
	}
	return float64(r.Held) / b, true
}

// WithBoundPoint returns ns with, in order, the smallest multiple of 100 at
// or above BoundTarget × the bound (ceiling × lease), so that the search
// tries the N at which the capacity goal is met. It is chosen
// before the runs, from the measure before them alone: when the one after
// is higher, the report's bound is higher than the one this N aimed at.
func WithBoundPoint(ns []int, c *CeilingResult, lease time.Duration) []int {
	if c == nil {
		return ns
	}
	n := int(math.Ceil(BoundTarget*c.BoundPerSec()*lease.Seconds()/100)) * 100
	if n <= 0 || slices.Contains(ns, n) || !slices.IsSorted(ns) {
		return ns
	}
	out := slices.Clone(ns)
	i, _ := slices.BinarySearch(out, n)
	return slices.Insert(out, i, n)
}

// SearchCapacity runs RunCapacity for each N in ns, in order, and stops at
// the first run that loses a lock. With refine, it then tries once the
// midpoint between the last good N and the first bad one.
func SearchCapacity(ctx context.Context, e *Env, base CapacityConfig, ns []int, refine bool) (*CapacityResult, error) {
	res := &CapacityResult{}
	good, bad := 0, 0
	run := func(n int) (*CapacityRun, error) {
		cfg := base
		cfg.N = n
		e.logf("capacity: holding %d locks for %s (lease %s, heartbeat %s)", n, cfg.Hold, cfg.Lease, cfg.Heartbeat)
		r, err := RunCapacity(ctx, e, cfg)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, r)
		e.logf("capacity: N=%d lost=%d beats/s=%.0f max gap=%s late=%d", n, r.Lost, r.BeatsPerSec(), ms(r.GapMax)+" ms", r.LateBeats)
		if r.Lost == 0 && r.HeldAtEnd == r.Acquired {
			res.Held = max(res.Held, r.Acquired)
		}
		if r.OK() {
			good = max(good, n)
		} else if bad == 0 || n < bad {
			bad = n
		}
		return r, nil
	}
	for _, n := range ns {
		r, err := run(n)
		if err != nil {
			return res, err
		}
		if !r.OK() && !base.Unpaced { // unpaced: every N asked is a row
			break
		}
	}
	if refine && bad > 0 && good > 0 {
		mid := (good + bad) / 2 / 250 * 250
		if mid > good && mid < bad {
			if _, err := run(mid); err != nil {
				return res, err
			}
		}
	}
	res.MaxHeld = good
	return res, nil
}

// refusalCause names the cause an ErrHeartbeatCapacity refusal gives in
// its message (see the library's admit): "rate", "slack", "slots" or
// "other".
func refusalCause(err error) string {
	switch msg := err.Error(); {
	case strings.Contains(msg, "renewals/s"):
		return "rate"
	case strings.Contains(msg, "of its lease left"):
		return "slack"
	case strings.Contains(msg, "were all under way"):
		return "slots"
	}
	return "other"
}
