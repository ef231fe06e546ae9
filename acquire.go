package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// AcquireLock acquires key, as AcquireLockWithContext does with
// context.Background().
func (c *Client) AcquireLock(key string, opts ...AcquireLockOption) (*Lock, error) {
	return c.AcquireLockWithContext(context.Background(), key, opts...)
}

// AcquireLockWithContext acquires the lock on key.
//
// A free or released lock costs one conditional UpdateItem. When another
// owner holds it, the client polls the item with a consistent GetItem every
// refresh period (shortened by a small jitter). If the item's record version
// number stays the same for a full lease of the holder, measured on this
// host's monotonic clock, the holder is taken to be dead and the lock is
// taken over with a write conditioned on that version. If the holder keeps
// renewing it, the acquisition gives up after the holder's lease plus
// [WithAdditionalTimeToWaitForLock] with a *[LockNotGrantedError] wrapping a
// *[TimeoutError].
//
// When ctx ends the wait stops at once; the error matches both ctx.Err() and
// *LockNotGrantedError. A write of this call that may have landed (its answer
// was lost) is released again before an acquisition that gives up returns.
// Bad input returns an *[InvalidArgumentError] before any DynamoDB call.
func (c *Client) AcquireLockWithContext(ctx context.Context, key string, opts ...AcquireLockOption) (*Lock, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	o := newAcquireLockOptions(opts)
	if err := c.validateAcquire(key, o); err != nil {
		return nil, err
	}
	start := time.Now()
	l, err := c.acquire(ctx, key, o, start)
	c.metrics.acquired(ctx, err, time.Since(start))
	return l, err
}

func (c *Client) validateAcquire(key string, o *acquireLockOptions) error {
	if err := validateKey(key); err != nil {
		return err
	}
	if o.refreshPeriod <= 0 {
		return invalid("WithRefreshPeriod", o.refreshPeriod, "must be positive")
	}
	if o.additionalTimeToWait < 0 {
		return invalid("WithAdditionalTimeToWaitForLock", o.additionalTimeToWait, "must not be negative")
	}
	switch {
	case o.refreshJitter == -1:
		o.refreshJitter = o.refreshPeriod / 10
	case o.refreshJitter < 0 || o.refreshJitter > o.refreshPeriod:
		return invalid("WithRefreshJitter", o.refreshJitter, "must lie between 0 and the refresh period %s", o.refreshPeriod)
	}
	switch {
	case o.lease == 0:
		o.lease = c.leaseDuration
	case o.lease < 0:
		return invalid("WithLockLease", o.lease, "must be positive")
	case c.heartbeatPeriod > 0 && o.lease/2 < c.heartbeatPeriod:
		return invalid("WithLockLease", o.lease, "must be at least twice %s", c.heartbeatPeriodText())
	}
	sk, err := c.resolveSortKey(o.sortKey)
	if err != nil {
		return err
	}
	o.sortKey = sk
	for name := range o.additionalAttributes {
		if name == "" {
			return invalid("WithAdditionalAttributes", name, "attribute names must not be empty")
		}
		if c.schema.reserved(name) {
			return invalid("WithAdditionalAttributes", name, "is an attribute the lock itself uses")
		}
		if o.additionalAttributes[name] == nil {
			return invalid("WithAdditionalAttributes", name, "has a nil value")
		}
	}
	if o.fair && o.failIfLocked {
		return invalid("WithFairness", "FailIfLocked", "cannot be combined with FailIfLocked: a fair acquisition waits its turn")
	}
	if m := o.sessionMonitor; m != nil {
		if err := c.validateSessionMonitor(m, o.lease); err != nil {
			return err
		}
	}
	return c.validateItemSize("WithData", key, o.sortKey, o.data, o.additionalAttributes)
}

// resolveSortKey returns the sort key value of a lock: v when given, else
// the client's default; an error when the client has no sort key to give v
// to, or has no default where v is missing, or v is not a valid value.
func (c *Client) resolveSortKey(v *string) (*string, error) {
	switch {
	case v == nil && c.sortKeyName != "" && c.sortKey == nil:
		return nil, invalid("WithSortKey value", "", "gives the client's sort key %q no default value: every acquisition must give one with WithSortKeyValue", c.sortKeyName)
	case v == nil:
		return c.sortKey, nil
	case c.sortKeyName == "":
		return nil, invalid("WithSortKeyValue", *v, "needs a client with a sort key: name it with WithSortKey")
	case *v == "" || len(*v) > maxSortKeyBytes || !utf8.ValidString(*v):
		return nil, invalid("WithSortKeyValue", *v, "must be 1 to %d bytes of UTF-8", maxSortKeyBytes)
	}
	return v, nil
}

