package main

import "syscall"

// setParentDeathSignal kills the command's first process if the thread that
// started it ends (lock-example died), in case the guardian is gone too.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// becomeSubreaper makes lock-example the parent of the orphans of the
// command's group (a shell's background children once the shell exits), so
// that it can reap them and see when the group is empty even where the
// system's init process does not reap promptly (containers).
func becomeSubreaper() {
	const prSetChildSubreaper = 36
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0)
}
