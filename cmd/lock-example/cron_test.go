package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every mode as cron runs it: no terminal (stdin /dev/null, stdout and
// stderr to a file, as cron collects them to mail), cron's bare
// environment, and no flag but the table and the mode's own (no
// --verbose, the default lease and heartbeat). A change that holds the
// lock only while lock-example prints, or only with the fast test leases,
// fails here.

// cronEnv is the environment cron gives a job, plus the DynamoDB Local
// endpoint and nothing of this machine's AWS settings.
func cronEnv(t *testing.T) []string {
	env := []string{
		"PATH=/usr/bin:/bin", "SHELL=/bin/sh", "LOGNAME=cron", "HOME=" + t.TempDir(),
		"DYNAMODB_ENDPOINT=" + endpoint, "AWS_EC2_METADATA_DISABLED=true",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"GORACE=" + strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"),
	}
	return env
}

// cronRun is one run started as cron starts it.
type cronRun struct {
	*proc
	out string // the file cron would mail
}

func startCron(t *testing.T, dir string, args ...string) *cronRun {
	t.Helper()
	out := filepath.Join(dir, "cron-"+strings.ReplaceAll(t.Name(), "/", "_")+"-"+time.Now().Format("150405.000000000")+".out")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	cmd := exec.Command(binPath, args...)
	cmd.Env = append(cronEnv(t), "D="+dir)
	cmd.Stdin = nil // /dev/null
	p := &proc{cmd: cmd, done: make(chan struct{})}
	cmd.WaitDelay = 2 * time.Second
	cmd.Stdout, cmd.Stderr = f, f
	p.started = time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = cmd.Wait()
		p.elapsed = time.Since(p.started)
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = cmd.Process.Kill()
			<-p.done
		}
	})
	return &cronRun{proc: p, out: out}
}

func (r *cronRun) want(t *testing.T, timeout time.Duration, code int) {
	t.Helper()
	select {
	case <-r.done:
	case <-time.After(timeout):
		b, _ := os.ReadFile(r.out)
		t.Fatalf("lock-example %q did not exit within %s; output:\n%s", r.cmd.Args[1:], timeout, b)
	}
	if r.code != code {
		b, _ := os.ReadFile(r.out)
		t.Fatalf("lock-example %q exited %d, want %d; output:\n%s", r.cmd.Args[1:], r.code, code, b)
	}
}

func TestModesAsCronRunsThem(t *testing.T) {
	t.Parallel()
	table := newTable(t)

	t.Run("once per schedule", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		args := []string{"--table", table, "--hold-at-least", "6s", "nightly", "sh", "-c", `echo ran >>"$D/log"`}
		a := startCron(t, dir, args...)
		waitFor(t, 10*time.Second, "the first host's job to run", fileHas(log, "ran"))
		time.Sleep(time.Until(a.started.Add(time.Second))) // the other host's schedule fires 1s later
		b := startCron(t, dir, args...)
		b.want(t, 10*time.Second, exitBusy)
		if l := show(t, table, "nightly"); l.Released {
			t.Errorf("the lock is not held during the hold, after the command ended: %+v", l)
		}
		a.want(t, 20*time.Second, exitOK)
		if a.elapsed < 6*time.Second {
			t.Errorf("the first run exited %s after it started, before --hold-at-least 6s", a.elapsed)
		}
		if n := strings.Count(readLog(log), "ran"); n != 1 {
			t.Errorf("the command ran %d times, want once", n)
		}
		if l := show(t, table, "nightly"); !l.Released {
			t.Errorf("lock not released after the hold: %+v", l)
		}
	})

	t.Run("exclusive", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		args := []string{"--table", table, "report", "sh", "-c", `echo ran >>"$D/log"; sleep 3`}
		a := startCron(t, dir, args...)
		waitFor(t, 10*time.Second, "the first job to run", fileHas(log, "ran"))
		b := startCron(t, dir, args...)
		b.want(t, 10*time.Second, exitBusy)
		a.want(t, 20*time.Second, exitOK)
		if n := strings.Count(readLog(log), "ran"); n != 1 {
			t.Errorf("the command ran %d times, want once", n)
		}
	})

	t.Run("shared", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		// Each job waits (up to 10s) for the other to have started: both
		// end only if they run at once.
		job := `echo start >>"$D/log"; for i in $(seq 100); do [ "$(grep -c start "$D/log")" -ge 2 ] && exit 0; sleep 0.1; done; exit 9`
		args := []string{"--table", table, "--shared", "backup", "sh", "-c", job}
		a := startCron(t, dir, args...)
		b := startCron(t, dir, args...)
		a.want(t, 20*time.Second, exitOK)
		b.want(t, 20*time.Second, exitOK)
	})

	t.Run("limit", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		args := []string{"--table", table, "--limit", "2", "crawl", "sh", "-c", `echo ran >>"$D/log"; sleep 4`}
		runs := []*cronRun{startCron(t, dir, args...), startCron(t, dir, args...)}
		waitFor(t, 10*time.Second, "two jobs to run", func() bool { return strings.Count(readLog(log), "ran") == 2 })
		third := startCron(t, dir, args...)
		third.want(t, 10*time.Second, exitBusy)
		for _, r := range runs {
			r.want(t, 20*time.Second, exitOK)
		}
	})
}
