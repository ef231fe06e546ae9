package dynamolock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// The read/write lock's broken promises of issue 37, each reproduced
// through the public API, and the orderings that broke them:
//   - a reader whose lease is longer than an hour is read back as written
//     (every client used to decode it as malformed, so dead at once);
//   - a reader's heartbeat that lands after its lease ran out by the
//     holder's clock (a delayed answer) is taken back, as an exclusive
//     lock's is;
//   - a waiter whose queue join landed with its answer lost keeps the
//     ticket it drew;
//   - FailIfLocked remembers across calls what it saw, so that polling
//     try-locks take over a dead writer, dead readers and dead waiters
//     after one lease;
//   - every holder kind fits beside the largest data the size check
//     accepts.

// TestRWLockLongLeaseReaderKeepsWritersOut: issue 37, finding 1.
func TestRWLockLongLeaseReaderKeepsWritersOut(t *testing.T) {
	table := newTable(t, "")
	db := mustDB(t)
	c1 := newClient(t, db, table, rwOpts...)
	c2 := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	t.Run("WithLockLease", func(t *testing.T) {
		r, err := newRW(t, c1, "long").RLock(ctx, dynamolock.WithLockLease(2*time.Hour))
		require.NoError(t, err)
		_, err = newRW(t, c2, "long").Lock(ctx, dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held, "a live reader with a 2 h lease holds the lock")
		require.NoError(t, r.Close())
	})
	t.Run("Ensure", func(t *testing.T) {
		r, err := newRW(t, c1, "ensured").RLock(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Ensure(ctx, 2*time.Hour))
		require.Equal(t, 2*time.Hour, r.LeaseDuration())
		_, err = newRW(t, c2, "ensured").Lock(ctx, dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held, "a live reader renewed for 2 h holds the lock")
		require.NoError(t, r.Close())
	})
}

// delayAnswer is SDK middleware that lets the first UpdateItem attempt
// after arm reach DynamoDB, then holds its answer until until() holds (a
// delayed answer: the write landed long before the holder hears of it).
type delayAnswer struct {
	armed atomic.Bool
	until func() bool
}

func (d *delayAnswer) register(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("delayAnswer",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleDeserialize(ctx, in)
			if d.armed.CompareAndSwap(true, false) {
				for deadline := time.Now().Add(10 * time.Second); !d.until() && time.Now().Before(deadline); {
					time.Sleep(5 * time.Millisecond)
				}
			}
			return out, md, err
		}), middleware.After)
}

// TestRWLockLateReaderHeartbeatIsUndone: issue 37, finding 2. A reader's
// heartbeat lands, and its answer comes after the reader's lease ran out by
// its own clock: the reader has been told it lost the lock, so nobody holds
// the entry the late write renewed. It is taken back: a writer gets the
// lock at once instead of waiting a lease for readers nobody holds.
func TestRWLockLateReaderHeartbeatIsUndone(t *testing.T) {
	table := newTable(t, "")
	d := &delayAnswer{}
	db, _ := newDB(t, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, d.register)
	})
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := newRW(t, c, "k").RLock(ctx)
	require.NoError(t, err)
	end := r.Expiration()
	d.until = func() bool { return time.Now().After(end.Add(50 * time.Millisecond)) }
	d.armed.Store(true)
	err = c.SendHeartbeatWithContext(ctx, r)
	require.ErrorIs(t, err, dynamolock.ErrLockLost, "the answer came after the lease")
	require.Empty(t, readersOf(t, table, "k"), "the late beat's entry was taken back")
	other := newClient(t, mustDB(t), table, rwOpts...)
	w, err := newRW(t, other, "k").Lock(ctx, dynamolock.FailIfLocked())
	require.NoError(t, err, "no reader holds the lock: a writer gets it at once")
	require.NoError(t, w.Close())
}

// queueOf returns the rwlock's queue entries by id, with their tickets.
func queueTickets(t *testing.T, table, key string) map[string]string {
	t.Helper()
	m, _ := rawItem(t, mustDB(t), table, keyOf(key))["fairQueue"].(*types.AttributeValueMemberM)
	out := map[string]string{}
	if m == nil {
		return out
	}
	for id, e := range m.Value {
		em := e.(*types.AttributeValueMemberM)
		out[id] = em.Value["t"].(*types.AttributeValueMemberN).Value + "/" + em.Value["b"].(*types.AttributeValueMemberS).Value
	}
	return out
}

