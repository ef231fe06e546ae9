package dynamolock

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// here is what one client's acquisitions, locks and heartbeats share about
// keys inside the process:
//
//   - the registry: the locks the client holds, by registry key;
//   - in flight: the RVNs of acquiring writes sent and not yet settled
//     (answered, held, undone or given up);
//   - wake-ups: acquisitions waiting for a key this client holds learn at
//     once that the lock ended here, instead of at their next poll (other
//     processes still poll, and the woken waiter still has to win the same
//     conditional write); a new plain acquisition of a key held here, or
//     being handed to a woken waiter, waits among the waiters instead of
//     writing (busy);
//   - gates: reentrant acquisitions of one key take turns;
//   - publishing: the keys a multi-key acquisition registered and may
//     still release; a reentrant acquisition waits until it has decided
//     (adoptable);
//   - observations: the RVN last seen in another owner's item per key, and
//     when it was first seen, so that FailIfLocked can take over a dead
//     owner's lock across calls.
//
// Its methods are safe for concurrent use. The rules that keep these
// agreeing, which the callers follow:
//
//  1. A lock is added to the registry (add) before the RVN of the write
//     that took it leaves in flight (settled). So a waiter here that sees
//     an item this client wrote always finds it held or in flight here
//     (heldOrInFlight), and a reentrant acquisition never takes over a
//     write of its own client whose answer has not come yet.
//  2. Ending a lock (end) takes it out of the registry, then closes its
//     Done, then wakes the acquisitions here that watch its key: whoever
//     wakes on either and asks again does not find the lock. A waiter
//     watches a key (watch) before it decides to sleep, so an end from
//     then on always wakes it, or, for plain waiters, the one of them that
//     watched longest (see wake).
//  3. Before each call on a key an acquisition notes the count of locks
//     ended here on any key (noteCall, the one place that sets
//     watch.endsBefore); endedSince then tells whether the holder here
//     that the answer named may have ended since.
//  4. A key's observation is forgotten once a lock on it is held here.
type here struct {
	mu    sync.RWMutex
	locks map[string]*Lock // the registry; guarded by mu
	// granted is when each lock of the registry was added to it (its
	// grant), until it ends: the hold's duration; guarded by mu. Apart from
	// locks, so that a lock replaced there still has its grant.
	granted map[*Lock]time.Time

	inflight sync.Map // RVN → struct{}

	wakeMu sync.Mutex
	wakes  map[string][]*wakeup // guarded by wakeMu; in the order they watched
	// handing: the hand-over of each key to the plain waiter last woken
	// on it, until that waiter has written (see busy); guarded by wakeMu.
	handing  map[string]handover
	handoffs uint64        // hand-overs so far, numbering them; guarded by wakeMu
	ended    atomic.Uint64 // locks that ended here, on any key

	gates keyGates
	seen  observations

	// publishing: registry keys whose locks a multi-key acquisition has
	// registered and not returned yet (it may still release them: see
	// holdAll), each with a channel closed when it is done; guarded by mu.
	publishing map[string]chan struct{}
}

func newHere(maxObservations int) here {
	return here{locks: make(map[string]*Lock), granted: make(map[*Lock]time.Time), seen: observations{m: make(map[string]observation), max: maxObservations}}
}

// held returns the lock held here for regKey, if any.
func (h *here) held(regKey string) *Lock {
	h.mu.RLock()
	l := h.locks[regKey]
	h.mu.RUnlock()
	if l == nil || !l.held() {
		return nil // ending: it leaves the registry in a moment
	}
	return l
}

// adoptable returns the lock held here for regKey that a reentrant
// acquisition may return as its own, if any. While a multi-key acquisition
// still decides whether to keep the lock it registered for regKey, there
// is none yet: wait is then a channel closed once it has decided (the
// lock is then returned to that caller, or released).
func (h *here) adoptable(regKey string) (l *Lock, wait <-chan struct{}) {
	// One look at both: publish marks a key before its lock is registered,
	// so a lock found here without a mark was not registered by a call
	// still deciding.
	h.mu.RLock()
	ch := h.publishing[regKey]
	l = h.locks[regKey]
	h.mu.RUnlock()
	if ch != nil {
		return nil, ch
	}
	if l == nil || !l.held() {
		return nil, nil // ending: it leaves the registry in a moment
	}
	return l, nil
}

