//go:build linux

package dynamolock_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	v5 "github.com/arielsrv/dynamolock/v2/v5compat"
)

// The mixed fleet: worker processes of two kinds, one written against
// dynamolock v5's API (package v5compat) and one against the native API,
// contend for one key; the driver SIGKILLs the holder, a v5-shaped one and
// a native one in turn, and starts another of its kind. Each worker logs
// when it got the lock (and its fencing token) and when it is about to
// release it; a killed worker's hold ends when the driver saw it die. No two
// holds may overlap, and the tokens must grow from one hold to the next.

const (
	fleetWorkerEnv = "DYNAMOLOCK_V5FLEET_WORKER" // kind,table,events file
	fleetKey       = "fleet"
	fleetLease     = time.Second
)

// TestV5FleetWorker is a worker process's body; it runs only under the
// driver (TestV5MixedFleet), which sets fleetWorkerEnv.
func TestV5FleetWorker(t *testing.T) {
	spec := os.Getenv(fleetWorkerEnv)
	if spec == "" {
		t.Skip("a worker of TestV5MixedFleet")
	}
	parts := strings.SplitN(spec, ",", 3)
	require.Len(t, parts, 3)
	kind, table, events := parts[0], parts[1], parts[2]
	f, err := os.OpenFile(events, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	require.NoError(t, err)
	// Each line is one write(2): a SIGKILL keeps every line written before it.
	logLine := func(format string, args ...any) {
		_, err := fmt.Fprintf(f, format+"\n", args...)
		require.NoError(t, err)
	}
	db, err := ddblocal.NewClient(context.Background(), endpoint)
	require.NoError(t, err)
	ctx := context.Background()
	hold := func() time.Duration { return time.Duration(50+rand.IntN(250)) * time.Millisecond }
	// Longer than the waiters' refresh period: the other worker gets its turn.
	pause := func() time.Duration { return time.Duration(150+rand.IntN(150)) * time.Millisecond }
	switch kind {
	case "v5":
		c, err := v5.New(db, table, v5.WithLeaseDuration(fleetLease), v5.WithHeartbeatPeriod(fleetLease/4),
			v5.WithOwnerName(fmt.Sprintf("v5-%d", os.Getpid())))
		require.NoError(t, err)
		for {
			l, err := c.AcquireLock(ctx, fleetKey, v5.WithRefreshPeriod(100*time.Millisecond),
				v5.WithAdditionalTimeToWaitForLock(time.Hour))
			require.NoError(t, err)
			logLine("S %d %d", time.Now().UnixNano(), l.FencingToken())
			time.Sleep(hold())
			if err := l.Err(); err != nil {
				logLine("X %v", err)
				return
			}
			logLine("E %d", time.Now().UnixNano())
			ok, err := c.ReleaseLock(ctx, l)
			require.NoError(t, err)
			require.True(t, ok)
			time.Sleep(pause()) // let a waiter of the other kind in
		}
	case "native":
		c, err := dynamolock.New(db, table, dynamolock.WithLeaseDuration(fleetLease),
			dynamolock.WithHeartbeatPeriod(fleetLease/4), dynamolock.WithOwnerName(fmt.Sprintf("native-%d", os.Getpid())))
		require.NoError(t, err)
		for {
			l, err := c.AcquireLockWithContext(ctx, fleetKey, dynamolock.WithRefreshPeriod(100*time.Millisecond),
				dynamolock.WithAdditionalTimeToWaitForLock(time.Hour))
			require.NoError(t, err)
			logLine("S %d %d", time.Now().UnixNano(), l.FencingToken())
			time.Sleep(hold())
			if err := l.Err(); err != nil {
				logLine("X %v", err)
				return
			}
			logLine("E %d", time.Now().UnixNano())
			require.NoError(t, l.Release(ctx))
			time.Sleep(pause())
		}
	default:
		t.Fatalf("unknown worker kind %q", kind)
	}
}

// fleetProc is a worker process as the driver sees it.
type fleetProc struct {
	kind   string
	events string
	cmd    *exec.Cmd
	done   chan struct{}
	diedAt time.Time // set when done closes
}

func startFleetProc(t *testing.T, dir, table, kind string, n int) *fleetProc {
	t.Helper()
	p := &fleetProc{kind: kind, events: filepath.Join(dir, fmt.Sprintf("%s-%d.events", kind, n)), done: make(chan struct{})}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestV5FleetWorker$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DYNAMODB_ENDPOINT="+endpoint, fleetWorkerEnv+"="+kind+","+table+","+p.events)
	out, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%d.out", kind, n)))
	require.NoError(t, err)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test
	require.NoError(t, ddblocal.StartOwnThread(cmd, func(error) {
		p.diedAt = time.Now()
		_ = out.Close()
		close(p.done)
	}))
	p.cmd = cmd
	return p
}

// kill SIGKILLs p (its own pid only) and waits for it to be reaped.
func (p *fleetProc) kill() {
	_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// fleetHold is one hold of the lock by one worker.
type fleetHold struct {
	who        string
	start, end int64 // unix ns
	token      uint64
}

// holds reads p's events; a hold still open when p died ends at its death,
// and one still open while p lives is returned with end 0.
func (p *fleetProc) holds(t *testing.T) (hs []fleetHold, holding bool) {
	t.Helper()
	f, err := os.Open(p.events)
	if os.IsNotExist(err) {
		return nil, false
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		switch fields[0] {
		case "S":
			if len(fields) < 3 {
				continue // a line cut by the kill
			}
			start, _ := strconv.ParseInt(fields[1], 10, 64)
			token, _ := strconv.ParseUint(fields[2], 10, 64)
			hs = append(hs, fleetHold{who: p.events, start: start, token: token})
		case "E":
			end, _ := strconv.ParseInt(fields[1], 10, 64)
			if len(hs) > 0 && hs[len(hs)-1].end == 0 {
				hs[len(hs)-1].end = end
			}
		case "X":
			t.Errorf("%s: a worker lost its lock: %s", p.events, sc.Text())
		}
	}
	if len(hs) > 0 && hs[len(hs)-1].end == 0 {
		select {
		case <-p.done:
			hs[len(hs)-1].end = p.diedAt.UnixNano()
		default:
			holding = true
		}
	}
	return hs, holding
}

func TestV5MixedFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("worker processes: not with -short")
	}
	table := newTable(t, "")
	dir := t.TempDir()
	kinds := []string{"v5", "native"}
	procs := map[string]*fleetProc{}
	var all []*fleetProc
	n := 0
	start := func(kind string) {
		n++
		p := startFleetProc(t, dir, table, kind, n)
		procs[kind] = p
		all = append(all, p)
	}
	t.Cleanup(func() {
		for _, p := range all {
			p.kill()
		}
	})
	for _, k := range kinds {
		start(k)
	}

	// Kill the holder, of each kind in turn, rounds times, within a bound.
	const rounds = 4
	deadline := time.Now().Add(18 * time.Second)
	for round := 0; round < rounds; round++ {
		kind := kinds[round%2]
		p := procs[kind]
		before := totalHolds(t, all)
		for {
			// The kill comes once the takeover after the last one was
			// followed by plain hand-overs (a release, the other's grant).
			_, holding := p.holds(t)
			if holding && totalHolds(t, all) >= before+3 {
				break
			}
			select {
			case <-p.done:
				dumpFleet(t, all)
				t.Fatalf("worker %s died on its own; its output is in %s", p.events, strings.TrimSuffix(p.events, ".events")+".out")
			default:
			}
			if time.Now().After(deadline) {
				dumpFleet(t, all)
				t.Fatalf("round %d: the %s worker did not get the lock by the deadline", round, kind)
			}
			time.Sleep(20 * time.Millisecond)
		}
		p.kill()
		start(kind)
	}
	// Let the survivors take the key once more after the last kill.
	last := procs[kinds[(rounds-1)%2]]
	other := procs[kinds[rounds%2]]
	waitFor(t, 2*time.Second+3*fleetLease, "a hold after the last kill", func() bool {
		a, _ := last.holds(t)
		b, _ := other.holds(t)
		return len(a)+len(b) > 0
	})
	for _, p := range all {
		p.kill()
	}

	var hs []fleetHold
	byKind := map[string]int{}
	for _, p := range all {
		h, _ := p.holds(t)
		hs = append(hs, h...)
		byKind[p.kind] += len(h)
	}
	slices.SortFunc(hs, func(a, b fleetHold) int { return int(a.start - b.start) })
	require.NotEmpty(t, hs)
	for i := 1; i < len(hs); i++ {
		prev, cur := hs[i-1], hs[i]
		require.GreaterOrEqual(t, cur.start, prev.end, "hold %d (%s) began at %d, before hold %d (%s) ended at %d",
			i, cur.who, cur.start, i-1, prev.who, prev.end)
		require.Greater(t, cur.token, prev.token, "fencing token of hold %d (%s) not above hold %d's (%s)", i, cur.who, i-1, prev.who)
	}
	require.Positive(t, byKind["v5"], "the v5-shaped workers held the lock")
	require.Positive(t, byKind["native"], "the native workers held the lock")
	t.Logf("%d holds (%d v5-shaped, %d native), %d workers SIGKILLed while holding", len(hs), byKind["v5"], byKind["native"], rounds)
}

// dumpFleet logs every worker's events and output, for a failure.
func dumpFleet(t *testing.T, all []*fleetProc) {
	t.Helper()
	for _, p := range all {
		ev, _ := os.ReadFile(p.events)
		out, _ := os.ReadFile(strings.TrimSuffix(p.events, ".events") + ".out")
		t.Logf("%s:\n%s\noutput:\n%s", p.events, ev, out)
	}
}

func totalHolds(t *testing.T, all []*fleetProc) int {
	t.Helper()
	n := 0
	for _, p := range all {
		h, _ := p.holds(t)
		n += len(h)
	}
	return n
}
