package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
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
	client, err := cfg.newClientFor(db, stderr, dynamolock.DisableHeartbeat())
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
		return listLocks(ctx, cfg, client, db, filter, stdout, stderr)
	}

	if sub == "show" {
		o, err := watchLock(ctx, cfg, client, args[0])
		switch {
		case err != nil:
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		case o == nil:
			logf("no lock %q in table %q", args[0], cfg.table)
			return exitNoSuchKey
		}
		if err := printLock(stdout, o.lock, o, cfg.watch, cfg.json); err != nil {
			logf("%s", errorLines(cfg, db, err))
			return exitSetup
		}
		return exitOK
	}
	view, err := client.GetWithContext(ctx, args[0])
	switch {
	case err != nil:
		logf("%s", errorLines(cfg, db, err))
		return exitSetup
	case view.OwnerName() == "":
		logf("no lock %q in table %q", args[0], cfg.table)
		return exitNoSuchKey
	case view.IsReleased():
		fmt.Fprintf(stdout, "lock %q is already released\n", args[0])
		return exitOK
	case view.OwnerName() != cfg.owner:
		logf("lock %q is held by %q, not %q: nothing released", args[0], view.OwnerName(), cfg.owner)
		return exitNotReleased
	}
	// The release is conditioned on the owner and the record version number
	// just read: if the owner renewed the lock meanwhile, it is alive and
	// nothing is released.
	if _, err := client.ReleaseLockWithContext(ctx, view); err != nil {
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) || errors.Is(err, dynamolock.ErrLockLost) {
			logf("lock %q changed since it was read (renewed by a live owner, or taken): nothing released", args[0])
			return exitNotReleased
		}
		logf("%s", errorLines(cfg, db, err))
		return exitSetup
	}
	fmt.Fprintf(stdout, "released lock %q of owner %q (fencing token %d)\n", args[0], view.OwnerName(), view.FencingToken())
	return exitOK
}

// tableSortKey returns the name of the table's sort key, or "" if it has
// none.
func tableSortKey(ctx context.Context, db *dynamodb.Client, table string) (string, error) {
	out, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return "", fmt.Errorf("describing table %q: %w", table, err)
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

// lockJSON is a lock as list --json and show --json print it.
type lockJSON struct {
	Key                 string `json:"key"`
	SortKey             string `json:"sortKey,omitempty"`
	Owner               string `json:"owner"`
	LeaseDuration       string `json:"leaseDuration"`
	Released            bool   `json:"released"`
	FencingToken        uint64 `json:"fencingToken"`
	RecordVersionNumber string `json:"recordVersionNumber"`
	DataSize            int    `json:"dataSize"`
	Data                []byte `json:"data,omitempty"` // base64
	// With --watch: how long the lock was watched, how long its record
	// version number was seen unchanged, and, if a renewal was seen, how
	// long ago at most the last one happened.
	WatchedFor     string `json:"watchedFor,omitempty"`
	UnchangedFor   string `json:"unchangedFor,omitempty"`
	RenewedWithin  string `json:"renewedWithin,omitempty"`
	RenewalsSeen   int    `json:"renewalsSeen,omitempty"`
	ObservedStatus string `json:"observed,omitempty"`
}

func toJSON(l *dynamolock.Lock, o *observed, watch time.Duration) lockJSON {
	j := lockJSON{
		Key:                 l.PartitionKey(),
		SortKey:             l.SortKey(),
		Owner:               l.OwnerName(),
		LeaseDuration:       l.LeaseDuration().String(),
		Released:            l.IsReleased(),
		FencingToken:        l.FencingToken(),
		RecordVersionNumber: l.RecordVersionNumber(),
		DataSize:            len(l.Data()),
		Data:                l.Data(),
	}
	if o != nil && watch > 0 {
		j.WatchedFor = round(o.last.Sub(o.first)).String()
		j.UnchangedFor = round(o.unchangedFor()).String()
		if d, ok := o.renewedWithin(); ok {
			j.RenewedWithin = round(d).String()
		}
		j.RenewalsSeen = o.renewals
		j.ObservedStatus = o.summary()
	}
	return j
}

func printLock(w io.Writer, l *dynamolock.Lock, o *observed, watch time.Duration, asJSON bool) error {
	j := toJSON(l, o, watch)
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(j)
	}
	row := func(k string, v any) { fmt.Fprintf(w, "%-15s %v\n", k+":", v) }
	row("key", j.Key)
	if j.SortKey != "" {
		row("sort key", j.SortKey)
	}
	row("owner", j.Owner)
	row("lease", j.LeaseDuration)
	row("released", yesNo(j.Released))
	row("fencing token", j.FencingToken)
	row("record version", j.RecordVersionNumber)
	row("data size", j.DataSize)
	if j.DataSize > 0 {
		row("data", dataText(j.Data))
	}
	if j.ObservedStatus != "" {
		row("seen in "+j.WatchedFor, j.ObservedStatus)
	}
	return nil
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
