package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// How any client of this library, with or without WithSession, judges a
// lock item that names a session (docs/SESSIONS.md): by the session item,
// with the rule every lock uses (its record version number seen unchanged
// for a full lease on this client's clock), and by the end mark.

// sessionState is what a client knows of a session that holds a lock.
type sessionState struct {
	key    string
	rvn    string        // the session item's record version number
	seen   time.Time     // when this client first saw rvn in it
	lease  time.Duration // the session's lease
	ended  bool          // released (its holder's Close, or an end mark) or gone: for ever
	readAt time.Time     // when the item was last read
}

// deadAt is when s counts as dead unless it renews: a lease after rvn was
// first seen; now when it has ended.
func (s sessionState) deadAt(now time.Time) time.Time {
	if s.ended {
		return now
	}
	return s.seen.Add(s.lease)
}

// sessionJudge holds what a client has seen of the sessions that hold the
// locks it looked at, shared by its acquisitions (as here.observe is), so
// that each session item is read at most once per refresh period by the
// client, its end mark written at most once, and a session judged dead or
// seen ended is so for every acquisition at once. One read or end mark of
// a session at a time (turn): the acquisitions that wait for it use its
// answer. Bounded: when full, an arbitrary entry is dropped (that only
// delays a judgment).
type sessionJudge struct {
	mu   sync.Mutex
	m    map[string]*sessionState
	busy map[string]*turnQueue // a read or end mark of the session in flight, and who waits for the turn
}

// turnQueue is the acquisitions waiting for the turn of one session, in
// the order they came: the turn passes to the first (its channel is
// closed), never to whichever goroutine the Go scheduler runs first, so
// that a seed of the simulation replays exactly.
type turnQueue struct {
	waiters []chan struct{}
}

