package dynamolock

import (
	"context"
	"encoding/hex"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
	"github.com/arielsrv/dynamolock/v2/internal/pacing"
)

// WithFairness makes the acquisition wait its turn: acquisitions of the key
// made with WithFairness, in any client or process, get the lock in the
// order they started waiting, and one that finds others waiting for a lock
// that is free goes behind them, so a client that releases and re-acquires
// at once no longer starves the others.
//
// The order is kept in the lock item itself, in the attribute fairQueue:
//   - A free lock with no waiters costs the usual one write.
//   - A waiter adds itself to the queue with one more write (its ticket
//     follows the highest in the queue), then polls as usual. It renews its
//     entry with one write every third of its lease while it waits; the
//     renewal answers as a poll would.
//   - Only the waiter first in line among the live ones takes the lock once
//     it is free (or its holder dead), removing its own entry, and any dead
//     ones before it, in the same write.
//   - A waiter whose context ends, or whose wait times out, removes its entry
//     with one write. One that crashes is skipped by the others once its
//     entry has stayed unchanged for its lease (as they see it on their own
//     clocks), so it delays the lock by at most that lease and never blocks
//     it.
//
// At most 100 waiters hold a place in the queue (each is about 70 bytes of
// the item, and every lock item keeps room for a full queue); one that
// finds it full waits behind them, polling, and takes a place when one
// frees.
//
// Mutual exclusion is the same as without the option: the queue only
// decides which waiter sends the acquiring write. Acquisitions without the
// option hold unordered places in the same queue (entries marked "u"),
// only so that the waiters of a key poll by rank (see [WithRefreshPeriod]):
// they wait for nobody and no fair waiter waits for them, so they may take
// the lock ahead of the fair waiters, as Amazon's Java client and
// dynamolock v2 (which ignore the queue) may; the Java client and dynamolock v2 (which
// replace the item on acquisition) clear it, after which the waiters add
// themselves again with their tickets, so their order is kept among them.
// A release with [WithDeleteLockOnRelease] deletes the queue with the item:
// the waiters then race for the free lock as without the option, so do not
// delete locks that are acquired fairly.
//
// The wait is bounded as usual (the holder's lease plus
// [WithAdditionalTimeToWaitForLock], counted from the first holder seen),
// so a waiter far back in a long queue needs a longer additional wait, or
// it gives up before its turn and leaves the queue (the calls that wait as
// long as their context allows have no such bound). WithFairness cannot be
// combined with [FailIfLocked] nor used with [Client.AcquireLocks]; with
// [Semaphore.Acquire] one queue orders the waiters for every slot (see
// there).
func WithFairness() AcquireLockOption {
	return func(o *acquireLockOptions) { o.fair = true }
}

// waiter is one entry of the fair queue (lockitem.Waiter).
type waiter = lockitem.Waiter

// queueOf reads the fair queue of an item (see lockitem.Queue): ok is false
// when it has one this client cannot use, and fairness is then given up
// for this item.
func queueOf(item map[string]types.AttributeValue) (ws []waiter, present, ok bool) {
	return lockitem.Queue(item)
}

// The queue's bounds and marks, as the item format has them.
const (
	entryUnordered = lockitem.EntryUnordered
	maxTicket      = lockitem.MaxTicket
	maxWaiterLease = lockitem.MaxWaiterLease
)

// maxRemovals bounds the dead entries one write removes, so that a queue
// full of them never makes the update expression too long.
const maxRemovals = 50

// fairState is an acquisition's place in the queue: a fair one's
// (ordered), or, for the poll schedule only, a plain one's.
type fairState struct {
	waiterPlace
	ordered bool // WithFairness: it waits its turn
	// seen holds, per other waiter, the beat this acquisition last saw in
	// its entry and when it first saw it.
	seen map[string]beatSeen
}

type beatSeen struct {
	beat string
	at   time.Time
}

func newFairState(o *acquireLockOptions) *fairState {
	// The lease written into the entry is what every reader accepts.
	lease := min(max(o.lease, time.Millisecond), maxWaiterLease)
	return &fairState{waiterPlace: waiterPlace{id: randomID(), lease: lease}, ordered: true, seen: make(map[string]beatSeen)}
}

// newPlainPlace is the place of an acquisition without WithFairness: an
// unordered entry, so that the waiters of a key poll by rank.
func newPlainPlace(o *acquireLockOptions) *fairState {
	f := newFairState(o)
	f.ordered = false
	return f
}

// randomID is a short random identifier (16 hex digits).
func randomID() string {
	var b [8]byte
	entropy.Read(b[:], "", "")
	return hex.EncodeToString(b[:])
}

