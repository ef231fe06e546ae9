package dynamolock_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Issue 21, finding 3: a short slowdown saturates the only heartbeat
// worker for a moment and sets the measured rate to about 2 beats/s; the
// beats are fast again afterwards, so admission control must open again
// within a few seconds. Before the fix the saturated rate was never
// measured again (windows with a free worker measure nothing) and every
// new acquisition failed with ErrHeartbeatCapacity after its lease.
func TestAdmissionReopensAfterShortSlowdown(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table,
		dynamolock.WithLeaseDuration(10*time.Second), dynamolock.WithHeartbeatPeriod(time.Second),
		dynamolock.WithHeartbeatConcurrency(1))
	locks := make([]*dynamolock.Lock, 20)
	for i := range locks {
		l, err := c.AcquireLock(fmt.Sprintf("held-%d", i))
		require.NoError(t, err)
		locks[i] = l
	}
	// Five heartbeats take 500 ms each: the worker is busy for 2.5 s while
	// the others queue.
	slow := &faults.Rule{Op: "UpdateItem", Match: isHeartbeat, Times: 5, Before: faults.Sleep(500 * time.Millisecond)}
	fdb.Add(slow)
	waitFor(t, 20*time.Second, "five slow heartbeats", func() bool { return fdb.Hits(slow) == 5 })
	// The slowdown is over; the fast beats that follow must reopen
	// admission. Its bound: the acquisition's lease (10 s).
	start := time.Now()
	l, err := c.AcquireLockWithContext(context.Background(), "free")
	require.NoError(t, err, "after %s", time.Since(start))
	_, err = c.ReleaseLock(l)
	require.NoError(t, err)
	for _, l := range locks {
		select {
		case <-l.Done():
			t.Fatalf("lock %q lost: %v", l.PartitionKey(), l.Err())
		default:
		}
	}
	t.Logf("admitted after %s; admission waits: %d", time.Since(start).Round(time.Millisecond), c.Stats().AdmissionWaits)
}

