package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/arielsrv/dynamolock/v2"
)

// TakeoverConfig is the takeover of a dead session's locks: client A,
// under a session, holds N locks; its network is cut; client B, under a
// session of its own, asks for all of them.
type TakeoverConfig struct {
	N         int
	Lease     time.Duration
	Heartbeat time.Duration
	Workers   int // B's goroutines asking at once, as A's
}

// takeoverWait is how long each of B's acquisitions may wait for its key
// beyond the lease: far more than a dead session needs.
const takeoverWait = 30 * time.Second

// TakeoverRun is what a takeover measured. Times are from the cut.
type TakeoverRun struct {
	TakeoverConfig
	Refresh time.Duration // B's refresh period (the default)
	// LastWrite is when A's last successful write was sent (negative:
	// before the cut); LeaseEnd is that plus the lease, the end of A's
	// session by A's clock.
	LastWrite, LeaseEnd time.Duration
	// AEnded is when each of A's locks' Done closed, sorted; ALost of them
	// ended with an error matching ErrLockLost.
	AEnded Dist
	ALost  int
	// BTook is when each of B's acquisitions returned the lock, sorted;
	// BErrors failed (FirstError is the first).
	BTook      Dist
	BErrors    int
	FirstError string
	// Higher counts the keys whose fencing token under B is higher than it
	// was under A.
	Higher int
	// MinMargin is the least, over the keys, of B's acquisition minus the
	// close of A's Done for that key: negative means B held a key while A
	// still counted it held.
	MinMargin time.Duration
	BCalls    Calls // B's DynamoDB calls from the cut to the last lock
	// BItems is BCalls by the item each addressed: "UpdateItem lock",
	// "GetItem dead session", "UpdateItem own session", ...
	BItems             Calls
	LoadStart, LoadEnd float64
}

