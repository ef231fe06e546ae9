package dynamolock_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Issue 21, item 5: the library reads time and waits only through its
// clock (clock.go, on internal/clock), so that the simulation can give each
// client its own clock. A direct read of the time package's clock anywhere
// else would escape it: the simulated client would see the bubble's shared
// clock there, and the search of skew, rate error and pauses would not
// cover that code.
func TestTimeHasOneSeam(t *testing.T) {
	forbidden := map[string]map[string]bool{
		"time": {"Now": true, "Since": true, "Until": true, "NewTimer": true, "After": true, "AfterFunc": true,
			"NewTicker": true, "Tick": true, "Sleep": true},
		"context": {"WithTimeout": true, "WithDeadline": true, "WithTimeoutCause": true, "WithDeadlineCause": true},
	}
	names, err := filepath.Glob("*.go")
	require.NoError(t, err)
	fset := token.NewFileSet()
	scanned := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || name == "clock.go" {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		require.NoError(t, err)
		scanned++
		imports := map[string]string{} // local name → import path
		for _, im := range f.Imports {
			path, _ := strconv.Unquote(im.Path.Value)
			local := path[strings.LastIndex(path, "/")+1:]
			if im.Name != nil {
				local = im.Name.Name
			}
			imports[local] = path
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok || id.Obj != nil { // a local variable, not a package
				return true
			}
			if forbidden[imports[id.Name]][sel.Sel.Name] {
				t.Errorf("%s: %s.%s: the library reads time and waits only through its clock (clock.go: c.now, c.since, c.until, c.newTimer, c.withTimeout, c.withDeadline)",
					fset.Position(sel.Pos()), id.Name, sel.Sel.Name)
			}
			return true
		})
	}
	require.Greater(t, scanned, 20, "the library's files were not found")
}
