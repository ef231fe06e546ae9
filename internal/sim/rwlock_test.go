package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Read/write locks (issue 25) run beside the other operations, on their
// own key (rwName: plain acquisitions of that key would ignore its readers,
// a documented limit) and under the same faults. A writer's lock is an
// ordinary tracked lock, so invariants 1-5 cover it; readers are tracked
// too, and checked here instead of by invariants 1 and 2:
//
//	10. never a writer with anyone else: no believed writer while a reader
//	   is believed, and a believed writer's item has no reader entry;
//	   a believed reader's item is released (no writer) and has at least
//	   as many entries as there are believed readers;
//	11. never more believed readers than dynamolock.MaxReaders;
//	12. a waiting writer is granted within the leases of the readers that
//	    held when it arrived plus one refresh period (writerLeaves: checked
//	    for a writer first in line on a fault-free client, with a lease of
//	    slack for the faults on the others' requests); and, after every
//	    request (rwHook), no reader's entry is added while a writer waits
//	    before it in the queue with an entry renewed within the last nine
//	    tenths of its lease (no client can have judged it dead).
//
// With -sim.avoid=rwlock they do not run, and the other operations play
// exactly as before (they draw from their own random streams).

const rwName = "rw"

// rwActors starts, for some clients, an actor that only uses the
// read/write lock, each with a random stream of its own.
func (w *world) rwActors(wg *sync.WaitGroup, deadline time.Time) {
	if avoid("rwlock") {
		return
	}
	r := rand.New(rand.NewPCG(w.seed, 0x2e3d))
	for i := range w.slots {
		for a := range r.IntN(3) {
			ar := rand.New(rand.NewPCG(w.seed, uint64(0x2e3d00+10*i+a)))
			// At depths of their own (see nest): two writers of one
			// client drawing their RVNs at one instant must not tie.
			wg.Go(func() {
				nest(2*i+a, func() {
					for time.Now().Before(deadline) {
						w.rwlock(w.client(i), ar)
						w.sleep(time.Millisecond + time.Duration(ar.IntN(20))*time.Millisecond)
					}
				})
			})
		}
	}
}

// rwlock takes the read/write lock as a reader (two times in three) or as
// the writer, holds it a while, and releases or abandons it.
func (w *world) rwlock(cl *simClient, r *rand.Rand) {
	rw, err := cl.c.NewRWLock(rwName)
	if err != nil {
		panic(err)
	}
	opts, desc, plan := waitOpts(cl, r)
	ctx, cancel, cdesc := recipeCtx(cl, r)
	defer cancel()
	writer := r.IntN(3) == 0
	call, done := w.rwCallStarts()
	defer done()
	if writer {
		w.note("%s RWLock.Lock (%s%s)", cl.name, desc, cdesc)
		arrival := w.writerArrives(cl, call)
		asked := w.asking(cl, 1)
		ctx, returned := w.begin(ctx, cl, "RWLock.Lock", plan)
		var l *dynamolock.Lock
		var err error
		if r.IntN(8) == 0 {
			l, err = w.largestData(cl, ctx, rw, opts)
		} else {
			l, err = rw.Lock(ctx, opts...)
		}
		returned()
		asked(err)
		w.writerLeaves(arrival, err == nil)
		if err != nil {
			w.note("%s RWLock.Lock failed: %v", cl.name, err)
			return
		}
		w.logGrant(l, true, arrival.start)
		w.track(cl, l, "RWLock.Lock")
		w.hold(cl, r, l)
		if r.IntN(6) == 0 {
			w.note("%s abandons the write lock (token %d) to its heartbeats and Close", cl.name, l.FencingToken())
			return
		}
		w.release(cl, r, l)
		return
	}
	if r.IntN(10) == 0 && !cl.session {
		// A lease longer than an hour: every client reads it as written
		// (a session's locks share its lease).
		opts = append(opts, dynamolock.WithLockLease(2*time.Hour))
		desc += ", lease 2h"
	}
	w.note("%s RWLock.RLock (%s%s)", cl.name, desc, cdesc)
	callStart := time.Now()
	asked := w.asking(cl, 1)
	ctx, returned := w.begin(ctx, cl, "RWLock.RLock", plan)
	l, err := rw.RLock(ctx, opts...)
	returned()
	asked(err)
	if err != nil {
		w.note("%s RWLock.RLock failed: %v", cl.name, err)
		return
	}
	w.logGrant(l, false, callStart)
	w.trackReader(cl, l)
	for range r.IntN(3) {
		w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
		if r.IntN(2) == 0 {
			w.readerGuardedWrite(cl, r, l)
			continue
		}
		var hopts []dynamolock.SendHeartbeatOption
		switch r.IntN(10) {
		case 0:
			if !cl.session { // a session's: its whole session's lease
				hopts = append(hopts, dynamolock.WithLeaseDurationToEnsure(2*time.Hour))
			}
		case 1, 2, 3, 4:
			hopts = append(hopts, dynamolock.WithLeaseDurationToEnsure(max(2*cl.hb+time.Duration(r.Int64N(int64(cl.lease))), minLease)))
		}
		err := cl.c.SendHeartbeat(l, hopts...)
		w.note("%s SendHeartbeat reader %s: %v", cl.name, l.RecordVersionNumber()[:8], err)
	}
	if r.IntN(6) == 0 {
		w.note("%s abandons a read lock to its heartbeats and Close", cl.name)
		return
	}
	w.mu.Lock()
	w.releasing[l]++
	w.mu.Unlock()
	ok, err := cl.c.ReleaseLock(l)
	w.mu.Lock()
	if w.releasing[l]--; w.releasing[l] == 0 {
		delete(w.releasing, l)
	}
	w.tracef("%s release reader %.8s returned %v, %v", cl.name, l.RecordVersionNumber(), ok, err)
	if ok && !closed(l.Done()) {
		w.violate(5, "%s's release of a reader returned true but Done is open", cl.name)
	}
	w.checkLocked(cl.name + " reader release returned")
	w.mu.Unlock()
}

