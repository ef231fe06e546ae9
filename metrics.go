package dynamolock

import (
	"context"
	"errors"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/metrics"
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
	m := c.metrics.Snapshot()
	return Stats{
		HeldLocks:        c.here.count(),
		HeartbeatBacklog: m.Backlog,
		HeartbeatsSent:   m.BeatsOK,
		HeartbeatErrors:  m.BeatsErr,
		LateHeartbeats:   m.Late,
		LocksLost:        m.Lost,
		DynamoDBCalls:    m.Calls,
		AdmissionWaits:   m.AdmissionWaits,

		Throttled:            m.Throttled,
		ThrottledKeyRange:    m.ThrottledBy[ThrottleKeyRange],
		ThrottledProvisioned: m.ThrottledBy[ThrottleProvisioned],
		ThrottledMaxOnDemand: m.ThrottledBy[ThrottleMaxOnDemand],
		ThrottledAccount:     m.ThrottledBy[ThrottleAccount],

		Waiters:               m.Waiters,
		ContendedAcquisitions: m.Contended,
		HoldsEnded:            m.Holds,
		HoldTime:              m.HoldTime,
		ConsumedCapacity:      m.Reported,
		UnreportedCapacity:    m.Estimated,
	}
}

// The metrics count the limits apart as ThrottleLimit numbers them: a
// compile-time check that they agree.
const _ = uint(metrics.Limits-numThrottleLimits) + uint(numThrottleLimits-metrics.Limits)

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
