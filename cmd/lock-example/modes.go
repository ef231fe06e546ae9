package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// A run holds its lock in one of three ways:
//   - exclusive (the default): the only holder of the read/write lock on
//     the name (RWLock.Lock). A plain lock would not see shared holders:
//     the library's plain acquisition ignores an RWLock's readers.
//   - --shared: one of the readers of that read/write lock (RWLock.RLock).
//   - --limit N: one of the N slots of the semaphore on the name
//     (Semaphore.Acquire; slot keys name#0 to name#N-1).
//
// Each is an ordinary held *dynamolock.Lock, which the keeper renews and
// superviseJob guards the same way.

// maxHoldAtLeast bounds --hold-at-least: see checkMode.
const maxHoldAtLeast = 24 * time.Hour

// checkMode validates --shared, --limit, --hold-at-least and their
// combinations, before any DynamoDB call.
func (c *config) checkMode(t timings) error {
	switch {
	case c.shared && c.set["limit"]:
		return &usageError{"--limit", c.limit, "cannot be combined with --shared: a --limit run holds one of N slots " +
			"(keys NAME#0 to NAME#N-1), a --shared run shares the read/write lock NAME; choose one"}
	case c.set["limit"] && (c.limit < 1 || c.limit > dynamolock.MaxSemaphoreSize):
		return limitRange(c.limit)
	case c.shared && c.data != "":
		return &usageError{"--data", strconv.Quote(c.data), "cannot be used with --shared: a shared run writes only its own " +
			"entry in the lock's item; the item's data is the exclusive runs'"}
	case c.holdAtLeast < 0:
		return &usageError{"--hold-at-least", c.holdAtLeast, "must not be negative"}
	case c.holdAtLeast > maxHoldAtLeast:
		return &usageError{"--hold-at-least", c.holdAtLeast, fmt.Sprintf(
			"must be at most %s: the hold is meant to outlast how far apart the hosts fire one schedule (their clocks' "+
				"differences, a timer's random delay), seconds to minutes, and must stay shorter than the schedule's "+
				"period, or the next scheduled run is turned away too; all the while lock-example keeps running and "+
				"renews the lock every --heartbeat (%d writes a day at --heartbeat %s)",
			"24h", int(24*time.Hour/t.heartbeat), t.heartbeat)}
	}
	return nil
}

func limitRange(n int) error {
	return &usageError{"--limit", n, fmt.Sprintf("must be between 1 and %d: a waiting run reads every one of the N slots "+
		"once per second, so its cost grows with N", dynamolock.MaxSemaphoreSize)}
}

// checkAdminFlags refuses the flags of a run that mean nothing to the
// subcommand sub.
func (c *config) checkAdminFlags(sub string) error {
	for _, name := range []string{"shared", "hold-at-least"} {
		if c.set[name] {
			return &usageError{"--" + name, nil, "is for running a command, not for " + sub}
		}
	}
	if !c.set["limit"] {
		return nil
	}
	switch {
	case sub != "show":
		hint := ""
		if sub == "force-release" {
			hint = "; name the slot's own key instead, as list prints it (NAME#i)"
		}
		return &usageError{"--limit", c.limit, "is for running a command and for show, not for " + sub + hint}
	case c.limit < 1 || c.limit > dynamolock.MaxSemaphoreSize:
		return limitRange(c.limit)
	}
	return nil
}

// modeText names the run's mode in messages.
func (c *config) modeText() string {
	switch {
	case c.leader:
		return "leadership of"
	case c.limit > 0:
		return fmt.Sprintf("one of %d slots of", c.limit)
	case c.shared:
		return "shared lock"
	}
	return "lock"
}

// takeLock acquires the lock in the run's mode.
func (r *runner) takeLock(ctx context.Context, opts []dynamolock.AcquireLockOption) (*dynamolock.Lock, error) {
	if r.cfg.leader {
		return r.campaign(ctx, opts)
	}
	if r.cfg.limit > 0 {
		sem, err := r.client.NewSemaphore(r.name, r.cfg.limit)
		if err != nil {
			return nil, err
		}
		n := &types.AttributeValueMemberN{Value: strconv.Itoa(r.cfg.limit)}
		opts = append(opts, dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{limitAttr: n}))
		return sem.Acquire(ctx, opts...)
	}
	rw, err := r.client.NewRWLock(r.name)
	if err != nil {
		return nil, err
	}
	if r.cfg.shared {
		return rw.RLock(ctx, opts...)
	}
	return rw.Lock(ctx, opts...)
}

