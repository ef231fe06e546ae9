package sim

import (
	"context"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/clock"
)

// Each client's own clock (issue 21, item 5; docs/SIMULATION.md, "Clocks").
// The library reads time and waits only through its client's clock
// (internal/clock); with -sim.clocks other than off, every simulated client
// gets a simClock built over the bubble's virtual time: a wall-clock offset,
// a rate error, and whole process pauses.

var (
	flagClocks = flag.String("sim.clocks", "off", "each client's own clock: off (every client reads the bubble's clock), "+
		"within (offsets within the seed's skew bound, rate errors within -sim.clockrate, process pauses of up to three leases; "+
		"guarded writes fenced), or beyond (each seed breaks one assumption: see -sim.clockbreak)")
	flagClockRate = flag.Float64("sim.clockrate", 0, "with -sim.clocks=within: the largest difference between two clients' clock rates "+
		"(0.001: one clock gains 1 ms per second on another); 0: the rate assumption's own, 1 ms over the seed's longest lease "+
		"(a larger value searches beyond it)")
	flagClockBreak = flag.String("sim.clockbreak", "any", "with -sim.clocks=beyond: the assumption each seed breaks: "+
		"skew (a client's wall clock ahead of the others by more than its WithClockSkewBound), "+
		"rate (one client's clock 5-20% slow), unfenced (holders write the data item without the lock's fencing check, "+
		"paused between checking their lock and writing), or any (the seed chooses)")
)

// clockAfterRun: after the run's virtual duration plus this, no drift
// matters (the clients are closed by then).
const clockAfterRun = 15 * time.Second

// simClock is one simulated host's clock: reading = origin + offset +
// rate × (bubble time since origin). A pause stops the client's process:
// its timers and deadlines do not fire, and its requests are neither sent
// nor answered, until the pause ends; its clock keeps running (the host's
// clock does), so the process sees it jump when it resumes.
type simClock struct {
	origin time.Time
	offset time.Duration
	rate   float64

	// step is the world's (replay_test.go): timers held by a pause fire
	// through it, in an order fixed by what they are.
	step func(key string)

	mu          sync.Mutex
	pausedUntil time.Time // in bubble time
	// woken counts the callers of resume waiting for the end of the
	// current pause (see resumeAt).
	woken time.Duration
}

func (k *simClock) String() string {
	return fmt.Sprintf("clock offset %s rate %+.4f%%", k.offset, (k.rate-1)*100)
}

func (k *simClock) Now() time.Time { return k.at(time.Now()) }

// at is this clock's reading at bubble time b.
func (k *simClock) at(b time.Time) time.Time {
	return k.origin.Add(k.offset + time.Duration(float64(b.Sub(k.origin))*k.rate))
}

// bubble is the first bubble instant at which this clock reads t or later
// (its inverse). The float arithmetic of at can read a nanosecond short of
// t at the instant the division gives; without the correction a context
// whose deadline is t ended while this clock still read t − 1 ns, and the
// library, asking whether the lease had run out, was told no at the
// instant its deadline said yes.
func (k *simClock) bubble(t time.Time) time.Time {
	b := k.origin.Add(k.span(t.Sub(k.origin) - k.offset))
	for i := 0; i < 16 && k.at(b).Before(t); i++ { // a few at most; bounded for times out of range
		b = b.Add(time.Nanosecond)
	}
	return b
}

// span is how much bubble time passes while this clock moves d (rounded
// up, so that a wait of d never ends before d by this clock).
func (k *simClock) span(d time.Duration) time.Duration {
	return time.Duration(math.Ceil(float64(d) / k.rate))
}

// pause stops the client's process for d of bubble time from now.
func (k *simClock) pause(d time.Duration) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if end := time.Now().Add(d); end.After(k.pausedUntil) {
		if !k.pausedUntil.After(time.Now()) {
			k.woken = 0
		}
		k.pausedUntil = end
	}
}

