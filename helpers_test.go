package dynamolock_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

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

// callCounter counts DynamoDB operations with SDK middleware, once per
// operation (not per retry attempt).
type callCounter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *callCounter) register(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("callCounter",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			c.n[awsmiddleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// snapshot returns the counts so far and resets them.
func (c *callCounter) reset() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func (c *callCounter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := 0
	for _, v := range c.n {
		t += v
	}
	return t
}

func (c *callCounter) get(op string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[op]
}

// newDB returns an SDK client for DynamoDB Local that counts its calls.
func newDB(t testing.TB, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, *callCounter) {
	t.Helper()
	cc := &callCounter{n: map[string]int{}}
	optFns = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.APIOptions = append(o.APIOptions, cc.register)
	}}, optFns...)
	db, err := ddblocal.NewClient(context.Background(), endpoint, optFns...)
	require.NoError(t, err)
	return db, cc
}

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)

// newTable creates a fresh lock table for one test, with partition key
// "key" and optionally a sort key, and returns its name.
func newTable(t testing.TB, sortKeyName string) string {
	t.Helper()
	db, _ := newDB(t)
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

// tableChecked removes from calls the one DescribeTable a client sends
// before its first write (the global-table check, see
// WithSingleWriterRegion), failing the test if it is missing.
func tableChecked(t testing.TB, calls map[string]int) map[string]int {
	t.Helper()
	require.Equal(t, 1, calls["DescribeTable"], "one DescribeTable before the client's first write: %v", calls)
	delete(calls, "DescribeTable")
	return calls
}