// acquisition is the state of one AcquireLock call.
type acquisition struct {
	c        *Client
	key      string
	sortKey  *string
	regKey   string
	o        *acquireLockOptions
	start    time.Time
	deadline time.Time // computed once, when the first holder is seen
	// endsBefore is the client's count of ended locks before the last call
	// (see sleep).
	endsBefore uint64
	skipped    string // the RVN for which sleep last skipped its wait
	// attempts holds every write this call sent, by the RVN it wrote, so
	// that a write whose answer was lost is recognised (and adopted) when
	// a later answer shows it.
	attempts map[string]attempt
	fair     *fairState // WithFairness; nil otherwise
}

// attempt is one acquiring write.
type attempt struct {
	sent  time.Time // the lease and the stored expiry count from here
	lease time.Duration
	// unsure: no answer said whether it landed. Such writes are released
	// again if the call gives up.
	unsure bool
}

func (c *Client) acquire(ctx context.Context, key string, o *acquireLockOptions, start time.Time) (*Lock, error) {
	a := &acquisition{c: c, key: key, sortKey: o.sortKey, o: o, start: start, attempts: make(map[string]attempt, 2)}
	a.regKey = registryKey(key, a.sortKey)
	if o.fair {
		a.fair = newFairState(o)
	}
	if o.reentrant {
		// Reentrant acquisitions of one key take turns, so that concurrent
		// ones return the same lock instead of each taking it from the
		// other. Only they wait for each other, and only while ctx lasts.
		leave, err := c.reentrant.enter(ctx, a.regKey)
		if err != nil {
			return nil, notGranted(err, "key %q: context done while waiting for another reentrant acquisition of the key", key)
		}
		defer leave()
		if l := c.heldLock(a.regKey); l != nil {
			return l, nil
		}
	}
	if err := c.admit(ctx, 1, o.lease, start.Add(satAdd(o.additionalTimeToWait, o.lease)), quoteKey(key)); err != nil {
		return nil, err
	}
	l, err := a.run(ctx)
	if err != nil {
		// One bounded wait for both clean-ups, even when ctx has ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
		a.undo(cctx)
		a.leaveQueue(cctx)
		cancel()
	}
	for rvn := range a.attempts {
		c.inflight.Delete(rvn)
	}
	return l, err
}

// run is the acquisition's one loop around decide.
func (a *acquisition) run(ctx context.Context) (*Lock, error) {
	c := a.c
	v := &view{}
	next := a.fairly(decision{step: stepWrite}, v, time.Now(), time.Time{})
	for {
		switch next.step {
		case stepWrite:
			if next.stale {
				c.logger.LogAttrs(ctx, slog.LevelInfo, "taking over stale lock", slogKey(a.key), slogOwner(v.rec.owner), slogRVN(v.rec.rvn))
			}
			l, err := a.write(ctx, next, v)
			if l != nil || err != nil {
				return l, err
			}
		case stepJoin:
			if err := a.join(ctx, v); err != nil {
				return nil, err
			}
		case stepRead:
			woken, err := a.sleep(ctx, time.Until(next.at), v)
			if err != nil {
				return nil, err
			}
			if woken && a.fair == nil {
				// The lock on the key ended here (released, or lost): try
				// it at once rather than read it first. The write's
				// condition decides; a failure returns the item.
				next = decision{step: stepWrite}
				continue
			}
			item, err := a.read(ctx)
			if err := a.learn(ctx, v, item, err); err != nil {
				return nil, err
			}
		case stepAdopt:
			return a.adopt(ctx, v.raw, a.attempts[v.rec.rvn])
		case stepFail:
			return nil, next.err
		}
		in := decideInput{view: v, now: time.Now(), start: a.start, key: a.key, owner: c.ownerName, attempts: a.attempts, o: a.o,
			deadline: a.deadlineFor(v), jitter: randomUpTo(a.o.refreshJitter)}
		if v.rec != nil {
			in.staleByClock, in.hasClockExpiry = c.staleByClockAt(v.rec, in.now)
			if a.o.reentrant && v.rec.owner == c.ownerName {
				if l := c.heldLock(a.regKey); l != nil {
					cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), undoTimeout)
					a.leaveQueue(cctx) // WithFairness: this call's entry, if any, is not needed
					cancel()
					return l, nil // another acquisition here got it meanwhile
				}
				_, in.inFlightHere = c.inflight.Load(v.rec.rvn)
			}
		}
		next = a.fairly(decide(in), v, in.now, in.deadline)
	}
}