// TestRWLockTicketKeptAfterLostJoinAnswer: issue 37, finding 3. A
// writer's queue join lands and its answer is lost; a second writer
// joins behind it. The first writer's next renewal keeps its ticket, so
// it gets the lock first when the reader leaves.
func TestRWLockTicketKeptAfterLostJoinAnswer(t *testing.T) {
	table := newTable(t, "")
	db := mustDB(t)
	holder := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := newRW(t, holder, "k").RLock(ctx)
	require.NoError(t, err)

	// The first writer's second UpdateItem (its join: the first is the
	// blind grant that fails on the reader) lands and its answer is lost.
	script := &attemptScript{op: "UpdateItem", steps: []attemptStep{passThrough, landThenReset}}
	db1, _ := newDB(t, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, script.register)
	})
	c1 := newClient(t, db1, table, rwOpts...)
	c2 := newClient(t, mustDB(t), table, rwOpts...)
	type grant struct {
		who string
		l   *dynamolock.Lock
		err error
	}
	got := make(chan grant, 2)
	go func() {
		l, err := newRW(t, c1, "k").Lock(ctx, rwFast)
		got <- grant{"first", l, err}
	}()
	var first string
	waitFor(t, 10*time.Second, "the first writer's join", func() bool {
		for id := range queueTickets(t, table, "k") {
			first = id
			return true
		}
		return false
	})
	firstEntry := queueTickets(t, table, "k")[first]
	go func() {
		l, err := newRW(t, c2, "k").Lock(ctx, rwFast)
		got <- grant{"second", l, err}
	}()
	waitFor(t, 10*time.Second, "the second writer's join", func() bool { return len(queueTickets(t, table, "k")) == 2 })
	// The first writer renews its entry (a third of its lease after the
	// join): then the reader leaves.
	waitFor(t, 10*time.Second, "the first writer's renewal", func() bool {
		e, ok := queueTickets(t, table, "k")[first]
		return ok && e != firstEntry
	})
	ticket := func(e string) string { return e[:strings.Index(e, "/")] }
	require.Equal(t, ticket(firstEntry), ticket(queueTickets(t, table, "k")[first]), "the renewal kept the ticket")
	require.NoError(t, r.Close())
	g := <-got
	require.NoError(t, g.err)
	require.Equal(t, "first", g.who, "the writer that waited first goes first")
	require.NoError(t, g.l.Close())
	g = <-got
	require.NoError(t, g.err)
	require.NoError(t, g.l.Close())
}

func passThrough(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return next.HandleDeserialize(ctx, in)
}

