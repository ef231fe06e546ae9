package dynamolock_test

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// termLog records the terms of Runs: each term's start and end (when its
// OnStartedLeading returned), owner and fencing token, and the callbacks'
// order per candidate.
type termLog struct {
	mu     sync.Mutex
	terms  []termRec
	events map[string][]string // per candidate: "start"/"stop", in order
	errs   []string            // violations found by the callbacks themselves
}

type termRec struct {
	who        string
	token      uint64
	start, end time.Time
	stopErr    error
	stopped    bool
}

func newTermLog() *termLog { return &termLog{events: map[string][]string{}} }

// callbacks for candidate who: the work holds the term until its context
// ends, then lingers for linger() (a leader slow to stop); started is told
// of each term's start.
func (g *termLog) callbacks(who string, linger func() time.Duration, started chan<- termRec) dynamolock.LeaderCallbacks {
	var current atomic.Int64 // index+1 of the term in progress
	return dynamolock.LeaderCallbacks{
		OnStartedLeading: func(ctx context.Context, term *dynamolock.Lock) {
			g.mu.Lock()
			rec := termRec{who: who, token: term.FencingToken(), start: time.Now()}
			g.terms = append(g.terms, rec)
			i := len(g.terms)
			current.Store(int64(i))
			if ev := g.events[who]; len(ev) > 0 && ev[len(ev)-1] != "stop" {
				g.errs = append(g.errs, who+": OnStartedLeading before the previous term's OnStoppedLeading")
			}
			g.events[who] = append(g.events[who], "start")
			g.mu.Unlock()
			if started != nil {
				started <- rec
			}
			<-ctx.Done()
			if linger != nil {
				time.Sleep(linger()) // a leader slow to stop: its term lasts until it returns
			}
			g.mu.Lock()
			g.terms[i-1].end = time.Now()
			g.mu.Unlock()
		},
		OnStoppedLeading: func(err error) {
			g.mu.Lock()
			defer g.mu.Unlock()
			i := current.Load()
			if i == 0 {
				g.errs = append(g.errs, who+": OnStoppedLeading without a term")
				return
			}
			if g.terms[i-1].end.IsZero() {
				g.errs = append(g.errs, who+": OnStoppedLeading before OnStartedLeading returned")
			}
			g.terms[i-1].stopErr, g.terms[i-1].stopped = err, true
			g.events[who] = append(g.events[who], "stop")
		},
	}
}

// check: every term stopped, no two terms overlap (the next starts after
// the previous one's work saw its end), and fencing tokens grow.
func (g *termLog) check(t *testing.T) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	require.Empty(t, g.errs)
	terms := slices.Clone(g.terms)
	slices.SortFunc(terms, func(a, b termRec) int { return a.start.Compare(b.start) })
	for i, tr := range terms {
		require.True(t, tr.stopped, "term %d of %s (token %d) never stopped", i, tr.who, tr.token)
		require.False(t, tr.end.IsZero(), "term %d of %s never ended", i, tr.who)
		if i == 0 {
			continue
		}
		prev := terms[i-1]
		require.Greater(t, tr.token, prev.token, "term %d of %s: fencing token after %s's", i, tr.who, prev.who)
		require.False(t, tr.start.Before(prev.end), "term %d of %s (token %d) started %s before %s's term (token %d) ended (its work returned)",
			i, tr.who, tr.token, prev.end.Sub(tr.start), prev.who, prev.token)
	}
}

func runElection(ctx context.Context, e *dynamolock.Election, value string, cb dynamolock.LeaderCallbacks) <-chan error {
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx, []byte(value), cb) }()
	return done
}

func received[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		t.Logf("%s", buf[:n])
		t.Fatalf("timed out after %s waiting for %s", d, what)
		panic("unreachable")
	}
}

var handOverRounds = flag.Int("election.rounds", 6, "hand-overs TestElectionRunHandsOverWithinARoundTrip measures (half after ctx's end, half after Resign)")

