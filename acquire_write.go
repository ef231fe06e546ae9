package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// The engine's DynamoDB calls, all through the call layer (calls.go):
// updateItem (the acquiring write, a fair queue's writes, the undo), read
// (watch.go) and transactWriteItems.

// updateItem sends one UpdateItem of the engine.
func (a *acquisition) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	return a.c.updateItem(a.callBound(ctx), in)
}

// callBound bounds the calls the acquisition sends with ctx by the end of
// its wait (see withCallBound): a call that gets no answer ends the
// acquisition when its wait ends, not a call timeout later.
func (a *acquisition) callBound(ctx context.Context) context.Context {
	return a.boundBy(ctx, minCallTime)
}

// undoBound is callBound for the undo of writes whose answers were lost,
// sent once the acquisition has failed: given lateCallTime at least, so
// that a silent network keeps the failed acquisition no longer.
func (a *acquisition) undoBound(ctx context.Context) context.Context {
	return a.boundBy(ctx, lateCallTime)
}

func (a *acquisition) boundBy(ctx context.Context, floor time.Duration) context.Context {
	end := a.deadline
	if end.IsZero() {
		end = a.waitEnd(a.o.lease)
	}
	if a.c.until(end) >= a.c.callBound() {
		return ctx // the call's own bound comes first
	}
	return withCallBound(ctx, end, floor)
}

