// Command lockbench measures dynamolock against Amazon DynamoDB Local: calls
// per operation, latency against the raw DynamoDB call, heartbeat capacity,
// failover, same-process hand-over, contention, and the DynamoDB cost that
// follows; one client holding many locks under a session (session); and how
// steady the backend's own write rate is (steadiness).
//
// Usage:
//
//	lockbench all [-quick] [-out docs/BENCHMARKS.md] [-png docs/benchmarks.png] [-gobench FILE]
//	lockbench calls
//	lockbench latency [-samples 1000]
//	lockbench tracing [-samples 1000]
//	lockbench writeparts [-samples 1000]
//	lockbench capacity [-n 5000 | -search 1000,2500,5000] [-hold 30s] [-lease 3s] [-heartbeat 1s] [-concurrency 32] [-admission 0.8] [-refine] [-bound-point]
//	lockbench steadiness [-ceiling-writers 32] [-warmup 60s] [-duration 120s]
//	lockbench failover [-trials 8]
//	lockbench handover [-trials 8] [-waiters 4] [-refresh 1s,10s]
//	lockbench crossover [-trials 30] [-waiters 1] [-modes default,fair] [-contenders 2,8,32] [-hold 10s]
//	lockbench contention [-modes default] [-contenders 2,8,32] [-goroutines 1] [-refresh 1s] [-hold 10ms] [-pause 0s] [-duration 10s]
//	lockbench session [-n 1000,10000,100000] [-hold 60s] [-lease 3s] [-heartbeat 1s] [-acquire-workers 32] [-compare=true] [-max-refused 1000] [-ask-budget 2m] [-takeover 2000] [-ceiling-writers 32]
//
// It uses the DynamoDB Local at $DYNAMODB_ENDPOINT, or starts a private one
// when that is unset. `make bench` runs `lockbench all`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/arielsrv/dynamolock/v2/tools/internal/bench"
)

// handWritten marks where the sections of BENCHMARKS.md that lockbench
// does not generate begin: everything from it on survives `lockbench all`.
const handWritten = "<!-- hand-written sections below: kept by make bench -->"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1], os.Args[2:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lockbench:", err)
		os.Exit(1)
	}
}

// setFlag reports whether the command line set the flag named name, for
// flags whose default depends on the command (-hold, -duration), and where
// a zero value given means zero (-hold 0s holds for no time).
func setFlag(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: lockbench all|calls|latency|tracing|writeparts|capacity|steadiness|failover|handover|crossover|contention|session [flags]; lockbench CMD -h for flags")
	os.Exit(2)
}