// resumeAt returns when the caller may go on after the current pause, or
// the zero time when the process runs. Goroutines that all woke at the
// pause's end would go on in the Go scheduler's order, not the seed's
// (replay_test.go). Timers of the client that fell due during the pause
// fire at its end, each through a step (see afterFunc). Callers of resume
// come one at a time (from a step) and wake a nanosecond apart after that,
// in the order they came to wait.
func (k *simClock) resumeAt(timer bool) time.Time {
	if k == nil {
		return time.Time{}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !k.pausedUntil.After(time.Now()) {
		return time.Time{}
	}
	if timer {
		return k.pausedUntil
	}
	k.woken++
	return k.pausedUntil.Add(k.woken)
}

// resume waits until the process runs (nil: it always does). Callers come
// to it from a step (world.step), one at a time, so that the order in
// which they wake is the seed's.
func (k *simClock) resume() {
	for {
		until := k.resumeAt(false)
		if until.IsZero() {
			return
		}
		time.Sleep(time.Until(until))
	}
}

// afterFunc runs f in its own goroutine once d has passed by this clock and
// the process is not paused; stop cancels it. A timer that falls due during
// a pause fires at its end through a step keyed by what it is (its due
// instant and the stack that set it): two of a client's timers due at one
// instant (a heartbeat's context and the scheduler's timer, both at the end
// of the lease) went on in the Go scheduler's order.
func (k *simClock) afterFunc(d time.Duration, f func()) (stop func() bool) {
	var mu sync.Mutex
	var t *time.Timer
	stopped, held := false, false
	span := time.Duration(0)
	if d > 0 {
		span = time.Until(k.bubble(k.Now().Add(d))) // when this clock has moved d
	}
	due, setter := time.Now().Add(span).UnixNano(), stackHash(3) // the step's key, if a pause holds it
	var fire func()
	fire = func() {
		mu.Lock()
		if stopped {
			mu.Unlock()
			return
		}
		if until := k.resumeAt(true); !until.IsZero() {
			held = true
			t = time.AfterFunc(time.Until(until), fire)
			mu.Unlock()
			return
		}
		if held && k.step != nil {
			held = false
			mu.Unlock()
			k.step(fmt.Sprintf("timer due %d @%016x", due, setter))
			fire() // stopped meanwhile, or paused again
			return
		}
		stopped = true
		mu.Unlock()
		f()
	}
	mu.Lock()
	t = time.AfterFunc(span, fire)
	mu.Unlock()
	return func() bool {
		mu.Lock()
		defer mu.Unlock()
		was := !stopped
		stopped = true
		t.Stop()
		return was
	}
}

// simTimer is a timer of a simClock, with time.Timer's semantics since Go
// 1.23: after Stop or Reset returns, no stale value is received.
type simTimer struct {
	k    *simClock
	c    chan time.Time
	mu   sync.Mutex
	gen  int
	stop func() bool
}

func (k *simClock) NewTimer(d time.Duration) clock.Timer {
	t := &simTimer{k: k, c: make(chan time.Time, 1)}
	t.mu.Lock()
	t.armLocked(d)
	t.mu.Unlock()
	return t
}

func (t *simTimer) armLocked(d time.Duration) {
	t.gen++
	gen := t.gen
	t.stop = t.k.afterFunc(d, func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		if gen == t.gen {
			select {
			case t.c <- t.k.Now():
			default:
			}
		}
	})
}

func (t *simTimer) C() <-chan time.Time { return t.c }

func (t *simTimer) Stop() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.gen++
	was := t.stop()
	select {
	case <-t.c:
		was = true
	default:
	}
	return was
}

func (t *simTimer) Reset(d time.Duration) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	was := t.stop()
	select {
	case <-t.c:
		was = true
	default:
	}
	t.armLocked(d)
	return was
}

