//go:build unix && !linux

package main

import "syscall"

// On Unix systems other than Linux, the guardian alone kills the command's
// group when lock-example dies, and orphans of the group are reaped by init.

func setParentDeathSignal(*syscall.SysProcAttr) {}

func becomeSubreaper() {}
