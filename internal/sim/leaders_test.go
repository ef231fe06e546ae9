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

// Issue 61's operations beside the others, under the same faults, crashes
// (Close and a new client), pauses and clocks, each drawn from a stream of
// its own (so that every other draw of a seed stays what it was), and left
// out with -sim.avoid=leader or -sim.avoid=resume:
//
//   - leader: clients run Election.Run on the world's election (the same
//     name the Campaign actors use), with a context that ends, a Resign
//     now and then, leaders' work that writes guarded by its term and is
//     sometimes slow to stop; every term's lock is tracked like any other
//     (invariants 1, 2, 13 cover it);
//   - resume: a resumer takes a tracked lock's (or reader's) ResumeToken
//     to another client and resumes it while the old holder goes on (its
//     heartbeats, guarded writes and release race the resume), and resumes
//     tokens of locks that ended (refused).
//
// Invariants:
//
//	24. terms never overlap: when a term of Run starts, no other Run's
//	    term is live (its context not ended and its Election's IsLeader
//	    true); within one Run, each OnStartedLeading follows the previous
//	    term's OnStoppedLeading, and every term has had its
//	    OnStoppedLeading when Run returns; OnStoppedLeading(nil) only once
//	    Run's context has ended; IsLeader only while the term's lock is
//	    believed held.
//	25. terms' fencing tokens only grow: each term of the world's
//	    election starts with a token higher than every term before it.
//	26. a refused resume lands no write: a ResumeLock that fails leaves
//	    none of its writes on the item (as invariant 6 for acquisitions),
//	    and a refusal is a *LockNotGrantedError.
//
// A lock a resume took from under its holder is superseded (see
// adversaries_test.go) until the holder learns of it at its next write.

// resumeCallKey tags the context of a ResumeLock, for the hook.
type resumeCallKey struct{}

// runTerm is one term of a Run, as the checker sees it.
type runTerm struct {
	cl      *simClient
	e       *dynamolock.Election
	l       *dynamolock.Lock
	ctx     context.Context // the term's context
	stopped bool
	// working: its OnStartedLeading has not returned (w.mu guards it)
	working bool
}

// leaderState is what the checker keeps of Runs (w.mu guards it).
type leaderState struct {
	terms    []*runTerm // terms whose Run has not returned
	maxToken uint64     // the highest token a term started with
	resumed  map[string]bool
	// ended: locks the resumer may take tokens of once they have ended
	ended []endedLock
}

// endedLock is a lock whose token the resumer kept.
type endedLock struct {
	l      *dynamolock.Lock
	reader bool
}

// leaderActors starts the Run actors (leader) and the resumer (resume).
func (w *world) leaderActors(wg *sync.WaitGroup, deadline time.Time) {
	r := rand.New(rand.NewPCG(w.seed, 0x1ead))
	if !avoid("leader") {
		for i := range w.slots {
			if r.IntN(2) == 0 {
				continue
			}
			ar := rand.New(rand.NewPCG(w.seed, uint64(0x1ead00+i)))
			wg.Go(func() {
				nest(2*i+5, func() {
					for time.Now().Before(deadline) {
						w.leaderLoop(w.client(i), ar)
						w.sleep(time.Millisecond + time.Duration(ar.IntN(20))*time.Millisecond)
					}
				})
			})
		}
	}
	if !avoid("resume") && r.IntN(2) == 0 {
		wg.Go(func() { w.resumer(rand.New(rand.NewPCG(w.seed, 0x2e5))) })
	}
}

