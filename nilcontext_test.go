package dynamolock_test

import (
	"context"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// takesContext lists the exported functions and methods of the package
// (its non-test files) that take a context.Context, as "Func" or
// "Type.Method". Read from the source, so that a new one is in the list
// without anyone adding it.
func takesContext(t *testing.T) []string {
	t.Helper()
	fset := token.NewFileSet()
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var names []string
	for _, path := range files {
		if strings.HasSuffix(path, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		require.NoError(t, err)
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !fn.Name.IsExported() || !hasContextParam(fn.Type) {
				continue
			}
			name := fn.Name.Name
			if fn.Recv != nil {
				recv := fn.Recv.List[0].Type
				if star, ok := recv.(*ast.StarExpr); ok {
					recv = star.X
				}
				id, ok := recv.(*ast.Ident)
				if !ok || !id.IsExported() {
					continue // a method of an unexported type is not API
				}
				name = id.Name + "." + name
			}
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

func hasContextParam(ft *ast.FuncType) bool {
	for _, p := range ft.Params.List {
		if sel, ok := p.Type.(*ast.SelectorExpr); ok && sel.Sel.Name == "Context" {
			if pkg, ok := sel.X.(*ast.Ident); ok && pkg.Name == "context" {
				return true
			}
		}
	}
	return false
}

// Issue 40, item 1: every exported function that takes a context returns
// an *InvalidArgumentError naming ctx for a nil one, before any DynamoDB
// call, and never panics (AcquireLockWithContext and Do panicked in the
// table check). Each call is made in the state where it would otherwise
// reach DynamoDB: a held lock, a leading election.
func TestNilContextIsBadInput(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(20*time.Second))
	held, err := c.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	election := c.NewElection("leader")
	_, err = election.Campaign(ctx, []byte("v"))
	require.NoError(t, err)
	sem, err := c.NewSemaphore("sem", 2)
	require.NoError(t, err)
	rw, err := c.NewRWLock("rw")
	require.NoError(t, err)
	var nilCtx context.Context // what a caller passes by mistake
	first := func(seq func(func(*dynamolock.Lock, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return fmt.Errorf("the listing yielded nothing")
	}
	second := func(_ any, err error) error { return err }
	noop := func(context.Context, *dynamolock.Lock) error { return nil }

	calls2 := map[string]func() error{
		"Client.AcquireLockWithContext":    func() error { return second(c.AcquireLockWithContext(nilCtx, "k")) },
		"Client.Do":                        func() error { return c.Do(nilCtx, "k", noop) },
		"Client.Session":                   func() error { return second(c.Session(nilCtx)) },
		"Client.AcquireLocks":              func() error { return second(c.AcquireLocks(nilCtx, []string{"a", "b"})) },
		"Client.GetWithContext":            func() error { return second(c.GetWithContext(nilCtx, "k")) },
		"Client.GetWithSortKeyWithContext": func() error { return second(c.GetWithSortKeyWithContext(nilCtx, "k", "s")) },
		"Client.SendHeartbeatWithContext":  func() error { return c.SendHeartbeatWithContext(nilCtx, held) },
		"Client.ReleaseLockWithContext":    func() error { return second(c.ReleaseLockWithContext(nilCtx, held)) },
		"Client.CloseWithContext":          func() error { return c.CloseWithContext(nilCtx) },
		"Client.CreateTableWithContext":    func() error { return second(c.CreateTableWithContext(nilCtx, table+"_new")) },
		"Client.CreateTableIfNotExists":    func() error { return second(c.CreateTableIfNotExists(nilCtx)) },
		"Client.TableExists":               func() error { return second(c.TableExists(nilCtx)) },
		"Client.AssertTableExists":         func() error { return c.AssertTableExists(nilCtx) },
		"Client.AllLocks":                  func() error { return first(c.AllLocks(nilCtx)) },
		"Client.LocksByPartitionKey":       func() error { return first(c.LocksByPartitionKey(nilCtx, "k")) },
		"Lock.Ensure":                      func() error { return held.Ensure(nilCtx, time.Hour) },
		"Lock.Release":                     func() error { return held.Release(nilCtx) },
		"RWLock.Unlock":                    func() error { return rw.Unlock(nilCtx, held) },
		"RWLock.RUnlock":                   func() error { return rw.RUnlock(nilCtx, held) },
		"Election.Campaign":                func() error { return second(election.Campaign(nilCtx, []byte("w"))) },
		"Election.Proclaim":                func() error { return election.Proclaim(nilCtx, []byte("w")) },
		"Election.Resign":                  func() error { return election.Resign(nilCtx) },
		"Election.Leader":                  func() error { return second(election.Leader(nilCtx)) },
		"Semaphore.Acquire":                func() error { return second(sem.Acquire(nilCtx)) },
		"RWLock.RLock":                     func() error { return second(rw.RLock(nilCtx)) },
		"RWLock.Lock":                      func() error { return second(rw.Lock(nilCtx)) },
		"Election.Run":                     func() error { return election.Run(nilCtx, nil, dynamolock.LeaderCallbacks{}) },
		"Client.ResumeLock":                func() error { return second(c.ResumeLock(nilCtx, held.ResumeToken())) },
		"Semaphore.Holders":                func() error { return second(sem.Holders(nilCtx)) },
		"RWLock.Readers":                   func() error { return second(rw.Readers(nilCtx)) },
	}

	// Observe has no error to return: its channel closes at once.
	channels := map[string]func() <-chan dynamolock.Leader{
		"Election.Observe": func() <-chan dynamolock.Leader { return election.Observe(nilCtx) },
	}

	listed := takesContext(t)
	require.NotEmpty(t, listed)
	for _, name := range listed {
		_, isErr := calls2[name]
		_, isChan := channels[name]
		assert.True(t, isErr || isChan, "%s takes a context: add it to this test (and check its ctx)", name)
	}
	for name := range calls2 {
		assert.Contains(t, listed, name, "%s is not an exported function that takes a context", name)
	}
	for name := range channels {
		assert.Contains(t, listed, name, "%s is not an exported function that takes a context", name)
	}

	calls.reset()
	for _, name := range listed {
		call, ok := calls2[name]
		if !ok {
			continue
		}
		t.Run(name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = call() })
			var ie *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &ie, "%v", err)
			assert.Equal(t, "ctx", ie.Name)
			assert.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
			assert.Zero(t, calls.total(), "a nil context reached DynamoDB: %v", calls.reset())
		})
	}
	for name, observe := range channels {
		t.Run(name, func(t *testing.T) {
			var ch <-chan dynamolock.Leader
			require.NotPanics(t, func() { ch = observe() })
			select {
			case ld, ok := <-ch:
				assert.False(t, ok, "a leader delivered for a nil context: %+v", ld)
			case <-time.After(5 * time.Second):
				t.Fatal("the channel stayed open for a nil context")
			}
			assert.Zero(t, calls.total(), "a nil context reached DynamoDB: %v", calls.reset())
		})
	}
	// Nothing above disturbed the client: still open, the lock and the
	// leadership held.
	require.NoError(t, held.Err())
	_, err = c.GetWithContext(ctx, "held")
	require.NoError(t, err, "CloseWithContext(nil) left the client open")
	ld, err := election.Leader(ctx)
	require.NoError(t, err)
	assert.Equal(t, c.OwnerName(), ld.Owner)
}
