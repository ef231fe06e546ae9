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
// A Conn behaves as an SDK client whose retryer makes one attempt (but
// for [Conn.LoseAnswersAndRetry], which makes the SDK's retry of a write
// whose answer was lost): every failure, injected or not, reaches the
// caller, and errors are wrapped as the SDK wraps them (an
// *smithy.OperationError around the typed error, so errors.As to
// *types.ConditionalCheckFailedException and the like works as with the
// SDK).
//
// Faults apply to the Conn's later requests until [Conn.Heal]. It is safe
// for concurrent use, and starts no goroutine and no timer of its own: only
// [Conn.Delay] waits, on the calling goroutine's clock.
type Conn struct {
	db   *DB
	name string

	mu          sync.Mutex
	partitioned bool
	stalled     chan struct{} // non-nil while stalled; closed by Heal
	lose        int           // writes whose answers to lose
	retry       int           // writes whose answers to lose, then send again
	throttle    int           // requests to throttle for the table's capacity
	hotKey      int           // requests to throttle for their key's partition
	conflicts   int           // writes that meet a transaction in progress
	delay       time.Duration // wait before each request reaches the DB
	hold        time.Duration // between a transaction's two steps
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

// Stall makes the network silent: from now on until [Conn.Heal], every
// request is taken and never answered, as when a connection stays open
// and nothing is forwarded (a stalled proxy, a black-holed route, a
// listener that accepts and never replies). A request waits until its
// context ends, and then fails with the context's error, as the SDK's
// call does; it never reaches the DB. Heal ends the wait of requests
// still stalled with a connection reset (they did not land either).
//
// Unlike [Conn.Partition], which fails each request at once, this is the
// fault that shows whether code bounds its calls: a caller without a
// deadline would wait for ever.
func (c *Conn) Stall() {
	c.mu.Lock()
	if c.stalled == nil {
		c.stalled = make(chan struct{})
	}
	c.mu.Unlock()
}

// Heal ends every fault of the connection: the partition, the stall, answers still to
// be lost (and retries), throttles and conflicts still to come, the delay
// and the hold of transactions.
func (c *Conn) Heal() {
	c.mu.Lock()
	if c.stalled != nil {
		close(c.stalled)
		c.stalled = nil
	}
	c.partitioned, c.lose, c.retry, c.throttle, c.hotKey, c.conflicts, c.delay, c.hold = false, 0, 0, 0, 0, 0, 0, 0
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

// LoseAnswersAndRetry makes the next n writes (PutItem, UpdateItem,
// DeleteItem, TransactWriteItems) land in the DB, lose their answer, and be
// sent again at once, as the SDK retries a request whose connection was
// reset before the answer came: the caller gets the second attempt's
// answer, as in production. That attempt meets what the first one did: a
// conditional write fails its condition (a
// *types.ConditionalCheckFailedException carrying the item the first
// attempt wrote, when the request asked for ALL_OLD), an unconditional
// UpdateItem is applied twice, and a TransactWriteItems, which carries one
// ClientRequestToken in both attempts, succeeds without applying again.
// [Conn.Calls] counts the call once. n adds to any retries still to come;
// n <= 0 cancels them.
//
// This is the failure [Conn.LoseAnswers] cannot show: there the caller
// sees the lost answer; here it sees a plausible answer that is about its
// own earlier attempt.
func (c *Conn) LoseAnswersAndRetry(n int) {
	c.mu.Lock()
	c.retry = addFault(c.retry, n)
	c.mu.Unlock()
}

// TransactionConflicts makes the next n writes meet a transaction in
// progress on their item, as when another client's TransactWriteItems
// includes it: a PutItem, UpdateItem or DeleteItem fails with a
// *types.TransactionConflictException (HTTP 400), a TransactWriteItems with
// a *types.TransactionCanceledException whose reason for its first member
// is "TransactionConflict" ("None" for the others). Nothing is applied, and
// the SDK does not retry either error: the write did not happen, and
// trying it again may succeed. DynamoDB Local never answers so. Reads are
// not affected (DynamoDB serves a read beside a transaction). n adds to
// any conflicts still to come; n <= 0 cancels them.
func (c *Conn) TransactionConflicts(n int) {
	c.mu.Lock()
	c.conflicts = addFault(c.conflicts, n)
	c.mu.Unlock()
}

// HoldTransactions makes the connection's later TransactWriteItems calls
// take effect in two steps d apart, as DynamoDB's transactions do: the
// first checks the conditions and puts the items in the transaction, the
// second, d later, writes them. Meanwhile a write of one of those items
// through any connection fails as [Conn.TransactionConflicts] describes,
// and a read sees the items as they were. The caller waits d (on its own
// clock: virtual time in a testing/synctest bubble) whatever its context
// does, since a transaction DynamoDB has begun completes. HoldTransactions(0)
// or [Conn.Heal] makes them take effect at once again.
func (c *Conn) HoldTransactions(d time.Duration) {
	c.mu.Lock()
	c.hold = max(d, 0)
	c.mu.Unlock()
}

// Throttle makes the next n requests fail with a
// *types.ProvisionedThroughputExceededException, as DynamoDB answers when a
// provisioned table's capacity is exceeded, with the reason it gives
// (TableReadProvisionedThroughputExceeded or
// TableWriteProvisionedThroughputExceeded, on the table's ARN): nothing is
// applied. n adds to any throttles still to come; n <= 0 cancels them.
func (c *Conn) Throttle(n int) {
	c.mu.Lock()
	c.throttle = addFault(c.throttle, n)
	c.mu.Unlock()
}

// ThrottleHotKey makes the next n requests fail as DynamoDB throttles
// requests to one partition key beyond its partition's limit (a hot key):
// a *types.ThrottlingException whose reason is
// TableReadKeyRangeThroughputExceeded or
// TableWriteKeyRangeThroughputExceeded, on the table's ARN. Only requests
// of one item (GetItem, PutItem, UpdateItem, DeleteItem) count; nothing is
// applied. n adds to any still to come; n <= 0 cancels them.
func (c *Conn) ThrottleHotKey(n int) {
	c.mu.Lock()
	c.hotKey = addFault(c.hotKey, n)
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
// those that failed included (injected faults too); a call is counted
// once, whatever the attempts it makes.
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
// error to return at once, the delay to wait first, or the stall to wait
// in (nil: none).
func (c *Conn) before(op string) (time.Duration, <-chan struct{}, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls[op]++
	if c.partitioned {
		return 0, nil, faults.RefusedConnection(op, c.endpoint())
	}
	return c.delay, c.stalled, nil
}

// arrive decides the fate of a request that reached the DB after its
// delay: cut off by a partition that started meanwhile, throttled, or (a
// write, whose answer to a conflict is conflict) meeting a transaction.
func (c *Conn) arrive(op string, write bool, table string, conflict error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	rw := "Read"
	if write {
		rw = "Write"
	}
	switch {
	case c.partitioned:
		return faults.LostConnection(op)
	case c.throttle > 0:
		c.throttle--
		return faults.Throttled(op, "ProvisionedThroughputExceededException", "Table"+rw+"ProvisionedThroughputExceeded", tableARN(table))
	case c.hotKey > 0 && itemOp(op):
		c.hotKey--
		return faults.Throttled(op, "ThrottlingException", "Table"+rw+"KeyRangeThroughputExceeded", tableARN(table))
	case c.conflicts > 0 && conflict != nil:
		c.conflicts--
		return faults.APIError(op, "dynamolocktest-"+c.name, conflict)
	}
	return nil
}

// tableARN is the ARN DynamoDB names table by in its throttling reasons,
// in the model's region and account.
func tableARN(table string) string {
	return "arn:aws:dynamodb:us-east-1:000000000000:table/" + table
}

// itemOp reports whether op reads or writes one item by its key: the
// requests a hot key's partition throttles.
func itemOp(op string) bool {
	switch op {
	case "GetItem", "PutItem", "UpdateItem", "DeleteItem":
		return true
	}
	return false
}

// tableOf is the table a request names ("" for a transaction's several).
func tableOf(in any) string {
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.PutItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.UpdateItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.DeleteItemInput:
		return aws.ToString(in.TableName)
	case *dynamodb.QueryInput:
		return aws.ToString(in.TableName)
	case *dynamodb.ScanInput:
		return aws.ToString(in.TableName)
	}
	return ""
}

// take consumes one of the faults counted by *n, if any is left.
func (c *Conn) take(n *int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if *n > 0 {
		*n--
		return true
	}
	return false
}

// holdFor is how long the connection holds a transaction open.
func (c *Conn) holdFor() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hold
}

// do runs one request of op through the connection's faults; apply sends
// it to the DB. A write's conflict is DynamoDB's answer to it when it meets
// a transaction in progress (nil when it cannot: a read, an empty
// transaction).
func do[In, Out any](c *Conn, ctx context.Context, op string, write bool, conflict error, in In, apply func(context.Context, In, ...func(*dynamodb.Options)) (*Out, error)) (*Out, error) {
	d, stalled, err := c.before(op)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, faults.Canceled(op, err)
	}
	if stalled != nil {
		select {
		case <-ctx.Done():
			return nil, faults.Canceled(op, ctx.Err())
		case <-stalled:
			return nil, faults.LostConnection(op)
		}
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
	if err := c.arrive(op, write, tableOf(in), conflict); err != nil {
		return nil, err
	}
	out, err := apply(context.WithoutCancel(ctx), in)
	if write && c.take(&c.retry) {
		// The first attempt's answer is lost; the SDK sends the request
		// again, and the caller gets that attempt's answer.
		out, err = apply(context.WithoutCancel(ctx), in)
	}
	if write && c.take(&c.lose) {
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
	return do(c, ctx, "GetItem", false, nil, in, c.model().GetItem)
}

// PutItem writes an item.
func (c *Conn) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(c, ctx, "PutItem", true, ddbmodel.TransactionConflict(), in, c.model().PutItem)
}

// UpdateItem updates an item.
func (c *Conn) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return do(c, ctx, "UpdateItem", true, ddbmodel.TransactionConflict(), in, c.model().UpdateItem)
}