func (w *world) trackReader(cl *simClient, l *dynamolock.Lock) {
	// A step, as track takes one: the reader's first heartbeat, due at
	// once when the grant took long, gets to its write turn before this
	// actor's next call (a release at once) races it there (seeds 1 and 5).
	w.step(fmt.Sprintf("track reader %s %s %d %s", cl.name, l.PartitionKey(), l.FencingToken(), l.RecordVersionNumber()))
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := &tracked{l: l, key: ddbmodel.KeyString(l.PartitionKey(), l.SortKey()), pk: l.PartitionKey(), owner: l.OwnerName(),
		token: l.FencingToken(), rvn: l.RecordVersionNumber(), client: cl, reader: true}
	tr.readerID = w.readerEntry(tr.key, l.RecordVersionNumber())
	w.tracked[l] = tr
	w.tracef("%s RWLock.RLock %s: granted, token %d beat %.8s lease %s", cl.name, tr.pk, tr.token, l.RecordVersionNumber(), l.LeaseDuration())
	w.checkLocked(cl.name + " RLock returned")
}

// checkRW checks invariants 10 and 11 on the believed readers and writers of
// the read/write lock's key, at one instant (w.mu held).
func (w *world) checkRW(where string, writers, readers []*tracked) {
	if len(readers) == 0 {
		return
	}
	if len(readers) > dynamolock.MaxReaders {
		w.violate(11, "%s: %d readers believed at once, more than %d", where, len(readers), dynamolock.MaxReaders)
	}
	if len(writers) > 0 {
		w.violate(10, "%s: a writer (%s, token %d) and %d readers believed at once", where, writers[0].owner, writers[0].token, len(readers))
	}
	it := w.current[readers[0].key]
	entries := 0
	if m, ok := it["readers"].(*types.AttributeValueMemberM); ok {
		entries = len(m.Value)
	}
	if it == nil || !released(it) || entries < len(readers) {
		w.violate(10, "%s: %d readers believed, but the model has %s with %d reader entries", where, len(readers), showItem(it), entries)
	}
}

