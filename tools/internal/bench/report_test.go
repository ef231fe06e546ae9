package bench

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// docs/BENCHMARKS.md is reference, not a lab notebook: no text this
// package writes into it cites an issue, a work session ("this session",
// "session 12") or a commit, or a goal as it once was. What changed, and
// when, is git's. (The library's sessions, WithSession, are a subject of
// the report like any feature.)
func TestReportTextIsReference(t *testing.T) {
	notebook := regexp.MustCompile(`(?i)\bissue\s*\d|\b(this|that|last|previous|earlier|later|next)\s+sessions?\b|\bsessions?\s*#?\d|\bwas ≤|\b[0-9a-f]{7,40}\b`)
	for text, want := range map[string]bool{
		"measured in this session": true, "session 12": true, "as in issue 38": true,
		"one client under a session": false, "a dead session's locks": false,
	} {
		if got := notebook.MatchString(text); got != want {
			t.Errorf("the notebook pattern on %q: %v, want %v", text, got, want)
		}
	}
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, m := range notebook.FindAllString(s, -1) {
				if isHexRun(m) && !(strings.ContainsAny(m, "0123456789") && strings.ContainsAny(m, "abcdef")) {
					continue // a word or a number, not a commit
				}
				t.Errorf("%s: the report's text %q reads as a lab notebook: %q", fset.Position(lit.Pos()), clip(s), m)
			}
			return true
		})
	}
}

func isHexRun(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", r) {
			return false
		}
	}
	return true
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// The Summary's fairness rows: one per refresh period of the fair mode's
// runs with no pause, each contender count's Jain's index and timeouts,
// met only when every run of the row met the goal.
func TestFairSummary(t *testing.T) {
	fair := ContentionMode{Name: "fair", Fair: true}
	run := func(mode ContentionMode, n int, refresh time.Duration, per []int, timeouts int) *ContentionRun {
		return &ContentionRun{ContentionConfig: ContentionConfig{Mode: mode, Contenders: n, Refresh: refresh}, PerContender: per, Timeouts: timeouts}
	}
	got := fairSummary([]*ContentionRun{
		run(DefaultMode, 2, time.Second, []int{10, 0}, 1),
		run(fair, 2, time.Second, []int{10, 10}, 0),
		run(fair, 8, time.Second, []int{1, 1, 1, 1, 1, 1, 1, 0}, 3),
		run(fair, 2, 100*time.Millisecond, []int{5, 5}, 0),
	})
	want := "| fair mode, no pause, refresh 1s: Jain's index and timeouts with 2 / 8 contenders (§5) | Jain ≥ 0.95, no timeouts | 1.00 / 0.88; 0 / 3 | **no** |\n" +
		"| fair mode, no pause, refresh 100ms: Jain's index and timeouts with 2 contenders (§5) | Jain ≥ 0.95, no timeouts | 1.00; 0 | yes |\n"
	if got != want {
		t.Errorf("fairSummary:\n%s\nwant:\n%s", got, want)
	}
	if got := fairSummary([]*ContentionRun{run(DefaultMode, 2, time.Second, []int{1, 1}, 0)}); !strings.Contains(got, "not run: no fair mode in this build") {
		t.Errorf("fairSummary without a fair mode: %q", got)
	}
}
