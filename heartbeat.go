package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// SendHeartbeat renews lock, as SendHeartbeatWithContext does with
// context.Background().
func (c *Client) SendHeartbeat(lock *Lock, opts ...SendHeartbeatOption) error {
	return c.SendHeartbeatWithContext(context.Background(), lock, opts...)
}

// SendHeartbeatWithContext renews a held lock now: one UpdateItem that
// writes a fresh record version number and the lease, conditioned on this
// owner and the lock's current record version number. If the condition
// fails, the lock is lost: it is marked so ([Lock.Done] closes) and the
// returned error matches [ErrLockLost].
//
// A heartbeat whose answer was lost (the write may have landed) is sent
// again unchanged by the next heartbeat, so a plain retry succeeds. A
// heartbeat with other options than that pending one writes a new record
// version number. When the lost one replaced or deleted the data,
// [Lock.Data] keeps the value it knew until the next heartbeat that lands,
// which reads the item's data back.
//
// A heartbeat that lands only after the lock's lease ran out by this
// host's clock (a slow request, a paused process) does not revive the
// lock: it returns the loss ([ErrLockLost]), and the item it renewed is
// released at once, so that the key is not left held by nobody. One that
// fails once the lease has run out (its context ended at the lease's end,
// say) returns the loss as well ([ErrLeaseExpired]): the lock is lost by
// then, whatever the write did.
//
// It returns [ErrReadOnlyLockHeartbeat] for a lock from [Client.Get] that
// this client does not hold, [ErrLockAlreadyReleased] for a released lock,
// and [ErrOwnerMismatched] for a lock of another owner.
func (c *Client) SendHeartbeatWithContext(ctx context.Context, lock *Lock, opts ...SendHeartbeatOption) error {
	if err := c.enter(ctx); err != nil {
		return err
	}
	if lock == nil {
		return nilLock()
	}
	o := &sendHeartbeatOptions{}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	switch {
	case o.retries < 0:
		return invalid("HeartbeatRetries", o.retries, "retries must not be negative")
	case o.retryWait < 0:
		return invalid("HeartbeatRetries", o.retryWait, "wait must not be negative")
	case o.leaseToEnsureSet && o.leaseDurationToEnsure <= 0:
		return invalid("WithLeaseDurationToEnsure", o.leaseDurationToEnsure, "must be positive")
	case o.leaseToEnsureSet && o.leaseDurationToEnsure < minLease:
		return tooShort("WithLeaseDurationToEnsure", o.leaseDurationToEnsure, minLease, 24*time.Hour, c.cfg.leaseDuration, leaseFloorWhy)
	case o.leaseToEnsureSet && o.leaseDurationToEnsure/2 < c.cfg.heartbeatPeriod:
		return invalid("WithLeaseDurationToEnsure", o.leaseDurationToEnsure,
			"must be at least twice %s", c.cfg.heartbeatPeriodText())
	case o.deleteData && o.data != nil:
		return invalid("ReplaceHeartbeatData", fmt.Sprintf("%d bytes", len(o.data)), "cannot be combined with DeleteData")
	}
	if !lock.shapeOf().ownsData() && (o.data != nil || o.deleteData) {
		return invalid("ReplaceHeartbeatData", fmt.Sprintf("%d bytes", len(o.data)), "cannot be used by an RWLock reader: the item's data is the writer's")
	}
	if o.data != nil {
		if err := c.validateItemSize("ReplaceHeartbeatData", lock.partitionKey, lock.sortKey, o.data, lock.AdditionalAttributes()); err != nil {
			return err
		}
	}
	if s := lock.heldBy(); s != nil {
		return c.sessionHeartbeat(ctx, lock, s, o)
	}
	return c.heartbeat(ctx, lock, o)
}

