package reliability

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	"github.com/arielsrv/dynamolock/v2/tools/internal/netfaults"
)

// Fault kinds.
const (
	FaultLatency   = "latency"   // responses delayed by Latency ± Latency/4
	FaultBandwidth = "bandwidth" // both directions limited to Bandwidth KB/s
	FaultCut       = "cut"       // nothing gets through; connections hang
	FaultDrop      = "drop"      // requests arrive, responses are dropped
	FaultReset     = "reset"     // requests arrive, then the connection is reset
	FaultPause     = "pause"     // the process is stopped (SIGSTOP) while it holds a lock, then resumed
	FaultRestart   = "restart"   // DynamoDB Local is stopped (SIGTERM) and started again on the same file database
)

// quiesce is how long the workers are cut off before DynamoDB Local stops.
const quiesce = 500 * time.Millisecond

// Fault is one fault of a scenario's schedule, At after the workers start,
// lasting For.
type Fault struct {
	At, For   time.Duration
	Kind      string
	Proc      int // target worker process; -1: all of them (network faults)
	Latency   time.Duration
	Bandwidth int64
}

func (f Fault) String() string {
	target := "all processes"
	if f.Proc >= 0 {
		target = "process " + strconv.Itoa(f.Proc)
	}
	switch f.Kind {
	case FaultLatency:
		return fmt.Sprintf("latency %s±%s on %s for %s", f.Latency, f.Latency/4, target, f.For)
	case FaultBandwidth:
		return fmt.Sprintf("bandwidth %d KB/s on %s for %s", f.Bandwidth, target, f.For)
	case FaultCut:
		return fmt.Sprintf("network cut of %s for %s", target, f.For)
	case FaultDrop:
		return fmt.Sprintf("responses to %s dropped for %s", target, f.For)
	case FaultReset:
		return fmt.Sprintf("connections of %s reset after each request for %s", target, f.For)
	case FaultPause:
		return fmt.Sprintf("SIGSTOP of %s while it holds a lock, SIGCONT after %s", target, f.For)
	case FaultRestart:
		return fmt.Sprintf("DynamoDB Local stopped (SIGTERM) and started again %s later, the workers cut off from %s before", f.For, quiesce)
	}
	return f.Kind
}

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

// Env is where scenarios run.
type Env struct {
	// Endpoint is a running DynamoDB Local (scenarios without FileDB).
	Endpoint string
	// Worker returns the command that runs one worker process; the driver
	// adds EnvWorker to its environment.
	Worker func() *exec.Cmd
	// Dir receives configs, logs and file databases.
	Dir string
	// Logf reports progress.
	Logf func(format string, args ...any)
}

// FaultRecord is a fault as it happened.
type FaultRecord struct {
	Fault
	Start, End int64
	Note       string
}

// Outcome is a scenario's run and its check.
type Outcome struct {
	Scenario Scenario
	Faults   []FaultRecord
	Result   *Result
	Elapsed  time.Duration
}

type proc struct {
	cmd    *exec.Cmd
	proxy  *netfaults.Proxy
	owner  string
	events string
	stderr string
	done   chan struct{}
	err    error
}

