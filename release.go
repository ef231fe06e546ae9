package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// ReleaseLock releases lock, as ReleaseLockWithContext does with
// context.Background().
func (c *Client) ReleaseLock(lock *Lock, opts ...ReleaseLockOption) (bool, error) {
	return c.ReleaseLockWithContext(context.Background(), lock, opts...)
}

// ReleaseLockWithContext releases lock with one DynamoDB call conditioned on
// this owner and the lock's record version number: by default an UpdateItem
// that marks the item released and keeps it (so the fencing token keeps
// increasing), or a DeleteItem with [WithDeleteLock](true) or
// [WithDeleteLockOnRelease].
//
// It returns (true, nil) when the lock was released, including when the
// answer to the release was lost and a retry (the SDK's or this call's)
// found the item already released by this acquisition. It returns false and
// an error matching [ErrLockLost] when the lock was no longer this owner's
// (taken over, or lost earlier, including a lease that ran out by this
// host's clock). A lapsed lock whose loss was not recorded yet (a client
// without background heartbeats) still has its item released if it is
// still this owner's; once the loss is recorded (at the lease's end, by the
// heartbeat scheduler or by a heartbeat that failed then) nothing is sent,
// and the item, no longer renewed, is free to others already. It returns
// [ErrLockAlreadyReleased] when the lock was released before (a lock held
// by a session: also when this client's Close ended the session, which
// freed the lock, while the release was on its way; the loss, if Close
// could not end the session);
// [ErrCannotReleaseNullLock] for a nil lock;
// [ErrOwnerMismatched] for a lock of another owner, and (itself, unwrapped,
// as in v2) for a zero Lock.
//
// When DynamoDB rejected the release (throttling, validation) or ctx ended
// before it was sent, the lock stays held and heartbeated, and the release
// can be retried; [Client.Close] retries it. When the outcome is unknown (the
// request may have landed, or may still land: a network error, a server
// error, ctx ending during the call), the lock ends here all the same, since
// another client may already hold the item: Done closes, and the error
// matches [ErrReleaseOutcomeUnknown] (as does [Lock.Err] from then on, a
// *[LockLostError] with that cause). If the release did not land, the item
// stays held, unrenewed, until its lease runs out.
func (c *Client) ReleaseLockWithContext(ctx context.Context, lock *Lock, opts ...ReleaseLockOption) (bool, error) {
	if err := checkContext(ctx); err != nil {
		return false, err
	}
	if lock == nil {
		return false, ErrCannotReleaseNullLock
	}
	if c.isClosed() {
		return false, ErrClientClosed
	}
	o := &releaseLockOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if !lock.shapeOf().ownsData() && (o.data != nil || o.deleteLock != nil && *o.deleteLock) {
		return false, invalid("WithDataAfterRelease", fmt.Sprintf("%d bytes", len(o.data)), "and WithDeleteLock cannot be used by an RWLock reader: the item is the writer's")
	}
	if o.data != nil {
		if err := c.validateItemSize("WithDataAfterRelease", lock.partitionKey, lock.sortKey, o.data, lock.AdditionalAttributes()); err != nil {
			return false, err
		}
	}
	if lock.kind == zeroLock {
		// A zero Lock names no owner, so not this client's: v2's answer,
		// which v2 code compares with ==.
		return false, ErrOwnerMismatched
	}
	if lock.kind == lockView {
		return c.forceRelease(ctx, lock, o)
	}
	return c.releaseLock(ctx, lock, o)
}

