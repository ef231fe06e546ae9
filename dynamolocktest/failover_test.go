package dynamolocktest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// TestFailoverInVirtualTime is the test a user writes from the package
// documentation: a leader with a one-minute lease is partitioned, steps down
// when its lease runs out (Done closes), and a standby leads after about
// one lease, with a higher fencing token, in virtual time. With -race it
// takes milliseconds of wall time.
func TestFailoverInVirtualTime(t *testing.T) {
	wall := time.Now()
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		hostA, hostB := db.Conn(), db.Conn()
		opts := []dynamolock.ClientOption{
			dynamolock.WithLeaseDuration(time.Minute),
			dynamolock.WithHeartbeatPeriod(10 * time.Second),
		}
		a := newClient(t, hostA, opts...)
		b := newClient(t, hostB, opts...)
		if _, err := a.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}

		leader, err := a.NewElection("leader").Campaign(ctx, []byte("a"))
		if err != nil {
			t.Fatal(err)
		}
		// The standby campaigns while a leads.
		standby := make(chan *dynamolock.Lock, 1)
		go func() {
			l, err := b.NewElection("leader").Campaign(ctx, []byte("b"))
			if err != nil {
				t.Error(err)
			}
			standby <- l
		}()

		time.Sleep(5 * time.Minute) // a leads through heartbeats
		if leader.Err() != nil {
			t.Fatalf("the leader lost its lease while connected: %v", leader.Err())
		}
		select {
		case <-standby:
			t.Fatal("the standby leads while the leader is alive")
		default:
		}

		partitioned := time.Now()
		hostA.Partition()
		<-leader.Done()
		stepDown := time.Since(partitioned)
		if !errors.Is(leader.Err(), dynamolock.ErrLockLost) {
			t.Fatalf("leader.Err() = %v, want ErrLockLost", leader.Err())
		}
		next := <-standby
		took := time.Since(partitioned)
		t.Logf("virtual time: the leader stepped down %s after the partition, the standby led %s after it", stepDown, took)
		if stepDown > time.Minute {
			t.Errorf("the leader stepped down %s after the partition, more than its lease", stepDown)
		}
		if took < stepDown || took > 2*time.Minute+dynamolock.DefaultRefreshPeriod {
			t.Errorf("the standby led %s after the partition; want after the leader stepped down (%s) and within its lease after the last heartbeat", took, stepDown)
		}
		if next.FencingToken() <= leader.FencingToken() {
			t.Errorf("fencing token %d after %d: not higher", next.FencingToken(), leader.FencingToken())
		}
		if got := hostA.Calls()["UpdateItem"]; got < 30 {
			t.Errorf("the leader sent %d UpdateItems in 5 minutes of heartbeats every 10 s, want about 30", got)
		}
	})
	// Five minutes of virtual time in well under a second of wall time on
	// an idle machine; a figure, not a check (under -race beside other
	// test processes it took 1.75 s once).
	t.Logf("five minutes of virtual time took %s of wall time", time.Since(wall).Round(time.Millisecond))
}

// TestGuardedWriteFailsAfterTakeover: a worker paused past its lease wakes
// up still holding its *Lock; its write, guarded by
// Lock.TransactionCondition in its own TransactWriteItems, is refused once
// another host took over, and the new holder's guarded write goes through.
func TestGuardedWriteFailsAfterTakeover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		w1, w2 := db.Conn(), db.Conn()
		opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(20 * time.Second), dynamolock.WithHeartbeatPeriod(5 * time.Second)}
		c1 := newClient(t, w1, opts...)
		c2 := newClient(t, w2, opts...)
		if _, err := c1.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}
		createDataTable(ctx, t, w1)

		l1, err := c1.AcquireLockWithContext(ctx, "customer-42")
		if err != nil {
			t.Fatal(err)
		}
		if err := guardedWrite(ctx, w1, l1, "by w1"); err != nil {
			t.Fatalf("the holder's guarded write: %v", err)
		}
		w1.Partition() // w1 pauses: no heartbeat reaches DynamoDB
		l2, err := c2.AcquireLockWithContext(ctx, "customer-42", dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		w1.Heal() // w1 wakes up and writes with its old lock
		err = guardedWrite(ctx, w1, l1, "by w1 after the takeover")
		var tce *types.TransactionCanceledException
		if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 || aws.ToString(tce.CancellationReasons[0].Code) != "ConditionalCheckFailed" {
			t.Fatalf("the old holder's guarded write: %v, want a TransactionCanceledException with ConditionalCheckFailed for the lock", err)
		}
		if err := guardedWrite(ctx, w2, l2, "by w2"); err != nil {
			t.Fatalf("the new holder's guarded write: %v", err)
		}
		items := db.Items("data")
		if len(items) != 1 || items[0]["value"].(*types.AttributeValueMemberS).Value != "by w2" {
			t.Fatalf("data table: %v", items)
		}
	})
}

