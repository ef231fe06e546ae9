package dynamolock

import (
	"container/heap"
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
	"github.com/arielsrv/dynamolock/v2/internal/renewals"
)

// schedEntry is the scheduler's bookkeeping for one held lock, kept in
// the lock itself (no map, no allocation of its own); only the scheduler's
// loop goroutine touches it. Times are nanoseconds since the scheduler's
// epoch, on the monotonic clock.
type schedEntry struct {
	wake    int64   // next time the loop must look at the lock
	due     int64   // end of the lease when queued: the ready heap's order
	retryAt int64   // after a failed beat: when to try again (0: none)
	need    float32 // renewals per second the lock needs at least (renewalNeed), counted in demand
	backoff int32   // after a failed beat: milliseconds the last retry waited
	index   int32   // position in the wake heap plus one; 0 when absent
	beating bool    // a heartbeat is in flight
	queued  bool    // due for a heartbeat, waiting for a free worker
}

// beatResult is a finished heartbeat, reported to the loop.
type beatResult struct {
	l      *Lock
	failed bool          // the write failed without losing the lock: retry with backoff
	rtt    time.Duration // how long a successful beat took
	// throttled: DynamoDB throttled the write, at limit.
	throttled bool
	limit     ThrottleLimit
}

// scheduler is the one goroutine per client that renews every held lock on
// that lock's own schedule, fires session monitors, and records a lock's
// loss the moment its lease runs out. Heartbeats run on a fixed pool of at
// most heartbeatConcurrency worker goroutines, started as needed and kept
// until stop; beats that cannot start at once wait in order of the end of
// their lease, so under overload the locks closest to expiry are renewed
// first.
//
// It also publishes what admission control needs: the renewal rate the
// held locks need at least (renewalNeed each), and feeds the
// meter of the rate the workers sustain (see renewals.Meter) with every
// successful beat.
type scheduler struct {
	c *Client

	mu       sync.Mutex
	pending  []*Lock         // locks whose state changed; the loop recomputes them
	settled  []chan struct{} // closed once the loop has taken in the pending locks (see settle)
	started  bool
	stopping bool
	// draining: Close is releasing every lock; no heartbeat starts (see
	// drain).
	draining atomic.Bool

	kick      chan struct{}   // wakes the loop; capacity 1
	work      chan *Lock      // beats for the workers; capacity heartbeatConcurrency
	done      chan beatResult // finished beats; capacity heartbeatConcurrency
	ctx       context.Context
	cancel    context.CancelFunc
	stopped   chan struct{}  // closed when the loop returns
	workers   sync.WaitGroup // the worker goroutines
	cbRunning int            // session-monitor callbacks running; guarded by mu
	cbIdle    chan struct{}  // closed when cbRunning drops to zero; guarded by mu

	epoch time.Time // the origin of the entries' times

	// Published by the loop for admission control (float64 bits).
	demandBits atomic.Uint64  // renewals per second the scheduled locks need at least
	slackBits  atomic.Uint64  // share of its lease the first queued beat has left; +Inf: none queued
	meter      renewals.Meter // the rate the workers sustain; the loop feeds it
	// reserved is the need of the acquisitions admission control let go
	// that do not hold their locks yet, in reserveUnit; see admit.
	reserved atomic.Int64
	// The slots of acquisitions let go in the last moments (see
	// takeAdmitSlot): until when each is taken (as the entries' times; 0:
	// free) and a count of its takers.
	admitMu    sync.Mutex
	admitUntil []int64
	admitGen   []uint64
	slotless   atomic.Int32 // acquisitions let go without a slot at the end of their wait, not ended yet (see admit)
	unreserved int64        // reservations of held locks, to drop once the loop counted them; guarded by mu

	// Owned by the loop goroutine.
	wakes    wakeHeap
	ready    readyHeap
	slots    int // workers free for a beat
	nworkers int // workers started
	demand   float64
	lastLog  time.Time
}

