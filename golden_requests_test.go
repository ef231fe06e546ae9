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
	scenarios := map[string]func(t *testing.T, ctx context.Context, c *dynamolock.Client){
		"single": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
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
		"multi": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
			locks, err := c.AcquireLocks(ctx, []string{"a", "b"})
			require.NoError(t, err)
			for _, l := range locks {
				require.NoError(t, l.Close())
			}
		},
		"semaphore": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
			s, err := c.NewSemaphore("sem", 2)
			require.NoError(t, err)
			a, err := s.Acquire(ctx)
			require.NoError(t, err)
			b, err := s.Acquire(ctx)
			require.NoError(t, err)
			require.NoError(t, a.Close())
			require.NoError(t, b.Close())
		},
		"election": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
			e := c.NewElection("leader")
			_, err := e.Campaign(ctx, []byte("me"))
			require.NoError(t, err)
			_, err = e.Leader(ctx)
			require.NoError(t, err)
			require.NoError(t, e.Resign(ctx))
		},
		"rwlock": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
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
		"fair": func(t *testing.T, ctx context.Context, c *dynamolock.Client) {
			l, err := c.AcquireLockWithContext(ctx, "f", dynamolock.WithFairness())
			require.NoError(t, err)
			require.NoError(t, l.Close())
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
					run(t, ctx, c)
					require.NoError(t, c.Close())
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
