package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	v5 "github.com/arielsrv/dynamolock/v2/v5compat"
)

// Tests of package v5compat beyond v5's own suite (scripts/v5-suite.sh):
// what it gives v5 programs that v5 lacks, its defaults and item format,
// and where it differs on purpose. They live here, not in v5compat, so that
// v5's suite can be copied into that directory with its own TestMain.

func newV5(t *testing.T, db v5.DynamoDBClient, table string, opts ...v5.ClientOption) *v5.Client {
	t.Helper()
	c, err := v5.New(db, table, opts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// TestV5CompatLossIsMarked: a lock taken over is marked lost at the
// heartbeat that finds it (v5 keeps reporting it live until its lease runs
// out, and signals nothing); the error is v5's *LockNotGrantedError and
// also the engine's ErrLockLost.
func TestV5CompatLossIsMarked(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	a := newV5(t, db, table, v5.WithOwnerName("a"), v5.WithLeaseDuration(time.Hour), v5.DisableHeartbeat())
	la, err := a.AcquireLock(ctx, "k")
	require.NoError(t, err)
	require.False(t, la.IsExpired())
	require.NoError(t, la.Err())
	// Someone takes the item over behind a's back (a force release and a
	// new holder, as an operator's tool would).
	_, err = db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("b"), "leaseDuration": s("1h0m0s"), "recordVersionNumber": s("b-rvn"),
	}})
	require.NoError(t, err)

	err = a.SendHeartbeat(ctx, la)
	var lng *v5.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	require.ErrorIs(t, err, dynamolock.ErrLockLost)
	require.True(t, la.IsExpired(), "marked lost at once, its hour-long lease notwithstanding")
	require.True(t, closedWithin(la.Done(), time.Second))
	require.ErrorIs(t, la.Err(), dynamolock.ErrLockTakenOver)
	require.ErrorIs(t, la.Close(ctx), v5.ErrLockAlreadyReleased)
}

// TestV5CompatTryLockTakesOverTheDead: FailIfLocked refuses a live holder
// at once, and takes over a dead one's item once this client has seen it
// unchanged for a lease (v5's FailIfLocked never does); the new holder's
// fencing token is above the dead one's.
func TestV5CompatTryLockTakesOverTheDead(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	dead := newV5(t, db, table, v5.WithOwnerName("dead"), v5.WithLeaseDuration(time.Second), v5.DisableHeartbeat())
	ld, err := dead.AcquireLock(ctx, "k")
	require.NoError(t, err)
	// It renews nothing from now on, as a crashed process.
	b := newV5(t, db, table, v5.WithOwnerName("b"), v5.WithLeaseDuration(time.Second), v5.WithHeartbeatPeriod(250*time.Millisecond))
	calls.reset()
	start := time.Now()
	_, err = b.AcquireLock(ctx, "k", v5.FailIfLocked())
	var lng *v5.LockNotGrantedError
	require.ErrorAs(t, err, &lng)
	require.Less(t, time.Since(start), 500*time.Millisecond, "returned at once")
	var lb *v5.Lock
	waitFor(t, 5*time.Second, "a try-lock to take the dead holder's lock over", func() bool {
		lb, err = b.AcquireLock(ctx, "k", v5.FailIfLocked())
		if err != nil {
			require.ErrorAs(t, err, &lng)
			time.Sleep(100 * time.Millisecond)
			return false
		}
		return true
	})
	require.GreaterOrEqual(t, time.Since(start), time.Second, "not before a lease")
	require.Greater(t, lb.FencingToken(), ld.FencingToken())
	require.Positive(t, ld.FencingToken())
	require.NoError(t, lb.Close(ctx))
}

// TestV5CompatDefaultsAndItem: v5's defaults (a random base32 owner name,
// partition key "key" for another table) and its item format.
func TestV5CompatDefaultsAndItem(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newV5(t, db, table)
	require.Regexp(t, regexp.MustCompile(`^[A-Z2-7]{52}$`), c.Native().OwnerName())
	other := newV5(t, db, table)
	require.NotEqual(t, c.Native().OwnerName(), other.Native().OwnerName())

	l, err := c.AcquireLock(ctx, "k", v5.WithData([]byte("d")), v5.WithAdditionalAttributes(map[string]types.AttributeValue{"extra": s("x")}))
	require.NoError(t, err)
	item := rawItem(t, db, table, keyOf("k"))
	require.Equal(t, s(c.Native().OwnerName()), item["ownerName"])
	require.Equal(t, s("20s"), item["leaseDuration"], "v5's default lease, in Go's duration format")
	require.IsType(t, &types.AttributeValueMemberS{}, item["recordVersionNumber"])
	require.Equal(t, &types.AttributeValueMemberB{Value: []byte("d")}, item["data"])
	require.Equal(t, s("x"), item["extra"])
	require.Contains(t, item, "fencingToken")
	require.Equal(t, s("x"), l.AdditionalAttributes()["extra"])
	ok, err := c.ReleaseLock(ctx, l)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, s("1"), rawItem(t, db, table, keyOf("k"))["isReleased"])

	// Another table: keyed "key" by default, whatever the client's key is.
	c2 := newV5(t, db, table, v5.WithPartitionKeyName("id"))
	otherTable := table + "_other"
	_, err = c2.CreateTable(ctx, otherTable)
	require.NoError(t, err)
	t.Cleanup(func() { _, _ = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(otherTable)}) })
	d, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(otherTable)})
	require.NoError(t, err)
	require.Equal(t, "key", aws.ToString(d.Table.KeySchema[0].AttributeName))
	require.Equal(t, types.BillingModePayPerRequest, d.Table.BillingModeSummary.BillingMode)
}

