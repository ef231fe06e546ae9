package dynamolock_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Issue 49: what is not DynamoDB never grants a lock, and a silent network
// never hangs a call.

// jsonServer answers every request with status and body, as JSON.
func jsonServer(t *testing.T, status int, body string) *httptest.Server {
	t.Helper()
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(body))
	}))
	t.Cleanup(server.Close)
	return server
}

// Item 1: a server that answers every request with HTTP 200 and {} (what
// DynamoDB returns for a write that asked for nothing back) grants nothing:
// two clients do not both hold "k", nor both run Do, nor both win a
// Campaign. The table check, which DynamoDB always answers with a table
// description or a ResourceNotFoundException, says it is not DynamoDB.
func TestEmptyAnswersGrantNoLock(t *testing.T) {
	server := jsonServer(t, http.StatusOK, "{}")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, withSession := range []bool{false, true} {
		var opts []dynamolock.ClientOption
		if withSession {
			opts = append(opts, dynamolock.WithSession())
		}
		a := newClient(t, userSDKClient(server.URL, &attemptCounter{}), "locks", opts...)
		b := newClient(t, userSDKClient(server.URL, &attemptCounter{}), "locks", opts...)
		for name, call := range map[string]func(c *dynamolock.Client) error{
			"AcquireLockWithContext": func(c *dynamolock.Client) error {
				l, err := c.AcquireLockWithContext(ctx, "k")
				assert.Nil(t, l)
				return err
			},
			"Do": func(c *dynamolock.Client) error {
				ran := false
				err := c.Do(ctx, "k", func(context.Context, *dynamolock.Lock) error { ran = true; return nil })
				assert.False(t, ran, "Do's function ran without a lock")
				return err
			},
			"Campaign": func(c *dynamolock.Client) error {
				_, err := c.NewElection("leader").Campaign(ctx, []byte("me"))
				return err
			},
			"CreateTableIfNotExists": func(c *dynamolock.Client) error {
				_, err := c.CreateTableIfNotExists(ctx)
				return err
			},
		} {
			for _, c := range []*dynamolock.Client{a, b} {
				begin := time.Now()
				err := call(c)
				t.Logf("session %v, %s after %s: %v", withSession, name, time.Since(begin).Round(time.Millisecond), err)
				var ce *dynamolock.ConnectionError
				require.ErrorAs(t, err, &ce, name)
				assertOneLine(t, err)
				assert.Contains(t, err.Error(), "did not answer as DynamoDB does", name)
				assert.Contains(t, err.Error(), server.URL, name)
				assert.Less(t, time.Since(begin), 3*time.Second, "%s: a configuration mistake is not retried", name)
			}
		}
	}
}

// Item 2: JSON errors from something that is not DynamoDB (a 404 or a 400
// whose body names no DynamoDB error type) are *ConnectionErrors with
// advice, at once, not the SDK's raw UnknownError.
func TestJSONErrorsOfAnotherServerAreConnectionErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{http.StatusNotFound, `{"message":"Not Found"}`},
		{http.StatusNotFound, `{"code":"NotFound","message":"no route"}`},
		{http.StatusBadRequest, `{"error":"bad request"}`},
		{http.StatusMethodNotAllowed, `{}`},
	} {
		server := jsonServer(t, tc.status, tc.body)
		c := newClient(t, userSDKClient(server.URL, &attemptCounter{}), "locks")
		ctx := context.Background()
		for name, call := range firstCalls(ctx, c) {
			begin := time.Now()
			err := call()
			t.Logf("%d %s: %s after %s: %v", tc.status, tc.body, name, time.Since(begin).Round(time.Millisecond), err)
			var ce *dynamolock.ConnectionError
			require.ErrorAs(t, err, &ce, name)
			assertOneLine(t, err)
			assert.Contains(t, err.Error(), "did not answer as DynamoDB does", name)
			assert.Contains(t, err.Error(), "point BaseEndpoint at DynamoDB", name)
			assert.Less(t, time.Since(begin), 3*time.Second, "%s: a configuration mistake is not retried", name)
		}
	}
}

// silentListener accepts connections and never answers on them.
func silentListener(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return "http://" + ln.Addr().String()
}

