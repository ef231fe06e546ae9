//go:build linux

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestInspectModes: list and show show a read/write lock's shared holders
// and waiters, and a --limit run's slots, as such (before, a lock held by
// shared runs was listed as released, under the owner of whoever wrote
// the item first); the busy messages say who holds the lock in each mode;
// force-release says that shared holders are not its to release.
func TestInspectModes(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	dir := t.TempDir()
	pids := filepath.Join(dir, "pids")
	killOnCleanup(t, pids)
	env := []string{"D=" + dir}
	hold := `echo $$ >>"$D/pids"; while [ ! -e "$D/end" ]; do sleep 0.05; done`
	var holders []*proc
	for range 2 {
		holders = append(holders, startToolEnv(t, env, flagsFor(table, "--shared", "rw", "sh", "-c", hold)...))
	}
	for i := range 3 {
		holders = append(holders, startToolEnv(t, env, flagsFor(table, "--owner", fmt.Sprintf("w%d", i), "--limit", "3",
			"enc", "sh", "-c", hold)...))
	}
	waitFor(t, 10*time.Second, "five jobs to run", func() bool { return strings.Count(readLog(pids), "\n") == 5 })

	// Busy, in each mode, without --wait-for-lock.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{flagsFor(table, "rw", "true"), `lock "rw" is busy: held by 2 shared runs`},
		{flagsFor(table, "--limit", "3", "enc", "true"), `lock "enc" is busy: all 3 slots are held (by "w`},
	} {
		p := runTool(t, tc.args...)
		wantCode(t, p, exitBusy)
		if !strings.Contains(p.stderr.String(), tc.want) {
			t.Errorf("%v: stderr does not say %q:\n%s", tc.args, tc.want, p.stderr.String())
		}
	}
	// A --limit 5 run of the same name takes slot 3 or 4: the only free ones.
	wantCode(t, runTool(t, flagsFor(table, "--limit", "5", "enc", "true")...), exitOK)

	// An exclusive run waits; a shared run that comes now waits behind it.
	x := startTool(t, flagsFor(table, "--wait-for-lock", "rw", "true")...)
	waitFor(t, 10*time.Second, "the exclusive run to wait in the queue", func() bool {
		l, ok := tryShow(t, table, "rw")
		return ok && l.Waiting != nil && l.Waiting.Exclusive == 1
	})
	p := runTool(t, flagsFor(table, "--shared", "rw", "true")...)
	wantCode(t, p, exitBusy)
	if s := p.stderr.String(); !strings.Contains(s, "held by 2 shared runs; 1 exclusive run waiting") {
		t.Errorf("a shared run behind a waiting exclusive one: %s", s)
	}

	p = runTool(t, "--table", table, "list", "--json")
	wantCode(t, p, exitOK)
	var locks []lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil {
		t.Fatalf("list --json: %v\n%s", err, p.stdout.String())
	}
	byKey := map[string]lockJSON{}
	for _, l := range locks {
		byKey[l.Key] = l
	}
	if rw := byKey["rw"]; rw.HeldAs != "shared" || rw.Released || rw.Owner != "" || len(rw.Readers) != 2 ||
		rw.LeaseDuration != "3s" || rw.Readers[0].LeaseDuration != "3s" || rw.Waiting == nil || rw.Waiting.Exclusive != 1 {
		t.Errorf("list --json, rw: %+v", rw)
	}
	held := 0
	for i := range 5 {
		l, ok := byKey[fmt.Sprintf("enc#%d", i)]
		switch {
		case !ok:
		case l.HeldAs != "slot" || l.Slot == nil || l.Slot.Name != "enc" || l.Slot.Index != i:
			t.Errorf("list --json, enc#%d: %+v", i, l)
		case !l.Released:
			held++
			if l.Slot.Limit != 3 || !strings.HasPrefix(l.Owner, "w") {
				t.Errorf("list --json, enc#%d: %+v", i, l)
			}
		case l.Slot.Limit != 5 || i < 3:
			t.Errorf("list --json, the --limit 5 run's slot: %+v", l)
		}
	}
	if held != 3 {
		t.Errorf("list --json: %d held slots of enc, want 3:\n%s", held, p.stdout.String())
	}
	p = runTool(t, "--table", table, "list")
	wantCode(t, p, exitOK)
	for _, s := range []string{"HELD AS", "shared by 2", "slot 0 of 3", "slot 2 of 3"} {
		if !strings.Contains(p.stdout.String(), s) {
			t.Errorf("list lacks %q:\n%s", s, p.stdout.String())
		}
	}

	p = runTool(t, "--table", table, "show", "rw")
	wantCode(t, p, exitOK)
	for _, s := range []string{"held as:        shared by 2", "shared holder:", "waiting:        1 exclusive run"} {
		if !strings.Contains(p.stdout.String(), s) {
			t.Errorf("show rw lacks %q:\n%s", s, p.stdout.String())
		}
	}
	// Watched, each shared holder is seen renewing its own entry.
	p = runTool(t, "--table", table, "show", "--json", "--watch", "1500ms", "rw")
	wantCode(t, p, exitOK)
	var rw lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &rw); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rw.ObservedStatus, "2 shared holders: 2 renewed") || len(rw.Readers) != 2 ||
		rw.Readers[0].RenewalsSeen == 0 || rw.Readers[1].RenewalsSeen == 0 {
		t.Errorf("show --watch of shared holders: %s", p.stdout.String())
	}

	// A --limit name has no item of its own: show finds its slots.
	for _, args := range [][]string{{"show", "--json", "enc"}, {"show", "--json", "--limit", "5", "enc"}} {
		p = runTool(t, append([]string{"--table", table}, args...)...)
		wantCode(t, p, exitOK)
		var sem limitJSON
		if err := json.Unmarshal([]byte(p.stdout.String()), &sem); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, p.stdout.String())
		}
		if sem.Key != "enc" || sem.Held != 3 {
			t.Errorf("%v: %s", args, p.stdout.String())
		}
		if five := len(args) == 5; five && (sem.Limit != 5 || len(sem.LimitsSeen) != 2 || len(sem.Slots) != 4) ||
			!five && (sem.Limit != 3 || sem.LimitsSeen != nil || len(sem.Slots) != 3) {
			t.Errorf("%v: %s", args, p.stdout.String())
		}
	}
	p = runTool(t, "--table", table, "--limit", "5", "show", "enc")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "gave different --limit values (3, 5)") {
		t.Errorf("show --limit 5 does not warn of the disagreement:\n%s", p.stdout.String())
	}

	p = runTool(t, "--table", table, "force-release", "--owner", "someone", "rw")
	wantCode(t, p, exitNotReleased)
	if !strings.Contains(p.stderr.String(), `lock "rw" is held by 2 shared runs and no exclusive holder: nothing released`) {
		t.Errorf("force-release of shared holders: %s", p.stderr.String())
	}

	writeFile(t, dir, "end")
	for _, h := range append(holders, x) {
		h.waitExit(t, 20*time.Second)
		wantCode(t, h, exitOK)
	}
	if l := show(t, table, "rw"); !l.Released || l.HeldAs != "" || len(l.Readers) != 0 {
		t.Errorf("after every run: %+v", l)
	}
}

// Issue 49, item 7: show NAME of a --limit name whose slot 0 no run ever
// took (the runs took #1 and #2) still finds its slots.
func TestShowFindsSlotsWithoutSlotZero(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	for i, owner := range []string{"encoder-A", "encoder-B"} {
		key := fmt.Sprintf("encoders#%d", i+1)
		putLock(t, table, key, owner, "20s")
		_, err := db.UpdateItem(context.Background(), &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
			UpdateExpression:          aws.String("SET lockExampleLimit = :n"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberN{Value: "3"}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	// An item named like a slot but no --limit run's is not counted.
	putLock(t, table, "encoders#7", "someone", "20s")
	p := runTool(t, "--table", table, "show", "encoders")
	wantCode(t, p, exitOK)
	out := p.stdout.String()
	for _, want := range []string{`"encoders": 3 slots read (encoders#0 to encoders#2), 2 held`, "encoders#1", "encoders#2", "encoder-A", "encoder-B"} {
		if !strings.Contains(out, want) {
			t.Errorf("show does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "encoders#7") {
		t.Errorf("show counts an item that is not a slot:\n%s", out)
	}
	wantCode(t, runTool(t, "--table", table, "show", "no-such-name"), exitNoSuchKey)
}
