//go:build linux

package main

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCtrlCOnTerminal: lock-example runs in the foreground of a terminal
// under a shell with job control, so the job has the terminal and Ctrl-C
// sends SIGINT to the job's process group, never to lock-example. A job
// that ends by that SIGINT, or that catches it and exits with 130, was
// asked to stop: its lock is released at once (issue 40, item 4; before,
// lock-example saw a failed command and kept the lock for a lease). A job
// that exits with 130 of its own accord, with no signal, failed: its lock
// is kept for a lease.
func TestCtrlCOnTerminal(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	const lease = 4 * time.Second
	for _, tt := range []struct {
		name   string
		job    string // after the line that writes the pid
		ctrlC  bool
		kept   bool // the lock is kept for a lease
		stderr string
	}{
		{"killed by SIGINT", `while :; do read -r -t 0.05 _ <>"$D/tick"; done`, true, false, "after interrupt (status 130)"},
		{"exits 130 on SIGINT", `trap 'exit 130' INT
while :; do read -r -t 0.05 _ <>"$D/tick"; done`, true, false, "after interrupt (status 130)"},
		{"exits 130 unasked", `while [ ! -e "$D/end" ]; do read -r -t 0.05 _ <>"$D/tick"; done
exit 130`, false, true, "the command failed (status 130)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key := strings.ReplaceAll(tt.name, " ", "-")
			dir := jobDir(t)
			killOnCleanup(t, filepath.Join(dir, "pid"))
			script := `set -m
"$LE" --table "$TABLE" --lease 4s --heartbeat 500ms "$KEY" bash -c "$JOB"
echo "rc=$?"`
			master, out, _ := terminalSession(t, script, []string{"LE=" + binPath, "TABLE=" + table, "KEY=" + key,
				"JOB=D=" + dir + "\necho $$ >\"$D/pid\"\n" + tt.job})
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
			asked := time.Now()
			if tt.ctrlC {
				if _, err := master.Write([]byte{0x03}); err != nil { // ^C
					t.Fatal(err)
				}
			} else {
				writeFile(t, dir, "end")
			}
			waitFor(t, 2*lease+10*time.Second, "lock-example to exit", func() bool { return strings.Contains(out.String(), "rc=") })
			took := time.Since(asked)
			o := out.String()
			if !strings.Contains(o, "rc=130") || !strings.Contains(o, tt.stderr) {
				t.Fatalf("terminal, want rc=130 and %q:\n%s", tt.stderr, o)
			}
			if kept := took >= lease; kept != tt.kept {
				t.Errorf("lock-example exited %s after the job was asked to end; want the lock kept for a lease (%s): %v\n%s",
					took.Round(time.Millisecond), lease, tt.kept, o)
			}
			t.Logf("lock-example exited %s after", took.Round(time.Millisecond))
			if l := show(t, table, key); !l.Released {
				t.Errorf("lock not released: %+v", l)
			}
		})
	}
}