// publish marks regKeys as publishing (see adoptable) until done is called.
func (h *here) publish(regKeys []string) (done func()) {
	ch := make(chan struct{})
	h.mu.Lock()
	if h.publishing == nil {
		h.publishing = make(map[string]chan struct{})
	}
	for _, k := range regKeys {
		h.publishing[k] = ch // one acquisition holds a key at a time
	}
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		for _, k := range regKeys {
			if h.publishing[k] == ch {
				delete(h.publishing, k)
			}
		}
		h.mu.Unlock()
		close(ch)
	}
}

// count is the number of locks in the registry.
func (h *here) count() int {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return len(h.locks)
}

// all returns the locks in the registry, by registry key.
func (h *here) all() []*Lock {
	h.mu.RLock()
	defer h.mu.RUnlock()
	locks := make([]*Lock, 0, len(h.locks))
	keys := make([]string, 0, len(h.locks))
	for k := range h.locks {
		keys = append(keys, k)
	}
	// In key order, not the map's random one: Close releases them in this
	// order, so that a run of the simulation is one run of its seed.
	slices.Sort(keys)
	for _, k := range keys {
		locks = append(locks, h.locks[k])
	}
	return locks
}

// add registers l (rule 1) and returns the lock of its key registered
// before, if any, and whether l replaced it. It does not when that lock's
// acquiring write came after l's (a higher fencing token: every acquiring
// write of an item raises it): l's answer, or a multi-key call's reads
// after its transaction, came late, and meanwhile another acquisition with
// this owner name adopted the item l's write made, and one of this
// client's took it from that one. l is then the lock superseded, not prev
// (the simulation's invariant 2, seed 46400421).
func (h *here) add(l *Lock, now time.Time) (prev *Lock, replaced bool) {
	token := l.FencingToken()
	h.mu.Lock()
	defer h.mu.Unlock()
	k := l.regKey()
	prev = h.locks[k]
	if prev != nil && prev != l && token != 0 && prev.FencingToken() > token {
		return prev, false
	}
	h.locks[k] = l
	if _, ok := h.granted[l]; !ok {
		h.granted[l] = now
	}
	return prev, true
}

// end takes l out of the registry (unless another lock of its key replaced
// it there), then cancels its end context (closing Done) with reason, then
// wakes the acquisitions watching its key: rule 2. It returns how long l
// was held since it was added, if it was.
func (h *here) end(l *Lock, cancel context.CancelCauseFunc, reason error, now time.Time) (held time.Duration, granted bool) {
	k := l.regKey()
	h.mu.Lock()
	if h.locks[k] == l {
		delete(h.locks, k)
	}
	at, granted := h.granted[l]
	delete(h.granted, l)
	h.mu.Unlock()
	if cancel != nil {
		cancel(reason)
	}
	h.wake(k, now)
	if !granted {
		return 0, false
	}
	return max(now.Sub(at), 0), true
}

// sending records rvn, an acquiring write about to be sent, as in flight.
func (h *here) sending(rvn string) { h.inflight.Store(rvn, struct{}{}) }

// settled takes rvn out of flight: after the lock it took is added (rule
// 1), or once it was undone or given up.
func (h *here) settled(rvn string) { h.inflight.Delete(rvn) }

// inFlight reports whether rvn is an acquiring write of this client not
// yet settled.
func (h *here) inFlight(rvn string) bool {
	_, ok := h.inflight.Load(rvn)
	return ok
}

// heldOrInFlight reports whether a lock on regKey is held here, or rvn is
// an acquiring write of this client not yet settled (rule 1: one or the
// other while the item shows this client's write).
func (h *here) heldOrInFlight(regKey, rvn string) bool {
	return h.held(regKey) != nil || h.inFlight(rvn)
}

// noteCall records in w, before a call on its key, the count of locks
// ended here (rule 3).
func (h *here) noteCall(w *watch) { w.endsBefore = h.ended.Load() }

// endedSince reports whether a lock ended here, on any key, since the last
// call on w's key.
func (h *here) endedSince(w *watch) bool { return h.ended.Load() != w.endsBefore }

// wakeup is one acquisition watching a key (see watch).
type wakeup struct {
	ch     chan struct{}   // closed when it is woken
	notify chan<- struct{} // also told, without blocking (an acquisition waiting on several keys)
	// one: a plain waiter, which on waking writes at once. Only the first
	// of these is woken by one end (see wake).
	one bool
	// handover numbers the hand-over to a plain waiter woken (set before
	// ch is closed): the waiter settles it by it (handedOver).
	handover uint64
}

// handover is a key's hand-over to a woken plain waiter: when it was
// woken, and the hand-over's number.
type handover struct {
	at time.Time
	n  uint64
}

