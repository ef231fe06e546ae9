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
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

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
	tap                   *itemTap // the lock client's DynamoDB client
	t                     timings
	acquiredAt            time.Time // when the lock was granted (--hold-at-least counts from then)
	terms                 int       // leader mode: terms lost so far
}

// runLocked runs argv while holding the lock name, as the usage text says,
// and returns lock-example's exit status.
func runLocked(cfg *config, name string, argv []string, stdin, stdout, stderr *os.File) int {
	r := &runner{cfg: cfg, name: name, argv: argv, stdin: stdin, stdout: stdout, stderr: stderr}
	var err error
	if r.t, err = cfg.timings(); err == nil {
		err = cfg.checkMode(r.t)
	}
	if err != nil {
		r.logf("%v", err)
		return exitSetup
	}
	ignoreTTOU()
	// Resolve the command before taking the lock: a typo must not hold it.
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

	// lock-example renews the lock itself (keeper), not the client.
	if r.client, r.tap, err = cfg.newClient(stderr, dynamolock.DisableHeartbeat()); err != nil {
		r.logf("%v", err)
		return exitSetup
	}
	for {
		lock, code := r.waitForLock()
		if lock == nil {
			r.closeClient() // releases the lock if it was granted after all
			return code
		}
		r.acquiredAt = time.Now()
		code, lost := r.runCommand(lock)
		if !lost || !cfg.leader {
			return code
		}
		r.nextTerm(lock) // leader mode: campaign again (leader.go)
	}
}

func (r *runner) logf(format string, args ...any) {
	fmt.Fprintf(r.stderr, "lock-example: "+format+"\n", args...)
}

