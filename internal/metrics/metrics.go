// Package metrics counts what a client does: the figures behind
// Client.Stats, and, when a meter provider is configured, the same figures
// as OpenTelemetry instruments (their names, units and attributes are
// documented on the root's WithMeterProvider). It is told plain values (an
// operation's name, an outcome, a cause) and decides nothing: what an error
// means is the caller's to say.
package metrics

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Set is one client's counters and, optionally, its instruments. Its
// methods are safe for concurrent use.
type Set struct {
	otel *instruments // nil: counters only

	calls    atomic.Uint64
	beatsOK  atomic.Uint64
	beatsErr atomic.Uint64
	late     atomic.Uint64
	lost     atomic.Uint64
	backlog  atomic.Int64
	admitted atomic.Uint64 // acquisitions that waited for heartbeat capacity

	throttledAll atomic.Uint64
	throttledBy  [Limits]atomic.Uint64

	waiters   atomic.Int64
	contended atomic.Uint64
	holds     atomic.Uint64
	holdNanos atomic.Int64
	reported  atomicFloat // capacity units DynamoDB reported
	estimated atomicFloat // write units of failed conditional writes, estimated
}

// Limits is the number of throttle limits counted apart (the root's
// ThrottleLimit values below it: see Throttled).
const Limits = 5

// New returns the counters of a client and, with a meter provider, its
// instruments, on the meter named meterName; heldLocks tells the
// asynchronous count of held locks what the client holds when collected.
// The errors are those of the instruments that could not be made.
func New(mp metric.MeterProvider, meterName string, heldLocks func() int64) (*Set, []error) {
	s := new(Set)
	if mp == nil {
		return s, nil
	}
	o, errs := newInstruments(mp.Meter(meterName), heldLocks)
	if len(errs) > 0 {
		return nil, errs
	}
	s.otel = o
	return s, nil
}

// Call counts a DynamoDB call named op.
func (s *Set) Call(ctx context.Context, op string) {
	s.calls.Add(1)
	if s.otel != nil {
		s.otel.calls.Add(ctx, 1, metric.WithAttributes(attribute.String("operation", op)))
	}
}

// Acquired records an acquiring call that ended with outcome after d
// (instruments only: Stats has no count of acquisitions).
func (s *Set) Acquired(ctx context.Context, outcome string, d time.Duration) {
	if s.otel == nil {
		return
	}
	s.otel.acquisitions.Add(ctx, 1, outcomeAttr(outcome))
	s.otel.acquireTime.Record(ctx, d.Seconds(), outcomeAttr(outcome))
}

// Heartbeat counts a heartbeat write with outcome: "ok" and "error" count
// in Stats too ("lost" in the instruments only: the loss is counted by
// Lost).
func (s *Set) Heartbeat(ctx context.Context, outcome string) {
	switch outcome {
	case "ok":
		s.beatsOK.Add(1)
	case "error":
		s.beatsErr.Add(1)
	}
	if s.otel != nil {
		s.otel.heartbeats.Add(ctx, 1, outcomeAttr(outcome))
	}
}

// Lost counts a held lock lost for cause.
func (s *Set) Lost(cause string) {
	s.lost.Add(1)
	if s.otel != nil {
		s.otel.lostLocks.Add(context.Background(), 1, metric.WithAttributes(attribute.String("cause", cause)))
	}
}

// Throttled counts a call named op that DynamoDB throttled at the limit
// numbered limit (counted apart below Limits), named reason.
func (s *Set) Throttled(ctx context.Context, op string, limit uint8, reason string) {
	s.throttledAll.Add(1)
	if limit < Limits {
		s.throttledBy[limit].Add(1)
	}
	if s.otel != nil {
		s.otel.throttles.Add(ctx, 1, metric.WithAttributes(attribute.String("operation", op), attribute.String("reason", reason)))
	}
}

// LateBeat counts a heartbeat started more than one period late,
// AdmissionWait an acquisition that waited for heartbeat capacity, and
// SetBacklog sets the locks due for a heartbeat that wait for a worker.
func (s *Set) LateBeat()        { s.late.Add(1) }
func (s *Set) AdmissionWait()   { s.admitted.Add(1) }
func (s *Set) SetBacklog(n int) { s.backlog.Store(int64(n)) }

// WaitStarted counts an acquiring call of kind that started waiting behind
// a holder; WaitEnded, the end of such a call with outcome.
func (s *Set) WaitStarted(ctx context.Context, kind string) {
	s.waiters.Add(1)
	if s.otel != nil {
		s.otel.waiters.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind)))
	}
}

func (s *Set) WaitEnded(ctx context.Context, kind, outcome string) {
	s.waiters.Add(-1)
	s.contended.Add(1)
	if s.otel != nil {
		s.otel.waiters.Add(ctx, -1, metric.WithAttributes(attribute.String("kind", kind)))
		s.otel.contended.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind), attribute.String("outcome", outcome)))
	}
}

// Held records a lock held for d, from its grant to its release (lost
// false) or loss.
func (s *Set) Held(d time.Duration, lost bool) {
	s.holds.Add(1)
	s.holdNanos.Add(int64(d))
	if s.otel != nil {
		outcome := "released"
		if lost {
			outcome = "lost"
		}
		s.otel.holdTime.Record(context.Background(), d.Seconds(), outcomeAttr(outcome))
	}
}

