//go:build unix && !linux

package main

// runWitness: see roleEnv. Elsewhere than on Linux, the witness does not
// start (it ends at once, unready), and lock-example goes by the
// command's status alone: a command killed by SIGINT or SIGTERM was asked
// to stop, one that exits with 130 is not known to have been.
func runWitness() int { return 0 }
