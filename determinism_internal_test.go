package dynamolock

// Where the library could leave a choice to the Go runtime (a select with
// several ready cases, a map's order) it makes it itself, so that one seed
// of the simulation (internal/sim) is one run: docs/SIMULATION.md,
// "Determinism and exact replay".

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/clock"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// The ordering that broke replay: an acquisition waiting in sleep when its
// client closes and a wake-up (or the timer, or the end of its context)
// comes at the same instant. The select picked one of the ready cases at
// random, so one run of a seed failed the call with ErrClientClosed and
// the next went on to read the key again (seed 26 of the simulation).
// Before the fix, the first loop saw nil about half the time.
func TestSleepTiesHaveOneOutcome(t *testing.T) {
	c := grantClient(t, DisableHeartbeat())
	woken := make(chan struct{})
	close(woken)
	ended, cancel := context.WithCancel(context.Background())
	cancel()

	// An ended context wins over a wake-up and the timer.
	for i := range 200 {
		if err := c.sleep(ended, 0, woken); !errors.Is(err, context.Canceled) {
			t.Fatalf("run %d: sleep with its context ended and a wake-up ready returned %v, want context.Canceled", i, err)
		}
	}
	// A closed client wins over everything.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		if err := c.sleep(context.Background(), 0, woken); !errors.Is(err, ErrClientClosed) {
			t.Fatalf("run %d: sleep on a closed client with a wake-up ready returned %v, want ErrClientClosed", i, err)
		}
		if err := c.sleep(ended, 0, woken); !errors.Is(err, ErrClientClosed) {
			t.Fatalf("run %d: sleep on a closed client with its context ended returned %v, want ErrClientClosed", i, err)
		}
	}
}

// The ordering that broke replay: Close with fewer heartbeat workers than
// held locks releases them a few at a time, in the order of the client's
// registry, a map. Two runs of one seed released them in different orders
// (seeds 7 and 21 of the simulation). Before the fix, the eight releases
// below came out of key order in almost every run. Close now releases the
// lock whose lease ends first first (TestCloseAtCapacityLosesNoLock); locks
// whose leases end at one instant go in key order.
func TestCloseReleasesInKeyOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var released []string
		record := &faults.Rule{Op: "UpdateItem", Match: func(in any) bool {
			u := in.(*dynamodb.UpdateItemInput)
			if !strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #r = :r") {
				return false
			}
			mu.Lock()
			released = append(released, u.Key["key"].(*types.AttributeValueMemberS).Value)
			mu.Unlock()
			return false
		}}
		db := faults.Wrap(dynamolocktest.New().Conn())
		c, err := New(db, "order_table", DisableHeartbeat(), WithHeartbeatConcurrency(1))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CreateTableWithContext(context.Background(), "order_table"); err != nil {
			t.Fatal(err)
		}
		// Two groups of four, each acquired at one virtual instant and out
		// of key order: the first group's leases end a second before the
		// second's, whose keys come first in key order.
		var want []string
		for _, g := range []string{"b", "a"} {
			var group []string
			for i := range 4 {
				group = append(group, fmt.Sprintf("key-%s-%d", g, (i*3)%4))
			}
			for _, k := range group {
				if _, err := c.AcquireLock(k); err != nil {
					t.Fatal(err)
				}
			}
			slices.Sort(group)
			want = append(want, group...)
			time.Sleep(time.Second)
		}
		db.Add(record)
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(released, want) {
			t.Fatalf("Close released %v, want the earliest lease end first, then key order: %v", released, want)
		}
	})
}

// A sleep that ends at the instant its context's deadline passes returns
// the context's end, whichever of the two timers the Go scheduler runs
// first (the simulation's replay: a poll timed to the end of a wait).
// Before, the sleeper could wake first, find the context not yet ended
// and go on: in a synctest bubble it did so in some runs and not others.
func TestSleepEndingAtTheDeadlineSeesIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Client{cfg: config{clock: clock.Real}, closing: make(chan struct{})}
		for i := range 200 {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := c.sleep(ctx, time.Second, nil)
			cancel()
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("run %d: a sleep ending at its context's deadline returned %v, want context.DeadlineExceeded", i, err)
			}
		}
	})
}

