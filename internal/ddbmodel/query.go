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
// "pk = :v", optionally AND a sort key condition), in sort key order
// (reversed with ScanIndexForward false), paginated by Limit and
// ExclusiveStartKey; with Select COUNT, their number only.
func (m *Model) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.query(in)
	m.done(ctx, "Query", in, err, nil)
	return out, err
}

func (m *Model) query(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	if err := checkTableName(in.TableName); err != nil {
		return nil, err
	}
	if err := legacy(map[string]bool{"KeyConditions": in.KeyConditions != nil, "QueryFilter": in.QueryFilter != nil,
		"ConditionalOperator": in.ConditionalOperator != "", "AttributesToGet": in.AttributesToGet != nil}); err != nil {
		return nil, err
	}
	if in.KeyConditionExpression == nil {
		return nil, errUnsupported("Query without KeyConditionExpression")
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil {
		return nil, errUnsupported("Query filters, indexes and projections")
	}
	if err := checkRead(in.Limit, in.Select, "Querying"); err != nil {
		return nil, err
	}
	if err := checkReturnCapacity(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	values, err := exprParams{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, hasExpr: true}.check()
	if err != nil {
		return nil, err
	}
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	ph := newPlaceholders(in.ExpressionAttributeNames, values)
	c, err := parseConditionOf("KeyConditionExpression", *in.KeyConditionExpression, ph)
	if err != nil {
		return nil, err
	}
	if err := ph.checkAllUsed(); err != nil {
		return nil, err
	}
	pk, err := keyCondition(c, t)
	if err != nil {
		return nil, err
	}
	var keys []string
	for k, it := range t.items {
		if equal(it[t.pk], pk) {
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
	if in.ScanIndexForward != nil && !*in.ScanIndexForward {
		slices.Reverse(keys)
	}
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.QueryOutput {
		units := m.chargeRead(t, items, in.ConsistentRead)
		out := &dynamodb.QueryOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last,
			ConsumedCapacity: consumed(in.ReturnConsumedCapacity, t.name, units)}
		if in.Select == types.SelectCount {
			out.Items = nil
		}
		return out
	})
}

// checkRead validates a Query's or a Scan's Limit and Select (doing names
// the operation in Select's message).
func checkRead(limit *int32, sel types.Select, doing string) error {
	if limit != nil && *limit < 1 {
		return validation("Limit must be greater than or equal to 1")
	}
	switch sel {
	case "", types.SelectAllAttributes, types.SelectCount:
		return nil
	case types.SelectSpecificAttributes:
		return validation("Must specify the AttributesToGet or ProjectionExpression when choosing to get SPECIFIC_ATTRIBUTES")
	case types.SelectAllProjectedAttributes:
		return validation("ALL_PROJECTED_ATTRIBUTES can be used only when %s using an IndexName", doing)
	}
	return validation("Select must be ALL_ATTRIBUTES, ALL_PROJECTED_ATTRIBUTES, COUNT, or SPECIFIC_ATTRIBUTES")
}

// keyCondition checks a Query's key condition as DynamoDB does: the
// partition key compared with = to a value, AND at most one condition on
// the sort key (=, <, <=, >, >=, BETWEEN or begins_with of a value), values
// of the key's type. It returns the partition key's value.
func keyCondition(c cond, t *table) (types.AttributeValue, error) {
	var parts []cond
	var flatten func(cond)
	flatten = func(c cond) {
		if a, ok := c.(andCond); ok {
			flatten(a.l)
			flatten(a.r)
			return
		}
		parts = append(parts, c)
	}
	flatten(c)
	invalidOp := func(op string) error {
		return validation("Invalid operator used in KeyConditionExpression: %s", op)
	}
	notSupported := validation("Query key condition not supported")
	var pk types.AttributeValue
	seen := map[string]bool{}
	var checkType []struct {
		name string
		v    types.AttributeValue
	}
	use := func(o operand, vals ...operand) (string, error) {
		if o.size != nil {
			return "", validation("KeyConditionExpressions cannot contain nested operations")
		}
		for _, v := range vals {
			if v.size != nil {
				return "", validation("KeyConditionExpressions cannot contain nested operations")
			}
			if !v.literal() {
				return "", notSupported
			}
		}
		if len(o.path) != 1 {
			return "", notSupported
		}
		if o.path.top() != t.pk && o.path.top() != t.sk {
			// Read as a condition on a key that is not there (DynamoDB
			// Local 3.3.1's answers).
			if t.sk != "" {
				return "", validation("Query condition missed key schema element")
			}
			return "", notSupported
		}
		name := o.path.top()
		if seen[name] {
			return "", validation("KeyConditionExpressions must only contain one condition per key")
		}
		seen[name] = true
		for _, v := range vals {
			checkType = append(checkType, struct {
				name string
				v    types.AttributeValue
			}{name, v.val})
		}
		return name, nil
	}
	for _, p := range parts {
		switch p := p.(type) {
		case orCond:
			return nil, invalidOp("OR")
		case notCond:
			return nil, invalidOp("NOT")
		case inCond:
			return nil, invalidOp("IN")
		case existsCond:
			if p.want {
				return nil, invalidOp("attribute_exists")
			}
			return nil, invalidOp("attribute_not_exists")
		case cmpCond:
			if p.op == "<>" {
				return nil, invalidOp("<>")
			}
			path, val := p.l, p.r
			if p.l.literal() {
				path, val = p.r, p.l
			}
			name, err := use(path, val)
			if err != nil {
				return nil, err
			}
			if name == t.pk {
				if p.op != "=" {
					return nil, notSupported
				}
				pk = val.val
			}
		case betweenCond:
			if name, err := use(p.v, p.lo, p.hi); err != nil {
				return nil, err
			} else if name == t.pk {
				return nil, notSupported
			}
		case beginsCond:
			if name, err := use(p.l, p.r); err != nil {
				return nil, err
			} else if name == t.pk {
				return nil, notSupported
			}
		default:
			return nil, notSupported
		}
	}
	if pk == nil {
		return nil, validation("Query condition missed key schema element: %s", t.pk)
	}
	for _, c := range checkType {
		typ := t.pkType
		if c.name == t.sk {
			typ = t.skType
		}
		if typeName(c.v) != string(typ) {
			return nil, validation("One or more parameter values were invalid: Condition parameter type does not match schema type")
		}
	}
	return pk, nil
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
	if err := checkTableName(in.TableName); err != nil {
		return nil, err
	}
	if err := legacy(map[string]bool{"ScanFilter": in.ScanFilter != nil, "ConditionalOperator": in.ConditionalOperator != "",
		"AttributesToGet": in.AttributesToGet != nil}); err != nil {
		return nil, err
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil || in.Segment != nil || in.TotalSegments != nil {
		return nil, errUnsupported("Scan filters, indexes, projections and segments")
	}
	if err := checkRead(in.Limit, in.Select, "Scanning"); err != nil {
		return nil, err
	}
	if err := checkReturnCapacity(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if _, err := (exprParams{names: in.ExpressionAttributeNames, values: in.ExpressionAttributeValues, absent: "FilterExpression is null"}).check(); err != nil {
		return nil, err
	}
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	keys := slices.Sorted(maps.Keys(t.items))
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.ScanOutput {
		units := m.chargeRead(t, items, in.ConsistentRead)
		out := &dynamodb.ScanOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last,
			ConsumedCapacity: consumed(in.ReturnConsumedCapacity, t.name, units)}
		if in.Select == types.SelectCount {
			out.Items = nil
		}
		return out
	})
}

// chargeRead charges a page of a Query or Scan that returned items: their
// sizes together, rounded up to 4 KB.
func (m *Model) chargeRead(t *table, items []Item, consistent *bool) float64 {
	n := 0
	for _, it := range items {
		n += itemBytes(it)
	}
	units := readUnits(n, aws.ToBool(consistent))
	m.charge(t.name, units, 0)
	return units
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
