package dynamolock

// White-box tests of a held lock's own state: the write turn (a flag and a
// lazily made waiter list instead of a channel per lock), the record of its
// end with a lazily made Done, and admission control.

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// grantClient returns a client of a lock table in an in-memory DynamoDB
// (dynamolocktest), closed at the end of the test.
func grantClient(t *testing.T, opts ...ClientOption) *Client {
	t.Helper()
	return tableClient(t, dynamolocktest.New().Conn(), "state_table", opts...)
}

// poll waits for cond, checking every millisecond, for at most 10 s.
func poll(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func waiting(l *Lock) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rare == nil {
		return 0
	}
	return len(l.rare.waiters)
}

// The write turn is held by one writer at a time and handed to waiters in
// order; a waiter whose context ends leaves the queue and never holds the
// turn; a turn handed over just as its waiter's context ends is passed on,
// not lost.
func TestWriteTurn(t *testing.T) {
	c := grantClient(t, DisableHeartbeat())
	l, err := c.AcquireLock("turn")
	if err != nil {
		t.Fatal(err)
	}
	if !l.tryTakeWrites() {
		t.Fatal("a free turn must be taken")
	}
	if l.tryTakeWrites() {
		t.Fatal("a taken turn must not be taken again")
	}

	// A waiter whose context ends gives up and leaves the queue.
	ctx, cancel := context.WithCancelCause(context.Background())
	gaveUp := make(chan error, 1)
	go func() { gaveUp <- l.takeWrites(ctx) }()
	poll(t, "the waiter to queue", func() bool { return waiting(l) == 1 })
	cause := errors.New("caller gave up")
	cancel(cause)
	if err := <-gaveUp; !errors.Is(err, cause) {
		t.Fatalf("takeWrites = %v, want the context's cause", err)
	}
	if n := waiting(l); n != 0 {
		t.Fatalf("%d waiters left after the only one gave up", n)
	}

	// Waiters get the turn in order, one at a time.
	var order []int
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			if err := l.takeWrites(context.Background()); err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			l.giveWrites()
		})
		poll(t, "waiter "+strconv.Itoa(i)+" to queue", func() bool { return waiting(l) == i+1 })
	}
	l.giveWrites()
	wg.Wait()
	if len(order) != 3 || order[0] != 0 || order[1] != 1 || order[2] != 2 {
		t.Fatalf("turn order %v, want [0 1 2]", order)
	}
	if !l.tryTakeWrites() {
		t.Fatal("the turn must be free once every writer gave it back")
	}

	// A hand-over racing the end of the waiter's context: whichever wins,
	// the turn ends up free, never held by nobody.
	for range 200 {
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { res <- l.takeWrites(ctx) }()
		poll(t, "the waiter to queue", func() bool { return waiting(l) == 1 })
		go cancel()
		l.giveWrites()
		if err := <-res; err == nil {
			l.giveWrites() // it got the turn: it gives it back
		}
		if !l.tryTakeWrites() {
			t.Fatal("the turn was lost in a hand-over")
		}
	}
	l.giveWrites()
}

// The end of a held lock is recorded once; a Done made before the end and
// one made after it are both closed, and the reason is what Err and the
// context Do derives answer. Covers the ordering "Done made while end runs":
// end sets the reason and reads the lazily made context under the lock's
// mutex, so a Done made before sees the cancel, one made after sees the
// reason.
func TestLazyDoneAndEnd(t *testing.T) {
	c := grantClient(t, DisableHeartbeat())
	for i := range 200 {
		l, err := c.AcquireLock("end-" + strconv.Itoa(i))
		if err != nil {
			t.Fatal(err)
		}
		if l.rare != nil {
			t.Fatal("a fresh lock must not carry a Done channel yet")
		}
		var early <-chan struct{}
		if i%2 == 0 {
			early = l.Done()
		}
		var late <-chan struct{}
		var wg sync.WaitGroup
		wg.Go(func() { late = l.Done() })
		if _, err := c.ReleaseLock(l); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		for _, ch := range []<-chan struct{}{early, late, l.Done()} {
			if ch == nil {
				continue
			}
			select {
			case <-ch:
			case <-time.After(10 * time.Second):
				t.Fatal("Done not closed after release")
			}
		}
		if err := l.Err(); !errors.Is(err, ErrLockAlreadyReleased) {
			t.Fatalf("Err = %v, want ErrLockAlreadyReleased", err)
		}
		if !l.IsReleased() {
			t.Fatal("IsReleased = false after release")
		}
		if cause := context.Cause(l.endContext()); !errors.Is(cause, ErrLockAlreadyReleased) {
			t.Fatalf("cause = %v, want ErrLockAlreadyReleased", cause)
		}
		if c.HasLock("end-"+strconv.Itoa(i), "") {
			t.Fatal("a released lock is still in the registry")
		}
		if l.end(l.lostError(ErrLockTakenOver, nil)) {
			t.Fatal("a lock ended twice")
		}
	}
}

