package bench

import (
	"strings"
	"testing"
	"time"
)

// A session's hold meets its writes goal within a tenth of the heartbeat
// periods either way, and only with periods to count.
func TestSessionWritesGoal(t *testing.T) {
	for _, c := range []struct {
		hold   time.Duration
		writes int
		per    float64
		met    bool
	}{
		{60 * time.Second, 60, 1, true},
		{60 * time.Second, 54, 0.9, true},
		{60 * time.Second, 66, 1.1, true},
		{60 * time.Second, 53, 53.0 / 60, false},
		{60 * time.Second, 67, 67.0 / 60, false},
		{60 * time.Second, 0, 0, false},
		{30 * time.Second, 60, 2, false},
		{0, 0, 0, false},
	} {
		r := &SessionRun{SessionConfig: SessionConfig{Heartbeat: time.Second}, HoldTime: c.hold, HoldCalls: Calls{"UpdateItem": c.writes, "GetItem": 3}}
		if got := r.WritesPerPeriod(); got < c.per-1e-9 || got > c.per+1e-9 {
			t.Errorf("%d writes in %s: %v per period, want %v", c.writes, c.hold, got, c.per)
		}
		if got := r.WritesMet(); got != c.met {
			t.Errorf("%d writes in %s: met %v, want %v", c.writes, c.hold, got, c.met)
		}
	}
}

func TestSessionRunArithmetic(t *testing.T) {
	r := &SessionRun{SessionConfig: SessionConfig{N: 1000}, Asked: 900, HeldAtEnd: 800, HeapBefore: 1 << 20, HeapHeld: 1<<20 + 400_000}
	if got := r.HeapPerLock(); got != 500 {
		t.Errorf("HeapPerLock = %d, want 500", got)
	}
	if got := r.NotAsked(); got != 100 {
		t.Errorf("NotAsked = %d, want 100", got)
	}
	r.HeldAtEnd = 0
	if got := r.HeapPerLock(); got != 0 {
		t.Errorf("HeapPerLock with none held = %d, want 0", got)
	}
	r = &SessionRun{Acquired: 500, AcquireTime: 2 * time.Second}
	if got := r.perSec(); got != 250 {
		t.Errorf("perSec = %v, want 250", got)
	}
}

// goodSession is a run under a session that met every goal.
func goodSession(n int) *SessionRun {
	return &SessionRun{
		SessionConfig: SessionConfig{N: n, Hold: time.Minute, Lease: 3 * time.Second, Heartbeat: time.Second, Workers: 32},
		Asked:         n, Acquired: n, AcquireTime: 4 * time.Second, AcquireCalls: Calls{"UpdateItem": n + 5},
		HoldTime: 60 * time.Second, HoldCalls: Calls{"UpdateItem": 61},
		HeldAtEnd: n, HeapBefore: 10_000_000, HeapHeld: 10_000_000 + uint64(450*n),
		CPUClient: 600 * time.Millisecond, CPUServer: 1200 * time.Millisecond,
		CloseTime: 12 * time.Millisecond, CloseCalls: Calls{"UpdateItem": 1}, Released: n,
		FreeTried: 100, FreeTaken: 100, FreeTime: 250 * time.Millisecond,
		LoadStart: 2.5, LoadEnd: 3.25,
	}
}