// watch returns the watch of regKey, whose channel is closed when a lock
// on regKey ends here and this watch is woken (see wake), and the function
// that stops watching. Once that function has returned, the watch can no
// longer be woken: read its channel after it, or a wake-up that comes in
// between is lost.
// notify, when not nil, is also sent to (without blocking) when that
// happens, so that one wait can watch several keys. one marks a plain
// waiter (one key, no fair queue), which writes as soon as it wakes.
func (h *here) watch(regKey string, notify chan<- struct{}, one bool) (*wakeup, func()) {
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	if h.wakes == nil {
		h.wakes = make(map[string][]*wakeup)
	}
	u := &wakeup{ch: make(chan struct{}), notify: notify, one: one}
	h.wakes[regKey] = append(h.wakes[regKey], u)
	return u, func() {
		h.wakeMu.Lock()
		defer h.wakeMu.Unlock()
		us := h.wakes[regKey]
		if i := slices.Index(us, u); i >= 0 {
			us = slices.Delete(us, i, i+1)
		}
		if len(us) == 0 {
			delete(h.wakes, regKey)
		} else {
			h.wakes[regKey] = us
		}
	}
}

// wake counts a lock's end and wakes the acquisitions watching regKey:
// every one that reads before it writes (fair, several keys), and the
// plain waiter that has watched longest. Waking every plain waiter would
// send them all to write at once, and all but one write would fail on
// the winner's item (measured on one contended key: 2 clients × 8
// goroutines made 155–162 acquisitions/s with every waiter woken); the
// others stay watching, and the next end here wakes the next of them. A
// woken waiter whose write loses to another process leaves the rest to
// their polls, as the loser itself then is.
func (h *here) wake(regKey string, now time.Time) {
	h.ended.Add(1)
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	h.wakeLocked(regKey, true, now)
}

// passOn wakes the plain waiter on regKey that has watched longest: an
// acquisition woken by wake that gives up without the lock passes its
// wake-up on, so that the others do not wait for their next poll.
func (h *here) passOn(regKey string, now time.Time) {
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	h.wakeLocked(regKey, false, now)
}

// wakeLocked wakes the first plain waiter on regKey and, when all, every
// other watcher that is not a plain waiter.
func (h *here) wakeLocked(regKey string, all bool, now time.Time) {
	us := h.wakes[regKey]
	kept, woke := us[:0], false
	for _, u := range us {
		if u.one && woke || !u.one && !all {
			kept = append(kept, u)
			continue
		}
		if u.one {
			woke = true
			if h.handing == nil {
				h.handing = make(map[string]handover)
			}
			h.handoffs++
			u.handover = h.handoffs
			h.handing[regKey] = handover{at: now, n: h.handoffs}
		}
		close(u.ch)
		if u.notify != nil {
			select {
			case u.notify <- struct{}{}:
			default:
			}
		}
	}
	clear(us[len(kept):])
	if len(kept) == 0 {
		delete(h.wakes, regKey)
	} else {
		h.wakes[regKey] = kept
	}
}

// handedOver records that the plain waiter woken on regKey by hand-over n
// has written (or given up): the key is no longer being handed over,
// unless a later end handed it to another waiter meanwhile.
func (h *here) handedOver(regKey string, n uint64) {
	h.wakeMu.Lock()
	if h.handing[regKey].n == n {
		delete(h.handing, regKey)
	}
	h.wakeMu.Unlock()
}

// busy reports whether a plain acquisition of regKey that starts now
// should wait among the plain waiters here before it writes: a lock on the
// key is held here (the write would fail on its item), or the plain
// waiter woken by its end has not written yet (the two writes would race
// for the released item, and one of them fail). Such an acquisition
// watches the key, so that the next end here wakes it in its turn (see
// acquisition.yieldHere). A hand-over counts for handoverHold at most, so
// that a waiter that never writes holds no one up for longer.
func (h *here) busy(regKey string, now time.Time) bool {
	if h.held(regKey) != nil {
		return true
	}
	h.wakeMu.Lock()
	defer h.wakeMu.Unlock()
	ho, ok := h.handing[regKey]
	if ok && now.Sub(ho.at) >= handoverHold {
		delete(h.handing, regKey)
		return false
	}
	return ok
}

// handoverHold bounds how long a hand-over to a woken waiter counts as
// in progress (see busy): far more than a woken waiter needs to send its
// write.
const handoverHold = time.Second

// takeTurn waits for regKey's turn among reentrant acquisitions until ctx
// ends, and returns the function that gives the turn back.
func (h *here) takeTurn(ctx context.Context, regKey string) (leave func(), err error) {
	return h.gates.enter(ctx, regKey)
}

