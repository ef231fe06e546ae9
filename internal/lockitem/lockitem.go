// Package lockitem is the lock item's format, as far as it is pure: the
// names of the attributes a lock writes, the values and the expression
// placeholders every request is built from, a lease as the item stores it,
// and an item's size as DynamoDB counts it. It does no I/O and knows no
// lock, acquisition or client: the root package builds its requests and
// decodes its items on top of it (issue 59: the first of the walls the
// compiler keeps, docs/ENGINE.md).
package lockitem

import (
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attribute names of a lock item. The first six are shared with Amazon's
// Java client and dynamolock v2; the others are this library's.
const (
	OwnerName      = "ownerName"
	LeaseDuration  = "leaseDuration"
	RVN            = "recordVersionNumber"
	Data           = "data"
	IsReleased     = "isReleased"
	FencingToken   = "fencingToken"
	LeaseExpiresAt = "leaseExpiresAt" // epoch milliseconds, with WithClockSkewBound
	// LeaseExpiresRVN is the RVN LeaseExpiresAt was written with.
	LeaseExpiresRVN = "leaseExpiresAtRVN"
	// Session is the key of the session item whose session holds the lock
	// (WithSession; docs/SESSIONS.md); absent otherwise.
	Session = "dynamolockSession"
	// FairQueue maps a waiter's id to its place (WithFairness, and every
	// waiter of an RWLock or a fair semaphore).
	FairQueue = "fairQueue"
	// Readers maps an RWLock reader's id to {b: beat, l: lease in ms,
	// s: session}.
	Readers = "readers"
	// ReadersVersion goes up by one with every change of Readers, so that
	// a writer's write can require the readers map it saw.
	ReadersVersion = "readersVersion"
	// WritersArrived goes up by one each time a writer joins the queue, so
	// that a reader's write fails when a writer arrived since the reader
	// looked.
	WritersArrived = "writersArrived"
)

// Own are every attribute of a lock item that the lock itself writes: the
// one list that key, TTL and additional attribute names are checked
// against.
var Own = []string{OwnerName, LeaseDuration, RVN, Data, IsReleased,
	FencingToken, LeaseExpiresAt, LeaseExpiresRVN, FairQueue,
	Readers, ReadersVersion, WritersArrived, Session}

// IsOwn reports whether name is one of the lock item's own attributes,
// which a key, TTL or additional attribute must not be named after.
func IsOwn(name string) bool { return slices.Contains(Own, name) }

// S is a string value.
func S(s string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: s} }

// N is a number value.
func N(n uint64) *types.AttributeValueMemberN {
	return &types.AttributeValueMemberN{Value: strconv.FormatUint(n, 10)}
}

// Expr grows an expression's name and value placeholders without
// repeating the bookkeeping at every call site.
type Expr struct {
	Names  map[string]string
	Values map[string]types.AttributeValue
}

// NewExpr returns an empty Expr.
func NewExpr() *Expr {
	return &Expr{Names: make(map[string]string, 8), Values: make(map[string]types.AttributeValue, 8)}
}

// Name returns the placeholder for attribute attr under alias (e.g. "#o").
func (b *Expr) Name(alias, attr string) string {
	b.Names[alias] = attr
	return alias
}

// Value returns the placeholder alias bound to v (e.g. ":o").
func (b *Expr) Value(alias string, v types.AttributeValue) string {
	b.Values[alias] = v
	return alias
}

// ValuesOrNil is the values, or nil when there are none (DynamoDB refuses
// an empty map).
func (b *Expr) ValuesOrNil() map[string]types.AttributeValue {
	if len(b.Values) == 0 {
		return nil
	}
	return b.Values
}

// FormatLease writes a lease as a Go duration. The last one formatted is
// kept: a client writes the same few leases over and over.
func FormatLease(d time.Duration) string {
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

// Size estimates the stored size of an item the way DynamoDB counts it
// (attribute name bytes plus value bytes), rounding numbers up.
func Size(item map[string]types.AttributeValue) int {
	n := 0
	for k, v := range item {
		n += len(k) + ValueSize(v)
	}
	return n
}

// ValueSize is the stored size of one value, as Size counts it.
func ValueSize(v types.AttributeValue) int {
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
			n += 1 + ValueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + ValueSize(e)
		}
		return n
	}
	return 0
}

func numberSize(s string) int {
	digits := len(strings.TrimLeft(strings.TrimLeft(s, "-"), "0."))
	return (digits+1)/2 + 1
}

// Limits DynamoDB enforces on a lock item: checked before any call, so
// that bad input fails with a clear error.
const (
	MaxPartitionKeyBytes = 2048
	MaxSortKeyBytes      = 1024
	MaxItemBytes         = 400 * 1024
)

// MaxWaiters bounds the entries of a key's waiter queue, so that the
// item's size stays within what the size check budgets: a waiter that
// finds the queue full waits behind it, polling, and joins once an entry
// leaves.
const MaxWaiters = 100
