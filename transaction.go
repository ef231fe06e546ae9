package dynamolock

import (
	"errors"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
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
	if l == nil || l.client == nil || l.readOnly() {
		return types.TransactWriteItem{}
	}
	c := l.client
	b := newExprBuilder()
	l.mu.Lock()
	cond := l.guardCondition(b)
	l.mu.Unlock()
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                           aws.String(c.tableName),
		Key:                                 l.itemKey(),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
}

// guardCondition: this owner, this acquisition (fencing token, or the RVN
// for an item without one), not released.
func (l *Lock) guardCondition(b *exprBuilder) string {
	cond := b.name("#o", attrOwnerName) + " = " + b.value(":o", attrS(l.ownerName)) +
		" AND attribute_not_exists(" + b.name("#r", attrIsReleased) + ")"
	if l.fencingToken > 0 {
		return cond + " AND " + b.name("#f", attrFencingToken) + " = " + b.value(":f", attrN(l.fencingToken))
	}
	return cond + " AND " + b.name("#v", attrRVN) + " = " + b.value(":v", attrS(l.rvn))
}

// TransactionWithRefresh returns the check of [Lock.TransactionCondition]
// as an Update that also renews the lease (a fresh record version number
// and the lease duration), plus a function to call with the result of your
// TransactWriteItems call. That function records the renewal in the lock
// when the transaction committed, and marks the lock lost when the
// transaction was cancelled because this item's condition failed; it
// returns its arguments unchanged.
//
// It is safe while background heartbeats run: a heartbeat that finds the
// record version number moved by this transaction recognises the
// acquisition by owner and fencing token and goes on. The other way round,
// a heartbeat that lands between this call and the transaction makes the
// transaction fail (cancelled, the lock still held): build a new item and
// retry. Never send one item twice after the lock was renewed in between;
// call TransactionWithRefresh for each attempt. With background heartbeats
// running, [Lock.TransactionCondition] alone is usually what you want.
func (l *Lock) TransactionWithRefresh() (types.TransactWriteItem, func(*dynamodb.TransactWriteItemsOutput, error) (*dynamodb.TransactWriteItemsOutput, error)) {
	if l == nil || l.client == nil || l.readOnly() {
		return types.TransactWriteItem{}, func(out *dynamodb.TransactWriteItemsOutput, err error) (*dynamodb.TransactWriteItemsOutput, error) {
			return out, err
		}
	}
	c := l.client
	b := newExprBuilder()
	rvn := newRVN()
	// A heartbeat in flight has its RVN pending: the condition accepts it.
	created := time.Now()
	l.mu.Lock()
	cond := l.guardCondition(b) + " AND " + b.name("#v", attrRVN) + " IN (" + b.value(":cur", attrS(l.rvn)) +
		", " + b.value(":nv", attrS(rvn))
	if l.pending != nil {
		cond += ", " + b.value(":pv", attrS(l.pending.rvn))
	}
	cond += ")"
	lease := l.leaseDuration
	l.mu.Unlock()
	update := "SET #v = :nv, " + b.name("#l", attrLeaseDuration) + " = " + b.value(":l", attrS(formatLease(lease))) +
		c.expirySets(b, created, lease)
	item := types.TransactWriteItem{Update: &types.Update{
		TableName:                           aws.String(c.tableName),
		Key:                                 l.itemKey(),
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	return item, func(out *dynamodb.TransactWriteItemsOutput, err error) (*dynamodb.TransactWriteItemsOutput, error) {
		if err == nil {
			// The lease counts from before the transaction was sent.
			l.renewed(rvn, created, lease, nil)
			return out, err
		}
		var tce *types.TransactionCanceledException
		if errors.As(err, &tce) {
			if item := l.cancelledHere(tce); item != nil && !l.adoptMovedRVN(item) {
				l.lose(ErrLockTakenOver, err)
			}
		}
		return out, err
	}
}

// cancelledHere returns the item that came back with a cancellation reason
// for this lock's condition, or nil when the transaction failed elsewhere.
func (l *Lock) cancelledHere(tce *types.TransactionCanceledException) map[string]types.AttributeValue {
	c := l.client
	for _, r := range tce.CancellationReasons {
		if aws.ToString(r.Code) != "ConditionalCheckFailed" {
			continue
		}
		if len(r.Item) == 0 {
			continue
		}
		pk, _ := r.Item[c.partitionKeyName].(*types.AttributeValueMemberS)
		if pk == nil || pk.Value != l.partitionKey {
			continue
		}
		if l.sortKey != nil {
			sk, _ := r.Item[c.sortKeyName].(*types.AttributeValueMemberS)
			if sk == nil || sk.Value != *l.sortKey {
				continue
			}
		}
		return r.Item
	}
	return nil
}

func (l *Lock) readOnly() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state == stateReadOnly
}
