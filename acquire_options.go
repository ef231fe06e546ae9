package dynamolock

import (
	"time"
	"unicode/utf8"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// acquireOptions applies opts over the defaults, checks them, and resolves
// the defaults that depend on the client, once per call. untilCtx: the
// call waits as long as ctx allows unless WithAdditionalTimeToWaitForLock
// was given.
func (c *Client) acquireOptions(opts []AcquireLockOption, untilCtx bool) (*acquireLockOptions, error) {
	o := newAcquireLockOptions(opts)
	if err := c.checkAcquireOptions(o); err != nil {
		return nil, err
	}
	if !o.jitterSet {
		o.refreshJitter = o.refreshPeriod / 10
	}
	if !o.leaseSet {
		o.lease = c.cfg.leaseDuration
	}
	o.sortKey, _ = c.resolveSortKey(o.sortKey) // checked above
	if untilCtx && !o.additionalTimeToWaitSet {
		o.additionalTimeToWait = forever
	}
	return o, nil
}

// forever is the additional wait of a call bounded only by its context.
const forever = time.Duration(1<<63 - 1)

// checkAcquireOptions reports what is wrong with o, as the caller gave it;
// it changes nothing.
func (c *Client) checkAcquireOptions(o *acquireLockOptions) error {
	switch {
	case o.refreshPeriod <= 0:
		return invalid("WithRefreshPeriod", o.refreshPeriod, "must be positive")
	case o.refreshPeriod < minRefreshPeriod:
		return tooShort("WithRefreshPeriod", o.refreshPeriod, minRefreshPeriod, time.Minute, DefaultRefreshPeriod,
			"a poll takes a round trip to DynamoDB, so a shorter pace only polls back to back")
	case o.additionalTimeToWait < 0:
		return invalid("WithAdditionalTimeToWaitForLock", o.additionalTimeToWait, "must not be negative")
	case o.additionalTimeToWait > 0 && o.additionalTimeToWait < minAdditionalWait:
		return tooShort("WithAdditionalTimeToWaitForLock", o.additionalTimeToWait, minAdditionalWait, 24*time.Hour, DefaultAdditionalTimeToWaitForLock,
			"a wait shorter than a round trip to DynamoDB cannot have been meant (0 adds no wait to the holder's lease)")
	}
	if o.jitterSet && (o.refreshJitter < 0 || o.refreshJitter > o.refreshPeriod) {
		return invalid("WithRefreshJitter", o.refreshJitter, "must lie between 0 and the refresh period %s", o.refreshPeriod)
	}
	lease := o.lease
	switch {
	case !o.leaseSet:
		lease = c.cfg.leaseDuration
	case lease <= 0:
		return invalid("WithLockLease", o.lease, "must be positive")
	case lease < minLease:
		return tooShort("WithLockLease", o.lease, minLease, 24*time.Hour, c.cfg.leaseDuration, leaseFloorWhy)
	case c.cfg.heartbeatPeriod > 0 && lease/2 < c.cfg.heartbeatPeriod:
		return invalid("WithLockLease", o.lease, "must be at least twice %s", c.cfg.heartbeatPeriodText())
	}
	if _, err := c.resolveSortKey(o.sortKey); err != nil {
		return err
	}
	for name := range o.additionalAttributes {
		if name == "" {
			return invalid("WithAdditionalAttributes", name, "attribute names must not be empty")
		}
		if c.cfg.schema.reserved(name) {
			return invalid("WithAdditionalAttributes", name, "is an attribute the lock itself uses")
		}
		if o.additionalAttributes[name] == nil {
			return invalid("WithAdditionalAttributes", name, "has a nil value")
		}
	}
	if c.cfg.session && o.leaseSet {
		return invalid("WithLockLease", o.lease, "cannot be used by a client with WithSession: its locks share the session's lease")
	}
	if c.cfg.session && o.sessionMonitor != nil {
		return invalid("WithSessionMonitor", o.sessionMonitor.safeTime, "cannot be used by a client with WithSession: its locks have no lease of their own; watch Client.Session's Done")
	}
	if o.fair && o.failIfLocked {
		return invalid("WithFairness", "FailIfLocked", "cannot be combined with FailIfLocked: a fair acquisition waits its turn")
	}
	if m := o.sessionMonitor; m != nil {
		if err := c.validateSessionMonitor(m, lease); err != nil {
			return err
		}
	}
	return nil
}

// checkKey reports what is wrong with acquiring key with the resolved o.
func (c *Client) checkKey(key string, o *acquireLockOptions) error {
	if err := validateKey(key); err != nil {
		return err
	}
	return c.validateItemSize("WithData", key, o.sortKey, o.data, o.additionalAttributes)
}

// resolveSortKey returns the sort key value of a lock: v when given, else
// the client's default; an error when the client has no sort key to give v
// to, or has no default where v is missing, or v is not a valid value.
func (c *Client) resolveSortKey(v *string) (*string, error) {
	switch {
	case v == nil && c.cfg.sortKeyName != "" && c.cfg.sortKey == nil:
		return nil, invalid("WithSortKey value", "", "gives the client's sort key %q no default value: every acquisition must give one with WithSortKeyValue", c.cfg.sortKeyName)
	case v == nil:
		return c.cfg.sortKey, nil
	case c.cfg.sortKeyName == "":
		return nil, invalid("WithSortKeyValue", *v, "needs a client with a sort key: name it with WithSortKey")
	case *v == "" || len(*v) > lockitem.MaxSortKeyBytes || !utf8.ValidString(*v):
		return nil, invalid("WithSortKeyValue", *v, "must be 1 to %d bytes of UTF-8", lockitem.MaxSortKeyBytes)
	}
	return v, nil
}
