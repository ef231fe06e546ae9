package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// SessionPlan is what `lockbench session` measures: a run under a session
// for each N (and, with Compare, the same client without one after it),
// then the takeover of a dead session's locks.
type SessionPlan struct {
	Ns        []int
	Hold      time.Duration
	Lease     time.Duration
	Heartbeat time.Duration
	Workers   int
	Compare   bool
	// MaxRefused and AskBudget bound the asking of the runs without a
	// session (see SessionConfig).
	MaxRefused int
	AskBudget  time.Duration
	Takeover   int // locks of the takeover (0: none)
	// CeilingWriters raw writers measure the backend's write rate for
	// CeilingTime (after a warm-up as long) before the runs (0: not
	// measured), so that a cold DynamoDB Local does not slow the first run.
	CeilingWriters int
	CeilingTime    time.Duration
}

// DefaultSessionPlan is the sessions section of `make bench`.
func DefaultSessionPlan() SessionPlan {
	return SessionPlan{
		Ns: []int{1000, 10000, 100000}, Hold: 60 * time.Second, Lease: 3 * time.Second, Heartbeat: time.Second,
		Workers: 32, Compare: true, MaxRefused: 1000, AskBudget: 2 * time.Minute, Takeover: 2000,
		CeilingWriters: 32, CeilingTime: 5 * time.Second,
	}
}

// Check rejects a plan that cannot run.
func (p SessionPlan) Check() error {
	switch {
	case p.Lease <= 0 || p.Heartbeat <= 0 || p.Heartbeat >= p.Lease:
		return fmt.Errorf("session: want 0 < heartbeat < lease, have heartbeat %s and lease %s", p.Heartbeat, p.Lease)
	case p.Hold <= 0 && len(p.Ns) > 0:
		return fmt.Errorf("session: -hold %s: must be positive", p.Hold)
	case p.Workers < 1:
		return fmt.Errorf("session: -acquire-workers %d: must be at least 1", p.Workers)
	case p.Takeover < 0 || p.MaxRefused < 0 || p.AskBudget < 0 || p.CeilingWriters < 0:
		return fmt.Errorf("session: -takeover %d, -max-refused %d, -ask-budget %s, -ceiling-writers %d: none may be negative", p.Takeover, p.MaxRefused, p.AskBudget, p.CeilingWriters)
	case p.CeilingWriters > 0 && p.CeilingTime <= 0:
		return fmt.Errorf("session: the ceiling's measure needs a positive time, have %s", p.CeilingTime)
	case len(p.Ns) == 0 && p.Takeover == 0:
		return fmt.Errorf("session: nothing to measure: -n 0 and -takeover 0")
	}
	return nil
}

// config is the run of n, under a session or (plain) without one.
func (p SessionPlan) config(n int, plain bool) SessionConfig {
	cfg := SessionConfig{N: n, Hold: p.Hold, Lease: p.Lease, Heartbeat: p.Heartbeat, Workers: p.Workers, Plain: plain}
	if plain {
		cfg.MaxRefused, cfg.AskBudget = p.MaxRefused, p.AskBudget
	}
	return cfg
}

// Command is the command that measures the plan alone.
func (p SessionPlan) Command() string {
	var b strings.Builder
	b.WriteString("go -C tools run ./cmd/lockbench session")
	if len(p.Ns) == 0 {
		b.WriteString(" -n 0")
	} else {
		fmt.Fprintf(&b, " -n %s -hold %s", joinInts(p.Ns), p.Hold)
	}
	fmt.Fprintf(&b, " -lease %s -heartbeat %s -acquire-workers %d", p.Lease, p.Heartbeat, p.Workers)
	if p.Compare && len(p.Ns) > 0 {
		fmt.Fprintf(&b, " -compare -max-refused %d -ask-budget %s", p.MaxRefused, p.AskBudget)
	}
	fmt.Fprintf(&b, " -takeover %d -ceiling-writers %d", p.Takeover, p.CeilingWriters)
	return b.String()
}

// MeasureSessions runs the plan, one run at a time.
func MeasureSessions(ctx context.Context, e *Env, p SessionPlan) (*SessionResult, error) {
	res := &SessionResult{Machine: machine(e), Date: time.Now().Format("2006-01-02")}
	if p.CeilingWriters > 0 {
		e.logf("session: the backend's raw write rate, %d writers for %s after a warm-up as long", p.CeilingWriters, p.CeilingTime)
		c, err := MeasureCeiling(ctx, e, p.CeilingWriters, p.CeilingTime)
		if err != nil {
			return nil, fmt.Errorf("session: ceiling: %w", err)
		}
		res.Ceiling = c
	}
	for _, n := range p.Ns {
		for _, plain := range []bool{false, true} {
			if plain && !p.Compare {
				continue
			}
			cfg := p.config(n, plain)
			e.logf("session: N=%d %s, hold %s (lease %s, heartbeat %s, %d goroutines asking)", n, map[bool]string{false: "under a session", true: "per-lock leases"}[plain],
				cfg.Hold, cfg.Lease, cfg.Heartbeat, cfg.Workers)
			r, err := RunSession(ctx, e, cfg)
			if err != nil {
				return nil, fmt.Errorf("session N=%d: %w", n, err)
			}
			e.logf("session: N=%d acquired %d in %s, lost %d, writes in the hold %d (%.2f per period), heap %d B per lock, Close %s %s",
				n, r.Acquired, r.AcquireTime.Round(10*time.Millisecond), r.Lost, r.HoldWrites(), r.WritesPerPeriod(), r.HeapPerLock(), r.CloseTime.Round(time.Millisecond), r.CloseCalls)
			res.Runs = append(res.Runs, r)
		}
	}
	if p.Takeover > 0 {
		cfg := TakeoverConfig{N: p.Takeover, Lease: p.Lease, Heartbeat: p.Heartbeat, Workers: p.Workers}
		e.logf("session: takeover of a dead session's %d locks", cfg.N)
		t, err := MeasureTakeover(ctx, e, cfg)
		if err != nil {
			return nil, err
		}
		e.logf("session: takeover: all held %s after the cut, %d of %d tokens higher", t.AllTook().Round(10*time.Millisecond), t.Higher, t.N)
		res.Takeover = t
	}
	return res, nil
}
