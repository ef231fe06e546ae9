package dynamolock

// Kinds of holders, item shapes and lease sources: the values the engine
// calls (docs/ENGINE.md, "What a kind brings"). The engine (acquire.go,
// acquire_write.go, watch.go, hold.go, heartbeat.go, release.go) reads no
// kind's state: it asks these values. Two shapes of request are the
// engine's own and named by what they are, not by a kind: a write beside a
// queue on another item (besideAnswer) and the multi-key transaction
// (transact, whose every key is a holder's slot). A kind of holder is one
// file (kind_exclusive.go, semaphore.go, rwlock.go); a new one provides the
// methods below, and the compiler lists what it lacks.

import (
	"context"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// holderKind is what an acquisition's kind of holder brings to the
// engine's one wait loop (acquisition.run): how it reads an item, its
// decision, its acquiring write, its place in a waiter queue, and whether
// a lock's end in this process hands the key to one of its waiters.
type holderKind interface {
	// first is w's first step, before anything is known of its item.
	first(a *acquisition, w *watch, now time.Time) decision
	// decide sets w.next from what is known of w's item now. It returns a
	// lock when the kind finds the key already held here for this call (a
	// reentrant acquisition).
	decide(ctx context.Context, a *acquisition, w *watch) (*Lock, error)
	// learn reads the kind's parts of w's item, just decoded into w.v.
	learn(a *acquisition, w *watch, item map[string]types.AttributeValue, now time.Time)
	// grant builds the acquiring write of w's decision d, writing rvn and
	// held from sent, under sess (nil: its own lease).
	grant(a *acquisition, w *watch, d decision, rvn string, sent time.Time, sess *Session) grantWrite
	// wrote is called after an acquiring write that returned no lock.
	wrote(a *acquisition)
	// queue is the watch whose item holds the fair queue w's decisions
	// follow, nil when w follows none (fairly).
	queue(w *watch) *watch
	// place is this call's entry in the waiter queue on w's item, for a
	// join (acquisition.join).
	place(a *acquisition, w *watch) queueJoin
	// leaveQueues removes the entries this call wrote into waiter queues.
	leaveQueues(ctx context.Context, a *acquisition)
	// handsOverHere reports whether the end of a lock on w's key in this
	// process may hand the key to this acquisition at once: it then writes
	// without reading first (here.wake).
	handsOverHere(a *acquisition, w *watch) bool
	// name is how an error names w's key: the key, or the whole call.
	name(a *acquisition, w *watch) string
}

// grantWrite is a kind's acquiring write of one key.
type grantWrite struct {
	in *dynamodb.UpdateItemInput
	// wrote is what a write of the holder's slot writes, to build the new
	// item from the old one (ReturnValues ALL_OLD); nil: the answer is the
	// new item (ALL_NEW).
	wrote *acquiredItem
	// beside is the queue's part of the write when the queue is on another
	// item (queueOn): both go in one transaction, and the slot is read back.
	beside  *types.TransactWriteItem
	queueOn *watch
	// absentIfRefused: a refusal that returns no item shows the key has no
	// item (the condition needs one), unless an earlier attempt may have
	// landed.
	absentIfRefused bool
	shape           itemShape
}

// queueJoin is a kind's part of a join of a waiter queue.
type queueJoin struct {
	on    *watch       // the watch whose item holds the queue
	place *waiterPlace // this waiter's place
	entry map[string]types.AttributeValue
	// also adds to the join's update (beside the entry); mine: the entry
	// was in the queue as the item was last seen.
	also func(b *lockitem.Expr, mine bool) string
	// landed is told whether the join landed.
	landed func(bool)
}

// waiterPlace is one waiter's entry in a queue (a fair lock's, a fair
// semaphore's, a read/write lock's): its id, its ticket (drawn once at its
// first join and kept: a join whose answer was lost may have landed, and a
// waiter that came later must not go first) and when it last wrote its
// beat (a fresh one at every join).
type waiterPlace struct {
	id     string
	ticket uint64        // 0: not drawn
	beatAt time.Time     // when the last join was sent
	lease  time.Duration // how long an unchanged entry of ours stays live
}

// itemShape is where a held lock lives in its item: as the item's holder,
// or as one entry of its readers. It brings the lock's renewal, release,
// undo and guard, "released before?", and its registry key.
type itemShape interface {
	// regKey is the lock's key in its client's registry.
	regKey(key string, sortKey *string) string
	// carries reports whether item shows the acquiring write (or renewal)
	// that wrote rvn.
	carries(item map[string]types.AttributeValue, rvn string) bool
	// hold turns item, which shows this call's write rvn, into a held lock.
	hold(ctx context.Context, a *acquisition, w *watch, item map[string]types.AttributeValue, rvn string, at attempt) (*Lock, error)
	// undoInput takes back writes of this client (rvns) that nobody holds;
	// token, when not 0, names the acquisition they renewed.
	undoInput(c *Client, key map[string]types.AttributeValue, rvns []string, token uint64) *dynamodb.UpdateItemInput
	// mark records the shape on a new lock, before it is published.
	mark(l *Lock)
	// renewal is the write of a heartbeat w of l. Called with l.mu held.
	renewal(c *Client, l *Lock, w *renewal) *dynamodb.UpdateItemInput
	// beatCondition is the condition that the lock's slot carries one of the
	// RVNs listed in in (its renewals).
	beatCondition(b *lockitem.Expr, l *Lock, in string) string
	// guard is the condition that l is still held (TransactionCondition).
	guard(b *lockitem.Expr, l *Lock) string
	// release sends l's release, conditioned on cond.
	release(ctx context.Context, c *Client, l *Lock, b *lockitem.Expr, cond string, deleteLock bool, data []byte) error
	// releasedBefore reports whether item, read after a release whose
	// answer was lost, shows the lock no longer held.
	releasedBefore(l *Lock, item map[string]types.AttributeValue) bool
	// own decodes item and reports whether its holder's slot is l's.
	own(l *Lock, item map[string]types.AttributeValue) (*lockRecord, bool)
	// ownsData reports whether the lock's data and attributes are its own
	// to change (a reader's are the writer's).
	ownsData() bool
	// takenHow says what item shows of the end of l, or "".
	takenHow(l *Lock, item map[string]types.AttributeValue) string
	// refreshable reports whether TransactionWithRefresh can renew a lock
	// of this shape inside a transaction.
	refreshable() bool
}
