package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// WithSession makes the client hold every lock it acquires (plain, [Client.Do],
// [Client.AcquireLocks], semaphores, elections, read/write locks, fair or
// not) through one session: one item, renewed once per heartbeat period,
// instead of a heartbeat per lock. A held lock then costs no write to keep.
// When the session ends (its lease runs out unrenewed, another client ended
// it after judging it dead, or [Client.Close] ended it), every lock of it
// ends: its [Lock.Done] closes and [Lock.Err] says why ([ErrLockLost], or
// [ErrLockAlreadyReleased] after Close). [Client.Session] returns the
// session. The protocol and its costs are in docs/SESSIONS.md.
//
// A session's lease is the client's [WithLeaseDuration], renewed every
// [WithHeartbeatPeriod]: heartbeats cannot be disabled. Locks of a session
// have no lease of their own: [WithLockLease] and [WithSessionMonitor] are
// refused. Every client of this library judges a lock held by a session by
// its session; dynamolock v2 and earlier versions of this library see a
// lease they cannot outwait, so they never take it (not even once the
// session is dead: release locks one by one before Close where such
// clients share the keys).
func WithSession() ClientOption {
	return func(c *Client) { c.cfg.session = true }
}

// sessionKeyPrefix starts the key of every session item: the rest is the
// session's id, a random UUID.
const sessionKeyPrefix = "dynamolock-session:"

// sessionSortKey is a session item's sort key value, on a table with a
// sort key: the same for every client, so any of them can read the item a
// lock names by its partition key alone.
const sessionSortKey = "dynamolock-session"

// sessionLeaseText is the leaseDuration of a lock item held by a session:
// the longest Go duration, which no client outwaits (a client of this
// library judges the lock by its session instead).
var sessionLeaseText = time.Duration(1<<63 - 1).String()

// Session is a client's session ([WithSession]): the lease that holds
// every lock the client acquires. Its methods are safe for concurrent use.
type Session struct {
	c    *Client
	key  string // the session item's partition key
	lock *Lock  // the session item, held and renewed by the client

	mu    sync.Mutex
	locks map[*Lock]struct{} // the locks held under it that have not ended
	ended bool               // its lock ended: every lock of it has been ended
}

// ID returns the session's id: its item's key.
func (s *Session) ID() string { return s.key }

// Done returns a channel closed when the session ends: its lease ran out
// unrenewed, another client ended it, or the client was closed. Every lock
// of it has ended by then, or ends at once.
func (s *Session) Done() <-chan struct{} { return s.lock.Done() }

// Err returns nil while the session lives, [ErrLockAlreadyReleased] after
// the client ended it (Close), and a *[LockLostError] (matching
// [ErrLockLost]) after it was lost.
func (s *Session) Err() error { return s.lock.Err() }

// Expiration returns when the session's lease ends by this host's clock
// unless a heartbeat renews it: the end of every lock of it.
func (s *Session) Expiration() time.Time { return s.lock.Expiration() }

// Lease returns the session's lease.
func (s *Session) Lease() time.Duration { return s.lock.LeaseDuration() }

// Session returns the client's session, starting one (one UpdateItem) when
// it has none or the last one ended. It returns an *[InvalidArgumentError]
// for a client made without [WithSession].
func (c *Client) Session(ctx context.Context) (*Session, error) {
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	if !c.cfg.session {
		return nil, invalid("Session", "", "needs a client made with WithSession")
	}
	return c.sessions.current(ctx, c)
}

// sessions is a client's current session, and the start of a new one.
type sessions struct {
	mu       sync.Mutex
	cur      *Session
	starting *sessionStart // the start in progress; nil when none
	started  int           // sessions started so far: names the next one's draw
}

// sessionStart is a session being started: done is closed once s or err
// is set.
type sessionStart struct {
	done chan struct{}
	s    *Session
	err  error
}

// current returns the live session, starting one if needed: one start at a
// time, which every caller waits for within its ctx. The start runs in a
// goroutine of its own (Client.background, which Close waits for), not in
// the caller's: it is bounded apart from the caller's ctx, and what it
// draws (the session's id, its item's record version number) does not
// depend on which caller came first (the simulation replays a seed
// exactly).
func (ss *sessions) current(ctx context.Context, c *Client) (*Session, error) {
	for {
		ss.mu.Lock()
		if s := ss.cur; s != nil && s.lock.held() {
			ss.mu.Unlock()
			return s, nil
		}
		st := ss.starting
		if st == nil {
			st = &sessionStart{done: make(chan struct{})}
			ss.starting = st
			ss.started++
			n := ss.started
			ss.mu.Unlock()
			traced := withSpanOf(ctx) // the span of the call that starts it
			c.background(func(ctx context.Context) {
				// No use once Close has begun: it ends with it.
				ctx, cancel := c.closingContext(traced(ctx))
				defer cancel()
				ss.start(ctx, c, st, n)
			})
		} else {
			ss.mu.Unlock()
		}
		select {
		case <-st.done:
			if st.err != nil {
				if closedNow(c.closing) {
					// Close ended the start: say so, whichever of the two
					// this select saw first (one seed, one run).
					return nil, errSessionStartClosed()
				}
				return nil, st.err
			}
			// Started: loop, in case it has ended already.
		case <-ctx.Done():
			if closedNow(c.closing) {
				// Both at once: a closed client wins, as in every wait of
				// the client (see Client.sleep), whichever of the two this
				// select saw first (one seed, one run).
				return nil, errSessionStartClosed()
			}
			return nil, notGranted(ctx.Err(), "session: context done while waiting for the session to start")
		case <-c.closing:
			return nil, errSessionStartClosed()
		}
	}
}

