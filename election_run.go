package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// The leader loop of an Election (Run), its liveness probe (Healthy) and
// IsLeader: a loop over the Election's own public steps (Campaign, the
// term's lock, Resign, Observe), as etcd's concurrency package is a loop
// over its client's API. It has no acquisition of its own: each term is one
// Campaign, that is one acquisition of the engine.

// LeaderCallbacks are what [Election.Run] calls. Any of them may be nil.
type LeaderCallbacks struct {
	// OnStartedLeading is called, in a goroutine of its own, each time the
	// Election wins: ctx is the term's context, which ends the moment the
	// term ends (see [Election.Run]); term is the term's held lock: fence
	// the leader's writes with its [Lock.FencingToken] or
	// [Lock.TransactionCondition]. It should return soon after ctx ends:
	// Run does not resign, nor campaign again, until it has returned.
	OnStartedLeading func(ctx context.Context, term *Lock)
	// OnStoppedLeading is called after each term, once OnStartedLeading
	// has returned, with why the term ended: nil when Run's ctx ended and
	// the term was resigned; otherwise an error that says what ended it
	// (matching [ErrLockLost] when the lease or session was lost or the
	// term was ended before its lease could run out, [ErrLockAlreadyReleased]
	// when the term's lock was released by [Election.Resign] or by a
	// release of the lock, or the error of the resignation that failed).
	// It is never called for an Election that never led.
	OnStoppedLeading func(err error)
	// OnNewLeader is called whenever the leader this Election sees
	// changes (another owner, or a new term: another fencing token),
	// itself included, with the leader as [Election.Observe] reads it; not
	// for a change of value alone ([Election.Proclaim]). It is called from
	// one goroutine, one call at a time, in the order seen; a leader that
	// comes and goes between two of Observe's polls may not be seen.
	OnNewLeader func(Leader)
}

// runState is what Run shares with IsLeader and Healthy.
type runState struct {
	mu      sync.Mutex
	running bool     // a Run is in progress
	term    *runTerm // the term of the Run in progress whose work may still run; nil between terms
}

// runTerm is one term of Run: from the win to the return of its work.
type runTerm struct {
	lock   *Lock
	ctx    context.Context // the term's context, given to OnStartedLeading
	margin time.Duration   // the term ends this long before its lease would run out unrenewed

	// cancel ends ctx with its cause; over is closed once the term is
	// over and its lock has ended (endErr: the release's error, if any).
	cancel context.CancelCauseFunc
	over   chan struct{}
	endErr error

	mu sync.Mutex
	// why is what ended the term, when the lock's end, the lease watch or
	// Resign ended it (nil: Run's ctx did, or it has not ended).
	why error
	// lastRenewal is when the term's lease was last renewed, fixed once
	// the term ended; zero while it lasts (read from the lock then).
	lastRenewal time.Time
	workDone    bool // OnStartedLeading has returned
}

