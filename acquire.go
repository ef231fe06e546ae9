package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"strconv"
	"time"

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
// refresh period (plus a small jitter). If the item's record version number
// stays the same for a full lease of the holder, measured on this host's
// monotonic clock, the holder is taken to be dead and the lock is taken over
// with a write conditioned on that version. If the holder keeps renewing it,
// the acquisition gives up after the holder's lease plus
// [WithAdditionalTimeToWaitForLock] with a *[LockNotGrantedError] wrapping a
// *[TimeoutError].
//
// When ctx ends the wait stops at once; the error matches both ctx.Err() and
// *LockNotGrantedError. Bad input returns an *[InvalidArgumentError] before
// any DynamoDB call.
func (c *Client) AcquireLockWithContext(ctx context.Context, key string, opts ...AcquireLockOption) (*Lock, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	o := &acquireLockOptions{
		refreshPeriod:        DefaultRefreshPeriod,
		additionalTimeToWait: DefaultAdditionalTimeToWaitForLock,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
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
	if m := o.sessionMonitor; m != nil {
		if err := c.validateSessionMonitor(m); err != nil {
			return err
		}
	}
	return c.validateItemSize("WithData", key, o.data, o.additionalAttributes)
}

// validateItemSize rejects data that would make the item larger than
// DynamoDB's 400 KB limit, counting every attribute the lock writes.
func (c *Client) validateItemSize(option, key string, data []byte, additional map[string]types.AttributeValue) error {
	item := c.itemKey(key)
	for name, v := range additional {
		item[name] = v
	}
	size := itemSize(item) + len(data) + len(attrData) +
		len(attrOwnerName) + len(c.ownerName) +
		len(attrLeaseDuration) + 24 + len(attrRVN) + 36 +
		len(attrIsReleased) + 1 + len(attrFencingToken) + 12 +
		len(attrLeaseExpiresAt) + 12 + len(c.ttlAttribute) + 12
	if size > maxItemBytes {
		if len(data) < size/2 {
			option = "WithAdditionalAttributes"
		}
		return invalid(option, strconv.Itoa(len(data))+" bytes of data", "the lock item would be about %d bytes, over DynamoDB's %d-byte item limit", size, maxItemBytes)
	}
	return nil
}

const reentrantStripes = 64

var errNoItemReturned = errors.New("the failed condition returned no item")

// stripe picks one of the client's reentrant mutexes for a key.
func stripe(regKey string) int {
	h := uint32(2166136261)
	for i := 0; i < len(regKey); i++ {
		h = (h ^ uint32(regKey[i])) * 16777619
	}
	return int(h % reentrantStripes)
}

// acquisition is the state of one AcquireLock call.
type acquisition struct {
	c        *Client
	key      string
	regKey   string
	o        *acquireLockOptions
	start    time.Time
	deadline time.Time // zero until a holder has been seen
	// attempts maps each record version number this call tried to write to
	// the time it sent it, so that a write whose answer was lost is
	// recognised (and adopted) when the next attempt finds it.
	attempts map[string]time.Time
}

func (c *Client) acquire(ctx context.Context, key string, o *acquireLockOptions, start time.Time) (*Lock, error) {
	a := &acquisition{c: c, key: key, regKey: c.registryKey(key), o: o, start: start, attempts: make(map[string]time.Time, 2)}
	if o.reentrant {
		// Reentrant acquisitions of one key take turns, so that concurrent
		// ones return the same lock instead of each taking it from the other.
		mu := &c.reentrantMu[stripe(a.regKey)]
		mu.Lock()
		defer mu.Unlock()
		if l := c.heldLock(a.regKey); l != nil && !l.IsExpired() {
			return l, nil
		}
	}
	takeover := "" // the stale RVN a write may replace
	for {
		l, item, err := a.tryWrite(ctx, takeover)
		if l != nil {
			return l, nil
		}
		if err != nil {
			if !a.retryable(ctx, err) {
				var lng *LockNotGrantedError
				if errors.As(err, &lng) || errors.Is(err, ErrClientClosed) {
					return nil, err
				}
				return nil, notGranted(err, "key %q", a.key)
			}
			// The write may have landed: poll, and recognise our own RVN.
			if err := a.sleep(ctx, o.refreshPeriod); err != nil {
				return nil, err
			}
			if item, err = a.read(ctx); err != nil {
				if !a.retryable(ctx, err) {
					return nil, notGranted(err, "key %q", a.key)
				}
				continue
			}
		}
		takeover, l, err = a.wait(ctx, item)
		if l != nil || err != nil {
			return l, err
		}
	}
}

// tryWrite sends the acquiring UpdateItem. It returns the new lock, or the
// item that made the condition fail, or an error.
func (a *acquisition) tryWrite(ctx context.Context, takeover string) (*Lock, map[string]types.AttributeValue, error) {
	c := a.c
	rvn := newRVN()
	in := c.acquireInput(a.key, a.o, rvn, takeover)
	sent := time.Now()
	a.attempts[rvn] = sent
	out, err := c.db.UpdateItem(ctx, in)
	c.metrics.call(ctx, "UpdateItem")
	err = c.classify(ctx, err)
	if err == nil {
		l, err := a.adopt(ctx, out.Attributes, sent)
		return l, nil, err
	}
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return nil, nil, err
	}
	if len(ccf.Item) == 0 {
		if a.o.onlyIfLockAlreadyExist {
			return nil, nil, notGranted(nil, "key %q has no lock item and WithAcquireOnlyIfLockAlreadyExists was given", a.key)
		}
		// DynamoDB returns the item that failed the condition; an emulator or
		// wrapper may not. Learn it by reading, after the usual pause.
		return nil, nil, errNoItemReturned
	}
	return nil, ccf.Item, nil
}

