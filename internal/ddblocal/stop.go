package ddblocal

// Stopping a server: bounded, and only the process Start started.

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"
)

// Stop asks the server to shut down (SIGTERM), kills it (SIGKILL) if it is
// still running after 15s, and waits for it to exit. It signals only the
// process it started. Safe to call more than once; a server that exited on
// its own is not an error. An auto-created log file is removed.
func (s *Server) Stop() error {
	return s.stop(syscall.SIGTERM)
}

// Kill kills the server at once (SIGKILL), like a crash, and waits for it to
// exit. Safe to call more than once, and after Stop.
func (s *Server) Kill() error {
	return s.stop(syscall.SIGKILL)
}

func (s *Server) stop(sig syscall.Signal) error {
	s.stopOnce.Do(func() {
		s.stopErr = s.terminate(sig)
		s.closeLog(s.removeLog)
	})
	return s.stopErr
}

// terminate sends sig to the process it started (unless it has exited),
// escalates to SIGKILL after defaultStopTimeout, and waits until it is reaped.
func (s *Server) terminate(sig syscall.Signal) error {
	select {
	case <-s.done:
		return nil
	default:
	}
	if err := s.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("ddblocal: signalling pid %d: %w", s.PID(), err)
	}
	select {
	case <-s.done:
		return nil
	case <-time.After(defaultStopTimeout):
	}
	_ = s.cmd.Process.Kill()
	select {
	case <-s.done:
		return nil
	case <-time.After(defaultStopTimeout):
		return fmt.Errorf("ddblocal: pid %d did not exit after SIGKILL", s.PID())
	}
}