func newScheduler(c *Client) *scheduler {
	s := &scheduler{
		c:          c,
		kick:       make(chan struct{}, 1),
		work:       make(chan *Lock, c.cfg.heartbeatConcurrency),
		done:       make(chan beatResult, c.cfg.heartbeatConcurrency),
		stopped:    make(chan struct{}),
		slots:      c.cfg.heartbeatConcurrency,
		admitUntil: make([]int64, max(1, c.cfg.heartbeatConcurrency/4)),
		admitGen:   make([]uint64, max(1, c.cfg.heartbeatConcurrency/4)),
		epoch:      c.now(),
		meter:      renewals.NewMeter(c.cfg.heartbeatConcurrency, c.cfg.leaseDuration),
	}
	s.slackBits.Store(math.Float64bits(math.Inf(1)))
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

// drain makes the loop start no more heartbeats: Close releases every
// lock instead, and a release renews nothing that a beat would have
// needed to. It returns once the loop has looked (or ctx ended): no beat
// starts after it. Beats in flight end as they would; the loop goes on
// recording losses at the end of a lease and firing session monitors
// until stop.
func (s *scheduler) drain(ctx context.Context) {
	s.draining.Store(true)
	s.settle(ctx) // its loop turn dispatches after reading the flag
}

// settle waits until the loop has taken in every lock notified before the
// call (scheduled its beats, sent or queued the due ones, or given them
// up: see dispatch), or until ctx ends or the scheduler stops. A lock the
// loop gave up at once shows its end after it.
func (s *scheduler) settle(ctx context.Context) {
	ch := make(chan struct{})
	s.mu.Lock()
	if !s.started || s.stopping {
		s.mu.Unlock()
		return
	}
	s.settled = append(s.settled, ch)
	s.mu.Unlock()
	select {
	case s.kick <- struct{}{}:
	default:
	}
	select {
	case <-ch:
	case <-ctx.Done():
	case <-s.stopped:
	}
}

// stop ends the loop, cancels in-flight heartbeats and waits for the
// workers, then waits for running session-monitor callbacks until ctx ends.
func (s *scheduler) stop(ctx context.Context) error {
	s.mu.Lock()
	s.stopping = true
	started := s.started
	s.mu.Unlock()
	s.cancel()
	if started {
		<-s.stopped
	}
	s.workers.Wait() // each beat ends with s.ctx, which is cancelled
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
	timer := s.c.newTimer(time.Hour)
	defer timer.Stop()
	for {
		s.mu.Lock()
		pending, unreserved, settled := s.pending, s.unreserved, s.settled
		s.pending, s.unreserved, s.settled = nil, 0, nil
		s.mu.Unlock()
		now := s.c.now()
		for _, l := range pending {
			s.update(l, now)
		}
		// The locks these reservations were for were notified before
		// their reservations ended: their need is counted now.
		s.reserved.Add(-unreserved)
		for len(s.wakes) > 0 && s.wakes[0].sched.wake <= s.at(now) {
			s.fire(s.wakes[0], now)
		}
		s.dispatch(now)
		for _, ch := range settled {
			close(ch)
		}

		wait := time.Hour
		if len(s.wakes) > 0 {
			wait = time.Duration(s.wakes[0].sched.wake - s.at(now))
		}
		timer.Reset(wait)
		select {
		case <-s.ctx.Done():
			return
		case <-s.kick:
		case <-timer.C():
		case r := <-s.done:
			s.slots++
			s.finished(r, s.c.now())
		}
	}
}

// The scheduler's one rule of what it can keep, which admission control
// calls too (Client.admit), so that what admission lets in at a steady
// backend the scheduler keeps.
//
// lossMargin is the lease a beat must still have when a worker takes it
// while other beats wait for one: with less it could not land in time (its
// own round trip, and as much again for a backend busy with the beats
// ahead of it), and the scheduler declares the lock lost rather than take
// a worker from locks that can still be saved (dispatch).
func lossMargin(rtt time.Duration) time.Duration { return 2 * rtt }

// renewalNeed is the renewals per second a lock of lease needs at least for
// the scheduler to keep it at round trip rtt: one in every stretch its beat
// may wait, the lease less lossMargin. Under earliest-deadline order, locks
// whose needs add up to no more than the rate the workers sustain are all
// renewed in time. A lease within the margin cannot be kept at any rate:
// its need is one renewal per round trip, more than a worker gives it.
// Before any round trip is measured (rtt 0) it is one renewal per lease.
func renewalNeed(lease, rtt time.Duration) float64 {
	usable := lease - lossMargin(rtt)
	if usable < rtt || usable <= 0 {
		usable = max(rtt, time.Millisecond)
	}
	return 1 / usable.Seconds()
}

// at is t as the entries hold it: nanoseconds since the epoch.
func (s *scheduler) at(t time.Time) int64 { return int64(t.Sub(s.epoch)) }

// update recomputes when the loop must next look at l, and takes a lock
// that ended off the wake heap (a beat of it in flight or queued finds it
// ended and leaves it).
func (s *scheduler) update(l *Lock, now time.Time) {
	if l.heldBy() != nil {
		return // its session's lock is renewed instead
	}
	e := &l.sched
	l.mu.Lock()
	ended := l.reasonLocked() != nil
	sent, leaseEnd, lease := l.sentAt, l.leaseEnd, l.leaseDuration
	var monitorAt time.Time
	if m := l.monitor; m != nil && !m.fired {
		monitorAt = sent.Add(m.safeTime)
	}
	l.mu.Unlock()
	if ended {
		if e.index > 0 {
			heap.Remove(&s.wakes, int(e.index-1))
			s.setNeed(e, 0)
		}
		return
	}
	s.setNeed(e, float32(renewalNeed(lease, s.meter.RoundTrip())))
	wake := s.at(leaseEnd)
	if !monitorAt.IsZero() {
		wake = min(wake, s.at(monitorAt))
	}
	if t, ok := s.beatTime(e, sent); ok {
		wake = min(wake, t)
	}
	e.wake = wake
	if e.index > 0 {
		heap.Fix(&s.wakes, int(e.index-1))
	} else {
		heap.Push(&s.wakes, l)
	}
}

// setNeed counts need as e's lock's share of the demand, and publishes the
// demand.
func (s *scheduler) setNeed(e *schedEntry, need float32) {
	if e.need == need {
		return
	}
	s.demand += float64(need) - float64(e.need)
	e.need = need
	if len(s.wakes) == 0 || s.demand < 0 {
		s.demand = max(0, float64(need)) // no drift from rounding
	}
	s.demandBits.Store(math.Float64bits(s.demand))
}

// fire handles l, which is due: loss at the end of the lease, the session
// monitor, or a heartbeat.
func (s *scheduler) fire(l *Lock, now time.Time) {
	e := &l.sched
	l.mu.Lock()
	ended := l.reasonLocked() != nil
	expired := !now.Before(l.leaseEnd)
	beatAt, beats := s.beatTime(e, l.sentAt)
	beatDue := beats && s.at(now) >= beatAt
	var callback func()
	if m := l.monitor; !ended && !expired && m != nil && !m.fired && !now.Before(l.sentAt.Add(m.safeTime)) {
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
			e.due = s.at(due)
			heap.Push(&s.ready, l)
		}
	}
	s.update(l, now)
}

