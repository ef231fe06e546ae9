package dynamolock

import (
	"context"
	"errors"
	"sync/atomic"
	"time"
)

// Stats is a snapshot of a client's counters since [New].
type Stats struct {
	HeldLocks        int    // locks held now
	HeartbeatBacklog int    // locks due for a heartbeat that wait for a free slot
	HeartbeatsSent   uint64 // heartbeat writes that succeeded
	HeartbeatErrors  uint64 // heartbeat writes that failed without losing the lock
	LateHeartbeats   uint64 // heartbeats started more than one period after they were due
	LocksLost        uint64 // locks lost for any reason
	DynamoDBCalls    uint64 // calls made to DynamoDB
	AdmissionWaits   uint64 // acquisitions that waited for heartbeat capacity (see WithHeartbeatAdmission)

	// DynamoDB calls refused for throughput (a *ThrottlingError), in all
	// and by the limit DynamoDB named (the rest gave no reason).
	Throttled            uint64
	ThrottledKeyRange    uint64 // the lock key's partition: a hot key
	ThrottledProvisioned uint64 // a provisioned table's capacity
	ThrottledMaxOnDemand uint64 // an on-demand table's configured maximum
	ThrottledAccount     uint64 // the account's quota

	// Contention and cost (see WithMeterProvider for the metrics of the
	// same figures).
	Waiters               int           // acquiring calls waiting behind a holder now
	ContendedAcquisitions uint64        // acquiring calls that ended after waiting behind a holder
	HoldsEnded            uint64        // held locks that ended (released or lost)
	HoldTime              time.Duration // their time held, grant to release or loss, summed
	ConsumedCapacity      float64       // capacity units DynamoDB reported for the client's calls
	UnreportedCapacity    float64       // write units of failed conditional writes, which DynamoDB charges and does not report: estimated
}

// Stats returns the client's counters. It makes no DynamoDB call.
func (c *Client) Stats() Stats {
	m := c.metrics
	return Stats{
		HeldLocks:        c.here.count(),
		HeartbeatBacklog: int(m.backlog.Load()),
		HeartbeatsSent:   m.beatsOK.Load(),
		HeartbeatErrors:  m.beatsErr.Load(),
		LateHeartbeats:   m.late.Load(),
		LocksLost:        m.lostN.Load(),
		DynamoDBCalls:    m.calls.Load(),
		AdmissionWaits:   m.admitted.Load(),

		Throttled:            m.throttledAll.Load(),
		ThrottledKeyRange:    m.throttledBy[ThrottleKeyRange].Load(),
		ThrottledProvisioned: m.throttledBy[ThrottleProvisioned].Load(),
		ThrottledMaxOnDemand: m.throttledBy[ThrottleMaxOnDemand].Load(),
		ThrottledAccount:     m.throttledBy[ThrottleAccount].Load(),
	}.withContention(&m.contention)
}

// clientMetrics counts what the client does; the counters feed Stats and
// the OpenTelemetry instruments, when a meter provider is configured.
type clientMetrics struct {
	otel *otelInstruments // nil: counters only

	calls    atomic.Uint64
	beatsOK  atomic.Uint64
	beatsErr atomic.Uint64
	late     atomic.Uint64
	lostN    atomic.Uint64
	backlog  atomic.Int64
	admitted atomic.Uint64 // acquisitions that waited for heartbeat capacity

	throttledAll atomic.Uint64
	throttledBy  [numThrottleLimits]atomic.Uint64

	contention contentionCounts // waiters, contended acquisitions, holds, capacity (contention_metrics.go)
}

func newClientMetrics(o *otelInstruments) *clientMetrics { return &clientMetrics{otel: o} }

func (m *clientMetrics) call(ctx context.Context, op string) {
	m.calls.Add(1)
	if m.otel != nil {
		m.otel.call(ctx, op)
	}
}

func (m *clientMetrics) acquired(ctx context.Context, err error, waited time.Duration) {
	if m.otel == nil {
		return
	}
	m.otel.acquired(ctx, acquireOutcome(err), waited)
}

// acquireOutcome names how an acquiring call ended, for its metrics and its
// span.
func acquireOutcome(err error) string {
	if err == nil {
		return "acquired"
	}
	outcome := "acquired"
	var lng *LockNotGrantedError
	var te *TimeoutError
	var inv *InvalidArgumentError
	switch {
	case err == nil:
	case errors.As(err, &inv):
		outcome = "invalid"
	case errors.As(err, &te):
		outcome = "timeout"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		outcome = "cancelled"
	case errors.As(err, &lng):
		outcome = "not_granted"
	default:
		outcome = "error"
	}
	return outcome
}

func (m *clientMetrics) heartbeat(ctx context.Context, outcome string) {
	switch outcome {
	case "ok":
		m.beatsOK.Add(1)
	case "error":
		m.beatsErr.Add(1)
	}
	if m.otel != nil {
		m.otel.heartbeat(ctx, outcome)
	}
}

func (m *clientMetrics) lost(cause error) {
	m.lostN.Add(1)
	if m.otel != nil {
		m.otel.lost(cause)
	}
}

// throttled counts a call named op that DynamoDB throttled at limit.
func (m *clientMetrics) throttled(ctx context.Context, op string, limit ThrottleLimit) {
	m.throttledAll.Add(1)
	if limit < numThrottleLimits {
		m.throttledBy[limit].Add(1)
	}
	if m.otel != nil {
		m.otel.throttled(ctx, op, limit)
	}
}

func (m *clientMetrics) lateBeat()        { m.late.Add(1) }
func (m *clientMetrics) admissionWait()   { m.admitted.Add(1) }
func (m *clientMetrics) setBacklog(n int) { m.backlog.Store(int64(n)) }
