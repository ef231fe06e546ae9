package dynamolock

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of a lock item. The first six are shared with Amazon's
// Java client and dynamolock v2; fencingToken and leaseExpiresAt are ours.
const (
	attrOwnerName      = "ownerName"
	attrLeaseDuration  = "leaseDuration"
	attrRVN            = "recordVersionNumber"
	attrData           = "data"
	attrIsReleased     = "isReleased"
	attrFencingToken   = "fencingToken"
	attrLeaseExpiresAt = "leaseExpiresAt" // epoch milliseconds, with WithClockSkewBound
	// attrLeaseExpiresRVN is the RVN leaseExpiresAt was written with.
	attrLeaseExpiresRVN = "leaseExpiresAtRVN"
	// attrSession is the key of the session item whose session holds the
	// lock (WithSession; docs/SESSIONS.md); absent otherwise.
	attrSession = "dynamolockSession"
)

// lockAttributes are every attribute of a lock item that the lock itself
// writes (attrFairQueue with WithFairness; the last three in an RWLock's
// item): the one list that key, TTL and additional attribute names are
// checked against.
var lockAttributes = []string{attrOwnerName, attrLeaseDuration, attrRVN, attrData, attrIsReleased,
	attrFencingToken, attrLeaseExpiresAt, attrLeaseExpiresRVN, attrFairQueue,
	attrReaders, attrReadersVersion, attrWritersArrived, attrSession}

// lockAttribute reports whether name is one of the lock item's own
// attributes, which a key, TTL or additional attribute must not be named
// after.
func lockAttribute(name string) bool { return slices.Contains(lockAttributes, name) }

// Limits DynamoDB enforces; checked locally so that bad input fails before
// any call.
const (
	maxPartitionKeyBytes = 2048
	maxSortKeyBytes      = 1024
	maxItemBytes         = 400 * 1024
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
	return name == s.partitionKeyName || lockAttribute(name) || name != "" && (name == s.sortKeyName || name == s.ttlAttribute)
}

