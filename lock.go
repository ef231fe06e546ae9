package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Lock is a lock acquired by a [Client], or a read-only view of a lock item
// returned by [Client.Get]. Its methods are safe for concurrent use and on a
// nil *Lock, which is never held: its getters return zero values, Done is
// closed, IsExpired and IsReleased are true, and every error it gets is
// [ErrLockNotHeld] (passing it where a lock is required is also bad input,
// [ErrInvalidArgument]), except where dynamolock v2 defined another:
// releasing it ([Client.ReleaseLock], [Lock.Close]) returns
// [ErrCannotReleaseNullLock] and [Lock.IsAlmostExpired] returns
// [ErrLockAlreadyReleased].
//
// Holding a Lock never guarantees exclusive access: a process paused for
// longer than the lease can wake up after another client took the lock over.
// Watch [Lock.Done], and guard writes with [Lock.FencingToken] or
// [Lock.TransactionCondition].
type Lock struct {
	// The fields are ordered, and what most locks never use kept apart
	// (rare), so that a held lock fits a 256-byte allocation: a test and a
	// benchmark of the heap per held lock check it.
	client       *Client
	partitionKey string
	sortKey      *string

	mu sync.Mutex
	// Immutable after construction.
	kind            lockKind
	deleteOnRelease bool
	// shaped: rare.shape and rare.source were set before the lock was
	// published (a reader's entry, a session's lock), and are read without
	// mu; false: the item's holder, under its own lease (shapeOf, leaseOf).
	shaped bool
	// Guarded by mu.
	writing       bool // a write (heartbeat, release) holds this lock's write turn
	itemReleased  bool // the item carried isReleased (read-only views)
	released      bool // part of the record of the lock's end, with lost
	ownerName     string
	rvn           string    // the RVN this holder last knew to be in the item
	sentAt        time.Time // when the write that set rvn was first sent (see renewedLocally)
	leaseEnd      time.Time // when this holder's lease ends by its own clock (see Expiration)
	leaseDuration time.Duration
	fencingToken  uint64
	monitor       *sessionMonitor
	renewal       renewalState // writes whose answer was lost

	// released and lost are the one record of the lock's end (see
	// reasonLocked): end sets one of them, once, and nothing changes them
	// again. Every reader derives its answer from them and from the lease on
	// this host's clock; no reader changes them.
	lost *LockLostError
	// rare holds what most locks never need, made on first use: the
	// lock's data and additional attributes, the channel Done returns and
	// the writers waiting for the write turn.
	rare *lockRare

	sched schedEntry // the heartbeat scheduler's; only its loop touches it
}

// lockRare is the part of a held lock that is created only when used.
// Guarded by the lock's mu.
type lockRare struct {
	data       []byte
	additional map[string]types.AttributeValue
	// ctx is cancelled by end with the lock's reason as its cause: Done
	// is its Done, and Do cancels fn's context from it.
	ctx    context.Context
	cancel context.CancelCauseFunc
	// waiters wait for the write turn, in order; giving the turn back hands
	// it to the first by closing its channel.
	waiters []chan struct{}
	// shape and source are the lock's item shape and lease source when
	// shaped (nil: the holder's, its own); set before the lock is published
	// and never changed. For a session's own item's lock (not shaped: it
	// renews its own lease), source is its sessionOwnItem, set once under
	// mu just after its acquisition.
	shape  itemShape
	source lockLease
	// dataDoubt is the renewal number of the newest write that changes the
	// data and may have landed without its answer; 0: data is what the
	// item holds. While it is set, heartbeats read the item's data back.
	dataDoubt uint64
	// dataSeq is the renewal number of the newest write that landed with
	// its data known (it set, removed or read back the data): an older
	// one answered later leaves Data alone.
	dataSeq uint64
}

// lockKind is what a *Lock is: a lock this client acquired, a read-only
// view of an item (Get, a listing), or the zero Lock a caller made.
type lockKind uint8

const (
	zeroLock lockKind = iota // &Lock{}: neither held nor read
	heldLock                 // acquired by this client (newHeldLock): its end is recorded in released and lost
	lockView                 // a view from Get or a listing: never held
)

func newHeldLock(c *Client, key string, sortKey *string, rec *lockRecord, sent time.Time) *Lock {
	l := newLock(c, key, sortKey, rec, sent)
	l.kind = heldLock
	l.leaseEnd = sent.Add(rec.Lease)
	return l
}

