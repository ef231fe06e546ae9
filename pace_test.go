package dynamolock_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// Issue 47: waiters in other processes (clients that share nothing but
// the table) poll by their rank in the key's queue, so that a release is
// taken within one poll of the head (at most 55.6 ms after a long hold
// for a lone waiter, 77 ms for a full queue's head), and the key costs at
// most 18 reads per second while its holder keeps it (issue 47's bound:
// 20), whatever the number of waiters. In virtual time on the in-memory
// DynamoDB, each connection 1 ms away: the figures are exact, not timed.
//
// Before issue 47 each waiter polled once a refresh period (1 s), so the
// hand-over took up to 1 s and the bound on it below failed.
func TestWaitersInOtherProcessesPollByRank(t *testing.T) {
	for _, lease := range []time.Duration{dynamolock.DefaultLeaseDuration, 3 * time.Second} {
		for _, fair := range []bool{false, true} {
			for _, n := range []int{1, 8, 32} {
				t.Run(fmt.Sprintf("lease=%s/fair=%t/waiters=%d", lease, fair, n), func(t *testing.T) {
					synctest.Test(t, func(t *testing.T) { pollByRank(t, lease, fair, n) })
				})
			}
		}
	}
}

func pollByRank(t *testing.T, lease time.Duration, fair bool, n int) {
	ctx := context.Background()
	db := dynamolocktest.New()
	newClient := func(name string) (*dynamolock.Client, *dynamolocktest.Conn) {
		conn := db.Conn()
		conn.Delay(time.Millisecond)
		c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(name), dynamolock.WithLeaseDuration(lease),
			dynamolock.WithHeartbeatPeriod(lease/4))
		require.NoError(t, err)
		t.Cleanup(func() { require.NoError(t, c.Close()) })
		return c, conn
	}
	holder, _ := newClient("holder")
	_, err := holder.CreateTableWithContext(ctx, "locks")
	require.NoError(t, err)
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	type got struct {
		i  int
		at time.Time
		l  *dynamolock.Lock
	}
	results := make(chan got, n)
	conns := make([]*dynamolocktest.Conn, n)
	release := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		c, conn := newClient(fmt.Sprintf("waiter-%02d", i))
		conns[i] = conn
		opts := []dynamolock.AcquireLockOption{dynamolock.WithAdditionalTimeToWaitForLock(5 * time.Minute)}
		if fair {
			opts = append(opts, dynamolock.WithFairness())
		}
		wg.Go(func() {
			l, err := c.AcquireLockWithContext(ctx, "k", opts...)
			results <- got{i, time.Now(), l}
			if !assert.NoError(t, err) {
				return
			}
			<-release
			time.Sleep(10 * time.Millisecond) // a short hold, then the next
			_, err = c.ReleaseLockWithContext(ctx, l)
			assert.NoError(t, err)
		})
		time.Sleep(10 * time.Millisecond) // they arrive in order
	}
	reads := func() int {
		r := 0
		for _, c := range conns {
			r += c.Calls()["GetItem"]
		}
		return r
	}
	time.Sleep(2 * time.Second) // every waiter has its place
	before := reads()
	time.Sleep(10 * time.Second)
	perSec := float64(reads()-before) / 10
	if testing.Verbose() {
		var each []int
		for _, c := range conns {
			each = append(each, c.Calls()["GetItem"])
		}
		t.Logf("reads by waiter, in arrival order, since they came: %v", each)
	}
	t.Logf("lease %s, %d waiters, fair %t: %.1f reads/s while the holder kept the key for 10 s", lease, n, fair, perSec)
	// assert, not require: the waiters still take the key and return, so
	// that a failure here is reported as one, not as a panic of theirs.
	assert.LessOrEqual(t, perSec, 20.0, "reads per second of the key's waiters while its holder keeps it")

	close(release)
	released := time.Now()
	_, err = holder.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	prev := released
	var handovers []time.Duration
	for k := range n {
		g := <-results
		d := g.at.Sub(prev)
		handovers = append(handovers, d)
		if fair {
			assert.Equal(t, k, g.i, "fair waiters take the key in the order they came")
		}
		// The first comes after a 12 s hold: at most one poll of the head
		// (at most 70.9 ms with 32 waiters) and a few round trips. The
		// next head learns of its turn within 3/4 of a refresh period; the
		// others, each at its next read (a rank r at most r refresh
		// periods after the long hold began).
		switch k {
		case 0:
			assert.LessOrEqual(t, d, 80*time.Millisecond, "hand-over %d (%v)", k, handovers)
		case 1:
			assert.LessOrEqual(t, d, 10*time.Millisecond+750*time.Millisecond+20*time.Millisecond, "hand-over %d (%v)", k, handovers)
		}
		prev = g.at
	}
	t.Logf("hand-overs: %v", handovers)
	wg.Wait()
}

