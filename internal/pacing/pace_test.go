package pacing

import (
	"math"
	"testing"
	"time"
)

// The schedule itself: the head follows a short hold closely and
// a long one at most every 55.6 ms alone, 70.9 ms with 31 waiters behind
// it, 77.0 ms with 99 (what they leave of the key's 18 reads a second); a
// longer refresh period slows it; the others come back sooner when the
// queue is known to move fast, and never later than their cap.
func TestPollSchedule(t *testing.T) {
	const s, ms, us = time.Second, time.Millisecond, time.Microsecond
	for _, tc := range []struct {
		name                 string
		rank, n              int
		hold, cycle, refresh time.Duration
		known                bool
		want                 time.Duration
	}{
		{"head, a hold just seen: the floor", 1, 1, 0, 0, s, false, 5 * ms},
		{"head, a 100 ms hold: a quarter of it", 1, 1, 100 * ms, 0, s, false, 25 * ms},
		{"head alone, a long hold: the cap, 1/18 of the period", 1, 1, time.Hour, 0, s, false, 55556 * us},
		{"head of 2, a long hold: 1/(18-4/3)", 1, 2, time.Hour, 0, s, false, 60 * ms},
		{"head of 32, a long hold: what 31 behind it leave", 1, 32, time.Hour, 0, s, false, 70881 * us},
		{"head of 100 (or more), a long hold", 1, 1000, time.Hour, 0, s, false, 77046 * us},
		{"head alone, refresh 10 s: 1/18 of it", 1, 1, time.Hour, 0, 10 * s, false, 555556 * us},
		{"head, refresh 10 ms: never slower than the refresh period", 1, 1, time.Hour, 0, 10 * ms, false, 10 * ms},
		{"head, refresh of math.MaxInt64: no poll before it is due", 1, 1, time.Hour, 0, math.MaxInt64, false, math.MaxInt64 / 200},
		{"rank 2, a fast queue: a quarter of its pace", 2, 2, 0, 40 * ms, s, true, 10 * ms},
		{"rank 2, a long hold: most of a refresh period", 2, 2, time.Hour, 0, s, false, 750 * ms},
		{"rank 5, a fast queue: a quarter of the time to the head at its pace", 5, 8, 4 * ms, 40 * ms, s, true, 40 * ms},
		{"rank 5, a hold longer than the pace: half the time to the head the hold suggests", 5, 8, 100 * ms, 40 * ms, s, true, 200 * ms},
		{"rank 5, pace unknown: the time to the head the hold suggests", 5, 8, 100 * ms, 0, s, false, 400 * ms},
		{"rank 5, a long hold: five refresh periods", 5, 8, time.Hour, 0, s, false, 5 * s},
		{"rank 5, a hold just seen: four floors", 5, 8, 0, 0, s, false, 20 * ms},
		{"rank 100, refresh of math.MaxInt64: no overflow", 100, 100, time.Hour, 0, math.MaxInt64, false, 99 * (math.MaxInt64 / 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PollEvery(tc.rank, tc.n, tc.hold, tc.cycle, tc.known, tc.refresh); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// A waiter behind the head knows the queue's pace only from the few
// fencing tokens its call has seen, and a stall among them inflates it.
// Its schedule must still bring it to read as the head within half an
// acquisition of its turn when it overestimates the pace by up to 2×: a
// late head stalls the whole queue, every later estimate grows, and the
// queue settles at a fraction of its speed (on DynamoDB Local, 8 fair
// contenders made 10–25 acquisitions a second when a waiter came back at
// half the time its estimate put it at the head, 50 at a quarter). Here
// the queue moves one place every cycle; each read shows a holder just
// seen (hold 0).
func TestPollScheduleToleratesAnOverestimatedPace(t *testing.T) {
	const cycle = 40 * time.Millisecond
	for _, over := range []float64{1, 1.5, 1.9} {
		for start := 2; start <= 32; start++ {
			est := time.Duration(float64(cycle) * over)
			at, rank := time.Duration(0), start
			for rank > 1 {
				at += PollEvery(rank, start, 0, est, true, time.Second)
				rank = max(start-int(at/cycle), 1)
			}
			turn := time.Duration(start-1) * cycle
			if late := at - turn; late > cycle/2 {
				t.Errorf("rank %d, pace overestimated %.1f×: first read as the head %v after its turn (%v)", start, over, late, turn)
			}
		}
	}
}

// Behind a free key that a waiter before it is to take
// (PollBehindFree): back at the queue's pace while the key is about to
// change hands, later the longer it stays free, and once it has stayed
// free past two of the head's longest polls (the head is dead or too
// slow), as under a long hold.
func TestPollBehindAFreeKey(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		name                string
		rank, n             int
		age, cycle, refresh time.Duration
		known               bool
		want                time.Duration
	}{
		{"rank 2, just freed, pace unknown: a floor", 2, 2, 0, 0, s, false, 5 * ms},
		{"rank 2, just freed, a fast queue: a quarter of its pace", 2, 2, 0, 40 * ms, s, true, 10 * ms},
		{"rank 3, just freed, a fast queue: two quarters", 3, 3, 0, 40 * ms, s, true, 20 * ms},
		{"rank 2, free for 20 ms: three times that", 2, 2, 20 * ms, 40 * ms, s, true, 60 * ms},
		{"rank 2 of 2, free past the grace (2 × 60 ms): a long hold's", 2, 2, 120 * ms, 40 * ms, s, true, 750 * ms},
		{"rank 5 of 9, free past the grace (2 × 65.4 ms): five refresh periods", 5, 9, 131 * ms, 0, s, false, 5 * s},
		{"rank 2, free for 100 ms of a queue of 100 (grace 154 ms): capped at a long hold's", 2, 100, 100 * ms, 0, s, false, 300 * ms},
		{"rank 100, refresh of math.MaxInt64: no overflow", 100, 100, time.Hour, 0, math.MaxInt64, false, 99 * (math.MaxInt64 / 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PollBehindFree(tc.rank, tc.n, tc.age, tc.cycle, tc.known, tc.refresh); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
