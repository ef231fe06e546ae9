package dynamolock

import (
	"context"
	"log/slog"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type lockState uint8

const (
	stateReadOnly lockState = iota // a view from Get or a listing (or a zero Lock): never held
	stateHeld                      // acquired by this client, renewed by heartbeats
	stateReleased                  // released by this client
	stateLost                      // taken over, deleted, or its lease ran out
)

// Lock is a lock acquired by a [Client], or a read-only view of a lock item
// returned by [Client.Get]. Its methods are safe for concurrent use and on a
// nil *Lock.
//
// Holding a Lock never guarantees exclusive access: a process paused for
// longer than the lease can wake up after another client took the lock over.
// Watch [Lock.Done], and guard writes with [Lock.FencingToken] or
// [Lock.TransactionCondition].
type Lock struct {
	client       *Client
	partitionKey string
	sortKey      *string
	regKey       string

	// opMu serializes this lock's writes (heartbeat, release) so that two of
	// them never race on the record version number. It is held across the
	// DynamoDB call; mu never is.
	opMu sync.Mutex

	mu              sync.Mutex
	state           lockState
	ownerName       string
	rvn             string
	lookupTime      time.Time
	leaseDuration   time.Duration
	data            []byte
	additional      map[string]types.AttributeValue
	fencingToken    uint64
	itemReleased    bool // the item carried isReleased (read-only views)
	deleteOnRelease bool
	monitor         *sessionMonitor
	pending         *pendingWrite // a renewal whose answer was lost; retries reuse it
	err             error         // why the lock ended; nil while held

	ctx    context.Context // cancelled, with the reason as cause, when the lock ends
	cancel context.CancelCauseFunc

	// Owned by the heartbeat scheduler goroutine.
	sched schedState
}

func newLockFromRecord(c *Client, key string, rec *lockRecord, lookup time.Time, state lockState) *Lock {
	l := &Lock{
		client:        c,
		partitionKey:  key,
		sortKey:       c.sortKey,
		regKey:        c.registryKey(key),
		state:         state,
		ownerName:     rec.owner,
		rvn:           rec.rvn,
		lookupTime:    lookup,
		leaseDuration: rec.lease,
		data:          rec.data,
		additional:    rec.additional,
		fencingToken:  rec.fencingToken,
		itemReleased:  rec.released,
		sched:         schedState{index: -1},
	}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	if state == stateReadOnly {
		l.err = ErrLockNotHeld
		l.cancel(ErrLockNotHeld)
	}
	return l
}

// Data returns the data stored in the lock item. The slice must not be
// modified.
func (l *Lock) Data() []byte {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.data
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

// LeaseDuration returns the lease written in the lock item.
func (l *Lock) LeaseDuration() time.Duration {
	if l == nil {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leaseDuration
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
// the time the item was gone. Send it with every write to a downstream
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
	return maps.Clone(l.additional)
}

// IsReleased reports whether the lock was released: by this client for a
// held lock, or as marked in the item for a read-only view.
func (l *Lock) IsReleased() bool {
	if l == nil {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateReleased || l.itemReleased
}

// IsExpired reports whether the lock can no longer be relied on: it was
// released or lost, or its lease ran out (for a read-only view: the lease
// counted from when it was read, or the item was released or absent).
func (l *Lock) IsExpired() bool {
	if l == nil {
		return true
	}
	now := time.Now()
	l.loseIfLapsedAt(now)
	l.mu.Lock()
	expired := l.isExpiredLocked(now)
	ended, reason := l.state == stateReleased || l.state == stateLost, l.err
	l.mu.Unlock()
	if ended {
		l.cancel(reason) // another goroutine may be ending it: Done is closed before we answer
	}
	return expired
}

func (l *Lock) isExpiredLocked(now time.Time) bool {
	switch l.state {
	case stateReleased, stateLost:
		return true
	case stateReadOnly:
		if l.itemReleased || l.lookupTime.IsZero() {
			return true
		}
	}
	return now.Sub(l.lookupTime) >= l.leaseDuration
}

// leaseEndLocked is when this holder's lease runs out by its own clock.
func (l *Lock) leaseEndLocked() time.Time { return l.lookupTime.Add(l.leaseDuration) }

// Done returns a channel that is closed when the lock is released or lost.
// For a read-only view or a nil lock it is already closed.
//
// A lease that has run out closes it at once, even before the heartbeat
// scheduler gets to run: after a process pause, the first Done the holder
// looks at is already closed.
func (l *Lock) Done() <-chan struct{} {
	if l == nil || l.ctx == nil {
		return closedChan
	}
	l.loseIfLapsedAt(time.Now())
	return l.ctx.Done()
}

// loseIfLapsedAt declares a held lock lost if its lease has run out by now,
// so that IsExpired, Done and Err never disagree with the clock.
func (l *Lock) loseIfLapsedAt(now time.Time) {
	l.mu.Lock()
	lapsed := l.state == stateHeld && !now.Before(l.leaseEndLocked())
	l.mu.Unlock()
	if lapsed {
		l.lose(ErrLeaseExpired, nil)
	}
}

// Err returns nil while the lock is held, [ErrLockAlreadyReleased] after it
// was released, and a *[LockLostError] (matching [ErrLockLost]) after it was
// lost. For a read-only view or a nil lock it returns [ErrLockNotHeld].
func (l *Lock) Err() error {
	if l == nil {
		return ErrLockNotHeld
	}
	l.loseIfLapsedAt(time.Now())
	l.mu.Lock()
	state, err := l.state, l.err
	l.mu.Unlock()
	switch state {
	case stateReadOnly:
		return ErrLockNotHeld
	case stateReleased, stateLost:
		l.cancel(err) // another goroutine may be ending it: Done is closed before we answer
	}
	return err
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

// end moves a held lock to a final state once: it records why, closes Done,
// and drops the lock from the client's registry and scheduler. It reports
// whether this call ended the lock.
func (l *Lock) end(state lockState, reason error) bool {
	l.mu.Lock()
	if l.state != stateHeld {
		l.mu.Unlock()
		return false
	}
	l.state = state
	l.err = reason
	l.mu.Unlock()
	// Leave the registry before Done closes: whoever wakes on Done and asks
	// the client again must not be handed this lock.
	if c := l.client; c != nil {
		c.locks.CompareAndDelete(l.regKey, l)
		c.sched.notify(l)
	}
	l.cancel(reason)
	return true
}

// lose marks a held lock lost with cause ErrLockTakenOver, ErrLeaseExpired or
// ErrClientClosed, and returns the loss error.
func (l *Lock) lose(cause, err error) error {
	lost := &LockLostError{Key: l.partitionKey, Owner: l.OwnerName(), Cause: cause, Err: err}
	if l.end(stateLost, lost) {
		l.log(slog.LevelWarn, "lock lost", slogErr(lost))
		l.client.metrics.lost(cause)
	}
	return l.Err()
}

// identity is what a write of this holder expects to find in the item.
type identity struct {
	owner string
	rvn   string
}

func (l *Lock) identityLocked() identity {
	return identity{owner: l.ownerName, rvn: l.rvn}
}

// condition holds while the item is still this acquisition's: same owner,
// not released, and the RVN this holder last wrote, or newRVN, which a write
// whose answer was lost may already have set. Requiring the exact RVN keeps
// every renewal in one line, so an RVN can never come back after another
// replaced it (an observer relies on that); a renewal that finds the RVN
// moved by this holder's own guarded refresh adopts it (adoptMovedRVN).
func (id identity) condition(b *exprBuilder, newRVN string) string {
	cond := b.name("#o", attrOwnerName) + " = " + b.value(":o", attrS(id.owner)) +
		" AND attribute_not_exists(" + b.name("#r", attrIsReleased) + ") AND " + b.name("#v", attrRVN)
	if newRVN == "" {
		return cond + " = " + b.value(":cur", attrS(id.rvn))
	}
	return cond + " IN (" + b.value(":cur", attrS(id.rvn)) + ", " + b.value(":v", attrS(newRVN)) + ")"
}

// itemKey is the primary key of this lock's item (its own sort key value,
// which for a listed view may differ from the client's).
func (l *Lock) itemKey() map[string]types.AttributeValue {
	c := l.client
	k := map[string]types.AttributeValue{c.partitionKeyName: attrS(l.partitionKey)}
	if l.sortKey != nil {
		k[c.sortKeyName] = attrS(*l.sortKey)
	}
	return k
}
