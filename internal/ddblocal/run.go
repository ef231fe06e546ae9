package ddblocal

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// EnvPID is set by [Run], next to [EnvEndpoint], to the process id of the
// server it started, so that a benchmark can report the server's CPU time.
const EnvPID = "DDBLOCAL_PID"

// DefaultSignalGrace is how long [Run] lets its command exit after passing
// on a signal before it kills it.
const DefaultSignalGrace = 30 * time.Second

// RunConfig is where [Run] sends what it has to say, and how long it waits.
type RunConfig struct {
	// Stdin, Stdout and Stderr are the command's; nil means os.Stdin,
	// os.Stdout and os.Stderr.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Log receives Run's own progress lines (server started, stopped).
	// nil means os.Stderr.
	Log io.Writer
	// SignalGrace bounds the wait for the command after a signal was
	// passed on to it; then it is killed. 0 means DefaultSignalGrace.
	SignalGrace time.Duration
	// Signals are passed on to the command. nil means SIGINT, SIGTERM and
	// SIGHUP.
	Signals []os.Signal
}

// Run runs the command args[0] with arguments args[1:] against DynamoDB
// Local and returns the command's exit status: the status it exited with,
// or 128 + the signal's number if a signal ended it.
//
// When $DYNAMODB_ENDPOINT is set, the command gets it unchanged and nothing
// is started. Otherwise Run starts a server with [Start] and opts (ctx and
// [WithStartTimeout] bound the start), gives the command DYNAMODB_ENDPOINT
// and DDBLOCAL_PID in its environment, and stops the server when the command
// has exited, whatever its status ([Server.Stop]: bounded). Signals that
// reach Run while the command runs are passed on to it; if it has not exited
// SignalGrace after the first one, it is killed. Every wait in Run is thus
// bounded except the wait for the command itself, which callers bound (go
// test's -timeout, for example).
//
// The error is non-nil only when the command could not be run at all (no
// server, no such command); the status is then 1, or 127 for a command not
// found.
func Run(ctx context.Context, args []string, cfg RunConfig, opts ...Option) (int, error) {
	if len(args) == 0 {
		return 2, errors.New("ddblocal: run: no command given")
	}
	cfg = cfg.withDefaults()
	env := os.Environ()
	if ep := os.Getenv(EnvEndpoint); ep != "" {
		fmt.Fprintf(cfg.Log, "ddblocal: using %s=%s (nothing started)\n", EnvEndpoint, ep)
	} else {
		began := time.Now()
		s, err := Start(ctx, opts...)
		if err != nil {
			return 1, err
		}
		fmt.Fprintf(cfg.Log, "ddblocal: started pid %d at %s in %s\n", s.PID(), s.Endpoint, time.Since(began).Round(time.Millisecond))
		defer func() {
			if err := s.Stop(); err != nil {
				fmt.Fprintln(cfg.Log, err)
				return
			}
			fmt.Fprintf(cfg.Log, "ddblocal: stopped pid %d\n", s.PID())
		}()
		env = append(env, EnvEndpoint+"="+s.Endpoint, EnvPID+"="+strconv.Itoa(s.PID()))
	}
	return runCommand(args, env, cfg)
}

func (c RunConfig) withDefaults() RunConfig {
	if c.Stdin == nil {
		c.Stdin = os.Stdin
	}
	if c.Stdout == nil {
		c.Stdout = os.Stdout
	}
	if c.Stderr == nil {
		c.Stderr = os.Stderr
	}
	if c.Log == nil {
		c.Log = os.Stderr
	}
	if c.SignalGrace <= 0 {
		c.SignalGrace = DefaultSignalGrace
	}
	if c.Signals == nil {
		c.Signals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP}
	}
	return c
}

// runCommand runs args with env, passes the signals in cfg on to it, kills
// it SignalGrace after the first one, and returns its exit status.
func runCommand(args []string, env []string, cfg RunConfig) (int, error) {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = cfg.Stdin, cfg.Stdout, cfg.Stderr

	// Listen before starting, so a signal sent right after the start is
	// not lost to the default action (which would kill Run and, with it,
	// the server through Pdeathsig, but leave the command running).
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, cfg.Signals...)
	defer signal.Stop(sigs)

	if err := cmd.Start(); err != nil {
		if errors.Is(err, exec.ErrNotFound) {
			return 127, fmt.Errorf("ddblocal: run: %w", err)
		}
		return 1, fmt.Errorf("ddblocal: run: %w", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var kill <-chan time.Time
	for {
		select {
		case err := <-exited:
			return exitStatus(cmd, err), nil
		case sig := <-sigs:
			_ = cmd.Process.Signal(sig) // fails only once it has exited
			if kill == nil {
				t := time.NewTimer(cfg.SignalGrace)
				defer t.Stop()
				kill = t.C
			}
		case <-kill:
			fmt.Fprintf(cfg.Log, "ddblocal: %s did not exit %s after a signal; killing it\n", args[0], cfg.SignalGrace)
			_ = cmd.Process.Kill()
			kill = nil // a killed child is reaped at once: exited follows
		}
	}
}

// exitStatus turns what cmd.Wait returned into a shell-style status.
func exitStatus(cmd *exec.Cmd, err error) int {
	if err == nil {
		return 0
	}
	if cmd.ProcessState == nil {
		return 1
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	if code := cmd.ProcessState.ExitCode(); code > 0 {
		return code
	}
	return 1
}
