package sim

import (
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Sessions (issue 38) run beside per-lock leases: a third of the clients
// with heartbeats hold their locks through a session (newSimClient), under
// every fault, pause and clock mode; the invariants above hold for their
// locks as for any, and one more is checked after every request:
//
//	17. a live session's lock is never taken: an item that names a
//	    session passes to another owner or fencing token only once that
//	    session's item is released (its end mark, or its holder's Close) or
//	    gone. An acquisition by the same owner name (WithReentrant, a
//	    client restarted under the name) is the holder's own.
//
// With -sim.avoid=sessions no client has a session, and every other draw
// of a seed stays what it was.

// sessionKeyPrefix and sessionSortKey are the library's (session.go).
const (
	sessionKeyPrefix = "dynamolock-session:"
	sessionSortKey   = "dynamolock-session"
)

// sessionHook checks invariant 17 on one change of the lock table, before
// the mirror takes it in (w.mu held).
func (w *world) sessionHook(ch ddbmodel.Change) {
	b, a := ch.Before, ch.After
	if b == nil || a == nil || released(b) || released(a) {
		return
	}
	s := itemS(b, "dynamolockSession")
	if s == "" || !strings.HasPrefix(s, sessionKeyPrefix) {
		return
	}
	if itemS(a, "ownerName") == itemS(b, "ownerName") || itemN(a, "fencingToken") == itemN(b, "fencingToken") {
		return // the holder's own write, or the same acquisition
	}
	sk := ""
	if w.sortKey != "" {
		sk = sessionSortKey
	}
	if it := w.current[ddbmodel.KeyString(s, sk)]; it != nil && !released(it) {
		w.violate(17, "%s (token %d) of session %s was taken by %s (token %d) while the session's item is live: %s",
			w.pkOf(ch.Key), itemN(b, "fencingToken"), s, itemS(a, "ownerName"), itemN(a, "fencingToken"), showItem(it))
	}
}

// sessionLeaseLeft is how long session s can still hold its locks: its
// item's lease (ended: none), for the liveness check's bound.
func (w *world) sessionLeaseLeft(s string) time.Duration {
	sk := ""
	if w.sortKey != "" {
		sk = sessionSortKey
	}
	it := w.model.Item(w.lockTable, ddbmodel.KeyString(s, sk))
	if it == nil || released(it) {
		return 0
	}
	lease, err := time.ParseDuration(itemS(it, "leaseDuration"))
	if err != nil {
		return 10 * time.Second
	}
	return lease
}
