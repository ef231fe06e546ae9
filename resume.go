package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// ResumeLock takes back the lock a [Lock.ResumeToken] names (kept by a
// process that restarted, say), with one conditional UpdateItem, when and
// only when the item still shows that acquisition: the owner and fencing
// token the token names, not released (for an RWLock reader: its entry in
// the item). Renewals since do not stale a token; a new acquisition of the
// key, by anyone, does. The write makes the lock this client's (its owner
// name, a new record version number and lease) and raises its fencing
// token by one, so that guarded writes ([Lock.TransactionCondition]) of a
// process still running with the old lock are refused from then on, and
// that process learns of the loss at its next heartbeat (its lock ends
// with [ErrLockTakenOver]). A reader's entry is replaced by a new one (the
// old one's guard fails; a reader's fencing token is the last writer's and
// does not move). The resumed lock is an ordinary held [*Lock], renewed by
// this client with its own lease, even on a client with [WithSession].
//
// It is refused with a *[LockNotGrantedError], and no write lands, when
// the item shows anything else: its message says which, and its cause
// matches [ErrLockAlreadyReleased] (released by its holder or a force
// release, deleted, a reader's entry gone) or [ErrLockTakenOver] (another
// acquisition since: the lease ran out and another owner took it, or it
// was resumed or acquired again). A token that is malformed, of another
// table or key schema, or of a lock held by a session is refused before
// any call, with a cause that is an *[InvalidArgumentError]. A session's
// lock cannot be resumed: its session, not the lock, is renewed, and the
// process holding that session would not learn at its next heartbeat that
// the lock moved; acquire its key once the session has ended.
//
// When this client itself holds the acquisition the token names (the
// same process resumes a lock it still holds), that lock is returned, with
// no call.
//
// opts may be [WithLockLease], [WithDeleteLockOnRelease],
// [WithSessionMonitor], [WithRefreshPeriod] and
// [WithAdditionalTimeToWaitForLock]; the others are bad input, and so are
// WithLockLease and WithSessionMonitor on a client with [WithSession], as
// for any of its acquisitions. A write
// that fails transiently is sent again every refresh period for the lock's
// lease plus the additional time to wait (1 s by default), or until ctx
// ends; a write whose outcome stays unknown is taken back before the call
// returns. Cost: one UpdateItem (and the client's one DescribeTable before
// its first write).
func (c *Client) ResumeLock(ctx context.Context, token string, opts ...AcquireLockOption) (l *Lock, err error) {
	t, decodeErr := decodeResumeToken(token)
	var keys []string
	if decodeErr == nil {
		keys = []string{t.key}
	}
	ctx, tr := c.startAcquire(ctx, kindResume, keys...)
	defer func() { tr.end(err, l) }()
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	if decodeErr != nil {
		return nil, notGranted(invalid("resume token", token, "%v", decodeErr), "resume: malformed token")
	}
	what := t.what()
	if err := c.checkResumeToken(t); err != nil {
		return nil, notGranted(err, "resume of %s", what)
	}
	o, err := c.resumeOptions(opts)
	if err != nil {
		return nil, err
	}
	if l := c.heldResumable(t); l != nil {
		return l, nil // this client holds that very acquisition: nothing to take back
	}
	tr.sortKey(t.sortKey)
	start := c.now()
	l, err = c.resume(ctx, tr, t, o, what, start)
	c.metrics.Acquired(ctx, acquireOutcome(err), c.since(start))
	return l, err
}

// what names the lock a token names, in errors.
func (t *resumeToken) what() string {
	s := "key " + strconv.Quote(t.key)
	if t.sortKey != nil {
		s += " (sort key " + strconv.Quote(*t.sortKey) + ")"
	}
	if t.entry != "" {
		s = "reader " + t.entry + " of " + s
	}
	return s + " acquired by " + strconv.Quote(t.owner) + " with fencing token " + strconv.FormatUint(t.token, 10)
}

// heldResumable is the lock this client holds that t names (the same
// acquisition: owner and fencing token, or the reader's entry), if any.
func (c *Client) heldResumable(t *resumeToken) *Lock {
	regKey := registryKey(t.key, t.sortKey)
	if t.entry != "" {
		regKey = readerRegKey(t.key, t.sortKey, t.entry)
	}
	l := c.here.held(regKey)
	if l == nil || l.OwnerName() != t.owner || l.FencingToken() != t.token {
		return nil
	}
	return l
}

