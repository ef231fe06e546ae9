package dynamolock

import (
	"context"
	"errors"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	native "github.com/arielsrv/dynamolock/v2"
)

// Lock is a lock acquired by a [Client], or a read-only view of a lock item
// returned by [Client.Get]. Its methods are safe for concurrent use, and on
// a nil *Lock or a Lock made by the caller (&Lock{}), which are never held.
type Lock struct {
	lock   *native.Lock
	client *Client
}

// Data returns the lock's data.
func (l *Lock) Data() []byte {
	if l == nil {
		return nil
	}
	return l.lock.Data()
}

// OwnerName returns the owner name the lock's item carries.
func (l *Lock) OwnerName() string {
	if l == nil {
		return ""
	}
	return l.lock.OwnerName()
}

// AdditionalAttributes returns a copy of the lock item's attributes that
// are not the lock's own.
func (l *Lock) AdditionalAttributes() map[string]types.AttributeValue {
	if l == nil || l.lock == nil {
		return map[string]types.AttributeValue{}
	}
	return l.lock.AdditionalAttributes()
}

// IsExpired reports whether the lock can no longer be relied on: it was
// released or lost, or its lease ran out by this host's clock. As in v5,
// it is true for every lock this client does not hold: a read-only view
// from [Client.Get] of another's item (whether that holder is still within
// its lease, Native().IsExpired tells), a nil or caller-made Lock.
func (l *Lock) IsExpired() bool {
	return l == nil || l.lock.IsExpired() || errors.Is(l.lock.Err(), native.ErrLockNotHeld)
}

// IsAlmostExpired reports whether the lock has gone its session monitor's
// safeTime (see [WithSessionMonitor]) without a successful acquire or
// heartbeat. It returns [ErrSessionMonitorNotSet] for a lock without a
// monitor, and [ErrLockAlreadyReleased] for one that expired, was released
// or lost.
func (l *Lock) IsAlmostExpired() (bool, error) {
	if l == nil {
		return false, ErrLockAlreadyReleased
	}
	if l.lock == nil {
		return false, ErrSessionMonitorNotSet
	}
	return l.lock.IsAlmostExpired()
}

// Close releases the lock with ctx, as [Client.ReleaseLock] does. It
// returns [ErrCannotReleaseNullLock] for a lock no client acquired (nil,
// or made by the caller), and [ErrLockAlreadyReleased] when the lock
// already expired, was released or lost (for a lost one, [Lock.Err] says
// how), and for a view from [Client.Get] of another's lock, as v5 does.
func (l *Lock) Close(ctx context.Context) error {
	if l == nil || l.client == nil || l.lock == nil {
		return ErrCannotReleaseNullLock
	}
	if l.IsExpired() {
		return ErrLockAlreadyReleased
	}
	_, err := l.client.ReleaseLock(ctx, l)
	return err
}

// Done returns a channel that is closed when the lock ends: released, or
// lost (taken over by another client, or its lease ran out before a
// heartbeat could renew it). It is closed at once for a lock this client
// does not hold. Not in v5.
func (l *Lock) Done() <-chan struct{} {
	if l == nil {
		return (*native.Lock)(nil).Done()
	}
	return l.lock.Done()
}

// Err returns nil while the lock is held, [ErrLockAlreadyReleased] once
// released, and an error matching native.ErrLockLost (a
// *native.LockLostError, which says how) once lost. Not in v5.
func (l *Lock) Err() error {
	if l == nil {
		return (*native.Lock)(nil).Err()
	}
	return l.lock.Err()
}

// FencingToken returns the lock's fencing token: a number greater than
// that of every earlier holder of the key. Pass it to the stores you write
// to, and have them refuse lower tokens than the highest they have seen.
// For a view from [Client.Get], the item's token (zero for an item that only
// clients without tokens, such as v5, wrote). Not in v5.
func (l *Lock) FencingToken() uint64 {
	if l == nil {
		return 0
	}
	return l.lock.FencingToken()
}

// Native returns the root package's lock under l (nil for a nil or
// caller-made Lock), for its other methods: [native.Lock.Ensure],
// [native.Lock.TransactionCondition], [native.Lock.Expiration] and the
// rest. Not in v5.
func (l *Lock) Native() *native.Lock {
	if l == nil {
		return nil
	}
	return l.lock
}

// Errors returned by the client: the root package's own values, so that
// errors.Is matches them from either package.
var (
	// ErrClientClosed is returned by every method of a closed Client.
	ErrClientClosed = native.ErrClientClosed
	// ErrReadOnlyLockHeartbeat is returned by [Client.SendHeartbeat] for a
	// lock from [Client.Get] that this client does not hold.
	ErrReadOnlyLockHeartbeat = native.ErrReadOnlyLockHeartbeat
	// ErrSessionMonitorNotSet is returned by [Lock.IsAlmostExpired] for a
	// lock acquired without [WithSessionMonitor].
	ErrSessionMonitorNotSet = native.ErrSessionMonitorNotSet
	// ErrLockAlreadyReleased is returned for a lock released before.
	ErrLockAlreadyReleased = native.ErrLockAlreadyReleased
	// ErrCannotReleaseNullLock is returned when releasing a nil lock.
	ErrCannotReleaseNullLock = native.ErrCannotReleaseNullLock
	// ErrOwnerMismatched is returned when releasing a lock of another
	// owner.
	ErrOwnerMismatched = native.ErrOwnerMismatched
)

// TimeoutError is the cause of a [LockNotGrantedError] when the lock
// stayed held by a live owner for the whole wait. Age is how long the
// acquisition waited.
type TimeoutError = native.TimeoutError

// LockNotGrantedError is returned when a lock could not be acquired, or a
// heartbeat found the lock lost. Unwrap gives the cause.
type LockNotGrantedError = native.LockNotGrantedError
