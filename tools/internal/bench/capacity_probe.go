package bench

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/arielsrv/dynamolock/v2"
)

// What a capacity run watches: renewal gaps (SDK middleware), the
// client's Stats over time, its first warnings, and the heap.

// gapTracker records, per lock of a capacity run, when its last successful
// write was sent, and a histogram (1 ms buckets) of the renewal gaps since
// the hold began. It is SDK middleware, so it sees exactly what DynamoDB
// accepted. It allocates everything up front, so that it does not count in
// the heap per lock.
type gapTracker struct {
	prefix string
	mu     sync.Mutex
	last   []time.Time
	hist   []int64 // hist[i]: gaps in [i ms, i+1 ms); the last bucket takes the rest
	max    time.Duration
	from   time.Time // gaps that end before this are not recorded
}

func newGapTracker(prefix string, n int) *gapTracker {
	return &gapTracker{prefix: prefix, last: make([]time.Time, n), hist: make([]int64, 120_000)}
}

func (g *gapTracker) option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lockbenchGaps",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				sent := time.Now()
				out, md, err := next.HandleInitialize(ctx, in)
				if err == nil && awsmiddleware.GetOperationName(ctx) == "UpdateItem" {
					if p, ok := in.Parameters.(*dynamodb.UpdateItemInput); ok {
						if k, ok := p.Key["key"].(*types.AttributeValueMemberS); ok {
							g.written(k.Value, sent)
						}
					}
				}
				return out, md, err
			}), middleware.After)
	})
}

func (g *gapTracker) written(key string, sent time.Time) {
	i, err := strconv.Atoi(strings.TrimPrefix(key, g.prefix))
	if err != nil || i < 0 || i >= len(g.last) {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if prev := g.last[i]; !prev.IsZero() && !g.from.IsZero() && sent.After(prev) {
		g.add(sent.Sub(prev))
	}
	if sent.After(g.last[i]) {
		g.last[i] = sent
	}
}

func (g *gapTracker) add(d time.Duration) {
	g.hist[min(int(d/time.Millisecond), len(g.hist)-1)]++
	g.max = max(g.max, d)
}

func (g *gapTracker) start(t time.Time) {
	g.mu.Lock()
	g.from = t
	clear(g.hist)
	g.max = 0
	g.mu.Unlock()
}

// finish adds, for every lock, the open gap from its last write to end,
// and returns the median, 99th percentile and largest gap.
func (g *gapTracker) finish(end time.Time) (p50, p99, maxGap time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, t := range g.last {
		if !t.IsZero() && t.Before(end) { // a beat sent since end has no open gap
			g.add(end.Sub(t))
		}
	}
	var n int64
	for _, c := range g.hist {
		n += c
	}
	q := func(f float64) time.Duration {
		rank := int64(math.Ceil(f * float64(n)))
		var cum int64
		for i, c := range g.hist {
			if cum += c; cum >= rank && c > 0 {
				return time.Duration(i)*time.Millisecond + time.Millisecond/2
			}
		}
		return g.max
	}
	return min(q(0.5), g.max), min(q(0.99), g.max), g.max
}

// traceStats prints c's Stats to w every 250 ms until the returned
// function is called, with the machine's busy and stolen CPU shares over
// the same 250 ms (a backend that slows while steal rises lost the CPU to
// another guest of the host); it does nothing when w is nil.
func traceStats(c *dynamolock.Client, w io.Writer, h *firstErrors, began time.Time) func() {
	if w == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		var prev dynamolock.Stats
		prevCPU := readMachineCPU()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			s := c.Stats()
			cpu := readMachineCPU()
			fmt.Fprintf(w, "%6.2fs held=%d lost=%d backlog=%d beats=+%d errors=+%d late=+%d calls=+%d admission waits=+%d%s%s\n",
				time.Since(began).Seconds(), s.HeldLocks, s.LocksLost, s.HeartbeatBacklog,
				s.HeartbeatsSent-prev.HeartbeatsSent, s.HeartbeatErrors-prev.HeartbeatErrors,
				s.LateHeartbeats-prev.LateHeartbeats, s.DynamoDBCalls-prev.DynamoDBCalls, s.AdmissionWaits-prev.AdmissionWaits,
				cpu.since(prevCPU), h.admissionSeen())
			prev, prevCPU = s, cpu
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			close(done)
			<-stopped
		})
	}
}

