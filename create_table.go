package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

type describeTableAPI interface {
	DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

type updateTimeToLiveAPI interface {
	UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

func unsupported(feature, method string) error {
	return fmt.Errorf("%w: %s needs %s, which the DynamoDBClient given to New does not implement (*dynamodb.Client does)",
		ErrUnsupportedOperation, feature, method)
}

// WithTimeToLive enables DynamoDB time to live on the new table for the
// attribute name (see [WithTTLAttribute]). It needs UpdateTimeToLive.
func WithTimeToLive(name string) CreateTableOption {
	return func(o *createDynamoDBTableOptions) { o.timeToLiveAttribute = name }
}

// CreateTable creates a lock table, as CreateTableWithContext does with
// context.Background().
func (c *Client) CreateTable(tableName string, opts ...CreateTableOption) (*dynamodb.CreateTableOutput, error) {
	return c.CreateTableWithContext(context.Background(), tableName, opts...)
}

// CreateTableWithContext creates a lock table named tableName with a string
// partition key (the client's partition key name unless
// [WithCustomPartitionKeyName]) and, with [WithSortKeyName] or a client
// sort key, a string sort key. Billing is on demand unless
// [WithProvisionedThroughput]. When the DynamoDB client can DescribeTable,
// it waits until the table is ACTIVE (or ctx ends) before returning; then
// it enables TTL if [WithTimeToLive] was given.
func (c *Client) CreateTableWithContext(ctx context.Context, tableName string, opts ...CreateTableOption) (*dynamodb.CreateTableOutput, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	o := &createDynamoDBTableOptions{
		billingMode:      types.BillingModePayPerRequest,
		tableName:        tableName,
		partitionKeyName: c.partitionKeyName,
		sortKeyName:      c.sortKeyName,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	switch {
	case !tableNamePattern.MatchString(tableName):
		return nil, invalid("table name", tableName, "must be 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'")
	case o.partitionKeyName == "" || lockAttribute(o.partitionKeyName):
		return nil, invalid("WithCustomPartitionKeyName", o.partitionKeyName, "must not be empty or an attribute the lock itself uses")
	case lockAttribute(o.sortKeyName):
		return nil, invalid("WithSortKeyName", o.sortKeyName, "is an attribute the lock itself uses")
	case o.sortKeyName == o.partitionKeyName:
		return nil, invalid("WithSortKeyName", o.sortKeyName, "must differ from the partition key name")
	case o.billingMode == types.BillingModeProvisioned && o.provisionedThroughput == nil:
		return nil, invalid("WithProvisionedThroughput", nil, "must not be nil")
	}
	var ttl updateTimeToLiveAPI
	if o.timeToLiveAttribute != "" {
		var ok bool
		if ttl, ok = c.db.(updateTimeToLiveAPI); !ok {
			return nil, unsupported("WithTimeToLive", "UpdateTimeToLive")
		}
	}
	in := &dynamodb.CreateTableInput{
		TableName: aws.String(tableName),
		KeySchema: []types.KeySchemaElement{{AttributeName: aws.String(o.partitionKeyName), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(o.partitionKeyName), AttributeType: types.ScalarAttributeTypeS},
		},
		BillingMode:           o.billingMode,
		ProvisionedThroughput: o.provisionedThroughput,
		Tags:                  o.tags,
	}
	if o.sortKeyName != "" {
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(o.sortKeyName), KeyType: types.KeyTypeRange})
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(o.sortKeyName), AttributeType: types.ScalarAttributeTypeS})
	}
	out, err := c.db.CreateTable(ctx, in)
	c.metrics.call(ctx, "CreateTable")
	if err != nil {
		return nil, fmt.Errorf("dynamolock: create table %q: %w", tableName, err)
	}
	if dt, ok := c.db.(describeTableAPI); ok {
		if err := c.waitActive(ctx, dt, tableName); err != nil {
			return out, err
		}
	}
	if ttl != nil {
		_, err := ttl.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(tableName),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(o.timeToLiveAttribute),
				Enabled:       aws.Bool(true),
			},
		})
		c.metrics.call(ctx, "UpdateTimeToLive")
		if err != nil {
			return out, fmt.Errorf("dynamolock: enable TTL on %q for attribute %q: %w", tableName, o.timeToLiveAttribute, err)
		}
	}
	return out, nil
}

func (c *Client) waitActive(ctx context.Context, dt describeTableAPI, tableName string) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		out, err := dt.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(tableName)})
		c.metrics.call(ctx, "DescribeTable")
		if err != nil {
			return fmt.Errorf("dynamolock: wait for table %q: %w", tableName, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		if !sleepCtx(ctx, wait) {
			return fmt.Errorf("dynamolock: wait for table %q to become ACTIVE: %w", tableName, ctx.Err())
		}
	}
}

// TableExists reports whether the client's lock table exists, with one
// DescribeTable call.
func (c *Client) TableExists(ctx context.Context) (bool, error) {
	if c.isClosed() {
		return false, ErrClientClosed
	}
	dt, ok := c.db.(describeTableAPI)
	if !ok {
		return false, unsupported("TableExists", "DescribeTable")
	}
	_, err := dt.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(c.tableName)})
	c.metrics.call(ctx, "DescribeTable")
	var rnf *types.ResourceNotFoundException
	switch {
	case err == nil:
		return true, nil
	case errors.As(err, &rnf):
		return false, nil
	default:
		return false, fmt.Errorf("dynamolock: describe table %q: %w", c.tableName, err)
	}
}

// AssertTableExists returns nil when the lock table exists and an error
// matching [ErrTableNotFound] when it does not.
func (c *Client) AssertTableExists(ctx context.Context) error {
	ok, err := c.TableExists(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("%w: %q", ErrTableNotFound, c.tableName)
	}
	return nil
}
