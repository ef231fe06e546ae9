package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// skewBound is the WithClockSkewBound the benchmark uses.
const skewBound = 100 * time.Millisecond

// Failover settings: the lease and heartbeat of the capacity runs, the
// default refresh period.
const (
	failoverLease     = 3 * time.Second
	failoverHeartbeat = time.Second
	failoverRefresh   = dynamolock.DefaultRefreshPeriod
	fastRefresh       = 100 * time.Millisecond
)

// KillTrial is one failover: a live, renewing holder is killed while a
// contender waits for its lock.
type KillTrial struct {
	FromLastWrite time.Duration // holder's last accepted write → contender holds
	FromKill      time.Duration // kill → contender holds
	// Margin is how long before the contender held the lock the holder
	// itself declared it lost (negative: the holder still believed it held
	// the lock when the contender got it, which would be a safety bug).
	Margin time.Duration
}

// FailoverResult is section 4.
type FailoverResult struct {
	Lease, Heartbeat, Refresh, Skew time.Duration
	Waiting, WaitingSkew            []KillTrial
	// Late: the holder died more than a lease (plus the skew bound) before
	// the contender arrived; time from the contender's first call.
	Late, LateSkew []time.Duration
	// Handoff: the holder releases while a contender waits; time from the
	// release call to the contender holding the lock, at the default refresh
	// period and at fastRefresh.
	Handoff, HandoffFast []time.Duration
}

// MeasureFailover runs trials of every failover scenario; the trials of one
// scenario run side by side on different keys.
func MeasureFailover(ctx context.Context, e *Env, trials int) (*FailoverResult, error) {
	table, drop, err := e.NewTable(ctx, "failover")
	if err != nil {
		return nil, err
	}
	defer drop()
	res := &FailoverResult{Lease: failoverLease, Heartbeat: failoverHeartbeat, Refresh: failoverRefresh, Skew: skewBound}
	f := &failover{e: e, table: table}
	for _, skew := range []bool{false, true} {
		ts, err := parallel(trials, func(i int) (KillTrial, error) { return f.kill(ctx, fmt.Sprintf("kill-%t-%d", skew, i), skew) })
		if err != nil {
			return nil, err
		}
		ls, err := parallel(max(trials/2, 3), func(i int) (time.Duration, error) {
			return f.late(ctx, fmt.Sprintf("late-%t-%d", skew, i), skew)
		})
		if err != nil {
			return nil, err
		}
		if skew {
			res.WaitingSkew, res.LateSkew = ts, ls
		} else {
			res.Waiting, res.Late = ts, ls
		}
	}
	for _, refresh := range []time.Duration{failoverRefresh, fastRefresh} {
		hs, err := parallel(2*trials, func(i int) (time.Duration, error) {
			return f.handoff(ctx, fmt.Sprintf("handoff-%s-%d", refresh, i), refresh)
		})
		if err != nil {
			return nil, err
		}
		if refresh == failoverRefresh {
			res.Handoff = hs
		} else {
			res.HandoffFast = hs
		}
	}
	return res, nil
}

func parallel[T any](n int, fn func(i int) (T, error)) ([]T, error) {
	out := make([]T, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i], errs[i] = fn(i) })
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

type failover struct {
	e     *Env
	table string
}

func (f *failover) client(ctx context.Context, skew bool, extra ...dynamolock.ClientOption) (*dynamolock.Client, *killableDB, error) {
	db, err := f.e.NewDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	k := &killableDB{Client: db}
	opts := []dynamolock.ClientOption{
		dynamolock.WithLeaseDuration(failoverLease), dynamolock.WithHeartbeatPeriod(failoverHeartbeat),
	}
	if skew {
		opts = append(opts, dynamolock.WithClockSkewBound(skewBound))
	}
	c, err := dynamolock.New(k, f.table, append(opts, extra...)...)
	return c, k, err
}

type acquired struct {
	at  time.Time
	err error
}

