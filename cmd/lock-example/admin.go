package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// anySortKey stands in for the sort key value of a client that only lists
// or creates the table: the library needs one with the attribute name.
const anySortKey = "*"

// runAdmin runs the subcommands that inspect and manage the lock table.
func runAdmin(cfg *config, sub string, args []string, stdout, stderr io.Writer) int {
	logf := func(format string, a ...any) {
		fmt.Fprintf(stderr, "lock-example: "+format+"\n", a...)
	}
	want := map[string]int{"create-table": 0, "list": 0, "show": 1, "force-release": 1}[sub]
	if len(args) != want {
		logf("%s takes %d argument(s), got %q; see lock-example --help", sub, want, args)
		if len(args) > want {
			logf("to run a command under a lock named %q, write: lock-example [flags] -- %s <command>", sub, sub)
		}
		return exitSetup
	}
	if sub == "force-release" && cfg.owner == "" {
		logf("force-release needs --owner: the lock's current owner, as list and show print it")
		return exitSetup
	}
	_, sortValue, hasValue := strings.Cut(cfg.sortKey, "=")
	if (sub == "create-table" || sub == "list") && cfg.sortKey != "" && !hasValue {
		cfg.sortKey += "=" + anySortKey
	}

	if cfg.watch < 0 {
		logf("%v", &usageError{"--watch", cfg.watch, "must not be negative"})
		return exitSetup
	}
	if err := cfg.checkAdminFlags(sub); err != nil {
		logf("%v", err)
		return exitSetup
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	db, err := newDynamoDB(ctx, os.Getenv)
	if err != nil {
		logf("%v", err)
		return exitSetup
	}
	if sub == "list" {
		// Without the sort key's name, the locks of one partition key
		// could not be told apart: ask the table for it. A --sort-key the
		// table does not have would make every item look malformed.
		name, err := tableSortKey(ctx, db, cfg.table)
		if err != nil {
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		}
		given, _, _ := strings.Cut(cfg.sortKey, "=")
		switch {
		case cfg.sortKey == "" && name != "":
			cfg.sortKey = name + "=" + anySortKey
		case cfg.sortKey != "" && name == "":
			logf("%v", &usageError{"--sort-key", fmt.Sprintf("%q", given), fmt.Sprintf("table %q has no sort key; list it without --sort-key", cfg.table)})
			return exitSetup
		case cfg.sortKey != "" && given != name:
			logf("%v", &usageError{"--sort-key", fmt.Sprintf("%q", given), fmt.Sprintf("table %q has sort key %q, not %q", cfg.table, name, given)})
			return exitSetup
		}
	}
	tap := cfg.tapOn(db)
	client, err := cfg.newClientFor(tap, stderr, dynamolock.DisableHeartbeat())
	if err != nil {
		logf("%v", err)
		return exitSetup
	}
	defer func() {
		if err := client.Close(); err != nil {
			logf("%s", errorLines(cfg, db, err))
		}
	}()

	switch sub {
	case "create-table":
		created, err := createTable(ctx, cfg, client)
		if err != nil {
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		}
		if created {
			fmt.Fprintf(stdout, "created table %q\n", cfg.table)
		} else {
			fmt.Fprintf(stdout, "table %q already exists\n", cfg.table)
		}
		return exitOK
	case "list":
		filter := ""
		if hasValue {
			filter = sortValue
		}
		if err := listLocks(ctx, cfg, client, tap, filter, stdout, stderr); err != nil {
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		}
		return exitOK
	case "show":
		code, err := showLock(ctx, cfg, client, tap, args[0], stdout)
		switch {
		case err != nil:
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		case code == exitNoSuchKey && cfg.limit == 0:
			logf("no lock %q in table %q (nor slot %s#0 of a --limit run; `show --limit N %s` reads all N slots)",
				args[0], cfg.table, args[0], args[0])
		case code == exitNoSuchKey:
			logf("no lock %q in table %q, nor any of its %d slots", args[0], cfg.table, cfg.limit)
		}
		return code
	}
	return forceRelease(ctx, cfg, client, tap, args[0], stdout, logf)
}

// forceRelease releases the exclusive holder of name if it is --owner
// (force-release). It exits 1 when there is nothing of --owner's to
// release: no such lock, or one that another owner holds, shared holders
// hold, or its owner renewed while force-release ran.
func forceRelease(ctx context.Context, cfg *config, client *dynamolock.Client, tap *itemTap, name string, stdout io.Writer,
	logf func(string, ...any)) int {
	view, err := client.GetWithContext(ctx, name)
	if err != nil {
		logf("%s", errorLines(cfg, tap.Client, err))
		return exitSetup
	}
	h := holdersOf(tap.item(name, cfg.sortValue()))
	switch {
	case view.OwnerName() == "":
		logf("no lock %q in table %q", name, cfg.table)
		return exitNoSuchKey
	case view.IsReleased() && len(h.readers) > 0:
		logf("lock %q is held by %s and no exclusive holder: nothing released (force-release releases an exclusive holder; "+
			"a shared holder that died is dropped by the next exclusive run, once that run has seen it unrenewed for its lease)",
			name, plural(len(h.readers), "shared run", "shared runs"))
		return exitNotReleased
	case view.IsReleased():
		fmt.Fprintf(stdout, "lock %q is already released\n", name)
		return exitOK
	case view.OwnerName() != cfg.owner:
		logf("lock %q is held by %q, not %q: nothing released", name, view.OwnerName(), cfg.owner)
		return exitNotReleased
	}
	// The release is conditioned on the owner and the record version number
	// just read: if the owner renewed the lock meanwhile, it is alive and
	// nothing is released.
	if _, err := client.ReleaseLockWithContext(ctx, view); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) || errors.Is(err, dynamolock.ErrLockLost) {
			logf("lock %q changed since it was read (renewed by a live owner, or taken): nothing released", name)
			return exitNotReleased
		}
		logf("%s", errorLines(cfg, tap.Client, err))
		return exitSetup
	}
	fmt.Fprintf(stdout, "released lock %q of owner %q (fencing token %d)\n", name, view.OwnerName(), view.FencingToken())
	return exitOK
}

