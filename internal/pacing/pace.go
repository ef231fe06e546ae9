// Package pacing is the poll schedule of the waiters of one key: how long
// a waiter of a given rank in the key's queue waits before its next read,
// from what it has seen of the key's holders (Pace). It is pure: it reads
// no item and sends nothing; the engine feeds it what its reads showed and
// asks it when to read next.
package pacing

import (
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// The poll schedule of a waiter with a place in a key's queue (issue 47,
// docs/ENGINE.md "Polling by rank"). DynamoDB has no push a fleet can use,
// so a waiter in another process learns of a release only by reading the
// item. Polling every waiter fast would cost a read per waiter per poll;
// polling each once a refresh period bounds a hand-over by that period.
// Instead the queue ranks the waiters, and only the head polls fast:
//
//   - the head (first live entry) polls at a quarter of the hold's age as
//     it has seen it, between headFloor and headCap: the read budget of
//     the key (keyReads per refresh period, a period of 1 s at least),
//     less what the ranks behind it read at most, spread evenly (55.6 ms
//     for a lone waiter at the default refresh period, 70.9 ms with 31
//     behind it, 77.0 ms with 99 or more), and never slower than the refresh
//     period: a short hold is followed closely, a long one costs the key
//     at most keyReads reads per refresh period whatever the number of
//     waiters;
//   - a waiter of rank r ≥ 2 polls at (r-1)/2 of the hold's age or
//     (r-1)/4 of the mean time per acquisition the fencing tokens show,
//     whichever is longer, between (r-1)·headFloor and r refresh periods:
//     it comes back at about half the time it needs to reach the head, so
//     it knows it is the head before its turn, and a long queue under a
//     long hold costs at most 4/3 + Σ 1/r (r = 3..N) reads per refresh
//     period beside the head's (othersReads);
//   - a waiter without a place (a full queue) polls once a refresh period,
//     as before.
//
// Every waiter still wakes when its holder could be stale and when its
// wait ends (the engine's decision says when), and renews its entry every
// third of its lease: a renewal answers as a read does.
const (
	headFloor = 5 * time.Millisecond
	// keyReads is what a key's placed waiters read at most together, per
	// refresh period (1 s at least), while a holder keeps it: 18 a second
	// at the default period, under issue 47's bound of 20.
	keyReads = 18
)

// othersReads[n] is the most the waiters of rank 2 to n of a queue of n
// read per refresh period under a long hold: 4/3 for rank 2 (every 3/4 of
// a period), 1/r for a rank r ≥ 3 (every r periods). 5.0 for a full queue.
var othersReads = func() (o [lockitem.MaxWaiters + 1]float64) {
	for n := 2; n <= lockitem.MaxWaiters; n++ {
		o[n] = o[n-1] + 1/float64(n)
		if n == 2 {
			o[n] = 4.0 / 3
		}
	}
	return o
}()

// headCap is the longest wait between two reads of the head of a queue of
// n live waiters at refresh (the refresh period less its jitter): what
// the ranks behind it leave of the key's budget, spread evenly.
func headCap(n int, refresh time.Duration) time.Duration {
	n = min(max(n, 1), lockitem.MaxWaiters)
	return time.Duration(float64(max(refresh, time.Second)) / (keyReads - othersReads[n])).Round(time.Microsecond)
}

// Pace is what a waiter has seen of a key's holders: the hold it sees now
// and since when, and the fencing tokens over time (one per acquisition).
type Pace struct {
	owner   string // the holder seen ("": free) and its fencing token (a released item's, when free)
	held    string // the last holder seen, free or not
	token   uint64
	since   time.Time // when this call first saw that holder (or the key free)
	firstAt time.Time // the first token seen, and when
	first   uint64
	lastAt  time.Time // the last token seen, and when
	last    uint64
	// chain counts the holders seen in a row, after the first, with the
	// owner of the one before (new fencing tokens of one owner): a process
	// handing the key from one of its callers to the next (the engine's
	// same-process hand-over) rather than releasing it to the queue.
	chain int
}

// Since is when the waiter first saw the hold it sees now (or the key
// free).
func (p *Pace) Since() time.Time { return p.since }

// Chain counts the holders seen in a row, after the first, with the owner
// of the one before: more than one is a process handing the key from one
// of its callers to the next, one long hold to the waiters of another.
func (p *Pace) Chain() int { return p.chain }

// Observe records the holder an answer showed (nil: no item). A key
// released by one acquisition and then by another was free twice: the
// released item's fencing token tells the two apart.
func (p *Pace) Observe(rec *lockitem.Record, now time.Time) {
	owner, token := "", uint64(0)
	if rec != nil {
		token = rec.FencingToken
		if !rec.Released {
			owner = rec.Owner
		}
	}
	if owner != p.owner || token != p.token || p.since.IsZero() {
		switch {
		case owner == "":
		case owner == p.held:
			p.chain++
		default:
			p.chain = 0
		}
		if owner != "" {
			p.held = owner
		}
		p.owner, p.token, p.since = owner, token, now
	}
	if rec == nil || rec.FencingToken == 0 {
		return
	}
	if p.first == 0 || rec.FencingToken < p.first {
		p.first, p.firstAt = rec.FencingToken, now
	}
	if rec.FencingToken >= p.last {
		p.last, p.lastAt = rec.FencingToken, now
	}
}

// Free reports whether the last answer showed the key free (no item, or
// released).
func (p *Pace) Free() bool { return p.owner == "" }

// Cycle is the mean time per acquisition the tokens show, if two tokens
// were seen.
func (p *Pace) Cycle() (time.Duration, bool) {
	if p.last <= p.first {
		return 0, false
	}
	return p.lastAt.Sub(p.firstAt) / time.Duration(p.last-p.first), true
}

// PollEvery is the wait before the next read of a waiter of rank (1: the
// head) in a queue of n live waiters that has seen the current hold for
// hold, at refresh (the refresh period less its jitter).
func PollEvery(rank, n int, hold, cycle time.Duration, cycleKnown bool, refresh time.Duration) time.Duration {
	// A refresh period longer than the default asks for fewer reads: the
	// floor and the head's cap grow with it (5 ms and 55.6 ms for a lone
	// waiter at 1 s, 50 ms and 556 ms at 10 s).
	floor := max(headFloor, refresh/200)
	if rank <= 1 {
		return min(max(hold/4, floor), headCap(n, refresh), max(refresh, floor))
	}
	r := time.Duration(rank - 1)
	// Until two tokens show the queue's pace, the hold seen so far is the
	// best guess of what is left of it, and the queue may not move at all:
	// come back at the time the guess puts this waiter at the head, a read
	// that shows the pace if it moves. With the pace known, so as to be
	// the head's reader before the turn comes: at half the time the hold
	// puts it at the head, and at a quarter of the time the queue's mean
	// pace does. That mean comes from the few tokens one call has seen,
	// and a stall among them (a head that read late) inflates it; at half
	// the time, a waiter that overestimated woke after its turn, the queue
	// stalled for it, and the next estimates grew (on DynamoDB Local, 8
	// fair contenders made 10 acquisitions a second; at a quarter, 40–50).
	wait := satMul(r, hold)
	if cycleKnown {
		wait = max(satMul(r, hold)/2, satMul(r, cycle)/4)
	}
	lo, hi := satMul(r, floor), satMul(time.Duration(rank), refresh)
	if rank == 2 {
		hi = refresh * 3 / 4 // the next head: it learns of its turn within most of a refresh period
	}
	return max(min(wait, hi), min(lo, hi))
}

// PollBehindFree is the wait before the next read of a waiter of rank ≥ 2
// in a queue of n live waiters that finds the key free, and has seen it so
// for age, while a waiter before it is to take it. A live head takes a
// freed key within its own poll (about a quarter of the last hold, or
// headCap) and its write: this waiter comes back at about that time, as
// the queue's pace says ((r-1)/4 of the mean time per acquisition, or
// (r-1) floors), and, while the key stays free, at three times the time
// it has been free: a few reads for a head that is only late (rank 2
// reads 3 times in the first 100 ms, and a queue of 9 about 16 times in
// all). Past two of the head's longest polls (grace) the head is dead, or
// too slow to be waited for closely: nothing changes hands, and this
// waiter reads as under a long hold (3/4 of a refresh period for rank 2,
// r periods for rank r), waiting for the head's place to be dead (fairly
// wakes it then). A key whose fair head died so costs at most keyReads
// reads a second, as one that is held does. The first version of polling
// by rank counted no hold here (so as not to make the waiters behind a
// late head later still), and the waiters behind a dead head read its key
// every (r-1)·5 ms for the head's whole lease: 8 of them about 420 times a
// second in virtual time.
func PollBehindFree(rank, n int, age, cycle time.Duration, cycleKnown bool, refresh time.Duration) time.Duration {
	r := time.Duration(rank - 1)
	hi := satMul(time.Duration(rank), refresh)
	if rank == 2 {
		hi = refresh * 3 / 4
	}
	if age >= 2*headCap(n, refresh) {
		return hi
	}
	step := max(headFloor, refresh/200)
	if cycleKnown {
		step = max(step, cycle/4)
	}
	return min(max(satMul(r, step), 3*age), hi)
}

// forever is the largest duration.
const forever = time.Duration(1<<63 - 1)

// satMul is n×d, saturated at the largest duration.
func satMul(n, d time.Duration) time.Duration {
	if n <= 0 || d <= 0 {
		return 0
	}
	if d > forever/n {
		return forever
	}
	return n * d
}