// A plain waiter that a release in its own process wakes writes at once,
// without reading first: its place in the queue must go with that write,
// or the others would count a holder's stale entry as their head for a
// lease (and poll as its followers, slowly).
func TestWokenPlainWaiterTakesItsPlaceWithIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		c, err := dynamolock.New(db.Conn(), "locks", dynamolock.WithOwnerName("c"))
		require.NoError(t, err)
		defer func() { require.NoError(t, c.Close()) }()
		_, err = c.CreateTableWithContext(ctx, "locks")
		require.NoError(t, err)
		held, err := c.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		got := make(chan *dynamolock.Lock)
		go func() {
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
			assert.NoError(t, err)
			got <- l
		}()
		queue := func() int {
			for _, it := range db.Items("locks") {
				if k, ok := it["key"].(*types.AttributeValueMemberS); ok && k.Value == "k" {
					if q, ok := it["fairQueue"].(*types.AttributeValueMemberM); ok {
						return len(q.Value)
					}
				}
			}
			return 0
		}
		// The waiter gives the same-process hand-over one refresh period,
		// then polls as any waiter: it takes a place.
		time.Sleep(3 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, queue(), "the waiter's place")
		_, err = c.ReleaseLockWithContext(ctx, held)
		require.NoError(t, err)
		l := <-got
		require.NotNil(t, l)
		require.Equal(t, 0, queue(), "the woken waiter's write took its place with it")
		_, err = c.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
	})
}

// A plain waiter's place is unordered: a fair waiter behind it does not
// wait for it. Here the plain waiter's host goes silent (its entry stays
// live for its lease, 20 s); the fair waiter takes the released key at
// its next poll as the fair queue's first, not 20 s later.
func TestFairWaitersDoNotWaitForPlainOnes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		newClient := func(name string) (*dynamolock.Client, *dynamolocktest.Conn) {
			conn := db.Conn()
			c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(name))
			require.NoError(t, err)
			return c, conn
		}
		holder, _ := newClient("holder")
		defer holder.Close()
		_, err := holder.CreateTableWithContext(ctx, "locks")
		require.NoError(t, err)
		held, err := holder.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		plain, plainConn := newClient("plain")
		pctx, cancel := context.WithCancel(ctx)
		defer cancel()
		plainDone := make(chan struct{})
		go func() {
			defer close(plainDone)
			_, err := plain.AcquireLockWithContext(pctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
			assert.Error(t, err)
		}()
		time.Sleep(time.Second)
		synctest.Wait()
		plainConn.Stall() // its place stays, live for its lease
		fair, _ := newClient("fair")
		defer fair.Close()
		got := make(chan time.Time, 1)
		go func() {
			l, err := fair.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness(), dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
			assert.NoError(t, err)
			got <- time.Now()
			if err == nil {
				_, _ = fair.ReleaseLockWithContext(ctx, l)
			}
		}()
		time.Sleep(time.Second)
		released := time.Now()
		_, err = holder.ReleaseLockWithContext(ctx, held)
		require.NoError(t, err)
		at := <-got
		require.Less(t, at.Sub(released), 2*time.Second, "the fair waiter waited for the plain waiter's place")
		cancel()
		plainConn.Heal()
		<-plainDone
		require.NoError(t, plain.Close())
	})
}

