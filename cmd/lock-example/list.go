package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	"github.com/arielsrv/dynamolock/v2"
)

// listLocks prints every lock of the table (only those under sort key
// sortKey when it is not empty), sorted by key: a table for people, or a
// JSON array with --json. Items it cannot read are reported on stderr and
// skipped.
func listLocks(ctx context.Context, cfg *config, client *dynamolock.Client, sortKey string, stdout, stderr io.Writer) int {
	var locks []*dynamolock.Lock
	for l, err := range client.AllLocks(ctx) {
		var bad *dynamolock.ItemFormatError
		switch {
		case errors.As(err, &bad):
			fmt.Fprintf(stderr, "lock-example: skipped: %v\n", err)
		case err != nil:
			fmt.Fprintf(stderr, "lock-example: %v\n", err)
			return exitSetup
		case sortKey == "" || l.SortKey() == sortKey:
			locks = append(locks, l)
		}
	}
	slices.SortFunc(locks, func(a, b *dynamolock.Lock) int {
		return cmp.Or(cmp.Compare(a.PartitionKey(), b.PartitionKey()), cmp.Compare(a.SortKey(), b.SortKey()))
	})

	if cfg.json {
		out := make([]lockJSON, 0, len(locks))
		for _, l := range locks {
			out = append(out, toJSON(l))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			fmt.Fprintf(stderr, "lock-example: %v\n", err)
			return exitSetup
		}
		return exitOK
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "KEY\tSORT KEY\tOWNER\tLEASE\tRELEASED\tFENCING TOKEN\tDATA SIZE")
	for _, l := range locks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\n", l.PartitionKey(), cmp.Or(l.SortKey(), "-"), l.OwnerName(),
			l.LeaseDuration(), yesNo(l.IsReleased()), l.FencingToken(), len(l.Data()))
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "lock-example: %v\n", err)
		return exitSetup
	}
	return exitOK
}
