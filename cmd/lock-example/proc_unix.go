//go:build unix

package main

import (
	"os"
	"os/exec"
	"syscall"
)

// forwardedSignals are passed on to the command's process group. Each
// would otherwise kill lock-example and leave the command running without
// heartbeats.
var forwardedSignals = []os.Signal{
	syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2,
}

var (
	sigTerm os.Signal = syscall.SIGTERM
	sigKill os.Signal = syscall.SIGKILL
)

// prepareProcess starts the command in a process group of its own, so that
// a lost lock stops the whole job (sh -c '...' and its children), not just
// its first process. When lock-example runs in the foreground of a
// terminal, that group gets the terminal, so that the command can read it
// and Ctrl-C reaches it; the returned function takes the terminal back.
func prepareProcess(cmd *exec.Cmd, stdin *os.File) (restore func()) {
	attr := &syscall.SysProcAttr{Setpgid: true}
	restore = func() {}
	if fd, ok := foregroundTerminal(stdin); ok {
		attr.Foreground = true
		attr.Ctty = fd
		restore = func() { reclaimTerminal(fd) }
	}
	setParentDeathSignal(attr)
	cmd.SysProcAttr = attr
	return restore
}

// signalGroup sends s to the command's process group.
func signalGroup(cmd *exec.Cmd, s os.Signal) {
	if sig, ok := s.(syscall.Signal); ok && cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, sig)
	}
}

// exitStatus is the command's status as a shell reports it: its exit code,
// or 128+N when signal N killed it.
func exitStatus(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}

func signalNumber(s os.Signal) int {
	if sig, ok := s.(syscall.Signal); ok {
		return int(sig)
	}
	return 0
}