// The ordering that broke replay: the fair queue and the readers map are
// DynamoDB maps, and the writes built from them (which dead entries a
// write removes, and the placeholders #w0, #w1, ... it names them by)
// followed Go's map order, so one seed sent a differently worded request
// in two runs (seeds 1 and 16 with -sim.clocks=within). They are decoded in
// id order. Before the fix the second decoding differed from the first
// within a few runs.
func TestQueuesDecodeInIDOrder(t *testing.T) {
	entries := map[string]types.AttributeValue{}
	readers := map[string]types.AttributeValue{}
	for i := range 16 {
		id := fmt.Sprintf("%02x", (i*7)%16)
		entries[id] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			"t": lockitem.N(uint64(i + 1)), "l": lockitem.N(1000), "b": lockitem.S("beat" + id), "k": lockitem.S("w"),
		}}
		readers[id] = readerEntry("beat"+id, time.Second, "")
	}
	item := map[string]types.AttributeValue{
		"key":               lockitem.S("k"),
		lockitem.IsReleased: lockitem.S("1"), // no writer
		lockitem.FairQueue:  &types.AttributeValueMemberM{Value: entries},
		lockitem.Readers:    &types.AttributeValueMemberM{Value: readers},
	}
	sorted := func(ids []string) bool { return slices.IsSorted(ids) && len(ids) == 16 }
	for run := range 20 {
		ws, _, _ := queueOf(item)
		var ids []string
		for _, w := range ws {
			ids = append(ids, w.ID)
		}
		if !sorted(ids) {
			t.Fatalf("run %d: queueOf gave the waiters in the order %v, want id order", run, ids)
		}
		v, err := decodeRWParts(item)
		if err != nil {
			t.Fatal(err)
		}
		ids = ids[:0]
		for _, w := range v.queue {
			ids = append(ids, w.ID)
		}
		if !sorted(ids) {
			t.Fatalf("run %d: the read/write view's queue is in the order %v, want id order", run, ids)
		}
		ids = ids[:0]
		for _, r := range v.readers {
			ids = append(ids, r.ID)
		}
		if !sorted(ids) {
			t.Fatalf("run %d: the read/write view's readers are in the order %v, want id order", run, ids)
		}
	}
}

// The ordering that broke replay, and made ReleaseLock's result a matter
// of luck: a scheduled heartbeat whose answer never comes ends with its
// context at the end of the lease, and hands the lock's write turn to a
// ReleaseLock waiting for it. The scheduler declared the loss only once the
// worker reported the beat, so the release, woken at the same instant, saw
// the lock lost (and returned the loss) or not (and sent its write for a
// lapsed lease) by which goroutine ran first (seeds 15 and 40 with
// -sim.clocks=within). The failed beat now declares the loss itself, before
// the turn passes. Before the fix the release below sent its write in
// some runs (the second, the first time it was run).
func TestReleaseBehindABeatThatRanOutSeesTheLoss(t *testing.T) {
	for run := range 20 {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			releases := 0
			inFlight := make(chan struct{})
			var once sync.Once
			db := faults.Wrap(dynamolocktest.New().Conn())
			c := tableClient(t, db, "turn_table", WithLeaseDuration(time.Second), WithHeartbeatPeriod(300*time.Millisecond))
			l, err := c.AcquireLock("k")
			if err != nil {
				t.Fatal(err)
			}
			db.Add(&faults.Rule{Op: "UpdateItem", Match: func(in any) bool {
				u := in.(*dynamodb.UpdateItemInput)
				if strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #r = :r") {
					mu.Lock()
					releases++
					mu.Unlock()
					return false
				}
				return strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #v = :v, #l = :l")
			}, Before: func(ctx context.Context) error {
				once.Do(func() { close(inFlight) })
				<-ctx.Done() // the heartbeat's answer never comes
				return ctx.Err()
			}})
			<-inFlight // the first scheduled beat is on its way
			ok, err := c.ReleaseLock(l)
			if ok || !errors.Is(err, ErrLeaseExpired) {
				t.Fatalf("run %d: ReleaseLock behind a beat that ran out with the lease returned %v, %v; want false and ErrLeaseExpired", run, ok, err)
			}
			mu.Lock()
			defer mu.Unlock()
			if releases != 0 {
				t.Fatalf("run %d: ReleaseLock of a lock already lost sent %d release writes", run, releases)
			}
		})
	}
}

// The ordering that broke replay: Observe's answer came back at the instant
// its context's deadline passed, and the select that delivers it had both
// cases ready; the Go runtime picked one at random, so one run of a seed
// reported a leader the other did not (seed 29 with -sim.faults=mixed). An
// answer at or after the deadline is not delivered. Before the fix some of
// the runs below delivered it.
func TestObserveAtItsDeadlineDeliversNothing(t *testing.T) {
	delivered := 0
	for range 40 {
		synctest.Test(t, func(t *testing.T) {
			inner := dynamolocktest.New()
			db := faults.Wrap(inner.Conn())
			c := tableClient(t, db, "observe_table", WithLeaseDuration(time.Minute), WithHeartbeatPeriod(10*time.Second))
			leader, err := New(inner.Conn(), "observe_table")
			if err != nil {
				t.Fatal(err)
			}
			defer leader.Close()
			if _, err := leader.NewElection("leader").Campaign(context.Background(), []byte("v1")); err != nil {
				t.Fatal(err)
			}
			e := c.NewElection("leader") // another client's view
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			dl, _ := ctx.Deadline()
			// The observer's first read is answered at the deadline.
			db.Add(&faults.Rule{Op: "GetItem", Times: 1, Before: func(context.Context) error {
				time.Sleep(time.Until(dl))
				return nil
			}})
			for range e.Observe(ctx) {
				delivered++
			}
		})
	}
	if delivered > 0 {
		t.Fatalf("Observe delivered %d answers that came back at its context's deadline, want none", delivered)
	}
}

// tableClient returns a client of a new lock table on db, closed at the end
// of the test (inside its bubble, when the test runs in one).
func tableClient(t *testing.T, db DynamoDBClient, table string, opts ...ClientOption) *Client {
	t.Helper()
	c, err := New(db, table, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	if _, err := c.CreateTableWithContext(context.Background(), table); err != nil {
		t.Fatal(err)
	}
	return c
}
