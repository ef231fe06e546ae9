//go:build !unix

package main

import (
	"fmt"
	"os"
	"os/exec"
	"time"
)

// Without Unix process groups and job control, only an interrupt is
// forwarded, and a lost lock kills the command's first process (not its
// children); nothing kills the command if lock-example dies.

var forwardedSignals = []os.Signal{os.Interrupt}

func ignoreTTOU() {}

func runRole(string) int {
	fmt.Fprintln(os.Stderr, "lock-example: internal roles need Unix")
	return exitSetup
}

func signalNumber(os.Signal) int { return 2 }

// superviseJob runs the command and stops it in time when the lock is lost
// or not renewed.
func (r *runner) superviseJob(k *keeper) outcome {
	cmd := &exec.Cmd{Path: r.path, Args: r.argv, Stdin: r.stdin, Stdout: r.stdout, Stderr: r.stderr, Env: r.commandEnv(k)}
	if err := cmd.Start(); err != nil {
		r.logf("%v", err)
		return outcome{code: exitCannotRun, notRun: true}
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	var o outcome
	stopAt, _ := k.stopAt()
	stopTimer := time.NewTimer(time.Until(stopAt))
	defer stopTimer.Stop()
	for {
		select {
		case <-exited:
			o.code = cmd.ProcessState.ExitCode()
			return o
		case s := <-r.sigs:
			_ = cmd.Process.Signal(s)
		case <-k.changed:
			if _, lost := k.state(); lost != nil && !o.lost {
				o.lost = true
				r.logf("%s; killing the command", describeLoss(r.name, lost))
				_ = cmd.Process.Kill()
			}
			stopAt, _ := k.stopAt()
			stopTimer.Reset(time.Until(stopAt))
		case <-stopTimer.C:
			stopAt, _ := k.stopAt()
			if time.Now().Before(stopAt) {
				stopTimer.Reset(time.Until(stopAt))
				break
			}
			if !o.lost {
				o.lost = true
				r.logf("lock %q not renewed for %s; killing the command", r.name, r.t.stopAfter())
				_ = cmd.Process.Kill()
			}
		}
	}
}

func isTerminal(*os.File) bool { return false }
