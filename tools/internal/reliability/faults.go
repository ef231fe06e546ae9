package reliability

// The faults a scenario's schedule injects, and their injection.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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

// FaultRecord is a fault as it happened.
type FaultRecord struct {
	Fault
	Start, End int64
	Note       string
}

// runFaults applies the schedule faults, each At after start to its target
// processes and lifted For later, and returns what happened. It returns
// when every fault has been lifted (or ctx ended).
func runFaults(ctx context.Context, faults []Fault, start time.Time, procs []*proc, admin *dynamodb.Client,
	lockTable, dbPath string, srv **ddblocal.Server, srvMu *sync.Mutex) []FaultRecord {
	records := make([]FaultRecord, len(faults))
	var wg sync.WaitGroup
	for i, f := range faults {
		wg.Go(func() {
			records[i] = FaultRecord{Fault: f}
			rec := &records[i]
			sleepUntil(ctx, start.Add(f.At))
			targets := procs
			if f.Proc >= 0 {
				targets = procs[f.Proc : f.Proc+1]
			}
			undo, note, err := inject(ctx, f, targets, admin, lockTable, dbPath, srv, srvMu)
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
	wg.Wait()
	return records
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

func sleepUntil(ctx context.Context, t time.Time) {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
	case <-ctx.Done():
	}
}
