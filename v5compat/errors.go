package dynamolock

import "strings"

// inV5Terms returns err with the remedies its message names in the root
// package's terms (CreateTableIfNotExists, WithReentrant, a client
// option v5compat does not have) said in this package's: the way a v5
// program reaches the same fix. An error whose message names none is
// returned as it is (a sentinel stays itself, for err == ErrClientClosed);
// another is a *v5Error around it, which errors.Is and errors.As see
// through.
func inV5Terms(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	out := v5Remedies.Replace(msg)
	if out == msg {
		return err
	}
	return &v5Error{msg: out, err: err}
}

// v5Error is an error of the engine with its message in v5compat's terms
// (see inV5Terms). Unwrap returns the engine's error.
type v5Error struct {
	msg string
	err error
}

func (e *v5Error) Error() string { return e.msg }

// Unwrap returns the engine's error, so that errors.Is and errors.As match
// it as they match the engine's.
func (e *v5Error) Unwrap() error { return e.err }

// v5Remedies rewrites the engine's advice, phrase by phrase, where it
// names what v5compat does not have. native is the root package, as in
// this package's documentation (github.com/arielsrv/dynamolock/v2,
// imported under that name), whose options WithNativeOptions and the
// calls' option lists take.
var v5Remedies = strings.NewReplacer(
	// ErrTableNotFound and a table keyed with other types: v5compat has
	// CreateTable, not CreateTableIfNotExists.
	"create it with CreateTableIfNotExists,", "create it with CreateTable,",
	"(Client.CreateTableIfNotExists, or lock-example create-table, makes one)", "(Client.CreateTable, or lock-example create-table, makes one)",
	// A key this client holds: v5 has no reentrant acquisition; Get
	// returns the held lock.
	"release it first, or use WithReentrant to get the held lock", "release it first (ReleaseLock, or the lock's Close), or use the held lock: Get returns it",
	// A key another client with the same owner name holds: the fix is
	// distinct owner names; v5 programs have no WithReentrant to avoid.
	", and use WithReentrant only for a lock this very process holds through this client (here it would take the lock from a holder that still holds it)", "",
	// WithSortKey(name, ""): v5 writes an empty sort key, which DynamoDB
	// refuses; the v5 way is a value.
	"every acquisition must give one with WithSortKeyValue", "give WithSortKey a value (DynamoDB refuses an empty key), or give each AcquireLock native.WithSortKeyValue",
	// Client options of the engine only: through WithNativeOptions.
	"New(..., WithSingleWriterRegion())", "New(..., WithNativeOptions(native.WithSingleWriterRegion()))",
	"New(..., WithSession())", "New(..., WithNativeOptions(native.WithSession()))",
	"raise WithHeartbeatConcurrency", "raise it with WithNativeOptions(native.WithHeartbeatConcurrency(n))",
)
