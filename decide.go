package dynamolock

import (
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// view is what an acquisition knows of the item.
type view struct {
	known  bool        // an answer described the item, and no write since may have changed it
	absent bool        // there is no item
	rec    *lockRecord // the decoded item
	raw    map[string]types.AttributeValue
	bad    error     // the item could not be decoded
	seen   time.Time // when this client first saw rec.rvn on the key
	failed error     // the last call failed transiently
	// rw holds the other holders and waiters of an RWLock's item (its
	// readers, its queue of both kinds, its counters), for the
	// acquisitions of an RWLock; nil otherwise. rec is its writer's slot.
	rw *rwParts
	// sessions holds the state of every session the item names (its
	// holder's, its readers'), by session key: such a holder is judged by
	// its session (session_judge.go).
	sessions map[string]sessionState
}

type step uint8

const (
	stepWrite step = iota // send the acquiring write, replacing takeover if not ""
	stepRead              // read the item at `at`
	stepClaim             // the item is this call's own write, whose answer was lost
	stepFail              // give up with err
	stepJoin              // add or renew this waiter's entry in the fair queue (WithFairness)
)

type decision struct {
	step     step
	takeover string
	at       time.Time
	err      error
	stale    bool // a takeover of a holder seen unchanged for its lease
	// reentrant: a takeover of an item naming this client's owner
	// (WithReentrant), which no queue holds up.
	reentrant bool
	queue     *queueWrite // WithFairness: what the write adds for the queue
	grant     *rwGrant    // an RWLock's write: the dead readers and waiters it drops
	claim     string      // stepClaim: the attempt the item shows (its RVN, or a reader's beat)
	// endSessions are the sessions judged dead whose end mark goes
	// before the write (it takes over what they held).
	endSessions []sessionState
	// due: a read of a live holder's item, when it could become stale or
	// the wait ends (at is that or the next poll, whichever is earlier):
	// a waiter with a place in the queue polls on its rank's schedule
	// instead (internal/pacing), but never past due. Zero: at stands.
	due time.Time
	// end is when the wait ends (with due): a waiter behind the head of
	// its queue wakes for that, not for the holder's staleness, which the
	// head watches (internal/pacing).
	end time.Time
	// renew: at is when this waiter's place is to be renewed, before any
	// read is due: the renewal goes without a read first (its answer shows
	// the item).
	renew bool
	// rewrite: a read before this call writes again over its own write
	// whose lease ran out before its answer came; no holder is waited
	// for, so no place in the key's queue is taken or kept for it.
	rewrite bool
}

// decideInput is everything the decision looks at.
type decideInput struct {
	view     *view
	now      time.Time
	start    time.Time // when the acquisition started
	key      string
	owner    string // this client's owner name
	attempts map[string]attempt
	o        *acquireLockOptions
	deadline time.Time
	// staleByClock is when the stored expiry plus the skew bound passes,
	// with WithClockSkewBound.
	staleByClock   time.Time
	hasClockExpiry bool
	jitter         time.Duration // taken off the next poll's wait
	// inFlightHere: the item's RVN is being written by another acquisition
	// of this client, whose answer has not come yet: not ours to take.
	inFlightHere bool
	// heldHere: an item naming this client's owner is this client's: it
	// holds a lock on the key, or an acquisition of it is writing the
	// item's RVN. Otherwise another client with the same owner name holds
	// it, which the errors say (and advise no WithReentrant for).
	heldHere bool
	// handsChanged is how many times the key changed hands while this
	// call waited (for the timeout's message).
	handsChanged int
	// ownSession is the key of this client's live session (WithSession),
	// "" when none: a reentrant call adopts a session's lock only when it
	// is this session's.
	ownSession string
}

// decide is the acquisition's one decision: from what is known of the item
// and the time, what to do next. It is a pure function.
func decide(in decideInput) decision {
	v := in.view
	switch {
	case !v.known:
		if v.failed != nil && !in.now.Before(in.deadline) {
			return decision{step: stepFail, err: notGranted(v.failed, "key %q", in.key)}
		}
		// A write whose answer was lost may have landed, or an emulator
		// returned no item: learn it by reading, after the usual pause.
		return decision{step: stepRead, at: in.now.Add(in.o.refreshPeriod - in.jitter)}
	case v.absent && in.o.onlyIfLockAlreadyExist:
		return decision{step: stepFail, err: notGranted(nil, "key %q has no lock item and WithAcquireOnlyIfLockAlreadyExists was given", in.key)}
	case v.absent:
		return decision{step: stepWrite}
	case v.bad != nil:
		return decision{step: stepFail, err: notGranted(v.bad, "key %q holds an item this client cannot interpret; it is treated as held", in.key)}
	case v.rec.Released:
		return decision{step: stepWrite}
	}
	rec := v.rec
	if rec.Owner == in.owner {
		if a, ok := in.attempts[rec.RVN]; ok {
			if in.now.Before(a.sent.Add(a.lease)) {
				return decision{step: stepClaim, claim: rec.RVN}
			}
			// Ours, but its lease is over: take it anew (rewriteOwn).
			return rewriteOwn(a, in.now, in.start, in.deadline, in.o.refreshPeriod, len(in.attempts), in.key,
				decision{step: stepWrite, takeover: rec.RVN})
		}
		if in.o.reentrant && !in.inFlightHere && (rec.Session == "" || rec.Session == in.ownSession) {
			// A lock of another live session is not adoptable: its holder
			// renews no lease of its own, so it would never learn of the
			// adoption. It is judged by its session below, as any holder.
			return decision{step: stepWrite, takeover: rec.RVN, reentrant: true} // Java's reentrant: an item naming our owner is ours to take
		}
	}
	staleAt, lease := v.seen.Add(rec.Lease), rec.Lease
	var end []sessionState
	switch s, ok := v.sessions[rec.Session]; {
	case rec.Session != "" && !ok:
		// Not judged yet (not reached: learn records it): read again.
		return decision{step: stepRead, at: in.now.Add(in.o.refreshPeriod - in.jitter)}
	case rec.Session != "":
		// Held by a session: live while the session is (docs/SESSIONS.md).
		staleAt, lease = s.deadAt(in.now), s.lease
		if !s.ended {
			end = []sessionState{s}
		}
	case in.hasClockExpiry && in.staleByClock.Before(staleAt):
		staleAt = in.staleByClock
	}
	switch {
	case !in.now.Before(staleAt):
		return decision{step: stepWrite, takeover: rec.RVN, stale: true, endSessions: end}
	case in.o.failIfLocked:
		return decision{step: stepFail, err: notGranted(&LockHeldError{Key: in.key, Owner: rec.Owner, LeaseDuration: lease, ownOwner: rec.Owner == in.owner,
			heldHere: in.heldHere, sessionHeld: rec.Session != "" && rec.Session != in.ownSession}, "FailIfLocked")}
	case !in.now.Before(in.deadline):
		te := &TimeoutError{Age: in.now.Sub(in.start)}
		if in.handsChanged > 0 {
			return decision{step: stepFail, err: notGranted(te, "key %q changed hands %d times while this call waited; held by owner %q at the end%s",
				in.key, in.handsChanged, rec.Owner, heldByUs(rec.Owner, in.owner, in.heldHere))}
		}
		return decision{step: stepFail, err: notGranted(te, "key %q stayed held by owner %q%s", in.key, rec.Owner, heldByUs(rec.Owner, in.owner, in.heldHere))}
	}
	// Poll once a refresh period, but wake exactly when the item could
	// become stale or the wait ends.
	at := in.now.Add(in.o.refreshPeriod - in.jitter)
	due := earliest(staleAt, in.deadline)
	return decision{step: stepRead, at: earliest(at, due), due: due, end: in.deadline}
}

// heldByUs explains, in a timeout's message, a holder named as this
// client (owner): this client itself (here), or another client with the
// same owner name, for which the fix is not WithReentrant.
func heldByUs(holder, owner string, here bool) string {
	switch {
	case holder != owner:
		return ""
	case here:
		return " (this client's own owner name: " + heldHereAdvice + ")"
	}
	return " (this client's own owner name, " + sameOwnerAdvice + ")"
}

// rewriteOwn decides on an item that carries a write of this call (a)
// whose lease ran out before its answer came (a pause, a slow network) or
// while the answer was lost: write it anew (write), no sooner than a
// refresh period after a was sent, and past the wait's end (deadline;
// zero: none) only when a was the call's one write (writes). When every
// answer comes after the lease it granted (a lease shorter than a round
// trip), the writes are so paced as polls are, and the call ends when its
// wait does, saying why, instead of writing back to back.
func rewriteOwn(a attempt, now, start, deadline time.Time, refresh time.Duration, writes int, key string, write decision) decision {
	if !deadline.IsZero() && !now.Before(deadline) && writes > 1 {
		return decision{step: stepFail, err: notGranted(&TimeoutError{Age: now.Sub(start)},
			"key %q: the answer to this call's write came after the lease it granted (%s) had run out; "+
				"a lease must outlast the round trips to DynamoDB of the acquisition that takes it", key, a.lease)}
	}
	if next := a.sent.Add(refresh); now.Before(next) {
		if !deadline.IsZero() {
			next = earliest(next, deadline)
		}
		return decision{step: stepRead, at: next, rewrite: true}
	}
	return write
}
