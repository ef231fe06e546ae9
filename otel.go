package dynamolock

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

const meterName = "github.com/arielsrv/dynamolock/v2"

// WithMeterProvider records the client's metrics through OpenTelemetry,
// named and typed as the OpenTelemetry semantic conventions do (units in
// UCUM, counts of things as annotations in braces, durations in seconds):
//
//   - dynamolock.acquisitions (counter, {acquisition}; attribute outcome:
//     acquired, timeout, not_granted, cancelled, invalid, error)
//   - dynamolock.acquire.duration (histogram, s, same outcome; explicit
//     buckets 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
//     2.5, 5, 10, 30, 60, 120: fine below a second, where uncontended
//     acquisitions lie, coarse up to the minutes a contended one can wait;
//     the SDK's default buckets are meant for milliseconds and would put a
//     4 ms and a 1.5 s acquisition in one bucket. A View can override them.)
//   - dynamolock.heartbeats (counter, {heartbeat}; outcome: ok, error, lost)
//   - dynamolock.locks.held (asynchronous up-down counter, {lock}: additive
//     across clients)
//   - dynamolock.locks.lost (counter, {lock}; cause: taken_over,
//     lease_expired, client_closed)
//   - dynamolock.dynamodb.calls (counter, {call}; operation)
//   - dynamolock.dynamodb.throttled (counter, {call}; operation, and
//     reason: the limit DynamoDB named, key_range, provisioned,
//     max_on_demand, account, or unspecified when it gave none; see
//     [ThrottlingError])
//   - dynamolock.waiters (up-down counter, {call}; kind: lock, locks,
//     semaphore, election, rwlock.read, rwlock.write): acquiring calls
//     waiting behind a holder now, from the first wait of the call to its
//     end
//   - dynamolock.acquire.contended (counter, {acquisition}; kind, outcome):
//     acquiring calls that waited behind a holder (a live holder, readers,
//     or waiters before them in a fair queue), counted as they end
//   - dynamolock.hold.duration (histogram, s; outcome: released, lost): a
//     lock's time from its grant to its release or loss; buckets 0.01,
//     0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600,
//     86400 (a critical section to a leader's day)
//   - dynamolock.dynamodb.consumed_capacity (counter, {capacity_unit};
//     operation, source: reported, estimated): the capacity units each
//     call consumed, as DynamoDB reports them (every request asks for
//     ReturnConsumedCapacity TOTAL, which costs nothing), and, estimated,
//     the write units of conditional writes that failed, which DynamoDB
//     charges but does not report (the larger of the item's size and 1 KB,
//     from the item the failure returns)
//
// No metric has a key as an attribute: their number is unbounded.
//
// Default: no metrics (a no-op). [Client.Stats] works either way, with
// the same figures.
func WithMeterProvider(mp metric.MeterProvider) ClientOption {
	return func(c *Client) { c.cfg.meterProvider = mp }
}

// durationBuckets are the bucket boundaries, in seconds, of the duration
// histograms (see WithMeterProvider).
var durationBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}

type otelInstruments struct {
	acquisitions metric.Int64Counter
	acquireTime  metric.Float64Histogram
	heartbeats   metric.Int64Counter
	lostLocks    metric.Int64Counter
	calls        metric.Int64Counter
	throttles    metric.Int64Counter
	held         metric.Int64ObservableUpDownCounter
	contentionInstruments
}

func newOtelInstruments(c *Client, mp metric.MeterProvider) (*otelInstruments, error) {
	m := mp.Meter(meterName)
	var o otelInstruments
	var err, e error
	o.acquisitions, e = m.Int64Counter("dynamolock.acquisitions", metric.WithUnit("{acquisition}"),
		metric.WithDescription("Lock acquisitions by outcome."))
	err = joinErrors(err, e)
	o.acquireTime, e = m.Float64Histogram("dynamolock.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Time an acquisition took, waiting included."),
		metric.WithExplicitBucketBoundaries(durationBuckets...))
	err = joinErrors(err, e)
	o.heartbeats, e = m.Int64Counter("dynamolock.heartbeats", metric.WithUnit("{heartbeat}"),
		metric.WithDescription("Heartbeat writes by outcome."))
	err = joinErrors(err, e)
	o.lostLocks, e = m.Int64Counter("dynamolock.locks.lost", metric.WithUnit("{lock}"),
		metric.WithDescription("Held locks lost, by cause."))
	err = joinErrors(err, e)
	o.calls, e = m.Int64Counter("dynamolock.dynamodb.calls", metric.WithUnit("{call}"),
		metric.WithDescription("DynamoDB API calls, by operation."))
	err = joinErrors(err, e)
	o.throttles, e = m.Int64Counter("dynamolock.dynamodb.throttled", metric.WithUnit("{call}"),
		metric.WithDescription("DynamoDB API calls refused for throughput, by operation and the limit DynamoDB named."))
	err = joinErrors(err, e)
	// Asynchronous: the value is the size of the client's registry, read
	// when collected, so it cannot drift from what the client holds.
	o.held, e = m.Int64ObservableUpDownCounter("dynamolock.locks.held", metric.WithUnit("{lock}"),
		metric.WithDescription("Locks held by the client."),
		metric.WithInt64Callback(func(_ context.Context, obs metric.Int64Observer) error {
			obs.Observe(int64(c.here.count()))
			return nil
		}))
	err = joinErrors(err, e)
	o.contentionInstruments, e = newContentionInstruments(m)
	err = joinErrors(err, e)
	if err != nil {
		return nil, err
	}
	return &o, nil
}

func outcomeAttr(s string) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("outcome", s))
}

func (o *otelInstruments) call(ctx context.Context, op string) {
	o.calls.Add(ctx, 1, metric.WithAttributes(attribute.String("operation", op)))
}

func (o *otelInstruments) throttled(ctx context.Context, op string, limit ThrottleLimit) {
	o.throttles.Add(ctx, 1, metric.WithAttributes(attribute.String("operation", op), attribute.String("reason", limit.String())))
}

func (o *otelInstruments) acquired(ctx context.Context, outcome string, d time.Duration) {
	o.acquisitions.Add(ctx, 1, outcomeAttr(outcome))
	o.acquireTime.Record(ctx, d.Seconds(), outcomeAttr(outcome))
}

func (o *otelInstruments) heartbeat(ctx context.Context, outcome string) {
	o.heartbeats.Add(ctx, 1, outcomeAttr(outcome))
}

func (o *otelInstruments) lost(cause error) {
	o.lostLocks.Add(context.Background(), 1, metric.WithAttributes(attribute.String("cause", lossCause(cause))))
}

// lossCause names the cause of a loss, for its metric and its span.
func lossCause(cause error) string {
	switch {
	case errors.Is(cause, ErrLockTakenOver):
		return "taken_over"
	case errors.Is(cause, ErrClientClosed):
		return "client_closed"
	}
	return "lease_expired"
}
