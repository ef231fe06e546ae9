package ddblocal

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Run starts a server for the command, gives it the endpoint and the pid,
// passes the command's status through, and leaves no server behind.
func TestRunStartsAndStopsAServerAroundTheCommand(t *testing.T) {
	if _, err := Jar(); err != nil {
		t.Fatalf("DynamoDB Local is not available: %v", err)
	}
	t.Setenv(EnvEndpoint, "")
	var out, log bytes.Buffer
	code, err := Run(testCtx(t), []string{"sh", "-c", `echo "$DYNAMODB_ENDPOINT $DDBLOCAL_PID"; exit 7`},
		RunConfig{Stdout: &out, Log: &log})
	if err != nil || code != 7 {
		t.Fatalf("Run = %d, %v; want 7, nil (log: %s)", code, err, log.String())
	}
	fields := strings.Fields(out.String())
	if len(fields) != 2 || !strings.HasPrefix(fields[0], "http://127.0.0.1:") {
		t.Fatalf("the command saw %q; want an endpoint and a pid", out.String())
	}
	pid, err := strconv.Atoi(fields[1])
	if err != nil || pid <= 0 {
		t.Fatalf("DDBLOCAL_PID=%q", fields[1])
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server pid %d still exists after Run returned (kill -0: %v)", pid, err)
	}
	for _, want := range []string{"started pid " + fields[1], "stopped pid " + fields[1]} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("Run's log %q lacks %q", log.String(), want)
		}
	}
}

// With DYNAMODB_ENDPOINT set, Run starts nothing and hands it on as is.
func TestRunUsesTheEndpointFromTheEnvironment(t *testing.T) {
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	t.Setenv(EnvPID, "")              // as set by the launcher of make test, if that runs this test
	t.Setenv("PATH", "/usr/bin:/bin") // no java needed: nothing starts
	var out bytes.Buffer
	code, err := Run(testCtx(t), []string{"sh", "-c", `echo "$DYNAMODB_ENDPOINT|${DDBLOCAL_PID:-none}"`},
		RunConfig{Stdout: &out, Log: io.Discard})
	if err != nil || code != 0 {
		t.Fatalf("Run = %d, %v", code, err)
	}
	if got := strings.TrimSpace(out.String()); got != "http://127.0.0.1:1|none" {
		t.Fatalf("the command saw %q", got)
	}
}

func TestRunStatusOfAMissingCommand(t *testing.T) {
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	code, err := Run(testCtx(t), []string{filepath.Join(t.TempDir(), "no-such-command")}, RunConfig{Log: io.Discard})
	if err == nil || code == 0 {
		t.Fatalf("Run = %d, %v; want a non-zero status and an error", code, err)
	}
	if _, err := Run(testCtx(t), nil, RunConfig{Log: io.Discard}); err == nil {
		t.Fatal("Run with no command: no error")
	}
}

// A signal reaching Run is passed on to the command; a command that ignores
// it is killed once the grace period is over, and Run reports the kill.
func TestRunPassesSignalsOnAndBoundsTheWait(t *testing.T) {
	t.Setenv(EnvEndpoint, "http://127.0.0.1:1")
	for _, tc := range []struct {
		name   string
		script string
		want   int
	}{
		{"the command exits on the signal", `trap 'exit 42' USR1; echo ready; while :; do sleep 0.05; done`, 42},
		{"the command ignores the signal", `trap '' USR1; echo ready; while :; do sleep 0.05; done`, 128 + int(syscall.SIGKILL)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pr, pw, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer pr.Close()
			type result struct {
				code int
				err  error
			}
			res := make(chan result, 1)
			began := time.Now()
			go func() {
				code, err := Run(testCtx(t), []string{"sh", "-c", tc.script}, RunConfig{
					Stdout: pw, Log: io.Discard, SignalGrace: 300 * time.Millisecond,
					Signals: []os.Signal{syscall.SIGUSR1},
				})
				pw.Close()
				res <- result{code, err}
			}()
			if line, err := bufio.NewReader(pr).ReadString('\n'); err != nil || line != "ready\n" {
				t.Fatalf("reading the command's first line: %q, %v", line, err)
			}
			if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
				t.Fatal(err)
			}
			select {
			case r := <-res:
				if r.err != nil || r.code != tc.want {
					t.Fatalf("Run = %d, %v; want %d", r.code, r.err, tc.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("Run had not returned %s after the signal", time.Since(began))
			}
		})
	}
}

// Jar finds the repository root's installation from a subdirectory, such as
// a package of the tools module, whose own module root has none.
func TestJarFromASubdirectory(t *testing.T) {
	root := t.TempDir()
	lib := filepath.Join(root, strings.Replace(CacheGlob, "*", "2099-01-01", 1))
	sub := filepath.Join(root, "tools", "integration")
	for _, d := range []string{lib, sub} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(lib, JarName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "tools", "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvDir, "")
	t.Chdir(sub)
	got, err := Jar()
	if err != nil || got != lib {
		t.Fatalf("Jar() = %q, %v; want %q", got, err, lib)
	}
}
