//go:build unix

package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestNeverOverlap runs several lock-example processes at once on one lock,
// each running a job that notices whether another job runs at the same time
// (mkdir of a shared directory is atomic). They create the table together.
func TestNeverOverlap(t *testing.T) {
	t.Parallel()
	table := tableName(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	job := `mkdir "$D/held" 2>/dev/null || echo OVERLAP >>"$D/log"
echo "start $DYNAMOLOCK_FENCING_TOKEN" >>"$D/log"
sleep 0.3
echo "end $DYNAMOLOCK_FENCING_TOKEN" >>"$D/log"
rmdir "$D/held"`
	const n = 4
	procs := make([]*proc, n)
	for i := range procs {
		procs[i] = startTool(t, flagsFor(table, "--create-table", "--wait-for-lock", "--timeout", "30s",
			"job", "sh", "-c", "D="+dir+"\n"+job)...)
	}
	for _, p := range procs {
		p.wait(t)
		wantCode(t, p, exitOK)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2*n {
		t.Fatalf("want %d lines, got:\n%s", 2*n, b)
	}
	var prev uint64
	for i := 0; i < n; i++ {
		start, end := lines[2*i], lines[2*i+1]
		token, err := strconv.ParseUint(strings.TrimPrefix(start, "start "), 10, 64)
		if err != nil || end != "end "+strconv.FormatUint(token, 10) {
			t.Fatalf("runs overlapped:\n%s", b)
		}
		// Each run's fencing token is one more than the previous run's.
		if i > 0 && token != prev+1 {
			t.Fatalf("fencing tokens do not go up by one:\n%s", b)
		}
		prev = token
	}
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		env  []string
		want int
	}{
		{"success", flagsFor(table, "ok", "true"), nil, 0},
		{"child's own code", flagsFor(table, "own-code", "sh", "-c", "exit 7"), nil, 7},
		{"child killed by a signal", flagsFor(table, "killed", "sh", "-c", "kill -KILL $$"), nil, 128 + 9},
		{"command not found", flagsFor(table, "not-found", "no-such-command-here"), nil, exitNotFound},
		{"command not executable", flagsFor(table, "not-exec", notExec), nil, exitCannotRun},
		{"no command", flagsFor(table, "lonely"), nil, exitSetup},
		{"no arguments", nil, nil, exitSetup},
		{"unknown flag", []string{"--no-such-flag", "k", "true"}, nil, exitSetup},
		{"bad duration", []string{"--lease", "soon", "k", "true"}, nil, exitSetup},
		{"heartbeat over half the lease", flagsFor(table, "--heartbeat", "2s", "k", "true"), nil, exitSetup},
		{"bad sort key", flagsFor(table, "--sort-key", "novalue", "k", "true"), nil, exitSetup},
		{"missing table", flagsFor("no-such-table", "k", "true"), nil, exitSetup},
		{"subcommand with a command", flagsFor(table, "list", "true"), nil, exitSetup},
		{"lock named like a subcommand", flagsFor(table, "--", "list", "true"), nil, exitOK},
		{"help", []string{"--help"}, nil, exitOK},
		{"bad endpoint", flagsFor(table, "k", "true"), []string{"DYNAMODB_ENDPOINT=not a url"}, exitSetup},
		{"no credentials for AWS", flagsFor(table, "k", "true"), []string{"DYNAMODB_ENDPOINT="}, exitSetup},
		{"DynamoDB unreachable", flagsFor(table, "k", "true"), []string{"DYNAMODB_ENDPOINT=http://127.0.0.1:1"}, exitSetup},
		{"DynamoDB unreachable while waiting", flagsFor(table, "--timeout", "1s", "k", "true"),
			[]string{"DYNAMODB_ENDPOINT=http://127.0.0.1:1"}, exitSetup},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := startToolEnv(t, tt.env, tt.args...)
			p.wait(t)
			wantCode(t, p, tt.want)
		})
	}

	t.Run("busy", func(t *testing.T) {
		t.Parallel()
		hold(t, table, "busy", 3*time.Second)
		p := runTool(t, flagsFor(table, "busy", "true")...)
		wantCode(t, p, exitBusy)
		if !strings.Contains(p.stderr.String(), `"other-host"`) {
			t.Errorf("stderr does not name the holder:\n%s", p.stderr.String())
		}
		// DynamoDB Local's answer to the failed condition must not make
		// the SDK warn about its checksum.
		if strings.Contains(p.stderr.String(), "checksum") {
			t.Errorf("stderr has the SDK's checksum warning:\n%s", p.stderr.String())
		}
	})
	t.Run("timeout", func(t *testing.T) {
		t.Parallel()
		// The library alone would wait for the holder's lease (10s) plus
		// the additional time; --timeout must cut that short, exactly.
		hold(t, table, "timeout", 10*time.Second)
		p := runTool(t, flagsFor(table, "--timeout", "1s", "timeout", "true")...)
		wantCode(t, p, exitBusy)
		if p.elapsed < time.Second || p.elapsed > 5*time.Second {
			t.Errorf("gave up after %s, want 1s plus start-up", p.elapsed)
		}
	})
	t.Run("wait until released", func(t *testing.T) {
		t.Parallel()
		c, l := hold(t, table, "released-later", 3*time.Second)
		p := startTool(t, flagsFor(table, "--verbose", "--wait-for-lock", "released-later", "true")...)
		waitFor(t, 10*time.Second, "lock-example to wait", func() bool {
			return strings.Contains(p.stderr.String(), "taking lock")
		})
		if _, err := c.ReleaseLock(l); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		wantCode(t, p, exitOK)
	})
	t.Run("interrupted while waiting", func(t *testing.T) {
		t.Parallel()
		hold(t, table, "interrupted", 3*time.Second)
		p := startTool(t, flagsFor(table, "--verbose", "--wait-for-lock", "interrupted", "true")...)
		waitFor(t, 10*time.Second, "lock-example to wait", func() bool {
			return strings.Contains(p.stderr.String(), "taking lock")
		})
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		p.wait(t)
		wantCode(t, p, 128+int(syscall.SIGINT))
	})
}

