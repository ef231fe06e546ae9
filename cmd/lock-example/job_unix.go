//go:build unix

package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"
	"unsafe"
)

// forwardedSignals are passed on to the command's process group. Each
// would otherwise end lock-example and leave the command without renewals.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

// stopRequests are the signals that ask a job to stop: a job ended by one
// of them, or with 128+N after signal N reached its group, was not a
// failure to hold its lock against (see runCommand).
var stopRequests = []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// jobControlSignals stop a job: lock-example stops the command's group,
// then itself (see job.stopped).
var jobControlSignals = []os.Signal{syscall.SIGTSTP, syscall.SIGTTIN}

// ttouDefault records, before lock-example ignores SIGTTOU, whether it was
// started with SIGTTOU at its default action, so that the command is too.
var ttouDefault bool

// ignoreTTOU makes lock-example's own writes to a terminal in whose
// background it runs (with stty tostop) and its changes of the terminal's
// foreground group succeed instead of stopping it: a stopped lock-example
// could not stop a command whose lock is lost.
func ignoreTTOU() {
	ttouDefault = !signal.Ignored(syscall.SIGTTOU)
	signal.Ignore(syscall.SIGTTOU)
}

// waitEvent is a change of the command's first process: stopped by a
// signal, or ended with a status.
type waitEvent struct {
	stopped bool
	sig     syscall.Signal // the signal that stopped it
	status  syscall.WaitStatus
	err     error
}

// job is the command, run in a process group of its own (its ID is the
// first process's PID), watched by a guardian.
type job struct {
	pid      int
	tty      int  // the terminal on stdin, or -1
	ttyOwned bool // the job's group was given the terminal's foreground
	events   chan waitEvent
	status   *os.File // the starter's status pipe: empty after a successful exec

	guardian     *exec.Cmd
	guardianPipe *os.File // closing it without "done" makes the guardian kill the group

	witness   int      // the witness's pid (0: none)
	witnessIn *os.File // closing it ends the witness
}

// startJob starts the guardian, then the command (through the starter) in
// a new process group, which gets the terminal when lock-example has it.
// The command runs only once the guardian knows its group.
func startJob(path string, argv, env []string, stdin, stdout, stderr *os.File) (*job, error) {
	self, err := selfExecutable()
	if err != nil {
		return nil, fmt.Errorf("cannot find lock-example's own executable: %w", err)
	}
	becomeSubreaper()
	j := &job{tty: -1, events: make(chan waitEvent, 4)}

	gr, gw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	j.guardian = &exec.Cmd{
		Path:        self,
		Args:        []string{"lock-example (guardian)"},
		Env:         append(os.Environ(), roleEnv+"="+roleGuardian),
		Stdin:       gr,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true}, // out of reach of signals to lock-example's group
	}
	err = j.guardian.Start()
	gr.Close()
	if err != nil {
		gw.Close()
		return nil, fmt.Errorf("cannot start the guardian: %w", err)
	}
	j.guardianPipe = gw

	goR, goW, err := os.Pipe()
	if err != nil {
		j.abandon()
		return nil, err
	}
	defer goW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		goR.Close()
		j.abandon()
		return nil, err
	}
	starterEnv := append(env, roleEnv+"="+roleStarter)
	if ttouDefault {
		starterEnv = append(starterEnv, ttouEnv+"=1")
	}
	attr := &syscall.SysProcAttr{Setpgid: true}
	if fd, ok := foregroundTerminal(stdin); ok {
		attr.Foreground, attr.Ctty = true, fd
		j.tty, j.ttyOwned = fd, true
	} else if isTerminal(stdin) {
		j.tty = int(stdin.Fd())
	}
	setParentDeathSignal(attr)
	p, err := os.StartProcess(self, append([]string{"lock-example (starting " + argv[0] + ")", path}, argv...), &os.ProcAttr{
		Env:   starterEnv,
		Files: []*os.File{stdin, stdout, stderr, goR, statusW},
		Sys:   attr,
	})
	goR.Close()
	statusW.Close()
	if err != nil {
		statusR.Close()
		j.abandon()
		return nil, err
	}
	j.pid, j.status = p.Pid, statusR
	_ = p.Release() // waited for with wait4 below, which also reports stops
	go j.wait()
	j.startWitness(self)

	if _, err := fmt.Fprintf(j.guardianPipe, "pgid %d\n", j.pid); err != nil {
		// Without a guardian, the command must not run.
		j.signal(syscall.SIGKILL)
		return j, fmt.Errorf("cannot reach the guardian: %w", err)
	}
	if _, err := goW.Write([]byte{1}); err != nil {
		return j, fmt.Errorf("cannot start the command: %w", err)
	}
	return j, nil
}

// startWitness starts the witness in the command's group and waits until
// it is ready, before the command runs. Without it (it could not start, or
// this system cannot make one), lock-example goes by the command's status
// alone.
func (j *job) startWitness(self string) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		inR.Close()
		inW.Close()
		return
	}
	defer outR.Close()
	p, err := os.StartProcess(self, []string{"lock-example (witness)"}, &os.ProcAttr{
		Env:   append(os.Environ(), roleEnv+"="+roleWitness),
		Files: []*os.File{inR, outW, nil},
		Sys:   &syscall.SysProcAttr{Setpgid: true, Pgid: j.pid},
	})
	inR.Close()
	outW.Close()
	if err != nil {
		inW.Close()
		return
	}
	pid := p.Pid
	_ = p.Release() // reaped by witnessed, with wait4 like the group
	j.witness, j.witnessIn = pid, inW
	var ready [1]byte
	if n, _ := outR.Read(ready[:]); n != 1 {
		j.witnessed() // it could not take the signals' default actions
	}
}

