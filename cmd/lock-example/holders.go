package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// The attributes of a read/write lock's item beside the exclusive
// holder's, as the library's RWLock documents them (rwlock.go, "The
// item"): readers maps each shared holder's id to {b: its beat, l: its
// lease in ms}; fairQueue maps each waiter's id to its entry, whose k is
// "w" for an exclusive waiter and "r" for a shared one.
const (
	attrReaders   = "readers"
	attrFairQueue = "fairQueue"
	// The exclusive holder's attributes, as in every lock item.
	attrOwnerName  = "ownerName"
	attrIsReleased = "isReleased"
)

// limitAttr is the attribute lock-example writes in a slot item of a
// --limit N run: N, so that list and show know the item as a slot (a
// plain lock may be named x#1 too) and show callers that disagree on N.
const limitAttr = "lockExampleLimit"

// holders is what a lock item says of its holders beyond the library's
// view of it (which knows only the exclusive holder).
type holders struct {
	shared  bool         // the item of a read/write lock: it has a readers map
	readers []readerInfo // the shared holders, by id
	// waiting exclusive and shared runs in the queue of a read/write lock
	waitingWriters, waitingReaders int
	// limit is the N of the --limit run that last took this slot (0: not
	// a slot of lock-example's); the slot's name and index come from its key.
	limit int
}

// readerInfo is one shared holder. Its entry names no owner: the library
// writes only an id, a beat and a lease.
type readerInfo struct {
	id    string
	beat  string        // changes at each of its renewals
	lease time.Duration // 0: an entry the library would count as dead at once
}

// holdersOf reads item (nil: unknown) beyond the library's view.
func holdersOf(item map[string]types.AttributeValue) holders {
	var h holders
	if m, ok := item[attrReaders].(*types.AttributeValueMemberM); ok {
		h.shared = true
		for id, ev := range m.Value {
			r := readerInfo{id: id}
			if e, ok := ev.(*types.AttributeValueMemberM); ok {
				if b, ok := e.Value["b"].(*types.AttributeValueMemberS); ok {
					r.beat = b.Value
				}
				if l, ok := e.Value["l"].(*types.AttributeValueMemberN); ok {
					if ms, err := strconv.ParseUint(l.Value, 10, 32); err == nil {
						r.lease = time.Duration(ms) * time.Millisecond
					}
				}
			}
			h.readers = append(h.readers, r)
		}
		slices.SortFunc(h.readers, func(a, b readerInfo) int { return strings.Compare(a.id, b.id) })
		if q, ok := item[attrFairQueue].(*types.AttributeValueMemberM); ok {
			for _, ev := range q.Value {
				e, _ := ev.(*types.AttributeValueMemberM)
				if e == nil {
					continue
				}
				if k, _ := e.Value["k"].(*types.AttributeValueMemberS); k != nil && k.Value == "w" {
					h.waitingWriters++
				} else {
					h.waitingReaders++
				}
			}
		}
	}
	if n, ok := item[limitAttr].(*types.AttributeValueMemberN); ok {
		if v, err := strconv.Atoi(n.Value); err == nil && v > 0 {
			h.limit = v
		}
	}
	return h
}

// longestLease is the longest lease of the shared holders.
func (h holders) longestLease() time.Duration {
	var d time.Duration
	for _, r := range h.readers {
		d = max(d, r.lease)
	}
	return d
}

// slotOf splits a slot's key name#i.
func slotOf(key string) (name string, index int, ok bool) {
	i := strings.LastIndexByte(key, '#')
	if i < 0 {
		return "", 0, false
	}
	n, err := strconv.Atoi(key[i+1:])
	if err != nil || n < 0 || strconv.Itoa(n) != key[i+1:] {
		return "", 0, false
	}
	return key[:i], n, true
}

// heldAs says how a lock is held: "exclusive", "shared" or "" (by no
// one); for a slot of a --limit run, "slot".
func heldAs(l *dynamolock.Lock, h holders) string {
	switch {
	case h.limit > 0:
		return "slot"
	case !l.IsReleased():
		return "exclusive"
	case len(h.readers) > 0:
		return "shared"
	}
	return ""
}

// heldText is heldAs for people: "exclusive", "shared by 3", "slot 1 of 3"
// or "-".
func heldText(l *dynamolock.Lock, h holders) string {
	switch heldAs(l, h) {
	case "slot":
		_, i, _ := slotOf(l.PartitionKey())
		return fmt.Sprintf("slot %d of %d", i, h.limit)
	case "exclusive":
		return "exclusive"
	case "shared":
		return fmt.Sprintf("shared by %d", len(h.readers))
	}
	return "-"
}

// isFree reports whether nobody holds the lock.
func isFree(l *dynamolock.Lock, h holders) bool { return l.IsReleased() && len(h.readers) == 0 }

// waitingText says who waits in a read/write lock's queue, or "".
func (h holders) waitingText() string {
	var parts []string
	if h.waitingWriters > 0 {
		parts = append(parts, plural(h.waitingWriters, "exclusive run", "exclusive runs"))
	}
	if h.waitingReaders > 0 {
		parts = append(parts, plural(h.waitingReaders, "shared run", "shared runs"))
	}
	return strings.Join(parts, " and ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}
