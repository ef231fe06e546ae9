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

// Issue 40, item 6: a holder whose lock was force-released is told it was
// released, not "taken by another owner or deleted"; a deleted item and
// another owner are told apart too. The cause stays ErrLockTakenOver for
// errors.Is. (A release, rather than a heartbeat, after a force release
// reports success: the item is released, as its own earlier send whose
// answer was lost would have left it.)
func TestLossSaysWhatTheItemShowed(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	opts := []dynamolock.ClientOption{dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithOwnerName("worker-1")}
	holder := newClient(t, db, table, opts...)
	operator := newClient(t, db, table, opts...) // lock-example force-release: a client with the holder's owner name

	for _, tc := range []struct {
		name  string
		end   func(key string)
		check func(l *dynamolock.Lock) error
		want  string
	}{
		{"force-released, then a heartbeat", func(key string) {
			view, err := operator.GetWithContext(ctx, key)
			require.NoError(t, err)
			ok, err := operator.ReleaseLockWithContext(ctx, view)
			require.NoError(t, err)
			require.True(t, ok)
		}, func(l *dynamolock.Lock) error { return holder.SendHeartbeatWithContext(ctx, l) },
			"released by another client with this owner name (a force release"},
		{"deleted", func(key string) {
			_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: keyOf(key)})
			require.NoError(t, err)
		}, func(l *dynamolock.Lock) error { return holder.SendHeartbeatWithContext(ctx, l) },
			"the item was deleted"},
		{"taken by another owner", func(key string) {
			putRaw(t, db, table, map[string]types.AttributeValue{"key": s(key), "ownerName": s("intruder"), "leaseDuration": s("20s"), "recordVersionNumber": s("x")})
		}, func(l *dynamolock.Lock) error { return holder.SendHeartbeatWithContext(ctx, l) },
			`taken by owner "intruder"`},
		{"taken by another owner, then a release", func(key string) {
			putRaw(t, db, table, map[string]types.AttributeValue{"key": s(key), "ownerName": s("intruder"), "leaseDuration": s("20s"), "recordVersionNumber": s("x")})
		}, func(l *dynamolock.Lock) error { _, err := holder.ReleaseLockWithContext(ctx, l); return err },
			`taken by owner "intruder"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "k-" + tc.name
			l, err := holder.AcquireLockWithContext(ctx, key)
			require.NoError(t, err)
			tc.end(key)
			err = tc.check(l)
			t.Log(err)
			require.ErrorIs(t, err, dynamolock.ErrLockLost)
			assert.ErrorIs(t, err, dynamolock.ErrLockTakenOver, "the cause is unchanged for errors.Is")
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "taken by another owner or deleted")
			assert.Equal(t, err.Error(), l.Err().Error(), "Err says the same")
		})
	}
}
