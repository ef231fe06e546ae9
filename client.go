package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gofrs/uuid/v5"
	"go.opentelemetry.io/otel/metric"

	"github.com/arielsrv/dynamolock/v2/internal/clock"
	"github.com/arielsrv/dynamolock/v2/internal/entropy"
)

// DynamoDBClient is the part of the DynamoDB API the lock client needs, with
// the SDK's signatures; *dynamodb.Client implements it. Features that need
// more (DescribeTable, Query, Scan, TransactWriteItems, UpdateTimeToLive)
// use them when the value given to [New] has them, and return
// [ErrUnsupportedOperation] when it does not.
type DynamoDBClient interface {
	GetItem(ctx context.Context, params *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(ctx context.Context, params *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(ctx context.Context, params *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(ctx context.Context, params *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	CreateTable(ctx context.Context, params *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
}

// Client acquires, renews and releases locks in one DynamoDB table. It is
// safe for concurrent use. Create it with [New] and end it with
// [Client.Close], which releases every lock it holds.
type Client struct {
	db        DynamoDBClient
	tableName string

	partitionKeyName             string
	sortKeyName                  string
	sortKey                      *string // the default sort key value; nil: none
	sortKeyDeclared              bool    // WithSortKey was given
	maxObservations              int
	ownerName                    string
	leaseDuration                time.Duration
	heartbeatPeriod              time.Duration
	leaseSet, heartbeatSet       bool // WithLeaseDuration / WithHeartbeatPeriod given: errors name what the caller set
	heartbeatConcurrency         int
	heartbeatAdmission           float64
	holdLockOnServiceUnavailable bool
	clockSkewBound               time.Duration
	ttlAttribute                 string
	logger                       *slog.Logger
	metrics                      *clientMetrics
	meterProvider                metric.MeterProvider
	schema                       schema
	singleWriterRegion           bool       // WithSingleWriterRegion
	table                        tableCheck // the table's replication, checked before the first write

	locksMu      sync.RWMutex
	locks        map[string]*Lock // registry key → the locks this client holds; guarded by locksMu
	reentrant    keyGates         // reentrant acquisitions of one key take turns
	wakeups      wakeups          // acquisitions waiting for a key this client holds
	inflight     sync.Map         // RVN → struct{}: acquiring writes sent, not yet answered or given up
	observations observations
	sched        *scheduler
	clock        clock.Clock // where it reads time and waits: clock.go

	mu        sync.RWMutex // guards closed against registering new locks during Close
	closed    bool
	closing   chan struct{} // closed when Close starts: wakes waiting acquisitions
	closeOnce sync.Once
}

var tableNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

// New returns a client for the lock table tableName. It validates every
// option and returns an *[InvalidArgumentError] for a bad one; it makes no
// DynamoDB call. Unless heartbeats are disabled, it starts one background
// goroutine that renews held locks; [Client.Close] stops it.
func New(db DynamoDBClient, tableName string, opts ...ClientOption) (*Client, error) {
	c := &Client{
		db:                   db,
		tableName:            tableName,
		partitionKeyName:     DefaultPartitionKeyName,
		leaseDuration:        DefaultLeaseDuration,
		heartbeatPeriod:      DefaultHeartbeatPeriod,
		heartbeatConcurrency: DefaultHeartbeatConcurrency,
		heartbeatAdmission:   DefaultHeartbeatAdmission,
		maxObservations:      DefaultMaxLockObservationCacheSize,
		closing:              make(chan struct{}),
		locks:                make(map[string]*Lock),
		table:                tableCheck{sem: make(chan struct{}, 1)},
		clock:                clock.Real,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(c)
		}
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	if c.ownerName == "" {
		c.ownerName = defaultOwnerName()
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	c.metrics = newClientMetrics(nil)
	if c.meterProvider != nil {
		inst, err := newOtelInstruments(c, c.meterProvider)
		if err != nil {
			return nil, fmt.Errorf("dynamolock: WithMeterProvider: %w", err)
		}
		c.metrics.otel = inst
	}
	c.schema = schema{partitionKeyName: c.partitionKeyName, sortKeyName: c.sortKeyName, ttlAttribute: c.ttlAttribute}
	c.observations.m = make(map[string]observation)
	c.observations.max = c.maxObservations
	c.sched = newScheduler(c)
	return c, nil
}

func (c *Client) validate() error {
	switch {
	case isNil(c.db):
		return invalid("DynamoDBClient", c.db, "must not be nil")
	case !tableNamePattern.MatchString(c.tableName):
		return invalid("table name", c.tableName, "must be 3 to 255 characters of a-z, A-Z, 0-9, '_', '-' and '.'")
	case c.partitionKeyName == "":
		return invalid("WithPartitionKeyName", c.partitionKeyName, "must not be empty")
	case c.sortKeyDeclared && c.sortKeyName == "":
		return invalid("WithSortKey name", c.sortKeyName, "must not be empty")
	case c.sortKeyDeclared && c.sortKeyName == c.partitionKeyName:
		return invalid("WithSortKey name", c.sortKeyName, "must differ from the partition key name")
	case c.sortKey != nil && (len(*c.sortKey) > maxSortKeyBytes || !utf8.ValidString(*c.sortKey)):
		return invalid("WithSortKey value", *c.sortKey, "must be 1 to %d bytes of UTF-8", maxSortKeyBytes)
	case c.maxObservations < 1 || c.maxObservations > 10_000_000:
		return invalid("WithMaxLockObservationCacheSize", c.maxObservations, "must be between 1 and 10000000")
	case !utf8.ValidString(c.ownerName):
		return invalid("WithOwnerName", c.ownerName, "must be valid UTF-8")
	case lockAttribute(c.partitionKeyName):
		return invalid("WithPartitionKeyName", c.partitionKeyName, "is an attribute the lock itself uses")
	case c.sortKeyDeclared && lockAttribute(c.sortKeyName):
		return invalid("WithSortKey name", c.sortKeyName, "is an attribute the lock itself uses")
	case c.leaseDuration <= 0:
		return invalid("WithLeaseDuration", c.leaseDuration, "must be positive")
	case c.heartbeatPeriod < 0:
		return invalid("WithHeartbeatPeriod", c.heartbeatPeriod, "must not be negative (0 disables heartbeats)")
	case c.heartbeatPeriod > 0 && c.leaseDuration/2 < c.heartbeatPeriod:
		return c.leaseHeartbeatMismatch()
	case c.heartbeatConcurrency < 1 || c.heartbeatConcurrency > 1024:
		return invalid("WithHeartbeatConcurrency", c.heartbeatConcurrency, "must be between 1 and 1024")
	case !(c.heartbeatAdmission >= 0 && c.heartbeatAdmission <= 1): // NaN too
		return invalid("WithHeartbeatAdmission", c.heartbeatAdmission, "must lie between 0 (off) and 1")
	case c.clockSkewBound < 0:
		return invalid("WithClockSkewBound", c.clockSkewBound, "must not be negative")
	}
	if c.ttlAttribute != "" && (c.ttlAttribute == c.partitionKeyName || c.ttlAttribute == c.sortKeyName || lockAttribute(c.ttlAttribute)) {
		return invalid("WithTTLAttribute", c.ttlAttribute, "is an attribute the lock itself uses")
	}
	return nil
}

// leaseHeartbeatMismatch is the error for a lease under twice the heartbeat
// period, naming the option the caller set rather than one left at its
// default.
func (c *Client) leaseHeartbeatMismatch() error {
	const why = "or locks may expire while a heartbeat is late"
	switch {
	case c.heartbeatSet && !c.leaseSet:
		return invalid("WithHeartbeatPeriod", c.heartbeatPeriod,
			"must be at most half the lease duration %s (the default; set a longer one with WithLeaseDuration), %s", c.leaseDuration, why)
	case c.leaseSet && !c.heartbeatSet:
		return invalid("WithLeaseDuration", c.leaseDuration,
			"must be at least twice the heartbeat period %s (the default; set a shorter one with WithHeartbeatPeriod), %s", c.heartbeatPeriod, why)
	}
	return invalid("WithLeaseDuration", c.leaseDuration, "must be at least twice the WithHeartbeatPeriod %s, %s", c.heartbeatPeriod, why)
}

// heartbeatPeriodText describes the heartbeat period for an error about an
// option that must be at least twice it.
func (c *Client) heartbeatPeriodText() string {
	if c.heartbeatSet {
		return "the WithHeartbeatPeriod " + c.heartbeatPeriod.String()
	}
	return "the heartbeat period " + c.heartbeatPeriod.String() + " (the default; WithHeartbeatPeriod sets it)"
}

// isNil reports whether v is nil or a typed nil pointer (a nil
// *dynamodb.Client in an interface).
func isNil(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Func, reflect.Slice, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

func defaultOwnerName() string {
	host, _ := os.Hostname()
	return host + newUUID()
}

func newRVN() string { return newUUID() }

// newUUID returns a random (version 4) UUID in its canonical 36-character
// form: one allocation, the string. Its bits come from crypto/rand, as
// uuid.NewV4's do, but read into a uuid.UUID on the stack: NewV4 reads
// through an io.Reader, which moves the UUID to the heap, a second
// allocation on every acquisition and heartbeat. crypto/rand.Read does not
// fail (Go 1.24+). It is read through internal/entropy, which the
// deterministic simulation replaces.
func newUUID() string {
	var u uuid.UUID
	entropy.Read(u[:])
	u.SetVersion(uuid.V4)
	u.SetVariant(uuid.VariantRFC9562)
	return u.String()
}

// OwnerName returns the owner name this client writes into its locks.
func (c *Client) OwnerName() string { return c.ownerName }

// registryKey identifies a lock in a client. Without a sort key value it is
// the key itself (no copy: most clients have no sort key). With one, a
// byte that no key starts with (keys are valid UTF-8) and the length of
// the partition key come first, so that ("a", "bc") and ("ab", "c") stay
// apart, and neither can equal a key without a sort key.
func registryKey(key string, sortKey *string) string {
	if sortKey == nil {
		return key
	}
	return "\xff" + strconv.Itoa(len(key)) + ":" + key + *sortKey
}

// itemKeyOf is the primary key of the item of (key, sortKey).
func (c *Client) itemKeyOf(key string, sortKey *string) map[string]types.AttributeValue {
	k := map[string]types.AttributeValue{c.partitionKeyName: attrS(key)}
	if sortKey != nil {
		k[c.sortKeyName] = attrS(*sortKey)
	}
	return k
}

func (c *Client) isClosed() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.closed
}

func validateKey(key string) error {
	if key == "" {
		return invalid("key", key, "must not be empty")
	}
	if !utf8.ValidString(key) {
		return invalid("key", key, "must be valid UTF-8")
	}
	if len(key) > maxPartitionKeyBytes {
		return invalid("key", key, "is %d bytes, longer than DynamoDB's %d-byte limit for a partition key", len(key), maxPartitionKeyBytes)
	}
	return nil
}

// heldLock returns the lock this client holds for regKey, if any.
func (c *Client) heldLock(regKey string) *Lock {
	c.locksMu.RLock()
	l := c.locks[regKey]
	c.locksMu.RUnlock()
	if l == nil || !l.held() {
		return nil // ending: it leaves the registry in a moment
	}
	return l
}

// unregister drops l from the registry, unless another lock of its key
// replaced it there.
func (c *Client) unregister(l *Lock) {
	c.locksMu.Lock()
	if k := l.regKey(); c.locks[k] == l {
		delete(c.locks, k)
	}
	c.locksMu.Unlock()
}

// heldCount is the number of locks in the registry.
func (c *Client) heldCount() int {
	c.locksMu.RLock()
	defer c.locksMu.RUnlock()
	return len(c.locks)
}

// register records a newly acquired lock and schedules its heartbeats. If
// the client was closed meanwhile, the lock is released and ErrClientClosed
// returned, so that no lock outlives Close.
func (c *Client) register(ctx context.Context, l *Lock) error {
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		rctx, cancel := c.withTimeout(context.WithoutCancel(ctx), undoTimeout)
		_, _ = c.releaseLock(rctx, l, &releaseLockOptions{})
		cancel()
		return notGranted(ErrClientClosed, "key %q", l.partitionKey)
	}
	c.locksMu.Lock()
	k := l.regKey()
	prev := c.locks[k]
	c.locks[k] = l
	c.locksMu.Unlock()
	c.sched.notify(l)
	c.mu.RUnlock()
	if prev != nil && prev != l {
		// l's write replaced the item prev held: prev must not stay held
		// behind the registry's back. A write of prev in flight (its
		// release, whose landing is what let l in, or a heartbeat) will
		// tell how it ended; otherwise prev is lost now.
		if prev.tryTakeWrites() {
			prev.lose(ErrLockTakenOver, nil)
			prev.giveWrites()
		}
	}
	return nil
}

// Get returns the lock for key, as GetWithContext does with
// context.Background().
func (c *Client) Get(key string) (*Lock, error) {
	return c.GetWithContext(context.Background(), key)
}

// GetWithContext returns the lock this client holds for key, or else a
// read-only view of the stored item read with one consistent GetItem. When
// no item exists it returns an empty read-only lock (IsExpired is true,
// OwnerName is "") and a nil error, as dynamolock v2 does. On a table with
// a sort key it reads the client's default sort key value; see
// [Client.GetWithSortKeyWithContext].
func (c *Client) GetWithContext(ctx context.Context, key string) (*Lock, error) {
	return c.get(ctx, key, nil)
}

// GetWithSortKeyWithContext returns the lock this client holds for key
// under sort key value sortKey, or else a read-only view of that item, as
// [Client.GetWithContext] does (Amazon's Java client's getLock(key,
// sortKey)). The client must name a sort key with [WithSortKey].
func (c *Client) GetWithSortKeyWithContext(ctx context.Context, key, sortKey string) (*Lock, error) {
	return c.get(ctx, key, &sortKey)
}

func (c *Client) get(ctx context.Context, key string, sortKey *string) (*Lock, error) {
	if c.isClosed() {
		return nil, ErrClientClosed
	}
	if err := validateKey(key); err != nil {
		return nil, err
	}
	sk, err := c.resolveSortKey(sortKey)
	if err != nil {
		return nil, err
	}
	if l := c.heldLock(registryKey(key, sk)); l != nil {
		return l, nil
	}
	return c.readLock(ctx, key, sk)
}

// readLock reads the item of (key, sk) with one consistent GetItem, as a
// read-only lock, whether or not this client holds it.
func (c *Client) readLock(ctx context.Context, key string, sk *string) (*Lock, error) {
	item, err := c.getItem(ctx, c.itemKeyOf(key, sk))
	if err != nil {
		return nil, fmt.Errorf("dynamolock: get %q: %w", key, err)
	}
	if len(item) == 0 {
		return newReadOnlyLock(c, key, sk, &lockRecord{}, time.Time{}), nil
	}
	rec, err := c.schema.decodeItem(item)
	if err != nil {
		return nil, fmt.Errorf("dynamolock: lock %q: %w", key, err)
	}
	return newReadOnlyLock(c, key, sk, rec, c.now()), nil
}

// HasLock reports whether this client holds the lock on key under sort key
// value sortKey ("" for the client's default, or on a table without a sort
// key), within its lease (Amazon's Java client's hasLock). It makes no
// DynamoDB call.
func (c *Client) HasLock(key, sortKey string) bool {
	if !utf8.ValidString(key) {
		return false // never a key held (nor a registry key of another)
	}
	sk := c.sortKey
	if sortKey != "" {
		sk = &sortKey
	}
	return c.heldLock(registryKey(key, sk)) != nil
}

// Close releases every held lock, as CloseWithContext does with
// context.Background().
func (c *Client) Close() error {
	return c.CloseWithContext(context.Background())
}

// CloseWithContext releases every lock this client holds (going on past
// individual failures and returning them joined), stops the heartbeat
// scheduler, and waits for every goroutine the client started, including
// running session-monitor callbacks, until ctx ends. A lock whose release
// failed is marked lost (cause [ErrClientClosed]) and expires in DynamoDB
// after its lease. Later calls of any method return [ErrClientClosed].
func (c *Client) CloseWithContext(ctx context.Context) error {
	err := ErrClientClosed
	c.closeOnce.Do(func() { err = c.close(ctx) })
	return err
}

func (c *Client) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	close(c.closing)

	c.locksMu.RLock()
	held := make([]*Lock, 0, len(c.locks))
	for _, l := range c.locks {
		held = append(held, l)
	}
	c.locksMu.RUnlock()
	errs := make([]error, len(held))
	sem := make(chan struct{}, c.heartbeatConcurrency)
	var wg sync.WaitGroup
	for i, l := range held {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if _, err := c.releaseLock(ctx, l, &releaseLockOptions{}); err != nil &&
				!errors.Is(err, ErrLockAlreadyReleased) && !errors.Is(err, ErrLockLost) {
				l.lose(ErrClientClosed, err) // a lock Close could not release is not held any more
				errs[i] = fmt.Errorf("dynamolock: close: release %q: %w", l.partitionKey, err)
			}
		})
	}
	wg.Wait()
	errs = append(errs, c.sched.stop(ctx))
	return errors.Join(errs...)
}
