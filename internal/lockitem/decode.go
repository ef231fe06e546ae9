package lockitem

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// FormatError is an attribute of a lock item that this library cannot
// interpret. The root package reports it as the public *ItemFormatError.
type FormatError struct {
	Attribute string
	Reason    string
}

func (e *FormatError) Error() string {
	return "attribute " + strconv.Quote(e.Attribute) + ": " + e.Reason
}

// Layout names the attributes of one client's items that are not the lock's
// own: the table's keys and the TTL attribute ("" when there is none).
type Layout struct {
	PartitionKey string
	SortKey      string
	TTL          string
}

// Reserved reports whether name is a key, the TTL attribute or one of the
// lock's own attributes: not an additional attribute of the item.
func (l Layout) Reserved(name string) bool {
	return name == l.PartitionKey || IsOwn(name) || name != "" && (name == l.SortKey || name == l.TTL)
}

// Record is a decoded lock item: its holder and what it carries beside.
type Record struct {
	Owner          string
	Lease          time.Duration
	RVN            string
	Data           []byte
	Released       bool
	FencingToken   uint64
	LeaseExpiresAt int64  // epoch ms; 0 when absent
	ExpiryRVN      string // the RVN LeaseExpiresAt was written for
	Session        string // the key of the session holding it; "" when none
	Additional     map[string]types.AttributeValue
}

// MaxLease is the longest lease a time.Duration holds: a session's lock
// carries it (docs/SESSIONS.md).
const MaxLease = time.Duration(1<<63 - 1)

// Decode reads a lock item as written by this library, Amazon's Java client
// or dynamolock v2. It never panics: anything it cannot interpret is a
// *FormatError.
func (l Layout) Decode(item map[string]types.AttributeValue) (*Record, error) {
	r := &Record{}
	var err error
	if r.Owner, err = String(item, OwnerName); err != nil {
		return nil, err
	}
	if r.RVN, err = String(item, RVN); err != nil {
		return nil, err
	}
	lease, err := String(item, LeaseDuration)
	if err != nil {
		return nil, err
	}
	if r.Lease, err = ParseLease(lease); err != nil {
		return nil, err
	}
	_, r.Released = item[IsReleased]
	if v, ok := item[Data]; ok {
		b, ok := v.(*types.AttributeValueMemberB)
		if !ok {
			return nil, &FormatError{Attribute: Data, Reason: "not of type B"}
		}
		r.Data = b.Value
	}
	if r.FencingToken, err = Uint(item, FencingToken); err != nil {
		return nil, err
	}
	exp, err := Uint(item, LeaseExpiresAt)
	if err != nil {
		return nil, err
	}
	r.LeaseExpiresAt = int64(min(exp, math.MaxInt64))
	if v, ok := item[LeaseExpiresRVN].(*types.AttributeValueMemberS); ok {
		r.ExpiryRVN = v.Value
	}
	if v, ok := item[Session]; ok && r.Lease == MaxLease {
		// A session's lock: only a session-acquiring write of this library
		// sets the attribute with this lease. Another client's write that
		// copied the attribute in (dynamolock v2 copies what it does not
		// know) wrote its own lease: that item is judged by its lease, never
		// by a session its writer did not set (docs/SESSIONS.md).
		s, ok := v.(*types.AttributeValueMemberS)
		if !ok || s.Value == "" {
			return nil, &FormatError{Attribute: Session, Reason: "not a non-empty string"}
		}
		r.Session = s.Value
	}
	for name, v := range item {
		if !l.Reserved(name) {
			if r.Additional == nil {
				r.Additional = make(map[string]types.AttributeValue)
			}
			r.Additional[name] = v
		}
	}
	return r, nil
}

// String reads the required, non-empty S attribute name.
func String(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name]
	if !ok {
		return "", &FormatError{Attribute: name, Reason: "missing"}
	}
	s, ok := v.(*types.AttributeValueMemberS)
	if !ok {
		return "", &FormatError{Attribute: name, Reason: "not of type S"}
	}
	if s.Value == "" {
		return "", &FormatError{Attribute: name, Reason: "empty"}
	}
	return s.Value, nil
}

// Uint reads an optional non-negative N attribute; absent is 0.
func Uint(item map[string]types.AttributeValue, name string) (uint64, error) {
	v, ok := item[name]
	if !ok {
		return 0, nil
	}
	n, ok := v.(*types.AttributeValueMemberN)
	if !ok {
		return 0, &FormatError{Attribute: name, Reason: "not of type N"}
	}
	u, err := strconv.ParseUint(n.Value, 10, 64)
	if err != nil {
		return 0, &FormatError{Attribute: name, Reason: "not a non-negative integer: " + strconv.Quote(n.Value)}
	}
	return u, nil
}

// OptionalUint reads the N attribute name, and whether item has it.
func OptionalUint(item map[string]types.AttributeValue, name string) (uint64, bool, error) {
	if _, ok := item[name]; !ok {
		return 0, false, nil
	}
	n, err := Uint(item, name)
	return n, err == nil, err
}

