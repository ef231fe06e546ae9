package dynamolock

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
)

// MaxSemaphoreSize is the largest size of a [Semaphore]. A waiting
// [Semaphore.Acquire] watches every slot, so its cost grows with the size.
const MaxSemaphoreSize = 100

// Semaphore lets at most size holders, across every client of the table,
// hold it at once. Each slot is an ordinary lock, on the key name#i for i
// from 0 to size-1; a holder holds one slot. It is safe for concurrent use.
//
// Every client must use the same size for a name: one with a larger size
// uses more slots and so lets more holders in.
type Semaphore struct {
	c    *Client
	name string
	size int
}

// NewSemaphore returns the semaphore name of size slots. It returns an
// *[InvalidArgumentError] when size is not between 1 and
// [MaxSemaphoreSize], or when name is empty or too long for a slot key
// (name#<size-1>). It makes no DynamoDB call.
func (c *Client) NewSemaphore(name string, size int) (*Semaphore, error) {
	if size < 1 || size > MaxSemaphoreSize {
		return nil, invalid("semaphore size", size, "must be between 1 and %d", MaxSemaphoreSize)
	}
	if name == "" {
		return nil, invalid("semaphore name", name, "must not be empty")
	}
	s := &Semaphore{c: c, name: name, size: size}
	if err := validateKey(s.slot(size - 1)); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *Semaphore) slot(i int) string { return s.name + "#" + strconv.Itoa(i) }

// Acquire takes one slot and returns its lock: an ordinary held [*Lock]
// (heartbeats, [Lock.Done], fencing token of its slot). Release it with
// [Client.ReleaseLockWithContext] or [Lock.Close] to free the slot. opts
// apply to the slot's acquisition as in [Client.AcquireLockWithContext];
// [WithReentrant] is rejected, since it would hand one slot to two holders.
//
// Acquire first tries the slots one by one, each with [FailIfLocked],
// starting from a random one: it returns the first slot it gets. With
// FailIfLocked among opts it stops there, with a *[LockNotGrantedError]
// when every slot is held (a slot whose holder this client has seen
// unchanged for a full lease is taken over, as FailIfLocked does). Without
// it, it waits on every slot at once, each as AcquireLockWithContext waits
// on a held key: it takes the first slot released or whose holder died,
// and gives up when every slot's wait ran out (a *LockNotGrantedError
// wrapping a *[TimeoutError]), ctx ended (the error matches ctx.Err()), or
// one slot's acquisition failed for a reason waiting cannot cure (that
// error). If two slots are won at once, the extra one is released.
//
// Cost in DynamoDB calls: 1 UpdateItem when the first slot tried is free;
// one more failed conditional UpdateItem for every held slot tried before
// a free one, so size when every slot is held. A wait then adds, per slot,
// one UpdateItem and one consistent GetItem per refresh period, plus one
// UpdateItem to take the slot that frees up (and one to release any slot
// won twice).
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireLockOption) (*Lock, error) {
	o := newAcquireLockOptions(opts)
	if o.reentrant {
		return nil, invalid("WithReentrant", true, "cannot be used with a semaphore: two holders would share one slot")
	}
	first := int(entropy.Int64N(int64(s.size)))
	try := append(slices.Clone(opts), FailIfLocked())
	for k := range s.size {
		l, err := s.c.AcquireLockWithContext(ctx, s.slot((first+k)%s.size), try...)
		if err == nil {
			return l, nil
		}
		var held *LockHeldError
		if !errors.As(err, &held) {
			return nil, err
		}
	}
	if o.failIfLocked {
		return nil, notGranted(nil, "semaphore %q: all %d slots are held", s.name, s.size)
	}
	return s.wait(ctx, opts)
}

type slotResult struct {
	lock *Lock
	err  error
}

// wait acquires every slot at once and keeps the first one won. It returns
// only after every acquisition it started has returned.
func (s *Semaphore) wait(ctx context.Context, opts []AcquireLockOption) (*Lock, error) {
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan slotResult, s.size)
	for i := range s.size {
		go func() {
			l, err := s.c.AcquireLockWithContext(wctx, s.slot(i), opts...)
			results <- slotResult{l, err}
		}()
	}
	var won *Lock
	var failed error // the first error that is neither a timeout nor our own cancellation
	timeouts := 0
	for range s.size {
		r := <-results
		var te *TimeoutError
		switch {
		case r.err == nil && won == nil:
			won = r.lock
			cancel()
		case r.err == nil:
			// Won twice: free the slot for someone else. Best effort: if the
			// release fails, the slot frees up when its lease runs out.
			_, _ = s.c.ReleaseLockWithContext(context.WithoutCancel(ctx), r.lock, WithBestEffort())
		case errors.As(r.err, &te):
			timeouts++
		case ctx.Err() == nil && wctx.Err() != nil && errors.Is(r.err, context.Canceled):
			// Stopped by us after a win or a failure.
		case failed == nil:
			failed = r.err
			cancel()
		}
	}
	switch {
	case won != nil:
		return won, nil
	case failed != nil:
		return nil, failed
	default: // every slot's wait ran out
		return nil, notGranted(&TimeoutError{Age: time.Since(start)}, "semaphore %q: all %d slots stayed held (%d waits ran out)", s.name, s.size, timeouts)
	}
}
