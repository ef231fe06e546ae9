package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	v5 "github.com/arielsrv/dynamolock/v2/v5compat"
)

// Issue 63, item 4: v5 reads WithRefreshPeriod(0) and
// WithAdditionalTimeToWaitForLock(0) as "not set", its default of 1s, and
// so does v5compat. Before, the first was refused ("must be positive") and
// the second waited the holder's lease alone, a second less than v5.
func TestV5CompatZeroDurationsAreV5Defaults(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	const lease = time.Second
	holder := newV5(t, db, table, v5.WithLeaseDuration(lease), v5.WithHeartbeatPeriod(250*time.Millisecond))
	_, err := holder.AcquireLock(ctx, "k")
	require.NoError(t, err)
	waiter := newV5(t, db, table)

	start := time.Now()
	_, err = waiter.AcquireLock(ctx, "k", v5.WithRefreshPeriod(0), v5.WithAdditionalTimeToWaitForLock(0))
	took := time.Since(start)
	var te *v5.TimeoutError
	require.ErrorAs(t, err, &te, "%v", err)
	assert.GreaterOrEqual(t, took, lease+time.Second-100*time.Millisecond, "the holder's lease plus v5's default 1s")
	assert.Less(t, took, lease+time.Second+2*time.Second)
}

// Issue 63, item 5: CreateTable creates what v5's creates: a set-up client
// without a sort key creates a table with one for other clients
// (WithSortKeyName), and a table is keyed "key" unless
// WithCustomPartitionKeyName says otherwise, whatever the creating
// client's own keys. Before, the first was refused (the engine refuses to
// create its client's own table keyed otherwise), with advice naming
// CreateTableIfNotExists, which v5compat does not have.
func TestV5CompatCreateTableCreatesWhatV5Creates(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	name := func(suffix string) string {
		n := newTableName(t) + suffix
		t.Cleanup(func() { _, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(n)}) })
		return n
	}
	keys := func(table string) map[string]types.KeyType {
		d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		require.NoError(t, err)
		got := map[string]types.KeyType{}
		for _, k := range d.Table.KeySchema {
			got[aws.ToString(k.AttributeName)] = k.KeyType
		}
		return got
	}

	sorted := name("_sk")
	setup := newV5(t, db, sorted)
	_, err := setup.CreateTable(ctx, sorted, v5.WithSortKeyName("sk"))
	require.NoError(t, err)
	assert.Equal(t, map[string]types.KeyType{"key": types.KeyTypeHash, "sk": types.KeyTypeRange}, keys(sorted))
	user := newV5(t, db, sorted, v5.WithSortKey("sk", "v"))
	l, err := user.AcquireLock(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, l.Close(ctx))

	custom := name("_id")
	idClient := newV5(t, db, custom, v5.WithPartitionKeyName("id"))
	_, err = idClient.CreateTable(ctx, custom, v5.WithCustomPartitionKeyName("id"))
	require.NoError(t, err)
	assert.Equal(t, map[string]types.KeyType{"id": types.KeyTypeHash}, keys(custom))

	plain := name("_plain")
	sortClient := newV5(t, db, plain, v5.WithSortKey("sk", "v"), v5.WithPartitionKeyName("id"))
	_, err = sortClient.CreateTable(ctx, plain)
	require.NoError(t, err)
	assert.Equal(t, map[string]types.KeyType{"key": types.KeyTypeHash}, keys(plain), "v5's defaults, not the client's keys")

	_, err = setup.CreateTable(ctx, sorted, v5.WithSortKeyName("sk"))
	var riu *types.ResourceInUseException
	require.ErrorAs(t, err, &riu, "an existing table: DynamoDB's error, as v5's cmd/lock expects")
	require.ErrorIs(t, err, dynamolock.ErrTableExists)
}

// Issue 63: v5compat's errors name v5compat's way to the fix, not the root
// package's (CreateTableIfNotExists, WithReentrant, WithSortKeyValue),
// while errors.Is and errors.As match them as before.
func TestV5CompatErrorsNameItsOwnRemedies(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()

	t.Run("no table", func(t *testing.T) {
		c := newV5(t, db, newTableName(t)+"_missing")
		_, err := c.AcquireLock(ctx, "k")
		require.ErrorIs(t, err, dynamolock.ErrTableNotFound)
		var lng *v5.LockNotGrantedError
		require.ErrorAs(t, err, &lng)
		assert.Contains(t, err.Error(), "create it with CreateTable,")
		assert.NotContains(t, err.Error(), "CreateTableIfNotExists")
	})
	t.Run("a key held by another client with the same owner name", func(t *testing.T) {
		first := newV5(t, db, table, v5.WithOwnerName("worker"))
		second := newV5(t, db, table, v5.WithOwnerName("worker"))
		held, err := first.AcquireLock(ctx, "shared")
		require.NoError(t, err)
		_, err = second.AcquireLock(ctx, "shared", v5.FailIfLocked())
		var lhe *dynamolock.LockHeldError
		require.ErrorAs(t, err, &lhe)
		var lng *v5.LockNotGrantedError
		require.ErrorAs(t, err, &lng)
		assert.Contains(t, err.Error(), "but not by this client")
		assert.Contains(t, err.Error(), "give each process its own owner name (WithOwnerName)")
		assert.NotContains(t, err.Error(), "WithReentrant")
		assert.False(t, held.IsExpired())

		_, err = first.AcquireLock(ctx, "shared", v5.FailIfLocked())
		require.ErrorAs(t, err, &lhe)
		assert.Contains(t, err.Error(), "the key is held by this client; release it first (ReleaseLock, or the lock's Close), or use the held lock: Get returns it")
		assert.NotContains(t, err.Error(), "WithReentrant")
	})
	t.Run("a sort key without a value", func(t *testing.T) {
		c := newV5(t, db, table, v5.WithSortKey("sk", ""))
		before := calls.total()
		_, err := c.AcquireLock(ctx, "k")
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
		assert.Contains(t, err.Error(), "give WithSortKey a value")
		assert.Equal(t, before, calls.total(), "refused before any call")
	})
	t.Run("a lease and a heartbeat written as numbers", func(t *testing.T) {
		for _, opts := range [][]v5.ClientOption{
			{v5.WithLeaseDuration(10), v5.WithHeartbeatPeriod(3)},
			{v5.WithLeaseDuration(10), v5.DisableHeartbeat()},
		} {
			_, err := v5.New(db, table, opts...)
			var ie *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, "WithLeaseDuration", ie.Name)
			assert.Contains(t, err.Error(), "10ns")
			assert.Contains(t, err.Error(), "did you mean 10*time.Second?")
		}
		_, err := v5.New(db, table, v5.WithHeartbeatPeriod(5))
		assert.ErrorContains(t, err, "invalid WithHeartbeatPeriod 5ns: is too short: did you mean 5*time.Second?")
	})
	t.Run("ReleaseLock after Close", func(t *testing.T) {
		c, err := v5.New(db, table)
		require.NoError(t, err)
		require.NoError(t, c.Close(ctx))
		var nilLock *v5.Lock
		for _, l := range []*v5.Lock{nilLock, {}} {
			ok, err := c.ReleaseLock(ctx, l)
			assert.False(t, ok)
			assert.ErrorIs(t, err, v5.ErrClientClosed, "v5 answers ErrClientClosed first, whatever the lock")
		}
	})
}