// Issue 24, "refuse, never lose", in small: a backend that serves one
// write at a time, 10 ms each (100 writes/s, for heartbeats and
// acquisitions alike, as DynamoDB's queue is shared), and 64 goroutines
// asking for 600 free keys at once, while the held locks (lease 4 s) need
// one renewal per lease each: at most 400 can be renewed. The orderings
// that lost locks before: acquisitions' writes queued ahead of the
// heartbeats (64 of them in flight beside 32 heartbeat workers), admitted
// in a burst that one look at the load let through, and each new lock's
// lease eaten by its own acquisition's wait in that queue. Now every lock
// granted is renewed: what cannot be is refused or waits.
func TestAdmissionRefusesRatherThanLoses(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	// The backend serves one write per 10 ms slot of a fixed schedule: a
	// request takes the next free slot and waits for it. Slots follow the
	// schedule, not the end of the previous wait, so a loaded machine that
	// wakes this process late adds latency but takes nothing from the rate.
	// (Serving one 10 ms sleep after another made the rate itself depend on
	// the machine's load: the backend slowed below what admission had
	// measured, which is outside the promise, and the test lost locks.)
	var (
		paceMu sync.Mutex
		next   time.Time
		served atomic.Int64
	)
	// stalled is the longest time DynamoDB Local itself went without
	// answering while a write that had its slot waited on it: a backend
	// that stops answering is one whose rate fell after a grant, which no
	// admission rule can foresee (issue 24), and not what this test checks.
	var (
		stallMu      sync.Mutex
		atBackend    int
		lastProgress time.Time
		stalled      time.Duration
	)
	serve := func(ctx context.Context) error {
		paceMu.Lock()
		at := time.Now()
		if at.Before(next) {
			at = next
		}
		next = at.Add(10 * time.Millisecond)
		paceMu.Unlock()
		if err := faults.Sleep(time.Until(at))(ctx); err != nil {
			return err
		}
		served.Add(1)
		stallMu.Lock()
		if atBackend == 0 {
			lastProgress = time.Now()
		}
		atBackend++
		stallMu.Unlock()
		return nil
	}
	answered := func(context.Context) {
		stallMu.Lock()
		now := time.Now()
		stalled = max(stalled, now.Sub(lastProgress))
		lastProgress = now
		atBackend--
		stallMu.Unlock()
	}
	backendStall := func() time.Duration {
		stallMu.Lock()
		defer stallMu.Unlock()
		return stalled
	}
	// A fresh DynamoDB Local stalls for up to a second while its JVM warms
	// up (963 ms, measured beside other packages' tests and a build): warm it
	// first, so that the check below meets the backend this test means.
	var warm sync.WaitGroup
	for g := range 8 {
		warm.Go(func() {
			for i := range 50 {
				_, _ = db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{TableName: aws.String(table),
					Key: keyOf(fmt.Sprintf("warm-%d-%d", g, i)), UpdateExpression: aws.String("SET w = :w"),
					ExpressionAttributeValues: map[string]types.AttributeValue{":w": &types.AttributeValueMemberN{Value: "1"}}})
			}
		})
	}
	warm.Wait()
	fdb := faults.Wrap(db, &faults.Rule{Op: "UpdateItem", Before: serve, After: answered})
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(4*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	// The promise holds while this process runs: a process starved of CPU
	// is a paused one, and no lease survives a pause. starved measures the
	// longest delay of a 10 ms ticker through the test.
	starved, stopWatch := watchStarvation()
	defer stopWatch()
	var mu sync.Mutex
	var held []*dynamolock.Lock
	refused := 0
	var wg sync.WaitGroup
	keys := make(chan int, 600)
	for i := range 600 {
		keys <- i
	}
	close(keys)
	for range 64 {
		wg.Go(func() {
			for i := range keys {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				l, err := c.AcquireLockWithContext(ctx, fmt.Sprintf("k%d", i), dynamolock.FailIfLocked())
				cancel()
				mu.Lock()
				if err == nil {
					held = append(held, l)
				} else {
					refused++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	holdStart, servedBefore := time.Now(), served.Load()
	time.Sleep(5 * time.Second) // more than a lease: every held lock must be renewed through it
	rate := float64(served.Load()-servedBefore) / time.Since(holdStart).Seconds()
	lost := 0
	causes := map[string]int{}
	for _, l := range held {
		if err := l.Err(); err != nil {
			lost++
			causes[err.Error()]++
		}
	}
	stopWatch()
	t.Logf("held %d, refused %d, lost %d, backend served %.0f writes/s while they were held, longest scheduling delay %s, "+
		"longest time DynamoDB Local answered nothing %s, stats %+v",
		len(held), refused, lost, rate, starved(), backendStall(), c.Stats())
	if lost > 0 {
		t.Logf("causes of the losses: %v", causes)
	}
	if lost > 0 && starved() >= 500*time.Millisecond {
		t.Skipf("inconclusive, not passed: this process was starved of CPU for %s (an eighth of the lease or more) and %d locks were lost; rerun on a less loaded machine", starved(), lost)
	}
	if lost > 0 && backendStall() >= 500*time.Millisecond {
		t.Skipf("inconclusive, not passed: DynamoDB Local answered nothing for %s (an eighth of the lease or more) while writes waited on it, and %d locks were lost; rerun on a less loaded machine", backendStall(), lost)
	}
	require.Zero(t, lost, "locks lost while the backend answered")
	require.Zero(t, c.Stats().LocksLost)
	require.NotZero(t, refused, "600 locks cannot all be renewed at 100 writes/s")
}

// watchStarvation measures how late a 10 ms ticker runs in this process
// until stop is called: the longest delay is how long the process went
// without the CPU (a loaded machine, a paused process).
func watchStarvation() (longest func() time.Duration, stop func()) {
	var mu sync.Mutex
	var worst time.Duration
	done := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		last := time.Now()
		t := time.NewTicker(10 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				now := time.Now()
				if d := now.Sub(last) - 10*time.Millisecond; d > 0 {
					mu.Lock()
					worst = max(worst, d)
					mu.Unlock()
				}
				last = now
			}
		}
	})
	return func() time.Duration {
			mu.Lock()
			defer mu.Unlock()
			return worst
		}, func() {
			once.Do(func() { close(done) })
			wg.Wait()
		}
}

// An acquisition that finds every admission slot taken by other
// acquisitions in flight for the whole of its wait, while the client's
// heartbeat workers could renew far more than it asks, is not refused
// (the simulation's invariant 14, seeds 3782 and 8725 of 10,000: "no
// heartbeat capacity for another lock: the heartbeat that waited longest
// had +Inf% of its lease left"). Before, the slots' burst limit alone
// turned it away with ErrHeartbeatCapacity at the end of its wait.
func TestAdmissionSlotsAloneNeverRefuse(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	gate := faults.NewGate()
	t.Cleanup(gate.Open)
	// Heartbeats take 100 ms: an admitted acquisition keeps its slot for
	// 400 ms (four round trips) unless it ends first.
	slow := &faults.Rule{Op: "UpdateItem", Match: isHeartbeat, Before: faults.Sleep(100 * time.Millisecond)}
	held := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("ownerName"), Times: 1, Before: gate.Wait}
	fdb := faults.Wrap(db, slow)
	// Four heartbeat workers: one slot (a quarter of them), and the
	// renewals a 300 ms lease needs at a 100 ms round trip by the
	// scheduler's rule (one per 100 ms: the lease less two round trips),
	// which one worker could not give it.
	c := newClient(t, fdb, table, dynamolock.WithLeaseDuration(2*time.Second), dynamolock.WithHeartbeatPeriod(100*time.Millisecond),
		dynamolock.WithHeartbeatConcurrency(4))
	ctx := context.Background()
	warm, err := c.AcquireLockWithContext(ctx, "warm")
	require.NoError(t, err)
	waitFor(t, 10*time.Second, "heartbeats", func() bool { return c.Stats().HeartbeatsSent >= 5 })
	require.NoError(t, warm.Err())

	fdb.Add(held)
	inFlight := make(chan error, 1)
	go func() {
		_, err := c.AcquireLockWithContext(ctx, "in-flight")
		inFlight <- err
	}()
	select {
	case <-gate.Arrived(): // its write holds the one slot
	case <-time.After(5 * time.Second):
		t.Fatal("the first acquisition's write was not sent")
	}
	// Its wait (its 300 ms lease, no additional time) ends before the
	// slot is free again.
	start := time.Now()
	l, err := c.AcquireLockWithContext(ctx, "next", dynamolock.WithLockLease(300*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(0))
	require.NoError(t, err, "refused after %s although the heartbeat workers had capacity to spare", time.Since(start).Round(time.Millisecond))
	require.NoError(t, l.Err())
	gate.Open()
	require.NoError(t, <-inFlight)
}