// TestRWLockTryLockTakesOverTheDead: issue 37, finding 5. A writer, readers
// or waiters that stopped renewing are taken over by try-locks polled
// with FailIfLocked, after one lease, as a plain lock's dead holder is.
func TestRWLockTryLockTakesOverTheDead(t *testing.T) {
	table := newTable(t, "")
	db := mustDB(t)
	dead := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
	c := newClient(t, db, table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	poll := func(t *testing.T, name string, writer bool) {
		t.Helper()
		start := time.Now()
		for {
			var l *dynamolock.Lock
			var err error
			if writer {
				l, err = newRW(t, c, name).Lock(ctx, dynamolock.FailIfLocked())
			} else {
				l, err = newRW(t, c, name).RLock(ctx, dynamolock.FailIfLocked())
			}
			if err == nil {
				// The dead holder's lease (1 s), then a poll or two, each a
				// few calls on a machine that may be busy.
				require.Less(t, time.Since(start), 4*time.Second, "taken within a lease and a few polls")
				require.NoError(t, l.Close())
				return
			}
			var held *dynamolock.LockHeldError
			require.ErrorAs(t, err, &held)
			require.Less(t, time.Since(start), 10*time.Second, "the try-lock never took over: %v", err)
			time.Sleep(100 * time.Millisecond) // the poll period of a try-lock loop
		}
	}
	t.Run("writer", func(t *testing.T) {
		_, err := newRW(t, dead, "w").Lock(ctx)
		require.NoError(t, err)
		poll(t, "w", true)
	})
	t.Run("writer, polled by readers", func(t *testing.T) {
		_, err := newRW(t, dead, "wr").Lock(ctx)
		require.NoError(t, err)
		poll(t, "wr", false)
	})
	t.Run("readers", func(t *testing.T) {
		for range 3 {
			_, err := newRW(t, dead, "r").RLock(ctx)
			require.NoError(t, err)
		}
		poll(t, "r", true)
	})
	t.Run("waiters", func(t *testing.T) {
		// A free lock whose queue holds a writer that stopped renewing
		// (its process died while it waited).
		putRaw(t, db, table, map[string]types.AttributeValue{
			"key": s("q"), "ownerName": s("gone"), "recordVersionNumber": s("x"), "leaseDuration": s("1s"),
			"isReleased": s("1"), "fencingToken": &types.AttributeValueMemberN{Value: "7"},
			"writersArrived": &types.AttributeValueMemberN{Value: "1"},
			"fairQueue": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"0123456789abcdef": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
					"t": &types.AttributeValueMemberN{Value: "1"}, "b": s("beat"), "l": &types.AttributeValueMemberN{Value: "1000"}, "k": s("w"),
				}},
			}},
		})
		poll(t, "q", false)
		poll(t, "q", true)
	})
}