// Item 3: a listener that accepts and never answers fails the first call
// within about 5 s with a *ConnectionError, even with a context that never
// ends.
func TestSilentEndpointFailsTheFirstCall(t *testing.T) {
	url := silentListener(t)
	ctx := context.Background()
	nothing := func(context.Context, *dynamolock.Lock) error { return nil }
	var wg sync.WaitGroup
	// Each call on a client of its own: none learns of another's failure.
	for name, call := range map[string]func(c *dynamolock.Client) error{
		"CreateTableIfNotExists": func(c *dynamolock.Client) error { _, err := c.CreateTableIfNotExists(ctx); return err },
		"AcquireLockWithContext": func(c *dynamolock.Client) error { _, err := c.AcquireLockWithContext(ctx, "k"); return err },
		"Do":                     func(c *dynamolock.Client) error { return c.Do(ctx, "k", nothing) },
		"GetWithContext":         func(c *dynamolock.Client) error { _, err := c.GetWithContext(ctx, "k"); return err },
		"AcquireLocks":           func(c *dynamolock.Client) error { _, err := c.AcquireLocks(ctx, []string{"a", "b"}); return err },
		"Campaign":               func(c *dynamolock.Client) error { _, err := c.NewElection("e").Campaign(ctx, []byte("me")); return err },
		"RWLock.Lock": func(c *dynamolock.Client) error {
			rw, err := c.NewRWLock("rw")
			require.NoError(t, err)
			_, err = rw.Lock(ctx)
			return err
		},
		"RWLock.RLock": func(c *dynamolock.Client) error {
			rw, err := c.NewRWLock("rw")
			require.NoError(t, err)
			_, err = rw.RLock(ctx)
			return err
		},
		"Semaphore.Acquire": func(c *dynamolock.Client) error {
			s, err := c.NewSemaphore("s", 2)
			require.NoError(t, err)
			_, err = s.Acquire(ctx)
			return err
		},
	} {
		c := newClient(t, userSDKClient(url, &attemptCounter{}), "locks")
		wg.Go(func() {
			begin := time.Now()
			err := call(c)
			took := time.Since(begin)
			t.Logf("%s after %s: %v", name, took.Round(time.Millisecond), err)
			var ce *dynamolock.ConnectionError
			if assert.ErrorAs(t, err, &ce, name) {
				assert.Contains(t, ce.Reason, "no answer within", name)
				assert.Contains(t, err.Error(), url, name)
			}
			assert.Less(t, took, 7*time.Second, "%s: fails within about 5 s", name)
		})
	}
	wg.Wait()
}

// Item 4: a DynamoDB that stalls mid-run (connections kept open, nothing
// answered). The held lock ends when its lease runs out; an acquisition
// of a free key ends within its documented wait (its lease + 1 s), with
// an error wrapping a *ConnectionError; Do with a context that never ends
// keeps trying (an outage, waited out) without hanging in a call, and
// takes the key once the network heals; Close returns.
func TestStallMidRunEndsEveryWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		conn := db.Conn()
		c, err := dynamolock.New(conn, "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)
		ctx := context.Background()
		_, err = c.CreateTableIfNotExists(ctx)
		require.NoError(t, err)
		held, err := c.AcquireLockWithContext(ctx, "held")
		require.NoError(t, err)

		conn.Stall()
		begin := time.Now()
		<-held.Done()
		t.Logf("held lock lost %s after the stall began: %v", time.Since(begin), held.Err())
		assert.LessOrEqual(t, time.Since(begin), 3*time.Second, "the lease, not a call, decides")
		assert.ErrorIs(t, held.Err(), dynamolock.ErrLockLost)

		begin = time.Now()
		_, err = c.AcquireLockWithContext(ctx, "free")
		took := time.Since(begin)
		t.Logf("acquisition of a free key after %s: %v", took, err)
		var ce *dynamolock.ConnectionError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, ce.Reason, "no answer within")
		assert.LessOrEqual(t, took, 4*time.Second+200*time.Millisecond, "ends within its lease + 1 s")

		ran := make(chan error, 1)
		go func() { ran <- c.Do(ctx, "free", func(context.Context, *dynamolock.Lock) error { return nil }) }()
		time.Sleep(30 * time.Second) // virtual: the outage goes on
		select {
		case err := <-ran:
			t.Fatalf("Do ended during the outage: %v", err)
		default:
		}
		conn.Heal()
		select {
		case err := <-ran:
			assert.NoError(t, err, "Do takes the key once the network heals")
		case <-time.After(10 * time.Second):
			t.Fatal("Do did not take the key within 10 s of the heal")
		}

		conn.Stall()
		begin = time.Now()
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		err = c.CloseWithContext(cctx)
		t.Logf("Close during a stall after %s: %v", time.Since(begin), err)
		assert.LessOrEqual(t, time.Since(begin), 2*time.Second)
		conn.Heal()
		synctest.Wait()
		if err != nil {
			assert.False(t, errors.Is(err, dynamolock.ErrClientClosed), "%v", err)
		}
	})
}

