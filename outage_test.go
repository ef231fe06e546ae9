package dynamolock_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Issue 40, item 3: what a DynamoDB that cannot be reached does to every
// call that waits. The policy (classify.go, unreachable): once DynamoDB has
// answered the client, a failure to reach it is an outage, waited out for
// as long as the call's wait lasts; before it ever answered, the endpoint
// may be wrong, and the call fails within a few seconds. These tests run
// in virtual time (testing/synctest) on dynamolocktest, whose Partition
// fails every request as an endpoint that refuses connections does.

// outageLease is the lease of the clients of these tests; outage is the
// partition they wait through.
const (
	outageLease = 10 * time.Second
	outage      = time.Minute
)

var outageOpts = []dynamolock.ClientOption{dynamolock.WithLeaseDuration(outageLease), dynamolock.WithHeartbeatPeriod(2 * time.Second)}

// waitingCall is one call that waits for a lock: it returns the locks it
// got, or its error.
type waitingCall struct {
	name string
	call func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error)
}

func waitingCalls() []waitingCall {
	one := func(l *dynamolock.Lock, err error) ([]*dynamolock.Lock, error) {
		if err != nil {
			return nil, err
		}
		return []*dynamolock.Lock{l}, nil
	}
	return []waitingCall{
		{"Election.Campaign", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			return one(c.NewElection("leader").Campaign(ctx, []byte("v")))
		}},
		{"Do", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			var got *dynamolock.Lock
			err := c.Do(ctx, "k", func(_ context.Context, l *dynamolock.Lock) error { got = l; return nil })
			return one(got, err)
		}},
		{"Semaphore.Acquire", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			s, err := c.NewSemaphore("sem", 3)
			if err != nil {
				return nil, err
			}
			return one(s.Acquire(ctx))
		}},
		{"AcquireLocks", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			return c.AcquireLocks(ctx, []string{"a", "b"})
		}},
		{"RWLock.RLock", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			rw, err := c.NewRWLock("rw")
			if err != nil {
				return nil, err
			}
			return one(rw.RLock(ctx))
		}},
		{"RWLock.Lock", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
			rw, err := c.NewRWLock("rw")
			if err != nil {
				return nil, err
			}
			return one(rw.Lock(ctx))
		}},
	}
}

type callResult struct {
	locks []*dynamolock.Lock
	err   error
	at    time.Duration
}

// start runs call in a goroutine of the bubble and returns its result's
// channel.
func start(ctx context.Context, c *dynamolock.Client, call waitingCall) <-chan callResult {
	ch := make(chan callResult, 1)
	begin := time.Now()
	go func() {
		locks, err := call.call(ctx, c)
		ch <- callResult{locks, err, time.Since(begin)}
	}()
	return ch
}

// answeredClient returns a client of a new in-memory DynamoDB, which
// answered it (it created the table), and its connection.
func answeredClient(t *testing.T) (*dynamolock.Client, *dynamolocktest.Conn) {
	t.Helper()
	conn := dynamolocktest.New().Conn()
	c, err := dynamolock.New(conn, "locks", outageOpts...)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	_, err = c.CreateTableIfNotExists(context.Background())
	require.NoError(t, err)
	return c, conn
}

// A client that DynamoDB answered once waits through a partition of a
// minute, whatever the call, and gets its lock once the network heals.
func TestWaitsOutlastAPartition(t *testing.T) {
	for _, wc := range waitingCalls() {
		t.Run(wc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				c, conn := answeredClient(t)
				conn.Partition()
				done := start(ctx, c, wc)
				time.Sleep(outage)
				synctest.Wait()
				select {
				case r := <-done:
					t.Fatalf("gave up during the partition, after %s: %v", r.at, r.err)
				default:
				}
				conn.Heal()
				select {
				case r := <-done:
					require.NoError(t, r.err)
					require.NotEmpty(t, r.locks)
					if wc.name != "Do" { // Do released its lock when fn returned
						for _, l := range r.locks {
							assert.NoError(t, l.Err())
						}
					}
					assert.Less(t, r.at, outage+5*time.Second, "got it within a few seconds of the heal")
				case <-time.After(time.Minute):
					t.Fatal("no lock a minute after the partition healed")
				}
			})
		})
	}
}

// AcquireLockWithContext keeps v2's bound through an outage: it gives up
// after its own lease plus the additional time to wait (21 s by default,
// here 11 s), with the cause: the *ConnectionError, saying it is taken as
// an outage. With FailIfLocked any call returns at the first failure.
func TestAcquireLockKeepsItsBoundThroughAnOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		c, conn := answeredClient(t)
		conn.Partition()

		begin := time.Now()
		_, err := c.AcquireLockWithContext(ctx, "k")
		took := time.Since(begin)
		var ce *dynamolock.ConnectionError
		require.ErrorAs(t, err, &ce, "%v", err)
		var lng *dynamolock.LockNotGrantedError
		require.ErrorAs(t, err, &lng)
		assert.Contains(t, err.Error(), "taken as an outage")
		assert.GreaterOrEqual(t, took, outageLease+dynamolock.DefaultAdditionalTimeToWaitForLock)
		assert.Less(t, took, outageLease+dynamolock.DefaultAdditionalTimeToWaitForLock+3*time.Second)

		begin = time.Now()
		_, err = c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		require.ErrorAs(t, err, &ce)
		assert.Less(t, time.Since(begin), time.Second, "FailIfLocked does not wait")
	})
}

