//go:build linux

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// These tests run several lock-example processes at once in each mode
// (--shared, --limit, --hold-at-least) against DynamoDB Local. Each job
// logs when it starts and ends ("KIND PID start|end UNIX-NS", written by
// the job itself with date +%s%N), and marks its run in the job directory
// with files only one kind can hold at a time (mkdir and an O_EXCL create
// are atomic): overlaps are seen in what the jobs did, not guessed from
// sleeps.

// span is one job's run, as its log lines say.
type span struct {
	kind       string // "S" shared, "X" exclusive, "L" a --limit run
	pid        int
	start, end int64 // unix ns; end 0: no end logged
}

// readSpans parses a job log.
func readSpans(t *testing.T, path string) (spans []span, other []string) {
	t.Helper()
	byPID := map[int]*span{}
	for _, line := range strings.Split(strings.TrimSpace(readLog(path)), "\n") {
		f := strings.Fields(line)
		if len(f) != 4 || (f[2] != "start" && f[2] != "end") {
			if line != "" {
				other = append(other, line)
			}
			continue
		}
		pid, err1 := strconv.Atoi(f[1])
		ns, err2 := strconv.ParseInt(f[3], 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad log line %q", line)
		}
		s := byPID[pid]
		if s == nil {
			s = &span{kind: f[0], pid: pid}
			byPID[pid] = s
		}
		if f[2] == "start" {
			s.start = ns
		} else {
			s.end = ns
		}
	}
	for _, s := range byPID {
		spans = append(spans, *s)
	}
	slices.SortFunc(spans, func(a, b span) int { return int(a.start - b.start) })
	return spans, other
}

