package main

import (
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Issue 49, item 6: lock-example against an endpoint that stays silent
// exits 125 within about 10 s, and after a stall mid-run it kills the job
// and exits 76 soon after, not after its release timeout.

// stallProxy forwards TCP connections to upstream until stall is called;
// from then on it keeps every connection open and forwards nothing, in
// either direction (a black-holed route). With no upstream it never
// forwards anything (a listener that accepts and never answers).
type stallProxy struct {
	ln      net.Listener
	stalled atomic.Bool
	mu      sync.Mutex
	conns   []net.Conn
	wg      sync.WaitGroup
}

func newStallProxy(t *testing.T, upstream string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln}
	if upstream == "" {
		p.stalled.Store(true)
	}
	p.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.track(c)
			if upstream == "" {
				continue
			}
			p.wg.Go(func() {
				u, err := net.Dial("tcp", upstream)
				if err != nil {
					_ = c.Close()
					return
				}
				p.track(u)
				p.wg.Go(func() { p.pipe(u, c) })
				p.pipe(c, u)
			})
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			_ = c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *stallProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

// pipe copies from src to dst, dropping what it reads once stalled.
func (p *stallProxy) pipe(dst, src net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.stalled.Load() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // io.EOF or a closed connection
		}
	}
}

func (p *stallProxy) url() string { return "http://" + p.ln.Addr().String() }

func (p *stallProxy) stall() { p.stalled.Store(true) }

// envAt is the child environment pointed at endpoint instead of DynamoDB
// Local.
func envAt(endpoint string) []string { return []string{"DYNAMODB_ENDPOINT=" + endpoint} }

func TestSilentEndpointExits125(t *testing.T) {
	t.Parallel()
	silent := newStallProxy(t, "")
	for _, args := range [][]string{
		{"--table", "locks", "create-table"},
		{"--table", "locks", "--lease", "3s", "--heartbeat", "1s", "k", "true"},
		{"--table", "locks", "--wait-for-lock", "k", "true"},
		{"--table", "locks", "list"},
		{"--table", "locks", "show", "k"},
	} {
		t.Run(strings.Join(args[2:], " "), func(t *testing.T) {
			t.Parallel()
			p := startToolEnv(t, envAt(silent.url()), args...)
			p.waitExit(t, 20*time.Second)
			t.Logf("%v: exit %d after %s: %s", args, p.code, p.elapsed.Round(time.Millisecond), strings.TrimSpace(p.stderr.String()))
			wantCode(t, p, exitSetup)
			if p.elapsed > 12*time.Second {
				t.Errorf("exited %s after it started, want within about 10 s", p.elapsed)
			}
			if !strings.Contains(p.stderr.String(), silent.url()) {
				t.Errorf("the error does not name the endpoint %s:\n%s", silent.url(), p.stderr.String())
			}
		})
	}
}

func TestStallMidRunExits76Soon(t *testing.T) {
	t.Parallel()
	table := newTable(t)
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, u.Host)
	dir := t.TempDir()
	log := filepath.Join(dir, "log")
	p := startToolEnv(t, append(envAt(proxy.url()), "D="+dir),
		"--table", table, "--lease", "3s", "--heartbeat", "500ms", "job", "sh", "-c", `echo ran >>"$D/log"; sleep 60`)
	waitFor(t, 10*time.Second, "the job to run", fileHas(log, "ran"))
	stalled := time.Now()
	proxy.stall()
	p.waitExit(t, 30*time.Second)
	took := time.Since(stalled)
	t.Logf("exit %d %s after the stall began: %s", p.code, took.Round(time.Millisecond), strings.TrimSpace(p.stderr.String()))
	wantCode(t, p, exitLockLost)
	if took > 8*time.Second {
		t.Errorf("exited %s after the stall began, want within the lease (3s) and a few seconds", took)
	}
}