// turn waits until no read or end mark of session key is in flight in
// this client, or ctx ends, and takes the turn; the function it returns
// gives it back (to the acquisition that waited longest, if any). A ctx
// whose deadline passes at the instant the turn comes ends the wait, as
// Client.sleep decides such ties.
func (j *sessionJudge) turn(ctx context.Context, key string) (func(), error) {
	j.mu.Lock()
	q, busy := j.busy[key]
	if !busy {
		if j.busy == nil {
			j.busy = make(map[string]*turnQueue)
		}
		j.busy[key] = &turnQueue{}
		j.mu.Unlock()
		return func() { j.passTurn(key) }, nil
	}
	ch := make(chan struct{})
	q.waiters = append(q.waiters, ch)
	j.mu.Unlock()
	select {
	case <-ch:
	case <-ctx.Done():
	}
	if ctx.Err() == nil && !deadlinePassed(ctx) {
		return func() { j.passTurn(key) }, nil // ch was closed: the turn is this call's
	}
	j.mu.Lock()
	select {
	case <-ch:
		// Handed the turn as ctx ended: pass it on.
		j.mu.Unlock()
		j.passTurn(key)
	default:
		q.waiters = slices.DeleteFunc(q.waiters, func(w chan struct{}) bool { return w == ch })
		j.mu.Unlock()
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, context.DeadlineExceeded
}

// passTurn gives the turn of session key to the acquisition that waited
// longest for it, or frees it.
func (j *sessionJudge) passTurn(key string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	q := j.busy[key]
	if len(q.waiters) == 0 {
		delete(j.busy, key)
		return
	}
	next := q.waiters[0]
	q.waiters = q.waiters[1:]
	close(next)
}

// knownSession returns what is known of session key when it is ended, or was read
// within maxAge.
func (c *Client) knownSession(key string, maxAge time.Duration) (sessionState, bool) {
	j := &c.observed
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.m[key]
	if !ok || !st.ended && c.since(st.readAt) >= maxAge {
		return sessionState{}, false
	}
	return *st, true
}

// sessionState returns what is known of session key, reading its item (one
// consistent GetItem) when the last read is older than maxAge.
func (c *Client) sessionState(ctx context.Context, key string, maxAge time.Duration) (sessionState, error) {
	if st, ok := c.knownSession(key, maxAge); ok {
		return st, nil
	}
	done, err := c.observed.turn(ctx, key)
	if err != nil {
		return sessionState{}, err
	}
	defer done()
	if st, ok := c.knownSession(key, maxAge); ok {
		return st, nil // read by the acquisition whose turn this one waited for
	}
	item, err := c.getItem(ctx, c.itemKeyOf(key, c.sessionSortKey()))
	if err != nil {
		return sessionState{}, err
	}
	return c.learnSession(key, item)
}

// learnSession records what item, the session item of key as just read or
// returned by a failed condition, shows.
func (c *Client) learnSession(key string, item map[string]types.AttributeValue) (sessionState, error) {
	now := c.now()
	next := sessionState{key: key, readAt: now, ended: len(item) == 0}
	if !next.ended {
		rec, err := c.cfg.schema.decodeItem(item)
		if err != nil {
			return sessionState{}, fmt.Errorf("the item of session %q: %w", key, err)
		}
		next.rvn, next.lease, next.ended = rec.RVN, rec.Lease, rec.Released
	}
	j := &c.observed
	j.mu.Lock()
	defer j.mu.Unlock()
	if old, ok := j.m[key]; ok {
		if old.ended {
			return *old, nil // an end is for ever: a late answer does not undo it
		}
		if old.rvn == next.rvn {
			next.seen = old.seen
		}
	}
	if next.seen.IsZero() {
		next.seen = now
	}
	if j.m == nil {
		j.m = make(map[string]*sessionState)
	}
	if _, ok := j.m[key]; !ok && len(j.m) >= c.cfg.maxObservations {
		for k := range j.m {
			delete(j.m, k)
			break
		}
	}
	j.m[key] = &next
	return next, nil
}

// endSession writes the end mark of session s, judged dead: its item is
// marked released, on condition that it still carries the record version
// number judged dead and is not released yet. It reports whether the
// session has ended (by this write, or before it); false when it renewed
// since (what is known of it is then updated).
func (c *Client) endSession(ctx context.Context, s sessionState) (bool, error) {
	done, err := c.observed.turn(ctx, s.key)
	if err != nil {
		return false, err
	}
	defer done()
	if st, ok := c.knownSession(s.key, forever); ok && (st.ended || st.rvn != s.rvn) {
		// Ended by the acquisition whose turn this one waited for, or seen
		// renewed since it was judged dead.
		return st.ended, nil
	}
	b := lockitem.NewExpr()
	update := "SET " + b.Name("#r", lockitem.IsReleased) + " = " + b.Value(":r", lockitem.S("1"))
	cond := b.Name("#v", lockitem.RVN) + " = " + b.Value(":v", lockitem.S(s.rvn)) + " AND attribute_not_exists(#r)"
	key := c.itemKeyOf(s.key, c.sessionSortKey())
	_, err = c.updateItem(ctx, c.guardedUpdate(key, b, update, cond))
	var ccf *types.ConditionalCheckFailedException
	switch {
	case err == nil:
		c.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "ended a session judged dead", slogKey(s.key), slogRVN(s.rvn))
		st, err := c.learnSession(s.key, nil)
		return st.ended, err
	case errors.As(err, &ccf) && len(ccf.Item) > 0:
		st, err := c.learnSession(s.key, ccf.Item)
		return st.ended, err
	case errors.As(err, &ccf):
		// No item came back: there is none, or an emulator does not
		// return it. Read it.
		item, err := c.getItem(ctx, key)
		if err != nil {
			return false, err
		}
		st, err := c.learnSession(s.key, item)
		return st.ended, err
	}
	return false, err
}

// learnSessions records in w's view the state of every session its item
// names (its holder's, and an RWLock's readers'), reading each item at most
// once per refresh period.
func (a *acquisition) learnSessions(ctx context.Context, w *watch) error {
	v := &w.v
	if v.bad != nil || v.absent {
		return nil
	}
	var keys []string
	if v.rec != nil && !v.rec.Released && v.rec.Session != "" {
		keys = append(keys, v.rec.Session)
	}
	keys = append(keys, v.readerSessions()...)
	for _, key := range keys {
		if _, ok := v.sessions[key]; ok {
			continue
		}
		st, err := a.c.sessionState(ctx, key, a.o.refreshPeriod)
		if err != nil {
			return err
		}
		if v.sessions == nil {
			v.sessions = make(map[string]sessionState, len(keys))
		}
		v.sessions[key] = st
	}
	return nil
}

// endSessions writes the end mark of every session d judged dead, before
// the write that takes what they held. It reports whether all of them have
// ended; when one renewed since, w's view is forgotten (decided anew).
func (a *acquisition) endSessions(ctx context.Context, w *watch, d decision) (bool, error) {
	for _, s := range d.endSessions {
		ended, err := a.c.endSession(ctx, s)
		if err != nil {
			w.forget()
			return false, a.failed(ctx, w, err)
		}
		if !ended {
			w.forget() // alive: read the item again
			return false, nil
		}
	}
	return true, nil
}
