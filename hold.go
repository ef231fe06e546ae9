package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// claim takes as granted the write of this call named id (its RVN, or an
// RWLock reader's beat) whose answer was lost, once w's item shows it: w's
// own item becomes a held, registered lock (a reader's: its entry), or,
// for a transaction, every key's item, read back.
func (a *acquisition) claim(ctx context.Context, w *watch, id string) ([]*Lock, error) {
	at := a.attempts[id]
	if a.mode == modeAll {
		return a.holdAll(ctx, id, at)
	}
	l, err := at.shape.hold(ctx, a, w, w.v.raw, id, at)
	if l == nil || err != nil {
		return nil, err
	}
	return []*Lock{l}, nil
}

// holdItem turns an item this call wrote into a held, registered lock.
// An item that landed but cannot be decoded is released again (undo):
// nobody could use it. Writes of this call on other keys (a semaphore's
// slots) that may have landed are released again; if the lock was lost
// meanwhile (that undo and the heartbeats stalled past its lease), it
// returns no lock and no error: the call takes a slot anew.
func (a *acquisition) holdItem(ctx context.Context, w *watch, item map[string]types.AttributeValue, at attempt) (*Lock, error) {
	rec, err := a.c.cfg.schema.decodeItem(item)
	if err != nil {
		return nil, notGranted(err, "key %q: the lock item this client wrote cannot be interpreted; it is released again", w.key)
	}
	return a.holdRecord(ctx, w, rec, at)
}

