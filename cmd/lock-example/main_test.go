//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// These tests build lock-example and run it as separate processes against
// DynamoDB Local ($DYNAMODB_ENDPOINT, or one started for the run).

var (
	binPath string // the lock-example binary under test
	// plainBinPath is lock-example built without -race, as users run it:
	// the tests of how long runs take use it (a race-built binary starts
	// several times slower, and a run starts three of them).
	plainBinPath string
	endpoint     string           // DynamoDB Local
	db           *dynamodb.Client // for setting up and inspecting tables
)

var leakOptions = []goleak.Option{
	goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
}

func TestMain(m *testing.M) { os.Exit(testMain(m)) }

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "lock-example-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	binPath = filepath.Join(dir, "lock-example")
	args := []string{"build", "-o", binPath}
	if raceEnabled() {
		args = append(args, "-race")
	}
	if out, err := exec.Command("go", append(args, ".")...).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: building lock-example: %v\n%s", err, out)
		return 1
	}
	plainBinPath = binPath
	if raceEnabled() {
		plainBinPath = filepath.Join(dir, "lock-example-plain")
		if out, err := exec.Command("go", "build", "-o", plainBinPath, ".").CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "FAIL: building lock-example: %v\n%s", err, out)
			return 1
		}
	}

	ctx := context.Background()
	ep, stop, err := ddblocal.Endpoint(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "FAIL: lock-example's tests need Amazon DynamoDB Local:", err)
		return 1
	}
	endpoint = ep
	if db, err = ddblocal.NewClient(ctx, ep); err != nil {
		stop()
		fmt.Fprintln(os.Stderr, "FAIL:", err)
		return 1
	}
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(leakOptions...); err != nil {
			fmt.Fprintln(os.Stderr, "FAIL: goroutines leaked:", err)
			code = 1
		}
	}
	return code
}

// raceEnabled reports whether this test binary was built with -race; the
// binary under test is built the same way.
func raceEnabled() bool {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return false
	}
	for _, s := range bi.Settings {
		if s.Key == "-race" && s.Value == "true" {
			return true
		}
	}
	return false
}

// childEnv is the environment of every lock-example run: this one without
// anything that could point it at AWS, plus the DynamoDB Local endpoint.
func childEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AWS_") && !strings.HasPrefix(kv, "DYNAMODB_ENDPOINT=") {
			env = append(env, kv)
		}
	}
	// No instance-metadata lookups, and no shared AWS files of this machine.
	env = append(env, "DYNAMODB_ENDPOINT="+endpoint, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	// A binary built with -race sleeps 1s when it exits (GORACE's
	// atexit_sleep_ms); lock-example waits for its guardian and witness to
	// exit, so that sleep would be added to every run's times.
	return append(env, "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
}

// proc is one lock-example process.
type proc struct {
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	started        time.Time
	done           chan struct{}
	code           int
	elapsed        time.Duration
}

// startTool runs lock-example with args in the background.
func startTool(t *testing.T, args ...string) *proc {
	t.Helper()
	return startToolEnv(t, nil, args...)
}

// startToolEnv is startTool with extra environment variables.
func startToolEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	return startToolAttr(t, env, nil, args...)
}

// startPlainEnv is startToolEnv with the binary built without -race
// (plainBinPath): for the tests of how long a run takes to start.
func startPlainEnv(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(plainBinPath, args...)
	cmd.Env = append(childEnv(), env...)
	return startProc(t, cmd, func(p *proc) { _ = p.cmd.Process.Kill() })
}

// startToolAttr is startToolEnv with process attributes (Setpgid: as a
// shell with job control starts a job).
func startToolAttr(t *testing.T, env []string, attr *syscall.SysProcAttr, args ...string) *proc {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(childEnv(), env...)
	cmd.SysProcAttr = attr
	return startProc(t, cmd, func(p *proc) { _ = p.cmd.Process.Kill() })
}

// startProc starts cmd in the background; kill ends it at the test's end
// if it is still running.
func startProc(t *testing.T, cmd *exec.Cmd, kill func(*proc)) *proc {
	t.Helper()
	p := &proc{cmd: cmd, done: make(chan struct{})}
	// A process left behind holding stdout must not keep Wait waiting.
	p.cmd.WaitDelay = 2 * time.Second
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		p.elapsed = time.Since(p.started)
		p.code = p.cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			p.code = -1000
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			kill(p)
			<-p.done
		}
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("lock-example %q did not exit; stderr:\n%s", p.cmd.Args[1:], p.stderr.String())
	}
	return p.code
}

// waitExit waits until p has exited, at most timeout.
func (p *proc) waitExit(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(timeout):
		t.Fatalf("lock-example %q did not exit within %s; stderr:\n%s", p.cmd.Args[1:], timeout, p.stderr.String())
	}
	return p.code
}

