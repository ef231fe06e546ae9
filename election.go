package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Errors of an [Election].
var (
	// ErrNotLeader is returned by [Election.Proclaim] when the Election does
	// not lead: it never won, it resigned, or its leadership was lost.
	ErrNotLeader = errors.New("dynamolock: not the leader")

	// ErrNoLeader is returned by [Election.Leader] when nobody leads: the
	// election's item does not exist or was released.
	ErrNoLeader = errors.New("dynamolock: no leader")
)

// Election is a leader election among the clients that campaign under one
// name: the leader is the holder of the lock on that name, and its value is
// the lock's data. It is built on [Client.AcquireLockWithContext] and costs
// what that costs (see each method). It is safe for concurrent use.
//
// Leadership is a lease like any lock: a leader paused longer than the lease
// can wake up after another candidate took over. Watch the [Lock] returned
// by [Election.Campaign] and fence the leader's writes with its
// [Lock.FencingToken] or [Lock.TransactionCondition].
type Election struct {
	c    *Client
	name string

	mu   sync.Mutex
	lock *Lock // the leadership this Election won last; nil before or after Resign
}

// Leader is the state of an election as read from its item.
type Leader struct {
	Owner        string // the leader's owner name ([Client.OwnerName])
	Value        []byte // the value it campaigned with or proclaimed last
	FencingToken uint64 // the fencing token of its leadership; it changes with every new term
}

func (l Leader) equal(o Leader) bool {
	return l.Owner == o.Owner && l.FencingToken == o.FencingToken && bytes.Equal(l.Value, o.Value)
}

// NewElection returns the election held under the lock key name. Every
// candidate and observer of one election uses the same name (and table).
// It makes no DynamoDB call; a bad name is reported by the first method
// that uses it.
func (c *Client) NewElection(name string) *Election {
	return &Election{c: c, name: name}
}

// Campaign blocks until this client leads, then returns the leadership as a
// held [*Lock]: the client renews it with heartbeats; its [Lock.Done] closes
// and [Lock.Err] says why when leadership ends (resigned, taken over after a
// pause, lease ran out). value becomes the leader's value, replacing the
// previous leader's (nil: no value).
//
// A candidate keeps campaigning across any number of the leader's leases:
// it gives up only when ctx ends (the error then matches ctx.Err() and
// *[LockNotGrantedError]), when the client is closed, or on an error that
// retrying cannot cure. It polls the item with one consistent GetItem every
// [DefaultRefreshPeriod] (minus a small jitter), so it wins within one
// refresh period of the leader's resignation, and within the leader's lease
// plus one refresh period of the leader's last heartbeat when the leader
// died. Cost: one UpdateItem when nobody leads; otherwise one UpdateItem,
// a GetItem per refresh period and one UpdateItem to win.
//
// Called while this Election already leads, Campaign proclaims value (see
// [Election.Proclaim]) and returns the same lock.
func (e *Election) Campaign(ctx context.Context, value []byte) (*Lock, error) {
	if l := e.current(); l != nil && l.Err() == nil {
		if err := e.Proclaim(ctx, value); err != nil {
			return nil, err
		}
		return l, nil
	}
	opts := []AcquireLockOption{WithData(value), ReplaceData()}
	for {
		l, err := e.c.acquireKey(ctx, e.name, opts, true)
		if err == nil {
			e.mu.Lock()
			e.lock = l
			e.mu.Unlock()
			return l, nil
		}
		var te *TimeoutError
		if !errors.As(err, &te) || ctx.Err() != nil {
			return nil, err
		}
	}
}

func (e *Election) current() *Lock {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lock
}

// Proclaim replaces the leader's value without a new election: one
// UpdateItem, the same conditional write as a heartbeat (it renews the
// lease too). nil removes the value. It returns an error matching
// [ErrNotLeader] when this Election does not lead, or lost its leadership
// in this very write (then the error matches [ErrLockLost] too).
func (e *Election) Proclaim(ctx context.Context, value []byte) error {
	l := e.current()
	if l == nil {
		return ErrNotLeader
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	opt := ReplaceHeartbeatData(value)
	if value == nil {
		opt = DeleteData()
	}
	err := e.c.SendHeartbeatWithContext(ctx, l, opt)
	if errors.Is(err, ErrLockLost) || errors.Is(err, ErrLockAlreadyReleased) {
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	return err
}

// Resign gives up leadership: one conditional UpdateItem marks the item
// released, so a waiting candidate wins at its next poll. It returns nil
// when this Election does not lead (it never won, resigned already, or its
// leadership was lost: the lock from Campaign tells which). On any other
// error the leadership is kept and Resign can be retried.
func (e *Election) Resign(ctx context.Context) error {
	e.mu.Lock()
	l := e.lock
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	_, err := e.c.ReleaseLockWithContext(ctx, l)
	if err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrLockAlreadyReleased) {
		return err
	}
	e.mu.Lock()
	if e.lock == l {
		e.lock = nil
	}
	e.mu.Unlock()
	return nil
}

// Leader reads the current leader: with one consistent GetItem, or with no
// call when this client leads. It returns [ErrNoLeader] when nobody leads.
// A leader that died is still reported until a candidate takes over, one
// lease after its last heartbeat: one read cannot tell a dead leader from a
// live one.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	l, err := e.c.GetWithContext(ctx, e.name)
	if err != nil {
		return Leader{}, err
	}
	if l.OwnerName() == "" || l.IsReleased() {
		return Leader{}, ErrNoLeader
	}
	return Leader{Owner: l.OwnerName(), Value: bytes.Clone(l.Data()), FencingToken: l.FencingToken()}, nil
}

// Observe returns a channel that delivers the current leader, then every
// change of leader or value, in order. It polls with [Election.Leader]
// every [DefaultRefreshPeriod] (1s): one consistent GetItem per poll, none
// while this client leads. So it sees each state that lasts at least one
// poll; changes that come and go between two polls are seen as one. Periods
// without a leader are not delivered: the next leader is. Failed reads are
// retried at the next poll.
//
// The channel is unbuffered and polling pauses until each state is
// received, so a receiver that falls behind gets no backlog: after a slow
// receive, the next poll delivers whatever is current then. It is closed, and its goroutine
// ends, when ctx ends, when the client is closed, or at once when the name
// is not a valid key.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	go func() {
		defer close(ch)
		var last Leader
		have := false
		t := time.NewTimer(0)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-e.c.closing:
				return
			case <-t.C:
			}
			ld, err := e.Leader(ctx)
			if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClientClosed) {
				return
			}
			if err == nil && (!have || !ld.equal(last)) {
				select {
				case ch <- ld:
					last, have = ld, true
				case <-ctx.Done():
					return
				case <-e.c.closing:
					return
				}
			}
			t.Reset(DefaultRefreshPeriod)
		}
	}()
	return ch
}
