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

func unsupported(feature, method string) error {
	return fmt.Errorf("%w: %s needs %s, which the DynamoDBClient given to New does not implement (*dynamodb.Client does)",
		ErrUnsupportedOperation, feature, method)
}

// WithTimeToLive enables DynamoDB time to live on the new table for the
// attribute name (see [WithTTLAttribute]). It needs UpdateTimeToLive. name
// must not be a key attribute nor an attribute the lock itself uses
// (ownerName, leaseDuration, ...): TTL on those would delete live locks;
// such a name is rejected with an *[InvalidArgumentError].
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
//
// When the table already exists, it returns an error matching
// [ErrTableExists]; [Client.CreateTableIfNotExists] treats that
// as success instead. Creating the client's own table (tableName is the
// name given to [New]) keyed on other attributes than the client's returns
// an *[InvalidArgumentError] before any call: the client could not use it.
// So does a table ARN: DynamoDB creates a table by its name, in the
// account and Region of the client's credentials and endpoint.
func (c *Client) CreateTableWithContext(ctx context.Context, tableName string, opts ...CreateTableOption) (*dynamodb.CreateTableOutput, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	o, err := c.createTableOptions(tableName, opts, false)
	if err != nil {
		return nil, err
	}
	return c.createLockTable(ctx, o)
}

