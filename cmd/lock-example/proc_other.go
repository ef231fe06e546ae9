//go:build !unix

package main

import (
	"os"
	"os/exec"
)

// Without Unix process groups and signals, only an interrupt is forwarded
// and a lost lock kills the command's first process at once.

var forwardedSignals = []os.Signal{os.Interrupt}

var (
	sigTerm = os.Kill
	sigKill = os.Kill
)

func prepareProcess(*exec.Cmd, *os.File) func() { return func() {} }

func signalGroup(cmd *exec.Cmd, s os.Signal) {
	if cmd.Process != nil {
		_ = cmd.Process.Signal(s)
	}
}

func exitStatus(ps *os.ProcessState) int { return ps.ExitCode() }

func signalNumber(os.Signal) int { return 2 }
