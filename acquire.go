package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// AcquireLock acquires key, as AcquireLockWithContext does with
// context.Background().
func (c *Client) AcquireLock(key string, opts ...AcquireLockOption) (*Lock, error) {
	return c.AcquireLockWithContext(context.Background(), key, opts...)
}

// AcquireLockWithContext acquires the lock on key.
//
// A free or released lock costs one conditional UpdateItem. When another
// owner holds it, the call takes a place in the key's queue (one more
// UpdateItem, renewed every third of its lease, removed by the acquiring
// write) and polls the item with a consistent GetItem by its rank in the
// queue: the head up to 18 times a second (every 55.6 ms for a lone
// waiter) or sooner, the others more rarely (see
// [WithRefreshPeriod]), so that a release in another process is taken
// within one poll of the head. If the item's record version
// number stays the same for a full lease of the holder, measured on this
// host's monotonic clock, the holder is taken to be dead and the lock is
// taken over with a write conditioned on that version. If the holder keeps
// renewing it, the acquisition gives up after the holder's lease plus
// [WithAdditionalTimeToWaitForLock] with a *[LockNotGrantedError] wrapping a
// *[TimeoutError] (dynamolock v2's bound, kept here; [Client.Do],
// [Client.AcquireLocks], [Semaphore.Acquire] and [Election.Campaign] wait
// as long as ctx allows instead).
//
// When ctx ends the wait stops at once; the error matches both ctx.Err() and
// *LockNotGrantedError. A DynamoDB that cannot be reached is waited out
// within the same bound once it has answered the client, as
// *[ConnectionError] says. A write of this call that may have landed (its answer
// was lost) is released again before an acquisition that gives up returns.
// Bad input returns an *[InvalidArgumentError] before any DynamoDB call.
func (c *Client) AcquireLockWithContext(ctx context.Context, key string, opts ...AcquireLockOption) (*Lock, error) {
	return c.acquireKey(ctx, key, opts, false)
}

// acquireKey acquires one key; untilCtx: without an explicit
// WithAdditionalTimeToWaitForLock, wait as long as ctx allows.
func (c *Client) acquireKey(ctx context.Context, key string, opts []AcquireLockOption, untilCtx bool) (l *Lock, err error) {
	ctx, t := c.startAcquire(ctx, kindLock, key)
	defer func() { t.end(err, l) }()
	return c.acquireKeyIn(ctx, t, key, opts, untilCtx)
}

// acquireKeyIn is acquireKey within the span of t, the call's (an
// Election's campaign makes several).
func (c *Client) acquireKeyIn(ctx context.Context, t *acqTrace, key string, opts []AcquireLockOption, untilCtx bool) (*Lock, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	o, err := c.acquireOptions(opts, untilCtx)
	if err != nil {
		return nil, err
	}
	if err := c.checkKey(key, o); err != nil {
		return nil, err
	}
	a := c.newAcquisition(modeOne, o, []string{key}, quoteKey(key))
	t.attach(a)
	if w := a.watches[0]; w.fair == nil && !o.failIfLocked && !o.refreshGiven {
		// A plain waiter takes an unordered place in the key's queue, so
		// that only the head of the queue polls fast (internal/pacing). One whose
		// caller chose the refresh period polls at it instead, as in
		// dynamolock v2, and writes nothing into the key's item while it
		// waits: on a hot key the places' writes (a join per wait, and its
		// renewals) cost more than the reads they save (2 clients of 8
		// goroutines at a 20 ms refresh period: 80-177 acquisitions a
		// second with places, where v2 made 136-383).
		w.fair = newPlainPlace(o)
	}
	l, err := a.acquireOne(ctx)
	c.metrics.Acquired(ctx, acquireOutcome(err), c.since(a.start))
	return l, err
}

// mode is what an acquisition wants of its keys.
type mode uint8

const (
	modeOne mode = iota // the one key
	modeAll             // every key, in one transaction (AcquireLocks)
	modeAny             // any one of the keys (a semaphore's slots)
)

