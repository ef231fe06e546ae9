package dynamolock

// Lease sources: where a lock's lease comes from. A lock renews its own
// (ownLease), or its client's session holds it (WithSession: the lock's
// source is its *Session, renewed by one write per heartbeat period for
// all of its locks; docs/SESSIONS.md). Any item shape can hold under
// either: the engine asks the source, never which one it is.

import (
	"context"
	"errors"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// leaseSource is where an acquisition's locks get their lease: their own,
// renewed lock by lock, or their client's session (WithSession).
type leaseSource interface {
	// lease is the session (nil: its own) and the lease of a write sent at
	// sent, starting the session if needed.
	lease(ctx context.Context, a *acquisition, sent time.Time) (*Session, time.Duration, error)
	// renewsEach reports whether each lock renews its own lease: admission
	// then counts it.
	renewsEach() bool
	// rvn draws the RVN of an acquiring write of key.
	rvn(key string) string
}

// lockLease is a held lock's lease source.
type lockLease interface {
	// session is the session that holds the lock, or nil.
	session() *Session
	// expirySets is what a renewal w of the lock writes of its stored
	// expiry (see expirySets).
	expirySets(c *Client, b *lockitem.Expr, w *renewal) string
	// releaseRemoves is what the release of a holder's slot removes.
	releaseRemoves(c *Client, b *lockitem.Expr) string
	// itemOf is the session whose own item the lock is, or nil.
	itemOf() *Session
}

// ownLease: the lock renews its own lease; an acquisition under it writes
// the lease it asked for.
type ownLease struct{}

func (ownLease) session() *Session { return nil }

func (ownLease) itemOf() *Session { return nil }

func (ownLease) expirySets(c *Client, b *lockitem.Expr, w *renewal) string {
	return c.expirySets(b, w.sent, w.lease, w.rvn)
}

func (ownLease) releaseRemoves(c *Client, b *lockitem.Expr) string {
	if c.cfg.clockSkewBound > 0 {
		// The stored expiry this holder's writes kept goes: no later
		// reader trusts it. Without WithClockSkewBound there is none to
		// remove: the acquiring write removed any (acquireWrite) and
		// nothing of this lock wrote one since; and the REMOVE of absent
		// attributes cost DynamoDB Local 25-30 µs a release (about 3 %,
		// measured beside the release as it was, 2026-12-02).
		return " REMOVE " + expiryAttrs(b)
	}
	return ""
}

func (ownLease) lease(_ context.Context, a *acquisition, _ time.Time) (*Session, time.Duration, error) {
	return nil, a.o.lease, nil
}

func (ownLease) renewsEach() bool { return true }

func (ownLease) rvn(string) string { return newRVN() }

// sessionItem is the lease source of a session's own item: its own lease,
// and an RVN drawn as the session's key is (sessions.current).
type sessionItem struct{ ownLease }

func (sessionItem) rvn(key string) string { return newUUID(key, "") }

// clientSession: the acquisition's locks are held by its client's current
// session, started if needed.
type clientSession struct{}

func (clientSession) lease(ctx context.Context, a *acquisition, sent time.Time) (*Session, time.Duration, error) {
	s, err := a.c.sessions.current(ctx, a.c)
	if err != nil {
		// The start's cause (an outage, the client's Close) decides, as
		// for a write of this call: see failed.
		var lng *LockNotGrantedError
		if errors.As(err, &lng) && lng.Unwrap() != nil && ctx.Err() == nil {
			err = lng.Unwrap()
		}
		return nil, 0, err
	}
	// Claimed and held for no longer than the session's lease as it is
	// now: its renewals extend the lock's with it.
	return s, s.Expiration().Sub(sent), nil
}

// renewsEach: a session's locks need no renewal of their own.
func (clientSession) renewsEach() bool { return false }

func (clientSession) rvn(string) string { return newRVN() }

// leaseOf is l's lease source.
func (l *Lock) leaseOf() lockLease {
	if !l.shaped || l.rare.source == nil {
		return ownLease{}
	}
	return l.rare.source
}

// heldBy returns the session that holds l, or nil.
func (l *Lock) heldBy() *Session { return l.leaseOf().session() }
