package dynamolock_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Issue 37, item 7: the global-table check never skips in silence, and
// finds global tables of the legacy version (2017.11.29) too, which only
// DescribeGlobalTable describes.

// warnLog is a client's Warn-level log, as JSON lines.
type warnLog struct{ bytes.Buffer }

func (w *warnLog) option() dynamolock.ClientOption {
	return dynamolock.WithSlog(slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn})))
}

func (w *warnLog) warnings() int { return strings.Count(w.String(), `"level":"WARN"`) }

// acquireTwice acquires and releases two keys, so that a warning logged
// more than once would show.
func acquireTwice(t *testing.T, c *dynamolock.Client) {
	t.Helper()
	for _, key := range []string{"a", "b"} {
		l, err := c.AcquireLockWithContext(context.Background(), key)
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
}

// fiveMethods is a DynamoDBClient with only the methods the interface
// names: the shape of a wrapper written for dynamolock v2.
type fiveMethods struct{ dynamolock.DynamoDBClient }

func TestTableCheckWithoutDescribeTableWarnsOnce(t *testing.T) {
	table := newTable(t, "")
	sdk, calls := newDB(t)
	var logs warnLog
	c := newClient(t, fiveMethods{sdk}, table, logs.option())
	acquireTwice(t, c)
	assert.Equal(t, 1, logs.warnings(), logs.String())
	assert.Contains(t, logs.String(), "has no DescribeTable method: the lock table is not checked for global-table replication")
	assert.Zero(t, calls.get("DescribeTable"))

	// With WithSingleWriterRegion there is nothing to refuse: no warning.
	var quiet warnLog
	single := newClient(t, fiveMethods{sdk}, table, quiet.option(), dynamolock.WithSingleWriterRegion())
	acquireTwice(t, single)
	assert.Zero(t, quiet.warnings(), quiet.String())
}

// legacyDB shows the lock table as it would be with a stream of new and
// old images (every replica of a legacy global table has one), and answers
// DescribeGlobalTable with describeGlobal: SDK-shaped answers for the
// error paths DynamoDB Local cannot produce.
type legacyDB struct {
	*dynamodb.Client
	describeGlobal func(name string) (*dynamodb.DescribeGlobalTableOutput, error)
	globalCalls    atomic.Int32
}

func (l *legacyDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	out, err := l.Client.DescribeTable(ctx, in, optFns...)
	if err != nil {
		return out, err
	}
	d := *out.Table
	d.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages}
	return &dynamodb.DescribeTableOutput{Table: &d}, nil
}

func (l *legacyDB) DescribeGlobalTable(_ context.Context, in *dynamodb.DescribeGlobalTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeGlobalTableOutput, error) {
	l.globalCalls.Add(1)
	return l.describeGlobal(aws.ToString(in.GlobalTableName))
}

// legacyGlobal answers DescribeGlobalTable as DynamoDB does for a global
// table of version 2017.11.29 with replicas in two Regions.
func legacyGlobal(name string) (*dynamodb.DescribeGlobalTableOutput, error) {
	return &dynamodb.DescribeGlobalTableOutput{GlobalTableDescription: &types.GlobalTableDescription{
		GlobalTableName:   aws.String(name),
		GlobalTableStatus: types.GlobalTableStatusActive,
		ReplicationGroup:  []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}},
	}}, nil
}

// A global table of the legacy version is refused before any write, by
// every call that checks the table; WithSingleWriterRegion accepts it
// without asking.
func TestLegacyGlobalTableRefused(t *testing.T) {
	table := newTable(t, "")
	ctx := context.Background()
	sdk, calls := newDB(t)
	db := &legacyDB{Client: sdk, describeGlobal: legacyGlobal}
	var logs warnLog
	c := newClient(t, db, table, logs.option())
	calls.reset()
	_, err := c.AcquireLockWithContext(ctx, "k")
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
	var gte *dynamolock.GlobalTableError
	require.ErrorAs(t, err, &gte)
	assert.Equal(t, []string{"eu-west-1", "us-east-1"}, gte.Regions)
	assert.Contains(t, err.Error(), "a global table of version 2017.11.29 with multi-Region eventual consistency")
	assert.Contains(t, err.Error(), "WithSingleWriterRegion")
	assert.Zero(t, calls.get("UpdateItem"), "nothing was written")
	assert.EqualValues(t, 1, db.globalCalls.Load())
	_, err = c.AcquireLockWithContext(ctx, "k")
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
	assert.EqualValues(t, 1, db.globalCalls.Load(), "checked once per client")
	require.ErrorIs(t, c.AssertTableExists(ctx), dynamolock.ErrEventualGlobalTable)
	_, err = c.CreateTableIfNotExists(ctx)
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
	assert.Zero(t, logs.warnings(), logs.String())

	single := newClient(t, db, table, dynamolock.WithSingleWriterRegion())
	db.globalCalls.Store(0)
	acquireTwice(t, single)
	require.NoError(t, single.AssertTableExists(ctx))
	assert.Zero(t, db.globalCalls.Load())
}