// checkResumeToken refuses a token this client cannot resume.
func (c *Client) checkResumeToken(t *resumeToken) error {
	short := t.encode()
	switch {
	case t.table != c.cfg.tableName:
		return invalid("resume token", short, "names a lock of table %q; this client's table is %q", t.table, c.cfg.tableName)
	case t.sortKey != nil && c.cfg.sortKeyName == "":
		return invalid("resume token", short, "names sort key value %q; this client's table has no sort key (WithSortKey)", *t.sortKey)
	case t.sortKey == nil && c.cfg.sortKeyName != "":
		return invalid("resume token", short, "names no sort key value; this client's table has sort key %q", c.cfg.sortKeyName)
	case t.session != "":
		return invalid("resume token", short, "names a lock held by session %s (WithSession), which cannot be resumed: the session, "+
			"not the lock, is renewed, and the process holding the session would not learn at its next heartbeat that the lock "+
			"moved; acquire the key once that session has ended (its lease after its last renewal)", t.session)
	}
	if err := validateKey(t.key); err != nil {
		return err
	}
	if t.sortKey != nil {
		if _, err := c.resolveSortKey(t.sortKey); err != nil {
			return err
		}
	}
	return nil
}

// resumeOptions resolves opts for ResumeLock: only those that say how to
// hold the lock and how long to retry apply.
func (c *Client) resumeOptions(opts []AcquireLockOption) (*acquireLockOptions, error) {
	o, err := c.acquireOptions(opts, false)
	if err != nil {
		return nil, err
	}
	why := "cannot be used with ResumeLock: the resumed lock keeps the item as it is, and takes no wait"
	switch {
	case o.data != nil:
		return nil, invalid("WithData", fmt.Sprintf("%d bytes", len(o.data)), "%s (change the data with a heartbeat: ReplaceHeartbeatData)", why)
	case o.replaceData:
		return nil, invalid("ReplaceData", true, "%s (change the data with a heartbeat: ReplaceHeartbeatData)", why)
	case len(o.additionalAttributes) > 0:
		return nil, invalid("WithAdditionalAttributes", len(o.additionalAttributes), "%s", why)
	case o.failIfLocked:
		return nil, invalid("FailIfLocked", true, "%s", why)
	case o.fair:
		return nil, invalid("WithFairness", true, "%s", why)
	case o.reentrant:
		return nil, invalid("WithReentrant", true, "%s", why)
	case o.onlyIfLockAlreadyExist:
		return nil, invalid("WithAcquireOnlyIfLockAlreadyExists", true, "%s", why)
	}
	if given := newAcquireLockOptions(opts).sortKey; given != nil { // as given, before the client's default
		return nil, invalid("WithSortKeyValue", *given, "cannot be used with ResumeLock: the token names the sort key")
	}
	return o, nil
}

// resume sends the resuming write of t, and retries it while it fails
// transiently within the wait; a write that may have landed is taken back
// if the call gives up.
func (c *Client) resume(ctx context.Context, tr *acqTrace, t *resumeToken, o *acquireLockOptions, what string, start time.Time) (l *Lock, err error) {
	deadline := start.Add(satAdd(o.additionalTimeToWait, o.lease))
	admitted, err := c.admit(ctx, 1, o.lease, deadline, what)
	if err != nil {
		return nil, err
	}
	defer func() { admitted.end(err == nil) }()
	key := c.itemKeyOf(t.key, t.sortKey)
	rvn := newRVN()
	var shape itemShape = holderShape{}
	if t.entry != "" {
		shape = readerShape{randomID()} // a new entry: the old one's guard fails
	}
	sent := c.now() // the lease counts from the first send: every retry is the same write
	c.here.sending(rvn)
	defer c.here.settled(rvn) // after the lock is registered (here, rule 1)
	unsure := false
	for {
		bctx := ctx
		if c.until(deadline) < c.callBound() {
			bctx = withCallBound(ctx, deadline, minCallTime)
		}
		tr.sentWrite()
		out, err := c.updateItem(bctx, c.resumeInput(t, key, shape, rvn, sent, o.lease))
		var ccf *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			return c.holdResumed(ctx, t, o, shape, key, rvn, sent, out.Attributes, what)
		case errors.As(err, &ccf) && shape.carries(ccf.Item, rvn):
			// An earlier attempt of this call landed (its answer lost).
			return c.holdResumed(ctx, t, o, shape, key, rvn, sent, ccf.Item, what)
		case errors.As(err, &ccf):
			return nil, resumeRefused(c, t, ccf.Item, what)
		}
		unsure = unsure || !surelyNotApplied(err)
		if ctx.Err() != nil || !isTransient(err) || unreachable(err, c.since(start)) || !c.now().Before(deadline) {
			if unsure {
				c.takeBackResume(ctx, t, shape, key, rvn)
			}
			if ctx.Err() != nil {
				return nil, notGranted(joinErrors(ctx.Err(), err), "resume of %s: context done", what)
			}
			return nil, notGranted(err, "resume of %s", what)
		}
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "resume failed, retrying", slogKey(t.key), slogErr(err))
		if err := c.pause(ctx, o.refreshPeriod-randomUpTo(o.refreshJitter), nil, "resume of "+what); err != nil {
			if unsure {
				c.takeBackResume(ctx, t, shape, key, rvn)
			}
			return nil, err
		}
	}
}

