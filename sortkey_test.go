package dynamolock_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

func sortKeyOf(key, sk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"key": s(key), "sk": s(sk)}
}

// One client locks several sort key values of one partition key, each an
// independent lock with its own heartbeats, release, guarded writes and
// registry entry; a second client with another default value locks its own.
func TestSortKeyPerCall(t *testing.T) {
	table := newTable(t, "sk")
	db, _ := newDB(t)
	ctx := context.Background()
	a := newClient(t, db, table, append(fast, dynamolock.WithSortKey("sk", "default-a"))...)
	b := newClient(t, db, table, append(fast, dynamolock.WithSortKey("sk", "default-b"))...)

	j1, err := a.AcquireLockWithContext(ctx, "tenant", dynamolock.WithSortKeyValue("job-1"))
	require.NoError(t, err)
	j2, err := a.AcquireLockWithContext(ctx, "tenant", dynamolock.WithSortKeyValue("job-2"), dynamolock.WithData([]byte("two")))
	require.NoError(t, err)
	def, err := a.AcquireLockWithContext(ctx, "tenant")
	require.NoError(t, err)
	other, err := b.AcquireLockWithContext(ctx, "tenant")
	require.NoError(t, err, "another client's default value is another lock")
	assert.Equal(t, "job-1", j1.SortKey())
	assert.Equal(t, "job-2", j2.SortKey())
	assert.Equal(t, "default-a", def.SortKey())
	assert.Equal(t, "default-b", other.SortKey())
	assert.NotEqual(t, j1.FencingToken(), 0)

	// The registry is per (key, sort key).
	assert.True(t, a.HasLock("tenant", "job-1"))
	assert.True(t, a.HasLock("tenant", ""), "the default value")
	assert.False(t, a.HasLock("tenant", "job-3"))
	assert.False(t, b.HasLock("tenant", "job-1"))
	got, err := a.GetWithSortKeyWithContext(ctx, "tenant", "job-2")
	require.NoError(t, err)
	assert.Same(t, j2, got, "Get of a held lock returns it")
	again, err := a.AcquireLockWithContext(ctx, "tenant", dynamolock.WithSortKeyValue("job-1"), dynamolock.WithReentrant())
	require.NoError(t, err)
	assert.Same(t, j1, again, "reentrancy is per sort key")

	// Another client sees job-1 held and cannot take it.
	view, err := b.GetWithSortKeyWithContext(ctx, "tenant", "job-1")
	require.NoError(t, err)
	assert.Equal(t, a.OwnerName(), view.OwnerName())
	assert.Equal(t, "job-1", view.SortKey())
	_, err = b.AcquireLockWithContext(ctx, "tenant", dynamolock.WithSortKeyValue("job-1"), dynamolock.FailIfLocked())
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)

	// Heartbeats renew each item under its own sort key.
	rvn := j2.RecordVersionNumber()
	require.NoError(t, a.SendHeartbeatWithContext(ctx, j2))
	item := rawItem(t, db, table, sortKeyOf("tenant", "job-2"))
	assert.Equal(t, j2.RecordVersionNumber(), item["recordVersionNumber"].(*types.AttributeValueMemberS).Value)
	assert.NotEqual(t, rvn, j2.RecordVersionNumber())

	// A guarded write with job-1's condition commits; after job-1 is
	// released it no longer does, while job-2's still commits.
	guarded := func(l *dynamolock.Lock) error {
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			l.TransactionCondition(),
			{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{"key": s("data"), "sk": s(l.SortKey())}}},
		}})
		return err
	}
	require.NoError(t, guarded(j1))
	ok, err := a.ReleaseLockWithContext(ctx, j1)
	require.NoError(t, err)
	assert.True(t, ok)
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, guarded(j1), &tce)
	require.NoError(t, guarded(j2))
	assert.Equal(t, "1", rawItem(t, db, table, sortKeyOf("tenant", "job-1"))["isReleased"].(*types.AttributeValueMemberS).Value)
	_, stillHeld := rawItem(t, db, table, sortKeyOf("tenant", "job-2"))["isReleased"]
	assert.False(t, stillHeld, "releasing job-1 left job-2 alone")

	// The refresh transaction targets the lock's own item.
	upd, done := j2.TransactionWithRefresh()
	_, err = done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{upd}}))
	require.NoError(t, err)
	assert.NoError(t, j2.Err())

	// b takes job-1 now that it is released.
	got1, err := b.AcquireLockWithContext(ctx, "tenant", dynamolock.WithSortKeyValue("job-1"))
	require.NoError(t, err)
	assert.Equal(t, "job-1", got1.SortKey())
}