// dispatch starts queued heartbeats while slots are free, earliest lease end
// first, and reports a backlog.
func (s *scheduler) dispatch(now time.Time) {
	draining := s.draining.Load()
	for s.slots > 0 && len(s.ready) > 0 && !draining {
		l := heap.Pop(&s.ready).(*Lock)
		e := &l.sched
		e.queued = false
		l.mu.Lock()
		ended := l.reasonLocked() != nil
		due := l.sentAt.Add(s.c.cfg.heartbeatPeriod)
		left := l.leaseEnd.Sub(now)
		l.mu.Unlock()
		if ended {
			s.update(l, now)
			continue
		}
		if len(s.ready) >= s.slots && s.meter.RoundTrip() > 0 && left < lossMargin(s.meter.RoundTrip()) {
			// Overloaded (more locks wait than the workers left once this
			// one takes a slot) and this beat could not land before the
			// lease ends: sending it would only take a worker from locks
			// that can still be saved, so the lock is declared lost now.
			// With a worker free for every waiting lock, each is sent.
			l.lose(ErrLeaseExpired, nil)
			s.update(l, now)
			continue
		}
		if now.Sub(due) > s.c.cfg.heartbeatPeriod {
			s.c.metrics.LateBeat()
		}
		s.slots--
		e.beating = true
		s.update(l, now)
		if busy := s.c.cfg.heartbeatConcurrency - s.slots; busy > s.nworkers {
			s.nworkers++
			s.workers.Go(s.worker)
		}
		s.work <- l // never blocks: at most heartbeatConcurrency beats are handed out
	}
	if s.slots > 0 {
		s.meter.Idle()
	}
	slack := math.Inf(1)
	if len(s.ready) > 0 {
		e := &s.ready[0].sched
		slack = float64(e.due-s.at(now)-int64(lossMargin(s.meter.RoundTrip()))) / 1e9 * float64(e.need)
	}
	s.slackBits.Store(math.Float64bits(slack))
	if draining {
		s.c.metrics.SetBacklog(0) // Close releases them: no beat is waited for
	} else {
		s.c.metrics.SetBacklog(len(s.ready))
	}
	if len(s.ready) > 0 && !draining && now.Sub(s.lastLog) > s.c.cfg.heartbeatPeriod {
		s.lastLog = now
		s.c.cfg.logger.LogAttrs(s.ctx, slog.LevelWarn, "heartbeat backlog: more locks are due than can be renewed at once",
			slog.Int("backlog", len(s.ready)), slog.Int("concurrency", s.c.cfg.heartbeatConcurrency))
	}
}

