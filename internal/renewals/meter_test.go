package renewals

import (
	"math"
	"testing"
	"time"
)

// lease is a client's default lease (dynamolock.DefaultLeaseDuration).
const lease = 20 * time.Second

// A beat that spanned a pause (the simulation's seed 48476682: a client
// stalled for 12.6 s with one heartbeat in flight) is one round trip among
// many: after a few seconds (rttMemory each) of fast beats, the capacity
// the meter reads is what those beats sustain. Before, the round trip fell
// by an eighth a beat, whatever their age: fifteen seconds of beats once a second left
// it at 4.8 s, the capacity at 0.2 renewals/s for one worker where the
// beats showed ten, and the client refused acquisitions without cause (the
// simulation's invariant 14).
func TestCapacityMeterForgetsAnOldSlowBeat(t *testing.T) {
	m := NewMeter(1, lease)
	now := time.Unix(1000, 0)
	m.Beat(12270*time.Millisecond, now) // the first beat: it spanned the pause
	if got := m.RoundTrip(); got < time.Second {
		t.Fatalf("right after a 12.27 s beat the round trip reads %s: a slow beat must count at once", got)
	}
	for range 15 {
		now = now.Add(time.Second)
		m.Idle()
		m.Beat(100*time.Millisecond, now)
	}
	if got := m.RoundTrip(); got > 200*time.Millisecond {
		t.Errorf("15 s of 100 ms beats after a 12.27 s one: round trip %s, want about 100 ms", got)
	}
	if got := m.At(now); got < 5 {
		t.Errorf("capacity %.3g renewals/s, want about 10 (one worker, 100 ms beats)", got)
	}
}

// One slow beat among fast ones counts for an eighth, however long after
// the last beat it ends: a beat that spanned a 12 s pause of the process,
// after 100 ms ones, must not raise the round trip to 12 s, or the
// heartbeat scheduler, which gives a waiting lock up at once when less than
// two round trips of its lease are left, would give up every lock queued
// for a worker after the pause, those a 100 ms beat could still save.
func TestCapacityMeterOneSlowBeatCountsForAnEighth(t *testing.T) {
	m := NewMeter(32, lease)
	now := time.Unix(1000, 0)
	for range 100 {
		now = now.Add(100 * time.Millisecond)
		m.Beat(100*time.Millisecond, now)
	}
	now = now.Add(12 * time.Second)
	m.Beat(12200*time.Millisecond, now)
	if got := m.RoundTrip(); got > 2*time.Second {
		t.Errorf("after 100 ms beats, one of 12.2 s ending 12 s after the last: round trip %s, want under 2 s", got)
	}
}

// A table-limit throttle right after the first beat (no window closed, the
// one the first beat opened has no beat yet) sets no ceiling: nothing was
// measured. Before, it set a ceiling of 0 renewals/s, which kept every
// acquisition out for the meter's memory (10 s).
func TestThrottleBeforeAnyMeasureSetsNoCeiling(t *testing.T) {
	m := NewMeter(4, lease)
	now := time.Unix(1000, 0)
	m.Beat(10*time.Millisecond, now)
	m.Throttled(1, now.Add(5*time.Millisecond))
	if _, _, ok := m.Ceiling(now.Add(10 * time.Millisecond)); ok {
		t.Fatalf("a ceiling after one beat: capacity %.3g", m.At(now.Add(10*time.Millisecond)))
	}
	if got := m.At(now.Add(10 * time.Millisecond)); got < 100 {
		t.Errorf("capacity %.3g renewals/s after one 10 ms beat of 4 workers, want about 400", got)
	}
}

// capacityIs fails the test unless m's capacity is want, to a relative
// 1e-6.
func capacityIs(t *testing.T, m *Meter, want float64, what string) {
	t.Helper()
	if got := m.Capacity(); math.Abs(got-want) > 1e-6*want {
		t.Fatalf("capacity %v %s, want %v", got, what, want)
	}
}