// Consumed records units of capacity consumed by a call of op: reported by
// DynamoDB, or estimated (a failed conditional write, whose error does not
// say).
func (s *Set) Consumed(ctx context.Context, op string, units float64, estimated bool) {
	if units <= 0 {
		return
	}
	source := "reported"
	if estimated {
		s.estimated.add(units)
		source = "estimated"
	} else {
		s.reported.add(units)
	}
	if s.otel != nil {
		s.otel.capacity.Add(ctx, units, metric.WithAttributes(attribute.String("operation", op), attribute.String("source", source)))
	}
}

// Snapshot is what the counters read at one moment (see Client.Stats for
// what each means).
type Snapshot struct {
	Backlog                              int
	BeatsOK, BeatsErr, Late, Lost, Calls uint64
	AdmissionWaits                       uint64
	Throttled                            uint64
	ThrottledBy                          [Limits]uint64
	Waiters                              int
	Contended, Holds                     uint64
	HoldTime                             time.Duration
	Reported, Estimated                  float64
}

// Snapshot reads the counters.
func (s *Set) Snapshot() Snapshot {
	n := Snapshot{
		Backlog:        int(s.backlog.Load()),
		BeatsOK:        s.beatsOK.Load(),
		BeatsErr:       s.beatsErr.Load(),
		Late:           s.late.Load(),
		Lost:           s.lost.Load(),
		Calls:          s.calls.Load(),
		AdmissionWaits: s.admitted.Load(),
		Throttled:      s.throttledAll.Load(),
		Waiters:        int(s.waiters.Load()),
		Contended:      s.contended.Load(),
		Holds:          s.holds.Load(),
		HoldTime:       time.Duration(s.holdNanos.Load()),
		Reported:       s.reported.load(),
		Estimated:      s.estimated.load(),
	}
	for i := range s.throttledBy {
		n.ThrottledBy[i] = s.throttledBy[i].Load()
	}
	return n
}

// atomicFloat is a float64 added to atomically.
type atomicFloat struct{ bits atomic.Uint64 }

func (f *atomicFloat) add(v float64) {
	for {
		old := f.bits.Load()
		if f.bits.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+v)) {
			return
		}
	}
}

func (f *atomicFloat) load() float64 { return math.Float64frombits(f.bits.Load()) }

// durationBuckets are the bucket boundaries, in seconds, of the duration
// histograms: fine below a second, where uncontended acquisitions lie,
// coarse up to the minutes a contended one can wait (the SDK's default
// buckets are meant for milliseconds).
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

// holdBuckets are the bucket boundaries, in seconds, of
// dynamolock.hold.duration: a lock is held from milliseconds (a
// critical section) to days (a leader), so they run from 10 ms to a day.
var holdBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400}

type instruments struct {
	acquisitions metric.Int64Counter
	acquireTime  metric.Float64Histogram
	heartbeats   metric.Int64Counter
	lostLocks    metric.Int64Counter
	calls        metric.Int64Counter
	throttles    metric.Int64Counter
	held         metric.Int64ObservableUpDownCounter
	waiters      metric.Int64UpDownCounter
	contended    metric.Int64Counter
	holdTime     metric.Float64Histogram
	capacity     metric.Float64Counter
}

func newInstruments(m metric.Meter, heldLocks func() int64) (*instruments, []error) {
	var o instruments
	var errs []error
	keep := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	var err error
	o.acquisitions, err = m.Int64Counter("dynamolock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Lock acquisitions by outcome."))
	keep(err)
	o.acquireTime, err = m.Float64Histogram("dynamolock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time an acquisition took, waiting included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	keep(err)
	o.heartbeats, err = m.Int64Counter("dynamolock.heartbeats", metric.WithUnit("{heartbeat}"),
		metric.WithDescription("Heartbeat writes by outcome."))
	keep(err)
	o.lostLocks, err = m.Int64Counter("dynamolock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Held locks lost, by cause."))
	keep(err)
	o.calls, err = m.Int64Counter("dynamolock.dynamodb.calls", metric.WithUnit("{call}"),
		metric.WithDescription("DynamoDB API calls, by operation."))
	keep(err)
	o.throttles, err = m.Int64Counter("dynamolock.dynamodb.throttled", metric.WithUnit("{call}"),
		metric.WithDescription("DynamoDB API calls refused for throughput, by operation and the limit DynamoDB named."))
	keep(err)
	// Asynchronous: the value is the size of the client's registry, read
	// when collected, so it cannot drift from what the client holds.
	o.held, err = m.Int64ObservableUpDownCounter("dynamolock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by the client."),
		metric.WithInt64Callback(func(_ context.Context, obs metric.Int64Observer) error {
			obs.Observe(heldLocks())
			return nil
		}))
	keep(err)
	o.waiters, err = m.Int64UpDownCounter("dynamolock.waiters", metric.WithUnit("{call}"),
		metric.WithDescription("Acquiring calls waiting behind a holder now, by kind."))
	keep(err)
	o.contended, err = m.Int64Counter("dynamolock.acquire.contended", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquiring calls that waited behind a holder, by kind and outcome."))
	keep(err)
	o.holdTime, err = m.Float64Histogram("dynamolock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held, from its grant to its release or loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	keep(err)
	o.capacity, err = m.Float64Counter("dynamolock.dynamodb.consumed_capacity", metric.WithUnit("{capacity_unit}"),
		metric.WithDescription("DynamoDB capacity units consumed, by operation and source (reported by DynamoDB, or estimated for failed conditional writes)."))
	keep(err)
	return &o, errs
}

func outcomeAttr(s string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("outcome", s))
}
