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
	if err := checkNewTableName(in.TableName); err != nil {
		return nil, err
	}
	if len(in.GlobalSecondaryIndexes) > 0 || len(in.LocalSecondaryIndexes) > 0 || in.StreamSpecification != nil {
		return nil, errUnsupported("secondary indexes and streams")
	}
	if err := checkCapacity(in.BillingMode, in.ProvisionedThroughput); err != nil {
		return nil, err
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

// checkCapacity validates a table's capacity mode: provisioned (the
// default) needs a throughput of at least 1 read and 1 write unit;
// on-demand takes none.
func checkCapacity(mode types.BillingMode, pt *types.ProvisionedThroughput) error {
	switch mode {
	case "", types.BillingModeProvisioned:
		if pt == nil {
			return validation("No provisioned throughput specified for the table")
		}
		if aws.ToInt64(pt.ReadCapacityUnits) < 1 || aws.ToInt64(pt.WriteCapacityUnits) < 1 {
			return validation("Table read and write throughput must be at least 1, and cannot be null")
		}
	case types.BillingModePayPerRequest:
		if pt != nil {
			// DynamoDB Local accepts it; the API's documentation says the
			// parameter cannot be given with PAY_PER_REQUEST (TestRefusals).
			return validation("One or more parameter values were invalid: Neither ReadCapacityUnits nor WriteCapacityUnits can be specified when BillingMode is PAY_PER_REQUEST")
		}
	default:
		return validation("1 validation error detected: Value '%s' at 'billingMode' failed to satisfy constraint: Member must satisfy enum value set: [PROVISIONED, PAY_PER_REQUEST]", mode)
	}
	return nil
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
	if err := checkTableName(in.TableName); err != nil {
		m.done(ctx, "DescribeTable", in, err, nil)
		return nil, err
	}
	t, err := m.table(in.TableName)
	if err != nil {
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

// table returns the table name names (a name, or a table ARN: see
// tableNameOf).
func (m *Model) table(name *string) (*table, error) {
	n, err := tableNameOf(name)
	if err != nil {
		return nil, err
	}
	if t := m.tables[n]; t != nil {
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
		n, msg := checkNumber(v.Value)
		if msg != "" {
			return "", validation("%s", msg)
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

// ---- single-item operations ----
