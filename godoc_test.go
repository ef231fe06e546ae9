package dynamolock_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// packageDoc returns the documentation of the package's non-test files.
func packageDoc(t *testing.T) *doc.Package {
	t.Helper()
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		files = append(files, f)
	}
	p, err := doc.NewFromFiles(fset, files, "github.com/arielsrv/dynamolock/v2")
	require.NoError(t, err)
	return p
}

// Issue 22: `go doc` is a user's map. No exported doc names a test or a
// benchmark; the package doc lists every option under the call it applies
// to, and sets the options with similar names side by side.
func TestGoDocIsAUsersMap(t *testing.T) {
	p := packageDoc(t)
	testName := regexp.MustCompile(`\b(Test|Benchmark|Fuzz)[A-Z]\w*`)
	check := func(what, text string) {
		if m := testName.FindString(text); m != "" {
			t.Errorf("the doc of %s names %s, a test", what, m)
		}
	}
	check("the package", p.Doc)
	var options []string
	for _, ty := range p.Types {
		check(ty.Name, ty.Doc)
		for _, f := range ty.Funcs {
			check(f.Name, f.Doc)
			if strings.HasSuffix(ty.Name, "Option") {
				options = append(options, f.Name)
			}
		}
		for _, m := range ty.Methods {
			check(ty.Name+"."+m.Name, m.Doc)
		}
	}
	for _, f := range p.Funcs {
		check(f.Name, f.Doc)
	}
	require.NotEmpty(t, options)

	_, section, ok := strings.Cut(p.Doc, "Options, by where they apply")
	require.True(t, ok, "the package doc has a section of options by where they apply")
	section, _, _ = strings.Cut(section, "What a lock guarantees")
	for _, o := range options {
		assert.Contains(t, section, "["+o+"]", "the package doc's options section lists %s", o)
	}
	for _, group := range [][]string{
		{"WithSortKey(name, value)", "WithSortKeyValue(value)", "WithSortKeyName(name)"},
		{"WithLeaseDuration(d)", "WithLockLease(d)", "WithLeaseDurationToEnsure(d)"},
		{"WithDeleteLockOnRelease()", "WithDeleteLock(bool)"},
	} {
		// Side by side: on consecutive lines of one block.
		first := strings.Index(section, "\t"+group[0])
		require.GreaterOrEqual(t, first, 0, "%s in the side-by-side block", group[0])
		lines := strings.Split(section[first:], "\n")
		for i, name := range group {
			assert.True(t, strings.HasPrefix(lines[i], "\t"+name), "%s beside %s: %q", name, group[0], lines[i])
		}
	}
}
