package ddblocal

// A server process: its start, bounded by a deadline, and its log.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is a DynamoDB Local process started by Start.
type Server struct {
	// Endpoint is the base URL, e.g. http://127.0.0.1:34567.
	Endpoint string
	// Port is the TCP port the server listens on.
	Port int
	// LogPath is the file receiving the server's stdout and stderr.
	LogPath string

	cmd       *exec.Cmd
	logFile   *os.File
	removeLog bool
	done      chan struct{} // closed when the process has exited and been reaped
	waitErr   error         // set before done is closed

	stopOnce sync.Once
	stopErr  error
}

// Start launches DynamoDB Local on 127.0.0.1 and waits until it answers
// HTTP requests. ctx bounds only the wait: the server lives until Stop or
// Kill (or until this process dies, on Linux).
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	o := options{startTimeout: defaultStartTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if _, err := exec.LookPath("java"); err != nil {
		return nil, fmt.Errorf("ddblocal: %w: %s", ErrNoJava, javaHint)
	}
	if o.dir == "" {
		dir, err := Jar()
		if err != nil {
			return nil, err
		}
		o.dir = dir
	}
	if o.dbPath != "" {
		abs, err := filepath.Abs(o.dbPath)
		if err != nil {
			return nil, fmt.Errorf("ddblocal: %w", err)
		}
		if err := os.MkdirAll(abs, 0o755); err != nil {
			return nil, fmt.Errorf("ddblocal: db path: %w", err)
		}
		o.dbPath = abs
	}
	// A port picked by listen-and-close can be taken by someone else before
	// java binds it; try a few fresh ports in that case.
	attempts := 1
	if o.port == 0 {
		attempts = 3
	}
	var lastErr error
	for i := 0; i < attempts; i++ {
		s, err := start(ctx, o)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !errors.Is(err, errAddrInUse) || ctx.Err() != nil {
			break
		}
	}
	return nil, lastErr
}

var errAddrInUse = errors.New("address already in use")

func start(ctx context.Context, o options) (*Server, error) {
	port := o.port
	if port == 0 {
		p, err := FreePort()
		if err != nil {
			return nil, err
		}
		port = p
	}

	s := &Server{
		Endpoint: "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		Port:     port,
		done:     make(chan struct{}),
	}
	var err error
	if o.logPath != "" {
		s.logFile, err = os.OpenFile(o.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	} else {
		s.logFile, err = os.CreateTemp("", "ddblocal-*.log")
		s.removeLog = true
	}
	if err != nil {
		return nil, fmt.Errorf("ddblocal: log file: %w", err)
	}
	s.LogPath = s.logFile.Name()

	args := []string{
		"-Djava.library.path=" + filepath.Join(o.dir, "DynamoDBLocal_lib"),
		// Keep the JVM small and quick to start; DynamoDB Local needs little.
		"-XX:+UseSerialGC",
		"-jar", filepath.Join(o.dir, JarName),
	}
	if o.dbPath != "" {
		args = append(args, "-dbPath", o.dbPath)
	} else {
		args = append(args, "-inMemory")
	}
	args = append(args, "-disableTelemetry", "-sharedDb", "-port", strconv.Itoa(port))

	cmd := exec.Command("java", args...)
	cmd.Dir = o.dir
	cmd.Stdin = nil // /dev/null
	cmd.Stdout = s.logFile
	cmd.Stderr = s.logFile
	cmd.SysProcAttr = sysProcAttr()
	// Belt and braces next to -disableTelemetry: DynamoDB Local also reads
	// this variable. Nothing may try to reach the internet.
	cmd.Env = append(os.Environ(), "DDB_LOCAL_TELEMETRY=0")
	s.cmd = cmd

	began := time.Now()
	err = StartOwnThread(cmd, func(err error) {
		s.waitErr = err
		close(s.done)
	})
	if err != nil {
		s.closeLog(true)
		return nil, fmt.Errorf("ddblocal: starting java: %w", err)
	}

	if err := s.waitReady(ctx, o.startTimeout); err != nil {
		_ = s.terminate(syscall.SIGKILL)
		tail := s.LogTail(4096)
		s.closeLog(true)
		if strings.Contains(tail, "BindException") || strings.Contains(strings.ToLower(tail), "address already in use") {
			err = fmt.Errorf("%w: %w", err, errAddrInUse)
		}
		return nil, fmt.Errorf("ddblocal: DynamoDB Local on port %d (java %s) did not become ready after %s: %w\n--- server log tail ---\n%s",
			port, strings.Join(args, " "), time.Since(began).Round(time.Millisecond), err, tail)
	}
	return s, nil
}

// waitReady polls the endpoint with an HTTP POST until any HTTP response
// comes back, the process exits, ctx ends, or timeout passes.
func (s *Server) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
	}
	defer client.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if s.probe(ctx, client) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("java exited early: %v", s.waitErr)
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// probe sends one HTTP request and reports whether any HTTP response came
// back. It gives up when the process exits, so a port that accepts but
// never answers (someone else's listener) cannot stall the wait.
func (s *Server) probe(ctx context.Context, client *http.Client) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.Endpoint+"/", strings.NewReader("{}"))
	if err != nil {
		return false
	}
	req.Header.Set("Content-Type", "application/x-amz-json-1.0")
	req.Header.Set("X-Amz-Target", "DynamoDB_20120810.ListTables")
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return true
}

// PID is the process id of the java process.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Done is closed once the java process has exited and been reaped.
func (s *Server) Done() <-chan struct{} { return s.done }

func (s *Server) closeLog(remove bool) {
	if s.logFile == nil {
		return
	}
	_ = s.logFile.Close()
	if remove {
		_ = os.Remove(s.logFile.Name())
	}
}

// LogTail returns up to the last n bytes of the server log, or "" once an
// auto-created log has been removed by Stop.
func (s *Server) LogTail(n int) string {
	b, err := os.ReadFile(s.LogPath)
	if err != nil {
		return ""
	}
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}