// At the default refresh period, the next candidate (another client, as
// another process would be) leads within 200 ms of the leader's ctx ending
// (Run resigns) and of a Resign while the leader's Run goes on; the first
// leader's Run returns nil after OnStoppedLeading(nil), and its tokens and
// terms follow one another.
func TestElectionRunHandsOverWithinARoundTrip(t *testing.T) {
	table := newTable(t, "")
	log := newTermLog()
	rounds := *handOverRounds
	var byCtx, byResign []time.Duration
	for round := range rounds {
		db1, _ := newDB(t)
		db2, _ := newDB(t)
		c1 := newClient(t, db1, table, dynamolock.WithOwnerName("one"))
		c2 := newClient(t, db2, table, dynamolock.WithOwnerName("two"))
		e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")
		ctx1, cancel1 := context.WithCancel(context.Background())
		ctx2, cancel2 := context.WithCancel(context.Background())
		t.Cleanup(cancel1)
		t.Cleanup(cancel2)
		s1, s2 := make(chan termRec, 4), make(chan termRec, 4)
		done1 := runElection(ctx1, e1, "one", log.callbacks("one", nil, s1))
		received(t, s1, 10*time.Second, "the first leader")
		require.True(t, e1.IsLeader())
		done2 := runElection(ctx2, e2, "two", log.callbacks("two", nil, s2))
		waitFor(t, 5*time.Second, "the second candidate's place in the queue", func() bool {
			return queued(t, db1, table, "leader") // it polls fast only once placed
		})

		var at time.Time
		if round%2 == 0 {
			at = time.Now()
			cancel1()
			require.NoError(t, received(t, done1, 10*time.Second, "the first Run's return"))
		} else {
			at = time.Now()
			require.NoError(t, e1.Resign(context.Background()))
		}
		r := received(t, s2, 10*time.Second, "the second leader")
		took := r.start.Sub(at)
		if round%2 == 0 {
			byCtx = append(byCtx, took)
		} else {
			byResign = append(byResign, took)
		}
		assert.False(t, e1.IsLeader())
		require.True(t, e2.IsLeader())
		cancel2()
		require.NoError(t, received(t, done2, 10*time.Second, "the second Run's return"))
		if round%2 == 1 {
			cancel1()
			require.NoError(t, received(t, done1, 10*time.Second, "the first Run's return"))
		}
	}
	t.Logf("the next candidate led after the leader's ctx ended in %v, after Resign in %v", byCtx, byResign)
	for name, took := range map[string][]time.Duration{"ctx ended": byCtx, "Resign": byResign} {
		slices.Sort(took)
		n := len(took)
		t.Logf("%s: %d hand-overs, p50 %v, p90 %v, max %v", name, n, took[n/2], took[n*9/10], took[n-1])
	}
	all := slices.Sorted(slices.Values(append(slices.Clone(byCtx), byResign...)))
	assert.Less(t, all[len(all)/2], 200*time.Millisecond, "median hand-over at the default refresh period")
	log.check(t)
	log.mu.Lock()
	defer log.mu.Unlock()
	for _, tr := range log.terms {
		if tr.who == "one" && tr.stopErr != nil {
			// A Resign while Run runs: the term's lock was released.
			assert.ErrorIs(t, tr.stopErr, dynamolock.ErrLockAlreadyReleased)
		}
	}
}

// queued reports whether a waiter holds a place in key's queue.
func queued(t *testing.T, db *dynamodb.Client, table, key string) bool {
	t.Helper()
	q, ok := rawItem(t, db, table, keyOf(key))["fairQueue"].(*types.AttributeValueMemberM)
	return ok && len(q.Value) > 0
}

