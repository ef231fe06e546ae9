package dynamolock_test

import (
	"context"
	"strings"
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

// holdRenewal keeps back the first renewal of a waiter's queue entry (a
// join of an entry already in the queue) until its caller gives up: a
// request that reaches DynamoDB only after the waiter left the queue.
type holdRenewal struct {
	*dynamodb.Client
	held atomic.Pointer[dynamodb.UpdateItemInput]
}

func (h *holdRenewal) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	renewal := strings.HasPrefix(aws.ToString(in.UpdateExpression), "SET #q.#w = :e") &&
		strings.Contains(aws.ToString(in.ConditionExpression), "attribute_exists(#q")
	if renewal && h.held.CompareAndSwap(nil, in) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.Client.UpdateItem(ctx, in, o...)
}

// The one waiter queue: a renewal of a waiter's entry that lands after the
// waiter gave up and left the queue does not bring its entry back. Before
// the queues were one, a fair lock's renewal was conditioned only on the
// queue's existence: the late renewal put the entry back, and every fair
// waiter that came later waited behind a waiter that was gone, for that
// entry's lease.
//
// Ordering: the waiter joins; its renewal is sent and held; its context
// ends; it leaves the queue (its entry removed); the held renewal lands.
func TestFairQueueRenewalLandingLateBringsNoEntryBack(t *testing.T) {
	db, _ := newDB(t)
	table := newTable(t, "")
	ctx := context.Background()
	holder := newClient(t, db, table, dynamolock.WithOwnerName("holder"))
	l, err := holder.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness())
	require.NoError(t, err)

	late := &holdRenewal{Client: db}
	// A lease of 6 s, its queue entry's too: the entry is renewed after
	// 2 s, and that renewal is held until the wait ends at 4 s.
	waiter := newClient(t, late, table, dynamolock.WithOwnerName("waiter"),
		dynamolock.WithLeaseDuration(6*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	wctx, cancel := context.WithTimeout(ctx, 4*time.Second)
	defer cancel()
	_, err = waiter.AcquireLockWithContext(wctx, "k", dynamolock.WithFairness(), dynamolock.WithRefreshPeriod(200*time.Millisecond))
	require.Error(t, err, "the key stays held: the waiter gives up")
	held := late.held.Load()
	require.NotNil(t, held, "the waiter renewed its entry while it waited")

	queue := func() map[string]types.AttributeValue {
		q, _ := rawItem(t, db, table, keyOf("k"))["fairQueue"].(*types.AttributeValueMemberM)
		if q == nil {
			return nil
		}
		return q.Value
	}
	waitFor(t, 5*time.Second, "the waiter to leave the queue", func() bool { return len(queue()) == 0 })

	_, err = db.UpdateItem(ctx, held) // the renewal lands now
	var ccf *types.ConditionalCheckFailedException
	assert.ErrorAs(t, err, &ccf, "a renewal of an entry that left the queue is refused")
	assert.Empty(t, queue(), "no entry of a waiter that gave up is in the queue")

	// And so a fair waiter that comes later takes the released key at once.
	ok, err := holder.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	require.True(t, ok)
	other := newClient(t, db, table, dynamolock.WithOwnerName("other"))
	octx, ocancel := context.WithTimeout(ctx, 3*time.Second)
	defer ocancel()
	begin := time.Now()
	l, err = other.AcquireLockWithContext(octx, "k", dynamolock.WithFairness(), dynamolock.WithRefreshPeriod(200*time.Millisecond))
	require.NoError(t, err, "no entry of a gone waiter holds the queue up")
	t.Logf("a later fair waiter took the free key in %s", time.Since(begin).Round(time.Millisecond))
	_, err = other.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
}
