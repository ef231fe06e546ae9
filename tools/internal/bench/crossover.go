package bench

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// CrossoverConfig is the cross-process hand-over measurement (issue 47):
// clients that share nothing but the table (each its own SDK client and
// lock client, as two processes would be).
//
//   - Hand-over: a holder holds a key for 1-2 s while Waiters clients wait
//     for it (AcquireLock in the mode, at the default refresh period), then
//     releases; timed from the start of the release call to the first
//     waiter holding the lock, and the DynamoDB calls every client sent
//     from the waiters' start to that moment, per hand-over. Trials
//     hand-overs per mode, one after another.
//   - Budget: a holder keeps a key for Hold while each count of Budget
//     waiters (already queued) waits; the reads and writes all waiters
//     sent in that time, per second.
//   - The raw round trip (a consistent GetItem and a conditional
//     UpdateItem), timed in the same run, before and after.
type CrossoverConfig struct {
	Modes   []ContentionMode
	Trials  int
	Waiters int
	Budget  []int
	Hold    time.Duration
}

// DefaultCrossover is what `lockbench crossover` runs.
func DefaultCrossover() CrossoverConfig {
	return CrossoverConfig{Modes: ContentionModes, Trials: 30, Waiters: 1, Budget: []int{2, 8, 32}, Hold: 10 * time.Second}
}

// Crossover goals (issue 47): a clean hand-over's p50 at the default
// refresh, and the reads per second of a key waited on while its holder
// keeps it for 10 s.
const (
	CrossoverP50Target   = 50 * time.Millisecond
	CrossoverReadsTarget = 20.0
)

// CrossoverResult is one run.
type CrossoverResult struct {
	RawGet, RawUpdate Dist
	Handover          []CrossoverHandover
	Budget            []CrossoverBudget
}

// CrossoverHandover is one mode's hand-overs.
type CrossoverHandover struct {
	Mode    string
	D       Dist
	Reads   float64 // per hand-over, every client
	Writes  float64
	Failed  int
	Waiters int
}

// CrossoverBudget is one mode and waiter count's cost of a long hold.
type CrossoverBudget struct {
	Mode          string
	Waiters       int
	Hold          time.Duration
	ReadsPerSec   float64
	WritesPerSec  float64
	HandedOver    time.Duration // from the release to the next holder
	HandoverError error
}

type crossClient struct {
	c   *dynamolock.Client
	cnt *Counter
}

func (x *crossover) client(ctx context.Context) (crossClient, error) {
	cnt := NewCounter()
	db, err := x.e.NewDB(ctx, cnt.Option)
	if err != nil {
		return crossClient{}, err
	}
	c, err := dynamolock.New(db, x.table, dynamolock.WithLeaseDuration(failoverLease), dynamolock.WithHeartbeatPeriod(failoverHeartbeat))
	return crossClient{c, cnt}, err
}

type crossover struct {
	e     *Env
	table string
}

// RunCrossover runs cfg against e.
func RunCrossover(ctx context.Context, e *Env, cfg CrossoverConfig) (CrossoverResult, error) {
	table, drop, err := e.NewTable(ctx, "crossover")
	if err != nil {
		return CrossoverResult{}, err
	}
	defer drop()
	x := &crossover{e: e, table: table}
	var res CrossoverResult
	if err := x.raw(ctx, &res, 100); err != nil {
		return res, err
	}
	for _, m := range cfg.Modes {
		h := CrossoverHandover{Mode: m.Name, Waiters: cfg.Waiters}
		var ds []time.Duration
		var reads, writes int
		for i := range cfg.Trials {
			d, calls, err := x.handover(ctx, fmt.Sprintf("handover-%s-%d", m.Name, i), m, cfg.Waiters)
			if err != nil {
				h.Failed++
				e.logf("crossover %s trial %d: %v", m.Name, i, err)
				continue
			}
			ds = append(ds, d)
			reads += calls["GetItem"]
			writes += calls.Total() - calls["GetItem"]
		}
		h.D = NewDist(ds)
		if n := len(ds); n > 0 {
			h.Reads, h.Writes = float64(reads)/float64(n), float64(writes)/float64(n)
		}
		res.Handover = append(res.Handover, h)
	}
	for _, m := range cfg.Modes {
		for _, n := range cfg.Budget {
			b, err := x.budget(ctx, fmt.Sprintf("budget-%s-%d", m.Name, n), m, n, cfg.Hold)
			if err != nil {
				return res, err
			}
			res.Budget = append(res.Budget, b)
		}
	}
	return res, x.raw(ctx, &res, 100)
}

// raw times n consistent GetItems and n conditional UpdateItems.
func (x *crossover) raw(ctx context.Context, res *CrossoverResult, n int) error {
	db, err := x.e.NewDB(ctx)
	if err != nil {
		return err
	}
	for i := range n {
		key := "raw-" + strconv.Itoa(i%10)
		t := time.Now()
		if _, err := db.UpdateItem(ctx, rawWrite(x.table, key, "lockbench-crossover-raw")); err != nil {
			return fmt.Errorf("raw UpdateItem: %w", err)
		}
		res.RawUpdate = append(res.RawUpdate, time.Since(t))
		t = time.Now()
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(x.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}}}); err != nil {
			return fmt.Errorf("raw GetItem: %w", err)
		}
		res.RawGet = append(res.RawGet, time.Since(t))
	}
	res.RawGet, res.RawUpdate = NewDist(res.RawGet), NewDist(res.RawUpdate)
	return nil
}

