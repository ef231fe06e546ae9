package dynamolock

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// The metrics of contention and cost (see WithMeterProvider): how many
// calls wait now, how many waited, how long locks are held, and what the
// calls cost in capacity units. Their figures are in Stats too.

// holdBuckets are the bucket boundaries, in seconds, of
// dynamolock.hold.duration: a lock is held from milliseconds (a
// critical section) to days (a leader), so they run from 10 ms to a day.
var holdBuckets = []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400}

// contentionCounts are the figures behind those metrics, for Stats.
type contentionCounts struct {
	waiters   atomic.Int64
	contended atomic.Uint64
	holds     atomic.Uint64
	holdNanos atomic.Int64
	reported  atomicFloat // capacity units DynamoDB reported
	estimated atomicFloat // write units of failed conditional writes, estimated
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

// withContention returns s with the figures of c.
func (s Stats) withContention(c *contentionCounts) Stats {
	s.Waiters = int(c.waiters.Load())
	s.ContendedAcquisitions = c.contended.Load()
	s.HoldsEnded = c.holds.Load()
	s.HoldTime = time.Duration(c.holdNanos.Load())
	s.ConsumedCapacity = c.reported.load()
	s.UnreportedCapacity = c.estimated.load()
	return s
}

// waitStarted counts an acquiring call of kind that started waiting behind
// a holder; waitEnded, the end of such a call with outcome.
func (m *clientMetrics) waitStarted(ctx context.Context, kind string) {
	m.contention.waiters.Add(1)
	if m.otel != nil {
		m.otel.waiters.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind)))
	}
}

func (m *clientMetrics) waitEnded(ctx context.Context, kind, outcome string) {
	m.contention.waiters.Add(-1)
	m.contention.contended.Add(1)
	if m.otel != nil {
		m.otel.waiters.Add(ctx, -1, metric.WithAttributes(attribute.String("kind", kind)))
		m.otel.contended.Add(ctx, 1, metric.WithAttributes(attribute.String("kind", kind), attribute.String("outcome", outcome)))
	}
}

// held records a lock held for d, from its grant to its release (lost
// false) or loss.
func (m *clientMetrics) held(d time.Duration, lost bool) {
	m.contention.holds.Add(1)
	m.contention.holdNanos.Add(int64(d))
	if m.otel != nil {
		outcome := "released"
		if lost {
			outcome = "lost"
		}
		m.otel.holdTime.Record(context.Background(), d.Seconds(), outcomeAttr(outcome))
	}
}

// consumed records units of capacity consumed by a call of op: reported by
// DynamoDB, or estimated (a failed conditional write, whose error does not
// say).
func (m *clientMetrics) consumed(ctx context.Context, op string, units float64, estimated bool) {
	if units <= 0 {
		return
	}
	source := "reported"
	if estimated {
		m.contention.estimated.add(units)
		source = "estimated"
	} else {
		m.contention.reported.add(units)
	}
	if m.otel != nil {
		m.otel.capacity.Add(ctx, units, metric.WithAttributes(attribute.String("operation", op), attribute.String("source", source)))
	}
}

// contentionInstruments are the instruments of those metrics.
type contentionInstruments struct {
	waiters   metric.Int64UpDownCounter
	contended metric.Int64Counter
	holdTime  metric.Float64Histogram
	capacity  metric.Float64Counter
}

func newContentionInstruments(m metric.Meter) (contentionInstruments, error) {
	var o contentionInstruments
	var err, e error
	o.waiters, e = m.Int64UpDownCounter("dynamolock.waiters", metric.WithUnit("{call}"),
		metric.WithDescription("Acquiring calls waiting behind a holder now, by kind."))
	err = joinErrors(err, e)
	o.contended, e = m.Int64Counter("dynamolock.acquire.contended", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Acquiring calls that waited behind a holder, by kind and outcome."))
	err = joinErrors(err, e)
	o.holdTime, e = m.Float64Histogram("dynamolock.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Time a lock was held, from its grant to its release or loss."),
		metric.WithExplicitBucketBoundaries(holdBuckets...))
	err = joinErrors(err, e)
	o.capacity, e = m.Float64Counter("dynamolock.dynamodb.consumed_capacity", metric.WithUnit("{capacity_unit}"),
		metric.WithDescription("DynamoDB capacity units consumed, by operation and source (reported by DynamoDB, or estimated for failed conditional writes)."))
	err = joinErrors(err, e)
	return o, err
}
