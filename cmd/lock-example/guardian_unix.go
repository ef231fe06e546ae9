//go:build unix

package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// lock-example re-executes itself in two hidden roles, chosen by roleEnv:
//
//   - the guardian, a process of its own that outlives lock-example: it
//     reads the command's process group from a pipe whose other end only
//     lock-example holds, and when that pipe reaches its end without the
//     word "done" (lock-example died: SIGKILL, out of memory, a crash), it
//     kills the whole group at once, so that nothing of the job runs on
//     without its lock being renewed.
//   - the starter, the first process of the command's group: it waits
//     until lock-example has told the guardian the group, and only then
//     executes the command. So no process of the job can exist that the
//     guardian would not kill.
//   - the witness, a member of the command's group that runs no command:
//     a signal sent to the whole group (a terminal's Ctrl-C goes to its
//     foreground group, never to lock-example) ends it, and its end tells
//     lock-example which signal the group got (see witness_linux.go).
const (
	roleGuardian = "guardian"
	roleStarter  = "starter"
	roleWitness  = "witness"
	// ttouEnv tells the starter that SIGTTOU was not ignored when
	// lock-example started (lock-example ignores it; the command must get
	// the disposition lock-example itself was given).
	ttouEnv = "LOCK_EXAMPLE_INTERNAL_TTOU_DEFAULT"
)

// The starter's extra descriptors.
const (
	starterGoFD     = 3 // one byte from lock-example: execute the command
	starterStatusFD = 4 // closed by a successful exec; else the error, written by the starter
)

// runRole runs a hidden role and returns its exit status.
func runRole(role string) int {
	switch role {
	case roleGuardian:
		return runGuardian()
	case roleStarter:
		return runStarter()
	case roleWitness:
		return runWitness()
	}
	fmt.Fprintf(os.Stderr, "lock-example: unknown %s=%q\n", roleEnv, role)
	return exitSetup
}

// selfExecutable is the path that re-executes this program.
func selfExecutable() (string, error) {
	if runtime.GOOS == "linux" {
		return "/proc/self/exe", nil // the same file even if it was replaced or deleted
	}
	return os.Executable()
}

// runGuardian: see roleEnv. It ignores every signal a terminal, a shell or
// a service manager sends to a job, so that only SIGKILL can end it early.
func runGuardian() int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1,
		syscall.SIGUSR2, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGPIPE)
	in := bufio.NewReader(os.Stdin)
	pgid := 0
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			break // the end of the pipe: lock-example is gone
		}
		switch line = strings.TrimSpace(line); {
		case line == "done":
			return 0
		case strings.HasPrefix(line, "pgid "):
			if n, err := strconv.Atoi(strings.TrimPrefix(line, "pgid ")); err == nil && n > 1 {
				pgid = n
			}
		}
	}
	if pgid == 0 {
		return 0 // no command was started
	}
	// The pgid cannot have been reused: lock-example says "done" only once
	// the group is empty, and a process group ID is not reused while any
	// process is in the group. A process forking while the group is killed
	// is killed too; the repetitions are for anything that slipped through
	// (killed processes not yet reaped still count as members).
	killed := false
	for i := 0; i < 5; i++ {
		if err := syscall.Kill(-pgid, syscall.SIGKILL); errors.Is(err, syscall.ESRCH) {
			break
		}
		killed = true
		time.Sleep(20 * time.Millisecond)
	}
	if killed {
		fmt.Fprintf(os.Stderr, "lock-example: lock-example died: killed the command's process group %d\n", pgid)
	}
	return 0
}

// runStarter: see roleEnv. Its arguments are the command's path and argv.
func runStarter() int {
	goPipe := os.NewFile(starterGoFD, "go")
	status := os.NewFile(starterStatusFD, "status")
	syscall.CloseOnExec(starterGoFD)
	syscall.CloseOnExec(starterStatusFD)
	if len(os.Args) < 3 {
		fmt.Fprintln(status, "lock-example: starter: no command")
		return exitCannotRun
	}
	var b [1]byte
	if n, _ := goPipe.Read(b[:]); n != 1 {
		return exitSetup // lock-example died or gave up before the command could run
	}
	env := make([]string, 0, len(os.Environ()))
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, roleEnv+"=") && !strings.HasPrefix(kv, ttouEnv+"=") {
			env = append(env, kv)
		}
	}
	if os.Getenv(ttouEnv) != "" {
		// Catching a signal makes exec reset it to its default action.
		signal.Notify(make(chan os.Signal, 1), syscall.SIGTTOU)
	}
	err := syscall.Exec(os.Args[1], os.Args[2:], env)
	fmt.Fprintf(status, "%v", err)
	if errors.Is(err, syscall.ENOENT) {
		return exitNotFound
	}
	return exitCannotRun
}