// TestV5CompatErrors: the errors are the engine's values, matched by
// errors.Is from either package, and bad input is typed.
func TestV5CompatErrors(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	_, err := v5.New(db, table, v5.WithLeaseDuration(time.Second), v5.WithHeartbeatPeriod(time.Second))
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)

	c, err := v5.New(db, table, v5.WithLeaseDuration(time.Second), v5.WithHeartbeatPeriod(250*time.Millisecond))
	require.NoError(t, err)
	calls.reset()
	_, err = c.AcquireLock(ctx, "k", v5.WithAdditionalAttributes(map[string]types.AttributeValue{"ownerName": s("x")}))
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	require.Zero(t, calls.total(), "refused before any call")

	var nilLock *v5.Lock
	_, err = c.ReleaseLock(ctx, nilLock)
	require.ErrorIs(t, err, v5.ErrCannotReleaseNullLock)
	_, err = c.ReleaseLock(ctx, &v5.Lock{})
	require.ErrorIs(t, err, v5.ErrOwnerMismatched)
	require.ErrorIs(t, (&v5.Lock{}).Close(ctx), v5.ErrCannotReleaseNullLock)
	_, err = (&v5.Lock{}).IsAlmostExpired()
	require.ErrorIs(t, err, v5.ErrSessionMonitorNotSet)
	require.True(t, nilLock.IsExpired())
	require.True(t, closedWithin(nilLock.Done(), 0))

	view, err := c.Get(ctx, "nobody")
	require.NoError(t, err)
	require.True(t, view.IsExpired())
	require.ErrorIs(t, c.SendHeartbeat(ctx, view), v5.ErrReadOnlyLockHeartbeat)

	l, err := c.AcquireLock(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	require.True(t, l.IsExpired(), "released by Close")
	for _, err := range []error{
		c.Close(ctx),
		func() error { _, err := c.AcquireLock(ctx, "k"); return err }(),
		func() error { _, err := c.Get(ctx, "k"); return err }(),
	} {
		require.True(t, errors.Is(err, v5.ErrClientClosed) && errors.Is(err, dynamolock.ErrClientClosed), "%v", err)
	}
}

// TestV5CompatGetViews: as in v5, a view of another's lock reads as
// expired (the caller does not hold it) and cannot be closed, while the
// client's own held lock comes back from Get live.
func TestV5CompatGetViews(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	a := newV5(t, db, table, v5.WithOwnerName("a"), v5.WithLeaseDuration(time.Hour), v5.DisableHeartbeat())
	b := newV5(t, db, table, v5.WithOwnerName("b"))
	la, err := a.AcquireLock(ctx, "k", v5.WithData([]byte("d")))
	require.NoError(t, err)

	own, err := a.Get(ctx, "k")
	require.NoError(t, err)
	require.False(t, own.IsExpired())
	require.Equal(t, la.FencingToken(), own.FencingToken())

	view, err := b.Get(ctx, "k")
	require.NoError(t, err)
	require.True(t, view.IsExpired(), "not b's")
	require.False(t, view.Native().IsExpired(), "its holder is within its lease")
	require.Equal(t, "a", view.OwnerName())
	require.Equal(t, []byte("d"), view.Data())
	require.Equal(t, la.FencingToken(), view.FencingToken())
	require.ErrorIs(t, view.Close(ctx), v5.ErrLockAlreadyReleased)
	require.ErrorIs(t, b.SendHeartbeat(ctx, view), v5.ErrReadOnlyLockHeartbeat)
	require.NoError(t, own.Close(ctx))
	require.True(t, la.IsExpired(), "one lock: closing what Get returned released it")
}

// TestV5CompatTakesOverAV5Item: an item exactly as v5 writes it (its
// record version number is a time and a random string, its lease in Go's
// duration format, no fencing token) is waited for while it changes, and
// taken over once left unchanged for its lease.
func TestV5CompatTakesOverAV5Item(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	put := func(rvn string) {
		putRaw(t, db, table, map[string]types.AttributeValue{
			"key": s("k"), "ownerName": s("V5OWNERAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
			"leaseDuration": s("1s"), "recordVersionNumber": s(rvn),
			"data": &types.AttributeValueMemberB{Value: []byte("v5 data")},
		})
	}
	put("1796390000000000000:AAAA")
	c := newV5(t, db, table, v5.WithLeaseDuration(time.Second), v5.WithHeartbeatPeriod(250*time.Millisecond))
	// Renewed, as a live v5 holder does: never taken.
	stop := make(chan struct{})
	renewed := make(chan struct{})
	var lastPut time.Time // read after renewed closes
	go func() {
		defer close(renewed)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
				lastPut = time.Now()
				put(fmt.Sprintf("17963900000000%05d:AAAA", i))
			}
		}
	}()
	_, err := c.AcquireLock(ctx, "k", v5.WithRefreshPeriod(100*time.Millisecond))
	var te *v5.TimeoutError
	require.ErrorAs(t, err, &te, "a live v5 holder keeps the lock")
	close(stop)
	<-renewed
	// Left alone: taken over a lease after its last change was seen, its
	// data kept.
	l, err := c.AcquireLock(ctx, "k", v5.WithRefreshPeriod(100*time.Millisecond))
	require.NoError(t, err)
	require.GreaterOrEqual(t, time.Since(lastPut), time.Second)
	require.Equal(t, []byte("v5 data"), l.Data())
	require.Positive(t, l.FencingToken())
	require.NoError(t, l.Close(ctx))
}
