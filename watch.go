package dynamolock

import (
	"context"
	"slices"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/pacing"
)

// watch is what an acquisition knows of one of its keys: the item as last
// seen, the next step decided for it, its place in a fair queue, and what
// its waits need.
type watch struct {
	key     string
	sortKey *string
	regKey  string
	v       view
	next    decision
	dirty   bool       // v changed since next was decided
	fair    *fairState // WithFairness on this key; nil otherwise
	// firstLease is the lease of the first holder seen (0 before): it
	// sets the acquisition's deadline.
	firstLease time.Duration
	// endsBefore is the client's count of ended locks before the last
	// call on the key (see here, rule 3).
	endsBefore uint64
	skipped    string // the RVN for which sleep last skipped its wait
	hands      hands
	pace       pacing.Pace // the key's holders as this call saw them: the poll schedule (internal/pacing)
	out        bool        // a semaphore slot whose wait ended
	woken      bool        // the last sleep ended because a lock on the key ended here
	// handover: woken as the key's plain waiter by that hand-over (see
	// here.wake), 0 when not; the call's next write (or its end) settles
	// it.
	handover uint64
	// throttle is the back-off after DynamoDB throttled a call on the key
	// for its partition (or gave no reason): no read before
	// throttledUntil. It doubles with each such answer and shrinks by a
	// quarter with each read that goes through (see backOff).
	throttle       time.Duration
	throttledUntil time.Time
}

// Back-off of a throttled key's reads (watch.throttle): the first wait, and
// the longest, in refresh periods of at least a second.
const (
	throttleFirst = 100 * time.Millisecond
	throttleMost  = 4
)

// backOff records a call on w that DynamoDB throttled at limit at now: a
// hot key (or one DynamoDB gave no reason for) is read less often, at
// twice the last back-off (throttleFirst at first, throttleMost refresh
// periods at most), with up to a quarter more at random so that its
// waiters do not come back together.
func (w *watch) backOff(limit ThrottleLimit, refresh time.Duration, now time.Time) {
	if !limit.hotKey() {
		return
	}
	w.throttle = min(max(2*w.throttle, throttleFirst), throttleMost*max(refresh, time.Second))
	w.throttledUntil = now.Add(w.throttle + randomUpTo(w.throttle/4))
}

// throughput records a read of w that went through: the next back-off
// will be a quarter shorter (a key throttled for one read in three or more
// keeps backing off further). The reads themselves are back on schedule
// at once.
func (w *watch) throughput() {
	if w.throttle -= w.throttle / 4; w.throttle < throttleFirst/8 {
		w.throttle = 0
	}
}

// hands counts the times a key changed hands while an acquisition waited:
// a live holder other than the last one seen (another owner, or another
// acquisition of the same owner: a new fencing token).
type hands struct {
	seen    bool
	owner   string
	token   uint64
	changes int
}

func (h *hands) observe(rec *lockRecord) {
	if rec == nil || rec.Released {
		return
	}
	if h.seen && (h.owner != rec.Owner || h.token != rec.FencingToken) {
		h.changes++
	}
	h.seen, h.owner, h.token = true, rec.Owner, rec.FencingToken
}

// learn records what an answer showed of w's item: item as read or
// returned by a failed condition, or err when the call failed.
func (a *acquisition) learn(ctx context.Context, w *watch, item map[string]types.AttributeValue, err error) error {
	w.dirty = true
	if err != nil {
		return a.failed(ctx, w, err)
	}
	w.throughput()
	v := &w.v
	*v = view{known: true, raw: item, absent: len(item) == 0}
	now := a.c.now()
	if v.absent {
		w.pace.Observe(nil, now)
		return nil
	}
	if v.rec, v.bad = a.c.cfg.schema.decodeItem(item); v.bad == nil {
		w.pace.Observe(v.rec, now)
	}
	if v.bad == nil && !v.rec.Released {
		v.seen = a.c.here.observe(w.regKey, v.rec.RVN, now)
		if _, ours := a.attempts[v.rec.RVN]; !ours {
			w.hands.observe(v.rec)
		}
	}
	a.kind.learn(a, w, item, now)
	if err := a.learnSessions(ctx, w); err != nil {
		w.forget()
		return a.failed(ctx, w, err)
	}
	return nil
}