// holdRecord is holdItem for the item rec decoded.
func (a *acquisition) holdRecord(ctx context.Context, w *watch, rec *lockRecord, at attempt) (*Lock, error) {
	c := a.c
	l := a.newLock(w, rec, at)
	err := c.register(ctx, l) // then its RVNs settle (see here, rule 1)
	// In order: one seed, one run (internal/sim).
	for _, rvn := range slices.Sorted(maps.Keys(a.attempts)) {
		at := a.attempts[rvn]
		if len(at.on) != 1 || at.on[0] != w {
			continue
		}
		delete(a.attempts, rvn) // nothing to undo on w now: the lock is held, or register ended it
		c.here.settled(rvn)
		if at.unsure && rvn != rec.RVN {
			// An earlier write of this call whose answer was lost did not
			// make the lock; it may be on its way still, and land once
			// the key is free again (docs/SESSIONS.md, "Writes in doubt").
			c.takeBackInDoubt(at.sess, w.key, at.shape.undoInput(c, c.itemKeyOf(w.key, w.sortKey), []string{rvn}, 0))
		}
	}
	if len(a.attempts) > 0 {
		// Another slot's write whose answer was lost: release it again, so
		// that this call holds one slot.
		cctx, cancel := a.c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
		a.undo(cctx)
		cancel()
	}
	if err == nil {
		a.settleIfShort(ctx, l)
	}
	if err == nil && l.Err() != nil {
		// Lost already: while the undo above ran, or given up by the
		// heartbeat scheduler at once (more locks queued than workers, and
		// its first beat could not land in time). Never return a lock
		// already lost: it is recorded as lost if it only lapsed, so it
		// leaves the registry, its item is released, and the key (or the
		// slot) is read anew.
		_ = l.lose(ErrLeaseExpired, nil)
		a.releaseLost(ctx, []*Lock{l})
		w.forget()
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c.here.forget(w.regKey)
	l.log(slog.LevelInfo, "lock acquired", slogDuration("waited", a.c.since(a.start)))
	return l, nil
}

// holdAll reads back every key a committed transaction wrote (its RVN
// rvn) and registers the locks. The reads give each lock its fencing token
// and the item's data and attributes. If they fail, the call gives up and
// undo releases every key.
func (a *acquisition) holdAll(ctx context.Context, rvn string, at attempt) ([]*Lock, error) {
	c := a.c
	locks := make([]*Lock, len(a.watches))
	for i, w := range a.watches {
		rec, err := a.readBack(ctx, w, rvn)
		if err != nil {
			var lng *LockNotGrantedError
			if errors.As(err, &lng) {
				return nil, err
			}
			return nil, notGranted(err, "%s were taken but could not be read back; released", a.what)
		}
		locks[i] = a.newLock(w, rec, at)
		if sm := a.o.sessionMonitor; sm != nil {
			own := *sm // a monitor's state belongs to one lock
			locks[i].monitor = &own
		}
	}
	if !a.c.now().Before(at.sent.Add(at.lease)) {
		// The read-backs ended after the lease the transaction granted ran
		// out (a pause, slow reads): another acquisition may have taken a
		// key over since its read. Take the items anew rather than return
		// locks already lost; undo covers the call if it gives up.
		for _, w := range a.watches {
			w.forget()
		}
		return nil, nil
	}
	// An earlier transaction of this call whose answer was lost did not
	// make the locks; it may be on its way still, and land once the keys
	// are free again: under a session, nothing else would free its items
	// (docs/SESSIONS.md, "Writes in doubt"; docs/SIMULATION.md, F17).
	for _, old := range slices.Sorted(maps.Keys(a.attempts)) {
		if at := a.attempts[old]; at.unsure && old != rvn {
			for _, w := range at.on {
				c.takeBackInDoubt(at.sess, w.key, at.shape.undoInput(c, c.itemKeyOf(w.key, w.sortKey), []string{old}, 0))
			}
		}
	}
	clear(a.attempts) // from here on the locks release themselves
	// The RVN settles after the registers (see here, rule 1).
	defer c.here.settled(rvn)
	// Until this call returns the locks or releases them, none of them is
	// a reentrant acquisition's to return: one given to it and released
	// here would leave it believing it holds the key (the simulation's
	// invariant 2, seed 3901 on 08d90f6).
	regKeys := make([]string, len(a.watches))
	for i, w := range a.watches {
		regKeys[i] = w.regKey
	}
	defer c.here.publish(regKeys)()
	for i, l := range locks {
		if err := c.register(ctx, l); err != nil {
			// register released l itself; release the others, registered
			// or not, so the caller holds nothing.
			rctx := context.WithoutCancel(ctx)
			for j, o := range locks {
				if j != i {
					_, _ = c.releaseLock(rctx, o, &releaseLockOptions{bestEffort: true})
				}
			}
			return nil, err
		}
		c.here.forget(l.regKey())
	}
	a.settleIfShort(ctx, locks...)
	if slices.ContainsFunc(locks, func(l *Lock) bool { return l.Err() != nil }) {
		// The heartbeat scheduler gave one up at once (more locks queued
		// than workers, and its first beat could not land in time). Never
		// return a lock already lost: release every key and take them
		// anew; the call's wait bounds the tries.
		a.releaseLost(ctx, locks)
		for _, w := range a.watches {
			w.forget()
		}
		return nil, nil
	}
	c.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "locks acquired", slog.String("keys", a.what), slogDuration("waited", a.c.since(a.start)))
	return locks, nil
}

// settleIfShort waits, when one of locks has less than two heartbeat round
// trips of its lease left, until the heartbeat scheduler has taken them in:
// a busy scheduler gives such a lock up at once (see scheduler.dispatch),
// and the caller must see that before it returns the lock. A lock with
// more lease left needs no wait: the scheduler cannot give it up yet.
func (a *acquisition) settleIfShort(ctx context.Context, locks ...*Lock) {
	c := a.c
	rtt := c.sched.meter.RoundTrip()
	if c.cfg.heartbeatPeriod <= 0 || rtt <= 0 {
		return
	}
	now := c.now()
	if slices.ContainsFunc(locks, func(l *Lock) bool { return l.Expiration().Sub(now) < 2*rtt }) {
		c.sched.settle(ctx)
	}
}