// checkRWWriter: a believed writer's item has no reader entry (invariant 10).
func (w *world) checkRWWriter(where string, tr *tracked) {
	it := w.current[tr.key]
	if m, ok := it["readers"].(*types.AttributeValueMemberM); ok && len(m.Value) > 0 {
		w.violate(10, "%s: %s believes it holds the write lock (token %d), but the item has %d reader entries", where, tr.owner, tr.token, len(m.Value))
	}
}

// rwRec is a granted RLock or Lock call, for invariant 12.
type rwRec struct {
	l         *dynamolock.Lock
	writer    bool
	callStart time.Time
}

// rwArrival is a writer's call, for invariant 12.
type rwArrival struct {
	client *simClient
	start  time.Time
	call   *int // its entry in rwCalls
	// checked: nothing was before it when it started (no writer, nobody
	// in the queue), and its own client has no faults, so its first write
	// and its join land within a few milliseconds (rwJoinSlack).
	checked bool
}

// faulty reports whether this client's requests may be lost, repeated,
// refused or delayed: by call-level faults, by faults on the SDK's
// attempts, or by its own clock's pauses.
func (f *faultyDB) faulty() bool {
	return f.prof != faultProfile{} || f.attempt != attemptProfile{} || f.clock != nil
}

// rwJoinSlack bounds how long after its call started a fault-free writer
// is in the queue: calls that started later are behind it.
const rwJoinSlack = 50 * time.Millisecond

func (w *world) writerArrives(cl *simClient, call *int) *rwArrival {
	w.mu.Lock()
	defer w.mu.Unlock()
	a := &rwArrival{client: cl, start: time.Now(), call: call}
	it := w.current[ddbmodel.KeyString(rwName, w.sortKey)]
	q, _ := it["fairQueue"].(*types.AttributeValueMemberM)
	a.checked = (q == nil || len(q.Value) == 0) && (it == nil || released(it)) && !cl.db.faulty()
	if a.checked {
		w.tracef("%s RWLock.Lock first in line (invariant 12 checked)", cl.name)
	}
	return a
}

