package dynamolock

import (
	"math"
	"sync/atomic"
	"time"
)

// capacityMeter measures the renewal rate a client's heartbeat workers
// sustain, the capacity that admission control (see [Client.admit])
// compares the held locks' need with. The scheduler's loop feeds it (beat
// for every successful heartbeat, idle when a worker is free) and is the
// only goroutine that writes it; admission reads what it publishes
// (capacity, roundTrip) from any goroutine.
type capacityMeter struct {
	workers int // WithHeartbeatConcurrency

	// Published (float64 bits; nanoseconds).
	capacityBits  atomic.Uint64 // renewals per second the workers sustain; 0: not measured yet
	rttNanos      atomic.Int64  // the average round trip of recent beats (see beat)
	riseFromNanos atomic.Int64  // Unix ns from which a stale saturated rate rises (see capacityAt); 0: it does not
	lastBeatNanos atomic.Int64  // Unix ns when the last successful beat ended; 0: none yet

	// Owned by the scheduler's loop goroutine.
	rtt      time.Duration // average of successful beats' round trips, weighted by their age (see beat)
	lastBeat time.Time     // when the last successful beat ended
	// The renewal rate measured while every worker was busy: a window
	// counts successful beats, and measures the rate if no worker was
	// ever free during it.
	windowStart time.Time
	windowBeats int
	windowIdle  bool        // a worker was free at some point of the window
	satWindows  []satWindow // the last saturated windows, oldest first
	satRate     float64     // the lowest rate of those in measureMemory, or risen since; 0: none yet
	satAt       time.Time   // when the last saturated window ended
}

func newCapacityMeter(workers int) capacityMeter {
	return capacityMeter{workers: workers, satWindows: make([]satWindow, 0, measureMemory/measureWindow)}
}

// beat counts a successful heartbeat that took rtt, ending at now.
//
// The round trip is an average weighted by age: a beat's weight falls by
// e for every rttMemory that passes after it (at least 1/rttMinWeight of
// the average goes to each beat, so that beats ending at one instant all
// count). A moving average over the last beats, whatever their age, kept
// one beat that spanned a pause of the process (12 s) in the capacity for
// as many beats as it took to wash out: a client renewing one lock a
// second read a tenth of the rate its beats showed for 15 s after it, and
// refused acquisitions without cause (the simulation's seed 48476682,
// invariant 14). Weighted by age, the meter forgets within its memory
// what it no longer sees; while beats are slow, every one of them says so.
func (m *capacityMeter) beat(rtt time.Duration, now time.Time) {
	if m.rtt == 0 {
		m.rtt = rtt
	} else {
		w := 1 - math.Exp(-float64(now.Sub(m.lastBeat))/float64(rttMemory))
		w = max(w, 1.0/rttMinWeight)
		m.rtt += time.Duration(w * float64(rtt-m.rtt))
	}
	m.lastBeat = now
	m.rttNanos.Store(int64(m.rtt))
	m.lastBeatNanos.Store(now.UnixNano())
	m.measure(now)
}

// heardSince reports whether a successful beat ended within d before now
// (true before any beat: nothing measured is not stale).
func (m *capacityMeter) heardSince(now time.Time, d time.Duration) bool {
	last := m.lastBeatNanos.Load()
	return last == 0 || now.UnixNano()-last <= int64(d)
}

// idle records that a worker was free: the current window measures no
// saturated rate.
func (m *capacityMeter) idle() { m.windowIdle = true }

// capacity is the renewal rate per second the workers sustain, as last
// measured; 0 before the first successful beat.
func (m *capacityMeter) capacity() float64 { return math.Float64frombits(m.capacityBits.Load()) }

// capacityAt is capacity as of now: a stale saturated rate keeps rising by
// a quarter for every whole window that passed since the last beat ended
// (up to workers / round trip). A window in which no beat ended had a free
// worker: without this, a client that holds nothing sends no beat, no
// window closes, and a rate measured in one slow moment would keep every
// acquisition out for good (issue 21, invariant 14 of the simulation).
func (m *capacityMeter) capacityAt(now time.Time) float64 {
	c := m.capacity()
	from := m.riseFromNanos.Load()
	rtt := m.roundTrip()
	if c == 0 || from == 0 || rtt <= 0 {
		return c
	}
	k := (now.UnixNano() - from) / int64(measureWindow)
	if k <= 0 {
		return c
	}
	return rise(c, k, float64(m.workers)/rtt.Seconds())
}

