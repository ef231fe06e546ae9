package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gofrs/uuid/v5"

	"github.com/arielsrv/dynamolock/v2/internal/entropy"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
	"github.com/arielsrv/dynamolock/v2/internal/metrics"
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
	cfg     config // written only in New: see config
	db      DynamoDBClient
	metrics *metrics.Set
	tele    *tracing   // spans (trace.go)
	table   tableCheck // the table's replication, checked before the first write
	// answered: DynamoDB answered a call of this client (see unreachable).
	answered atomic.Bool

	here     here // what the client's acquisitions and locks share about keys
	sched    *scheduler
	sessions sessions     // WithSession: the client's session
	observed sessionJudge // what the client has seen of sessions that hold locks
	plain    plainAcquire // the common acquiring write's names and expressions
	giveUps  giveUps      // WithSession: take-backs of locks given up, sent again (giveup.go)

	mu     sync.RWMutex // guards closed against registering new locks during Close
	closed bool
	// cleanups counts the goroutines of background (clean-ups of
	// acquisitions whose caller's context ended, session starts); Close
	// waits for them.
	cleanups  sync.WaitGroup
	closing   <-chan struct{} // closed when Close starts (closingCtx's Done): wakes waiting acquisitions
	closeOnce sync.Once
	// abandoned ends when the context given to Close ended before the
	// client's own work did (abandon): every context of withTimeout ends
	// with it.
	abandoned context.Context
	abandon   context.CancelFunc
	// closingCtx ends when Close begins.
	closingCtx  context.Context
	markClosing context.CancelFunc
}

// New returns a client for the lock table tableName: the table's name, or
// its ARN (arn:aws:dynamodb:REGION:ACCOUNT:table/NAME), which DynamoDB
// accepts wherever a name goes and which names a table shared by another
// account under a resource-based policy (docs/DEPLOY.md); every request
// then carries the ARN. Creating a table takes its name (see
// [Client.CreateTableWithContext]). It validates every option and returns
// an *[InvalidArgumentError] for a bad one; it makes no DynamoDB call. Unless heartbeats are disabled, it starts one background
// goroutine that renews held locks; [Client.Close] stops it.
func New(db DynamoDBClient, tableName string, opts ...ClientOption) (*Client, error) {
	if isNil(db) {
		return nil, invalid("DynamoDBClient", db, "must not be nil")
	}
	c := &Client{
		cfg:   defaultConfig(tableName),
		db:    db,
		table: tableCheck{sem: make(chan struct{}, 1)},
	}
	c.abandoned, c.abandon = context.WithCancel(context.Background())
	c.closingCtx, c.markClosing = context.WithCancel(context.Background())
	c.closing = c.closingCtx.Done()
	for _, opt := range opts { // a ClientOption writes into c.cfg, here only
		if opt != nil {
			opt(c)
		}
	}
	if err := c.cfg.check(); err != nil {
		return nil, err
	}
	c.cfg.resolve()
	m, errs := metrics.New(c.cfg.meterProvider, meterName, func() int64 { return int64(c.here.count()) })
	if len(errs) > 0 {
		return nil, fmt.Errorf("dynamolock: WithMeterProvider: %w", joinErrors(errs...))
	}
	c.metrics = m
	c.tele = newTracing(c.cfg.tracerProvider, c.cfg.tableName, c.cfg.ownerName)
	c.here = newHere(c.cfg.maxObservations)
	c.sched = newScheduler(c)
	c.plain = c.newPlainAcquire()
	return c, nil
}

// defaultOwnerName is the host name and a fresh UUID, apart: "web-1/<uuid>"
// (Amazon's Java client runs them together, which reads as one word; no
// host name nor UUID has a "/"). Without a host name, the UUID alone.
func defaultOwnerName() string {
	host, _ := os.Hostname()
	if host == "" {
		return newUUID("", "")
	}
	return host + "/" + newUUID("", "")
}

func newRVN() string { return newUUID("", "") }

// newRVNFor returns the record version number of l's next renewal, a draw
// named by l (see internal/entropy). Called with l.mu held.
func newRVNFor(l *Lock) string { return newUUID(l.partitionKey, l.rvn) }

// newUUID returns a random (version 4) UUID in its canonical 36-character
// form: one allocation, the string. Its bits come from crypto/rand, as
// uuid.NewV4's do, but read into a uuid.UUID on the stack: NewV4 reads
// through an io.Reader, which moves the UUID to the heap, a second
// allocation on every acquisition and heartbeat. crypto/rand.Read does not
// fail (Go 1.24+). It is read through internal/entropy, which the
// deterministic simulation replaces; key and rvn name the lock it is for,
// if any.
func newUUID(key, rvn string) string {
	var u uuid.UUID
	entropy.Read(u[:], key, rvn)
	u.SetVersion(uuid.V4)
	u.SetVariant(uuid.VariantRFC9562)
	return u.String()
}