// deadlineFor is when the wait ends: the first holder's lease plus the
// additional time, counted from the start (the client's lease until a
// holder was seen).
func (a *acquisition) deadlineFor(v *view) time.Time {
	if !a.deadline.IsZero() {
		return a.deadline
	}
	if v.rec == nil || v.rec.released {
		return a.start.Add(satAdd(a.o.additionalTimeToWait, a.o.lease))
	}
	a.deadline = a.start.Add(satAdd(a.o.additionalTimeToWait, v.rec.lease))
	if !a.o.failIfLocked {
		a.c.logger.LogAttrs(context.Background(), slog.LevelDebug, "waiting for lock", slogKey(a.key), slogOwner(v.rec.owner),
			slogRVN(v.rec.rvn), slogDuration("lease", v.rec.lease))
	}
	return a.deadline
}

// write sends the acquiring UpdateItem. It returns the new lock, or updates
// v with what the answer showed, or returns the error that ends the call.
func (a *acquisition) write(ctx context.Context, d decision, v *view) (*Lock, error) {
	c := a.c
	rvn := newRVN()
	// One instant for the stored expiry and this holder's lease, taken
	// before the send: the holder's lease never ends later than what it
	// wrote, nor later than any observer's.
	sent := time.Now()
	in, wrote := c.acquireWrite(a.key, a.sortKey, a.o, rvn, d.takeover, d.queue, sent)
	at := attempt{sent: sent, lease: a.o.lease, unsure: true}
	a.attempts[rvn] = at
	c.inflight.Store(rvn, struct{}{})
	a.endsBefore = c.wakeups.ended.Load()
	out, err := c.updateItem(ctx, in)
	if err == nil {
		item := wrote.after(in.Key, out.Attributes)
		if !time.Now().Before(sent.Add(at.lease)) {
			// The answer came after the lease it granted ran out (a pause):
			// take the item anew rather than return a lock already lost.
			return nil, a.learn(ctx, v, item, nil)
		}
		return a.adopt(ctx, item, at)
	}
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) && !carriesRVN(ccf.Item, rvn) && !mayHaveLanded(err) || !errors.As(err, &ccf) && surelyNotApplied(err) {
		// Rejected, and no earlier attempt of this call (an SDK retry) is
		// in the item or failed without an answer: it did not land.
		at.unsure = false
		a.attempts[rvn] = at
	}
	if ccf != nil && len(ccf.Item) > 0 {
		return nil, a.learn(ctx, v, ccf.Item, nil)
	}
	if ccf != nil {
		// No item came back: there is none, or an emulator does not return
		// it. Only WithAcquireOnlyIfLockAlreadyExists fails on a missing
		// item, and then it is missing.
		*v = view{known: a.o.onlyIfLockAlreadyExist, absent: a.o.onlyIfLockAlreadyExist}
		return nil, nil
	}
	// The write may have landed: nothing is known of the item until read.
	*v = view{}
	return nil, a.failed(ctx, v, err)
}

// learn records what an answer showed of the item: item as read or
// returned by a failed condition, or err when the call failed.
func (a *acquisition) learn(ctx context.Context, v *view, item map[string]types.AttributeValue, err error) error {
	if err != nil {
		return a.failed(ctx, v, err)
	}
	*v = view{known: true, raw: item, absent: len(item) == 0}
	if v.absent {
		return nil
	}
	now := time.Now()
	if v.rec, v.bad = a.c.schema.decodeItem(item); v.bad == nil && !v.rec.released {
		v.seen = a.c.observations.observe(a.regKey, v.rec.rvn, now)
	}
	if a.fair != nil {
		ws, _, _ := queueOf(item)
		a.fair.observe(ws, now)
	}
	return nil
}

