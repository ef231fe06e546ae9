package dynamolock

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/renewals"
)

// admit makes an acquisition of n locks with lease wait while the client
// could not renew them in time, and reserves their share of the
// renewals once it lets them go; the acquisition calls the returned
// admission's end when it ends, with whether it holds its locks then. It waits
// while either holds:
//
//   - the renewal rate the held locks need at least (renewalNeed: the
//     scheduler's own rule, one renewal per lease less two round trips
//     each), plus the share of the acquisitions let go and not yet held
//     (each counted from the moment it goes, so that many acquisitions at
//     once cannot all pass one look at the load), plus these n, exceeds
//     the admission fraction of the rate the heartbeat workers sustain as
//     the meter measures it (see renewals.Meter). That rate is
//     measured while the acquisitions' own writes (and their retries)
//     compete with the heartbeats for DynamoDB, so it is what is left for
//     heartbeats;
//   - the heartbeat that has waited longest for a worker has less than
//     admissionMargin of its lease left: the scheduler's margin no longer
//     holds under the load already admitted (a burst, the acquisitions'
//     own writes, a slower backend), whatever the rate said;
//   - a quarter of WithHeartbeatConcurrency acquisitions (at least one)
//     were let go in the last moments (see takeAdmitSlot): a burst of
//     acquisitions would otherwise fill DynamoDB's queue ahead of the
//     heartbeats, and every call's round trip, the new locks' own first
//     writes included (their lease counts from before them), would grow
//     with it. An acquisition that finds no free slot at the end of its
//     wait, while the renewals are there, goes then without one (as many
//     at once as there are slots).
//
// Taking more would push held locks past their lease. The wait ends when
// the held locks' demand falls (releases, losses), the measured rate
// rises or the backlog drains, and gives up at deadline (the
// acquisition's own: its lease plus the additional time to wait, from its
// start) with a *LockNotGrantedError matching ErrHeartbeatCapacity, or
// when ctx ends or the client closes.
//
// Nothing is measured until a first heartbeat completes: until then every
// acquisition is admitted (and reserved); so too once the client holds no
// lock and no beat ended for renewals.Memory (what the meter read is then as
// old as the last lock). Without background heartbeats there is nothing to
// protect; nor when the client holds no lock and has let no acquisition
// go, for an acquisition of one key.
func (c *Client) admit(ctx context.Context, n int, lease time.Duration, deadline time.Time, what string) (admission, error) {
	if err := checkContext(ctx); err != nil {
		// Every acquisition passes here before its first call: a kind of
		// holder whose entry does not check ctx (Client.enter) is still
		// refused before it reaches DynamoDB.
		return admission{}, err
	}
	if c.cfg.heartbeatPeriod <= 0 || c.cfg.heartbeatAdmission == 0 {
		return admission{}, nil
	}
	s := c.sched
	extra := float64(n) * renewalNeed(lease, s.meter.RoundTrip()) // the scheduler's own rule
	units := int64(math.Ceil(extra * reserveUnit))
	waited := false
	for {
		// Reserved first, then the demand: the scheduler counts a held
		// lock's need before it drops the lock's reservation.
		reserved := s.reserved.Load()
		demand, capacity, slack := s.load()
		if demand == 0 && !s.meter.HeardSince(c.now(), renewals.Memory) {
			// Nothing held, and no beat for longer than the meter
			// remembers: what it read is as old as the last lock, and no
			// beat can read again until a lock is held. Count it as
			// unmeasured, as a fresh client does (reservations and slots
			// still apply): acquisitions let go and waiting for keys held
			// elsewhere kept an idle client's next ones out for good
			// (seed 48476682 of the simulation).
			capacity = 0
		}
		need := demand + float64(reserved)/reserveUnit + extra
		// A client that holds nothing and has let nothing go takes one
		// key whatever the meter says: there is no renewal to protect,
		// and only that key's heartbeats can measure the rate again. (The
		// meter learns from beats alone: a round trip measured in one slow
		// moment would otherwise keep every single-key acquisition of an
		// idle client out for good, Do without a deadline waiting for
		// ever: seed 9243 of the simulation.)
		idle := n == 1 && demand == 0 && reserved == 0 && slack >= admissionMargin
		fits := idle || capacity == 0 || need <= c.cfg.heartbeatAdmission*capacity && slack >= admissionMargin
		if fits {
			if slot, gen, ok := s.takeAdmitSlot(c.now()); ok {
				if !s.reserved.CompareAndSwap(reserved, reserved+units) {
					s.freeAdmitSlot(slot, gen)
					continue
				}
				return admission{s: s, units: units, slot: slot, gen: gen}, nil
			}
		}
		now := c.now()
		if fits && !now.Before(deadline) {
			// At the end of its wait only the slots hold it back, taken by
			// other acquisitions: the renewals are there, so it goes now,
			// without a slot, rather than be refused without a cause (the
			// simulation's invariant 14). As many such at once as there
			// are slots: acquisitions that wait alike all reach their
			// deadline together, and must not go as one burst.
			if n := s.slotless.Add(1); n <= int32(len(s.admitUntil)) {
				if s.reserved.CompareAndSwap(reserved, reserved+units) {
					return admission{s: s, units: units, slot: -1}, nil
				}
				s.slotless.Add(-1)
				continue
			}
			s.slotless.Add(-1)
			return admission{}, notGranted(fmt.Errorf("%w: the acquisitions this client lets go at once (%d, a quarter of its %d heartbeat workers, and as many more at the end of their wait) were all under way%s",
				ErrHeartbeatCapacity, len(s.admitUntil), c.cfg.heartbeatConcurrency, c.capacityFix()), "%s", what)
		}
		if !now.Before(deadline) {
			if need <= c.cfg.heartbeatAdmission*capacity {
				return admission{}, notGranted(fmt.Errorf("%w: the heartbeat that waited longest had %.0f%% of its lease left (at least %.0f%% needed)%s",
					ErrHeartbeatCapacity, 100*max(slack, 0), 100*admissionMargin, c.capacityFix()), "%s", what)
			}
			if _, code, ok := s.meter.Ceiling(now); ok {
				return admission{}, notGranted(fmt.Errorf("%w: held locks and this acquisition need %.3g renewals/s, more than %g of the %.3g the client's heartbeats got through since DynamoDB throttled them (%s)%s",
					ErrHeartbeatCapacity, need, c.cfg.heartbeatAdmission, capacity, ThrottleLimit(code).advice(), c.capacityFix()), "%s", what)
			}
			return admission{}, notGranted(fmt.Errorf("%w: held locks and this acquisition need %.3g renewals/s, more than %g of the %.3g the client sustains%s",
				ErrHeartbeatCapacity, need, c.cfg.heartbeatAdmission, capacity, c.capacityFix()), "%s", what)
		}
		if !waited {
			waited = true
			c.metrics.AdmissionWait()
			c.cfg.logger.LogAttrs(ctx, slog.LevelDebug, "waiting for heartbeat capacity", slog.String("what", what),
				slog.Float64("need", need), slog.Float64("capacity", capacity), slog.Float64("slack", slack))
		}
		if err := c.pause(ctx, min(deadline.Sub(now), admissionPoll), nil, what); err != nil {
			return admission{}, err
		}
	}
}

