package ddbmodel

import (
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// CreateTable creates an ACTIVE table at once.
func (m *Model) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := newTable(in)
	if err == nil && m.tables[t.name] != nil {
		err = &types.ResourceInUseException{Message: aws.String("Cannot create preexisting table")}
	}
	if err != nil {
		m.done(ctx, "CreateTable", in, err, nil)
		return nil, err
	}
	m.tables[t.name] = t
	m.done(ctx, "CreateTable", in, nil, nil)
	return &dynamodb.CreateTableOutput{TableDescription: t.describe()}, nil
}

func newTable(in *dynamodb.CreateTableInput) (*table, error) {
	name := aws.ToString(in.TableName)
	if len(name) < 3 || len(name) > 255 {
		return nil, validation("TableName must be at least 3 characters long and at most 255 characters long")
	}
	t := &table{name: name, items: map[string]Item{}, keySchem: slices.Clone(in.KeySchema), attrDefs: slices.Clone(in.AttributeDefinitions)}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	for _, k := range in.KeySchema {
		n := aws.ToString(k.AttributeName)
		typ, ok := attrTypes[n]
		if !ok {
			return nil, validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions")
		}
		switch k.KeyType {
		case types.KeyTypeHash:
			if t.pk != "" {
				return nil, validation("Too many hash keys")
			}
			t.pk, t.pkType = n, typ
		case types.KeyTypeRange:
			if t.sk != "" {
				return nil, validation("Too many range keys")
			}
			t.sk, t.skType = n, typ
		default:
			return nil, validation("Invalid KeyType")
		}
	}
	if t.pk == "" {
		return nil, validation("No Hash Key specified in schema.  All Dynamo DB tables must have exactly one hash key")
	}
	if len(in.AttributeDefinitions) != len(in.KeySchema) {
		return nil, validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	return t, nil
}

func (t *table) describe() *types.TableDescription {
	return &types.TableDescription{
		TableName:            aws.String(t.name),
		TableStatus:          types.TableStatusActive,
		KeySchema:            slices.Clone(t.keySchem),
		AttributeDefinitions: slices.Clone(t.attrDefs),
		ItemCount:            aws.Int64(int64(len(t.items))),
	}
}

// DescribeTable describes a table; every table is ACTIVE.
func (m *Model) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[aws.ToString(in.TableName)]
	if t == nil {
		err := &types.ResourceNotFoundException{Message: aws.String("Cannot do operations on a non-existent table")}
		m.done(ctx, "DescribeTable", in, err, nil)
		return nil, err
	}
	m.done(ctx, "DescribeTable", in, nil, nil)
	return &dynamodb.DescribeTableOutput{Table: t.describe()}, nil
}

// DescribeGlobalTable describes a global table of the legacy version
// (2017.11.29). The model has none (it has one Region), so it answers as
// the service does for every table that is not one: a
// GlobalTableNotFoundException (or, for a name DynamoDB's length limits
// refuse, a ValidationException).
func (m *Model) DescribeGlobalTable(ctx context.Context, in *dynamodb.DescribeGlobalTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeGlobalTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var err error
	if n := len(aws.ToString(in.GlobalTableName)); n < 3 || n > 255 {
		err = validation("1 validation error detected: Value at 'globalTableName' failed to satisfy constraint: Member must have length between 3 and 255")
	} else {
		err = &types.GlobalTableNotFoundException{Message: aws.String("Global table not found")}
	}
	m.done(ctx, "DescribeGlobalTable", in, err, nil)
	return nil, err
}

func (m *Model) table(name *string) (*table, error) {
	if t := m.tables[aws.ToString(name)]; t != nil {
		return t, nil
	}
	return nil, notFound()
}

