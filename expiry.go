package dynamolock

import (
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
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
// The expiry is stored with the record version number it was written for
// (attribute leaseExpiresAtRVN), and trusted only while the item still
// carries that RVN: a foreign writer (Amazon's Java client, dynamolock v2,
// any UpdateItem) that renews or takes the item with a new RVN and keeps the
// old attributes leaves an expiry that is ignored. Releases by clients with
// this option, and acquisitions by clients without it, remove both
// attributes (a released item is free whatever it keeps).
func WithClockSkewBound(d time.Duration) ClientOption {
	return func(c *Client) { c.cfg.clockSkewBound = d }
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
	return func(c *Client) { c.cfg.ttlAttribute = name }
}

// expirySets returns the SET clauses for the absolute expiry and the TTL
// attribute of a write of rvn first sent at sent with lease, and registers
// their placeholders with b. The expiry is stored with the RVN it was
// written for: a reader trusts it only while the item still carries that
// RVN, so an expiry that a foreign writer left behind is never trusted.
func (c *Client) expirySets(b *lockitem.Expr, sent time.Time, lease time.Duration, rvn string) string {
	c.expiryValues(b.Values, sent, lease, rvn)
	s := ""
	if c.cfg.clockSkewBound > 0 {
		s += ", " + b.Name("#x", lockitem.LeaseExpiresAt) + " = :x, " + b.Name("#xr", lockitem.LeaseExpiresRVN) + " = :xr"
	}
	if c.cfg.ttlAttribute != "" {
		s += ", " + b.Name("#t", c.cfg.ttlAttribute) + " = :t"
	}
	return s
}

// expiryValues puts the values of expirySets' clauses into values, under
// its placeholders (":x", ":xr", ":t"), where the client writes them: all a
// write with constant expressions needs (plainAcquireWrite).
func (c *Client) expiryValues(values map[string]types.AttributeValue, sent time.Time, lease time.Duration, rvn string) {
	if c.cfg.clockSkewBound > 0 {
		values[":x"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(ceilMilli(sent.Add(lease)), 10)}
		values[":xr"] = lockitem.S(rvn)
	}
	if c.cfg.ttlAttribute != "" {
		values[":t"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(sent.Add(lease+TTLMargin).Unix(), 10)}
	}
}

// expiryAttrs names the stored expiry's attributes for a REMOVE clause.
// (Constant strings after the placeholders: no allocation per write.)
func expiryAttrs(b *lockitem.Expr) string {
	b.Name("#x", lockitem.LeaseExpiresAt)
	b.Name("#xr", lockitem.LeaseExpiresRVN)
	return "#x, #xr"
}

// staleByClockAt returns, as a time on this host's monotonic clock (now
// being the present), when rec's stored expiry plus the skew bound passes by
// this host's wall clock; ok is false without WithClockSkewBound, without a
// stored expiry, or when the expiry was written for another RVN than the
// item carries.
func (c *Client) staleByClockAt(rec *lockRecord, now time.Time) (time.Time, bool) {
	if c.cfg.clockSkewBound <= 0 || rec.LeaseExpiresAt <= 0 || rec.ExpiryRVN != rec.RVN {
		return time.Time{}, false
	}
	wall := time.UnixMilli(rec.LeaseExpiresAt).Add(c.cfg.clockSkewBound + time.Millisecond)
	return now.Add(wall.Sub(now.Round(0))), true
}

// ceilMilli is t in epoch milliseconds, rounded up: the expiry a holder
// writes is never earlier than the end of the lease it believes in.
func ceilMilli(t time.Time) int64 {
	ms := t.UnixMilli()
	if time.UnixMilli(ms).Before(t) {
		ms++
	}
	return ms
}
