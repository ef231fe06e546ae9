package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Attributes of a read/write lock's item, beside the writer's (the usual
// lock attributes) and the queue (fairQueue).
const (
	// attrReaders maps a reader's id to {b: beat, l: lease in ms}.
	attrReaders = "readers"
	// attrReadersVersion goes up by one with every change of readers, so
	// that a writer's write can require the readers map it saw.
	attrReadersVersion = "readersVersion"
	// attrWritersArrived goes up by one each time a writer joins the
	// queue, so that a reader's write fails when a writer arrived since
	// the reader looked.
	attrWritersArrived = "writersArrived"
)

// MaxReaders is the most readers one [RWLock] lets in at once. A reader
// beyond it is refused with a *[LockNotGrantedError] wrapping a
// *[TooManyReadersError].
//
// Every reader is an entry of about 70 bytes in the lock's one item, and
// every write to an item costs one write unit per started KB of the item:
// at 100 readers the item is about 7 KB, so each reader's heartbeat costs
// about 7 write units. DynamoDB's 400 KB item limit would allow a few
// thousand entries; the cost of every write, which grows with the item,
// is what bounds the readers here.
const MaxReaders = 100

// TooManyReadersError is the cause of a [LockNotGrantedError] when an
// [RWLock.RLock] found [MaxReaders] live readers holding the lock.
type TooManyReadersError struct {
	Name string // the RWLock's name
	Max  int    // the bound
}

func (e *TooManyReadersError) Error() string {
	return fmt.Sprintf("rwlock %q already has %d readers, the most one item holds", e.Name, e.Max)
}

// RWLock is a read/write lock: any number of readers at once (up to
// [MaxReaders]), or one writer, never both, across every client of the
// table. Writers are never starved: once a writer waits, readers that come
// later wait behind it, and readers that waited behind a writer go next,
// together. Readers and writers in every process get the lock in the order
// they started waiting, as [WithFairness] does for a plain lock. It is safe
// for concurrent use; [RWLock.RLock] and [RWLock.Lock] return ordinary
// held [*Lock] values (heartbeats, [Lock.Done], release with
// [Client.ReleaseLockWithContext] or [Lock.Close]). A lock is not
// reentrant: a holder that asks again waits for itself, as with
// sync.RWMutex.
//
// # The item
//
// One item, on the key name, holds everything:
//   - the writer, as a plain lock's holder (ownerName, recordVersionNumber,
//     leaseDuration, fencingToken; isReleased while no writer holds it), so
//     a writer's lock renews, releases and fences like any other;
//   - readers: a map from each reader's id to its beat and lease. Each
//     reader renews only its own entry (one UpdateItem per heartbeat,
//     conditioned on its own beat); readersVersion counts the map's
//     changes;
//   - fairQueue: the waiters, readers and writers, each with its ticket,
//     beat, lease and kind; writersArrived counts writers' arrivals.
//
// A reader's granting write requires: no writer (or one seen unchanged
// for its lease, which it takes over), fewer than [MaxReaders] readers, and
// writersArrived as the reader saw it, so that a writer that arrived after
// the reader looked makes the write fail. A writer's granting write
// requires: no writer (or a dead one), and the readers map empty or exactly
// as the writer saw it (readersVersion), with every reader in it seen
// unchanged for its lease: those dead readers are dropped by the same
// write. A waiter or reader that stops renewing is dropped once its entry
// stayed unchanged for its lease, as each observer sees it on its own
// clock, as a dead holder is.
//
// # Costs in DynamoDB calls
//
//   - One reader, or one writer, of a free lock: 1 UpdateItem; each
//     heartbeat 1 UpdateItem; release 1 UpdateItem.
//   - Waiting: 1 UpdateItem to join the queue, then a consistent GetItem
//     every refresh period and an UpdateItem every third of the lease to
//     renew the entry, then the granting UpdateItem.
//   - A hand-over from readers to a waiting writer: each reader's release
//     (1 each); the writer sees the empty map at its next poll (within a
//     refresh period) and writes once.
//
// A write costs ⌈item size / 1 KB⌉ write units: the item grows by about
// 70 bytes per reader and per waiter.
//
// # Limits
//
// The key belongs to the RWLock: acquiring it with [Client.AcquireLock]
// ignores the readers (plain acquisitions and foreign clients are not part
// of the protocol). Do not delete the item ([WithDeleteLockOnRelease] is
// refused; [WithDeleteLock] on a writer's release drops the queue and
// restarts the fencing tokens from the clock, as a deleted plain lock
// does). A reader's fencing token is the item's token when it got the lock
// (the last writer's, the same for every reader between two writers); a
// writer's is one more than every token issued before it. Readers do not
// use [WithClockSkewBound]'s stored expiry; a reader's grant removes the
// item's TTL attribute (with [WithTTLAttribute]), so that DynamoDB never
// deletes an item readers hold.
type RWLock struct {
	c    *Client
	name string
}

// NewRWLock returns the read/write lock name (the key of its item). It
// returns an *[InvalidArgumentError] when name is not a valid key. It
// makes no DynamoDB call.
func (c *Client) NewRWLock(name string) (*RWLock, error) {
	if err := validateKey(name); err != nil {
		return nil, err
	}
	return &RWLock{c: c, name: name}, nil
}

// RLock takes the lock as a reader, sharing it with other readers. The
// wait ends when ctx does (the error matches ctx.Err() and
// *[LockNotGrantedError]) or, with [WithAdditionalTimeToWaitForLock](d),
// after d plus the lease, with a *LockNotGrantedError wrapping a
// *[TimeoutError]. With [FailIfLocked] it returns at once when a writer
// holds or waits. It is refused (*LockNotGrantedError wrapping
// *[TooManyReadersError]) when [MaxReaders] live readers hold it.
//
// opts apply as to [Client.AcquireLockWithContext]; [WithReentrant],
// [WithDeleteLockOnRelease], [WithAcquireOnlyIfLockAlreadyExists], and for
// a reader [WithData], [ReplaceData] and [WithAdditionalAttributes] (the
// item's data is the writer's) are refused with an *[InvalidArgumentError]
// before any call. [WithFairness] is implied.
//
// The returned lock's RecordVersionNumber is its entry's beat; heartbeats
// of a reader cannot carry data ([ReplaceHeartbeatData], [DeleteData]).
// [Lock.TransactionCondition] of a reader checks that its entry is still
// in the item; [Lock.TransactionWithRefresh] is not available to readers
// (it returns an item DynamoDB rejects).
func (rw *RWLock) RLock(ctx context.Context, opts ...AcquireLockOption) (*Lock, error) {
	return rw.acquire(ctx, false, opts)
}

// Lock takes the lock as its only writer, as [RWLock.RLock] takes it as a
// reader: it waits for the readers holding it to leave, and readers that
// come later wait behind it. Its fencing token is higher than every token
// issued before it on this lock. [WithData], [ReplaceData] and
// [WithAdditionalAttributes] apply to it as to a plain lock.
func (rw *RWLock) Lock(ctx context.Context, opts ...AcquireLockOption) (*Lock, error) {
	return rw.acquire(ctx, true, opts)
}

func (rw *RWLock) acquire(ctx context.Context, writer bool, opts []AcquireLockOption) (*Lock, error) {
	c := rw.c
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	// The engine's options: checked and resolved once; without an
	// explicit WithAdditionalTimeToWaitForLock the wait lasts as long as
	// ctx allows.
	o, err := c.acquireOptions(opts, true)
	if err != nil {
		return nil, err
	}
	if err := rw.validate(writer, o); err != nil {
		return nil, err
	}
	what := "rwlock " + strconv.Quote(rw.name)
	// The writer's slot is a plain lock: the engine's acquisition claims,
	// holds and undoes its writes (its one watch is the item's key).
	pa := c.newAcquisition(modeOne, o, []string{rw.name}, what)
	start := pa.start
	a := &rwAcquisition{rw: rw, writer: writer, o: o, start: start, id: randomID(), seen: newRWSeen(),
		attempts: pa.attempts, engine: pa}
	a.lease = min(max(o.lease, time.Millisecond), maxWaiterLease)
	admitBy := pa.waitEnd(o.lease)
	if o.additionalTimeToWait != forever {
		a.deadline = admitBy
	}
	admitted, err := c.admit(ctx, 1, o.lease, admitBy, what)
	if err != nil {
		return nil, err
	}
	l, err := a.run(ctx)
	admitted.end(err == nil)
	if err != nil {
		cctx, cancel := rw.c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
		a.undo(cctx)
		a.leave(cctx)
		cancel()
	}
	c.metrics.acquired(ctx, err, rw.c.since(start))
	return l, err
}

func (rw *RWLock) validate(writer bool, o *acquireLockOptions) error {
	switch {
	case o.reentrant:
		return invalid("WithReentrant", true, "cannot be used with an RWLock: its locks are not reentrant")
	case o.deleteLockOnRelease:
		return invalid("WithDeleteLockOnRelease", true, "cannot be used with an RWLock: deleting its item drops its queue")
	case o.onlyIfLockAlreadyExist:
		return invalid("WithAcquireOnlyIfLockAlreadyExists", true, "cannot be used with an RWLock")
	case !writer && (o.data != nil || o.replaceData):
		return invalid("WithData", fmt.Sprintf("%d bytes", len(o.data)), "cannot be used by a reader: the item's data is the writer's")
	case !writer && len(o.additionalAttributes) > 0:
		return invalid("WithAdditionalAttributes", len(o.additionalAttributes), "cannot be used by a reader: the item's attributes are the writer's")
	}
	return rw.c.checkKey(rw.name, o)
}

// rwAcquisition is the state of one RLock or Lock call.
type rwAcquisition struct {
	rw       *RWLock
	writer   bool
	o        *acquireLockOptions
	start    time.Time
	deadline time.Time // zero: ctx bounds the wait
	id       string    // the reader's entry and the waiter's queue entry
	lease    time.Duration
	ticket   uint64    // 0: not in the queue
	beatAt   time.Time // when the queue entry was last written
	// counted: a join of this writer that counted it in writersArrived
	// landed (one that failed its condition did not count it; one whose
	// answer was lost may have, and counting twice is harmless).
	counted bool
	joined  bool // a join landed: ticket is this waiter's place
	seen    *rwSeen
	// attempts holds every granting write, by the beat (reader) or RVN
	// (writer) it wrote, to recognise one whose answer was lost (the
	// engine's map: a writer's attempts are its to claim and undo).
	attempts map[string]attempt
	engine   *acquisition
}

func (a *rwAcquisition) run(ctx context.Context) (*Lock, error) {
	v := &rwView{}
	for {
		d := rwDecide(rwInput{view: v, seen: a.seen, now: a.rw.c.now(), start: a.start, name: a.rw.name, writer: a.writer,
			owner: a.rw.c.cfg.ownerName, id: a.id, ticket: a.ticket, renewAt: a.beatAt.Add(a.lease / 3), attempts: a.attempts,
			deadline: a.deadline, failFast: a.o.failIfLocked, refresh: a.o.refreshPeriod - randomUpTo(a.o.refreshJitter),
			maxReader: MaxReaders})
		var err error
		switch d.step {
		case rwWrite:
			var l *Lock
			if l, err = a.grant(ctx, d, v); l != nil {
				return l, nil
			}
		case rwJoin:
			err = a.join(ctx, v)
		case rwRead:
			if err = a.rw.c.pause(ctx, a.rw.c.until(d.at), nil, "rwlock "+strconv.Quote(a.rw.name)); err == nil {
				item, rerr := a.rw.c.getItem(ctx, a.rw.c.itemKeyOf(a.rw.name, a.o.sortKey))
				err = a.learn(ctx, v, item, rerr)
			}
		case rwClaim:
			return a.claim(ctx, v, d.claim)
		case rwFail:
			return nil, d.err
		}
		if err != nil {
			return nil, err
		}
	}
}

// learn records what an answer showed: item, or err when the call failed.
func (a *rwAcquisition) learn(ctx context.Context, v *rwView, item map[string]types.AttributeValue, err error) error {
	if err != nil {
		*v = rwView{}
		return a.failed(ctx, v, err)
	}
	*v = a.rw.c.decodeRWView(item)
	a.seen.observe(v, a.rw.c.now())
	if a.ticket != 0 && !v.absent && v.bad == nil {
		// An entry of ours that is gone (dropped as dead by someone who
		// did not see it renewed) is written again with the same ticket.
		found := false
		for _, w := range v.queue {
			found = found || w.id == a.id
		}
		if !found {
			a.beatAt = time.Time{}
		}
	}
	return nil
}

// failed keeps a transient failure in v for the decision; anything else,
// or ctx's end, ends the call.
func (a *rwAcquisition) failed(ctx context.Context, v *rwView, err error) error {
	if ctx.Err() != nil {
		return notGranted(errors.Join(ctx.Err(), err), "rwlock %q: context done", a.rw.name)
	}
	if a.o.failIfLocked || !isTransient(err) || unreachable(err, a.rw.c.since(a.start)) {
		var lng *LockNotGrantedError
		if errors.As(err, &lng) {
			return err
		}
		return notGranted(err, "rwlock %q", a.rw.name)
	}
	a.rw.c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "rwlock acquire failed, retrying", slogKey(a.rw.name), slogErr(err))
	v.failed = err
	return nil
}

