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

// gatedReadBack holds the answer of the next GetItem sent after a
// transaction (read at once) until gate closes, and says when it is held
// (entered).
type gatedReadBack struct {
	lateAPI
	armed   atomic.Bool
	entered chan struct{}
	gate    chan struct{}
}

func (d *gatedReadBack) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if !d.armed.CompareAndSwap(true, false) {
		return d.lateAPI.GetItem(ctx, in, o...)
	}
	out, err := d.lateAPI.GetItem(ctx, in, o...)
	close(d.entered)
	<-d.gate
	return out, err
}

func (d *gatedReadBack) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	out, err := d.lateAPI.TransactWriteItems(ctx, in, o...)
	if err == nil {
		d.armed.Store(true)
	}
	return out, err
}

// TestALateLockDoesNotDisplaceANewerOne: the ordering of the simulation's
// invariant 2 at seed 46400421. Client A's AcquireLocks commits its
// transaction on k, and the read after it (for the fencing token) is slow.
// Meanwhile client B, running with A's owner name, adopts k reentrantly,
// and a reentrant AcquireLock of A takes it from B and is registered.
// Then AcquireLocks' read answers. Registering its lock used to replace
// the newer one and declare that lost ("taken by another owner") while
// the item showed it held, and nobody renewed the item: the key was stuck
// for a lease. Now the newer lock stays held and renewed, and AcquireLocks
// never returns the superseded one.
func TestALateLockDoesNotDisplaceANewerOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lease = 3 * time.Second
		model := dynamolocktest.New()
		db := &gatedReadBack{lateAPI: model.Conn(), entered: make(chan struct{}), gate: make(chan struct{})}
		opts := []dynamolock.ClientOption{dynamolock.WithOwnerName("shared"), dynamolock.WithLeaseDuration(lease),
			dynamolock.WithHeartbeatPeriod(time.Second)}
		a, err := dynamolock.New(db, "locks", opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer a.Close()
		b, err := dynamolock.New(model.Conn(), "locks", opts...)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ctx := context.Background()
		if _, err := a.CreateTableWithContext(ctx, "locks"); err != nil {
			t.Fatal(err)
		}

		type result struct {
			locks []*dynamolock.Lock
			err   error
		}
		multi := make(chan result, 1)
		go func() {
			mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			locks, err := a.AcquireLocks(mctx, []string{"k"})
			multi <- result{locks, err}
		}()
		<-db.entered // the transaction landed and was read back; the answer waits

		adopted, err := b.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant())
		if err != nil {
			t.Fatalf("B's reentrant acquisition: %v", err)
		}
		newer, err := a.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant())
		if err != nil {
			t.Fatalf("A's reentrant acquisition: %v", err)
		}
		if newer.FencingToken() <= adopted.FencingToken() {
			t.Fatalf("A's reentrant acquisition has token %d, B's %d: it did not take the key from B", newer.FencingToken(), adopted.FencingToken())
		}
		close(db.gate)
		r := <-multi
		synctest.Wait()

		if err := newer.Err(); err != nil {
			t.Fatalf("A's newer lock (token %d) was ended when AcquireLocks registered its older one: %v", newer.FencingToken(), err)
		}
		for _, l := range r.locks {
			if l.Err() == nil && l != newer {
				t.Errorf("AcquireLocks returned a live lock with token %d beside A's newer lock with token %d", l.FencingToken(), newer.FencingToken())
			}
		}
		if r.err == nil && len(r.locks) == 1 && r.locks[0] != newer {
			t.Errorf("AcquireLocks returned a lock (token %d) that is not the one A holds", r.locks[0].FencingToken())
		}
		var lng *dynamolock.LockNotGrantedError
		if r.err != nil && !errors.As(r.err, &lng) {
			t.Errorf("AcquireLocks: %v, want a *LockNotGrantedError (it waited for A's own lock)", r.err)
		}
		t.Logf("AcquireLocks: %d locks, %v", len(r.locks), r.err)

		// The newer lock is the item's holder: it stays held, renewed, past
		// a few leases.
		time.Sleep(3 * lease)
		if err := newer.Err(); err != nil {
			t.Fatalf("A's newer lock after 3 leases: %v", err)
		}
		if got, err := a.Get("k"); err != nil || got != newer {
			t.Fatalf("Get(k) = %v, %v; want A's newer lock", got, err)
		}
		if err := newer.Close(); err != nil {
			t.Fatalf("release of the newer lock: %v", err)
		}
	})
}