// Fair mode under contention, in virtual time, each connection 1 ms away:
// N clients loop acquire, hold 10 ms, release, acquire again at once.
// The head of the queue, not a poll, sets the pace: at least 25
// acquisitions a second (a cycle is the hold, the release, the head's
// read and its write: about 16 ms at best), in order, nobody starved.
// Before issue 47 the fair queue moved once a refresh period (2-2.5
// acquisitions a second at any N).
func TestFairContentionInVirtualTime(t *testing.T) {
	for _, n := range []int{2, 8, 32} {
		t.Run(fmt.Sprintf("contenders=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { fairContention(t, n) })
		})
	}
}

func fairContention(t *testing.T, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	db := dynamolocktest.New()
	var wg sync.WaitGroup
	counts := make([]int, n)
	var mu sync.Mutex
	for i := range n {
		conn := db.Conn()
		conn.Delay(time.Millisecond)
		c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(fmt.Sprintf("c%02d", i)),
			dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
		require.NoError(t, err)
		defer c.Close()
		if i == 0 {
			_, err = c.CreateTableWithContext(ctx, "locks")
			require.NoError(t, err)
		}
		wg.Go(func() {
			for ctx.Err() == nil {
				l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness(), dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
				if err != nil {
					assert.ErrorIs(t, err, context.Canceled)
					return
				}
				time.Sleep(10 * time.Millisecond)
				_, err = c.ReleaseLockWithContext(context.WithoutCancel(ctx), l)
				assert.NoError(t, err)
				mu.Lock()
				counts[i]++
				mu.Unlock()
			}
		})
	}
	time.Sleep(10 * time.Second)
	cancel()
	wg.Wait()
	total, minC := 0, counts[0]
	for _, k := range counts {
		total += k
		minC = min(minC, k)
	}
	t.Logf("%d contenders: %.1f acquisitions/s, per contender %v", n, float64(total)/10, counts)
	require.GreaterOrEqual(t, float64(total)/10, 25.0, "acquisitions per second")
	require.GreaterOrEqual(t, minC, total/n/2, "nobody starved")
}

// A read/write lock's waiting writers (and readers behind a writer) in
// other processes poll by rank too: readers hold the key for 10 s while 1
// or 8 writers wait; the key costs at most 20 reads per second, and the
// first writer takes it within one poll of the head after the last reader
// leaves. Before, each polled once a refresh period: the hand-over took up
// to 1 s and the bound below failed.
func TestRWLockWaitersPollByRank(t *testing.T) {
	for _, n := range []int{1, 8} {
		t.Run(fmt.Sprintf("writers=%d", n), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { rwPollByRank(t, n) })
		})
	}
}

func rwPollByRank(t *testing.T, n int) {
	ctx := context.Background()
	db := dynamolocktest.New()
	newRW := func(name string) (*dynamolock.RWLock, *dynamolocktest.Conn) {
		c, conn := virtualClient(t, db, name)
		if name == "reader" {
			_, err := c.CreateTableWithContext(ctx, "locks")
			require.NoError(t, err)
		}
		rw, err := c.NewRWLock("k")
		require.NoError(t, err)
		return rw, conn
	}
	readers, _ := newRW("reader")
	r1, err := readers.RLock(ctx)
	require.NoError(t, err)
	r2, err := readers.RLock(ctx)
	require.NoError(t, err)

	type got struct {
		i  int
		at time.Time
	}
	results := make(chan got, n)
	conns := make([]*dynamolocktest.Conn, n)
	var wg sync.WaitGroup
	for i := range n {
		rw, conn := newRW(fmt.Sprintf("writer-%02d", i))
		conns[i] = conn
		wg.Go(func() {
			l, err := rw.Lock(ctx, dynamolock.WithAdditionalTimeToWaitForLock(5*time.Minute))
			results <- got{i, time.Now()}
			if !assert.NoError(t, err) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			assert.NoError(t, rw.Unlock(ctx, l))
		})
		time.Sleep(10 * time.Millisecond)
	}
	reads := func() int {
		r := 0
		for _, c := range conns {
			r += c.Calls()["GetItem"]
		}
		return r
	}
	time.Sleep(2 * time.Second) // every writer has its place
	before := reads()
	time.Sleep(10 * time.Second)
	perSec := float64(reads()-before) / 10
	t.Logf("%d writers waiting on readers: %.1f reads/s while the readers kept the key for 10 s", n, perSec)
	require.LessOrEqual(t, perSec, 20.0, "reads per second of the key's waiting writers while readers keep it")

	require.NoError(t, readers.RUnlock(ctx, r1))
	released := time.Now()
	require.NoError(t, readers.RUnlock(ctx, r2))
	g := <-results
	d := g.at.Sub(released)
	t.Logf("first writer in %s after the last reader left", d)
	require.LessOrEqual(t, d, 80*time.Millisecond, "the head writer takes the key within one poll of the head")
	for range n - 1 {
		<-results
	}
	wg.Wait()
}

