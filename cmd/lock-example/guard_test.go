//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests try, with real processes, the ways a job could run in two
// places at once: lock-example killed, a job stopped with Ctrl-Z, a lease
// running out under a command slow to die, and a failed run's lock.

// TestKilledLockExampleKillsJob: SIGKILL of lock-example must take every
// process of the job with it (a shell and its background children), before
// a waiting run elsewhere can take the lock.
func TestKilledLockExampleKillsJob(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	killOnCleanup(t, pids)
	job := `sleep 103 & echo $! >>"$D/pids"
echo $$ >>"$D/pids"
sh -c 'sleep 104 & echo $! >>"$D/pids"; echo $$ >>"$D/pids"; wait' &
echo ready >"$D/ready"
wait`
	a := startTool(t, flagsFor(table, "--owner", "host-a", "k", "sh", "-c", "export D="+dir+"\n"+job)...)
	waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "ready"), "ready"))
	waitFor(t, 5*time.Second, "four pids", func() bool {
		b, _ := os.ReadFile(pids)
		return len(strings.Fields(string(b))) == 4
	})
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 2*time.Second, "every process of the job to be gone", func() bool {
		for _, pid := range readPIDs(t, pids) {
			if !gone(pid) {
				return false
			}
		}
		return true
	})
	t.Logf("job gone %s after SIGKILL of lock-example", time.Since(killed).Round(time.Millisecond))
	a.wait(t)
	// Another host, waiting for the lock, checks that nothing of the job
	// runs when it gets the lock.
	check := `for p in $(cat "$D/pids"); do kill -0 "$p" 2>/dev/null && echo "ALIVE $p"; done; echo checked`
	b := startTool(t, flagsFor(table, "--owner", "host-b", "--wait-for-lock", "--timeout", "20s", "k", "sh", "-c", "D="+dir+"\n"+check)...)
	b.wait(t)
	wantCode(t, b, exitOK)
	if out := b.stdout.String(); strings.Contains(out, "ALIVE") || !strings.Contains(out, "checked") {
		t.Errorf("the next holder found the job running:\n%s", out)
	}
}

// TestNormalExitWaitsForGroup: a command that exits leaving a background
// child in its group does not release the lock while that child runs.
func TestNormalExitWaitsForGroup(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	killOnCleanup(t, filepath.Join(dir, "bg"))
	job := `sleep 300 & echo $! >"$D/bg"`
	p := runTool(t, flagsFor(table, "--kill-grace", "500ms", "k", "sh", "-c", "D="+dir+"\n"+job)...)
	wantCode(t, p, exitOK)
	bg := readPID(t, filepath.Join(dir, "bg"))
	if !gone(bg) {
		t.Fatalf("the job's background child %d still runs after lock-example exited", bg)
	}
	if !strings.Contains(p.stderr.String(), "processes of its group still run") {
		t.Errorf("stderr does not say that the group was stopped:\n%s", p.stderr.String())
	}
	if l := show(t, table, "k"); !l.Released {
		t.Errorf("lock not released: %+v", l)
	}
}

// jobScript is a bash job that ticks until the file "end" exists. It forks
// nothing: a Ctrl-Z landing while a shell waits for a vfork child that has
// not yet executed stops the child and leaves the shell unstoppable (the
// same without lock-example), which would make these tests flaky. read -t
// on the fifo "tick" (opened read-write: it never ends) is its sleep.
const jobScript = `echo $$ >"$D/pid"
while [ ! -e "$D/end" ]; do echo tick >>"$D/log"; read -r -t 0.05 _ <>"$D/tick"; done
echo job-done`

