package reliability

// The driver: one scenario's run, from the tables and the worker processes
// to the fault schedule and the check of what the workers logged.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

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

// Outcome is a scenario's run and its check.
type Outcome struct {
	Scenario Scenario
	Faults   []FaultRecord
	Result   *Result
	Elapsed  time.Duration
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

	records := runFaults(ctx, sc.Faults, start, procs, admin, lockTable, dbPath, &srv, &srvMu)
	panics := waitWorkers(env, sc, procs, until)

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

// waitWorkers waits for the worker processes, which stop starting sections
// at until, finish the one in progress and close their clients; a worker
// still running 3 leases and 30 s after until is killed. It returns how
// many failed, panicked or raced, and logs what they said.
func waitWorkers(env Env, sc Scenario, procs []*proc, until time.Time) (panics int) {
	deadline := time.After(time.Until(until) + 3*sc.Lease + 30*time.Second)
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
	return panics
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
