package dynamolock_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// slowWritesDB takes 1 ms for every UpdateItem (the meter counts no round
// trip of zero), and delay for each of the next slow ones.
type slowWritesDB struct {
	*dynamolocktest.Conn
	slow  atomic.Int32
	delay time.Duration // set before slow
}

func (d *slowWritesDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.slow.Add(-1) >= 0 {
		time.Sleep(d.delay)
	}
	time.Sleep(time.Millisecond)
	return d.Conn.UpdateItem(ctx, in, o...)
}

// slowMoment gives c (lease 10 s, heartbeat 1 s, one heartbeat worker)
// a round trip measured in a slow moment: the next beats of key
// take delay each, and the meter then reads at most 1/delay renewals per
// second. Then writes are fast again.
func slowMoment(t *testing.T, c *dynamolock.Client, db *slowWritesDB, key string, delay time.Duration, beats int32) *dynamolock.Lock {
	t.Helper()
	l, err := c.AcquireLock(key)
	if err != nil {
		t.Fatal(err)
	}
	db.delay = delay
	db.slow.Store(beats) // from the first heartbeat, at 1 s
	for c.Stats().HeartbeatsSent < 1 {
		time.Sleep(100 * time.Millisecond) // virtual time: the beat's own delay
	}
	synctest.Wait() // the scheduler's loop has measured the beat
	if err := l.Err(); err != nil {
		t.Fatalf("the slow beats lost %s: %v", key, err)
	}
	return l
}

func newIdleTestClient(t *testing.T) (*dynamolock.Client, *slowWritesDB) {
	t.Helper()
	ddb := dynamolocktest.New()
	db := &slowWritesDB{Conn: ddb.Conn()}
	c, err := dynamolock.New(db, "locks", dynamolock.WithLeaseDuration(10*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second), dynamolock.WithHeartbeatConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.CreateTableWithContext(context.Background(), "locks"); err != nil {
		t.Fatal(err)
	}
	return c, db
}

// A client that holds nothing takes one key whatever its meter read in a
// slow moment: the meter learns from heartbeats only, so before the fix
// it never read again, and every acquisition of the idle client waited
// for capacity until its deadline (AcquireLock: refused with
// ErrHeartbeatCapacity after its lease and a second; Do without a
// deadline: for ever, which hung seed 9243 of the simulation).
func TestAdmissionIdleClientTakesOneKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, db := newIdleTestClient(t)
		// One beat of 8.5 s (answered before the 10 s lease ends): 0.8 ×
		// 1/8.5 renewals/s is under the 1/10 one lock needs.
		l := slowMoment(t, c, db, "before", 8500*time.Millisecond, 1)
		if _, err := c.ReleaseLock(l); err != nil {
			t.Fatal(err)
		}
		// With a lease of 2 s the key needs 0.5 renewals/s: more than the
		// meter allows until a dozen fast beats have followed the slow one.
		start := time.Now()
		l, err := c.AcquireLock("idle", dynamolock.WithLockLease(2*time.Second))
		if err != nil {
			t.Fatalf("an idle client was refused one key after %s: %v", time.Since(start), err)
		}
		// A poll or two of admission while the scheduler counts the
		// release, far from the 3 s after which it was refused.
		if waited := time.Since(start); waited > time.Second {
			t.Errorf("an idle client waited %s for one key", waited)
		}
		// Its heartbeats measure the rate again: a second key fits.
		for c.Stats().HeartbeatsSent < 6 {
			time.Sleep(100 * time.Millisecond)
		}
		start = time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := c.Do(ctx, "second", func(context.Context, *dynamolock.Lock) error { return nil }); err != nil {
			t.Fatalf("the second key, after fast beats, after %s: %v", time.Since(start), err)
		}
		if err := l.Err(); err != nil {
			t.Fatal(err)
		}
	})
}

// A try-lock whose only bound is its context (Do with FailIfLocked) waits
// for heartbeat capacity as long as AcquireLock with FailIfLocked does,
// its lease plus the default additional second, and is then refused with
// ErrHeartbeatCapacity. Before, it waited until its context ended: for
// ever with context.Background().
func TestAdmissionTryLockWaitIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, db := newIdleTestClient(t)
		// Every beat of the held lock takes 4.5 s (each lands within the
		// lease the one before it renewed): 0.8 × 1/4.5 renewals/s is under
		// the 2/10 that it and one more lock need.
		held := slowMoment(t, c, db, "held", 4500*time.Millisecond, 1<<30)
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		start := time.Now()
		err := c.Do(ctx, "try", func(context.Context, *dynamolock.Lock) error { return nil }, dynamolock.FailIfLocked())
		waited := time.Since(start)
		if !errors.Is(err, dynamolock.ErrHeartbeatCapacity) {
			t.Fatalf("Do with FailIfLocked after %s: %v, want ErrHeartbeatCapacity", waited, err)
		}
		if bound := 10*time.Second + dynamolock.DefaultAdditionalTimeToWaitForLock; waited > bound {
			t.Errorf("Do with FailIfLocked waited %s for capacity, more than its lease and the default additional time (%s)", waited, bound)
		}
		if err := held.Err(); err != nil {
			t.Fatal(err)
		}
		db.slow.Store(0)
		if _, err := c.ReleaseLock(held); err != nil {
			t.Fatal(err)
		}
	})
}

// A client that holds nothing but has let an acquisition go that waits for
// a key held elsewhere is not idle (that acquisition's share is
// reserved), and its meter, which read a slow moment, cannot read again
// until it holds a lock. Before the fix every further acquisition waited
// to its deadline for good; now a reading older than the meter's memory
// (10 s) with nothing held counts as unmeasured.
func TestAdmissionStaleMeterWithAWaiterLetsGo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, db := newIdleTestClient(t)
		l := slowMoment(t, c, db, "before", 8500*time.Millisecond, 1)
		if _, err := c.ReleaseLock(l); err != nil {
			t.Fatal(err)
		}
		other, err := dynamolock.New(db.Conn, "locks", dynamolock.WithLeaseDuration(10*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		if err != nil {
			t.Fatal(err)
		}
		defer other.Close()
		if _, err := other.AcquireLock("busy"); err != nil {
			t.Fatal(err)
		}
		// A waiter of c, let go while nothing is held (idle), waits for
		// "busy" for as long as its context allows.
		ctx, cancel := context.WithCancel(context.Background())
		waiting := make(chan error, 1)
		go func() {
			waiting <- c.Do(ctx, "busy", func(context.Context, *dynamolock.Lock) error { return nil })
		}()
		time.Sleep(12 * time.Second) // past the meter's memory, with no beat of c
		start := time.Now()
		l, err = c.AcquireLock("free", dynamolock.WithLockLease(2*time.Second))
		if err != nil {
			t.Fatalf("refused after %s beside a waiter: %v", time.Since(start), err)
		}
		if _, err := c.ReleaseLock(l); err != nil {
			t.Fatal(err)
		}
		cancel()
		<-waiting
	})
}