// runTool runs lock-example with args to the end.
func runTool(t *testing.T, args ...string) *proc {
	t.Helper()
	p := startTool(t, args...)
	p.wait(t)
	return p
}

func wantCode(t *testing.T, p *proc, want int) {
	t.Helper()
	if p.code != want {
		t.Fatalf("lock-example %q exited with %d, want %d\nstdout:\n%s\nstderr:\n%s",
			p.cmd.Args[1:], p.code, want, p.stdout.String(), p.stderr.String())
	}
}

// waitFor polls cond until it holds, or fails the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func fileHas(path, s string) func() bool {
	return func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), s)
	}
}

// newTable creates a lock table for one test and deletes it afterwards.
func newTable(t *testing.T) string {
	t.Helper()
	name := tableName(t)
	c, err := dynamolock.New(db, name, dynamolock.DisableHeartbeat())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	return name
}

// tableName returns a fresh table name that is deleted after the test.
func tableName(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("lockexample-%d", rand.Uint64())
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// hold acquires key in table from this test process, as another host would.
func hold(t *testing.T, table, key string, lease time.Duration) (*dynamolock.Client, *dynamolock.Lock) {
	t.Helper()
	return acquireAs(t, table, key, lease, dynamolock.FailIfLocked())
}

// takeOver acquires key as another host would, waiting for a holder that
// stopped renewing it.
func takeOver(t *testing.T, table, key string, lease time.Duration) (*dynamolock.Client, *dynamolock.Lock) {
	t.Helper()
	return acquireAs(t, table, key, lease, dynamolock.WithAdditionalTimeToWaitForLock(20*time.Second))
}

func acquireAs(t *testing.T, table, key string, lease time.Duration, opt dynamolock.AcquireLockOption) (*dynamolock.Client, *dynamolock.Lock) {
	t.Helper()
	c, err := dynamolock.New(db, table, dynamolock.WithOwnerName("other-host"),
		dynamolock.WithLeaseDuration(lease), dynamolock.WithHeartbeatPeriod(lease/4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	l, err := c.AcquireLockWithContext(context.Background(), key, opt)
	if err != nil {
		t.Fatal(err)
	}
	return c, l
}

// steal overwrites the lock item of key with another owner's, as a buggy
// or misconfigured client might; the holder's next heartbeat finds it.
func steal(t *testing.T, table, key string) {
	t.Helper()
	putLock(t, table, key, "thief", "20s")
}

// putLock writes a held lock item of owner, who does not renew it.
func putLock(t *testing.T, table, key, owner, lease string) {
	t.Helper()
	_, err := db.PutItem(context.Background(), &dynamodb.PutItemInput{
		TableName: aws.String(table),
		Item: map[string]types.AttributeValue{
			"key":                 &types.AttributeValueMemberS{Value: key},
			"ownerName":           &types.AttributeValueMemberS{Value: owner},
			"leaseDuration":       &types.AttributeValueMemberS{Value: lease},
			"recordVersionNumber": &types.AttributeValueMemberS{Value: "rvn-of-" + owner},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// show returns lock-example's JSON view of key.
func show(t *testing.T, table, key string) lockJSON {
	t.Helper()
	p := runTool(t, "--table", table, "show", "--json", key)
	wantCode(t, p, exitOK)
	var l lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &l); err != nil {
		t.Fatalf("show --json: %v\n%s", err, p.stdout.String())
	}
	return l
}

// tryShow is show that reports false when there is no lock item key.
func tryShow(t *testing.T, table, key string) (lockJSON, bool) {
	t.Helper()
	p := runTool(t, "--table", table, "show", "--json", key)
	if p.code == exitNoSuchKey {
		return lockJSON{}, false
	}
	wantCode(t, p, exitOK)
	var l lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &l); err != nil {
		t.Fatalf("show --json: %v\n%s", err, p.stdout.String())
	}
	return l, true
}

// gone reports whether pid has exited (a zombie counts as exited).
func gone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && i+2 < len(s) && (s[i+2] == 'Z' || s[i+2] == 'X')
}

// killOnCleanup SIGKILLs the pids listed in files (one per line, or
// several files) at the end of the test, in case the code under test left
// them running.
func killOnCleanup(t *testing.T, files ...string) {
	t.Cleanup(func() {
		for _, f := range files {
			b, _ := os.ReadFile(f)
			for _, s := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(s); err == nil && pid > 1 {
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
	})
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// Short leases keep the tests short; not so short that a DynamoDB Local
// slowed down by a busy machine loses locks.
var fast = []string{"--lease", "3s", "--heartbeat", "500ms"}

// flagsFor returns the flags for table with fast leases, then extra.
func flagsFor(table string, extra ...string) []string {
	return append(append([]string{"--table", table}, fast...), extra...)
}

// syncBuffer is a bytes.Buffer safe for a writer and concurrent readers.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
