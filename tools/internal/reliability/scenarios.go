package reliability

import "time"

// Scenario is one run of the suite.
type Scenario struct {
	Name        string
	Description string
	Procs       int
	Goroutines  int
	Keys        int
	Duration    time.Duration
	Lease       time.Duration
	Heartbeat   time.Duration
	Refresh     time.Duration
	Hold        time.Duration
	Steps       int
	HTTPTimeout time.Duration
	SDKAttempts int
	// Service errors injected into every worker's calls; AfterSendProcs
	// get them after the request reached DynamoDB.
	ErrorRate      float64
	ErrorKinds     []string
	AfterSendProcs []int
	Faults         []Fault
	// FileDB runs the scenario on its own DynamoDB Local with a file
	// database, which FaultRestart needs.
	FileDB bool
}

// Scenarios returns the suite: short (about a minute in all, run by
// `make test`) or full (`make reliability`).
func Scenarios(full bool) []Scenario {
	base := Scenario{
		Procs: 3, Goroutines: 2, Keys: 2,
		Lease: 1500 * time.Millisecond, Heartbeat: 300 * time.Millisecond, Refresh: 100 * time.Millisecond,
		Hold: 150 * time.Millisecond, Steps: 3,
		HTTPTimeout: 400 * time.Millisecond, SDKAttempts: 2,
	}
	scale := time.Duration(1)
	if full {
		scale = 5
		base.Procs, base.Goroutines, base.Keys = 4, 3, 3
	} else {
		// The short suite runs beside the other packages' tests in
		// `make test` on two cores: keep its load on DynamoDB Local light
		// (about a hundred requests a second), so that it does not starve
		// their timing.
		base.Hold, base.Refresh = 300*time.Millisecond, 200*time.Millisecond
	}
	s := func(f func(*Scenario)) Scenario {
		sc := base
		f(&sc)
		return sc
	}
	// repeat lays out a fault pattern of length period again and again
	// over d.
	repeat := func(d, period time.Duration, pattern ...Fault) []Fault {
		var out []Fault
		for at := time.Duration(0); at+period <= d; at += period {
			for _, f := range pattern {
				f.At += at
				out = append(out, f)
			}
		}
		return out
	}
	const all = -1
	network := []Fault{
		{At: 500 * time.Millisecond, For: 1500 * time.Millisecond, Kind: FaultLatency, Proc: all, Latency: 250 * time.Millisecond},
		{At: 2500 * time.Millisecond, For: 700 * time.Millisecond, Kind: FaultCut, Proc: 0},
		{At: 3500 * time.Millisecond, For: 3 * time.Second, Kind: FaultCut, Proc: 1},
		{At: 7 * time.Second, For: 500 * time.Millisecond, Kind: FaultDrop, Proc: 2},
		{At: 7800 * time.Millisecond, For: 400 * time.Millisecond, Kind: FaultReset, Proc: 0},
		{At: 8500 * time.Millisecond, For: 1200 * time.Millisecond, Kind: FaultBandwidth, Proc: all, Bandwidth: 8},
	}
	pauses := []Fault{
		{At: 1500 * time.Millisecond, For: 4 * time.Second, Kind: FaultPause, Proc: 0},
		{At: 6 * time.Second, For: 3500 * time.Millisecond, Kind: FaultPause, Proc: 1},
	}
	suite := []Scenario{
		s(func(sc *Scenario) {
			sc.Name = "contention"
			sc.Description = "Worker processes contend for a few keys with no fault: the baseline."
			if full {
				sc.Goroutines = 3
			}
			sc.Duration = 6 * time.Second * scale
		}),
		s(func(sc *Scenario) {
			sc.Name = "network"
			sc.Description = "Each worker process reaches DynamoDB Local through its own toxiproxy: latency spikes, " +
				"a cut shorter and one longer than the lease, responses dropped after the write landed, " +
				"connections reset after the request, and a bandwidth limit."
			sc.Duration = 10 * time.Second * scale
			sc.Faults = repeat(sc.Duration, 10*time.Second, network...)
		}),
		s(func(sc *Scenario) {
			sc.Name = "service-errors"
			sc.Description = "SDK middleware fails 25% of all HTTP attempts with throttling, 500 or 503 errors; " +
				"for the last process the request reaches DynamoDB first (the write lands, the answer is an error)."
			sc.Duration = 6 * time.Second * scale
			sc.ErrorRate = 0.25
			sc.ErrorKinds = []string{"throttling", "500", "503"}
			sc.AfterSendProcs = []int{sc.Procs - 1}
		}),
		s(func(sc *Scenario) {
			sc.Name = "pause"
			sc.Description = "A process is stopped (SIGSTOP) while it holds a lock, for more than two leases, " +
				"and resumed (SIGCONT). Sections are long so that the pause hits guarded work in progress."
			sc.Duration = 10 * time.Second * scale
			sc.Hold, sc.Steps = 300*time.Millisecond, 10
			sc.Faults = repeat(sc.Duration, 10*time.Second, pauses...)
		}),
		s(func(sc *Scenario) {
			sc.Name = "restart"
			sc.Description = "DynamoDB Local runs on a file database (-dbPath); it is stopped (SIGTERM) and started again " +
				"on the same port and files while the workers run. The workers' network is cut 500 ms before each stop: " +
				"DynamoDB Local loses writes it acknowledged just before it stops (trial runs lost an acknowledged guarded " +
				"increment both after SIGKILL and after SIGTERM), which no lock can survive and real DynamoDB never does."
			sc.Procs = 2
			sc.Duration = 12 * time.Second * scale
			sc.FileDB = true
			sc.Faults = repeat(sc.Duration, 12*time.Second,
				Fault{At: 3 * time.Second, For: 300 * time.Millisecond, Kind: FaultRestart, Proc: all})
		}),
	}
	if !full {
		return suite
	}
	return append(suite,
		s(func(sc *Scenario) {
			sc.Name = "chaos"
			sc.Description = "Everything but restarts at once: network faults, 10% service errors, and pauses."
			sc.Duration = 10 * time.Second * scale
			sc.ErrorRate = 0.1
			sc.ErrorKinds = []string{"throttling", "500", "503"}
			sc.AfterSendProcs = []int{1}
			sc.Hold, sc.Steps = 300*time.Millisecond, 10
			sc.Faults = append(repeat(sc.Duration, 10*time.Second, network...), repeat(sc.Duration, 10*time.Second, pauses...)...)
		}))
}
