package dynamolock

import (
	"errors"

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
