package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// MaxLocksPerAcquire is the most keys one [Client.AcquireLocks] takes:
// DynamoDB's limit of actions in one TransactWriteItems.
const MaxLocksPerAcquire = 100

// maxTransactionBytes is DynamoDB's limit on the size of one transaction.
const maxTransactionBytes = 4 * 1024 * 1024

// errTransactionConflict: another write to one of the items was in
// progress. Nothing is known about the holders; retry after a pause.
var errTransactionConflict = errors.New("a concurrent write to one of the items conflicted with the transaction")

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
// transaction then tells, and the wait goes on. It gives up after
// [WithAdditionalTimeToWaitForLock] plus the longest lease it saw among
// the holders, with a *[LockNotGrantedError] wrapping a *[TimeoutError];
// with [FailIfLocked] it returns at once, wrapping a *[LockHeldError] for a
// key held by a live owner. When ctx ends the error matches ctx.Err() and
// *LockNotGrantedError.
//
// Bad input returns an *[InvalidArgumentError] before any DynamoDB call: no
// keys, more than [MaxLocksPerAcquire], an empty, invalid or repeated key,
// [WithReentrant], data too large for one transaction, or any option
// AcquireLockWithContext rejects. It needs TransactWriteItems from the
// DynamoDB client ([ErrUnsupportedOperation] otherwise).
//
// Cost in DynamoDB calls, for n keys: when all are free, one
// TransactWriteItems (2 write units per item, as every transactional
// write) and then one consistent GetItem per key, since a transaction
// cannot return the written items and each lock needs its fencing token.
// Each held key adds one GetItem per refresh period while it stays held,
// and every new attempt one more TransactWriteItems.
//
// If the reads after a committed transaction fail, the keys are released
// (best effort: otherwise they expire after one lease) and the error is
// returned.
func (c *Client) AcquireLocks(ctx context.Context, keys []string, opts ...AcquireLockOption) ([]*Lock, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	o := newAcquireLockOptions(opts)
	if err := c.validateAcquireLocks(keys, o); err != nil {
		return nil, err
	}
	if !c.canTransact() {
		return nil, unsupported("AcquireLocks", "TransactWriteItems")
	}
	m := &multiAcquisition{c: c, o: o, start: time.Now(), keys: slices.Sorted(slices.Values(keys)),
		attempts: make(map[string]attempt, 2)}
	byKey, err := m.admitThenRun(ctx)
	c.metrics.acquired(ctx, err, time.Since(m.start))
	if err != nil {
		return nil, err
	}
	locks := make([]*Lock, len(keys))
	for i, k := range keys {
		locks[i] = byKey[k]
	}
	return locks, nil
}

// admitThenRun waits for heartbeat capacity for every key (see
// [WithHeartbeatAdmission]), then acquires them.
func (m *multiAcquisition) admitThenRun(ctx context.Context) (map[string]*Lock, error) {
	deadline := m.start.Add(satAdd(m.o.additionalTimeToWait, m.o.lease))
	admitted, err := m.c.admit(ctx, len(m.keys), m.o.lease, deadline, fmt.Sprintf("keys %q", m.keys))
	if err != nil {
		return nil, err
	}
	locks, err := m.run(ctx)
	admitted.end(err == nil)
	return locks, err
}

func (c *Client) validateAcquireLocks(keys []string, o *acquireLockOptions) error {
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
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if seen[k] {
			return invalid("keys", k, "appears more than once")
		}
		seen[k] = true
		if err := c.validateAcquire(k, o); err != nil {
			return err
		}
	}
	return nil
}

// multiAcquisition is the state of one AcquireLocks call.
type multiAcquisition struct {
	c        *Client
	o        *acquireLockOptions
	start    time.Time
	keys     []string  // sorted
	deadline time.Time // zero until a holder has been seen
	// attempts holds each record version number a transaction of this call
	// wrote (one for all its keys), so that a transaction whose answer was
	// lost is recognised when the next one finds its items.
	attempts map[string]attempt
}

func (m *multiAcquisition) run(ctx context.Context) (map[string]*Lock, error) {
	var takeover map[string]string // key → the stale RVN the next transaction may replace
	for {
		locks, held, err := m.tryWrite(ctx, takeover)
		if err != nil {
			var lng *LockNotGrantedError
			if errors.As(err, &lng) || errors.Is(err, ErrClientClosed) {
				return nil, err
			}
			if !m.retryable(ctx, err) {
				return nil, notGranted(err, "keys %q", m.keys)
			}
			if err := m.sleep(ctx, m.o.refreshPeriod); err != nil {
				return nil, err
			}
			if held, err = m.readAll(ctx); err != nil {
				continue // judged again at the next transaction
			}
		}
		if locks != nil {
			return locks, nil
		}
		if takeover, locks, err = m.wait(ctx, held); locks != nil || err != nil {
			return locks, err
		}
	}
}