// A client that DynamoDB never answered may have a wrong endpoint: every
// call that waits gives up after about five seconds with a
// *ConnectionError that says what to check, even with a context that never
// ends.
func TestNeverAnsweredFailsFast(t *testing.T) {
	for _, wc := range append(waitingCalls(), waitingCall{"AcquireLockWithContext", func(ctx context.Context, c *dynamolock.Client) ([]*dynamolock.Lock, error) {
		l, err := c.AcquireLockWithContext(ctx, "k")
		if err != nil {
			return nil, err
		}
		return []*dynamolock.Lock{l}, nil
	}}) {
		t.Run(wc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				db := dynamolocktest.New()
				admin, err := dynamolock.New(db.Conn(), "locks", outageOpts...)
				require.NoError(t, err)
				defer admin.Close()
				_, err = admin.CreateTableIfNotExists(context.Background()) // the table exists: only the endpoint is wrong
				require.NoError(t, err)

				conn := db.Conn()
				conn.Partition()
				c, err := dynamolock.New(conn, "locks", outageOpts...)
				require.NoError(t, err)
				defer c.Close()
				r := <-start(context.Background(), c, wc)
				var ce *dynamolock.ConnectionError
				require.ErrorAs(t, r.err, &ce, "%v", r.err)
				assert.GreaterOrEqual(t, r.at, 5*time.Second, "retried for a few seconds: it may be starting")
				assert.Less(t, r.at, 8*time.Second)
				assert.Contains(t, r.err.Error(), "has answered this client yet: check the endpoint")
				assertOneLine(t, r.err)
			})
		})
	}
}

// The leader loop of a daemon, as a user writes it: campaign, lead until
// the leadership ends, campaign again; an error is logged and the loop
// goes on. Through a partition of a minute, Campaign never returns an
// error: the leader loses its lease (its Done closes) and campaigns again,
// the candidate keeps waiting; after the heal, each leads when it may.
func TestLeaderLoopOutlastsAPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		db := dynamolocktest.New()
		connA, connB := db.Conn(), db.Conn()
		a, err := dynamolock.New(connA, "locks", append(outageOpts, dynamolock.WithOwnerName("a"))...)
		require.NoError(t, err)
		defer a.Close()
		b, err := dynamolock.New(connB, "locks", append(outageOpts, dynamolock.WithOwnerName("b"))...)
		require.NoError(t, err)
		defer b.Close()
		_, err = a.CreateTableIfNotExists(ctx)
		require.NoError(t, err)
		_, err = b.GetWithContext(ctx, "leader") // b has been answered too
		require.NoError(t, err)

		type loop struct {
			errs  []error
			terms int
			lead  chan *dynamolock.Lock
		}
		run := func(c *dynamolock.Client, l *loop, done chan<- struct{}) {
			defer close(done)
			e := c.NewElection("leader")
			for ctx.Err() == nil {
				lock, err := e.Campaign(ctx, []byte(c.OwnerName()))
				if err != nil {
					if ctx.Err() == nil {
						l.errs = append(l.errs, err)
						time.Sleep(time.Second)
					}
					continue
				}
				l.terms++
				l.lead <- lock
				select {
				case <-lock.Done():
				case <-ctx.Done():
					_ = e.Resign(context.Background())
				}
			}
		}
		la, lb := &loop{lead: make(chan *dynamolock.Lock, 8)}, &loop{lead: make(chan *dynamolock.Lock, 8)}
		doneA, doneB := make(chan struct{}), make(chan struct{})
		go run(a, la, doneA)
		first := <-la.lead // a leads first: b starts after it
		go run(b, lb, doneB)

		// The leader is cut off for a minute: its lease runs out, b
		// takes over; a campaigns through the rest of the partition.
		connA.Partition()
		<-first.Done()
		assert.ErrorIs(t, first.Err(), dynamolock.ErrLockLost)
		second := <-lb.lead
		time.Sleep(outage - 2*outageLease)
		connA.Heal()

		// Then the candidate b is cut off for a minute: a leads after
		// b's lease, and b campaigns through its partition.
		connB.Partition()
		third := <-la.lead
		assert.Greater(t, third.FencingToken(), second.FencingToken())
		<-second.Done()
		time.Sleep(outage)
		connB.Heal()
		time.Sleep(outageLease)

		assert.Empty(t, la.errs, "a's Campaign returned errors through its partition")
		assert.Empty(t, lb.errs, "b's Campaign returned errors through its partition")
		assert.Equal(t, 2, la.terms)
		assert.Equal(t, 1, lb.terms)
		cancel()
		<-doneA
		<-doneB
	})
}

// assertOneLine checks that err's message is one line, and that
// errors.Is still sees what it joins.
func assertOneLine(t *testing.T, err error) {
	t.Helper()
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "\n", "one line")
}
