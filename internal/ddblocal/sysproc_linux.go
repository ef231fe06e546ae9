//go:build linux

package ddblocal

import (
	"os"
	"strconv"
	"sync"
	"syscall"
)

// sysProcAttr makes the kernel kill java if the thread that started it (and
// so, in practice, this process) dies, e.g. when `go test -timeout` panics,
// so no server outlives the tests that started it. Java gets a process
// group of its own, so that a Ctrl-C at the terminal reaches the tests and
// not the server, which is stopped by whoever started it.
func sysProcAttr() *syscall.SysProcAttr {
	closeInheritedOnExec()
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

var closeInheritedOnce sync.Once

// closeInheritedOnExec marks every descriptor above stderr close-on-exec.
// Go opens its own files that way, but descriptors this process inherited
// without the flag (a CI runner's pipe, say) would pass on to java, which
// would then hold them open for as long as it runs: a caller waiting for
// EOF on such a pipe would wait for the server.
func closeInheritedOnExec() {
	closeInheritedOnce.Do(func() {
		entries, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			return
		}
		for _, e := range entries {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				syscall.CloseOnExec(fd)
			}
		}
	})
}
