package dynamolock_test

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// guardedWrite puts a value under key "data#<name>" only if lock is still held.
func guardedWrite(ctx context.Context, db *dynamodb.Client, table string, lock *dynamolock.Lock, name string, v int) error {
	_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		lock.TransactionCondition(),
		{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"key": s("data#" + name), "v": &types.AttributeValueMemberN{Value: strconv.Itoa(v)},
		}}},
	}})
	return err
}

func TestGuardedWritesAcrossHeartbeatsAndTakeover(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	old := newClient(t, db, table, fast...)
	l, err := old.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, guardedWrite(ctx, db, table, l, "x", 1))

	sent := old.Stats().HeartbeatsSent
	waitFor(t, 5*time.Second, "two heartbeats", func() bool { return old.Stats().HeartbeatsSent >= sent+2 })
	require.NoError(t, guardedWrite(ctx, db, table, l, "x", 2), "still valid after heartbeats changed the RVN")

	// A holder whose heartbeats stopped (as if its process were paused) is
	// taken over through the normal path after its lease.
	paused := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Second))
	pl, err := paused.AcquireLockWithContext(ctx, "p")
	require.NoError(t, err)
	newer := newClient(t, db, table, fast...)
	nl, err := newer.AcquireLockWithContext(ctx, "p", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	assert.Greater(t, nl.FencingToken(), pl.FencingToken())

	err = guardedWrite(ctx, db, table, pl, "p", 1)
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, err, &tce, "the old holder's guarded write fails after the takeover")
	assert.Equal(t, "ConditionalCheckFailed", aws.ToString(tce.CancellationReasons[0].Code))
	require.NoError(t, guardedWrite(ctx, db, table, nl, "p", 2), "the new holder's succeeds")
	assert.Equal(t, "2", rawItem(t, db, table, keyOf("data#p"))["v"].(*types.AttributeValueMemberN).Value)

	// A released lock guards nothing.
	_, err = old.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	require.ErrorAs(t, guardedWrite(ctx, db, table, l, "x", 3), &tce)
}

func TestTransactionWithRefreshUnderHeartbeats(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	// Heartbeats every 50 ms race with the transactions below.
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(50*time.Millisecond))
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	committed, cancelled := 0, 0
	for i := 0; committed < 40; i++ {
		require.Less(t, i, 400, "refreshes keep failing")
		item, done := l.TransactionWithRefresh()
		_, err := done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			item,
			{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"key": s("counter"), "v": &types.AttributeValueMemberN{Value: strconv.Itoa(i)},
			}}},
		}}))
		var tce *types.TransactionCanceledException
		switch {
		case err == nil:
			committed++
		case errors.As(err, &tce):
			// A heartbeat landed between building and sending: documented;
			// the lock is still held, so build a new item and retry.
			require.NoError(t, l.Err())
			cancelled++
		default:
			require.NoError(t, err)
		}
	}
	t.Logf("40 refreshes committed, %d cancelled by a heartbeat in between", cancelled)
	assert.NoError(t, l.Err(), "neither heartbeats nor refreshes made the other look taken over")
	assert.Zero(t, c.Stats().LocksLost)

	// After a takeover, the refresh's callback marks the lock lost.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
		"fencingToken": &types.AttributeValueMemberN{Value: "99"},
	})
	item, done := l.TransactionWithRefresh()
	_, err = done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.Error(t, err)
	// A heartbeat in flight at that moment keeps the write turn, and it is
	// that heartbeat which finds the item taken, a moment later.
	waitFor(t, 5*time.Second, "the loss to be recorded", func() bool { return l.Err() != nil })
	assert.ErrorIs(t, l.Err(), dynamolock.ErrLockTakenOver)
}