// tableSortKey returns the name of the table's sort key, or "" if it has
// none.
//
// The call is bounded as the library bounds its own (about 5 s without an
// answer is a *dynamolock.ConnectionError), and an answer without a table
// is not DynamoDB's.
func tableSortKey(ctx context.Context, db *dynamodb.Client, table string) (string, error) {
	const bound = 5 * time.Second
	callCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	out, err := db.DescribeTable(callCtx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	endpoint := aws.ToString(db.Options().BaseEndpoint)
	if endpoint == "" {
		endpoint = "region " + db.Options().Region
	}
	switch {
	case err != nil && ctx.Err() == nil && callCtx.Err() != nil:
		return "", &dynamolock.ConnectionError{Endpoint: endpoint, Op: "DescribeTable",
			Reason: fmt.Sprintf("no answer within %s", bound)}
	case err != nil:
		return "", fmt.Errorf("describing table %q: %w", table, err)
	case out.Table == nil:
		return "", &dynamolock.ConnectionError{Endpoint: endpoint, Op: "DescribeTable",
			Reason: "its answer describes no table: it is not DynamoDB"}
	}
	for _, k := range out.Table.KeySchema {
		if k.KeyType == types.KeyTypeRange {
			return aws.ToString(k.AttributeName), nil
		}
	}
	return "", nil
}

// keyNames describes a key schema, e.g. `partition key "key" (S) and no
// sort key`.
func keyNames(keys []dynamolock.KeyAttribute) string {
	parts := make([]string, 0, 2)
	for _, k := range keys {
		parts = append(parts, k.String())
	}
	if len(keys) < 2 {
		parts = append(parts, "no sort key")
	}
	return strings.Join(parts, " and ")
}

// ensureTable creates the table unless it exists.
func ensureTable(ctx context.Context, cfg *config, client *dynamolock.Client) error {
	_, err := createTable(ctx, cfg, client)
	return err
}

// createTable creates the table unless it exists, waits until it is ACTIVE,
// and checks an existing table's key schema. It reports false when the
// table already existed.
func createTable(ctx context.Context, cfg *config, client *dynamolock.Client) (bool, error) {
	return client.CreateTableIfNotExists(ctx)
}

// dataText shows data as quoted text when it is UTF-8, else as base64.
func dataText(b []byte) string {
	if utf8.Valid(b) {
		return fmt.Sprintf("%q", b)
	}
	return "base64:" + base64.StdEncoding.EncodeToString(b)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