func run(ctx context.Context, cmd string, args []string) error {
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	var (
		quick      = fs.Bool("quick", false, "all: a short run (small N, short holds)")
		out        = fs.String("out", "docs/BENCHMARKS.md", "all: the Markdown file to write")
		png        = fs.String("png", "docs/benchmarks.png", "all: the image to draw")
		gobench    = fs.String("gobench", "", "all: a file with `go test -bench` output to include")
		samples    = fs.Int("samples", 1000, "latency, tracing, writeparts: rounds measured")
		n          = fs.String("n", "", "capacity: locks to hold (default 5000); session: comma-separated N, one run each (default 1000,10000,100000; 0: none, the takeover alone)")
		search     = fs.String("search", "", "capacity: comma-separated N to try in order, stopping at the first loss")
		refine     = fs.Bool("refine", false, "capacity -search: try the midpoint after the first loss")
		boundPoint = fs.Bool("bound-point", false, "capacity -search: also try the N at 90% of the backend bound (ceiling × lease)")
		hold       = fs.Duration("hold", 0, "capacity: how long to hold (default 30s); contention: how long each holder keeps the lock (default 10ms); session: how long to hold (default 60s)")
		lease      = fs.Duration("lease", 3*time.Second, "capacity, session: lease duration")
		heartbeat  = fs.Duration("heartbeat", time.Second, "capacity, session: heartbeat period")
		conc       = fs.Int("concurrency", 0, "capacity: WithHeartbeatConcurrency (0: the default, 32)")
		admission  = fs.Float64("admission", 0, "capacity: WithHeartbeatAdmission (0: the default, 0.6)")
		workers    = fs.Int("acquire-workers", 16, "capacity: acquisitions in flight while taking the locks; session: goroutines asking at once (default "+strconv.Itoa(bench.DefaultSessionPlan().Workers)+")")
		compare    = fs.Bool("compare", bench.DefaultSessionPlan().Compare, "session: after each N under a session, the same client without one (-compare=false: none)")
		maxRefused = fs.Int("max-refused", bench.DefaultSessionPlan().MaxRefused, "session -compare: stop asking once this many acquisitions were refused for heartbeat capacity (0: no bound)")
		askBudget  = fs.Duration("ask-budget", bench.DefaultSessionPlan().AskBudget, "session -compare: stop asking after this long (0: no bound)")
		takeover   = fs.Int("takeover", bench.DefaultSessionPlan().Takeover, "session: locks of a dead session another client takes over (0: skip)")
		unpaced    = fs.Bool("unpaced", false, "capacity: ask for the N locks without pausing for the heartbeat backlog (admission control alone decides); every N of -search runs")
		ceiling    = fs.Int("ceiling-writers", 32, "capacity: writers measuring the backend's raw write rate before and after the runs (0: skip); session: the same, before the runs; steadiness: writers")
		trials     = fs.Int("trials", 8, "failover: trials per scenario; handover: clients side by side per refresh period")
		waiters    = fs.Int("waiters", bench.DefaultHandover().Waiters, "handover: goroutines of one client waiting for the key")
		modes      = fs.String("modes", modeNames(), "contention: AcquireLock modes to run, each beside the others (this build has: "+modeNames()+")")
		contenders = fs.String("contenders", "2,8,32", "contention: numbers of contenders (clients)")
		goroutines = fs.Int("goroutines", 1, "contention: goroutines per client, each looping on the key (the issue's setting: -contenders 2 -goroutines 8 -hold 0s)")
		refresh    = fs.String("refresh", "", "contention: WithRefreshPeriod (default 1s); handover: comma-separated periods (default 1s,10s)")
		pause      = fs.Duration("pause", 0, "contention: pause between a release and the next attempt")
		duration   = fs.Duration("duration", 10*time.Second, "contention: length of each run; steadiness: seconds counted (default 120s)")
		warmup     = fs.Duration("warmup", 60*time.Second, "steadiness: writing before the count starts (a fresh DynamoDB Local takes about a minute to warm)")
		idle       = fs.Int("idle-conns", bench.DefaultIdleConns, "SDK HTTP MaxIdleConnsPerHost (0: the SDK default, 10)")
		cpuprofile = fs.String("cpuprofile", "", "write a CPU profile of this process to `file`")
		trace      = fs.Bool("trace", false, "capacity: print the client's Stats every 250 ms to stderr")
		memprofile = fs.String("memprofile", "", "capacity: write a heap profile to `file` while the locks are held")
	)
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch cmd {
	case "all", "calls", "latency", "tracing", "writeparts", "capacity", "steadiness", "failover", "handover", "crossover", "contention", "session":
	default:
		usage()
	}
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	e, err := bench.Open(ctx, os.Stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	e.IdleConns = *idle

	switch cmd {
	case "all":
		p := bench.FullPlan()
		if *quick {
			p = bench.QuickPlan()
		}
		p.GoBench = *gobench
		if *png != "" {
			rel, err := filepath.Rel(filepath.Dir(*out), *png)
			if err != nil {
				return err
			}
			p.PNG = filepath.ToSlash(rel)
		}
		res, doc, err := bench.RunAll(ctx, e, p, os.Stdout)
		if err != nil {
			return err
		}
		for _, f := range []string{*out, *png} {
			if f != "" {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					return err
				}
			}
		}
		if *png != "" {
			if err := bench.DrawPNG(*png, res); err != nil {
				return err
			}
			fmt.Fprintln(os.Stderr, "lockbench: wrote", *png)
		}
		// Sections measured by other commands follow handWritten in the
		// file; they are kept.
		if old, err := os.ReadFile(*out); err == nil {
			if i := strings.Index(string(old), handWritten); i >= 0 {
				doc = strings.TrimRight(doc, "\n") + "\n\n" + string(old[i:])
			}
		}
		if err := os.WriteFile(*out, []byte(doc), 0o644); err != nil {
			return err
		}
		fmt.Fprintln(os.Stderr, "lockbench: wrote", *out)
		return nil
	case "calls":
		r, err := bench.MeasureCalls(ctx, e)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown("go -C tools run ./cmd/lockbench calls"))
	case "latency":
		r, err := bench.MeasureLatency(ctx, e, *samples)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench latency"}, args...), " ")))
	case "tracing":
		r, err := bench.MeasureTracing(ctx, e, *samples)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench tracing"}, args...), " ")))
	case "writeparts":
		r, err := bench.MeasureWriteParts(ctx, e, *samples)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench writeparts"}, args...), " ")))
	case "capacity":
		cfg := bench.CapacityConfig{Hold: *hold, Lease: *lease, Heartbeat: *heartbeat, Concurrency: *conc, Admission: *admission, AcquireWorkers: *workers, Unpaced: *unpaced}
		if *trace {
			cfg.Trace = os.Stderr
		}
		cfg.HeapProfile = *memprofile
		if *memprofile != "" {
			runtime.MemProfileRate = 256
		}
		if cfg.Hold == 0 {
			cfg.Hold = 30 * time.Second
		}
		ns := []int{5000}
		if *n != "" {
			if ns, err = ints(*n); err != nil || len(ns) != 1 {
				return fmt.Errorf("capacity: -n %q: want one positive integer", *n)
			}
		}
		if *search != "" {
			if ns, err = ints(*search); err != nil {
				return err
			}
		}
		var c *bench.CeilingResult
		if *ceiling > 0 {
			if c, err = bench.MeasureCeiling(ctx, e, *ceiling, 5*time.Second); err != nil {
				return err
			}
		}
		if *boundPoint {
			if c == nil {
				return errors.New("capacity -bound-point needs the ceiling (-ceiling-writers > 0)")
			}
			ns = bench.WithBoundPoint(ns, c, cfg.Lease)
		}
		r, err := bench.SearchCapacity(ctx, e, cfg, ns, *refine)
		if err != nil {
			return err
		}
		if c != nil {
			if c.After, err = bench.MeasureCeiling(ctx, e, *ceiling, 5*time.Second); err != nil {
				// The runs stand; the bound is the measure before them.
				fmt.Fprintf(os.Stderr, "lockbench: capacity: the ceiling after the runs: %v\n", err)
				c.After = nil
			}
		}
		r.Ceiling = c
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench capacity"}, args...), " ")))
	case "steadiness":
		d := *duration
		if !setFlag(fs, "duration") {
			d = 120 * time.Second
		}
		if *ceiling <= 0 || d < time.Second {
			return fmt.Errorf("steadiness: -ceiling-writers must be at least 1 and -duration at least 1s, have %d and %s", *ceiling, d)
		}
		r, err := bench.MeasureSteadiness(ctx, e, *ceiling, *warmup, d)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench steadiness"}, args...), " ")))
	case "failover":
		r, err := bench.MeasureFailover(ctx, e, *trials)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench failover"}, args...), " ")))
	case "handover":
		cfg := bench.DefaultHandover()
		cfg.Trials, cfg.Waiters = *trials, *waiters
		if *refresh != "" {
			if cfg.Refreshes, err = durations(*refresh); err != nil {
				return err
			}
		}
		r, err := bench.MeasureHandover(ctx, e, cfg)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(bench.HandoverCommand(cfg)))
	case "crossover":
		cfg := bench.DefaultCrossover()
		if setFlag(fs, "trials") {
			cfg.Trials = *trials
		}
		if setFlag(fs, "waiters") {
			cfg.Waiters = *waiters
		}
		if setFlag(fs, "hold") {
			cfg.Hold = *hold
		}
		if setFlag(fs, "contenders") {
			if cfg.Budget, err = ints(*contenders); err != nil {
				return err
			}
		}
		if setFlag(fs, "modes") {
			if cfg.Modes, err = bench.ModesNamed(strings.Split(*modes, ",")); err != nil {
				return err
			}
		}
		r, err := bench.RunCrossover(ctx, e, cfg)
		if err != nil {
			return err
		}
		bench.WriteCrossover(os.Stdout, r, cfg)
	case "session":
		p := bench.DefaultSessionPlan()
		p.Lease, p.Heartbeat, p.Compare, p.MaxRefused, p.AskBudget, p.Takeover, p.CeilingWriters = *lease, *heartbeat, *compare, *maxRefused, *askBudget, *takeover, *ceiling
		if setFlag(fs, "hold") {
			p.Hold = *hold
		}
		if setFlag(fs, "acquire-workers") {
			p.Workers = *workers
		}
		switch *n {
		case "":
		case "0":
			p.Ns = nil
		default:
			if p.Ns, err = ints(*n); err != nil {
				return err
			}
		}
		if err := p.Check(); err != nil {
			return err
		}
		r, err := bench.MeasureSessions(ctx, e, p)
		if err != nil {
			return err
		}
		fmt.Println(r.Markdown(p.Command()))
	case "contention":
		ks, err := ints(*contenders)
		if err != nil {
			return err
		}
		if *goroutines < 1 {
			return fmt.Errorf("-goroutines %d: must be at least 1", *goroutines)
		}
		ms, err := bench.ModesNamed(strings.Split(*modes, ","))
		if err != nil {
			return err
		}
		h := *hold
		if !setFlag(fs, "hold") {
			h = 10 * time.Millisecond
		}
		rf := time.Second
		if *refresh != "" {
			if rf, err = time.ParseDuration(*refresh); err != nil {
				return err
			}
		}
		var cfgs []bench.ContentionConfig
		for _, k := range ks {
			cfgs = append(cfgs, bench.ContentionConfig{Contenders: k, Goroutines: *goroutines, Duration: *duration, Hold: h, Pause: *pause, Refresh: rf})
		}
		var runs []*bench.ContentionRun
		for _, cfg := range bench.WithModes(cfgs, ms) {
			r, err := bench.RunContention(ctx, e, cfg)
			if err != nil {
				return err
			}
			runs = append(runs, r)
		}
		fmt.Println(bench.ContentionMarkdown(strings.Join(append([]string{"go -C tools run ./cmd/lockbench contention"}, args...), " "), runs))
	}
	return nil
}

// modeNames lists the contention modes of this build.
func modeNames() string {
	var ns []string
	for _, m := range bench.ContentionModes {
		ns = append(ns, m.Name)
	}
	return strings.Join(ns, ",")
}

func durations(s string) ([]time.Duration, error) {
	return list(s, "durations", func(f string) (time.Duration, bool) {
		d, err := time.ParseDuration(f)
		return d, err == nil && d > 0
	})
}

func ints(s string) ([]int, error) {
	return list(s, "integers", func(f string) (int, bool) {
		v, err := strconv.Atoi(f)
		return v, err == nil && v > 0
	})
}

// list parses a comma-separated list of positive values.
func list[T any](s, what string, parse func(string) (T, bool)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, ok := parse(strings.TrimSpace(f))
		if !ok {
			return nil, errors.New("want a comma-separated list of positive " + what + ", got " + strconv.Quote(s))
		}
		out = append(out, v)
	}
	return out, nil
}
