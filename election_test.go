package dynamolock_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// severableDB is an SDK client whose item calls fail once it is severed:
// the process behind it looks dead to DynamoDB (its heartbeats stop), while
// it goes on running.
type severableDB struct {
	*dynamodb.Client
	severed atomic.Bool
}

var errSevered = errors.New("test: connection severed")

func (d *severableDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if d.severed.Load() {
		return nil, errSevered
	}
	return d.Client.GetItem(ctx, in, opts...)
}

func (d *severableDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if d.severed.Load() {
		return nil, errSevered
	}
	return d.Client.PutItem(ctx, in, opts...)
}

func (d *severableDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if d.severed.Load() {
		return nil, errSevered
	}
	return d.Client.UpdateItem(ctx, in, opts...)
}

func (d *severableDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if d.severed.Load() {
		return nil, errSevered
	}
	return d.Client.DeleteItem(ctx, in, opts...)
}

func (d *severableDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if d.severed.Load() {
		return nil, errSevered
	}
	return d.Client.TransactWriteItems(ctx, in, opts...)
}

// electionOpts: a 3 s lease renewed every 500 ms. Candidates poll every
// dynamolock.DefaultRefreshPeriod (1 s).
var electionOpts = []dynamolock.ClientOption{
	dynamolock.WithLeaseDuration(electionLease),
	dynamolock.WithHeartbeatPeriod(500 * time.Millisecond),
}

const electionLease = 3 * time.Second

// slack covers the DynamoDB calls and scheduling on a loaded machine with
// the race detector on.
const slack = time.Second

type campaignResult struct {
	lock *dynamolock.Lock
	err  error
	at   time.Time
}

func campaign(ctx context.Context, e *dynamolock.Election, value string, opts ...dynamolock.AcquireLockOption) <-chan campaignResult {
	ch := make(chan campaignResult, 1)
	go func() {
		l, err := e.Campaign(ctx, []byte(value), opts...)
		ch <- campaignResult{l, err, time.Now()}
	}()
	return ch
}

func TestElectionOneLeaderThenResign(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table := newTable(t, "")
	db, _ := newDB(t)
	db2, cc2 := newDB(t) // the candidate's calls, counted
	c1 := newClient(t, db, table, append(electionOpts, dynamolock.WithOwnerName("one"))...)
	c2 := newClient(t, db2, table, append(electionOpts, dynamolock.WithOwnerName("two"))...)
	e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")

	_, err := e1.Leader(ctx)
	require.ErrorIs(t, err, dynamolock.ErrNoLeader)
	require.ErrorIs(t, e2.Proclaim(ctx, []byte("x")), dynamolock.ErrNotLeader)
	require.NoError(t, e2.Resign(ctx), "resigning without leading is a no-op")

	l1, err := e1.Campaign(ctx, []byte("one's value"))
	require.NoError(t, err)
	cc2.reset()
	campaignStart := time.Now()
	second := campaign(ctx, e2, "two's value")
	reads := 0 // the test's own reads through c2

	// The second candidate waits across several of the leader's leases.
	waitUntil := time.Now().Add(2 * electionLease)
	for time.Now().Before(waitUntil) {
		select {
		case r := <-second:
			t.Fatalf("second candidate won while the first leads: %v", r.err)
		case <-time.After(100 * time.Millisecond):
		}
		ld, err := e2.Leader(ctx)
		reads++
		require.NoError(t, err)
		require.Equal(t, "one", ld.Owner, "leader's lock: %v; stats %+v", l1.Err(), c1.Stats())
		require.Equal(t, "one's value", string(ld.Value))
		require.Equal(t, l1.FencingToken(), ld.FencingToken)
	}
	require.NoError(t, l1.Err())

	// Proclaim changes the value in place: same term, same token.
	require.NoError(t, e1.Proclaim(ctx, []byte("one's new value")))
	ld, err := e2.Leader(ctx)
	reads++
	require.NoError(t, err)
	require.Equal(t, dynamolock.Leader{Owner: "one", Value: []byte("one's new value"), FencingToken: l1.FencingToken()}, ld)

	resignedAt := time.Now()
	require.NoError(t, e1.Resign(ctx))
	require.ErrorIs(t, l1.Err(), dynamolock.ErrLockAlreadyReleased)
	require.ErrorIs(t, e1.Proclaim(ctx, []byte("late")), dynamolock.ErrNotLeader)

	r := <-second
	calls := cc2.reset()
	require.NoError(t, r.err)
	calls["GetItem"] -= reads
	waited := r.at.Sub(campaignStart)
	t.Logf("a candidate that waited %s: %v", waited, calls)
	// A waiting candidate holds a place in the key's queue (issue 47):
	// one failed write, one join, one renewal of its place per third of
	// its lease, one winning write; as the queue's only waiter it reads at
	// most 18 times a second (docs/ENGINE.md, "Polling by rank").
	assert.LessOrEqual(t, calls["UpdateItem"], 3+int(waited/(electionLease/3)), "one failed write, one join, its renewals, one winning write")
	assert.LessOrEqual(t, calls["GetItem"], int(waited/(time.Second/18))+12, "the head's reads: one per 55.6 ms at most, once the hold it sees is 222 ms old")
	took := r.at.Sub(resignedAt)
	t.Logf("after resignation the candidate led in %s", took)
	assert.Less(t, took, dynamolock.DefaultRefreshPeriod+slack, "the candidate must win within one refresh period of the resignation")
	assert.Greater(t, r.lock.FencingToken(), l1.FencingToken())
	ld, err = e1.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "two", ld.Owner)
	require.Equal(t, "two's value", string(ld.Value))
}

