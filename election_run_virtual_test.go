package dynamolock_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// startRec is a term's start, as OnStartedLeading saw it.
type startRec struct {
	who   string
	at    time.Time
	token uint64
	end   <-chan struct{} // closed when the term's work returned
}

// runCandidate runs e.Run in the bubble until its context ends; starts
// receives each of its terms.
func runCandidate(ctx context.Context, who string, e *dynamolock.Election, starts chan<- startRec) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- e.Run(ctx, []byte(who), dynamolock.LeaderCallbacks{
			OnStartedLeading: func(term context.Context, l *dynamolock.Lock) {
				ended := make(chan struct{})
				defer close(ended)
				starts <- startRec{who: who, at: time.Now(), token: l.FencingToken(), end: ended}
				<-term.Done()
			},
		})
	}()
	return done
}

// After its leader's ctx ends, or a Resign, the other candidate (another
// client, as another process) leads within one poll of the queue's head
// at the default refresh period (55.6 ms alone) and a few round trips: 40
// hand-overs in virtual time, each connection 1 ms away, the end of each
// term at another phase of the polls.
func TestElectionRunHandOverWithinOnePollVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		a, _ := virtualClient(t, db, "a")
		b, _ := virtualClient(t, db, "b")
		_, err := a.CreateTableWithContext(context.Background(), "locks")
		require.NoError(t, err)
		elections := map[string]*dynamolock.Election{"a": a.NewElection("leader"), "b": b.NewElection("leader")}
		cancels := map[string]context.CancelFunc{}
		dones := map[string]<-chan error{}
		starts := make(chan startRec, 8)
		run := func(who string) {
			ctx, cancel := context.WithCancel(context.Background())
			cancels[who], dones[who] = cancel, runCandidate(ctx, who, elections[who], starts)
		}
		run("a")
		first := <-starts
		run("b")
		const trials = 40
		var byCtx, byResign []time.Duration
		cur := first
		for i := range trials {
			// 1 s to 1.4 s into the term, 10.1 ms apart: no instant shared
			// with the polls.
			time.Sleep(time.Second + time.Duration(i*101)*time.Millisecond/10)
			ended := time.Now()
			if i%2 == 0 {
				cancels[cur.who]()
				require.NoError(t, <-dones[cur.who])
			} else {
				require.NoError(t, elections[cur.who].Resign(context.Background()))
			}
			next := <-starts
			require.NotEqual(t, cur.who, next.who, "the other candidate leads")
			require.Greater(t, next.token, cur.token)
			select {
			case <-cur.end:
			default:
				t.Fatalf("trial %d: %s's term started before %s's work returned", i, next.who, cur.who)
			}
			took := next.at.Sub(ended)
			if i%2 == 0 {
				byCtx = append(byCtx, took)
				run(cur.who) // the one whose ctx ended campaigns again, behind
			} else {
				byResign = append(byResign, took)
			}
			cur = next
		}
		for _, cancel := range cancels {
			cancel()
		}
		for _, done := range dones {
			require.NoError(t, <-done)
		}
		for name, took := range map[string][]time.Duration{"ctx ended": byCtx, "Resign": byResign} {
			slices.Sort(took)
			n := len(took)
			t.Logf("%s: %d hand-overs, p50 %v, p90 %v, max %v", name, n, took[n/2], took[n*9/10], took[n-1])
			// One poll of the lone head (55.6 ms) + the release, the read
			// and the acquiring write (1 ms each) + slack for the answers.
			require.LessOrEqual(t, took[n-1], 55556*time.Microsecond+10*time.Millisecond, "%s: the slowest hand-over", name)
			require.LessOrEqual(t, took[n/2], 45*time.Millisecond, "%s: the median hand-over", name)
		}
	})
}

// A leader cut off from DynamoDB (its connection partitioned): its term
// ends (lease − heartbeat)/2 before its lease would run out, and the other
// candidate leads about one lease after the leader's last renewal, never
// before the lease ran out. Virtual time: the bounds are exact.
func TestElectionRunCutOffLeaderVirtual(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		db := dynamolocktest.New()
		a, conn := virtualClient(t, db, "a") // lease 3 s, heartbeat 1 s
		b, _ := virtualClient(t, db, "b")
		_, err := a.CreateTableWithContext(context.Background(), "locks")
		require.NoError(t, err)
		ea, eb := a.NewElection("leader"), b.NewElection("leader")
		ctx, cancel := context.WithCancel(context.Background())
		var ended time.Time
		var expiration time.Time
		var stopErr error
		termDone, aLeads := make(chan struct{}), make(chan struct{})
		doneA := make(chan error, 1)
		go func() {
			doneA <- ea.Run(ctx, nil, dynamolock.LeaderCallbacks{
				OnStartedLeading: func(term context.Context, l *dynamolock.Lock) {
					if stopErr != nil {
						<-term.Done() // a's later terms
						return
					}
					close(aLeads)
					time.Sleep(2500 * time.Millisecond) // renewed twice meanwhile
					conn.Partition()
					expiration = l.Expiration()
					<-term.Done()
					ended = time.Now()
				},
				OnStoppedLeading: func(err error) {
					if stopErr == nil {
						stopErr = err
						close(termDone)
					}
				},
			})
		}()
		starts := make(chan startRec, 4)
		<-aLeads
		doneB := runCandidate(ctx, "b", eb, starts)
		<-termDone
		next := <-starts
		cutAt := expiration.Add(-3 * time.Second) // the last renewal's send
		t.Logf("the term ended %v before its lease's end; b led %v after the lease's end (%v after the last renewal)",
			expiration.Sub(ended), next.at.Sub(expiration), next.at.Sub(cutAt))
		require.Equal(t, (3*time.Second-time.Second)/2, expiration.Sub(ended), "ended (lease − heartbeat)/2 early")
		require.ErrorIs(t, stopErr, dynamolock.ErrLockLost)
		require.False(t, next.at.Before(expiration), "b leads only once a's lease has run out")
		require.Less(t, next.at.Sub(expiration), 100*time.Millisecond, "and within one poll of the head after it")
		conn.Heal()
		cancel()
		require.NoError(t, <-doneA)
		require.NoError(t, <-doneB)
	})
}
