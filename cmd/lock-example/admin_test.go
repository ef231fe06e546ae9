//go:build unix

package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TestInspection covers create-table, list, show and force-release.
func TestInspection(t *testing.T) {
	t.Parallel()
	table := tableName(t)
	p := runTool(t, "--table", table, "create-table")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "created") {
		t.Errorf("create-table: %s", p.stdout.String())
	}
	p = runTool(t, "--table", table, "create-table")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "already exists") {
		t.Errorf("create-table of an existing table: %s", p.stdout.String())
	}

	wantCode(t, runTool(t, flagsFor(table, "--data", "x", "a", "true")...), exitOK)
	putLock(t, table, "b", "host-b", "3s") // a holder that died

	p = runTool(t, "--table", table, "list", "--json")
	wantCode(t, p, exitOK)
	var locks []lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil {
		t.Fatalf("list --json: %v\n%s", err, p.stdout.String())
	}
	if len(locks) != 2 || locks[0].Key != "a" || !locks[0].Released || locks[0].DataSize != 1 ||
		locks[1].Key != "b" || locks[1].Released || locks[1].Owner != "host-b" || locks[1].LeaseDuration != "3s" {
		t.Errorf("list --json: %+v", locks)
	}

	p = runTool(t, "--table", table, "list")
	wantCode(t, p, exitOK)
	out := p.stdout.String()
	for _, s := range []string{"KEY", "OWNER", "FENCING TOKEN", "host-b", "\nb "} {
		if !strings.Contains(out, s) {
			t.Errorf("list output lacks %q:\n%s", s, out)
		}
	}

	p = runTool(t, "--table", table, "show", "b")
	wantCode(t, p, exitOK)
	if !strings.Contains(p.stdout.String(), "host-b") {
		t.Errorf("show: %s", p.stdout.String())
	}
	wantCode(t, runTool(t, "--table", table, "show", "nothing"), exitNoSuchKey)

	// b's holder failed and kept it; force-release it, naming its owner.
	wantCode(t, runTool(t, "--table", table, "force-release", "b"), exitSetup)
	// Another owner's lock: nothing released, which is not a usage error.
	p = runTool(t, "--table", table, "force-release", "--owner", "someone-else", "b")
	wantCode(t, p, exitNotReleased)
	if !strings.Contains(p.stderr.String(), `held by "host-b", not "someone-else": nothing released`) {
		t.Errorf("force-release with the wrong owner:\n%s", p.stderr.String())
	}
	if l := show(t, table, "b"); l.Released {
		t.Fatal("force-release with the wrong owner released the lock")
	}
	wantCode(t, runTool(t, "--table", table, "force-release", "--owner", "host-b", "b"), exitOK)
	if l := show(t, table, "b"); !l.Released {
		t.Fatal("force-release did not release the lock")
	}
	wantCode(t, runTool(t, "--table", table, "force-release", "--owner", "host-b", "nothing"), exitNoSuchKey)
	wantCode(t, runTool(t, flagsFor(table, "b", "true")...), exitOK)
}

// TestSortKey runs two commands at once under one lock name with different
// sort key values: they lock independently.
func TestSortKey(t *testing.T) {
	t.Parallel()
	table := tableName(t)
	wantCode(t, runTool(t, "--table", table, "--sort-key", "scope", "create-table"), exitOK)
	dir := t.TempDir()
	var procs []*proc
	for _, scope := range []string{"a", "b"} {
		// Each job waits until both run: only possible if both hold a lock.
		job := `touch "$D/` + scope + `"; while [ ! -e "$D/a" ] || [ ! -e "$D/b" ]; do sleep 0.05; done`
		procs = append(procs, startTool(t, flagsFor(table, "--sort-key", "scope="+scope, "job", "sh", "-c", "D="+dir+"; "+job)...))
	}
	for _, p := range procs {
		p.wait(t)
		wantCode(t, p, exitOK)
	}
	p := runTool(t, "--table", table, "--sort-key", "scope", "list", "--json")
	wantCode(t, p, exitOK)
	var locks []lockJSON
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil {
		t.Fatal(err)
	}
	if len(locks) != 2 || locks[0].SortKey != "a" || locks[1].SortKey != "b" {
		t.Errorf("list --json: %+v", locks)
	}
	// Without --sort-key, list asks the table for its sort key.
	p = runTool(t, "--table", table, "list", "--json")
	wantCode(t, p, exitOK)
	locks = nil
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil {
		t.Fatal(err)
	}
	if len(locks) != 2 || locks[0].SortKey != "a" || locks[1].SortKey != "b" {
		t.Errorf("list --json without --sort-key: %+v", locks)
	}
	p = runTool(t, "--table", table, "--sort-key", "scope=b", "list", "--json")
	wantCode(t, p, exitOK)
	if err := json.Unmarshal([]byte(p.stdout.String()), &locks); err != nil || len(locks) != 1 {
		t.Errorf("list --sort-key scope=b: %v %s", err, p.stdout.String())
	}
}

