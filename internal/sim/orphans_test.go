package sim

import (
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Invariant 21: no item names a live session of a client unless a lock of
// that client holds it (issue 60, item 1). An acquiring write under a
// session whose answer was lost may land after its take-back was answered
// (a late "ghost": faults_test.go, transport_test.go); the item then names
// the session, which its client renews for as long as it runs, and no
// lock of the client holds it: nobody else may take it. The library sends
// the take-back of such a write again once a heartbeat period until the
// write can no longer land (giveup.go), and does the same for a lock it
// gave up without a confirmed release.
//
// After every model request the checker looks at every lock item (and
// every reader entry of a read/write lock) that names a session: when the
// session's item is live (there, not released, renewed within its lease),
// the item is its client's (ownerName), and no tracked lock of that client
// with that fencing token (for a reader: that entry) is held, the item is
// an orphan. Its time as an orphan accrues, except while what the
// protocol allows goes on: the call that wrote it has not returned (its
// answer in flight, or an AcquireLocks still taking its other keys), a
// release of its lock is in flight, the client is stalled or paused, or
// it is closing. An orphan older than orphanBound is a violation: what the
// take-back's cadence (one heartbeat period) and its faults allow, far
// below the rest of the run that an orphan lasted before the fix.

// sessionInfo is what the checker knows of one session's item.
type sessionInfo struct {
	client  *simClient // the client that started it
	renewed time.Time  // the item's last change of record version number
	lease   time.Duration
}

// orphan is one item (or reader entry) found an orphan, until it is not.
type orphan struct {
	since   time.Time
	last    time.Time     // the last evaluation
	accrued time.Duration // orphan time outside the windows the protocol allows
	flagged bool
}

// orphanBound is how long an item may stay an orphan of cl's session
// outside the allowed windows: the take-back is sent once a heartbeat
// period; each send may be delayed up to a lease (slow requests), time out
// (undoTimeout, 5 s, the SDK's retries and backoffs inside it) or fail,
// and is then sent at the next period.
func orphanBound(cl *simClient) time.Duration {
	return 5*time.Second + 2*cl.lease + 6*cl.hb
}

func (w *world) sessionItemKey(s string) string {
	sk := ""
	if w.sortKey != "" {
		sk = sessionSortKey
	}
	return ddbmodel.KeyString(s, sk)
}

// orphansHook keeps the sessions' and the session-named items' records
// for one change of the lock table (w.mu held, before the mirror takes it
// in): c is the call that sent the request, or nil.
func (w *world) orphansHook(caller string, c *simCall, ch ddbmodel.Change) {
	b, a := ch.Before, ch.After
	pk := w.pkOf(ch.Key)
	if strings.HasPrefix(pk, sessionKeyPrefix) {
		if a != nil && !released(a) && (b == nil || released(b) || itemS(a, "recordVersionNumber") != itemS(b, "recordVersionNumber")) {
			s := w.sessions[pk]
			if s == nil || b == nil || released(b) {
				lease, _ := time.ParseDuration(itemS(a, "leaseDuration"))
				s = &sessionInfo{client: w.byName[caller], lease: lease}
				w.sessions[pk] = s
			}
			s.renewed = time.Now()
		}
		return
	}
	if a != nil && (b == nil || itemS(a, "recordVersionNumber") != itemS(b, "recordVersionNumber")) {
		w.itemWriter[ch.Key] = c
	}
	if m, ok := a["readers"].(*types.AttributeValueMemberM); ok {
		var old map[string]types.AttributeValue
		if bm, ok := b["readers"].(*types.AttributeValueMemberM); ok {
			old = bm.Value
		}
		for id, e := range m.Value {
			em, _ := e.(*types.AttributeValueMemberM)
			var oe *types.AttributeValueMemberM
			if old != nil {
				oe, _ = old[id].(*types.AttributeValueMemberM)
			}
			if em != nil && (oe == nil || itemS(oe.Value, "b") != itemS(em.Value, "b")) {
				w.itemWriter[ch.Key+"\x00"+id] = c
			}
		}
	}
	if a != nil && (itemS(a, "dynamolockSession") != "" || a["readers"] != nil) {
		w.sessionNamed[ch.Key] = true
	}
}

// liveSession is the client of session s when its item is live now: there,
// not released, renewed within its lease.
func (w *world) liveSession(s string) *simClient {
	info := w.sessions[s]
	if info == nil || info.client == nil {
		return nil
	}
	it := w.current[w.sessionItemKey(s)]
	if it == nil || released(it) || time.Since(info.renewed) >= info.lease {
		return nil
	}
	return info.client
}

// checkOrphans is invariant 21, after every model request (w.mu held).
func (w *world) checkOrphans() {
	keys := make([]string, 0, len(w.sessionNamed))
	for k := range w.sessionNamed {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	seen := map[string]bool{}
	for _, k := range keys {
		it := w.current[k]
		if it == nil {
			delete(w.sessionNamed, k)
			continue
		}
		// With renewal-orphans avoided, an item whose last record version
		// number a renewal wrote (not an acquiring call) is not counted
		// (F18 in docs/SIMULATION.md, fixed since).
		renewal := w.itemWriter[k] == nil && avoid("renewal-orphans")
		if s := itemS(it, "dynamolockSession"); s != "" && !released(it) && !renewal {
			if cl := w.liveSession(s); cl != nil && itemS(it, "ownerName") == cl.ownerName() {
				tok := itemN(it, "fencingToken")
				held, excused := false, false
				for _, tr := range w.tracked {
					if tr.client == cl && tr.key == k && tr.token == tok && !tr.reader {
						held = held || tr.l.Err() == nil
						excused = excused || w.releasing[tr.l] > 0
					}
				}
				if !held {
					seen[k] = true
					w.orphanFor(k, cl, excused || w.inFlight(w.itemWriter[k]), "%s (token %d) names %s's live session %s",
						w.pkOf(k), tok, cl.name, s)
				}
			}
		}
		m, ok := it["readers"].(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		ids := make([]string, 0, len(m.Value))
		for id := range m.Value {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		for _, id := range ids {
			e, ok := m.Value[id].(*types.AttributeValueMemberM)
			if !ok {
				continue
			}
			s := itemS(e.Value, "s")
			cl := w.liveSession(s)
			if cl == nil || s == "" || w.itemWriter[k+"\x00"+id] == nil && avoid("renewal-orphans") {
				continue
			}
			held, excused := false, false
			for _, tr := range w.tracked {
				if tr.client == cl && tr.key == k && tr.reader && (tr.readerID == id || tr.readerID == "") {
					held = held || tr.l.Err() == nil
					excused = excused || w.releasing[tr.l] > 0
				}
			}
			if !held {
				ek := k + "\x00" + id
				seen[ek] = true
				w.orphanFor(ek, cl, excused || w.inFlight(w.itemWriter[ek]), "%s's reader entry %.8s names %s's live session %s",
					w.pkOf(k), id, cl.name, s)
			}
		}
	}
	var over []string
	for k := range w.orphans {
		if !seen[k] {
			over = append(over, k)
		}
	}
	sort.Strings(over)
	for _, k := range over {
		o := w.orphans[k]
		w.tracef("orphan %s over after %s (%s counted)", strings.ReplaceAll(k, "\x00", " "), time.Since(o.since).Round(time.Millisecond), o.accrued.Round(time.Millisecond))
		delete(w.orphans, k)
	}
}

// inFlight reports whether call c has not returned yet.
func (w *world) inFlight(c *simCall) bool { return c != nil && !c.done }

// orphanFor accrues the orphan time of k, an orphan of cl's session now.
func (w *world) orphanFor(k string, cl *simClient, excused bool, format string, args ...any) {
	now := time.Now()
	o := w.orphans[k]
	if o == nil {
		o = &orphan{since: now, last: now}
		w.orphans[k] = o
		w.tracef("orphan: "+format, args...)
	}
	excused = excused || cl.closed || w.closing[cl.name] || cl.stallUntil.After(now) || cl.pausedUntil.After(now)
	if !excused {
		d := now.Sub(o.last) - overlap(o.last, now, cl.stallFrom, cl.stallUntil) - overlap(o.last, now, cl.pausedFrom, cl.pausedUntil)
		o.accrued += max(d, 0)
	}
	o.last = now
	if bound := orphanBound(cl); o.accrued > bound && !o.flagged {
		o.flagged = true
		w.violate(21, format+": no lock of that client holds it, for %s since %s (%s outside the windows the protocol allows; bound %s)",
			append(args, now.Sub(o.since).Round(time.Millisecond), o.since.Sub(w.start).Round(time.Millisecond), o.accrued.Round(time.Millisecond), bound)...)
	}
}

// overlap is how much of [a, b] lies in [c, d].
func overlap(a, b, c, d time.Time) time.Duration {
	lo, hi := a, b
	if c.After(lo) {
		lo = c
	}
	if d.Before(hi) {
		hi = d
	}
	if !hi.After(lo) {
		return 0
	}
	return hi.Sub(lo)
}