// Run is the leader loop a service runs: it campaigns with value until ctx
// ends, and each time it wins, calls cb.OnStartedLeading(termCtx, term) in
// a goroutine of its own, where term is the term's [*Lock] and termCtx ends
// the moment the term ends:
//   - the lease or the session holding it is lost, or the lock is
//     released (a [Election.Resign], a release of the lock, [Client.Close]);
//   - ctx ends;
//   - the lease has gone unrenewed (DynamoDB unreachable or refusing)
//     until (lease − heartbeat period)/2 of it is left: the term ends
//     then, before the lease can run out, so that the leader's work has
//     that long to stop before another candidate may lead (client-go's
//     RenewDeadline, derived from the client's lease and heartbeat period).
//
// After every term, once OnStartedLeading has returned, Run makes sure the
// term's lock has ended (released with one UpdateItem if it is still held,
// so that the next candidate leads within about one poll of its own, well
// under 200 ms at the default refresh period), calls
// cb.OnStoppedLeading(why), and campaigns again unless ctx has ended.
// Terms of one Run never overlap, and each has a fencing token higher
// than the one before. After a term ended by a release of its lock (a
// Resign while Run runs), Run waits one [DefaultRefreshPeriod] before it
// campaigns again, so that another candidate takes over rather than this
// one again at once.
//
// cb.OnNewLeader, when not nil, is fed by [Election.Observe] (one
// consistent GetItem a second while this client does not lead). Run
// returns only after OnStoppedLeading and the last OnNewLeader have
// returned. It returns nil once ctx has ended (the term then resigned:
// OnStoppedLeading got nil, or the resignation's error); an error matching
// [ErrClientClosed] when the client closes; an *[InvalidArgumentError]
// before any DynamoDB call for a nil ctx, a name that is not a valid key,
// a client without background heartbeats ([DisableHeartbeat]: a term
// could not outlast its lease), or a second Run of this Election while one
// runs; or the error of a campaign that retrying cannot cure (see
// [Election.Campaign]). A DynamoDB outage does not end Run: Campaign keeps
// campaigning through it.
//
// Run does not resign while OnStartedLeading runs: a leader's work that
// ignores termCtx keeps its term's lock (renewed, if the term ended with
// ctx) until it returns. [Election.Healthy] reports such a leader. While
// Run runs, [Election.Campaign] proclaims (when leading) or campaigns
// beside it; [Election.Resign] ends the current term.
func (e *Election) Run(ctx context.Context, value []byte, cb LeaderCallbacks) error {
	if err := e.c.enter(ctx); err != nil {
		return err
	}
	if err := validateKey(e.name); err != nil {
		return err
	}
	if e.c.cfg.heartbeatPeriod <= 0 {
		return invalid("WithHeartbeatPeriod", e.c.cfg.heartbeatPeriod,
			"Election.Run needs the client's background heartbeats (the client was made with DisableHeartbeat or WithHeartbeatPeriod(0)): without them a term would end after half its lease")
	}
	e.run.mu.Lock()
	if e.run.running {
		e.run.mu.Unlock()
		return invalid("Election.Run", e.name, "is already running on this Election: one Run per Election at a time")
	}
	e.run.running = true
	e.run.mu.Unlock()
	defer func() {
		e.run.mu.Lock()
		e.run.running = false
		e.run.mu.Unlock()
	}()
	value = bytes.Clone(value) // the caller may reuse its slice while Run runs
	stop := e.feedNewLeader(ctx, cb.OnNewLeader)
	defer stop()
	yield := false
	for {
		if yield {
			// The term's lock was released while ctx lasts (Resign): let
			// another candidate take over before campaigning again.
			if err := e.c.sleep(ctx, DefaultRefreshPeriod, nil); err != nil {
				return runEnd(ctx, err)
			}
		}
		l, err := e.Campaign(ctx, value)
		if err != nil {
			return runEnd(ctx, err)
		}
		why, released := e.lead(ctx, l, cb.OnStartedLeading)
		if cb.OnStoppedLeading != nil {
			cb.OnStoppedLeading(why)
		}
		if e.c.isClosed() {
			return ErrClientClosed
		}
		if ctx.Err() != nil {
			return nil
		}
		yield = released
	}
}

// runEnd is what Run returns when a campaign or a wait ended with err: nil
// when ctx ended (Run's normal end), else err.
func runEnd(ctx context.Context, err error) error {
	if ctx.Err() != nil && !errors.Is(err, ErrClientClosed) {
		return nil
	}
	return err
}

// lead runs one term on l: the work in its own goroutine, until the term
// ends and the work has returned; then it makes sure l has ended. It
// returns why the term ended (nil: ctx ended and l was resigned), and
// whether it ended by a release of l while ctx lasts.
func (e *Election) lead(ctx context.Context, l *Lock, work func(context.Context, *Lock)) (why error, released bool) {
	termCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	t := &runTerm{lock: l, ctx: termCtx, margin: e.termMargin(l), cancel: cancel, over: make(chan struct{})}
	end := t.end
	// The lock's end (lost, released, Close) ends the term at once.
	stopLost := context.AfterFunc(l.endContext(), func() { end(e.termEnded(l, l.ended())) })
	defer stopLost()
	watched := make(chan struct{})
	if left := e.leaseLeft(t, end); left > 0 {
		go func() {
			defer close(watched)
			e.watchLease(t, left, end)
		}()
	} else {
		close(watched) // won with its lease already (nearly) out: a pause
	}
	e.run.mu.Lock()
	e.run.term = t
	e.run.mu.Unlock()
	workDone := make(chan struct{})
	if work != nil {
		// Called even when the term has already ended (ctx ended as it was
		// won): every OnStoppedLeading follows its OnStartedLeading.
		go func() {
			defer close(workDone)
			work(termCtx, l)
		}()
	} else {
		close(workDone)
	}
	<-termCtx.Done()
	t.freeze(e.c.now())
	<-workDone
	<-watched
	t.mu.Lock()
	t.workDone = true
	why = t.why
	t.mu.Unlock()
	t.endErr = e.endTerm(l)
	e.run.mu.Lock()
	if e.run.term == t {
		e.run.term = nil
	}
	e.run.mu.Unlock()
	close(t.over)
	if why == nil {
		why = t.endErr // ctx ended: the resignation's outcome
	}
	return why, why != nil && errors.Is(why, ErrLockAlreadyReleased) && ctx.Err() == nil
}

