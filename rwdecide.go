package dynamolock

import (
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// rwView is what a read/write acquisition knows of the item.
type rwView struct {
	known  bool // an answer described the item, and no write since may have changed it
	absent bool // there is no item
	raw    map[string]types.AttributeValue
	bad    error // the writer's part of the item cannot be decoded
	failed error // the last call failed transiently

	writer *lockRecord // the writer's part: nil when the slot is free (released)
	token  uint64      // the item's fencing token

	readers        []rwEntry
	readersPresent bool   // the readers map exists
	readersVersion uint64 // counts every change of the readers map
	versionPresent bool

	queue          []rwWaiter
	queuePresent   bool
	writersArrived uint64
	arrivedPresent bool
}

// rwEntry is a reader's entry in the readers map: id → {b: beat, l: lease
// in milliseconds}.
type rwEntry struct {
	id    string
	beat  string
	lease time.Duration
	bad   bool // not an entry this package wrote: counts as dead at once
}

// rwWaiter is a waiter in the queue: a fair-queue entry plus its kind.
type rwWaiter struct {
	waiter
	writer bool
}

// decodeRWView reads item into a view. It never fails: a writer's part
// that cannot be decoded is kept in bad.
func (c *Client) decodeRWView(item map[string]types.AttributeValue) rwView {
	v := rwView{known: true, raw: item, absent: len(item) == 0}
	if v.absent {
		return v
	}
	if _, released := item[attrIsReleased]; !released {
		rec, err := c.cfg.schema.decodeItem(item)
		if err != nil {
			v.bad = err
			return v
		}
		v.writer = rec
	}
	v.token, _ = uintAttr(item, attrFencingToken)
	if m, ok := item[attrReaders].(*types.AttributeValueMemberM); ok {
		v.readersPresent = true
		for id, ev := range m.Value {
			v.readers = append(v.readers, decodeReader(id, ev))
		}
		slices.SortFunc(v.readers, func(a, b rwEntry) int { return strings.Compare(a.id, b.id) }) // see queueOf
	} else if _, ok := item[attrReaders]; ok {
		v.bad = &ItemFormatError{Attribute: attrReaders, Reason: "not of type M"}
		return v
	}
	if _, ok := item[attrReadersVersion]; ok {
		n, err := uintAttr(item, attrReadersVersion)
		if err != nil {
			v.bad = err
			return v
		}
		v.readersVersion, v.versionPresent = n, true
	}
	if _, ok := item[attrWritersArrived]; ok {
		n, err := uintAttr(item, attrWritersArrived)
		if err != nil {
			v.bad = err
			return v
		}
		v.writersArrived, v.arrivedPresent = n, true
	}
	if m, ok := item[attrFairQueue].(*types.AttributeValueMemberM); ok {
		v.queuePresent = true
		for id, ev := range m.Value {
			w := rwWaiter{waiter: decodeWaiter(id, ev)}
			if e, ok := ev.(*types.AttributeValueMemberM); ok {
				k, _ := e.Value["k"].(*types.AttributeValueMemberS)
				w.writer = k != nil && k.Value == "w"
			}
			v.queue = append(v.queue, w)
		}
		slices.SortFunc(v.queue, func(a, b rwWaiter) int { return strings.Compare(a.id, b.id) }) // see queueOf
	} else if _, ok := item[attrFairQueue]; ok {
		v.bad = &ItemFormatError{Attribute: attrFairQueue, Reason: "not of type M"}
	}
	return v
}

func decodeReader(id string, ev types.AttributeValue) rwEntry {
	r := rwEntry{id: id, bad: true}
	e, ok := ev.(*types.AttributeValueMemberM)
	if !ok {
		return r
	}
	b, ok := e.Value["b"].(*types.AttributeValueMemberS)
	l, err := uintAttr(e.Value, "l")
	if !ok || err != nil || l == 0 || l > uint64(maxWaiterLease/time.Millisecond) {
		return r
	}
	return rwEntry{id: id, beat: b.Value, lease: time.Duration(l) * time.Millisecond}
}

// rwSeen is what one acquisition has seen of the others' beats, on its own
// clock: an entry (the writer's RVN, a reader's or a waiter's beat) is dead
// once it has stayed unchanged for its lease.
type rwSeen struct {
	writer  beatSeen
	readers map[string]beatSeen
	queue   map[string]beatSeen
}

func newRWSeen() *rwSeen {
	return &rwSeen{readers: make(map[string]beatSeen), queue: make(map[string]beatSeen)}
}

func (s *rwSeen) observe(v *rwView, now time.Time) {
	if v.writer != nil && s.writer.beat != v.writer.rvn {
		s.writer = beatSeen{beat: v.writer.rvn, at: now}
	}
	ids := make(map[string]string, len(v.readers))
	for _, r := range v.readers {
		ids[r.id] = r.beat
	}
	observeBeats(s.readers, ids, now)
	ids = make(map[string]string, len(v.queue))
	for _, w := range v.queue {
		ids[w.id] = w.beat
	}
	observeBeats(s.queue, ids, now)
}

func observeBeats(seen map[string]beatSeen, beats map[string]string, now time.Time) {
	for id := range seen {
		if _, ok := beats[id]; !ok {
			delete(seen, id)
		}
	}
	for id, beat := range beats {
		if s, ok := seen[id]; !ok || s.beat != beat {
			seen[id] = beatSeen{beat: beat, at: now}
		}
	}
}

type rwStep uint8

const (
	rwRead  rwStep = iota // read the item at `at`
	rwWrite               // send the granting write
	rwJoin                // add or renew this waiter's entry in the queue
	rwClaim               // the item carries this call's own grant, whose answer was lost
	rwFail                // give up with err
)

// rwDecision is what a read/write acquisition does next.
type rwDecision struct {
	step rwStep
	at   time.Time
	err  error
	// For rwWrite:
	takeover      string   // the dead writer's RVN, if the writer's slot is taken over
	removeReaders []string // dead readers dropped by this write (conditioned on the readers' version)
	removeQueue   []string // queue entries dropped: this waiter's own and dead ones
	// removeBeats holds, for each entry of removeQueue, the beat it was
	// judged dead with ("" for this waiter's own and for entries no client
	// could have written): the write requires it unchanged, so that an
	// answer that came late (showing an older beat) never drops a waiter
	// that has renewed since.
	removeBeats []string
	// mineAt is 1 + the index of this waiter's own entry in removeQueue
	// (0: none): the write requires it still there, since the place it
	// decided from is gone once others dropped the entry as dead.
	mineAt int
	claim  string // for rwClaim: the beat (reader) or RVN (writer) of the attempt
}

// rwInput is everything the decision looks at.
type rwInput struct {
	view      *rwView
	seen      *rwSeen
	now       time.Time
	start     time.Time
	name      string
	writer    bool // Lock (else RLock)
	owner     string
	id        string // this acquisition's reader or queue entry id
	ticket    uint64 // 0: not in the queue
	renewAt   time.Time
	attempts  map[string]attempt // this call's granting writes, by beat or RVN
	deadline  time.Time          // zero: none (ctx bounds the wait)
	failFast  bool               // FailIfLocked
	refresh   time.Duration      // the poll period, jitter already taken off
	maxReader int
}

// rwDecide is a read/write acquisition's one decision: a pure function of
// what it has seen and the time.
//
// A reader may go when no live writer holds the lock, no live writer waits
// before it in the queue (a reader that is not in the queue is behind
// everyone in it), and the live readers plus the live readers waiting
// before it leave room under the bound. A writer may go when no live
// writer holds it, no live reader holds it, and nobody live waits before
// it. Everyone else waits in the queue, renewing its entry.
func rwDecide(in rwInput) rwDecision {
	v := in.view
	switch {
	case !v.known && v.failed == nil && len(in.attempts) == 0:
		// Nothing known yet: write at once, on the conditions of the usual
		// case (a blind write: see readerGrant), and learn the item from
		// the failure otherwise.
		return rwDecision{step: rwWrite}
	case !v.known:
		if v.failed != nil && !in.deadline.IsZero() && !in.now.Before(in.deadline) {
			return rwDecision{step: rwFail, err: notGranted(v.failed, "rwlock %q", in.name)}
		}
		return rwDecision{step: rwRead, at: in.now.Add(in.refresh)}
	case v.absent:
		return rwDecision{step: rwWrite}
	case v.bad != nil:
		return rwDecision{step: rwFail, err: notGranted(v.bad, "rwlock %q holds an item this client cannot interpret; it is treated as held", in.name)}
	}
	if d, ok := rwOwnGrant(in); ok {
		return d
	}
	live := func(at time.Time, lease time.Duration) bool { return in.now.Before(at.Add(lease)) }
	wake := in.now.Add(in.refresh)
	soonest := func(at time.Time) { // an entry that may die before the next poll
		if at.After(in.now) {
			wake = earliest(wake, at)
		}
	}

	var d rwDecision
	writerLive := false
	if w := v.writer; w != nil {
		if live(in.seen.writer.at, w.lease) {
			writerLive = true
			soonest(in.seen.writer.at.Add(w.lease))
		} else {
			d.takeover = w.rvn
		}
	}
	liveReaders := 0
	for _, r := range v.readers {
		if r.id == in.id {
			continue // this call's own entry, whose lease is over (rwOwnGrant): the grant writes it anew
		}
		if !r.bad && live(in.seen.readers[r.id].at, r.lease) {
			liveReaders++
			soonest(in.seen.readers[r.id].at.Add(r.lease))
		} else {
			d.removeReaders = append(d.removeReaders, r.id)
		}
	}
	// This waiter's ticket orders it only while its entry is in the queue:
	// one not in it (yet, or dropped as dead) is behind everyone in it.
	mine := slices.ContainsFunc(v.queue, func(w rwWaiter) bool { return w.id == in.id })
	ticket := in.ticket
	if !mine {
		ticket = 0
	}
	writerBefore, readersBefore, anyBefore := false, 0, false
	for _, w := range v.queue {
		if w.id == in.id {
			d.removeQueue = append(d.removeQueue, w.id)
			d.removeBeats = append(d.removeBeats, "")
			d.mineAt = len(d.removeQueue)
			continue
		}
		if w.bad || !live(in.seen.queue[w.id].at, w.lease) {
			if len(d.removeQueue) < maxRemovals {
				d.removeQueue = append(d.removeQueue, w.id)
				d.removeBeats = append(d.removeBeats, w.beat)
			}
			continue
		}
		if ticket != 0 && !w.before(ticket, in.id) {
			continue // behind this waiter
		}
		soonest(in.seen.queue[w.id].at.Add(w.lease))
		anyBefore = true
		if w.writer {
			writerBefore = true
		} else {
			readersBefore++
		}
	}

	var blocked error
	switch {
	case writerLive:
		blocked = &LockHeldError{Key: in.name, Owner: v.writer.owner, LeaseDuration: v.writer.lease}
	case in.writer && liveReaders > 0:
		blocked = &LockHeldError{Key: in.name, Owner: "(readers)", LeaseDuration: 0}
	case in.writer && anyBefore, !in.writer && writerBefore:
		blocked = &LockHeldError{Key: in.name, Owner: "(waiters in the queue)", LeaseDuration: 0}
	case !in.writer && liveReaders >= in.maxReader:
		return rwDecision{step: rwFail, err: notGranted(&TooManyReadersError{Name: in.name, Max: in.maxReader}, "rwlock %q", in.name)}
	case !in.writer && liveReaders+readersBefore >= in.maxReader:
		// Readers before this one fill the last places: wait until they
		// are in, and are refused then if no place is left.
		blocked = &TooManyReadersError{Name: in.name, Max: in.maxReader}
	}
	if blocked == nil {
		d.step = rwWrite
		if !in.writer && liveReaders+len(d.removeReaders) < in.maxReader {
			d.removeReaders = nil // room without dropping the dead: leave them to a writer
		}
		return d
	}
	switch {
	case in.failFast:
		return rwDecision{step: rwFail, err: notGranted(blocked, "FailIfLocked")}
	case !in.deadline.IsZero() && !in.now.Before(in.deadline):
		return rwDecision{step: rwFail, err: notGranted(&TimeoutError{Age: in.now.Sub(in.start)}, "rwlock %q stayed unavailable: %v", in.name, blocked)}
	case !mine || !in.now.Before(in.renewAt):
		return rwDecision{step: rwJoin}
	}
	wake = earliest(wake, in.renewAt)
	if !in.deadline.IsZero() {
		wake = earliest(wake, in.deadline)
	}
	return rwDecision{step: rwRead, at: wake}
}

// rwOwnGrant recognises an item that carries a granting write of this call
// whose answer was lost (or came after a failure the SDK retried).
func rwOwnGrant(in rwInput) (rwDecision, bool) {
	v := in.view
	if in.writer {
		if v.writer == nil || v.writer.owner != in.owner {
			return rwDecision{}, false
		}
		a, ok := in.attempts[v.writer.rvn]
		if !ok {
			return rwDecision{}, false
		}
		if in.now.Before(a.sent.Add(a.lease)) {
			return rwDecision{step: rwClaim, claim: v.writer.rvn}, true
		}
		return rwDecision{step: rwWrite, takeover: v.writer.rvn}, true // ours, but its lease is over: take it anew
	}
	for _, r := range v.readers {
		if r.id != in.id {
			continue
		}
		if a, ok := in.attempts[r.beat]; ok && in.now.Before(a.sent.Add(a.lease)) {
			return rwDecision{step: rwClaim, claim: r.beat}, true
		}
		// Ours, but its lease is over: it counts as a dead reader, and the
		// next grant writes the entry anew.
	}
	return rwDecision{}, false
}
