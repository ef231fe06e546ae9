package dynamolocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// TestSessionFailoverInVirtualTime: the fake works with sessions unchanged.
// A client holds 50 locks through one session; partitioned, every lock
// ends within the session's lease, and a client without sessions takes
// all of them in about one lease, with higher fencing tokens.
func TestSessionFailoverInVirtualTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		hostA, hostB := db.Conn(), db.Conn()
		lease := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(10 * time.Second)}
		a := newClient(t, hostA, append(lease, dynamolock.WithSession())...)
		b := newClient(t, hostB, lease...)
		if _, err := a.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}
		var held []*dynamolock.Lock
		for i := range 50 {
			l, err := a.AcquireLockWithContext(ctx, fmt.Sprint("k", i))
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, l)
		}
		s, err := a.Session(ctx)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Minute) // held through the session's heartbeats
		for _, l := range held {
			if l.Err() != nil {
				t.Fatalf("a lock ended while its session lived: %v", l.Err())
			}
		}
		partitioned := time.Now()
		hostA.Partition()
		<-s.Done()
		if ended := time.Since(partitioned); ended > time.Minute {
			t.Errorf("the session ended %s after the partition, more than its lease", ended)
		}
		for _, l := range held {
			if !errors.Is(l.Err(), dynamolock.ErrLockLost) {
				t.Fatalf("a lock of the ended session: Err() = %v, want ErrLockLost", l.Err())
			}
		}
		for i, old := range held {
			l, err := b.AcquireLockWithContext(ctx, fmt.Sprint("k", i))
			if err != nil {
				t.Fatal(err)
			}
			if l.FencingToken() <= old.FencingToken() {
				t.Errorf("fencing token %d after %d: not higher", l.FencingToken(), old.FencingToken())
			}
		}
		if took := time.Since(partitioned); took > 2*time.Minute+dynamolock.DefaultRefreshPeriod {
			t.Errorf("the 50 locks were taken %s after the partition: more than about one lease", took)
		}
	})
}
