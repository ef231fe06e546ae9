package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// CallsRow is the DynamoDB calls one operation made.
type CallsRow struct {
	Op     string
	Target string // the count the library documents
	Calls  Calls
	Shape  string // what the count is made of, e.g. "1 + 3 polls + 1"
	Met    bool
	Note   string
}

// CallsResult is section 1: calls per operation.
type CallsResult struct {
	Rows []CallsRow
	// ItemBytes is the size of a held lock item as DynamoDB counts it
	// (attribute names plus values), for the cost model.
	ItemBytes int
	Lease     time.Duration
	Refresh   time.Duration
}

// callsLease is the lease of the clients in the calls scenarios: short, so
// that the takeover scenarios finish quickly.
const callsLease = 3 * time.Second

// MeasureCalls counts the DynamoDB calls of every lock operation, each made
// by a client whose SDK client counts only its own calls.
func MeasureCalls(ctx context.Context, e *Env) (*CallsResult, error) {
	table, drop, err := e.NewTable(ctx, "calls")
	if err != nil {
		return nil, err
	}
	defer drop()
	res := &CallsResult{Lease: callsLease, Refresh: dynamolock.DefaultRefreshPeriod}
	var clients []*dynamolock.Client
	defer func() {
		for _, c := range clients {
			_ = c.Close()
		}
	}()
	// client returns a lock client with its own call counter.
	client := func(opts ...dynamolock.ClientOption) (*dynamolock.Client, *Counter, error) {
		cnt := NewCounter()
		db, err := e.NewDB(ctx, cnt.Option)
		if err != nil {
			return nil, nil, err
		}
		opts = append([]dynamolock.ClientOption{
			dynamolock.WithLeaseDuration(callsLease), dynamolock.WithHeartbeatPeriod(time.Second),
		}, opts...)
		c, err := dynamolock.New(db, table, opts...)
		if err != nil {
			return nil, nil, err
		}
		clients = append(clients, c)
		return c, cnt, nil
	}
	one := func(op string, calls Calls, note string) CallsRow {
		return CallsRow{Op: op, Target: "1", Calls: calls, Shape: strconv.Itoa(calls.Total()), Met: calls.Total() == 1, Note: note}
	}

	a, ca, err := client()
	if err != nil {
		return nil, err
	}
	b, cb, err := client()
	if err != nil {
		return nil, err
	}

	// Free lock.
	ca.Take()
	l, err := a.AcquireLockWithContext(ctx, "free")
	if err != nil {
		return nil, fmt.Errorf("acquire free: %w", err)
	}
	free := one("acquire, free lock", ca.Take(), "no item yet")
	if res.ItemBytes, err = itemBytes(ctx, e, table, "free"); err != nil {
		return nil, err
	}

	// Heartbeat, get, release of a held lock.
	if err := a.SendHeartbeatWithContext(ctx, l); err != nil {
		return nil, fmt.Errorf("heartbeat: %w", err)
	}
	beat := one("heartbeat", ca.Take(), "SendHeartbeat; a background beat is the same call (§3 counts calls per beat)")
	if _, err := a.GetWithContext(ctx, "free"); err != nil {
		return nil, err
	}
	calls := ca.Take()
	getHeld := CallsRow{Op: "get, lock held by this client", Target: "0", Calls: calls,
		Shape: strconv.Itoa(calls.Total()), Met: calls.Total() == 0, Note: "answered from memory"}
	cb.Take()
	if _, err := b.GetWithContext(ctx, "free"); err != nil {
		return nil, err
	}
	get := one("get, lock held by another client", cb.Take(), "one consistent GetItem")
	if _, err := a.ReleaseLockWithContext(ctx, l); err != nil {
		return nil, fmt.Errorf("release: %w", err)
	}
	release := one("release", ca.Take(), "UpdateItem SET isReleased (the item is kept)")
	// Another client acquires the released item.
	if _, err := b.AcquireLockWithContext(ctx, "free"); err != nil {
		return nil, fmt.Errorf("acquire released: %w", err)
	}
	released := one("acquire, released lock", cb.Take(), "item left released by another owner")

	// The slow scenarios wait for leases; run them side by side.
	var waited, takeover, takeoverSkew CallsRow
	var wg sync.WaitGroup
	wg.Go(func() { waited = waitedRow(ctx, client) })
	wg.Go(func() { takeover = takeoverRow(ctx, client, false) })
	wg.Go(func() { takeoverSkew = takeoverRow(ctx, client, true) })
	wg.Wait()
	for _, r := range []CallsRow{waited, takeover, takeoverSkew} {
		if r.Op == "" {
			return nil, fmt.Errorf("calls: %s", r.Note)
		}
	}
	res.Rows = []CallsRow{free, released, waited, takeover, takeoverSkew, beat, release, get, getHeld}

	// Close with several held locks: one release each.
	c, cc, err := client()
	if err != nil {
		return nil, err
	}
	const held = 10
	for i := range held {
		if _, err := c.AcquireLockWithContext(ctx, "close-"+strconv.Itoa(i)); err != nil {
			return nil, err
		}
	}
	cc.Take()
	if err := c.Close(); err != nil {
		return nil, err
	}
	closeCalls := cc.Take()
	res.Rows = append(res.Rows, CallsRow{Op: fmt.Sprintf("Close with %d held locks", held), Target: strconv.Itoa(held),
		Calls: closeCalls, Shape: strconv.Itoa(closeCalls.Total()), Met: closeCalls.Total() == held, Note: "one release per lock"})
	return res, nil
}

