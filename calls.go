package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
)

// Every DynamoDB request of the library goes through this file, and no
// other file calls the DynamoDBClient: each request is counted once (for
// Stats and the metrics) under its operation's name, and its error is
// classified (a missing table, a key the table rejects, an endpoint that
// cannot be reached or spoken to) the same way wherever it is sent. Writes
// also check the table once (tablecheck.go) and record what their HTTP
// attempts showed (see startWrite). Every request that can return what it
// consumed asks for it (ReturnConsumedCapacity TOTAL: no extra call, a few
// bytes in the answer), and the units are counted (consumed.go).

// The optional interfaces of a DynamoDBClient that some operations need;
// *dynamodb.Client has them all.
type (
	describeTableAPI interface {
		DescribeTable(ctx context.Context, params *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	}
	describeGlobalTableAPI interface {
		DescribeGlobalTable(ctx context.Context, params *dynamodb.DescribeGlobalTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeGlobalTableOutput, error)
	}
	updateTimeToLiveAPI interface {
		UpdateTimeToLive(ctx context.Context, params *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	}
	transactWriteAPI interface {
		TransactWriteItems(ctx context.Context, params *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	}
	scanAPI interface {
		Scan(ctx context.Context, params *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	}
	queryAPI interface {
		Query(ctx context.Context, params *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	}
)

// getItem reads the item at key with a consistent GetItem: nil when there
// is none.
func (c *Client) getItem(ctx context.Context, key map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	bctx, end := c.bounded(ctx, "GetItem")
	out, err := c.db.GetItem(bctx, &dynamodb.GetItemInput{
		TableName:              aws.String(c.cfg.tableName),
		Key:                    key,
		ConsistentRead:         aws.Bool(true),
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal,
	}, withoutRetryQuota)
	if err = c.done(ctx, "GetItem", end(err)); err != nil {
		return nil, err
	}
	c.consumed(ctx, "GetItem", out.ConsumedCapacity)
	return out.Item, nil
}

// updateItem sends one conditional UpdateItem: a write (see startWrite),
// sent again while an ongoing transaction holds its item (see
// conflictRetry).
func (c *Client) updateItem(ctx context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
	t, err := c.startWrite(ctx)
	if err != nil {
		return nil, err
	}
	askCapacity(&in.ReturnConsumedCapacity)
	for try := 0; ; try++ {
		bctx, end := c.bounded(ctx, "UpdateItem")
		out, err := c.db.UpdateItem(bctx, in, t.opts[:]...)
		err = end(err)
		if err == nil && in.ReturnValues == types.ReturnValueAllNew && len(out.Attributes) == 0 {
			// DynamoDB returns the whole item it wrote, keys included.
			err = c.wrongAnswer("UpdateItem", "a write that asked for the item it wrote succeeded with no item")
		}
		if err == nil {
			c.consumed(ctx, "UpdateItem", out.ConsumedCapacity)
		}
		if !c.conflictRetry(ctx, "UpdateItem", err, try) {
			return out, c.endWrite(ctx, "UpdateItem", t, err)
		}
	}
}

// deleteItem sends one conditional DeleteItem: a write (see startWrite),
// sent again while an ongoing transaction holds its item (see
// conflictRetry).
func (c *Client) deleteItem(ctx context.Context, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
	t, err := c.startWrite(ctx)
	if err != nil {
		return nil, err
	}
	askCapacity(&in.ReturnConsumedCapacity)
	for try := 0; ; try++ {
		bctx, end := c.bounded(ctx, "DeleteItem")
		out, err := c.db.DeleteItem(bctx, in, t.opts[:]...)
		err = end(err)
		if err == nil {
			c.consumed(ctx, "DeleteItem", out.ConsumedCapacity)
		}
		if !c.conflictRetry(ctx, "DeleteItem", err, try) {
			return out, c.endWrite(ctx, "DeleteItem", t, err)
		}
	}
}

// conflictRetries bounds how often one write is sent again after DynamoDB
// refused it with a TransactionConflictException; conflictBackoff is the
// first wait, doubled after each.
const (
	conflictRetries = 5
	conflictBackoff = 10 * time.Millisecond
)

// conflictRetry reports whether a plain write that failed with err, after
// try resends, should be sent again, and waits before it does: DynamoDB
// refused it because an ongoing transaction includes its item (a guarded
// write of the holder, another client's AcquireLocks or fair semaphore),
// and the SDK does not retry that answer. The write did not apply, so
// sending the same request again is what an SDK retry would do; the
// transaction lasts milliseconds. The waits (10 ms doubling, with jitter)
// end with ctx, not with Close: Close's releases need them too. Each send
// is a call of its own in Stats.
func (c *Client) conflictRetry(ctx context.Context, op string, err error, try int) bool {
	if err == nil || try >= conflictRetries || !isTransactionConflict(err) {
		return false
	}
	c.metrics.Call(ctx, op)
	backoff := conflictBackoff << try
	t := c.newTimer(backoff + randomUpTo(backoff))
	defer t.Stop()
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		return false
	}
}

// transactWriteItems sends one TransactWriteItems: a write (see
// startWrite). feature names the caller's operation for the error when
// the client cannot send transactions.
func (c *Client) transactWriteItems(ctx context.Context, feature string, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
	tw, ok := c.db.(transactWriteAPI)
	if !ok {
		return nil, unsupported(feature, "TransactWriteItems")
	}
	if err := c.checkTable(ctx); err != nil {
		return nil, err
	}
	if err := c.table.transactions(c.cfg.tableName, feature); err != nil {
		return nil, err
	}
	t, err := c.startWrite(ctx)
	if err != nil {
		return nil, err
	}
	askCapacity(&in.ReturnConsumedCapacity)
	bctx, end := c.bounded(ctx, "TransactWriteItems")
	out, err := tw.TransactWriteItems(bctx, in, t.opts[:]...)
	if err == nil {
		c.consumedTx(ctx, out.ConsumedCapacity)
	}
	return out, c.endWrite(ctx, "TransactWriteItems", t, end(err))
}

// canTransact reports whether the client can send TransactWriteItems.
func (c *Client) canTransact() bool {
	_, ok := c.db.(transactWriteAPI)
	return ok
}

// describeTable describes tableName with one DescribeTable. A missing
// table's error is the SDK's *types.ResourceNotFoundException, unclassified:
// callers that look for a table decide what it means (see isNotFound).
func (c *Client) describeTable(ctx context.Context, feature, tableName string) (*dynamodb.DescribeTableOutput, error) {
	dt, ok := c.db.(describeTableAPI)
	if !ok {
		return nil, unsupported(feature, "DescribeTable")
	}
	bctx, end := c.bounded(ctx, "DescribeTable")
	out, err := dt.DescribeTable(bctx, &dynamodb.DescribeTableInput{TableName: aws.String(tableName)}, withoutRetryQuota)
	err = end(err)
	if err == nil && (out == nil || out.Table == nil || aws.ToString(out.Table.TableName) == "") {
		// DynamoDB describes a table it has, or answers that it has none.
		err = c.wrongAnswer("DescribeTable", fmt.Sprintf("it answered DescribeTable of %q with no table description", tableName))
	}
	c.metrics.Call(ctx, "DescribeTable")
	c.answer(err)
	if err != nil && !isNotFound(err) {
		err = c.classifyAs(ctx, "DescribeTable", err, false)
	}
	return out, err
}

// canDescribe reports whether the client can send DescribeTable.
func (c *Client) canDescribe() bool {
	_, ok := c.db.(describeTableAPI)
	return ok
}

// describeGlobalTable describes the global table (of the legacy version,
// 2017.11.29) named name with one DescribeGlobalTable. A table that is not
// one is the SDK's *types.GlobalTableNotFoundException, unclassified (see
// isGlobalTableNotFound).
func (c *Client) describeGlobalTable(ctx context.Context, name string) (*dynamodb.DescribeGlobalTableOutput, error) {
	dg, ok := c.db.(describeGlobalTableAPI)
	if !ok {
		return nil, unsupported("the legacy global-table check", "DescribeGlobalTable")
	}
	bctx, end := c.bounded(ctx, "DescribeGlobalTable")
	out, err := dg.DescribeGlobalTable(bctx, &dynamodb.DescribeGlobalTableInput{GlobalTableName: aws.String(name)}, withoutRetryQuota)
	err = end(err)
	c.metrics.Call(ctx, "DescribeGlobalTable")
	c.answer(err)
	if err != nil && !isGlobalTableNotFound(err) {
		err = c.classifyAs(ctx, "DescribeGlobalTable", err, false)
	}
	return out, err
}

// canDescribeGlobal reports whether the client can send DescribeGlobalTable.
func (c *Client) canDescribeGlobal() bool {
	_, ok := c.db.(describeGlobalTableAPI)
	return ok
}

func isGlobalTableNotFound(err error) bool {
	var gnf *types.GlobalTableNotFoundException
	return errors.As(err, &gnf)
}

func isNotFound(err error) bool {
	var rnf *types.ResourceNotFoundException
	return errors.As(err, &rnf)
}

// sendCreateTable sends one CreateTable.
func (c *Client) sendCreateTable(ctx context.Context, in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
	bctx, end := c.bounded(ctx, "CreateTable")
	out, err := c.db.CreateTable(bctx, in, withoutRetryQuota)
	err = end(err)
	c.metrics.Call(ctx, "CreateTable")
	c.answer(err)
	if err != nil {
		err = c.classifyAs(ctx, "CreateTable", err, false)
	}
	return out, err
}

// updateTimeToLive sends one UpdateTimeToLive.
func (c *Client) updateTimeToLive(ctx context.Context, feature string, in *dynamodb.UpdateTimeToLiveInput) (*dynamodb.UpdateTimeToLiveOutput, error) {
	ttl, ok := c.db.(updateTimeToLiveAPI)
	if !ok {
		return nil, unsupported(feature, "UpdateTimeToLive")
	}
	bctx, end := c.bounded(ctx, "UpdateTimeToLive")
	out, err := ttl.UpdateTimeToLive(bctx, in, withoutRetryQuota)
	return out, c.done(ctx, "UpdateTimeToLive", end(err))
}

// canUpdateTimeToLive reports whether the client can send UpdateTimeToLive.
func (c *Client) canUpdateTimeToLive() bool {
	_, ok := c.db.(updateTimeToLiveAPI)
	return ok
}

// scan sends one consistent Scan page.
func (c *Client) scan(ctx context.Context, feature string, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	sc, ok := c.db.(scanAPI)
	if !ok {
		return nil, unsupported(feature, "Scan")
	}
	askCapacity(&in.ReturnConsumedCapacity)
	bctx, end := c.bounded(ctx, "Scan")
	out, err := sc.Scan(bctx, in, withoutRetryQuota)
	if err = c.done(ctx, "Scan", end(err)); err != nil {
		return out, err
	}
	c.consumed(ctx, "Scan", out.ConsumedCapacity)
	return out, nil
}

// query sends one consistent Query page.
func (c *Client) query(ctx context.Context, feature string, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	q, ok := c.db.(queryAPI)
	if !ok {
		return nil, unsupported(feature, "Query")
	}
	askCapacity(&in.ReturnConsumedCapacity)
	bctx, end := c.bounded(ctx, "Query")
	out, err := q.Query(bctx, in, withoutRetryQuota)
	if err = c.done(ctx, "Query", end(err)); err != nil {
		return out, err
	}
	c.consumed(ctx, "Query", out.ConsumedCapacity)
	return out, nil
}

// canScan and canQuery report whether the client can list locks.
func (c *Client) canScan() bool {
	_, ok := c.db.(scanAPI)
	return ok
}

func (c *Client) canQuery() bool {
	_, ok := c.db.(queryAPI)
	return ok
}

// withoutRetryQuota is a per-call option of every request the library
// sends: the call keeps the SDK client's retryer (its attempts, backoff,
// which errors it retries, adaptive mode's send rate) but takes no token
// from its client-side retry quota. That quota is shared by every request
// of the SDK client and refills by one token per success (a retry costs
// 14): after some refused connections it is spent, and from then on each
// call fails at its first failed attempt, for minutes after the network is
// back when few calls succeed (a leader's one heartbeat every few
// seconds). The library paces its own retries (heartbeats while the lease
// lasts, polls once a refresh period), so the quota only took the SDK's
// retries from its renewals and releases, and let the application's own
// failing requests on the same SDK client take them too. The application's
// requests still use the quota; the README says how to turn it off.
func withoutRetryQuota(o *dynamodb.Options) {
	if o.Retryer != nil {
		o.Retryer = quotaFreeRetryer{o.Retryer}
	}
}

// quotaFreeRetryer is a retryer whose retries need no retry token.
type quotaFreeRetryer struct{ aws.Retryer }

func (quotaFreeRetryer) GetRetryToken(context.Context, error) (func(error) error, error) {
	return releaseNoToken, nil
}

// GetAttemptToken keeps the wrapped retryer's (adaptive mode's client-side
// send rate waits there).
func (r quotaFreeRetryer) GetAttemptToken(ctx context.Context) (func(error) error, error) {
	if v2, ok := r.Retryer.(aws.RetryerV2); ok {
		return v2.GetAttemptToken(ctx)
	}
	return r.GetInitialToken(), nil
}

func releaseNoToken(error) error { return nil }

// sdkOptions returns the options of an SDK client (its endpoint and
// region), for the errors that name where the client sends its calls.
func (c *Client) sdkOptions() (dynamodb.Options, bool) {
	o, ok := c.db.(interface{ Options() dynamodb.Options })
	if !ok {
		return dynamodb.Options{}, false
	}
	return o.Options(), true
}

// done counts a read or table call named op and classifies its error.
func (c *Client) done(ctx context.Context, op string, err error) error {
	c.metrics.Call(ctx, op)
	c.answer(err)
	if err == nil {
		return nil
	}
	return c.counted(ctx, op, c.classifyAs(ctx, op, err, false))
}

// counted counts err, the classified error of a call named op, if DynamoDB
// throttled it, and returns it.
func (c *Client) counted(ctx context.Context, op string, err error) error {
	var te *ThrottlingError
	if errors.As(err, &te) {
		c.metrics.Throttled(ctx, op, uint8(te.Limit), te.Limit.String())
	}
	return err
}

// startWrite prepares one write: the table is checked first (once per
// client; see checkTable), and a write the check refuses is never sent.
// The write passes t.opts to its SDK call, which records every HTTP
// attempt of the call in t; endWrite then says, when the SDK retried after
// an attempt whose outcome is unknown (its answer was lost), that the
// write may have landed (mayHaveLanded), even when the last attempt was
// rejected: the earlier one may have landed.
func (c *Client) startWrite(ctx context.Context) (*writeAttempts, error) {
	if err := c.checkTable(ctx); err != nil {
		return nil, err
	}
	t := new(writeAttempts)
	t.opts = [...]func(*dynamodb.Options){t.option, withoutRetryQuota}
	return t, nil
}

// endWrite counts the write named op and classifies its error.
func (c *Client) endWrite(ctx context.Context, op string, t *writeAttempts, err error) error {
	c.metrics.Call(ctx, op)
	c.answer(err)
	if err == nil {
		return nil
	}
	c.failedWriteCost(ctx, op, err)
	return c.counted(ctx, op, c.classifyAs(ctx, op, err, t.unknown.Load()))
}

// writeAttempts records the HTTP attempts of one write, counted after the
// SDK's retry step. A DynamoDBClient that ignores the SDK's options records
// nothing: its calls are taken as one attempt each, as before.
//
// It rides on the call's options rather than its context, so that a
// DynamoDBClient wrapper that sends the call with a context of its own
// still records it. One allocation holds the record, the option slice
// and (being a middleware itself) what the SDK's stack keeps: a write
// costs two more, the option's and addMiddleware's method values.
type writeAttempts struct {
	n       atomic.Int32
	unknown atomic.Bool                // an attempt failed without an answer that says it did not apply
	opts    [2]func(*dynamodb.Options) // t.option and withoutRetryQuota, for the SDK call's variadic options
}

func (t *writeAttempts) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, t.addMiddleware)
}

func (t *writeAttempts) addMiddleware(stack *middleware.Stack) error {
	return stack.Finalize.Add(t, middleware.After)
}

// ID names the middleware in the SDK's stack.
func (t *writeAttempts) ID() string { return "dynamolockWriteAttempts" }

// HandleFinalize records one HTTP attempt of the write.
func (t *writeAttempts) HandleFinalize(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleFinalize(ctx, in)
	t.n.Add(1)
	if err != nil && !rejected(err) && !neverSent(err) {
		t.unknown.Store(true)
	}
	return out, md, err
}

// mayHaveLandedError is a write's error when an earlier HTTP attempt of
// the same call failed without an answer: whatever the last attempt says,
// the write may have been applied.
type mayHaveLandedError struct{ err error }

func (e *mayHaveLandedError) Error() string { return e.err.Error() }
func (e *mayHaveLandedError) Unwrap() error { return e.err }

// mayHaveLanded reports whether err is a write's error after an attempt
// whose outcome is unknown.
func mayHaveLanded(err error) bool {
	var m *mayHaveLandedError
	return errors.As(err, &m)
}

// notSentError is a write's error when the write was never sent: the
// table check before it failed. The write surely did not apply.
type notSentError struct{ err error }

func (e *notSentError) Error() string { return e.err.Error() }
func (e *notSentError) Unwrap() error { return e.err }
