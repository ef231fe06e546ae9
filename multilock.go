package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// MaxLocksPerAcquire is the most keys one [Client.AcquireLocks] takes:
// DynamoDB's limit of actions in one TransactWriteItems.
const MaxLocksPerAcquire = 100

// maxTransactionBytes is DynamoDB's limit on the size of one transaction.
const maxTransactionBytes = 4 * 1024 * 1024

// errTransactionConflict: another write to one of the items was in
// progress. Nothing is known about the holders; retry after a pause.
var errTransactionConflict = errors.New("a concurrent write to one of the items conflicted with the transaction")

// errThrottledMember: a transaction was cancelled because a member's
// partition or table was over its throughput (a ThrottlingError or
// ProvisionedThroughputExceeded reason). Nothing was written; a retry may
// succeed.
var errThrottledMember = errors.New("the transaction was cancelled for throughput: one of its items was throttled")

// AcquireLocks acquires every key in keys or none: one TransactWriteItems
// writes all the lock items at once, so no other client ever sees a subset
// of them held by this call, and this call never holds some keys while it
// waits for others. Acquiring [a, b] in one client and [b, a] in another
// therefore cannot deadlock. The locks are returned in the order of keys;
// each is an ordinary held lock afterwards (its own heartbeats, Done,
// fencing token, released one by one). opts apply to every key: the same
// data, the same additional attributes.
//
// When some keys are held, it waits as [Client.AcquireLockWithContext]
// does, watching each held key for its own holder's lease: it polls the
// keys still held with a consistent GetItem each, every refresh period
// (minus a small jitter), and sends the transaction again when every key it
// saw held has been released, deleted, or left unchanged for a full lease
// of its holder (then taken over with a condition on that record version
// number). A key that was free may be taken meanwhile; the next
// transaction then tells, and the wait goes on.
//
// The wait lasts as long as ctx allows (for ever with
// context.Background()); when ctx ends the error matches ctx.Err() and
// *[LockNotGrantedError]. With [WithAdditionalTimeToWaitForLock] it also
// gives up after that time plus the longest lease among the first holders
// it saw on each key, with a *LockNotGrantedError wrapping a
// *[TimeoutError]. With [FailIfLocked] it returns at once, wrapping a
// *[LockHeldError] for a key held by a live owner. A DynamoDB that cannot be
// reached is waited out as long as the wait lasts once it has answered the
// client, as *[ConnectionError] says.
//
// Bad input returns an *[InvalidArgumentError] before any DynamoDB call: no
// keys, more than [MaxLocksPerAcquire], an empty, invalid or repeated key,
// [WithReentrant], [WithFairness], data too large for one transaction, or
// any option AcquireLockWithContext rejects. It needs TransactWriteItems
// from the DynamoDB client ([ErrUnsupportedOperation] otherwise).
//
// Cost in DynamoDB calls, for n keys: when all are free, one
// TransactWriteItems (2 write units per item, as every transactional
// write) and then one consistent GetItem per key, since a transaction
// cannot return the written items and each lock needs its fencing token.
// Each held key adds one GetItem per refresh period while it stays held,
// and every new attempt one more TransactWriteItems.
//
// A call that gives up after a transaction that may have committed (its
// answer was lost, or the reads after it failed) releases every key again
// before it returns (best effort: otherwise they expire after one lease).
func (c *Client) AcquireLocks(ctx context.Context, keys []string, opts ...AcquireLockOption) (locks []*Lock, err error) {
	ctx, t := c.startAcquire(ctx, kindLocks, keys...)
	defer func() { t.end(err, locks...) }()
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	o, err := c.acquireOptions(opts, true)
	if err != nil {
		return nil, err
	}
	if err := c.checkKeys(keys, o); err != nil {
		return nil, err
	}
	if !c.canTransact() {
		return nil, unsupported("AcquireLocks", "TransactWriteItems")
	}
	sorted := slices.Sorted(slices.Values(keys))
	a := c.newAcquisition(modeAll, o, sorted, fmt.Sprintf("keys %q", sorted))
	t.attach(a)
	got, err := a.admitThenRun(ctx)
	c.metrics.Acquired(ctx, acquireOutcome(err), c.since(a.start))
	if err != nil {
		return nil, err
	}
	locks = make([]*Lock, len(keys))
	for i, k := range keys {
		locks[i] = got[slices.Index(sorted, k)]
	}
	return locks, nil
}

func (c *Client) checkKeys(keys []string, o *acquireLockOptions) error {
	switch {
	case len(keys) == 0:
		return invalid("keys", len(keys), "must name at least one key")
	case len(keys) > MaxLocksPerAcquire:
		return invalid("keys", len(keys), "must name at most %d keys, DynamoDB's limit for one transaction", MaxLocksPerAcquire)
	case o.reentrant:
		return invalid("WithReentrant", true, "cannot be used with AcquireLocks")
	case o.fair:
		return invalid("WithFairness", true, "cannot be used with AcquireLocks: the fair queue is per key")
	case len(keys)*len(o.data) > maxTransactionBytes/2:
		return invalid("WithData", fmt.Sprintf("%d bytes", len(o.data)),
			"written to %d keys would come near DynamoDB's %d-byte limit for one transaction", len(keys), maxTransactionBytes)
	case len(keys)*(len(o.data)+lockitem.Size(o.additionalAttributes)) > maxTransactionBytes/2:
		// The transaction carries every key's data and additional
		// attributes, in the update and its values: half the limit leaves
		// room for the expressions and the keys.
		return invalid("WithAdditionalAttributes", fmt.Sprintf("%d bytes", lockitem.Size(o.additionalAttributes)),
			"written with %d bytes of data to %d keys would come near DynamoDB's %d-byte limit for one transaction",
			len(o.data), len(keys), maxTransactionBytes)
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return invalid("keys", k, "appears more than once")
		}
		seen[k] = true
		if err := c.checkKey(k, o); err != nil {
			return err
		}
	}
	return nil
}
