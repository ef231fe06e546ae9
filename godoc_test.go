package dynamolock_test

import (
	"go/ast"
	"go/doc"
	"go/doc/comment"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
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

// docRendered renders doc text as `go doc` prints a package's doc: its
// text flush left, its code blocks indented by four spaces.
func docRendered(p *doc.Package, d *comment.Doc) string {
	pr := p.Printer()
	pr.TextCodePrefix = "    "
	return string(pr.Text(d))
}

// Issue 40: the way in is short. The first screen of `go doc` (about 40
// lines, the package clause's two included) shows the three jobs with the
// call for each, the three calls most programs need, and a complete
// example, which is the region of doc_example_test.go that Example_worker
// runs against DynamoDB Local.
func TestPackageDocExampleIsRun(t *testing.T) {
	p := packageDoc(t)
	d := p.Parser().Parse(p.Doc)
	first := -1
	for i, b := range d.Content {
		if _, ok := b.(*comment.Code); ok {
			first = i
			break
		}
	}
	require.GreaterOrEqual(t, first, 0, "the package doc has an example")

	src, err := os.ReadFile("doc_example_test.go")
	require.NoError(t, err)
	var region string
	for _, m := range snippetRegion.FindAllStringSubmatch(string(src), -1) {
		if m[1] == "package-doc" {
			region = dedent(m[2])
		}
	}
	require.NotEmpty(t, region, "doc_example_test.go has the region package-doc")
	assert.Equal(t, region, d.Content[first].(*comment.Code).Text,
		"the package doc's first code block is the region package-doc of doc_example_test.go, which Example_worker runs")

	upTo := &comment.Doc{Content: d.Content[:first+1], Links: d.Links}
	screen := "package dynamolock // import \"github.com/arielsrv/dynamolock/v2\"\n\n" + docRendered(p, upTo)
	lines := strings.Count(screen, "\n")
	t.Logf("go doc: %d lines up to the end of the package doc's first example", lines)
	assert.LessOrEqual(t, lines, 40, "the package doc's example ends within the first screen of go doc:\n%s", screen)
	for _, name := range []string{
		"[Election.Campaign]", "[Client.Do]", "[RWLock.RLock]", "[RWLock.Lock]", // the three jobs
		"[New]", "[Client.CreateTableIfNotExists]", // with Do, the calls most programs need
	} {
		assert.Contains(t, strings.Join(blockTexts(d.Content[:first]), "\n"), name, "the first screen names %s", name)
	}
}

// blockTexts returns the text of blocks, each doc link written as in the
// source: [Name] or [Recv.Name].
func blockTexts(blocks []comment.Block) []string {
	var out []string
	var text func(ts []comment.Text) string
	text = func(ts []comment.Text) string {
		var b strings.Builder
		for _, x := range ts {
			switch x := x.(type) {
			case comment.Plain:
				b.WriteString(string(x))
			case comment.Italic:
				b.WriteString(string(x))
			case *comment.DocLink:
				b.WriteString("[")
				if x.Recv != "" {
					b.WriteString(x.Recv + ".")
				}
				b.WriteString(x.Name + "]")
			case *comment.Link:
				b.WriteString(text(x.Text))
			}
		}
		return b.String()
	}
	for _, bl := range blocks {
		switch bl := bl.(type) {
		case *comment.Paragraph:
			out = append(out, text(bl.Text))
		case *comment.Heading:
			out = append(out, text(bl.Text))
		case *comment.List:
			for _, it := range bl.Items {
				out = append(out, blockTexts(it.Content)...)
			}
		case *comment.Code:
			out = append(out, bl.Text)
		}
	}
	return out
}

// javaClientNames are Amazon's Java client's names that the docs of the
// options ported from it cite; they are also unexported identifiers here.
var javaClientNames = map[string]bool{"bestEffort": true, "leaseDurationToEnsure": true}

// Issue 40: exported docs are read by users, who cannot see the package's
// unexported identifiers nor import its internal packages: no exported doc
// names either. A word counts as an identifier's name when it is written
// as code is (camelCase, or with a digit or an underscore) or as a doc
// link; the parameters of the function documented, the item's attribute
// names and the log keys (string values of the package and of
// internal/lockitem) and the Java
// client's names are words of the contract, not identifiers.
func TestGoDocNamesNoUnexportedIdentifier(t *testing.T) {
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	unexported, literal := map[string]bool{}, map[string]bool{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ParseComments)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			var ids []*ast.Ident
			switch n := n.(type) {
			case *ast.FuncDecl:
				ids = append(ids, n.Name)
			case *ast.TypeSpec:
				ids = append(ids, n.Name)
			case *ast.ValueSpec:
				ids = append(ids, n.Names...)
			case *ast.Field:
				ids = append(ids, n.Names...)
			case *ast.BasicLit:
				if n.Kind == token.STRING {
					if s, err := strconv.Unquote(n.Value); err == nil {
						literal[s] = true
					}
				}
			}
			for _, id := range ids {
				if !id.IsExported() && id.Name != "_" {
					unexported[id.Name] = true
				}
			}
			return true
		})
	}

	// The item's attribute names live in internal/lockitem: words of the
	// contract too.
	items, err := filepath.Glob("internal/lockitem/*.go")
	require.NoError(t, err)
	for _, name := range items {
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		ast.Inspect(f, func(n ast.Node) bool {
			if n, ok := n.(*ast.BasicLit); ok && n.Kind == token.STRING {
				if s, err := strconv.Unquote(n.Value); err == nil {
					literal[s] = true
				}
			}
			return true
		})
	}

	p := packageDoc(t)
	word := regexp.MustCompile(`[A-Za-z_][A-Za-z0-9_]*`)
	link := regexp.MustCompile(`\[\*?(?:[A-Za-z_]\w*\.)?([a-z_]\w*)\]`)
	internal := regexp.MustCompile(`\binternal/\w+`)
	codeLike := regexp.MustCompile(`^.+[A-Z0-9_]`)
	check := func(what, text string, params map[string]bool) {
		for _, w := range word.FindAllString(text, -1) {
			if unexported[w] && codeLike.MatchString(w) && !params[w] && !literal[w] && !javaClientNames[w] {
				t.Errorf("the doc of %s names %s, an unexported identifier", what, w)
			}
		}
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			if unexported[m[1]] && !params[m[1]] {
				t.Errorf("the doc of %s links %s, an unexported identifier", what, m[0])
			}
		}
		if m := internal.FindString(text); m != "" {
			t.Errorf("the doc of %s names %s, an internal package", what, m)
		}
	}
	// inner checks the comments inside a declaration that `go doc` shows:
	// those of grouped constants and variables and of exported fields.
	inner := func(what string, decl ast.Node) {
		ast.Inspect(decl, func(n ast.Node) bool {
			if c, ok := n.(*ast.CommentGroup); ok {
				check(what, c.Text(), nil)
			}
			return true
		})
	}
	funcParams := func(f *doc.Func) map[string]bool {
		params := map[string]bool{}
		for _, fl := range []*ast.FieldList{f.Decl.Recv, f.Decl.Type.Params, f.Decl.Type.Results} {
			if fl == nil {
				continue
			}
			for _, field := range fl.List {
				for _, n := range field.Names {
					params[n.Name] = true
				}
			}
		}
		return params
	}
	check("the package", p.Doc, nil)
	values := append(p.Consts, p.Vars...)
	for _, ty := range p.Types {
		check(ty.Name, ty.Doc, nil)
		inner(ty.Name, ty.Decl)
		values = append(values, append(ty.Consts, ty.Vars...)...)
		for _, f := range ty.Funcs {
			check(f.Name, f.Doc, funcParams(f))
		}
		for _, m := range ty.Methods {
			check(ty.Name+"."+m.Name, m.Doc, funcParams(m))
		}
	}
	for _, v := range values {
		check(strings.Join(v.Names, ", "), v.Doc, nil)
		inner(strings.Join(v.Names, ", "), v.Decl)
	}
	for _, f := range p.Funcs {
		check(f.Name, f.Doc, funcParams(f))
	}
}