// key validates a primary key and returns its encoding and the key
// attributes.
func (t *table) key(k Item) (string, Item, error) {
	want := 1
	if t.sk != "" {
		want = 2
	}
	if len(k) != want {
		return "", nil, validation("The number of conditions on the keys is invalid")
	}
	pk, err := keyPart(k, t.pk, t.pkType, maxPartitionKey)
	if err != nil {
		return "", nil, err
	}
	sk := ""
	if t.sk != "" {
		if sk, err = keyPart(k, t.sk, t.skType, maxSortKey); err != nil {
			return "", nil, err
		}
	}
	return KeyString(pk, sk), cloneItem(k), nil
}

// keyLength rejects a key value of n bytes over max (maxPartitionKey or
// maxSortKey).
func keyLength(n, max int) error {
	if n > max {
		return validation("Hash primary key values must be under %d bytes, and range primary key values must be under %d bytes", maxPartitionKey, maxSortKey)
	}
	return nil
}

// keyPart is the key attribute name of k, of type typ, at most max bytes.
func keyPart(k Item, name string, typ types.ScalarAttributeType, max int) (string, error) {
	v, ok := k[name]
	if !ok {
		return "", validation("One of the required keys was not given a value")
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if typ != types.ScalarAttributeTypeS {
			break
		}
		if v.Value == "" {
			return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", name)
		}
		if err := keyLength(len(v.Value), max); err != nil {
			return "", err
		}
		return v.Value, nil
	case *types.AttributeValueMemberN:
		if typ != types.ScalarAttributeTypeN {
			break
		}
		n, ok := canonicalN(v.Value)
		if !ok {
			return "", validation("The parameter cannot be converted to a numeric value")
		}
		return n, nil
	case *types.AttributeValueMemberB:
		if typ != types.ScalarAttributeTypeB {
			break
		}
		if len(v.Value) == 0 {
			return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: %s", name)
		}
		if err := keyLength(len(v.Value), max); err != nil {
			return "", err
		}
		return string(v.Value), nil
	}
	return "", validation("One or more parameter values were invalid: Type mismatch for key")
}

func (t *table) keyNames() []string {
	if t.sk == "" {
		return []string{t.pk}
	}
	return []string{t.pk, t.sk}
}

// The messages of an item over the 400 KB limit: a whole item given (PutItem),
// and an item an update would leave.
const (
	msgTooLarge       = "Item size has exceeded the maximum allowed size"
	msgUpdateTooLarge = "Item size to update has exceeded the maximum allowed size"
)

// checkItem validates attribute values (numbers, empty sets) and the size
// limit, and normalises numbers.
func checkItem(it Item) (Item, error) {
	out, tooLarge, err := normalizeItem(it)
	if err == nil && tooLarge {
		err = validation(msgTooLarge)
	}
	return out, err
}

// normalizeItem validates attribute values (numbers, empty sets) and
// normalises numbers, and reports whether the item exceeds 400 KB (the
// size DynamoDB Local counts: names and values, 3 bytes per map or list and
// 1 per element, numbers in about half their digits; checked against it
// for items of nested maps to the byte).
func normalizeItem(it Item) (Item, bool, error) {
	out := make(Item, len(it))
	size := 0
	for k, v := range it {
		nv, err := checkValue(v)
		if err != nil {
			return nil, false, err
		}
		out[k] = nv
		size += len(k) + valueSize(nv)
	}
	return out, size > maxItem, nil
}

func checkValue(v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case nil:
		return nil, validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	case *types.AttributeValueMemberN:
		n, ok := canonicalN(v.Value)
		if !ok {
			return nil, validation("The parameter cannot be converted to a numeric value: %s", v.Value)
		}
		return &types.AttributeValueMemberN{Value: n}, nil
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An string set  may not be empty")
		}
	case *types.AttributeValueMemberNS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An number set  may not be empty")
		}
	case *types.AttributeValueMemberBS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: Binary sets should not be empty")
		}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			var err error
			if l[i], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case *types.AttributeValueMemberM:
		mm := make(Item, len(v.Value))
		for k, e := range v.Value {
			var err error
			if mm[k], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberM{Value: mm}, nil
	}
	return v, nil
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

// ---- single-item operations ----