// TestLockLost steals the lock while the command runs: the command's whole
// process group gets SIGTERM (SIGKILL after --kill-grace if it ignores it)
// and lock-example exits with 76.
func TestLockLost(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	tests := []struct {
		name     string
		trap     string // how the job's shell handles SIGTERM
		minAfter time.Duration
	}{
		{"command stops on SIGTERM", `trap 'echo TERM >>"$D/log"; exit 0' TERM`, 0},
		{"command ignores SIGTERM", `trap '' TERM`, time.Second},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := fmt.Sprintf("lost-%d", i)
			dir := t.TempDir()
			// A background grandchild must be stopped too.
			job := tt.trap + `
sleep 300 & echo $! >"$D/grandchild"
echo $$ >"$D/pid"
while :; do sleep 0.05; done`
			p := startTool(t, flagsFor(table, "--kill-grace", "1s", key, "sh", "-c", "D="+dir+"\n"+job)...)
			pidFile := filepath.Join(dir, "pid")
			waitFor(t, 10*time.Second, "the job to start", fileHas(pidFile, "\n"))
			pid, grandchild := readPID(t, pidFile), readPID(t, filepath.Join(dir, "grandchild"))
			stolen := time.Now()
			steal(t, table, key)
			p.wait(t)
			wantCode(t, p, exitLockLost)
			if after := time.Since(stolen); after < tt.minAfter {
				t.Errorf("exited %s after the steal, want at least the kill grace %s", after, tt.minAfter)
			}
			if tt.minAfter == 0 && !fileHas(filepath.Join(dir, "log"), "TERM")() {
				t.Error("the job did not get SIGTERM")
			}
			waitFor(t, 5*time.Second, "the job and its child to exit", func() bool { return gone(pid) && gone(grandchild) })
			if !strings.Contains(p.stderr.String(), "lock lost") {
				t.Errorf("stderr does not say the lock was lost:\n%s", p.stderr.String())
			}
			if l := show(t, table, key); l.Owner != "thief" {
				t.Errorf("the thief's item was changed: %+v", l)
			}
		})
	}
}