// beatTime is when e's next heartbeat is due, if one should be scheduled:
// one period after its last renewal, or at the retry time after a failure.
func (s *scheduler) beatTime(e *schedEntry, sent time.Time) (int64, bool) {
	if s.c.cfg.heartbeatPeriod <= 0 || e.beating || e.queued {
		return 0, false
	}
	if e.retryAt != 0 {
		return e.retryAt, true
	}
	return s.at(sent.Add(s.c.cfg.heartbeatPeriod)), true
}

// finished records a beat's outcome. A failed beat (network, throttling,
// 5xx) is tried again after a backoff that doubles up to half a period;
// it gives its slot back meanwhile, so failing locks never starve others.
func (s *scheduler) finished(r beatResult, now time.Time) {
	e := &r.l.sched
	e.beating = false
	if r.rtt > 0 {
		s.meter.Beat(r.rtt, now)
	}
	if r.throttled && r.limit.tableLimit() {
		s.meter.Throttled(uint8(r.limit), now)
	}
	if r.failed {
		backoff := min(max(2*time.Duration(e.backoff)*time.Millisecond, 25*time.Millisecond),
			max(s.c.cfg.heartbeatPeriod/2, 25*time.Millisecond), math.MaxInt32*time.Millisecond)
		e.backoff = int32(backoff / time.Millisecond)
		// The jitter is drawn for this lock (see internal/entropy).
		r.l.mu.Lock()
		rvn := r.l.rvn
		r.l.mu.Unlock()
		jitter := time.Duration(entropy.Int64N(int64(backoff), r.l.partitionKey, rvn))
		e.retryAt = max(s.at(now.Add(backoff+jitter)), 1)
	} else {
		e.backoff = 0
		e.retryAt = 0
	}
	s.update(r.l, now)
}

// worker sends the beats the loop hands it, one at a time, until stop.
func (s *scheduler) worker() {
	for {
		select {
		case <-s.ctx.Done():
			return
		case l := <-s.work:
			r := s.beat(l)
			select {
			case s.done <- r:
			case <-s.ctx.Done():
				return
			}
		}
	}
}

// beat sends one heartbeat attempt, bounded by the end of the lease and by
// the scheduler's life.
func (s *scheduler) beat(l *Lock) beatResult {
	l.mu.Lock()
	end := l.leaseEnd
	l.mu.Unlock()
	ctx, cancel := s.c.withDeadline(s.ctx, end)
	start := s.c.now()
	err := s.c.heartbeatOnce(ctx, l, &sendHeartbeatOptions{}, true)
	r := beatResult{l: l, failed: err != nil && l.ended() == nil}
	if err == nil {
		r.rtt = s.c.since(start)
	}
	r.limit, _, r.throttled = throttled(err)
	cancel()
	return r
}

// load returns the renewal rate the scheduled locks need at least and the
// rate the workers sustain (0 until a beat has been measured), per second,
// and the share of its lease the first heartbeat waiting for a worker has
// left (+Inf when none waits).
func (s *scheduler) load() (demand, capacity, slack float64) {
	return math.Float64frombits(s.demandBits.Load()), s.meter.At(s.c.now()),
		math.Float64frombits(s.slackBits.Load())
}

// unreserve ends an admitted acquisition's reservation of units. If it
// holds its locks, they were notified before: the loop drops the
// reservation once it has counted their need, so that admission control
// never sees neither. Otherwise it ends now.
func (s *scheduler) unreserve(units int64, held bool) {
	if held {
		s.mu.Lock()
		if !s.stopping && s.started {
			s.unreserved += units
			s.mu.Unlock()
			s.kickLoop()
			return
		}
		s.mu.Unlock()
	}
	s.reserved.Add(-units)
}

func (s *scheduler) kickLoop() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// wakeHeap orders locks by their next wake time.
type wakeHeap []*Lock

func (h wakeHeap) Len() int           { return len(h) }
func (h wakeHeap) Less(i, j int) bool { return h[i].sched.wake < h[j].sched.wake }
func (h wakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].sched.index = int32(i + 1)
	h[j].sched.index = int32(j + 1)
}
func (h *wakeHeap) Push(x any) {
	l := x.(*Lock)
	*h = append(*h, l)
	l.sched.index = int32(len(*h))
}
func (h *wakeHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	l.sched.index = 0
	return l
}

// readyHeap orders locks due for a heartbeat by the end of their lease.
type readyHeap []*Lock

func (h readyHeap) Len() int           { return len(h) }
func (h readyHeap) Less(i, j int) bool { return h[i].sched.due < h[j].sched.due }
func (h readyHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *readyHeap) Push(x any)        { *h = append(*h, x.(*Lock)) }
func (h *readyHeap) Pop() any {
	old := *h
	l := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return l
}
