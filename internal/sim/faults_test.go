package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// faultProfile is how one client's link to DynamoDB misbehaves; the seed
// chooses it.
type faultProfile struct {
	lost     float64       // the write lands, the answer is lost
	dup      float64       // the request is applied twice (an SDK retry), the second answer returned
	errs     float64       // throttling or a 500, nothing applied
	slow     float64       // the request, or its answer, is delayed up to maxDelay
	maxDelay time.Duration // also bounds how late an abandoned request may still land
	ghost    float64       // a request whose caller gave up lands anyway, later
	// late: of the ghosts of an acquiring call's requests, the share that
	// land much later, up to lateMax (three leases): after the call's
	// take-back was answered, and after its first re-sends (lateOf).
	late    float64
	lateMax time.Duration
}

func (p faultProfile) String() string {
	return fmt.Sprintf("lost=%.2f dup=%.2f errs=%.2f slow=%.2f<=%s ghost=%.2f late=%.2f<=%s", p.lost, p.dup, p.errs, p.slow, p.maxDelay, p.ghost, p.late, p.lateMax)
}

// callerKey tags a request's context with the client that sent it, so that
// the model's hook can name it in the trace.
type callerKey struct{}

// faultyDB is one client's view of the model through its faults.
type faultyDB struct {
	w     *world
	name  string
	model *ddbmodel.Model
	prof  faultProfile
	// attempt: faults of the SDK's attempts (transport_test.go); when set,
	// the lock client uses the real SDK client over this faultyDB's
	// transport and prof is zero.
	attempt attemptProfile
	conf    conflictProfile // transactions held open, writes meeting transactions (conflicts_test.go)
	mu      sync.Mutex
	r       *rand.Rand
	stall   time.Time // every call waits until then (a stalled client)
	tokens  int
	clock   *simClock // the client's own clock (-sim.clocks), nil: the bubble's
}

func (f *faultyDB) roll(p float64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return p > 0 && f.r.Float64() < p
}

func (f *faultyDB) delay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := time.Millisecond + time.Duration(f.r.Int64N(int64(4*time.Millisecond)))
	if f.prof.slow > 0 && f.r.Float64() < f.prof.slow && !f.w.healed.Load() {
		d += time.Duration(f.r.Int64N(int64(f.prof.maxDelay)))
	}
	return d
}

func (f *faultyDB) stalledUntil() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stall
}

// wait sleeps d, and through any stall; it reports false if ctx ended first.
// A wait that would end at ctx's deadline or later ends with ctx, at the
// deadline: otherwise a timer and a deadline at one instant (a request
// delayed to the very end of the lease that bounds it) would be a race
// between this goroutine and the context's, which two runs of a seed could
// see end differently.
func wait(ctx context.Context, d time.Duration, stall func() time.Time) bool {
	for {
		until := time.Now().Add(d)
		if s := stall(); s.After(until) {
			until = s
		}
		if dl, ok := ctx.Deadline(); ok && !until.Before(dl) {
			<-ctx.Done()
			return false
		}
		t := time.NewTimer(time.Until(until))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return false
		}
		if s := stall(); !s.After(time.Now()) {
			return true
		}
		d = 0
	}
}

var (
	errLost     = errors.New("sim: connection reset: the answer was lost")
	errTimedOut = errors.New("sim: read tcp: i/o timeout: the request may still land")
	errStalled  = errors.New("sim: connection timed out: the client is stalled")
)

// delayAll lets every request wait in the call. Without it, requests that
// the library sends while holding a sync.Mutex (a lock's heartbeat and
// release writes, under Lock.opMu) never wait on the virtual clock inside
// the call: a goroutine blocked on a sync.Mutex is not durably blocked, so
// synctest would never advance time for the holder's timer and the bubble
// would hang. They are delayed instead by failing at once and landing later.
var delayAll = flag.Bool("sim.delayall", true, "delay every request in the call; false for library versions that hold a sync.Mutex across a request")

// mayBlock reports whether a request may wait on the virtual clock inside
// the call (see delayAll).
func mayBlock(in any) bool {
	if *delayAll {
		return true
	}
	switch in := in.(type) {
	case *dynamodb.UpdateItemInput:
		cond := aws.ToString(in.ConditionExpression)
		// Acquisitions; a lock's own writes start with its owner check.
		return strings.HasPrefix(cond, "attribute_not_exists(") || strings.HasPrefix(cond, "attribute_exists(")
	case *dynamodb.GetItemInput, *dynamodb.TransactWriteItemsInput:
		return true
	}
	return false
}