// failed handles a failed call: a transient failure is kept in v for the
// decision (which retries within the deadline), anything else ends the call.
func (a *acquisition) failed(ctx context.Context, v *view, err error) error {
	if ctx.Err() != nil {
		return notGranted(errors.Join(ctx.Err(), err), "key %q: context done", a.key)
	}
	if a.o.failIfLocked || !isTransient(err) || unreachable(err, a.start) {
		var lng *LockNotGrantedError
		if errors.As(err, &lng) {
			return err
		}
		return notGranted(err, "key %q", a.key)
	}
	a.c.logger.LogAttrs(ctx, slog.LevelWarn, "acquire failed, retrying", slogKey(a.key), slogErr(err))
	v.failed = err
	return nil
}

// adopt turns an item this call wrote into a held, registered lock. An item
// that landed but cannot be decoded is released again: nobody could use it.
func (a *acquisition) adopt(ctx context.Context, item map[string]types.AttributeValue, at attempt) (*Lock, error) {
	c := a.c
	rec, err := c.schema.decodeItem(item)
	if err != nil {
		return nil, notGranted(err, "key %q: the lock item this client wrote cannot be interpreted; it is released again", a.key)
	}
	l := newHeldLock(c, a.key, a.sortKey, rec, at.sent)
	l.leaseEnd = at.sent.Add(at.lease)
	l.deleteOnRelease = a.o.deleteLockOnRelease
	l.monitor = a.o.sessionMonitor
	// Registered before its RVN leaves inflight, so that a waiter here that
	// sees the item always finds the lock held or in flight here (sleep).
	err = c.register(ctx, l)
	for rvn := range a.attempts {
		c.inflight.Delete(rvn)
	}
	clear(a.attempts) // nothing to undo: the lock is held, or register ended it
	if err != nil {
		return nil, err
	}
	c.observations.forget(a.regKey)
	l.log(slog.LevelInfo, "lock acquired", slogDuration("waited", time.Since(a.start)))
	return l, nil
}

// undo releases every write of this call that may have landed, so that a
// call that gives up leaves no item held by nobody: one UpdateItem
// conditioned on this owner and those RVNs, best effort, within ctx (the
// caller bounds it, even when the acquisition's own ctx has ended).
func (a *acquisition) undo(ctx context.Context) {
	var rvns []string
	for rvn, at := range a.attempts {
		if at.unsure {
			rvns = append(rvns, rvn)
		}
	}
	if len(rvns) == 0 {
		return
	}
	c := a.c
	b := newExprBuilder()
	in := b.value(":u0", attrS(rvns[0]))
	for i, rvn := range rvns[1:] {
		in += ", " + b.value(":u"+strconv.Itoa(i+1), attrS(rvn))
	}
	cond := ownerCondition(b, c.ownerName) + " AND " + b.name("#v", attrRVN) + " IN (" + in + ")"
	update := "SET " + b.name("#r", attrIsReleased) + " = " + b.value(":r", attrS("1")) + " REMOVE " + expiryAttrs(b)
	_, err := c.updateItem(ctx, c.guardedUpdate(c.itemKeyOf(a.key, a.sortKey), b, update, cond))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.logger.LogAttrs(ctx, slog.LevelWarn, "could not undo an acquiring write whose answer was lost; the item expires after its lease",
			slogKey(a.key), slogErr(err))
	}
}

// undoTimeout bounds the release of an abandoned acquisition's writes.
const undoTimeout = 5 * time.Second

func (a *acquisition) read(ctx context.Context) (map[string]types.AttributeValue, error) {
	a.endsBefore = a.c.wakeups.ended.Load()
	return a.c.getItem(ctx, a.c.itemKeyOf(a.key, a.sortKey))
}

