package dynamolock_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

func dropTable(t *testing.T, db *dynamodb.Client, name string) {
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
}

func TestCreateTableIfNotExists(t *testing.T) {
	db, calls := newDB(t)
	ctx := context.Background()
	table := newTableName(t)
	dropTable(t, db, table)
	c := newClient(t, db, table)

	created, err := c.CreateTableIfNotExists(ctx)
	require.NoError(t, err)
	assert.True(t, created)
	require.NoError(t, c.AssertTableExists(ctx))

	// Second and third runs: one DescribeTable each, nothing created.
	for range 2 {
		calls.reset()
		created, err = c.CreateTableIfNotExists(ctx)
		require.NoError(t, err)
		assert.False(t, created)
		assert.Equal(t, map[string]int{"DescribeTable": 1}, calls.reset())
	}
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	// CreateTable on it: its own sentinel, naming the table.
	_, err = c.CreateTableWithContext(ctx, table)
	require.ErrorIs(t, err, dynamolock.ErrTableExists)
	var riu *types.ResourceInUseException
	assert.ErrorAs(t, err, &riu, "the SDK error stays wrapped")
	assert.Contains(t, err.Error(), table)

	// A client expecting a sort key: the existing table does not fit.
	sorted := newClient(t, db, table, dynamolock.WithSortKey("sk", "v"))
	_, err = sorted.CreateTableIfNotExists(ctx)
	var kse *dynamolock.KeySchemaError
	require.ErrorAs(t, err, &kse)
	assert.ErrorIs(t, err, dynamolock.ErrKeySchemaMismatch)
	assert.Equal(t, []dynamolock.KeyAttribute{{Name: "key", KeyType: types.KeyTypeHash, Type: types.ScalarAttributeTypeS}}, kse.Found)
	for _, s := range []string{table, `sort key "sk" (S)`, "no sort key", "WithSortKeyName", "WithSortKey"} {
		assert.Contains(t, err.Error(), s)
	}
}

func TestCreateTableIfNotExistsChecksTheKeySchema(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name     string
		keys     [][2]string
		opts     []dynamolock.ClientOption
		create   []dynamolock.CreateTableOption
		contains []string
	}{
		{"partition key of another name", [][2]string{{"id", "S"}}, nil, nil, []string{`partition key "id" (S)`, `partition key "key" (S)`}},
		{"partition key of type N", [][2]string{{"key", "N"}}, nil, nil, []string{`partition key "key" (N)`}},
		{"sort key the client does not use", [][2]string{{"key", "S"}, {"sk", "S"}}, nil, nil, []string{`sort key "sk" (S)`}},
		{"sort key of another name", [][2]string{{"key", "S"}, {"other", "S"}}, []dynamolock.ClientOption{dynamolock.WithSortKey("sk", "v")}, nil,
			[]string{`sort key "other" (S)`, `sort key "sk" (S)`}},
		{"options ask for another partition key", [][2]string{{"key", "S"}}, nil,
			[]dynamolock.CreateTableOption{dynamolock.WithCustomPartitionKeyName("pk")}, []string{`partition key "pk" (S)`, "WithCustomPartitionKeyName"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := rawTable(t, db, tc.keys...)
			c := newClient(t, db, table, tc.opts...)
			created, err := c.CreateTableIfNotExists(ctx, tc.create...)
			assert.False(t, created)
			require.ErrorIs(t, err, dynamolock.ErrKeySchemaMismatch)
			var kse *dynamolock.KeySchemaError
			require.ErrorAs(t, err, &kse)
			assert.Equal(t, table, kse.Table)
			for _, s := range append(tc.contains, table) {
				assert.Contains(t, err.Error(), s)
			}
		})
	}
	// A table keyed as asked, with a sort key.
	table := rawTable(t, db, [2]string{"key", "S"}, [2]string{"sk", "S"})
	c := newClient(t, db, table, dynamolock.WithSortKey("sk", "v"))
	created, err := c.CreateTableIfNotExists(ctx)
	require.NoError(t, err)
	assert.False(t, created)
}

// Processes starting at once all succeed; exactly one creates the table.
func TestCreateTableIfNotExistsConcurrently(t *testing.T) {
	db, _ := newDB(t)
	table := newTableName(t)
	dropTable(t, db, table)
	c := newClient(t, db, table)
	var wg sync.WaitGroup
	results := make([]bool, 8)
	errs := make([]error, 8)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = c.CreateTableIfNotExists(context.Background()) })
	}
	wg.Wait()
	n := 0
	for i := range results {
		require.NoError(t, errs[i])
		if results[i] {
			n++
		}
	}
	assert.Equal(t, 1, n, "exactly one call created the table")
}
