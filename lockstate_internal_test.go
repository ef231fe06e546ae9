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
	c.sched.meter.SetCapacity(10.5 * perLock)
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
	c.sched.meter.SetCapacity(100 * perLock)
	if err := <-res; err != nil {
		t.Fatal(err)
	}

	// Past its deadline it fails with ErrHeartbeatCapacity.
	c.sched.meter.SetCapacity(perLock)
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
	off.sched.meter.SetCapacity(perLock)
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

// Acquisitions admitted at once each reserve their share before the
// scheduler counts their locks: they cannot all pass one look at the load.
// A reservation ends when its acquisition fails, or once the scheduler
// counted the lock it holds.
func TestAdmissionReservesForAcquisitionsInFlight(t *testing.T) {
	c := grantClient(t, WithLeaseDuration(time.Hour), WithHeartbeatPeriod(30*time.Minute), WithHeartbeatAdmission(1))
	perLock := 1 / time.Hour.Seconds()
	c.sched.meter.SetCapacity(3.5 * perLock)
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
	c.sched.meter.SetCapacity(1000)
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

// A record version number seen again after an older answer (another call
// of the client, answered later with the item as it was before a renewal)
// keeps the time it was first seen: the holder has not renewed since. The
// simulation's seed 64000275 (invariant 23): a fair head counted a dead
// holder's lease anew from its second read of it, after a transaction of
// the same client returned the item as it was before the holder's last
// renewal, and took the key 59 ms late. An older number seen again after
// the current one keeps its own first time too; a third number starts
// afresh, and the memory is of one number before the current one.
func TestObservationKeepsTheFirstSightAcrossAnOlderAnswer(t *testing.T) {
	o := observations{m: make(map[string]observation), max: 8}
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	steps := []struct {
		rvn  string
		now  int // ms
		want int // ms: when it was first seen, as observe answers
	}{
		{"x", 0, 0},
		{"y", 100, 100}, // the holder renewed
		{"x", 110, 0},   // an older answer: x keeps its first sight
		{"y", 160, 100}, // current again: y was first seen at 100
		{"y", 200, 100}, // unchanged
		{"z", 300, 300}, // renewed
		{"x", 310, 310}, // two numbers back: remembered no more
		{"z", 320, 300}, // z keeps its first sight
		{"z", 400, 300},
	}
	for i, s := range steps {
		if got := o.observe("k", s.rvn, at(s.now)); !got.Equal(at(s.want)) {
			t.Fatalf("step %d (%s at %d ms): first seen at %v, want %d ms", i, s.rvn, s.now, got.Sub(t0), s.want)
		}
	}
}
