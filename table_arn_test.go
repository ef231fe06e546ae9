package dynamolock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// tableNames records the TableName of every request of the SDK client it
// wraps.
type tableNames struct {
	*dynamodb.Client
	mu    sync.Mutex
	names map[string]string // operation → the last TableName it was sent with
}

func (n *tableNames) saw(op string, name *string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.names[op] = aws.ToString(name)
}

func (n *tableNames) sent(op string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.names[op]
}

func (n *tableNames) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	n.saw("GetItem", in.TableName)
	return n.Client.GetItem(ctx, in, o...)
}

func (n *tableNames) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	n.saw("UpdateItem", in.TableName)
	return n.Client.UpdateItem(ctx, in, o...)
}

func (n *tableNames) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	n.saw("DescribeTable", in.TableName)
	return n.Client.DescribeTable(ctx, in, o...)
}

func (n *tableNames) Scan(ctx context.Context, in *dynamodb.ScanInput, o ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	n.saw("Scan", in.TableName)
	return n.Client.Scan(ctx, in, o...)
}

// tableARNOf returns the ARN DynamoDB gives table.
func tableARNOf(t *testing.T, db *dynamodb.Client, table string) string {
	t.Helper()
	out, err := db.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	require.NoError(t, err)
	arn := aws.ToString(out.Table.TableArn)
	require.True(t, strings.HasPrefix(arn, "arn:aws:dynamodb:"), arn)
	return arn
}

// A client made with the table's ARN (as a table of another account is
// named) sends the ARN in every request, and acquires, renews, lists and
// releases on DynamoDB Local as with the name; the table check and
// CreateTableIfNotExists describe it by ARN.
func TestTableARN(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	arn := tableARNOf(t, db, table)
	spy := &tableNames{Client: db, names: map[string]string{}}
	c := newClient(t, spy, arn, fast...)
	byName := newClient(t, db, table)
	ctx := context.Background()

	created, err := c.CreateTableIfNotExists(ctx)
	require.NoError(t, err)
	assert.False(t, created, "the table exists: nothing to create")
	require.NoError(t, c.AssertTableExists(ctx))

	l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("v")))
	require.NoError(t, err)
	beats := c.Stats().HeartbeatsSent
	waitFor(t, 5*time.Second, "two heartbeats", func() bool { return c.Stats().HeartbeatsSent >= beats+2 })
	require.NoError(t, l.Err(), "renewed by ARN")
	view, err := byName.GetWithContext(ctx, "k")
	require.NoError(t, err)
	assert.Equal(t, c.OwnerName(), view.OwnerName(), "the item is the table's, read by name")
	assert.Equal(t, "v", string(view.Data()))

	var listed []string
	for lk, err := range c.AllLocks(ctx) {
		require.NoError(t, err)
		listed = append(listed, lk.PartitionKey())
	}
	assert.Equal(t, []string{"k"}, listed)

	_, err = byName.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held, "held, whichever way the table is named")

	require.NoError(t, l.Release(ctx))
	view, err = byName.GetWithContext(ctx, "k")
	require.NoError(t, err)
	assert.True(t, view.IsReleased())
	for _, op := range []string{"DescribeTable", "UpdateItem", "Scan"} {
		assert.Equal(t, arn, spy.sent(op), "%s names the table by its ARN", op)
	}
	require.NoError(t, c.Do(ctx, "d", func(context.Context, *dynamolock.Lock) error { return nil }))
}

// A table named by an ARN that names no table: nothing is created (a
// table is created by its name, in its own account), and the errors match
// ErrTableNotFound and say so.
func TestTableARNOfNoTable(t *testing.T) {
	db, calls := newDB(t)
	arn := "arn:aws:dynamodb:ddblocal:000000000000:table/no_such_table_62"
	c := newClient(t, db, arn)
	ctx := context.Background()
	calls.reset()
	created, err := c.CreateTableIfNotExists(ctx)
	require.ErrorIs(t, err, dynamolock.ErrTableNotFound)
	assert.False(t, created)
	assert.Contains(t, err.Error(), `a table named by its ARN is not created`)
	assert.Contains(t, err.Error(), `create table "no_such_table_62" in account 000000000000, Region ddblocal`)
	assert.Equal(t, map[string]int{"DescribeTable": 1}, calls.reset(), "described, never created")

	_, err = c.AcquireLockWithContext(ctx, "k")
	require.ErrorIs(t, err, dynamolock.ErrTableNotFound)
	assert.Contains(t, err.Error(), "create it by name in the account and Region its ARN names")

	calls.reset()
	_, err = c.CreateTableWithContext(ctx, arn)
	var inv *dynamolock.InvalidArgumentError
	require.ErrorAs(t, err, &inv)
	assert.Equal(t, 0, calls.total(), "refused before any call")
}

// The operations DynamoDB Local refuses by ARN (a transaction: it answers
// ResourceNotFoundException, where the service accepts an ARN in every
// member) run on the model, which answers as the service does:
// AcquireLocks and a fair semaphore by ARN.
func TestTableARNTransactionsOnTheModel(t *testing.T) {
	db := dynamolocktest.New()
	ctx := context.Background()
	admin, err := dynamolock.New(db.Conn(), "locks")
	require.NoError(t, err)
	_, err = admin.CreateTableWithContext(ctx, "locks")
	require.NoError(t, err)
	require.NoError(t, admin.Close())
	c := newClient(t, db.Conn(), "arn:aws:dynamodb:us-east-1:123456789012:table/locks")
	locks, err := c.AcquireLocks(ctx, []string{"a", "b"})
	require.NoError(t, err)
	for _, l := range locks {
		require.NoError(t, l.Release(ctx))
	}
	// A fair semaphore whose first slot is held takes the second in a
	// transaction beside the queue on the first.
	other := newClient(t, db.Conn(), "locks")
	otherSem, err := other.NewSemaphore("s", 2)
	require.NoError(t, err)
	_, err = otherSem.Acquire(ctx, dynamolock.WithFairness())
	require.NoError(t, err)
	sem, err := c.NewSemaphore("s", 2)
	require.NoError(t, err)
	l, err := sem.Acquire(ctx, dynamolock.WithFairness())
	require.NoError(t, err)
	assert.Equal(t, "s#1", l.PartitionKey())
	require.NoError(t, l.Release(ctx))
	assert.Len(t, db.Items("locks"), 4, "a, b and the semaphore's two slots, in the table the ARN names")
}

// A table named by its ARN with a stream of new and old images (as a
// legacy global table's replica has) is not asked DescribeGlobalTable,
// which takes a name in the caller's own account: one warning says it is
// not checked, and locks work.
func TestTableARNWithAStreamIsNotCheckedForLegacyReplication(t *testing.T) {
	table := newTable(t, "")
	sdk, _ := newDB(t)
	db := &legacyDB{Client: sdk, describeGlobal: legacyGlobal}
	var logs warnLog
	c := newClient(t, db, tableARNOf(t, sdk, table), logs.option())
	acquireTwice(t, c)
	assert.Zero(t, db.globalCalls.Load(), "no DescribeGlobalTable")
	assert.Equal(t, 1, logs.warnings(), logs.String())
	assert.Contains(t, logs.String(), "named by its ARN")
	assert.Contains(t, logs.String(), "not checked for legacy global-table replication")
}
