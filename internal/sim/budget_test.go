package sim

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Invariant 22: a key nobody takes is read within its budget (issue 60,
// item 2; docs/ENGINE.md, "Polling by rank"). The waiters with a place in
// a key's queue read it by rank: the head at most every headCap (the key's
// 18 reads per refresh period of 1 s or more, less what the ranks behind
// it read) and never slower than its refresh period; rank 2 at most every
// 3/4 of its refresh period and rank r every r periods once the hold (or
// the free key behind a head that is late or dead) has lasted; each reads
// a few times more as the hold begins. Before the fix, the waiters behind
// a fair head that had died read its free key every (rank-1) × 5 ms for
// the head's whole place lease: 65-100 reads a second for rank 2 alone
// here, with the simulation's round trips of 2-10 ms.
//
// The checker counts the GetItems of each key by calls that have an entry
// in a queue (placed waiters: a fair semaphore's head reads every slot),
// from the last time the key changed hands (its holder, fencing token,
// release or existence changed: the reads then come with acquisitions).
// Once that is budgetWindow ago, the reads of the last budgetWindow must
// stay within budgetFactor times what the schedule allows its readers at
// most (each call at its own refresh period d, less its tenth of jitter:
// 18 per max(d, 1 s) for the head's share, 4/(3d) for each reader's own,
// which bounds any rank's), with budgetSlack reads per reader for the
// start of a hold (the head's reads at a quarter of the hold's age, the
// others' at (rank-1) times it). In 300 seeds of the fixed library the
// largest share of its allowance one window used was 0.73; under the
// first version's rule (mutation M76) up to 2.8.

const (
	budgetFactor = 1.5
	budgetWindow = time.Second
	budgetSlack  = 10 // reads per reader in a window, for the start of a hold
)

// keyReads is what the checker counted of one key's reads since it last
// changed hands.
type keyReads struct {
	since   time.Time
	hands   string // owner, token, released: what a change of hands changes
	reads   []placedRead
	flagged bool
}

type placedRead struct {
	at   time.Time
	call *simCall
}

// handsOf is what changes when an item changes hands.
func handsOf(it ddbmodel.Item) string {
	if it == nil {
		return "absent"
	}
	return fmt.Sprintf("%s/%d/%v", itemS(it, "ownerName"), itemN(it, "fencingToken"), released(it))
}

// budgetHands notes a change of hands of key k (w.mu held, after the
// mirror took a change in).
func (w *world) budgetHands(k string) {
	kr := w.keyReads[k]
	if h := handsOf(w.current[k]); kr == nil || kr.hands != h {
		w.keyReads[k] = &keyReads{since: time.Now(), hands: h}
	}
}

// countRead is invariant 22 for one GetItem of key k by call c (w.mu held).
func (w *world) countRead(c *simCall, k string) {
	if c == nil || !w.placed(c) {
		return
	}
	w.budgetHands(k)
	kr := w.keyReads[k]
	now := time.Now()
	kr.reads = append(kr.reads, placedRead{at: now, call: c})
	from := now.Add(-budgetWindow)
	i := sort.Search(len(kr.reads), func(i int) bool { return !kr.reads[i].at.Before(from) })
	kr.reads = kr.reads[i:]
	if now.Sub(kr.since) < budgetWindow || kr.flagged {
		return
	}
	allowed, who := readAllowance(kr.reads)
	if n := len(kr.reads); float64(n) > allowed {
		kr.flagged = true
		w.violate(22, "%s: %d reads by placed waiters in the last %s (allowed %.0f: %s), %s after it last changed hands (%s); item %s",
			w.pkOf(k), n, budgetWindow, allowed, who, now.Sub(kr.since).Round(time.Millisecond), kr.hands, showItem(w.current[k]))
	}
}

// readAllowance is the most reads the schedule lets the calls of reads
// make in budgetWindow, budgetFactor times over, with budgetSlack per
// call; and who they were.
func readAllowance(reads []placedRead) (float64, string) {
	per := map[*simCall]int{}
	var calls []*simCall
	for _, r := range reads {
		if per[r.call] == 0 {
			calls = append(calls, r.call)
		}
		per[r.call]++
	}
	sort.Slice(calls, func(i, j int) bool { return calls[i].id < calls[j].id })
	rate, head := 0.0, 0.0
	var who []string
	for _, c := range calls {
		d := c.plan.refresh * 9 / 10
		rate += 4 / (3 * d.Seconds())
		head = max(head, keyReadsPerSecond/max(d, time.Second).Seconds())
		who = append(who, fmt.Sprintf("%s %s#%d refresh %s: %d", c.client.name, c.what, c.id, c.plan.refresh.Round(time.Millisecond), per[c]))
	}
	return budgetFactor*(rate+head)*budgetWindow.Seconds() + budgetSlack*float64(len(calls)), strings.Join(who, ", ")
}

// keyReadsPerSecond is the library's keyReads (internal/pacing): what a key's
// placed waiters read together per refresh period of 1 s or more.
const keyReadsPerSecond = 18