func TestSessionRows(t *testing.T) {
	s := goodSession(10000)
	if !s.Met() {
		t.Fatal("a run that met every goal is not met")
	}
	want := "| 10,000 | session | 10,000 | 4s (2,500/s) | 10,005 UpdateItem | 0 | 10,000 | 61 (0) | 1.02 (met) | 450 B | 0.01 / 0.02 | 12ms, 1 UpdateItem | 100 of 100 in 250ms | 2.5 → 3.2 | yes |"
	if got := s.row(); got != want {
		t.Errorf("session row:\n got %s\nwant %s", got, want)
	}

	p := goodSession(10000)
	p.Plain, p.MaxRefused, p.AskBudget = true, 1000, 2*time.Minute
	p.Asked, p.Acquired, p.Refused, p.HeldAtEnd, p.Lost, p.FirstLoss, p.PauseBeforeLoss = 6000, 4900, 1000, 4500, 400, 75*time.Second+40*time.Millisecond, 12400*time.Microsecond
	p.HoldCalls = Calls{"UpdateItem": 270_000}
	p.HeapHeld = p.HeapBefore + 4500*600
	p.CloseCalls, p.CloseTime, p.CPUServer = Calls{"UpdateItem": 4500}, 2*time.Second, 0
	p.FreeTaken = 99
	p.StoppedBy = "refusals"
	if p.Met() {
		t.Error("a run without a session is never met")
	}
	want = "| 10,000 | per-lock | 4,900 (1,000 refused; 4,000 not asked, the asking stopped at 1,000 refusals) | 4s (1,225/s) | 10,005 UpdateItem | **400** (first at 1m15s; longest pause of this process before it 12ms) | 4,500 | 270,000 (0) | 4,500 | 600 B | 0.01 / n/a | 2s, 4,500 UpdateItem | 99 of 100 in 250ms | 2.5 → 3.2 | — |"
	if got := p.row(); got != want {
		t.Errorf("per-lock row:\n got %s\nwant %s", got, want)
	}

	p.StoppedBy, p.AskBudget, p.HeapHeld = "time", 2*time.Minute, p.HeapBefore-4500*300
	for _, want := range []string{"4,000 not asked, the asking stopped after 2m0s)", "| −300 B |"} {
		if got := p.row(); !strings.Contains(got, want) {
			t.Errorf("per-lock row lacks %q: %s", want, got)
		}
	}

	// Each goal, missed alone, makes the run not met.
	for name, spoil := range map[string]func(*SessionRun){
		"a lock lost":           func(r *SessionRun) { r.Lost, r.HeldAtEnd = 1, r.N-1 },
		"a key not acquired":    func(r *SessionRun) { r.Acquired, r.HeldAtEnd = r.N-1, r.N-1 },
		"too many writes":       func(r *SessionRun) { r.HoldCalls = Calls{"UpdateItem": 67} },
		"Close of two writes":   func(r *SessionRun) { r.CloseCalls = Calls{"UpdateItem": 2} },
		"Close that also reads": func(r *SessionRun) { r.CloseCalls = Calls{"UpdateItem": 1, "GetItem": 1} },
	} {
		r := goodSession(1000)
		spoil(r)
		if r.Met() {
			t.Errorf("%s: met", name)
		}
	}
}

// goodTakeover is a takeover that met every goal.
func goodTakeover() *TakeoverRun {
	t := &TakeoverRun{
		TakeoverConfig: TakeoverConfig{N: 4, Lease: 3 * time.Second, Heartbeat: time.Second, Workers: 2},
		Refresh:        time.Second,
		LastWrite:      -400 * time.Millisecond, LeaseEnd: 2600 * time.Millisecond,
		AEnded: NewDist([]time.Duration{2600 * time.Millisecond, 2601 * time.Millisecond, 2602 * time.Millisecond, 2610 * time.Millisecond}),
		ALost:  4,
		BTook:  NewDist([]time.Duration{3500 * time.Millisecond, 3100 * time.Millisecond, 3300 * time.Millisecond, 4200 * time.Millisecond}),
		Higher: 4, MinMargin: 490 * time.Millisecond,
		BCalls:    Calls{"UpdateItem": 10, "GetItem": 7},
		BItems:    Calls{"UpdateItem lock": 8, "GetItem lock": 5, "UpdateItem dead session": 1, "GetItem dead session": 2, "UpdateItem own session": 1},
		LoadStart: 1, LoadEnd: 1.5,
	}
	return t
}

func TestTakeoverMarkdown(t *testing.T) {
	tk := goodTakeover()
	if got := tk.AllTook(); got != 4200*time.Millisecond {
		t.Errorf("AllTook = %s, want 4.2s", got)
	}
	if !tk.Met() {
		t.Fatal("a takeover that met every goal is not met")
	}
	row := "| 4 | -0.40 s | +2.60 s | +2.60 s / +2.61 s | 4 | +3.10 s / +4.20 s | 1.40 | 4 of 4 | 490 ms | 10 UpdateItem + 7 GetItem | 1.0 → 1.5 | yes |"
	md := tk.Markdown()
	if !strings.Contains(md, "\n"+row+"\n") {
		t.Errorf("takeover table lacks the row\n%s\nin:\n%s", row, md)
	}
	for _, want := range []string{"the lock items, 8 `UpdateItem` (2.00 per lock", "and 5 `GetItem` (the polls",
		"A's session item, 1 `UpdateItem` (its end mark", "and 2 `GetItem` (B's reads", "B's own session item, 1 `UpdateItem` (its start"} {
		if !strings.Contains(md, want) {
			t.Errorf("takeover section lacks %q:\n%s", want, md)
		}
	}
	if strings.Contains(md, "Other items") {
		t.Errorf("takeover section counts other items where there are none:\n%s", md)
	}
	if !strings.Contains(md, "`go -C tools run ./cmd/lockbench session -n 0 -takeover 4 -lease 3s -heartbeat 1s -acquire-workers 2`") {
		t.Errorf("takeover section lacks its command:\n%s", md)
	}

	for name, spoil := range map[string]func(*TakeoverRun){
		"a key not taken":        func(r *TakeoverRun) { r.BTook = r.BTook[:3] },
		"a token not higher":     func(r *TakeoverRun) { r.Higher = 3 },
		"taken while A held it":  func(r *TakeoverRun) { r.MinMargin = -time.Millisecond },
		"a lock of A not lost":   func(r *TakeoverRun) { r.ALost = 3 },
		"slower than two leases": func(r *TakeoverRun) { r.BTook[3] = 6001 * time.Millisecond },
	} {
		r := goodTakeover()
		spoil(r)
		if r.Met() {
			t.Errorf("%s: met", name)
		}
	}
	tk.BTook = tk.BTook[:3]
	if got := tk.AllTook(); got != 0 {
		t.Errorf("AllTook with a key not taken = %s, want 0", got)
	}
}

