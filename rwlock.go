package dynamolock

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
	"github.com/arielsrv/dynamolock/v2/internal/pacing"
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
// held [*Lock] values (heartbeats, [Lock.Done]); release them with
// [RWLock.Unlock] and [RWLock.RUnlock] ([Lock.Release] and
// [Client.ReleaseLockWithContext] release them too). A lock is not
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
// clock, as a dead holder is. What a call saw is kept by its client, so
// a try-lock ([FailIfLocked]) polled again takes over the dead after one
// lease, as a plain lock's does. A reader's lease is any a lock may have
// ([WithLockLease], [Lock.Ensure]); a waiter's entry claims its lease up to
// an hour. At most 100 waiters hold a place in the queue; one that finds it
// full waits behind them, polling, and takes a place when one frees.
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

func (rw *RWLock) acquire(ctx context.Context, writer bool, opts []AcquireLockOption) (l *Lock, err error) {
	c := rw.c
	kind := kindRead
	if writer {
		kind = kindWrite
	}
	ctx, t := c.startAcquire(ctx, kind, rw.name)
	defer func() { t.end(err, l) }()
	if err := c.enter(ctx); err != nil {
		return nil, err
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
	// The engine's acquisition of the item's key, with this kind's state:
	// its loop, undo, deadline, admission and Close are every kind's.
	a := c.newAcquisition(modeOne, o, []string{rw.name}, "rwlock "+strconv.Quote(rw.name))
	a.kind = &rwHolder{writer: writer, waiterPlace: waiterPlace{id: randomID(), lease: min(max(o.lease, time.Millisecond), maxWaiterLease)}}
	a.watches[0].fair = nil // WithFairness: the read/write lock's queue is always fair (rwDecide)
	t.attach(a)
	locks, err := a.admitThenRun(ctx)
	c.metrics.Acquired(ctx, acquireOutcome(err), c.since(a.start))
	if err != nil {
		return nil, err
	}
	return locks[0], nil
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

// rwHolder is the kind of an RWLock's reader or writer (a modeOne
// acquisition of the lock's key): its decision (rwDecide), its writes
// (readerGrant, writerGrant, its queue entry) and its item shapes (a
// reader's entry, readerShape; the writer is the item's holder).
type rwHolder struct {
	writer bool
	// waiterPlace: id is the reader's entry and the waiter's queue entry.
	waiterPlace
	// counted: a join of this writer that counted it in writersArrived
	// landed (one that failed its condition did not count it; one whose
	// answer was lost may have, and counting twice is harmless).
	counted bool
}

func (k *rwHolder) first(a *acquisition, w *watch, now time.Time) decision {
	return k.decideAt(a, w, now)
}

func (k *rwHolder) decide(_ context.Context, a *acquisition, w *watch) (*Lock, error) {
	w.next = k.decideAt(a, w, a.c.now())
	return nil, nil
}

// decideAt is rwDecide for this holder on w's item.
func (k *rwHolder) decideAt(a *acquisition, w *watch, now time.Time) decision {
	deadline := time.Time{}
	if a.o.additionalTimeToWait != forever {
		deadline = a.waitEnd(a.o.lease)
	}
	return rwDecide(rwInput{view: &w.v, now: now, start: a.start, name: w.key, writer: k.writer,
		owner: a.c.cfg.ownerName, id: k.id, ticket: k.ticket, renewAt: k.beatAt.Add(k.lease / 3), attempts: a.attempts,
		deadline: deadline, failFast: a.o.failIfLocked, refresh: a.o.refreshPeriod - randomUpTo(a.o.refreshJitter),
		maxReader: MaxReaders, poll: func(rank, n int) time.Duration {
			// The hold is how long the key has been in the state this call
			// saw last (a writer, or readers: the writer's slot released),
			// without fair.go's free-key shortcut: readers hold a key whose
			// slot is released.
			cycle, known := w.pace.Cycle()
			return pacing.PollEvery(rank, n, now.Sub(w.pace.Since()), cycle, known, a.o.refreshPeriod-randomUpTo(a.o.refreshJitter))
		}})
}

func (*rwHolder) wrote(*acquisition) {}

// queue: the read/write lock's queue is its decision's (rwDecide), not
// fairly's.
func (*rwHolder) queue(*watch) *watch { return nil }

func (k *rwHolder) place(a *acquisition, w *watch) queueJoin {
	kind := "r"
	if k.writer {
		kind = "w"
	}
	return queueJoin{on: w, place: &k.waiterPlace, entry: map[string]types.AttributeValue{"k": lockitem.S(kind)},
		// Every join that adds a writer's entry (first, or again after
		// others dropped it as dead) counts it in writersArrived: a reader
		// that looked before it was there must look again.
		also: func(b *lockitem.Expr, mine bool) string {
			if k.writer && (!k.counted || !mine) {
				return " ADD " + b.Name("#wa", lockitem.WritersArrived) + " " + b.Value(":one", lockitem.N(1))
			}
			return ""
		},
		landed: func(landed bool) { k.counted = k.counted || landed && k.writer },
	}
}

func (k *rwHolder) leaveQueues(ctx context.Context, a *acquisition) {
	if k.ticket != 0 {
		a.leaveEntry(ctx, a.watches[0], k.id)
	}
}

func (*rwHolder) handsOverHere(*acquisition, *watch) bool { return false }

func (*rwHolder) name(a *acquisition, _ *watch) string { return a.what }

// learn decodes the read/write parts of item into v, with what this
// client has seen of their beats.
func (k *rwHolder) learn(a *acquisition, w *watch, item map[string]types.AttributeValue, now time.Time) {
	v := &w.v
	if _, released := item[lockitem.IsReleased]; released && v.bad != nil {
		v.rec, v.bad = nil, nil // a released writer's slot: only its mark counts
	}
	p, err := decodeRWParts(item)
	if err != nil {
		v.bad = err
		return
	}
	p.observe(&a.c.here, w.regKey, now)
	v.rw = p
	if k.ticket != 0 && !slices.ContainsFunc(p.queue, func(q rwWaiter) bool { return q.ID == k.id }) {
		// An entry of ours that is gone (dropped as dead by someone who
		// did not see it renewed) is written again with the same ticket.
		k.beatAt = time.Time{}
	}
}

// readerRecord is the record of the reader's lock that the granting write
// of attempt beat gave, on item, the answer or read that showed the
// reader's entry. The token is taken from item itself, not from the watch's
// view: learning item may forget the view (a session's read failed).
func (a *acquisition) readerRecord(item map[string]types.AttributeValue, beat string, at attempt) *lockRecord {
	token, _ := uintAttr(item, lockitem.FencingToken)
	return &lockRecord{Owner: a.c.cfg.ownerName, Lease: at.lease, RVN: beat, FencingToken: token}
}
