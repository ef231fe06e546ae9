package dynamolock_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// serialDB answers one request at a time, each after perCall: a backend
// whose write throughput, not its round trip, is the limit (DynamoDB
// Local's, or a table's provisioned capacity).
type serialDB struct {
	*dynamolocktest.Conn
	turn    chan struct{} // capacity 1; a channel, not a mutex: synctest's time advances while goroutines wait on it
	perCall time.Duration
	// pace, if set, replaces perCall: each request's service time, asked
	// once it has the turn (a backend whose rate moves).
	pace func() time.Duration
}

func (d *serialDB) serve() func() {
	d.turn <- struct{}{}
	if d.pace != nil {
		time.Sleep(d.pace())
	} else {
		time.Sleep(d.perCall)
	}
	return func() { <-d.turn }
}

func (d *serialDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	defer d.serve()()
	return d.Conn.UpdateItem(ctx, in, o...)
}

func (d *serialDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	defer d.serve()()
	return d.Conn.GetItem(ctx, in, o...)
}

func (d *serialDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	defer d.serve()()
	return d.Conn.DeleteItem(ctx, in, o...)
}

// releasedItems counts the items of table that carry the released mark.
func releasedItems(db *dynamolocktest.DB, table string) int {
	n := 0
	for _, item := range db.Items(table) {
		if _, ok := item["isReleased"]; ok {
			n++
		}
	}
	return n
}

// Close of a client whose heartbeats use all of the backend's throughput
// releases every lock before its lease ends. The ordering that broke it:
// Close's releases and the scheduler's heartbeats shared the backend, the
// releases in no particular order, so locks waiting for their release were
// neither released nor renewed before their leases ran out, and expired in
// DynamoDB instead (97 of 2,423 and at least 275 of 2,624 in lockbench
// capacity against DynamoDB Local). Now the heartbeats stop at Close and
// the releases go in the order of the ends of the leases.
func TestCloseAtCapacityLosesNoLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		ddb := dynamolocktest.New()
		db := &serialDB{Conn: ddb.Conn(), turn: make(chan struct{}, 1), perCall: 50 * time.Millisecond} // 20 writes/s
		c, err := dynamolock.New(db, "locks", dynamolock.WithLeaseDuration(3*time.Second),
			dynamolock.WithHeartbeatPeriod(time.Second), dynamolock.WithHeartbeatConcurrency(2),
			dynamolock.WithHeartbeatAdmission(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTableWithContext(ctx, "locks"); err != nil {
			t.Fatal(err)
		}
		// 40 locks need 13.3 renewals/s at least (one per lease) and ask
		// for 40/s (one per period): the two workers renew each about
		// every 2 s, all the backend allows.
		const n = 40
		for i := range n {
			if _, err := c.AcquireLockWithContext(ctx, "k"+strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(10 * time.Second)
		st := c.Stats()
		if st.LocksLost != 0 || st.HeldLocks != n {
			t.Fatalf("before Close: %d held, %d lost; want %d held, none lost", st.HeldLocks, st.LocksLost, n)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if lost := c.Stats().LocksLost; lost != 0 {
			t.Fatalf("Close let %d of %d locks expire instead of releasing them", lost, n)
		}
		if released := releasedItems(ddb, "locks"); released != n {
			t.Fatalf("%d of %d items released", released, n)
		}
	})
}

// The same when round trips, not throughput, bound the heartbeats, and
// grew after the locks were admitted (found in review): with the workers
// renewing at their limit, a release sent first to a lock whose beat was
// in flight waited for that beat and then released a lock it had just
// renewed, while locks whose leases ended next waited. Locks with a beat
// in flight now go by the lease that beat renews. Before that, 20 to 90 of
// about 90 locks were lost in Close here.
func TestCloseWhenRoundTripsGrewLosesNoLock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New().Conn()
		db.Delay(100 * time.Millisecond) // every request's round trip
		c, err := dynamolock.New(db, "locks", dynamolock.WithLeaseDuration(3*time.Second),
			dynamolock.WithHeartbeatPeriod(time.Second), dynamolock.WithHeartbeatConcurrency(4))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTableWithContext(ctx, "locks"); err != nil {
			t.Fatal(err)
		}
		// Four workers at 100 ms renew 40 locks a second: admission takes
		// what 0.6 of that allows, and refuses the rest.
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				for i := next.Add(1); i <= 200; i = next.Add(1) {
					_, err := c.AcquireLockWithContext(ctx, "k"+strconv.FormatInt(i, 10))
					if err != nil && !errors.Is(err, dynamolock.ErrHeartbeatCapacity) {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		time.Sleep(5 * time.Second)
		db.Delay(120 * time.Millisecond) // the margin shrinks: the scheduler sheds a few
		time.Sleep(10 * time.Second)
		st := c.Stats()
		if st.HeldLocks < 50 {
			t.Fatalf("only %d locks held before Close: the case needs the workers at their limit", st.HeldLocks)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if lost := c.Stats().LocksLost - st.LocksLost; lost != 0 {
			t.Fatalf("Close let %d of %d locks expire instead of releasing them", lost, st.HeldLocks)
		}
	})
}