// writerLeaves checks invariant 12 when a writer's call that was first in
// line gives up (its context ended or its wait ran out): by then every
// call that could be before it must still hold, or the writer must not
// have waited past the bound: the latest end of those calls' locks (a
// released lock's lease end; for a lost one, the writer drops its entry a
// lease after it last changed or after the writer arrived, whichever is
// later), plus one lease of slack for the faults on their requests (a
// delayed beat restarts an observer's count), plus the writer's refresh
// period (at most half its lease) and round trips.
func (w *world) writerLeaves(a *rwArrival, granted bool) {
	if !a.checked || granted {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if a.client.db.stalledUntil().After(a.start) || a.client.closed || w.closing[a.client.name] {
		return // the writer's own client stalled or closed during the wait
	}
	end := a.start
	slack := a.client.lease
	for call, started := range w.rwCalls {
		if call != a.call && started.Before(a.start.Add(rwJoinSlack)) {
			return // a call that may be before the writer has not returned (a grant whose answer is late)
		}
	}
	for _, rec := range w.rwLog {
		if !rec.callStart.Before(a.start.Add(rwJoinSlack)) {
			continue // behind the writer
		}
		if rec.l.Err() == nil && !rec.l.IsExpired() {
			return // still held: the writer's wait was not over
		}
		exp := rec.l.Expiration()
		if !errors.Is(rec.l.Err(), dynamolock.ErrLockAlreadyReleased) {
			// Lost (or abandoned): its entry stays until an observer has
			// seen it unchanged for its lease, and the writer sees it from
			// its arrival at the earliest.
			exp = maxTime(exp, a.start).Add(rec.l.LeaseDuration())
		}
		end = maxTime(end, exp)
		slack = max(slack, rec.l.LeaseDuration())
	}
	bound := end.Add(slack + a.client.lease/2 + 100*time.Millisecond)
	if now := time.Now(); now.After(bound) {
		w.violate(12, "a writer of %s that arrived first in line at %s was still waiting at %s (bound %s)",
			a.client.name, a.start.Sub(w.start), now.Sub(w.start), bound.Sub(w.start))
	}
}

// rwCallStarts records an RWLock call in flight until done is called.
func (w *world) rwCallStarts() (call *int, done func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.rwCalls == nil {
		w.rwCalls = map[*int]time.Time{}
	}
	id := new(int)
	w.rwCalls[id] = time.Now()
	return id, func() {
		w.mu.Lock()
		delete(w.rwCalls, id)
		w.mu.Unlock()
	}
}

// logGrant records a granted call for invariant 12.
func (w *world) logGrant(l *dynamolock.Lock, writer bool, callStart time.Time) {
	w.mu.Lock()
	w.rwLog = append(w.rwLog, rwRec{l: l, writer: writer, callStart: callStart})
	w.mu.Unlock()
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// rwBeat is when the checker saw a queue entry's beat change, in the
// model's order of requests.
type rwBeat struct {
	beat string
	at   time.Time
}

// rwHook checks, for one change of the read/write lock's item, that no
// reader went ahead of a live writer waiting before it (invariant 12),
// then records the queue's beats. Called from hook, with w.mu held. A
// resume's change (resumed) replaces a reader's entry with a new one: no
// reader is added.
func (w *world) rwHook(ch ddbmodel.Change, resumed bool) {
	if w.pkOf(ch.Key) != rwName {
		return
	}
	now := time.Now()
	if w.rwBeats == nil {
		w.rwBeats = map[string]rwBeat{}
	}
	before, _ := ch.Before["readers"].(*types.AttributeValueMemberM)
	after, _ := ch.After["readers"].(*types.AttributeValueMemberM)
	queue, _ := ch.Before["fairQueue"].(*types.AttributeValueMemberM)
	if after != nil && queue != nil && !resumed {
		for id := range after.Value {
			if before != nil {
				if _, had := before.Value[id]; had {
					continue
				}
			}
			var ticket uint64 // the reader's place in the queue; 0: behind everyone
			if e, ok := queue.Value[id].(*types.AttributeValueMemberM); ok {
				ticket = itemN(e.Value, "t")
			}
			for wid, ev := range queue.Value {
				e, ok := ev.(*types.AttributeValueMemberM)
				if !ok || itemS(e.Value, "k") != "w" {
					continue
				}
				t := itemN(e.Value, "t")
				if ticket != 0 && (t > ticket || t == ticket && wid > id) {
					continue // the writer is behind this reader
				}
				lease := time.Duration(itemN(e.Value, "l")) * time.Millisecond
				if b := w.rwBeats[wid]; b.beat == itemS(e.Value, "b") && now.Sub(b.at) < lease*9/10 {
					w.violate(12, "reader %.4s (ticket %d) got the lock ahead of writer %.4s (ticket %d), whose entry was renewed %s ago (lease %s)",
						id, ticket, wid, t, now.Sub(b.at), lease)
				}
			}
		}
	}
	if q, ok := ch.After["fairQueue"].(*types.AttributeValueMemberM); ok {
		for id, ev := range q.Value {
			if e, ok := ev.(*types.AttributeValueMemberM); ok {
				if b := itemS(e.Value, "b"); w.rwBeats[id].beat != b {
					w.rwBeats[id] = rwBeat{beat: b, at: now}
				}
			}
		}
	}
}

// largestData takes the write lock with the largest data the library
// accepts (the item then has the least room the library keeps for readers,
// waiters and counters): it asks with 400 KB, and 1 KB less each time the
// size is refused as bad input, which costs no DynamoDB call.
func (w *world) largestData(cl *simClient, ctx context.Context, rw *dynamolock.RWLock, opts []dynamolock.AcquireLockOption) (*dynamolock.Lock, error) {
	for size := 400 * 1024; ; size -= 1024 {
		l, err := rw.Lock(ctx, append(opts, dynamolock.WithData(make([]byte, size)), dynamolock.ReplaceData())...)
		var inv *dynamolock.InvalidArgumentError
		if !errors.As(err, &inv) {
			w.note("%s RWLock.Lock with %d bytes of data: %v", cl.name, size, err)
			return l, err
		}
	}
}