// observe records the beats an answer showed.
func (f *fairState) observe(ws []waiter, now time.Time) {
	for id := range f.seen {
		if !slices.ContainsFunc(ws, func(w waiter) bool { return w.ID == id }) {
			delete(f.seen, id)
		}
	}
	for _, w := range ws {
		if s, ok := f.seen[w.ID]; !ok || s.beat != w.Beat {
			f.seen[w.ID] = beatSeen{beat: w.Beat, at: now}
		}
	}
}

// deadAt is when w counts as gone: its entry unchanged for its lease.
func (f *fairState) deadAt(w waiter) time.Time {
	if w.Bad {
		return time.Time{}
	}
	return f.seen[w.ID].at.Add(w.Lease)
}

// queueWrite is what a fair acquiring write adds to the usual one.
type queueWrite struct {
	empty  bool     // condition: the item has no queue, or an empty one
	remove []string // entries to remove (ours and dead ones before it); condition: the queue exists
}

// fairly turns the acquisition's decision into a fair one: a write goes
// ahead only for the first live waiter in the queue, and a waiter that
// must wait has its entry in the queue, renewed in time.
//
// A semaphore's queue lives on its first slot's item (see
// [Semaphore.Acquire]): v is then that item, whichever slot w is.
func (a *acquisition) fairly(w *watch, d decision, now time.Time, deadline time.Time) decision {
	f, v := a.fairOf(w), a.queueView(w)
	if f == nil || d.step == stepClaim || d.step == stepFail || d.rewrite {
		return d
	}
	if !v.known {
		if d.step == stepWrite && f.ordered {
			d.queue = &queueWrite{empty: true} // the first write: it must find nobody waiting
		}
		return d
	}
	ws, present, ok := queueOf(v.raw)
	if !ok {
		return d // an item this client cannot queue on: no fairness
	}
	mine := slices.IndexFunc(ws, func(w waiter) bool { return w.ID == f.id }) >= 0
	if d.reentrant {
		// Ours to take at once (WithReentrant): no turn to wait for, but
		// this call's entry goes with the write.
		if mine {
			d.queue = &queueWrite{remove: []string{f.id}}
		}
		return d
	}
	// The lock can be taken (or is held): by us only if nobody live is
	// before us. Our rank counts every live entry before ours, ordered or
	// not: it sets how often we poll.
	var dead []string
	nextDeath := now.Add(maxWaiterLease) // when the first live waiter before us could count as gone
	blocked := false
	rank, live := 1, 1 // live: the live entries, this waiter's among them
	for _, w := range ws {
		if w.ID == f.id {
			continue
		}
		at := f.deadAt(w)
		if !now.Before(at) {
			// Gone, wherever it stood: removed with our write.
			if len(dead) < maxRemovals {
				dead = append(dead, w.ID)
			}
			continue
		}
		live++
		if f.ticket == 0 || w.Before(f.ticket, f.id) {
			rank++
		}
		if !f.ordered || w.Unordered || f.ticket != 0 && !w.Before(f.ticket, f.id) {
			continue
		}
		blocked = true
		nextDeath = earliest(nextDeath, at)
	}
	if d.step == stepRead {
		if mine && !d.due.IsZero() {
			due := d.due
			if blocked {
				// A fair place before this one: its waiter reads often
				// and watches for a stale holder, which no fair waiter
				// behind it may take first. This one wakes for the end
				// of its wait, and when the first of those places could
				// be dead (its waiter may have died with the holder).
				// Any other waiter (a plain one, or a fair one behind
				// plain places only, which hold up no fair waiter) is
				// held up by no place: it watches for a stale holder
				// itself (one read when the holder's lease runs out since
				// it saw it; a live holder's renewals, which its reads
				// see, keep moving that), whatever dead places sit in
				// front of it.
				due = earliest(d.end, nextDeath)
			}
			d.at = earliest(now.Add(a.pollEvery(w, rank, live, now)), due)
		}
		return f.keepPlace(d, mine, len(ws), v, now)
	}
	if !blocked {
		switch {
		case !f.ordered && !mine:
			// A plain waiter with no entry writes as it would without one.
		case !f.ordered:
			d.queue = &queueWrite{remove: append(dead, f.id)}
		case !present || len(ws) == 0:
			d.queue = &queueWrite{empty: true}
		default:
			if mine {
				dead = append(dead, f.id)
			}
			d.queue = &queueWrite{remove: dead}
		}
		return d
	}
	// The lock is free, but others are first in line: a live one takes it
	// at its next poll, a dead one is skipped once its entry has stayed
	// unchanged for its lease. Neither is a reason to give up at the
	// deadline (a dead entry with a longer lease than this call's wait
	// would otherwise fail every fair acquisition of a free lock): the
	// wait on a free lock ends with ctx, or maxWaiterLease past the
	// deadline.
	if !now.Before(deadline.Add(maxWaiterLease)) {
		return decision{step: stepFail, err: notGranted(&TimeoutError{Age: now.Sub(a.start)},
			"key %q: waiters before this one in the fair queue kept their turn", w.key)}
	}
	poll := a.o.refreshPeriod - randomUpTo(a.o.refreshJitter)
	if mine {
		poll = a.pollEvery(w, rank, live, now)
	}
	wake := earliest(now.Add(poll), nextDeath)
	if now.Before(deadline) {
		wake = earliest(wake, deadline)
	}
	return f.keepPlace(decision{step: stepRead, at: wake}, mine, len(ws), v, now)
}

