package dynamolock

import (
	"context"
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
// Acquire first tries the slots one by one, starting from a random one: it
// returns the first slot it gets. With [FailIfLocked] among opts it stops
// there, with a *[LockNotGrantedError] when every slot is held (a slot
// whose holder this client has seen unchanged for a full lease is taken
// over, as FailIfLocked does). Without it, it watches every slot in one
// wait, each as AcquireLockWithContext waits on a held key, and takes the
// first slot released or whose holder died. The wait lasts as long as ctx
// allows (for ever with context.Background()); when ctx ends the error
// matches ctx.Err() and *LockNotGrantedError. With
// [WithAdditionalTimeToWaitForLock] it also gives up after that time plus
// the longest lease among the first holders seen on the slots (a
// *LockNotGrantedError wrapping a *[TimeoutError]). An error that waiting
// cannot cure on one slot ends the call; a DynamoDB that cannot be reached
// is waited out once it has answered the client, as *[ConnectionError]
// says.
//
// With [WithFairness], waiters in every client get slots in the order they
// started waiting, across all slots (see WithFairness for the queue's
// rules). The queue is one, kept in the item of slot 0 (name#0), rather
// than one in every slot's item: a waiter then joins and renews one entry
// (one write each, as for a single key) instead of one per slot, and there
// is one order, where queues per slot could put a waiter first in one and
// third in another. A waiter takes a free slot only when no live waiter is
// before it in that queue: the write that takes slot 0 carries the queue's
// condition itself; the one that takes another slot is one
// TransactWriteItems of that slot's acquiring update and the queue's part
// on slot 0 (its own and dead entries removed, or, for a waiter not in the
// queue, the queue checked empty), so the order holds across slots and no
// second write follows a win. Slots are then tried from slot 0, and taking
// another slot costs that transaction (2 write units per item) and one
// consistent GetItem, since a transaction cannot return the new item. With
// more than one slot it needs TransactWriteItems from the DynamoDB client
// ([ErrUnsupportedOperation] otherwise). Measured in docs/BENCHMARKS.md.
//
// Cost in DynamoDB calls: 1 UpdateItem when the first slot tried is free;
// one more failed conditional UpdateItem for every held slot tried before
// a free one, so size when every slot is held. A wait then adds one
// consistent GetItem per slot per refresh period, plus one UpdateItem to
// take the slot that frees up.
func (s *Semaphore) Acquire(ctx context.Context, opts ...AcquireLockOption) (l *Lock, err error) {
	c := s.c
	ctx, t := c.startAcquire(ctx, kindSemaphore, s.name)
	defer func() { t.end(err, l) }()
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	o, err := c.acquireOptions(opts, true)
	if err != nil {
		return nil, err
	}
	if o.reentrant {
		return nil, invalid("WithReentrant", true, "cannot be used with a semaphore: two holders would share one slot")
	}
	if o.fair && s.size > 1 && !c.canTransact() {
		return nil, unsupported("Semaphore.Acquire with WithFairness", "TransactWriteItems")
	}
	first := int(entropy.Int64N(int64(s.size), "", ""))
	if o.fair {
		first = 0 // the fair queue lives on slot 0's item: try it first
	}
	keys := make([]string, s.size)
	for k := range s.size {
		keys[k] = s.slot((first + k) % s.size)
		if err := c.checkKey(keys[k], o); err != nil {
			return nil, err
		}
	}
	a := c.newAcquisition(modeAny, o, keys, "semaphore "+strconv.Quote(s.name))
	t.attach(a)
	k := slots{}
	if o.fair {
		k.fair = a.watches[0]
		k.fair.fair = newFairState(o)
	}
	a.kind = k
	locks, err := a.admitThenRun(ctx)
	c.metrics.Acquired(ctx, acquireOutcome(err), s.c.since(a.start))
	if err != nil {
		return nil, err
	}
	return locks[0], nil
}

// slots is the kind of a semaphore's holder: any one of its slots, each an
// exclusive lock of its own item. With WithFairness its waiters queue on
// the first slot's item (fair), whichever slot they take; leaving it is
// exclusive's (the first slot's watch carries the queue's state).
type slots struct {
	exclusive
	fair *watch // the first slot, which holds the queue; nil: not fair
}

func (k slots) grant(a *acquisition, w *watch, d decision, rvn string, sent time.Time, sess *Session) grantWrite {
	if k.fair == nil || w == k.fair || d.queue == nil {
		return k.exclusive.grant(a, w, d, rvn, sent, sess)
	}
	// The queue is on another item: its part goes beside the slot's write,
	// in one transaction.
	in, _ := a.c.acquireWrite(w.key, w.sortKey, a.o, rvn, d.takeover, nil, sent, sess)
	beside := d.queue.onItem(a.c, a.c.itemKeyOf(k.fair.key, k.fair.sortKey))
	return grantWrite{in: in, beside: &beside, queueOn: k.fair, shape: holderShape{}}
}

// wrote: the answer may have shown the queue, so every slot's write is
// decided again.
func (k slots) wrote(a *acquisition) {
	if k.fair == nil {
		return
	}
	for _, x := range a.watches {
		x.dirty = x.dirty || x.next.step == stepWrite
	}
}

func (k slots) queue(*watch) *watch { return k.fair }

func (k slots) place(a *acquisition, w *watch) queueJoin {
	return queueJoin{on: k.fair, place: &k.fair.fair.waiterPlace}
}

func (k slots) handsOverHere(*acquisition, *watch) bool { return k.fair == nil }

func (slots) name(_ *acquisition, w *watch) string { return quoteKey(w.key) }
