package dynamolock

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	native "github.com/arielsrv/dynamolock/v2"
)

// Client is a lock client with dynamolock v5's methods, on the root
// package's engine (see [Client.Native]).
type Client struct {
	native    *native.Client
	tableName string
	dynamoDB  DynamoDBClient // for CreateTable, which creates what v5 creates
	// opts are the engine's options, gathered by the ClientOptions given
	// to New in their order.
	opts []native.ClientOption
	// closed: Close was called. ReleaseLock then returns ErrClientClosed
	// whatever its lock, as v5's does.
	closed atomic.Bool
}

// DynamoDBClient is the part of the DynamoDB API the client needs, with the
// SDK's signatures; *dynamodb.Client implements it. It is the root
// package's interface: a value that also has DescribeTable, Query, Scan or
// TransactWriteItems lets the engine use them.
type DynamoDBClient = native.DynamoDBClient

// Logger is the logging interface of [WithLogger]: any value with Println,
// such as *log.Logger.
type Logger = native.Logger

// ContextLogger is the logging interface of [WithContextLogger]: it gets
// the context of the call that logs.
type ContextLogger = native.ContextLogger

// ClientOption configures a [Client] made by [New].
type ClientOption func(*Client)

func engine(opt native.ClientOption) ClientOption {
	return func(c *Client) { c.opts = append(c.opts, opt) }
}

// WithPartitionKeyName sets the table's partition key attribute. Default:
// "key".
func WithPartitionKeyName(s string) ClientOption { return engine(native.WithPartitionKeyName(s)) }

// WithSortKey names the table's sort key attribute and the sort key value
// of every lock of the client. Default: no sort key.
func WithSortKey(name string, value string) ClientOption {
	return engine(native.WithSortKey(name, value))
}

// WithOwnerName sets the owner name written into every lock the client
// acquires; keep it unique per process (replicas configured alike each
// need their own): an acquisition that finds a key held under its own
// owner name by another client says so in its error. Default: 52 random
// base32 characters, new for each client; "" keeps the default (v5
// writes an empty owner name, which every client given "" shares).
func WithOwnerName(s string) ClientOption {
	if s == "" {
		return func(*Client) {}
	}
	return engine(native.WithOwnerName(s))
}

// WithLeaseDuration sets how long a lock stays valid after its last
// heartbeat. Default: 20s. It must be at least twice the heartbeat period,
// and at least 100ms: New refuses a shorter one (a bare number is
// nanoseconds: WithLeaseDuration(10) is 10ns, and the error asks whether
// 10*time.Second was meant), where v5 accepts it.
func WithLeaseDuration(d time.Duration) ClientOption { return engine(native.WithLeaseDuration(d)) }

// WithHeartbeatPeriod sets how often the client renews every lock it
// holds; zero disables background heartbeats. Default: 5s. Otherwise it
// must be at least 50ms (each renewal is a billed write per lock): New
// refuses a shorter one, such as WithHeartbeatPeriod(5), 5ns, where v5
// accepts it.
func WithHeartbeatPeriod(d time.Duration) ClientOption {
	return engine(native.WithHeartbeatPeriod(d))
}

// DisableHeartbeat turns background heartbeats off: renew locks with
// [Client.SendHeartbeat], or they are lost when their lease runs out.
func DisableHeartbeat() ClientOption { return WithHeartbeatPeriod(0) }

// WithLogger logs the client's internals through l. Default: silent.
func WithLogger(l Logger) ClientOption { return engine(native.WithLogger(l)) }

// WithContextLogger logs the client's internals through l, with the
// context of the call that logs. Default: silent.
func WithContextLogger(l ContextLogger) ClientOption {
	return engine(native.WithContextLogger(l))
}

// WithNativeOptions gives options of the root package's client (its
// fairness, sessions, metrics, slog and the rest) to the engine under this
// client. They apply in order with the other options; a later option wins.
// Not in v5.
func WithNativeOptions(opts ...native.ClientOption) ClientOption {
	return func(c *Client) { c.opts = append(c.opts, opts...) }
}

// New returns a client for the lock table tableName. It makes no DynamoDB
// call. A bad option (a heartbeat period longer than half the lease, say)
// returns an error matching native.ErrInvalidArgument. Unless heartbeats
// are disabled, it starts one background goroutine that renews held
// locks; [Client.Close] stops it.
func New(dynamoDB DynamoDBClient, tableName string, opts ...ClientOption) (*Client, error) {
	c := &Client{tableName: tableName}
	// v5's defaults, where the engine's differ: a random owner name.
	c.opts = append(c.opts, native.WithOwnerName(randomOwner()))
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	n, err := native.New(dynamoDB, tableName, c.opts...)
	if err != nil {
		return nil, inV5Terms(err)
	}
	c.native, c.opts, c.dynamoDB = n, nil, dynamoDB
	return c, nil
}

// randomOwner is v5's default owner name: 32 random bytes in base32.
func randomOwner() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand)
	return base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b)
}