// A table with such a stream that is not a legacy global table: the model
// of DynamoDB answers DescribeGlobalTable as the service does
// (GlobalTableNotFoundException), and the table is accepted without a
// warning, for one DescribeGlobalTable per client.
func TestStreamTableThatIsNotAGlobalTable(t *testing.T) {
	table := newTable(t, "")
	sdk, _ := newDB(t)
	model := ddbmodel.New()
	db := &legacyDB{Client: sdk, describeGlobal: func(name string) (*dynamodb.DescribeGlobalTableOutput, error) {
		out, err := model.DescribeGlobalTable(context.Background(), &dynamodb.DescribeGlobalTableInput{GlobalTableName: aws.String(name)})
		return out, faults.APIError("DescribeGlobalTable", "req-1", err)
	}}
	var logs warnLog
	c := newClient(t, db, table, logs.option())
	acquireTwice(t, c)
	assert.EqualValues(t, 1, db.globalCalls.Load())
	assert.Zero(t, logs.warnings(), logs.String())
}

// Every reason the legacy check cannot run is warned about once per
// client, and locks work: DescribeGlobalTable denied, unknown to the
// endpoint, or missing from the DynamoDBClient. A failure that may pass (a
// throttled DescribeGlobalTable) fails the write, never sent, and the next
// write checks again.
func TestLegacyCheckThatCannotRunWarnsOnce(t *testing.T) {
	table := newTable(t, "")
	sdk, calls := newDB(t)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"denied", &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:DescribeGlobalTable", Fault: smithy.FaultClient},
			"allow dynamodb:DescribeGlobalTable"},
		{"unknown to the endpoint", &smithy.GenericAPIError{Code: "UnknownOperationException", Message: "An unknown operation was requested.", Fault: smithy.FaultClient},
			"DescribeGlobalTable failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db := &legacyDB{Client: sdk, describeGlobal: func(string) (*dynamodb.DescribeGlobalTableOutput, error) {
				return nil, faults.APIError("DescribeGlobalTable", "req-1", tc.err)
			}}
			var logs warnLog
			c := newClient(t, db, table, logs.option())
			acquireTwice(t, c)
			assert.Equal(t, 1, logs.warnings(), logs.String())
			assert.Contains(t, logs.String(), tc.want)
			assert.Contains(t, logs.String(), "not checked for legacy global-table replication")
			assert.EqualValues(t, 1, db.globalCalls.Load())
		})
	}
	t.Run("no DescribeGlobalTable method", func(t *testing.T) {
		var logs warnLog
		c := newClient(t, streamOnly{&legacyDB{Client: sdk}}, table, logs.option())
		acquireTwice(t, c)
		assert.Equal(t, 1, logs.warnings(), logs.String())
		assert.Contains(t, logs.String(), "has no DescribeGlobalTable method")
	})
	t.Run("throttled, then answered", func(t *testing.T) {
		throttled := true
		db := &legacyDB{Client: sdk, describeGlobal: func(name string) (*dynamodb.DescribeGlobalTableOutput, error) {
			if throttled {
				return nil, faults.ServiceError("DescribeGlobalTable", faults.Throttle)
			}
			return legacyGlobal(name)
		}}
		var logs warnLog
		c := newClient(t, db, table, logs.option())
		calls.reset()
		_, err := c.AcquireLockWithContext(context.Background(), "k", dynamolock.FailIfLocked())
		require.Error(t, err)
		assert.NotErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
		assert.Zero(t, calls.get("UpdateItem"), "the write was not sent")
		throttled = false
		_, err = c.AcquireLockWithContext(context.Background(), "k")
		require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable, "checked again by the next write")
		assert.Zero(t, logs.warnings(), logs.String())
	})
}

// streamOnly hides every method of its DynamoDBClient but DescribeTable
// and the five required ones: a wrapper that forwards DescribeTable only.
type streamOnly struct{ db *legacyDB }

func (s streamOnly) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return s.db.GetItem(ctx, in, o...)
}

func (s streamOnly) PutItem(ctx context.Context, in *dynamodb.PutItemInput, o ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return s.db.PutItem(ctx, in, o...)
}

func (s streamOnly) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return s.db.UpdateItem(ctx, in, o...)
}

func (s streamOnly) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return s.db.DeleteItem(ctx, in, o...)
}

func (s streamOnly) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, o ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return s.db.CreateTable(ctx, in, o...)
}

func (s streamOnly) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return s.db.DescribeTable(ctx, in, o...)
}

// On DynamoDB Local, a table created with a stream of new and old images:
// the real SDK client asks DescribeGlobalTable, which DynamoDB Local does
// not know (UnknownOperationException); the check warns once and locks
// work.
func TestStreamTableOnDynamoDBLocal(t *testing.T) {
	sdk, calls := newDB(t)
	ctx := context.Background()
	table := newTableName(t)
	dropTable(t, sdk, table)
	_, err := sdk.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		BillingMode:          types.BillingModePayPerRequest,
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
		StreamSpecification:  &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewAndOldImages},
	})
	require.NoError(t, err)
	var logs warnLog
	c := newClient(t, sdk, table, logs.option())
	calls.reset()
	acquireTwice(t, c)
	assert.Equal(t, 1, calls.get("DescribeGlobalTable"))
	assert.Equal(t, 1, logs.warnings(), logs.String())
	assert.Contains(t, logs.String(), "UnknownOperationException")
}
