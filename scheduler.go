package dynamolock

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// schedState is a lock's bookkeeping in the scheduler; only the scheduler
// goroutine touches it.
type schedState struct {
	index   int       // position in the wake heap; -1 when absent
	wake    time.Time // next time the scheduler must look at the lock
	beating bool      // a heartbeat is in flight
	queued  bool      // due for a heartbeat, waiting for a free slot
	due     time.Time // end of the lease when queued: the ready heap's order
	retryAt time.Time // after a failed beat: when to try again (zero: none)
	backoff time.Duration
}

// beatResult is a finished heartbeat, reported to the loop.
type beatResult struct {
	l      *Lock
	failed bool          // the write failed without losing the lock: retry with backoff
	rtt    time.Duration // how long a successful beat took
}

// scheduler is the one goroutine per client that renews every held lock on
// that lock's own schedule, fires session monitors, and declares a lock lost
// the moment its lease runs out. Heartbeats run in at most
// heartbeatConcurrency goroutines; beats that cannot start at once wait in
// order of the end of their lease, so under overload the locks closest to
// expiry are renewed first.
type scheduler struct {
	c *Client

	mu       sync.Mutex
	pending  []*Lock // locks whose state changed; the loop recomputes them
	started  bool
	stopping bool

	kick    chan struct{}   // wakes the loop; capacity 1
	done    chan beatResult // finished beats; capacity heartbeatConcurrency
	ctx     context.Context
	cancel  context.CancelFunc
	stopped chan struct{}  // closed when the loop returns
	wg      sync.WaitGroup // beats and session-monitor callbacks

	// Owned by the loop goroutine.
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

// stop ends the loop and waits for in-flight heartbeats and running
// session-monitor callbacks until ctx ends.
func (s *scheduler) stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	started := s.started
	s.mu.Unlock()
	s.cancel()
	if started {
		<-s.stopped
	}
	idle := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(idle)
	}()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("dynamolock: close: session monitor callbacks still running: %w", ctx.Err())
	}
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
			s.update(l, now)
		}
		for len(s.wakes) > 0 && !s.wakes[0].sched.wake.After(now) {
			s.fire(s.wakes[0], now)
		}
		s.dispatch(now)

		wait := time.Hour
		if len(s.wakes) > 0 {
			wait = s.wakes[0].sched.wake.Sub(now)
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

// update recomputes when the loop must next look at l.
func (s *scheduler) update(l *Lock, now time.Time) {
	l.mu.Lock()
	held := l.state == stateHeld
	lookup, lease := l.lookupTime, l.leaseDuration
	var monitorAt time.Time
	if m := l.monitor; m != nil && !m.fired {
		monitorAt = lookup.Add(m.safeTime)
	}
	l.mu.Unlock()
	if !held {
		if l.sched.index >= 0 && l.sched.index < len(s.wakes) && s.wakes[l.sched.index] == l {
			heap.Remove(&s.wakes, l.sched.index)
		}
		return
	}
	wake := lookup.Add(lease)
	if !monitorAt.IsZero() && monitorAt.Before(wake) {
		wake = monitorAt
	}
	if t, ok := s.beatTime(l, lookup); ok && t.Before(wake) {
		wake = t
	}
	l.sched.wake = wake
	if l.sched.index >= 0 && l.sched.index < len(s.wakes) && s.wakes[l.sched.index] == l {
		heap.Fix(&s.wakes, l.sched.index)
	} else {
		heap.Push(&s.wakes, l)
	}
}

// fire handles l, which is due: loss at the end of the lease, the session
// monitor, or a heartbeat.
func (s *scheduler) fire(l *Lock, now time.Time) {
	l.mu.Lock()
	held := l.state == stateHeld
	expired := !now.Before(l.leaseEndLocked())
	beatAt, beats := s.beatTime(l, l.lookupTime)
	beatDue := beats && !now.Before(beatAt)
	var callback func()
	if m := l.monitor; held && !expired && m != nil && !m.fired && !now.Before(l.lookupTime.Add(m.safeTime)) {
		m.fired = true
		callback = m.callback
	}
	l.mu.Unlock()
	switch {
	case !held:
	case expired:
		// The lease ran out with no successful beat. Even if one is in
		// flight, its late success could not make the lapsed time safe.
		l.lose(ErrLeaseExpired, nil)
	default:
		if callback != nil {
			s.wg.Go(callback)
		}
		if beatDue {
			l.sched.queued = true
			l.mu.Lock()
			l.sched.due = l.leaseEndLocked()
			l.mu.Unlock()
			heap.Push(&s.ready, l)
		}
	}
	s.update(l, now)
}

// dispatch starts queued heartbeats while slots are free, earliest lease end
// first, and reports a backlog.
func (s *scheduler) dispatch(now time.Time) {
	for s.slots > 0 && len(s.ready) > 0 {
		l := heap.Pop(&s.ready).(*Lock)
		l.sched.queued = false
		l.mu.Lock()
		held := l.state == stateHeld
		due := l.lookupTime.Add(s.c.heartbeatPeriod)
		left := l.leaseEndLocked().Sub(now)
		l.mu.Unlock()
		if !held {
			continue
		}
		if len(s.ready) > 0 && s.rtt > 0 && left < 2*s.rtt {
			// Overloaded (others wait too): this beat could not land before
			// the lease ends.
			// Sending it would only take capacity from locks that can
			// still be saved, so the lock is declared lost now.
			l.lose(ErrLeaseExpired, nil)
			continue
		}
		if now.Sub(due) > s.c.heartbeatPeriod {
			s.c.metrics.lateBeat()
		}
		s.slots--
		l.sched.beating = true
		s.update(l, now)
		s.wg.Go(func() { s.beat(l) })
	}
	s.c.metrics.setBacklog(len(s.ready))
	if len(s.ready) > 0 && now.Sub(s.lastLog) > s.c.heartbeatPeriod {
		s.lastLog = now
		s.c.logger.LogAttrs(s.ctx, slog.LevelWarn, "heartbeat backlog: more locks are due than can be renewed at once",
			slog.Int("backlog", len(s.ready)), slog.Int("concurrency", s.c.heartbeatConcurrency))
	}
}

// beatTime is when l's next heartbeat is due, if one should be scheduled:
// one period after its last renewal, or at the retry time after a failure.
func (s *scheduler) beatTime(l *Lock, lookup time.Time) (time.Time, bool) {
	if s.c.heartbeatPeriod <= 0 || l.sched.beating || l.sched.queued {
		return time.Time{}, false
	}
	if !l.sched.retryAt.IsZero() {
		return l.sched.retryAt, true
	}
	return lookup.Add(s.c.heartbeatPeriod), true
}

// finished records a beat's outcome. A failed beat (network, throttling,
// 5xx) is tried again after a backoff that doubles up to half a period;
// it gives its slot back meanwhile, so failing locks never starve others.
func (s *scheduler) finished(r beatResult, now time.Time) {
	l := r.l
	l.sched.beating = false
	if r.rtt > 0 {
		if s.rtt == 0 {
			s.rtt = r.rtt
		} else {
			s.rtt += (r.rtt - s.rtt) / 8
		}
	}
	if r.failed {
		l.sched.backoff = min(max(2*l.sched.backoff, 25*time.Millisecond), max(s.c.heartbeatPeriod/2, 25*time.Millisecond))
		l.sched.retryAt = now.Add(l.sched.backoff + jitter(l.sched.backoff))
	} else {
		l.sched.backoff = 0
		l.sched.retryAt = time.Time{}
	}
	s.update(l, now)
}

// beat sends one heartbeat attempt, bounded by the end of the lease.
func (s *scheduler) beat(l *Lock) {
	l.mu.Lock()
	end := l.leaseEndLocked()
	l.mu.Unlock()
	ctx, cancel := context.WithDeadline(s.ctx, end)
	start := time.Now()
	err := s.c.heartbeatOnce(ctx, l, &sendHeartbeatOptions{}, true)
	r := beatResult{l: l, failed: err != nil && !errors.Is(err, ErrLockLost)}
	if err == nil {
		r.rtt = time.Since(start)
	}
	cancel()
	s.done <- r
}

// wakeHeap orders locks by their next wake time.
type wakeHeap []*Lock

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].sched.wake.Before(h[j].sched.wake) }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sched.index = i
	h[j].sched.index = j
}
func (h *wakeHeap) Push(x any) {
	l := x.(*Lock)
	l.sched.index = len(*h)
	*h = append(*h, l)
}
func (h *wakeHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.sched.index = -1
	return l
}

// readyHeap orders locks due for a heartbeat by the end of their lease.
type readyHeap []*Lock

func (h readyHeap) Len() int { return len(h) }
func (h readyHeap) Less(i, j int) bool {
	return h[i].sched.due.Before(h[j].sched.due)
}
func (h readyHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)   { *h = append(*h, x.(*Lock)) }
func (h *readyHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return l
}