// WithDeadline ends the returned context when this clock reaches deadline,
// with context.DeadlineExceeded (its Err and its Cause), and not during a
// pause. Contexts derived from it see Canceled with that cause, where the
// standard library's would see DeadlineExceeded: the library does not tell
// them apart.
func (k *simClock) WithDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	cctx, cancel := context.WithCancelCause(ctx)
	d := &deadlineCtx{Context: cctx, deadline: k.bubble(deadline)}
	if pd, ok := ctx.Deadline(); ok && pd.Before(d.deadline) {
		d.deadline = pd
	}
	expire := func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if cctx.Err() == nil {
			d.expired = true
			cancel(context.DeadlineExceeded)
		}
	}
	left := deadline.Sub(k.Now())
	if left <= 0 { // as context.WithDeadline: already done when it returns
		expire()
		return d, func() { cancel(context.Canceled) }
	}
	stop := k.afterFunc(left, expire)
	return d, func() {
		stop()
		cancel(context.Canceled)
	}
}

type deadlineCtx struct {
	context.Context
	deadline time.Time // in bubble time
	mu       sync.Mutex
	expired  bool
}

func (d *deadlineCtx) Deadline() (time.Time, bool) { return d.deadline, true }

func (d *deadlineCtx) Err() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.expired {
		return context.DeadlineExceeded
	}
	return d.Context.Err()
}

// clockPlan is what -sim.clocks makes of one seed.
type clockPlan struct {
	mode     string // off, within, beyond
	breaks   string // beyond: skew, rate or unfenced
	pauses   bool
	unfenced bool
}

// planClocks gives every client of the seed its clock (before any starts),
// from a random stream of its own: with -sim.clocks=off nothing is drawn
// and every seed plays as without clocks.
func (w *world) planClocks(dur time.Duration) []string {
	switch *flagClocks {
	case "off":
		return nil
	case "within", "beyond":
	default:
		panic("-sim.clocks: want off, within or beyond, not " + *flagClocks)
	}
	r := rand.New(rand.NewPCG(w.seed, 0xc10c))
	p := clockPlan{mode: *flagClocks, pauses: true}
	if p.mode == "beyond" {
		kinds := []string{"skew", "rate", "unfenced"}
		p.breaks = *flagClockBreak
		if p.breaks == "any" {
			p.breaks = kinds[r.IntN(len(kinds))]
		}
		switch p.breaks {
		case "skew":
			p.pauses = false
		case "rate":
		case "unfenced":
			p.unfenced = true
		default:
			panic("-sim.clockbreak: want skew, rate, unfenced or any, not " + p.breaks)
		}
	}
	w.clocks = p
	// Within the assumptions: any two wall clocks stay within the smallest
	// skew bound of the seed's clients over the whole run (offsets and the
	// drift of rate errors together), and any two rates differ by at most
	// -sim.clockrate. Without a skew bound, no client trusts wall time
	// (fencing-token bases aside: deletions are left out by default), so
	// offsets are up to ±10 s.
	bound := time.Duration(0)
	for _, cl := range w.slots {
		if cl.skewBound > 0 && (bound == 0 || cl.skewBound < bound) {
			bound = cl.skewBound
		}
	}
	// Only the clients with a bound store expiries and trust them, so only
	// their clocks must agree: their offsets lie within half the bound and
	// their rates close enough that the drift over the run adds at most
	// the other half.
	// The rate assumption (doc.go, "Assumptions") is that a contender
	// gains less on a holder than the slack between them: e times the
	// lease below one round trip. The slack here is at least two legs of
	// 0.5 ms (an SDK attempt's least delay each way), so by default the
	// spread of rates is 1 ms over the longest lease a lock of the seed can
	// hold (a heartbeat may ensure up to twice the lease plus two periods).
	// A -sim.clockrate above that searches beyond the assumption.
	rate := *flagClockRate
	if rate < 0 || rate >= 1 {
		// A spread of 2 or more would stop or reverse a clock.
		panic(fmt.Sprintf("-sim.clockrate=%v: want a spread in [0, 1)", rate))
	}
	if rate == 0 {
		rate = float64(time.Millisecond) / float64(w.longestLease())
	}
	boundRate := rate
	if bound > 0 {
		boundRate = min(rate, float64(bound)/float64(2*(dur+clockAfterRun)))
	}
	var lines []string
	for _, cl := range w.slots {
		k := &simClock{origin: w.start, rate: 1 + (r.Float64()-0.5)*rate, step: w.step}
		k.offset = time.Duration(r.Int64N(int64(20*time.Second))) - 10*time.Second
		if cl.skewBound > 0 {
			k.rate = 1 + (r.Float64()-0.5)*boundRate
			k.offset = time.Duration(r.Int64N(int64(bound)/2 + 1))
		}
		cl.clock = k
	}
	switch p.breaks {
	case "skew":
		// Every client stores expiries; one runs ahead of the others by
		// more than its bound plus two thirds of a lease (a holder renews
		// every third of a lease at the latest): it takes live locks over.
		b := time.Duration(1+r.IntN(200)) * time.Millisecond
		ahead := w.slots[r.IntN(len(w.slots))]
		for _, cl := range w.slots {
			cl.skewBound = b
			cl.opts = append(cl.opts, dynamolock.WithClockSkewBound(b))
			cl.clock.offset, cl.clock.rate = 0, 1
		}
		ahead.clock.offset = b + ahead.lease*2/3 + time.Duration(r.Int64N(int64(ahead.lease)))
		lines = append(lines, fmt.Sprintf("clocks beyond: skew: %s ahead by %s, every client's bound %s", ahead.name, ahead.clock.offset, b))
	case "rate":
		slow := w.slots[r.IntN(len(w.slots))]
		slow.clock.rate = 1 - (0.05 + 0.15*r.Float64())
		lines = append(lines, fmt.Sprintf("clocks beyond: rate: %s's clock runs %.1f%% slow", slow.name, (1-slow.clock.rate)*100))
	case "unfenced":
		lines = append(lines, "clocks beyond: unfenced: holders also write the data item with no fencing check, paused between their check and the write")
	default:
		lines = append(lines, fmt.Sprintf("clocks within: rates within %.4f%% (1 ms over the longest lease, %s, unless -sim.clockrate says otherwise; %.4f%% among clients with the smallest skew bound, %s), pauses up to three leases",
			rate*100, w.longestLease(), boundRate*100, bound))
	}
	for _, cl := range w.slots {
		lines = append(lines, cl.name+": "+cl.clock.String())
	}
	return lines
}