// A slow DynamoDB is not a silent one: a takeover's write, which comes in
// the last second of its wait (the holder must be seen unrenewed for a
// lease first, and a read answered at the wait's end may show it so), still
// lands when each request takes 400 ms to arrive, rather than be cut by
// the wait's end into a write of unknown outcome. (With the wait's end and
// 100 ms as the bound, the takeover failed here at every delay from
// 300 ms to 900 ms.)
func TestSlowTakeoverInTheWaitsLastSecondLands(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		ctx := context.Background()
		dead, err := dynamolock.New(db.Conn(), "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.DisableHeartbeat())
		require.NoError(t, err)
		_, err = dead.CreateTableIfNotExists(ctx)
		require.NoError(t, err)
		_, err = dead.AcquireLockWithContext(ctx, "k") // never renewed: its holder is dead
		require.NoError(t, err)

		slow := db.Conn()
		c, err := dynamolock.New(slow, "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)
		_, err = c.CreateTableIfNotExists(ctx) // the table check is done
		require.NoError(t, err)
		slow.Delay(400 * time.Millisecond)
		begin := time.Now()
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(time.Second))
		t.Logf("took over after %s: %v", time.Since(begin), err)
		require.NoError(t, err)
		assert.Greater(t, time.Since(begin), 3*time.Second, "only once the holder was seen unrenewed for its lease")
		slow.Delay(0)
		_, err = c.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		_ = dead.Close()
	})
}

// The table check's failure is shared with the writes that waited for it
// only when the endpoint failed it: a check that the first write's own
// context ended is run again by the next write, which then meets the
// silent endpoint itself (a "no answer" ConnectionError), not the first
// caller's deadline. (A try-lock, which does not retry, returned the
// first caller's 100 ms deadline before.)
func TestTableCheckEndedByItsCallersContextIsNotShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		conn := db.Conn()
		c, err := dynamolock.New(conn, "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)
		setup, err := dynamolock.New(db.Conn(), "locks")
		require.NoError(t, err)
		_, err = setup.CreateTableIfNotExists(context.Background())
		require.NoError(t, err)
		conn.Stall()

		short, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		first := make(chan error, 1)
		go func() { _, err := c.AcquireLockWithContext(short, "a"); first <- err }()
		synctest.Wait() // the first write holds the table check
		begin := time.Now()
		_, err = c.AcquireLockWithContext(context.Background(), "b", dynamolock.FailIfLocked())
		took := time.Since(begin)
		require.ErrorIs(t, <-first, context.DeadlineExceeded)
		var ce *dynamolock.ConnectionError
		require.ErrorAs(t, err, &ce, "the second write's own failure: %v", err)
		assert.Contains(t, ce.Reason, "no answer within")
		assert.GreaterOrEqual(t, took, time.Second, "its own check's bound, not the first caller's 100 ms")
		conn.Heal()
		require.NoError(t, c.Close())
		require.NoError(t, setup.Close())
	})
}

// landThenHang applies the first acquiring UpdateItem and then gives no
// answer until the caller's context ends: a write that landed and whose
// answer the call's bound cut off.
type landThenHang struct {
	*dynamolocktest.Conn
	hung atomic.Bool
}

func (l *landThenHang) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	out, err := l.Conn.UpdateItem(ctx, in, o...)
	if err == nil && l.hung.CompareAndSwap(false, true) {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return out, err
}

// A write the wait's end cut off after it landed is taken back before the
// acquisition returns: another client takes the key at once, not a lease
// later.
func TestWriteCutByTheWaitsEndIsUndone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		ctx := context.Background()
		other, err := dynamolock.New(db.Conn(), "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)
		_, err = other.CreateTableIfNotExists(ctx)
		require.NoError(t, err)
		hang := &landThenHang{Conn: db.Conn()}
		c, err := dynamolock.New(hang, "locks", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)

		begin := time.Now()
		_, err = c.AcquireLockWithContext(ctx, "k")
		took := time.Since(begin)
		var ce *dynamolock.ConnectionError
		require.ErrorAs(t, err, &ce)
		assert.Contains(t, ce.Reason, "no answer within")
		assert.LessOrEqual(t, took, 4*time.Second+200*time.Millisecond, "ends within its lease + 1 s")

		l, err := other.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		require.NoError(t, err, "the write that landed was undone")
		_, err = other.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
		require.NoError(t, c.Close())
		require.NoError(t, other.Close())
	})
}
