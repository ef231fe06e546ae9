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
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

// observed is what reading a lock again for --watch showed. No clock is
// compared across hosts: the item holds no time, only a record version
// number that its holder changes at every renewal.
type observed struct {
	first     time.Time // the first read
	last      time.Time // the last read
	rvn       string    // the record version number of the last read
	since     time.Time // the read that first saw rvn
	prev      time.Time // the read before that one (a renewal happened after it)
	renewals  int       // changes of the record version number seen
	lock      *dynamolock.Lock
	lastValid bool // seen in the last read
}

func (o *observed) see(l *dynamolock.Lock, at, prevRead time.Time) {
	if o.rvn != l.RecordVersionNumber() {
		if !o.first.IsZero() {
			o.renewals++
			o.prev = prevRead
		}
		o.rvn, o.since = l.RecordVersionNumber(), at
	}
	if o.first.IsZero() {
		o.first = at
	}
	o.last, o.lock, o.lastValid = at, l, true
}

// unchangedFor is how long the record version number has been seen
// unchanged (at least).
func (o *observed) unchangedFor() time.Duration { return o.last.Sub(o.since) }

// renewedWithin is, when a renewal was seen, how long ago at most the last
// one happened.
func (o *observed) renewedWithin() (time.Duration, bool) {
	if o.renewals == 0 {
		return 0, false
	}
	return o.last.Sub(o.prev), true
}

// summary says in words what was seen.
func (o *observed) summary() string {
	switch d, ok := o.renewedWithin(); {
	case o.lock.IsReleased():
		return "released"
	case ok:
		return fmt.Sprintf("renewed, last at most %s ago", round(d))
	case o.unchangedFor() >= o.lock.LeaseDuration():
		return fmt.Sprintf("not renewed for %s, over its lease: holder dead or cut off", round(o.unchangedFor()))
	default:
		return fmt.Sprintf("not renewed for %s (less than its lease)", round(o.unchangedFor()))
	}
}

func round(d time.Duration) time.Duration { return d.Round(100 * time.Millisecond) }

// watchInterval is how often --watch reads again.
func watchInterval(watch time.Duration) time.Duration {
	return min(time.Second, max(watch/4, 50*time.Millisecond))
}

// readAll reads every lock of the table (under sort key sortKey when it is
// not empty), skipping items it cannot read.
func readAll(ctx context.Context, client *dynamolock.Client, sortKey string, stderr io.Writer, warn bool) ([]*dynamolock.Lock, error) {
	var locks []*dynamolock.Lock
	for l, err := range client.AllLocks(ctx) {
		var bad *dynamolock.ItemFormatError
		switch {
		case errors.As(err, &bad):
			if warn {
				fmt.Fprintf(stderr, "lock-example: skipped: %v\n", err)
			}
		case err != nil:
			return nil, err
		case sortKey == "" || l.SortKey() == sortKey:
			locks = append(locks, l)
		}
	}
	return locks, nil
}

// listLocks prints every lock of the table (only those under sort key
// sortKey when it is not empty), sorted by key: a table for people, or a
// JSON array with --json. With --watch it reads the table again until that
// much time has passed, and says of each lock whether its holder renewed
// it meanwhile. Items it cannot read are reported on stderr and skipped.
func listLocks(ctx context.Context, cfg *config, client *dynamolock.Client, db *dynamodb.Client, sortKey string, stdout, stderr io.Writer) int {
	seen := map[[2]string]*observed{}
	var order [][2]string
	start, prevRead := time.Now(), time.Time{}
	for {
		at := time.Now()
		locks, err := readAll(ctx, client, sortKey, stderr, prevRead.IsZero())
		if err != nil {
			fmt.Fprintf(stderr, "lock-example: %s\n", errorLines(cfg, db, err))
			return exitSetup
		}
		for _, o := range seen {
			o.lastValid = false
		}
		for _, l := range locks {
			k := [2]string{l.PartitionKey(), l.SortKey()}
			o := seen[k]
			if o == nil {
				o = &observed{}
				seen[k] = o
				order = append(order, k)
			}
			o.see(l, at, prevRead)
		}
		prevRead = at
		if time.Since(start) >= cfg.watch {
			break
		}
		select {
		case <-ctx.Done():
			fmt.Fprintf(stderr, "lock-example: %v\n", ctx.Err())
			return exitSetup
		case <-time.After(min(watchInterval(cfg.watch), cfg.watch-time.Since(start))):
		}
	}
	var obs []*observed
	for _, k := range order {
		if o := seen[k]; o.lastValid {
			obs = append(obs, o)
		}
	}
	slices.SortFunc(obs, func(a, b *observed) int {
		return cmp.Or(cmp.Compare(a.lock.PartitionKey(), b.lock.PartitionKey()), cmp.Compare(a.lock.SortKey(), b.lock.SortKey()))
	})

	if cfg.json {
		out := make([]lockJSON, 0, len(obs))
		for _, o := range obs {
			out = append(out, toJSON(o.lock, o, cfg.watch))
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
	header := "KEY\tSORT KEY\tOWNER\tLEASE\tRELEASED\tFENCING TOKEN\tDATA SIZE"
	if cfg.watch > 0 {
		header += "\tSEEN IN " + cfg.watch.String()
	}
	fmt.Fprintln(tw, header)
	for _, o := range obs {
		l := o.lock
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d", l.PartitionKey(), cmp.Or(l.SortKey(), "-"), l.OwnerName(),
			l.LeaseDuration(), yesNo(l.IsReleased()), l.FencingToken(), len(l.Data()))
		if cfg.watch > 0 {
			fmt.Fprintf(tw, "\t%s", o.summary())
		}
		fmt.Fprintln(tw)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintf(stderr, "lock-example: %v\n", err)
		return exitSetup
	}
	return exitOK
}

// watchLock reads one lock until --watch has passed.
func watchLock(ctx context.Context, cfg *config, client *dynamolock.Client, key string) (*observed, error) {
	o := &observed{}
	start, prevRead := time.Now(), time.Time{}
	for {
		at := time.Now()
		l, err := client.GetWithContext(ctx, key)
		if err != nil {
			return nil, err
		}
		if l.OwnerName() == "" {
			return nil, nil
		}
		o.see(l, at, prevRead)
		prevRead = at
		if time.Since(start) >= cfg.watch {
			return o, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(watchInterval(cfg.watch), cfg.watch-time.Since(start))):
		}
	}
}