// do runs one request through the faults. apply sends it to the model.
func do[O any](f *faultyDB, ctx context.Context, op string, in any, apply func(context.Context) (*O, error)) (*O, error) {
	// Every point where this request may meet another goroutine is a step
	// (replay_test.go): sending it (its faults are drawn then), applying it,
	// returning its answer.
	key := f.name + " " + op + " " + reqKey(in)
	f.w.step("send " + key)
	// A paused process neither sends nor hears an answer until it resumes
	// (after a step: see simClock.resume).
	f.clock.resume()
	defer f.clock.resume()
	healed := f.w.healed.Load()
	mctx := context.WithValue(context.WithoutCancel(ctx), callerKey{}, f.name)
	if id, ok := ctx.Value(acquireCallKey{}).(int); ok {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #r =") {
			f.w.mu.Lock()
			f.w.undoSent[id] = true // an acquisition releasing what it wrote
			f.w.mu.Unlock()
		}
	}
	// Every fault this request meets is noted on its keys as it is drawn
	// (invariant 23).
	fault := func(ghost bool) {
		f.noteFault(in)
		f.w.faulted(ctx, ghost)
	}
	delay := func() time.Duration {
		d := f.delay()
		if d > 5*time.Millisecond {
			f.noteFault(in)
		}
		return d
	}
	ghost := func(d time.Duration, why string) {
		fault(true)
		f.w.ghosts.Go(func() {
			time.Sleep(d)
			f.w.step("ghost " + key)
			f.w.log("%s %s: %s", f.name, op, why)
			_, _ = apply(mctx)
		})
	}
	if !mayBlock(in) {
		if s := f.stalledUntil(); s.After(time.Now()) {
			if f.roll(0.5) {
				ghost(time.Until(s)+time.Millisecond, "a request sent during a stall lands when it ends")
			}
			fault(false)
			return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, errStalled)
		}
		if d := delay(); d > 5*time.Millisecond {
			// A slow request under a mutex: it fails now and lands later.
			ghost(d, "a delayed request lands late")
			fault(false)
			return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, errLost)
		}
	} else if d := delay(); !wait(ctx, d, f.stalledUntil) {
		f.w.step("gave up " + key)
		fault(false)
		if !healed && f.roll(f.prof.ghost) {
			if d, ok := f.lateGhost(ctx, in, f.prof.late, f.prof.lateMax); ok {
				ghost(d, fmt.Sprintf("abandoned request of an acquiring call lands %s late", d.Round(time.Millisecond)))
			} else {
				ghost(delay()+time.Millisecond, "abandoned request lands late")
			}
		}
		return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, ctx.Err())
	}
	f.w.step("apply " + key)
	if !healed && isWrite(in) {
		// A write of an acquiring call held up in the network past its
		// caller's patience: the caller hears a timeout, the write lands
		// later, after the call's take-back (issue 60, item 1).
		if d, ok := f.lateGhost(ctx, in, f.prof.late/4, f.prof.lateMax); ok {
			ghost(d, fmt.Sprintf("a write of an acquiring call held up in the network lands %s late", d.Round(time.Millisecond)))
			return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, errTimedOut)
		}
	}
	if !healed && f.roll(f.prof.errs) {
		fault(false)
		if f.roll(0.5) {
			return nil, &types.ProvisionedThroughputExceededException{Message: aws.String("sim: throttled")}
		}
		return nil, &smithy.GenericAPIError{Code: "InternalServerError", Message: "sim: 500", Fault: smithy.FaultServer}
	}
	out, err, met := meeting(f, in, func() (*O, error) { return apply(mctx) })
	if met {
		fault(false)
	}
	// The SDK does not retry a TransactionConflictException or a
	// cancelled transaction: no duplicate after a conflict.
	if !healed && !met && f.roll(f.prof.dup) {
		f.w.log("%s %s: the SDK retries a request that landed", f.name, op)
		fault(false)
		if mayBlock(in) {
			_ = wait(context.Background(), delay(), f.stalledUntil)
			f.w.step("apply again " + key)
		}
		out, err = apply(mctx)
	}
	lost := !healed && f.roll(f.prof.lost)
	if lost {
		f.noteFault(in)
	}
	if mayBlock(in) {
		ok := wait(ctx, delay(), f.stalledUntil)
		f.w.step("answer " + key)
		if !ok {
			fault(false)
			return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, ctx.Err())
		}
	}
	if lost {
		fault(false)
		f.w.log("%s %s: answer lost", f.name, op)
		return nil, fmt.Errorf("operation error DynamoDB: %s: %w", op, errLost)
	}
	return out, err
}