// A leader whose requests are cut off (its process dead to DynamoDB, still
// running) ends its term before its lease runs out, and another candidate
// leads within about one lease.
func TestElectionRunLeaderCutOffIsReplaced(t *testing.T) {
	table := newTable(t, "")
	raw, _ := newDB(t)
	dying := &severableDB{Client: raw}
	const lease = 3 * time.Second
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(500 * time.Millisecond)}
	c1 := newClient(t, dying, table, append(opts, dynamolock.WithOwnerName("mortal"))...)
	c2 := newClient(t, raw, table, append(opts, dynamolock.WithOwnerName("heir"))...)
	e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	log := newTermLog()
	s1, s2 := make(chan termRec, 16), make(chan termRec, 4)
	var ends sync.Map    // fencing token → when that term's context ended
	var started sync.Map // fencing tokens of the terms whose work began
	cb1 := log.callbacks("mortal", nil, s1)
	work := cb1.OnStartedLeading
	cb1.OnStartedLeading = func(tctx context.Context, term *dynamolock.Lock) {
		token := term.FencingToken()
		stop := context.AfterFunc(tctx, func() { ends.Store(token, time.Now()) })
		started.Store(token, true)
		defer stop()
		work(tctx, term)
	}
	stops := make(chan error, 16)
	stopped := cb1.OnStoppedLeading
	cb1.OnStoppedLeading = func(err error) { stops <- err; stopped(err) }
	done1 := runElection(ctx, e1, "mortal", cb1)
	received(t, s1, 10*time.Second, "the first leader")
	done2 := runElection(ctx, e2, "heir", log.callbacks("heir", nil, s2))
	// Cut it off just after a renewal of the term in progress (on a loaded
	// machine a term may have ended early and been won again meanwhile),
	// once that term's work has begun: a lock the client holds may be a term
	// Run has won but not started yet, and a term cut off before it starts
	// has no work whose end could be recorded.
	var held *dynamolock.Lock
	waitFor(t, 10*time.Second, "a renewal of the leader's term", func() bool {
		sent := c1.Stats().HeartbeatsSent
		time.Sleep(50 * time.Millisecond)
		l, err := c1.Get("leader")
		if err != nil || l.Err() != nil || !e1.IsLeader() || c1.Stats().HeartbeatsSent == sent {
			return false
		}
		if _, ok := started.Load(l.FencingToken()); !ok {
			return false
		}
		held = l
		return true
	})
	cutAt := time.Now()
	dying.severed.Store(true)
	exp := held.Expiration() // no renewal lands from now on
	token := held.FencingToken()

	r := received(t, s2, 10*time.Second, "the heir")
	took := r.start.Sub(cutAt)
	var end time.Time
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if v, ok := ends.Load(token); ok {
			end = v.(time.Time)
			break
		}
		if time.Now().After(deadline) {
			tokens := func(m *sync.Map) (ts []uint64) {
				m.Range(func(k, _ any) bool { ts = append(ts, k.(uint64)); return true })
				return ts
			}
			t.Fatalf("the cut-off term's end was not recorded in 10 s: term %d (lock error %v, still leader %v); terms begun %v, ended %v",
				token, held.Err(), e1.IsLeader(), tokens(&started), tokens(&ends))
		}
	}
	t.Logf("cut off: the term ended %s before its lease's end; the heir led %s after the cut", exp.Sub(end), took)
	assert.True(t, end.Before(exp), "the term ends before the lease runs out")
	assert.True(t, end.Before(r.start), "the old term ended before the new one started")
	assert.Greater(t, r.start, exp.Add(-50*time.Millisecond), "the heir leads only once the lease may have run out")
	assert.Less(t, took, lease+dynamolock.DefaultRefreshPeriod+slack, "replaced within about one lease")
	var stopErr error
	for stopErr == nil {
		stopErr = received(t, stops, 5*time.Second, "OnStoppedLeading of the cut-off term")
	}
	assert.ErrorIs(t, stopErr, dynamolock.ErrLockLost)
	assert.False(t, e1.IsLeader())
	dying.severed.Store(false)
	cancel()
	require.NoError(t, received(t, done1, 10*time.Second, "the first Run's return"))
	require.NoError(t, received(t, done2, 10*time.Second, "the second Run's return"))
	log.check(t)
}