// witnessed ends the witness and returns the signal that killed it, if one
// did: a signal that went to the command's group. Call it once the
// command's first process has ended, and before groupAlive, which would
// reap the witness without looking.
func (j *job) witnessed() syscall.Signal {
	if j.witness == 0 {
		return 0
	}
	pid := j.witness
	j.witness = 0
	_ = syscall.Kill(pid, syscall.SIGCONT) // a stopped witness could not read its end of input
	j.witnessIn.Close()
	var ws syscall.WaitStatus
	for {
		_, err := syscall.Wait4(pid, &ws, 0, nil)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if ws.Signaled() {
		return ws.Signal()
	}
	return 0
}

// stopRequested returns the signal that asked the job to stop, when its
// first process ended with status ws: killed by one of stopRequests, or
// exited with 128+N after signal N (one of them) reached its group. Else
// nil.
func (j *job) stopRequested(ws syscall.WaitStatus) os.Signal {
	got := j.witnessed()
	switch {
	case ws.Signaled() && slices.Contains(stopRequests, ws.Signal()):
		return ws.Signal()
	case ws.Exited() && slices.Contains(stopRequests, got) && ws.ExitStatus() == 128+int(got):
		return got
	}
	return nil
}

// abandon stops a guardian that has no group to watch.
func (j *job) abandon() {
	if j.guardianPipe != nil {
		_, _ = io.WriteString(j.guardianPipe, "done\n")
		j.guardianPipe.Close()
		_ = j.guardian.Wait()
	}
}

// finish tells the guardian that the group is empty, and waits for it.
func (j *job) finish() { j.abandon() }

// execError returns the reason the starter could not execute the command,
// or "" if it did. Call it only after the first process has ended.
func (j *job) execError() string {
	b, _ := io.ReadAll(j.status)
	j.status.Close()
	return string(b)
}

// wait reports the first process's stops and its end on j.events.
func (j *job) wait() {
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(j.pid, &ws, syscall.WUNTRACED, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			j.events <- waitEvent{err: err}
			return
		case ws.Stopped():
			j.events <- waitEvent{stopped: true, sig: ws.StopSignal()}
		case ws.Exited(), ws.Signaled():
			j.events <- waitEvent{status: ws}
			return
		}
	}
}

// signal sends s to every process of the group.
func (j *job) signal(s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok && j.pid > 0 {
		_ = syscall.Kill(-j.pid, sig)
	}
}

// groupAlive reaps what it can of the group (orphans come to lock-example,
// a child subreaper) and reports whether any process of it remains. Call
// it only after the first process was waited for.
func (j *job) groupAlive() bool {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-j.pid, &ws, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			break
		}
	}
	return !errors.Is(syscall.Kill(-j.pid, 0), syscall.ESRCH)
}

// takeTerminal gives the terminal back to lock-example's group if the job's
// group has it.
func (j *job) takeTerminal() {
	if j.tty >= 0 && tcgetpgrp(j.tty) == j.pid {
		tcsetpgrp(j.tty, syscall.Getpgrp())
	}
}

// giveTerminal gives the job's group the terminal if lock-example's group
// has it (it was continued in the foreground).
func (j *job) giveTerminal() {
	if j.tty >= 0 && tcgetpgrp(j.tty) == syscall.Getpgrp() {
		tcsetpgrp(j.tty, j.pid)
	}
}

// underJobControl reports whether lock-example runs as a job of a shell
// with job control: its parent is in its session but in another process
// group. Only then does stopping lock-example make sense: the shell will
// continue it.
func underJobControl() bool {
	ppid := os.Getppid()
	ppgid, err := syscall.Getpgid(ppid)
	if err != nil || ppgid == syscall.Getpgrp() {
		return false
	}
	psid, ok1 := getsid(ppid)
	sid, ok2 := getsid(0)
	return ok1 && ok2 && psid == sid
}

func getsid(pid int) (int, bool) {
	r, _, errno := syscall.RawSyscall(syscall.SYS_GETSID, uintptr(pid), 0, 0)
	return int(r), errno == 0
}

// stopSelf stops lock-example, as a terminal's Ctrl-Z would, and returns
// once it was continued (SIGCONT arrives on cont). It stops with SIGSTOP:
// once os/signal has caught SIGTSTP, the Go runtime keeps its own handler
// for it, which would swallow a SIGTSTP sent to itself.
//
// A stopped process runs no code: once lock-example runs a second after it
// stopped itself, it was continued even if the SIGCONT was not seen.
func stopSelf(cont chan os.Signal) {
	for len(cont) > 0 {
		<-cont
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case <-cont:
	case <-t.C:
	}
}

// foregroundTerminal returns f's descriptor when f is a terminal whose
// foreground process group is lock-example's.
func foregroundTerminal(f *os.File) (int, bool) {
	if f == nil {
		return 0, false
	}
	fd := int(f.Fd())
	pgrp := tcgetpgrp(fd)
	return fd, pgrp > 0 && pgrp == syscall.Getpgrp()
}

func isTerminal(f *os.File) bool { return f != nil && tcgetpgrp(int(f.Fd())) > 0 }

// tcgetpgrp returns the terminal's foreground process group, or -1 if fd
// is not a terminal.
func tcgetpgrp(fd int) int {
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return -1
	}
	return int(pgrp)
}

// tcsetpgrp makes pgrp the terminal's foreground group. SIGTTOU, which a
// background caller would get, is ignored (ignoreTTOU).
func tcsetpgrp(fd, pgrp int) {
	p := int32(pgrp)
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&p)))
}

// exitStatus is the command's status as a shell reports it: its exit code,
// or 128+N when signal N killed it.
func exitStatus(ws syscall.WaitStatus) int {
	if ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ws.ExitStatus()
}

func signalNumber(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return int(sig)
	}
	return 0
}
