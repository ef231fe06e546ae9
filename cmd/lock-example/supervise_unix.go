//go:build unix

package main

import (
	"context"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"
)

// leftoverWait bounds the wait for processes of the group to vanish after
// SIGKILL (a process in uninterruptible sleep takes a while).
const leftoverWait = 5 * time.Second

// groupPoll is how often the group is looked at once its first process
// has ended (orphans' ends are not reported otherwise).
const groupPoll = 20 * time.Millisecond

// superviseJob runs the command and waits until its first process has ended
// and no process of its group is left: it forwards signals, stops the job
// with lock-example on Ctrl-Z, and stops it in time when the lock is lost or
// not renewed.
func (r *runner) superviseJob(k *keeper) outcome {
	cont := make(chan os.Signal, 1)
	signal.Notify(cont, syscall.SIGCONT)
	defer signal.Stop(cont)
	signal.Notify(r.sigs, jobControlSignals...)
	defer signal.Reset(jobControlSignals...)

	j, err := startJob(r.path, r.argv, r.commandEnv(k), r.stdin, r.stdout, r.stderr)
	if err != nil {
		r.logf("%v", err)
		if j != nil {
			if j.witness != 0 {
				_ = syscall.Kill(j.witness, syscall.SIGKILL)
				j.witnessed()
			}
			for ev := range j.events {
				if !ev.stopped {
					break
				}
				j.signal(syscall.SIGKILL)
			}
			j.abandon()
		}
		return outcome{code: exitCannotRun, notRun: true}
	}

	var (
		o        outcome
		exited   bool
		stopping bool
		killAt   time.Time
		killed   bool
	)
	stopAt, _ := k.stopAt()
	stopTimer := time.NewTimer(time.Until(stopAt))
	defer stopTimer.Stop()
	killTimer := time.NewTimer(time.Hour)
	killTimer.Stop()
	defer killTimer.Stop()
	var pollC, giveUpC <-chan time.Time
	poll := time.NewTicker(groupPoll)
	defer poll.Stop()

	// begin stops the job: SIGTERM now (and SIGCONT, so that stopped
	// processes see it), SIGKILL at the latest at `at`.
	begin := func(why string, at time.Time) {
		if !stopping {
			stopping = true
			r.logf("%s; stopping the command (SIGTERM, then SIGKILL after %s)", why, time.Until(at).Round(time.Millisecond))
			j.signal(syscall.SIGTERM)
			j.signal(syscall.SIGCONT)
		}
		if !killed && (killAt.IsZero() || at.Before(killAt)) {
			killAt = at
			killTimer.Reset(time.Until(at))
		}
	}
	for {
		if exited && !j.groupAlive() {
			j.finish()
			return o
		}
		select {
		case ev := <-j.events:
			switch {
			case ev.stopped && !exited && !stopping:
				if !r.jobStopped(j, k, ev.sig, cont) {
					o.lost, stopping, killed = true, true, true
					j.signal(syscall.SIGKILL)
					giveUpC = time.After(leftoverWait)
				}
			case ev.stopped:
			default:
				exited, pollC = true, poll.C
				j.takeTerminal()
				if ev.err != nil {
					j.witnessed()
					r.logf("waiting for the command: %v", ev.err)
					o.code = exitSetup
				} else {
					o.code = exitStatus(ev.status)
					// On a terminal, Ctrl-C goes to the job's group, not to
					// lock-example: the command's end tells.
					if s := j.stopRequested(ev.status); s != nil {
						o.interrupted = s
					}
				}
				if msg := j.execError(); msg != "" {
					r.logf("%s: %s", r.argv[0], msg)
					o.notRun = true
					continue
				}
				switch {
				case o.lost:
					// Whatever the command left in its group may not run on
					// without the lock either.
					begin("", time.Now())
				case j.groupAlive():
					_, killBy := k.stopAt()
					begin("the command exited, but processes of its group still run", minTime(time.Now().Add(r.t.killGrace), killBy))
				}
			}
		case s := <-r.sigs:
			if !exited {
				j.signal(s) // SIGTSTP and SIGTTIN too: the job's stop is handled when it is reported
			}
			if endsHold(s) {
				o.interrupted = s // also while leftover processes are being stopped
			}
		case <-k.changed:
			if _, lost := k.state(); lost != nil && !o.lost {
				o.lost = true
				begin(describeLoss(r.name, lost), time.Now().Add(r.t.killGrace))
			} else if !stopping {
				stopAt, _ := k.stopAt()
				stopTimer.Reset(time.Until(stopAt))
			}
		case <-stopTimer.C:
			stopAt, killBy := k.stopAt()
			if stopping {
				break
			}
			if time.Now().Before(stopAt) {
				stopTimer.Reset(time.Until(stopAt))
				break
			}
			o.lost = true
			begin("lock "+quote(r.name)+" not renewed for "+r.t.stopAfter().String()+
				" (the command must be dead "+r.t.margin.String()+" before its lease ends)", killBy)
		case <-killTimer.C:
			killed = true
			j.signal(syscall.SIGKILL)
			giveUpC = time.After(leftoverWait)
		case <-pollC:
		case <-giveUpC:
			r.logf("processes of the command's group still exist %s after SIGKILL", leftoverWait)
			o.leftover = true
			return o
		}
	}
}

// jobStopped handles a stop of the command's first process (Ctrl-Z, or a
// stop signal). Under a job-control shell, lock-example stops the whole
// group (also what ignores SIGTSTP) and then itself, as sudo does; once
// continued, it renews the lock before it lets the job run again. It
// reports false when the lock could not be renewed: the job must die.
func (r *runner) jobStopped(j *job, k *keeper, sig syscall.Signal, cont chan os.Signal) bool {
	if !underJobControl() {
		// Nobody would continue lock-example: keep renewing the lock of
		// the stopped job.
		if r.cfg.verbose {
			r.logf("the command was stopped (%v); its lock stays renewed", sig)
		}
		return true
	}
	j.signal(syscall.SIGSTOP)
	if r.cfg.verbose {
		r.logf("the command was stopped (%v); stopping lock-example too", sig)
	}
	stopSelf(cont)
	if err := k.renew(context.Background()); err != nil {
		r.logf("lock %q could not be renewed after the job was continued (%s); killing the command", r.name, r.errText(err))
		return false
	}
	if r.cfg.verbose {
		r.logf("continued: lock %q renewed, continuing the command", r.name)
	}
	j.giveTerminal()
	j.signal(syscall.SIGCONT)
	return true
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