// A leader's work that ignores its term's end makes Healthy report it once
// the term has gone unrenewed for its lease plus the tolerance; before,
// and once the work returns, Healthy is nil. The handler says the same.
func TestElectionRunHealthyReportsAStuckLeader(t *testing.T) {
	table := newTable(t, "")
	raw, _ := newDB(t)
	cut := &severableDB{Client: raw}
	c := newClient(t, cut, table, fast...)
	e := c.NewElection("leader")
	require.NoError(t, e.Healthy(0), "not leading: healthy")
	require.ErrorIs(t, e.Healthy(-time.Second), dynamolock.ErrInvalidArgument)
	h := httptest.NewServer(e.HealthHandler(500 * time.Millisecond))
	defer h.Close()
	status := func() int {
		resp, err := http.Get(h.URL)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	release := make(chan struct{})
	stopped := make(chan error, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runElection(ctx, e, "stuck", dynamolock.LeaderCallbacks{
		OnStartedLeading: func(context.Context, *dynamolock.Lock) { <-release }, // ignores its context
		OnStoppedLeading: func(err error) { stopped <- err },
	})
	waitFor(t, 5*time.Second, "leadership", e.IsLeader)
	require.NoError(t, e.Healthy(0))
	require.Equal(t, http.StatusOK, status())
	time.Sleep(1500 * time.Millisecond) // renewed meanwhile: still healthy
	require.NoError(t, e.Healthy(0))

	cutAt := time.Now()
	cut.severed.Store(true)
	waitFor(t, 3*time.Second, "the term's end", func() bool { return !e.IsLeader() })
	require.NoError(t, e.Healthy(time.Hour), "within the tolerance")
	waitFor(t, 5*time.Second, "unhealthy", func() bool { return e.Healthy(500*time.Millisecond) != nil })
	unhealthyAfter := time.Since(cutAt)
	t.Logf("unhealthy %s after the cut: %v", unhealthyAfter, e.Healthy(500*time.Millisecond))
	assert.Greater(t, unhealthyAfter, time.Second, "not before the lease plus the tolerance have passed")
	require.Equal(t, http.StatusInternalServerError, status())

	close(release)
	err := received(t, stopped, 5*time.Second, "OnStoppedLeading")
	require.ErrorIs(t, err, dynamolock.ErrLockLost)
	require.NoError(t, e.Healthy(0), "the work returned")
	require.Equal(t, http.StatusOK, status())
	cut.severed.Store(false)
	cancel()
	require.NoError(t, received(t, done, 10*time.Second, "Run's return"))
}

// OnNewLeader sees the other candidate and itself, once per term.
func TestElectionRunOnNewLeader(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c1 := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("one"))...)
	c2 := newClient(t, db, table, append(fast, dynamolock.WithOwnerName("two"))...)
	e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")
	var mu sync.Mutex
	var seen []dynamolock.Leader
	ctx1, cancel1 := context.WithCancel(context.Background())
	defer cancel1()
	l2, err := e2.Campaign(context.Background(), []byte("two"))
	require.NoError(t, err)
	started := make(chan termRec, 1)
	log := newTermLog()
	cb := log.callbacks("one", nil, started)
	cb.OnNewLeader = func(ld dynamolock.Leader) {
		mu.Lock()
		seen = append(seen, ld)
		mu.Unlock()
	}
	done := runElection(ctx1, e1, "one", cb)
	waitFor(t, 5*time.Second, "the other leader seen", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 1 })
	require.NoError(t, e2.Proclaim(context.Background(), []byte("two again"))) // a value, not a leader
	require.NoError(t, e2.Resign(context.Background()))
	r := received(t, started, 5*time.Second, "leadership")
	waitFor(t, 5*time.Second, "itself seen", func() bool { mu.Lock(); defer mu.Unlock(); return len(seen) == 2 })
	cancel1()
	require.NoError(t, received(t, done, 10*time.Second, "Run's return"))
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []dynamolock.Leader{
		{Owner: "two", Value: []byte("two"), FencingToken: l2.FencingToken()},
		{Owner: "one", Value: []byte("one"), FencingToken: r.token},
	}, seen)
}