// end ends t with err as its cause, unless it has ended already.
func (t *runTerm) end(err error) {
	t.mu.Lock()
	if t.why == nil && t.ctx.Err() == nil {
		t.why = err
	}
	t.mu.Unlock()
	t.cancel(err)
}

// resignTerm is Resign of a term of Run: the term ends (its work is told
// by its context), and Run releases its lock once the work has returned,
// so that the next leader's term never overlaps it. It waits for that
// until ctx ends.
func (e *Election) resignTerm(ctx context.Context, t *runTerm) error {
	t.end(fmt.Errorf("dynamolock: election %q: the term with fencing token %d ended: resigned: %w", e.name, t.lock.FencingToken(), ErrLockAlreadyReleased))
	select {
	case <-t.over:
		return t.endErr
	case <-ctx.Done():
		return fmt.Errorf("dynamolock: resign %q: waiting for the leader's work (OnStartedLeading) to return: %w", e.name, context.Cause(ctx))
	}
}

// runTermOf is the term of Run whose lock is l, if any is in progress.
func (e *Election) runTermOf(l *Lock) *runTerm {
	e.run.mu.Lock()
	defer e.run.mu.Unlock()
	if t := e.run.term; t != nil && t.lock == l {
		return t
	}
	return nil
}

// termEnded is why a term ended when its lock did (err: the lock's end).
func (e *Election) termEnded(l *Lock, err error) error {
	if err == nil {
		err = l.Err() // lapsed before the scheduler recorded it
	}
	return fmt.Errorf("dynamolock: election %q: the term with fencing token %d ended: %w", e.name, l.FencingToken(), err)
}

// termMargin is how long before its lease would run out unrenewed a term
// ends: half of what the lease leaves after one heartbeat period, so that
// a renewal sent on time has the other half to land, and the leader's work
// has this margin to stop before another candidate can take the lease
// over. With a lease of at least two heartbeat periods it is at least a
// quarter of the lease (5 s at a lease of 20 s and a period of 5 s).
func (e *Election) termMargin(l *Lock) time.Duration {
	return max(l.LeaseDuration()-e.c.cfg.heartbeatPeriod, 0) / 2
}

// leaseLeft is how long t may last before its lease has only t.margin
// left, as the lock's Expiration says (renewals move it); when that time
// has come, it ends t through end and returns 0 or less.
func (e *Election) leaseLeft(t *runTerm, end func(error)) time.Duration {
	l := t.lock
	left := e.c.until(l.Expiration()) - t.margin
	if left <= 0 {
		end(fmt.Errorf("dynamolock: election %q: the term with fencing token %d ended %s before its lease would run out, unrenewed since %s: %w: %w",
			e.name, l.FencingToken(), t.margin, l.Expiration().Add(-l.LeaseDuration()).Format(time.RFC3339Nano), ErrLockLost, ErrLeaseExpired))
	}
	return left
}

// watchLease waits left, then looks again (leaseLeft), until t has ended.
func (e *Election) watchLease(t *runTerm, left time.Duration, end func(error)) {
	for left > 0 {
		timer := e.c.newTimer(left)
		select {
		case <-timer.C():
		case <-t.ctx.Done():
			timer.Stop()
			return
		}
		left = e.leaseLeft(t, end)
	}
}

// freeze records when t's lease was last renewed, as t ends: renewals of
// its lock after that (a lock kept while the work runs on) are not the
// term's.
func (t *runTerm) freeze(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.lastRenewal.IsZero() {
		t.lastRenewal = earliest(t.lock.Expiration().Add(-t.lock.LeaseDuration()), now)
	}
}