// forget marks w's item unknown after a call that may have changed it.
func (w *watch) forget() {
	w.v = view{}
	w.dirty = true
}

// read is the engine's one consistent read of a key's item.
func (a *acquisition) read(ctx context.Context, w *watch) (map[string]types.AttributeValue, error) {
	c := a.c
	c.here.noteCall(w)
	item, err := c.getItem(a.callBound(ctx), c.itemKeyOf(w.key, w.sortKey))
	if err != nil {
		return nil, err
	}
	if item == nil {
		return map[string]types.AttributeValue{}, nil
	}
	return item, nil
}

// noSameProcessHandover switches the same-process hand-over off (waiters
// here then poll like any other): only TestContentionCosts sets it, to
// measure what the hand-over is worth on a contended key.
var noSameProcessHandover bool

// sleep waits until the earliest read any key is due, or until a lock on
// a waited key ends here, and returns the keys due now.
//
// While a key's item is held by this client, or written by one of its
// acquisitions still waiting for the answer, a release or loss of that
// lock here ends the wait at once (same-process hand-over; of the plain
// waiters, only the one that watched longest: see here.wake). When the item
// names this client's owner but neither holds: if a lock ended here since
// the call that showed it, that may have been it, so that key is due at
// once; otherwise the holder is another client with the same owner name,
// polled as usual.
func (a *acquisition) sleep(ctx context.Context) ([]*watch, error) {
	c := a.c
	var notify chan struct{}
	type watched struct {
		w       *watch
		u       *wakeup
		unwatch func()
	}
	var chans []watched
	var wake time.Time
	var due []*watch
	for _, w := range a.watches {
		w.woken = false
		if w.out || w.next.step != stepRead {
			continue
		}
		if wake.IsZero() || w.next.at.Before(wake) {
			wake = w.next.at
		}
		if rec := w.v.rec; rec != nil && rec.Owner == c.cfg.ownerName && !noSameProcessHandover {
			if notify == nil {
				notify = make(chan struct{}, 1)
			}
			// Watch first (see here, rule 2).
			plain := a.kind.handsOverHere(a, w) && len(a.watches) == 1
			u, unwatch := c.here.watch(w.regKey, notify, plain)
			chans = append(chans, watched{w, u, unwatch})
			// The count is the client's, over every key: skip the wait
			// once per RVN at most, or a holder elsewhere with this owner
			// name would be polled without pause while this client's
			// other locks come and go.
			if !c.here.heldOrInFlight(w.regKey, rec.RVN) && c.here.endedSince(w) && w.skipped != rec.RVN {
				w.skipped = rec.RVN
				due = append(due, w)
			}
		}
	}
	// The watches end before their channels are read: a wake-up that
	// comes after the read would be lost (and, for a plain waiter, leave
	// its hand-over unsettled).
	woken := func() {
		for _, x := range chans {
			x.unwatch()
		}
		for _, x := range chans {
			select {
			case <-x.u.ch:
				x.w.woken, x.w.handover = true, x.u.handover
				if !slices.Contains(due, x.w) {
					due = append(due, x.w)
				}
			default:
			}
		}
	}
	if len(due) > 0 {
		woken()
		return due, nil
	}
	if wake.IsZero() {
		wake = a.c.now().Add(a.o.refreshPeriod) // no key waits for a read: not reached
	}
	err := c.pause(ctx, a.c.until(wake), notify, a.what) // nil when no key is watched: never ready
	// A wake-up that came with the end of ctx is still this call's: it
	// passes it on as it gives up (admitThenRun).
	woken()
	if err != nil {
		return nil, err
	}
	now := a.c.now()
	for _, w := range a.watches {
		if !w.out && w.next.step == stepRead && !w.woken && !now.Before(w.next.at) {
			due = append(due, w)
		}
	}
	return due, nil
}