// sessionHeartbeat renews a lock held by a session, which has no lease of
// its own: it renews the session (one UpdateItem, for every lock of it,
// with the lease WithLeaseDurationToEnsure asks for), and, with
// ReplaceHeartbeatData or DeleteData, writes the lock's data as any
// heartbeat does (one more UpdateItem, on the lock's item), as it does
// while an earlier write of the lock's item is in doubt.
func (c *Client) sessionHeartbeat(ctx context.Context, l *Lock, s *Session, o *sendHeartbeatOptions) error {
	if err := l.Err(); err != nil {
		return err
	}
	if !o.changesData() {
		if err := c.heartbeat(ctx, s.lock, o); err != nil {
			return fmt.Errorf("dynamolock: heartbeat of %q: its session: %w", l.partitionKey, err)
		}
		if !l.inDoubt() {
			return l.Err() // it ended with its session, or not
		}
		// A write of the lock's own item (a data change) whose answer
		// was lost may have landed: this heartbeat writes the item too, as
		// a lock without a session does, so that once it returns nil the
		// lock's data is what the item holds (the simulation's invariant
		// 15). It costs the one write only while such a doubt stands.
		lo := *o
		lo.leaseDurationToEnsure = 0
		return c.heartbeat(ctx, l, &lo)
	}
	so := *o
	so.data, so.deleteData = nil, false
	if err := c.heartbeat(ctx, s.lock, &so); err != nil {
		return fmt.Errorf("dynamolock: heartbeat of %q: its session: %w", l.partitionKey, err)
	}
	lo := *o
	lo.leaseDurationToEnsure = 0 // the lock item's lease is the session's mark (sessionLeaseText)
	return c.heartbeat(ctx, l, &lo)
}

// inDoubt reports whether a write of l's item whose answer has not come
// may have landed.
func (l *Lock) inDoubt() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.renewal.maybe) > 0 || l.renewal.pending != nil
}

// Ensure makes sure the lock stays valid for at least d: when less than d of
// its lease is left, it sends a heartbeat (with a lease of d if d is longer
// than the lease); otherwise it does nothing.
func (l *Lock) Ensure(ctx context.Context, d time.Duration) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if l == nil {
		return nilLock()
	}
	if l.client == nil || l.kind == lockView {
		return ErrReadOnlyLockHeartbeat
	}
	if err := l.Err(); err != nil {
		return err
	}
	left, lease := l.client.until(l.Expiration()), l.LeaseDuration()
	if left >= d {
		return nil
	}
	return l.client.SendHeartbeatWithContext(ctx, l, WithLeaseDurationToEnsure(max(d, lease)))
}

// renewalState is what a holder knows of its writes whose answer has not
// come (the write may have landed, or may still land). Guarded by the
// lock's mu.
type renewalState struct {
	built   uint64 // writes built so far; each write gets the next number
	applied uint64 // the number of the latest write known to have landed
	// maybe lists the writes built after the applied one whose answer has
	// not come: the item may carry any of their RVNs, so the next write's
	// condition accepts them all, and no other. An RVN, once replaced,
	// never comes back: a write's condition names only RVNs known when it
	// was built, so no write built before another that landed can land
	// after it.
	maybe []maybeWrite
	// pending is the latest heartbeat among them: a retry resends exactly
	// it (same RVN, lease, expiry and data), because an observer that saw
	// its RVN times its lease from what that RVN was first written with.
	pending *renewal
}

// maybeWrite is a write that may land: an observer that sees rvn may take
// over at end, so this holder's lease ends no later while it is listed.
type maybeWrite struct {
	seq uint64
	rvn string
	end time.Time
}

// renewal is one write that renews the lease: a heartbeat, built once, or
// a guarded refresh.
type renewal struct {
	seq   uint64
	rvn   string
	sent  time.Time // built just before the first send: the lease counts from here
	lease time.Duration
	opts  sendHeartbeatOptions
	input *dynamodb.UpdateItemInput
}

// mayLandLocked records w, about to be sent: the next writes' conditions
// accept its RVN, and this holder's lease ends no later than an observer of
// w's RVN would let it. It reports whether the lease end moved earlier.
func (l *Lock) mayLandLocked(w *renewal) bool {
	end := w.sent.Add(w.lease)
	l.renewal.maybe = append(l.renewal.maybe, maybeWrite{seq: w.seq, rvn: w.rvn, end: end})
	if end.Before(l.leaseEnd) {
		l.leaseEnd = end
		return true
	}
	return false
}

// forgetLocked takes the write numbered seq off the writes that may land:
// DynamoDB answered that it did not apply. The lease end stays as it is
// (the next renewal that lands recomputes it).
func (l *Lock) forgetLocked(seq uint64) {
	r := &l.renewal
	if i := slices.IndexFunc(r.maybe, func(m maybeWrite) bool { return m.seq == seq }); i >= 0 {
		r.maybe = slices.Delete(r.maybe, i, i+1)
	}
	if len(r.maybe) == 0 {
		r.maybe = nil
	}
}

// maxINOperands is DynamoDB's limit on the operands of one IN.
const maxINOperands = 100