// TestRWLockEveryHolderFitsBesideTheLargestData: issue 37, finding 4. The
// writer stores the largest data the size check accepts; then MaxReaders
// readers hold the lock at once and renew until the counters have grown,
// and writers queue behind them: DynamoDB accepts every write.
func TestRWLockEveryHolderFitsBesideTheLargestData(t *testing.T) {
	if testing.Short() {
		t.Skip("100 readers and their renewals: not in -short")
	}
	table := newTable(t, "")
	db := mustDB(t)
	// Leases far longer than the test: it renews by hand, and on a busy
	// machine under -race its writes take tens of seconds.
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(10*time.Minute), dynamolock.DisableHeartbeat())
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rw := newRW(t, c, "big")

	// The largest data the check accepts for this key, found through the
	// public API (the check makes no DynamoDB call).
	accepted := func(n int) bool {
		l, err := rw.Lock(ctx, dynamolock.WithData(make([]byte, n)), dynamolock.ReplaceData(), dynamolock.FailIfLocked())
		var inv *dynamolock.InvalidArgumentError
		if errors.As(err, &inv) {
			return false
		}
		require.NoError(t, err, "%d bytes of data", n)
		require.NoError(t, l.Close())
		return true
	}
	lo, hi := 0, 400*1024
	for lo < hi {
		if mid := (lo + hi + 1) / 2; accepted(mid) {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	data := bytes.Repeat([]byte{7}, lo)
	w, err := rw.Lock(ctx, dynamolock.WithData(data), dynamolock.ReplaceData())
	require.NoError(t, err, "the largest accepted data (%d bytes)", lo)
	require.NoError(t, w.Close())

	readers := make([]*dynamolock.Lock, 0, dynamolock.MaxReaders)
	for i := range dynamolock.MaxReaders {
		r, err := rw.RLock(ctx)
		require.NoError(t, err, "reader %d beside %d bytes of data", i+1, lo)
		readers = append(readers, r)
	}
	for round := range 3 {
		for i, r := range readers {
			require.NoError(t, c.SendHeartbeatWithContext(ctx, r), "round %d, reader %d renews", round, i+1)
		}
	}
	// Writers wait behind the readers: each joins the queue.
	wctx, wcancel := context.WithCancel(ctx)
	errs := make(chan error, 20)
	for range 20 {
		go func() {
			_, err := rw.Lock(wctx, dynamolock.WithData(data))
			errs <- err
		}()
	}
	waitFor(t, 30*time.Second, "20 writers in the queue", func() bool { return len(queueTickets(t, table, "big")) == 20 })
	for _, r := range readers[:10] {
		require.NoError(t, c.SendHeartbeatWithContext(ctx, r), "a reader renews beside the queue")
	}
	wcancel()
	for range 20 {
		err := <-errs
		require.ErrorIs(t, err, context.Canceled)
	}
	for _, r := range readers {
		require.NoError(t, r.Close())
	}
}

// transactionConflict answers the attempt as DynamoDB does when the item is
// in another ongoing transaction: HTTP 400 TransactionConflictException,
// which the SDK does not retry. The write is not sent: it did not apply.
func transactionConflict(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return serviceAnswer(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionConflictException","message":"Transaction is ongoing for the item"}`)
}

// serviceAnswer is DynamoDB's HTTP 400 answer with body, for the SDK's own
// deserializer to read, in place of the attempt's.
func serviceAnswer(body string) (middleware.DeserializeOutput, middleware.Metadata, error) {
	resp := &http.Response{
		StatusCode: 400,
		Header:     http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}, "X-Amzn-Requestid": []string{"injected"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
	return middleware.DeserializeOutput{RawResponse: &smithyhttp.Response{Response: resp}}, middleware.Metadata{}, nil
}

// TestTransactionConflictIsRetried: issue 37, finding 8. DynamoDB refuses a
// plain write on an item that an ongoing transaction includes (a guarded
// write of the holder's own, another client's AcquireLocks); the write
// did not apply and retrying may succeed. Each operation meets it once.
func TestTransactionConflictIsRetried(t *testing.T) {
	table := newTable(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conflicted := func(t *testing.T, op string, opts ...dynamolock.ClientOption) (*dynamolock.Client, *attemptScript) {
		script := &attemptScript{op: op}
		db, _ := newDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, script.register) })
		return newClient(t, db, table, opts...), script
	}
	t.Run("the SDK does not retry it", func(t *testing.T) {
		script := &attemptScript{op: "UpdateItem", steps: []attemptStep{transactionConflict, transactionConflict, transactionConflict}}
		db, _ := newDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, script.register) })
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: keyOf("raw"),
			UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("1")}})
		var tce *types.TransactionConflictException
		require.ErrorAs(t, err, &tce)
		require.EqualValues(t, 1, script.n.Load(), "one attempt: the SDK does not retry it")
	})
	t.Run("acquire", func(t *testing.T) {
		c, script := conflicted(t, "UpdateItem", fast...)
		script.steps = []attemptStep{transactionConflict}
		l, err := c.AcquireLockWithContext(ctx, "acquire")
		require.NoError(t, err, "the key was free")
		require.NoError(t, l.Close())
	})
	t.Run("heartbeat", func(t *testing.T) {
		c, script := conflicted(t, "UpdateItem", dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
		l, err := c.AcquireLockWithContext(ctx, "heartbeat")
		require.NoError(t, err)
		script.n.Store(0)
		script.steps = []attemptStep{transactionConflict}
		require.NoError(t, c.SendHeartbeatWithContext(ctx, l, dynamolock.HeartbeatRetries(3, 10*time.Millisecond)))
		require.NoError(t, l.Close())
	})
	t.Run("release", func(t *testing.T) {
		c, script := conflicted(t, "UpdateItem", dynamolock.WithLeaseDuration(time.Second), dynamolock.DisableHeartbeat())
		l, err := c.AcquireLockWithContext(ctx, "release")
		require.NoError(t, err)
		script.n.Store(0)
		script.steps = []attemptStep{transactionConflict}
		ok, err := c.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
		require.True(t, ok)
		other := newClient(t, mustDB(t), table, fast...)
		l2, err := other.AcquireLockWithContext(ctx, "release", dynamolock.FailIfLocked())
		require.NoError(t, err, "released: free at once")
		require.NoError(t, l2.Close())
	})
	t.Run("rwlock", func(t *testing.T) {
		c, script := conflicted(t, "UpdateItem", rwOpts...)
		for _, writer := range []bool{false, true} {
			script.n.Store(0)
			script.steps = []attemptStep{transactionConflict}
			rw := newRW(t, c, "rw")
			var l *dynamolock.Lock
			var err error
			if writer {
				l, err = rw.Lock(ctx, dynamolock.FailIfLocked())
			} else {
				l, err = rw.RLock(ctx, dynamolock.FailIfLocked())
			}
			require.NoError(t, err, "writer %v", writer)
			script.n.Store(0)
			script.steps = []attemptStep{transactionConflict}
			require.NoError(t, c.SendHeartbeatWithContext(ctx, l, dynamolock.HeartbeatRetries(3, 10*time.Millisecond)))
			script.n.Store(0)
			script.steps = []attemptStep{transactionConflict}
			ok, err := c.ReleaseLockWithContext(ctx, l)
			require.NoError(t, err)
			require.True(t, ok)
		}
	})
	t.Run("AcquireLocks", func(t *testing.T) {
		c, script := conflicted(t, "TransactWriteItems", fast...)
		script.steps = []attemptStep{cancelledByConflict(2)}
		locks, err := c.AcquireLocks(ctx, []string{"m1", "m2"}, dynamolock.FailIfLocked())
		require.NoError(t, err, "both keys were free")
		for _, l := range locks {
			require.NoError(t, l.Close())
		}
	})
	t.Run("AcquireLocks, a member throttled", func(t *testing.T) {
		// Not a conflict, but also an answer DynamoDB Local never gives:
		// a partition over its throughput cancels the transaction.
		c, script := conflicted(t, "TransactWriteItems", fast...)
		script.steps = []attemptStep{cancelledBy("ThrottlingError", 2)}
		locks, err := c.AcquireLocks(ctx, []string{"t1", "t2"}, dynamolock.WithRefreshPeriod(50*time.Millisecond))
		require.NoError(t, err, "retried once the throttling passed")
		for _, l := range locks {
			require.NoError(t, l.Close())
		}
	})
}

