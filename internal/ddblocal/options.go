package ddblocal

import "time"

// The bounds of a start (WithStartTimeout overrides it) and of each step
// of a stop (SIGTERM, then SIGKILL).
const (
	defaultStartTimeout = 120 * time.Second
	defaultStopTimeout  = 15 * time.Second
)

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
// (default 120s).
func WithStartTimeout(d time.Duration) Option { return func(o *options) { o.startTimeout = d } }
