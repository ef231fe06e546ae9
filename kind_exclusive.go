package dynamolock

// The exclusive kind of holder (AcquireLock, Do, AcquireLocks, an
// election, a session's own item), fair or not, and the holder's item
// shape: the lock is the item's holder (owner, RVN, lease, fencing token).

import (
	"context"
	"log/slog"

	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// exclusive is the kind of a lock that is its item's only holder. With
// WithFairness on one key, its waiters queue on the key's own item
// (watch.fair).
type exclusive struct{}

func (exclusive) first(a *acquisition, w *watch, now time.Time) decision {
	return a.fairly(w, decision{step: stepWrite}, now, time.Time{})
}

func (exclusive) decide(ctx context.Context, a *acquisition, w *watch) (*Lock, error) {
	c := a.c
	v := &w.v
	in := decideInput{view: v, now: a.c.now(), start: a.start, key: w.key, owner: c.cfg.ownerName, attempts: a.attempts, o: a.o,
		deadline: a.deadlineFor(w), jitter: randomUpTo(a.o.refreshJitter), handsChanged: w.hands.changes}
	if v.rec != nil {
		in.staleByClock, in.hasClockExpiry = c.staleByClockAt(v.rec, in.now)
		if v.rec.Session != "" && v.rec.Owner == c.cfg.ownerName {
			in.ownSession = c.sessions.liveKey()
		}
		if v.rec.Owner == c.cfg.ownerName {
			in.heldHere = c.here.heldOrInFlight(w.regKey, v.rec.RVN)
		}
		if a.o.reentrant && v.rec.Owner == c.cfg.ownerName {
			l, publishing := c.here.adoptable(w.regKey)
			if l != nil {
				cctx, cancel := a.c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
				a.leaveQueues(cctx) // WithFairness: this call's entry, if any, is not needed
				if a.unsure() {
					// A write of this call whose answer was lost may still
					// land once the key is free again, and under a session
					// nothing else would free the item: take it back before
					// returning a lock none of its writes made (F19), and
					// look at that lock only after this round trip.
					a.undo(cctx)
				}
				cancel()
				if l.held() {
					return l, nil // another acquisition here got it meanwhile
				}
				// It ended while this call left the queue or took back its
				// writes (the simulation's seed 64000709, invariant 13):
				// never return a lock already ended; decide on what the
				// item shows.
			}
			// Not ours to take while another acquisition here writes it,
			// or has it and may still release it.
			in.inFlightHere = c.here.inFlight(v.rec.RVN) || publishing != nil
		}
	}
	w.next = a.fairly(w, decide(in), in.now, in.deadline)
	if w.next.step == stepWrite && w.next.stale {
		c.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "taking over stale lock", slogKey(w.key), slogOwner(v.rec.Owner), slogRVN(v.rec.RVN))
	}
	return nil, nil
}

func (exclusive) learn(a *acquisition, w *watch, item map[string]types.AttributeValue, now time.Time) {
	a.learnQueue(w, item, now)
}

func (exclusive) grant(a *acquisition, w *watch, d decision, rvn string, sent time.Time, sess *Session) grantWrite {
	in, wrote := a.c.acquireWrite(w.key, w.sortKey, a.o, rvn, d.takeover, d.queue, sent, sess)
	return grantWrite{in: in, wrote: wrote, absentIfRefused: a.o.onlyIfLockAlreadyExist, shape: holderShape{}}
}

func (exclusive) wrote(*acquisition) {}

func (exclusive) queue(w *watch) *watch {
	if w.fair != nil {
		return w
	}
	return nil
}

func (exclusive) place(a *acquisition, w *watch) queueJoin {
	j := queueJoin{on: w, place: &w.fair.waiterPlace}
	if !w.fair.ordered {
		j.entry = map[string]types.AttributeValue{entryUnordered: lockitem.N(1)}
	}
	return j
}

func (exclusive) leaveQueues(ctx context.Context, a *acquisition) {
	for _, w := range a.watches {
		if w.fair != nil && w.fair.ticket != 0 {
			a.leaveEntry(ctx, w, w.fair.id)
		}
	}
}

func (exclusive) handsOverHere(a *acquisition, w *watch) bool {
	return w.fair == nil || !w.fair.ordered
}

func (exclusive) name(a *acquisition, w *watch) string {
	if a.mode == modeAll {
		return a.what
	}
	return quoteKey(w.key)
}

// holderShape is the shape of a lock that is its item's holder.
type holderShape struct{}

func (holderShape) regKey(key string, sortKey *string) string { return registryKey(key, sortKey) }

func (holderShape) carries(item map[string]types.AttributeValue, rvn string) bool {
	return carriesRVN(item, rvn)
}

func (holderShape) hold(ctx context.Context, a *acquisition, w *watch, item map[string]types.AttributeValue, _ string, at attempt) (*Lock, error) {
	return a.holdItem(ctx, w, item, at)
}

