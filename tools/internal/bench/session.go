package bench

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// SessionConfig is one run of the session measure: one client asks for N
// free keys, holds what it got for Hold, and closes.
type SessionConfig struct {
	N         int
	Hold      time.Duration
	Lease     time.Duration
	Heartbeat time.Duration
	// Workers is how many goroutines ask at once, each for the next key
	// (AcquireLockWithContext with FailIfLocked).
	Workers int
	// Plain runs the client without WithSession: every lock renews its own
	// item, and admission control decides what it takes.
	Plain bool
	// MaxRefused stops the asking once this many acquisitions were refused
	// with ErrHeartbeatCapacity (each refusal waits out its lease first),
	// and AskBudget once the asking has taken that long: the keys not
	// asked for by then are reported as such (0: no bound).
	MaxRefused int
	AskBudget  time.Duration
}

// SessionRun is what one run measured. Calls are counted by SDK middleware
// on the client's own SDK client, once per operation.
type SessionRun struct {
	SessionConfig
	Asked       int // acquisitions started
	Acquired    int
	Refused     int // failed with ErrHeartbeatCapacity
	OtherErrors int
	FirstError  string
	// StoppedBy says which bound stopped the asking before every key was
	// asked for: "refusals" (MaxRefused) or "time" (AskBudget); "" when
	// none did.
	StoppedBy    string
	AcquireTime  time.Duration // from the first ask to the last answer
	AcquireCalls Calls         // during the asking

	HoldTime  time.Duration // the measured hold
	HoldCalls Calls         // during the hold
	// Lost counts the acquired locks that ended before Close, from the
	// first acquisition to the start of Close (the hold and the heap
	// measure after it); HeldAtEnd those still held then.
	Lost      int
	HeldAtEnd int
	// FirstLoss is when the client first counted a lock lost, from the
	// first ask (0: none before Close), and PauseBeforeLoss the longest
	// this process went without running a 10 ms ticker until then (see
	// pauseWatch): a loss after a long pause is this process's, not the
	// backend's.
	FirstLoss, PauseBeforeLoss time.Duration
	// SessionEnd is the session's Err at the start of Close, when it had
	// ended ("" while it lived, and for a plain run).
	SessionEnd string
	// HeapBefore is HeapAlloc after a full collection with the client made
	// and nothing acquired; HeapHeld the same with the locks held (the
	// smallest of a few samples, idle connections closed before each).
	HeapBefore, HeapHeld uint64
	CPUClient, CPUServer time.Duration // during the hold; server 0 when unknown

	CloseTime  time.Duration
	CloseCalls Calls
	CloseErr   string
	// Released counts the locks whose Err was ErrLockAlreadyReleased once
	// Close returned.
	Released int
	// FreeTaken of FreeTried keys, spread over those held, were taken by
	// another client with FailIfLocked right after Close, in FreeTime.
	FreeTried, FreeTaken int
	FreeTime             time.Duration

	LoadStart, LoadEnd float64 // 1-minute load average at the run's start and end (0: unknown)
}

// Periods is the number of heartbeat periods in the hold.
func (r *SessionRun) Periods() float64 { return r.HoldTime.Seconds() / r.Heartbeat.Seconds() }

// HoldWrites is the writes during the hold.
func (r *SessionRun) HoldWrites() int { return r.HoldCalls["UpdateItem"] }

// WritesPerPeriod is the writes during the hold per heartbeat period.
func (r *SessionRun) WritesPerPeriod() float64 {
	if p := r.Periods(); p > 0 {
		return float64(r.HoldWrites()) / p
	}
	return 0
}

// SessionWritesTolerance is how far the writes of a session's hold may be
// from one per heartbeat period: a tenth of the periods either way.
const SessionWritesTolerance = 0.10