// Admission control: an acquisition waits while the held locks' demand,
// with it, exceeds the fraction of the measured capacity, proceeds once the
// capacity allows it, and gives up at its deadline or when its context ends.
func TestAdmissionWaitsForCapacity(t *testing.T) {
	c := grantClient(t, WithLeaseDuration(time.Hour), WithHeartbeatPeriod(30*time.Minute), WithHeartbeatAdmission(0.5))
	for i := range 4 {
		if _, err := c.AcquireLock("adm-" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	perLock := 1 / time.Hour.Seconds()
	poll(t, "the scheduler to count the held locks", func() bool {
		d, _, _ := c.sched.load()
		return math.Abs(d-4*perLock) < perLock/100 && c.sched.reserved.Load() == 0
	})
	// Room for 5 locks in all at half the capacity: the fifth is admitted
	// at once, the sixth waits.
	c.sched.meter.capacityBits.Store(math.Float64bits(10.5 * perLock))
	if _, err := c.AcquireLock("adm-4"); err != nil {
		t.Fatal(err)
	}
	poll(t, "the scheduler to count the fifth lock", func() bool {
		d, _, _ := c.sched.load()
		return d > 4.5*perLock && c.sched.reserved.Load() == 0
	})
	if n := c.Stats().AdmissionWaits; n != 0 {
		t.Fatalf("AdmissionWaits = %d before any wait", n)
	}

	// Its context ends while it waits.
	ctx, cancel := context.WithCancel(context.Background())
	res := make(chan error, 1)
	go func() {
		_, err := c.AcquireLockWithContext(ctx, "adm-5")
		res <- err
	}()
	poll(t, "the acquisition to wait", func() bool { return c.Stats().AdmissionWaits == 1 })
	cancel()
	err := <-res
	var lng *LockNotGrantedError
	if !errors.As(err, &lng) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a *LockNotGrantedError matching context.Canceled", err)
	}

	// It proceeds once the measured capacity allows it.
	go func() {
		_, err := c.AcquireLock("adm-5")
		res <- err
	}()
	poll(t, "the acquisition to wait", func() bool { return c.Stats().AdmissionWaits == 2 })
	c.sched.meter.capacityBits.Store(math.Float64bits(100 * perLock))
	if err := <-res; err != nil {
		t.Fatal(err)
	}

	// Past its deadline it fails with ErrHeartbeatCapacity.
	c.sched.meter.capacityBits.Store(math.Float64bits(perLock))
	_, err = c.admit(context.Background(), 1, time.Hour, time.Now().Add(20*time.Millisecond), "key \"adm-6\"")
	if !errors.As(err, &lng) || !errors.Is(err, ErrHeartbeatCapacity) {
		t.Fatalf("err = %v, want a *LockNotGrantedError matching ErrHeartbeatCapacity", err)
	}

	// Off: nothing waits, though the held locks need more than the
	// capacity. (A client's configuration is fixed in New: a second one.)
	off := grantClient(t, WithLeaseDuration(time.Hour), WithHeartbeatPeriod(30*time.Minute), WithHeartbeatAdmission(0))
	for i := range 2 {
		if _, err := off.AcquireLock("adm-off-" + strconv.Itoa(i)); err != nil {
			t.Fatal(err)
		}
	}
	off.sched.meter.capacityBits.Store(math.Float64bits(perLock))
	if _, err := off.admit(context.Background(), 1, time.Hour, time.Now(), "key \"adm-6\""); err != nil {
		t.Fatal(err)
	}
}

// A held lock is one 256-byte allocation (Go's size class): a field more
// moves it to 288. See BenchmarkHeapPerHeldLock for the whole cost.
func TestLockSize(t *testing.T) {
	if n := unsafe.Sizeof(Lock{}); n > 256 {
		t.Errorf("Lock is %d bytes, more than 256", n)
	}
}

// Registry keys: the key itself without a sort key value; with one, a
// form no key and no other (key, sort key) pair shares.
func TestRegistryKey(t *testing.T) {
	p := func(s string) *string { return &s }
	keys := map[string]string{}
	for _, k := range []struct {
		key string
		sk  *string
	}{{"a", p("bc")}, {"ab", p("c")}, {"abc", nil}, {"1:abc", nil}, {"a", nil}} {
		rk := registryKey(k.key, k.sk)
		if prev, ok := keys[rk]; ok {
			t.Fatalf("%q and %q share the registry key %q", prev, k.key, rk)
		}
		keys[rk] = k.key
	}
	if registryKey("abc", nil) != "abc" {
		t.Fatal("a key without a sort key must be its own registry key")
	}
	c := grantClient(t, DisableHeartbeat(), WithSortKey("sk", "bc"))
	if _, err := c.AcquireLock("a"); err != nil {
		t.Fatal(err)
	}
	if !c.HasLock("a", "") || !c.HasLock("a", "bc") {
		t.Fatal("HasLock does not find the lock held under the default sort key")
	}
	if c.HasLock(registryKey("a", p("bc")), "") {
		t.Fatal("an invalid key matched a held lock's registry key")
	}
}

// The capacity admission control compares with: workers / round trip until
// a window passes with every worker busy, then the rate measured in such
// windows; a window in which a worker was free measures nothing.
func TestSchedulerCapacity(t *testing.T) {
	c := grantClient(t, DisableHeartbeat(), WithHeartbeatConcurrency(4))
	s := c.sched // its loop never starts: no lock is acquired
	m := &s.meter
	m.rtt = 10 * time.Millisecond
	start := time.Now()
	m.measure(start) // opens the first window
	if _, capacity, _ := s.load(); capacity != 400 {
		t.Fatalf("capacity %v before any saturated window, want 4 workers / 10 ms = 400", capacity)
	}
	// A window with every worker busy: 100 beats in 500 ms.
	s.slots = 0
	for i := 1; i <= 100; i++ {
		m.measure(start.Add(time.Duration(i) * 5 * time.Millisecond))
	}
	// One window is a young memory: admission counts on youngShare(1) of
	// its rate.
	first := 200 * youngShare(1)
	if first > 0.76*200 {
		t.Fatalf("a memory of one saturated window counts on %.2f of its rate, want about three quarters: the worst of a few windows is an optimistic guess", first/200)
	}
	if _, capacity, _ := s.load(); math.Abs(capacity-first) > 1e-9 {
		t.Fatalf("capacity %v after a saturated window of 100 beats in 500 ms, want 200 × %.3f", capacity, youngShare(1))
	}
	// Windows in which a worker was free (as dispatch records it) measure
	// nothing, even at another rate.
	for i := 1; i <= 500; i++ {
		m.idle()
		m.measure(start.Add(500*time.Millisecond + time.Duration(i)*2*time.Millisecond))
	}
	if _, capacity, _ := s.load(); math.Abs(capacity-first) > 1e-9 {
		t.Fatalf("capacity %v after a window with a free worker, want still %v", capacity, first)
	}
	// No saturated window for longer than the horizon (3 s after the one
	// that ended at 0.5 s): the workers kept up with everything, and the
	// rate rises by a quarter with each window, up to workers / round trip
	// (issue 21: a short slowdown must not keep admission shut).
	at := func(i int) time.Time { return start.Add(1500*time.Millisecond + time.Duration(i)*2*time.Millisecond) }
	for i := 1; i <= 1250; i++ { // to 4.0 s: one window past the horizon
		m.idle()
		m.measure(at(i))
	}
	if _, capacity, _ := s.load(); math.Abs(capacity-first*1.25) > 1e-9 {
		t.Fatalf("capacity %v one window past the horizon, want %v × 1.25", capacity, first)
	}
	for i := 1251; i <= 2250; i++ {
		m.idle()
		m.measure(at(i))
	}
	if _, capacity, _ := s.load(); capacity != 400 {
		t.Fatalf("capacity %v 6 s after the last saturated window, want 4 workers / 10 ms = 400", capacity)
	}
	// A saturated window replaces the old rate outright: 50 beats in 500 ms.
	m.windowIdle = false
	for i := 1; i <= 50; i++ {
		m.measure(at(2250).Add(time.Duration(i) * 10 * time.Millisecond))
	}
	if _, capacity, _ := s.load(); math.Abs(capacity-100*youngShare(1)) > 1 {
		t.Fatalf("capacity %v after a fresh saturated window of 100/s, want 100 × %.3f (a memory of one window)", capacity, youngShare(1))
	}
}

// Acquisitions admitted at once each reserve their share before the
// scheduler counts their locks: they cannot all pass one look at the load.
// A reservation ends when its acquisition fails, or once the scheduler
// counted the lock it holds.
func TestAdmissionReservesForAcquisitionsInFlight(t *testing.T) {
	c := grantClient(t, WithLeaseDuration(time.Hour), WithHeartbeatPeriod(30*time.Minute), WithHeartbeatAdmission(1))
	perLock := 1 / time.Hour.Seconds()
	c.sched.meter.capacityBits.Store(math.Float64bits(3.5 * perLock))
	far := time.Now().Add(time.Hour)
	var ends []admission
	for range 3 {
		end, err := c.admit(context.Background(), 1, time.Hour, far, "k")
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, end)
	}
	if _, err := c.admit(context.Background(), 1, time.Hour, time.Now(), "k"); !errors.Is(err, ErrHeartbeatCapacity) {
		t.Fatalf("a fourth acquisition beside three in flight: err = %v, want ErrHeartbeatCapacity", err)
	}
	ends[0].end(false) // failed: its share is free at once
	end, err := c.admit(context.Background(), 1, time.Hour, time.Now(), "k")
	if err != nil {
		t.Fatalf("after one failed: %v", err)
	}
	end.end(false)
	// A held lock: counted by the scheduler, then its reservation dropped.
	l, err := c.AcquireLock("held")
	if err != nil {
		t.Fatal(err)
	}
	poll(t, "the reservation of the held lock to end", func() bool {
		d, _, _ := c.sched.load()
		return c.sched.reserved.Load() == int64(2*math.Ceil(perLock*reserveUnit)) && d > 0.5*perLock
	})
	if _, err := c.admit(context.Background(), 1, time.Hour, time.Now(), "k"); !errors.Is(err, ErrHeartbeatCapacity) {
		t.Fatalf("two in flight and one held: err = %v, want ErrHeartbeatCapacity", err)
	}
	_ = l
	ends[1].end(false)
	ends[2].end(false)
}

