package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// Plan is what `lockbench all` measures.
type Plan struct {
	Quick          bool
	LatencySamples int
	CeilingWriters int
	CeilingTime    time.Duration
	Capacity       CapacityConfig // N is taken from CapacityNs
	CapacityNs     []int
	Refine         bool
	// BoundPoint adds to CapacityNs the N at the capacity goal
	// (BoundTarget × ceiling × lease, from this run's ceiling).
	BoundPoint     bool
	FailoverTrials int
	Handover       HandoverConfig
	Contention     []ContentionConfig
	// Session is the sessions section (Ns empty and Takeover 0: skipped).
	Session SessionPlan
	// GoBench is the output of `go test -bench` to include, if any.
	GoBench string
	// PNG is the image path, relative to the Markdown file's directory.
	PNG string
}

// FullPlan is `make bench`; QuickPlan is `lockbench all -quick`.
func FullPlan() Plan {
	p := Plan{
		LatencySamples: 1000,
		CeilingWriters: 32,
		CeilingTime:    5 * time.Second,
		Capacity: CapacityConfig{Hold: 30 * time.Second, Lease: 3 * time.Second, Heartbeat: time.Second,
			AcquireWorkers: 16},
		CapacityNs:     []int{1000, 2500, 3500, 4000, 4500, 5000, 6000, 7500, 10000},
		Refine:         true,
		BoundPoint:     true,
		FailoverTrials: 8,
		Handover:       DefaultHandover(),
		Session:        DefaultSessionPlan(),
	}
	var contention []ContentionConfig
	for _, n := range []int{2, 8, 32} {
		contention = append(contention, ContentionConfig{Contenders: n, Duration: 10 * time.Second,
			Hold: 10 * time.Millisecond, Refresh: time.Second})
	}
	for _, n := range []int{2, 8, 32} {
		contention = append(contention, ContentionConfig{Contenders: n, Duration: 10 * time.Second,
			Hold: 10 * time.Millisecond, Pause: 100 * time.Millisecond, Refresh: 100 * time.Millisecond})
	}
	// No pause, and a refresh short enough that a fair hand-over (one poll
	// of the next waiter) lets 32 contenders each take the lock within
	// their wait: the setting of the fairness goal.
	for _, n := range []int{2, 8, 32} {
		contention = append(contention, ContentionConfig{Contenders: n, Duration: 10 * time.Second,
			Hold: 10 * time.Millisecond, Refresh: 100 * time.Millisecond})
	}
	// Every setting in every mode of ContentionModes (a fair mode, once it
	// exists, runs beside the default one).
	p.Contention = WithModes(contention, ContentionModes)
	return p
}

// QuickPlan is a short run for trying the program out.
func QuickPlan() Plan {
	p := FullPlan()
	p.Quick = true
	p.LatencySamples = 200
	p.CeilingTime = 2 * time.Second
	p.Capacity.Hold = 10 * time.Second
	p.CapacityNs = []int{500, 2000}
	p.Refine = false
	p.FailoverTrials = 4
	p.Handover.Trials = 4
	for i := range p.Contention {
		p.Contention[i].Duration = 3 * time.Second
	}
	p.Session.Ns, p.Session.Hold, p.Session.Takeover = []int{1000, 10000}, 10*time.Second, 500
	p.Session.MaxRefused, p.Session.AskBudget = 200, 30*time.Second
	return p
}

// Results is everything `lockbench all` measured.
type Results struct {
	Calls      *CallsResult
	Latency    *LatencyResult
	Capacity   *CapacityResult
	Failover   *FailoverResult
	Handover   *HandoverResult
	Contention []*ContentionRun
	Session    *SessionResult
}