// createTableOptions checks the options of a creation of tableName; an
// ARN is refused unless ensuring (CreateTableIfNotExists, which describes
// the table first and creates none by ARN).
func (c *Client) createTableOptions(tableName string, opts []CreateTableOption, ensuring bool) (*createDynamoDBTableOptions, error) {
	o := &createDynamoDBTableOptions{
		billingMode:      types.BillingModePayPerRequest,
		tableName:        tableName,
		partitionKeyName: c.cfg.partitionKeyName,
		sortKeyName:      c.cfg.sortKeyName,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	arn, isARN := parseTableARN(tableName)
	switch {
	case isARN && !ensuring:
		return nil, invalid("table name", tableName, "is a table ARN: DynamoDB creates a table by its name, in the account and Region "+
			"of the client's credentials and endpoint; create %q there (deploy/ has infrastructure code for it) and name it by its ARN elsewhere", arn.name)
	case !isARN && !tableNamePattern.MatchString(tableName):
		return nil, invalid("table name", tableName, "must be 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'")
	case o.partitionKeyName == "" || lockitem.IsOwn(o.partitionKeyName):
		return nil, invalid("WithCustomPartitionKeyName", o.partitionKeyName, "must not be empty or an attribute the lock itself uses")
	case lockitem.IsOwn(o.sortKeyName):
		return nil, invalid("WithSortKeyName", o.sortKeyName, "is an attribute the lock itself uses")
	case o.sortKeyName == o.partitionKeyName:
		return nil, invalid("WithSortKeyName", o.sortKeyName, "must differ from the partition key name")
	case o.billingMode == types.BillingModeProvisioned && o.provisionedThroughput == nil:
		return nil, invalid("WithProvisionedThroughput", nil, "must not be nil")
	case o.timeToLiveAttribute != "" && (lockitem.IsOwn(o.timeToLiveAttribute) ||
		o.timeToLiveAttribute == o.partitionKeyName || o.timeToLiveAttribute == o.sortKeyName):
		return nil, invalid("WithTimeToLive", o.timeToLiveAttribute, "is an attribute the lock itself uses; TTL on it would delete live locks")
	}
	if o.timeToLiveAttribute != "" && !c.canUpdateTimeToLive() {
		return nil, unsupported("WithTimeToLive", "UpdateTimeToLive")
	}
	if tableName == c.cfg.tableName {
		if err := c.checkCreateKeys(o); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// checkCreateKeys refuses to create the client's own table keyed on other
// attributes than the client's: every call of the client would then fail
// with a *KeySchemaError. (dynamolock v2 created it.) The fix is on New,
// not on the creation: the error says how.
func (c *Client) checkCreateKeys(o *createDynamoDBTableOptions) error {
	option, name := "WithCustomPartitionKeyName", o.partitionKeyName
	switch {
	case o.partitionKeyName != c.cfg.partitionKeyName:
	case o.sortKeyName != c.cfg.sortKeyName:
		option, name = "WithSortKeyName", o.sortKeyName
	default:
		return nil
	}
	want := []KeyAttribute{{Name: o.partitionKeyName, KeyType: types.KeyTypeHash}}
	if o.sortKeyName != "" {
		want = append(want, KeyAttribute{Name: o.sortKeyName, KeyType: types.KeyTypeRange})
	}
	fix := c.keySchemaError(want, nil).fix()
	return invalid(option, name, "this client uses %s, so it could not use table %q keyed on %s; "+
		"drop the option to create the table this client uses, or make the client with %s and create the table through it",
		keyNames(c.keySchema()), o.tableName, keyNames(want), fix)
}

func (c *Client) createLockTable(ctx context.Context, o *createDynamoDBTableOptions) (*dynamodb.CreateTableOutput, error) {
	tableName := o.tableName
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
	out, err := c.sendCreateTable(ctx, in)
	var riu *types.ResourceInUseException
	if errors.As(err, &riu) {
		return nil, fmt.Errorf("%w: %q at %s: %w", ErrTableExists, tableName, c.endpointOf(err), err)
	}
	if err != nil {
		return nil, fmt.Errorf("dynamolock: create table %q: %w", tableName, err)
	}
	if c.canDescribe() {
		if err := c.waitActive(ctx, tableName); err != nil {
			return out, err
		}
	}
	if o.timeToLiveAttribute != "" {
		_, err := c.updateTimeToLive(ctx, "WithTimeToLive", &dynamodb.UpdateTimeToLiveInput{
			TableName: aws.String(tableName),
			TimeToLiveSpecification: &types.TimeToLiveSpecification{
				AttributeName: aws.String(o.timeToLiveAttribute),
				Enabled:       aws.Bool(true),
			},
		})
		if err != nil {
			return out, fmt.Errorf("dynamolock: enable TTL on %q for attribute %q: %w", tableName, o.timeToLiveAttribute, err)
		}
	}
	return out, nil
}

func (c *Client) waitActive(ctx context.Context, tableName string) error {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 2*time.Second) {
		out, err := c.describeTable(ctx, "waiting for the table", tableName)
		if err != nil {
			return fmt.Errorf("dynamolock: wait for table %q: %w", tableName, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		if err := c.sleep(ctx, wait, nil); err != nil {
			return fmt.Errorf("dynamolock: wait for table %q to become ACTIVE: %w", tableName, err)
		}
	}
}

// TableExists reports whether the client's lock table exists, with one
// DescribeTable call.
func (c *Client) TableExists(ctx context.Context) (bool, error) {
	desc, err := c.describeLockTable(ctx, "TableExists")
	return desc != nil, err
}

// describeLockTable describes the client's table: nil when it does not
// exist.
func (c *Client) describeLockTable(ctx context.Context, feature string) (*types.TableDescription, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	if !c.canDescribe() {
		return nil, unsupported(feature, "DescribeTable")
	}
	return describeTable(ctx, c, c.cfg.tableName)
}

// AssertTableExists returns nil when the lock table exists and can hold
// locks. It returns an error matching [ErrTableNotFound] when the table
// does not exist, and one matching [ErrEventualGlobalTable] for a global
// table replicated with multi-Region eventual consistency (unless the
// client was made with [WithSingleWriterRegion]). One DescribeTable, and
// one DescribeGlobalTable for a table with a stream of new and old images
// (see [GlobalTableError]).
func (c *Client) AssertTableExists(ctx context.Context) error {
	desc, err := c.describeLockTable(ctx, "AssertTableExists")
	if err != nil {
		return err
	}
	if desc == nil {
		return c.tableNotFound(nil)
	}
	refused, err := c.checkReplication(ctx, desc)
	return joinErrors(refused, err)
}

// CreateTableIfNotExists makes sure the client's lock table (the table
// name given to [New]) exists with the key schema the options ask for, by
// default the client's own key names, so that a program can run it at
// every start. When the table does not exist, it creates it as
// [Client.CreateTableWithContext] does (and waits until it is ACTIVE) and
// returns true. When it exists (created by an earlier run, another process,
// or infrastructure code), it waits until it is ACTIVE, checks its key
// schema, and returns false; a table keyed on other attributes or types
// than the client's returns a *[KeySchemaError] (which says how to make a
// client for it), and a global table replicated with multi-Region eventual
// consistency an error matching [ErrEventualGlobalTable] (unless
// [WithSingleWriterRegion]). Key names in opts other than the client's
// return an *[InvalidArgumentError] before any call: the client could not
// use such a table. Billing, tags and TTL are not checked or changed on an
// existing table.
//
// A client whose table is an ARN (a table of another account, say) never
// creates it: when the table exists it is checked as above, and when it
// does not the error matches [ErrTableNotFound] and says to create it by
// name in its own account.
//
// It costs one DescribeTable when the table exists, and one DescribeTable
// plus the creation when it does not. It needs DescribeTable; with a
// [DynamoDBClient] that lacks it, it returns [ErrUnsupportedOperation]
// before any call. Bad options return an *[InvalidArgumentError] before any
// call.
func (c *Client) CreateTableIfNotExists(ctx context.Context, opts ...CreateTableOption) (created bool, err error) {
	if err := c.enter(ctx); err != nil {
		return false, err
	}
	tableName := c.cfg.tableName
	o, err := c.createTableOptions(tableName, opts, true)
	if err != nil {
		return false, err
	}
	if !c.canDescribe() {
		return false, unsupported("CreateTableIfNotExists", "DescribeTable")
	}
	desc, err := describeTable(ctx, c, tableName)
	if err != nil {
		return false, err
	}
	if arn, isARN := parseTableARN(tableName); isARN && desc == nil {
		return false, fmt.Errorf("%w: %q at %s: a table named by its ARN is not created (DynamoDB creates a table by its name, in the account and Region of the caller): "+
			"create table %q in account %s, Region %s (deploy/ has infrastructure code for it)", ErrTableNotFound, tableName, c.endpointOf(nil), arn.name, arn.account, arn.region)
	}
	if desc == nil {
		_, err := c.createLockTable(ctx, o)
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, ErrTableExists) { // not a concurrent creation
			return false, err
		}
		if desc, err = describeTable(ctx, c, tableName); err != nil {
			return false, err
		}
		if desc == nil {
			return false, fmt.Errorf("dynamolock: create table %q: DynamoDB says it exists, then that it does not (deleted meanwhile?)", tableName)
		}
	}
	if desc.TableStatus != types.TableStatusActive {
		if err := c.waitActive(ctx, tableName); err != nil {
			return false, err
		}
	}
	if found := tableKeySchema(desc); !sameKeySchema(c.keySchema(), found) {
		return false, c.keySchemaError(found, nil)
	}
	refused, err := c.checkReplication(ctx, desc)
	return false, joinErrors(refused, err)
}

// describeTable returns the table's description, or nil when it does not
// exist.
func describeTable(ctx context.Context, c *Client, tableName string) (*types.TableDescription, error) {
	out, err := c.describeTable(ctx, "DescribeTable", tableName)
	switch {
	case isNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("dynamolock: describe table %q: %w", tableName, err)
	case out.Table == nil:
		return nil, fmt.Errorf("dynamolock: describe table %q: the answer has no table description", tableName)
	}
	return out.Table, nil
}
