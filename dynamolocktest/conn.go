package dynamolocktest

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Conn is one host's connection to a [DB]. It has the methods of the
// SDK's *dynamodb.Client that the lock library calls, with the same
// signatures, so it is a dynamolock.DynamoDBClient and has every optional
// method the library looks for: DescribeTable, TransactWriteItems, Query,
// Scan and UpdateTimeToLive (and DescribeTimeToLive). The optFns arguments
// are accepted and ignored.
//
// A Conn behaves as an SDK client whose retryer makes one attempt: every
// failure, injected or not, reaches the caller, and errors are wrapped as
// the SDK wraps them (an *smithy.OperationError around the typed error, so
// errors.As to *types.ConditionalCheckFailedException and the like works
// as with the SDK).
//
// Faults apply to the Conn's later requests until [Conn.Heal]. It is safe
// for concurrent use, and starts no goroutine and no timer of its own: only
// [Conn.Delay] waits, on the calling goroutine's clock.
type Conn struct {
	db   *DB
	name string

	mu          sync.Mutex
	partitioned bool
	lose        int           // writes whose answers to lose
	throttle    int           // requests to throttle
	delay       time.Duration // wait before each request reaches the DB
	calls       map[string]int
}

// String names the connection ("conn-1", "conn-2", ... in the order
// [DB.Conn] made them).
func (c *Conn) String() string { return c.name }

// Partition cuts the connection off: from now on until [Conn.Heal], every
// request fails at once, without reaching the DB, with the error the SDK
// returns when DynamoDB's endpoint refuses connections (the lock library
// reports it as a *dynamolock.ConnectionError). A request already waiting
// in a [Conn.Delay] when the partition starts does not land either; its
// caller gets a connection reset, as for a request in flight when a
// network fails.
//
// A lock held through a partitioned Conn is lost once its lease runs out
// without a renewal: its Done channel closes and Err matches
// dynamolock.ErrLockLost. Another host may take it over one lease after it
// last saw the item change.
func (c *Conn) Partition() {
	c.mu.Lock()
	c.partitioned = true
	c.mu.Unlock()
}

// Heal ends every fault of the connection: the partition, answers still to
// be lost, throttles still to come, and the delay.
func (c *Conn) Heal() {
	c.mu.Lock()
	c.partitioned, c.lose, c.throttle, c.delay = false, 0, 0, 0
	c.mu.Unlock()
}

// LoseAnswers makes the next n writes (PutItem, UpdateItem, DeleteItem,
// TransactWriteItems) land in the DB, then fail with the error the SDK
// returns when the connection is reset before the answer arrives: the
// caller cannot tell whether the write happened. This is the ambiguous
// failure lock code must survive (a heartbeat retried after one, an
// acquisition that did succeed). Reads are not affected. n adds to any
// answers still to be lost; n <= 0 cancels them.
func (c *Conn) LoseAnswers(n int) {
	c.mu.Lock()
	c.lose = addFault(c.lose, n)
	c.mu.Unlock()
}

// Throttle makes the next n requests fail with a
// *types.ProvisionedThroughputExceededException, as DynamoDB answers when a
// table's capacity is exceeded: nothing is applied. n adds to any
// throttles still to come; n <= 0 cancels them.
func (c *Conn) Throttle(n int) {
	c.mu.Lock()
	c.throttle = addFault(c.throttle, n)
	c.mu.Unlock()
}

func addFault(pending, n int) int {
	if n <= 0 {
		return 0
	}
	return pending + n
}

// Delay makes every later request wait d before it reaches the DB (a slow
// network), until Delay(0) or [Conn.Heal]. The wait is a timer on the
// calling goroutine: inside a testing/synctest bubble it takes virtual
// time only. A request whose context ends while it waits is not applied
// and fails with the context's error, as the SDK does.
func (c *Conn) Delay(d time.Duration) {
	c.mu.Lock()
	c.delay = max(d, 0)
	c.mu.Unlock()
}

// Calls returns how many requests of each operation ("GetItem",
// "UpdateItem", "TransactWriteItems", ...) the connection received so far,
// those that failed included (injected faults too).
func (c *Conn) Calls() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.calls)
}

