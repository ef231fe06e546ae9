package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ReleaseLock releases lock, as ReleaseLockWithContext does with
// context.Background().
func (c *Client) ReleaseLock(lock *Lock, opts ...ReleaseLockOption) (bool, error) {
	return c.ReleaseLockWithContext(context.Background(), lock, opts...)
}

// ReleaseLockWithContext releases lock with one DynamoDB call conditioned on
// this owner and the lock's record version number: by default an UpdateItem
// that marks the item released and keeps it (so the fencing token keeps
// increasing), or a DeleteItem with [WithDeleteLock](true) or
// [WithDeleteLockOnRelease].
//
// It returns (true, nil) when the lock was released. It returns false and
// an error matching [ErrLockLost] when the lock was no longer this owner's
// (taken over, or lost earlier); [ErrLockAlreadyReleased] when it was
// released before; [ErrCannotReleaseNullLock] for a nil lock;
// [ErrOwnerMismatched] for a lock of another owner. On any other error the
// lock stays held and heartbeated, so the release can be retried;
// [Client.Close] retries it.
func (c *Client) ReleaseLockWithContext(ctx context.Context, lock *Lock, opts ...ReleaseLockOption) (bool, error) {
	if lock == nil {
		return false, ErrCannotReleaseNullLock
	}
	if c.isClosed() {
		return false, ErrClientClosed
	}
	o := &releaseLockOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if o.data != nil {
		if err := c.validateItemSize("WithDataAfterRelease", lock.partitionKey, o.data, lock.AdditionalAttributes()); err != nil {
			return false, err
		}
	}
	return c.releaseLock(ctx, lock, o)
}

func (c *Client) releaseLock(ctx context.Context, l *Lock, o *releaseLockOptions) (bool, error) {
	l.opMu.Lock()
	defer l.opMu.Unlock()

	l.mu.Lock()
	switch {
	case l.state == stateReleased:
		l.mu.Unlock()
		return false, ErrLockAlreadyReleased
	case l.state == stateLost:
		err := l.err
		l.mu.Unlock()
		return false, err
	case l.ownerName != c.ownerName || l.client != c:
		l.mu.Unlock()
		return false, fmt.Errorf("%w: lock %q is held by %q through another client, this client is %q",
			ErrOwnerMismatched, l.partitionKey, l.ownerName, c.ownerName)
	case l.state == stateReadOnly && l.itemReleased:
		l.mu.Unlock()
		return false, ErrLockAlreadyReleased
	}
	deleteLock := l.deleteOnRelease
	readOnly := l.state == stateReadOnly
	l.mu.Unlock()
	if o.deleteLock != nil {
		deleteLock = *o.deleteLock
	}

	var err error
	for adopt := 0; ; adopt++ {
		err = c.classify(ctx, c.sendRelease(ctx, l, deleteLock, o.data))
		var ccf *types.ConditionalCheckFailedException
		if readOnly || !errors.As(err, &ccf) || adopt >= 2 || !l.adoptMovedRVN(ccf.Item) {
			break
		}
	}
	if readOnly {
		// A view of our own owner's item (a force release): nothing local to end.
		if err != nil {
			return false, fmt.Errorf("dynamolock: release %q: %w", l.partitionKey, err)
		}
		l.log(slog.LevelInfo, "lock released")
		return true, nil
	}
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
	case errors.As(err, &ccf):
		return false, l.lose(ErrLockTakenOver, err)
	case o.bestEffort:
		l.log(slog.LevelWarn, "best-effort release failed; the lock expires after its lease", slogErr(err))
	default:
		return false, fmt.Errorf("dynamolock: release %q: %w", l.partitionKey, err)
	}
	if !deleteLock && o.data != nil {
		l.mu.Lock()
		l.data = o.data
		l.mu.Unlock()
	}
	l.end(stateReleased, ErrLockAlreadyReleased)
	l.log(slog.LevelInfo, "lock released")
	return true, nil
}

// sendRelease sends the one conditional write that releases l: conditioned
// on this owner and the RVN it holds (or the one a heartbeat whose answer
// was lost may have set).
func (c *Client) sendRelease(ctx context.Context, l *Lock, deleteLock bool, data []byte) error {
	l.mu.Lock()
	id := l.identityLocked()
	newRVN := ""
	if l.pending != nil {
		newRVN = l.pending.rvn
	}
	l.mu.Unlock()
	b := newExprBuilder()
	cond := id.condition(b, newRVN)
	var err error
	if deleteLock {
		_, err = c.db.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName:                           aws.String(c.tableName),
			Key:                                 l.itemKey(),
			ConditionExpression:                 aws.String(cond),
			ExpressionAttributeNames:            b.names,
			ExpressionAttributeValues:           b.values,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		c.metrics.call(ctx, "DeleteItem")
		return err
	}
	update := "SET " + b.name("#r", attrIsReleased) + " = " + b.value(":r", attrS("1"))
	if data != nil {
		update += ", " + b.name("#d", attrData) + " = " + b.value(":d", &types.AttributeValueMemberB{Value: data})
	}
	_, err = c.db.UpdateItem(ctx, c.guardedUpdate(l.itemKey(), b, update, cond))
	c.metrics.call(ctx, "UpdateItem")
	return err
}

// guardedUpdate is a conditional UpdateItem of a held lock's item that, on
// failure, returns the item (so the caller can tell whether it is still this
// acquisition's).
func (c *Client) guardedUpdate(key map[string]types.AttributeValue, b *exprBuilder, update, cond string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.tableName),
		Key:                                 key,
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
