package dynamolock

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// AllLocks lists every lock item in the table with a consistent Scan,
// fetching one page at a time as the loop asks for more. Each *Lock is a
// read-only view (owner, lease, released state, fencing token, data,
// additional attributes, sort key); a lock this client holds is yielded as
// the live lock. An item that cannot be interpreted, or a failed page,
// yields a nil lock and the error; the listing goes on after a bad item and
// stops after a failed page. It needs Scan (ErrUnsupportedOperation
// otherwise).
func (c *Client) AllLocks(ctx context.Context) iter.Seq2[*Lock, error] {
	return func(yield func(*Lock, error) bool) {
		if err := c.enter(ctx); err != nil {
			yield(nil, err)
			return
		}
		if !c.canScan() {
			yield(nil, unsupported("AllLocks", "Scan"))
			return
		}
		in := &dynamodb.ScanInput{TableName: aws.String(c.cfg.tableName), ConsistentRead: aws.Bool(true)}
		c.paginate(ctx, func(start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
			in.ExclusiveStartKey = start
			out, err := c.scan(ctx, "AllLocks", in)
			if err != nil {
				return nil, nil, fmt.Errorf("dynamolock: scan %q: %w", c.cfg.tableName, err)
			}
			return out.Items, out.LastEvaluatedKey, nil
		}, yield)
	}
}

// LocksByPartitionKey lists the lock items under partition key key, one
// per sort key value, with a consistent Query paginated as the loop asks
// for more. Views and errors as in [Client.AllLocks]. It needs Query.
func (c *Client) LocksByPartitionKey(ctx context.Context, key string) iter.Seq2[*Lock, error] {
	return func(yield func(*Lock, error) bool) {
		if err := c.enter(ctx); err != nil {
			yield(nil, err)
			return
		}
		if err := validateKey(key); err != nil {
			yield(nil, err)
			return
		}
		if !c.canQuery() {
			yield(nil, unsupported("LocksByPartitionKey", "Query"))
			return
		}
		b := lockitem.NewExpr()
		in := &dynamodb.QueryInput{
			TableName:                 aws.String(c.cfg.tableName),
			ConsistentRead:            aws.Bool(true),
			KeyConditionExpression:    aws.String(b.Name("#pk", c.cfg.partitionKeyName) + " = " + b.Value(":pk", lockitem.S(key))),
			ExpressionAttributeNames:  b.Names,
			ExpressionAttributeValues: b.Values,
		}
		c.paginate(ctx, func(start map[string]types.AttributeValue) ([]map[string]types.AttributeValue, map[string]types.AttributeValue, error) {
			in.ExclusiveStartKey = start
			out, err := c.query(ctx, "LocksByPartitionKey", in)
			if err != nil {
				return nil, nil, fmt.Errorf("dynamolock: query %q for key %q: %w", c.cfg.tableName, key, err)
			}
			return out.Items, out.LastEvaluatedKey, nil
		}, yield)
	}
}

// paginate yields the views of every page's items, fetching the next page
// only when the loop asks for more, and stops after a failed page.
func (c *Client) paginate(ctx context.Context, page func(start map[string]types.AttributeValue) (items []map[string]types.AttributeValue, next map[string]types.AttributeValue, err error), yield func(*Lock, error) bool) {
	var start map[string]types.AttributeValue
	began := c.now()
	for {
		items, next, err := page(start)
		if err != nil {
			yield(nil, err)
			return
		}
		if !c.yieldItems(ctx, items, began, yield) || len(next) == 0 {
			return
		}
		start = next
	}
}

// yieldItems yields the views of items, listed by a listing that began at
// began: a session holding many of them is read once by the listing.
func (c *Client) yieldItems(ctx context.Context, items []map[string]types.AttributeValue, began time.Time, yield func(*Lock, error) bool) bool {
	for _, item := range items {
		l, err := c.viewOf(ctx, item, began)
		if !yield(l, err) {
			return false
		}
	}
	return true
}

// viewOf turns a listed item into a read-only view, or the live lock when
// this client holds exactly that item. A session's lock is read through its
// session, read once since the listing began.
func (c *Client) viewOf(ctx context.Context, item map[string]types.AttributeValue, began time.Time) (*Lock, error) {
	pk, ok := item[c.cfg.partitionKeyName].(*types.AttributeValueMemberS)
	if !ok {
		return nil, &ItemFormatError{Attribute: c.cfg.partitionKeyName, Reason: "missing or not of type S"}
	}
	var sk *string
	if c.cfg.sortKeyName != "" {
		v, ok := item[c.cfg.sortKeyName].(*types.AttributeValueMemberS)
		if !ok {
			return nil, &ItemFormatError{Attribute: c.cfg.sortKeyName, Reason: "missing or not of type S"}
		}
		sk = &v.Value
	}
	if l := c.here.held(registryKey(pk.Value, sk)); l != nil {
		return l, nil
	}
	rec, err := c.cfg.schema.decodeItem(item)
	if err != nil {
		return nil, fmt.Errorf("dynamolock: lock %q: %w", pk.Value, err)
	}
	if err := c.throughSession(ctx, rec, c.since(began)); err != nil {
		return nil, fmt.Errorf("dynamolock: lock %q: %w", pk.Value, err)
	}
	return newReadOnlyLock(c, pk.Value, sk, rec, c.now()), nil
}
