package dynamolock

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// entry is the scheduler's bookkeeping for one held lock; only the
// scheduler's loop goroutine touches it.
type entry struct {
	l       *Lock
	index   int       // position in the wake heap; -1 when absent
	wake    time.Time // next time the loop must look at the lock
	beating bool      // a heartbeat is in flight
	queued  bool      // due for a heartbeat, waiting for a free slot
	due     time.Time // end of the lease when queued: the ready heap's order
	retryAt time.Time // after a failed beat: when to try again (zero: none)
	backoff time.Duration
}

// beatResult is a finished heartbeat, reported to the loop.
type beatResult struct {
	e      *entry
	failed bool          // the write failed without losing the lock: retry with backoff
	rtt    time.Duration // how long a successful beat took
}

// scheduler is the one goroutine per client that renews every held lock on
// that lock's own schedule, fires session monitors, and records a lock's
// loss the moment its lease runs out. Heartbeats run in at most
// heartbeatConcurrency goroutines; beats that cannot start at once wait in
// order of the end of their lease, so under overload the locks closest to
// expiry are renewed first.
type scheduler struct {
	c *Client

	mu       sync.Mutex
	pending  []*Lock // locks whose state changed; the loop recomputes them
	started  bool
	stopping bool

	kick      chan struct{}   // wakes the loop; capacity 1
	done      chan beatResult // finished beats; capacity heartbeatConcurrency
	ctx       context.Context
	cancel    context.CancelFunc
	stopped   chan struct{}  // closed when the loop returns
	beats     sync.WaitGroup // heartbeats in flight
	cbRunning int            // session-monitor callbacks running; guarded by mu
	cbIdle    chan struct{}  // closed when cbRunning drops to zero; guarded by mu

	// Owned by the loop goroutine.
	entries map[*Lock]*entry
	wakes   wakeHeap
	ready   readyHeap
	slots   int
	lastLog time.Time
	rtt     time.Duration // moving average of successful beats' round trips
}

func newScheduler(c *Client) *scheduler {
	s := &scheduler{
		c:       c,
		kick:    make(chan struct{}, 1),
		done:    make(chan beatResult, c.heartbeatConcurrency),
		stopped: make(chan struct{}),
		slots:   c.heartbeatConcurrency,
		entries: make(map[*Lock]*entry),
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s
}

// notify tells the scheduler that l was added, renewed or ended. It never
// blocks. The loop goroutine starts with the first lock.
func (s *scheduler) notify(l *Lock) {
	s.mu.Lock()
	if s.stopping {
		s.mu.Unlock()
		return
	}
	s.pending = append(s.pending, l)
	if !s.started {
		s.started = true
		go s.loop()
	}
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// stop ends the loop, cancels in-flight heartbeats and waits for them, then
// waits for running session-monitor callbacks until ctx ends.
func (s *scheduler) stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	started := s.started
	s.mu.Unlock()
	s.cancel()
	if started {
		<-s.stopped
	}
	s.beats.Wait() // each beat ends with s.ctx, which is cancelled
	s.mu.Lock()
	idle := s.cbIdle
	s.mu.Unlock()
	if idle == nil {
		return nil
	}
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dynamolock: close: session monitor callbacks still running: %w", ctx.Err())
	}
}

// runCallback runs a session monitor's callback in a goroutine of its own,
// counted so that stop can wait for it.
func (s *scheduler) runCallback(f func()) {
	s.mu.Lock()
	if s.cbRunning++; s.cbIdle == nil {
		s.cbIdle = make(chan struct{})
	}
	s.mu.Unlock()
	go func() {
		defer func() {
			s.mu.Lock()
			if s.cbRunning--; s.cbRunning == 0 {
				close(s.cbIdle)
				s.cbIdle = nil
			}
			s.mu.Unlock()
		}()
		f()
	}()
}

func (s *scheduler) loop() {
	defer close(s.stopped)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		pending := s.pending
		s.pending = nil
		s.mu.Unlock()
		now := time.Now()
		for _, l := range pending {
			s.update(s.entryOf(l), now)
		}
		for len(s.wakes) > 0 && !s.wakes[0].wake.After(now) {
			s.fire(s.wakes[0], now)
		}
		s.dispatch(now)

		wait := time.Hour
		if len(s.wakes) > 0 {
			wait = s.wakes[0].wake.Sub(now)
		}
		timer.Reset(wait)
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-timer.C:
		case r := <-s.done:
			s.slots++
			s.finished(r, time.Now())
		}
	}
}

func (s *scheduler) entryOf(l *Lock) *entry {
	e := s.entries[l]
	if e == nil {
		e = &entry{l: l, index: -1}
		s.entries[l] = e
	}
	return e
}

// update recomputes when the loop must next look at e's lock, and forgets a
// lock that ended (once no beat of it is in flight or queued).
func (s *scheduler) update(e *entry, now time.Time) {
	l := e.l
	l.mu.Lock()
	ended := l.reason != nil
	lookup, leaseEnd := l.lookupTime, l.leaseEnd
	var monitorAt time.Time
	if m := l.monitor; m != nil && !m.fired {
		monitorAt = lookup.Add(m.safeTime)
	}
	l.mu.Unlock()
	if ended {
		if e.index >= 0 {
			heap.Remove(&s.wakes, e.index)
		}
		if !e.beating && !e.queued {
			delete(s.entries, l)
		}
		return
	}
	wake := leaseEnd
	if !monitorAt.IsZero() && monitorAt.Before(wake) {
		wake = monitorAt
	}
	if t, ok := s.beatTime(e, lookup); ok && t.Before(wake) {
		wake = t
	}
	e.wake = wake
	if e.index >= 0 {
		heap.Fix(&s.wakes, e.index)
	} else {
		heap.Push(&s.wakes, e)
	}
}

