package sim

import (
	"context"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// The recipes run beside plain acquisitions, on the same faults and the
// same invariants: every lock they hand out is tracked, so "at most one
// holder per key" covers a semaphore's slots (at most size holders) and an
// election's key (at most one leader believed), and every returned lock of
// AcquireLocks must be its item. What is theirs alone:
//   - AcquireLocks that fails leaves none of its keys believed held here;
//   - Leader and Observe never report a value the election's item never
//     held (recordData keeps every data value each item had).

const (
	semName      = "sem"
	semSize      = 2
	electionName = "leader"
)

// recordData remembers the data value an item had after a change, under
// the world's mutex (from the hook).
func (w *world) recordData(key string, item ddbmodel.Item) {
	if item == nil {
		return
	}
	b, ok := item["data"].(*types.AttributeValueMemberB)
	if !ok {
		return
	}
	if w.dataSeen == nil {
		w.dataSeen = map[string]map[string]bool{}
	}
	if w.dataSeen[key] == nil {
		w.dataSeen[key] = map[string]bool{}
	}
	w.dataSeen[key][string(b.Value)] = true
}

// recipeCtx is the context of a recipe call. It always ends: Campaign (and,
// without an additional wait, the other recipes) wait as long as their
// context allows, and a wait that outlived the run would hold up the
// close-down. One in three ends within two leases, the others within six.
func recipeCtx(cl *simClient, r *rand.Rand) (context.Context, context.CancelFunc, string) {
	n := int64(6)
	if r.IntN(3) == 0 {
		n = 2
	}
	d := time.Duration(r.Int64N(n * int64(cl.lease)))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	return ctx, cancel, fmt.Sprintf(", ctx %s", d.Round(time.Millisecond))
}

// minLease is the client's shortest lease (WithLeaseDuration,
// WithLockLease, WithLeaseDurationToEnsure): a drawn lease is at least it.
const minLease = 100 * time.Millisecond

// additionalWait draws an additional time to wait under twice lease. A
// draw under the client's floor for it (1 ms; a shorter one could only be
// a number written without a unit) is 0, no additional wait: one in 2,000
// draws or fewer.
func additionalWait(r *rand.Rand, lease time.Duration) time.Duration {
	wait := time.Duration(r.Int64N(int64(2 * lease)))
	if wait < time.Millisecond {
		return 0
	}
	return wait
}

// waitOpts are the wait options of a recipe call: FailIfLocked one time in
// four, else a refresh period and an additional wait.
func waitOpts(cl *simClient, r *rand.Rand) ([]dynamolock.AcquireLockOption, string, waitPlan) {
	if r.IntN(4) == 0 {
		return []dynamolock.AcquireLockOption{dynamolock.FailIfLocked()}, "FailIfLocked", waitPlan{try: true}
	}
	rp := time.Duration(1+r.Int64N(int64(cl.lease/2))) + 10*time.Millisecond
	wait := additionalWait(r, cl.lease)
	return []dynamolock.AcquireLockOption{dynamolock.WithRefreshPeriod(rp), dynamolock.WithAdditionalTimeToWaitForLock(wait)},
		fmt.Sprintf("refresh %s wait %s", rp.Round(time.Millisecond), wait.Round(time.Millisecond)), waitPlan{refresh: rp, wait: wait}
}

// multi acquires a random subset of the world's keys with AcquireLocks,
// holds them a while and releases them.
func (w *world) multi(cl *simClient, r *rand.Rand) {
	keys := slices.Clone(w.keys)
	r.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	keys = keys[:1+r.IntN(len(keys))]
	opts, desc, plan := waitOpts(cl, r)
	ctx, cancel, cdesc := recipeCtx(cl, r)
	defer cancel()
	ctx, returned := w.begin(ctx, cl, "AcquireLocks", plan)
	w.note("%s AcquireLocks %v (%s%s)", cl.name, keys, desc, cdesc)
	done := w.asking(cl, len(keys))
	locks, err := cl.c.AcquireLocks(ctx, keys, opts...)
	returned()
	done(err)
	if err != nil {
		w.mu.Lock()
		w.tracef("%s AcquireLocks %v failed: %v", cl.name, keys, err)
		w.checkLocked(cl.name + " AcquireLocks failed")
		w.mu.Unlock()
		return
	}
	if len(locks) != len(keys) {
		w.mu.Lock()
		w.violate(8, "%s AcquireLocks %v returned %d locks", cl.name, keys, len(locks))
		w.mu.Unlock()
	}
	for _, l := range locks {
		w.track(cl, l, "AcquireLocks")
	}
	w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
	for _, l := range locks {
		if r.IntN(8) == 0 {
			w.note("%s abandons %s (token %d) to its heartbeats and Close", cl.name, l.PartitionKey(), l.FencingToken())
			continue
		}
		w.release(cl, r, l)
	}
}

// semaphore takes a slot of the world's semaphore, holds it and releases it.
func (w *world) semaphore(cl *simClient, r *rand.Rand) {
	sem, err := cl.c.NewSemaphore(semName, semSize)
	if err != nil {
		panic(err)
	}
	opts, desc, plan := waitOpts(cl, r)
	// A third of the waiting acquisitions are fair (one queue on slot 0's
	// item, other slots taken by transaction). Chosen from what waitOpts
	// drew, so that the seed's other draws stay where they were.
	if h := fnv.New32a(); desc != "FailIfLocked" {
		h.Write([]byte(desc))
		if h.Sum32()%3 == 0 {
			opts = append(opts, dynamolock.WithFairness())
			desc += ", fair"
			plan.fair = true
		}
	}
	ctx, cancel, cdesc := recipeCtx(cl, r)
	defer cancel()
	ctx, returned := w.begin(ctx, cl, "Semaphore.Acquire", plan)
	w.note("%s Semaphore.Acquire (%s%s)", cl.name, desc, cdesc)
	done := w.asking(cl, 1)
	l, err := sem.Acquire(ctx, opts...)
	returned()
	done(err)
	if err != nil {
		w.note("%s Semaphore.Acquire failed: %v", cl.name, err)
		return
	}
	w.track(cl, l, "Semaphore.Acquire")
	w.hold(cl, r, l)
	w.release(cl, r, l)
}

// elect campaigns for the world's election; as leader it proclaims new
// values, reads the leader, and resigns or abandons leadership. Any client
// may read or observe the leader meanwhile.
func (w *world) elect(cl *simClient, r *rand.Rand) {
	e := cl.c.NewElection(electionName)
	switch r.IntN(3) {
	case 0:
		w.readLeader(cl, e, "Leader")
		return
	case 1:
		w.observe(cl, r, e)
		return
	}
	ctx, cancel, cdesc := recipeCtx(cl, r)
	defer cancel()
	value := fmt.Sprintf("%s/v%d", cl.name, r.IntN(1000))
	ctx, returned := w.begin(ctx, cl, "Campaign", waitPlan{})
	w.note("%s Campaign %q%s", cl.name, value, cdesc)
	done := w.asking(cl, 1)
	l, err := e.Campaign(ctx, []byte(value))
	returned()
	done(err)
	if err != nil {
		w.note("%s Campaign failed: %v", cl.name, err)
		return
	}
	w.track(cl, l, "Campaign")
	for range r.IntN(3) {
		value = fmt.Sprintf("%s/v%d", cl.name, r.IntN(1000))
		err := e.Proclaim(context.Background(), []byte(value))
		w.note("%s Proclaim %q: %s", cl.name, value, errOrOK(err))
		w.readLeader(cl, e, "Leader as leader")
		w.sleep(time.Duration(r.Int64N(int64(cl.lease / 2))))
	}
	if r.IntN(5) == 0 {
		w.note("%s abandons leadership (token %d) to its heartbeats and Close", cl.name, l.FencingToken())
		return
	}
	w.mu.Lock()
	w.releasing[l]++
	w.mu.Unlock()
	err = e.Resign(context.Background())
	w.mu.Lock()
	if w.releasing[l]--; w.releasing[l] == 0 {
		delete(w.releasing, l)
	}
	w.tracef("%s Resign: %s", cl.name, errOrOK(err))
	w.checkLocked(cl.name + " Resign returned")
	w.mu.Unlock()
}

// readLeader checks one answer of Leader.
func (w *world) readLeader(cl *simClient, e *dynamolock.Election, what string) {
	ld, err := e.Leader(context.Background())
	if err != nil {
		w.note("%s %s: %v", cl.name, what, err)
		return
	}
	w.checkLeader(cl, ld, what)
}

// observe watches the election for a while and checks every value.
func (w *world) observe(cl *simClient, r *rand.Rand, e *dynamolock.Election) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(1+r.Int64N(int64(2*cl.lease))))
	defer cancel()
	for ld := range e.Observe(ctx) {
		w.checkLeader(cl, ld, "Observe")
	}
}

// checkLeader: a reported leader's value is one the election's item held.
func (w *world) checkLeader(cl *simClient, ld dynamolock.Leader, what string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tracef("%s %s: %s %q token %d", cl.name, what, ld.Owner, ld.Value, ld.FencingToken)
	if len(ld.Value) == 0 {
		return
	}
	if !w.dataSeen[ddbmodel.KeyString(electionName, w.sortKey)][string(ld.Value)] {
		w.violate(8, "%s %s reported value %q, which the election's item never held", cl.name, what, ld.Value)
	}
}