func newReadOnlyLock(c *Client, key string, sortKey *string, rec *lockRecord, readAt time.Time) *Lock {
	l := newLock(c, key, sortKey, rec, readAt)
	l.kind = lockView
	if !readAt.IsZero() && !rec.Released {
		l.leaseEnd = readAt.Add(rec.Lease)
	}
	return l
}

func newLock(c *Client, key string, sortKey *string, rec *lockRecord, at time.Time) *Lock {
	owner := rec.Owner
	if owner == c.cfg.ownerName {
		owner = c.cfg.ownerName // one copy per client, not one per lock
	}
	l := &Lock{
		client:        c,
		partitionKey:  key,
		sortKey:       sortKey,
		ownerName:     owner,
		rvn:           rec.RVN,
		sentAt:        at,
		leaseDuration: rec.Lease,
		fencingToken:  rec.FencingToken,
		itemReleased:  rec.Released,
	}
	if rec.Data != nil || rec.Additional != nil {
		l.rare = &lockRare{data: rec.Data, additional: rec.Additional}
	}
	return l
}

// regKey is the lock's key in its client's registry.
func (l *Lock) regKey() string { return l.shapeOf().regKey(l.partitionKey, l.sortKey) }

// shapeOf is l's item shape.
func (l *Lock) shapeOf() itemShape {
	if !l.shaped || l.rare.shape == nil {
		return holderShape{}
	}
	return l.rare.shape
}

// setDataLocked replaces the lock's data. Called with mu held.
func (l *Lock) setDataLocked(data []byte) {
	if data != nil || l.rare != nil {
		l.rareLocked().data = data
	}
}

// Data returns the data stored in the lock item. The slice must not be
// modified. After a heartbeat that changes the data fails without knowing
// whether it landed, Data returns the value known before it until the
// next heartbeat lands (see [Client.SendHeartbeatWithContext]).
func (l *Lock) Data() []byte {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rare == nil {
		return nil
	}
	return l.rare.data
}

// OwnerName returns the owner named in the lock item.
func (l *Lock) OwnerName() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ownerName
}

// PartitionKey returns the lock's key.
func (l *Lock) PartitionKey() string {
	if l == nil {
		return ""
	}
	return l.partitionKey
}

// SortKey returns the lock's sort key value, or "" on tables without one.
func (l *Lock) SortKey() string {
	if l == nil || l.sortKey == nil {
		return ""
	}
	return *l.sortKey
}

