package dynamolock

import (
	"context"
	"errors"
	"time"
)

// Do acquires key, runs fn while holding it, and releases it when fn
// returns. The context given to fn is cancelled the moment the lock is lost,
// with the *[LockLostError] as its cause ([context.Cause]). Do returns fn's
// error joined with any release error, and a loss once: when fn returns the
// loss (its context's cause, say), the release's report of the same loss is
// left out. If the lock could not be acquired it returns that error and
// does not call fn. The release is attempted even
// when ctx has ended.
//
// A key held by a live owner is waited for as [Client.AcquireLockWithContext]
// waits, but for as long as ctx allows (for ever with
// context.Background()); when ctx ends first, the error matches ctx.Err()
// and *[LockNotGrantedError]. With [WithAdditionalTimeToWaitForLock] Do
// also gives up after the holder's lease plus that time, with a
// *LockNotGrantedError wrapping a *[TimeoutError]; with [FailIfLocked] it
// returns at once. A DynamoDB that cannot be reached is waited out as long
// as the wait lasts once it has answered the client, as *[ConnectionError]
// says.
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context, lock *Lock) error, opts ...AcquireLockOption) (err error) {
	if fn == nil {
		return invalid("fn", nil, "must not be nil")
	}
	l, aerr := c.acquireKey(ctx, key, opts, true)
	if aerr != nil {
		return aerr
	}
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	lctx := l.endContext()
	stop := context.AfterFunc(lctx, func() {
		cause := context.Cause(lctx)
		cancel(cause)
		c.lostInDo(ctx, l, cause) // on the span of Do's caller
	})
	fctx := lockContext{Context: inner, l: l, cancel: cancel}
	// Release even if fn panics, so a recovered panic leaks no lock.
	defer func() {
		stop()
		rctx, rcancel := c.withTimeout(context.WithoutCancel(ctx), max(c.cfg.leaseDuration, 5*time.Second))
		defer rcancel()
		_, rerr := c.releaseLock(rctx, l, &releaseLockOptions{})
		switch {
		case errors.Is(rerr, ErrLockAlreadyReleased): // fn may have released it itself
		case errors.Is(rerr, ErrLockLost) && reportsLoss(err, l):
			// fn returned the loss (context.Cause of its context): the
			// release found the same loss, which is told once.
		default:
			err = joinErrors(err, rerr)
		}
	}()
	return fn(fctx, l)
}

// reportsLoss reports whether err already tells of the loss of l.
func reportsLoss(err error, l *Lock) bool {
	var lost *LockLostError
	return errors.As(err, &lost) && lost.Key == l.partitionKey && lost.Owner == l.OwnerName()
}

// lockContext is the context Do gives fn. Its Done and Err look at the
// lock's lease first, like [Lock.Done], so that fn resumed after a pause
// past the lease sees the loss on its first check, with the loss as the
// cause, even before the goroutine that cancels the context has run.
// Contexts derived from it learn of the loss a moment later.
type lockContext struct {
	context.Context
	l      *Lock
	cancel context.CancelCauseFunc
}

func (c lockContext) check() {
	if err := c.l.Err(); err != nil {
		c.cancel(err)
	}
}

func (c lockContext) Done() <-chan struct{} {
	c.check()
	return c.Context.Done()
}

func (c lockContext) Err() error {
	c.check()
	return c.Context.Err()
}