// ParseLease reads a lease written as a Go duration ("20s", dynamolock v2
// and this library) or as decimal milliseconds ("20000", Amazon's Java
// client).
func ParseLease(s string) (time.Duration, error) {
	// Only what ParseInt could accept is given to it: its error would be
	// allocated for every item in the Go format.
	if decimal(s) {
		if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
			if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
				return 0, &FormatError{Attribute: LeaseDuration, Reason: "milliseconds out of range: " + s}
			}
			return time.Duration(ms) * time.Millisecond, nil
		}
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, &FormatError{Attribute: LeaseDuration, Reason: "neither a Go duration nor milliseconds: " + strconv.Quote(s)}
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

// The waiter queue (FairQueue): id → {t: ticket, b: beat, l: lease in ms},
// with k: "w" for an RWLock's writer and u: 1 for a waiter without
// WithFairness.
const (
	// EntryUnordered marks the entry of a waiter without WithFairness (its
	// value is the number 1; readers look only for its presence).
	EntryUnordered = "u"
	// MaxTicket bounds tickets: an entry at or above it is not a
	// waiter's, and the next ticket never overflows.
	MaxTicket = 1 << 53
	// MaxWaiterLease bounds the lease a waiter's entry may claim, so that
	// an entry written by mistake cannot hold up the queue for long.
	MaxWaiterLease = time.Hour
)

// Waiter is one entry of the waiter queue.
type Waiter struct {
	ID     string
	Ticket uint64
	Beat   string
	Lease  time.Duration
	Bad    bool // the entry cannot be interpreted: it orders nobody
	// Unordered: a waiter without WithFairness, which holds a place only
	// for the poll schedule: it waits for no entry and no fair waiter
	// waits for it.
	Unordered bool
	Writer    bool // an RWLock's writer (k: "w")
}

// Before orders the queue: by ticket, then by id (tickets taken from the
// same view of the queue are equal).
func (w Waiter) Before(ticket uint64, id string) bool {
	return cmp.Or(cmp.Compare(w.Ticket, ticket), cmp.Compare(w.ID, id)) < 0
}

// Queue reads the waiter queue of an item. present is false when the item
// has none; ok is false when it has one this library cannot use (not a
// map). The entries are in id order, not the map's: the writes built from
// the queue (which dead entries they remove, and the names they give them)
// are then one function of the item.
func Queue(item map[string]types.AttributeValue) (ws []Waiter, present, ok bool) {
	av, found := item[FairQueue]
	if !found {
		return nil, false, true
	}
	m, isMap := av.(*types.AttributeValueMemberM)
	if !isMap {
		return nil, true, false
	}
	ws = make([]Waiter, 0, len(m.Value))
	for id, ev := range m.Value {
		ws = append(ws, DecodeWaiter(id, ev))
	}
	slices.SortFunc(ws, func(a, b Waiter) int { return strings.Compare(a.ID, b.ID) })
	return ws, true, true
}

// DecodeWaiter reads the queue entry id; one it cannot interpret is Bad.
func DecodeWaiter(id string, ev types.AttributeValue) Waiter {
	w := Waiter{ID: id, Bad: true}
	e, ok := ev.(*types.AttributeValueMemberM)
	if !ok {
		return w
	}
	k, _ := e.Value["k"].(*types.AttributeValueMemberS)
	w.Writer = k != nil && k.Value == "w" // a writer's entry, even one that cannot be read
	t, err1 := Uint(e.Value, "t")
	l, err2 := Uint(e.Value, "l")
	b, ok := e.Value["b"].(*types.AttributeValueMemberS)
	if err1 != nil || err2 != nil || !ok || t == 0 || t >= MaxTicket || l == 0 || l > uint64(MaxWaiterLease/time.Millisecond) {
		return w
	}
	_, unordered := e.Value[EntryUnordered]
	return Waiter{ID: id, Ticket: t, Beat: b.Value, Lease: time.Duration(l) * time.Millisecond, Unordered: unordered, Writer: w.Writer}
}

// Reader is an RWLock reader's entry in the readers map: id → {b: beat,
// l: lease in milliseconds, s: session}.
type Reader struct {
	ID      string
	Beat    string
	Lease   time.Duration
	Session string // the key of the session that holds it; "" when none
	Bad     bool   // not an entry this library wrote: counts as dead at once
}

// DecodeReader reads a reader's entry. Its lease is read back as written,
// whatever its length: a reader holds the lock for the lease it asked for,
// as a writer does.
func DecodeReader(id string, ev types.AttributeValue) Reader {
	r := Reader{ID: id, Bad: true}
	e, ok := ev.(*types.AttributeValueMemberM)
	if !ok {
		return r
	}
	b, ok := e.Value["b"].(*types.AttributeValueMemberS)
	l, err := Uint(e.Value, "l")
	if !ok || err != nil || l == 0 || l > uint64(MaxLease/time.Millisecond) {
		return r
	}
	r = Reader{ID: id, Beat: b.Value, Lease: time.Duration(l) * time.Millisecond}
	if s, ok := e.Value["s"]; ok {
		sv, ok := s.(*types.AttributeValueMemberS)
		if !ok || sv.Value == "" {
			return Reader{ID: id, Bad: true}
		}
		r.Session = sv.Value
	}
	return r
}