// A plain waiter is not held up by the fair waiters before it in the
// key's queue, so it watches for a dead holder itself: it takes the key
// when the holder's lease has run out since it first saw the item, as it
// did before polling by rank, not at its rank's next poll. Here the holder
// (lease 1 s) is dead before the plain waiter starts, behind eight fair
// waiters whose hosts went silent (their places stay live for their
// leases, 30 s). The simulation's liveness check found it (seed 46300932:
// a plain waiter behind three dead fair entries took a dead holder's key
// 170 ms past its lease plus a refresh period).
func TestPlainWaiterBehindFairPlacesTakesADeadHolderInTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		db := dynamolocktest.New()
		var conns []*dynamolocktest.Conn
		newClient := func(name string, lease time.Duration) *dynamolock.Client {
			conn := db.Conn()
			conn.Delay(time.Millisecond)
			conns = append(conns, conn)
			c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(name),
				dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(lease/4))
			require.NoError(t, err)
			return c
		}
		holder := newClient("holder", time.Second)
		_, err := holder.CreateTableWithContext(ctx, "locks")
		require.NoError(t, err)
		_, err = holder.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		var wg sync.WaitGroup
		var fair []*dynamolock.Client
		for i := range 8 {
			c := newClient(fmt.Sprintf("fair%d", i), 30*time.Second)
			fair = append(fair, c)
			wg.Go(func() {
				_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithFairness(), dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
				assert.Error(t, err) // ended by cancel below
			})
			time.Sleep(50 * time.Millisecond)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		for _, conn := range conns {
			conn.Stall() // the holder dies; the fair waiters' places stay live
		}
		time.Sleep(2 * time.Second) // past the holder's lease: dead when the plain waiter first reads
		plain := newClient("plain", 20*time.Second)
		// At the default refresh period: a place in the queue, ninth in
		// line, which polls every 9 s (one given WithRefreshPeriod takes no
		// place and polls at it).
		const slack = 100 * time.Millisecond
		start := time.Now()
		l, err := plain.AcquireLockWithContext(ctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
		require.NoError(t, err)
		took := time.Since(start)
		t.Logf("the plain waiter took the dead holder's key %s after its first read (lease 1s)", took)
		assert.LessOrEqual(t, took, time.Second+slack, "a plain waiter took a dead holder's key later than its lease (and 100 ms) after it first saw it")
		_, err = plain.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
		cancel()
		for _, conn := range conns {
			conn.Heal()
		}
		wg.Wait()
		for _, c := range append(fair, holder, plain) {
			_ = c.Close()
		}
	})
}

// A clean hand-over to a lone waiter in another process, 100 times over
// (issue 47's goal: p50 ≤ 50 ms on DynamoDB Local): the holder keeps the
// key 1–2 s, so the waiter, the queue's head, reads every 55.6 ms (what
// the key's 18 reads a second leave it alone); a release is taken within
// that poll and two round trips, half of it on average. In virtual time,
// each connection 1 ms away, the release times stepping through the phase
// of the polls: both bounds are exact. The flat 80 ms cap of the first
// version made the slowest 76.1 ms and the p50 35.5 ms, which the bound on
// the slowest fails.
func TestCleanHandOverAcrossProcessesWithinOnePollOfTheHead(t *testing.T) {
	for _, fair := range []bool{false, true} {
		t.Run(fmt.Sprintf("fair=%t", fair), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { cleanHandOvers(t, fair) })
		})
	}
}