// sameWrite reports whether a heartbeat with lease and o would write what w
// writes, so that resending w serves it.
func (w *renewal) sameWrite(lease time.Duration, o *sendHeartbeatOptions) bool {
	return w.lease == lease && w.opts.deleteData == o.deleteData && w.opts.matchOwnerOnly == o.matchOwnerOnly &&
		(w.opts.data == nil) == (o.data == nil) && bytes.Equal(w.opts.data, o.data)
}

// heartbeat renews l, retrying as HeartbeatRetries says. It holds the lock's
// write turn for one call at a time, never while waiting between tries.
func (c *Client) heartbeat(ctx context.Context, l *Lock, o *sendHeartbeatOptions) error {
	for try := 0; ; try++ {
		err := c.heartbeatOnce(ctx, l, o, false)
		if err == nil || !isTransient(err) {
			return err
		}
		if try >= o.retries || ctx.Err() != nil {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, err)
		}
		if err := c.sleep(ctx, o.retryWait, nil); err != nil {
			return fmt.Errorf("dynamolock: heartbeat of %q: %w", l.partitionKey, err)
		}
	}
}

// heartbeatOnce sends one renewal of l: a fresh RVN and the lease,
// conditioned on this owner and the RVNs the item may carry (see
// renewalState), or the pending renewal again, unchanged.
//
// When the condition fails, the item that came back tells whether the lock
// is still this acquisition's (same owner and fencing token: a guarded
// refresh transaction moved the RVN), in which case the beat is sent again
// against the RVN it found, or whether someone else has it.
func (c *Client) heartbeatOnce(ctx context.Context, l *Lock, o *sendHeartbeatOptions, background bool) (err error) {
	if l.kind != heldLock {
		return ErrReadOnlyLockHeartbeat
	}
	if err := l.takeWrites(ctx); err != nil {
		return fmt.Errorf("dynamolock: heartbeat of %q: waiting for the lock's previous write: %w", l.partitionKey, err)
	}
	defer l.giveWrites()
	// A heartbeat that sent a write and failed gets a span (trace.go); a
	// healthy one, none.
	start, sent, grant := c.now(), false, c.tele.grantOf(l)
	defer func() {
		if sent && err != nil {
			c.heartbeatFailed(ctx, l, grant, start, background, err)
		}
	}()
	for follows := 0; ; follows++ {
		now := c.now()
		if err := l.endErr(now); err != nil {
			if errors.Is(err, ErrLeaseExpired) {
				return l.lose(ErrLeaseExpired, nil)
			}
			return err
		}
		l.mu.Lock()
		if l.ownerName != c.cfg.ownerName || l.client != c {
			l.mu.Unlock()
			return fmt.Errorf("%w: lock %q is held by %q, this client is %q", ErrOwnerMismatched, l.partitionKey, l.ownerName, c.cfg.ownerName)
		}
		lease := l.leaseDuration
		if o.leaseDurationToEnsure > 0 {
			lease = o.leaseDurationToEnsure
		}
		w := l.renewal.pending
		moved := false
		// A resend is exactly the first send, lease counted from then; once
		// that lease is over (only WithHoldLockOnServiceUnavailable keeps a
		// lock past it) a resend would renew nothing: write anew.
		if w == nil || !w.sameWrite(lease, o) || !now.Before(w.sent.Add(w.lease)) {
			l.renewal.built++
			w = &renewal{seq: l.renewal.built, rvn: newRVNFor(l), sent: now, lease: lease, opts: *o}
			w.input = c.heartbeatInput(l, w)
			l.renewal.pending = w
			moved = l.mayLandLocked(w)
			if w.changesData() {
				l.rareLocked().dataDoubt = w.seq // until its answer says it landed
			}
		}
		l.mu.Unlock()
		if moved {
			c.sched.notify(l) // the lease may now end earlier: Done must close then
		}

		sent = true
		out, err := c.updateItem(ctx, w.input)
		if err == nil {
			if err := l.renewed(w, out.Attributes); err != nil {
				// It landed after the lock ended here (its lease ran out by
				// this host's clock while it was on its way): the item it
				// renewed is held by nobody. Release it.
				c.undoLanded(ctx, l, w)
				return err
			}
			c.metrics.Heartbeat(ctx, "ok")
			return nil
		}
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) {
			if follows < maxRVNFollows && l.followMovedRVN(ccf.Item) {
				continue
			}
			c.metrics.Heartbeat(ctx, "lost")
			return l.loseHow(ErrLockTakenOver, l.takenHow(ccf.Item), err)
		}
		c.metrics.Heartbeat(ctx, "error")
		if background && c.cfg.holdLockOnServiceUnavailable && httpStatus(err) == 503 {
			// Amazon's Java client's holdLockOnServiceUnavailable: assume the
			// lock is still ours and extend the lease locally. Unsafe; see
			// the option's documentation.
			l.renewedLocally(c.now())
			l.log(slog.LevelWarn, "heartbeat got 503, keeping the lease locally", slogErr(err))
			return nil
		}
		if background && invalidRequest(err) {
			// Refused as invalid: the scheduler's retries would send the
			// same request until the lease ran out, and report that as
			// DynamoDB unreachable.
			l.log(slog.LevelWarn, "heartbeat refused", slogErr(err))
			return l.lose(ErrHeartbeatRefused, err)
		}
		if l.lapsed(c.now()) {
			// The lease ran out while this beat was on its way (a
			// scheduled beat's context ends there). The lock is lost
			// now, before its next write (a release waiting for the
			// turn) looks, not when the scheduler hears of this beat:
			// else that write saw the loss or not by which goroutine the
			// Go scheduler ran first. Without err: the loss reads the
			// same whether this beat or the scheduler records it (the
			// log keeps err).
			l.log(slog.LevelWarn, "heartbeat failed as the lease ran out", slogErr(err))
			return l.lose(ErrLeaseExpired, nil)
		}
		l.log(slog.LevelWarn, "heartbeat failed", slogErr(err))
		return err
	}
}

