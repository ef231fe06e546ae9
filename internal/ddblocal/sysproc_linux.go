//go:build linux

package ddblocal

import "syscall"

// sysProcAttr makes the kernel kill java if the thread that started it (and
// so, in practice, this process) dies, e.g. when `go test -timeout` panics,
// so no server outlives the tests that started it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