// Run runs sc in env and checks it.
func Run(ctx context.Context, env Env, sc Scenario) (*Outcome, error) {
	began := time.Now()
	dir := filepath.Join(env.Dir, sc.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	endpoint := env.Endpoint
	var srv *ddblocal.Server
	var srvMu sync.Mutex
	dbPath := filepath.Join(dir, "db")
	if sc.FileDB {
		port, err := ddblocal.FreePort()
		if err != nil {
			return nil, err
		}
		srv, err = ddblocal.Start(ctx, ddblocal.WithDBPath(dbPath), ddblocal.WithPort(port),
			ddblocal.WithLogFile(filepath.Join(dir, "ddblocal.log")))
		if err != nil {
			return nil, err
		}
		endpoint = srv.Endpoint
		defer func() {
			srvMu.Lock()
			defer srvMu.Unlock()
			_ = srv.Stop()
		}()
	}

	admin, err := ddblocal.NewClient(ctx, endpoint)
	if err != nil {
		return nil, err
	}
	suffix := strconv.FormatUint(rand.Uint64()%1e9, 10)
	lockTable, dataTable := "rel_"+sc.Name+"_locks_"+suffix, "rel_"+sc.Name+"_data_"+suffix
	if err := createTables(ctx, admin, lockTable, dataTable); err != nil {
		return nil, err
	}
	defer func() {
		for _, t := range []string{lockTable, dataTable} {
			_, _ = admin.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(t)})
		}
	}()

	keys := make([]string, sc.Keys)
	for i := range keys {
		keys[i] = "key" + strconv.Itoa(i)
	}
	until := time.Now().Add(time.Second + sc.Duration) // a second for the workers to start
	procs := make([]*proc, sc.Procs)
	defer func() {
		for _, p := range procs {
			if p != nil {
				stopProc(p)
				p.proxy.Close()
			}
		}
	}()
	for i := range procs {
		p, err := startProc(env, sc, dir, i, endpoint, lockTable, dataTable, keys, until)
		if err != nil {
			return nil, err
		}
		procs[i] = p
	}
	start := until.Add(-sc.Duration)

	// The fault schedule.
	records := make([]FaultRecord, len(sc.Faults))
	var fwg sync.WaitGroup
	for i, f := range sc.Faults {
		fwg.Go(func() {
			records[i] = FaultRecord{Fault: f}
			rec := &records[i]
			sleepUntil(ctx, start.Add(f.At))
			targets := procs
			if f.Proc >= 0 {
				targets = procs[f.Proc : f.Proc+1]
			}
			undo, note, err := inject(ctx, f, targets, admin, lockTable, dbPath, &srv, &srvMu)
			rec.Start, rec.Note = now(), note
			if err != nil {
				rec.Note = "not injected: " + err.Error()
				rec.End = rec.Start
				return
			}
			sleepUntil(ctx, time.Unix(0, rec.Start).Add(f.For))
			if extra := undo(); extra != "" {
				rec.Note += "; " + extra
			}
			rec.End = now()
		})
	}
	fwg.Wait()

	// Wait for the workers: they stop starting sections at until, finish
	// the one in progress and close their clients.
	deadline := time.After(time.Until(until) + 3*sc.Lease + 30*time.Second)
	var panics int
	for _, p := range procs {
		select {
		case <-p.done:
		case <-deadline:
			stopProc(p)
		}
	}
	for i, p := range procs {
		if p.err != nil {
			panics++
			env.Logf("%s: worker %d: %v", sc.Name, i, p.err)
		}
		if b, _ := os.ReadFile(p.stderr); len(b) > 0 {
			if s := string(b); strings.Contains(s, "panic:") || strings.Contains(s, "DATA RACE") {
				if p.err == nil {
					panics++
				}
				env.Logf("%s: worker %d stderr:\n%s", sc.Name, i, tail(s, 3000))
			}
		}
	}

	final, err := readFinal(ctx, admin, dataTable, keys)
	if err != nil {
		return nil, fmt.Errorf("reading the final state: %w", err)
	}
	var events []Event
	for _, p := range procs {
		evs, err := readLog(p.events)
		if err != nil {
			return nil, err
		}
		events = append(events, evs...)
	}
	res := Check(events, final, 2*time.Minute)
	res.Panics = panics
	if panics > 0 {
		res.violate("%d worker processes panicked, raced or failed", panics)
	}
	for _, rec := range records {
		if strings.HasPrefix(rec.Note, "not injected") {
			res.violate("fault %s %s", rec.Fault, rec.Note)
		}
	}
	return &Outcome{Scenario: sc, Faults: records, Result: res, Elapsed: time.Since(began)}, nil
}