// adopt turns an item this call wrote into a held, registered lock.
func (a *acquisition) adopt(ctx context.Context, item map[string]types.AttributeValue, sent time.Time) (*Lock, error) {
	c := a.c
	rec, err := c.schema.decodeItem(item)
	if err != nil {
		return nil, notGranted(err, "key %q", a.key)
	}
	l := newLockFromRecord(c, a.key, rec, sent, stateHeld)
	l.deleteOnRelease = a.o.deleteLockOnRelease
	l.monitor = a.o.sessionMonitor
	if err := c.register(ctx, l); err != nil {
		return nil, err
	}
	c.observations.forget(a.regKey)
	waited := time.Since(a.start)
	l.log(slog.LevelInfo, "lock acquired", slogDuration("waited", waited))
	return l, nil
}

// wait watches a held item until it is free, stale, or the wait runs out.
// It returns the RVN to take over ("" for a free item), or the lock when the
// item turned out to be our own write whose answer was lost, or the error
// that ends the call. A nil item means "no fresh read": judge the last one.
func (a *acquisition) wait(ctx context.Context, item map[string]types.AttributeValue) (string, *Lock, error) {
	c := a.c
	var rec *lockRecord
	var firstSeen time.Time
	for {
		if item != nil {
			if len(item) == 0 {
				return "", nil, nil
			}
			var err error
			if rec, err = c.schema.decodeItem(item); err != nil {
				return "", nil, notGranted(err, "key %q holds an item this client cannot interpret; it is treated as held", a.key)
			}
			if rec.released {
				return "", nil, nil
			}
			if sent, ok := a.attempts[rec.rvn]; ok && rec.owner == c.ownerName {
				if time.Since(sent) < rec.lease {
					l, err := a.adopt(ctx, item, sent)
					return "", l, err
				}
				return rec.rvn, nil, nil // our own write, but its lease is over: renew by taking it over
			}
			if a.o.reentrant && rec.owner == c.ownerName {
				return rec.rvn, nil, nil // Java's reentrant: an item naming our owner is ours to take
			}
			firstSeen = c.observations.observe(a.regKey, rec.rvn, time.Now())
			if a.deadline.IsZero() {
				a.deadline = a.start.Add(satAdd(a.o.additionalTimeToWait, rec.lease))
				if !a.o.failIfLocked {
					c.logger.LogAttrs(ctx, slog.LevelDebug, "waiting for lock", slogKey(a.key), slogOwner(rec.owner), slogRVN(rec.rvn),
						slogDuration("lease", rec.lease))
				}
			}
		}
		if rec == nil {
			return "", nil, nil
		}
		now := time.Now()
		staleAt := firstSeen.Add(rec.lease)
		if at, ok := c.staleByClockAt(rec, now); ok && at.Before(staleAt) {
			staleAt = at // with WithClockSkewBound: wake when the stored expiry plus the bound passes
		}
		if !now.Before(staleAt) {
			c.logger.LogAttrs(ctx, slog.LevelInfo, "taking over stale lock", slogKey(a.key), slogOwner(rec.owner), slogRVN(rec.rvn))
			return rec.rvn, nil, nil
		}
		if a.o.failIfLocked {
			return "", nil, notGranted(&LockHeldError{Key: a.key, Owner: rec.owner, LeaseDuration: rec.lease}, "FailIfLocked")
		}
		if !now.Before(a.deadline) {
			return "", nil, notGranted(&TimeoutError{Age: now.Sub(a.start)}, "%s", c.stayedHeld(a.key, rec.owner))
		}
		// Sleep one refresh period, but wake up exactly when the item could
		// become stale or the wait ends.
		// Jitter shortens the wait, so that polls spread out yet never come
		// later than one refresh period apart.
		d := a.o.refreshPeriod - jitter(a.o.refreshPeriod)
		d = min(d, staleAt.Sub(now), a.deadline.Sub(now))
		if err := a.sleep(ctx, d); err != nil {
			return "", nil, err
		}
		var err error
		if item, err = a.read(ctx); err != nil {
			if !a.retryable(ctx, err) {
				return "", nil, notGranted(err, "key %q", a.key)
			}
			item = nil
		}
	}
}

