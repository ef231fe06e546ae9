package dynamolock

import (
	"testing"
	"time"
)

// A beat that spanned a pause (the simulation's seed 48476682: a client
// stalled for 12.6 s with one heartbeat in flight) is one round trip among
// many: after a few seconds (rttMemory each) of fast beats, the capacity
// the meter reads is what those beats sustain. Before, the round trip fell
// by an eighth a beat, whatever their age: fifteen seconds of beats once a second left
// it at 4.8 s, the capacity at 0.2 renewals/s for one worker where the
// beats showed ten, and the client refused acquisitions without cause (the
// simulation's invariant 14).
func TestCapacityMeterForgetsAnOldSlowBeat(t *testing.T) {
	m := newCapacityMeter(1, DefaultLeaseDuration)
	now := time.Unix(1000, 0)
	m.beat(12270*time.Millisecond, now) // the first beat: it spanned the pause
	if got := m.roundTrip(); got < time.Second {
		t.Fatalf("right after a 12.27 s beat the round trip reads %s: a slow beat must count at once", got)
	}
	for range 15 {
		now = now.Add(time.Second)
		m.idle()
		m.beat(100*time.Millisecond, now)
	}
	if got := m.roundTrip(); got > 200*time.Millisecond {
		t.Errorf("15 s of 100 ms beats after a 12.27 s one: round trip %s, want about 100 ms", got)
	}
	if got := m.capacityAt(now); got < 5 {
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
	m := newCapacityMeter(32, DefaultLeaseDuration)
	now := time.Unix(1000, 0)
	for range 100 {
		now = now.Add(100 * time.Millisecond)
		m.beat(100*time.Millisecond, now)
	}
	now = now.Add(12 * time.Second)
	m.beat(12200*time.Millisecond, now)
	if got := m.roundTrip(); got > 2*time.Second {
		t.Errorf("after 100 ms beats, one of 12.2 s ending 12 s after the last: round trip %s, want under 2 s", got)
	}
}

// A table-limit throttle right after the first beat (no window closed, the
// one the first beat opened has no beat yet) sets no ceiling: nothing was
// measured. Before, it set a ceiling of 0 renewals/s, which kept every
// acquisition out for the meter's memory (10 s).
func TestThrottleBeforeAnyMeasureSetsNoCeiling(t *testing.T) {
	m := newCapacityMeter(4, DefaultLeaseDuration)
	now := time.Unix(1000, 0)
	m.beat(10*time.Millisecond, now)
	m.throttled(ThrottleProvisioned, now.Add(5*time.Millisecond))
	if _, _, ok := m.ceiling(now.Add(10 * time.Millisecond)); ok {
		t.Fatalf("a ceiling after one beat: capacity %.3g", m.capacityAt(now.Add(10*time.Millisecond)))
	}
	if got := m.capacityAt(now.Add(10 * time.Millisecond)); got < 100 {
		t.Errorf("capacity %.3g renewals/s after one 10 ms beat of 4 workers, want about 400", got)
	}
}