// cancelledByConflict answers a transaction of n actions as DynamoDB does
// when another ongoing transaction includes its first item.
func cancelledByConflict(n int) attemptStep { return cancelledBy("TransactionConflict", n) }

// cancelledBy answers a transaction of n actions as DynamoDB does when its
// first item fails with the reason code (the others: None).
func cancelledBy(code string, n int) attemptStep {
	return func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
		reasons := `{"Code":"` + code + `","Message":"injected"}`
		for range n - 1 {
			reasons += `,{"Code":"None"}`
		}
		return serviceAnswer(fmt.Sprintf(`{"__type":"com.amazonaws.dynamodb.v20120810#TransactionCanceledException","Message":"Transaction cancelled, please refer cancellation reasons for specific reasons [%s%s]","CancellationReasons":[%s]}`,
			code, strings.Repeat(", None", n-1), reasons))
	}
}

// TestGuardedWritesOutliveRenewals: issue 37, finding 10. A guarded write
// built before a heartbeat commits after that heartbeat landed, for an
// exclusive lock and for a reader.
func TestGuardedWritesOutliveRenewals(t *testing.T) {
	table := newTable(t, "")
	db := mustDB(t)
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(3*time.Second), dynamolock.DisableHeartbeat())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	guarded := func(t *testing.T, l *dynamolock.Lock, target string) {
		t.Helper()
		cond := l.TransactionCondition()
		require.NoError(t, c.SendHeartbeatWithContext(ctx, l), "a renewal lands between")
		require.NoError(t, c.SendHeartbeatWithContext(ctx, l), "and another")
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			cond,
			{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"key": s(target), "v": s("1")}}},
		}})
		require.NoError(t, err, "the guarded write commits")
		assert.Equal(t, "1", rawItem(t, db, table, keyOf(target))["v"].(*types.AttributeValueMemberS).Value)
	}
	t.Run("exclusive", func(t *testing.T) {
		l, err := c.AcquireLockWithContext(ctx, "x")
		require.NoError(t, err)
		guarded(t, l, "x-data")
		require.NoError(t, l.Close())
	})
	t.Run("reader", func(t *testing.T) {
		r, err := newRW(t, c, "rw").RLock(ctx)
		require.NoError(t, err)
		guarded(t, r, "rw-data")
		require.NoError(t, r.Close())
	})
	t.Run("writer", func(t *testing.T) {
		w, err := newRW(t, c, "rw").Lock(ctx)
		require.NoError(t, err)
		guarded(t, w, "rw-wdata")
		require.NoError(t, w.Close())
	})
}

