//go:build linux

package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"unsafe"
)

// Helpers for the tests that look at processes: their state, their
// process groups, a pseudo-terminal, and a connection to DynamoDB Local
// that can be cut.

// procStat is what /proc/PID/stat says of a process.
type procStat struct {
	state   byte // R, S, D, T (stopped), t, Z, X
	ppid    int
	pgrp    int
	session int
}

func readStat(pid int) (procStat, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 4 {
		return procStat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	session, _ := strconv.Atoi(f[3])
	return procStat{state: f[0][0], ppid: ppid, pgrp: pgrp, session: session}, true
}

// stopped reports whether pid is stopped by a signal.
func stopped(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state == 'T'
}

// groupMembers returns the live (not zombie) processes of process group pgrp.
func groupMembers(pgrp int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.pgrp == pgrp && st.state != 'Z' && st.state != 'X' {
			pids = append(pids, pid)
		}
	}
	return pids
}

// allStopped reports whether every live process of group pgrp is stopped,
// and that there is at least one.
func allStopped(pgrp int) bool {
	pids := groupMembers(pgrp)
	for _, pid := range pids {
		if !stopped(pid) {
			return false
		}
	}
	return len(pids) > 0
}

// readPIDs returns the pids in path, one per line.
func readPIDs(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, s := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// openPTY opens a new pseudo-terminal: its master, and its slave.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	// Non-blocking, so that the runtime's poller reads it and Close ends a
	// pending Read.
	fd, err := syscall.Open("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	var unlock int32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); errno != 0 {
		t.Fatalf("unlockpt: %v", errno)
	}
	var n uint32
	if _, _, errno := syscall.Syscall(syscall.SYS_IOCTL, uintptr(fd), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); errno != 0 {
		t.Fatalf("ptsname: %v", errno)
	}
	master = os.NewFile(uintptr(fd), "/dev/ptmx") // not master.Fd(): it would make the descriptor blocking
	t.Cleanup(func() { master.Close() })
	slave, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

// terminalSession runs a bash script as the session leader of a new
// pseudo-terminal, as a login shell would run: the script uses set -m for
// job control. It returns the terminal's master (write ^Z to it) and all
// that was printed on the terminal.
func terminalSession(t *testing.T, script string, env []string) (master *os.File, out *syncBuffer, done chan struct{}) {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("needs bash")
	}
	master, slave := openPTY(t)
	cmd := exec.Command("bash", "-c", script)
	cmd.Env = append(childEnv(), env...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	slave.Close() // the session holds it
	out = &syncBuffer{}
	copied := make(chan struct{})
	go func() {
		_, _ = io.Copy(out, master) // ends with EIO once the session has closed the terminal
		close(copied)
	}()
	done = make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	t.Cleanup(func() {
		// Everything of the session: the shell, its jobs in their own
		// process groups, and what they started.
		for _, pid := range sessionMembers(cmd.Process.Pid) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		<-done
		master.Close()
		<-copied
	})
	return master, out, done
}

// cutProxy forwards TCP connections to DynamoDB Local until cut, then
// refuses them: the DynamoDB of one lock-example becomes unreachable while
// other clients still reach it.
type cutProxy struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	cut   bool
	wg    sync.WaitGroup
}

func newCutProxy(t *testing.T) *cutProxy {
	t.Helper()
	target := strings.TrimPrefix(endpoint, "http://")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.cut {
				c.Close()
				up.Close()
			} else {
				p.conns = append(p.conns, c, up)
			}
			p.mu.Unlock()
			p.wg.Go(func() { _, _ = io.Copy(up, c); up.Close() })
			p.wg.Go(func() { _, _ = io.Copy(c, up); c.Close() })
		}
	})
	t.Cleanup(func() {
		p.stop()
		p.wg.Wait()
	})
	return p
}

func (p *cutProxy) endpoint() string { return "http://" + p.ln.Addr().String() }

// stop refuses new connections and breaks the open ones.
func (p *cutProxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.cut {
		p.cut = true
		p.ln.Close()
		for _, c := range p.conns {
			c.Close()
		}
	}
}

func writeFile(t *testing.T, dir, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

var errNotFound = errors.New("not found")

// parentOf returns pid's parent.
func parentOf(pid int) (int, error) {
	st, ok := readStat(pid)
	if !ok {
		return 0, errNotFound
	}
	return st.ppid, nil
}

// describe lists the state of each pid, for failure messages.
func describe(pids []int) string {
	var b strings.Builder
	for _, pid := range pids {
		st, ok := readStat(pid)
		comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		if !ok {
			fmt.Fprintf(&b, " %d:gone", pid)
			continue
		}
		fmt.Fprintf(&b, " %d(%s):%c", pid, strings.TrimSpace(string(comm)), st.state)
	}
	return b.String()
}

// sessionMembers returns the processes of session sid.
func sessionMembers(sid int) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok && st.session == sid {
			pids = append(pids, pid)
		}
	}
	return pids
}
