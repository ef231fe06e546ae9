package dynamolock

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"time"
)

// admit makes an acquisition of n locks with lease wait while the client
// could not renew them in time: while the renewal rate its held locks
// need at least (one renewal per lease each), with these n added, exceeds
// the admission fraction of the rate its heartbeat workers sustain, as
// the scheduler measures it (see scheduler.measure). Taking more
// would push held locks past their lease. The wait ends when the held
// locks' demand falls (releases, losses) or the measured rate rises, and
// gives up at deadline (the acquisition's own: its lease plus the
// additional time to wait, from its start) with a *LockNotGrantedError
// matching ErrHeartbeatCapacity, or when ctx ends or the client closes.
//
// Nothing is measured until a first heartbeat completes: until then every
// acquisition is admitted. Without background heartbeats there is nothing
// to protect.
func (c *Client) admit(ctx context.Context, n int, lease time.Duration, deadline time.Time, what string) error {
	if c.heartbeatPeriod <= 0 || c.heartbeatAdmission == 0 {
		return nil
	}
	extra := float64(n) / lease.Seconds()
	waited := false
	for {
		demand, capacity := c.sched.load()
		if capacity == 0 || demand+extra <= c.heartbeatAdmission*capacity {
			return nil
		}
		now := time.Now()
		if !now.Before(deadline) {
			return notGranted(fmt.Errorf("%w: held locks need %.0f renewals/s, the client sustains about %.0f",
				ErrHeartbeatCapacity, demand+extra, capacity), "%s", what)
		}
		if !waited {
			waited = true
			c.metrics.admissionWait()
			c.logger.LogAttrs(ctx, slog.LevelDebug, "waiting for heartbeat capacity", slog.String("what", what),
				slog.Float64("need", demand+extra), slog.Float64("capacity", capacity))
		}
		if err := c.pause(ctx, min(deadline.Sub(now), admissionPoll), nil, what); err != nil {
			return err
		}
	}
}

// admissionPoll is how often a waiting acquisition looks at the load again.
const admissionPoll = 20 * time.Millisecond

func quoteKey(key string) string { return "key " + strconv.Quote(key) }
