package dynamolock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
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
	// unsure: a Proclaim of this leadership may have landed without its
	// answer: the held lock's value may not be the item's, so Leader reads
	// the item until a Proclaim succeeds.
	unsure bool
	// observers are told (without blocking) of every change this Election
	// makes, so that Observe in this client delivers it without a poll.
	observers map[chan struct{}]struct{}
	// run is the state of Run (election_run.go).
	run runState
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
// retrying cannot cure. An outage is not one: once DynamoDB has answered
// the client, a candidate cut off from it keeps campaigning and can lead
// when the network heals; a client that DynamoDB never answered gets a
// *[ConnectionError] after a few seconds (a wrong endpoint is not waited
// for). It polls the item with one consistent GetItem every
// [DefaultRefreshPeriod] (minus a small jitter), so it wins within one
// refresh period of the leader's resignation, and within the leader's lease
// plus one refresh period of the leader's last heartbeat when the leader
// died. Cost: one UpdateItem when nobody leads; otherwise one UpdateItem,
// one to take a place in the key's queue (renewed every third of the
// lease), GetItems by rank in it (see [WithRefreshPeriod]) and one
// UpdateItem to win.
//
// opts apply to the acquisition as in [Client.AcquireLockWithContext]
// (for example [WithRefreshPeriod] to poll more often, [WithLockLease],
// or [FailIfLocked] to return at once when someone leads); value replaces
// any data they give. [WithReentrant] is rejected.
//
// Called while this Election already leads, Campaign proclaims value (see
// [Election.Proclaim]) and returns the same lock.
func (e *Election) Campaign(ctx context.Context, value []byte, opts ...AcquireLockOption) (l *Lock, err error) {
	if err := checkContext(ctx); err != nil {
		return nil, err
	}
	// One span for the campaign, whatever the number of acquisitions
	// (each wait that ends in a timeout starts another): they run in it.
	ctx, t := e.c.startAcquire(ctx, kindElection, e.name)
	defer func() { t.end(err, l) }()
	if l := e.current(); l != nil && l.Err() == nil {
		if err := e.Proclaim(ctx, value); err != nil {
			return nil, err
		}
		return l, nil
	}
	opts = append(append([]AcquireLockOption(nil), opts...), WithData(value), ReplaceData())
	if newAcquireLockOptions(opts).reentrant {
		return nil, invalid("WithReentrant", true, "cannot be used with Campaign: a candidate that finds its own owner's item waits for it")
	}
	for {
		l, err := e.c.acquireKeyIn(ctx, t, e.name, opts, true)
		if err == nil {
			e.mu.Lock()
			e.lock, e.unsure = l, false
			e.mu.Unlock()
			e.changed()
			return l, nil
		}
		var te *TimeoutError
		if !errors.As(err, &te) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// changed tells this Election's observers that it changed the election.
func (e *Election) changed() {
	e.mu.Lock()
	defer e.mu.Unlock()
	for n := range e.observers {
		select {
		case n <- struct{}{}:
		default:
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
	if err := checkContext(ctx); err != nil {
		return err
	}
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
		e.changed()
		return fmt.Errorf("%w: %w", ErrNotLeader, err)
	}
	e.mu.Lock()
	if e.lock == l {
		// A failed Proclaim may have landed (its answer lost): until one
		// succeeds, Leader reads the item rather than trust the lock's
		// value.
		e.unsure = err != nil && !errors.Is(err, ErrInvalidArgument)
	}
	e.mu.Unlock()
	e.changed()
	return err
}

// Resign gives up leadership: one conditional UpdateItem marks the item
// released, so a waiting candidate wins at its next poll. It returns nil
// when this Election does not lead (it never won, resigned already, or its
// leadership was lost: the lock from Campaign tells which).
//
// While [Election.Run] leads, Resign ends Run's term: the term's context
// ends, and Run releases the lock once OnStartedLeading has returned, so
// that the next leader's term never overlaps it; Resign waits for that
// (until ctx ends, leadership then kept until the work returns) and
// returns the release's error. Run campaigns again after one
// [DefaultRefreshPeriod].
//
// When the release fails, what follows depends on whether it may have
// landed, as [Client.ReleaseLockWithContext] says. If it surely did not
// (DynamoDB rejected it, or ctx ended before it was sent), leadership is
// kept: the lock stays held and renewed, and Resign can be retried. If its
// outcome is unknown, leadership has ended here all the same (the lock's
// Done is closed; the item may stay held, unrenewed, for one lease): the
// error matches [ErrReleaseOutcomeUnknown], and this Election no longer
// leads.
func (e *Election) Resign(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	e.mu.Lock()
	l := e.lock
	e.mu.Unlock()
	if l == nil {
		return nil
	}
	if t := e.runTermOf(l); t != nil {
		return e.resignTerm(ctx, t) // a term of Run: ended, then released by Run
	}
	return e.resign(ctx, l)
}

// resign is Resign of leadership l.
func (e *Election) resign(ctx context.Context, l *Lock) error {
	_, err := e.c.ReleaseLockWithContext(ctx, l)
	if err != nil && !errors.Is(err, ErrLockLost) && !errors.Is(err, ErrLockAlreadyReleased) && l.Err() == nil {
		return err // not sent, or rejected: still the leader
	}
	e.mu.Lock()
	if e.lock == l {
		e.lock, e.unsure = nil, false
	}
	e.mu.Unlock()
	e.changed()
	if errors.Is(err, ErrReleaseOutcomeUnknown) {
		return err // leadership ended here; the item may stay held for a lease
	}
	return nil
}

// Leader reads the current leader: with one consistent GetItem, or with no
// call when this client leads (one GetItem after a Proclaim of this
// Election failed, until one succeeds: the failed one may have landed).
// It returns [ErrNoLeader] when nobody leads. A leader that died is still
// reported until a candidate takes over, one lease after its last
// heartbeat: one read cannot tell a dead leader from a live one.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	if err := checkContext(ctx); err != nil {
		return Leader{}, err
	}
	e.mu.Lock()
	unsure := e.unsure
	e.mu.Unlock()
	var l *Lock
	var err error
	if unsure {
		var sk *string
		if sk, err = e.c.resolveSortKey(nil); err == nil {
			l, err = e.c.readLock(ctx, e.name, sk)
		}
	} else {
		l, err = e.c.GetWithContext(ctx, e.name)
	}
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
// poll; changes that come and go between two polls are seen as one. A
// change this Election makes (Campaign won, Proclaim, Resign, its
// leadership lost) is looked at at once, without waiting for the poll.
// Periods without a leader are not delivered: the next leader is. Failed
// reads are retried at the next poll.
//
// The channel is unbuffered and polling pauses until each state is
// received, so a receiver that falls behind gets no backlog: after a slow
// receive, the next poll delivers whatever is current then. It is closed,
// and its goroutine ends, when ctx ends, when the client is closed, or at
// once when the name is not a valid key or ctx is nil (no goroutine starts
// then).
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	ch := make(chan Leader)
	if checkContext(ctx) != nil {
		close(ch) // no error to return: a nil ctx is bad input, as a bad name is
		return ch
	}
	notify := make(chan struct{}, 1)
	e.mu.Lock()
	if e.observers == nil {
		e.observers = make(map[chan struct{}]struct{})
	}
	e.observers[notify] = struct{}{}
	e.mu.Unlock()
	go func() {
		defer close(ch)
		defer func() {
			e.mu.Lock()
			delete(e.observers, notify)
			e.mu.Unlock()
		}()
		var last Leader
		have := false
		t := e.c.newTimer(0)
		defer t.Stop()
		for {
			var lost <-chan struct{} // this Election's leadership ending
			if l := e.current(); l != nil && l.Err() == nil {
				lost = l.Done()
			}
			select {
			case <-ctx.Done():
				return
			case <-e.c.closing:
				return
			case <-t.C():
			case <-notify:
			case <-lost:
			}
			if e.c.over(ctx) {
				return
			}
			ld, err := e.Leader(ctx)
			if errors.Is(err, ErrInvalidArgument) || errors.Is(err, ErrClientClosed) {
				return
			}
			if err == nil && (!have || !ld.equal(last)) {
				if e.c.over(ctx) {
					return // an answer at the deadline's instant is not delivered
				}
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
