//go:build unix && !linux

package main

import (
	"os"
	"syscall"
)

// On Unix systems other than Linux the command keeps its own process group
// but does not get the terminal, and nothing kills it if lock-example dies.

func setParentDeathSignal(*syscall.SysProcAttr) {}

func foregroundTerminal(*os.File) (int, bool) { return 0, false }

func reclaimTerminal(int) {}