func createTables(ctx context.Context, db *dynamodb.Client, tables ...string) error {
	for _, t := range tables {
		c, err := dynamolock.New(db, t)
		if err != nil {
			return err
		}
		_, err = c.CreateTableWithContext(ctx, t)
		_ = c.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func startProc(env Env, sc Scenario, dir string, i int, endpoint, lockTable, dataTable string, keys []string, until time.Time) (*proc, error) {
	proxy, err := netfaults.NewProxy(endpoint)
	if err != nil {
		return nil, err
	}
	p := &proc{proxy: proxy, done: make(chan struct{}),
		events: filepath.Join(dir, fmt.Sprintf("proc%d.events.jsonl", i)),
		stderr: filepath.Join(dir, fmt.Sprintf("proc%d.stderr", i))}
	cfg := WorkerConfig{
		Proc: i, Endpoint: proxy.Endpoint(), LockTable: lockTable, DataTable: dataTable, Keys: keys,
		Goroutines: sc.Goroutines, Start: until.Add(-sc.Duration).UnixNano(), Until: until.UnixNano(),
		Lease: sc.Lease, Heartbeat: sc.Heartbeat, Refresh: sc.Refresh,
		HTTPTimeout: sc.HTTPTimeout, SDKAttempts: sc.SDKAttempts, Hold: sc.Hold, Steps: sc.Steps,
		ErrorRate: sc.ErrorRate, ErrorKinds: sc.ErrorKinds, AfterSend: contains(sc.AfterSendProcs, i),
		Events: p.events,
	}
	raw, _ := json.Marshal(cfg)
	cfgPath := filepath.Join(dir, fmt.Sprintf("proc%d.json", i))
	if err := os.WriteFile(cfgPath, raw, 0o644); err != nil {
		proxy.Close()
		return nil, err
	}
	errFile, err := os.Create(p.stderr)
	if err != nil {
		proxy.Close()
		return nil, err
	}
	cmd := env.Worker()
	cmd.Env = append(os.Environ(), EnvWorker+"="+cfgPath)
	cmd.Stdout = errFile
	cmd.Stderr = errFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the driver
	// Pdeathsig fires when the forking OS thread exits: ddblocal's locked
	// reaper thread of a restarted server once killed workers forked on it.
	if err := ddblocal.StartOwnThread(cmd, func(err error) {
		p.err = err
		errFile.Close()
		close(p.done)
	}); err != nil {
		errFile.Close()
		proxy.Close()
		return nil, err
	}
	p.cmd = cmd
	p.owner = "proc" + strconv.Itoa(i) + "-pid" + strconv.Itoa(cmd.Process.Pid)
	return p, nil
}

// stopProc resumes p if it was stopped, kills it if it still runs, and
// waits for it. It signals only p's own pid.
func stopProc(p *proc) {
	select {
	case <-p.done:
		return
	default:
	}
	pid := p.cmd.Process.Pid
	_ = syscall.Kill(pid, syscall.SIGCONT)
	_ = syscall.Kill(pid, syscall.SIGKILL)
	<-p.done
	if p.err == nil {
		p.err = errors.New("killed: did not finish in time")
	}
}

// inject applies f to targets and returns the function that ends it.
func inject(ctx context.Context, f Fault, targets []*proc, admin *dynamodb.Client, lockTable, dbPath string,
	srv **ddblocal.Server, srvMu *sync.Mutex) (undo func() string, note string, err error) {
	heal := func() string {
		for _, p := range targets {
			_ = p.proxy.Heal()
		}
		return ""
	}
	// A fault aimed at one process waits (a little) until that process
	// holds a lock, so that it hits a holder.
	if f.Proc >= 0 && f.Kind != FaultRestart {
		key, held := waitHolding(ctx, admin, lockTable, targets[0].owner, 5*time.Second)
		if held {
			note = fmt.Sprintf("pid %d held %q", targets[0].cmd.Process.Pid, key)
		} else {
			note = fmt.Sprintf("pid %d held no lock", targets[0].cmd.Process.Pid)
		}
	}
	names := make([][]string, len(targets)) // toxics added, per target
	for i, p := range targets {
		var err error
		add := func(n string, e error) {
			if e == nil {
				names[i] = append(names[i], n)
			}
			err = errors.Join(err, e)
		}
		switch f.Kind {
		case FaultLatency:
			add(p.proxy.Latency(netfaults.Downstream, f.Latency, f.Latency/4))
		case FaultBandwidth:
			add(p.proxy.Bandwidth(netfaults.Downstream, f.Bandwidth))
			add(p.proxy.Bandwidth(netfaults.Upstream, f.Bandwidth))
		case FaultCut:
			err = p.proxy.Cut()
		case FaultDrop:
			err = p.proxy.DropResponses()
		case FaultReset:
			err = p.proxy.ResetResponses(0)
		}
		if err != nil {
			heal()
			return nil, "", err
		}
	}
	switch f.Kind {
	case FaultLatency, FaultBandwidth:
		return func() string {
			for i, p := range targets {
				for _, n := range names[i] {
					_ = p.proxy.Remove(n)
				}
			}
			return ""
		}, note, nil
	case FaultCut, FaultDrop, FaultReset:
		return heal, note, nil
	case FaultPause:
		pid := targets[0].cmd.Process.Pid
		if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
			return nil, "", err
		}
		return func() string {
			if err := syscall.Kill(pid, syscall.SIGCONT); err != nil {
				return "SIGCONT: " + err.Error()
			}
			return ""
		}, note, nil
	case FaultRestart:
		// DynamoDB Local loses writes it acknowledged just before it stops
		// (seen with SIGKILL and with SIGTERM: an acknowledged increment went
		// missing), which no lock client can survive and real DynamoDB never
		// does. So the workers' network is cut first, for long enough that
		// nothing is in flight, and the server stops on a quiet store.
		for _, p := range targets {
			if err := p.proxy.Cut(); err != nil {
				heal()
				return nil, "", err
			}
		}
		time.Sleep(quiesce)
		srvMu.Lock()
		old := *srv
		port := old.Port
		err := old.Stop() // SIGTERM
		srvMu.Unlock()
		if err != nil {
			heal()
			return nil, "", err
		}
		stopped := time.Now()
		return func() string {
			defer heal()
			s, err := ddblocal.Start(ctx, ddblocal.WithDBPath(dbPath), ddblocal.WithPort(port),
				ddblocal.WithLogFile(filepath.Join(filepath.Dir(dbPath), "ddblocal.log")))
			if err != nil {
				return "restart failed: " + err.Error()
			}
			srvMu.Lock()
			*srv = s
			srvMu.Unlock()
			return fmt.Sprintf("down for %s", time.Since(stopped).Round(100*time.Millisecond))
		}, fmt.Sprintf("network cut for %s, then pid %d stopped", quiesce, old.PID()), nil
	}
	return nil, "", fmt.Errorf("unknown fault %q", f.Kind)
}

// waitHolding polls the lock table until owner holds some lock, for up to d.
func waitHolding(ctx context.Context, db *dynamodb.Client, table, owner string, d time.Duration) (string, bool) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		out, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true)})
		if err == nil {
			for _, item := range out.Items {
				o, _ := item["ownerName"].(*types.AttributeValueMemberS)
				_, released := item["isReleased"]
				if o != nil && o.Value == owner && !released {
					k, _ := item["key"].(*types.AttributeValueMemberS)
					if k != nil {
						return k.Value, true
					}
				}
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return "", false
}

func readFinal(ctx context.Context, db *dynamodb.Client, table string, keys []string) (FinalState, error) {
	st := FinalState{Counter: map[string]int64{}, Ops: map[string][]string{}, Shadow: map[string]int64{}}
	get := func(item string) (map[string]types.AttributeValue, error) {
		var lastErr error
		for range 50 { // the server may just have restarted
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
				Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: item}}})
			if err == nil {
				return out.Item, nil
			}
			lastErr = err
			time.Sleep(200 * time.Millisecond)
		}
		return nil, lastErr
	}
	for _, k := range keys {
		item, err := get("ctr#" + k)
		if err != nil {
			return st, err
		}
		if st.Counter[k], err = counterValue(item); err != nil {
			return st, err
		}
		if l, ok := item["ops"].(*types.AttributeValueMemberL); ok {
			for _, v := range l.Value {
				if s, ok := v.(*types.AttributeValueMemberS); ok {
					st.Ops[k] = append(st.Ops[k], s.Value)
				}
			}
		} else {
			st.Ops[k] = nil
		}
		if item, err = get("shadow#" + k); err != nil {
			return st, err
		}
		if st.Shadow[k], err = counterValue(item); err != nil {
			return st, err
		}
	}
	return st, nil
}

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