func TestElectionLeaderDies(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table := newTable(t, "")
	raw, _ := newDB(t)
	dying := &severableDB{Client: raw}
	c1 := newClient(t, dying, table, append(electionOpts, dynamolock.WithOwnerName("mortal"))...)
	c2 := newClient(t, raw, table, append(electionOpts, dynamolock.WithOwnerName("heir"))...)
	e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")

	l1, err := e1.Campaign(ctx, []byte("a"))
	require.NoError(t, err)
	second := campaign(ctx, e2, "b")
	// Let the leader renew a few times first, so the heir watches a live one.
	sent := c1.Stats().HeartbeatsSent
	waitFor(t, 3*time.Second, "two heartbeats of the leader", func() bool { return c1.Stats().HeartbeatsSent >= sent+2 })

	diedAt := time.Now()
	dying.severed.Store(true)
	lease := electionLease

	r := <-second
	require.NoError(t, r.err)
	took := r.at.Sub(diedAt)
	t.Logf("after the leader died the candidate led in %s", took)
	assert.Less(t, took, lease+dynamolock.DefaultRefreshPeriod+slack, "the candidate must win within a lease plus a refresh period")
	assert.GreaterOrEqual(t, took, lease-500*time.Millisecond, "the candidate must not take over a lease that may still run")
	// The dead leader learns it lost when its own lease runs out.
	require.True(t, closedWithin(l1.Done(), slack))
	require.ErrorIs(t, l1.Err(), dynamolock.ErrLockLost)
	require.ErrorIs(t, e1.Proclaim(ctx, []byte("zombie")), dynamolock.ErrNotLeader)

	ld, err := e2.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, dynamolock.Leader{Owner: "heir", Value: []byte("b"), FencingToken: r.lock.FencingToken()}, ld)
	assert.Equal(t, l1.FencingToken()+1, ld.FencingToken)
}

func TestElectionObserveSeesEveryChangeInOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	table := newTable(t, "")
	db, _ := newDB(t)
	c1 := newClient(t, db, table, append(electionOpts, dynamolock.WithOwnerName("one"))...)
	c2 := newClient(t, db, table, append(electionOpts, dynamolock.WithOwnerName("two"))...)
	wdb, wcc := newDB(t) // the bystander observer's calls, counted
	watcher := newClient(t, wdb, table, electionOpts...)
	e1, e2 := c1.NewElection("leader"), c2.NewElection("leader")

	l1, err := e1.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)

	// Two observers: one in a bystander client, one in the leader's own.
	octx, ocancel := context.WithCancel(ctx)
	observeStart := time.Now()
	var mu sync.Mutex
	seen := map[string][]dynamolock.Leader{}
	var wg sync.WaitGroup
	for name, c := range map[string]*dynamolock.Client{"bystander": watcher, "leader's client": c1} {
		ch := c.NewElection("leader").Observe(octx)
		wg.Go(func() {
			for ld := range ch {
				mu.Lock()
				seen[name] = append(seen[name], ld)
				mu.Unlock()
			}
		})
	}
	delivered := func(n int) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(seen["bystander"]) >= n && len(seen["leader's client"]) >= n
		}
	}
	waitFor(t, 3*time.Second, "the current leader", delivered(1))
	require.NoError(t, e1.Proclaim(ctx, []byte("v2")))
	waitFor(t, 3*time.Second, "the first proclamation", delivered(2))
	require.NoError(t, e1.Proclaim(ctx, []byte("v2")))
	require.NoError(t, e1.Proclaim(ctx, []byte("v3")))
	waitFor(t, 3*time.Second, "the second proclamation", delivered(3))

	second := campaign(ctx, e2, "w1")
	require.NoError(t, e1.Resign(ctx))
	r := <-second
	require.NoError(t, r.err)
	waitFor(t, 3*time.Second, "the new leader", delivered(4))
	require.NoError(t, e2.Proclaim(ctx, []byte("w2")))
	waitFor(t, 3*time.Second, "the new leader's proclamation", delivered(5))

	ocancel()
	wg.Wait() // both channels closed when their context ended
	observed := time.Since(observeStart)
	calls := wcc.reset()
	t.Logf("an observer over %s: %v", observed, calls)
	assert.Equal(t, map[string]int{"GetItem": calls["GetItem"]}, calls, "an observer only reads")
	assert.LessOrEqual(t, calls["GetItem"], int(observed/dynamolock.DefaultRefreshPeriod)+1, "one read per second")

	t1, t2 := l1.FencingToken(), r.lock.FencingToken()
	want := []dynamolock.Leader{
		{Owner: "one", Value: []byte("v1"), FencingToken: t1},
		{Owner: "one", Value: []byte("v2"), FencingToken: t1},
		{Owner: "one", Value: []byte("v3"), FencingToken: t1},
		{Owner: "two", Value: []byte("w1"), FencingToken: t2},
		{Owner: "two", Value: []byte("w2"), FencingToken: t2},
	}
	for name, got := range seen {
		assert.Equal(t, want, got, "observer in the %s", name)
	}
}

func TestElectionCampaignCancelledAndBadName(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c1 := newClient(t, db, table, electionOpts...)
	c2 := newClient(t, db, table, electionOpts...)
	ctx := context.Background()
	_, err := c1.NewElection("leader").Campaign(ctx, nil)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	_, err = c2.NewElection("leader").Campaign(cctx, []byte("x"))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lng)

	bad := c2.NewElection("")
	_, err = bad.Campaign(ctx, nil)
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	_, err = bad.Leader(ctx)
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	_, open := <-bad.Observe(ctx)
	require.False(t, open, "Observe of a bad name closes at once")

	closing, err := dynamolock.New(db, table, electionOpts...)
	require.NoError(t, err)
	watch := closing.NewElection("leader").Observe(ctx)
	_, open = <-watch
	require.True(t, open, "the current leader")
	require.NoError(t, closing.Close())
	select {
	case _, open = <-watch:
		require.False(t, open, "Observe closes when its client is closed")
	case <-time.After(slack):
		t.Fatal("Observe did not close with its client")
	}

	// Campaigning again while leading keeps the term and proclaims.
	e := c1.NewElection("other")
	l, err := e.Campaign(ctx, []byte("a"))
	require.NoError(t, err)
	again, err := e.Campaign(ctx, []byte("b"))
	require.NoError(t, err)
	require.Same(t, l, again)
	ld, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", string(ld.Value))
}

