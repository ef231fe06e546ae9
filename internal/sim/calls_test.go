package sim

import (
	"context"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Every acquiring call the simulation makes (AcquireLock, Do, AcquireLocks,
// Semaphore.Acquire, Campaign, RWLock's Lock and RLock) carries a simCall in
// its context (callKey), which reaches the model's hook with each of its
// requests, however late they land. The hook learns from it which call
// wrote an item's record version number or a queue entry, which call read
// a key, and whether that call is still waiting: invariants 21 (orphans),
// 22 (reads) and 23 (dead holders) are about calls.

// callKey tags an acquiring call's context with its *simCall.
type callKey struct{}

// simCall is one acquiring call of a client, as the checker knows it.
// Guarded by world.mu once it has begun.
type simCall struct {
	id     int
	client *simClient
	what   string
	plan   waitPlan
	start  time.Time
	ctxEnd time.Time // its context's deadline (zero: none)
	done   bool      // the call returned
	// places: the queue entries this call wrote, by item key (the last
	// one on each item).
	places map[string]string
	// seen: for each key, the record version number of the item the
	// first of this call's reads showed, and when (invariant 23).
	seen map[string]seenRVN
}

type seenRVN struct {
	rvn string
	at  time.Time
}

// waitPlan is what a call asked for about waiting: its refresh period
// (the library's default when it set none), its additional wait (zero:
// none asked; forever is not used), fairness, and FailIfLocked.
type waitPlan struct {
	refresh time.Duration
	wait    time.Duration
	fair    bool
	try     bool
}

// begin tags ctx with a new call of cl and returns the function that marks
// it returned.
func (w *world) begin(ctx context.Context, cl *simClient, what string, plan waitPlan) (context.Context, func()) {
	if plan.refresh == 0 {
		plan.refresh = time.Second // DefaultRefreshPeriod
	}
	w.mu.Lock()
	w.calls++
	c := &simCall{id: w.calls, client: cl, what: what, plan: plan, start: time.Now(), places: map[string]string{}, seen: map[string]seenRVN{}}
	if dl, ok := ctx.Deadline(); ok {
		c.ctxEnd = dl
	}
	w.mu.Unlock()
	return context.WithValue(ctx, callKey{}, c), func() {
		w.mu.Lock()
		c.done = true
		w.mu.Unlock()
	}
}

// callOf is the call a request's context carries, or nil.
func callOf(ctx context.Context) *simCall {
	c, _ := ctx.Value(callKey{}).(*simCall)
	return c
}

// entry is one waiter's entry in an item's fairQueue.
type entry struct {
	id        string
	ticket    uint64
	beat      string
	unordered bool
}

// queueEntries lists an item's fairQueue in the library's order (ticket,
// then id).
func queueEntries(it ddbmodel.Item) []entry {
	q, ok := it["fairQueue"].(*types.AttributeValueMemberM)
	if !ok {
		return nil
	}
	es := make([]entry, 0, len(q.Value))
	for id, v := range q.Value {
		m, ok := v.(*types.AttributeValueMemberM)
		if !ok {
			continue
		}
		_, u := m.Value["u"]
		es = append(es, entry{id: id, ticket: itemN(m.Value, "t"), beat: itemS(m.Value, "b"), unordered: u})
	}
	sort.Slice(es, func(i, j int) bool {
		if es[i].ticket != es[j].ticket {
			return es[i].ticket < es[j].ticket
		}
		return es[i].id < es[j].id
	})
	return es
}

func hasEntry(it ddbmodel.Item, id string) bool {
	q, ok := it["fairQueue"].(*types.AttributeValueMemberM)
	if !ok {
		return false
	}
	_, has := q.Value[id]
	return has
}

// callsHook records, for one request a call sent, the queue entries it
// wrote and, for a read of key (""; not a read), what it showed (w.mu
// held; after the mirror took the request's changes in).
func (w *world) callsHook(c *simCall, key string, changes []ddbmodel.Change) {
	for _, ch := range changes {
		if ch.Table != w.lockTable || ch.After == nil {
			continue
		}
		after := queueEntries(ch.After)
		for _, e := range after {
			if !hasEntry(ch.Before, e.id) {
				c.places[ch.Key] = e.id
				if w.entryCall[ch.Key] == nil {
					w.entryCall[ch.Key] = map[string]*simCall{}
				}
				w.entryCall[ch.Key][e.id] = c
			}
		}
	}
	if key == "" {
		return
	}
	if it := w.current[key]; it != nil && !released(it) {
		rvn := itemS(it, "recordVersionNumber")
		if c.seen[key].rvn != rvn {
			c.seen[key] = seenRVN{rvn: rvn, at: time.Now()}
		}
	}
}

// placed reports whether c has an entry in a queue now.
func (w *world) placed(c *simCall) bool {
	for k, id := range c.places {
		if hasEntry(w.current[k], id) {
			return true
		}
	}
	return false
}