// transactWriteItems sends the transaction of a multi-key acquisition, or
// of a fair semaphore's write to a slot beside its queue.
func (a *acquisition) transactWriteItems(ctx context.Context, items []types.TransactWriteItem) error {
	feature := "AcquireLocks"
	if a.mode == modeAny {
		feature = "Semaphore.Acquire with WithFairness"
	}
	_, err := a.c.transactWriteItems(a.callBound(ctx), feature, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	return err
}

// write is the one acquiring write step for a single key: it sends the
// write of w.next that the kind builds (kind.grant): an UpdateItem, or a
// transaction of it and the queue's part on another item (a fair
// semaphore's slot beside its queue). It returns the new lock, or updates
// w with what the answer showed, or returns the error that ends the call.
func (a *acquisition) write(ctx context.Context, w *watch) ([]*Lock, error) {
	c := a.c
	if n := w.handover; n != 0 {
		// Settled once this write is answered and its lock, if any, held.
		w.handover = 0
		defer c.here.handedOver(w.regKey, n)
	}
	d := w.next
	if done, err := a.endSessions(ctx, w, d); !done || err != nil {
		return nil, err
	}
	rvn := a.leases.rvn(w.key)
	// One instant for the stored expiry and this holder's lease, taken
	// before the send: the holder's lease never ends later than what it
	// wrote, nor later than any observer's.
	sent := a.c.now()
	sess, lease, err := a.session(ctx, sent)
	if err != nil {
		w.forget()
		return nil, a.failed(ctx, w, err) // no session could start: as a failed write
	}
	g := a.kind.grant(a, w, d, rvn, sent, sess)
	at := attempt{sent: sent, lease: lease, unsure: true, on: []*watch{w}, shape: g.shape, sess: sess}
	a.attempts[rvn] = at
	c.here.sending(rvn)
	c.here.noteCall(w)
	if g.beside != nil {
		return a.besideAnswer(ctx, w, g, rvn, at)
	}
	in := g.in
	out, err := a.updateItem(ctx, in)
	if err == nil && g.wrote != nil && len(out.Attributes) == 0 && (d.takeover != "" || a.o.onlyIfLockAlreadyExist) {
		// Its condition needs the item, so DynamoDB returns it (ALL_OLD).
		err = c.wrongAnswer("UpdateItem", "a write whose condition needs an existing item succeeded, and returned no item")
	}
	if err == nil {
		item := out.Attributes // the new item (ALL_NEW), or the old one
		if g.wrote != nil {
			item = g.wrote.after(in.Key, out.Attributes)
		}
		if !a.c.now().Before(sent.Add(at.lease)) {
			// The answer came after the lease it granted ran out (a pause):
			// take the item anew rather than return a lock already lost.
			return nil, a.learn(ctx, w, item, nil)
		}
		var l *Lock
		var err error
		switch {
		case g.wrote == nil:
			// The answer is the new item: learned, then held.
			if err = a.learn(ctx, w, item, nil); err == nil {
				l, err = g.shape.hold(ctx, a, w, item, rvn, at)
			}
		case g.wrote.fresh != nil && len(out.Attributes) == 0:
			// There was no item: the record is what the write wrote.
			l, err = a.holdRecord(ctx, w, g.wrote.fresh, at)
		default:
			l, err = g.shape.hold(ctx, a, w, item, rvn, at)
		}
		if l == nil || err != nil {
			return nil, err // no lock: lost before it could be returned; decided anew
		}
		return []*Lock{l}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	isCCF := errors.As(err, &ccf)
	if isCCF && !g.shape.carries(ccf.Item, rvn) && !mayHaveLanded(err) || !isCCF && surelyNotApplied(err) {
		// Rejected, and no earlier attempt of this call (an SDK retry) is
		// in the item or failed without an answer: it did not land.
		at.unsure = false
		a.attempts[rvn] = at
	}
	switch {
	case isCCF && len(ccf.Item) > 0:
		return nil, a.learn(ctx, w, ccf.Item, nil)
	case isCCF && g.absentIfRefused && !at.unsure:
		// No item came back, and the condition needs one
		// (WithAcquireOnlyIfLockAlreadyExists, a reader's blind write), and
		// no earlier attempt may have landed: there is none.
		w.v = view{known: true, absent: true}
		w.dirty = true
		return nil, nil
	case isCCF:
		w.forget() // no item came back (an emulator): read it
		return nil, nil
	}
	// The write may have landed: nothing is known of the item until read.
	w.forget()
	return nil, a.failed(ctx, w, err)
}

// transact sends the one transaction that takes every key, each as its
// watch's decision says (a takeover where it is stale). It returns the
// locks, or updates the watches with what the answer showed, or returns
// the error that ends the call.
func (a *acquisition) transact(ctx context.Context) ([]*Lock, error) {
	c := a.c
	for _, w := range a.watches {
		if done, err := a.endSessions(ctx, w, w.next); !done || err != nil {
			return nil, err // a session renewed: w is read and decided anew
		}
	}
	rvn := newRVN()
	sent := a.c.now() // one instant for the stored expiries and the locks' leases
	sess, lease, err := a.session(ctx, sent)
	if err != nil {
		return nil, a.failedAll(ctx, err) // no session could start: as a failed write
	}
	items := make([]types.TransactWriteItem, len(a.watches))
	for i, w := range a.watches {
		items[i] = types.TransactWriteItem{Update: transactUpdate(c.acquireInput(w.key, w.sortKey, a.o, rvn, w.next.takeover, nil, sent, sess))}
	}
	at := attempt{sent: sent, lease: lease, unsure: true, on: a.watches, shape: holderShape{}, sess: sess}
	a.attempts[rvn] = at
	c.here.sending(rvn)
	err = a.transactWriteItems(ctx, items)
	if err == nil {
		return a.holdAll(ctx, rvn, at)
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != len(a.watches) {
		if surelyNotApplied(err) {
			at.unsure = false
			a.attempts[rvn] = at
		}
		return nil, a.failedAll(ctx, err)
	}
	// Cancelled: nothing was written, unless an earlier attempt of this
	// call (an SDK retry) failed without an answer: then the items tell.
	if !mayHaveLanded(err) {
		at.unsure = false
		a.attempts[rvn] = at
	}
	held, conflict, throttled := false, false, false
	for i, r := range tce.CancellationReasons {
		w := a.watches[i]
		switch aws.ToString(r.Code) {
		case "", "None":
		case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			throttled = true // a member's partition or table was over its throughput
		case "ConditionalCheckFailed":
			held = true
			if len(r.Item) > 0 {
				if err := a.learn(ctx, w, r.Item, nil); err != nil {
					return nil, err
				}
				continue
			}
			if a.o.onlyIfLockAlreadyExist {
				return nil, notGranted(nil, "key %q has no lock item and WithAcquireOnlyIfLockAlreadyExists was given", w.key)
			}
			// No item came back with the failure: learn it by reading.
			item, err := a.read(ctx, w)
			if err := a.learn(ctx, w, item, err); err != nil {
				return nil, err
			}
		case "TransactionConflict":
			conflict = true
		default: // throttling, validation, capacity: the error says it
			return nil, a.failedAll(ctx, err)
		}
	}
	switch {
	case held:
		return nil, nil
	case conflict:
		// Another write to one of the items was in progress. Nothing is
		// known about the holders; read them after a pause.
		return nil, a.failedAll(ctx, fmt.Errorf("%w: %w", errTransactionConflict, err))
	case throttled:
		// Nothing was written; throttling passes: retried as a throttled
		// write is, within the wait.
		return nil, a.failedAll(ctx, fmt.Errorf("%w: %w", errThrottledMember, err))
	}
	return nil, a.failedAll(ctx, err)
}

// besideAnswer sends the write g of w's slot of a fair semaphore whose
// queue lives on another slot's item (g.queueOn): one transaction of the
// acquiring update and the queue's part (this waiter's entry and dead ones
// removed, or the queue checked empty), so that the order of the queue
// holds across slots. A transaction cannot return the new item: it is
// read back.
func (a *acquisition) besideAnswer(ctx context.Context, w *watch, g grantWrite, rvn string, at attempt) ([]*Lock, error) {
	q := g.queueOn
	err := a.transactWriteItems(ctx, []types.TransactWriteItem{{Update: transactUpdate(g.in)}, *g.beside})
	if err == nil {
		rec, err := a.readBack(ctx, w, rvn)
		if err != nil {
			var lng *LockNotGrantedError
			if !errors.As(err, &lng) {
				err = notGranted(err, "%s: slot %q was taken but could not be read back; released", a.what, w.key)
			}
			return nil, err // undo releases the slot
		}
		if !a.c.now().Before(at.sent.Add(at.lease)) {
			// The read-back ended after the lease the transaction granted
			// ran out (a pause, slow reads): the lock is already lost, and
			// another acquisition may take the slot over. Take it anew,
			// as write does; undo covers the call if it gives up.
			w.forget()
			return nil, nil
		}
		l, err := a.holdRecord(ctx, w, rec, at)
		if l == nil || err != nil {
			return nil, err // no lock: lost before it could be returned; decided anew
		}
		return []*Lock{l}, nil
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 {
		if surelyNotApplied(err) {
			at.unsure = false
			a.attempts[rvn] = at
		}
		w.forget()
		return nil, a.failed(ctx, w, err)
	}
	if !mayHaveLanded(err) {
		at.unsure = false
		a.attempts[rvn] = at
	}
	conflict := false
	for i, r := range tce.CancellationReasons {
		x := []*watch{w, q}[i]
		switch aws.ToString(r.Code) {
		case "", "None":
		case "ConditionalCheckFailed":
			if len(r.Item) == 0 {
				x.forget() // read it
				continue
			}
			if err := a.learn(ctx, x, r.Item, nil); err != nil {
				return nil, err
			}
		case "TransactionConflict":
			conflict = true
		case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
			w.forget()
			return nil, a.failed(ctx, w, fmt.Errorf("%w: %w", errThrottledMember, err))
		default:
			w.forget()
			return nil, a.failed(ctx, w, err)
		}
	}
	if conflict {
		w.forget()
		return nil, a.failed(ctx, w, fmt.Errorf("%w: %w", errTransactionConflict, err))
	}
	return nil, nil
}

// failedAll handles a failed transaction: every key's item is unknown.
func (a *acquisition) failedAll(ctx context.Context, err error) error {
	for _, w := range a.watches {
		w.forget()
	}
	if err := a.failed(ctx, a.watches[0], err); err != nil {
		return err
	}
	for _, w := range a.watches {
		w.v.failed = err
	}
	return nil
}

// undo takes back every write of this call that may have landed, so that
// a call that gives up leaves no item held by nobody: per key, one
// UpdateItem conditioned on this owner and those RVNs (the item is marked
// released), or, for an RWLock reader's grants, on its entry carrying one
// of those beats (the entry is removed); best effort, within ctx (the
// caller bounds it, even when the acquisition's own ctx has ended). A
// transaction's writes are undone key by key.
func (a *acquisition) undo(ctx context.Context) {
	type target struct {
		w     *watch
		shape itemShape
		sess  *Session
	}
	byKey := make(map[target][]string)
	var order []target
	for _, rvn := range slices.Sorted(maps.Keys(a.attempts)) { // in order: one seed, one run (internal/sim)
		at := a.attempts[rvn]
		if !at.unsure {
			continue
		}
		for _, w := range at.on {
			t := target{w, at.shape, at.sess}
			if byKey[t] == nil {
				order = append(order, t)
			}
			byKey[t] = append(byKey[t], rvn)
		}
		delete(a.attempts, rvn)
		a.c.here.settled(rvn)
	}
	for _, t := range order {
		c, key := a.c, a.c.itemKeyOf(t.w.key, t.w.sortKey)
		in := t.shape.undoInput(c, key, byKey[t], 0)
		_, err := a.c.updateItem(a.undoBound(ctx), in)
		var ccf *types.ConditionalCheckFailedException
		if err != nil && !errors.As(err, &ccf) {
			c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "could not undo an acquiring write whose answer was lost; the item expires after its lease",
				slogKey(t.w.key), slogErr(err))
		}
		// Whatever the undo answered, the write may land after it (its
		// condition then failed because the write had not landed yet):
		// under a session nothing else would free the item.
		c.takeBackInDoubt(t.sess, t.w.key, in)
	}
}

// undoInput marks the item released if it still carries this owner's name
// and one of rvns: a write of this client that nobody holds any more; and,
// when token is not 0, that fencing token (the write was a renewal of that
// acquisition). An owner-only heartbeat may land on an item another tool
// rewrote without a token (the lock of a process with the same owner
// name): that item is left to its holder, which learns at its next
// renewal; released, a third client could take it while that holder still
// works.
func (c *Client) undoInput(key map[string]types.AttributeValue, rvns []string, token uint64) *dynamodb.UpdateItemInput {
	b := lockitem.NewExpr()
	in := b.Value(":u0", lockitem.S(rvns[0]))
	for i, rvn := range rvns[1:] {
		in += ", " + b.Value(":u"+strconv.Itoa(i+1), lockitem.S(rvn))
	}
	cond := ownerCondition(b, c.cfg.ownerName) + " AND " + b.Name("#v", lockitem.RVN) + " IN (" + in + ")"
	if token != 0 {
		cond += " AND " + b.Name("#f", lockitem.FencingToken) + " = " + b.Value(":f", lockitem.N(token))
	}
	update := "SET " + b.Name("#r", lockitem.IsReleased) + " = " + b.Value(":r", lockitem.S("1")) + " REMOVE " + expiryAttrs(b) +
		", " + b.Name("#s", lockitem.Session) // a released item names no session
	return c.guardedUpdate(key, b, update, cond)
}

// acquireInput is the acquiring UpdateItem of acquireWrite.
func (c *Client) acquireInput(key string, sortKey *string, o *acquireLockOptions, rvn, takeover string, q *queueWrite, sent time.Time, sess *Session) *dynamodb.UpdateItemInput {
	in, _ := c.acquireWrite(key, sortKey, o, rvn, takeover, q, sent, sess)
	return in
}

// acquireWrite builds the single UpdateItem that acquires a free or released
// item, or takes over one whose RVN is takeover, and the record of what it
// writes. It bumps the fencing token, and on failure returns the current
// item (ReturnValuesOnConditionCheckFailure) so that no read is needed to
// learn who holds it. On success DynamoDB returns the item as it was before
// (ReturnValues ALL_OLD: nothing, for a free key), and the client builds
// the new item from it and what it wrote. sent is the instant the lease
// counts from. Under a session (sess), the item names the session and
// carries a lease no client outwaits, and no stored expiry
// (docs/SESSIONS.md); without one, it names none.
func (c *Client) acquireWrite(key string, sortKey *string, o *acquireLockOptions, rvn, takeover string, q *queueWrite, sent time.Time, sess *Session) (*dynamodb.UpdateItemInput, *acquiredItem) {
	if c.plain.names != nil && sess == nil && plainShape(o, takeover, q) {
		return c.plainAcquireWrite(key, sortKey, o, rvn, sent)
	}
	return c.builtAcquireWrite(key, sortKey, o, rvn, takeover, q, sent, sess)
}

// plainShape reports whether an acquiring write has the common shape:
// no data, no additional attributes, no takeover, no fair queue, and not
// WithAcquireOnlyIfLockAlreadyExists. Its names and expressions then
// depend on the client alone (see plainAcquire).
func plainShape(o *acquireLockOptions, takeover string, q *queueWrite) bool {
	return !o.replaceData && o.data == nil && len(o.additionalAttributes) == 0 && takeover == "" && q == nil && !o.onlyIfLockAlreadyExist
}

// plainAcquire is what every acquiring write of the common shape (see
// plainShape) has in common: its attribute names, its two expressions and
// the fencing token's increment, taken once per client from a request of
// builtAcquireWrite itself, so that these cannot differ from what the
// builder writes; the values and the record of what is written are built
// apart, and TestPlainAcquireWriteIsTheBuiltOne compares them with the
// builder's. Each request gets its own copies: a DynamoDBClient wrapper
// may change the request it is given.
type plainAcquire struct {
	names             map[string]string
	update, cond, one string
}

func (c *Client) newPlainAcquire() plainAcquire {
	in, _ := c.builtAcquireWrite("k", c.cfg.sortKey, &acquireLockOptions{lease: time.Second}, "rvn", "", nil, time.Unix(0, 0), nil)
	one, _ := in.ExpressionAttributeValues[":one"].(*types.AttributeValueMemberN)
	if one == nil {
		return plainAcquire{} // not the shape plainAcquireWrite writes: every write is built
	}
	return plainAcquire{names: in.ExpressionAttributeNames, update: *in.UpdateExpression, cond: *in.ConditionExpression, one: one.Value}
}

// plainAcquireWrite is builtAcquireWrite for the common shape, from the
// client's names and expressions: only the values and the key are built
// per call.
func (c *Client) plainAcquireWrite(key string, sortKey *string, o *acquireLockOptions, rvn string, sent time.Time) (*dynamodb.UpdateItemInput, *acquiredItem) {
	w := &acquiredItem{set: make(map[string]types.AttributeValue, 4), tokenBase: uint64(sent.UnixMicro())}
	w.remove = append(w.removeArray[:0], lockitem.IsReleased)
	if c.cfg.clockSkewBound <= 0 {
		w.remove = append(w.remove, lockitem.LeaseExpiresAt, lockitem.LeaseExpiresRVN)
	}
	w.remove = append(w.remove, lockitem.Session)
	// The values alone: the names are the client's.
	values := make(map[string]types.AttributeValue, 8)
	w.set[lockitem.OwnerName] = lockitem.S(c.cfg.ownerName)
	w.set[lockitem.LeaseDuration] = lockitem.S(lockitem.FormatLease(o.lease))
	w.set[lockitem.RVN] = lockitem.S(rvn)
	values[":o"] = w.set[lockitem.OwnerName]
	values[":l"] = w.set[lockitem.LeaseDuration]
	values[":v"] = w.set[lockitem.RVN]
	values[":base"] = lockitem.N(w.tokenBase)
	values[":one"] = &types.AttributeValueMemberN{Value: c.plain.one}
	c.expiryValues(values, sent, o.lease, rvn)
	w.setExpiry(values, c.cfg.ttlAttribute)
	w.fresh = &lockRecord{Owner: c.cfg.ownerName, Lease: o.lease, RVN: rvn, FencingToken: w.tokenBase + 1}
	if c.cfg.clockSkewBound > 0 {
		w.fresh.LeaseExpiresAt, w.fresh.ExpiryRVN = ceilMilli(sent.Add(o.lease)), rvn
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 c.itemKeyOf(key, sortKey),
		UpdateExpression:                    aws.String(c.plain.update),
		ConditionExpression:                 aws.String(c.plain.cond),
		ExpressionAttributeNames:            maps.Clone(c.plain.names),
		ExpressionAttributeValues:           values,
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, w
}

// builtAcquireWrite is acquireWrite for any shape, each request built
// from its parts.
func (c *Client) builtAcquireWrite(key string, sortKey *string, o *acquireLockOptions, rvn, takeover string, q *queueWrite, sent time.Time, sess *Session) (*dynamodb.UpdateItemInput, *acquiredItem) {
	w := &acquiredItem{set: make(map[string]types.AttributeValue, 4+len(o.additionalAttributes)), tokenBase: uint64(sent.UnixMicro())}
	w.remove = w.removeArray[:0]
	b := lockitem.NewExpr()
	w.set[lockitem.OwnerName] = lockitem.S(c.cfg.ownerName)
	if sess != nil {
		w.set[lockitem.LeaseDuration] = lockitem.S(sessionLeaseText)
	} else {
		w.set[lockitem.LeaseDuration] = lockitem.S(lockitem.FormatLease(o.lease))
	}
	w.set[lockitem.RVN] = lockitem.S(rvn)
	// The expressions are constant strings where they can be: no
	// allocation for them in the common case.
	b.Name("#o", lockitem.OwnerName)
	b.Value(":o", w.set[lockitem.OwnerName])
	b.Name("#l", lockitem.LeaseDuration)
	b.Value(":l", w.set[lockitem.LeaseDuration])
	b.Name("#v", lockitem.RVN)
	b.Value(":v", w.set[lockitem.RVN])
	set := "SET #o = :o, #l = :l, #v = :v"
	b.Name("#r", lockitem.IsReleased)
	remove := " REMOVE #r"
	w.remove = append(w.remove, lockitem.IsReleased)
	if c.cfg.clockSkewBound <= 0 || sess != nil {
		// Without WithClockSkewBound no stored expiry outlives the holder
		// that renewed it; a session's lock has no expiry of its own.
		expiryAttrs(b)
		remove = " REMOVE #r, #x, #xr"
		w.remove = append(w.remove, lockitem.LeaseExpiresAt, lockitem.LeaseExpiresRVN)
	}
	if sess != nil {
		set += ", " + b.Name("#s", lockitem.Session) + " = " + b.Value(":s", lockitem.S(sess.key))
		w.set[lockitem.Session] = b.Values[":s"]
		if c.cfg.ttlAttribute != "" {
			// No TTL may delete a lock its session holds: nothing renews it.
			remove += ", " + b.Name("#t", c.cfg.ttlAttribute)
			w.remove = append(w.remove, c.cfg.ttlAttribute)
		}
	} else {
		// An item names a session only while the session holds it.
		b.Name("#s", lockitem.Session)
		remove += ", #s"
		w.remove = append(w.remove, lockitem.Session)
	}
	// The lock keeps a copy: the caller may reuse its slice.
	kept := func() types.AttributeValue { return &types.AttributeValueMemberB{Value: bytes.Clone(o.data)} }
	switch {
	case o.replaceData && o.data == nil:
		remove += ", " + b.Name("#d", lockitem.Data)
		w.remove = append(w.remove, lockitem.Data)
	case o.replaceData:
		set += ", " + b.Name("#d", lockitem.Data) + " = " + b.Value(":d", &types.AttributeValueMemberB{Value: o.data})
		w.set[lockitem.Data] = kept()
	case o.data != nil:
		set += ", #d = if_not_exists(" + b.Name("#d", lockitem.Data) + ", " + b.Value(":d", &types.AttributeValueMemberB{Value: o.data}) + ")"
		w.dataIfAbsent = kept()
	}
	i := 0
	for name, v := range o.additionalAttributes {
		n, vv := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		set += ", " + b.Name(n, name) + " = " + b.Value(vv, v)
		w.set[name] = v
		i++
	}
	// The fencing token goes up by one on every acquisition. A new item
	// starts from the current time in microseconds rather than from zero, so
	// that tokens keep increasing when an item is deleted (on release or by
	// TTL) and created again, and an owner's token never names two
	// acquisitions of one key.
	set += ", " + b.Name("#f", lockitem.FencingToken) + " = if_not_exists(#f, " +
		b.Value(":base", lockitem.N(w.tokenBase)) + ") + " + b.Value(":one", lockitem.N(1))
	if sess == nil {
		set += c.expirySets(b, sent, o.lease, rvn)
		w.setExpiry(b.Values, c.cfg.ttlAttribute)
	}

	cond := "attribute_not_exists(" + b.Name("#pk", c.cfg.partitionKeyName) + ") OR attribute_exists(#r)"
	if takeover != "" {
		cond += " OR #v = " + b.Value(":stale", lockitem.S(takeover))
	}
	if o.onlyIfLockAlreadyExist {
		cond = "attribute_exists(#pk) AND (" + cond + ")"
	}
	if q != nil {
		cond, remove = q.expr(b, cond, remove)
		w.queueRemove = q.remove
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 c.itemKeyOf(key, sortKey),
		UpdateExpression:                    aws.String(set + remove),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.Names,
		ExpressionAttributeValues:           b.ValuesOrNil(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, w
}

// acquiredItem is what an acquiring write writes, to build the new item
// from the old one.
type acquiredItem struct {
	set          map[string]types.AttributeValue
	dataIfAbsent types.AttributeValue // data, where the item has none
	remove       []string
	removeArray  [5]string // remove's first array: at most five names in the common case
	queueRemove  []string  // entries removed from the fair queue
	tokenBase    uint64    // the fencing token of an item that has none
	// fresh is the record of the item the write creates where there was
	// none, as decoding after's item would read it; nil: decode that item
	// (plainAcquireWrite sets it).
	fresh *lockRecord
}

// setExpiry records the stored expiry and the TTL that values write (see
// expiryValues).
func (w *acquiredItem) setExpiry(values map[string]types.AttributeValue, ttlAttribute string) {
	for _, e := range [...]struct{ alias, attr string }{{":x", lockitem.LeaseExpiresAt}, {":xr", lockitem.LeaseExpiresRVN}, {":t", ttlAttribute}} {
		if v, ok := values[e.alias]; ok {
			w.set[e.attr] = v
		}
	}
}

// after is the item as the write left it, given key and the item before
// (nil or empty when there was none).
func (w *acquiredItem) after(key, old map[string]types.AttributeValue) map[string]types.AttributeValue {
	item := make(map[string]types.AttributeValue, len(old)+len(w.set)+3)
	maps.Copy(item, old)
	maps.Copy(item, key)
	for _, name := range w.remove {
		delete(item, name)
	}
	if _, ok := item[lockitem.Data]; !ok && w.dataIfAbsent != nil {
		item[lockitem.Data] = w.dataIfAbsent
	}
	maps.Copy(item, w.set)
	token, err := uintAttr(old, lockitem.FencingToken)
	switch _, had := old[lockitem.FencingToken]; {
	case err != nil || token == math.MaxUint64:
		// DynamoDB added one to a number this client cannot read: so
		// cannot the lock (decoding the item fails, as it would have).
		item[lockitem.FencingToken] = lockitem.S("unreadable")
	case had:
		item[lockitem.FencingToken] = lockitem.N(token + 1)
	default:
		item[lockitem.FencingToken] = lockitem.N(w.tokenBase + 1)
	}
	if q, ok := item[lockitem.FairQueue].(*types.AttributeValueMemberM); ok && len(w.queueRemove) > 0 {
		left := maps.Clone(q.Value)
		for _, id := range w.queueRemove {
			delete(left, id)
		}
		item[lockitem.FairQueue] = &types.AttributeValueMemberM{Value: left}
	}
	return item
}

// carriesRVN reports whether item's record version number is rvn, whether
// or not the rest of it can be decoded.
func carriesRVN(item map[string]types.AttributeValue, rvn string) bool {
	v, ok := item[lockitem.RVN].(*types.AttributeValueMemberS)
	return ok && v.Value == rvn
}

// transactUpdate turns the UpdateItem that acquires one key into the same
// update inside a transaction (which cannot return the new item).
func transactUpdate(in *dynamodb.UpdateItemInput) *types.Update {
	return &types.Update{
		TableName:                           in.TableName,
		Key:                                 in.Key,
		UpdateExpression:                    in.UpdateExpression,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