// Resign whose release surely did not land keeps leadership; one whose
// outcome is unknown ends it here, as its doc says.
func TestElectionResignKeepsOrEndsLeadership(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	lose := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("isReleased"), Times: 1, LoseAnswer: true}
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table, electionOpts...)
	e := c.NewElection("resign")
	ctx := context.Background()
	l, err := e.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)

	// Not sent (ctx already ended): still the leader.
	done, cancel := context.WithCancel(ctx)
	cancel()
	require.ErrorIs(t, e.Resign(done), context.Canceled)
	require.NoError(t, l.Err(), "leadership kept")
	require.NoError(t, e.Proclaim(ctx, []byte("v2")), "still leads")

	// Sent, answer lost: leadership has ended here.
	fdb.Add(lose)
	err = e.Resign(ctx)
	require.ErrorIs(t, err, dynamolock.ErrReleaseOutcomeUnknown)
	require.Equal(t, 1, fdb.Hits(lose))
	require.True(t, closedWithin(l.Done(), time.Second), "the lock ended")
	require.ErrorIs(t, e.Proclaim(ctx, []byte("v3")), dynamolock.ErrNotLeader)
	require.NoError(t, e.Resign(ctx), "nothing left to resign")
	_, err = e.Leader(ctx)
	require.ErrorIs(t, err, dynamolock.ErrNoLeader, "the lost answer's release landed")
}

// After a Proclaim whose answer was lost, Leader in the leader's own
// client reports what the item holds.
func TestElectionLeaderAfterProclaimAnswerLost(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	fdb := faults.Wrap(db)
	c := newClient(t, fdb, table, electionOpts...)
	other := newClient(t, db, table, electionOpts...)
	e := c.NewElection("proclaim")
	ctx := context.Background()
	_, err := e.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	lose := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("data"), Times: 1, LoseAnswer: true}
	fdb.Add(lose)
	err = e.Proclaim(ctx, []byte("v2"))
	require.Equal(t, 1, fdb.Hits(lose))
	t.Logf("Proclaim with its answer lost: %v", err)
	seen, err := other.NewElection("proclaim").Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v2", string(seen.Value), "the item holds the new value")
	own, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "v2", string(own.Value), "the leader's own client reports what the item holds")
	require.Equal(t, seen, own)
}

// Campaign takes acquisition options: here a refresh period of 100 ms.
func TestElectionCampaignOptions(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	cdb, cc := newDB(t)
	leader := newClient(t, db, table, electionOpts...)
	candidate := newClient(t, cdb, table, electionOpts...)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	le := leader.NewElection("opts")
	_, err := le.Campaign(ctx, []byte("a"))
	require.NoError(t, err)
	ce := candidate.NewElection("opts")
	_, err = ce.Campaign(ctx, []byte("b"), dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	require.ErrorAs(t, err, &held, "FailIfLocked returns at once")
	cc.reset()
	res := campaign(ctx, ce, "b", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	// Every 100 ms, not every second: six polls well within 1.5 s (the
	// default period would make two).
	start := time.Now()
	waitFor(t, 1500*time.Millisecond, "six polls of a candidate with a 100 ms refresh period", func() bool { return cc.get("GetItem") >= 6 })
	t.Logf("six GetItem calls of a candidate with a 100 ms refresh period after %s", time.Since(start).Round(time.Millisecond))
	require.NoError(t, le.Resign(ctx))
	r := <-res
	require.NoError(t, r.err)
	ld, err := le.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", string(ld.Value))
}

// Observe in the leader's own client delivers this client's own changes
// at once, not at the next poll (1 s).
func TestElectionObserveOwnChangesWithoutPoll(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	c := newClient(t, db, table, electionOpts...)
	e := c.NewElection("observe-own")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, err := e.Campaign(ctx, []byte("v1"))
	require.NoError(t, err)
	obs := e.Observe(ctx)
	require.Equal(t, "v1", string((<-obs).Value))
	for _, v := range []string{"v2", "v3"} {
		require.NoError(t, e.Proclaim(ctx, []byte(v)))
		start := time.Now()
		select {
		case ld := <-obs:
			require.Equal(t, v, string(ld.Value))
			t.Logf("%s delivered %s after Proclaim returned", v, time.Since(start))
			require.Less(t, time.Since(start), 500*time.Millisecond, "no wait for the next poll")
		case <-time.After(5 * time.Second):
			t.Fatal("the change was not delivered")
		}
	}
	cancel()
	for range obs {
	}
}