// handover: a holder holds key 1-2 s while waiters wait, then releases.
func (x *crossover) handover(ctx context.Context, key string, m ContentionMode, waiters int) (time.Duration, Calls, error) {
	holder, err := x.client(ctx)
	if err != nil {
		return 0, nil, err
	}
	defer holder.c.Close()
	l, err := holder.c.AcquireLockWithContext(ctx, key)
	if err != nil {
		return 0, nil, err
	}
	ws := make([]crossClient, waiters)
	for i := range ws {
		if ws[i], err = x.client(ctx); err != nil {
			return 0, nil, err
		}
		defer ws[i].c.Close()
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	holder.cnt.Take()
	got := make(chan acquired, waiters)
	for _, w := range ws {
		go func() {
			opts := append([]dynamolock.AcquireLockOption{dynamolock.WithAdditionalTimeToWaitForLock(30 * time.Second)}, m.Opts...)
			l, err := w.c.AcquireLockWithContext(wctx, key, opts...)
			got <- acquired{time.Now(), err}
			if err == nil {
				_, _ = w.c.ReleaseLockWithContext(context.WithoutCancel(ctx), l)
			}
		}()
	}
	time.Sleep(time.Second + rand.N(time.Second))
	released := time.Now()
	if _, err := holder.c.ReleaseLockWithContext(ctx, l); err != nil {
		return 0, nil, err
	}
	a := <-got
	calls := holder.cnt.Take()
	for _, w := range ws {
		for op, n := range w.cnt.Take() {
			calls[op] += n
		}
	}
	calls["UpdateItem"]-- // the holder's release: not the hand-over's
	cancel()
	for range waiters - 1 {
		<-got
	}
	if a.err != nil {
		return 0, nil, a.err
	}
	return a.at.Sub(released), calls, nil
}

// budget: a holder keeps key for hold while n waiters wait; their calls
// per second. The waiters start, then the count starts once each has sent
// its first calls (a second), and the holder keeps the key for hold from
// then.
func (x *crossover) budget(ctx context.Context, key string, m ContentionMode, n int, hold time.Duration) (CrossoverBudget, error) {
	b := CrossoverBudget{Mode: m.Name, Waiters: n, Hold: hold}
	holder, err := x.client(ctx)
	if err != nil {
		return b, err
	}
	defer holder.c.Close()
	l, err := holder.c.AcquireLockWithContext(ctx, key)
	if err != nil {
		return b, err
	}
	ws := make([]crossClient, n)
	for i := range ws {
		if ws[i], err = x.client(ctx); err != nil {
			return b, err
		}
		defer ws[i].c.Close()
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	got := make(chan acquired, n)
	for _, w := range ws {
		wg.Go(func() {
			opts := append([]dynamolock.AcquireLockOption{dynamolock.WithAdditionalTimeToWaitForLock(time.Minute)}, m.Opts...)
			l, err := w.c.AcquireLockWithContext(wctx, key, opts...)
			got <- acquired{time.Now(), err}
			if err == nil {
				_, _ = w.c.ReleaseLockWithContext(context.WithoutCancel(ctx), l)
			}
		})
	}
	time.Sleep(2 * time.Second) // every waiter has its place and has read a few times
	for _, w := range ws {
		w.cnt.Take()
	}
	start := time.Now()
	time.Sleep(hold)
	var calls Calls = map[string]int{}
	for _, w := range ws {
		for op, k := range w.cnt.Take() {
			calls[op] += k
		}
	}
	secs := time.Since(start).Seconds()
	b.ReadsPerSec = float64(calls["GetItem"]) / secs
	b.WritesPerSec = float64(calls.Total()-calls["GetItem"]) / secs
	released := time.Now()
	if _, err := holder.c.ReleaseLockWithContext(ctx, l); err != nil {
		return b, err
	}
	a := <-got
	b.HandedOver, b.HandoverError = a.at.Sub(released), a.err
	cancel()
	wg.Wait()
	return b, nil
}

// WriteCrossover prints res as Markdown.
func WriteCrossover(w io.Writer, res CrossoverResult, cfg CrossoverConfig) {
	fmt.Fprintf(w, "Raw round trip in the same run: consistent GetItem p50 %s, conditional UpdateItem p50 %s (%d each, half before, half after).\n\n",
		msu(res.RawGet.Q(0.5)), msu(res.RawUpdate.Q(0.5)), len(res.RawGet))
	fmt.Fprintln(w, "| mode | waiters | hand-overs | p50 | p99 | max | p50 ÷ raw UpdateItem p50 | reads / hand-over | writes / hand-over | failed | goal p50 ≤ 50 ms | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, h := range res.Handover {
		ratio := float64(h.D.Q(0.5)) / float64(max(res.RawUpdate.Q(0.5), 1))
		fmt.Fprintf(w, "| %s | %d | %d | %s | %s | %s | %.1f× | %.1f | %.1f | %d | ≤ %s | %s |\n", h.Mode, h.Waiters, len(h.D), msu(h.D.Q(0.5)), msu(h.D.Q(0.99)), msu(h.D.Max()),
			ratio, h.Reads, h.Writes, h.Failed, msu(CrossoverP50Target), yesNo(h.Failed == 0 && len(h.D) > 0 && h.D.Q(0.5) <= CrossoverP50Target))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| mode | waiters | hold | reads/s (all waiters) | writes/s | then handed over in | goal reads/s ≤ 20 | met |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
	for _, b := range res.Budget {
		ho := msu(b.HandedOver)
		if b.HandoverError != nil {
			ho = "error: " + b.HandoverError.Error()
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.1f | %.2f | %s | ≤ %.0f | %s |\n", b.Mode, b.Waiters, b.Hold, b.ReadsPerSec, b.WritesPerSec, ho,
			CrossoverReadsTarget, yesNo(b.ReadsPerSec <= CrossoverReadsTarget))
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

func msu(d time.Duration) string { return ms(d) + " ms" }
