// Package renewals measures the renewal rate a client's heartbeat workers
// sustain: the capacity that admission control compares the held locks'
// need with (docs/HEARTBEATS.md, "How the rate is measured"). It is pure:
// the caller feeds it what its heartbeats showed, with the time, and reads
// what it publishes; it sends nothing and starts no goroutine.
package renewals

import (
	"math"
	"sync/atomic"
	"time"
)

// Meter measures the renewal rate a client's heartbeat workers sustain.
// One goroutine feeds it (Beat for every successful heartbeat, Idle when a
// worker is free, Throttled for a beat DynamoDB throttled at a table's or
// account's limit) and is the only one that writes it; what it publishes
// (Capacity, At, RoundTrip, Ceiling, HeardSince) is read from any
// goroutine.
type Meter struct {
	workers int // WithHeartbeatConcurrency
	span    int // the windows whose rate together counts (see worstSpan)

	// Published (float64 bits; nanoseconds).
	capacityBits  atomic.Uint64 // renewals per second the workers sustain; 0: not measured yet
	rttNanos      atomic.Int64  // the moving average of beats' round trips (see beat)
	riseFromNanos atomic.Int64  // Unix ns from which a stale saturated rate rises (see capacityAt); 0: it does not
	lastBeatNanos atomic.Int64  // Unix ns when the last successful beat ended; 0: none yet

	// A ceiling on the capacity after DynamoDB throttled a beat for the
	// table's or the account's limit (see throttled): the rate of beats
	// that got through, until when it holds (Unix ns; 0: none), and the
	// limit named.
	ceilingBits  atomic.Uint64
	ceilingUntil atomic.Int64
	ceilingLimit atomic.Uint32 // the caller's code for it

	// Owned by the goroutine that feeds the meter.
	rtt      time.Duration // moving average of successful beats' round trips (see Beat)
	lastBeat time.Time     // when the last successful beat ended
	// The renewal rate measured while every worker was busy: a window
	// counts successful beats, and measures the rate if no worker was
	// ever free during it.
	windowStart time.Time
	windowBeats int
	windowIdle  bool        // a worker was free at some point of the window
	lastRate    float64     // the successful beats per second of the last window, saturated or not
	satWindows  []satWindow // the last saturated windows, oldest first
	satRate     float64     // the worst span of those in rateMemory (see measure), or risen since; 0: none yet
	satAt       time.Time   // when the last saturated window ended
}

// NewMeter is the meter of a client with workers heartbeat workers whose
// locks have lease (the client's default): its spans (see worstSpan) last
// half such a lease, up to rateSpan.
func NewMeter(workers int, lease time.Duration) Meter {
	span := int(min(rateSpan, lease/2) / measureWindow)
	span = max(span, 1)
	// The memory's windows, and those before it that a span ending in it
	// begins with.
	return Meter{workers: workers, span: span, satWindows: make([]satWindow, 0, int(rateMemory/measureWindow)+span)}
}

// Beat counts a successful heartbeat that took rtt, ending at now.
//
// The round trip is a moving average that rises slowly and falls with
// time: a beat slower than the average counts for an eighth (one beat
// that spanned a pause of the process must not make the scheduler give up
// every lock waiting for a worker, nor shut admission); a faster one
// counts the more, the longer since the last beat, at least for an eighth,
// so that the average falls by e for every rttMemory of faster beats.
// Falling by an eighth a beat, whatever their age, a first beat that
// spanned a pause of 12 s kept the average at 4.8 s fifteen seconds of
// beats later, for a client renewing one lock a second: it read a tenth of
// the rate its beats showed, and refused acquisitions without cause (the
// simulation's seed 48476682, invariant 14).
func (m *Meter) Beat(rtt time.Duration, now time.Time) {
	switch {
	case m.rtt == 0:
		m.rtt = rtt
	case rtt >= m.rtt:
		m.rtt += (rtt - m.rtt) / 8
	default:
		w := 1 - math.Exp(-float64(now.Sub(m.lastBeat))/float64(rttMemory))
		m.rtt += time.Duration(max(w, 1.0/8) * float64(rtt-m.rtt))
	}
	m.lastBeat = now
	m.rttNanos.Store(int64(m.rtt))
	m.lastBeatNanos.Store(now.UnixNano())
	m.measure(now)
}

// HeardSince reports whether a successful beat ended within d before now
// (true before any beat: nothing measured is not stale).
func (m *Meter) HeardSince(now time.Time, d time.Duration) bool {
	last := m.lastBeatNanos.Load()
	return last == 0 || now.UnixNano()-last <= int64(d)
}

