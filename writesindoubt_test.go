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
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// The writes a heartbeat's condition accepts (its RVN IN list) stay within
// DynamoDB's 100 operands, whatever the holder's guarded refreshes and
// heartbeats went through (issue 21, finding 4).

// 150 guarded refreshes cancelled by the caller's own condition (the
// lock's check passed: its reason is None) between two heartbeats. A
// cancelled transaction applied nothing, so none of them stays a write
// that may land. Before the fix each stayed, and the heartbeat after them
// failed with "ValidationException: The IN operator is provided with too
// many operands"; with background heartbeats the lock was lost.
func TestCancelledRefreshesDoNotBlockRenewal(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute))
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	// The caller's own condition: an item that does not exist.
	absent := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                aws.String(table),
		Key:                      keyOf("absent"),
		ConditionExpression:      aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": "key"},
	}}
	for i := range 150 {
		item, done := l.TransactionWithRefresh()
		_, err := done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item, absent}}))
		var tce *types.TransactionCanceledException
		require.ErrorAs(t, err, &tce, "refresh %d", i)
		require.Equal(t, "None", aws.ToString(tce.CancellationReasons[0].Code), "refresh %d: the lock's own check passed", i)
	}
	require.NoError(t, c.SendHeartbeat(l), "the heartbeat after 150 cancelled refreshes")
	require.NoError(t, l.Err())

	// A refresh that commits still renews, and a heartbeat after it too.
	item, done := l.TransactionWithRefresh()
	_, err = done(db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.NoError(t, err)
	require.NoError(t, c.SendHeartbeat(l))
	require.NoError(t, l.Err())
}

// Refreshes whose outcome never comes (built and not reported, or whose
// answer was lost) count as writes that may land until a renewal lands;
// past 64 of them TransactionWithRefresh builds none and says why, so the
// heartbeat's condition stays valid and the lock is renewed.
func TestRefreshesInDoubtAreBounded(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	// One refresh whose write lands and whose answer is lost: the item
	// carries its RVN, which the heartbeat's condition must still accept.
	fdb := faults.Wrap(db, &faults.Rule{Op: "TransactWriteItems", Times: 1, LoseAnswer: true})
	c := newClient(t, fdb, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute))
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	item, done := l.TransactionWithRefresh()
	_, err = done(fdb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.Error(t, err, "answer lost")
	for range 63 {
		l.TransactionWithRefresh() // built, never sent, never reported
	}
	item, done = l.TransactionWithRefresh()
	assert.Equal(t, types.TransactWriteItem{}, item, "the 65th refresh in doubt is not built")
	_, err = done(fdb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.ErrorIs(t, err, dynamolock.ErrWritesInDoubt)

	require.NoError(t, c.SendHeartbeat(l), "the heartbeat accepts the lost refresh's RVN")
	require.NoError(t, l.Err())
	item, done = l.TransactionWithRefresh()
	_, err = done(fdb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.NoError(t, err, "the landed heartbeat cleared the refreshes in doubt")
}

// More heartbeats in doubt than an IN can name: the first lands and its
// answer is lost, the next 105 (each with other data, so each a new write)
// are never sent. The item carries the first one's RVN, which the 107th
// heartbeat's condition no longer names; it fails, finds the item still
// this acquisition's, and goes on. Before the fix its condition had 108
// operands and DynamoDB refused it.
func TestHeartbeatsInDoubtBeyondTheINLimit(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	lost := &faults.Rule{Op: "UpdateItem", Match: isHeartbeat, Times: 1, LoseAnswer: true}
	dropped := &faults.Rule{Op: "UpdateItem", Match: isHeartbeat, Times: 105, Drop: true}
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute))
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	fdb.Add(lost)
	fdb.Add(dropped)
	for i := range 106 {
		require.Error(t, c.SendHeartbeat(l, dynamolock.ReplaceHeartbeatData([]byte{byte(i)})))
	}
	require.Equal(t, 105, fdb.Hits(dropped))
	require.NoError(t, c.SendHeartbeat(l, dynamolock.ReplaceHeartbeatData([]byte("last"))))
	require.NoError(t, l.Err())
	assert.Equal(t, []byte("last"), l.Data())
	require.NoError(t, c.SendHeartbeat(l))
	require.NoError(t, l.Err())
}

