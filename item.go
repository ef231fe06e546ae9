package dynamolock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// lockRecord is a decoded lock item.
type lockRecord struct {
	owner          string
	lease          time.Duration
	rvn            string
	data           []byte
	released       bool
	fencingToken   uint64
	leaseExpiresAt int64  // epoch ms; 0 when absent
	expiryRVN      string // the RVN leaseExpiresAt was written for
	session        string // the key of the session holding it; "" when none
	additional     map[string]types.AttributeValue
}

// schema names the attributes of one client's items.
type schema struct {
	partitionKeyName string
	sortKeyName      string // "" when the table has no sort key
	ttlAttribute     string // "" when not configured
}

func (s schema) reserved(name string) bool {
	return name == s.partitionKeyName || lockitem.IsOwn(name) || name != "" && (name == s.sortKeyName || name == s.ttlAttribute)
}

// decodeItem reads a lock item as written by this client, Amazon's Java
// client or dynamolock v2. It never panics: anything it cannot interpret is
// an *ItemFormatError.
func (s schema) decodeItem(item map[string]types.AttributeValue) (*lockRecord, error) {
	r := &lockRecord{}
	var err error
	if r.owner, err = stringAttr(item, lockitem.OwnerName); err != nil {
		return nil, err
	}
	if r.rvn, err = stringAttr(item, lockitem.RVN); err != nil {
		return nil, err
	}
	lease, err := stringAttr(item, lockitem.LeaseDuration)
	if err != nil {
		return nil, err
	}
	if r.lease, err = parseLease(lease); err != nil {
		return nil, err
	}
	_, r.released = item[lockitem.IsReleased]
	if v, ok := item[lockitem.Data]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return nil, &ItemFormatError{Attribute: lockitem.Data, Reason: "not of type B"}
		}
		r.data = b.Value
	}
	if r.fencingToken, err = uintAttr(item, lockitem.FencingToken); err != nil {
		return nil, err
	}
	exp, err := uintAttr(item, lockitem.LeaseExpiresAt)
	if err != nil {
		return nil, err
	}
	r.leaseExpiresAt = int64(min(exp, math.MaxInt64))
	if v, ok := item[lockitem.LeaseExpiresRVN].(*types.AttributeValueMemberS); ok {
		r.expiryRVN = v.Value
	}
	if v, ok := item[lockitem.Session]; ok && r.lease == maxLease {
		// A session's lock: only a session-acquiring write of this library
		// sets the attribute with this lease. Another client's write that
		// copied the attribute in (dynamolock v2 copies what it does not
		// know) wrote its own lease: that item is judged by its lease, never
		// by a session its writer did not set (docs/SESSIONS.md).
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok || s.Value == "" {
			return nil, &ItemFormatError{Attribute: lockitem.Session, Reason: "not a non-empty string"}
		}
		r.session = s.Value
	}
	for name, v := range item {
		if !s.reserved(name) {
			if r.additional == nil {
				r.additional = make(map[string]types.AttributeValue)
			}
			r.additional[name] = v
		}
	}
	return r, nil
}

func stringAttr(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name]
	if !ok {
		return "", &ItemFormatError{Attribute: name, Reason: "missing"}
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", &ItemFormatError{Attribute: name, Reason: "not of type S"}
	}
	if s.Value == "" {
		return "", &ItemFormatError{Attribute: name, Reason: "empty"}
	}
	return s.Value, nil
}

// uintAttr reads an optional non-negative N attribute; absent is 0.
func uintAttr(item map[string]types.AttributeValue, name string) (uint64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, &ItemFormatError{Attribute: name, Reason: "not of type N"}
	}
	u, err := strconv.ParseUint(n.Value, 10, 64)
	if err != nil {
		return 0, &ItemFormatError{Attribute: name, Reason: "not a non-negative integer: " + strconv.Quote(n.Value)}
	}
	return u, nil
}

// parseLease reads a lease written as a Go duration ("20s", dynamolock v2
// and this client) or as decimal milliseconds ("20000", Amazon's Java client).
func parseLease(s string) (time.Duration, error) {
	// Only what ParseInt could accept is given to it: its error would be
	// allocated for every item in the Go format.
	if decimal(s) {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
				return 0, &ItemFormatError{Attribute: lockitem.LeaseDuration, Reason: "milliseconds out of range: " + s}
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, &ItemFormatError{Attribute: lockitem.LeaseDuration, Reason: "neither a Go duration nor milliseconds: " + strconv.Quote(s)}
	}
	return d, nil
}