// maxAtOnce is the most spans of kind (all kinds when "") running at one
// instant; a span without an end runs until openEnd.
func maxAtOnce(spans []span, kind string, openEnd int64) int {
	type edge struct {
		at    int64
		delta int
	}
	var edges []edge
	for _, s := range spans {
		if kind != "" && s.kind != kind {
			continue
		}
		end := s.end
		if end == 0 {
			end = openEnd
		}
		edges = append(edges, edge{s.start, 1}, edge{end, -1})
	}
	// At equal times an end comes first: touching spans do not overlap.
	slices.SortFunc(edges, func(a, b edge) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.delta - b.delta
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

func overlaps(a, b span) bool { return a.start < b.end && b.start < a.end }

// Jobs for the tests. $D is the job directory. A shared job holds the file
// shared.PID while it runs and checks that no exclusive job's directory
// "excl" exists; an exclusive job makes "excl" (mkdir fails if it exists)
// and checks that no shared.* file exists.
const (
	sharedJob = `: >"$D/shared.$$"
[ -d "$D/excl" ] && echo "OVERLAP S $$ saw an exclusive run" >>"$D/log"
echo "S $$ start $(date +%s%N)" >>"$D/log"
sleep "$SLEEP"
[ -d "$D/excl" ] && echo "OVERLAP S $$ saw an exclusive run" >>"$D/log"
echo "S $$ end $(date +%s%N)" >>"$D/log"
rm "$D/shared.$$"`
	exclusiveJob = `mkdir "$D/excl" || echo "OVERLAP X $$ saw another exclusive run" >>"$D/log"
ls "$D"/shared.* >/dev/null 2>&1 && echo "OVERLAP X $$ saw a shared run" >>"$D/log"
echo "X $$ start $(date +%s%N)" >>"$D/log"
sleep "$SLEEP"
ls "$D"/shared.* >/dev/null 2>&1 && echo "OVERLAP X $$ saw a shared run" >>"$D/log"
echo "X $$ end $(date +%s%N)" >>"$D/log"
rmdir "$D/excl"`
)

func nowNS() int64 { return time.Now().UnixNano() }

// logIfFailed logs p's stderr when the test failed: with --verbose, when
// the library granted the lock and what it waited for.
func logIfFailed(t *testing.T, p *proc) {
	if t.Failed() {
		t.Logf("stderr of %v:\n%s", p.cmd.Args[1:], p.stderr.String())
	}
}

// TestSharedRuns: five --shared runs of a 2s job, started together in the
// background by a shell, run at once and finish in under 4s; an exclusive
// run asked for while they run starts only once they have all ended, and
// within one lease of asking; none of them overlaps it.
func TestSharedRuns(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	const lease = 4 * time.Second
	flags := fmt.Sprintf("--table %s --lease %s --heartbeat 500ms", table, lease)
	// The shell starts the five runs in the background and logs when it
	// started them and when each ended, with its status.
	script := `echo "launch $(date +%s%N)" >"$D/launch"
for i in 1 2 3 4 5; do
  ( SLEEP=2 "$LE" ` + flags + ` --shared rw sh -c "$JOB"; echo "$i $? $(date +%s%N)" >>"$D/exits" ) &
done
wait`
	sh := startShell(t, script, "LE="+plainBinPath, "D="+dir, "JOB="+sharedJob)
	waitFor(t, 10*time.Second, "the five shared runs to start", func() bool {
		spans, _ := readSpans(t, log)
		return len(spans) == 5
	})
	asked := nowNS()
	// Built without -race, as the shared runs: the wait is the lock's, not
	// a race-built binary's start on a loaded machine. --verbose says when
	// the library granted it, for a failure's log.
	x := startPlainEnv(t, []string{"D=" + dir, "SLEEP=0.5"},
		append(strings.Fields(flags), "--verbose", "--wait-for-lock", "rw", "sh", "-c", exclusiveJob)...)
	defer logIfFailed(t, x)
	sh.waitExit(t, 15*time.Second)
	x.waitExit(t, 20*time.Second)
	wantCode(t, x, exitOK)

	exits := strings.Fields(readLog(filepath.Join(dir, "exits")))
	if len(exits) != 15 {
		t.Fatalf("exits of the shared runs:\n%s", readLog(filepath.Join(dir, "exits")))
	}
	var launch, last int64
	if _, err := fmt.Sscanf(readLog(filepath.Join(dir, "launch")), "launch %d", &launch); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(exits); i += 3 {
		if exits[i+1] != "0" {
			t.Errorf("shared run %s exited with %s", exits[i], exits[i+1])
		}
		ns, _ := strconv.ParseInt(exits[i+2], 10, 64)
		last = max(last, ns)
	}
	spans, other := readSpans(t, log)
	if len(other) > 0 {
		t.Fatalf("the jobs saw overlaps:\n%s", strings.Join(other, "\n"))
	}
	var xs span
	for _, s := range spans {
		if s.kind == "X" {
			xs = s
		}
	}
	for _, s := range spans {
		if s.kind == "S" && overlaps(s, xs) {
			t.Errorf("shared run %+v overlaps the exclusive run %+v", s, xs)
		}
	}
	took := time.Duration(last - launch)
	waited := time.Duration(xs.start - asked)
	t.Logf("5 shared runs of sleep 2: %d at once at most, all ended %s after the shell started them; "+
		"the exclusive run started %s after it was asked for", maxAtOnce(spans, "S", 0), took.Round(time.Millisecond),
		waited.Round(time.Millisecond))
	if n := maxAtOnce(spans, "S", 0); n != 5 {
		t.Errorf("at most %d shared runs at once, want 5", n)
	}
	if took >= 4*time.Second {
		t.Errorf("the shared runs took %s, want under 4s", took)
	}
	if xs.start == 0 || waited > lease {
		t.Errorf("the exclusive run started %s after it was asked for, want within one lease (%s)", waited, lease)
	}
}

// TestExclusiveNotStarved: shared runs keep coming, each overlapping the
// last, so that the lock is never free of shared holders; an exclusive run
// asked for among them still gets it, within one lease, because shared runs
// that come after it wait behind it. None overlaps it, and all finish.
func TestExclusiveNotStarved(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	const lease = 4 * time.Second
	flags := fmt.Sprintf("--table %s --lease %s --heartbeat 500ms", table, lease)
	// A shared run of 1s every 0.4s for 6s, until the file "stop" exists.
	script := `i=0
while [ ! -e "$D/stop" ] && [ $i -lt 15 ]; do
  i=$((i+1))
  ( SLEEP=1 "$LE" ` + flags + ` --shared --wait-for-lock rw sh -c "$JOB"; echo "$i $?" >>"$D/exits" ) &
  read -r -t 0.4 _ <>"$D/tick"
done
echo "$i" >"$D/started"
wait`
	if err := syscall.Mkfifo(filepath.Join(dir, "tick"), 0o600); err != nil {
		t.Fatal(err)
	}
	sh := startShell(t, script, "LE="+plainBinPath, "D="+dir, "JOB="+sharedJob)
	waitFor(t, 10*time.Second, "shared runs to overlap", func() bool {
		spans, _ := readSpans(t, log)
		return maxAtOnce(spans, "S", nowNS()) >= 2
	})
	asked := nowNS()
	x := startPlainEnv(t, []string{"D=" + dir, "SLEEP=0.5"},
		append(strings.Fields(flags), "--verbose", "--wait-for-lock", "rw", "sh", "-c", exclusiveJob)...)
	defer logIfFailed(t, x)
	x.waitExit(t, 20*time.Second)
	wantCode(t, x, exitOK)
	sh.waitExit(t, 30*time.Second)
	n, _ := strconv.Atoi(strings.TrimSpace(readLog(filepath.Join(dir, "started"))))
	exits := strings.Split(strings.TrimSpace(readLog(filepath.Join(dir, "exits"))), "\n")
	if len(exits) != n {
		t.Fatalf("%d shared runs started, %d ended:\n%s", n, len(exits), strings.Join(exits, "\n"))
	}
	for _, e := range exits {
		if !strings.HasSuffix(e, " 0") {
			t.Errorf("a shared run failed: %s", e)
		}
	}
	spans, other := readSpans(t, log)
	if len(other) > 0 {
		t.Fatalf("the jobs saw overlaps:\n%s", strings.Join(other, "\n"))
	}
	var xs span
	before, after := 0, 0
	for _, s := range spans {
		if s.kind == "X" {
			xs = s
		}
	}
	for _, s := range spans {
		switch {
		case s.kind != "S":
		case overlaps(s, xs):
			t.Errorf("shared run %+v overlaps the exclusive run %+v", s, xs)
		case s.end <= xs.start:
			before++
		default:
			after++
		}
	}
	waited := time.Duration(xs.start - asked)
	t.Logf("%d shared runs, %d before the exclusive one, %d after; the exclusive run started %s after it was asked for",
		n, before, after, waited.Round(time.Millisecond))
	if xs.start == 0 || waited > lease {
		t.Errorf("the exclusive run started %s after it was asked for, want within one lease (%s)", waited, lease)
	}
	if after == 0 {
		t.Errorf("no shared run came after the exclusive one: the test did not keep shared runs coming")
	}
}

// TestLimitRuns: ten --limit 3 runs of a 1s job, started at once, never run
// more than three at once and all finish; also when one of them is killed
// with SIGKILL while its job runs (its slot is taken over once seen
// unrenewed for a lease). Each job takes one of three marker directories
// (mkdir is atomic): a fourth job at once would find none free.
func TestLimitRuns(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	for _, kill := range []bool{false, true} {
		t.Run(map[bool]string{false: "all finish", true: "one killed"}[kill], func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			key := "limit-" + strconv.FormatBool(kill)
			job := `got=""
for m in 0 1 2; do if mkdir "$D/m$m" 2>/dev/null; then got=$m; break; fi; done
[ -z "$got" ] && echo "OVER: no marker free for $$ (slot $DYNAMOLOCK_SLOT)" >>"$D/log"
echo "$got" >"$D/marker.$$"
echo "L $$ start $(date +%s%N)" >>"$D/log"
echo "$$ $PPID" >>"$D/pids"
sleep 1
echo "L $$ end $(date +%s%N)" >>"$D/log"
if [ -n "$got" ]; then rmdir "$D/m$got"; fi`
			killOnCleanup(t, filepath.Join(dir, "pids"))
			started := nowNS()
			procs := make([]*proc, 10)
			for i := range procs {
				// Built without -race: ten race-built runs (thirty
				// processes) beside the other packages' tests starved
				// their heartbeats for 2 s on two cores, and a run whose
				// lease could not be renewed is stopped (exit 76), its
				// job killed, as it should be, but not what this tests.
				procs[i] = startPlainEnv(t, []string{"D=" + dir}, "--table", table, "--lease", "3s", "--heartbeat", "500ms",
					"--limit", "3", "--wait-for-lock", key, "sh", "-c", job)
			}
			killed := -1
			var killedAt int64
			if kill {
				waitFor(t, 10*time.Second, "a job to run", func() bool { return strings.Contains(readLog(filepath.Join(dir, "pids")), "\n") })
				var jobPID, lePID int
				if _, err := fmt.Sscanf(readLog(filepath.Join(dir, "pids")), "%d %d", &jobPID, &lePID); err != nil {
					t.Fatal(err)
				}
				for i, p := range procs {
					if p.cmd.Process.Pid == lePID {
						killed = i
					}
				}
				if killed < 0 {
					t.Fatalf("job %d's parent %d is no lock-example of this test", jobPID, lePID)
				}
				if err := syscall.Kill(lePID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				waitFor(t, 2*time.Second, "the killed run's job to die", func() bool { return gone(jobPID) })
				killedAt = nowNS()
				// Its job could not give back its marker: do it for it, now
				// that nothing of it runs.
				if m := strings.TrimSpace(readLog(filepath.Join(dir, "marker."+strconv.Itoa(jobPID)))); m != "" {
					if err := os.Remove(filepath.Join(dir, "m"+m)); err != nil {
						t.Fatal(err)
					}
				}
			}
			var last time.Duration
			for _, p := range procs {
				p.waitExit(t, 60*time.Second)
			}
			// The jobs' log first: an overlap says more than an exit code.
			spans, other := readSpans(t, log)
			if len(other) > 0 {
				t.Fatalf("more than 3 jobs ran at once:\n%s\nthe log:\n%s", strings.Join(other, "\n"), readLog(log))
			}
			for i, p := range procs {
				if i == killed {
					continue
				}
				wantCode(t, p, exitOK)
				last = max(last, time.Duration(p.started.UnixNano()-started)+p.elapsed)
			}
			if len(spans) != 10 {
				t.Errorf("%d jobs ran, want 10", len(spans))
			}
			if kill {
				for i, s := range spans {
					if s.end == 0 {
						spans[i].end = killedAt // it died between its start and then
					}
				}
			}
			most := maxAtOnce(spans, "L", 0)
			t.Logf("10 --limit 3 runs of a 1s job%s: at most %d at once; the last ended %s after the first started",
				map[bool]string{true: ", one SIGKILLed"}[kill], most, last.Round(time.Millisecond))
			if most > 3 {
				t.Errorf("%d jobs ran at once, want at most 3", most)
			}
		})
	}
}

// TestHoldAtLeast: two runs with --hold-at-least 10s, fired 1s apart as a
// schedule fires on two hosts whose clocks differ, run the command once:
// the first keeps the lock for 10s although its command ends at once, and
// exits with the command's status; the second exits 75 without running it.
// A run after the hold runs. SIGINT during the hold releases at once.
func TestHoldAtLeast(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	t.Run("second host turned away", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		log := filepath.Join(dir, "log")
		job := `echo "ran $$ $(date +%s%N)" >>"$D/log"; exit 4`
		args := flagsFor(table, "--hold-at-least", "10s", "nightly", "sh", "-c", job)
		a := startToolEnv(t, []string{"D=" + dir}, args...)
		waitFor(t, 10*time.Second, "the first host's job to run", fileHas(log, "ran"))
		time.Sleep(time.Until(a.started.Add(time.Second))) // the second host's schedule fires 1s later
		b := startToolEnv(t, []string{"D=" + dir}, args...)
		b.waitExit(t, 10*time.Second)
		wantCode(t, b, exitBusy)
		a.waitExit(t, 20*time.Second)
		wantCode(t, a, 4) // the command's status
		if n := strings.Count(readLog(log), "ran"); n != 1 {
			t.Fatalf("the command ran %d times, want once:\n%s", n, readLog(log))
		}
		t.Logf("first run: exited %s after it started; second run: exited 75 after %s",
			a.elapsed.Round(time.Millisecond), b.elapsed.Round(time.Millisecond))
		if a.elapsed < 10*time.Second {
			t.Errorf("the first run exited %s after it started, before --hold-at-least 10s", a.elapsed)
		}
		if l := show(t, table, "nightly"); !l.Released {
			t.Errorf("lock not released after the hold: %+v", l)
		}
		later := startToolEnv(t, []string{"D=" + dir}, flagsFor(table, "--release-on-error", "nightly", "sh", "-c", job)...)
		later.waitExit(t, 10*time.Second)
		wantCode(t, later, 4)
		if n := strings.Count(readLog(log), "ran"); n != 2 {
			t.Errorf("a run after the hold did not run its command:\n%s", readLog(log))
		}
	})
	t.Run("SIGINT during the hold releases at once", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		p := startToolEnv(t, []string{"D=" + dir}, flagsFor(table, "--verbose", "--hold-at-least", "20s", "interrupted-hold",
			"sh", "-c", `echo ran >"$D/log"`)...)
		waitFor(t, 10*time.Second, "the hold to begin", func() bool {
			return strings.Contains(p.stderr.String(), "until --hold-at-least 20s after it was taken")
		})
		sent := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		p.waitExit(t, 10*time.Second)
		wantCode(t, p, exitOK)
		if took := time.Since(sent); took > 2*time.Second {
			t.Errorf("lock-example exited %s after SIGINT", took)
		}
		if l := show(t, table, "interrupted-hold"); !l.Released {
			t.Errorf("lock not released: %+v", l)
		}
	})
}

// startShell runs a bash script in the background, as a user would start
// runs from a shell, with env added to the test's child environment. The
// script has a process group of its own, killed with it at the test's end
// (the guardians of the runs it started then kill their jobs).
func startShell(t *testing.T, script string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(childEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return startProc(t, cmd, func(p *proc) { _ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) })
}