// tryWrite sends the transaction that takes every key. It returns the
// locks, or the items that failed their condition (by key), or an error.
func (m *multiAcquisition) tryWrite(ctx context.Context, takeover map[string]string) (map[string]*Lock, map[string]map[string]types.AttributeValue, error) {
	c := m.c
	rvn := newRVN()
	sent := time.Now() // one instant for the stored expiries and the locks' leases
	items := make([]types.TransactWriteItem, len(m.keys))
	for i, k := range m.keys {
		items[i] = types.TransactWriteItem{Update: transactUpdate(c.acquireInput(k, m.o.sortKey, m.o, rvn, takeover[k], nil, sent))}
	}
	m.attempts[rvn] = attempt{sent: sent, lease: m.o.lease}
	_, err := c.transactWriteItems(ctx, "AcquireLocks", &dynamodb.TransactWriteItemsInput{TransactItems: items})
	if err == nil {
		locks, err := m.adopt(ctx, rvn, m.attempts[rvn])
		return locks, nil, err
	}
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil, nil, err
	}
	if len(tce.CancellationReasons) != len(m.keys) {
		return nil, nil, err
	}
	held := make(map[string]map[string]types.AttributeValue)
	conflict := false
	for i, r := range tce.CancellationReasons {
		switch aws.ToString(r.Code) {
		case "", "None":
		case "ConditionalCheckFailed":
			if len(r.Item) == 0 {
				if m.o.onlyIfLockAlreadyExist {
					return nil, nil, notGranted(nil, "key %q has no lock item and WithAcquireOnlyIfLockAlreadyExists was given", m.keys[i])
				}
				// No item came back with the failure: learn it by reading.
				item, rerr := m.read(ctx, m.keys[i])
				if rerr != nil {
					return nil, nil, rerr
				}
				held[m.keys[i]] = item
				continue
			}
			held[m.keys[i]] = r.Item
		case "TransactionConflict":
			conflict = true
		default: // throttling, validation, capacity: the error says it
			return nil, nil, err
		}
	}
	if len(held) == 0 {
		if conflict {
			return nil, nil, fmt.Errorf("%w: %w", errTransactionConflict, err)
		}
		return nil, nil, err
	}
	return nil, held, nil
}

