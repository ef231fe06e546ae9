//go:build linux

package main

import (
	"context"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestModeGuarantees: what "What is guaranteed" promises holds for a
// --shared run and a --limit run as for an exclusive one, with the same
// supervision: its lock lost, its renewals failing, lock-example killed,
// Ctrl-Z.
func TestModeGuarantees(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	type mode struct {
		name  string
		flags []string // the run's mode
		// other is a run of another host that waits for the lock and can
		// only get it once the first run's holder is gone.
		other []string
		steal func(t *testing.T, key string) // take the lock from the run's holder
		item  func(key string) string        // the key of the item the run holds
	}
	modes := []mode{
		{"shared", []string{"--shared"}, nil, func(t *testing.T, key string) { dropReaders(t, table, key) },
			func(k string) string { return k }},
		{"limit", []string{"--limit", "1"}, []string{"--limit", "1"},
			func(t *testing.T, key string) { steal(t, table, key+"#0") }, func(k string) string { return k + "#0" }},
	}
	for _, m := range modes {
		t.Run(m.name+"/lock lost", func(t *testing.T) {
			t.Parallel()
			key := "lost-" + m.name
			dir := t.TempDir()
			killOnCleanup(t, filepath.Join(dir, "pid"))
			job := `sleep 300 & echo $! >>"$D/pid"
echo $$ >>"$D/pid"
while :; do sleep 0.05; done`
			p := startToolEnv(t, []string{"D=" + dir},
				append(flagsFor(table, "--kill-grace", "500ms"), append(m.flags, key, "sh", "-c", job)...)...)
			waitFor(t, 10*time.Second, "the job to start", func() bool { return strings.Count(readLog(filepath.Join(dir, "pid")), "\n") == 2 })
			m.steal(t, key)
			p.waitExit(t, 10*time.Second)
			wantCode(t, p, exitLockLost)
			waitFor(t, 5*time.Second, "the job and its child to be gone", func() bool {
				for _, pid := range readPIDs(t, filepath.Join(dir, "pid")) {
					if !gone(pid) {
						return false
					}
				}
				return true
			})
			if !strings.Contains(p.stderr.String(), "lock lost") {
				t.Errorf("stderr does not say the lock was lost:\n%s", p.stderr.String())
			}
		})
		t.Run(m.name+"/renewals failing", func(t *testing.T) {
			t.Parallel()
			// As TestSlowToDieCommand: the run's DynamoDB is cut off while
			// its command ignores SIGTERM; the other host's command may
			// start only once the first one is dead.
			key := "cut-" + m.name
			dir := t.TempDir()
			log := filepath.Join(dir, "log")
			killOnCleanup(t, filepath.Join(dir, "pid"))
			proxy := newCutProxy(t)
			job := `trap '' TERM
echo $$ >"$D/pid"
while :; do echo "A $(date +%s%N)" >>"$D/log"; sleep 0.02; done`
			timing := []string{"--table", table, "--lease", "4s", "--heartbeat", "500ms", "--kill-grace", "2s"}
			a := startToolEnv(t, []string{"D=" + dir, "DYNAMODB_ENDPOINT=" + proxy.endpoint()},
				append(append(timing, m.flags...), key, "sh", "-c", job)...)
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
			b := startTool(t, append(append(timing, m.other...), "--wait-for-lock", "--timeout", "30s", key,
				"sh", "-c", `echo "B $(date +%s%N)" >>`+log)...)
			proxy.stop()
			a.waitExit(t, 15*time.Second)
			wantCode(t, a, exitLockLost)
			b.waitExit(t, 25*time.Second)
			wantCode(t, b, exitOK)
			out := readLog(log)
			i := strings.Index(out, "B")
			if i < 0 || strings.Contains(out[i:], "A") {
				t.Fatalf("the first command ran on after the second started (or the second never ran):\n...%s", out[max(0, i-100):])
			}
		})
		t.Run(m.name+"/lock-example killed", func(t *testing.T) {
			t.Parallel()
			key := "killed-" + m.name
			dir := t.TempDir()
			pids := filepath.Join(dir, "pids")
			killOnCleanup(t, pids)
			job := `sleep 301 & echo $! >>"$D/pids"
echo $$ >>"$D/pids"
wait`
			a := startToolEnv(t, []string{"D=" + dir}, append(flagsFor(table, m.flags...), key, "sh", "-c", job)...)
			waitFor(t, 10*time.Second, "the job to start", func() bool { return strings.Count(readLog(pids), "\n") == 2 })
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 2*time.Second, "every process of the job to be gone", func() bool {
				for _, pid := range readPIDs(t, pids) {
					if !gone(pid) {
						return false
					}
				}
				return true
			})
			// The other host, once it has the lock, finds nothing of the job.
			check := `for p in $(cat "$D/pids"); do kill -0 "$p" 2>/dev/null && echo "ALIVE $p"; done; echo checked`
			b := startToolEnv(t, []string{"D=" + dir},
				append(flagsFor(table, m.other...), "--wait-for-lock", "--timeout", "20s", key, "sh", "-c", check)...)
			b.waitExit(t, 25*time.Second)
			wantCode(t, b, exitOK)
			if out := b.stdout.String(); strings.Contains(out, "ALIVE") || !strings.Contains(out, "checked") {
				t.Errorf("the next holder found the job running:\n%s", out)
			}
		})
		t.Run(m.name+"/Ctrl-Z", func(t *testing.T) {
			t.Parallel()
			key := "ctrl-z-" + m.name
			dir := jobDir(t)
			killOnCleanup(t, filepath.Join(dir, "pid"))
			p := startToolAttr(t, nil, &syscall.SysProcAttr{Setpgid: true},
				append(flagsFor(table, m.flags...), key, "bash", "-c", "D="+dir+"\n"+jobScript)...)
			waitFor(t, 10*time.Second, "the job to start", fileHas(filepath.Join(dir, "pid"), "\n"))
			job := readPID(t, filepath.Join(dir, "pid"))
			lockExample := p.cmd.Process.Pid
			if err := syscall.Kill(-lockExample, syscall.SIGTSTP); err != nil {
				t.Fatal(err)
			}
			waitFor(t, 10*time.Second, "the job's group and lock-example to stop", func() bool {
				return allStopped(job) && stopped(lockExample)
			})
			if err := syscall.Kill(-lockExample, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			size := func() int64 { return fileSize(filepath.Join(dir, "log")) }
			before := size()
			waitFor(t, 5*time.Second, "the job to run again", func() bool { return size() > before })
			writeFile(t, dir, "end")
			p.waitExit(t, 10*time.Second)
			wantCode(t, p, exitOK)
			if l := show(t, table, m.item(key)); !l.Released {
				t.Errorf("lock not released: %+v", l)
			}
		})
	}
}

// dropReaders empties the readers map of the read/write lock key, as a
// writer does once it has seen them unrenewed for their lease: every
// shared holder's next renewal finds its entry gone.
func dropReaders(t *testing.T, table, key string) {
	t.Helper()
	_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
		TableName:                 aws.String(table),
		Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:          aws.String("SET #r = :empty"),
		ConditionExpression:       aws.String("attribute_exists(#r)"),
		ExpressionAttributeNames:  map[string]string{"#r": "readers"},
		ExpressionAttributeValues: map[string]types.AttributeValue{":empty": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}
