package dynamolock

import (
	"math"
	"testing"
	"time"
)

// The schedule itself (pace.go): the head follows a short hold closely and
// a long one at most every 80 ms; a longer refresh period slows it; the
// others come back sooner when the queue is known to move fast, and never
// later than their cap.
func TestPollSchedule(t *testing.T) {
	const s, ms = time.Second, time.Millisecond
	for _, tc := range []struct {
		name                 string
		rank                 int
		hold, cycle, refresh time.Duration
		known                bool
		want                 time.Duration
	}{
		{"head, a hold just seen: the floor", 1, 0, 0, s, false, 5 * ms},
		{"head, a 100 ms hold: a quarter of it", 1, 100 * ms, 0, s, false, 25 * ms},
		{"head, a long hold: the cap", 1, time.Hour, 0, s, false, 80 * ms},
		{"head, refresh 10 s: 2/25 of it", 1, time.Hour, 0, 10 * s, false, 800 * ms},
		{"head, refresh 10 ms: never slower than the refresh period", 1, time.Hour, 0, 10 * ms, false, 10 * ms},
		{"head, refresh of math.MaxInt64: no poll before it is due", 1, time.Hour, 0, math.MaxInt64, false, math.MaxInt64 / 200},
		{"rank 2, a fast queue: half its pace", 2, 0, 16 * ms, s, true, 8 * ms},
		{"rank 2, a long hold: most of a refresh period", 2, time.Hour, 0, s, false, 750 * ms},
		{"rank 5, a fast queue: half the time to the head", 5, 4 * ms, 16 * ms, s, true, 32 * ms},
		{"rank 5, pace unknown: the time to the head the hold suggests", 5, 100 * ms, 0, s, false, 400 * ms},
		{"rank 5, a long hold: five refresh periods", 5, time.Hour, 0, s, false, 5 * s},
		{"rank 5, a hold just seen: four floors", 5, 0, 0, s, false, 20 * ms},
		{"rank 100, refresh of math.MaxInt64: no overflow", 100, time.Hour, 0, math.MaxInt64, false, 99 * (math.MaxInt64 / 200)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := pollEvery(tc.rank, tc.hold, tc.cycle, tc.known, tc.refresh); got != tc.want {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}