// Bad input, a second Run, a client without heartbeats, and a client that
// closes under a running Run.
func TestElectionRunRefusesAndEnds(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, fast...)
	ctx := context.Background()
	var nilCtx context.Context // the bad input tested
	require.ErrorIs(t, c.NewElection("leader").Run(nilCtx, nil, dynamolock.LeaderCallbacks{}), dynamolock.ErrInvalidArgument)
	require.ErrorIs(t, c.NewElection("").Run(ctx, nil, dynamolock.LeaderCallbacks{}), dynamolock.ErrInvalidArgument)
	quiet := newClient(t, db, table, dynamolock.DisableHeartbeat())
	err := quiet.NewElection("leader").Run(ctx, nil, dynamolock.LeaderCallbacks{})
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "heartbeat")

	e := c.NewElection("leader")
	started := make(chan termRec, 1)
	log := newTermLog()
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := runElection(rctx, e, "v", log.callbacks("c", nil, started))
	received(t, started, 5*time.Second, "leadership")
	err = e.Run(ctx, nil, dynamolock.LeaderCallbacks{})
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument, "a second Run of one Election")
	require.NoError(t, c.Close())
	err = received(t, done, 10*time.Second, "Run's return after Close")
	require.ErrorIs(t, err, dynamolock.ErrClientClosed)
	log.check(t)
	log.mu.Lock()
	defer log.mu.Unlock()
	require.Len(t, log.terms, 1)
	require.True(t, errors.Is(log.terms[0].stopErr, dynamolock.ErrLockAlreadyReleased), "Close released the term: %v", log.terms[0].stopErr)
}

// Hundreds of terms among three candidates in three clients, ended by
// their Run's ctx (then Run again), by Resign, and by a candidate cut off
// from DynamoDB for longer than its lease; leaders slow to stop: terms
// never overlap and fencing tokens only grow.
func TestElectionRunManyTermsNeverOverlap(t *testing.T) {
	if testing.Short() {
		t.Skip("hundreds of terms")
	}
	table := newTable(t, "")
	log := newTermLog()
	type candidate struct {
		name   string
		db     *severableDB
		e      *dynamolock.Election
		cancel context.CancelFunc
		done   <-chan error
	}
	starts := make(chan termRec, 1024)
	linger := func() time.Duration {
		if rand.N(5) == 0 {
			return 100*time.Millisecond + time.Duration(rand.N(200))*time.Millisecond // longer than a hand-over
		}
		return time.Duration(rand.N(20)) * time.Millisecond
	}
	var cands []*candidate
	for _, name := range []string{"a", "b", "c"} {
		raw, _ := newDB(t)
		db := &severableDB{Client: raw}
		c := newClient(t, db, table, append(fast, dynamolock.WithOwnerName(name))...)
		cands = append(cands, &candidate{name: name, db: db, e: c.NewElection("leader")})
	}
	run := func(cd *candidate) {
		ctx, cancel := context.WithCancel(context.Background())
		cd.cancel, cd.done = cancel, runElection(ctx, cd.e, cd.name, log.callbacks(cd.name, linger, starts))
	}
	for _, cd := range cands {
		run(cd)
	}
	const terms = 200
	cuts := 0
	for n := 0; n < terms; n++ {
		r := received(t, starts, 20*time.Second, "the next term")
		time.Sleep(time.Duration(rand.N(20)) * time.Millisecond)
		var cd *candidate
		for _, x := range cands {
			if x.name == r.who {
				cd = x
			}
		}
		switch k := rand.N(20); {
		case k < 9:
			cd.cancel()
			require.NoError(t, received(t, cd.done, 10*time.Second, "Run's return"))
			run(cd)
		case k < 19 || cuts >= 3:
			_ = cd.e.Resign(context.Background())
		default:
			cuts++
			cd.db.severed.Store(true)
			waitFor(t, 10*time.Second, "the cut-off leader's term's end", func() bool { return !cd.e.IsLeader() })
			go func() { time.Sleep(1500 * time.Millisecond); cd.db.severed.Store(false) }()
		}
	}
	for _, cd := range cands {
		cd.cancel()
	}
	for _, cd := range cands {
		require.NoError(t, received(t, cd.done, 10*time.Second, "Run's return"))
	}
	log.check(t)
	log.mu.Lock()
	t.Logf("%d terms", len(log.terms))
	log.mu.Unlock()
}