// pollEvery is the wait before w's next read for a waiter of rank in its
// queue of live entries (internal/pacing).
func (a *acquisition) pollEvery(w *watch, rank, live int, now time.Time) time.Duration {
	cycle, known := w.pace.Cycle()
	refresh := a.o.refreshPeriod - randomUpTo(a.o.refreshJitter)
	if w.pace.Free() && rank > 1 {
		// The key is free and a waiter before this one is to take it:
		// about to, or a head that is late or dead.
		return pacing.PollBehindFree(rank, live, now.Sub(w.pace.Since()), cycle, known, refresh)
	}
	hold := now.Sub(w.pace.Since())
	if w.pace.Chain() >= 2 {
		// The key goes from one caller of its holder's process to the
		// next (a same-process hand-over): to this waiter that is one
		// long hold, whose releases it cannot take. Read at the cap of a
		// long hold, not after each short one: polling every 5 ms, the
		// waiters of a second process made a hot key 40 % slower.
		hold = forever
	}
	return pacing.PollEvery(rank, live, hold, cycle, known, refresh)
}

// keepPlace makes a waiting decision keep this waiter's entry in the queue:
// add it when it is missing, renew it when a third of its lease has passed.
// A waiter that finds the queue full (queued entries) waits behind it.
func (f *fairState) keepPlace(d decision, mine bool, queued int, v *view, now time.Time) decision {
	if v.absent || !mine && queued >= lockitem.MaxWaiters {
		return d
	}
	renewAt := f.beatAt.Add(f.lease / 3)
	if !mine || !now.Before(renewAt) {
		return decision{step: stepJoin}
	}
	if renewAt.Before(d.at) {
		d.at, d.renew = renewAt, true
	}
	return d
}

// join writes this waiter's entry into the waiter queue its kind names
// (kind.place: a fair lock's own item, a fair semaphore's first slot, a
// read/write lock's item), adding it or renewing its beat, and learns the
// item from the answer. The one queue of every kind: an entry is a ticket
// (the place, drawn once), a beat and a lease, and what the kind adds. A
// renewal lands only on an entry still there: one that others dropped as
// dead is added again by a join that needs a place (lockitem.MaxWaiters), and a
// renewal that arrives late (after this waiter left the queue) never
// brings a dropped entry back.
func (a *acquisition) join(ctx context.Context, w *watch) error {
	j := a.kind.place(a, w)
	c, p, w := a.c, j.place, j.on
	ws, present, _ := queueOf(w.v.raw)
	if p.ticket == 0 {
		for _, w := range ws {
			if !w.Bad {
				p.ticket = max(p.ticket, w.Ticket)
			}
		}
		p.ticket++ // below maxTicket: valid tickets are
	}
	p.beatAt = a.c.now()
	fields := map[string]types.AttributeValue{
		"t": lockitem.N(p.ticket), "b": lockitem.S(randomID()), "l": lockitem.N(uint64(p.lease / time.Millisecond)),
	}
	maps.Copy(fields, j.entry)
	entry := &types.AttributeValueMemberM{Value: fields}
	b := lockitem.NewExpr()
	q := b.Name("#q", lockitem.FairQueue)
	cond := "attribute_exists(" + b.Name("#pk", c.cfg.partitionKeyName) + ") AND "
	var update string
	mine := present && slices.ContainsFunc(ws, func(w waiter) bool { return w.ID == p.id })
	switch {
	case mine:
		update = "SET " + q + "." + b.Name("#w", p.id) + " = " + b.Value(":e", entry)
		cond += "attribute_exists(" + q + ".#w)"
	case present:
		// A new entry needs a place (lockitem.MaxWaiters).
		update = "SET " + q + "." + b.Name("#w", p.id) + " = " + b.Value(":e", entry)
		cond += "size(" + q + ") < " + b.Value(":maxq", lockitem.N(lockitem.MaxWaiters))
	default:
		update = "SET " + q + " = " + b.Value(":m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{p.id: entry}})
		cond += "attribute_not_exists(" + q + ")"
	}
	if j.also != nil {
		update += j.also(b, mine)
	}
	landed, err := a.sendJoin(ctx, w, c.guardedUpdate(c.itemKeyOf(w.key, w.sortKey), b, update, cond))
	if j.landed != nil {
		j.landed(landed)
	}
	return err
}

// sendJoin sends a waiter's join of the queue on w's item (every kind's)
// and learns the item from the answer: the new item, or the one a failed
// condition returned (the queue or the item changed: decide again). It
// reports whether the join landed.
func (a *acquisition) sendJoin(ctx context.Context, w *watch, in *dynamodb.UpdateItemInput) (bool, error) {
	in.ReturnValues = types.ReturnValueAllNew
	a.c.here.noteCall(w)
	out, err := a.updateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		return true, a.learn(ctx, w, out.Attributes, nil)
	case errors.As(err, &ccf) && len(ccf.Item) > 0:
		return false, a.learn(ctx, w, ccf.Item, nil)
	case errors.As(err, &ccf):
		w.forget() // no item came back (an emulator): read it
		return false, nil
	}
	w.forget()
	return false, a.failed(ctx, w, err)
}

