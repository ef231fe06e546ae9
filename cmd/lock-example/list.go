package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// observed is what reading a lock again for --watch showed. No clock is
// compared across hosts: the item holds no time, only a record version
// number that its exclusive holder changes at every renewal, and a beat in
// each shared holder's entry, which that holder changes at every renewal.
type observed struct {
	first     time.Time             // the first read
	last      time.Time             // the last read
	writer    beatWatch             // the exclusive holder's record version number
	readers   map[string]*beatWatch // the shared holders' beats, by id
	lock      *dynamolock.Lock
	h         holders
	lastValid bool // seen in the last read
}

// beatWatch follows one holder's beat (a record version number, or a
// shared holder's beat) across reads.
type beatWatch struct {
	beat     string
	lease    time.Duration
	since    time.Time // the read that first saw beat
	prev     time.Time // the read before that one (a renewal happened after it)
	renewals int       // changes of the beat seen
}

func (b *beatWatch) see(beat string, lease time.Duration, at, prevRead time.Time) {
	switch {
	case b.since.IsZero():
		b.beat, b.since = beat, at
	case b.beat != beat:
		b.renewals++
		b.prev = prevRead
		b.beat, b.since = beat, at
	}
	b.lease = lease
}

// renewedWithin is, when a renewal was seen, how long before the last read
// at most the last one happened.
func (b *beatWatch) renewedWithin(last time.Time) (time.Duration, bool) {
	return last.Sub(b.prev), b.renewals > 0
}

// summary says in words what was seen of the holder.
func (b *beatWatch) summary(last time.Time) string {
	switch d, ok := b.renewedWithin(last); {
	case ok:
		return fmt.Sprintf("renewed, last at most %s ago", round(d))
	case last.Sub(b.since) >= b.lease:
		return fmt.Sprintf("not renewed for %s, over its lease: holder dead or cut off", round(last.Sub(b.since)))
	default:
		return fmt.Sprintf("not renewed for %s (less than its lease)", round(last.Sub(b.since)))
	}
}

func (o *observed) see(l *dynamolock.Lock, h holders, at, prevRead time.Time) {
	if o.first.IsZero() {
		o.first = at
	}
	o.writer.see(l.RecordVersionNumber(), l.LeaseDuration(), at, prevRead)
	if o.readers == nil {
		o.readers = map[string]*beatWatch{}
	}
	present := map[string]bool{}
	for _, r := range h.readers {
		present[r.id] = true
		b := o.readers[r.id]
		if b == nil {
			b = &beatWatch{}
			o.readers[r.id] = b
		}
		b.see(r.beat, r.lease, at, prevRead)
	}
	for id := range o.readers {
		if !present[id] {
			delete(o.readers, id) // it left
		}
	}
	o.last, o.lock, o.h, o.lastValid = at, l, h, true
}

// sharedNow reports whether shared holders, and no exclusive one, hold
// the lock as last read.
func (o *observed) sharedNow() bool { return o.lock.IsReleased() && len(o.h.readers) > 0 }

// unchangedFor is how long the holder's beat has been seen unchanged (at
// least); for shared holders, the freshest one's.
func (o *observed) unchangedFor() time.Duration {
	if !o.sharedNow() {
		return o.last.Sub(o.writer.since)
	}
	d := o.last.Sub(o.first)
	for _, b := range o.readers {
		d = min(d, o.last.Sub(b.since))
	}
	return d
}

// renewedWithin is, when a renewal was seen, how long ago at most the last
// one happened.
func (o *observed) renewedWithin() (time.Duration, bool) {
	if !o.sharedNow() {
		return o.writer.renewedWithin(o.last)
	}
	var best time.Duration
	seen := false
	for _, b := range o.readers {
		if d, ok := b.renewedWithin(o.last); ok && (!seen || d < best) {
			best, seen = d, true
		}
	}
	return best, seen
}

