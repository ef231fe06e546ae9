package ddbmodel

import (
	"context"
	"maps"
	"slices"
	"sort"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Query returns the items of one partition key (KeyConditionExpression
// "pk = :v", optionally AND a sort key comparison), in sort key order,
// paginated by Limit and ExclusiveStartKey.
func (m *Model) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.query(in)
	m.done(ctx, "Query", in, err, nil)
	return out, err
}

func (m *Model) query(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.KeyConditionExpression == nil {
		return nil, errUnsupported("Query without KeyConditionExpression")
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil {
		return nil, errUnsupported("Query filters, indexes and projections")
	}
	ph := newPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	c, err := parseCondition(*in.KeyConditionExpression, ph)
	if err != nil {
		return nil, err
	}
	if err := ph.checkAllUsed(); err != nil {
		return nil, err
	}
	eq, ok := partitionEquality(c, t.pk)
	if !ok {
		return nil, validation("Query condition missed key schema element: %s", t.pk)
	}
	var keys []string
	for k, it := range t.items {
		if equal(it[t.pk], eq) {
			if ok, _ := c.eval(it); ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if t.sk == "" {
			return keys[i] < keys[j]
		}
		n, _ := compare(t.items[keys[i]][t.sk], t.items[keys[j]][t.sk])
		return n < 0
	})
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.QueryOutput {
		return &dynamodb.QueryOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last}
	})
}

// partitionEquality finds "pk = :v" at the top of a key condition.
func partitionEquality(c cond, pk string) (types.AttributeValue, bool) {
	switch c := c.(type) {
	case cmpCond:
		if c.op == "=" && len(c.l.path) == 1 && c.l.path.top() == pk && c.r.val != nil {
			return c.r.val, true
		}
	case andCond:
		if v, ok := partitionEquality(c.l, pk); ok {
			return v, true
		}
		return partitionEquality(c.r, pk)
	}
	return nil, false
}

// Scan returns every item of a table in key order, paginated by Limit and
// ExclusiveStartKey.
func (m *Model) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.scan(in)
	m.done(ctx, "Scan", in, err, nil)
	return out, err
}

func (m *Model) scan(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil || in.Segment != nil {
		return nil, errUnsupported("Scan filters, indexes, projections and segments")
	}
	keys := slices.Sorted(maps.Keys(t.items))
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.ScanOutput {
		return &dynamodb.ScanOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last}
	})
}

func paginate[O any](t *table, keys []string, start Item, limit *int32, out func([]Item, Item) *O) (*O, error) {
	if len(start) > 0 {
		sk, _, err := t.key(start)
		if err != nil {
			return nil, err
		}
		i := slices.Index(keys, sk)
		if i < 0 {
			// The start item is gone: resume after where it would sort.
			i = sort.SearchStrings(keys, sk) - 1
		}
		keys = keys[i+1:]
	}
	var last Item
	if n := int(aws.ToInt32(limit)); n > 0 && len(keys) > n {
		keys = keys[:n]
		it := t.items[keys[n-1]]
		last = Item{t.pk: it[t.pk]}
		if t.sk != "" {
			last[t.sk] = it[t.sk]
		}
	}
	items := make([]Item, len(keys))
	for i, k := range keys {
		items[i] = cloneItem(t.items[k])
	}
	return out(items, cloneItem(last)), nil
}

// ---- copies ----

func cloneItem(it Item) Item {
	if it == nil {
		return nil
	}
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = slices.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = cloneValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: cloneItem(v.Value)}
	}
	return v
}