// waitFor starts an acquisition of key that waits long enough to outlast
// any holder, and reports when it succeeded.
func waitFor(ctx context.Context, c *dynamolock.Client, key string, opts ...dynamolock.AcquireLockOption) <-chan acquired {
	ch := make(chan acquired, 1)
	opts = append(opts, dynamolock.WithAdditionalTimeToWaitForLock(30*time.Second))
	go func() {
		_, err := c.AcquireLockWithContext(ctx, key, opts...)
		ch <- acquired{time.Now(), err}
	}()
	return ch
}

// kill: the holder renews its lock while a contender waits; the holder is
// killed at a random moment between 1 and 2 heartbeat periods later.
func (f *failover) kill(ctx context.Context, key string, skew bool) (KillTrial, error) {
	holder, hdb, err := f.client(ctx, skew)
	if err != nil {
		return KillTrial{}, err
	}
	defer holder.Close()
	contender, _, err := f.client(ctx, skew)
	if err != nil {
		return KillTrial{}, err
	}
	defer contender.Close()
	l, err := holder.AcquireLockWithContext(ctx, key)
	if err != nil {
		return KillTrial{}, err
	}
	holderLost := make(chan time.Time, 1)
	go func() {
		<-l.Done()
		holderLost <- time.Now()
	}()
	// The contender starts at a random phase of the holder's heartbeats,
	// and the holder dies at a random moment at least a period later.
	time.Sleep(rand.N(failoverHeartbeat))
	got := waitFor(ctx, contender, key)
	time.Sleep(failoverHeartbeat + rand.N(failoverHeartbeat))
	killed := hdb.kill()
	a := <-got
	if a.err != nil {
		return KillTrial{}, fmt.Errorf("failover %s: %w", key, a.err)
	}
	lastWrite := hdb.lastWriteTime()
	t := KillTrial{FromLastWrite: a.at.Sub(lastWrite), FromKill: a.at.Sub(killed)}
	select {
	case lost := <-holderLost:
		t.Margin = a.at.Sub(lost)
	case <-time.After(failoverLease):
		t.Margin = -failoverLease // never noticed: reported as a bug
	}
	return t, nil
}

// late: the holder acquires and dies at once; the contender arrives more
// than a lease (plus the skew bound) later.
func (f *failover) late(ctx context.Context, key string, skew bool) (time.Duration, error) {
	holder, hdb, err := f.client(ctx, skew, dynamolock.DisableHeartbeat())
	if err != nil {
		return 0, err
	}
	defer holder.Close()
	contender, _, err := f.client(ctx, skew)
	if err != nil {
		return 0, err
	}
	defer contender.Close()
	if _, err := holder.AcquireLockWithContext(ctx, key); err != nil {
		return 0, err
	}
	hdb.kill()
	time.Sleep(failoverLease + skewBound + 300*time.Millisecond)
	start := time.Now()
	a := <-waitFor(ctx, contender, key)
	if a.err != nil {
		return 0, fmt.Errorf("late takeover %s: %w", key, a.err)
	}
	return a.at.Sub(start), nil
}

// handoff: the holder releases at a random moment while a contender polls
// every refresh.
func (f *failover) handoff(ctx context.Context, key string, refresh time.Duration) (time.Duration, error) {
	holder, _, err := f.client(ctx, false)
	if err != nil {
		return 0, err
	}
	defer holder.Close()
	contender, _, err := f.client(ctx, false)
	if err != nil {
		return 0, err
	}
	defer contender.Close()
	l, err := holder.AcquireLockWithContext(ctx, key)
	if err != nil {
		return 0, err
	}
	got := waitFor(ctx, contender, key, dynamolock.WithRefreshPeriod(refresh))
	time.Sleep(refresh + rand.N(refresh) + 50*time.Millisecond)
	released := time.Now()
	if _, err := holder.ReleaseLockWithContext(ctx, l); err != nil {
		return 0, err
	}
	a := <-got
	if a.err != nil {
		return 0, fmt.Errorf("handoff %s: %w", key, a.err)
	}
	return a.at.Sub(released), nil
}

func minMargin(ts []KillTrial) time.Duration {
	if len(ts) == 0 {
		return 0
	}
	m := ts[0].Margin
	for _, t := range ts[1:] {
		m = min(m, t.Margin)
	}
	return m
}

func leaseRatio(d, lease time.Duration) string {
	return strconv.FormatFloat(float64(d)/float64(lease), 'f', 2, 64)
}
