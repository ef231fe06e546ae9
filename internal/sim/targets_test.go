package sim

import (
	"sort"
	"time"
)

// Targeted stalls (issue 60, items 2 and 3). A stall of a random client
// rarely hits the orderings where a queue's dead places matter: the head
// of a fair queue that dies while the key is (or becomes) free, with
// waiters behind it that must keep the key's read budget (invariant 22);
// and a holder that dies with the plain waiters of its host, in front of a
// fair waiter that must take the dead holder's key in time (invariant
// 23). In seeds with stalls, half the stalls (from a stream of their own,
// so that the seed's other draws stay where they were; -sim.avoid=targeted
// leaves them out) pick their clients from the checker's mirror instead:
//
//   - a host: when a key held by a lease of its own has plain places
//     before the first fair place in its queue, none of them the fair
//     waiter's client's nor is the holder, every client but the fair
//     waiter's, all at once, each for at least two of its leases: the
//     holder dies with the plain waiters in front of the fair one, and
//     with anyone else who could take the key first;
//   - else the head: the client of the first fair place in a queue;
//   - else the random client chaos drew.

// stallTargets is the clients a targeted stall stalls, and why, or nil
// (w.mu held).
func (w *world) stallTargets() (targets []*simClient, why string) {
	keys := make([]string, 0, len(w.entryCall))
	for k := range w.entryCall {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var head []*simClient
	headWhy := ""
	for _, k := range keys {
		it := w.current[k]
		if it == nil {
			continue
		}
		es := queueEntries(it)
		var plain []*simClient
		for _, e := range es {
			c := w.entryCall[k][e.id]
			if c == nil || c.done {
				continue
			}
			if e.unordered {
				plain = append(plain, c.client)
				continue
			}
			// The first fair place of the queue.
			if head == nil {
				head, headWhy = []*simClient{c.client}, "the head of "+w.pkOf(k)+"'s fair queue"
			}
			owner := itemS(it, "ownerName")
			if released(it) || itemS(it, "dynamolockSession") != "" || len(plain) == 0 || c.client.ownerName() == owner {
				break
			}
			// Only a waiter that will still wait when the holder's lease
			// has run out (invariant 23 checks no other).
			lease, err := time.ParseDuration(itemS(it, "leaseDuration"))
			until := time.Now().Add(lease + 2*time.Second)
			if err != nil || c.plan.wait == 0 || c.start.Add(c.plan.wait).Before(until) || !c.ctxEnd.IsZero() && c.ctxEnd.Before(until) {
				break
			}
			holder := w.clientsOf(owner)
			if len(holder) == 0 || containsClient(plain, c.client) || containsClient(holder, c.client) {
				break // the fair waiter's own client waits plainly before it, or holds the key
			}
			var others []*simClient
			for _, cl := range w.slots {
				if !cl.closed && cl != c.client {
					others = append(others, cl)
				}
			}
			return others, "every client but " + c.client.name + ", whose fair waiter on " + w.pkOf(k) + " has only plain places before it"
		}
	}
	return head, headWhy
}

// clientsOf is the running clients whose owner name is owner.
func (w *world) clientsOf(owner string) []*simClient {
	var cs []*simClient
	for _, cl := range w.slots {
		if !cl.closed && cl.ownerName() == owner {
			cs = append(cs, cl)
		}
	}
	return cs
}

func containsClient(cs []*simClient, c *simClient) bool {
	for _, x := range cs {
		if x == c {
			return true
		}
	}
	return false
}