// Native returns the root package's client under c, for what v5 does not
// have: [native.Client.Do], elections, read/write locks, semaphores,
// listings. Locks it acquires are its own, not this client's [*Lock]s.
// Not in v5.
func (c *Client) Native() *native.Client { return c.native }

// AcquireLock acquires the lock on key, waiting while a live owner holds
// it: by default for the holder's lease plus one second (see
// [WithAdditionalTimeToWaitForLock]), polling every second (see
// [WithRefreshPeriod]). A holder whose item stayed unchanged for its
// lease is taken to be dead, and the lock is taken over. When the wait
// runs out it returns a *[LockNotGrantedError] wrapping a *[TimeoutError];
// when ctx ends, a *LockNotGrantedError wrapping ctx.Err() (errors.Is
// matches it; v5 returns ctx.Err() itself).
func (c *Client) AcquireLock(ctx context.Context, key string, opts ...AcquireLockOption) (*Lock, error) {
	l, err := c.native.AcquireLockWithContext(ctx, key, opts...)
	if err != nil {
		return nil, inV5Terms(err)
	}
	return &Lock{lock: l, client: c}, nil
}

// ReleaseLock releases lock, returning true when it was released, and
// false with an error when it was not: another owner took it over (the
// error matches native.ErrLockLost), it was released before
// ([ErrLockAlreadyReleased]), it is another owner's
// ([ErrOwnerMismatched]), or DynamoDB failed. By default the item is kept
// and marked released; [WithDeleteLock](true) or [WithDeleteLockOnRelease]
// delete it. After [Client.Close] it returns [ErrClientClosed] whatever
// the lock, as v5's does.
func (c *Client) ReleaseLock(ctx context.Context, lock *Lock, opts ...ReleaseLockOption) (bool, error) {
	if c.closed.Load() {
		return false, ErrClientClosed
	}
	var l *native.Lock
	switch {
	case lock == nil:
	case lock.lock == nil:
		l = &native.Lock{} // a Lock made by the caller: nobody's, as v5 has it
	default:
		l = lock.lock
	}
	ok, err := c.native.ReleaseLockWithContext(ctx, l, opts...)
	return ok, inV5Terms(err)
}

// SendHeartbeat renews lock now: one UpdateItem conditioned on this owner
// and the lock's record version number. When the condition fails the lock
// is lost: it is marked so ([Lock.Done] closes, [Lock.IsExpired] is true)
// and the error is a *[LockNotGrantedError] (it also matches
// native.ErrLockLost). A lock from [Client.Get] that this client does not
// hold returns [ErrReadOnlyLockHeartbeat].
func (c *Client) SendHeartbeat(ctx context.Context, lock *Lock, opts ...SendHeartbeatOption) error {
	var l *native.Lock
	if lock != nil {
		l = lock.lock
	}
	if l == nil {
		l = &native.Lock{}
	}
	return inV5Terms(c.native.SendHeartbeatWithContext(ctx, l, opts...))
}

// Get returns the lock this client holds for key, or else a read-only view
// of the stored item, read with one consistent GetItem. When no item
// exists it returns an empty lock and a nil error.
func (c *Client) Get(ctx context.Context, key string) (*Lock, error) {
	l, err := c.native.GetWithContext(ctx, key)
	if err != nil {
		return nil, inV5Terms(err)
	}
	return &Lock{lock: l, client: c}, nil
}

// CreateTable creates the table tableName for locks, as v5's does: keyed
// on a string partition key "key" unless [WithCustomPartitionKeyName]
// names another, with a string sort key only if [WithSortKeyName] names
// one, whatever the keys of this client (a set-up client creates the
// table that clients with other keys use), billed per request unless
// [WithProvisionedThroughput] is given. Unlike v5's, it waits until the
// table is ACTIVE when the DynamoDB client can DescribeTable (v5 returns
// as soon as DynamoDB accepted the request). An existing table returns an
// error matching native.ErrTableExists (and DynamoDB's
// ResourceInUseException, as v5's does); a closed client returns
// [ErrClientClosed].
func (c *Client) CreateTable(ctx context.Context, tableName string, opts ...CreateTableOption) (*dynamodb.CreateTableOutput, error) {
	if c.closed.Load() {
		return nil, ErrClientClosed
	}
	// The engine keys a table by default as its client's, and refuses to
	// create a client's own table keyed otherwise (that client could not
	// use it): a client of another table name and of the engine's
	// default keys ("key", no sort key: v5's defaults) creates it.
	creator := "v5compat-create-table"
	if tableName == creator {
		creator += "-2"
	}
	cc, err := native.New(c.dynamoDB, creator, native.DisableHeartbeat())
	if err != nil {
		return nil, inV5Terms(err)
	}
	defer func() { _ = cc.Close() }() // it holds no lock: Close makes no call
	out, err := cc.CreateTableWithContext(ctx, tableName, opts...)
	return out, inV5Terms(err)
}

// Close releases every lock the client holds and stops its heartbeats.
// Later calls of any method, Close included, return [ErrClientClosed].
func (c *Client) Close(ctx context.Context) error {
	c.closed.Store(true)
	return inV5Terms(c.native.CloseWithContext(ctx))
}
