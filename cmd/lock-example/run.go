package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
)

// waitForever stands for "no --timeout": an acquisition gives up after the
// holder's lease plus this, so it must outlast any real wait (and still add
// to a lease without overflowing).
const waitForever = 100 * 365 * 24 * time.Hour

// releaseTimeout bounds the release and Close after the command ended.
const releaseTimeout = 30 * time.Second

// runner runs one command under one lock.
type runner struct {
	cfg                   *config
	name                  string   // the lock
	argv                  []string // the command
	path                  string   // argv[0] resolved
	stdin, stdout, stderr *os.File
	sigs                  chan os.Signal // the signals to forward
	client                *dynamolock.Client
	db                    *dynamodb.Client
}

// runLocked runs argv while holding the lock name, as the usage text says,
// and returns lock-example's exit status.
func runLocked(cfg *config, name string, argv []string, stdin, stdout, stderr *os.File) int {
	r := &runner{cfg: cfg, name: name, argv: argv, stdin: stdin, stdout: stdout, stderr: stderr}
	if cfg.timeout < 0 || cfg.killGrace < 0 {
		r.logf("--timeout and --kill-grace must not be negative")
		return exitSetup
	}
	// Resolve the command before taking the lock: a typo must not hold it.
	var err error
	if r.path, err = exec.LookPath(argv[0]); err != nil {
		r.logf("%v", err)
		if errors.Is(err, fs.ErrPermission) {
			return exitCannotRun
		}
		return exitNotFound
	}
	// Catch the signals to forward from now on: one arriving while the lock
	// is being taken ends the wait instead of killing this process.
	r.sigs = make(chan os.Signal, 8)
	signal.Notify(r.sigs, forwardedSignals...)
	defer signal.Stop(r.sigs)

	if r.client, r.db, err = cfg.newClient(stderr); err != nil {
		r.logf("%v", err)
		return exitSetup
	}
	lock, code := r.waitForLock()
	if lock == nil {
		r.closeClient() // releases the lock if it was granted after all
		return code
	}
	return r.runCommand(lock)
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "lock-example: "+format+"\n", args...)
}

// closeClient releases any lock still held and stops the heartbeats.
func (r *runner) closeClient() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := r.client.CloseWithContext(ctx); err != nil {
		r.logf("%v", err)
	}
}