// firstErrors is a slog handler that prints the first few warnings, and
// keeps what the last acquisition that waited for heartbeat capacity saw
// (admission's need, capacity and slack) for traceStats.
type firstErrors struct {
	mu   sync.Mutex
	w    io.Writer
	left int
	seen string // the last "waiting for heartbeat capacity" record's attributes
}

func (h *firstErrors) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelDebug }
func (h *firstErrors) WithAttrs([]slog.Attr) slog.Handler           { return h }
func (h *firstErrors) WithGroup(string) slog.Handler                { return h }

// admissionSeen returns what the last acquisition that waited saw, and
// forgets it.
func (h *firstErrors) admissionSeen() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.seen
	h.seen = ""
	return s
}

func (h *firstErrors) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if r.Message == "waiting for heartbeat capacity" {
		h.seen = ""
		r.Attrs(func(a slog.Attr) bool {
			if a.Key != "what" {
				if f, ok := a.Value.Any().(float64); ok {
					h.seen += fmt.Sprintf(" %s=%.2f", a.Key, f)
				}
			}
			return true
		})
		return nil
	}
	if r.Level < slog.LevelWarn || h.left <= 0 {
		return nil
	}
	h.left--
	fmt.Fprintf(h.w, "%s %s", r.Time.Format("15:04:05.000"), r.Message)
	r.Attrs(func(a slog.Attr) bool {
		fmt.Fprintf(h.w, " %s=%v", a.Key, a.Value)
		return true
	})
	fmt.Fprintln(h.w)
	return nil
}

func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.WriteHeapProfile(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// pauseWatch follows a capacity run from its first acquisition to the end
// of its hold: the longest delay of a 10 ms ticker in this process (the
// process went without the CPU, or its goroutines waited on the Go
// scheduler; a pause longer than a lease's slack delays every heartbeat by
// as much), and when the first lock was lost, with the longest delay seen
// until then. A run that loses locks can so be told apart: this process
// paused, or the backend renewed less than admission had taken.
type pauseWatch struct {
	done, stopped chan struct{}
	once          sync.Once
	// Written by the watch until stop returns.
	longest, firstLoss, longestBeforeLoss time.Duration // firstLoss: since the start; 0: none
	// The machine's CPU steal (see machineCPU), sampled every 250 ms: the
	// most of any sample, the most in the 5 s before the first loss, and
	// the share over the whole watch, in percent of all cores (-1: unknown).
	stealMax, stealBeforeLoss, stealAll int
}

func watchPauses(c *dynamolock.Client, began time.Time) *pauseWatch {
	w := &pauseWatch{done: make(chan struct{}), stopped: make(chan struct{}), stealMax: -1, stealBeforeLoss: -1, stealAll: -1}
	go func() {
		defer close(w.stopped)
		const tick = 10 * time.Millisecond
		const sampleTicks = 25 // a CPU sample every 250 ms
		t := time.NewTicker(tick)
		defer t.Stop()
		last := time.Now()
		first := readMachineCPU()
		prev := first
		var recent [20]int // the last 5 s of steal samples, a ring
		ticks := 0
		defer func() { w.stealAll = readMachineCPU().stealPercent(first) }()
		for {
			select {
			case <-w.done:
				return
			case <-t.C:
				now := time.Now() // when this goroutine ran, not when the tick was due
				w.longest = max(w.longest, now.Sub(last)-tick)
				if ticks++; ticks%sampleTicks == 0 {
					cur := readMachineCPU()
					if st := cur.stealPercent(prev); st >= 0 {
						w.stealMax = max(w.stealMax, st)
						recent[(ticks/sampleTicks)%len(recent)] = st
					}
					prev = cur
				}
				if w.firstLoss == 0 && c.Stats().LocksLost > 0 {
					w.firstLoss, w.longestBeforeLoss = now.Sub(began), w.longest
					if w.stealMax >= 0 {
						w.stealBeforeLoss = slices.Max(recent[:])
					}
				}
				last = time.Now() // after Stats: its wait is not this process's pause
			}
		}
	}()
	return w
}

// stop ends the watch; its fields are final once it returns.
func (w *pauseWatch) stop() {
	w.once.Do(func() {
		close(w.done)
		<-w.stopped
	})
}