func TestFastTakeoverWithClockSkewBound(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	const lease = 3 * time.Second
	bound := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(time.Second),
		dynamolock.WithClockSkewBound(100 * time.Millisecond)}

	// A holder that died 3.2 s ago: its stored expiry, written for the RVN
	// the item still carries, is past by more than the bound.
	expired := time.Now().Add(-200 * time.Millisecond).UnixMilli()
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("dead"), "ownerName": s("dead-host"), "leaseDuration": s("3s"), "recordVersionNumber": s("r"),
		"leaseExpiresAt":    &types.AttributeValueMemberN{Value: strconv.FormatInt(expired, 10)},
		"leaseExpiresAtRVN": s("r"),
	})
	c := newClient(t, db, table, bound...)
	start := time.Now()
	_, err := c.AcquireLockWithContext(ctx, "dead")
	require.NoError(t, err)
	assert.Less(t, time.Since(start), lease/2, "taken at once, not after watching a lease")

	// Without the option the same item is watched for a full lease.
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("dead2"), "ownerName": s("dead-host"), "leaseDuration": s("1500ms"), "recordVersionNumber": s("r"),
		"leaseExpiresAt": &types.AttributeValueMemberN{Value: strconv.FormatInt(expired, 10)},
	})
	plain := newClient(t, db, table, fast...)
	start = time.Now()
	_, err = plain.AcquireLockWithContext(ctx, "dead2", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 1500*time.Millisecond, "never early without the bound")
	_, has := rawItem(t, db, table, keyOf("dead2"))["leaseExpiresAt"]
	assert.False(t, has, "a client without the bound removes the stale expiry")

	// A live holder with the bound is never taken early: its heartbeats
	// push the expiry forward.
	h := newClient(t, db, table, bound...)
	_, err = h.AcquireLockWithContext(ctx, "live")
	require.NoError(t, err)
	item := rawItem(t, db, table, keyOf("live"))
	exp, err := strconv.ParseInt(item["leaseExpiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
	require.NoError(t, err)
	assert.InDelta(t, time.Now().Add(lease).UnixMilli(), exp, 1000)
	_, err = c.AcquireLockWithContext(ctx, "live", dynamolock.WithAdditionalTimeToWaitForLock(0), dynamolock.WithRefreshPeriod(200*time.Millisecond))
	var te *dynamolock.TimeoutError
	assert.ErrorAs(t, err, &te)
}

func TestTTLAttribute(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, append(fast, dynamolock.WithTTLAttribute("expiresAt"))...)
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	ttl := func() int64 {
		v, err := strconv.ParseInt(rawItem(t, db, table, keyOf("k"))["expiresAt"].(*types.AttributeValueMemberN).Value, 10, 64)
		require.NoError(t, err)
		return v
	}
	first := ttl()
	assert.InDelta(t, time.Now().Add(time.Second+dynamolock.TTLMargin).Unix(), first, 2)
	require.NoError(t, c.SendHeartbeatWithContext(ctx, l))
	waitFor(t, 5*time.Second, "the TTL to move forward", func() bool { return ttl() > first })

	_, err = dynamolock.New(db, table, dynamolock.WithTTLAttribute("ownerName"))
	assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument)

	// CreateTable enables TTL on the table.
	name := table + "-ttl"
	_, err = c.CreateTableWithContext(ctx, name, dynamolock.WithTimeToLive("expiresAt"))
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(name)}) })
	d, err := db.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String(name)})
	require.NoError(t, err)
	assert.Equal(t, "expiresAt", aws.ToString(d.TimeToLiveDescription.AttributeName))
	assert.Equal(t, types.TimeToLiveStatusEnabled, d.TimeToLiveDescription.TimeToLiveStatus)
}

func TestListingPaginates(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, fast...)
	// 30 items of 60 KB: more than one 1 MB Scan page.
	payload := bytes.Repeat([]byte("x"), 60*1024)
	for i := range 30 {
		putRaw(t, db, table, map[string]types.AttributeValue{
			"key": s("k" + strconv.Itoa(i)), "ownerName": s("o"), "leaseDuration": s("20s"),
			"recordVersionNumber": s("r"), "data": &types.AttributeValueMemberB{Value: payload},
		})
	}
	held, err := c.AcquireLockWithContext(ctx, "mine")
	require.NoError(t, err)
	calls.reset()
	seen := map[string]*dynamolock.Lock{}
	for l, err := range c.AllLocks(ctx) {
		require.NoError(t, err)
		seen[l.PartitionKey()] = l
	}
	assert.Len(t, seen, 31)
	assert.GreaterOrEqual(t, calls.get("Scan"), 2, "more than one page")
	assert.Same(t, held, seen["mine"], "a held lock is listed as the live lock")
	assert.Equal(t, "o", seen["k7"].OwnerName())
	assert.Len(t, seen["k7"].Data(), 60*1024)

	// Stopping early fetches no more pages.
	calls.reset()
	for range c.AllLocks(ctx) {
		break
	}
	assert.Equal(t, 1, calls.get("Scan"))
}