// LeaseDuration returns the lease written in the lock item; for a lock held
// by a session ([WithSession]), the session's lease.
func (l *Lock) LeaseDuration() time.Duration {
	if l == nil {
		return 0
	}
	if s := l.heldBy(); s != nil {
		return s.lock.LeaseDuration()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaseDuration
}

// Expiration returns when this client considers the lease over unless a
// heartbeat renews it (node-redlock's expiration): a time on this host's
// clock, never later than what any other client may conclude. It moves
// with every renewal. For a read-only view it is the lease counted from
// when the item was read; zero for a nil lock or a released item. For a
// lock held by a session, it is the session's.
func (l *Lock) Expiration() time.Time {
	if l == nil {
		return time.Time{}
	}
	if s := l.heldBy(); s != nil {
		return s.lock.Expiration()
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaseEnd
}

// RecordVersionNumber returns the record version number this lock last
// wrote or read. It changes with every heartbeat.
func (l *Lock) RecordVersionNumber() string {
	if l == nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rvn
}

// FencingToken returns the item's fencing token at this acquisition: it
// increases by one on every acquisition of the key by any client of this
// package while the item is kept (the default on release). A new item
// starts from the current time in microseconds, so tokens keep increasing
// across a deletion too, as long as the hosts' wall clocks agree to within
// the time the item was gone, and no acquiring write was held up in the
// network for longer than that (a write delayed past a deletion recreates
// the item from the time it was sent). Send it with every write to a downstream
// store, and have the store reject writes carrying a token lower than the
// highest it has seen. A read-only view of an item written only by other
// clients has token 0.
func (l *Lock) FencingToken() uint64 {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fencingToken
}

// AdditionalAttributes returns a copy of the item's attributes that are not
// the lock's own.
func (l *Lock) AdditionalAttributes() map[string]types.AttributeValue {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.rare == nil {
		return nil
	}
	return maps.Clone(l.rare.additional)
}

// IsReleased reports whether the lock was released: by this client for a
// held lock, or as marked in the item for a read-only view.
func (l *Lock) IsReleased() bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kind != heldLock {
		return l.itemReleased
	}
	return l.released
}

// IsExpired reports whether the lock can no longer be relied on: it was
// released or lost, or its lease ran out by this host's clock (for a
// read-only view: the lease counted from when it was read, or the item was
// released or absent).
func (l *Lock) IsExpired() bool {
	if l == nil || l.kind == zeroLock {
		return true
	}
	if l.kind == lockView {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.leaseEnd.IsZero() || !l.now().Before(l.leaseEnd)
	}
	return l.endErr(l.now()) != nil
}

// Done returns a channel that is closed when the lock is released or lost.
// For a read-only view or a nil lock it is already closed.
//
// A held lock whose lease has run out by this host's clock counts as lost at
// once, even before the heartbeat scheduler records it: after a process
// pause, the first Done the holder looks at is already closed.
func (l *Lock) Done() <-chan struct{} {
	if l == nil || l.kind != heldLock {
		return closedChan
	}
	ctx := l.endContext()
	if ctx.Err() == nil && l.lapsed(l.now()) {
		return closedChan
	}
	return ctx.Done()
}

// endContext returns a context cancelled, with the lock's reason as its
// cause, when the held lock ends (at once if it has ended). It is made on
// first use: most locks never need one.
func (l *Lock) endContext() context.Context {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.rareLocked()
	if r.ctx == nil {
		r.ctx, r.cancel = context.WithCancelCause(context.Background())
		if reason := l.reasonLocked(); reason != nil {
			r.cancel(reason)
		}
	}
	return r.ctx
}

func (l *Lock) rareLocked() *lockRare {
	if l.rare == nil {
		l.rare = &lockRare{}
	}
	return l.rare
}

// Err returns nil while the lock is held, [ErrLockAlreadyReleased] after it
// was released, and a *[LockLostError] (matching [ErrLockLost]) after it was
// lost, including when its lease has run out by this host's clock. For a
// read-only view or a nil lock it returns [ErrLockNotHeld].
func (l *Lock) Err() error {
	if l == nil || l.kind != heldLock {
		return ErrLockNotHeld
	}
	return l.endErr(l.now())
}

// endErr is what every reader of a held lock answers: the recorded end, or
// a loss by lapse when the lease has run out by now but the scheduler has
// not yet recorded it (it records the same cause).
func (l *Lock) endErr(now time.Time) error {
	l.mu.Lock()
	reason, lapsed := l.reasonLocked(), !now.Before(l.leaseEnd)
	l.mu.Unlock()
	if reason != nil {
		return reason
	}
	if s := l.heldBy(); s != nil {
		return l.sessionEnd(s.lock.endErr(now))
	}
	if lapsed {
		return l.lostError(ErrLeaseExpired, nil)
	}
	return nil
}

// sessionEnd is what a lock held by a session answers while its own end is
// not recorded yet, given its session's end err: the end the session's
// end records for it (Session.end).
func (l *Lock) sessionEnd(err error) error {
	var lost *LockLostError
	if errors.As(err, &lost) {
		return l.lostError(lost.Cause, lost)
	}
	return err // nil, or ErrLockAlreadyReleased
}

// ended returns the recorded end of a held lock, nil while it has none.
func (l *Lock) ended() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reasonLocked()
}

// reasonLocked is the recorded end of a held lock: ErrLockAlreadyReleased,
// the *LockLostError, or nil while it has none. Called with mu held.
func (l *Lock) reasonLocked() error {
	switch {
	case l.released:
		return ErrLockAlreadyReleased
	case l.lost != nil:
		return l.lost
	}
	return nil
}