// A client that names its sort key without a default value: every
// acquisition gives one, and bad sort key input fails before any call.
func TestSortKeyBadInput(t *testing.T) {
	table := newTable(t, "sk")
	db, calls := newDB(t)
	ctx := context.Background()
	noDefault := newClient(t, db, table, dynamolock.WithSortKey("sk", ""))
	plain := newClient(t, db, newTable(t, ""))

	l, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue("v"))
	require.NoError(t, err)
	assert.Equal(t, "v", l.SortKey())
	long := string(make([]byte, 1025))
	for _, tc := range []struct {
		name string
		call func() error
		want string
	}{
		{"no value and no default", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k")
			return err
		}, "no default value"},
		{"Get without a value and no default", func() error {
			_, err := noDefault.GetWithContext(ctx, "k")
			return err
		}, "no default value"},
		{"empty value", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue(""))
			return err
		}, "1 to 1024 bytes"},
		{"over-long value", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue(long))
			return err
		}, "1 to 1024 bytes"},
		{"value on a client without a sort key", func() error {
			_, err := plain.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue("v"))
			return err
		}, "WithSortKey"},
		{"Get with a value on a client without a sort key", func() error {
			_, err := plain.GetWithSortKeyWithContext(ctx, "k", "v")
			return err
		}, "WithSortKey"},
		{"lease under twice the heartbeat period", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue("v"), dynamolock.WithLockLease(time.Second))
			return err
		}, "WithLockLease"},
		{"negative refresh jitter", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue("v"), dynamolock.WithRefreshJitter(-time.Second))
			return err
		}, "WithRefreshJitter"},
		{"refresh jitter over the refresh period", func() error {
			_, err := noDefault.AcquireLockWithContext(ctx, "k", dynamolock.WithSortKeyValue("v"), dynamolock.WithRefreshJitter(2*time.Second))
			return err
		}, "WithRefreshJitter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls.reset()
			err := tc.call()
			require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
			var ie *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &ie)
			assert.Contains(t, err.Error(), tc.want)
			assert.Zero(t, calls.total(), "bad input reached DynamoDB")
		})
	}
	for _, n := range []int{0, -1, 10_000_001} {
		_, err := dynamolock.New(db, table, dynamolock.WithMaxLockObservationCacheSize(n))
		require.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "cache size %d", n)
		assert.Contains(t, err.Error(), "WithMaxLockObservationCacheSize")
	}
	_, err = dynamolock.New(db, table, dynamolock.WithSortKey("", "v"))
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
}

// A Java-written item on a sort-key table is taken over once its holder
// stopped renewing it, under the sort key value the item has.
func TestJavaSortKeyItemTakenOver(t *testing.T) {
	var javaItem map[string]types.AttributeValue
	for _, it := range foreignItems(t) {
		if _, ok := it["sortKey"]; ok {
			javaItem = it
		}
	}
	require.NotNil(t, javaItem, "the fixtures hold a Java item with a sort key")
	key := javaItem["key"].(*types.AttributeValueMemberS).Value
	sk := javaItem["sortKey"].(*types.AttributeValueMemberS).Value
	lease, err := time.ParseDuration(javaItem["leaseDuration"].(*types.AttributeValueMemberS).Value + "ms")
	require.NoError(t, err)

	table := newTable(t, "sortKey")
	db, _ := newDB(t)
	putRaw(t, db, table, javaItem)
	c := newClient(t, db, table, append(fast, dynamolock.WithSortKey("sortKey", ""))...)
	start := time.Now()
	l, err := c.AcquireLockWithContext(context.Background(), key, dynamolock.WithSortKeyValue(sk), dynamolock.WithRefreshPeriod(200*time.Millisecond))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), lease, "watched for the Java holder's full lease")
	assert.Equal(t, sk, l.SortKey())
	item := rawItem(t, db, table, map[string]types.AttributeValue{"key": s(key), "sortKey": s(sk)})
	assert.Equal(t, c.OwnerName(), item["ownerName"].(*types.AttributeValueMemberS).Value)
}

// WithLockLease gives one lock its own lease: written in the item, reported
// by LeaseDuration and Expiration, and renewed with it.
func TestLockLease(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, fast...)
	before := time.Now()
	l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithLockLease(3*time.Second))
	require.NoError(t, err)
	assert.Equal(t, 3*time.Second, l.LeaseDuration())
	assert.Equal(t, "3s", rawItem(t, db, table, keyOf("k"))["leaseDuration"].(*types.AttributeValueMemberS).Value)
	exp := l.Expiration()
	assert.True(t, !exp.Before(before.Add(3*time.Second)) && !exp.After(time.Now().Add(3*time.Second)), "expiration %v", exp)

	// Background heartbeats (every 250 ms) keep the 3 s lease.
	rvn := l.RecordVersionNumber()
	waitFor(t, 5*time.Second, "a heartbeat", func() bool { return l.RecordVersionNumber() != rvn })
	assert.Equal(t, "3s", rawItem(t, db, table, keyOf("k"))["leaseDuration"].(*types.AttributeValueMemberS).Value)
	assert.True(t, l.Expiration().After(exp), "a renewal moves the expiration")
	assert.Equal(t, 3*time.Second, l.LeaseDuration())

	// Another client with the client-wide 1 s lease watches this item for 3 s.
	other := newClient(t, db, table, fast...)
	_, err = other.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, 3*time.Second, held.LeaseDuration)
}