// heartbeatInput builds w's write. Called with l.mu held, before w joins
// the renewal state.
func (c *Client) heartbeatInput(l *Lock, w *renewal) *dynamodb.UpdateItemInput {
	return l.shapeOf().renewal(c, l, w)
}

// changesData reports whether w sets or removes the lock's data.
func (w *renewal) changesData() bool { return w.opts.changesData() }

// changesData reports whether a heartbeat with o sets or removes the
// lock's data.
func (o *sendHeartbeatOptions) changesData() bool { return o.data != nil || o.deleteData }

// conditionLocked holds while the item is still this acquisition's: same
// owner, not released, and an RVN this holder wrote that nothing replaced
// since (its rvn, a write that may have landed, or extra). Requiring these
// exact RVNs keeps every renewal in one line, so an RVN can never come back
// after another replaced it (an observer relies on that).
//
// DynamoDB refuses an IN with more than maxINOperands operands, so at most
// the newest maxINOperands-2 writes in doubt are named (room for the
// current RVN and extra); guarded refreshes stop well before that (see
// maxRefreshesInDoubt). Naming fewer RVNs than the item may carry is safe:
// the condition can only fail where it would have held, and the item that
// comes back with the failure is then recognised as this acquisition's
// (followMovedRVN) and the write sent again.
func (l *Lock) conditionLocked(b *lockitem.Expr, extra string) string {
	in := b.Value(":cur", lockitem.S(l.rvn))
	seen := extra == l.rvn
	maybe := l.renewal.maybe
	maybe = maybe[max(0, len(maybe)-(maxINOperands-2)):]
	for i, m := range maybe {
		in += ", " + b.Value(":m"+strconv.Itoa(i), lockitem.S(m.rvn))
		seen = seen || m.rvn == extra
	}
	if extra != "" && !seen {
		in += ", " + b.Value(":v", lockitem.S(extra))
	}
	return l.shapeOf().beatCondition(b, l, in)
}

func ownerCondition(b *lockitem.Expr, owner string) string {
	return b.Name("#o", lockitem.OwnerName) + " = " + b.Value(":o", lockitem.S(owner)) +
		" AND attribute_not_exists(" + b.Name("#r", lockitem.IsReleased) + ")"
}