// RunAll measures every section in turn, printing each as it completes to
// out, and returns the results and the Markdown document.
func RunAll(ctx context.Context, e *Env, p Plan, out io.Writer) (*Results, string, error) {
	res := &Results{}
	var doc md
	began := time.Now()
	section := func(title, body string) {
		s := "## " + title + "\n\n" + body + "\n"
		fmt.Fprintln(out, s)
		doc.WriteString(s)
	}
	quick := ""
	if p.Quick {
		quick = " -quick"
	}

	e.logf("1/6 calls per operation")
	var err error
	if res.Calls, err = MeasureCalls(ctx, e); err != nil {
		return nil, "", fmt.Errorf("calls: %w", err)
	}
	section("1. DynamoDB calls per operation", res.Calls.Markdown("go -C tools run ./cmd/lockbench calls"))

	e.logf("2/6 latency (%d rounds)", p.LatencySamples)
	if res.Latency, err = MeasureLatency(ctx, e, p.LatencySamples); err != nil {
		return nil, "", fmt.Errorf("latency: %w", err)
	}
	section("2. Latency against the raw DynamoDB call", res.Latency.Markdown(fmt.Sprintf("go -C tools run ./cmd/lockbench latency -samples %d", p.LatencySamples)))

	e.logf("3/6 heartbeat capacity: backend ceiling, then N = %v", p.CapacityNs)
	ceiling, err := MeasureCeiling(ctx, e, p.CeilingWriters, p.CeilingTime)
	if err != nil {
		return nil, "", fmt.Errorf("ceiling: %w", err)
	}
	ns := p.CapacityNs
	if p.BoundPoint {
		ns = WithBoundPoint(ns, ceiling, p.Capacity.Lease)
	}
	if res.Capacity, err = SearchCapacity(ctx, e, p.Capacity, ns, p.Refine); err != nil {
		return nil, "", fmt.Errorf("capacity: %w", err)
	}
	if ceiling.After, err = MeasureCeiling(ctx, e, p.CeilingWriters, p.CeilingTime); err != nil {
		// The runs stand; the bound is the measure before them.
		e.logf("ceiling after the runs: %v", err)
		ceiling.After = nil
	}
	res.Capacity.Ceiling = ceiling
	capCmd := fmt.Sprintf("go -C tools run ./cmd/lockbench capacity -search %s -hold %s", joinInts(p.CapacityNs), p.Capacity.Hold)
	if p.Refine {
		capCmd += " -refine"
	}
	if p.BoundPoint {
		capCmd += " -bound-point"
	}
	section("3. Heartbeat capacity", res.Capacity.Markdown(capCmd)+"\n"+capacityVerdict(res.Capacity))

	e.logf("4/6 failover (%d trials per scenario)", p.FailoverTrials)
	if res.Failover, err = MeasureFailover(ctx, e, p.FailoverTrials); err != nil {
		return nil, "", fmt.Errorf("failover: %w", err)
	}
	e.logf("4/6 same-process hand-over (%d trials of %d waiters at refresh %v)", p.Handover.Trials, p.Handover.Waiters, p.Handover.Refreshes)
	if res.Handover, err = MeasureHandover(ctx, e, p.Handover); err != nil {
		return nil, "", fmt.Errorf("handover: %w", err)
	}
	section("4. Failover and hand-over", res.Failover.Markdown(fmt.Sprintf("go -C tools run ./cmd/lockbench failover -trials %d", p.FailoverTrials))+
		"\n"+res.Handover.Markdown(HandoverCommand(p.Handover)))

	e.logf("5/6 contention")
	var cmds []string
	for _, cfg := range p.Contention {
		e.logf("contention: %s mode, %d contenders, refresh %s, pause %s", cfg.Mode.Name, cfg.Contenders, cfg.Refresh, cfg.Pause)
		r, err := RunContention(ctx, e, cfg)
		if err != nil {
			return nil, "", fmt.Errorf("contention: %w", err)
		}
		res.Contention = append(res.Contention, r)
	}
	cmds = append(cmds, contentionGroups(p.Contention)...)
	section("5. Contention on one key", ContentionMarkdown(strings.Join(cmds, "` and `"), res.Contention))

	section("6. At fleet scale, on paper", CostMarkdown(res.Calls, res.Capacity))

	if len(p.Session.Ns) > 0 || p.Session.Takeover > 0 {
		e.logf("6/6 sessions: N = %v, then the takeover of %d locks", p.Session.Ns, p.Session.Takeover)
		if res.Session, err = MeasureSessions(ctx, e, p.Session); err != nil {
			return nil, "", fmt.Errorf("sessions: %w", err)
		}
		section("7. Many locks under one session", res.Session.Markdown(p.Session.Command()))
	}

	if p.GoBench != "" {
		section("Go benchmarks (in-process hot paths)", goBenchMarkdown(p.GoBench))
	}

	var head md
	head.w("# Benchmarks")
	head.w("")
	by := "`make bench`"
	if quick != "" {
		by = "`go -C tools run ./cmd/lockbench all -quick` (a short run: small N, short holds, few samples)"
	}
	head.w("What the client costs and how it behaves under load, against Amazon DynamoDB Local (in-memory, on the client's machine). "+
		"The summary and sections 1 to 7 are written by %s (`tools/cmd/lockbench all`, after the Go benchmarks), last on %s in %s; "+
		"the sections after the Go benchmarks are measured by the commands they give, and `make bench` keeps them. "+
		"Every figure states the command that measures it alone (it starts its own DynamoDB Local unless `DYNAMODB_ENDPOINT` is set).",
		by, time.Now().Format("2006-01-02"), time.Since(began).Round(time.Second))
	head.w("")
	head.w("Machine: %s. DynamoDB Local (Java) runs on the client's cores: "+
		"figures are medians and ratios measured in one run, beside the raw DynamoDB call measured in the same run, and no test asserts them. "+
		"Against DynamoDB in AWS, absolute latencies differ (round trips of milliseconds); call counts and ratios carry over.", machine(e))
	head.w("")
	if p.PNG != "" {
		head.w("![Latency distribution and heartbeat capacity](%s)", p.PNG)
		head.w("")
	}
	head.w("## Summary")
	head.w("")
	head.WriteString(summary(res))
	head.w("")
	return res, head.String() + "\n" + doc.String(), nil
}