// TestSignalsForwarded sends SIGINT and SIGTERM to lock-example while the
// command runs: the command gets them and lock-example exits with its code.
func TestSignalsForwarded(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			key := "signal-" + strconv.Itoa(int(sig))
			dir := t.TempDir()
			job := `trap 'echo got INT >"$D/log"; exit 3' INT
trap 'echo got TERM >"$D/log"; exit 3' TERM
echo ready >"$D/ready"
while :; do sleep 0.05; done`
			p := startTool(t, flagsFor(table, "--release-on-error", key, "sh", "-c", "D="+dir+"\n"+job)...)
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "ready"), "ready"))
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			wantCode(t, p, 3)
			name := map[syscall.Signal]string{syscall.SIGINT: "INT", syscall.SIGTERM: "TERM"}[sig]
			if !fileHas(filepath.Join(dir, "log"), "got "+name)() {
				t.Errorf("the job did not get SIG%s", name)
			}
			if l := show(t, table, key); !l.Released {
				t.Errorf("--release-on-error: lock not released: %+v", l)
			}
		})
	}
}

// TestInterruptedJobReleasesAtOnce: a job ended by SIGINT or SIGTERM sent to
// lock-example (Ctrl-C) is not a failure to hold the lock against: once no
// process of its group is left, the lock is released at once and the
// message says so. Before, it was kept one more lease (issue 22). A child
// the job leaves behind keeps the lock until it is gone.
func TestInterruptedJobReleasesAtOnce(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	const lease = 4 * time.Second
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			key := "interrupted-" + strconv.Itoa(int(sig))
			dir := t.TempDir()
			killOnCleanup(t, filepath.Join(dir, "bg"))
			// On the signal the job leaves a child in its group, which
			// ignores SIGTERM: it dies by SIGKILL after --kill-grace.
			job := `trap '(trap "" TERM; sleep 300) & echo $! >"$D/bg"; exit 3' INT TERM
echo ready >"$D/ready"
while :; do sleep 0.05; done`
			p := startTool(t, "--table", table, "--lease", lease.String(), "--heartbeat", "500ms", "--kill-grace", "500ms",
				key, "sh", "-c", "D="+dir+"\n"+job)
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "ready"), "ready"))
			sent := time.Now()
			if err := p.cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			p.wait(t)
			took := time.Since(sent)
			wantCode(t, p, 3)
			if bg := readPID(t, filepath.Join(dir, "bg")); !gone(bg) {
				t.Errorf("the job's child %d outlived lock-example", bg)
			}
			if took >= lease {
				t.Errorf("lock-example exited %s after the signal: the lock was kept for a lease", took)
			}
			if s := p.stderr.String(); !strings.Contains(s, "no process of its group is left: releasing lock") ||
				strings.Contains(s, "keeping lock") {
				t.Errorf("stderr does not say the lock is released at once:\n%s", s)
			}
			if l := show(t, table, key); !l.Released {
				t.Errorf("lock not released: %+v", l)
			}
		})
	}
}

// TestRelease checks what is left in the table after a run.
func TestRelease(t *testing.T) {
	t.Parallel()
	table := newTable(t)

	t.Run("success releases, data stays", func(t *testing.T) {
		t.Parallel()
		wantCode(t, runTool(t, flagsFor(table, "--data", "built by host-a", "--owner", "host-a", "data", "true")...), exitOK)
		l := show(t, table, "data")
		if !l.Released || string(l.Data) != "built by host-a" || l.DataSize != len("built by host-a") ||
			l.Owner != "host-a" || l.FencingToken == 0 {
			t.Errorf("after a successful run: %+v", l)
		}
		// The next run acquires at once and replaces the data.
		wantCode(t, runTool(t, flagsFor(table, "data", "true")...), exitOK)
		if l2 := show(t, table, "data"); l2.FencingToken != l.FencingToken+1 || l2.DataSize != 0 {
			t.Errorf("after a second run: %+v", l2)
		}
	})
	t.Run("failure with --release-on-error releases", func(t *testing.T) {
		t.Parallel()
		wantCode(t, runTool(t, flagsFor(table, "--release-on-error", "failed", "sh", "-c", "exit 1")...), 1)
		if l := show(t, table, "failed"); !l.Released {
			t.Errorf("--release-on-error: lock not released: %+v", l)
		}
	})
}