// WritesMet reports whether a session's hold wrote about once per
// heartbeat period: within SessionWritesTolerance of the periods.
func (r *SessionRun) WritesMet() bool {
	p := r.Periods()
	d := float64(r.HoldWrites()) - p
	return p > 0 && d <= SessionWritesTolerance*p && -d <= SessionWritesTolerance*p
}

// HeapPerLock is the heap the held locks added, per lock held at the end
// (0 when none was held).
func (r *SessionRun) HeapPerLock() int64 {
	if r.HeldAtEnd == 0 {
		return 0
	}
	return (int64(r.HeapHeld) - int64(r.HeapBefore)) / int64(r.HeldAtEnd)
}

// NotAsked is the keys the asking stopped before.
func (r *SessionRun) NotAsked() int { return r.N - r.Asked }

// RunSession makes one client (WithSession unless cfg.Plain) on a fresh
// table, asks for cfg.N free keys, holds what it got for cfg.Hold, then
// closes it and checks that the keys are free to another client.
func RunSession(ctx context.Context, e *Env, cfg SessionConfig) (*SessionRun, error) {
	r := &SessionRun{SessionConfig: cfg, LoadStart: loadAvg()}
	table, drop, err := e.NewTable(ctx, "session")
	if err != nil {
		return nil, err
	}
	defer drop()
	cnt := NewCounter()
	// Room in the idle pool for every connection the workers use, so that
	// the heap measures do not depend on which were kept.
	idle := max(e.IdleConns, 2*cfg.Workers, 2*dynamolock.DefaultHeartbeatConcurrency)
	db, err := e.newDB(ctx, idle, cnt.Option)
	if err != nil {
		return nil, err
	}
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(cfg.Lease), dynamolock.WithHeartbeatPeriod(cfg.Heartbeat)}
	if !cfg.Plain {
		opts = append(opts, dynamolock.WithSession())
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
	// Everything this run keeps per key exists before the first measure,
	// so that the difference is what the library keeps.
	keys := make([]string, cfg.N)
	for i := range keys {
		keys[i] = "s-" + strconv.Itoa(i)
	}
	locks := make([]*dynamolock.Lock, cfg.N)
	e.CloseIdle()
	r.HeapBefore = heapInUse()

	cnt.Take()
	began := time.Now()
	pauses := watchPauses(c, began)
	defer pauses.stop()
	r.Asked, r.Refused, r.OtherErrors, r.FirstError, r.StoppedBy = askAll(ctx, c, keys, locks, cfg)
	r.AcquireTime = time.Since(began)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var sess *dynamolock.Session
	if !cfg.Plain {
		// The session the locks are held by (no write while it lives).
		if sess, err = c.Session(ctx); err != nil {
			return nil, err
		}
	}
	cpu0, srv0 := cpuTime(), procCPU(e.ServerPID)
	holdStart := time.Now()
	r.AcquireCalls = cnt.Take()
	for _, l := range locks {
		if l != nil {
			r.Acquired++
		}
	}
	if r.OtherErrors > 0 {
		e.logf("session N=%d: %d acquisitions failed, first: %s", cfg.N, r.OtherErrors, r.FirstError)
	}

	if err := sleepUntil(ctx, holdStart.Add(cfg.Hold)); err != nil {
		return nil, err
	}
	r.HoldCalls = cnt.Take()
	r.HoldTime = time.Since(holdStart)
	r.CPUClient = cpuTime() - cpu0
	if e.ServerPID > 0 {
		r.CPUServer = procCPU(e.ServerPID) - srv0
	}
	// In-flight calls allocate too: the smallest of a few samples.
	e.CloseIdle()
	r.HeapHeld = heapInUse()
	for range 4 {
		e.CloseIdle()
		r.HeapHeld = min(r.HeapHeld, heapInUse())
	}
	var held []string // the keys Close is to free
	for _, l := range locks {
		switch {
		case l == nil:
		case l.Err() != nil:
			r.Lost++
		default:
			r.HeldAtEnd++
			held = append(held, l.PartitionKey())
		}
	}
	if sess != nil && sess.Err() != nil {
		r.SessionEnd = sess.Err().Error()
	}
	pauses.stop()
	r.FirstLoss, r.PauseBeforeLoss = pauses.firstLoss, pauses.longestBeforeLoss

	cnt.Take()
	t := time.Now()
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = c.CloseWithContext(cctx)
	closed = true
	r.CloseTime = time.Since(t)
	r.CloseCalls = cnt.Take()
	if err != nil {
		r.CloseErr = firstLine(err)
	}
	for _, l := range locks {
		if l != nil && errors.Is(l.Err(), dynamolock.ErrLockAlreadyReleased) {
			r.Released++
		}
	}
	if r.FreeTried, r.FreeTaken, r.FreeTime, err = takeFree(ctx, e, table, held, cfg); err != nil {
		return nil, err
	}
	r.LoadEnd = loadAvg()
	return r, nil
}

