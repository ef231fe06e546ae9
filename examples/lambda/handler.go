package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// Event is what the function is invoked with: the key whose work must
// never run twice at once (a customer, an account, a shard).
type Event struct {
	Key string `json:"key"`
}

// Result is what an invocation returns.
type Result struct {
	Key          string `json:"key"`
	FencingToken uint64 `json:"fencingToken"` // the lock's: pass it with every write the work makes
	Output       string `json:"output"`
}

// ErrBusy is returned when another invocation held the key until this
// one had to give up (its deadline less the release margin).
var ErrBusy = errors.New("lambda example: the key stayed held until this invocation's deadline")

// DefaultReleaseMargin is the time kept before the invocation's deadline
// to release the lock and return.
const DefaultReleaseMargin = 500 * time.Millisecond

// Handler runs one invocation's work under the lock of its event's key.
//
// On AWS Lambda an execution environment is frozen between invocations
// and may be thawed minutes later, or never. So:
//   - Locks is built once per environment with [dynamolock.DisableHeartbeat]:
//     nothing renews a lock in the background, so no renewal is left to
//     freeze (the client's one scheduler goroutine, with no lock held,
//     sends nothing);
//   - each lock's lease ends by the invocation's deadline less
//     ReleaseMargin (WithLockLease, and one heartbeat that shortens it if
//     the wait for the key took some of it; within a tenth of the margin):
//     an invocation that Lambda times out or freezes holds the key no
//     longer than it could run;
//   - the lock is released before Handle returns, on every path.
type Handler struct {
	Locks *dynamolock.Client
	// Work is the invocation's work. Its ctx ends half a ReleaseMargin
	// before the lock's lease does (the lease ends ReleaseMargin before
	// the deadline): it must return by then.
	Work func(ctx context.Context, ev Event, lock *dynamolock.Lock) (string, error)
	// ReleaseMargin is kept between the lease's end and the deadline, and
	// half of it between the work's end and the lease's: time to release
	// the lock and return. DefaultReleaseMargin when 0.
	ReleaseMargin time.Duration
	// Poll is how often a waiting invocation reads a held key (the
	// library's WithRefreshPeriod); its default when 0.
	Poll time.Duration
}

// Handle is the function lambda.Start runs (see main.go). ctx must carry
// the invocation's deadline, as Lambda's does.
func (h *Handler) Handle(ctx context.Context, ev Event) (res Result, err error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		return Result{}, errors.New("lambda example: the context has no deadline (Lambda's always has one)")
	}
	margin := h.ReleaseMargin
	if margin <= 0 {
		margin = DefaultReleaseMargin
	}
	end := deadline.Add(-margin) // the lock's lease ends here at the latest
	lease := time.Until(end)
	if lease <= 0 {
		return Result{}, fmt.Errorf("lambda example: %s left before the deadline, less than the release margin %s", time.Until(deadline), margin)
	}
	// Wait for the key no longer than the lease could still cover.
	actx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	opts := []dynamolock.AcquireLockOption{dynamolock.WithLockLease(lease), dynamolock.WithAdditionalTimeToWaitForLock(lease)}
	if h.Poll > 0 {
		opts = append(opts, dynamolock.WithRefreshPeriod(h.Poll))
	}
	lock, err := h.Locks.AcquireLockWithContext(actx, ev.Key, opts...)
	if err != nil {
		var te *dynamolock.TimeoutError
		if errors.As(err, &te) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			return Result{}, fmt.Errorf("%w: %v", ErrBusy, err)
		}
		return Result{}, err
	}
	// Released before returning, on every path, within the margin kept
	// for it (even when ctx has ended).
	defer func() {
		rctx, rcancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
		defer rcancel()
		if _, rerr := h.Locks.ReleaseLockWithContext(rctx, lock); rerr != nil && err == nil {
			err = fmt.Errorf("lambda example: releasing %q: %w", ev.Key, rerr)
		}
	}()
	// The lease counts from the acquiring write: after a wait it would end
	// past end. One heartbeat brings it back to end (a tenth of the margin
	// past it is let be: the time between reading the clock here and the
	// write's own reading).
	if left := time.Until(end); lock.Expiration().After(end.Add(margin/10)) && left > 0 {
		if err := h.Locks.SendHeartbeatWithContext(actx, lock, dynamolock.WithLeaseDurationToEnsure(left)); err != nil {
			return Result{}, err
		}
	}
	// The work's context ends half a margin before the lease does, so that
	// the release lands while the lease still runs: without heartbeats,
	// nothing else can end the lock while this invocation runs (a force
	// release by an operator is seen by the work's guarded writes, which
	// carry the fencing token).
	wctx, wcancel := context.WithDeadline(ctx, lock.Expiration().Add(-margin/2))
	defer wcancel()
	out, err := h.Work(wctx, ev, lock)
	if err != nil {
		return Result{}, err
	}
	return Result{Key: ev.Key, FencingToken: lock.FencingToken(), Output: out}, nil
}
