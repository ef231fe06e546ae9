package reliability

// The worker processes, as the driver sees them: started with their config,
// each behind a proxy of its own, and stopped.

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	"github.com/arielsrv/dynamolock/v2/tools/internal/netfaults"
)

type proc struct {
	cmd    *exec.Cmd
	proxy  *netfaults.Proxy
	owner  string
	events string
	stderr string
	done   chan struct{}
	err    error
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
		ErrorRate: sc.ErrorRate, ErrorKinds: sc.ErrorKinds, AfterSend: slices.Contains(sc.AfterSendProcs, i),
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

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
