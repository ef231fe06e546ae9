package main

import (
	"os"
	"os/signal"
	"syscall"
	"unsafe"
)

// setParentDeathSignal kills the command if lock-example itself dies
// without a chance to stop it (SIGKILL, a crash): its lock would no longer
// be renewed.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// foregroundTerminal returns f's descriptor when f is a terminal whose
// foreground process group is lock-example's.
func foregroundTerminal(f *os.File) (int, bool) {
	if f == nil {
		return 0, false
	}
	fd := int(f.Fd())
	var pgrp int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPGRP, uintptr(unsafe.Pointer(&pgrp))); errno != 0 {
		return 0, false // not a terminal
	}
	return fd, int(pgrp) == syscall.Getpgrp()
}

// reclaimTerminal makes lock-example's process group the terminal's
// foreground group again. It is in the background until then, where
// changing the foreground group raises SIGTTOU.
func reclaimTerminal(fd int) {
	signal.Ignore(syscall.SIGTTOU)
	defer signal.Reset(syscall.SIGTTOU)
	pgrp := int32(syscall.Getpgrp())
	_, _, _ = syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPGRP, uintptr(unsafe.Pointer(&pgrp)))
}