// releaseHeld releases l, a lock this client acquired (the work of
// releaseLock, which traces it).
func (c *Client) releaseHeld(ctx context.Context, l *Lock, o *releaseLockOptions) (bool, error) {
	if err := c.checkOwner(l); err != nil {
		return false, err
	}
	if err := l.takeWrites(ctx); err != nil {
		return false, fmt.Errorf("dynamolock: release %q: waiting for the lock's previous write: %w", l.partitionKey, err)
	}
	defer l.giveWrites()
	if err := l.ended(); err != nil {
		return false, err // released or lost before; a lapsed lease is still released below
	}
	if err := ctx.Err(); err != nil {
		return false, fmt.Errorf("dynamolock: release %q: %w", l.partitionKey, err) // nothing sent: still held
	}
	deleteLock := l.deleteOnRelease
	if o.deleteLock != nil {
		deleteLock = *o.deleteLock
	}

	var err error
	for follows := 0; ; follows++ {
		err = c.sendRelease(ctx, l, deleteLock, o.data)
		if err == nil {
			break // before ccf, which would be allocated on every release
		}
		var ccf *types.ConditionalCheckFailedException
		if !errors.As(err, &ccf) {
			break
		}
		if l.releasedBefore(ccf.Item) {
			if c.freedBySessionEnd(l, ccf.Item) {
				l.end(nil)
				why := "this client's Close ended its session, which freed it"
				if !errors.Is(l.ended(), ErrLockAlreadyReleased) {
					why = "this client's Close was ending its session"
				}
				return false, fmt.Errorf("dynamolock: release %q: %w (%s)", l.partitionKey, l.ended(), why)
			}
			err = nil // a first send whose answer was lost had released it
			break
		}
		if follows >= maxRVNFollows || !l.followMovedRVN(ccf.Item) {
			return false, l.loseHow(ErrLockTakenOver, l.takenHow(ccf.Item), err)
		}
	}
	switch {
	case err == nil:
	case o.bestEffort:
		l.log(slog.LevelWarn, "best-effort release failed; the lock expires after its lease", slogErr(err))
		c.freeLater(l.heldBy(), l.partitionKey, c.freeInput(l))
	case surelyNotApplied(err):
		// Never sent, or DynamoDB rejected it and no earlier attempt of
		// the call (an SDK retry) failed without an answer: nothing
		// changed.
		return false, fmt.Errorf("dynamolock: release %q: %w", l.partitionKey, err)
	default:
		// The release may have landed, or may still land: another client
		// may hold the item now or soon. The lock must not look held.
		l.lose(ErrReleaseOutcomeUnknown, err)
		l.log(slog.LevelWarn, "release outcome unknown; the lock is no longer held here", slogErr(err))
		c.freeLater(l.heldBy(), l.partitionKey, c.freeInput(l))
		return false, fmt.Errorf("dynamolock: release %q: %w: %w", l.partitionKey, ErrReleaseOutcomeUnknown, err)
	}
	if !deleteLock && o.data != nil {
		l.mu.Lock()
		l.setDataLocked(o.data)
		l.mu.Unlock()
	}
	if l.lapsed(c.now()) {
		// The item is free again, but readers have been told the lease ran
		// out: the holder may have worked past it, which the caller must
		// hear about.
		return false, l.lose(ErrLeaseExpired, nil)
	}
	l.end(nil) // released
	l.log(slog.LevelInfo, "lock released")
	return true, nil
}

func (c *Client) checkOwner(l *Lock) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ownerName != c.cfg.ownerName || l.client != c {
		return fmt.Errorf("%w: lock %q is held by %q through another client, this client is %q",
			ErrOwnerMismatched, l.partitionKey, l.ownerName, c.cfg.ownerName)
	}
	return nil
}

// releasedBefore reports whether item, returned by a release's failed
// condition, shows that an earlier send of this release (whose answer was
// lost) took effect: the item is marked released and still names this
// owner and fencing token; or, while this holder's lease has not run out,
// it is gone, or another client acquired it since (a higher fencing token).
// No client of this package takes a live lease over, so within the lease
// only this release can have freed it. An item rewritten by another tool
// (no higher token) is a loss.
func (l *Lock) releasedBefore(item map[string]types.AttributeValue) bool {
	if l.lapsed(l.now()) {
		return false
	}
	if len(item) == 0 {
		return true
	}
	return l.shapeOf().releasedBefore(l, item)
}

// freedBySessionEnd reports whether the lock l, held by a session, may have
// been freed by the end of its session rather than by an earlier send of
// its own release, given item (as releasedBefore read it): this client's
// Close has begun (it ends the session, which frees every lock of it, and
// another client may take the key at once), and item does not show this
// acquisition's own release mark. The two leave the same item (gone, or
// taken with a higher fencing token, or without this reader's entry): the
// release then reports the lock already released, which it is, and not a
// release of its own, which it may not be (the simulation's invariant 5).
func (c *Client) freedBySessionEnd(l *Lock, item map[string]types.AttributeValue) bool {
	if l.heldBy() == nil || !c.isClosed() {
		return false
	}
	if rec, ours := l.ownItem(item); ours && rec.Released {
		return false // its own mark: this release landed
	}
	return true
}

// forceReleaseView releases the item a read-only view of this client's own owner
// shows (a lock left behind by an earlier run with the same owner name).
func (c *Client) forceReleaseView(ctx context.Context, l *Lock, o *releaseLockOptions) (bool, error) {
	if err := c.checkOwner(l); err != nil {
		return false, err
	}
	if l.IsReleased() {
		return false, ErrLockAlreadyReleased
	}
	deleteLock := o.deleteLock != nil && *o.deleteLock
	if err := c.sendRelease(ctx, l, deleteLock, o.data); err != nil {
		return false, fmt.Errorf("dynamolock: release %q: %w", l.partitionKey, err)
	}
	l.log(slog.LevelInfo, "lock released")
	return true, nil
}

// sendRelease sends the one conditional write that releases l: conditioned
// on this owner and the RVNs the item may carry. With WithClockSkewBound it
// removes the stored expiry, so that no later reader trusts it (without,
// the item has none: see below).
func (c *Client) sendRelease(ctx context.Context, l *Lock, deleteLock bool, data []byte) error {
	b := lockitem.NewExpr()
	l.mu.Lock()
	cond := l.conditionLocked(b, "")
	l.mu.Unlock()
	return l.shapeOf().release(ctx, c, l, b, cond, deleteLock, data)
}