func (holderShape) undoInput(c *Client, key map[string]types.AttributeValue, rvns []string, token uint64) *dynamodb.UpdateItemInput {
	return c.undoInput(key, rvns, token)
}

func (holderShape) mark(*Lock) {}

func (holderShape) renewal(c *Client, l *Lock, w *renewal) *dynamodb.UpdateItemInput {
	b := lockitem.NewExpr()
	b.Name("#v", lockitem.RVN)
	b.Value(":v", lockitem.S(w.rvn))
	b.Name("#l", lockitem.LeaseDuration)
	b.Value(":l", lockitem.S(lockitem.FormatLease(w.lease)))
	update := "SET #v = :v, #l = :l" // a constant: no allocation for it
	if w.opts.data != nil {
		update += ", " + b.Name("#d", lockitem.Data) + " = " + b.Value(":d", &types.AttributeValueMemberB{Value: w.opts.data})
	}
	update += l.leaseOf().expirySets(c, b, w)
	if w.opts.deleteData {
		update += " REMOVE " + b.Name("#d", lockitem.Data)
	}
	var cond string
	if w.opts.matchOwnerOnly {
		// Any RVN of this owner, but not another acquisition of this
		// library (another fencing token): a late owner-only beat of a
		// lock that ended must not renew (nor, as it lands after the end,
		// release: undoLanded) the item of a later acquisition of the
		// same owner. An item another tool rewrote carries no token.
		cond = ownerCondition(b, l.ownerName) + " AND (" + b.Name("#f", lockitem.FencingToken) + " = " + b.Value(":f", lockitem.N(l.fencingToken)) +
			" OR attribute_not_exists(#f))"
	} else {
		cond = l.conditionLocked(b, w.rvn)
	}
	in := c.guardedUpdate(l.itemKey(), b, update, cond)
	if l.rare != nil && l.rare.dataDoubt != 0 && !w.changesData() {
		// A write that changes the data may have landed unanswered: this
		// one reads the data back (renewed), so Data() tells the truth.
		in.ReturnValues = types.ReturnValueAllNew
	}
	return in
}

func (holderShape) beatCondition(b *lockitem.Expr, l *Lock, in string) string {
	return ownerCondition(b, l.ownerName) + " AND " + b.Name("#v", lockitem.RVN) + " IN (" + in + ")"
}

// guard: this owner, this acquisition (fencing token, or the RVN for an
// item without one), not released.
func (holderShape) guard(b *lockitem.Expr, l *Lock) string {
	cond := ownerCondition(b, l.ownerName)
	if l.fencingToken > 0 {
		return cond + " AND " + b.Name("#f", lockitem.FencingToken) + " = " + b.Value(":f", lockitem.N(l.fencingToken))
	}
	return cond + " AND " + b.Name("#v", lockitem.RVN) + " = " + b.Value(":cur", lockitem.S(l.rvn))
}

func (holderShape) release(ctx context.Context, c *Client, l *Lock, b *lockitem.Expr, cond string, deleteLock bool, data []byte) error {
	if deleteLock {
		_, err := c.deleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                           aws.String(c.cfg.tableName),
			Key:                                 l.itemKey(),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            b.Names,
			ExpressionAttributeValues:           b.Values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		return err
	}
	// Constant strings where they can be: no allocation for them.
	b.Name("#r", lockitem.IsReleased)
	b.Value(":r", lockitem.S("1"))
	update := "SET #r = :r"
	if data != nil {
		update = "SET #r = :r, " + b.Name("#d", lockitem.Data) + " = " + b.Value(":d", &types.AttributeValueMemberB{Value: data})
	}
	if l.kind == lockView {
		// A view (a forced release) may show a session's lock: the name
		// goes with it, or a client that copies unknown attributes
		// (dynamolock v2) would carry it into its own lock; and any
		// stored expiry goes.
		update += " REMOVE " + b.Name("#s", lockitem.Session) + ", " + expiryAttrs(b)
	} else {
		update += l.leaseOf().releaseRemoves(c, b)
	}
	_, err := c.updateItem(ctx, c.guardedUpdate(l.itemKey(), b, update, cond))
	return err
}

func (holderShape) releasedBefore(l *Lock, item map[string]types.AttributeValue) bool {
	rec, ours := l.ownItem(item)
	if ours {
		return rec.Released
	}
	return rec != nil && rec.FencingToken > l.FencingToken()
}

func (holderShape) own(l *Lock, item map[string]types.AttributeValue) (*lockRecord, bool) {
	rec, err := l.client.cfg.schema.decodeItem(item)
	if err != nil {
		return nil, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return rec, l.fencingToken != 0 && rec.Owner == l.ownerName && rec.FencingToken == l.fencingToken
}

func (holderShape) ownsData() bool { return true }

func (holderShape) takenHow(l *Lock, item map[string]types.AttributeValue) string {
	return l.holderTakenHow(item)
}

func (holderShape) refreshable() bool { return true }