// The heartbeat that waited longest for a worker has less than the margin
// of its lease left: admission waits whatever the rate says.
func TestAdmissionWaitsWhileTheMarginDoesNotHold(t *testing.T) {
	c := grantClient(t, WithLeaseDuration(time.Hour), WithHeartbeatPeriod(30*time.Minute))
	c.sched.meter.capacityBits.Store(math.Float64bits(1000))
	c.sched.slackBits.Store(math.Float64bits(admissionMargin / 2))
	_, err := c.admit(context.Background(), 1, time.Hour, time.Now().Add(30*time.Millisecond), "k")
	if !errors.Is(err, ErrHeartbeatCapacity) || !strings.Contains(err.Error(), "of its lease left") {
		t.Fatalf("err = %v, want ErrHeartbeatCapacity naming the margin", err)
	}
	c.sched.slackBits.Store(math.Float64bits(math.Inf(1)))
	end, err := c.admit(context.Background(), 1, time.Hour, time.Now(), "k")
	if err != nil {
		t.Fatal(err)
	}
	end.end(false)
}

// The capacity is the lowest rate of the spans of saturated windows of the
// last minute (rateMemory; spans of 2 s for the default lease): a lock
// admitted at the average, or at the best of a shorter memory, is lost in
// the next dip longer than its lease's slack; a dip of half a second
// counts for its span. While the windows are few it counts on less
// (youngShare).
func TestSchedulerCapacityIsTheWorstRecentSpan(t *testing.T) {
	c := grantClient(t, DisableHeartbeat(), WithHeartbeatConcurrency(4))
	s := c.sched // its loop never starts: no lock is acquired
	m := &s.meter
	if m.span != 4 {
		t.Fatalf("span %d windows for the default lease, want 4 (2 s)", m.span)
	}
	m.rtt = time.Millisecond
	start := time.Now()
	m.measure(start)
	s.slots = 0
	at := start
	windows := 0
	window := func(beats int) { // one saturated window of 500 ms
		windows++
		for range beats {
			at = at.Add(500 * time.Millisecond / time.Duration(beats))
			m.measure(at)
		}
	}
	want := func(rate float64, what string) {
		t.Helper()
		if _, capacity, _ := s.load(); math.Abs(capacity-rate) > 1e-6*rate {
			t.Fatalf("capacity %v %s, want %v", capacity, what, rate)
		}
	}
	window(200) // 400/s
	window(50)  // 100/s for half a second
	for range 3 {
		window(200)
	}
	want(325*youngShare(windows), "after a dip to 100/s for half a second among 400/s (its span: 325/s)")
	for range 4 {
		window(50) // 100/s for a whole span
	}
	for range 10 {
		window(200)
	}
	want(100*youngShare(windows), "after 2 s at 100/s")
	for windows < int(time.Minute/measureWindow)+9-1 { // the dip's last window 59.5 s old
		window(200)
	}
	want(100, "just under a minute after 2 s at 100/s")
	for range 5 { // 62 s: every span in memory at 400/s
		window(200)
	}
	want(400, "once the dip is over a minute old")
}

