package dynamolock

import (
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// rwParts are the parts of a read/write lock's item beside the writer's
// slot (which is the item's exclusive holder: view.rec): the readers, the
// queue of waiters of both kinds and the counters. The engine's view of an
// RWLock's key carries them (view.rw), each entry with the time this
// client first saw its beat.
type rwParts struct {
	token uint64 // the item's fencing token

	readers        []rwEntry
	readersPresent bool   // the readers map exists
	readersVersion uint64 // counts every change of the readers map
	versionPresent bool

	queue          []rwWaiter
	queuePresent   bool
	writersArrived uint64
	arrivedPresent bool
}

// rwEntry is a reader's entry in the readers map, with the time this
// client first saw its beat.
type rwEntry struct {
	lockitem.Reader
	seen time.Time // when this client first saw beat in the entry
}

// rwWaiter is a waiter in the queue (its kind in Writer), with the time
// this client first saw its beat.
type rwWaiter struct {
	waiter
	seen time.Time // when this client first saw its beat
}

// decodeRWParts reads the read/write parts of item. An attribute of the
// wrong type is an *ItemFormatError: the item is then treated as held.
func decodeRWParts(item map[string]types.AttributeValue) (*rwParts, error) {
	p := &rwParts{}
	p.token, _ = lockitem.Uint(item, lockitem.FencingToken)
	if m, ok := item[lockitem.Readers].(*types.AttributeValueMemberM); ok {
		p.readersPresent = true
		for id, ev := range m.Value {
			p.readers = append(p.readers, rwEntry{Reader: lockitem.DecodeReader(id, ev)})
		}
		slices.SortFunc(p.readers, func(a, b rwEntry) int { return strings.Compare(a.ID, b.ID) }) // see lockitem.Queue
	} else if _, ok := item[lockitem.Readers]; ok {
		return nil, &ItemFormatError{Attribute: lockitem.Readers, Reason: "not of type M"}
	}
	var err error
	if p.readersVersion, p.versionPresent, err = lockitem.OptionalUint(item, lockitem.ReadersVersion); err != nil {
		return nil, formatErr(err)
	}
	if p.writersArrived, p.arrivedPresent, err = lockitem.OptionalUint(item, lockitem.WritersArrived); err != nil {
		return nil, formatErr(err)
	}
	ws, present, ok := lockitem.Queue(item) // in id order
	if !ok {
		return nil, &ItemFormatError{Attribute: lockitem.FairQueue, Reason: "not of type M"}
	}
	p.queuePresent = present
	for _, w := range ws {
		p.queue = append(p.queue, rwWaiter{waiter: w})
	}
	return p, nil
}

// maxLease is the longest lease a time.Duration holds.
const maxLease = lockitem.MaxLease

// observe records, on this client's shared observations (here), the beats
// of the readers and waiters p shows on the key regKey, and gives each
// entry the time this client first saw its beat: judged on those, an
// acquisition that gives up (FailIfLocked) and the next one on the key
// take over the same dead entries a single long wait would.
func (p *rwParts) observe(h *here, regKey string, now time.Time) {
	beats := make(map[string]string, len(p.readers)+len(p.queue))
	for _, r := range p.readers {
		beats["r"+r.ID] = r.Beat
	}
	for _, w := range p.queue {
		beats["q"+w.ID] = w.Beat
	}
	seen := h.observeBeats(regKey, beats, now)
	for i := range p.readers {
		p.readers[i].seen = seen["r"+p.readers[i].ID]
	}
	for i := range p.queue {
		p.queue[i].seen = seen["q"+p.queue[i].ID]
	}
}

// rwGrant is what a read/write lock's granting write removes beside
// taking the lock.
type rwGrant struct {
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
}

// rwInput is everything a read/write acquisition's decision looks at.
type rwInput struct {
	view      *view
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
	// poll, when set, is the wait before the next read of a waiter of
	// rank in the queue of n live entries (1: the first live entry;
	// internal/pacing): a waiter with a place polls by its rank, as a fair lock's
	// does, not once a refresh period.
	poll func(rank, n int) time.Duration
}

// rwDecide is a read/write acquisition's decision, the engine's decide for
// this kind of holder: a pure function of what it has seen and the time.
//
// A reader may go when no live writer holds the lock, no live writer waits
// before it in the queue (a reader that is not in the queue is behind
// everyone in it), and the live readers plus the live readers waiting
// before it leave room under the bound. A writer may go when no live
// writer holds it, no live reader holds it, and nobody live waits before
// it. Everyone else waits in the queue, renewing its entry; one that finds
// the queue full (lockitem.MaxWaiters) waits behind it, polling, until a place
// frees.
func rwDecide(in rwInput) decision {
	v := in.view
	switch {
	case !v.known && v.failed == nil && len(in.attempts) == 0:
		// Nothing known yet: write at once, on the conditions of the usual
		// case (a blind write: see readerGrant), and learn the item from
		// the failure otherwise.
		return decision{step: stepWrite}
	case !v.known:
		if v.failed != nil && !in.deadline.IsZero() && !in.now.Before(in.deadline) {
			return decision{step: stepFail, err: notGranted(v.failed, "rwlock %q", in.name)}
		}
		return decision{step: stepRead, at: in.now.Add(in.refresh)}
	case v.absent:
		return decision{step: stepWrite}
	case v.bad != nil:
		return decision{step: stepFail, err: notGranted(v.bad, "rwlock %q holds an item this client cannot interpret; it is treated as held", in.name)}
	}
	if d, ok := rwOwnGrant(in); ok {
		return d
	}
	p := v.rw
	wake := in.now.Add(in.refresh)
	soon := in.now.Add(forever)     // the first death of an entry or holder seen
	soonest := func(at time.Time) { // an entry that may die before the next poll
		if at.After(in.now) {
			wake, soon = earliest(wake, at), earliest(soon, at)
		}
	}

	d := decision{step: stepWrite, grant: &rwGrant{}}
	g := d.grant
	// liveUntil is when a holder seen at seen with lease dies unless it
	// renews; a session's holder, when its session does (whose end mark
	// then goes before the write that drops it). ok is false for a
	// session not judged yet (not reached: learn records it).
	liveUntil := func(seen time.Time, lease time.Duration, session string) (time.Time, bool) {
		if session == "" {
			return seen.Add(lease), true
		}
		s, ok := v.sessions[session]
		if ok && !s.ended && !in.now.Before(s.deadAt(in.now)) &&
			!slices.ContainsFunc(d.endSessions, func(e sessionState) bool { return e.key == s.key }) {
			d.endSessions = append(d.endSessions, s)
		}
		return s.deadAt(in.now), ok
	}
	var writer *lockRecord
	if v.rec != nil && !v.rec.Released {
		writer = v.rec
	}
	writerLive := false
	if writer != nil {
		end, ok := liveUntil(v.seen, writer.Lease, writer.Session)
		switch {
		case !ok:
			return decision{step: stepRead, at: wake}
		case in.now.Before(end):
			writerLive = true
			soonest(end)
		default:
			d.takeover = writer.RVN
		}
	}
	liveReaders := 0
	for _, r := range p.readers {
		if r.ID == in.id {
			continue // this call's own entry, whose lease is over (rwOwnGrant): the grant writes it anew
		}
		end, ok := liveUntil(r.seen, r.Lease, r.Session)
		switch {
		case !ok && !r.Bad:
			return decision{step: stepRead, at: wake}
		case !r.Bad && in.now.Before(end):
			liveReaders++
			soonest(end)
		default:
			g.removeReaders = append(g.removeReaders, r.ID)
		}
	}
	// This waiter's ticket orders it only while its entry is in the queue:
	// one not in it (yet, or dropped as dead) is behind everyone in it.
	mine := slices.ContainsFunc(p.queue, func(w rwWaiter) bool { return w.ID == in.id })
	ticket := in.ticket
	if !mine {
		ticket = 0
	}
	writerBefore, readersBefore, anyBefore, before, live := false, 0, false, 0, 1
	for _, w := range p.queue {
		if w.ID == in.id {
			g.removeQueue = append(g.removeQueue, w.ID)
			g.removeBeats = append(g.removeBeats, "")
			g.mineAt = len(g.removeQueue)
			continue
		}
		if w.Bad || !in.now.Before(w.seen.Add(w.Lease)) {
			if len(g.removeQueue) < maxRemovals {
				g.removeQueue = append(g.removeQueue, w.ID)
				g.removeBeats = append(g.removeBeats, w.Beat)
			}
			continue
		}
		live++
		if ticket != 0 && !w.Before(ticket, in.id) {
			continue // behind this waiter
		}
		soonest(w.seen.Add(w.Lease))
		anyBefore = true
		before++
		if w.Writer {
			writerBefore = true
		} else {
			readersBefore++
		}
	}

	var blocked error
	renew := false
	switch {
	case writerLive:
		blocked = &LockHeldError{Key: in.name, Owner: writer.Owner, LeaseDuration: writer.Lease}
	case in.writer && liveReaders > 0:
		blocked = &LockHeldError{Key: in.name, Owner: "(readers)", LeaseDuration: 0}
	case in.writer && anyBefore, !in.writer && writerBefore:
		blocked = &LockHeldError{Key: in.name, Owner: "(waiters in the queue)", LeaseDuration: 0}
	case !in.writer && liveReaders >= in.maxReader:
		return decision{step: stepFail, err: notGranted(&TooManyReadersError{Name: in.name, Max: in.maxReader}, "rwlock %q", in.name)}
	case !in.writer && liveReaders+readersBefore >= in.maxReader:
		// Readers before this one fill the last places: wait until they
		// are in, and are refused then if no place is left.
		blocked = &TooManyReadersError{Name: in.name, Max: in.maxReader}
	}
	if blocked == nil {
		if !in.writer && liveReaders+len(g.removeReaders) < in.maxReader {
			g.removeReaders = nil // room without dropping the dead: leave them to a writer
			if d.takeover == "" {
				d.endSessions = nil // and their sessions
			}
		}
		return d
	}
	switch {
	case in.failFast:
		return decision{step: stepFail, err: notGranted(blocked, "FailIfLocked")}
	case !in.deadline.IsZero() && !in.now.Before(in.deadline):
		return decision{step: stepFail, err: notGranted(&TimeoutError{Age: in.now.Sub(in.start)}, "rwlock %q stayed unavailable: %v", in.name, blocked)}
	case !mine && len(p.queue) >= lockitem.MaxWaiters:
		// No place in the queue: wait behind it, and join once one frees.
	case !mine || !in.now.Before(in.renewAt):
		return decision{step: stepJoin}
	default:
		if in.poll != nil {
			// Polled by rank: the entries' deaths still wake it (soon).
			wake = earliest(soon, in.now.Add(in.poll(before+1, live)))
		}
		if in.renewAt.Before(wake) {
			// The renewal of its place comes first: it goes without a
			// read, its answer shows the item.
			wake, renew = in.renewAt, true
		}
	}
	if !in.deadline.IsZero() && in.deadline.Before(wake) {
		wake, renew = in.deadline, false
	}
	return decision{step: stepRead, at: wake, renew: renew}
}

// rwOwnGrant recognises an item that carries a granting write of this call
// whose answer was lost (or came after a failure the SDK retried).
func rwOwnGrant(in rwInput) (decision, bool) {
	v := in.view
	if in.writer {
		w := v.rec
		if w == nil || w.Released || w.Owner != in.owner {
			return decision{}, false
		}
		a, ok := in.attempts[w.RVN]
		if !ok {
			return decision{}, false
		}
		if in.now.Before(a.sent.Add(a.lease)) {
			return decision{step: stepClaim, claim: w.RVN}, true
		}
		// Ours, but its lease is over: take it anew (rewriteOwn).
		return rewriteOwn(a, in.now, in.start, in.deadline, in.refresh, len(in.attempts), in.name,
			decision{step: stepWrite, takeover: w.RVN, grant: &rwGrant{}}), true
	}
	for _, r := range v.rw.readers {
		if r.ID != in.id {
			continue
		}
		a, ok := in.attempts[r.Beat]
		if ok && in.now.Before(a.sent.Add(a.lease)) {
			return decision{step: stepClaim, claim: r.Beat}, true
		}
		// Ours, but its lease is over: it counts as a dead reader, and the
		// next grant writes the entry anew, paced as rewriteOwn says.
		if ok {
			if d := rewriteOwn(a, in.now, in.start, in.deadline, in.refresh, len(in.attempts), in.name, decision{step: stepWrite}); d.step != stepWrite {
				return d, true
			}
		}
	}
	return decision{}, false
}

// readerSessions are the keys of the sessions that hold the readers of v's
// item.
func (v *view) readerSessions() []string {
	if v.rw == nil {
		return nil
	}
	var keys []string
	for _, r := range v.rw.readers {
		if r.Session != "" && !r.Bad {
			keys = append(keys, r.Session)
		}
	}
	return keys
}

// readersHolding is the number of readers whose entries v's item holds (0
// for an item that is not a read/write lock's).
func (v *view) readersHolding() int {
	if v.rw == nil {
		return 0
	}
	return len(v.rw.readers)
}