func cleanHandOvers(t *testing.T, fair bool) {
	ctx := context.Background()
	db := dynamolocktest.New()
	newClient := func(name string) *dynamolock.Client { c, _ := virtualClient(t, db, name); return c }
	holder, waiter := newClient("holder"), newClient("waiter")
	_, err := holder.CreateTableWithContext(ctx, "locks")
	require.NoError(t, err)
	opts := []dynamolock.AcquireLockOption{dynamolock.WithAdditionalTimeToWaitForLock(30 * time.Second)}
	if fair {
		opts = append(opts, dynamolock.WithFairness())
	}
	const trials = 100
	took := make([]time.Duration, 0, trials)
	for i := range trials {
		l, err := holder.AcquireLockWithContext(ctx, "k")
		require.NoError(t, err)
		got := make(chan time.Time, 1)
		go func() {
			wl, err := waiter.AcquireLockWithContext(ctx, "k", opts...)
			got <- time.Now()
			if assert.NoError(t, err) {
				_, err = waiter.ReleaseLockWithContext(ctx, wl)
				assert.NoError(t, err)
			}
		}()
		// 1 s to 2 s, in 100 steps (10.1 ms apart: no instant shared with
		// the polls).
		time.Sleep(time.Second + time.Duration(i*101)*time.Millisecond/10)
		released := time.Now()
		_, err = holder.ReleaseLockWithContext(ctx, l)
		require.NoError(t, err)
		took = append(took, (<-got).Sub(released))
		synctest.Wait()
	}
	slices.Sort(took)
	t.Logf("fair %t: %d hand-overs, p50 %v, p90 %v, max %v", fair, trials, took[trials/2], took[trials*9/10], took[trials-1])
	// One poll of the lone head (55.6 ms) + the release, the read and the
	// acquiring write (1 ms each here) + the release's answer.
	require.LessOrEqual(t, took[trials-1], 55556*time.Microsecond+5*time.Millisecond, "the slowest hand-over")
	require.LessOrEqual(t, took[trials/2], 40*time.Millisecond, "the median hand-over")
}

// A fair semaphore's freed slot (issue 47): its waiters queue on slot 0's
// item and the head reads every slot on the head's schedule, so a slot
// another process frees after a long hold is taken within one poll of the
// head (55.6 ms for a lone waiter) and a few round trips, not at the next
// refresh period. In virtual time, each connection 1 ms away; the slot
// freed is the second, not the one whose item holds the queue.
func TestFairSemaphoreFreedSlotTakenWithinOnePollOfTheHead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		newClient := func(name string) *dynamolock.Client { c, _ := virtualClient(t, db, name); return c }
		holders := newClient("holders")
		_, err := holders.CreateTableWithContext(ctx, "locks")
		require.NoError(t, err)
		sem, err := holders.NewSemaphore("pool", 2)
		require.NoError(t, err)
		a, err := sem.Acquire(ctx, dynamolock.WithFairness())
		require.NoError(t, err)
		b, err := sem.Acquire(ctx, dynamolock.WithFairness())
		require.NoError(t, err)
		freed := b
		if b.PartitionKey() < a.PartitionKey() {
			freed = a
		}
		wsem, err := newClient("waiter").NewSemaphore("pool", 2)
		require.NoError(t, err)
		got := make(chan time.Time, 1)
		go func() {
			l, err := wsem.Acquire(ctx, dynamolock.WithFairness(), dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
			got <- time.Now()
			if assert.NoError(t, err) {
				assert.Equal(t, freed.PartitionKey(), l.PartitionKey(), "the waiter takes the slot freed")
			}
		}()
		time.Sleep(5*time.Second + 3*time.Millisecond) // a long hold: the head polls at its cap
		released := time.Now()
		_, err = holders.ReleaseLockWithContext(ctx, freed)
		require.NoError(t, err)
		took := (<-got).Sub(released)
		t.Logf("the freed slot %s was taken %v after its release", freed.PartitionKey(), took)
		require.LessOrEqual(t, took, 55556*time.Microsecond+6*time.Millisecond, "one poll of the head and the round trips")
	})
}

// virtualClient is a client of db, in virtual time, 1 ms away, lease 3 s
// and heartbeat 1 s (the hand-over tests' bench settings).
func virtualClient(t *testing.T, db *dynamolocktest.DB, name string) (*dynamolock.Client, *dynamolocktest.Conn) {
	t.Helper()
	conn := db.Conn()
	conn.Delay(time.Millisecond)
	c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName(name), dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	return c, conn
}