// sleep waits d, or until ctx ends or the client closes. While the item is
// held by this client, or written by one of its acquisitions still waiting
// for the answer, a release or loss of that lock here ends the wait at once
// (same-process hand-over). When the item names this client's owner but
// neither holds: if a lock ended here since the call that showed it, that
// may have been it, so there is no wait at all; otherwise the holder is
// another client with the same owner name, polled as usual. woken reports
// that a lock on the key ended here during the wait.
func (a *acquisition) sleep(ctx context.Context, d time.Duration, v *view) (woken bool, err error) {
	what := "key " + strconv.Quote(a.key)
	if v.rec == nil || v.rec.owner != a.c.ownerName {
		return false, a.c.pause(ctx, d, nil, what)
	}
	// Watch first: a lock here that ends from now on wakes this wait (end
	// takes it out of the registry, then wakes the key's watchers).
	ch, unwatch := a.c.wakeups.watch(a.regKey)
	defer unwatch()
	// The count is the client's, over every key: skip the wait once per
	// RVN at most, or a holder elsewhere with this owner name would be
	// polled without pause while this client's other locks come and go.
	if !a.heldHere(v.rec.rvn) && a.c.wakeups.ended.Load() != a.endsBefore && a.skipped != v.rec.rvn {
		a.skipped = v.rec.rvn
		return false, nil
	}
	if err := a.c.pause(ctx, d, ch, what); err != nil {
		return false, err
	}
	select {
	case <-ch:
		return true, nil
	default:
		return false, nil
	}
}

// heldHere reports whether this client holds the key, or an acquisition of
// it here wrote rvn and is waiting for the answer (the lock is then
// registered before rvn leaves inflight).
func (a *acquisition) heldHere(rvn string) bool {
	if a.c.heldLock(a.regKey) != nil {
		return true
	}
	_, ok := a.c.inflight.Load(rvn)
	return ok
}

// pause waits d, or until woken is closed, and returns the error that ends
// a waiting acquisition of what when ctx ends or the client closes first.
func (c *Client) pause(ctx context.Context, d time.Duration, woken <-chan struct{}, what string) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-woken:
		return nil
	case <-ctx.Done():
		return notGranted(ctx.Err(), "%s: context done while waiting", what)
	case <-c.closing:
		return notGranted(ErrClientClosed, "%s", what)
	}
}

// acquireInput is the acquiring UpdateItem of acquireWrite.
func (c *Client) acquireInput(key string, sortKey *string, o *acquireLockOptions, rvn, takeover string, q *queueWrite, sent time.Time) *dynamodb.UpdateItemInput {
	in, _ := c.acquireWrite(key, sortKey, o, rvn, takeover, q, sent)
	return in
}