// Idle records that a worker was free: the current window measures no
// saturated rate.
func (m *Meter) Idle() { m.windowIdle = true }

// Capacity is the renewal rate per second the workers sustain, as last
// measured; 0 before the first successful beat.
func (m *Meter) Capacity() float64 { return math.Float64frombits(m.capacityBits.Load()) }

// Throttled records a beat DynamoDB throttled at limit, the table's or the
// account's (a provisioned table's capacity, an on-demand table's maximum,
// the account's quota), at now: that limit, not the workers, bounds the
// renewals, and nothing a beat's round trip shows says how far. For
// Memory the capacity (At) is at most the rate of the beats that got
// through in the last window (the one still open, if the last closed
// window had none), and Ceiling gives limit back: the caller's own code
// for the limit DynamoDB named. A hot key's throttling says nothing of the
// table: the caller does not report it here.
func (m *Meter) Throttled(limit uint8, now time.Time) {
	rate := m.lastRate
	if elapsed := now.Sub(m.windowStart); rate == 0 && !m.windowStart.IsZero() && elapsed > 0 {
		rate = float64(m.windowBeats) / elapsed.Seconds()
	}
	if until := m.ceilingUntil.Load(); until != 0 && now.UnixNano() < until {
		rate = min(rate, math.Float64frombits(m.ceilingBits.Load()))
	}
	if rate == 0 {
		// Nothing measured yet: no window closed, and the one open has no
		// beat (the first beat opens it). No ceiling on nothing.
		return
	}
	m.ceilingBits.Store(math.Float64bits(rate))
	m.ceilingUntil.Store(now.Add(Memory).UnixNano())
	m.ceilingLimit.Store(uint32(limit))
}

// Ceiling is the capacity's ceiling at now after a throttled beat, and the
// limit given to Throttled; ok is false when there is none.
func (m *Meter) Ceiling(now time.Time) (rate float64, limit uint8, ok bool) {
	until := m.ceilingUntil.Load()
	if until == 0 || now.UnixNano() >= until {
		return 0, 0, false
	}
	return math.Float64frombits(m.ceilingBits.Load()), uint8(m.ceilingLimit.Load()), true
}

// At is the capacity as of now, the rate admission compares the held
// locks' need with: Capacity, but a stale saturated rate keeps rising by
// a quarter for every whole window that passed since the last beat ended
// (up to workers / round trip). A window in which no beat ended had a free
// worker: without this, a client that holds nothing sends no beat, no
// window closes, and a rate measured in one slow moment would keep every
// acquisition out for good (issue 21, invariant 14 of the simulation).
// A throttle's ceiling (see Throttled) caps it.
func (m *Meter) At(now time.Time) float64 {
	c := m.risen(now)
	if ceiling, _, ok := m.Ceiling(now); ok && (c == 0 || ceiling < c) {
		return max(ceiling, math.SmallestNonzeroFloat64) // measured: 0 would read as "not yet"
	}
	return c
}

// risen is Capacity as of now, risen if stale (see At).
func (m *Meter) risen(now time.Time) float64 {
	c := m.Capacity()
	from := m.riseFromNanos.Load()
	rtt := m.RoundTrip()
	if c == 0 || from == 0 || rtt <= 0 {
		return c
	}
	k := (now.UnixNano() - from) / int64(measureWindow)
	if k <= 0 {
		return c
	}
	return rise(c, k, float64(m.workers)/rtt.Seconds())
}

// youngShare is the share of the worst of n saturated windows that the
// capacity counts on: all of it once the windows fill rateMemory, and
// youngDiscount less for a single window, in proportion between. The worst
// of a few windows is an optimistic guess at the worst of a minute, and a
// lock admitted on it cannot be taken back when the minute shows worse:
// the same client on DynamoDB Local (issue 60) read 880 renewals/s in its
// first seconds of saturated windows and admitted 2,083 locks of 3 s on
// it (at the fraction of 0.8 then), then read 791 within the minute and 731
// within two, the held locks needing 0.97 of it.
func youngShare(n int) float64 {
	full := int(rateMemory / measureWindow)
	return 1 - youngDiscount*float64(full-min(n, full))/float64(full)
}

// youngDiscount is what youngShare takes off the worst of one window.
const youngDiscount = 0.25

// rise is a stale saturated rate after k windows with a free worker: a
// quarter more for each, never above little (workers / round trip) nor
// below rate.
func rise(rate float64, k int64, little float64) float64 {
	return max(rate, min(rate*math.Pow(1.25, float64(min(k, 64))), little))
}