// jobDir returns a directory for jobScript, with its fifo.
func jobDir(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	dir := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(dir, "tick"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestCtrlZWithoutTerminal: lock-example runs as a job of a shell with job
// control, its stdin not a terminal, so Ctrl-Z sends SIGTSTP to
// lock-example's process group. The command and lock-example must stop
// together; a continue lets the command run again only if the lock is
// still held.
func TestCtrlZWithoutTerminal(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	for _, tt := range []struct {
		name     string
		takeover bool // another host takes the lock while the job is stopped
	}{
		{"continued", false},
		{"lock taken while stopped", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := "ctrl-z-" + strings.ReplaceAll(tt.name, " ", "-")
			dir := jobDir(t)
			killOnCleanup(t, filepath.Join(dir, "pid"))
			p := startToolAttr(t, nil, &syscall.SysProcAttr{Setpgid: true},
				flagsFor(table, "--verbose", key, "bash", "-c", "D="+dir+"\n"+jobScript)...)
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
			job := readPID(t, filepath.Join(dir, "pid"))
			lockExample := p.cmd.Process.Pid

			// The terminal's Ctrl-Z: SIGTSTP to lock-example's group.
			if err := syscall.Kill(-lockExample, syscall.SIGTSTP); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !allStopped(job) || !stopped(lockExample) {
				if time.Now().After(deadline) {
					t.Fatalf("the job's group and lock-example did not stop: %s\nstderr:\n%s",
						describe(append([]int{lockExample}, groupMembers(job)...)), p.stderr.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
			if tt.takeover {
				// Seen unchanged for its lease (3s), the lock is taken over.
				takeOver(t, table, key, 3*time.Second)
			}
			// The shell's fg or bg: SIGCONT to lock-example's group.
			if err := syscall.Kill(-lockExample, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			if tt.takeover {
				p.waitExit(t, 10*time.Second)
				wantCode(t, p, exitLockLost)
				waitFor(t, 2*time.Second, "the job to be killed", func() bool { return len(groupMembers(job)) == 0 })
				return
			}
			size := func() int64 { return fileSize(filepath.Join(dir, "log")) }
			before := size()
			waitFor(t, 5*time.Second, "the job to run again", func() bool { return size() > before })
			writeFile(t, dir, "end")
			p.waitExit(t, 10*time.Second)
			wantCode(t, p, exitOK)
			if !strings.Contains(p.stdout.String(), "job-done") {
				t.Errorf("the job did not finish:\n%s", p.stdout.String())
			}
		})
	}
}

// TestCtrlZOnTerminal: lock-example runs in the foreground of a terminal
// under a shell with job control; the command has the terminal, so ^Z
// stops the command's group. lock-example must stop too (the shell gets
// the terminal back), and fg must continue both.
func TestCtrlZOnTerminal(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := jobDir(t)
	killOnCleanup(t, filepath.Join(dir, "pid"))
	script := `set -m
"$LE" --verbose --table "$TABLE" --lease 3s --heartbeat 500ms k bash -c "$JOB"
echo "after-stop rc=$?"
while [ ! -e "$D/fg" ]; do sleep 0.05; done
fg >/dev/null
echo "after-fg rc=$?"`
	master, out, done := terminalSession(t, script, []string{"LE=" + binPath, "TABLE=" + table, "D=" + dir,
		"JOB=D=" + dir + "\n" + jobScript})
	waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
	job := readPID(t, filepath.Join(dir, "pid"))
	lockExample, err := parentOf(job)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := master.Write([]byte{0x1a}); err != nil { // ^Z
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "after-stop rc=14") {
		if time.Now().After(deadline) {
			ls, _ := readStat(lockExample)
			js, _ := readStat(job)
			t.Fatalf("the shell did not see the job stop (lock-example %c, job %c):\n%s", ls.state, js.state, out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !allStopped(job) || !stopped(lockExample) {
		t.Fatalf("after ^Z: job group stopped %v, lock-example stopped %v\n%s", allStopped(job), stopped(lockExample), out.String())
	}
	writeFile(t, dir, "fg")
	size := func() int64 { return fileSize(filepath.Join(dir, "log")) }
	before := size()
	waitFor(t, 5*time.Second, "the job to run again", func() bool { return size() > before })
	writeFile(t, dir, "end")
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatalf("the shell did not end:\n%s", out.String())
	}
	waitFor(t, 5*time.Second, "the shell's last words", func() bool { return strings.Contains(out.String(), "after-fg rc=") })
	if o := out.String(); !strings.Contains(o, "job-done") || !strings.Contains(o, "after-fg rc=0") {
		t.Errorf("terminal:\n%s", o)
	}
}

// TestTostopLockLost: lock-example runs in the background of a terminal
// with stty tostop. When its lock is lost, writing "lock lost" to the
// terminal must not stop it: it must still stop the command and exit 76.
func TestTostopLockLost(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := jobDir(t)
	killOnCleanup(t, filepath.Join(dir, "pid"))
	script := `stty tostop
set -m
"$LE" --table "$TABLE" --lease 3s --heartbeat 500ms --kill-grace 500ms k bash -c "$JOB" &
wait $!
echo "rc=$?"`
	_, out, _ := terminalSession(t, script, []string{"LE=" + binPath, "TABLE=" + table,
		"JOB=D=" + dir + "\n" + jobScript})
	waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
	job := readPID(t, filepath.Join(dir, "pid"))
	lockExample, err := parentOf(job)
	if err != nil {
		t.Fatal(err)
	}
	steal(t, table, "k")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "rc=76") {
		if time.Now().After(deadline) {
			t.Fatalf("lock-example did not exit with 76 (stopped: %v):\n%s", stopped(lockExample), out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(out.String(), "lock lost") {
		t.Errorf("terminal does not say the lock was lost:\n%s", out.String())
	}
	if !gone(job) {
		t.Error("the job still runs")
	}
}

// TestSlowToDieCommand: lock-example's DynamoDB becomes unreachable while
// a command that ignores SIGTERM runs. The command must be dead before a
// run on another client, waiting for the lock, starts.
func TestSlowToDieCommand(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	killOnCleanup(t, filepath.Join(dir, "pid"))
	proxy := newCutProxy(t)
	job := `trap '' TERM
echo $$ >"$D/pid"
while :; do echo "A $(date +%s%N)" >>"$D/log"; sleep 0.02; done`
	timing := []string{"--lease", "4s", "--heartbeat", "500ms", "--kill-grace", "2s"}
	a := startToolEnv(t, []string{"DYNAMODB_ENDPOINT=" + proxy.endpoint()},
		append(append([]string{"--table", table}, timing...), "k", "sh", "-c", "D="+dir+"\n"+job)...)
	waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
	b := startTool(t, append(append([]string{"--table", table}, timing...),
		"--wait-for-lock", "--timeout", "30s", "k", "sh", "-c", `echo "B $(date +%s%N)" >>`+log)...)
	proxy.stop()
	a.waitExit(t, 15*time.Second)
	wantCode(t, a, exitLockLost)
	waitFor(t, 20*time.Second, "the other run to hold the lock", func() bool { return strings.Contains(readLog(log), "B") })
	_ = b.waitExit(t, 10*time.Second)
	out := readLog(log)
	i := strings.Index(out, "B")
	if strings.Contains(out[i:], "A") {
		t.Fatalf("the first command ran on after the second started:\n...%s", out[max(0, i-100):])
	}
	// How long before the second command started the first one wrote last.
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) >= 2 {
		var lastA, startB int64
		_, errA := fmt.Sscanf(lines[len(lines)-2], "A %d", &lastA)
		_, errB := fmt.Sscanf(lines[len(lines)-1], "B %d", &startB)
		if errA == nil && errB == nil {
			t.Logf("the first command wrote last %s before the second started", time.Duration(startB-lastA).Round(time.Millisecond))
		}
	}
}

func readLog(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// TestFailedRunLockFreeAfterOneLease: a failed command's lock is kept for
// one lease, renewed, then released: a later run that does not wait gets it.
func TestFailedRunLockFreeAfterOneLease(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	a := startTool(t, flagsFor(table, "--owner", "host-f", "k", "sh", "-c", "exit 3")...)
	waitFor(t, 10*time.Second, "host-f to hold the lock", func() bool {
		l, ok := tryShow(t, table, "k")
		return ok && l.Owner == "host-f" && !l.Released
	})
	wantCode(t, runTool(t, flagsFor(table, "k", "true")...), exitBusy)
	a.waitExit(t, 15*time.Second)
	wantCode(t, a, 3)
	if a.elapsed < 3*time.Second {
		t.Errorf("lock-example exited %s after the failure, before one lease (3s)", a.elapsed)
	}
	wantCode(t, runTool(t, flagsFor(table, "k", "true")...), exitOK)
}

// fileSize is the size of path, 0 if it does not exist.
func fileSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
