package dynamolock_test

// The requests each kind of holder sends, recorded as golden files, so that
// a change of how the engine dispatches on kinds (issue 46: kinds and item
// shapes as types) can be shown to send the same requests as before:
//
//	go test -run TestGoldenRequests .                 compare
//	go test -run TestGoldenRequests . -golden.update  write testdata/requests/
//
// Each scenario runs in virtual time on the model of DynamoDB, so its
// requests are the same on every run; record version numbers, session ids
// and other UUIDs are named by their order of appearance.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/entropy"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

var goldenUpdate = flag.Bool("golden.update", false, "write the golden request files of TestGoldenRequests")

// requestLog records every request a client sends, in order.
type requestLog struct {
	mu    sync.Mutex
	lines []string
}

func (r *requestLog) rules() []*faults.Rule {
	var rules []*faults.Rule
	for _, op := range []string{"GetItem", "PutItem", "UpdateItem", "DeleteItem", "TransactWriteItems", "Query", "Scan", "DescribeTable", "CreateTable"} {
		rules = append(rules, &faults.Rule{Op: op, Match: func(in any) bool {
			b, err := json.Marshal(in)
			if err != nil {
				b = []byte(err.Error())
			}
			r.mu.Lock()
			r.lines = append(r.lines, op+" "+string(b))
			r.mu.Unlock()
			return false // recorded, not picked: the call goes through
		}})
	}
	return rules
}

var (
	uuidRE   = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	bigNumRE = regexp.MustCompile(`"Value":"[0-9]{10,}"`)
)

// text is the log with every UUID named by its order of appearance and
// every long number (a fencing token's base, an epoch) replaced.
func (r *requestLog) text() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := map[string]string{}
	out := make([]string, 0, len(r.lines))
	for _, l := range r.lines {
		l = uuidRE.ReplaceAllStringFunc(l, func(u string) string {
			if _, ok := names[u]; !ok {
				names[u] = fmt.Sprintf("<uuid%d>", len(names)+1)
			}
			return names[u]
		})
		out = append(out, bigNumRE.ReplaceAllString(l, `"Value":"<N>"`))
	}
	return strings.Join(out, "\n") + "\n"
}