// renewed records that w landed; item is what it returned (ReturnValues
// ALL_NEW, while a write that changes the data is in doubt), or nil. The
// lease counts from w's first send, so
// the holder never believes it lasts longer than an observer of w's RVN
// does, and no longer than any write built after w (which may still land)
// allows. A write older than one already recorded changes nothing. A
// success that comes after the lease ran out by this host's clock does not
// revive the lock: readers have been told it is lost.
func (l *Lock) renewed(w *renewal, item map[string]types.AttributeValue) error {
	now := l.now()
	l.mu.Lock()
	if err := l.reasonLocked(); err != nil {
		l.mu.Unlock()
		return err
	}
	if !now.Before(l.leaseEnd) {
		l.mu.Unlock()
		return l.lose(ErrLeaseExpired, nil)
	}
	if r := &l.renewal; w.seq > r.applied {
		r.applied = w.seq
		l.rvn = w.rvn
		l.sentAt = w.sent
		l.leaseDuration = w.lease
		l.leaseEnd = w.sent.Add(w.lease)
		// Writes built before w can no longer land (their conditions name
		// none of the RVNs w wrote or replaced); those built after it can.
		later := r.maybe[:0]
		for _, m := range r.maybe {
			if m.seq > w.seq {
				later = append(later, m)
				l.leaseEnd = earliest(l.leaseEnd, m.end)
			}
		}
		clear(r.maybe[len(later):])
		r.maybe = later
		if len(later) == 0 {
			r.maybe = nil // most locks have no write in doubt: keep no array
		}
		if r.pending != nil && r.pending.seq <= w.seq {
			r.pending = nil
		}
	}
	// The data is what the newest write that landed and that knows it left
	// (one that sets or removes it, or reads it back), even when a later
	// renewal that leaves the data alone (a guarded refresh) was answered
	// first: w landed before it then, and the data is still w's. A write
	// that sets the data has the rare state (dataDoubt), and so does one
	// that reads it back.
	if rare := l.rare; rare != nil && (w.changesData() || item != nil) && w.seq > rare.dataSeq {
		switch {
		case w.opts.deleteData:
			l.setDataLocked(nil)
		case w.opts.data != nil:
			l.setDataLocked(w.opts.data)
		default:
			var data []byte
			if d, ok := item[lockitem.Data].(*types.AttributeValueMemberB); ok {
				data = d.Value
			}
			l.setDataLocked(data)
		}
		rare.dataSeq = w.seq
		// Writes built before w can no longer land: a doubt they left is
		// settled once the data after w is known.
		if rare.dataDoubt <= w.seq {
			rare.dataDoubt = 0
		}
	}
	l.mu.Unlock()
	l.client.sched.notify(l)
	return nil
}

// undoLanded takes back what w renewed after l had ended here, if the
// item still carries w's RVN (a reader's entry, w's beat): the item is
// released, or the reader's entry removed. Best effort, in one bounded
// wait even when ctx has ended. Only this acquisition's item (its fencing
// token): w cannot have landed on a later acquisition's (see
// heartbeatInput), and one another tool rewrote is its holder's (see
// undoInput); a reader's entry id is never reused.
func (c *Client) undoLanded(ctx context.Context, l *Lock, w *renewal) {
	cctx, cancel := c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
	defer cancel()
	_, err := c.updateItem(cctx, c.takeBackInput(l, w.rvn))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		l.log(slog.LevelWarn, "a heartbeat landed after the lock was lost and could not be taken back; the item expires after its lease", slogErr(err))
	}
}

// renewedLocally counts the lease anew from now without a write that
// landed (WithHoldLockOnServiceUnavailable, on a 503): sentAt becomes now,
// as if a renewal had been sent then.
func (l *Lock) renewedLocally(now time.Time) {
	l.mu.Lock()
	if l.reasonLocked() == nil {
		l.sentAt = now
		l.leaseEnd = now.Add(l.leaseDuration)
	}
	l.mu.Unlock()
	l.client.sched.notify(l)
}

// followMovedRVN looks at the item a failed conditional write returned. If
// it is still this acquisition (same owner and fencing token, not released)
// its RVN was moved by this holder's own guarded refresh: the lock takes
// that RVN and the write can be sent again. Fencing tokens never repeat on a
// key (see acquireInput), so owner and token identify one acquisition.
// The lease this holder believes in is not extended: the refresh's own
// callback does that when it hears of its success.
func (l *Lock) followMovedRVN(item map[string]types.AttributeValue) bool {
	rec, ok := l.ownItem(item)
	if !ok || rec.Released {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.reasonLocked() != nil {
		return false
	}
	l.rvn = rec.RVN
	// Outstanding writes were conditioned on RVNs the item no longer has,
	// and can no longer land.
	r := &l.renewal
	r.applied, r.maybe, r.pending = r.built, nil, nil
	return true
}

// ownItem decodes item and reports whether it is this acquisition's: same
// owner and fencing token (released or not).
func (l *Lock) ownItem(item map[string]types.AttributeValue) (*lockRecord, bool) {
	if len(item) == 0 {
		return nil, false
	}
	return l.shapeOf().own(l, item)
}

// maxRVNFollows bounds how often one write follows an RVN that this holder's
// own guarded refreshes keep moving, before it gives up.
const maxRVNFollows = 8

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