// acquisition is the state of one acquiring call, for one key or several:
// a watch per key and one wait loop with one deadline (run).
type acquisition struct {
	c     *Client
	o     *acquireLockOptions
	mode  mode
	what  string // names the keys in errors: `key "a"`, `keys ["a" "b"]`, `semaphore "s"`
	start time.Time
	// deadline is when the wait ends: the additional time to wait plus
	// the longest lease among the first holders seen on each key, from the
	// start; zero until a holder is seen.
	deadline time.Time
	watches  []*watch
	// attempts holds every write this call sent, by the RVN it wrote, so
	// that a write whose answer was lost is recognised (and claimed) when
	// a later answer shows it, and released again (undo) if the call gives
	// up.
	attempts map[string]attempt
	// kind is the kind of holder this call acquires as (kind.go): its
	// decision, its writes, its queue; the loop, the deadline, admission
	// and Close are the engine's.
	kind holderKind
	// leases is where the locks of this call get their lease: their own,
	// or the client's session (lease.go).
	leases leaseSource
	// tr is the call's span and contention figures (trace.go); nil for an
	// acquisition that is no caller's (a session's own item).
	tr *acqTrace
}

// attempt is one acquiring write (an UpdateItem, or a transaction of one
// update per key, all with the same RVN).
type attempt struct {
	sent  time.Time // the lease and the stored expiry count from here
	lease time.Duration
	// unsure: it may have landed and the lock is not held (no answer said
	// it failed). Such writes are released again if the call gives up.
	unsure bool
	on     []*watch  // the keys it wrote
	shape  itemShape // where it wrote the lock: the holder's slot, or a reader's entry
	sess   *Session  // the session that holds what it wrote (WithSession); nil: its own lease
}

func (c *Client) newAcquisition(m mode, o *acquireLockOptions, keys []string, what string) *acquisition {
	a := &acquisition{c: c, o: o, mode: m, what: what, start: c.now(), attempts: make(map[string]attempt, 2), kind: exclusive{}, leases: ownLease{}}
	if c.cfg.session {
		a.leases = clientSession{}
	}
	for _, k := range keys {
		w := &watch{key: k, sortKey: o.sortKey, regKey: registryKey(k, o.sortKey)}
		if o.fair && m == modeOne {
			w.fair = newFairState(o)
		}
		a.watches = append(a.watches, w)
	}
	return a
}

// acquireOne runs a single-key acquisition.
func (a *acquisition) acquireOne(ctx context.Context) (*Lock, error) {
	c, w := a.c, a.watches[0]
	if a.o.reentrant {
		// Reentrant acquisitions of one key take turns, so that concurrent
		// ones return the same lock instead of each taking it from the
		// other. Only they wait for each other, and only while ctx lasts.
		leave, err := c.here.takeTurn(ctx, w.regKey)
		if err != nil {
			return nil, notGranted(err, "key %q: context done while waiting for another reentrant acquisition of the key", w.key)
		}
		defer leave()
		for {
			l, wait := c.here.adoptable(w.regKey)
			if wait == nil {
				if l != nil {
					return l, nil
				}
				break
			}
			// A multi-key acquisition of this client registered the key
			// and may still release it: the lock is not its to give yet.
			select {
			case <-wait:
			case <-ctx.Done():
				return nil, notGranted(context.Cause(ctx), "key %q: context done while another acquisition of this client decided whether to keep the key", w.key)
			}
		}
	}
	locks, err := a.admitThenRun(ctx)
	if err != nil {
		return nil, err
	}
	return locks[0], nil
}