// Found by the simulation (invariant 14, no refusal without cause): a
// client that measured a low rate in one saturated window and then held
// nothing sent no heartbeats, so no window ever closed and the stale rate
// never rose; every acquisition asking for more than that rate allowed was
// refused, for good, by a client renewing nothing with its workers idle.
// A window in which no beat ended is a window with a free worker: the
// stale rate rises with each one, as with windows that measured nothing.
func TestSchedulerCapacityRisesWhileNoBeatEnds(t *testing.T) {
	c := grantClient(t, DisableHeartbeat(), WithHeartbeatConcurrency(1))
	s := c.sched // its loop never starts: no lock is acquired
	m := &s.meter
	m.rtt = 5 * time.Millisecond // workers / round trip: 200/s
	m.rttNanos.Store(int64(m.rtt))
	now := time.Now()
	start := now.Add(-measureWindow)
	m.measure(start) // opens the first window
	s.slots = 0
	m.measure(now) // a saturated window of one beat in 500 ms: 2/s, ending now
	if _, capacity, _ := s.load(); math.Abs(capacity-2*youngShare(1)) > 1e-9 {
		t.Fatalf("capacity %v after a saturated window of one beat in 500 ms, want 2 (of which it counts %.2f while it has one window)", capacity, youngShare(1))
	}
	// No beat ends from here on (the client holds nothing). Past the
	// horizon the rate rises a quarter per window: above 2/s within the
	// horizon and one window more.
	deadline := time.Now().Add(measureHorizon + 5*measureWindow)
	for {
		_, capacity, _ := s.load()
		if capacity > 2 {
			t.Logf("capacity %.1f/s after %s without a beat", capacity, time.Since(now).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("capacity still %v/s after %s without a beat (horizon %s): admission stays shut for a client that renews nothing", capacity, time.Since(now).Round(time.Millisecond), measureHorizon)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
