package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// lockJSON is a lock as list --json and show --json print it.
type lockJSON struct {
	Key     string `json:"key"`
	SortKey string `json:"sortKey,omitempty"`
	// HeldAs is "exclusive", "shared" (by the readers below), "slot" (of a
	// --limit run, see Slot), or absent when nobody holds the lock.
	HeldAs string `json:"heldAs,omitempty"`
	// Owner is the exclusive holder's (the last one's once released);
	// empty while shared holders hold the lock: their entries name none.
	Owner               string `json:"owner"`
	LeaseDuration       string `json:"leaseDuration"` // shared: the longest of the holders' leases
	Released            bool   `json:"released"`      // nobody holds it
	FencingToken        uint64 `json:"fencingToken"`
	RecordVersionNumber string `json:"recordVersionNumber"` // the exclusive holder's; shared holders have a beat each
	DataSize            int    `json:"dataSize"`
	Data                []byte `json:"data,omitempty"` // base64
	// The shared holders of a read/write lock, and who waits in its queue.
	Readers []readerJSON `json:"readers,omitempty"`
	Waiting *waitingJSON `json:"waiting,omitempty"`
	Slot    *slotJSON    `json:"slot,omitempty"`
	// With --watch: how long the lock was watched, how long its record
	// version number (for shared holders, the freshest beat) was seen
	// unchanged, and, if a renewal was seen, how long ago at most the last
	// one happened.
	WatchedFor     string `json:"watchedFor,omitempty"`
	UnchangedFor   string `json:"unchangedFor,omitempty"`
	RenewedWithin  string `json:"renewedWithin,omitempty"`
	RenewalsSeen   int    `json:"renewalsSeen,omitempty"`
	ObservedStatus string `json:"observed,omitempty"`
}

// readerJSON is one shared holder: its entry names no owner.
type readerJSON struct {
	ID            string `json:"id"`
	LeaseDuration string `json:"leaseDuration"`
	Beat          string `json:"beat"`
	// With --watch, as for the lock.
	UnchangedFor   string `json:"unchangedFor,omitempty"`
	RenewedWithin  string `json:"renewedWithin,omitempty"`
	RenewalsSeen   int    `json:"renewalsSeen,omitempty"`
	ObservedStatus string `json:"observed,omitempty"`
}

type waitingJSON struct {
	Exclusive int `json:"exclusive"`
	Shared    int `json:"shared"`
}

// slotJSON places a slot: key Name#Index, taken last by a run of --limit
// Limit.
type slotJSON struct {
	Name  string `json:"name"`
	Index int    `json:"index"`
	Limit int    `json:"limit"`
}

// limitJSON is show --json of a --limit name: its slots.
type limitJSON struct {
	Key   string `json:"key"`
	Limit int    `json:"limit"` // the slots read
	Held  int    `json:"held"`
	// LimitsSeen lists the --limit of the runs that took the slots, when
	// they disagree.
	LimitsSeen []int      `json:"limitsSeen,omitempty"`
	Slots      []lockJSON `json:"slots"` // the slots that have an item
}

func toJSON(o *observed, watch time.Duration) lockJSON {
	l, h := o.lock, o.h
	j := lockJSON{
		Key:                 l.PartitionKey(),
		SortKey:             l.SortKey(),
		HeldAs:              heldAs(l, h),
		Owner:               l.OwnerName(),
		LeaseDuration:       l.LeaseDuration().String(),
		Released:            isFree(l, h),
		FencingToken:        l.FencingToken(),
		RecordVersionNumber: l.RecordVersionNumber(),
		DataSize:            len(l.Data()),
		Data:                l.Data(),
	}
	if o.sharedNow() {
		// The item's owner and record version are the last exclusive
		// holder's (or the first shared one's), not the holders'.
		j.Owner, j.RecordVersionNumber, j.LeaseDuration = "", "", h.longestLease().String()
	}
	for _, r := range h.readers {
		rj := readerJSON{ID: r.id, LeaseDuration: r.lease.String(), Beat: r.beat}
		if b := o.readers[r.id]; b != nil && watch > 0 {
			rj.UnchangedFor = round(o.last.Sub(b.since)).String()
			if d, ok := b.renewedWithin(o.last); ok {
				rj.RenewedWithin = round(d).String()
			}
			rj.RenewalsSeen = b.renewals
			rj.ObservedStatus = b.summary(o.last)
		}
		j.Readers = append(j.Readers, rj)
	}
	if h.waitingWriters+h.waitingReaders > 0 {
		j.Waiting = &waitingJSON{Exclusive: h.waitingWriters, Shared: h.waitingReaders}
	}
	if h.limit > 0 {
		name, i, _ := slotOf(l.PartitionKey())
		j.Slot = &slotJSON{Name: name, Index: i, Limit: h.limit}
	}
	if watch > 0 {
		j.WatchedFor = round(o.last.Sub(o.first)).String()
		j.UnchangedFor = round(o.unchangedFor()).String()
		if d, ok := o.renewedWithin(); ok {
			j.RenewedWithin = round(d).String()
		}
		j.RenewalsSeen = o.renewals()
		j.ObservedStatus = o.summary()
	}
	return j
}