// admitThenRun waits for heartbeat capacity for the locks this call takes
// (see [WithHeartbeatAdmission]), then acquires them, and cleans up after
// a call that gives up.
func (a *acquisition) admitThenRun(ctx context.Context) ([]*Lock, error) {
	n := len(a.watches)
	if a.mode != modeAll {
		n = 1
	}
	var admitted admission
	if a.leases.renewsEach() {
		var err error
		if admitted, err = a.c.admit(ctx, n, a.o.lease, a.admitEnd(), a.what); err != nil {
			return nil, err
		}
	}
	locks, err := a.run(ctx)
	defer func() { admitted.end(err == nil) }()
	if err != nil {
		for _, w := range a.watches {
			if w.handover != 0 {
				a.c.here.handedOver(w.regKey, w.handover)
				w.handover = 0
			}
			if w.woken {
				a.c.here.passOn(w.regKey, a.c.now()) // see here.wake
			}
		}
		// The undo before returning, in one bounded wait even when ctx has
		// ended: a write of this call that may have landed is taken back
		// before the caller hears it failed.
		cctx, cancel := a.c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
		a.undo(cctx)
		if ctx.Err() == nil {
			a.leaveQueues(cctx)
		} else {
			// The caller's context has ended: it returns now, and the
			// client leaves the queues it joined (a courtesy to the other
			// waiters: an entry left behind is dropped after its lease).
			a.c.background(a.tr.detached(a.leaveQueues))
		}
		cancel()
	}
	for rvn := range a.attempts {
		a.c.here.settled(rvn)
	}
	return locks, err
}

// unsure reports whether a write of the call may have landed unseen.
func (a *acquisition) unsure() bool {
	for _, at := range a.attempts {
		if at.unsure {
			return true
		}
	}
	return false
}

// run is the acquisition's one wait loop. Each key's next step comes from
// decide (through fairly); the mode combines them: one key writes as soon
// as it may; all keys write together once every one may (one
// transaction); any key writes the first slot that may. Between writes the
// loop sleeps until the earliest read any key is due, then reads the keys
// that are due.
func (a *acquisition) run(ctx context.Context) ([]*Lock, error) {
	if err := a.yieldHere(ctx); err != nil {
		return nil, err
	}
	now := a.c.now()
	for _, w := range a.watches {
		w.next = a.kind.first(a, w, now)
	}
	for {
		// Steps that need no wait: fail, claim, join the fair queue.
		for _, w := range a.watches {
			switch w.next.step {
			case stepFail:
				if a.mode != modeAny || !waitEnded(w.next.err) {
					return nil, w.next.err
				}
				if !w.out {
					w.out = true
					if a.allOut() {
						return nil, a.slotsHeld()
					}
				}
			case stepClaim:
				if locks, err := a.claim(ctx, w, w.next.claim); locks != nil || err != nil {
					a.tr.wrote(locks != nil && err == nil)
					return locks, err
				}
				if l, err := a.decideAll(ctx); l != nil || err != nil { // claimed too late: decided anew
					return one(l, err)
				}
			case stepJoin:
				if err := a.join(ctx, w); err != nil {
					return nil, err
				}
				// The queue changed: every key's decision may have.
				for _, x := range a.watches {
					x.dirty = true
				}
				if l, err := a.decideAll(ctx); l != nil || err != nil {
					return one(l, err)
				}
			}
		}
		if w := a.writable(); w != nil || (a.mode == modeAll && a.allWritable()) {
			var locks []*Lock
			var err error
			a.tr.writing(a, w)
			if a.mode == modeAll {
				locks, err = a.transact(ctx)
			} else {
				locks, err = a.write(ctx, w)
			}
			a.tr.wrote(locks != nil && err == nil)
			if locks != nil || err != nil {
				return locks, err
			}
			a.kind.wrote(a)
			if l, err := a.decideAll(ctx); l != nil || err != nil {
				return one(l, err)
			}
			continue
		}
		if a.pending() {
			continue // a step above changed a decision
		}
		a.tr.waiting(a)
		due, err := a.sleep(ctx)
		if err != nil {
			return nil, err
		}
		for _, w := range due {
			if w.woken && a.kind.handsOverHere(a, w) {
				// The lock on the key ended here (released, or lost): try
				// it at once rather than read it first. The write's
				// condition decides; a failure returns the item. A plain
				// waiter's place in the queue goes with the write.
				w.next = decision{step: stepWrite}
				if f := w.fair; f != nil && f.ticket != 0 {
					w.next.queue = &queueWrite{remove: []string{f.id}}
				}
				continue
			}
			if w.next.renew {
				// Its place is due for renewal before any read: the
				// renewal's answer shows the item.
				w.next = decision{step: stepJoin}
				continue
			}
			item, err := a.read(ctx, w)
			if err := a.learn(ctx, w, item, err); err != nil {
				return nil, err
			}
			if l, err := a.decideNext(ctx, w); l != nil || err != nil {
				return one(l, err)
			}
		}
	}
}