// longestLease is the longest lease a lock of the seed's clients can hold:
// a heartbeat's WithLeaseDurationToEnsure goes up to two heartbeat periods
// plus twice the client's lease (sim_test.go), a read/write lock's less.
func (w *world) longestLease() time.Duration {
	longest := time.Second
	for _, cl := range w.slots {
		longest = max(longest, 2*cl.hb+2*cl.lease)
	}
	return longest
}

// pauser pauses random clients' processes, for up to three of their leases,
// until deadline.
func (w *world) pauser(r *rand.Rand, deadline time.Time) {
	for {
		time.Sleep(time.Duration(r.Int64N(int64(20 * time.Second))))
		if !time.Now().Before(deadline) {
			return
		}
		w.step("pauser")
		cl := w.client(r.IntN(len(w.slots)))
		w.pauseClient(cl, r, deadline)
	}
}

// pauseClient pauses cl's process for up to three leases, ending before
// deadline (so that the healed close-down is not paused).
func (w *world) pauseClient(cl *simClient, r *rand.Rand, deadline time.Time) {
	d := time.Duration(1 + r.Int64N(int64(3*cl.lease)))
	d = min(d, time.Until(deadline))
	if d <= 0 {
		return
	}
	cl.clock.pause(d)
	w.mu.Lock()
	if until := time.Now().Add(d); until.After(cl.pausedUntil) {
		if !cl.pausedUntil.After(time.Now()) {
			cl.pausedFrom = time.Now()
		}
		cl.pausedUntil = until
	}
	w.mu.Unlock()
	w.note("%s's process pauses for %s", cl.name, d.Round(time.Millisecond))
}