// rise is a stale saturated rate after k windows with a free worker: a
// quarter more for each, never above little (workers / round trip) nor
// below rate.
func rise(rate float64, k int64, little float64) float64 {
	return max(rate, min(rate*math.Pow(1.25, float64(min(k, 64))), little))
}

// roundTrip is the average round trip of recent heartbeats (see beat); 0
// before the first successful beat.
func (m *capacityMeter) roundTrip() time.Duration { return time.Duration(m.rttNanos.Load()) }

// measure counts a successful beat and publishes the capacity: the lowest
// rate of the windows of the last measureMemory in which every worker
// stayed busy (what the workers and DynamoDB together sustained at their
// worst: a lock admitted at the average rate is lost in the next dip that
// lasts longer than its lease's slack), or, before any such window,
// workers / round trip (Little's law, from the age-weighted average of recent
// beats' round trips), which overestimates when the workers are not the
// bottleneck.
//
// Windows with a free worker measure no rate (the beats that end in one
// may have waited on DynamoDB in the window before). So that a short
// slowdown does not keep admission shut for good once beats are fast
// again (issue 21), a
// saturated rate older than measureHorizon rises by a quarter with every
// such window (up to workers / round trip), and the next saturated window
// replaces it outright. It rises step by step, not at once, because
// bursts leave windows with a free worker while DynamoDB is saturated, and
// jumping to Little's law then would admit far more than it can renew.
// Admission binds only once the held locks need more than a period allows
// (lease ≥ 2 periods): the scheduler is saturated then and measures a
// fresh rate every window.
func (m *capacityMeter) measure(now time.Time) {
	m.windowBeats++
	little := float64(m.workers) / m.rtt.Seconds()
	if elapsed := now.Sub(m.windowStart); elapsed >= measureWindow {
		rate := float64(m.windowBeats) / elapsed.Seconds()
		stale := now.Sub(m.satAt) > measureHorizon
		switch {
		case m.windowStart.IsZero():
		case !m.windowIdle:
			if stale {
				m.satWindows = m.satWindows[:0] // the next saturated window starts afresh
			}
			if len(m.satWindows) == cap(m.satWindows) {
				m.satWindows = append(m.satWindows[:0], m.satWindows[1:]...)
			}
			m.satWindows = append(m.satWindows, satWindow{end: now, rate: rate})
			m.satRate = math.Inf(1)
			for _, w := range m.satWindows {
				if now.Sub(w.end) <= measureMemory {
					m.satRate = min(m.satRate, w.rate)
				}
			}
			m.satAt = now
		case m.satRate > 0 && stale:
			// One window, or as many as passed with no beat since the
			// last one closed (past the horizon): capacityAt has been
			// answering that since.
			k := now.Sub(later(m.windowStart, m.satAt.Add(measureHorizon))) / measureWindow
			m.satRate = rise(m.satRate, max(int64(k), 1), little)
		}
		m.windowStart, m.windowBeats, m.windowIdle = now, 0, false
	}
	capacity := m.satRate
	if capacity == 0 {
		capacity = little
	}
	m.capacityBits.Store(math.Float64bits(capacity))
	var riseFrom int64
	if m.satRate > 0 && capacity < little {
		riseFrom = later(m.windowStart, m.satAt.Add(measureHorizon)).UnixNano()
	}
	m.riseFromNanos.Store(riseFrom)
}

// later returns the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// measureWindow is how long a window of the saturated rate lasts, and
// measureHorizon how long a saturated rate stands as measured after the
// last window that measured it.
const (
	measureWindow  = 500 * time.Millisecond
	measureHorizon = 3 * time.Second
	measureMemory  = 10 * time.Second // satWindows holds this many windows
)

// rttMemory is the time over which a beat's weight in the average round
// trip falls by e (see capacityMeter.beat); rttMinWeight bounds from
// below the weight of each beat, as 1/rttMinWeight.
const (
	rttMemory    = time.Second
	rttMinWeight = 64
)

// satWindow is one saturated window's end and rate.
type satWindow struct {
	end  time.Time
	rate float64
}