// acquireWrite builds the single UpdateItem that acquires a free or released
// item, or takes over one whose RVN is takeover, and the record of what it
// writes. It bumps the fencing token, and on failure returns the current
// item (ReturnValuesOnConditionCheckFailure) so that no read is needed to
// learn who holds it. On success DynamoDB returns the item as it was before
// (ReturnValues ALL_OLD: nothing, for a free key), and the client builds
// the new item from it and what it wrote. sent is the instant the lease
// counts from.
func (c *Client) acquireWrite(key string, sortKey *string, o *acquireLockOptions, rvn, takeover string, q *queueWrite, sent time.Time) (*dynamodb.UpdateItemInput, *acquiredItem) {
	w := &acquiredItem{set: make(map[string]types.AttributeValue, 4+len(o.additionalAttributes)), tokenBase: uint64(sent.UnixMicro())}
	b := newExprBuilder()
	w.set[attrOwnerName] = attrS(c.ownerName)
	w.set[attrLeaseDuration] = attrS(formatLease(o.lease))
	w.set[attrRVN] = attrS(rvn)
	set := "SET " + b.name("#o", attrOwnerName) + " = " + b.value(":o", w.set[attrOwnerName]) +
		", " + b.name("#l", attrLeaseDuration) + " = " + b.value(":l", w.set[attrLeaseDuration]) +
		", " + b.name("#v", attrRVN) + " = " + b.value(":v", w.set[attrRVN])
	remove := " REMOVE " + b.name("#r", attrIsReleased) + c.removeStaleExpiry(b)
	w.remove = append(w.remove, attrIsReleased)
	if c.clockSkewBound <= 0 {
		w.remove = append(w.remove, attrLeaseExpiresAt, attrLeaseExpiresRVN)
	}
	data := &types.AttributeValueMemberB{Value: o.data}
	// The lock keeps a copy: the caller may reuse its slice.
	kept := func() types.AttributeValue { return &types.AttributeValueMemberB{Value: bytes.Clone(o.data)} }
	switch {
	case o.replaceData && o.data == nil:
		remove += ", " + b.name("#d", attrData)
		w.remove = append(w.remove, attrData)
	case o.replaceData:
		set += ", " + b.name("#d", attrData) + " = " + b.value(":d", data)
		w.set[attrData] = kept()
	case o.data != nil:
		set += ", #d = if_not_exists(" + b.name("#d", attrData) + ", " + b.value(":d", data) + ")"
		w.dataIfAbsent = kept()
	}
	i := 0
	for name, v := range o.additionalAttributes {
		n, vv := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		set += ", " + b.name(n, name) + " = " + b.value(vv, v)
		w.set[name] = v
		i++
	}
	// The fencing token goes up by one on every acquisition. A new item
	// starts from the current time in microseconds rather than from zero, so
	// that tokens keep increasing when an item is deleted (on release or by
	// TTL) and created again, and an owner's token never names two
	// acquisitions of one key.
	set += ", " + b.name("#f", attrFencingToken) + " = if_not_exists(#f, " +
		b.value(":base", attrN(w.tokenBase)) + ") + " + b.value(":one", attrN(1))
	set += c.expirySets(b, sent, o.lease, rvn)
	for alias, attr := range map[string]string{":x": attrLeaseExpiresAt, ":xr": attrLeaseExpiresRVN, ":t": c.ttlAttribute} {
		if v, ok := b.values[alias]; ok {
			w.set[attr] = v
		}
	}

	cond := "attribute_not_exists(" + b.name("#pk", c.partitionKeyName) + ") OR attribute_exists(#r)"
	if takeover != "" {
		cond += " OR #v = " + b.value(":stale", attrS(takeover))
	}
	if o.onlyIfLockAlreadyExist {
		cond = "attribute_exists(#pk) AND (" + cond + ")"
	}
	if q != nil {
		cond, remove = q.expr(b, cond, remove)
		w.queueRemove = q.remove
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.tableName),
		Key:                                 c.itemKeyOf(key, sortKey),
		UpdateExpression:                    aws.String(set + remove),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.valuesOrNil(),
		ReturnValues:                        types.ReturnValueAllOld,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, w
}

// acquiredItem is what an acquiring write writes, to build the new item
// from the old one.
type acquiredItem struct {
	set          map[string]types.AttributeValue
	dataIfAbsent types.AttributeValue // data, where the item has none
	remove       []string
	queueRemove  []string // entries removed from the fair queue
	tokenBase    uint64   // the fencing token of an item that has none
}

// after is the item as the write left it, given key and the item before
// (nil or empty when there was none).
func (w *acquiredItem) after(key, old map[string]types.AttributeValue) map[string]types.AttributeValue {
	item := make(map[string]types.AttributeValue, len(old)+len(w.set)+3)
	maps.Copy(item, old)
	maps.Copy(item, key)
	for _, name := range w.remove {
		delete(item, name)
	}
	if _, ok := item[attrData]; !ok && w.dataIfAbsent != nil {
		item[attrData] = w.dataIfAbsent
	}
	maps.Copy(item, w.set)
	token, err := uintAttr(old, attrFencingToken)
	switch _, had := old[attrFencingToken]; {
	case err != nil || token == math.MaxUint64:
		// DynamoDB added one to a number this client cannot read: so
		// cannot the lock (decoding the item fails, as it would have).
		item[attrFencingToken] = attrS("unreadable")
	case had:
		item[attrFencingToken] = attrN(token + 1)
	default:
		item[attrFencingToken] = attrN(w.tokenBase + 1)
	}
	if q, ok := item[attrFairQueue].(*types.AttributeValueMemberM); ok && len(w.queueRemove) > 0 {
		left := maps.Clone(q.Value)
		for _, id := range w.queueRemove {
			delete(left, id)
		}
		item[attrFairQueue] = &types.AttributeValueMemberM{Value: left}
	}
	return item
}

// carriesRVN reports whether item's record version number is rvn, whether
// or not the rest of it can be decoded.
func carriesRVN(item map[string]types.AttributeValue, rvn string) bool {
	v, ok := item[attrRVN].(*types.AttributeValueMemberS)
	return ok && v.Value == rvn
}