// endTerm makes sure l, whose term is over, has ended: released if it is
// still held (the next candidate may lead at once), or ended here if the
// release cannot be confirmed (it then expires after its lease). It
// returns the release's error, nil when it released l or l had ended.
func (e *Election) endTerm(l *Lock) error {
	if l.Err() != nil {
		e.forget(l)
		return nil
	}
	ctx, cancel := e.c.withTimeout(context.Background(), undoTimeout)
	defer cancel()
	err := e.resign(ctx, l)
	if l.Err() == nil {
		// Refused or not sent: never keep a lock whose term is over (the
		// next term would have the same fencing token). Ended here; its
		// release is tried once more.
		_, _ = e.c.releaseLock(ctx, l, &releaseLockOptions{bestEffort: true})
		e.forget(l)
	}
	if err != nil {
		return fmt.Errorf("dynamolock: election %q: resigning the term with fencing token %d: %w", e.name, l.FencingToken(), err)
	}
	return nil
}

// forget drops l as this Election's leadership, if it still is.
func (e *Election) forget(l *Lock) {
	e.mu.Lock()
	mine := e.lock == l
	if mine {
		e.lock, e.unsure = nil, false
	}
	e.mu.Unlock()
	if mine {
		e.changed()
	}
}

// feedNewLeader calls onNew (when not nil) with every leader Observe
// delivers that differs from the last in owner or fencing token, from one
// goroutine; the function returned stops it and waits for it.
func (e *Election) feedNewLeader(ctx context.Context, onNew func(Leader)) (stop func()) {
	if onNew == nil {
		return func() {}
	}
	octx, cancel := context.WithCancel(ctx)
	leaders := e.Observe(octx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		var last Leader
		have := false
		for ld := range leaders {
			if have && ld.Owner == last.Owner && ld.FencingToken == last.FencingToken {
				continue
			}
			last, have = ld, true
			onNew(ld)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// IsLeader reports whether a term of [Election.Run] is live: won, not
// ended (see Run), and with more of its lease left than the margin at
// which Run ends it. Outside Run, it reports whether the lock of this
// Election's last [Election.Campaign] is held. It makes no DynamoDB call.
func (e *Election) IsLeader() bool {
	e.run.mu.Lock()
	running, t := e.run.running, e.run.term
	e.run.mu.Unlock()
	if !running {
		l := e.current()
		return l != nil && l.Err() == nil
	}
	if t == nil || t.ctx.Err() != nil {
		return false
	}
	l := t.lock
	return l.Err() == nil && e.c.until(l.Expiration()) > t.margin
}

// Healthy is a liveness probe for a process that runs [Election.Run], as
// client-go's HealthzAdaptor: it returns nil while this Election does not
// lead, or leads with its term renewed in time, and an error once a term
// has gone unrenewed for its lease plus tolerance while its
// OnStartedLeading still runs: a leader whose work outlived its term (its
// termCtx ended, the lease lost) and that should be restarted. A term
// counts as unrenewed from its last renewal before it ended. tolerance
// must not be negative (an *[InvalidArgumentError]). It makes no DynamoDB
// call. See [Election.HealthHandler] for an http.Handler.
func (e *Election) Healthy(tolerance time.Duration) error {
	if tolerance < 0 {
		return invalid("tolerance", tolerance, "must not be negative")
	}
	e.run.mu.Lock()
	t := e.run.term
	e.run.mu.Unlock()
	if t == nil {
		return nil
	}
	l := t.lock
	t.mu.Lock()
	last, workDone := t.lastRenewal, t.workDone
	t.mu.Unlock()
	if workDone {
		return nil
	}
	lease := l.LeaseDuration()
	if last.IsZero() {
		last = l.Expiration().Add(-lease)
	}
	if since := e.c.since(last); since > lease+tolerance {
		return fmt.Errorf("dynamolock: election %q: the leader's work still runs %s after its term's last renewal (lease %s, tolerance %s; fencing token %d)",
			e.name, since.Round(time.Millisecond), lease, tolerance, l.FencingToken())
	}
	return nil
}

// HealthHandler returns an http.Handler for a liveness probe: it answers
// 200 "ok" while [Election.Healthy](tolerance) returns nil, and 500 with
// its error otherwise. A negative tolerance answers 500 to every request.
func (e *Election) HealthHandler(tolerance time.Duration) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := e.Healthy(tolerance); err != nil {
			rw.WriteHeader(http.StatusInternalServerError)
			_, _ = fmt.Fprintln(rw, err)
			return
		}
		_, _ = fmt.Fprintln(rw, "ok")
	})
}
