package dynamolock

import (
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
// safeTime must lie strictly between the heartbeat period and the lease
// duration. callback may be nil (then only [Lock.IsAlmostExpired] reports
// it). It does not run after the lock was released or lost.
func WithSessionMonitor(safeTime time.Duration, callback func()) AcquireLockOption {
	return func(o *acquireLockOptions) {
		o.sessionMonitor = &sessionMonitor{safeTime: safeTime, callback: callback}
	}
}

func (c *Client) validateSessionMonitor(m *sessionMonitor) error {
	if m.safeTime <= c.heartbeatPeriod || m.safeTime >= c.leaseDuration || m.safeTime <= 0 {
		return invalid("WithSessionMonitor safeTime", m.safeTime,
			"must lie strictly between the heartbeat period %s and the lease duration %s", c.heartbeatPeriod, c.leaseDuration)
	}
	return nil
}

// IsAlmostExpired reports whether the lock has gone its session monitor's
// safeTime without a successful acquire or heartbeat. It returns
// [ErrSessionMonitorNotSet] when the lock has no monitor, and
// [ErrLockAlreadyReleased] when the lock has expired, was released or lost.
func (l *Lock) IsAlmostExpired() (bool, error) {
	if l == nil {
		return false, ErrLockAlreadyReleased
	}
	now := time.Now()
	if l.ctx == nil || l.readOnly || l.endErr(now) != nil {
		return false, ErrLockAlreadyReleased
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.monitor == nil {
		return false, ErrSessionMonitorNotSet
	}
	return !now.Before(l.lookupTime.Add(l.monitor.safeTime)), nil
}