// closeClient releases any lock still held and stops the heartbeats.
func (r *runner) closeClient() {
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	if err := r.client.CloseWithContext(ctx); err != nil {
		r.logf("%s", r.errText(err))
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
		r.logf("taking %s %q", r.cfg.modeText(), r.name)
	}
	go func() {
		l, busy, err := r.acquire(ctx)
		res <- acquired{l, busy, err}
	}()
	var a acquired
	// While waiting, DynamoDB is read every heartbeat period: failing for a
	// whole lease, it counts as unreachable (125), not as a busy lock. The
	// library's wait alone would retry for as long as it may wait.
	var probe <-chan time.Time
	if (r.cfg.waitForLock || r.cfg.timeout > 0) && !r.cfg.leader { // a candidate campaigns through outages
		t := time.NewTicker(r.t.heartbeat)
		defer t.Stop()
		probe = t.C
	}
	probed := make(chan error, 1)
	probing := false
	// A probe still out when the acquisition answers is cancelled, not
	// waited for: against a silent endpoint it would add its own bound.
	probeCtx, stopProbe := context.WithCancel(ctx)
	defer stopProbe()
	lastOK := time.Now()
wait:
	for {
		select {
		case a = <-res:
			break wait
		case s := <-r.sigs:
			cancel()
			<-res // a lock granted meanwhile is released by Close
			r.logf("%v while waiting for lock %q", s, r.name)
			return nil, 128 + signalNumber(s)
		case <-probe:
			if !probing {
				probing = true
				go func() {
					pctx, pcancel := context.WithTimeout(probeCtx, r.t.heartbeat)
					defer pcancel()
					_, err := r.client.GetWithContext(pctx, r.name)
					probed <- err
				}()
			}
		case err := <-probed:
			probing = false
			var missing *types.ResourceNotFoundException
			if err == nil || (r.cfg.createTable && errors.As(err, &missing)) { // --create-table may still be at work
				lastOK = time.Now()
			} else if time.Since(lastOK) >= r.t.lease {
				cancel()
				<-res
				r.logf("DynamoDB failed for --lease %s while waiting for lock %q: %s", r.t.lease, r.name, r.errText(err))
				return nil, exitSetup
			}
		}
	}
	stopProbe()
	if probing {
		<-probed
	}
	switch {
	case a.busy && r.cfg.timeout > 0:
		// The wait also retries DynamoDB errors until the deadline: read the
		// lock once, so that an unreachable DynamoDB is not reported as busy.
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		view, err := r.client.GetWithContext(ctx, r.name)
		if err != nil {
			r.logf("lock %q not acquired within --timeout %s: %s", r.name, r.cfg.timeout, r.explain(err))
			return nil, exitSetup
		}
		if view.OwnerName() != "" && !view.IsReleased() {
			a.err = &dynamolock.LockHeldError{Key: r.name, Owner: view.OwnerName(), LeaseDuration: view.LeaseDuration()}
		}
		r.logf("lock %q not acquired within --timeout %s: %s", r.name, r.cfg.timeout, r.heldBy(a.err))
		return nil, exitBusy
	case a.busy:
		r.logf("lock %q is busy: %s", r.name, r.heldBy(a.err))
		return nil, exitBusy
	case a.err != nil:
		r.logf("%s", r.explain(a.err))
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
	opts := cfg.dataOptions()
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
	lock, err = r.takeLock(ctx, opts)
	if err == nil {
		return lock, false, nil
	}
	return nil, isBusy(ctx, err), err
}

// outcome is how the command's run ended.
type outcome struct {
	code     int  // the command's status, as a shell reports it
	lost     bool // the lock was lost or not renewed in time: the command was stopped
	notRun   bool // the command could not be started; code says why
	leftover bool // processes of the command's group outlived SIGKILL
	// interrupted is the last signal that ends a hold (SIGINT, SIGTERM,
	// SIGHUP, SIGQUIT) lock-example received while the job ran: the job
	// ended because someone asked it to, not as a failure to hold against.
	interrupted os.Signal
}

// commandEnv is the command's environment.
func (r *runner) commandEnv(k *keeper) []string {
	env := append(os.Environ(),
		"DYNAMOLOCK_NAME="+r.name,
		"DYNAMOLOCK_OWNER="+r.client.OwnerName(),
		"DYNAMOLOCK_FENCING_TOKEN="+strconv.FormatUint(k.lock.FencingToken(), 10))
	if r.cfg.limit > 0 {
		env = append(env, "DYNAMOLOCK_SLOT="+slotIndex(k.lock))
	}
	return env
}

func describeLoss(name string, err error) string {
	return fmt.Sprintf("lock %q: %s", name, oneLine(err.Error()))
}

// runCommand runs the command under the held lock and settles the lock
// when it ends; it returns lock-example's exit status. In leader mode, a
// lock lost while the command ran (the command stopped) is reported with
// lost, and the client is kept for the next campaign.
func (r *runner) runCommand(lock *dynamolock.Lock) (code int, lost bool) {
	k := newKeeper(r.client, lock, r.t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := k.first(ctx); err != nil {
		r.logf("lock %q could not be renewed after it was granted: %s; the command was not started", r.name, r.errText(err))
		if k.isLost(err) {
			if r.cfg.leader {
				return exitLockLost, true
			}
			r.closeClient()
			return exitLockLost, false
		}
		r.closeClient()
		return exitSetup, false
	}
	var wg sync.WaitGroup
	wg.Go(func() { k.run(ctx) })
	stopKeeper := func() {
		cancel()
		wg.Wait()
	}
	defer stopKeeper()

	o := r.superviseJob(k)
	// until is the earliest release --hold-at-least allows.
	var until time.Time
	if r.cfg.holdAtLeast > 0 {
		until = r.acquiredAt.Add(r.cfg.holdAtLeast)
	}
	switch {
	case o.notRun:
		stopKeeper()
		r.closeClient() // the command never ran: release the lock
		return o.code, false
	case o.lost && r.cfg.leader:
		stopKeeper()
		return exitLockLost, true // the next campaign releases what may still be held
	case o.lost:
		stopKeeper()
		r.closeClient() // releases the lock if it is still held after all
		return exitLockLost, false
	case o.leftover:
		end := later(time.Now().Add(r.t.lease), until)
		r.logf("keeping lock %q %s, renewed, before releasing it", r.name, r.keepText(end, until))
		r.hold(k, end)
	case o.interrupted != nil:
		why := ""
		if time.Now().Before(until) {
			why = " (--hold-at-least does not hold back a command asked to stop)"
		}
		r.logf("the command ended after %v (status %d) and no process of its group is left: releasing lock %q now%s",
			o.interrupted, o.code, r.name, why)
	case o.code != 0 && !r.cfg.releaseOnError:
		end := later(time.Now().Add(r.t.lease), until)
		r.logf("the command failed (status %d): keeping lock %q %s, renewed, before releasing it (--release-on-error releases it at once)",
			o.code, r.name, r.keepText(end, until))
		r.hold(k, end)
	case time.Now().Before(until):
		if r.cfg.verbose || isTerminal(r.stderr) {
			r.logf("the command ended (status %d): keeping lock %q %s, renewed; SIGINT or SIGTERM releases it now",
				o.code, r.name, r.keepText(until, until))
		}
		r.hold(k, until)
	}
	stopKeeper()
	if _, lost := k.state(); lost != nil {
		r.logf("%s", describeLoss(r.name, lost))
		r.closeClient()
		return o.code, false
	}
	ctx, cancelRelease := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancelRelease()
	if _, err := r.client.ReleaseLockWithContext(ctx, lock); err != nil {
		if errors.Is(err, dynamolock.ErrLockLost) && !o.lost && o.code == 0 {
			r.logf("lock %q was lost before the command ended: %s", r.name, r.errText(err))
			r.closeClient()
			return exitLockLost, false
		}
		r.logf("releasing lock %q: %s (it can be taken over once its lease has run out)", r.name, r.errText(err))
	}
	r.closeClient()
	return o.code, false
}

// hold keeps the lock, renewed, until end: one lease after a failure, so
// that a failed job is not run again elsewhere at once, or as long as
// --hold-at-least says. SIGINT, SIGTERM, SIGHUP or SIGQUIT end the wait
// early. Then the caller releases it. Leaving it unreleased instead would
// keep it held until someone waits a full lease for it or force-releases
// it.
func (r *runner) hold(k *keeper, end time.Time) {
	t := time.NewTimer(time.Until(end))
	defer t.Stop()
	for {
		select {
		case <-t.C:
			return
		case <-k.changed:
			if _, lost := k.state(); lost != nil {
				return
			}
		case s := <-r.sigs:
			if endsHold(s) {
				r.logf("%v: releasing lock %q now", s, r.name)
				return
			}
		}
	}
}

// keepText says how long hold keeps the lock: until end, which is until
// (--hold-at-least's) or one lease from now.
func (r *runner) keepText(end, until time.Time) string {
	if end.Equal(until) {
		return fmt.Sprintf("until --hold-at-least %s after it was taken (%s more)", r.cfg.holdAtLeast,
			time.Until(end).Round(100*time.Millisecond))
	}
	return fmt.Sprintf("for one lease (%s)", r.t.lease)
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func newLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, nil))
}

// endsHold reports whether s ends hold early.
func endsHold(s os.Signal) bool {
	switch s {
	case syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT:
		return true
	}
	return false
}