type clientFunc func(opts ...dynamolock.ClientOption) (*dynamolock.Client, *Counter, error)

// waitedRow: a live holder renews the lock while another client waits for
// it, then releases it.
func waitedRow(ctx context.Context, client clientFunc) CallsRow {
	fail := func(err error) CallsRow { return CallsRow{Note: "acquire after waiting: " + err.Error()} }
	h, _, err := client()
	if err != nil {
		return fail(err)
	}
	w, cw, err := client()
	if err != nil {
		return fail(err)
	}
	l, err := h.AcquireLockWithContext(ctx, "waited")
	if err != nil {
		return fail(err)
	}
	time.AfterFunc(2500*time.Millisecond, func() { _, _ = h.ReleaseLockWithContext(ctx, l) })
	cw.Take()
	start := time.Now()
	if _, err := w.AcquireLockWithContext(ctx, "waited", dynamolock.WithAdditionalTimeToWaitForLock(10*time.Second)); err != nil {
		return fail(err)
	}
	took := time.Since(start)
	calls := cw.Take()
	polls := calls["GetItem"]
	return CallsRow{
		Op: "acquire after waiting", Target: "1 + polls + 1", Calls: calls,
		Shape: fmt.Sprintf("1 + %d polls + 1", polls),
		Met:   calls.Total() == polls+2,
		Note: fmt.Sprintf("holder renewed, then released after 2.5 s; waited %s. The last poll sees the release and one more write takes the lock",
			took.Round(10*time.Millisecond)),
	}
}

// takeoverRow: the holder stops without releasing (a client with
// heartbeats disabled that is never touched again); another client takes
// the lock over. With skew, both use WithClockSkewBound and the contender
// arrives after the stored expiry plus the bound has passed.
func takeoverRow(ctx context.Context, client clientFunc, skew bool) CallsRow {
	name := "takeover of a dead owner's lock"
	var opts []dynamolock.ClientOption
	if skew {
		name = "takeover, WithClockSkewBound, owner dead for over a lease"
		opts = append(opts, dynamolock.WithClockSkewBound(skewBound))
	}
	fail := func(err error) CallsRow { return CallsRow{Note: name + ": " + err.Error()} }
	dead, _, err := client(append(opts, dynamolock.DisableHeartbeat())...)
	if err != nil {
		return fail(err)
	}
	w, cw, err := client(opts...)
	if err != nil {
		return fail(err)
	}
	key := "dead-" + strconv.FormatBool(skew)
	if _, err := dead.AcquireLockWithContext(ctx, key); err != nil {
		return fail(err)
	}
	if skew {
		time.Sleep(callsLease + skewBound + 200*time.Millisecond)
	}
	cw.Take()
	start := time.Now()
	if _, err := w.AcquireLockWithContext(ctx, key); err != nil {
		return fail(err)
	}
	took := time.Since(start)
	calls := cw.Take()
	polls := calls["GetItem"]
	row := CallsRow{Op: name, Calls: calls, Shape: fmt.Sprintf("1 + %d polls + 1", polls), Met: calls.Total() == polls+2}
	if skew {
		row.Target = "2 (ours: stored expiry)"
		row.Met = calls.Total() == 2
		row.Note = fmt.Sprintf("took %s: the failed write returns the item, its expiry is past", took.Round(time.Millisecond))
	} else {
		row.Target = "1 + polls + 1"
		row.Note = fmt.Sprintf("lease %s, refresh %s: ⌈lease/refresh⌉ = %d reads expected; took %s",
			callsLease, dynamolock.DefaultRefreshPeriod, int((callsLease+dynamolock.DefaultRefreshPeriod-1)/dynamolock.DefaultRefreshPeriod), took.Round(10*time.Millisecond))
	}
	return row
}

// itemBytes reads key's item and returns its size as DynamoDB counts it.
func itemBytes(ctx context.Context, e *Env, table, key string) (int, error) {
	db, err := e.NewDB(ctx)
	if err != nil {
		return 0, err
	}
	out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String(table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for name, v := range out.Item {
		n += len(name)
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			n += len(v.Value)
		case *types.AttributeValueMemberB:
			n += len(v.Value)
		case *types.AttributeValueMemberN:
			n += (len(v.Value)+1)/2 + 1
		default:
			n++
		}
	}
	return n, nil
}
