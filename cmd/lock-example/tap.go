package main

import (
	"context"
	"errors"
	"sync"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// itemTap is the DynamoDB client lock-example gives its lock client. It
// remembers the last whole item each call showed of each key: a read's
// item, a scanned page's items, and the item a failed condition returned.
// The library's views of a lock hold the exclusive holder only; from the
// item, list, show and the busy message also tell the shared holders of a
// read/write lock and the slots of a --limit run (see holders.go). It
// makes no call of its own.
type itemTap struct {
	*dynamodb.Client
	pk, sk string // the table's key attributes (sk: "" without a sort key)

	mu    sync.Mutex
	items map[[2]string]map[string]types.AttributeValue // by partition and sort key value
}

func newItemTap(db *dynamodb.Client, pk, sk string) *itemTap {
	return &itemTap{Client: db, pk: pk, sk: sk, items: map[[2]string]map[string]types.AttributeValue{}}
}

// item returns the last item seen of key under sort key value sortValue,
// or nil.
func (t *itemTap) item(key, sortValue string) map[string]types.AttributeValue {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.items[[2]string{key, sortValue}]
}

func (t *itemTap) record(item map[string]types.AttributeValue) {
	pk, ok := item[t.pk].(*types.AttributeValueMemberS)
	if !ok {
		return
	}
	var sk string
	if t.sk != "" {
		v, ok := item[t.sk].(*types.AttributeValueMemberS)
		if !ok {
			return
		}
		sk = v.Value
	}
	t.mu.Lock()
	t.items[[2]string{pk.Value, sk}] = item
	t.mu.Unlock()
}

// recordFailed records the item a failed condition returned.
func (t *itemTap) recordFailed(err error) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && len(ccf.Item) > 0 {
		t.record(ccf.Item)
	}
}

func (t *itemTap) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	out, err := t.Client.GetItem(ctx, in, opts...)
	if err == nil && len(out.Item) > 0 && in.ProjectionExpression == nil {
		t.record(out.Item)
	}
	return out, err
}

func (t *itemTap) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := t.Client.UpdateItem(ctx, in, opts...)
	t.recordFailed(err)
	return out, err
}

func (t *itemTap) Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	out, err := t.Client.Scan(ctx, in, opts...)
	if err == nil && in.ProjectionExpression == nil {
		for _, item := range out.Items {
			t.record(item)
		}
	}
	return out, err
}
