package dynamolock

import (
	"context"
	"strconv"
)

// Release releases the lock with ctx, as [Client.ReleaseLockWithContext]
// does, and returns its error: nil when the lock was released. opts are the
// release's ([WithDeleteLock], [WithDataAfterRelease], [WithBestEffort]).
// It is [Lock.Close] with a context; Close stays for dynamolock v2's
// programs.
func (l *Lock) Release(ctx context.Context, opts ...ReleaseLockOption) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if l == nil {
		return ErrCannotReleaseNullLock
	}
	if l.client == nil {
		return ErrLockNotHeld
	}
	_, err := l.client.ReleaseLockWithContext(ctx, l, opts...)
	return err
}

// Unlock releases the writer's lock l that [RWLock.Lock] returned, with ctx,
// as [Client.ReleaseLockWithContext] does; opts are the release's. A lock
// that is not this RWLock's writer's (a reader's, another key's, another
// client's, nil) is refused with an *[InvalidArgumentError] before any
// call.
func (rw *RWLock) Unlock(ctx context.Context, l *Lock, opts ...ReleaseLockOption) error {
	if err := rw.mine(ctx, l, true); err != nil {
		return err
	}
	_, err := rw.c.ReleaseLockWithContext(ctx, l, opts...)
	return err
}

// RUnlock releases the reader's lock l that [RWLock.RLock] returned, with
// ctx: one UpdateItem that removes the reader's entry. A lock that is not
// one of this RWLock's readers' is refused with an *[InvalidArgumentError]
// before any call.
func (rw *RWLock) RUnlock(ctx context.Context, l *Lock) error {
	if err := rw.mine(ctx, l, false); err != nil {
		return err
	}
	_, err := rw.c.ReleaseLockWithContext(ctx, l)
	return err
}

// mine checks that l is a lock of rw of the kind asked (writer or reader).
func (rw *RWLock) mine(ctx context.Context, l *Lock, writer bool) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	call, kind := "RUnlock", "reader's"
	if writer {
		call, kind = "Unlock", "writer's"
	}
	switch {
	case l == nil:
		return invalid("lock", nil, "%s needs the %s lock of rwlock %q, not nil", call, kind, rw.name)
	case l.client != rw.c || l.kind != heldLock:
		return invalid("lock", l.partitionKey, "%s needs a lock this client acquired from rwlock %q", call, rw.name)
	case l.partitionKey != rw.name:
		return invalid("lock", l.partitionKey, "%s of rwlock %q got the lock of key %s", call, rw.name, strconv.Quote(l.partitionKey))
	case isReader(l) == writer:
		other := "writer's"
		if writer {
			other = "reader's"
		}
		return invalid("lock", l.partitionKey, "%s of rwlock %q needs the %s lock, got a %s", call, rw.name, kind, other)
	}
	return nil
}