// decodeItem reads a lock item as written by this client, Amazon's Java
// client or dynamolock v2. It never panics: anything it cannot interpret is
// an *ItemFormatError.
func (s schema) decodeItem(item map[string]types.AttributeValue) (*lockRecord, error) {
	r := &lockRecord{}
	var err error
	if r.owner, err = stringAttr(item, attrOwnerName); err != nil {
		return nil, err
	}
	if r.rvn, err = stringAttr(item, attrRVN); err != nil {
		return nil, err
	}
	lease, err := stringAttr(item, attrLeaseDuration)
	if err != nil {
		return nil, err
	}
	if r.lease, err = parseLease(lease); err != nil {
		return nil, err
	}
	_, r.released = item[attrIsReleased]
	if v, ok := item[attrData]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return nil, &ItemFormatError{Attribute: attrData, Reason: "not of type B"}
		}
		r.data = b.Value
	}
	if r.fencingToken, err = uintAttr(item, attrFencingToken); err != nil {
		return nil, err
	}
	exp, err := uintAttr(item, attrLeaseExpiresAt)
	if err != nil {
		return nil, err
	}
	r.leaseExpiresAt = int64(min(exp, math.MaxInt64))
	if v, ok := item[attrLeaseExpiresRVN].(*types.AttributeValueMemberS); ok {
		r.expiryRVN = v.Value
	}
	if v, ok := item[attrSession]; ok && r.lease == maxLease {
		// A session's lock: only a session-acquiring write of this library
		// sets the attribute with this lease. Another client's write that
		// copied the attribute in (dynamolock v2 copies what it does not
		// know) wrote its own lease: that item is judged by its lease, never
		// by a session its writer did not set (docs/SESSIONS.md).
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok || s.Value == "" {
			return nil, &ItemFormatError{Attribute: attrSession, Reason: "not a non-empty string"}
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
				return 0, &ItemFormatError{Attribute: attrLeaseDuration, Reason: "milliseconds out of range: " + s}
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, &ItemFormatError{Attribute: attrLeaseDuration, Reason: "neither a Go duration nor milliseconds: " + strconv.Quote(s)}
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

// formatLease writes a lease as a Go duration. The last one formatted is
// kept: a client writes the same few leases over and over.
func formatLease(d time.Duration) string {
	if f := lastLease.Load(); f != nil && f.d == d {
		return f.s
	}
	f := &formattedLease{d: d, s: d.String()}
	lastLease.Store(f)
	return f.s
}

type formattedLease struct {
	d time.Duration
	s string
}

var lastLease atomic.Pointer[formattedLease]

// itemSize estimates the stored size of an item the way DynamoDB counts it
// (attribute name bytes plus value bytes), rounding numbers up.
func itemSize(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + valueSize(v)
	}
	return n
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return numberSize(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, b := range v.Value {
			n += len(b)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += numberSize(s)
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	digits := len(strings.TrimLeft(strings.TrimLeft(s, "-"), "0."))
	return (digits+1)/2 + 1
}

func attrS(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

func attrN(n uint64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

// exprBuilder grows an expression's name and value placeholders without
// repeating the bookkeeping at every call site.
type exprBuilder struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExprBuilder() *exprBuilder {
	return &exprBuilder{names: make(map[string]string, 8), values: make(map[string]types.AttributeValue, 8)}
}

// name returns the placeholder for attribute name under alias (e.g. "#o").
func (b *exprBuilder) name(alias, attr string) string {
	b.names[alias] = attr
	return alias
}

// value returns the placeholder alias bound to v (e.g. ":o").
func (b *exprBuilder) value(alias string, v types.AttributeValue) string {
	b.values[alias] = v
	return alias
}

func (b *exprBuilder) valuesOrNil() map[string]types.AttributeValue {
	if len(b.values) == 0 {
		return nil
	}
	return b.values
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
	beat, big := strings.Repeat("b", 36), attrN(math.MaxUint64) // a beat is a UUID, as newRVN writes it
	for i := range max(MaxReaders, maxWaiters) {
		id := fmt.Sprintf("%016x", i) // randomID's length
		if i < MaxReaders {
			readers[id] = readerEntry(beat, maxLease, sessionKeyPrefix+beat)
		}
		if i < maxWaiters {
			queue[id] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"t": attrN(maxTicket), "b": attrS(id), "l": attrN(uint64(maxWaiterLease / time.Millisecond)), "k": attrS("w"),
			}}
		}
	}
	return itemSize(map[string]types.AttributeValue{
		attrReaders:        &types.AttributeValueMemberM{Value: readers},
		attrFairQueue:      &types.AttributeValueMemberM{Value: queue},
		attrReadersVersion: big,
		attrWritersArrived: big,
	})
}()

// validateItemSize rejects data that would make the item larger than
// DynamoDB's 400 KB limit, counting every attribute the lock writes and
// the room kept for other holders and waiters (othersReserve).
func (c *Client) validateItemSize(option, key string, sortKey *string, data []byte, additional map[string]types.AttributeValue) error {
	// The key's attributes and the additional ones (whose names never
	// collide with the key's: see acquireOptions), counted as itemSize
	// counts them, without building the item.
	keySize := len(c.cfg.partitionKeyName) + len(key)
	if sortKey != nil {
		keySize += len(c.cfg.sortKeyName) + len(*sortKey)
	}
	size := keySize + itemSize(additional) + len(data) + len(attrData) +
		len(attrOwnerName) + len(c.cfg.ownerName) +
		len(attrLeaseDuration) + 24 + len(attrRVN) + 36 +
		len(attrIsReleased) + 1 + len(attrFencingToken) + 12 +
		len(attrLeaseExpiresAt) + 12 + len(attrLeaseExpiresRVN) + 36 + len(c.cfg.ttlAttribute) + 12 +
		len(attrSession) + len(sessionKeyPrefix) + 36 + othersReserve
	if size > maxItemBytes {
		value := strconv.Itoa(len(data)) + " bytes of data"
		if len(data) < size/2 {
			// The additional attributes make most of the item: name them.
			option = "WithAdditionalAttributes"
			value = strconv.Itoa(itemSize(additional)) + " bytes of additional attributes"
		}
		return invalid(option, value, "the lock item would be about %d bytes (with %d kept for RWLock readers and fair-queue waiters), over DynamoDB's %d-byte item limit",
			size, othersReserve, maxItemBytes)
	}
	return nil
}

// guardedUpdate is a conditional UpdateItem of a held lock's item that, on
// failure, returns the item (so the caller can tell whether it is still this
// acquisition's).
func (c *Client) guardedUpdate(key map[string]types.AttributeValue, b *exprBuilder, update, cond string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 key,
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