// HandoverCommand is the command that reproduces MeasureHandover(cfg).
func HandoverCommand(cfg HandoverConfig) string {
	rs := make([]string, len(cfg.Refreshes))
	for i, r := range cfg.Refreshes {
		rs[i] = r.String()
	}
	return fmt.Sprintf("go -C tools run ./cmd/lockbench handover -trials %d -waiters %d -refresh %s", cfg.Trials, cfg.Waiters, strings.Join(rs, ","))
}

func joinInts(ns []int) string {
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, ",")
}

// contentionGroups returns one command per distinct (refresh, hold, pause,
// duration) among cfgs, with its modes and numbers of contenders.
func contentionGroups(cfgs []ContentionConfig) []string {
	type k struct{ r, h, p, d time.Duration }
	var order []k
	ns := map[k][]int{}
	modes := map[k][]string{}
	for _, c := range cfgs {
		key := k{c.Refresh, c.Hold, c.Pause, c.Duration}
		if _, ok := ns[key]; !ok {
			order = append(order, key)
		}
		if !slices.Contains(ns[key], c.Contenders) {
			ns[key] = append(ns[key], c.Contenders)
		}
		if !slices.Contains(modes[key], c.Mode.Name) {
			modes[key] = append(modes[key], c.Mode.Name)
		}
	}
	var out []string
	for _, key := range order {
		out = append(out, fmt.Sprintf("go -C tools run ./cmd/lockbench contention -modes %s -contenders %s -refresh %s -hold %s -pause %s -duration %s",
			strings.Join(modes[key], ","), joinInts(ns[key]), key.r, key.h, key.p, key.d))
	}
	return out
}