// dataOptions are the options that set the item's data: none for a
// shared run (the item's data is the exclusive runs').
func (c *config) dataOptions() []dynamolock.AcquireLockOption {
	if c.shared || c.leader {
		return nil // a leader's value is its campaign's
	}
	// The item's data is always this run's: none without --data.
	opts := []dynamolock.AcquireLockOption{dynamolock.ReplaceData()}
	if c.data != "" {
		opts = append(opts, dynamolock.WithData([]byte(c.data)))
	}
	return opts
}

// isBusy reports whether err says the lock was held for all of the
// allowed wait (rather than that DynamoDB failed).
func isBusy(ctx context.Context, err error) bool {
	var held *dynamolock.LockHeldError
	var timeout *dynamolock.TimeoutError
	var readers *dynamolock.TooManyReadersError
	// A semaphore with FailIfLocked whose slots are all held says so with
	// a LockNotGrantedError of no cause.
	var notGranted *dynamolock.LockNotGrantedError
	return errors.As(err, &held) || errors.As(err, &timeout) || errors.As(err, &readers) ||
		errors.As(err, &notGranted) && notGranted.Unwrap() == nil ||
		errors.Is(context.Cause(ctx), context.DeadlineExceeded)
}

// heldBy says who holds the lock the run could not take, from the items
// its calls last showed (no call of its own).
func (r *runner) heldBy(err error) string {
	sortValue := r.cfg.sortValue()
	if r.cfg.limit > 0 {
		var owners []string
		for i := range r.cfg.limit {
			slot := r.name + "#" + strconv.Itoa(i)
			item := r.tap.item(slot, sortValue)
			if owner, ok := item[attrOwnerName].(*types.AttributeValueMemberS); ok {
				if _, released := item[attrIsReleased]; !released {
					owners = append(owners, strconv.Quote(owner.Value))
				}
			}
		}
		s := fmt.Sprintf("all %d slots are held", r.cfg.limit)
		if len(owners) > 0 {
			s += " (by " + strings.Join(owners, ", ") + ")"
		}
		return s
	}
	var held *dynamolock.LockHeldError
	if errors.As(err, &held) && !strings.HasPrefix(held.Owner, "(") {
		return fmt.Sprintf("held by %q (lease %s)", held.Owner, held.LeaseDuration)
	}
	var readers *dynamolock.TooManyReadersError
	if errors.As(err, &readers) {
		return fmt.Sprintf("it already has %d shared holders, the most one lock item holds", readers.Max)
	}
	item := r.tap.item(r.name, sortValue)
	h := holdersOf(item)
	var parts []string
	if owner, ok := item[attrOwnerName].(*types.AttributeValueMemberS); ok {
		if _, released := item[attrIsReleased]; !released {
			parts = append(parts, fmt.Sprintf("held by %q", owner.Value))
		}
	}
	if len(h.readers) > 0 {
		parts = append(parts, "held by "+plural(len(h.readers), "shared run", "shared runs"))
	}
	if w := h.waitingText(); w != "" && h.waitingWriters > 0 {
		parts = append(parts, w+" waiting (shared runs that come later wait behind an exclusive one)")
	}
	if len(parts) == 0 {
		return oneLine(err.Error())
	}
	return strings.Join(parts, "; ")
}

// sortValue is the --sort-key VALUE, or "".
func (c *config) sortValue() string {
	_, v, _ := strings.Cut(c.sortKey, "=")
	return v
}

// slotIndex is the index of the slot a --limit run holds, from its key.
func slotIndex(l *dynamolock.Lock) string {
	if _, i, ok := slotOf(l.PartitionKey()); ok {
		return strconv.Itoa(i)
	}
	return ""
}