// TestGoldenRequests: every kind of holder (plain, multi-key, semaphore,
// election, reader, writer), with and without a session, sends the
// requests in testdata/requests/.
func TestGoldenRequests(t *testing.T) {
	// One draw, one answer: a semaphore's first slot and every other draw
	// are the same on every run (the test is not parallel: nothing else
	// draws meanwhile).
	read, int64n := entropy.Read, entropy.Int64N
	t.Cleanup(func() { entropy.Read, entropy.Int64N = read, int64n })
	var drawMu sync.Mutex
	draws := uint64(0)
	entropy.Read = func(b []byte, _, _ string) {
		drawMu.Lock()
		defer drawMu.Unlock()
		for i := range b {
			draws++
			b[i] = byte(draws * 0x9e)
		}
	}
	entropy.Int64N = func(int64, string, string) int64 { return 0 }
	scenarios := map[string]func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld){
		"single": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithData([]byte("d")))
			require.NoError(t, err)
			require.NoError(t, c.SendHeartbeatWithContext(ctx, l))
			_, err = c.GetWithContext(ctx, "k")
			require.NoError(t, err)
			ok, err := c.ReleaseLockWithContext(ctx, l)
			require.NoError(t, err)
			require.True(t, ok)
			l, err = c.AcquireLockWithContext(ctx, "k")
			require.NoError(t, err)
			ok, err = c.ReleaseLockWithContext(ctx, l, dynamolock.WithDeleteLock(true))
			require.NoError(t, err)
			require.True(t, ok)
		},
		"multi": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			locks, err := c.AcquireLocks(ctx, []string{"a", "b"})
			require.NoError(t, err)
			for _, l := range locks {
				require.NoError(t, l.Close())
			}
		},
		"semaphore": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			s, err := c.NewSemaphore("sem", 2)
			require.NoError(t, err)
			a, err := s.Acquire(ctx)
			require.NoError(t, err)
			b, err := s.Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
		},
		"election": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			e := c.NewElection("leader")
			_, err := e.Campaign(ctx, []byte("me"))
			require.NoError(t, err)
			_, err = e.Leader(ctx)
			require.NoError(t, err)
			require.NoError(t, e.Resign(ctx))
		},
		"rwlock": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			rw, err := c.NewRWLock("rw")
			require.NoError(t, err)
			r1, err := rw.RLock(ctx)
			require.NoError(t, err)
			r2, err := rw.RLock(ctx)
			require.NoError(t, err)
			require.NoError(t, r1.Close())
			require.NoError(t, r2.Close())
			w, err := rw.Lock(ctx)
			require.NoError(t, err)
			require.NoError(t, w.Close())
		},
		// A lock and an RWLock reader of another process (another owner),
		// resumed from their tokens; a resume of a token already resumed
		// is refused.
		"resume": func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld) {
			old, err := dynamolock.New(g.db, "locks", dynamolock.WithOwnerName("old"), dynamolock.WithLeaseDuration(time.Hour), dynamolock.WithHeartbeatPeriod(0))
			require.NoError(t, err)
			g.others = append(g.others, old)
			l, err := old.AcquireLockWithContext(ctx, "r", dynamolock.WithData([]byte("d")))
			require.NoError(t, err)
			rw, err := old.NewRWLock("rw")
			require.NoError(t, err)
			reader, err := rw.RLock(ctx)
			require.NoError(t, err)
			resumed, err := c.ResumeLock(ctx, l.ResumeToken())
			require.NoError(t, err)
			resumedReader, err := c.ResumeLock(ctx, reader.ResumeToken())
			require.NoError(t, err)
			_, err = c.ResumeLock(ctx, l.ResumeToken())
			require.ErrorIs(t, err, dynamolock.ErrLockTakenOver)
			require.NoError(t, c.SendHeartbeatWithContext(ctx, resumed))
			require.NoError(t, resumed.Close())
			require.NoError(t, resumedReader.Close())
			// The old process's releases find the items the resumes' (one
			// at a time: Close would send them at once).
			_, _ = old.ReleaseLockWithContext(ctx, l)
			_, _ = old.ReleaseLockWithContext(ctx, reader)
		},
		"fair": func(t *testing.T, ctx context.Context, c *dynamolock.Client, _ *goldenWorld) {
			l, err := c.AcquireLockWithContext(ctx, "f", dynamolock.WithFairness())
			require.NoError(t, err)
			require.NoError(t, l.Close())
		},
		// The contended paths: a waiter that polls and takes a released
		// key, a takeover of a dead holder, a claim of a write whose answer
		// was lost, an undo, the fair queue's joins, a fair semaphore's
		// write beside its queue, and the read/write lock's queue.
		"contended": func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld) {
			other := g.client(t, "other")
			l, err := other.AcquireLockWithContext(ctx, "k")
			require.NoError(t, err)
			// At the default refresh period: a place in the key's queue, and
			// polls by rank (a waiter given WithRefreshPeriod, as below,
			// takes no place).
			got := g.async(t, func() (*dynamolock.Lock, error) {
				return c.AcquireLockWithContext(ctx, "k")
			})
			g.settle(250 * time.Millisecond)
			require.NoError(t, l.Close())
			mine := got()
			require.NoError(t, mine.Close())
			// A dead holder's lock, taken over after its lease.
			dead, err := dynamolock.New(g.db, "locks", dynamolock.WithOwnerName("dead"),
				dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(0))
			require.NoError(t, err)
			g.others = append(g.others, dead)
			_, err = dead.AcquireLockWithContext(ctx, "t")
			require.NoError(t, err)
			l, err = c.AcquireLockWithContext(ctx, "t", dynamolock.WithRefreshPeriod(300*time.Millisecond))
			require.NoError(t, err)
			require.NoError(t, l.Close())
			// The first acquiring write's answer is lost: the read after it
			// shows the write, which is claimed.
			g.loseAnswer("l1")
			l, err = c.AcquireLockWithContext(ctx, "l1", dynamolock.WithRefreshPeriod(100*time.Millisecond))
			require.NoError(t, err)
			require.NoError(t, l.Close())
			// Lost again, and the try-lock gives up: its write is undone.
			g.loseAnswer("l2")
			_, err = c.AcquireLockWithContext(ctx, "l2", dynamolock.FailIfLocked())
			require.Error(t, err)
		},
		"fair-contended": func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld) {
			other := g.client(t, "other")
			l, err := other.AcquireLockWithContext(ctx, "f", dynamolock.WithFairness())
			require.NoError(t, err)
			// A lease of 3 s, the queue entry's too: renewed while it waits.
			waiter := g.client(t, "waiter", dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(1237*time.Millisecond)) // no instant shared with the polls: one order of requests
			got := g.async(t, func() (*dynamolock.Lock, error) {
				return waiter.AcquireLockWithContext(ctx, "f", dynamolock.WithFairness(), dynamolock.WithRefreshPeriod(400*time.Millisecond))
			})
			g.settle(2500 * time.Millisecond) // past a third of the queue entry's lease, twice: renewed
			require.NoError(t, l.Close())
			mine := got()
			require.NoError(t, mine.Close())
		},
		"semaphore-fair-contended": func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld) {
			other := g.client(t, "other")
			s, err := other.NewSemaphore("sem", 2)
			require.NoError(t, err)
			a, err := s.Acquire(ctx, dynamolock.WithFairness())
			require.NoError(t, err)
			b, err := s.Acquire(ctx, dynamolock.WithFairness())
			require.NoError(t, err)
			mySem, err := c.NewSemaphore("sem", 2)
			require.NoError(t, err)
			got := g.async(t, func() (*dynamolock.Lock, error) {
				return mySem.Acquire(ctx, dynamolock.WithFairness(), dynamolock.WithRefreshPeriod(100*time.Millisecond))
			})
			g.settle(250 * time.Millisecond)
			require.NoError(t, b.Close()) // the slot beside the queue's item frees up
			mine := got()
			require.NoError(t, mine.Close())
			require.NoError(t, a.Close())
		},
		"rwlock-contended": func(t *testing.T, ctx context.Context, c *dynamolock.Client, g *goldenWorld) {
			other := g.client(t, "other")
			orw, err := other.NewRWLock("rw")
			require.NoError(t, err)
			// A writer whose queue entry is renewed while it waits.
			waiter := g.client(t, "waiter", dynamolock.WithLeaseDuration(900*time.Millisecond), dynamolock.WithHeartbeatPeriod(337*time.Millisecond)) // no instant shared with the polls
			rw, err := waiter.NewRWLock("rw")
			require.NoError(t, err)
			r, err := orw.RLock(ctx)
			require.NoError(t, err)
			// A writer waits for the reader, a reader waits behind the writer.
			writer := g.async(t, func() (*dynamolock.Lock, error) {
				return rw.Lock(ctx, dynamolock.WithRefreshPeriod(100*time.Millisecond))
			})
			g.settle(250 * time.Millisecond)
			reader := g.async(t, func() (*dynamolock.Lock, error) {
				return orw.RLock(ctx, dynamolock.WithRefreshPeriod(130*time.Millisecond))
			})
			g.settle(250 * time.Millisecond)
			require.NoError(t, r.Close())
			w := writer()
			g.settle(250 * time.Millisecond)
			require.NoError(t, w.Close())
			r = reader()
			require.NoError(t, r.Close())
		},
	}
	for _, session := range []bool{false, true} {
		for _, name := range slices.Sorted(maps.Keys(scenarios)) {
			run := scenarios[name]
			if session {
				name += "-session"
			}
			t.Run(name, func(t *testing.T) {
				drawMu.Lock()
				draws = 0 // each scenario draws the same, whatever ran before
				drawMu.Unlock()
				synctest.Test(t, func(t *testing.T) {
					log := &requestLog{}
					db := faults.Wrap(dynamolocktest.New().Conn(), log.rules()...)
					// No background heartbeat falls due while a scenario runs.
					opts := []dynamolock.ClientOption{dynamolock.WithOwnerName("owner"),
						dynamolock.WithLeaseDuration(time.Hour), dynamolock.WithHeartbeatPeriod(20 * time.Minute)}
					if session {
						opts = append(opts, dynamolock.WithSession())
					}
					c, err := dynamolock.New(db, "locks", opts...)
					require.NoError(t, err)
					ctx := context.Background()
					_, err = c.CreateTableWithContext(ctx, "locks")
					require.NoError(t, err)
					g := &goldenWorld{db: db, opts: opts}
					run(t, ctx, c, g)
					require.NoError(t, c.Close())
					for _, o := range g.others {
						require.NoError(t, o.Close())
					}
					path := filepath.Join("testdata", "requests", name+".golden")
					got := log.text()
					if *goldenUpdate {
						require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
						require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
						return
					}
					want, err := os.ReadFile(path)
					require.NoError(t, err, "no golden file: run go test -run TestGoldenRequests . -golden.update")
					require.Equal(t, string(want), got, "the requests of %s changed: if on purpose, run go test -run TestGoldenRequests . -golden.update and review the diff", name)
				})
			})
		}
	}
}

