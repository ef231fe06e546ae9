package dynamolock

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TTLMargin is how far past the end of its lease a lock item's TTL
// attribute points (see [WithTTLAttribute]). Every heartbeat pushes it
// forward, so only items nobody renewed for this long are deleted.
const TTLMargin = 24 * time.Hour

// WithClockSkewBound makes the client store each lock's absolute expiry
// (attribute leaseExpiresAt, epoch milliseconds, refreshed by every
// heartbeat), and lets a waiting acquisition take over at once an item
// whose stored expiry plus d lies in the past by this host's wall clock,
// instead of watching it for a full lease.
//
// The trade: without it, takeover needs only that the hosts' monotonic
// clocks run at about the same rate. With it, a takeover is safe only while
// every host's wall clock is within d of every other's; a clock that runs
// ahead by more than d can take a live lock. Choose d larger than any skew
// your clock synchronisation allows. Default: off (0).
//
// Clients without this option remove the attribute when they acquire, so a
// stale expiry is never left behind for a fast takeover. Only writers that
// acquire or renew the lock through this package keep it right: a tool that
// rewrites a live lock item with its own UpdateItem (a new RVN, the old
// leaseExpiresAt) leaves an expiry that lets a fast takeover in early.
func WithClockSkewBound(d time.Duration) ClientOption {
	return func(c *Client) { c.clockSkewBound = d }
}

// WithTTLAttribute makes the client write name (epoch seconds, type N) into
// every lock item it acquires or renews, set to the end of the lease plus
// [TTLMargin], so that DynamoDB's time to live deletes items abandoned for
// that long. Enable TTL on the table with [WithTimeToLive] at creation.
//
// Every client of the table must use the same attribute: one that does not
// would leave an old TTL on an item it holds. A deleted item's next fencing
// token starts from the current time in microseconds: it stays higher than
// the tokens before the deletion as long as the hosts' wall clocks agree to
// within the time the item was gone. Default: none.
func WithTTLAttribute(name string) ClientOption {
	return func(c *Client) { c.ttlAttribute = name }
}

// expirySets returns the SET clauses for the absolute expiry and the TTL
// attribute of a write made at now with lease, and registers their
// placeholders with b. Without WithClockSkewBound it removes any stored
// expiry instead (see removeStaleExpiry).
func (c *Client) expirySets(b *exprBuilder, now time.Time, lease time.Duration) string {
	s := ""
	if c.clockSkewBound > 0 {
		s += ", " + b.name("#x", attrLeaseExpiresAt) + " = " +
			b.value(":x", &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(lease).UnixMilli(), 10)})
	}
	if c.ttlAttribute != "" {
		s += ", " + b.name("#t", c.ttlAttribute) + " = " +
			b.value(":t", &types.AttributeValueMemberN{Value: strconv.FormatInt(now.Add(lease+TTLMargin).Unix(), 10)})
	}
	return s
}

// removeStaleExpiry is the REMOVE clause an acquisition without
// WithClockSkewBound adds, so that another client's fast takeover never
// trusts an expiry its holder does not renew.
func (c *Client) removeStaleExpiry(b *exprBuilder) string {
	if c.clockSkewBound > 0 {
		return ""
	}
	return ", " + b.name("#x", attrLeaseExpiresAt)
}

// staleByClockAt returns, as a time on this host's monotonic clock (now
// being the present), when rec's stored expiry plus the skew bound passes by
// this host's wall clock; ok is false without WithClockSkewBound or a
// stored expiry.
func (c *Client) staleByClockAt(rec *lockRecord, now time.Time) (time.Time, bool) {
	if c.clockSkewBound <= 0 || rec.leaseExpiresAt <= 0 {
		return time.Time{}, false
	}
	wall := time.UnixMilli(rec.leaseExpiresAt).Add(c.clockSkewBound + time.Millisecond)
	return now.Add(wall.Sub(now.Round(0))), true
}