// fire handles e, which is due: loss at the end of the lease, the session
// monitor, or a heartbeat.
func (s *scheduler) fire(e *entry, now time.Time) {
	l := e.l
	l.mu.Lock()
	ended := l.reason != nil
	expired := !now.Before(l.leaseEnd)
	beatAt, beats := s.beatTime(e, l.lookupTime)
	beatDue := beats && !now.Before(beatAt)
	var callback func()
	if m := l.monitor; !ended && !expired && m != nil && !m.fired && !now.Before(l.lookupTime.Add(m.safeTime)) {
		m.fired = true
		callback = m.callback
	}
	due := l.leaseEnd
	l.mu.Unlock()
	switch {
	case ended:
	case expired:
		// The lease ran out with no successful beat. Even if one is in
		// flight, its late success could not make the lapsed time safe.
		l.lose(ErrLeaseExpired, nil)
	default:
		if callback != nil {
			s.runCallback(callback)
		}
		if beatDue {
			e.queued = true
			e.due = due
			heap.Push(&s.ready, e)
		}
	}
	s.update(e, now)
}

// dispatch starts queued heartbeats while slots are free, earliest lease end
// first, and reports a backlog.
func (s *scheduler) dispatch(now time.Time) {
	for s.slots > 0 && len(s.ready) > 0 {
		e := heap.Pop(&s.ready).(*entry)
		e.queued = false
		l := e.l
		l.mu.Lock()
		ended := l.reason != nil
		due := l.lookupTime.Add(s.c.heartbeatPeriod)
		left := l.leaseEnd.Sub(now)
		l.mu.Unlock()
		if ended {
			s.update(e, now)
			continue
		}
		if len(s.ready) > 0 && s.rtt > 0 && left < 2*s.rtt {
			// Overloaded (others wait too): this beat could not land before
			// the lease ends.
			// Sending it would only take capacity from locks that can
			// still be saved, so the lock is declared lost now.
			l.lose(ErrLeaseExpired, nil)
			s.update(e, now)
			continue
		}
		if now.Sub(due) > s.c.heartbeatPeriod {
			s.c.metrics.lateBeat()
		}
		s.slots--
		e.beating = true
		s.update(e, now)
		s.beats.Go(func() { s.beat(e) })
	}
	s.c.metrics.setBacklog(len(s.ready))
	if len(s.ready) > 0 && now.Sub(s.lastLog) > s.c.heartbeatPeriod {
		s.lastLog = now
		s.c.logger.LogAttrs(s.ctx, slog.LevelWarn, "heartbeat backlog: more locks are due than can be renewed at once",
			slog.Int("backlog", len(s.ready)), slog.Int("concurrency", s.c.heartbeatConcurrency))
	}
}

// beatTime is when e's next heartbeat is due, if one should be scheduled:
// one period after its last renewal, or at the retry time after a failure.
func (s *scheduler) beatTime(e *entry, lookup time.Time) (time.Time, bool) {
	if s.c.heartbeatPeriod <= 0 || e.beating || e.queued {
		return time.Time{}, false
	}
	if !e.retryAt.IsZero() {
		return e.retryAt, true
	}
	return lookup.Add(s.c.heartbeatPeriod), true
}

// finished records a beat's outcome. A failed beat (network, throttling,
// 5xx) is tried again after a backoff that doubles up to half a period;
// it gives its slot back meanwhile, so failing locks never starve others.
func (s *scheduler) finished(r beatResult, now time.Time) {
	e := r.e
	e.beating = false
	if r.rtt > 0 {
		if s.rtt == 0 {
			s.rtt = r.rtt
		} else {
			s.rtt += (r.rtt - s.rtt) / 8
		}
	}
	if r.failed {
		e.backoff = min(max(2*e.backoff, 25*time.Millisecond), max(s.c.heartbeatPeriod/2, 25*time.Millisecond))
		e.retryAt = now.Add(e.backoff + randomUpTo(e.backoff))
	} else {
		e.backoff = 0
		e.retryAt = time.Time{}
	}
	s.update(e, now)
}

// beat sends one heartbeat attempt, bounded by the end of the lease and by
// the scheduler's life.
func (s *scheduler) beat(e *entry) {
	l := e.l
	l.mu.Lock()
	end := l.leaseEnd
	l.mu.Unlock()
	ctx, cancel := context.WithDeadline(s.ctx, end)
	start := time.Now()
	err := s.c.heartbeatOnce(ctx, l, &sendHeartbeatOptions{}, true)
	r := beatResult{e: e, failed: err != nil && l.ended() == nil}
	if err == nil {
		r.rtt = time.Since(start)
	}
	cancel()
	select {
	case s.done <- r:
	case <-s.ctx.Done():
	}
}

// wakeHeap orders entries by their next wake time.
type wakeHeap []*entry

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].wake.Before(h[j].wake) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *wakeHeap) Push(x any) {
	e := x.(*entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *wakeHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	e.index = -1
	return e
}

// readyHeap orders entries due for a heartbeat by the end of their lease.
type readyHeap []*entry

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	return h[i].due.Before(h[j].due)
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*entry)) }
func (h *readyHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