func printLock(w io.Writer, o *observed, watch time.Duration) {
	j := toJSON(o, watch)
	row := func(k string, v any) { fmt.Fprintf(w, "%-15s %v\n", k+":", v) }
	row("key", j.Key)
	if j.SortKey != "" {
		row("sort key", j.SortKey)
	}
	row("held as", heldText(o.lock, o.h))
	if j.Owner != "" {
		row("owner", j.Owner)
	}
	row("lease", j.LeaseDuration)
	row("released", yesNo(j.Released))
	row("fencing token", j.FencingToken)
	if j.RecordVersionNumber != "" {
		row("record version", j.RecordVersionNumber)
	}
	for _, r := range j.Readers {
		s := fmt.Sprintf("lease %s, beat %s", r.LeaseDuration, r.Beat)
		if r.ObservedStatus != "" {
			s += "; " + r.ObservedStatus
		}
		row("shared holder", r.ID+": "+s)
	}
	if w := o.h.waitingText(); w != "" {
		row("waiting", w)
	}
	row("data size", j.DataSize)
	if j.DataSize > 0 {
		row("data", dataText(j.Data))
	}
	if j.ObservedStatus != "" {
		row("seen in "+j.WatchedFor, j.ObservedStatus)
	}
}

// slotKeys are the keys of the n slots of the --limit name.
func slotKeys(name string, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = name + "#" + strconv.Itoa(i)
	}
	return keys
}

// showLock prints the lock name, or with --limit N, or when name has no
// item but its slot 0 is a --limit run's, the slots of name. It returns
// the exit status, or an error to report.
func showLock(ctx context.Context, cfg *config, client *dynamolock.Client, tap *itemTap, name string, w io.Writer) (int, error) {
	keys := []string{name}
	if cfg.limit > 0 {
		keys = slotKeys(name, cfg.limit)
	}
	obs, err := watchLocks(ctx, cfg, client, tap, keys)
	if err != nil {
		return 0, err
	}
	if cfg.limit == 0 && obs[0] == nil {
		// A --limit name has no item of its own: look for its slot 0.
		slot0 := name + "#0"
		l, err := client.GetWithContext(ctx, slot0)
		if err != nil {
			return 0, err
		}
		n := holdersOf(tap.item(slot0, cfg.sortValue())).limit
		if l.OwnerName() == "" || n == 0 {
			// No run took slot 0 (or it is not a --limit run's): find
			// the name's slots by a listing, which costs a Scan of the
			// table, on this path only.
			if n, err = slotsInTable(ctx, cfg, client, tap, name); err != nil {
				return 0, err
			}
		}
		if n > 0 {
			keys = slotKeys(name, n)
			if obs, err = watchLocks(ctx, cfg, client, tap, keys); err != nil {
				return 0, err
			}
		}
	}
	if len(keys) == 1 {
		if obs[0] == nil {
			return exitNoSuchKey, nil
		}
		if cfg.json {
			return exitOK, writeJSON(w, toJSON(obs[0], cfg.watch))
		}
		printLock(w, obs[0], cfg.watch)
		return exitOK, nil
	}
	out := limitJSON{Key: name, Limit: len(keys), Slots: []lockJSON{}}
	var present []*observed
	for _, o := range obs {
		if o == nil {
			continue
		}
		present = append(present, o)
		out.Slots = append(out.Slots, toJSON(o, cfg.watch))
		if !isFree(o.lock, o.h) {
			out.Held++
		}
		if n := o.h.limit; n > 0 && !slices.Contains(out.LimitsSeen, n) {
			out.LimitsSeen = append(out.LimitsSeen, n)
		}
	}
	if len(present) == 0 {
		return exitNoSuchKey, nil
	}
	slices.Sort(out.LimitsSeen)
	if len(out.LimitsSeen) < 2 {
		out.LimitsSeen = nil
	}
	if cfg.json {
		return exitOK, writeJSON(w, out)
	}
	fmt.Fprintf(w, "%s: %d slots read (%s#0 to %s#%d), %d held\n", strconv.Quote(name), len(keys), name, name, len(keys)-1, out.Held)
	if len(out.LimitsSeen) > 0 {
		fmt.Fprintf(w, "warning: the runs that took these slots gave different --limit values (%s): each may take only "+
			"the slots below its own N, so up to the largest N run at once\n", joinInts(out.LimitsSeen))
	}
	for _, o := range present {
		fmt.Fprintln(w)
		printLock(w, o, cfg.watch)
	}
	return exitOK, nil
}

// slotsInTable returns how many slots of the --limit name to read: the
// largest --limit of the runs that took a slot NAME#i, or i+1 when a slot
// lies beyond it; 0 when the table has none.
func slotsInTable(ctx context.Context, cfg *config, client *dynamolock.Client, tap *itemTap, name string) (int, error) {
	locks, err := readAll(ctx, client, cfg.sortValue(), io.Discard, false)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range locks {
		slotName, i, ok := slotOf(l.PartitionKey())
		if !ok || slotName != name {
			continue
		}
		limit := holdersOf(tap.item(l.PartitionKey(), l.SortKey())).limit
		if limit == 0 {
			continue // NAME#i, but not a --limit run's slot
		}
		n = max(n, limit, i+1)
	}
	return n, nil
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}