func capacityVerdict(r *CapacityResult) string {
	var b md
	target := HeldGoal
	if r.MaxHeld >= target {
		b.w("**Largest N held for the whole hold with zero losses: %s** (goal: at least %s). Met.", commas(int64(r.MaxHeld)), commas(int64(target)))
	} else {
		b.w("**Largest N held with zero losses: %s** (goal: at least %s). **Not met** on this run.", commas(int64(r.MaxHeld)), commas(int64(target)))
	}
	b.w("This figure sits on a cliff (see below), so on a shared machine it moves from run to run with the backend's speed: compare it with the ceiling measured in the same run, not across runs.")
	if c := r.Ceiling; c != nil && len(r.Runs) > 0 {
		lease := r.Runs[0].Lease
		bound := c.BoundPerSec() * lease.Seconds()
		best := 0.0
		for _, x := range r.Runs {
			best = max(best, x.BeatsPerSec())
		}
		b.w("Physical bound on this machine, this run: each lock needs at least one write per lease, so no client can hold more than "+
			"ceiling × lease = %s × %s ≈ **%s** locks against this DynamoDB Local%s. The client's heartbeat rate reached %s/s, %.0f%% of the raw ceiling%s.",
			commas(int64(c.BoundPerSec())), lease, commas(int64(bound)), c.BoundWhich(), commas(int64(best)), 100*best/c.BoundPerSec(), boundNote(r.MaxHeld, bound))
	}
	for _, x := range r.Runs {
		if x.Lost == 0 {
			continue
		}
		b.w("Once the heartbeat queue takes longer than a lease to drain, losses are not limited to the excess: at N = %s the client lost %s locks (%.0f%%), %s of them while still acquiring. "+
			"The scheduler always sends the beat of the lock closest to the end of its lease; once the queue is longer than a lease, that lock has less time left than a round trip, "+
			"its beat is cancelled when the lease ends (%s such failed beats in this run), and the backend's capacity goes to beats that cannot succeed, so the locks behind it run out too. "+
			"Run `go -C tools run ./cmd/lockbench capacity -n %d -trace` to watch it: successful beats per quarter second drop to zero while DynamoDB calls continue.",
			commas(int64(x.N)), commas(int64(x.Lost)), 100*float64(x.Lost)/float64(x.N), commas(int64(x.LostAcquiring)), commas(int64(x.FailedBeats)), x.N)
		break
	}
	if len(r.Runs) > 1 {
		lo, hi := r.Runs[0], r.Runs[0]
		for _, x := range r.Runs {
			lo = minBy(lo, x, func(c *CapacityRun) int { return c.N })
			hi = maxBy(hi, x, func(c *CapacityRun) int { return c.N })
		}
		b.w("Goroutines during the hold: %d at N = %s, %d at N = %s — independent of the number of locks (one scheduler, at most 32 beats in flight, plus the HTTP connections they use).",
			lo.GoroutinesMax, commas(int64(lo.N)), hi.GoroutinesMax, commas(int64(hi.N)))
	}
	return b.String()
}

func boundNote(held int, bound float64) string {
	if bound < 5000 {
		return "; the 5,000 goal is above what this backend can renew at lease 3 s, for any client"
	}
	return fmt.Sprintf("; the client held %.0f%% of that bound", 100*float64(held)/bound)
}

func minBy[T any](a, b T, f func(T) int) T {
	if f(b) < f(a) {
		return b
	}
	return a
}

func maxBy[T any](a, b T, f func(T) int) T {
	if f(b) > f(a) {
		return b
	}
	return a
}

func machine(e *Env) string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				if i := strings.IndexByte(line, ':'); i > 0 {
					cpu = strings.TrimSpace(line[i+1:])
				}
				break
			}
		}
	}
	ddb := "DynamoDB Local"
	if dir, err := ddblocal.Jar(); err == nil {
		ddb = "DynamoDB Local " + strings.TrimPrefix(filepath.Base(dir), "dynamodb_local_")
	}
	return fmt.Sprintf("%d × %s, %s, %s/%s, %s", runtime.NumCPU(), cpu, runtime.Version(), runtime.GOOS, runtime.GOARCH, ddb)
}

// goBenchMarkdown renders the output of `go test -bench` found in file.
func goBenchMarkdown(file string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Sprintf("(could not read %s: %v)\n", file, err)
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "Benchmark") || strings.HasPrefix(line, "goos") || strings.HasPrefix(line, "goarch") ||
			strings.HasPrefix(line, "cpu") || strings.HasPrefix(line, "pkg") {
			lines = append(lines, line)
		}
	}
	var m md
	m.w("Command: `go test -run '^$' -bench . -benchmem .` (part of `make bench`; it starts DynamoDB Local through the package's TestMain for the benchmarks that need it). " +
		"Benchmarks named `*Fake*` run against an in-process fake of DynamoDB, so they show only this library's time and allocations; the others include the SDK and a DynamoDB Local round trip.")
	m.w("")
	m.w("```")
	for _, l := range lines {
		m.w("%s", l)
	}
	m.w("```")
	return m.String()
}
