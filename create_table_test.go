package dynamolock_test

import (
	"context"
	"strconv"
	"strings"
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
	for _, s := range []string{table, `has partition key "key" of type S and no sort key, but this client uses partition key "key" and sort key "sk"`,
		`make the client with dynamolock.New(client, "` + table + `"), without WithSortKey`} {
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
		{"partition key of another name", [][2]string{{"id", "S"}}, nil, nil, []string{`has partition key "id" of type S and no sort key`,
			`this client uses partition key "key" and no sort key`, `dynamolock.New(client, "TABLE", dynamolock.WithPartitionKeyName("id"))`}},
		{"partition key of type N", [][2]string{{"key", "N"}}, nil, nil, []string{`partition key "key" of type N`, "is of type N, expected S"}},
		{"sort key the client does not use", [][2]string{{"key", "S"}, {"sk", "S"}}, nil, nil, []string{`sort key "sk" of type S`,
			`dynamolock.New(client, "TABLE", dynamolock.WithSortKey("sk", ""))`}},
		{"sort key of another name", [][2]string{{"key", "S"}, {"other", "S"}}, []dynamolock.ClientOption{dynamolock.WithSortKey("sk", "v")}, nil,
			[]string{`sort key "other" of type S`, `sort key "sk"`, `dynamolock.New(client, "TABLE", dynamolock.WithSortKey("other", "v"))`}},
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
				assert.Contains(t, err.Error(), strings.ReplaceAll(s, "TABLE", table))
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

// Issue 40, item 2: on a table keyed "id", the *KeySchemaError names the fix
// as Go code to paste, and following it works. Creating the client's own
// table keyed otherwise (the advice the error gave before, followed) is
// refused before any call, as a client could not use that table; a table of
// another name is created as asked, as dynamolock v2 did.
func TestKeySchemaAdviceLeadsToTheFix(t *testing.T) {
	db, calls := newDB(t)
	ctx := context.Background()
	table := rawTable(t, db, [2]string{"id", "S"})
	c := newClient(t, db, table, fast...)

	_, err := c.AcquireLockWithContext(ctx, "k")
	var kse *dynamolock.KeySchemaError
	require.ErrorAs(t, err, &kse)
	msg := err.Error()
	t.Log(msg)
	fix := `dynamolock.New(client, "` + table + `", dynamolock.WithPartitionKeyName("id"))`
	assert.Contains(t, msg, `table "`+table+`" has partition key "id" of type S and no sort key, but this client uses partition key "key" and no sort key; to use this table, make the client with `+fix)
	advice := msg[:strings.Index(msg, fix)+len(fix)]
	assert.NotContains(t, advice, ") (", "one parenthesis after another")
	assert.NotContains(t, advice, "(S)", "the table's types are said in words")
	assert.NotContains(t, msg, "\n")

	// The advice of old, followed: refused, and nothing created or called.
	calls.reset()
	for name, call := range map[string]func() error{
		"CreateTableIfNotExists": func() error {
			_, err := c.CreateTableIfNotExists(ctx, dynamolock.WithCustomPartitionKeyName("id"))
			return err
		},
		"CreateTableWithContext": func() error {
			_, err := c.CreateTableWithContext(ctx, table, dynamolock.WithCustomPartitionKeyName("id"))
			return err
		},
		"CreateTableWithContext with a sort key": func() error {
			_, err := c.CreateTableWithContext(ctx, table, dynamolock.WithSortKeyName("sk"))
			return err
		},
	} {
		err := call()
		var ie *dynamolock.InvalidArgumentError
		require.ErrorAs(t, err, &ie, name)
		assert.Contains(t, err.Error(), "could not use table "+strconv.Quote(table), name)
		assert.Contains(t, err.Error(), "dynamolock.New(client, "+strconv.Quote(table), name)
		t.Logf("%s: %v", name, err)
	}
	assert.Zero(t, calls.total(), "refused before any call: %v", calls.reset())

	// The fix, pasted: it works.
	fixed := newClient(t, db, table, append(fast, dynamolock.WithPartitionKeyName("id"))...)
	created, err := fixed.CreateTableIfNotExists(ctx, dynamolock.WithCustomPartitionKeyName("id"))
	require.NoError(t, err)
	assert.False(t, created)
	l, err := fixed.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = fixed.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)

	// Another table: keyed as asked, as in v2.
	other := newTableName(t) + "_other"
	dropTable(t, db, other)
	_, err = c.CreateTableWithContext(ctx, other, dynamolock.WithCustomPartitionKeyName("pk"))
	require.NoError(t, err)
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(other)})
	require.NoError(t, err)
	assert.Equal(t, "pk", aws.ToString(out.Table.KeySchema[0].AttributeName))
}
