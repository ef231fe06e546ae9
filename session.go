package dynamolock

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
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
	starting chan struct{} // closed when the start in progress ends; nil when none
}

// current returns the live session, starting one if needed: one start at a
// time, the others waiting for it within their ctx.
func (ss *sessions) current(ctx context.Context, c *Client) (*Session, error) {
	for {
		ss.mu.Lock()
		if s := ss.cur; s != nil && s.lock.held() {
			ss.mu.Unlock()
			return s, nil
		}
		if ch := ss.starting; ch != nil {
			ss.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, notGranted(ctx.Err(), "session: context done while waiting for the session to start")
			}
		}
		ch := make(chan struct{})
		ss.starting = ch
		ss.mu.Unlock()
		s, err := c.startSession(ctx)
		ss.mu.Lock()
		if err == nil {
			ss.cur = s
		}
		ss.starting = nil
		close(ch)
		ss.mu.Unlock()
		if err != nil {
			return nil, err
		}
		return s, nil
	}
}

// startSession acquires a new session item, renewed by the client's
// heartbeat scheduler like any lock.
func (c *Client) startSession(ctx context.Context) (*Session, error) {
	o, err := c.acquireOptions(nil, true)
	if err != nil {
		return nil, err
	}
	o.sortKey = c.sessionSortKey()
	key := sessionKeyPrefix + newUUID("", "")
	a := c.newAcquisition(modeOne, o, []string{key}, "session "+quoteKey(key))
	a.noSession = true
	locks, err := a.admitThenRun(ctx)
	if err != nil {
		return nil, err
	}
	s := &Session{c: c, key: key, lock: locks[0], locks: make(map[*Lock]struct{})}
	s.lock.mu.Lock()
	s.lock.rareLocked().session = s
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

// heldBy returns the session a lock held by a session belongs to.
func (l *Lock) heldBy() *Session {
	if !l.bySession {
		return nil
	}
	return l.rare.session // set before the lock is published, never changed
}
