package integration_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// The helpers below are the subset of the root package's test helpers
// (helpers_test.go there) that these tests use.

// endpoint is the DynamoDB Local every test talks to.
var endpoint string

// leakOptions ignores the SDK's idle keep-alive connections.
var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

func TestMain(m *testing.M) {
	ep, stop, err := ddblocal.Endpoint(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: dynamolock's tests need Amazon DynamoDB Local:", err)
		os.Exit(1)
	}
	endpoint = ep
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// newDB returns an SDK client for DynamoDB Local.
func newDB(t testing.TB, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	t.Helper()
	db, err := ddblocal.NewClient(context.Background(), endpoint, optFns...)
	require.NoError(t, err)
	return db
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// newTable creates a fresh lock table for one test, with partition key
// "key" and optionally a sort key, and returns its name.
func newTable(t testing.TB, sortKeyName string) string {
	t.Helper()
	db := newDB(t)
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 200 {
		name = name[:200]
	}
	name = fmt.Sprintf("%s_%d", name, rand.Uint32())
	var keys []dynamolock.ClientOption
	if sortKeyName != "" {
		keys = append(keys, dynamolock.WithSortKey(sortKeyName, ""))
	}
	c, err := dynamolock.New(db, name, keys...) // keyed as the table: a client creates its own table only so
	require.NoError(t, err)
	_, err = c.CreateTableWithContext(context.Background(), name)
	require.NoError(t, err)
	require.NoError(t, c.Close())
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// fast are options for quick tests: a 1 s lease renewed every 250 ms.
var fast = []dynamolock.ClientOption{
	dynamolock.WithLeaseDuration(time.Second),
	dynamolock.WithHeartbeatPeriod(250 * time.Millisecond),
}

// newClient returns a client closed at the end of the test.
func newClient(t testing.TB, db dynamolock.DynamoDBClient, table string, opts ...dynamolock.ClientOption) *dynamolock.Client {
	t.Helper()
	c, err := dynamolock.New(db, table, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func rawItem(t testing.TB, db *dynamodb.Client, table string, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	t.Helper()
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), Key: key, ConsistentRead: aws.Bool(true)})
	require.NoError(t, err)
	return out.Item
}

func keyOf(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: k}}
}

func putRaw(t testing.TB, db *dynamodb.Client, table string, item map[string]types.AttributeValue) {
	t.Helper()
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{TableName: aws.String(table), Item: item})
	require.NoError(t, err)
}

func s(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }

// waitFor polls cond every 10 ms until it holds or d passes.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// closedWithin reports whether ch closes within d.
func closedWithin(ch <-chan struct{}, d time.Duration) bool {
	select {
	case <-ch:
		return true
	default:
	}
	select {
	case <-ch:
		return true
	case <-time.After(d):
		return false
	}
}

// guardedPut writes v to item "data#<name>" in one transaction with the
// lock's TransactionCondition.
func guardedPut(ctx context.Context, db *dynamodb.Client, table string, l *dynamolock.Lock, name string, v int) error {
	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		l.TransactionCondition(),
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"key": s("data#" + name), "v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)},
		}}},
	}})
	return err
}

// assertHeld checks that l is held and that another client cannot acquire
// it right now.
func assertHeld(t *testing.T, l *dynamolock.Lock, other *dynamolock.Client) {
	t.Helper()
	require.NoError(t, l.Err())
	require.False(t, l.IsExpired(), "the holder's lease ran out")
	select {
	case <-l.Done():
		t.Fatal("Done closed")
	default:
	}
	_, err := other.AcquireLockWithContext(context.Background(), l.PartitionKey(), dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held, "another client acquired a held lock")
}