// MeasureTakeover runs one takeover on a fresh table.
func MeasureTakeover(ctx context.Context, e *Env, cfg TakeoverConfig) (*TakeoverRun, error) {
	r := &TakeoverRun{TakeoverConfig: cfg, Refresh: dynamolock.DefaultRefreshPeriod, LoadStart: loadAvg()}
	table, drop, err := e.NewTable(ctx, "takeover")
	if err != nil {
		return nil, err
	}
	defer drop()
	opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(cfg.Lease), dynamolock.WithHeartbeatPeriod(cfg.Heartbeat), dynamolock.WithSession()}
	adb, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	cut := &killableDB{Client: adb}
	a, err := dynamolock.New(cut, table, opts...)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.Lease)
		defer cancel()
		_ = a.CloseWithContext(cctx) // its network is cut: nothing to release
	}()
	cnt := NewCounter()
	var deadSession atomic.Value // A's session's key, once known
	items := &itemCounter{n: Calls{}, class: func(pk string) string {
		switch {
		case pk == deadSession.Load():
			return "dead session"
		case strings.HasPrefix(pk, sessionKeyPrefix):
			return "own session"
		case strings.HasPrefix(pk, takeoverKeyPrefix):
			return "lock"
		}
		return "other"
	}}
	bdb, err := e.NewDB(ctx, cnt.Option, items.option)
	if err != nil {
		return nil, err
	}
	b, err := dynamolock.New(bdb, table, opts...)
	if err != nil {
		return nil, err
	}
	defer b.Close()

	keys := make([]string, cfg.N)
	for i := range keys {
		keys[i] = takeoverKeyPrefix + strconv.Itoa(i)
	}
	aLocks := make([]*dynamolock.Lock, cfg.N)
	if _, _, other, first, _ := askAll(ctx, a, keys, aLocks, SessionConfig{Workers: cfg.Workers}); other > 0 {
		return nil, fmt.Errorf("takeover: A's acquisitions: %d failed, first: %s", other, first)
	}
	as, err := a.Session(ctx)
	if err != nil {
		return nil, err
	}
	deadSession.Store(as.ID())
	aTokens := make([]uint64, cfg.N)
	for i, l := range aLocks {
		aTokens[i] = l.FencingToken()
	}
	// A holds for a few heartbeats, and is cut at a random phase of its
	// session's renewals.
	if err := sleepCtxErr(ctx, 2*cfg.Heartbeat+rand.N(cfg.Heartbeat)); err != nil {
		return nil, err
	}
	aEnded := make([]time.Time, cfg.N)
	var watch sync.WaitGroup
	for i, l := range aLocks {
		watch.Go(func() {
			<-l.Done()
			aEnded[i] = time.Now()
		})
	}
	cnt.Take()
	items.take()
	cutAt := cut.kill()
	bTook := make([]time.Time, cfg.N)
	bLocks := make([]*dynamolock.Lock, cfg.N)
	var next, nErr atomic.Int64
	var firstErr atomic.Value
	var ask sync.WaitGroup
	for range max(cfg.Workers, 1) {
		ask.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= len(keys) {
					return
				}
				l, err := b.AcquireLockWithContext(ctx, keys[i], dynamolock.WithAdditionalTimeToWaitForLock(takeoverWait))
				if err != nil {
					nErr.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				bTook[i], bLocks[i] = time.Now(), l
			}
		})
	}
	ask.Wait()
	r.BCalls, r.BItems = cnt.Take(), items.take()
	// A's locks have all ended by now, or do within a lease.
	waited := make(chan struct{})
	go func() { watch.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(2 * cfg.Lease):
		return nil, errors.New("takeover: A's locks did not all end within two leases of B's last acquisition")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.BErrors = int(nErr.Load())
	if s, ok := firstErr.Load().(string); ok {
		r.FirstError = s
	}
	r.LastWrite = cut.lastWriteTime().Sub(cutAt)
	r.LeaseEnd = r.LastWrite + cfg.Lease
	var ended, took []time.Duration
	r.MinMargin = time.Duration(1<<63 - 1)
	for i := range keys {
		ended = append(ended, aEnded[i].Sub(cutAt))
		if errors.Is(aLocks[i].Err(), dynamolock.ErrLockLost) {
			r.ALost++
		}
		if bLocks[i] == nil {
			continue
		}
		took = append(took, bTook[i].Sub(cutAt))
		r.MinMargin = min(r.MinMargin, bTook[i].Sub(aEnded[i]))
		if bLocks[i].FencingToken() > aTokens[i] {
			r.Higher++
		}
	}
	if len(took) == 0 {
		r.MinMargin = 0
	}
	r.AEnded, r.BTook = NewDist(ended), NewDist(took)
	r.LoadEnd = loadAvg()
	return r, nil
}

// takeoverKeyPrefix starts the keys of a takeover's locks.
const takeoverKeyPrefix = "t-"

// sessionKeyPrefix starts the key of every session item (the library's
// docs/SESSIONS.md: "dynamolock-session:<uuid>").
const sessionKeyPrefix = "dynamolock-session:"

// itemCounter counts UpdateItem and GetItem calls by the class of the
// partition key they address, once per operation.
type itemCounter struct {
	class func(pk string) string
	mu    sync.Mutex
	n     Calls
}

func (c *itemCounter) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lockbenchItemCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				var op string
				var key map[string]types.AttributeValue
				switch p := in.Parameters.(type) {
				case *dynamodb.UpdateItemInput:
					op, key = "UpdateItem", p.Key
				case *dynamodb.GetItemInput:
					op, key = "GetItem", p.Key
				}
				if pk, ok := key["key"].(*types.AttributeValueMemberS); ok {
					c.mu.Lock()
					c.n[op+" "+c.class(pk.Value)]++
					c.mu.Unlock()
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// take returns the counts since the last take and resets them.
func (c *itemCounter) take() Calls {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = Calls{}
	return n
}

// sleepCtxErr sleeps for d, or until ctx ends (then returns its error).
func sleepCtxErr(ctx context.Context, d time.Duration) error {
	return sleepUntil(ctx, time.Now().Add(d))
}