// resumeInput is the resuming write: for the item's holder, the owner,
// a new RVN and lease and the fencing token raised by one, conditioned on
// the owner and fencing token the token names, not released; for a
// reader, its entry replaced by a new one, conditioned on the old entry
// being there (and no writer). The new item comes back (ALL_NEW); a
// refusal returns the item (ALL_OLD) to say why.
func (c *Client) resumeInput(t *resumeToken, key map[string]types.AttributeValue, shape itemShape, rvn string, sent time.Time, lease time.Duration) *dynamodb.UpdateItemInput {
	b := lockitem.NewExpr()
	var update, cond string
	if r, ok := shape.(readerShape); ok {
		rs := b.Name("#R", lockitem.Readers)
		update = "SET " + rs + "." + b.Name("#me", r.id) + " = " + b.Value(":e", readerEntry(rvn, lease, "")) +
			" REMOVE " + rs + "." + b.Name("#old", t.entry) +
			" ADD " + b.Name("#rv", lockitem.ReadersVersion) + " " + b.Value(":one", lockitem.N(1))
		cond = "attribute_exists(" + rs + ".#old) AND attribute_exists(" + b.Name("#r", lockitem.IsReleased) + ")"
	} else {
		update = "SET " + b.Name("#o", lockitem.OwnerName) + " = " + b.Value(":o", lockitem.S(c.cfg.ownerName)) +
			", " + b.Name("#v", lockitem.RVN) + " = " + b.Value(":v", lockitem.S(rvn)) +
			", " + b.Name("#l", lockitem.LeaseDuration) + " = " + b.Value(":l", lockitem.S(lockitem.FormatLease(lease))) +
			", " + b.Name("#f", lockitem.FencingToken) + " = #f + " + b.Value(":one", lockitem.N(1)) +
			c.expirySets(b, sent, lease, rvn)
		// An item names a session only while the session holds it; without
		// WithClockSkewBound no stored expiry outlives its writer.
		update += " REMOVE " + b.Name("#s", lockitem.Session)
		if c.cfg.clockSkewBound <= 0 {
			update += ", " + expiryAttrs(b)
		}
		cond = "#o = " + b.Value(":was", lockitem.S(t.owner)) + " AND #f = " + b.Value(":tok", lockitem.N(t.token)) +
			" AND attribute_not_exists(" + b.Name("#r", lockitem.IsReleased) + ")"
	}
	in := c.guardedUpdate(key, b, update, cond)
	in.ReturnValues = types.ReturnValueAllNew
	return in
}