// The capacity admission control compares with: workers / round trip until
// a window passes with every worker busy, then the rate measured in such
// windows; a window in which a worker was free measures nothing.
func TestMeterCapacity(t *testing.T) {
	m := NewMeter(4, lease)
	m.rtt = 10 * time.Millisecond
	start := time.Unix(1000, 0)
	m.measure(start) // opens the first window
	capacityIs(t, &m, 400, "before any saturated window (4 workers / 10 ms)")
	// A window with every worker busy: 100 beats in 500 ms.
	for i := 1; i <= 100; i++ {
		m.measure(start.Add(time.Duration(i) * 5 * time.Millisecond))
	}
	// One window is a young memory: admission counts on youngShare(1) of
	// its rate.
	first := 200 * youngShare(1)
	if first > 0.76*200 {
		t.Fatalf("a memory of one saturated window counts on %.2f of its rate, want about three quarters: the worst of a few windows is an optimistic guess", first/200)
	}
	capacityIs(t, &m, first, "after a saturated window of 100 beats in 500 ms (200/s, of which a memory of one window counts youngShare(1))")
	// Windows in which a worker was free (as the scheduler records it)
	// measure nothing, even at another rate.
	for i := 1; i <= 500; i++ {
		m.Idle()
		m.measure(start.Add(500*time.Millisecond + time.Duration(i)*2*time.Millisecond))
	}
	capacityIs(t, &m, first, "after a window with a free worker (unchanged)")
	// No saturated window for longer than the horizon (3 s after the one
	// that ended at 0.5 s): the workers kept up with everything, and the
	// rate rises by a quarter with each window, up to workers / round trip
	// (issue 21: a short slowdown must not keep admission shut).
	at := func(i int) time.Time { return start.Add(1500*time.Millisecond + time.Duration(i)*2*time.Millisecond) }
	for i := 1; i <= 1250; i++ { // to 4.0 s: one window past the horizon
		m.Idle()
		m.measure(at(i))
	}
	capacityIs(t, &m, first*1.25, "one window past the horizon (a quarter more)")
	for i := 1251; i <= 2250; i++ {
		m.Idle()
		m.measure(at(i))
	}
	capacityIs(t, &m, 400, "6 s after the last saturated window (4 workers / 10 ms)")
	// A saturated window replaces the old rate outright: 50 beats in 500 ms.
	m.windowIdle = false
	for i := 1; i <= 50; i++ {
		m.measure(at(2250).Add(time.Duration(i) * 10 * time.Millisecond))
	}
	if got := m.Capacity(); math.Abs(got-100*youngShare(1)) > 1 {
		t.Fatalf("capacity %v after a fresh saturated window of 100/s, want 100 × %.3f (a memory of one window)", got, youngShare(1))
	}
}

// The capacity is the lowest rate of the spans of saturated windows of the
// last minute (rateMemory; spans of 2 s for the default lease): a lock
// admitted at the average, or at the best of a shorter memory, is lost in
// the next dip longer than its lease's slack; a dip of half a second
// counts for its span. While the windows are few it counts on less
// (youngShare).
func TestMeterCapacityIsTheWorstRecentSpan(t *testing.T) {
	m := NewMeter(4, lease)
	if m.span != 4 {
		t.Fatalf("span %d windows for the default lease, want 4 (2 s)", m.span)
	}
	m.rtt = time.Millisecond
	at := time.Unix(1000, 0)
	m.measure(at)
	windows := 0
	window := func(beats int) { // one saturated window of 500 ms
		windows++
		for range beats {
			at = at.Add(500 * time.Millisecond / time.Duration(beats))
			m.measure(at)
		}
	}
	window(200) // 400/s
	window(50)  // 100/s for half a second
	for range 3 {
		window(200)
	}
	capacityIs(t, &m, 325*youngShare(windows), "after a dip to 100/s for half a second among 400/s (its span: 325/s)")
	for range 4 {
		window(50) // 100/s for a whole span
	}
	for range 10 {
		window(200)
	}
	capacityIs(t, &m, 100*youngShare(windows), "after 2 s at 100/s")
	for windows < int(time.Minute/measureWindow)+9-1 { // the dip's last window 59.5 s old
		window(200)
	}
	capacityIs(t, &m, 100, "just under a minute after 2 s at 100/s")
	for range 5 { // 62 s: every span in memory at 400/s
		window(200)
	}
	capacityIs(t, &m, 400, "once the dip is over a minute old")
}

// Found by the simulation (invariant 14, no refusal without cause): a
// client that measured a low rate in one saturated window and then held
// nothing sent no heartbeats, so no window ever closed and the stale rate
// never rose; every acquisition asking for more than that rate allowed was
// refused, for good, by a client renewing nothing with its workers idle.
// A window in which no beat ended is a window with a free worker: the
// stale rate rises with each one, as with windows that measured nothing.
func TestMeterCapacityRisesWhileNoBeatEnds(t *testing.T) {
	m := NewMeter(1, lease)
	m.rtt = 5 * time.Millisecond // workers / round trip: 200/s
	m.rttNanos.Store(int64(m.rtt))
	now := time.Unix(1000, 0)
	m.measure(now.Add(-measureWindow)) // opens the first window
	m.measure(now)                     // a saturated window of one beat in 500 ms: 2/s, ending now
	if got := m.At(now); math.Abs(got-2*youngShare(1)) > 1e-9 {
		t.Fatalf("capacity %v after a saturated window of one beat in 500 ms, want 2 (of which it counts %.2f while it has one window)", got, youngShare(1))
	}
	// No beat ends from here on (the client holds nothing). Past the
	// horizon the rate rises a quarter per window: from the 1.5/s counted
	// to above the 2/s measured within two windows past the horizon, and
	// on up to workers / round trip.
	for d := time.Duration(0); m.At(now.Add(d)) <= 2; d += 50 * time.Millisecond {
		if d > measureHorizon+2*measureWindow {
			t.Fatalf("capacity still %v/s after %s without a beat (horizon %s): admission stays shut for a client that renews nothing", m.At(now.Add(d)), d, measureHorizon)
		}
	}
	if got := m.At(now.Add(time.Minute)); got != 200 {
		t.Errorf("capacity %v/s a minute without a beat after it, want 200 (1 worker / 5 ms)", got)
	}
}
