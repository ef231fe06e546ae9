package dynamolock_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every row of the mutation table (scripts/mutations.tsv, run by make
// mutate) must name text that occurs exactly once in its file: a row
// whose line was rewritten is not applied at all (M3 and M23 after
// sessions), or mutates something else (M28, once a term was added in
// front of the one it zeroed). make mutate takes long enough that such
// drift went unseen; this check runs with make test.
func TestMutationTableApplies(t *testing.T) {
	table, err := os.ReadFile("scripts/mutations.tsv")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for line := range strings.Lines(string(table)) {
		line = strings.TrimRight(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Split(line, "\t")
		if len(f) != 6 {
			t.Errorf("row %q: %d fields, want 6 (id, file, text, replacement, detector, promise)", f[0], len(f))
			continue
		}
		rows++
		id, file, old, repl, detector := f[0], f[1], f[2], f[3], f[4]
		src, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v", id, err)
			continue
		}
		if n := strings.Count(string(src), old); n != 1 {
			t.Errorf("%s: %q occurs %d times in %s, want once", id, old, n, file)
		}
		if old == repl {
			t.Errorf("%s: the replacement is the text itself", id)
		}
		if name, ok := strings.CutPrefix(detector, "test:"); ok {
			dir := "."
			if pkg, test, ok := strings.Cut(name, ":"); ok { // test:./internal/PKG:NAME
				dir, name = pkg, test
			}
			if !testDeclared(t, dir, name) {
				t.Errorf("%s: detector %s is not a test of package %s", id, name, dir)
			}
		} else if detector != "sim" {
			t.Errorf("%s: detector %q, want sim, test:NAME or test:./internal/PKG:NAME", id, detector)
		}
	}
	if rows == 0 {
		t.Fatal("no rows in scripts/mutations.tsv")
	}
}

// testDeclared reports whether a _test.go file of directory dir declares
// func name(t *testing.T).
func testDeclared(t *testing.T, dir, name string) bool {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), "_test.go") {
			continue
		}
		src, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(src), "func "+name+"(t *testing.T)") {
			return true
		}
	}
	return false
}