// observe records that regKey carried rvn at now and returns when this
// client first saw that rvn on it.
func (h *here) observe(regKey, rvn string, now time.Time) time.Time {
	return h.seen.observe(regKey, rvn, now)
}

// observeBeats records the beats (entry id → beat) that regKey's item
// carries beside its holder (an RWLock's readers and waiters) at now, and
// returns, for each, when this client first saw that beat in that entry.
// Entries no longer in the item are forgotten.
func (h *here) observeBeats(regKey string, beats map[string]string, now time.Time) map[string]time.Time {
	return h.seen.observeBeats(beatsKey(regKey), beats, now)
}

// beatsKey is the observations' key of regKey's other entries: a form no
// registry key has (valid UTF-8 never holds 0xfd).
func beatsKey(regKey string) string { return "\xfd" + regKey }

// forget drops regKey's observation (rule 4).
func (h *here) forget(regKey string) { h.seen.forget(regKey) }

// keyGates lets callers take turns per key: one at a time on a key, none
// waiting on another key, and every wait ending with its context.
type keyGates struct {
	mu sync.Mutex
	m  map[string]*keyGate
}

type keyGate struct {
	turn chan struct{} // capacity one: holding the turn is having sent
	refs int           // callers holding or waiting for the turn
}

func (g *keyGates) enter(ctx context.Context, key string) (leave func(), err error) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[string]*keyGate)
	}
	gate := g.m[key]
	if gate == nil {
		gate = &keyGate{turn: make(chan struct{}, 1)}
		g.m[key] = gate
	}
	gate.refs++
	g.mu.Unlock()
	select {
	case gate.turn <- struct{}{}:
		return func() {
			<-gate.turn
			g.drop(key, gate)
		}, nil
	case <-ctx.Done():
		g.drop(key, gate)
		return nil, context.Cause(ctx)
	}
}

func (g *keyGates) drop(key string, gate *keyGate) {
	g.mu.Lock()
	gate.refs--
	if gate.refs == 0 {
		delete(g.m, key)
	}
	g.mu.Unlock()
}

// observations is bounded: when full, an arbitrary entry is dropped (it
// only delays a takeover).
type observations struct {
	mu  sync.Mutex
	m   map[string]observation
	max int
}

type observation struct {
	rvn  string
	seen time.Time
	// The record version number seen before rvn, and when it was first
	// seen: an answer older than the last one (a call of this client whose
	// answer came later, with the item as it was before a renewal) replaces
	// rvn for a moment, and the next answer shows the current one again;
	// it keeps the time it was first seen (see observe).
	prevRVN  string
	prevSeen time.Time
	// beats holds, for the other entries of an item (observeBeats), the
	// beat seen in each and when it was first seen.
	beats map[string]beatSeen
}

// observe records that key's item carries rvn at now, and returns when
// this client first saw it there. A record version number is drawn anew by
// every write: one seen again after another was seen in between is the
// same holder's, unrenewed since it was first seen, and two calls of one
// client can see the item out of order (an answer older than the one
// before it). So the one seen just before keeps its time: counting anew
// from the older answer's successor put a fair head's takeover of a dead
// holder 59 ms past its lease and the simulation's slack (seed 64000275,
// invariant 23). It never makes a takeover earlier than the holder's
// lease since that record version number was first seen.
func (o *observations) observe(key, rvn string, now time.Time) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	ob, ok := o.m[key]
	if ok && ob.rvn == rvn {
		return ob.seen
	}
	if !ok && len(o.m) >= o.max {
		for k := range o.m {
			delete(o.m, k)
			break
		}
	}
	seen := now
	if ok && ob.prevRVN == rvn && rvn != "" {
		seen = ob.prevSeen
	}
	o.m[key] = observation{rvn: rvn, seen: seen, prevRVN: ob.rvn, prevSeen: ob.seen}
	return seen
}

func (o *observations) forget(key string) {
	o.mu.Lock()
	delete(o.m, key)
	o.mu.Unlock()
}

func (o *observations) observeBeats(key string, beats map[string]string, now time.Time) map[string]time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	old := o.m[key].beats
	if _, ok := o.m[key]; !ok && len(o.m) >= o.max {
		for k := range o.m {
			delete(o.m, k)
			break
		}
	}
	kept := make(map[string]beatSeen, len(beats))
	seen := make(map[string]time.Time, len(beats))
	for id, beat := range beats {
		s, ok := old[id]
		if !ok || s.beat != beat {
			s = beatSeen{beat: beat, at: now}
		}
		kept[id] = s
		seen[id] = s.at
	}
	o.m[key] = observation{beats: kept}
	return seen
}