// maybePause pauses cl's process at a point of its caller's work, one time
// in four, when pauses are on: the worst point is between a check of the
// lock and a write that relies on it.
func (w *world) maybePause(cl *simClient, r *rand.Rand) {
	if cl.clock == nil || !w.clocks.pauses || r.IntN(4) != 0 {
		return
	}
	w.pauseClient(cl, r, w.start.Add(*flagDuration))
	cl.clock.resume()
}

// unfencedWrite is what the library's documentation warns against: a
// holder that checks its lock, then writes the data item with neither the
// lock's TransactionCondition nor the downstream fencing check. It names
// the lock item in a condition check that only asks for the item to exist,
// so that invariant 3 compares the data item's writer and token with the
// lock item at the instant the write commits.
func (w *world) unfencedWrite(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	if l.Err() != nil || l.IsExpired() {
		return
	}
	w.maybePause(cl, r)
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	key := map[string]types.AttributeValue{w.pkName: s(l.PartitionKey())}
	if w.sortKey != "" {
		key["sk"] = s(w.sortKey)
	}
	items := []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{
			TableName: aws.String(w.lockTable), Key: key,
			ConditionExpression:      aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": w.pkName},
		}},
		{Update: &types.Update{
			TableName:                aws.String(w.dataTable),
			Key:                      map[string]types.AttributeValue{"key": s(l.PartitionKey())},
			UpdateExpression:         aws.String("SET #t = :t, #w = :w"),
			ExpressionAttributeNames: map[string]string{"#t": "token", "#w": "writer"},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":t": &types.AttributeValueMemberN{Value: fmt.Sprint(l.FencingToken())}, ":w": s(cl.ownerName()),
			},
		}},
	}
	_, err := cl.api.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{TransactItems: items})
	w.note("%s unfenced write on %s (token %d): %v", cl.name, l.PartitionKey(), l.FencingToken(), errOrOK(err))
}

// clockOption gives a client its simulated clock: through internal/clock,
// which only this module can import.
func clockOption(k *simClock) dynamolock.ClientOption {
	return clock.ClientOption(k).(dynamolock.ClientOption)
}

// TestClockAssumptionsAreSearched checks the net of -sim.clocks in a few
// seeds: with each assumption broken, the first seeds show the violation
// it leads to; within the assumptions, a seed shows none. (The figures over
// many seeds: docs/SIMULATION.md, "Clocks".)
func TestClockAssumptionsAreSearched(t *testing.T) {
	if *flagSeed != 0 {
		t.Skip("-sim.seed runs TestSimulation only")
	}
	set := func(name, value string) {
		old := flag.Lookup(name).Value.String()
		if err := flag.Set(name, value); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flag.Set(name, old) })
	}
	const dur = 30 * time.Second
	run := func(seed uint64) *world {
		var w *world
		synctest.Test(t, func(t *testing.T) { w = simulate(seed, dur) })
		return w
	}
	set("sim.clocks", "within")
	if w := run(1); len(w.violations) > 0 {
		t.Errorf("within the assumptions, seed 1 violated (replay: %s):\n%s", replayCommand(1), strings.Join(w.violations, "\n"))
	}
	set("sim.clocks", "beyond")
	cases := []struct {
		breaks string
		want   *regexp.Regexp // the invariants the broken assumption leads to
	}{
		{"skew", regexp.MustCompile(`invariant (1|2):`)},
		{"rate", regexp.MustCompile(`invariant (1|2|10):`)},
		{"unfenced", regexp.MustCompile(`invariant 3:`)},
	}
	if testing.Short() {
		cases = cases[:1]
	}
	for _, tc := range cases {
		set("sim.clockbreak", tc.breaks)
		found := ""
		for seed := uint64(1); seed <= 20 && found == ""; seed++ {
			for _, v := range run(seed).violations {
				if tc.want.MatchString(v) {
					found = fmt.Sprintf("seed %d: %s", seed, v)
					break
				}
			}
		}
		if found == "" {
			t.Errorf("-sim.clockbreak=%s: no violation matching %q in seeds 1-20", tc.breaks, tc.want)
			continue
		}
		t.Logf("-sim.clockbreak=%s: %.200s", tc.breaks, found)
	}
}