// RoundTrip is the moving average of heartbeats' round trips (see Beat);
// 0 before the first successful beat.
func (m *Meter) RoundTrip() time.Duration { return time.Duration(m.rttNanos.Load()) }

// SetCapacity publishes rate as the measured capacity, for the tests of
// admission control that need one rate rather than beats that measure it.
func (m *Meter) SetCapacity(rate float64) { m.capacityBits.Store(math.Float64bits(rate)) }

// measure counts a successful beat and publishes the capacity: the lowest
// rate, over spans of up to rateSpan (see worstSpan), of the windows of
// the last rateMemory in which every worker stayed busy (what the workers
// and DynamoDB together sustained at their worst: a lock admitted at the
// average rate is lost in the next dip that lasts longer than its lease's
// slack), less while those windows are few (youngShare), or, before any
// such window,
// workers / round trip (Little's law, from the moving average of recent
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
func (m *Meter) measure(now time.Time) {
	m.windowBeats++
	little := float64(m.workers) / m.rtt.Seconds()
	if elapsed := now.Sub(m.windowStart); elapsed >= measureWindow {
		rate := float64(m.windowBeats) / elapsed.Seconds()
		if !m.windowStart.IsZero() {
			m.lastRate = rate
		}
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
			m.satWindows = append(m.satWindows, satWindow{start: m.windowStart, end: now, beats: m.windowBeats})
			worst, n := worstSpan(m.satWindows, m.span, now.Add(-rateMemory))
			m.satRate = worst * youngShare(n)
			m.satAt = now
		case m.satRate > 0 && stale:
			// One window, or as many as passed with no beat since the
			// last one closed (past the horizon): At has been
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
// last window that measured it. Memory is how long the meter
// trusts what it heard (a client that heard no beat for as long counts as
// unmeasured; a throttle's ceiling holds as long).
//
// rateMemory is how far back the capacity is the worst saturated window:
// the rate a backend sustains wobbles on a scale of minutes, not seconds.
// One client asking for 5,000 locks of 3 s on DynamoDB Local (issue 60)
// saw the worst window of the last 10 s go from 734 renewals/s to 988
// and back to 690 within two minutes, at the same load: admission took
// locks up to 0.8 of the higher reading, and a dip of two seconds at
// 760/s then ran the backlog past the leases' slack and lost 35 at once.
// The worst window of the minute before that grant was 734.
const (
	measureWindow  = 500 * time.Millisecond
	measureHorizon = 3 * time.Second
	Memory         = 10 * time.Second
	rateMemory     = time.Minute // satWindows holds this many windows
	rateSpan       = 2 * time.Second
)

// rttMemory is the time in which faster beats bring the average round
// trip down by e (see Meter.beat).
const rttMemory = time.Second

// satWindow is one saturated window: when it started and ended, and the
// successful beats that ended in it.
type satWindow struct {
	start, end time.Time
	beats      int
}

// worstSpan is the lowest rate of the spans of k consecutive saturated
// windows among ws (oldest first) that end after since, and how many
// windows ended after since. Windows are consecutive when one started as
// the one before ended (no window with a free worker between them); a run
// of consecutive windows shorter than k is a span of its own. A lock is
// lost only when the renewals fall short over a stretch as long as its
// lease's slack: the rate over half a second dips far lower, and more
// often, than over a few seconds (one client on DynamoDB Local, issue 60:
// the worst half second of a minute at 0.60 to 0.75 of the mean, the
// worst 2 s at 0.72 to 0.85), and would refuse locks that no dip of the
// backend could lose.
func worstSpan(ws []satWindow, k int, since time.Time) (float64, int) {
	worst, n := math.Inf(1), 0
	run := 0 // index of the first window of the run ws[i] is in
	for i := range ws {
		if i > 0 && !ws[i].start.Equal(ws[i-1].end) {
			run = i
		}
		if !ws[i].end.After(since) {
			continue
		}
		n++
		from := i - k + 1
		if from < run {
			// Shorter than k so far: a span only once its run ends (the
			// next window is not consecutive, or there is none).
			if i+1 < len(ws) && ws[i+1].start.Equal(ws[i].end) {
				continue
			}
			from = run
		}
		beats := 0
		for _, w := range ws[from : i+1] {
			beats += w.beats
		}
		if d := ws[i].end.Sub(ws[from].start); d > 0 {
			worst = min(worst, float64(beats)/d.Seconds())
		}
	}
	if math.IsInf(worst, 1) {
		return 0, n
	}
	return worst, n
}
