package main

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// runWitness: see roleEnv. It gives the signals that ask a job to stop
// their default action, which ends the process, and waits for its stdin
// to close (lock-example closes it once the command's first process has
// ended). lock-example then reads how it ended: killed by one of those
// signals, that signal went to the command's group.
//
// The default action is what makes the answer exact. The Go runtime
// catches these signals with a handler of its own, which runs whenever a
// thread gets to it; with the default action, the kernel marks the whole
// witness to die of SIGINT, SIGTERM or SIGHUP in the call that sends the
// signal to the group, so before the command can die of the same signal
// and lock-example close the witness's stdin (SIGQUIT, whose default also
// dumps core, instead wakes a thread of the idle witness at once to die
// of it).
func runWitness() int {
	// A witness ended by SIGQUIT must not leave a core file.
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	for _, sig := range stopRequests {
		if !defaultAction(sig) {
			return 0 // lock-example goes by the command's status alone
		}
	}
	if _, err := os.Stdout.Write([]byte{1}); err != nil {
		return 0
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return 0
}

// defaultAction gives sig its default action (SIG_DFL), behind the Go
// runtime's back: nothing in the witness asks os/signal about sig, so the
// runtime never sets its handler again. An all-zero struct sigaction is
// SIG_DFL with no flags and an empty mask, whatever the layout of the
// architecture; 8 is the size of the kernel's signal set there.
func defaultAction(sig syscall.Signal) bool {
	var act [8]uint64
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0)
	return errno == 0
}