func TestLocksByPartitionKey(t *testing.T) {
	table := newTable(t, "scope")
	db, _ := newDB(t)
	ctx := context.Background()
	for _, tenant := range []string{"a", "b", "c"} {
		c := newClient(t, db, table, append(fast, dynamolock.WithSortKey("scope", tenant))...)
		_, err := c.AcquireLockWithContext(ctx, "jobs", dynamolock.WithData([]byte(tenant)))
		require.NoError(t, err)
	}
	viewer := newClient(t, db, table, append(fast, dynamolock.WithSortKey("scope", "viewer"))...)
	got := map[string]string{}
	for l, err := range viewer.LocksByPartitionKey(ctx, "jobs") {
		require.NoError(t, err)
		got[l.SortKey()] = string(l.Data())
		assert.False(t, l.IsReleased())
		assert.NotZero(t, l.FencingToken())
	}
	assert.Equal(t, map[string]string{"a": "a", "b": "b", "c": "c"}, got)
}

// The v2 Logger adapter receives one line per record.
func TestV2LoggerAdapter(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	var lines printlnRecorder
	c := newClient(t, db, table, append(fast, dynamolock.WithLogger(&lines))...)
	l, err := c.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	got := lines.all()
	require.NotEmpty(t, got)
	assert.True(t, strings.HasPrefix(got[0], "dynamolock: lock acquired key=k"), got[0])
}

type printlnRecorder struct {
	mu    sync.Mutex
	lines []string
}

func (p *printlnRecorder) Println(v ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range v {
		p.lines = append(p.lines, x.(string))
	}
}

func (p *printlnRecorder) all() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.lines...)
}

// answerLost lets the next successful UpdateItem land but reports an error,
// as when a response is lost on the way back.
type answerLost struct {
	*dynamodb.Client
	lose atomic.Bool
}

func (w *answerLost) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := w.Client.UpdateItem(ctx, in, o...)
	if err == nil && w.lose.CompareAndSwap(true, false) {
		return nil, errors.New("answer lost")
	}
	return out, err
}

// A heartbeat whose answer was lost leaves its RVN pending; once a guarded
// refresh replaced it, the next heartbeat must not write it again (an
// observer that saw it before the refresh would count from then).
func TestRVNNeverComesBack(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	w := &answerLost{Client: db}
	c := newClient(t, w, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	w.lose.Store(true)
	require.Error(t, c.SendHeartbeatWithContext(ctx, l))
	p1 := storedRVN(t, db, table, "k")
	item, done := l.TransactionWithRefresh()
	_, err = done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.NoError(t, err)
	require.NoError(t, c.SendHeartbeatWithContext(ctx, l))
	assert.NotEqual(t, p1, storedRVN(t, db, table, "k"))
	assert.NoError(t, l.Err())
}

// A guarded refresh cancelled because this holder's own heartbeat landed
// first does not make the lock look lost.
func TestRefreshCancelledByOwnHeartbeatIsNoLoss(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	w := &answerLost{Client: db}
	c := newClient(t, w, table, dynamolock.WithLeaseDuration(10*time.Second), dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	item, done := l.TransactionWithRefresh()
	w.lose.Store(true)
	require.Error(t, c.SendHeartbeatWithContext(ctx, l)) // lands; its answer is lost
	_, err = done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.Error(t, err)
	assert.NoError(t, l.Err())
	require.NoError(t, c.SendHeartbeatWithContext(ctx, l), "the lock is still held and renewable")
}