// waitForLock acquires the lock, or returns the exit status that says why
// it did not: busy, a setup error, or the signal that ended the wait.
func (r *runner) waitForLock() (*dynamolock.Lock, int) {
	type acquired struct {
		lock *dynamolock.Lock
		busy bool
		err  error
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res := make(chan acquired, 1)
	if r.cfg.verbose {
		r.logf("taking lock %q", r.name)
	}
	go func() {
		l, busy, err := r.acquire(ctx)
		res <- acquired{l, busy, err}
	}()
	var a acquired
	select {
	case a = <-res:
	case s := <-r.sigs:
		cancel()
		<-res // a lock granted meanwhile is released by Close
		r.logf("%v while waiting for lock %q", s, r.name)
		return nil, 128 + signalNumber(s)
	}
	var held *dynamolock.LockHeldError
	switch {
	case a.busy && r.cfg.timeout > 0:
		// The wait also retries DynamoDB errors until the deadline: read the
		// lock once, so that an unreachable DynamoDB is not reported as busy.
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		view, err := r.client.GetWithContext(ctx, r.name)
		if err != nil {
			r.logf("lock %q not acquired within --timeout %s: %v", r.name, r.cfg.timeout, err)
			return nil, exitSetup
		}
		r.logf("lock %q not acquired within --timeout %s: held by %q", r.name, r.cfg.timeout, view.OwnerName())
		return nil, exitBusy
	case a.busy && errors.As(a.err, &held):
		r.logf("lock %q is busy: held by %q (lease %s)", r.name, held.Owner, held.LeaseDuration)
		return nil, exitBusy
	case a.busy:
		r.logf("lock %q is busy: %v", r.name, a.err)
		return nil, exitBusy
	case a.err != nil:
		r.logf("%v", a.err)
		return nil, exitSetup
	}
	return a.lock, exitOK
}

// acquire takes the lock as the flags say. busy reports that it was held
// by someone else for all of the allowed wait.
func (r *runner) acquire(ctx context.Context) (lock *dynamolock.Lock, busy bool, err error) {
	cfg := r.cfg
	if cfg.createTable {
		if err := ensureTable(ctx, cfg, r.client); err != nil {
			return nil, false, err
		}
	}
	// The item's data is always this run's: none without --data.
	opts := []dynamolock.AcquireLockOption{dynamolock.ReplaceData()}
	if cfg.data != "" {
		opts = append(opts, dynamolock.WithData([]byte(cfg.data)))
	}
	switch {
	case !cfg.waitForLock && cfg.timeout == 0:
		opts = append(opts, dynamolock.FailIfLocked())
	case cfg.timeout > 0:
		// The context's deadline makes --timeout exact; the library's own
		// limit (holder's lease + additional time) lies beyond it.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
		opts = append(opts, dynamolock.WithAdditionalTimeToWaitForLock(cfg.timeout))
	default:
		opts = append(opts, dynamolock.WithAdditionalTimeToWaitForLock(waitForever))
	}
	lock, err = r.client.AcquireLockWithContext(ctx, r.name, opts...)
	if err == nil {
		return lock, false, nil
	}
	var held *dynamolock.LockHeldError
	var timeout *dynamolock.TimeoutError
	busy = errors.As(err, &held) || errors.As(err, &timeout) ||
		errors.Is(context.Cause(ctx), context.DeadlineExceeded)
	return nil, busy, err
}

// runCommand runs the command under the held lock and settles the lock
// when it ends; it returns lock-example's exit status.
func (r *runner) runCommand(lock *dynamolock.Lock) int {
	cmd := &exec.Cmd{
		Path:   r.path,
		Args:   r.argv,
		Stdin:  r.stdin,
		Stdout: r.stdout,
		Stderr: r.stderr,
		Env: append(os.Environ(),
			"DYNAMOLOCK_NAME="+r.name,
			"DYNAMOLOCK_OWNER="+r.client.OwnerName(),
			"DYNAMOLOCK_FENCING_TOKEN="+strconv.FormatUint(lock.FencingToken(), 10)),
	}
	restoreTerminal := prepareProcess(cmd, r.stdin)
	if err := cmd.Start(); err != nil {
		restoreTerminal()
		r.logf("%v", err)
		r.closeClient() // the command never ran: release the lock
		if errors.Is(err, fs.ErrNotExist) {
			return exitNotFound
		}
		return exitCannotRun
	}
	lost := r.supervise(cmd, lock)
	restoreTerminal()
	code := exitStatus(cmd.ProcessState)

	if lost {
		r.closeClient()
		return exitLockLost
	}
	if code != 0 && !r.cfg.releaseOnError {
		// Keep the lock until its lease runs out. Close would release it;
		// exiting without it just ends the heartbeats.
		if r.cfg.verbose {
			r.logf("command failed: lock %q kept until its lease (%s) runs out", r.name, lock.LeaseDuration())
		}
		return code
	}
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if _, err := r.client.ReleaseLockWithContext(ctx, lock); err != nil {
		if errors.Is(err, dynamolock.ErrLockLost) {
			r.logf("lock %q was lost before the command ended: %v", r.name, err)
			r.closeClient()
			return exitLockLost
		}
		r.logf("releasing lock %q: %v (it expires after its lease)", r.name, err)
	}
	r.closeClient()
	return code
}

// supervise waits for the command to end, forwarding signals to it and
// stopping it when the lock is lost. It reports whether the lock was lost.
func (r *runner) supervise(cmd *exec.Cmd, lock *dynamolock.Lock) (lost bool) {
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is read from cmd.ProcessState
		close(exited)
	}()
	lockDone := lock.Done() // closes only on loss: the release comes after
	var kill <-chan time.Time
	for {
		select {
		case <-exited:
			if lost {
				// Whatever the command left behind in its group got SIGTERM
				// with it, and may not run on without the lock either.
				signalGroup(cmd, sigKill)
			}
			return lost
		case s := <-r.sigs:
			signalGroup(cmd, s)
		case <-lockDone:
			lockDone = nil
			lost = true
			r.logf("%v; stopping the command (SIGTERM, then SIGKILL after %s)", lock.Err(), r.cfg.killGrace)
			signalGroup(cmd, sigTerm)
			t := time.NewTimer(r.cfg.killGrace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			signalGroup(cmd, sigKill)
		}
	}
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}