// OwnerName returns the owner name this client writes into its locks.
func (c *Client) OwnerName() string { return c.cfg.ownerName }

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
	k := map[string]types.AttributeValue{c.cfg.partitionKeyName: lockitem.S(key)}
	if sortKey != nil {
		k[c.cfg.sortKeyName] = lockitem.S(*sortKey)
	}
	return k
}

// enter is the first step of every exported method of a Client that takes
// a context: a nil ctx is bad input (an *InvalidArgumentError, before any
// call), and a closed client returns ErrClientClosed.
func (c *Client) enter(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err
	}
	if c.isClosed() {
		return ErrClientClosed
	}
	return nil
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
	if len(key) > lockitem.MaxPartitionKeyBytes {
		return invalid("key", key, "is %d bytes, longer than DynamoDB's %d-byte limit for a partition key", len(key), lockitem.MaxPartitionKeyBytes)
	}
	return nil
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
	prev, replaced := c.here.add(l, c.now())
	if !replaced {
		c.mu.RUnlock()
		// prev's write came after l's: l was taken before it was even
		// returned (see here.add). The caller sees it lost.
		_ = l.lose(ErrLockTakenOver, fmt.Errorf("dynamolock: lock of key %q (fencing token %d) was taken by another acquisition with this owner name before it was returned; this client holds the key with fencing token %d",
			l.partitionKey, l.FencingToken(), prev.FencingToken()))
		return nil
	}
	c.sched.notify(l)
	c.mu.RUnlock()
	if s := l.heldBy(); s != nil && !s.add(l) {
		// Its session ended while it was being acquired: so does the lock
		// (the acquisition then decides anew, under a new session).
		cause := ErrLeaseExpired
		var lost *LockLostError
		if errors.As(s.lock.ended(), &lost) {
			cause = lost.Cause
		}
		_ = l.lose(cause, fmt.Errorf("dynamolock: its session %s ended while it was acquired", s.key))
	}
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
	if err := c.enter(ctx); err != nil {
		return nil, err
	}
	if err := validateKey(key); err != nil {
		return nil, err
	}
	sk, err := c.resolveSortKey(sortKey)
	if err != nil {
		return nil, err
	}
	if l := c.here.held(registryKey(key, sk)); l != nil {
		return l, nil
	}
	return c.readLock(ctx, key, sk)
}

// readLock reads the item of (key, sk) with one consistent GetItem, as a
// read-only lock, whether or not this client holds it. A lock held by a
// session is read as its session is: released once the session ended, with
// the session's lease (one more GetItem, of the session's item).
func (c *Client) readLock(ctx context.Context, key string, sk *string) (*Lock, error) {
	item, err := c.getItem(ctx, c.itemKeyOf(key, sk))
	if err != nil {
		return nil, fmt.Errorf("dynamolock: get %q: %w", key, err)
	}
	if len(item) == 0 {
		return newReadOnlyLock(c, key, sk, &lockRecord{}, time.Time{}), nil
	}
	rec, err := c.cfg.schema.decodeItem(item)
	if err != nil {
		return nil, fmt.Errorf("dynamolock: lock %q: %w", key, err)
	}
	if err := c.throughSession(ctx, rec, 0); err != nil {
		return nil, fmt.Errorf("dynamolock: get %q: %w", key, err)
	}
	return newReadOnlyLock(c, key, sk, rec, c.now()), nil
}

// throughSession makes rec, an item just read for a view (Get, a listing,
// an election's leader), say what its session says when a session holds
// it (docs/SESSIONS.md): released once the session ended, with the
// session's lease while it lives. It reads the session's item (one
// consistent GetItem) unless this client read it within maxAge. Every
// read-only view of an item goes through it.
func (c *Client) throughSession(ctx context.Context, rec *lockRecord, maxAge time.Duration) error {
	if rec.Session == "" || rec.Released {
		return nil
	}
	st, err := c.sessionState(ctx, rec.Session, maxAge)
	if err != nil {
		return fmt.Errorf("its session %q: %w", rec.Session, err)
	}
	rec.Released, rec.Lease = st.ended, st.lease
	return nil
}

