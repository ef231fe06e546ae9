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
// below came out of key order in almost every run.
func TestCloseReleasesInKeyOrder(t *testing.T) {
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
	var keys []string
	for i := range 8 {
		keys = append(keys, fmt.Sprintf("key-%d", (i*5)%8))
	}
	for _, k := range keys {
		if _, err := c.AcquireLock(k); err != nil {
			t.Fatal(err)
		}
	}
	db.Add(record)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	if !slices.Equal(released, keys) {
		t.Fatalf("Close released %v, want key order %v", released, keys)
	}
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
