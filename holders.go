package dynamolock

import (
	"context"
	"fmt"
	"sync"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// Who holds a semaphore's slots and a read/write lock's readers: what an
// operator asks of them, answered with the views Get gives of a plain lock.

// holdersReads bounds how many slots Holders reads at once.
const holdersReads = 8

// Holders returns the slots of the semaphore held now, in slot order: for
// each slot whose item is held (it exists and is not released), the lock
// this client holds on it, or else a read-only view of its item, as
// [Client.Get] returns them (owner, lease, fencing token, data). A slot
// released or never taken is not listed; a slot whose holder died is
// listed until another holder takes it over (one read cannot tell a dead
// holder from a live one: watch its [Lock.RecordVersionNumber] across
// calls). Slots are read under the client's default sort key value.
//
// Cost: one consistent GetItem per slot not held by this client (size at
// most), at most 8 at once; a slot held by a session costs one more
// GetItem, of its session's item. The first failed read ends the call
// with its error.
func (s *Semaphore) Holders(ctx context.Context) ([]*Lock, error) {
	if err := s.c.enter(ctx); err != nil {
		return nil, err
	}
	slots := make([]*Lock, s.size)
	errs := make([]error, s.size)
	turns := make(chan struct{}, holdersReads)
	var wg sync.WaitGroup
	for i := range s.size {
		wg.Go(func() {
			select {
			case turns <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-turns }()
			slots[i], errs[i] = s.c.GetWithContext(ctx, s.slot(i))
		})
	}
	wg.Wait()
	held := make([]*Lock, 0, s.size)
	for i, l := range slots {
		if errs[i] != nil {
			return nil, fmt.Errorf("dynamolock: holders of semaphore %q: slot %d: %w", s.name, i, errs[i])
		}
		if l.OwnerName() != "" && !l.IsReleased() {
			held = append(held, l)
		}
	}
	return held, nil
}

// Readers returns the readers that hold the read/write lock now, read with
// one consistent GetItem, in the order of their entries' ids: for each
// entry in the item, the reader's lock if this client holds it, or else a
// read-only view of the entry: its lease ([Lock.LeaseDuration]), its
// beat ([Lock.RecordVersionNumber], which each of its renewals changes),
// [Lock.Expiration] counted from this read, and the item's fencing token.
// A view's [Lock.OwnerName] is "": a reader's entry names no owner. A
// reader held by a session that has ended is not listed; one whose holder
// died is listed until a writer or another reader drops its entry (one
// read cannot tell a dead reader from a live one). A writer is not a
// reader: [Client.Get] of the lock's name shows it.
//
// Cost: one consistent GetItem, and one more per session the readers are
// held by.
func (rw *RWLock) Readers(ctx context.Context) ([]*Lock, error) {
	c := rw.c
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	sk := c.cfg.sortKey
	item, err := c.getItem(ctx, c.itemKeyOf(rw.name, sk))
	if err != nil {
		return nil, fmt.Errorf("dynamolock: readers of rwlock %q: %w", rw.name, err)
	}
	if len(item) == 0 {
		return nil, nil
	}
	p, err := decodeRWParts(item)
	if err != nil {
		return nil, fmt.Errorf("dynamolock: readers of rwlock %q: %w", rw.name, err)
	}
	now := c.now()
	readers := make([]*Lock, 0, len(p.readers))
	for _, r := range p.readers { // in id order (decodeRWParts)
		if l := c.here.held(readerRegKey(rw.name, sk, r.ID)); l != nil {
			readers = append(readers, l)
			continue
		}
		if r.Bad {
			return nil, fmt.Errorf("dynamolock: readers of rwlock %q: %w", rw.name,
				&ItemFormatError{Attribute: lockitem.Readers + "." + r.ID, Reason: "not a reader's entry (a beat and a positive lease in ms)"})
		}
		rec := &lockRecord{RVN: r.Beat, Lease: r.Lease, FencingToken: p.token, Session: r.Session}
		// A session read since this call read the item is fresh enough:
		// readers of one session cost one GetItem of it.
		if err := c.throughSession(ctx, rec, c.since(now)); err != nil {
			return nil, fmt.Errorf("dynamolock: readers of rwlock %q: reader %s: %w", rw.name, r.ID, err)
		}
		if rec.Released {
			continue // its session has ended: so has the reader
		}
		l := newReadOnlyLock(c, rw.name, sk, rec, now)
		readerShape{r.ID}.mark(l)
		readers = append(readers, l)
	}
	return readers, nil
}