// holdResumed turns item, which shows this call's resuming write rvn, into
// a held, registered lock.
func (c *Client) holdResumed(ctx context.Context, t *resumeToken, o *acquireLockOptions, shape itemShape,
	key map[string]types.AttributeValue, rvn string, sent time.Time, item map[string]types.AttributeValue, what string,
) (*Lock, error) {
	if !c.now().Before(sent.Add(o.lease)) {
		// The answer came after the lease it granted ran out (a pause, a
		// slow network): never return a lock already lost.
		c.takeBackResume(ctx, t, shape, key, rvn)
		return nil, notGranted(ErrLeaseExpired, "resume of %s: the answer came after the lease it granted ran out; taken back", what)
	}
	var rec *lockRecord
	if _, reader := shape.(readerShape); reader {
		token, _ := uintAttr(item, lockitem.FencingToken)
		rec = &lockRecord{Owner: c.cfg.ownerName, Lease: o.lease, RVN: rvn, FencingToken: token}
	} else {
		var err error
		if rec, err = c.cfg.schema.decodeItem(item); err != nil {
			c.takeBackResume(ctx, t, shape, key, rvn)
			return nil, notGranted(err, "resume of %s: the item it wrote cannot be interpreted; taken back", what)
		}
	}
	l := newHeldLock(c, t.key, t.sortKey, rec, sent)
	l.leaseEnd = sent.Add(o.lease)
	l.deleteOnRelease = o.deleteLockOnRelease
	if sm := o.sessionMonitor; sm != nil {
		own := *sm // a monitor's state belongs to one lock
		l.monitor = &own
	}
	shape.mark(l) // before the lock is published
	if err := c.register(ctx, l); err != nil {
		return nil, err
	}
	if err := l.Err(); err != nil {
		// Lost while being registered (a pause): never returned.
		c.takeBackResume(ctx, t, shape, key, rvn)
		return nil, notGranted(err, "resume of %s: lost before it could be returned", what)
	}
	c.here.forget(l.regKey())
	l.log(slog.LevelInfo, "lock resumed", slog.String("from", t.owner), slog.Uint64("fromToken", t.token))
	return l, nil
}

// takeBackResume releases what a resuming write that nobody holds may have
// written (the item, or the reader's new entry, if it still carries rvn),
// in one bounded wait even when ctx has ended.
func (c *Client) takeBackResume(ctx context.Context, t *resumeToken, shape itemShape, key map[string]types.AttributeValue, rvn string) {
	cctx, cancel := c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	var token uint64
	if _, ok := shape.(holderShape); ok {
		token = t.token + 1 // only the resumed acquisition's item
	}
	_, err := c.updateItem(cctx, shape.undoInput(c, key, []string{rvn}, token))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "could not take back a resuming write whose answer was lost; the item expires after its lease",
			slogKey(t.key), slogErr(err))
	}
}

// resumeRefused is the error of a resume the item refused: what the item
// (ALL_OLD of the failed condition; nil when there is none) shows instead
// of the acquisition the token names.
func resumeRefused(c *Client, t *resumeToken, item map[string]types.AttributeValue, what string) error {
	if len(item) == 0 {
		return notGranted(ErrLockAlreadyReleased, "resume of %s: refused: the item is gone (deleted by a release with WithDeleteLock, by the table's TTL or by hand)", what)
	}
	rec, err := c.cfg.schema.decodeItem(item)
	if t.entry != "" {
		switch {
		case err == nil && !rec.Released:
			return notGranted(ErrLockTakenOver, "resume of %s: refused: a writer holds the lock (owner %q, fencing token %d)", what, rec.Owner, rec.FencingToken)
		default:
			return notGranted(ErrLockAlreadyReleased, "resume of %s: refused: the reader's entry is gone (released, or dropped as dead by a writer or reader that saw it unrenewed for its lease)", what)
		}
	}
	if err != nil {
		return notGranted(err, "resume of %s: refused: the item cannot be interpreted", what)
	}
	switch {
	case rec.FencingToken == t.token && rec.Owner == t.owner && rec.Released:
		return notGranted(ErrLockAlreadyReleased, "resume of %s: refused: it was released (by its holder, or by a force release)", what)
	case rec.FencingToken < t.token:
		return notGranted(ErrLockTakenOver, "resume of %s: refused: the item was deleted and created again since (fencing token %d)", what, rec.FencingToken)
	case rec.Released:
		return notGranted(ErrLockAlreadyReleased, "resume of %s: refused: acquired again since (fencing token %d, by owner %q), and released", what, rec.FencingToken, rec.Owner)
	case rec.Owner != t.owner:
		return notGranted(ErrLockTakenOver, "resume of %s: refused: taken by owner %q (fencing token %d): it resumed it, or acquired it once the lease ran out or the lock was released", what, rec.Owner, rec.FencingToken)
	default:
		return notGranted(ErrLockTakenOver, "resume of %s: refused: another acquisition under the same owner name holds it (fencing token %d): resumed already, or acquired again", what, rec.FencingToken)
	}
}
