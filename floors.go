package dynamolock

import (
	"math"
	"strconv"
	"strings"
	"time"
)

// The shortest durations the options accept. Go reads a time.Duration
// written as a bare number as nanoseconds: WithLeaseDuration(10), meant as
// ten seconds, is 10ns, a lease no write can outlast, and a wait loop
// paced by such a number would send requests back to back. Every floor is
// far above such a number (a million of them is still one millisecond)
// and at or below the shortest duration that this module's tests,
// benchmarks and examples, and dynamolock v2's users, give on purpose.
const (
	// minLease is the shortest lease ([WithLeaseDuration], [WithLockLease],
	// [WithLeaseDurationToEnsure]): a lease must outlast the write that
	// grants it and the renewals that keep it, several round trips to
	// DynamoDB (a few milliseconds each within a Region, tens across the
	// internet, more with the SDK's retries). Below it, an acquisition's
	// answer comes after the lease it granted has run out.
	minLease = 100 * time.Millisecond
	// minHeartbeatPeriod is the shortest heartbeat period
	// ([WithHeartbeatPeriod]; 0 still disables heartbeats): half the
	// shortest lease, so that the shortest lease is renewed twice per
	// lease. Each renewal is one billed write per held lock: at this
	// period a lock costs 20 writes a second. (lock-example, which must
	// also kill its command in time, asks for 100ms.)
	minHeartbeatPeriod = minLease / 2
	// minRefreshPeriod is the shortest refresh period
	// ([WithRefreshPeriod]): a poll takes a round trip, so a shorter pace
	// only polls back to back. Programs poll every 10 or 20 ms on purpose.
	minRefreshPeriod = time.Millisecond
	// minAdditionalWait is the shortest additional time to wait
	// ([WithAdditionalTimeToWaitForLock]; 0 still means no additional
	// wait): a wait shorter than one round trip to DynamoDB cannot have
	// been meant.
	minAdditionalWait = time.Millisecond
)

// leaseFloorWhy says what minLease is for, in an error.
const leaseFloorWhy = "a lease must outlast several round trips to DynamoDB, or the answer of the write that grants it comes after it ran out"

// tooShort is the *InvalidArgumentError of option's value d, positive and
// under floor. why says what the floor is for. When d reads as a bare
// number meant in seconds or milliseconds (10 for ten seconds), the
// message asks whether that was meant, the unit nearer usual (the option's
// default) first, each only if it lies within [floor, most].
func tooShort(option string, d, floor, most, usual time.Duration, why string) error {
	reason := "is too short"
	if guess := meantAs(d, floor, most, usual); guess != "" {
		reason += ": did you mean " + guess + "? (a time.Duration written as a bare number counts nanoseconds)"
	}
	return invalid(option, d, "%s; the least is %s: %s", reason, floor, why)
}

// meantAs returns the durations a human who wrote d's count of nanoseconds
// as a bare number may have meant, as Go code ("10*time.Second", or two
// joined by "or"), or "" when none fits.
func meantAs(d, floor, most, usual time.Duration) string {
	n := int64(d)
	if n <= 0 || n > 100_000 { // not a number someone types for seconds or milliseconds
		return ""
	}
	type unit struct {
		d    time.Duration
		name string
	}
	units := []unit{{time.Second, "time.Second"}, {time.Millisecond, "time.Millisecond"}}
	// The unit whose reading lies nearer usual, by ratio, comes first.
	off := func(u unit) float64 { return math.Abs(math.Log(float64(time.Duration(n)*u.d) / float64(usual))) }
	if usual > 0 && off(units[1]) < off(units[0]) {
		units[0], units[1] = units[1], units[0]
	}
	var guesses []string
	for _, u := range units {
		if v := time.Duration(n) * u.d; v >= floor && v <= most {
			guesses = append(guesses, strconv.FormatInt(n, 10)+"*"+u.name)
		}
	}
	return strings.Join(guesses, " or ")
}