// TestMissingTableHint: a missing table is reported with the command that
// creates it, not a Go function of the library (issue 22).
func TestMissingTableHint(t *testing.T) {
	t.Parallel()
	table := tableName(t) // never created
	for _, args := range [][]string{
		flagsFor(table, "k", "true"),
		flagsFor(table, "--wait-for-lock", "k", "true"),
		{"--table", table, "list"},
		{"--table", table, "show", "k"},
		{"--table", table, "force-release", "--owner", "o", "k"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			p := runTool(t, args...)
			wantCode(t, p, exitSetup)
			s := p.stderr.String()
			if !strings.Contains(s, "lock-example --table "+table+" create-table") || strings.Contains(s, "CreateTable") {
				t.Errorf("stderr does not name `lock-example --table %s create-table` (or names a Go function):\n%s", table, s)
			}
		})
	}
}

// TestListSortKeyTheTableLacks: list --sort-key NAME on a table without
// that sort key is a usage error; before, every item was "skipped:
// malformed lock item" and list exited 0 (issue 22).
func TestListSortKeyTheTableLacks(t *testing.T) {
	t.Parallel()
	plain, sorted := tableName(t), tableName(t)
	wantCode(t, runTool(t, "--table", plain, "create-table"), exitOK)
	wantCode(t, runTool(t, "--table", sorted, "--sort-key", "scope", "create-table"), exitOK)
	wantCode(t, runTool(t, flagsFor(plain, "k", "true")...), exitOK)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--table", plain, "--sort-key", "foo", "list"}, `--sort-key "foo": table "` + plain + `" has no sort key`},
		{[]string{"--table", plain, "--sort-key", "foo=v", "list"}, `--sort-key "foo": table "` + plain + `" has no sort key`},
		{[]string{"--table", sorted, "--sort-key", "foo", "list"}, `--sort-key "foo": table "` + sorted + `" has sort key "scope", not "foo"`},
	} {
		p := runTool(t, tc.args...)
		wantCode(t, p, exitSetup)
		if s := p.stderr.String(); !strings.Contains(s, tc.want) || strings.Contains(s, "malformed") {
			t.Errorf("%v: stderr does not say %q:\n%s", tc.args, tc.want, s)
		}
	}
}

// TestKeySchemaHintNamesFlags: a table keyed otherwise is explained with
// lock-example's flags, not the library's Go options.
func TestKeySchemaHintNamesFlags(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, attr, typ string
		want            []string
	}{
		{"keyed on another attribute", "id", "S", []string{`the table has partition key "id" (S)`, "set --partition-key-name and --sort-key"}},
		{"key of type N", "key", "N", []string{`the table's partition key "key" is of type N, expected S`, "create-table"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			table := tableName(t)
			_, err := db.CreateTable(context.Background(), &dynamodb.CreateTableInput{
				TableName:            aws.String(table),
				BillingMode:          types.BillingModePayPerRequest,
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(tc.attr), KeyType: types.KeyTypeHash}},
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(tc.attr), AttributeType: types.ScalarAttributeType(tc.typ)}},
			})
			if err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{flagsFor(table, "k", "true"), {"--table", table, "show", "k"}} {
				p := runTool(t, args...)
				wantCode(t, p, exitSetup)
				s := p.stderr.String()
				for _, w := range tc.want {
					if !strings.Contains(s, w) {
						t.Errorf("%v: stderr does not say %q:\n%s", args, w, s)
					}
				}
				if strings.Contains(s, "WithPartitionKeyName") {
					t.Errorf("%v: stderr names a Go option:\n%s", args, s)
				}
			}
		})
	}
}
