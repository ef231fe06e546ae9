package sim

import (
	"sort"
	"time"
)

// Invariant 23: a waiter that no fair place holds up takes a dead holder's
// key in time (issue 60, item 3; docs/ENGINE.md, "Polling by rank"). A
// fair waiter behind plain places only (plain places hold up no fair
// waiter) watches for a stale holder itself: it reads the item when the
// holder's lease has run out since its client first saw that record
// version number, and takes the key. Before the fix it woke only at its
// poll by rank or its place's renewal, so plain waiters that died with
// the holder (one host) made it take the dead holder's key up to a third
// of its own lease late.
//
// After every model request, for each key held by a lease of its own (no
// session) whose queue has a fair entry with no fair entry before it: if
// that entry's call still waits, with its first read of the holder's
// record version number (not renewed since) more than the item's lease
// plus deadHolderSlack ago, and it has been the first fair entry for more
// than one of its refresh periods plus that slack when a fair entry in
// front of it left (that entry held it up until then, and the waiter
// learns of the leave at its next read: seed 62000105), it is a violation. Checked only where nothing
// else may hold the waiter up: no request of its client on the key met a
// fault since that read (a client's calls take turns on a key), no write
// of it was refused by another's transaction in progress, it was not
// stalled, paused or closing since, and its call's context and wait end
// well after the deadline.

// deadHolderSlack covers the read at the due instant and the acquiring
// write (1–5 ms per leg on a fault-free client), the answer that first
// showed the record version number (the library counts from it), and a
// tie with another call of the client on the key.
const deadHolderSlack = 60 * time.Millisecond

// checkDeadHolders is invariant 23 (w.mu held).
func (w *world) checkDeadHolders() {
	keys := make([]string, 0, len(w.entryCall))
	for k := range w.entryCall {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	now := time.Now()
	for _, k := range keys {
		it := w.current[k]
		if it == nil || released(it) || itemS(it, "dynamolockSession") != "" {
			continue
		}
		owner, rvn := itemS(it, "ownerName"), itemS(it, "recordVersionNumber")
		if owner == "foreign" || owner == v2Owner || w.deadHolders[k] == rvn {
			continue
		}
		lease, err := time.ParseDuration(itemS(it, "leaseDuration"))
		if err != nil || lease > time.Hour {
			continue
		}
		var first *entry
		for _, e := range queueEntries(it) {
			if !e.unordered {
				first = &e
				break
			}
		}
		if first == nil {
			delete(w.firstFair, k)
			continue
		}
		head, ok := w.firstFair[k]
		switch {
		case !ok:
			head = fairHead{id: first.id} // first from its start: no fair entry held it up
			w.firstFair[k] = head
		case head.id != first.id:
			head = fairHead{id: first.id, since: now} // the fair entry in front of it left now
			w.firstFair[k] = head
		}
		c := w.entryCall[k][first.id]
		if c == nil || c.done || !c.plan.fair || c.client.ownerName() == owner {
			continue
		}
		seen, ok := c.seen[k]
		if !ok || seen.rvn != rvn {
			continue
		}
		deadline := later(seen.at.Add(lease), head.since.Add(c.plan.refresh)).Add(deadHolderSlack)
		if !now.After(deadline) || !w.cleanSince(c, k, seen.at, deadline) {
			continue
		}
		w.deadHolders[k] = rvn
		w.violate(23, "%s: %s's fair call #%d (refresh %s, entry %.4s first of the fair ones) still waits %s after its first read of %s's record version number %.8s (lease %s), which nobody renewed: %s",
			w.pkOf(k), c.client.name, c.id, c.plan.refresh.Round(time.Millisecond), first.id, now.Sub(seen.at).Round(time.Millisecond),
			owner, rvn, lease, showItem(it))
	}
}

// fairHead is a key's first fair entry and when the fair entry in front
// of it left (zero: there was none since the checker saw it).
type fairHead struct {
	id    string
	since time.Time
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// cleanSince reports whether nothing but the library could have held up
// call c since from: see invariant 23. A call with no wait of its own
// (only its context bounds it) counts as waiting long enough.
func (w *world) cleanSince(c *simCall, key string, from, deadline time.Time) bool {
	cl := c.client
	const margin = time.Second
	switch {
	case !w.keyFault[cl.name+"\x00"+key].Before(from):
		// A request of its client on the key met a fault since: the
		// calls of a client take turns on a key, and wait for it.
		return false
	case cl.closed || w.closing[cl.name] || cl.stallUntil.After(from) || cl.pausedUntil.After(from):
		return false
	case !w.conflictAt[cl.name].Before(from):
		return false
	case !c.ctxEnd.IsZero() && c.ctxEnd.Before(deadline.Add(margin)):
		return false
	case c.plan.wait > 0 && c.start.Add(c.plan.wait).Before(deadline.Add(margin)):
		return false
	}
	return true
}