func (o *observed) renewals() int {
	if !o.sharedNow() {
		return o.writer.renewals
	}
	n := 0
	for _, b := range o.readers {
		n += b.renewals
	}
	return n
}

// summary says in words what was seen.
func (o *observed) summary() string {
	switch {
	case isFree(o.lock, o.h):
		return "released"
	case !o.sharedNow():
		return o.writer.summary(o.last)
	}
	// Shared holders: how many renewed, and how many did not for their lease.
	var renewed, dead, young int
	var within, deadFor time.Duration
	for _, b := range o.readers {
		d, ok := b.renewedWithin(o.last)
		switch unchanged := o.last.Sub(b.since); {
		case ok:
			if renewed == 0 || d < within {
				within = d
			}
			renewed++
		case unchanged >= b.lease:
			if dead == 0 || unchanged < deadFor {
				deadFor = unchanged
			}
			dead++
		default:
			young++
		}
	}
	var parts []string
	if renewed > 0 {
		parts = append(parts, fmt.Sprintf("%d renewed, last at most %s ago", renewed, round(within)))
	}
	if dead > 0 {
		parts = append(parts, fmt.Sprintf("%d not renewed for %s or more, over the lease: dead or cut off", dead, round(deadFor)))
	}
	if young > 0 {
		parts = append(parts, fmt.Sprintf("%d not renewed yet (less than the lease)", young))
	}
	return fmt.Sprintf("%s: %s", plural(len(o.readers), "shared holder", "shared holders"), strings.Join(parts, "; "))
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
// much time has passed, and says of each lock whether its holders renewed
// it meanwhile. Items it cannot read are reported on stderr and skipped.
func listLocks(ctx context.Context, cfg *config, client *dynamolock.Client, tap *itemTap, sortKey string, stdout, stderr io.Writer) error {
	seen := map[[2]string]*observed{}
	var order [][2]string
	start, prevRead := time.Now(), time.Time{}
	for {
		at := time.Now()
		locks, err := readAll(ctx, client, sortKey, stderr, prevRead.IsZero())
		if err != nil {
			return err
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
			o.see(l, holdersOf(tap.item(k[0], k[1])), at, prevRead)
		}
		prevRead = at
		if time.Since(start) >= cfg.watch {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
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
			out = append(out, toJSON(o, cfg.watch))
		}
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	header := "KEY\tSORT KEY\tHELD AS\tOWNER\tLEASE\tRELEASED\tFENCING TOKEN\tDATA SIZE"
	if cfg.watch > 0 {
		header += "\tSEEN IN " + cfg.watch.String()
	}
	fmt.Fprintln(tw, header)
	for _, o := range obs {
		j := toJSON(o, cfg.watch)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d", j.Key, cmp.Or(j.SortKey, "-"), heldText(o.lock, o.h),
			cmp.Or(j.Owner, "-"), j.LeaseDuration, yesNo(j.Released), j.FencingToken, j.DataSize)
		if cfg.watch > 0 {
			fmt.Fprintf(tw, "\t%s", j.ObservedStatus)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// watchLocks reads the locks keys until --watch has passed. A key without
// an item has a nil entry.
func watchLocks(ctx context.Context, cfg *config, client *dynamolock.Client, tap *itemTap, keys []string) ([]*observed, error) {
	obs := make([]*observed, len(keys))
	sortValue := cfg.sortValue()
	start, prevRead := time.Now(), time.Time{}
	for {
		at := time.Now()
		for i, key := range keys {
			l, err := client.GetWithContext(ctx, key)
			if err != nil {
				return nil, err
			}
			if l.OwnerName() == "" {
				obs[i] = nil
				continue
			}
			if obs[i] == nil {
				obs[i] = &observed{}
			}
			obs[i].see(l, holdersOf(tap.item(key, sortValue)), at, prevRead)
		}
		prevRead = at
		if time.Since(start) >= cfg.watch {
			return obs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(min(watchInterval(cfg.watch), cfg.watch-time.Since(start))):
		}
	}
}