// yieldHere makes a plain acquisition of a key that is busy here (held by
// this client, or being handed over to the waiter its end woke: see
// here.busy) wait among the plain waiters before its first write, instead
// of sending a write that would fail on the holder's item or race the
// woken waiter for the released one. The end of the lock here wakes the
// waiter that watched longest, so the waiters take the key in turn (a
// goroutine that releases and asks again at once goes last), and each
// hand-over costs the one write that takes the key. It waits one refresh
// period at most, then writes as a poll would: the holder may be another
// process by then.
func (a *acquisition) yieldHere(ctx context.Context) error {
	c, w := a.c, a.watches[0]
	if a.mode != modeOne || !a.kind.handsOverHere(a, w) || a.o.reentrant || a.o.failIfLocked || noSameProcessHandover ||
		!c.here.busy(w.regKey, c.now()) {
		return nil
	}
	u, unwatch := c.here.watch(w.regKey, nil, true)
	var err error
	if c.here.busy(w.regKey, c.now()) { // watch first, then look again (here, rule 2)
		c.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "waiting for lock", slogKey(w.key), slog.Bool("heldHere", true))
		a.tr.waitingHere(a, w)
		d := min(a.o.refreshPeriod-randomUpTo(a.o.refreshJitter), c.until(a.deadlineFor(w)))
		err = c.pause(ctx, d, u.ch, a.what)
	}
	unwatch() // before the read: no wake-up can come after it
	select {
	case <-u.ch:
		w.woken, w.handover = true, u.handover
	default:
	}
	return err
}

// one returns l as the locks of a run, or err.
func one(l *Lock, err error) ([]*Lock, error) {
	if err != nil {
		return nil, err
	}
	return []*Lock{l}, nil
}

// writable is the key to write next alone (one key, or any of them), or
// nil.
func (a *acquisition) writable() *watch {
	if a.mode == modeAll {
		return nil
	}
	for _, w := range a.watches {
		if w.next.step == stepWrite && !w.out {
			return w
		}
	}
	return nil
}

func (a *acquisition) allWritable() bool {
	for _, w := range a.watches {
		if w.next.step != stepWrite {
			return false
		}
	}
	return true
}

func (a *acquisition) allOut() bool {
	for _, w := range a.watches {
		if !w.out {
			return false
		}
	}
	return true
}

// pending reports whether a key has a step to take before any wait.
func (a *acquisition) pending() bool {
	for _, w := range a.watches {
		switch w.next.step {
		case stepClaim, stepJoin:
			return true
		case stepFail:
			if !w.out {
				return true
			}
		}
	}
	return false
}

// waitEnded reports whether err ends only one slot's wait: its holder is
// live (FailIfLocked) or stayed so for the wait.
func waitEnded(err error) bool {
	var held *LockHeldError
	var te *TimeoutError
	return errors.As(err, &held) || errors.As(err, &te)
}

// slotsHeld is the error of a semaphore acquisition whose every slot's
// wait ended.
func (a *acquisition) slotsHeld() error {
	if a.o.failIfLocked {
		return notGranted(nil, "%s: all %d slots are held", a.what, len(a.watches))
	}
	changes := 0
	for _, w := range a.watches {
		changes += w.hands.changes
	}
	te := &TimeoutError{Age: a.c.since(a.start)}
	if changes == 0 {
		return notGranted(te, "%s: all %d slots stayed held by the same holders", a.what, len(a.watches))
	}
	return notGranted(te, "%s: all %d slots held; they changed hands %d times while this call waited", a.what, len(a.watches), changes)
}

// decideAll decides again every key whose item a write showed. It returns
// a lock when a reentrant acquisition finds the key held here.
func (a *acquisition) decideAll(ctx context.Context) (*Lock, error) {
	for _, w := range a.watches {
		if w.out || !w.dirty {
			continue
		}
		if l, err := a.decideNext(ctx, w); l != nil || err != nil {
			return l, err
		}
	}
	return nil, nil
}