// fairOf is the fair queue state w's decisions follow, or nil.
func (a *acquisition) fairOf(w *watch) *fairState {
	if q := a.kind.queue(w); q != nil {
		return q.fair
	}
	return nil
}

// queueView is what is known of the item that holds w's fair queue.
func (a *acquisition) queueView(w *watch) *view {
	if q := a.kind.queue(w); q != nil {
		return &q.v
	}
	return &w.v
}

// learnQueue records the beats of the fair queue w's item holds, if this
// call follows it.
func (a *acquisition) learnQueue(w *watch, item map[string]types.AttributeValue, now time.Time) {
	if q := a.kind.queue(w); q == w {
		ws, _, _ := queueOf(item)
		q.fair.observe(ws, now)
	}
}

// leaveQueues removes this call's entries from the waiter queues it
// joined: best effort, within ctx (which the caller bounds). An entry left
// behind is skipped by the others after its lease.
func (a *acquisition) leaveQueues(ctx context.Context) { a.kind.leaveQueues(ctx, a) }

// leaveEntry removes the queue entry id from w's item: best effort, within
// ctx. An entry left behind is skipped by the others after its lease.
func (a *acquisition) leaveEntry(ctx context.Context, w *watch, id string) {
	c := a.c
	b := lockitem.NewExpr()
	q := b.Name("#q", lockitem.FairQueue)
	in := &dynamodb.UpdateItemInput{
		TableName:                aws.String(c.cfg.tableName),
		Key:                      c.itemKeyOf(w.key, w.sortKey),
		UpdateExpression:         aws.String("REMOVE " + q + "." + b.Name("#w", id)),
		ConditionExpression:      aws.String("attribute_exists(" + q + ")"),
		ExpressionAttributeNames: b.Names,
	}
	_, err := a.updateItem(ctx, in)
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "could not leave the queue; the entry is skipped after its lease",
			slogKey(w.key), slogErr(err))
	}
}

// onItem is q as a transaction's action on the item at key that holds the
// queue, when the acquiring write goes to another item (a semaphore's
// slot other than the first): remove the entries, on condition that the
// queue exists; or check that it is empty.
func (q *queueWrite) onItem(c *Client, key map[string]types.AttributeValue) types.TransactWriteItem {
	b := lockitem.NewExpr()
	name := b.Name("#q", lockitem.FairQueue)
	if q.empty || len(q.remove) == 0 {
		cond := "attribute_exists(" + name + ")"
		if q.empty {
			cond = "attribute_not_exists(" + name + ") OR size(" + name + ") = " + b.Value(":zero", lockitem.N(0))
		}
		return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:                           aws.String(c.cfg.tableName),
			Key:                                 key,
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            b.Names,
			ExpressionAttributeValues:           b.ValuesOrNil(),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}}
	}
	remove := ""
	for i, id := range q.remove {
		if i > 0 {
			remove += ", "
		}
		remove += name + "." + b.Name("#w"+strconv.Itoa(i), id)
	}
	return types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 key,
		UpdateExpression:                    aws.String("REMOVE " + remove),
		ConditionExpression:                 aws.String("attribute_exists(" + name + ")"),
		ExpressionAttributeNames:            b.Names,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// expr adds q's condition and removals to an acquiring write's
// expressions.
func (q *queueWrite) expr(b *lockitem.Expr, cond, remove string) (string, string) {
	name := b.Name("#q", lockitem.FairQueue)
	if q.empty {
		return "(" + cond + ") AND (attribute_not_exists(" + name + ") OR size(" + name + ") = " + b.Value(":zero", lockitem.N(0)) + ")", remove
	}
	for i, id := range q.remove {
		remove += ", " + name + "." + b.Name("#w"+strconv.Itoa(i), id)
	}
	return "(" + cond + ") AND attribute_exists(" + name + ")", remove
}
