//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// leaderJob logs its start and end with its fencing token, and stops on
// SIGTERM.
const leaderJob = `trap 'echo "$WHO $$ end $(date +%s%N) $DYNAMOLOCK_FENCING_TOKEN" >>"$D/log"; exit 0' TERM
echo "$WHO $$ start $(date +%s%N) $DYNAMOLOCK_FENCING_TOKEN" >>"$D/log"
echo $$ >>"$D/pids"
while :; do sleep 0.05; done`

// term is one run of a leader's command, from its log.
type term struct {
	who        string
	start, end int64
	token      uint64
}

func readTerms(t *testing.T, path string) []term {
	t.Helper()
	var terms []term
	open := map[string]int{} // pid → index
	for _, line := range strings.Split(strings.TrimSpace(readLog(path)), "\n") {
		f := strings.Fields(line)
		if len(f) != 5 {
			t.Fatalf("bad log line %q", line)
		}
		ns, _ := strconv.ParseInt(f[3], 10, 64)
		tok, _ := strconv.ParseUint(f[4], 10, 64)
		switch f[2] {
		case "start":
			open[f[1]] = len(terms)
			terms = append(terms, term{who: f[0], start: ns, token: tok})
		case "end":
			terms[open[f[1]]].end = ns
		}
	}
	return terms
}

// queuedCandidate reports whether a candidate waits in the election's queue.
func queuedCandidate(table, name string) bool {
	out, err := db.GetItem(context.Background(), &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: name}}})
	if err != nil {
		return false
	}
	q, ok := out.Item["fairQueue"].(*types.AttributeValueMemberM)
	return ok && len(q.Value) > 0
}

// gateProxy forwards connections to DynamoDB Local until it is closed,
// and again once it is opened: a network cut that heals.
type gateProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	shut  bool
	conns []net.Conn
	wg    sync.WaitGroup
}

func newGateProxy(t *testing.T) *gateProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &gateProxy{ln: ln}
	target := strings.TrimPrefix(endpoint, "http://")
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			shut := p.shut
			p.mu.Unlock()
			if shut {
				c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		p.cut()
		ln.Close()
		p.wg.Wait()
	})
	return p
}

func (p *gateProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// cut breaks every open connection and refuses new ones until heal.
func (p *gateProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.shut = true
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *gateProxy) heal() {
	p.mu.Lock()
	p.shut = false
	p.mu.Unlock()
}

// Leader mode: the command runs while its lock-example leads; when A is
// cut off from DynamoDB, its command is stopped before its lease runs out
// and B's runs once B has taken the lease over; when B's ends (it resigns),
// A, healed, leads again and runs its command again, with a higher
// fencing token. The commands never run at once.
func TestLeaderRunsTheCommandWhileLeadingAndAgain(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	table := newTable(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	killOnCleanup(t, filepath.Join(dir, "pids"))
	proxy := newGateProxy(t)
	timing := []string{"--table", table, "--lease", "3s", "--heartbeat", "500ms", "--kill-grace", "500ms"}
	leader := func(who string, env []string) *proc {
		return startToolEnv(t, env, append(append([]string{}, timing...), "--owner", who, "leader", "svc",
			"bash", "-c", fmt.Sprintf("WHO=%s D=%s\n%s", who, dir, leaderJob))...)
	}
	a := leader("A", []string{"DYNAMODB_ENDPOINT=" + proxy.endpoint()})
	waitFor(t, 15*time.Second, "A's command", fileHas(log, "A "))
	b := leader("B", nil)
	waitFor(t, 15*time.Second, "B waiting", func() bool { return queuedCandidate(table, "svc") })

	proxy.cut()
	waitFor(t, 20*time.Second, "B's command", fileHas(log, "B "))
	proxy.heal()

	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := b.waitExit(t, 15*time.Second); code != exitOK {
		t.Fatalf("B exited with %d\nstderr:\n%s", code, b.stderr.String())
	}
	waitFor(t, 20*time.Second, "A's command again", func() bool { return strings.Count(readLog(log), "A ") >= 3 })
	if err := a.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := a.waitExit(t, 15*time.Second); code != exitOK {
		t.Fatalf("A exited with %d\nstderr:\n%s", code, a.stderr.String())
	}

	terms := readTerms(t, log)
	var who []string
	for _, tm := range terms {
		who = append(who, tm.who)
	}
	if strings.Join(who, " ") != "A B A" {
		t.Fatalf("terms %v, want A, B, A\nlog:\n%s\nA's stderr:\n%s\nB's stderr:\n%s", who, readLog(log), a.stderr.String(), b.stderr.String())
	}
	for i, tm := range terms {
		if tm.end == 0 {
			t.Fatalf("term %d of %s logged no end", i, tm.who)
		}
		if i > 0 {
			prev := terms[i-1]
			if tm.token <= prev.token {
				t.Errorf("term %d of %s has fencing token %d after %d", i, tm.who, tm.token, prev.token)
			}
			if tm.start < prev.end {
				t.Errorf("term %d of %s started %s before %s's ended", i, tm.who, time.Duration(prev.end-tm.start), prev.who)
			}
		}
	}
	t.Logf("hand-overs: A→B %s after A's command ended, B→A %s", time.Duration(terms[1].start-terms[0].end).Round(time.Millisecond),
		time.Duration(terms[2].start-terms[1].end).Round(time.Millisecond))
	if !strings.Contains(a.stderr.String(), `leadership of "svc" lost`) {
		t.Errorf("A does not say it lost leadership:\n%s", a.stderr.String())
	}
}

// Leader mode's usage errors, before any DynamoDB call.
func TestLeaderUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"leader", "svc"},
		{"leader", "--shared", "svc", "true"},
		{"--limit", "2", "leader", "svc", "true"},
		{"leader", "--timeout", "1s", "svc", "true"},
		{"--hold-at-least", "1m", "leader", "svc", "true"},
	} {
		p := runTool(t, args...)
		wantCode(t, p, exitSetup)
		if !strings.Contains(p.stderr.String(), "leader") {
			t.Errorf("%q: the message does not name leader mode:\n%s", args, p.stderr.String())
		}
	}
}
