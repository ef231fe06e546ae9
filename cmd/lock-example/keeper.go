package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// keeper renews the held lock every heartbeat period. lock-example renews
// the lock itself (its client's own heartbeats are off) so that it knows,
// by its own clock, when the lease of its last successful renewal ends:
// the command must be dead before then.
type keeper struct {
	client *dynamolock.Client
	lock   *dynamolock.Lock
	t      timings

	mu sync.Mutex
	// renewedAt is when the write that last renewed the lease was first
	// sent: the lease counts from then (the library counts it the same way,
	// so that no observer's count can end before this one).
	renewedAt time.Time
	// pending is when the first renewal since renewedAt was sent, while
	// none has succeeded: a write whose answer was lost may have landed.
	pending time.Time
	lost    error // set once: the lock is no longer held

	changed chan struct{} // receives (without blocking) after a renewal or a loss
}

func newKeeper(client *dynamolock.Client, lock *dynamolock.Lock, t timings) *keeper {
	return &keeper{client: client, lock: lock, t: t, changed: make(chan struct{}, 1)}
}

// renew sends one renewal now. An error matching [dynamolock.ErrLockLost]
// or [dynamolock.ErrLockAlreadyReleased] means the lock is gone; any other
// is a failure to reach DynamoDB, to retry.
func (k *keeper) renew(ctx context.Context) error {
	k.mu.Lock()
	if k.lost != nil {
		err := k.lost
		k.mu.Unlock()
		return err
	}
	if k.pending.IsZero() {
		k.pending = time.Now()
	}
	sent := k.pending
	k.mu.Unlock()

	ctx, cancel := context.WithTimeout(ctx, k.t.heartbeat)
	err := k.client.SendHeartbeatWithContext(ctx, k.lock)
	cancel()

	k.mu.Lock()
	switch {
	case err == nil:
		k.renewedAt, k.pending = sent, time.Time{}
	case errors.Is(err, dynamolock.ErrLockLost), errors.Is(err, dynamolock.ErrLockAlreadyReleased),
		errors.Is(err, dynamolock.ErrOwnerMismatched), errors.Is(err, dynamolock.ErrClientClosed):
		k.lost = err
	}
	k.mu.Unlock()
	select {
	case k.changed <- struct{}{}:
	default:
	}
	return err
}

// state returns when the lease was last renewed and, once the lock is
// gone, why.
func (k *keeper) state() (renewedAt time.Time, lost error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.renewedAt, k.lost
}

// stopAt is when the command must begin to stop if no renewal succeeds
// until then; killBy is when it must be killed.
func (k *keeper) stopAt() (stopAt, killBy time.Time) {
	renewed, _ := k.state()
	return renewed.Add(k.t.stopAfter()), renewed.Add(k.t.lease - k.t.margin)
}

// isLost reports whether err from renew means the lock is gone.
func (k *keeper) isLost(err error) bool {
	_, lost := k.state()
	return err != nil && lost != nil
}

// first makes the first renewal of a lock just acquired, so that the lease
// is known to count from a time this process measured; it retries until
// the command would have to be stopped anyway.
func (k *keeper) first(ctx context.Context) error {
	start := time.Now()
	for {
		err := k.renew(ctx)
		if err == nil || k.isLost(err) || time.Since(start) >= k.t.stopAfter() {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(k.t.heartbeat / 4):
		}
	}
}

// run renews the lock one heartbeat period after each renewal (a quarter of
// that after a failure) until ctx ends or the lock is lost.
func (k *keeper) run(ctx context.Context) {
	wait := k.t.heartbeat
	for {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		err := k.renew(ctx)
		switch {
		case k.isLost(err):
			return
		case err != nil:
			wait = k.t.heartbeat / 4
		default:
			renewed, _ := k.state()
			wait = time.Until(renewed.Add(k.t.heartbeat))
		}
	}
}