// DeleteItem deletes an item.
func (c *Conn) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return do(c, ctx, "DeleteItem", true, ddbmodel.TransactionConflict(), in, c.model().DeleteItem)
}

// TransactWriteItems applies a transaction, all of it or nothing. A call
// without a ClientRequestToken gets a fresh one, as the SDK fills one in:
// a second call is a new transaction, while a call repeating a token that
// committed within the last ten minutes succeeds without applying again
// (or fails with an IdempotentParameterMismatchException when the rest of
// the request differs), as DynamoDB does.
func (c *Conn) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m := c.model()
	if in.ClientRequestToken == nil {
		cp := *in
		cp.ClientRequestToken = aws.String(c.db.nextToken())
		in = &cp
	}
	apply := m.TransactWriteItems
	if d := c.holdFor(); d > 0 {
		apply = func(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
			tx, err := m.PrepareTransactWriteItems(ctx, in)
			if err != nil {
				return nil, err
			}
			time.Sleep(d)
			return tx.Commit()
		}
	}
	var conflict error
	if n := len(in.TransactItems); n > 0 {
		conflict = ddbmodel.CancelledByConflict(n, 0)
	}
	return do(c, ctx, "TransactWriteItems", true, conflict, in, apply)
}

// Query reads the items of one partition key.
func (c *Conn) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	return do(c, ctx, "Query", false, nil, in, c.model().Query)
}

// Scan reads every item of a table, a page at a time.
func (c *Conn) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	return do(c, ctx, "Scan", false, nil, in, c.model().Scan)
}

// CreateTable creates a table; it is ACTIVE at once.
func (c *Conn) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return do(c, ctx, "CreateTable", false, nil, in, c.model().CreateTable)
}

// DescribeTable describes a table.
func (c *Conn) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return do(c, ctx, "DescribeTable", false, nil, in, c.model().DescribeTable)
}

// UpdateTimeToLive enables or disables TTL on a table. The setting is
// kept; no expired item is ever deleted (DynamoDB deletes them in the
// background, within days, so a test must not wait for it either).
func (c *Conn) UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error) {
	return do(c, ctx, "UpdateTimeToLive", false, nil, in, c.model().UpdateTimeToLive)
}

// DescribeTimeToLive describes a table's TTL setting.
func (c *Conn) DescribeTimeToLive(ctx context.Context, in *dynamodb.DescribeTimeToLiveInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTimeToLiveOutput, error) {
	return do(c, ctx, "DescribeTimeToLive", false, nil, in, c.model().DescribeTimeToLive)
}