// itemTooLarge answers the attempt as DynamoDB does when the write would
// make the item larger than 400 KB: HTTP 400 ValidationException.
func itemTooLarge(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return serviceAnswer(`{"__type":"com.amazon.coral.validate#ValidationException","message":"Item size has exceeded the maximum allowed size"}`)
}

// TestRefusedHeartbeatIsNotRetried: issue 37, finding 4. A background
// heartbeat that DynamoDB refuses for the item's size cannot succeed when
// sent again: the lock ends at once, saying why, instead of being retried
// until its lease runs out and reported as DynamoDB unreachable.
func TestRefusedHeartbeatIsNotRetried(t *testing.T) {
	table := newTable(t, "")
	script := &attemptScript{op: "UpdateItem"}
	db, _ := newDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, script.register) })
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(100*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, reader := range []bool{false, true} {
		var l *dynamolock.Lock
		var err error
		if reader {
			l, err = newRW(t, c, "refused-rw").RLock(ctx)
		} else {
			l, err = c.AcquireLockWithContext(ctx, "refused")
		}
		require.NoError(t, err)
		steps := make([]attemptStep, 100)
		for i := range steps {
			steps[i] = itemTooLarge
		}
		script.play(steps...)
		select {
		case <-l.Done():
		case <-time.After(10 * time.Second):
			t.Fatalf("reader %v: the lock was still held 10 s after its heartbeats were refused", reader)
		}
		require.ErrorIs(t, l.Err(), dynamolock.ErrHeartbeatRefused)
		require.LessOrEqual(t, script.n.Load(), int32(2), "reader %v: not retried", reader)
		script.play()
	}
}

// hangLeaves is SDK middleware that holds every UpdateItem that only
// removes something (a waiter leaving its queue) until its context ends,
// as an unreachable DynamoDB does.
func hangLeaves(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("hangLeaves",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if u, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok && strings.HasPrefix(aws.ToString(u.UpdateExpression), "REMOVE ") {
				<-ctx.Done()
				return middleware.InitializeOutput{}, middleware.Metadata{}, ctx.Err()
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.Before)
}

// TestCancelledWaitReturnsAtOnce: issue 37 (seen, not reproduced before):
// a waiter in a queue whose context ends returns at once, even when
// leaving the queue cannot reach DynamoDB; the client leaves it in the
// background, and Close waits for that.
func TestCancelledWaitReturnsAtOnce(t *testing.T) {
	table := newTable(t, "")
	holder := newClient(t, mustDB(t), table, rwOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := newRW(t, holder, "k").RLock(ctx)
	require.NoError(t, err)
	l, err := holder.AcquireLockWithContext(ctx, "plain")
	require.NoError(t, err)
	db, _ := newDB(t, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, hangLeaves) })
	c, err := dynamolock.New(db, table, rwOpts...)
	require.NoError(t, err)
	for _, kind := range []string{"rwlock writer", "fair lock"} {
		wctx, wcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			var err error
			if kind == "rwlock writer" {
				_, err = newRW(t, c, "k").Lock(wctx, rwFast)
			} else {
				_, err = c.AcquireLockWithContext(wctx, "plain", dynamolock.WithFairness(), rwFast)
			}
			done <- err
		}()
		key := map[string]string{"rwlock writer": "k", "fair lock": "plain"}[kind]
		waitFor(t, 10*time.Second, kind+" in the queue", func() bool { return len(queueTickets(t, table, key)) == 1 })
		start := time.Now()
		wcancel()
		err := <-done
		require.ErrorIs(t, err, context.Canceled, kind)
		require.Less(t, time.Since(start), time.Second, "%s: returned at once, not after its queue's leave timed out", kind)
	}
	start := time.Now()
	require.NoError(t, c.Close(), "Close waits for the leaves in the background")
	require.Less(t, time.Since(start), 7*time.Second)
	require.NoError(t, r.Close())
	require.NoError(t, l.Close())
}