// decideNext decides w's next step from what is known of its item now. It
// returns a lock when a reentrant acquisition finds the key held here.
func (a *acquisition) decideNext(ctx context.Context, w *watch) (*Lock, error) {
	w.dirty = false
	l, err := a.kind.decide(ctx, a, w)
	if d := &w.next; d.step == stepRead && d.at.Before(w.throttledUntil) {
		// DynamoDB throttled the key: read it less often, but still at
		// the end of the wait.
		d.at = earliest(w.throttledUntil, later(d.at, a.deadlineFor(w)))
	}
	return l, err
}

// deadlineFor is when the wait ends (see acquisition.deadline); before any
// holder was seen, the lease this call asks for stands in for the
// holder's.
func (a *acquisition) deadlineFor(w *watch) time.Time {
	if v := &w.v; w.firstLease == 0 && v.rec != nil && !v.rec.Released {
		lease := v.rec.Lease
		if s, ok := v.sessions[v.rec.Session]; ok {
			lease = s.lease // a session's lock: the holder's lease is its session's
		}
		w.firstLease = max(lease, 1)
		if d := a.waitEnd(lease); d.After(a.deadline) {
			a.deadline = d
		}
		if !a.o.failIfLocked {
			a.c.cfg.logger.LogAttrs(context.Background(), slog.LevelDebug, "waiting for lock", slogKey(w.key), slogOwner(v.rec.Owner),
				slogRVN(v.rec.RVN), slogDuration("lease", v.rec.Lease))
		}
	}
	if a.deadline.IsZero() {
		return a.waitEnd(a.o.lease)
	}
	return a.deadline
}

// admitEnd is when the wait for heartbeat capacity ends (see
// Client.admit): the wait's end, but for a try-lock that only its context
// bounds (Do, AcquireLocks, a semaphore, an RWLock with FailIfLocked and
// no WithAdditionalTimeToWaitForLock), which waits as long as AcquireLock
// with FailIfLocked does: it asked not to wait for the lock, and must not
// wait for ever for capacity instead.
func (a *acquisition) admitEnd() time.Time {
	if a.o.failIfLocked && a.o.additionalTimeToWait == forever {
		return a.start.Add(satAdd(DefaultAdditionalTimeToWaitForLock, a.o.lease))
	}
	return a.waitEnd(a.o.lease)
}

// waitEnd is the one formula of the wait's end: the additional time to
// wait plus lease, from the start (forever when only ctx bounds the wait).
func (a *acquisition) waitEnd(lease time.Duration) time.Time {
	return a.start.Add(satAdd(a.o.additionalTimeToWait, lease))
}

// failed handles a failed call on w's key: a transient failure is kept in
// w's view for the decision (which retries within the deadline), anything
// else ends the call.
func (a *acquisition) failed(ctx context.Context, w *watch, err error) error {
	if ctx.Err() != nil {
		return notGranted(joinErrors(ctx.Err(), err), "%s: context done", a.what)
	}
	conflict := errors.Is(err, errTransactionConflict) || isTransactionConflict(err)
	if a.o.failIfLocked && !conflict || !(isTransient(err) || conflict) || unreachable(err, a.c.since(a.start)) {
		var lng *LockNotGrantedError
		if errors.As(err, &lng) {
			return err
		}
		return notGranted(err, "%s", keyOrWhat(a, w))
	}
	a.c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "acquire failed, retrying", slogKey(w.key), slogErr(err))
	w.v.failed = err
	if limit, _, ok := throttled(err); ok {
		w.backOff(limit, a.o.refreshPeriod, a.c.now())
	}
	return nil
}

func keyOrWhat(a *acquisition, w *watch) string { return a.kind.name(a, w) }

// undoTimeout bounds the release of an abandoned acquisition's writes.
const undoTimeout = 5 * time.Second

// session is the live session the next write of a holds its lock under,
// started if needed, and the lease of what it writes; nil and the lock's
// own lease without WithSession.
func (a *acquisition) session(ctx context.Context, sent time.Time) (*Session, time.Duration, error) {
	return a.leases.lease(ctx, a, sent)
}