// transactUpdate turns the UpdateItem that acquires one key into the same
// update inside a transaction (which cannot return the new item).
func transactUpdate(in *dynamodb.UpdateItemInput) *types.Update {
	return &types.Update{
		TableName:                           in.TableName,
		Key:                                 in.Key,
		UpdateExpression:                    in.UpdateExpression,
		ConditionExpression:                 in.ConditionExpression,
		ExpressionAttributeNames:            in.ExpressionAttributeNames,
		ExpressionAttributeValues:           in.ExpressionAttributeValues,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}

// wait watches the held keys until each is free or stale, the wait runs
// out, or it turns out the transaction of an earlier attempt landed; each
// key is judged by the same decision as a single acquisition's. It returns
// the takeover RVNs for the next transaction, or the locks, or the error
// that ends the call.
func (m *multiAcquisition) wait(ctx context.Context, held map[string]map[string]types.AttributeValue) (map[string]string, map[string]*Lock, error) {
	c := m.c
	views := make(map[string]*view, len(held))
	learn := func(k string, item map[string]types.AttributeValue) {
		v := &view{known: true, raw: item, absent: len(item) == 0}
		if !v.absent {
			if v.rec, v.bad = c.schema.decodeItem(item); v.bad == nil && !v.rec.released {
				v.seen = c.observations.observe(registryKey(k, m.o.sortKey), v.rec.rvn, time.Now())
				if d := m.start.Add(satAdd(m.o.additionalTimeToWait, v.rec.lease)); d.After(m.deadline) {
					m.deadline = d // the longest lease among the holders
				}
			}
		}
		views[k] = v
	}
	for k, item := range held {
		learn(k, item)
	}
	for {
		takeover := make(map[string]string, len(views))
		now := time.Now()
		var wake time.Time
		for _, k := range m.keys {
			v, ok := views[k]
			if !ok {
				continue
			}
			in := decideInput{view: v, now: now, start: m.start, key: k, owner: c.ownerName, attempts: m.attempts, o: m.o,
				deadline: m.deadline, jitter: randomUpTo(m.o.refreshJitter)}
			if v.rec != nil {
				in.staleByClock, in.hasClockExpiry = c.staleByClockAt(v.rec, now)
			}
			switch d := decide(in); d.step {
			case stepFail:
				return nil, nil, d.err
			case stepAdopt:
				// An earlier transaction landed and its answer was lost:
				// all of its items carry this RVN.
				locks, err := m.adopt(ctx, v.rec.rvn, m.attempts[v.rec.rvn])
				return nil, locks, err
			case stepWrite:
				if d.stale {
					c.logger.LogAttrs(ctx, slog.LevelInfo, "taking over stale lock", slogKey(k), slogOwner(v.rec.owner), slogRVN(v.rec.rvn))
				}
				takeover[k] = d.takeover
				delete(views, k)
			case stepRead:
				if wake.IsZero() || d.at.Before(wake) {
					wake = d.at
				}
			}
		}
		if len(views) == 0 {
			return takeover, nil, nil // every key is free or stale: try again
		}
		if err := m.sleep(ctx, time.Until(wake)); err != nil {
			return nil, nil, err
		}
		for k, v := range views {
			item, err := m.read(ctx, k)
			if err != nil {
				if !m.retryable(ctx, err) {
					return nil, nil, notGranted(err, "key %q", k)
				}
				v.failed = err
				continue // judge the item last seen
			}
			learn(k, item)
		}
	}
}

// adopt reads back every key a committed transaction wrote (its RVN rvn,
// sent at sent) and registers the locks. The reads give each lock its
// fencing token and the item's data and attributes.
func (m *multiAcquisition) adopt(ctx context.Context, rvn string, at attempt) (map[string]*Lock, error) {
	c := m.c
	locks := make(map[string]*Lock, len(m.keys))
	var failed error
	for _, k := range m.keys {
		rec, err := m.readBack(ctx, k, rvn)
		if err != nil {
			failed = err
			rec = &lockRecord{owner: c.ownerName, rvn: rvn, lease: at.lease}
		}
		l := newHeldLock(c, k, m.o.sortKey, rec, at.sent)
		l.leaseEnd = at.sent.Add(at.lease)
		l.deleteOnRelease = m.o.deleteLockOnRelease
		if sm := m.o.sessionMonitor; sm != nil {
			own := *sm // a monitor's state belongs to one lock
			l.monitor = &own
		}
		locks[k] = l
	}
	if failed == nil {
		for _, k := range m.keys {
			if failed = c.register(ctx, locks[k]); failed != nil {
				break // register released that lock itself
			}
			c.observations.forget(locks[k].regKey())
		}
	}
	if failed != nil {
		// Release them all, registered or not, so the caller holds nothing.
		rctx := context.WithoutCancel(ctx)
		for _, l := range locks {
			_, _ = c.releaseLock(rctx, l, &releaseLockOptions{bestEffort: true})
		}
		var lng *LockNotGrantedError
		if errors.As(failed, &lng) {
			return nil, failed
		}
		return nil, notGranted(failed, "keys %q were taken but could not be read back; released", m.keys)
	}
	c.logger.LogAttrs(ctx, slog.LevelInfo, "locks acquired", slog.Any("keys", m.keys), slogDuration("waited", time.Since(m.start)))
	return locks, nil
}

// readBack reads the item of key right after this call wrote rvn into it.
func (m *multiAcquisition) readBack(ctx context.Context, key, rvn string) (*lockRecord, error) {
	for {
		item, err := m.read(ctx, key)
		if err == nil {
			rec, err := m.c.schema.decodeItem(item)
			if err != nil {
				return nil, err
			}
			if rec.owner != m.c.ownerName || rec.rvn != rvn {
				return nil, fmt.Errorf("key %q changed hands right after the transaction", key)
			}
			return rec, nil
		}
		if !m.retryable(ctx, err) {
			return nil, err
		}
		if err := m.sleep(ctx, m.o.refreshPeriod); err != nil {
			return nil, err
		}
	}
}

// readAll reads every key after a transaction whose outcome is unknown.
func (m *multiAcquisition) readAll(ctx context.Context) (map[string]map[string]types.AttributeValue, error) {
	held := make(map[string]map[string]types.AttributeValue, len(m.keys))
	for _, k := range m.keys {
		item, err := m.read(ctx, k)
		if err != nil {
			return nil, err
		}
		held[k] = item
	}
	return held, nil
}

func (m *multiAcquisition) read(ctx context.Context, key string) (map[string]types.AttributeValue, error) {
	item, err := m.c.getItem(ctx, m.c.itemKeyOf(key, m.o.sortKey))
	if err != nil {
		return nil, err
	}
	if item == nil {
		return map[string]types.AttributeValue{}, nil
	}
	return item, nil
}

// retryable reports whether a DynamoDB error leaves room for another try
// within this call's wait.
func (m *multiAcquisition) retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || m.o.failIfLocked || !(isTransient(err) || errors.Is(err, errTransactionConflict)) {
		return false
	}
	deadline := m.deadline
	if deadline.IsZero() {
		deadline = m.start.Add(satAdd(m.o.additionalTimeToWait, m.o.lease))
	}
	m.c.logger.LogAttrs(ctx, slog.LevelWarn, "acquire of several keys failed, retrying", slog.Any("keys", m.keys), slogErr(err))
	return time.Now().Before(deadline)
}

// sleep waits d, or until ctx ends or the client closes.
func (m *multiAcquisition) sleep(ctx context.Context, d time.Duration) error {
	return m.c.pause(ctx, d, nil, fmt.Sprintf("keys %q", m.keys))
}