// admissionMargin is the share of its lease the most overdue queued
// heartbeat must still have for admission control to take a new lock. At
// the admission fraction (0.6 by default) and a steady rate, a saturated
// scheduler sends each beat with about 1 − fraction of its lease left;
// below this margin the rate has fallen or the admitted load is more than
// it showed.
const admissionMargin = 0.1

// reserveUnit: reservations count in millionths of a renewal per second,
// so that taking one back is exact.
const reserveUnit = 1e6

// admissionPoll is how often a waiting acquisition looks at the load again.
const admissionPoll = 20 * time.Millisecond

func quoteKey(key string) string { return "key " + strconv.Quote(key) }

// admission is an admitted acquisition's reservation and slot (-1: none);
// the zero admission has neither.
type admission struct {
	s     *scheduler
	units int64
	slot  int
	gen   uint64
}

// end ends the reservation and frees the slot (if it is still this
// acquisition's), once the acquisition is over.
func (a admission) end(held bool) {
	if a.s == nil {
		return
	}
	if a.slot >= 0 {
		a.s.freeAdmitSlot(a.slot, a.gen)
	} else {
		a.s.slotless.Add(-1)
	}
	a.s.unreserve(a.units, held)
}

// takeAdmitSlot takes one of the slots of acquisitions let go at once, if
// one is free: never taken, freed by its acquisition's end, or taken for
// longer than a few heartbeat round trips. By then the acquisition's first
// write has been answered, and one that goes on waiting for a lock held
// elsewhere mostly sleeps between reads and must not keep others out.
func (s *scheduler) takeAdmitSlot(now time.Time) (slot int, gen uint64, ok bool) {
	hold := admitSlotHold
	if rtt := s.meter.RoundTrip(); rtt > 0 {
		hold = min(max(4*rtt, 10*time.Millisecond), time.Second)
	}
	t := s.at(now)
	s.admitMu.Lock()
	defer s.admitMu.Unlock()
	for i := range s.admitUntil {
		if s.admitUntil[i] <= t {
			s.admitGen[i]++
			s.admitUntil[i] = t + int64(hold)
			return i, s.admitGen[i], true
		}
	}
	return 0, 0, false
}

// freeAdmitSlot frees slot if it is still taken by the acquisition that
// took it as gen.
func (s *scheduler) freeAdmitSlot(slot int, gen uint64) {
	s.admitMu.Lock()
	if s.admitGen[slot] == gen {
		s.admitUntil[slot] = 0
	}
	s.admitMu.Unlock()
}

// admitSlotHold is how long an admitted acquisition keeps its slot at most
// before a heartbeat's round trip was measured.
const admitSlotHold = 100 * time.Millisecond

// capacityFix is what a refusal for heartbeat capacity advises: a client
// without a session renews each lock with a write of its own, so
// WithSession (one write per heartbeat period for every lock) is the fix;
// one with a session renews its locks by its session, and only its
// acquisitions' own renewals count.
func (c *Client) capacityFix() string {
	if c.cfg.session {
		return "; wait and try again, or raise WithHeartbeatConcurrency"
	}
	return "; to hold this many locks, make the client with New(..., WithSession()), which renews them all with one write per heartbeat period, or raise WithHeartbeatConcurrency"
}