// HasLock reports whether this client holds the lock on key under sort key
// value sortKey ("" for the client's default, or on a table without a sort
// key), within its lease (Amazon's Java client's hasLock). It makes no
// DynamoDB call.
func (c *Client) HasLock(key, sortKey string) bool {
	if !utf8.ValidString(key) {
		return false // never a key held (nor a registry key of another)
	}
	sk := c.cfg.sortKey
	if sortKey != "" {
		sk = &sortKey
	}
	return c.here.held(registryKey(key, sk)) != nil
}

// Close releases every held lock, as CloseWithContext does with
// context.Background().
func (c *Client) Close() error {
	return c.CloseWithContext(context.Background())
}

// CloseWithContext releases every lock this client holds (going on past
// individual failures and returning them joined), stops the heartbeat
// scheduler, and waits for every goroutine the client started, including
// running session-monitor callbacks, until ctx ends. No heartbeat starts
// once Close has begun: the releases go instead, the lock whose lease ends
// first first (a lock whose heartbeat is in flight goes by the lease that
// heartbeat renews), as many at once as [WithHeartbeatConcurrency] allows.
// While the held locks need no more renewals than the heartbeat workers
// sustain (what admission control keeps: see [WithHeartbeatAdmission]),
// every release is then sent before its lock's lease ends. A lock whose
// release failed is marked lost (cause [ErrClientClosed]) and expires in
// DynamoDB after its lease, as does one whose lease ran out before its
// release could be sent; session monitors still fire for locks that wait
// for their release. Later calls of any method return [ErrClientClosed].
func (c *Client) CloseWithContext(ctx context.Context) error {
	if err := checkContext(ctx); err != nil {
		return err // the client stays open: Close it with a context
	}
	err := ErrClientClosed
	c.closeOnce.Do(func() { err = c.close(ctx) })
	return err
}

func (c *Client) close(ctx context.Context) error {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.markClosing() // closes closing

	// No more heartbeats: each lock's release is sent instead, in the
	// order of the ends of the leases, by as many goroutines as there are
	// heartbeat workers, so that no lock waits for its release behind
	// heartbeats of others (which, on a backend whose throughput the
	// heartbeats used up, let leases run out during Close:
	// TestCloseAtCapacityLosesNoLock).
	c.sched.drain(ctx)
	// Every lock the client holds, but those a session holds: the release of
	// the session's own item releases them (docs/SESSIONS.md).
	held := slices.DeleteFunc(c.here.all(), func(l *Lock) bool { return l.heldBy() != nil }) // in key order: ties keep it
	now := c.now()
	ends := make(map[*Lock]time.Time, len(held))
	for _, l := range held {
		l.mu.Lock()
		ends[l] = l.leaseEnd
		if l.writing {
			// A beat in flight renews the lease from about now: the release
			// would wait for it, and the locks whose leases end next must
			// not wait behind that.
			ends[l] = now.Add(l.leaseDuration)
		}
		l.mu.Unlock()
	}
	slices.SortStableFunc(held, func(a, b *Lock) int { return ends[a].Compare(ends[b]) })
	errs := make([]error, len(held))
	sem := make(chan struct{}, c.cfg.heartbeatConcurrency)
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
	// Each clean-up is bounded by undoTimeout, and by ctx: once it ends,
	// what is still under way is abandoned (its calls' contexts end, see
	// withTimeout) and Close returns as soon as those goroutines do.
	cleaned := make(chan struct{})
	go func() {
		c.cleanups.Wait()
		close(cleaned)
	}()
	select {
	case <-cleaned:
	case <-ctx.Done():
		c.abandon()
		<-cleaned
	}
	errs = append(errs, c.sched.stop(ctx))
	return joinErrors(errs...)
}

// closingContext returns ctx, ended also when Close begins: for work that
// has no use once the client closes (a session's start).
func (c *Client) closingContext(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(c.closingCtx, func() { cancel(ErrClientClosed) })
	return ctx, func() { stop(); cancel(nil) }
}

// background runs f (a clean-up of an acquisition whose caller has gone, a
// session's start) in a goroutine that Close waits for, with undoTimeout
// to do it. Once Close has begun it runs f here instead.
func (c *Client) background(f func(context.Context)) {
	run := func() {
		ctx, cancel := c.withTimeout(context.Background(), undoTimeout)
		defer cancel()
		f(ctx)
	}
	c.mu.RLock()
	if c.closed {
		c.mu.RUnlock()
		run()
		return
	}
	c.cleanups.Add(1) // before Close's Wait: Close sets closed first
	c.mu.RUnlock()
	go func() {
		defer c.cleanups.Done()
		run()
	}()
}