func newClient(t *testing.T, conn *dynamolocktest.Conn, opts ...dynamolock.ClientOption) *dynamolock.Client {
	t.Helper()
	c, err := dynamolock.New(conn, "locks", opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func createDataTable(ctx context.Context, t *testing.T, conn *dynamolocktest.Conn) {
	t.Helper()
	_, err := conn.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("data"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
}

// guardedWrite writes value into the data table in one transaction with
// the lock's condition.
func guardedWrite(ctx context.Context, conn *dynamolocktest.Conn, l *dynamolock.Lock, value string) error {
	_, err := conn.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		l.TransactionCondition(),
		{Put: &types.Put{TableName: aws.String("data"), Item: map[string]types.AttributeValue{
			"id":    &types.AttributeValueMemberS{Value: "customer-42"},
			"value": &types.AttributeValueMemberS{Value: value},
		}}},
	}})
	return err
}

// The recipes and listings work on the fake: Do's context ends when its
// lock is lost, a semaphore hands out its slots, AcquireLocks takes keys
// all or nothing (TransactWriteItems), and the listings read the table.
func TestRecipesAndListings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		conn := db.Conn()
		opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(20 * time.Second), dynamolock.WithHeartbeatPeriod(5 * time.Second)}
		c := newClient(t, conn, opts...)
		other := newClient(t, db.Conn(), opts...)
		if _, err := c.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}

		// Do: the work's context is cancelled when the lock is lost.
		err := c.Do(ctx, "job", func(ctx context.Context, l *dynamolock.Lock) error {
			conn.Partition()
			<-ctx.Done()
			conn.Heal()
			return context.Cause(ctx)
		})
		if !errors.Is(err, dynamolock.ErrLockLost) {
			t.Fatalf("Do: %v, want ErrLockLost", err)
		}

		// A semaphore of two slots.
		sem, err := c.NewSemaphore("pool", 2)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if _, err := sem.Acquire(ctx, dynamolock.FailIfLocked()); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := sem.Acquire(ctx, dynamolock.FailIfLocked()); err == nil {
			t.Fatal("a third slot of a semaphore of two")
		}

		// All or nothing: one of the keys is held elsewhere.
		if _, err := other.AcquireLockWithContext(ctx, "b"); err != nil {
			t.Fatal(err)
		}
		before := conn.Calls()["TransactWriteItems"]
		if _, err := c.AcquireLocks(ctx, []string{"a", "b"}, dynamolock.FailIfLocked()); err == nil {
			t.Fatal("AcquireLocks took a key held by another client")
		}
		if conn.Calls()["TransactWriteItems"] == before {
			t.Fatal("AcquireLocks did not use TransactWriteItems")
		}
		if ls, err := c.AcquireLocks(ctx, []string{"a", "c"}); err != nil || len(ls) != 2 {
			t.Fatalf("AcquireLocks of free keys: %v", err)
		}

		// Listings.
		n := 0
		for l, err := range c.AllLocks(ctx) {
			if err != nil {
				t.Fatal(err)
			}
			if l.OwnerName() == "" {
				t.Fatal("a listed lock without an owner")
			}
			n++
		}
		if n != len(db.Items("locks")) {
			t.Fatalf("AllLocks listed %d locks, the table has %d items", n, len(db.Items("locks")))
		}
		for l, err := range c.LocksByPartitionKey(ctx, "b") {
			if err != nil || l.OwnerName() != other.OwnerName() {
				t.Fatalf("LocksByPartitionKey: %v, %v", l, err)
			}
		}
	})
}