func (a *acquisition) read(ctx context.Context) (map[string]types.AttributeValue, error) {
	out, err := a.c.db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(a.c.tableName),
		Key:            a.c.itemKey(a.key),
		ConsistentRead: aws.Bool(true),
	})
	a.c.metrics.call(ctx, "GetItem")
	err = a.c.classify(ctx, err)
	if err != nil {
		return nil, err
	}
	if out.Item == nil {
		return map[string]types.AttributeValue{}, nil
	}
	return out.Item, nil
}

// retryable reports whether a DynamoDB error leaves room for another try
// within this acquisition's wait; otherwise the caller returns it.
func (a *acquisition) retryable(ctx context.Context, err error) bool {
	if ctx.Err() != nil || a.o.failIfLocked || !isTransient(err) || unreachable(err, a.start) {
		return false
	}
	deadline := a.deadline
	if deadline.IsZero() {
		deadline = a.start.Add(satAdd(a.o.additionalTimeToWait, a.c.leaseDuration))
	}
	a.c.logger.LogAttrs(ctx, slog.LevelWarn, "acquire failed, retrying", slogKey(a.key), slogErr(err))
	return time.Now().Before(deadline)
}

// sleep waits d, or until ctx ends or the client closes.
func (a *acquisition) sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return notGranted(ctx.Err(), "key %q: context done while waiting", a.key)
	case <-a.c.closing:
		return notGranted(ErrClientClosed, "key %q", a.key)
	}
}

// satAdd adds two non-negative durations, saturating instead of
// overflowing: "wait for ever" must not turn into "give up at once".
func satAdd(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func jitter(d time.Duration) time.Duration {
	if d < 10 {
		return 0
	}
	return rand.N(d / 10)
}

// acquireInput builds the single UpdateItem that acquires a free or released
// item, or takes over one whose RVN is takeover. It bumps the fencing token,
// and on failure returns the current item (ReturnValuesOnConditionCheckFailure)
// so that no read is needed to learn who holds it.
func (c *Client) acquireInput(key string, o *acquireLockOptions, rvn, takeover string) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	set := "SET " + b.name("#o", attrOwnerName) + " = " + b.value(":o", attrS(c.ownerName)) +
		", " + b.name("#l", attrLeaseDuration) + " = " + b.value(":l", attrS(formatLease(c.leaseDuration))) +
		", " + b.name("#v", attrRVN) + " = " + b.value(":v", attrS(rvn))
	remove := " REMOVE " + b.name("#r", attrIsReleased) + c.removeStaleExpiry(b)
	switch {
	case o.replaceData && o.data == nil:
		remove += ", " + b.name("#d", attrData)
	case o.replaceData:
		set += ", " + b.name("#d", attrData) + " = " + b.value(":d", &types.AttributeValueMemberB{Value: o.data})
	case o.data != nil:
		set += ", #d = if_not_exists(" + b.name("#d", attrData) + ", " + b.value(":d", &types.AttributeValueMemberB{Value: o.data}) + ")"
	}
	i := 0
	for name, v := range o.additionalAttributes {
		n, vv := "#a"+strconv.Itoa(i), ":a"+strconv.Itoa(i)
		set += ", " + b.name(n, name) + " = " + b.value(vv, v)
		i++
	}
	now := time.Now()
	// The fencing token goes up by one on every acquisition. A new item
	// starts from the current time in microseconds rather than from zero, so
	// that tokens keep increasing when an item is deleted (on release or by
	// TTL) and created again, and an owner's token never names two
	// acquisitions of one key.
	set += ", " + b.name("#f", attrFencingToken) + " = if_not_exists(#f, " +
		b.value(":base", attrN(uint64(now.UnixMicro()))) + ") + " + b.value(":one", attrN(1))
	set += c.expirySets(b, now, c.leaseDuration)

	cond := "attribute_not_exists(" + b.name("#pk", c.partitionKeyName) + ") OR attribute_exists(#r)"
	if takeover != "" {
		cond += " OR #v = " + b.value(":stale", attrS(takeover))
	}
	if o.onlyIfLockAlreadyExist {
		cond = "attribute_exists(#pk) AND (" + cond + ")"
	}
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.tableName),
		Key:                                 c.itemKey(key),
		UpdateExpression:                    aws.String(set + remove),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.names,
		ExpressionAttributeValues:           b.valuesOrNil(),
		ReturnValues:                        types.ReturnValueAllNew,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