// lapsed reports whether the lease of a held lock has run out by now (for a
// lock held by a session, the session's lease).
func (l *Lock) lapsed(now time.Time) bool {
	if s := l.heldBy(); s != nil {
		return s.lock.lapsed(now)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !now.Before(l.leaseEnd)
}

// Close releases the lock, as [Client.ReleaseLock] does.
func (l *Lock) Close() error {
	if l == nil {
		return ErrCannotReleaseNullLock
	}
	if l.client == nil {
		return ErrLockNotHeld
	}
	_, err := l.client.ReleaseLock(l)
	return err
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// end records the end of a held lock, once: its release when lost is nil,
// else its loss. It sets the record (from then on Err answers it, and the
// client no longer hands the lock out), then ends it in the client (out of
// the registry, Done closed, waiters here woken: see here, rule 2). It
// reports whether this call ended the lock.
func (l *Lock) end(lost *LockLostError) bool {
	l.mu.Lock()
	if l.kind != heldLock || l.reasonLocked() != nil {
		l.mu.Unlock()
		return false
	}
	if lost == nil {
		l.released = true
	} else {
		l.lost = lost
	}
	reason := l.reasonLocked()
	var cancel context.CancelCauseFunc
	var session *Session // the session whose item this lock holds
	if l.rare != nil {
		cancel = l.rare.cancel
		if l.rare.source != nil {
			session = l.rare.source.itemOf()
		}
	}
	l.mu.Unlock()
	c := l.client
	held, granted := c.here.end(l, cancel, reason, c.now()) // this client's own waiters try at once
	c.sched.notify(l)
	if granted {
		c.metrics.Held(held, lost != nil)
	} else {
		held = -1
	}
	if lost != nil {
		c.lostSpan(l, lost, held)
	}
	c.tele.ended(l)
	if s := l.heldBy(); s != nil {
		s.remove(l)
	}
	if session != nil {
		session.end(reason) // every lock of it ends with it
	}
	return true
}

// lose records the loss of a held lock and returns the lock's end error.
// cause is one of those LockLostError documents; a lease
// that has already run out by this host's clock is always reported as
// ErrLeaseExpired, which is what every reader has been answering since.
func (l *Lock) lose(cause, err error) error { return l.loseHow(cause, "", err) }

// loseHow is lose, with how the loss was seen (see LockLostError.how).
func (l *Lock) loseHow(cause error, how string, err error) error {
	if l.lapsed(l.now()) {
		cause, how = ErrLeaseExpired, ""
	}
	lost := l.lostError(cause, err)
	lost.how = how
	if l.end(lost) {
		l.log(slog.LevelWarn, "lock lost", slogErr(lost))
		l.client.metrics.Lost(lossCause(cause))
	}
	return l.ended()
}

func (l *Lock) lostError(cause, err error) *LockLostError {
	return &LockLostError{Key: l.partitionKey, Owner: l.OwnerName(), Cause: cause, Err: err}
}

// held reports whether the lock is held and still within its lease.
func (l *Lock) held() bool {
	return l.kind == heldLock && l.endErr(l.now()) == nil
}

// takeWrites waits for this lock's write turn until ctx ends. The turn is
// a flag under mu; a writer that finds it taken queues a channel of its
// own, closed by giveWrites when the turn passes to it.
func (l *Lock) takeWrites(ctx context.Context) error {
	l.mu.Lock()
	if !l.writing {
		l.writing = true
		l.mu.Unlock()
		return nil
	}
	if err := context.Cause(ctx); err != nil {
		l.mu.Unlock()
		return err
	}
	turn := make(chan struct{})
	r := l.rareLocked()
	r.waiters = append(r.waiters, turn)
	l.mu.Unlock()
	select {
	case <-turn:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, w := range r.waiters {
		if w == turn {
			r.waiters = append(r.waiters[:i], r.waiters[i+1:]...)
			return context.Cause(ctx)
		}
	}
	// The turn was handed over as ctx ended: pass it on.
	l.giveWritesLocked()
	return context.Cause(ctx)
}

func (l *Lock) giveWrites() {
	l.mu.Lock()
	l.giveWritesLocked()
	l.mu.Unlock()
}

// giveWritesLocked ends the current write turn: the first waiter, if any,
// has it next.
func (l *Lock) giveWritesLocked() {
	if r := l.rare; r != nil && len(r.waiters) > 0 {
		next := r.waiters[0]
		r.waiters[0] = nil
		r.waiters = r.waiters[1:]
		if len(r.waiters) == 0 {
			r.waiters = nil
		}
		close(next) // l.writing stays true: the turn is next's
		return
	}
	l.writing = false
}

// tryTakeWrites takes this lock's write turn if no write is in flight.
func (l *Lock) tryTakeWrites() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.writing {
		return false
	}
	l.writing = true
	return true
}

// itemKey is the primary key of this lock's item.
func (l *Lock) itemKey() map[string]types.AttributeValue {
	return l.client.itemKeyOf(l.partitionKey, l.sortKey)
}

// nilLock is the error for a nil *Lock given where a lock is required.
func nilLock() error {
	return fmt.Errorf("%w (%w)", invalid("lock", nil, "must not be nil"), ErrLockNotHeld)
}
