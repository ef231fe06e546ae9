package dynamolock_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
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

// exportedNames lists every exported name of the package's non-test files:
// types, functions, constants, variables, the methods of exported types
// ("Type.Method") and the exported fields of exported structs ("Type.Field").
func exportedNames(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	var names []string
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() {
					continue
				}
				if d.Recv == nil {
					names = append(names, d.Name.Name)
					continue
				}
				recv := d.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				if id, ok := recv.(*ast.Ident); ok && id.IsExported() {
					names = append(names, id.Name+"."+d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						if !s.Name.IsExported() {
							continue
						}
						names = append(names, s.Name.Name)
						st, ok := s.Type.(*ast.StructType)
						if !ok {
							continue
						}
						for _, field := range st.Fields.List {
							for _, n := range field.Names {
								if n.IsExported() {
									names = append(names, s.Name.Name+"."+n.Name)
								}
							}
						}
					case *ast.ValueSpec:
						for _, n := range s.Names {
							if n.IsExported() {
								names = append(names, n.Name)
							}
						}
					}
				}
			}
		}
	}
	return names
}

// Issue 26: before the first tagged release, every exported name is shown
// to users (README.md, example_test.go, cmd/lock-example) or justified in
// docs/API.md; a justification whose name is gone is stale.
func TestEveryExportedNameIsShownOrJustified(t *testing.T) {
	var shown strings.Builder
	sources := []string{"README.md", "example_test.go"}
	lockExample, err := filepath.Glob("cmd/lock-example/*.go")
	require.NoError(t, err)
	sources = append(sources, lockExample...)
	for _, name := range sources {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		shown.Write(b)
	}
	apiDoc, err := os.ReadFile("docs/API.md")
	require.NoError(t, err)
	justified := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([A-Za-z0-9_.]+)` \\|").FindAllStringSubmatch(string(apiDoc), -1) {
		justified[m[1]] = true
	}
	exported := map[string]bool{}
	for _, name := range exportedNames(t) {
		exported[name] = true
		last := name[strings.LastIndex(name, ".")+1:]
		if regexp.MustCompile(`\b` + last + `\b`).MatchString(shown.String()) {
			continue
		}
		if !justified[name] {
			t.Errorf("%s is exported, but neither README.md, example_test.go nor cmd/lock-example uses it, and docs/API.md does not say why it stays: show it, justify it there, or unexport it", name)
		}
	}
	for name := range justified {
		if !exported[name] {
			t.Errorf("docs/API.md justifies %s, which the package no longer exports: remove the row", name)
		}
	}
}
