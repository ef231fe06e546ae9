package dynamolock

import (
	"context"
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
// the heartbeat period and the lock's lease means "renewals are late":
//   - safeTime at or below the heartbeat period makes the callback fire
//     between two healthy heartbeats, while nothing is wrong (v2's README
//     example, 500ms with a 1s heartbeat, does);
//   - safeTime at or above the lease never fires: the lock is lost first.
//
// Such a value is logged at acquisition as a Warn record ("session monitor
// safeTime ...") through the client's logger.
func WithSessionMonitor(safeTime time.Duration, callback func()) AcquireLockOption {
	return func(o *acquireLockOptions) {
		o.sessionMonitor = &sessionMonitor{safeTime: safeTime, callback: callback}
	}
}

// validateSessionMonitor rejects a non-positive safeTime, and logs a
// warning for a value that cannot mean "renewals are late" with a lease of
// lease.
func (c *Client) validateSessionMonitor(m *sessionMonitor, lease time.Duration) error {
	if m.safeTime <= 0 {
		return invalid("WithSessionMonitor safeTime", m.safeTime, "must be positive")
	}
	msg := ""
	switch {
	case m.safeTime <= c.cfg.heartbeatPeriod:
		msg = "session monitor safeTime is not longer than the heartbeat period: the callback fires between two healthy heartbeats"
	case m.safeTime >= lease:
		msg = "session monitor safeTime is not shorter than the lease: the callback never fires, the lock is lost first"
	default:
		return nil
	}
	c.cfg.logger.LogAttrs(context.Background(), slog.LevelWarn, msg,
		slogDuration("safeTime", m.safeTime), slogDuration("heartbeatPeriod", c.cfg.heartbeatPeriod), slogDuration("lease", lease))
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
	monitor := l.monitor
	l.mu.Unlock()
	if monitor == nil {
		return false, ErrSessionMonitorNotSet
	}
	now := l.now()
	if l.kind != heldLock || l.endErr(now) != nil {
		return false, ErrLockAlreadyReleased
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return !now.Before(l.sentAt.Add(monitor.safeTime)), nil
}
