package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

var db *dynamodb.Client

func TestMain(m *testing.M) {
	ep, stop, err := ddblocal.Endpoint(context.Background())
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: the Lambda example's tests need Amazon DynamoDB Local:", err)
		os.Exit(1)
	}
	if db, err = ddblocal.NewClient(context.Background(), ep); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		os.Exit(1)
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
			goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"), goleak.IgnoreTopFunction("internal/poll.runtime_pollWait")); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: goroutines leaked:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// environment is one execution environment: its lock client, built once
// as newHandler builds it, on a table of the test's own.
func environment(t *testing.T, work func(context.Context, Event, *dynamolock.Lock) (string, error)) *Handler {
	t.Helper()
	table := fmt.Sprintf("lambda_%d", rand.Uint32())
	locks, err := dynamolock.New(db, table, dynamolock.DisableHeartbeat())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := locks.CreateTableWithContext(context.Background(), table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = locks.Close()
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	// A margin for a loaded test machine; Lambda's own default is enough
	// for DynamoDB's round trips.
	return &Handler{Locks: locks, Work: work, Poll: 20 * time.Millisecond, ReleaseMargin: time.Second}
}

// invoke runs one invocation with a deadline of timeout, as Lambda does.
func invoke(h *Handler, key string, timeout time.Duration) (Result, error) {
	res, _, err := invokeAt(h, key, timeout)
	return res, err
}

// invokeAt is invoke, which also returns the invocation's deadline.
func invokeAt(h *Handler, key string, timeout time.Duration) (Result, time.Time, error) {
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	res, err := h.Handle(ctx, Event{Key: key})
	return res, deadline, err
}

// An invocation holds the key for its work only, with a lease that ends
// before its deadline, and has released it when it returns; the client
// runs no goroutine between invocations.
func TestHandlerLeaseBoundedByTheDeadline(t *testing.T) {
	var seen *dynamolock.Lock
	var lease time.Duration
	var ends time.Time
	h := environment(t, func(ctx context.Context, ev Event, l *dynamolock.Lock) (string, error) {
		seen, lease = l, l.LeaseDuration()
		dl, _ := ctx.Deadline()
		ends = dl
		return "done " + ev.Key, nil
	})
	res, deadline, err := invokeAt(h, "customer-42", 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Output != "done customer-42" || res.FencingToken == 0 {
		t.Fatalf("result %+v", res)
	}
	if lease > 4*time.Second-h.ReleaseMargin || seen.Expiration().After(deadline.Add(-h.ReleaseMargin+h.ReleaseMargin/10)) || !ends.Before(seen.Expiration()) {
		t.Fatalf("lease %s ending %s before the deadline, the work's %s: not bounded by the deadline less the margin %s", lease,
			deadline.Sub(seen.Expiration()), deadline.Sub(ends), h.ReleaseMargin)
	}
	if !seen.IsReleased() {
		t.Fatal("the lock was not released before the handler returned")
	}
	view, err := h.Locks.Get("customer-42")
	if err != nil || !view.IsReleased() {
		t.Fatalf("the item is not released: %v %v", view, err)
	}
	// Nothing is left to renew while Lambda freezes the environment: the
	// client holds no lock, and sent no heartbeat of its own.
	if st := h.Locks.Stats(); st.HeldLocks != 0 || st.HeartbeatsSent != 0 {
		t.Fatalf("after the invocation: %d locks held, %d heartbeats sent", st.HeldLocks, st.HeartbeatsSent)
	}
}

// Invocations of one key never work at once; one that waited gets a lease
// that still ends before its own deadline; one that cannot get the key
// before its deadline returns ErrBusy, holding nothing.
func TestHandlerInvocationsTakeTurns(t *testing.T) {
	var running, overlaps atomic.Int32
	var mu sync.Mutex
	var ends []time.Duration
	h := environment(t, func(ctx context.Context, ev Event, l *dynamolock.Lock) (string, error) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		select {
		case <-time.After(200 * time.Millisecond):
		case <-ctx.Done():
			return "", ctx.Err()
		}
		mu.Lock()
		ends = append(ends, time.Until(l.Expiration()))
		mu.Unlock()
		return "ok", nil
	})
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() {
			start := time.Now()
			_, errs[i] = invoke(h, "shard-7", 6*time.Second)
			if left := 6*time.Second - time.Since(start); errs[i] == nil && left < 0 {
				errs[i] = fmt.Errorf("returned %s after its deadline", -left)
			}
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("invocation %d: %v", i, err)
		}
	}
	if overlaps.Load() > 0 {
		t.Fatalf("%d invocations worked at once", overlaps.Load())
	}
	// A key held past the deadline: ErrBusy.
	holder, err := h.Locks.AcquireLock("held", dynamolock.WithLockLease(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	_, err = invoke(h, "held", 2*time.Second)
	if !errors.Is(err, ErrBusy) {
		t.Fatalf("invocation on a held key: %v, want ErrBusy", err)
	}
	// Work that overruns its lease is told so, and the lock is released.
	slow := environment(t, func(ctx context.Context, ev Event, l *dynamolock.Lock) (string, error) {
		<-ctx.Done()
		return "", ctx.Err()
	})
	start := time.Now()
	_, err = invoke(slow, "slow", 3*time.Second)
	if !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 3*time.Second {
		t.Fatalf("overrunning work: %v after %s", err, time.Since(start))
	}
	view, err := slow.Locks.Get("slow")
	if err != nil || !view.IsReleased() {
		t.Fatalf("the overrun invocation's lock is not released: %v", err)
	}
	t.Logf("lease left when each waiting invocation's work ended: %v", ends)
}
