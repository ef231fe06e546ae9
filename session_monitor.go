package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// sessionMonitor calls back once when a lock has gone safeTime without a
// successful acquire or heartbeat (Amazon's Java client's meaning).
type sessionMonitor struct {
	safeTime time.Duration
	callback func()
	fired    bool // guarded by the lock's mu
}

// WithSessionMonitor watches the acquired lock: when safeTime has passed
// since the last successful acquire or heartbeat, callback runs once, in its
// own goroutine, so that the holder can stop work before the lease runs out.
// callback may be nil (then only [Lock.IsAlmostExpired] reports it). It does
// not run after the lock was released or lost.
//
// safeTime must be positive (else an *[InvalidArgumentError]); any positive
// value is accepted, as dynamolock v2 does, but only one strictly between
// the heartbeat period and the lease duration means "renewals are late":
//   - safeTime at or below the heartbeat period makes the callback fire
//     between two healthy heartbeats, while nothing is wrong (v2's README
//     example, 500ms with a 1s heartbeat, does);
//   - safeTime at or above the lease duration never fires: the lock is lost
//     first.
//
// Such a value is logged at acquisition as a Warn record ("session monitor
// safeTime ...") through the client's logger.
func WithSessionMonitor(safeTime time.Duration, callback func()) AcquireLockOption {
	return func(o *acquireLockOptions) {
		o.sessionMonitor = &sessionMonitor{safeTime: safeTime, callback: callback}
	}
}

// validateSessionMonitor rejects a non-positive safeTime, and logs a
// warning for a value that cannot mean "renewals are late".
func (c *Client) validateSessionMonitor(m *sessionMonitor) error {
	if m.safeTime <= 0 {
		return invalid("WithSessionMonitor safeTime", m.safeTime, "must be positive")
	}
	switch {
	case m.safeTime <= c.heartbeatPeriod:
		c.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"session monitor safeTime is not longer than the heartbeat period: the callback fires between two healthy heartbeats",
			slogDuration("safeTime", m.safeTime), slogDuration("heartbeatPeriod", c.heartbeatPeriod), slogDuration("lease", c.leaseDuration))
	case m.safeTime >= c.leaseDuration:
		c.logger.LogAttrs(context.Background(), slog.LevelWarn,
			"session monitor safeTime is not shorter than the lease: the callback never fires, the lock is lost first",
			slogDuration("safeTime", m.safeTime), slogDuration("heartbeatPeriod", c.heartbeatPeriod), slogDuration("lease", c.leaseDuration))
	}
	return nil
}

// IsAlmostExpired reports whether the lock has gone its session monitor's
// safeTime without a successful acquire or heartbeat. As in dynamolock v2,
// it returns [ErrSessionMonitorNotSet] when the lock has no monitor (a zero
// Lock included), then [ErrLockAlreadyReleased] when the lock has expired,
// was released or lost; a nil *Lock returns ErrLockAlreadyReleased.
func (l *Lock) IsAlmostExpired() (bool, error) {
	if l == nil {
		return false, ErrLockAlreadyReleased
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.monitor == nil {
		return false, ErrSessionMonitorNotSet
	}
	now := time.Now()
	if l.isExpiredLocked(now) {
		return false, ErrLockAlreadyReleased
	}
	return !now.Before(l.lookupTime.Add(l.monitor.safeTime)), nil
}

// Do acquires key, runs fn while holding it, and releases it when fn
// returns. The context given to fn is cancelled the moment the lock is lost,
// with the *[LockLostError] as its cause ([context.Cause]). Do returns fn's
// error joined with any release error; if the lock could not be acquired it
// returns that error and does not call fn. The release is attempted even
// when ctx has ended.
//
// A key held by a live owner is waited for as [Client.AcquireLockWithContext]
// does: Do gives up after the holder's lease plus
// [WithAdditionalTimeToWaitForLock] (21s with the defaults) with a
// *[LockNotGrantedError] wrapping a *[TimeoutError]; with [FailIfLocked] it
// returns at once.
func (c *Client) Do(ctx context.Context, key string, fn func(ctx context.Context, lock *Lock) error, opts ...AcquireLockOption) (err error) {
	if fn == nil {
		return invalid("fn", nil, "must not be nil")
	}
	l, aerr := c.AcquireLockWithContext(ctx, key, opts...)
	if aerr != nil {
		return aerr
	}
	inner, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(l.ctx, func() { cancel(context.Cause(l.ctx)) })
	fctx := lockContext{Context: inner, l: l, cancel: cancel}
	// Release even if fn panics, so a recovered panic leaks no lock.
	defer func() {
		stop()
		rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), max(c.leaseDuration, 5*time.Second))
		defer rcancel()
		_, rerr := c.releaseLock(rctx, l, &releaseLockOptions{})
		if !errors.Is(rerr, ErrLockAlreadyReleased) { // fn may have released it itself
			err = errors.Join(err, rerr)
		}
	}()
	return fn(fctx, l)
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
	select {
	case <-c.l.Done():
		c.cancel(context.Cause(c.l.ctx))
	default:
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