// answer learns what a failed granting or joining write showed: the item
// a failed condition returned, or the error.
func (a *rwAcquisition) answer(ctx context.Context, v *rwView, err error) error {
	var ccf *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &ccf) && len(ccf.Item) > 0:
		return a.learn(ctx, v, ccf.Item, nil)
	case errors.As(err, &ccf):
		*v = rwView{} // no item came back (an emulator): read it
		return nil
	}
	*v = rwView{}
	return a.failed(ctx, v, err)
}

// grant sends the granting write of d: a reader's entry, or the writer's
// slot. It returns the lock, or updates v with what the answer showed.
func (a *rwAcquisition) grant(ctx context.Context, d rwDecision, v *rwView) (*Lock, error) {
	c := a.rw.c
	sent := a.rw.c.now()
	var in *dynamodb.UpdateItemInput
	var wrote *acquiredItem
	var beat string
	if a.writer {
		beat = newRVN()
		in, wrote = a.writerGrant(d, v, beat, sent)
	} else {
		beat = newRVN()
		in = a.readerGrant(d, v, beat, sent)
	}
	at := attempt{sent: sent, lease: a.o.lease, unsure: true}
	if a.writer {
		at.on = a.engine.watches
	}
	a.attempts[beat] = at
	out, err := c.updateItem(ctx, in)
	if err == nil {
		item := out.Attributes
		if a.writer {
			item = wrote.after(in.Key, out.Attributes)
		}
		if !a.rw.c.now().Before(sent.Add(at.lease)) {
			// The answer came after the lease it granted ran out (a pause).
			return nil, a.learn(ctx, v, item, nil)
		}
		if !a.writer {
			*v = c.decodeRWView(item)
		}
		return a.holdItem(ctx, item, v, beat, at)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && !mayHaveLanded(err) && !a.carries(ccf.Item, beat) || !errors.As(err, &ccf) && surelyNotApplied(err) {
		at.unsure = false
		a.attempts[beat] = at
	}
	if blind := !v.known; blind && errors.As(err, &ccf) && len(ccf.Item) == 0 && !at.unsure {
		// The blind write found no item (DynamoDB returns the item a
		// condition failed on): create it.
		*v = rwView{known: true, absent: true}
		return nil, nil
	}
	return nil, a.answer(ctx, v, err)
}

// carries reports whether item shows the granting write that wrote beat.
func (a *rwAcquisition) carries(item map[string]types.AttributeValue, beat string) bool {
	if a.writer {
		return carriesRVN(item, beat)
	}
	m, _ := item[attrReaders].(*types.AttributeValueMemberM)
	if m == nil {
		return false
	}
	return decodeReader(a.id, m.Value[a.id]).beat == beat
}

// claim turns the item this call's own earlier write landed in into a
// held lock.
func (a *rwAcquisition) claim(ctx context.Context, v *rwView, beat string) (*Lock, error) {
	return a.holdItem(ctx, v.raw, v, beat, a.attempts[beat])
}

func (a *rwAcquisition) holdItem(ctx context.Context, item map[string]types.AttributeValue, v *rwView, beat string, at attempt) (*Lock, error) {
	c := a.rw.c
	if a.writer {
		return a.engine.holdItem(ctx, a.engine.watches[0], item, at)
	}
	rec := &lockRecord{owner: c.cfg.ownerName, lease: at.lease, rvn: beat, fencingToken: v.token}
	l := newHeldLock(c, a.rw.name, a.o.sortKey, rec, at.sent)
	l.leaseEnd = at.sent.Add(at.lease)
	l.reader = true
	l.rare = &lockRare{readerID: a.id}
	l.monitor = a.o.sessionMonitor
	err := c.register(ctx, l)
	clear(a.attempts) // nothing to undo: the lock is held, or register ended it
	if err != nil {
		return nil, err
	}
	l.log(slog.LevelInfo, "read lock acquired", slogDuration("waited", a.rw.c.since(a.start)))
	return l, nil
}