// goldenWorld is what a contended scenario needs beside its client: more
// clients on the same recorded connection, waits that end only when every
// goroutine of the bubble is blocked (so the order of requests is the same
// on every run), and a lost answer.
type goldenWorld struct {
	db     *faults.Client
	opts   []dynamolock.ClientOption
	others []*dynamolock.Client
}

// client is another client on the recorded connection, with the scenario's
// options (its session too), the owner name and extra after them.
func (g *goldenWorld) client(t *testing.T, owner string, extra ...dynamolock.ClientOption) *dynamolock.Client {
	t.Helper()
	opts := append(slices.Clone(g.opts), dynamolock.WithOwnerName(owner))
	c, err := dynamolock.New(g.db, "locks", append(opts, extra...)...)
	require.NoError(t, err)
	g.others = append(g.others, c)
	return c
}

// async runs acquire in a goroutine of the bubble, and lets it run until it
// blocks; the function returned waits for its lock (in the test's
// goroutine, which fails the test if acquire failed).
func (g *goldenWorld) async(t *testing.T, acquire func() (*dynamolock.Lock, error)) func() *dynamolock.Lock {
	type result struct {
		l   *dynamolock.Lock
		err error
	}
	ch := make(chan result, 1)
	go func() {
		l, err := acquire()
		ch <- result{l, err}
	}()
	synctest.Wait()
	return func() *dynamolock.Lock {
		r := <-ch
		require.NoError(t, r.err)
		return r.l
	}
}

// settle lets d of virtual time pass, every goroutine of the bubble
// blocked at its end.
func (g *goldenWorld) settle(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// loseAnswer makes the next acquiring write of key land and lose its
// answer.
func (g *goldenWorld) loseAnswer(key string) {
	g.db.Add(&faults.Rule{Op: "UpdateItem", Times: 1, LoseAnswer: true, Match: func(in any) bool {
		u, ok := in.(*dynamodb.UpdateItemInput)
		if !ok || u.ReturnValues != types.ReturnValueAllOld {
			return false
		}
		pk, _ := u.Key["key"].(*types.AttributeValueMemberS)
		return pk != nil && pk.Value == key
	}})
}