// readBack reads the item of w's key right after this call wrote rvn into
// it, retrying transient failures within the wait.
func (a *acquisition) readBack(ctx context.Context, w *watch, rvn string) (*lockRecord, error) {
	for {
		item, err := a.read(ctx, w)
		if err == nil {
			rec, err := a.c.cfg.schema.decodeItem(item)
			if err != nil {
				return nil, err
			}
			if rec.Owner != a.c.cfg.ownerName || rec.RVN != rvn {
				return nil, fmt.Errorf("key %q changed hands right after the transaction", w.key)
			}
			return rec, nil
		}
		if err := a.failed(ctx, w, err); err != nil {
			return nil, err
		}
		if !a.c.now().Before(a.deadlineFor(w)) {
			return nil, w.v.failed
		}
		if err := a.c.pause(ctx, a.o.refreshPeriod, nil, a.what); err != nil {
			return nil, err
		}
	}
}

func (a *acquisition) newLock(w *watch, rec *lockRecord, at attempt) *Lock {
	l := newHeldLock(a.c, w.key, w.sortKey, rec, at.sent)
	l.leaseEnd = at.sent.Add(at.lease)
	l.deleteOnRelease = a.o.deleteLockOnRelease
	l.monitor = a.o.sessionMonitor
	// Set before the lock is published: regKey and heldBy read them
	// without mu.
	at.shape.mark(l)
	if at.sess != nil {
		// Held by the session: register adds it to the session. Its lease
		// is the session's (Lock.lapsed): its own never ends.
		l.shaped = true
		l.rareLocked().source = at.sess
		l.leaseEnd = at.sent.Add(rec.Lease)
	}
	return l
}

// releaseLost releases the keys of locks this call registered but will not
// return, in one bounded wait even when ctx has ended: a live lock as a
// release does, a lost one's item only if it still carries that lock's RVN
// (nobody holds it).
func (a *acquisition) releaseLost(ctx context.Context, locks []*Lock) {
	c := a.c
	rctx, cancel := c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	for _, l := range locks {
		if l.Err() == nil {
			_, _ = c.releaseLock(rctx, l, &releaseLockOptions{bestEffort: true})
		} else {
			in := c.freeInput(l)
			_, err := c.updateItem(rctx, in)
			var ccf *types.ConditionalCheckFailedException
			if err != nil && !errors.As(err, &ccf) {
				c.freeLater(l.heldBy(), l.partitionKey, in)
			}
		}
		// A copy of the write that made l (an SDK retry's) may land after
		// this: under a session nothing else would free it (see
		// writeLandsWithin).
		c.takeBackInDoubt(l.heldBy(), l.partitionKey, l.shapeOf().undoInput(c, l.itemKey(), []string{l.RecordVersionNumber()}, 0))
	}
}

// takeBackInput releases l's item, or removes an RWLock reader's entry, if
// it still carries rvn (a reader's beat), written by this acquisition: a
// write of this client that nobody holds any more (l has ended here).
func (c *Client) takeBackInput(l *Lock, rvn string) *dynamodb.UpdateItemInput {
	// Only this acquisition's item (its fencing token): see undoInput.
	return l.shapeOf().undoInput(c, l.itemKey(), []string{rvn}, l.FencingToken())
}

// freeInput releases l's item, or removes an RWLock reader's entry, if it
// still carries l's RVN or one of its renewals in doubt (a heartbeat whose
// answer was lost may have landed: its RVN is then the item's), as l's own
// heartbeats and release are conditioned (conditionLocked): a write of
// this client that nobody holds any more (docs/SIMULATION.md, F18).
func (c *Client) freeInput(l *Lock) *dynamodb.UpdateItemInput {
	l.mu.Lock()
	rvns := []string{l.rvn}
	maybe := l.renewal.maybe
	for _, m := range maybe[max(0, len(maybe)-(maxINOperands-1)):] {
		if m.rvn != l.rvn {
			rvns = append(rvns, m.rvn)
		}
	}
	l.mu.Unlock()
	return l.shapeOf().undoInput(c, l.itemKey(), rvns, l.FencingToken())
}