func TestSessionSummary(t *testing.T) {
	a, b := goodSession(1000), goodSession(100000)
	b.HoldCalls = Calls{"UpdateItem": 59}
	plain := goodSession(1000)
	plain.Plain = true
	r := &SessionResult{Runs: []*SessionRun{a, plain, b}, Takeover: goodTakeover(), Machine: "2 × a CPU", Date: "2026-12-03"}
	if md := r.Markdown("lockbench session"); !strings.Contains(md, "Measured on 2026-12-03. Machine: 2 × a CPU; the load column") {
		t.Errorf("the section does not say where and when:\n%s", md)
	}
	want := "| locks lost by one client holding N = 1,000 / 100,000 locks 1m0s under one session (§7) | 0 | 0 / 0 | yes |\n" +
		"| writes during that hold ÷ heartbeat periods (§7) | 1.00 ± 0.10 | 1.02 / 0.98 | yes |\n" +
		"| another client holds all 4 locks of a dead session, from its network's cut (§7) | about one lease (≤ 2) | 1.40 leases (4.2s); 4 of 4 tokens higher | yes |\n"
	if got := sessionSummary(r); got != want {
		t.Errorf("sessionSummary:\n%s\nwant:\n%s", got, want)
	}
	want = "Reading: under a session, the hold cost 61 / 59 writes at N = 1,000 / 100,000: the session's renewals, one per heartbeat period whatever the number of locks held. " +
		"Without one, every held lock is renewed by a write of its own, so what the client can take is bounded by the renewals it sustains against this backend, and admission control refuses (or makes wait) what would go past it: at N = 1,000 it held 1,000 at the end of the hold."
	if got := r.reading(); got != want {
		t.Errorf("reading:\n%s\nwant:\n%s", got, want)
	}
	plain.Lost = 7
	if got := r.reading(); !strings.HasSuffix(got, "it held 1,000 at the end of the hold, and lost 7 (as in section 3b, where the backend's rate fell below what admission had measured when it let the locks go).") {
		t.Errorf("reading with a loss: %s", got)
	}
	b.Lost, b.HeldAtEnd, b.Acquired = 3, 99000, 99003
	b.HoldCalls = Calls{"UpdateItem": 70}
	got := sessionSummary(r)
	for _, s := range []string{"| 0 / 3 (99,003 acquired) | **no** |", "| 1.02 / 1.17 | **no** |"} {
		if !strings.Contains(got, s) {
			t.Errorf("sessionSummary with a loss lacks %q:\n%s", s, got)
		}
	}
}

func TestSessionPlan(t *testing.T) {
	p := DefaultSessionPlan()
	if err := p.Check(); err != nil {
		t.Fatalf("the default plan: %v", err)
	}
	want := "go -C tools run ./cmd/lockbench session -n 1000,10000,100000 -hold 1m0s -lease 3s -heartbeat 1s -acquire-workers 32 -compare -max-refused 1000 -ask-budget 2m0s -takeover 2000 -ceiling-writers 32"
	if got := p.Command(); got != want {
		t.Errorf("Command:\n got %s\nwant %s", got, want)
	}
	if got := p.config(1000, true); !got.Plain || got.MaxRefused != 1000 || got.AskBudget != 2*time.Minute {
		t.Errorf("the run without a session: %+v", got)
	}
	if got := p.config(1000, false); got.Plain || got.MaxRefused != 0 || got.AskBudget != 0 {
		t.Errorf("the run under a session is bounded like one without: %+v", got)
	}
	for name, spoil := range map[string]func(*SessionPlan){
		"heartbeat not under the lease": func(p *SessionPlan) { p.Heartbeat = p.Lease },
		"no hold":                       func(p *SessionPlan) { p.Hold = 0 },
		"no workers":                    func(p *SessionPlan) { p.Workers = 0 },
		"negative takeover":             func(p *SessionPlan) { p.Takeover = -1 },
		"nothing to measure":            func(p *SessionPlan) { p.Ns, p.Takeover = nil, 0 },
	} {
		q := DefaultSessionPlan()
		spoil(&q)
		if q.Check() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	q := DefaultSessionPlan()
	q.Ns = nil
	if got := q.Command(); !strings.Contains(got, " -n 0 ") || strings.Contains(got, "-compare") {
		t.Errorf("the takeover alone: %s", got)
	}
}