// errSessionStartClosed is the error of a call whose wait for the
// session's start ended because Close began.
func errSessionStartClosed() error {
	return notGranted(ErrClientClosed, "session: the client was closed while this call waited for the session to start")
}

// closedNow reports whether ch is closed.
func closedNow(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// liveKey is the key of the client's live session, "" when it has none.
func (ss *sessions) liveKey() string {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if s := ss.cur; s != nil && s.lock.held() {
		return s.key
	}
	return ""
}

// start starts session number n, within ctx (undoTimeout: a session's
// item is a fresh key, taken by one write).
func (ss *sessions) start(ctx context.Context, c *Client, st *sessionStart, n int) {
	s, err := c.startSession(ctx, n)
	ss.mu.Lock()
	if err == nil {
		ss.cur = s
	}
	ss.starting = nil
	ss.mu.Unlock()
	st.s, st.err = s, err
	close(st.done)
}

// startSession acquires a new session item, renewed by the client's
// heartbeat scheduler like any lock.
func (c *Client) startSession(ctx context.Context, n int) (*Session, error) {
	o, err := c.acquireOptions(nil, true)
	if err != nil {
		return nil, err
	}
	o.sortKey = c.sessionSortKey()
	// Its key is drawn fresh for every session and never used again:
	// Close deletes the item rather than leave one released item behind
	// per session started, for ever. A client judging the session reads
	// an absent item as ended, as a released one.
	o.deleteLockOnRelease = true
	// The draw names the client and the session's number: see current.
	key := sessionKeyPrefix + newUUID(c.cfg.ownerName, "session "+strconv.Itoa(n))
	a := c.newAcquisition(modeOne, o, []string{key}, "session "+quoteKey(key))
	a.leases = sessionItem{} // its client's session cannot hold its own item
	locks, err := a.admitThenRun(ctx)
	if err != nil {
		return nil, err
	}
	s := &Session{c: c, key: key, lock: locks[0], locks: make(map[*Lock]struct{})}
	s.lock.mu.Lock()
	s.lock.rareLocked().source = sessionOwnItem{s: s}
	ended := s.lock.reasonLocked() != nil
	s.lock.mu.Unlock()
	if ended {
		// It ended before it could be marked as a session's: end it now.
		s.end(s.lock.ended())
	}
	s.lock.log(slog.LevelInfo, "session started")
	return s, nil
}

// sessionSortKey is the sort key value of the client's session items: nil
// on a table without a sort key.
func (c *Client) sessionSortKey() *string {
	if c.cfg.sortKeyName == "" {
		return nil
	}
	sk := sessionSortKey
	return &sk
}

// add records l, just registered, as held under s. It reports false when s
// has ended: l must end too.
func (s *Session) add(l *Lock) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ended {
		return false
	}
	s.locks[l] = struct{}{}
	return true
}

// remove forgets l, which ended.
func (s *Session) remove(l *Lock) {
	s.mu.Lock()
	delete(s.locks, l)
	s.mu.Unlock()
}

// end ends every lock of s, once its own lock ended with reason: released
// with it (Close) when it was released, lost with its cause otherwise.
func (s *Session) end(reason error) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	s.ended = true
	locks := make([]*Lock, 0, len(s.locks))
	for l := range s.locks {
		locks = append(locks, l)
	}
	clear(s.locks)
	s.mu.Unlock()
	var lost *LockLostError
	errors.As(reason, &lost)
	for _, l := range locks {
		switch {
		case lost == nil:
			l.end(nil) // the session item's release freed every lock of it
		default:
			_ = l.lose(lost.Cause, lost)
		}
	}
}

// A session is the lease source of the locks it holds (lockLease).

func (s *Session) session() *Session { return s }

func (s *Session) itemOf() *Session { return nil }

// sessionOwnItem is what a session's own item's lock records in
// rare.source: the session whose item it is, which Lock.end ends with it
// (read under mu). The lock is not shaped: leaseOf reads ownLease for it,
// as it renews its own lease.
type sessionOwnItem struct {
	ownLease
	s *Session
}

func (o sessionOwnItem) itemOf() *Session { return o.s }

// expirySets: a session's lock has no stored expiry, nor a TTL
// (acquireWrite).
func (s *Session) expirySets(*Client, *lockitem.Expr, *renewal) string { return "" }

// releaseRemoves: a released item names no session; a session's lock has
// no stored expiry.
func (s *Session) releaseRemoves(_ *Client, b *lockitem.Expr) string {
	return " REMOVE " + b.Name("#s", lockitem.Session)
}
