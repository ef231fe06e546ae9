package dynamolock

import (
	"log/slog"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Defaults, the same as dynamolock v2's.
const (
	// DefaultPartitionKeyName is the partition key attribute of the lock table.
	DefaultPartitionKeyName = "key"
	// DefaultLeaseDuration is how long a lock stays valid without a heartbeat.
	DefaultLeaseDuration = 20 * time.Second
	// DefaultHeartbeatPeriod is how often held locks are renewed.
	DefaultHeartbeatPeriod = 5 * time.Second
	// DefaultRefreshPeriod is how often a waiting acquisition polls the item.
	DefaultRefreshPeriod = time.Second
	// DefaultAdditionalTimeToWaitForLock is added to the holder's lease to
	// bound how long [Client.AcquireLockWithContext] waits (the calls that
	// wait as long as their context allows do not use it).
	DefaultAdditionalTimeToWaitForLock = time.Second
	// DefaultHeartbeatConcurrency bounds the heartbeats one client sends at
	// once; see [WithHeartbeatConcurrency].
	DefaultHeartbeatConcurrency = 32
	// DefaultHeartbeatAdmission is the share of the measured heartbeat
	// capacity that held locks may use before new acquisitions wait; see
	// [WithHeartbeatAdmission].
	DefaultHeartbeatAdmission = 0.6
	// DefaultMaxLockObservationCacheSize bounds the client's observations of
	// other owners' items; see [WithMaxLockObservationCacheSize].
	DefaultMaxLockObservationCacheSize = 10000
)

// ClientOption configures a [Client] in [New].
type ClientOption func(*Client)

// WithPartitionKeyName sets the name of the table's partition key attribute.
// Default: [DefaultPartitionKeyName] ("key"). Must not be empty.
func WithPartitionKeyName(s string) ClientOption {
	return func(c *Client) { c.cfg.partitionKeyName = s }
}

// WithSortKey names the table's sort key attribute (type S; tables created
// with [WithSortKeyName]) and the sort key value of this client's locks.
// [WithSortKeyValue] overrides the value per acquisition; with value ""
// there is no default, and every acquisition must give one. Locks with
// different sort key values under one partition key are independent.
// Default: no sort key. The name must not be empty; a value is at most 1024
// bytes.
func WithSortKey(name, value string) ClientOption {
	return func(c *Client) {
		c.cfg.sortKeyDeclared = true
		c.cfg.sortKeyName = name
		c.cfg.sortKey = nil
		if value != "" {
			c.cfg.sortKey = &value
		}
	}
}

// WithMaxLockObservationCacheSize bounds how many keys' observations (the
// record version number last seen in another owner's item, and when) the
// client remembers between acquisitions, so that FailIfLocked calls can
// take over a dead owner's lock across calls (Amazon's Java client's
// withMaxLockObservationCacheSize). When full, an arbitrary entry is
// dropped, which only delays a takeover. Default:
// [DefaultMaxLockObservationCacheSize]; must be between 1 and 10,000,000.
func WithMaxLockObservationCacheSize(n int) ClientOption {
	return func(c *Client) { c.cfg.maxObservations = n }
}

// WithOwnerName sets the owner name written into every lock this client
// acquires. Two clients must never share an owner name unless they are
// meant to share locks: replicas configured alike (WithOwnerName("worker")
// on every host) each need their own, such as the host name and the
// process id, or the default. An acquisition that finds the key held under
// its own owner name by another client says so in its error. Default: the
// host name and a random UUID, apart ("web-1/1f3b0c2e-...").
func WithOwnerName(s string) ClientOption {
	return func(c *Client) { c.cfg.ownerName = s }
}

// WithLeaseDuration sets how long a lock stays valid after its last
// heartbeat. Default: [DefaultLeaseDuration] (20s). It must be at least
// twice the heartbeat period, and at least 100ms: a lease must outlast the
// write that grants it and the renewals that keep it, several round trips
// to DynamoDB. A shorter one is refused by New with an
// *[InvalidArgumentError] that says which duration was likely meant (a
// bare number is nanoseconds: WithLeaseDuration(10) is 10ns, and the
// error asks whether 10*time.Second was meant).
func WithLeaseDuration(d time.Duration) ClientOption {
	return func(c *Client) { c.cfg.leaseDuration, c.cfg.leaseSet = d, true }
}

// WithHeartbeatPeriod sets how often the client renews every lock it holds.
// Default: [DefaultHeartbeatPeriod] (5s). Zero disables background heartbeats
// (see [DisableHeartbeat]); otherwise it must be at least 50ms and at most
// half the lease duration. Each renewal is one billed write per held lock
// (20 a second at 50ms); 50ms is half the shortest lease, and no period
// under it can have been meant (WithHeartbeatPeriod(5) is 5ns: New refuses
// it, asking whether 5*time.Second was meant).
func WithHeartbeatPeriod(d time.Duration) ClientOption {
	return func(c *Client) { c.cfg.heartbeatPeriod, c.cfg.heartbeatSet = d, true }
}

// DisableHeartbeat turns background heartbeats off: locks must be renewed
// with [Client.SendHeartbeat] or they are lost when their lease runs out.
func DisableHeartbeat() ClientOption {
	return WithHeartbeatPeriod(0)
}

// WithHeartbeatConcurrency bounds how many heartbeats the client sends at
// once. Beats that cannot start at once wait in order of the end of their
// lease (earliest first). Default: [DefaultHeartbeatConcurrency] (32); valid
// range 1 to 1024.
func WithHeartbeatConcurrency(n int) ClientOption {
	return func(c *Client) { c.cfg.heartbeatConcurrency = n }
}

// WithHeartbeatAdmission sets admission control, which keeps a client from
// taking more locks than it can renew: a new acquisition waits, before its
// first DynamoDB call, while the held locks and it would need more than
// fraction of the renewals per second the client has measured its
// heartbeats can make (a lock needs one per lease less two round trips:
// the scheduler's own rule), or while the heartbeat
// that has waited longest for a worker has less than a tenth of its lease
// left; bursts of acquisitions are also let go a few at a time. The wait
// counts against the acquisition's own bounds: it ends with its context,
// and after its lease plus [WithAdditionalTimeToWaitForLock] from its
// start, where that bound applies, it fails with a *[LockNotGrantedError]
// matching [ErrHeartbeatCapacity]; a try-lock ([FailIfLocked]) whose only
// other bound is its context ([Client.Do] and the recipes) waits as
// AcquireLock's does, its lease plus [DefaultAdditionalTimeToWaitForLock].
// [Stats] counts the acquisitions that waited. It applies to every
// acquisition but a reentrant one of a lock already held; without
// background heartbeats it does nothing, no acquisition waits for the rate
// before a first heartbeat measured it, a client that holds no lock (and
// has let no acquisition go) takes one key whatever it measured, and a
// client that holds no lock and has sent no heartbeat for 10 s (the
// meter's memory) counts its rate as not measured yet.
// Held locks can still be lost when DynamoDB, after granting them, gets
// slower than the margin allows. docs/HEARTBEATS.md in the module's source
// says how the rate is measured and how the default was chosen.
//
// Default: [DefaultHeartbeatAdmission] (0.6). fraction must lie between 0
// and 1; 0 turns admission control off.
func WithHeartbeatAdmission(fraction float64) ClientOption {
	return func(c *Client) { c.cfg.heartbeatAdmission = fraction }
}

// WithHoldLockOnServiceUnavailable makes heartbeats that fail with HTTP 503
// (service unavailable) keep the lease locally, as Amazon's Java client's
// option of the same name does: the lock stays "held" past its lease while
// DynamoDB is unavailable.
//
// This is unsafe: other clients cannot know the holder's DynamoDB is
// unavailable, so once the lease has run out they may take the lock while
// this process still believes it holds it. Use it only when an outage of
// DynamoDB must not stop the holder and fencing tokens or guarded writes
// protect the data. Default: off.
func WithHoldLockOnServiceUnavailable() ClientOption {
	return func(c *Client) { c.cfg.holdLockOnServiceUnavailable = true }
}

// WithLogger logs through a v2-style [Logger] (Println). Default: silent.
func WithLogger(l Logger) ClientOption {
	return func(c *Client) {
		if l != nil {
			c.cfg.logger = slog.New(&printlnHandler{println: func(_ any, s string) { l.Println(s) }})
		}
	}
}

// WithContextLogger logs through a v2-style [ContextLogger]. Default: silent.
func WithContextLogger(l ContextLogger) ClientOption {
	return func(c *Client) {
		if l != nil {
			c.cfg.logger = slog.New(&printlnHandler{ctxPrintln: l.Println})
		}
	}
}

// WithSlog logs structured records to l, with the stable keys "key",
// "sortKey", "owner", "rvn", "fencingToken" and "err". Default: silent.
func WithSlog(l *slog.Logger) ClientOption {
	return func(c *Client) {
		if l != nil {
			c.cfg.logger = l
		}
	}
}

// AcquireLockOption configures one acquisition.
type AcquireLockOption func(*acquireLockOptions)

type acquireLockOptions struct {
	data                    []byte
	replaceData             bool
	failIfLocked            bool
	deleteLockOnRelease     bool
	refreshPeriod           time.Duration
	refreshGiven            bool // WithRefreshPeriod was given: a budget the caller chose (see acquireKey)
	additionalTimeToWait    time.Duration
	additionalTimeToWaitSet bool // WithAdditionalTimeToWaitForLock was given
	additionalAttributes    map[string]types.AttributeValue
	sessionMonitor          *sessionMonitor
	onlyIfLockAlreadyExist  bool
	reentrant               bool
	sortKey                 *string       // WithSortKeyValue; nil: the client's default
	lease                   time.Duration // WithLockLease; 0: the client's lease
	leaseSet                bool          // WithLockLease was given (a 0 given is refused, not the default)
	refreshJitter           time.Duration // WithRefreshJitter; -1: a tenth of the refresh period
	jitterSet               bool          // WithRefreshJitter was given (a -1 given is refused, not the default)
	fair                    bool          // WithFairness
}

// newAcquireLockOptions applies opts over the defaults.
// Client.acquireOptions checks the result and fills in what depends on the
// client.
func newAcquireLockOptions(opts []AcquireLockOption) *acquireLockOptions {
	o := &acquireLockOptions{
		refreshPeriod:        DefaultRefreshPeriod,
		additionalTimeToWait: DefaultAdditionalTimeToWaitForLock,
		refreshJitter:        -1, // a tenth of the refresh period
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	return o
}

// WithSortKeyValue acquires the lock under sort key value value instead of
// the client's default (Amazon's Java client's withSortKey). The client must
// name a sort key with [WithSortKey]. The lock keeps its value: heartbeats,
// release, guarded writes and [Lock.SortKey] use it. value is 1 to 1024
// bytes of UTF-8.
func WithSortKeyValue(value string) AcquireLockOption {
	return func(o *acquireLockOptions) { o.sortKey = &value }
}

// WithLockLease gives this lock a lease of d instead of the client's
// [WithLeaseDuration] (node-redlock's per-lock duration). Heartbeats renew
// it with d, and [Lock.LeaseDuration] reports it. d must be at least 100ms
// (as [WithLeaseDuration]'s) and at least twice the client's heartbeat
// period (a 0 is refused, not read as "the client's lease").
func WithLockLease(d time.Duration) AcquireLockOption {
	return func(o *acquireLockOptions) { o.lease, o.leaseSet = d, true }
}

// WithRefreshJitter sets how much of each poll's wait a waiting acquisition
// may take off at random, so that waiters spread their polls out (the
// polls still come at most one refresh period apart). Default: a tenth of
// the refresh period; 0 polls exactly every refresh period. Must lie
// between 0 and the refresh period (a negative one is refused, not read as
// the default).
func WithRefreshJitter(max time.Duration) AcquireLockOption {
	return func(o *acquireLockOptions) { o.refreshJitter, o.jitterSet = max, true }
}

// WithData stores data in the lock item. Unless [ReplaceData] is also given,
// data already stored in the item (for example left by [WithDataAfterRelease])
// is kept, and data is written only when the item has none. The item must
// keep about 18 KB of DynamoDB's 400 KB free for an [RWLock]'s readers and
// a full fair queue ([WithFairness]): larger data is bad input.
func WithData(data []byte) AcquireLockOption {
	return func(o *acquireLockOptions) { o.data = data }
}

// ReplaceData makes the acquisition overwrite any data already stored in the
// item with the data of [WithData] (none: the data is removed).
func ReplaceData() AcquireLockOption {
	return func(o *acquireLockOptions) { o.replaceData = true }
}

// FailIfLocked makes the acquisition return at once with a
// *[LockNotGrantedError] when a live owner holds the lock, instead of
// waiting. A lock whose record version number this client has itself seen
// unchanged for a full lease is still taken over.
func FailIfLocked() AcquireLockOption {
	return func(o *acquireLockOptions) { o.failIfLocked = true }
}

// WithDeleteLockOnRelease makes the release of this lock delete the item
// instead of marking it released. Default: the item is kept, so its fencing
// token keeps increasing across acquisitions.
func WithDeleteLockOnRelease() AcquireLockOption {
	return func(o *acquireLockOptions) { o.deleteLockOnRelease = true }
}

// WithRefreshPeriod sets the pace at which a waiting acquisition polls the
// item. Default: [DefaultRefreshPeriod] (1s); must be at least 1ms (a poll
// takes a round trip to DynamoDB; WithRefreshPeriod(100) is 100ns, which
// the acquisition refuses, asking whether 100*time.Millisecond was meant).
//
// Given to a plain AcquireLock (not [WithFairness]), it is a budget the
// caller chose, as in dynamolock v2: the call polls the item once every d
// and takes no place in the key's queue, so it writes nothing into the
// item while it waits; n such waiters read the key n/d times a second
// (400 a second for 8 waiters at 20 ms: on a hot key these reads cost less
// than places' writes, and take a release in another process within d).
// Without it, the waiters poll by rank in the key's queue, as below.
//
// A waiter that holds a place in the key's queue (every waiting
// AcquireLock without this option but a FailIfLocked one, a fair one, a
// fair semaphore's) polls by its
// rank in it, so that another process's release is taken within one poll
// of the queue's head, and the key's reads stay bounded whatever the
// number of waiters (docs/ENGINE.md, "Polling by rank"): the head polls at
// a quarter of the hold's age, between d/200 (5 ms at least) and what the
// waiters behind it leave of the key's 18 reads per max(d, 1 s) (55.6 ms
// alone, 70.9 ms ahead of 31 others, at d ≤ 1 s), and never slower than
// d; a waiter of rank r ≥ 2 comes back at about half the time it needs
// to reach the head, at most 3d/4 (rank 2) or r×d apart, and renews its
// place every third of its lease (an answer that shows the item as a read
// does). A waiter without a place (a full
// queue, a read/write lock's, a plain semaphore's) polls every d. In every
// case the wait is shortened (never lengthened) by a random jitter, up to
// a tenth of d unless [WithRefreshJitter] says otherwise, and a waiter
// also wakes when its holder could turn stale and when its wait ends.
func WithRefreshPeriod(d time.Duration) AcquireLockOption {
	return func(o *acquireLockOptions) { o.refreshPeriod, o.refreshGiven = d, true }
}

// WithAdditionalTimeToWaitForLock sets how long, beyond the holder's lease,
// an acquisition waits before giving up with a *[TimeoutError] (for
// several keys: beyond the longest lease among the first holders seen).
// Default: [DefaultAdditionalTimeToWaitForLock] (1s) for
// [Client.AcquireLockWithContext]; [Client.Do], [Client.AcquireLocks] and
// [Semaphore.Acquire] without it wait as long as their context allows.
// 0 adds nothing to the holder's lease; otherwise it must be at least 1ms
// (WithAdditionalTimeToWaitForLock(5) is 5ns, which the acquisition
// refuses, asking whether 5*time.Second was meant).
func WithAdditionalTimeToWaitForLock(d time.Duration) AcquireLockOption {
	return func(o *acquireLockOptions) { o.additionalTimeToWait, o.additionalTimeToWaitSet = d, true }
}

// WithAdditionalAttributes stores extra attributes in the lock item, merged
// with those already there. Names used by the lock itself (partition and sort
// key, ownerName, leaseDuration, recordVersionNumber, data, isReleased,
// fencingToken and the expiry and TTL attributes) are rejected.
func WithAdditionalAttributes(attr map[string]types.AttributeValue) AcquireLockOption {
	return func(o *acquireLockOptions) { o.additionalAttributes = attr }
}

// WithAcquireOnlyIfLockAlreadyExists makes the acquisition fail with a
// *[LockNotGrantedError] when no item exists for the key, instead of
// creating one (Amazon's Java client's acquireOnlyIfLockAlreadyExists).
func WithAcquireOnlyIfLockAlreadyExists() AcquireLockOption {
	return func(o *acquireLockOptions) { o.onlyIfLockAlreadyExist = true }
}

// WithReentrant makes an acquisition of a key that this client already
// holds return the held *Lock at once, with no DynamoDB call; and one of a
// key whose item already names this client's owner take it over at once
// (Amazon's Java client's reentrancy). Use it only for a lock this very
// process holds through this client: an item that names the owner because
// another client was given the same owner name (a replica in another
// process) is taken from that client while it still holds it, and two
// holders then work at once. Owner names unique per process
// ([WithOwnerName]'s default) keep that from happening.
func WithReentrant() AcquireLockOption {
	return func(o *acquireLockOptions) { o.reentrant = true }
}

// ReleaseLockOption configures a release.
type ReleaseLockOption func(*releaseLockOptions)

type releaseLockOptions struct {
	deleteLock *bool
	data       []byte
	bestEffort bool
}

// WithDeleteLock overrides whether the release deletes the item (true) or
// keeps it marked released (false). Default: as chosen at acquisition with
// [WithDeleteLockOnRelease] (keep).
func WithDeleteLock(deleteLock bool) ReleaseLockOption {
	return func(o *releaseLockOptions) { o.deleteLock = &deleteLock }
}

// WithDataAfterRelease leaves data in the released item. It has no effect
// when the release deletes the item.
func WithDataAfterRelease(data []byte) ReleaseLockOption {
	return func(o *releaseLockOptions) { o.data = data }
}

// WithBestEffort makes a release that fails for any reason other than the
// lock no longer being ours (a network error, say) report success: the lock
// is forgotten locally and will expire after its lease. The failure is
// logged. Amazon's Java client's bestEffort.
func WithBestEffort() ReleaseLockOption {
	return func(o *releaseLockOptions) { o.bestEffort = true }
}

// SendHeartbeatOption configures a manual heartbeat.
type SendHeartbeatOption func(*sendHeartbeatOptions)

type sendHeartbeatOptions struct {
	deleteData            bool
	data                  []byte
	retries               int
	retryWait             time.Duration
	matchOwnerOnly        bool
	leaseDurationToEnsure time.Duration
	leaseToEnsureSet      bool // WithLeaseDurationToEnsure was given (a 0 given is refused, not the default)
}

// DeleteData removes the lock's data with this heartbeat.
func DeleteData() SendHeartbeatOption {
	return func(o *sendHeartbeatOptions) { o.deleteData = true }
}

// ReplaceHeartbeatData replaces the lock's data with this heartbeat.
func ReplaceHeartbeatData(data []byte) SendHeartbeatOption {
	return func(o *sendHeartbeatOptions) { o.data = data }
}

// HeartbeatRetries retries a heartbeat that failed for a reason other than
// the lock being lost up to retries more times, waiting waitTime between
// tries. Default: no retries (the SDK's own retries still apply).
func HeartbeatRetries(retries int, waitTime time.Duration) SendHeartbeatOption {
	return func(o *sendHeartbeatOptions) {
		o.retries = retries
		o.retryWait = waitTime
	}
}

// UnsafeMatchOwnerOnly conditions the heartbeat on the owner name only, not
// on the record version number. It renews the lock even when another client
// with the same owner name rewrote its item in between (dynamolock v2 and
// Amazon's Java client write no fencing token), which is unsafe unless
// owner names are unique per process. It never renews another acquisition
// of the key by this library (another fencing token), this client's own
// included: a late owner-only heartbeat of a lock that ended does not
// touch the item of the lock that took the key after it.
func UnsafeMatchOwnerOnly() SendHeartbeatOption {
	return func(o *sendHeartbeatOptions) { o.matchOwnerOnly = true }
}

// WithLeaseDurationToEnsure makes the heartbeat write d as the lock's lease
// instead of the client's lease duration (Amazon's Java client's
// SendHeartbeatOptions.leaseDurationToEnsure). Later background heartbeats
// keep d. d must be at least 100ms (as [WithLeaseDuration]'s) and at least
// twice the heartbeat period.
func WithLeaseDurationToEnsure(d time.Duration) SendHeartbeatOption {
	return func(o *sendHeartbeatOptions) { o.leaseDurationToEnsure, o.leaseToEnsureSet = d, true }
}

// CreateTableOption configures [Client.CreateTable].
type CreateTableOption func(*createDynamoDBTableOptions)

type createDynamoDBTableOptions struct {
	billingMode           types.BillingMode
	provisionedThroughput *types.ProvisionedThroughput
	tableName             string
	partitionKeyName      string
	sortKeyName           string
	tags                  []types.Tag
	timeToLiveAttribute   string
}

// WithCustomPartitionKeyName sets the partition key attribute of the new
// table. Default: the client's partition key name ([WithPartitionKeyName]).
// For the client's own table (the table name given to [New]) it must be
// that name: a client could not use its table keyed otherwise, so another
// name returns an *[InvalidArgumentError] before any call. (dynamolock v2
// created such a table.) A table of another name may be keyed as the
// caller likes.
func WithCustomPartitionKeyName(s string) CreateTableOption {
	return func(o *createDynamoDBTableOptions) { o.partitionKeyName = s }
}

// WithSortKeyName gives the new table a sort key (type S) with this name.
// Default: the client's sort key name if it has one ([WithSortKey]), else
// none. For the client's own table it must be the client's, as
// [WithCustomPartitionKeyName] says.
func WithSortKeyName(s string) CreateTableOption {
	return func(o *createDynamoDBTableOptions) { o.sortKeyName = s }
}

// WithTags tags the new table.
func WithTags(tags []types.Tag) CreateTableOption {
	return func(o *createDynamoDBTableOptions) { o.tags = tags }
}

// WithProvisionedThroughput creates the table with provisioned capacity.
// Default: on-demand (PAY_PER_REQUEST) billing.
func WithProvisionedThroughput(provisionedThroughput *types.ProvisionedThroughput) CreateTableOption {
	return func(o *createDynamoDBTableOptions) {
		o.billingMode = types.BillingModeProvisioned
		o.provisionedThroughput = provisionedThroughput
	}
}