// leaderLoop runs Election.Run for a while: its context ends within a few
// leases, a Resign may come meanwhile.
func (w *world) leaderLoop(cl *simClient, r *rand.Rand) {
	e := cl.c.NewElection(electionName)
	d := time.Duration(r.Int64N(int64(6 * cl.lease)))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	value := fmt.Sprintf("%s/run%d", cl.name, r.IntN(1000))
	w.note("%s Run %q, ctx %s", cl.name, value, d.Round(time.Millisecond))
	var mu sync.Mutex
	var current *runTerm
	var terms []*runTerm
	// The work's choices come from a stream of the Run's own: the work
	// runs in the library's goroutine, beside this actor.
	wr := rand.New(rand.NewPCG(r.Uint64(), 3))
	cb := dynamolock.LeaderCallbacks{
		OnStartedLeading: func(tctx context.Context, l *dynamolock.Lock) {
			t := &runTerm{cl: cl, e: e, l: l, ctx: tctx}
			mu.Lock()
			prev := current
			current = t
			terms = append(terms, t)
			mu.Unlock()
			w.startTerm(t, prev)
			w.leaderWork(cl, wr, t)
			w.mu.Lock()
			t.working = false
			w.releasing[l]++ // Run releases it once this returns
			w.mu.Unlock()
		},
		OnStoppedLeading: func(err error) {
			mu.Lock()
			t := current
			mu.Unlock()
			w.stopTerm(t, ctx, err)
		},
		OnNewLeader: func(ld dynamolock.Leader) { w.checkLeader(cl, ld, "OnNewLeader") },
	}
	resigned := make(chan struct{})
	if r.IntN(3) == 0 {
		after := time.Duration(r.Int64N(int64(d + 1)))
		go func() {
			defer close(resigned)
			time.Sleep(after)
			w.step(fmt.Sprintf("resign %s", cl.name))
			err := e.Resign(context.Background())
			w.note("%s Resign during Run: %s", cl.name, errOrOK(err))
		}()
	} else {
		close(resigned)
	}
	done := w.asking(cl, 1)
	err := e.Run(ctx, []byte(value), cb)
	done(nil)
	<-resigned
	w.step(fmt.Sprintf("run returned %s", cl.name))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tracef("%s Run returned: %v", cl.name, err)
	if cl.hb == 0 && !errors.Is(err, dynamolock.ErrInvalidArgument) && !errors.Is(err, dynamolock.ErrClientClosed) {
		w.violate(24, "%s Run on a client without heartbeats returned %v, not a refusal", cl.name, err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, t := range terms {
		if !t.stopped {
			w.violate(24, "%s Run returned (%v) before OnStoppedLeading of its term with token %d", cl.name, err, t.l.FencingToken())
		}
		w.lead.terms = deleteTerm(w.lead.terms, t)
	}
	if err == nil && ctx.Err() == nil {
		w.violate(24, "%s Run returned nil before its context ended", cl.name)
	}
}

func deleteTerm(ts []*runTerm, t *runTerm) []*runTerm {
	for i, x := range ts {
		if x == t {
			return append(ts[:i], ts[i+1:]...)
		}
	}
	return ts
}

// startTerm checks invariants 24 and 25 as a term starts, and tracks its
// lock.
func (w *world) startTerm(t *runTerm, prev *runTerm) {
	w.track(t.cl, t.l, "Run")
	w.mu.Lock()
	defer w.mu.Unlock()
	tok := t.l.FencingToken()
	if prev != nil && !prev.stopped {
		w.violate(24, "%s OnStartedLeading (token %d) before OnStoppedLeading of its previous term (token %d)", t.cl.name, tok, prev.l.FencingToken())
	}
	if tok <= w.lead.maxToken {
		w.violate(25, "%s's term starts with fencing token %d, after a term with %d", t.cl.name, tok, w.lead.maxToken)
	}
	w.lead.maxToken = max(w.lead.maxToken, tok)
	t.working = true
	for _, o := range w.lead.terms {
		// A term's lock is released by Run only once its work returned:
		// a work still running beside the next term had its lock lost
		// (a pause, a cut), or its client closed, never released.
		if o.working && !o.cl.closed && errors.Is(o.l.Err(), dynamolock.ErrLockAlreadyReleased) {
			w.violate(24, "%s's term (token %d) starts while the work of %s's term (token %d) runs, its lock released",
				t.cl.name, tok, o.cl.name, o.l.FencingToken())
		}
	}
	if t.ctx.Err() == nil {
		for _, o := range w.lead.terms {
			if o.stopped || o.ctx.Err() != nil || o.cl.closed || !o.e.IsLeader() || w.releasing[o.l] > 0 {
				continue
			}
			if tr := w.tracked[o.l]; tr != nil && w.superseded(tr) {
				continue
			}
			w.violate(24, "%s's term (token %d) starts while %s's term (token %d) is live", t.cl.name, tok, o.cl.name, o.l.FencingToken())
		}
	}
	w.lead.terms = append(w.lead.terms, t)
	w.tracef("%s term starts: token %d", t.cl.name, tok)
}

// stopTerm checks OnStoppedLeading of t (invariant 24).
func (w *world) stopTerm(t *runTerm, runCtx context.Context, err error) {
	w.step(fmt.Sprintf("stopped %s", t.cl.name))
	w.mu.Lock()
	defer w.mu.Unlock()
	t.stopped = true
	if w.releasing[t.l]--; w.releasing[t.l] <= 0 {
		delete(w.releasing, t.l)
	}
	w.tracef("%s term with token %d stopped: %v", t.cl.name, t.l.FencingToken(), err)
	if err == nil && runCtx.Err() == nil {
		w.violate(24, "%s OnStoppedLeading(nil) of the term with token %d while Run's context lasts", t.cl.name, t.l.FencingToken())
	}
	if t.ctx.Err() == nil {
		w.violate(24, "%s OnStoppedLeading of the term with token %d before its context ended", t.cl.name, t.l.FencingToken())
	}
	w.checkLocked(t.cl.name + " OnStoppedLeading")
}

// leaderWork is a leader's work: guarded writes and proclamations until
// its term ends, then, one time in four, a little more before it stops (a
// leader slow to stop: Run must not release the term meanwhile).
func (w *world) leaderWork(cl *simClient, r *rand.Rand, t *runTerm) {
	for t.ctx.Err() == nil {
		timer := time.NewTimer(time.Duration(r.Int64N(int64(cl.lease / 2))))
		select {
		case <-t.ctx.Done():
			timer.Stop()
		case <-timer.C:
		}
		w.step(fmt.Sprintf("leader work %s %d", cl.name, t.l.FencingToken()))
		if t.ctx.Err() != nil {
			break
		}
		if r.IntN(3) == 0 {
			err := t.e.Proclaim(context.Background(), []byte(fmt.Sprintf("%s/p%d", cl.name, r.IntN(1000))))
			w.note("%s Proclaim during a term: %s", cl.name, errOrOK(err))
			continue
		}
		w.guardedWrite(cl, r, t.l)
	}
	if r.IntN(4) == 0 {
		w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
	}
	w.note("%s's work of the term with token %d returns", cl.name, t.l.FencingToken())
}

// checkLeaders is invariant 24's last part, from checkLocked (w.mu held):
// IsLeader only while the term's lock is believed held.
func (w *world) checkLeaders(where string) {
	for _, t := range w.lead.terms {
		if t.stopped || !t.e.IsLeader() {
			continue
		}
		if err := t.l.Err(); err != nil || t.l.IsExpired() {
			w.violate(24, "%s: %s's Election reports IsLeader, but its term's lock (token %d) is not held: %v", where, t.cl.name, t.l.FencingToken(), err)
		}
	}
}

// resumer resumes tracked locks' tokens in other clients, and tokens of
// locks that have ended.
func (w *world) resumer(r *rand.Rand) {
	deadline := w.start.Add(*flagDuration)
	for {
		time.Sleep(time.Duration(r.Int64N(int64(4 * time.Second))))
		if !time.Now().Before(deadline) {
			return
		}
		w.step("resumer")
		w.mu.Lock()
		var cands []*tracked
		for _, tr := range w.sortedTracked() {
			if !tr.client.closed {
				cands = append(cands, tr)
			}
		}
		var l *dynamolock.Lock
		var from *simClient
		reader := false
		if len(cands) > 0 && (len(w.lead.ended) == 0 || r.IntN(3) > 0) {
			tr := cands[r.IntN(len(cands))]
			l, from, reader = tr.l, tr.client, tr.reader
			w.lead.ended = append(w.lead.ended, endedLock{l, reader})
			if len(w.lead.ended) > 8 {
				w.lead.ended = w.lead.ended[1:]
			}
		} else if len(w.lead.ended) > 0 {
			e := w.lead.ended[r.IntN(len(w.lead.ended))]
			l, reader = e.l, e.reader
		}
		var others []int
		for i, cl := range w.slots {
			if !cl.closed && cl != from {
				others = append(others, i)
			}
		}
		w.mu.Unlock()
		if l == nil || len(others) == 0 {
			continue
		}
		cl := w.client(others[r.IntN(len(others))])
		w.resume(cl, r, l, reader)
	}
}

// resume resumes l's token in cl, holds what it got a while and releases
// it; a refusal is checked by invariant 26.
func (w *world) resume(cl *simClient, r *rand.Rand, l *dynamolock.Lock, reader bool) {
	token := l.ResumeToken()
	w.mu.Lock()
	w.calls++
	call := w.calls
	w.mu.Unlock()
	ctx := context.WithValue(context.WithValue(context.Background(), acquireCallKey{}, call), resumeCallKey{}, true)
	rp := time.Duration(1+r.Int64N(int64(cl.lease/2))) + 10*time.Millisecond
	w.note("%s ResumeLock %s (token %d of %s, refresh %s)", cl.name, l.PartitionKey(), l.FencingToken(), l.OwnerName(), rp.Round(time.Millisecond))
	done := w.asking(cl, 1)
	got, err := cl.c.ResumeLock(ctx, token, dynamolock.WithRefreshPeriod(rp))
	done(err)
	if err != nil {
		var lng *dynamolock.LockNotGrantedError
		if !errors.As(err, &lng) && !errors.Is(err, dynamolock.ErrClientClosed) && !errors.Is(err, dynamolock.ErrHeartbeatCapacity) {
			w.mu.Lock()
			w.violate(26, "%s ResumeLock failed with %v, not a LockNotGrantedError", cl.name, err)
			w.mu.Unlock()
		}
		w.acquireFailed(cl, l.PartitionKey(), call, err)
		return
	}
	w.mu.Lock()
	_, again := w.tracked[got]
	w.mu.Unlock()
	if again {
		// This client holds that very acquisition (or believes it does,
		// until its next write): ResumeLock returned it, with no call. Its
		// holder's actor goes on with it.
		w.note("%s ResumeLock %s: the lock this client holds (token %d), with no call", cl.name, got.PartitionKey(), got.FencingToken())
		return
	}
	if reader {
		w.trackReader(cl, got)
	} else {
		w.track(cl, got, "ResumeLock")
	}
	w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
	if !reader {
		w.hold(cl, r, got)
	}
	if r.IntN(5) == 0 {
		w.note("%s abandons the resumed lock on %s to its heartbeats and Close", cl.name, got.PartitionKey())
		return
	}
	if !reader {
		w.release(cl, r, got)
		return
	}
	w.mu.Lock()
	w.releasing[got]++
	w.mu.Unlock()
	ok, err := cl.c.ReleaseLock(got)
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.releasing[got]--; w.releasing[got] == 0 {
		delete(w.releasing, got)
	}
	w.tracef("%s release resumed reader %.8s returned %v, %v", cl.name, got.RecordVersionNumber(), ok, err)
	if ok && !closed(got.Done()) {
		w.violate(5, "%s's release of a resumed reader returned true but Done is open", cl.name)
	}
	w.checkLocked(cl.name + " resumed reader release returned")
}

// resumeHook records, for one change a ResumeLock made, the acquisition it
// took from under its holder (w.mu held): the item's holder, or the
// reader's entry it replaced.
func (w *world) resumeHook(ctx context.Context, caller string, ch ddbmodel.Change) {
	if ctx.Value(resumeCallKey{}) == nil || ch.Before == nil || ch.After == nil {
		return
	}
	b, a := ch.Before, ch.After
	before, _ := b["readers"].(*types.AttributeValueMemberM)
	after, _ := a["readers"].(*types.AttributeValueMemberM)
	if before != nil {
		for id := range before.Value {
			if after == nil || after.Value[id] == nil {
				if w.lead.resumed == nil {
					w.lead.resumed = map[string]bool{}
				}
				w.lead.resumed[id] = true // a reader's entry the resume replaced
			}
		}
	}
	if !released(b) && itemN(a, "fencingToken") != itemN(b, "fencingToken") {
		w.adopted[relKey{ch.Key, itemS(b, "ownerName"), itemN(b, "fencingToken")}] = caller
	}
}