// model is the DB's model; it says what is wrong with a Conn that has none.
func (c *Conn) model() *ddbmodel.Model {
	if c == nil || c.db == nil {
		panic("dynamolocktest: a Conn not made by DB.Conn (a nil or zero Conn)")
	}
	return c.db.model
}

// endpoint is the URL the SDK errors of this connection name.
func (c *Conn) endpoint() string {
	return fmt.Sprintf("http://%s.dynamolocktest.invalid/", c.name)
}

// before counts a request and decides its fault before it is sent: an
// error to return at once, or the delay to wait first.
func (c *Conn) before(op string) (time.Duration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	if c.partitioned {
		return 0, faults.RefusedConnection(op, c.endpoint())
	}
	return c.delay, nil
}

// arrive decides the fate of a request that reached the DB after its
// delay: cut off by a partition that started meanwhile, or throttled.
func (c *Conn) arrive(op string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case c.partitioned:
		return faults.LostConnection(op)
	case c.throttle > 0:
		c.throttle--
		return faults.ServiceError(op, faults.ProvisionedThroughputExceeded)
	}
	return nil
}

// loseAnswer reports whether the answer to a write that landed is lost.
func (c *Conn) loseAnswer() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lose > 0 {
		c.lose--
		return true
	}
	return false
}

// do runs one request of op through the connection's faults; apply sends
// it to the DB.
func do[In, Out any](c *Conn, ctx context.Context, op string, write bool, in In, apply func(context.Context, In, ...func(*dynamodb.Options)) (*Out, error)) (*Out, error) {
	d, err := c.before(op)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, faults.Canceled(op, err)
	}
	if d > 0 {
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, faults.Canceled(op, ctx.Err())
		}
	}
	if err := c.arrive(op); err != nil {
		return nil, err
	}
	out, err := apply(context.WithoutCancel(ctx), in)
	if write && c.loseAnswer() {
		return nil, faults.LostConnection(op)
	}
	if err != nil {
		return nil, faults.APIError(op, "dynamolocktest-"+c.name, err)
	}
	return out, nil
}

// GetItem reads an item. ConsistentRead makes no difference: every read of
// the DB is strongly consistent.
func (c *Conn) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return do(c, ctx, "GetItem", false, in, c.model().GetItem)
}

// PutItem writes an item.
func (c *Conn) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(c, ctx, "PutItem", true, in, c.model().PutItem)
}

// UpdateItem updates an item.
func (c *Conn) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return do(c, ctx, "UpdateItem", true, in, c.model().UpdateItem)
}

// DeleteItem deletes an item.
func (c *Conn) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return do(c, ctx, "DeleteItem", true, in, c.model().DeleteItem)
}

// TransactWriteItems applies a transaction, all of it or nothing. A call
// without a ClientRequestToken gets a fresh one, as the SDK fills one in:
// a second call is a new transaction, while a call repeating a token that
// already committed succeeds without applying again.
func (c *Conn) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m := c.model()
	if in.ClientRequestToken == nil {
		cp := *in
		cp.ClientRequestToken = aws.String(c.db.nextToken())
		in = &cp
	}
	return do(c, ctx, "TransactWriteItems", true, in, m.TransactWriteItems)
}

// Query reads the items of one partition key.
func (c *Conn) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return do(c, ctx, "Query", false, in, c.model().Query)
}

// Scan reads every item of a table, a page at a time.
func (c *Conn) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return do(c, ctx, "Scan", false, in, c.model().Scan)
}

// CreateTable creates a table; it is ACTIVE at once.
func (c *Conn) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return do(c, ctx, "CreateTable", false, in, c.model().CreateTable)
}

// DescribeTable describes a table.
func (c *Conn) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return do(c, ctx, "DescribeTable", false, in, c.model().DescribeTable)
}

// UpdateTimeToLive enables or disables TTL on a table. The setting is
// kept; no expired item is ever deleted (DynamoDB deletes them in the
// background, within days, so a test must not wait for it either).
func (c *Conn) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return do(c, ctx, "UpdateTimeToLive", false, in, c.model().UpdateTimeToLive)
}

// DescribeTimeToLive describes a table's TTL setting.
func (c *Conn) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return do(c, ctx, "DescribeTimeToLive", false, in, c.model().DescribeTimeToLive)
}