// A refresh whose first send landed with its answer lost stays a write that
// may land even if a later send of the same item is cancelled: the item
// carries its RVN, and the next heartbeat's condition names it (one
// UpdateItem, no failed condition to recover from).
func TestRefreshInDoubtStaysAfterALaterCancellation(t *testing.T) {
	table := newTable(t, "")
	db, cc := newDB(t)
	ctx := context.Background()
	fdb := faults.Wrap(db, &faults.Rule{Op: "TransactWriteItems", Times: 1, LoseAnswer: true})
	c := newClient(t, fdb, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute))
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	absent := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                aws.String(table),
		Key:                      keyOf("absent"),
		ConditionExpression:      aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": "key"},
	}}
	item, done := l.TransactionWithRefresh()
	_, err = done(fdb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item}}))
	require.Error(t, err, "answer lost")
	_, err = done(fdb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item, absent}}))
	var tce *types.TransactionCanceledException
	require.ErrorAs(t, err, &tce)
	cc.reset()
	require.NoError(t, c.SendHeartbeat(l))
	assert.Equal(t, 1, cc.get("UpdateItem"), "the heartbeat's condition accepted the refresh that landed")
	require.NoError(t, l.Err())
}

// A heartbeat that replaces the lock's data and whose answer is lost may or
// may not have landed, so Lock.Data() cannot know which value the item
// holds. The next heartbeat that lands reads the item's data back, and
// Data() reports what the item holds from then on (issue 21: the leader's
// own Lock.Data() kept the old value after a Proclaim whose answer was lost,
// though the item held the new one).
func TestDataAfterADataHeartbeatInDoubt(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule faults.Rule
		want string
	}{
		{"landed, answer lost", faults.Rule{LoseAnswer: true}, "v2"},
		{"never sent", faults.Rule{Drop: true}, "v1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			table := newTable(t, "")
			db, _ := newDB(t)
			fdb := faults.Wrap(db)
			c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(200*time.Millisecond))
			other := newClient(t, db, table)
			ctx := context.Background()
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("v1")))
			require.NoError(t, err)
			rule := tc.rule
			rule.Op, rule.Match, rule.Times = "UpdateItem", faults.Sets("data"), 1
			fdb.Add(&rule)
			err = c.SendHeartbeatWithContext(ctx, l, dynamolock.ReplaceHeartbeatData([]byte("v2")), dynamolock.HeartbeatRetries(0, 0))
			require.Error(t, err)
			require.Equal(t, 1, fdb.Hits(&rule))
			item, err := other.GetWithContext(ctx, "k")
			require.NoError(t, err)
			require.Equal(t, tc.want, string(item.Data()), "what the item holds")
			waitFor(t, 3*time.Second, "Data() to report the item's data after the next heartbeat", func() bool {
				return string(l.Data()) == tc.want
			})
			require.NoError(t, l.Err())
			// And it stays so: later heartbeats change nothing.
			before := c.Stats().HeartbeatsSent
			waitFor(t, 3*time.Second, "two more heartbeats", func() bool { return c.Stats().HeartbeatsSent >= before+2 })
			require.Equal(t, tc.want, string(l.Data()))
		})
	}
}

// A heartbeat sent before the lock's lease ran out by this host's clock
// but landing after it (a slow request, a paused process) renews an item
// that nobody believes held any more: the lock was declared lost. Its
// caller is told the lock was lost, not that the heartbeat succeeded, and
// the renewed item is released at once, so the key is not taken by nobody
// for a lease.
func TestHeartbeatLandingAfterTheLossIsUndone(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.WithHeartbeatPeriod(0))
	other := newClient(t, db, table)
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	// The explicit heartbeat is sent at once and reaches DynamoDB only once
	// this client has declared the lock lost.
	late := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("leaseDuration"), Times: 1, Before: func(context.Context) error {
		<-l.Done()
		return nil
	}}
	fdb.Add(late)
	err = c.SendHeartbeatWithContext(ctx, l, dynamolock.HeartbeatRetries(0, 0))
	require.Equal(t, 1, fdb.Hits(late))
	require.ErrorIs(t, err, dynamolock.ErrLockLost, "the heartbeat landed after the lock was lost")
	require.ErrorIs(t, l.Err(), dynamolock.ErrLockLost)
	got, err := other.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
	require.NoError(t, err, "the item the late heartbeat renewed was released")
	require.NoError(t, got.Close())
}
