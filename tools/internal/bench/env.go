package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go/middleware"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// Env is one benchmark run's connection to DynamoDB Local.
type Env struct {
	Endpoint string
	// ServerPID is DynamoDB Local's process id when known (0 otherwise), so
	// that its CPU time can be reported next to the client's.
	ServerPID int
	// Log receives progress lines.
	Log io.Writer
	// IdleConns is the SDK HTTP transport's MaxIdleConnsPerHost (0: the
	// SDK's default of 10).
	IdleConns int

	stop       func()
	mu         sync.Mutex
	transports []*http.Transport
}

// Open connects to $DYNAMODB_ENDPOINT, or starts a private in-memory
// DynamoDB Local when it is unset. Close stops what Open started.
func Open(ctx context.Context, log io.Writer) (*Env, error) {
	e := &Env{Log: log, IdleConns: DefaultIdleConns, stop: func() {}}
	if ep := os.Getenv(ddblocal.EnvEndpoint); ep != "" {
		e.Endpoint = ep
		// Set by the launcher (scripts/ddblocal.sh run) next to the endpoint.
		e.ServerPID, _ = strconv.Atoi(os.Getenv(ddblocal.EnvPID))
		return e, nil
	}
	fmt.Fprintln(log, "lockbench: DYNAMODB_ENDPOINT is unset: starting a private DynamoDB Local")
	s, err := ddblocal.Start(ctx)
	if err != nil {
		return nil, err
	}
	e.Endpoint, e.ServerPID = s.Endpoint, s.PID()
	e.stop = func() {
		if err := s.Stop(); err != nil {
			fmt.Fprintln(log, "lockbench: stopping DynamoDB Local:", err)
		}
	}
	return e, nil
}

// Close stops the DynamoDB Local that Open started, if any.
func (e *Env) Close() { e.stop() }

// DefaultIdleConns is 0: the SDK's own HTTP settings (10 idle connections
// per host), as most applications run. Raising it to the heartbeat
// concurrency made no measurable difference against DynamoDB Local.
const DefaultIdleConns = 0

// NewDB returns an SDK client for the endpoint. Every option in optFns is
// applied after the defaults of ddblocal.NewClient.
func (e *Env) NewDB(ctx context.Context, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	return e.newDB(ctx, e.IdleConns, optFns...)
}

// newDB is NewDB with idle (0: the SDK default) idle connections.
func (e *Env) newDB(ctx context.Context, idle int, optFns ...func(*dynamodb.Options)) (*dynamodb.Client, error) {
	// The SDK's own transport settings, with more idle connections; kept
	// so that CloseIdle can reach it (a BuildableClient hands out copies).
	t := awshttp.NewBuildableClient().GetTransport()
	if n := idle; n > 0 {
		t.MaxIdleConns = n
		t.MaxIdleConnsPerHost = n
	}
	e.mu.Lock()
	e.transports = append(e.transports, t)
	e.mu.Unlock()
	optFns = append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: t}
	}}, optFns...)
	return ddblocal.NewClient(ctx, e.Endpoint, optFns...)
}

// CloseIdle closes the idle HTTP connections of every SDK client made so
// far, so that goroutine counts start from a clean slate.
func (e *Env) CloseIdle() {
	e.mu.Lock()
	ts := e.transports
	e.mu.Unlock()
	for _, t := range ts {
		t.CloseIdleConnections()
	}
	time.Sleep(50 * time.Millisecond) // let the connections' goroutines exit
}

// NewTable creates a fresh lock table (partition key "key") and returns its
// name and a function that deletes it.
func (e *Env) NewTable(ctx context.Context, prefix string) (string, func(), error) {
	db, err := e.NewDB(ctx)
	if err != nil {
		return "", nil, err
	}
	name := fmt.Sprintf("lockbench_%s_%08x", prefix, rand.Uint32())
	c, err := dynamolock.New(db, name, dynamolock.DisableHeartbeat())
	if err != nil {
		return "", nil, err
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, name); err != nil {
		return "", nil, fmt.Errorf("create table %s: %w", name, err)
	}
	return name, func() {
		_, _ = db.DeleteTable(context.WithoutCancel(ctx), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	}, nil
}

func (e *Env) logf(format string, args ...any) {
	fmt.Fprintf(e.Log, "lockbench: "+format+"\n", args...)
}

// Counter counts DynamoDB operations by name with SDK middleware, once per
// operation (retries of one operation are not counted again).
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// NewCounter returns an empty counter.
func NewCounter() *Counter { return &Counter{n: map[string]int{}} }

// Option installs the counter on an SDK client.
func (c *Counter) Option(o *dynamodb.Options) {
	o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("lockbenchCounter",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				c.mu.Lock()
				c.n[awsmiddleware.GetOperationName(ctx)]++
				c.mu.Unlock()
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
}

// Take returns the counts since the last Take and resets them.
func (c *Counter) Take() Calls {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return Calls(n)
}

// Calls is a count of DynamoDB operations by name.
type Calls map[string]int

// Total is the number of calls of every operation.
func (c Calls) Total() int {
	t := 0
	for _, v := range c {
		t += v
	}
	return t
}

// String lists the counts, e.g. "1 UpdateItem + 3 GetItem".
func (c Calls) String() string {
	if len(c) == 0 {
		return "none"
	}
	var parts []string
	for _, op := range []string{"UpdateItem", "GetItem", "DeleteItem", "PutItem", "TransactWriteItems"} {
		if n := c[op]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %s", commas(int64(n)), op))
		}
	}
	for op, n := range c {
		switch op {
		case "UpdateItem", "GetItem", "DeleteItem", "PutItem", "TransactWriteItems":
		default:
			parts = append(parts, fmt.Sprintf("%s %s", commas(int64(n)), op))
		}
	}
	return strings.Join(parts, " + ")
}

// killableDB is a DynamoDB client whose process can be "killed": calls made
// after kill fail at once without reaching DynamoDB, as if the process had
// died; calls already in flight complete, as packets already sent would. It
// records when the last successful write was sent.
type killableDB struct {
	*dynamodb.Client
	mu        sync.Mutex
	killed    bool
	lastWrite time.Time // send time of the last successful UpdateItem
}

var errKilled = errors.New("lockbench: process killed")

func (k *killableDB) dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killed
}

func (k *killableDB) kill() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.killed = true
	return time.Now()
}

func (k *killableDB) lastWriteTime() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lastWrite
}

func (k *killableDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if k.dead() {
		return nil, errKilled
	}
	sent := time.Now()
	out, err := k.Client.UpdateItem(ctx, in, opt...)
	if err == nil {
		k.mu.Lock()
		if sent.After(k.lastWrite) {
			k.lastWrite = sent
		}
		k.mu.Unlock()
	}
	return out, err
}

func (k *killableDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	if k.dead() {
		return nil, errKilled
	}
	return k.Client.GetItem(ctx, in, opt...)
}

func (k *killableDB) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	if k.dead() {
		return nil, errKilled
	}
	return k.Client.PutItem(ctx, in, opt...)
}

func (k *killableDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opt ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	if k.dead() {
		return nil, errKilled
	}
	return k.Client.DeleteItem(ctx, in, opt...)
}
