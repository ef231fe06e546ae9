package ddblocal

// Forking a child that dies with its parent, and a free port for it.

import (
	"fmt"
	"net"
	"os/exec"
	"runtime"
)

// StartOwnThread starts cmd and reaps it from one locked OS thread that
// lives exactly as long as the child, then calls exited with cmd.Wait's
// error. With Pdeathsig (Linux) the kernel signals the child when the
// *thread* that forked it exits, so the fork must not happen on a runtime
// thread that some other locked goroutine may later end. Returning without
// UnlockOSThread ends the thread once the child has been reaped.
func StartOwnThread(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("ddblocal: picking a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("ddblocal: picking a free port: %w", err)
	}
	return port, nil
}