// noteFault records that a request of this client on in's items met a
// fault (world.keyFault: invariant 23).
func (f *faultyDB) noteFault(in any) {
	var keys []map[string]types.AttributeValue
	switch in := in.(type) {
	case *dynamodb.GetItemInput:
		keys = append(keys, in.Key)
	case *dynamodb.UpdateItemInput:
		keys = append(keys, in.Key)
	case *dynamodb.DeleteItemInput:
		keys = append(keys, in.Key)
	case *dynamodb.PutItemInput:
		keys = append(keys, in.Item)
	case *dynamodb.TransactWriteItemsInput:
		for _, m := range in.TransactItems {
			switch {
			case m.Update != nil:
				keys = append(keys, m.Update.Key)
			case m.ConditionCheck != nil:
				keys = append(keys, m.ConditionCheck.Key)
			case m.Put != nil:
				keys = append(keys, m.Put.Item)
			case m.Delete != nil:
				keys = append(keys, m.Delete.Key)
			}
		}
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	for _, k := range keys {
		f.w.keyFault[f.name+"\x00"+ddbmodel.KeyString(itemS(k, f.w.pkName), itemS(k, "sk"))] = time.Now()
	}
}

// isWrite reports whether in is a write.
func isWrite(in any) bool {
	switch in.(type) {
	case *dynamodb.UpdateItemInput, *dynamodb.PutItemInput, *dynamodb.DeleteItemInput, *dynamodb.TransactWriteItemsInput:
		return true
	}
	return false
}

// lateOf is the share of late ghosts of a client's profile (and their
// longest delay: three leases), from a stream of its own, so that the
// seed's other draws stay where they were.
func lateOf(seed uint64, name string, lease time.Duration) (float64, time.Duration) {
	h := fnv.New64a()
	h.Write([]byte("late ghosts " + name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	return r.Float64() * 0.5, 3 * lease
}

// lateGhost draws whether an abandoned request of ctx lands late, and when
// (issue 60, item 1): only an acquiring call's (its writes are the ones a
// take-back must outlast; a late renewal or release is a later story), at
// least 1 ms and up to lateMax after its caller gave up.
func (f *faultyDB) lateGhost(ctx context.Context, in any, late float64, lateMax time.Duration) (time.Duration, bool) {
	c := callOf(ctx)
	if c == nil || lateMax <= 0 {
		return 0, false
	}
	// Two orderings of late writes met defects of the library, fixed since
	// (F16 and F17 in docs/SIMULATION.md); -sim.avoid can leave them out.
	if _, tx := in.(*dynamodb.TransactWriteItemsInput); tx && avoid("late-transaction") ||
		c.what == "RWLock.RLock" && avoid("late-reader") {
		return 0, false
	}
	if !f.roll(late) {
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Millisecond + time.Duration(f.r.Int64N(int64(lateMax))), true
}

func (f *faultyDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return do(f, ctx, "GetItem", in, func(c context.Context) (*dynamodb.GetItemOutput, error) { return f.model.GetItem(c, in) })
}

func (f *faultyDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return do(f, ctx, "PutItem", in, func(c context.Context) (*dynamodb.PutItemOutput, error) { return f.model.PutItem(c, in) })
}

func (f *faultyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return do(f, ctx, "UpdateItem", in, func(c context.Context) (*dynamodb.UpdateItemOutput, error) { return f.model.UpdateItem(c, in) })
}

func (f *faultyDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return do(f, ctx, "DeleteItem", in, func(c context.Context) (*dynamodb.DeleteItemOutput, error) { return f.model.DeleteItem(c, in) })
}

// DescribeTable is the check a client makes before its first write (the
// global-table check): under the same faults as every other call.
func (f *faultyDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	return do(f, ctx, "DescribeTable", in, func(c context.Context) (*dynamodb.DescribeTableOutput, error) { return f.model.DescribeTable(c, in) })
}

// DescribeGlobalTable is the check of a legacy global table, which a
// client makes only for a table with a stream of new and old images (the
// model's tables have none): under the same faults as DescribeTable.
func (f *faultyDB) DescribeGlobalTable(ctx context.Context, in *dynamodb.DescribeGlobalTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeGlobalTableOutput, error) {
	return do(f, ctx, "DescribeGlobalTable", in, func(c context.Context) (*dynamodb.DescribeGlobalTableOutput, error) {
		return f.model.DescribeGlobalTable(c, in)
	})
}

func (f *faultyDB) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return f.model.CreateTable(ctx, in)
}

// TransactWriteItems carries a ClientRequestToken, as the SDK fills one in,
// so that a retried transaction is not applied twice.
func (f *faultyDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	if in.ClientRequestToken == nil {
		cp := *in
		f.mu.Lock()
		f.tokens++
		cp.ClientRequestToken = aws.String(fmt.Sprintf("%s-%d", f.name, f.tokens))
		f.mu.Unlock()
		in = &cp
	}
	key := f.name + " TransactWriteItems " + reqKey(in)
	return do(f, ctx, "TransactWriteItems", in, func(c context.Context) (*dynamodb.TransactWriteItemsOutput, error) {
		return f.transact(c, in, key, false)
	})
}
