package dynamolock

import (
	"testing"
	"time"
)

// A beat that spanned a pause (the simulation's seed 48476682: a client
// stalled for 12.6 s with one heartbeat in flight) is one round trip among
// many: once the meter's memory (measureMemory) has passed with fast beats
// after it, the capacity the meter reads is what those beats sustain.
// Before, the round trip was a moving average over the last eight or so
// beats, whatever their age: fifteen seconds of beats once a second left
// it at 4.8 s, the capacity at 0.2 renewals/s for one worker where the
// beats showed ten, and the client refused acquisitions without cause (the
// simulation's invariant 14).
func TestCapacityMeterForgetsAnOldSlowBeat(t *testing.T) {
	m := newCapacityMeter(1)
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

// Many beats that end at one instant (a burst, or virtual time) all count:
// the round trip they show is theirs, not the first one's alone.
func TestCapacityMeterCountsBeatsOfOneInstant(t *testing.T) {
	m := newCapacityMeter(4)
	now := time.Unix(1000, 0)
	m.beat(10*time.Millisecond, now)
	for range 200 {
		m.beat(time.Second, now)
	}
	if got := m.roundTrip(); got < 500*time.Millisecond {
		t.Errorf("200 beats of 1 s at one instant after one of 10 ms: round trip %s, want near 1 s", got)
	}
}