// decimal reports whether s is an optional sign and decimal digits.
func decimal(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// othersReserve is the room every lock item keeps for what the other kinds
// of holders and waiters add to it at their largest: an RWLock's
// MaxReaders reader entries and its two counters at 20 digits, and a fair
// queue of maxWaiters entries (an RWLock's carry their kind). Any key may
// get them (a fair waiter joins the queue of any lock; an RWLock's writer
// is the item's holder), and a write that pushed the item past DynamoDB's
// limit would be refused: a reader refused its place, a holder's renewal
// refused until the lock is lost.
var othersReserve = func() int {
	readers := make(map[string]types.AttributeValue, MaxReaders)
	queue := make(map[string]types.AttributeValue, maxWaiters)
	beat, big := strings.Repeat("b", 36), lockitem.N(math.MaxUint64) // a beat is a UUID, as newRVN writes it
	for i := range max(MaxReaders, maxWaiters) {
		id := fmt.Sprintf("%016x", i) // randomID's length
		if i < MaxReaders {
			readers[id] = readerEntry(beat, maxLease, sessionKeyPrefix+beat)
		}
		if i < maxWaiters {
			queue[id] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"t": lockitem.N(maxTicket), "b": lockitem.S(id), "l": lockitem.N(uint64(maxWaiterLease / time.Millisecond)), "k": lockitem.S("w"),
			}}
		}
	}
	return lockitem.Size(map[string]types.AttributeValue{
		lockitem.Readers:        &types.AttributeValueMemberM{Value: readers},
		lockitem.FairQueue:      &types.AttributeValueMemberM{Value: queue},
		lockitem.ReadersVersion: big,
		lockitem.WritersArrived: big,
	})
}()

// validateItemSize rejects data that would make the item larger than
// DynamoDB's 400 KB limit, counting every attribute the lock writes and
// the room kept for other holders and waiters (othersReserve).
func (c *Client) validateItemSize(option, key string, sortKey *string, data []byte, additional map[string]types.AttributeValue) error {
	// The key's attributes and the additional ones (whose names never
	// collide with the key's: see acquireOptions), counted as lockitem.Size
	// counts them, without building the item.
	keySize := len(c.cfg.partitionKeyName) + len(key)
	if sortKey != nil {
		keySize += len(c.cfg.sortKeyName) + len(*sortKey)
	}
	size := keySize + lockitem.Size(additional) + len(data) + len(lockitem.Data) +
		len(lockitem.OwnerName) + len(c.cfg.ownerName) +
		len(lockitem.LeaseDuration) + 24 + len(lockitem.RVN) + 36 +
		len(lockitem.IsReleased) + 1 + len(lockitem.FencingToken) + 12 +
		len(lockitem.LeaseExpiresAt) + 12 + len(lockitem.LeaseExpiresRVN) + 36 + len(c.cfg.ttlAttribute) + 12 +
		len(lockitem.Session) + len(sessionKeyPrefix) + 36 + othersReserve
	if size > lockitem.MaxItemBytes {
		value := strconv.Itoa(len(data)) + " bytes of data"
		if len(data) < size/2 {
			// The additional attributes make most of the item: name them.
			option = "WithAdditionalAttributes"
			value = strconv.Itoa(lockitem.Size(additional)) + " bytes of additional attributes"
		}
		return invalid(option, value, "the lock item would be about %d bytes (with %d kept for RWLock readers and fair-queue waiters), over DynamoDB's %d-byte item limit",
			size, othersReserve, lockitem.MaxItemBytes)
	}
	return nil
}

// guardedUpdate is a conditional UpdateItem of a held lock's item that, on
// failure, returns the item (so the caller can tell whether it is still this
// acquisition's).
func (c *Client) guardedUpdate(key map[string]types.AttributeValue, b *lockitem.Expr, update, cond string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 key,
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.Names,
		ExpressionAttributeValues:           b.Values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
