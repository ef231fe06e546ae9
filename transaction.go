package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// TransactionCondition returns a ConditionCheck on the lock item to put in
// your own TransactWriteItems call: the transaction then commits only while
// this owner still holds this acquisition of the lock (same owner, same
// fencing token, not released). It does not depend on the record version
// number, so it stays valid across heartbeats.
//
// If another client took the lock over, the transaction fails with a
// *types.TransactionCanceledException whose reason for this item is
// "ConditionalCheckFailed". That is what makes writes safe even when this
// process was paused past its lease: see the package documentation.
//
// For a nil lock or a read-only view (from [Client.Get] or a listing) it
// returns a zero TransactWriteItem, which DynamoDB rejects, so the
// transaction cannot commit.
func (l *Lock) TransactionCondition() types.TransactWriteItem {
	if l == nil || l.client == nil || l.kind == lockView {
		return types.TransactWriteItem{}
	}
	c := l.client
	b := lockitem.NewExpr()
	l.mu.Lock()
	cond := l.guardCondition(b)
	l.mu.Unlock()
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 l.itemKey(),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.Names,
		ExpressionAttributeValues:           b.ValuesOrNil(), // a reader's condition has none
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// guardCondition: this owner, this acquisition (fencing token, or the RVN
// for an item without one), not released.
func (l *Lock) guardCondition(b *lockitem.Expr) string {
	return l.shapeOf().guard(b, l)
}

// TransactionWithRefresh returns the check of [Lock.TransactionCondition]
// as an Update that also renews the lease (a fresh record version number
// and the lease duration), plus a function to call with the result of your
// TransactWriteItems call. That function records the renewal in the lock
// when the transaction committed, and marks the lock lost when the
// transaction was cancelled because this lock's item no longer belongs to
// this acquisition (confirmed with one consistent read of the item, since a
// cancellation reason does not name its table); it returns its arguments
// unchanged.
//
// It is safe while background heartbeats run: a heartbeat that finds the
// record version number moved by this transaction recognises the
// acquisition by owner and fencing token and goes on. The other way round,
// a heartbeat that lands between this call and the transaction makes the
// transaction fail (cancelled, the lock still held): build a new item and
// retry. Never send one item twice after the lock was renewed in between;
// call TransactionWithRefresh for each attempt. With background heartbeats
// running, [Lock.TransactionCondition] alone is usually what you want.
//
// Until its outcome is known, each refresh is a write that may land, and
// the lock's later writes accept its record version number (one operand
// of a condition's IN, which DynamoDB limits to 100). Call the returned
// function with every outcome: a transaction that DynamoDB cancelled
// (*types.TransactionCanceledException: all or nothing, so this item did
// not apply either, whatever the reasons say) stops counting at once; one
// whose answer was lost counts until a later renewal of the lock lands.
// (The SDK sends one ClientRequestToken with all its attempts of a call,
// so a cancellation answers for the earlier attempts too.) While 64
// refreshes or more of the lock are in doubt, it builds none: it returns a
// zero TransactWriteItem, which DynamoDB rejects, and the function's error
// matches [ErrWritesInDoubt]; the next heartbeat that lands clears them.
//
// A lock held by a session ([WithSession]) has no lease of its own: it
// returns TransactionCondition's check, and a function that returns its
// arguments; the session's heartbeat renews the lease.
func (l *Lock) TransactionWithRefresh() (types.TransactWriteItem, func(*dynamodb.TransactWriteItemsOutput, error) (*dynamodb.TransactWriteItemsOutput, error)) {
	same := func(out *dynamodb.TransactWriteItemsOutput, err error) (*dynamodb.TransactWriteItemsOutput, error) {
		return out, err
	}
	if l != nil && l.heldBy() != nil {
		// A session's lock has no lease of its own: the check alone, and
		// the session's heartbeat renews (docs/SESSIONS.md).
		return l.TransactionCondition(), same
	}
	if l == nil || l.client == nil || l.kind == lockView || !l.shapeOf().refreshable() {
		return types.TransactWriteItem{}, same
	}
	c := l.client
	b := lockitem.NewExpr()
	l.mu.Lock()
	if n := len(l.renewal.maybe); n >= maxRefreshesInDoubt {
		l.mu.Unlock()
		refused := fmt.Errorf("%w: lock %q has %d writes without an answer (at most %d); the next heartbeat that lands clears them",
			ErrWritesInDoubt, l.partitionKey, n, maxRefreshesInDoubt)
		return types.TransactWriteItem{}, func(out *dynamodb.TransactWriteItemsOutput, err error) (*dynamodb.TransactWriteItemsOutput, error) {
			return out, joinErrors(refused, err)
		}
	}
	l.renewal.built++
	w := &renewal{seq: l.renewal.built, rvn: newRVNFor(l), sent: l.now(), lease: l.leaseDuration}
	// Heartbeats whose answer was lost may have moved the RVN: accept them.
	cond := l.conditionLocked(b, w.rvn)
	if l.fencingToken > 0 {
		cond += " AND " + b.Name("#f", lockitem.FencingToken) + " = " + b.Value(":f", lockitem.N(l.fencingToken))
	}
	// The caller may send it at any time, and its answer may be lost.
	moved := l.mayLandLocked(w)
	l.mu.Unlock()
	if moved {
		c.sched.notify(l)
	}
	update := "SET #v = :v, " + b.Name("#l", lockitem.LeaseDuration) + " = " + b.Value(":l", lockitem.S(lockitem.FormatLease(w.lease))) +
		c.expirySets(b, w.sent, w.lease, w.rvn)
	item := types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 l.itemKey(),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.Names,
		ExpressionAttributeValues:           b.Values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	doubt := false // an earlier outcome given for this item left it in doubt; guarded by l.mu
	return item, func(out *dynamodb.TransactWriteItemsOutput, err error) (*dynamodb.TransactWriteItemsOutput, error) {
		if err == nil {
			// The lease counts from before the transaction was sent.
			// A transaction returns no item. Its writes stand; a lock that
			// ended meanwhile stays ended, and its item expires with the lease.
			_ = l.renewed(w, nil)
			return out, err
		}
		var tce *types.TransactionCanceledException
		cancelled := errors.As(err, &tce)
		l.mu.Lock()
		if cancelled && !doubt {
			l.forgetLocked(w.seq) // cancelled: it did not apply
		}
		doubt = doubt || !cancelled
		l.mu.Unlock()
		if cancelled && l.mayBeCancelledHere(tce) {
			l.checkStillOurs()
		}
		return out, err
	}
}

// maxRefreshesInDoubt bounds the guarded refreshes whose outcome is not
// known: beyond it TransactionWithRefresh builds none, leaving room in a
// condition's IN (maxINOperands) for heartbeats. TransactionWithRefresh's
// doc states its value.
const maxRefreshesInDoubt = 64

// mayBeCancelledHere reports whether one of the cancellation reasons could
// be this lock's item failing its condition: a ConditionalCheckFailed
// reason whose item has this lock's key. Reasons do not name their table,
// so an item of another table with the same key value looks the same.
func (l *Lock) mayBeCancelledHere(tce *types.TransactionCanceledException) bool {
	c := l.client
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" || len(r.Item) == 0 {
			continue
		}
		pk, _ := r.Item[c.cfg.partitionKeyName].(*types.AttributeValueMemberS)
		if pk == nil || pk.Value != l.partitionKey {
			continue
		}
		if l.sortKey != nil {
			sk, _ := r.Item[c.cfg.sortKeyName].(*types.AttributeValueMemberS)
			if sk == nil || sk.Value != *l.sortKey {
				continue
			}
		}
		return true
	}
	return false
}

// checkStillOurs reads the lock's item once (consistently) and marks the
// lock lost when the item names another owner or fencing token. It follows
// no RVN: the read may be older than a
// heartbeat that lands meanwhile, and heartbeats recognise this
// acquisition's item themselves. A failed read decides nothing: the next
// heartbeat will.
func (l *Lock) checkStillOurs() {
	c := l.client
	ctx, cancel := c.withTimeout(context.Background(), checkTimeout)
	defer cancel()
	item, err := c.getItem(ctx, l.itemKey())
	if err != nil {
		return
	}
	// Only an item that names another owner or fencing token is a loss: one
	// released or deleted may be this holder's own release landing (the
	// next heartbeat tells otherwise).
	// A write of this lock in flight (its release, whose landing may be
	// what let another owner in, or a heartbeat) tells instead.
	if rec, ours := l.ownItem(item); rec != nil && !ours && l.tryTakeWrites() {
		defer l.giveWrites()
		l.lose(ErrLockTakenOver, errors.New("dynamolock: a guarded transaction was cancelled and the lock item is no longer this acquisition's"))
	}
}

// checkTimeout bounds the read that confirms a cancelled transaction's cause.
const checkTimeout = 5 * time.Second