// askAll asks for every key with cfg.Workers goroutines, each taking the
// next key, until all were asked or a bound of cfg is reached (stoppedBy
// names it).
func askAll(ctx context.Context, c *dynamolock.Client, keys []string, locks []*dynamolock.Lock, cfg SessionConfig) (asked, refused, other int, first, stoppedBy string) {
	var next, nRefused, nOther atomic.Int64
	var firstErr, stopped atomic.Value
	began := time.Now()
	stop := func() bool {
		switch {
		case ctx.Err() != nil:
			return true
		case cfg.MaxRefused > 0 && nRefused.Load() >= int64(cfg.MaxRefused):
			stopped.CompareAndSwap(nil, "refusals")
			return true
		case cfg.AskBudget > 0 && time.Since(began) >= cfg.AskBudget:
			stopped.CompareAndSwap(nil, "time")
			return true
		}
		return false
	}
	var wg sync.WaitGroup
	for range max(cfg.Workers, 1) {
		wg.Go(func() {
			for !stop() {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				l, err := c.AcquireLockWithContext(ctx, keys[i], dynamolock.FailIfLocked())
				switch {
				case err == nil:
					locks[i] = l
				case errors.Is(err, dynamolock.ErrHeartbeatCapacity):
					nRefused.Add(1)
				default:
					nOther.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			}
		})
	}
	wg.Wait()
	first, _ = firstErr.Load().(string)
	asked = min(int(next.Load()), len(keys))
	if asked < len(keys) {
		stoppedBy, _ = stopped.Load().(string)
	}
	return asked, int(nRefused.Load()), int(nOther.Load()), first, stoppedBy
}

// freeSample is how many of a run's keys another client takes after Close.
const freeSample = 100

// takeFree has a client without a session take up to freeSample of keys,
// those held when Close began, spread over them, with FailIfLocked, at
// once after Close: they must be free without waiting for any lease.
func takeFree(ctx context.Context, e *Env, table string, keys []string, cfg SessionConfig) (tried, taken int, took time.Duration, err error) {
	if len(keys) == 0 {
		return 0, 0, 0, nil
	}
	step := max(len(keys)/freeSample, 1)
	db, err := e.NewDB(ctx)
	if err != nil {
		return 0, 0, 0, err
	}
	c, err := dynamolock.New(db, table, dynamolock.WithLeaseDuration(cfg.Lease), dynamolock.WithHeartbeatPeriod(cfg.Heartbeat))
	if err != nil {
		return 0, 0, 0, err
	}
	defer c.Close()
	t := time.Now()
	var n atomic.Int64
	var wg sync.WaitGroup
	for i := 0; i < len(keys) && tried < freeSample; i += step {
		tried++
		wg.Go(func() {
			if _, err := c.AcquireLockWithContext(ctx, keys[i], dynamolock.FailIfLocked()); err == nil {
				n.Add(1)
			}
		})
	}
	wg.Wait()
	return tried, int(n.Load()), time.Since(t), nil
}

// sleepUntil waits until t or the end of ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}
