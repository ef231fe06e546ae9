// Package dynamolock implements distributed locks on Amazon DynamoDB, with
// the API of dynamolock v2 and the item format of Amazon's Java
// dynamodb-lock-client. A lock is a lease on an item of a DynamoDB table:
// the client renews it in the background and tells you when it is lost.
//
// Three jobs, and the call for each:
//
//   - One leader among daemons: [Election.Campaign] returns once this
//     process leads, and the lock it returns says when leadership ends.
//   - A worker's lock on one key, so that one host at a time works on
//     customer 42: [Client.Do] runs a function while holding the key.
//   - A read/write lock: [RWLock.RLock] for one of many readers,
//     [RWLock.Lock] for the only writer.
//
// A program written for dynamolock v2 or v5 switches by changing its
// import path alone: see "Kept for dynamolock v2 and v5" below.
//
// Most programs need three calls: [New], [Client.CreateTableIfNotExists]
// at start, and one of the three above. A worker, given an aws.Config:
//
//	c, err := dynamolock.New(dynamodb.NewFromConfig(cfg), "locks")
//	if err != nil {
//		return err
//	}
//	defer c.Close()
//	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
//		return err
//	}
//	return c.Do(ctx, "customer-42", func(ctx context.Context, lock *dynamolock.Lock) error {
//		// Work on customer 42. ctx is cancelled the moment the lock is
//		// lost; pass the fencing token to the stores you write to.
//		return process(ctx, "customer-42", lock.FencingToken())
//	})
//
// Do waits while another process holds the key, for as long as ctx allows;
// it releases the key when the function returns. [Client.Close] releases
// whatever the client still holds. Before relying on a lock, read what it
// guarantees and what it does not, below; every option is listed there
// under the call it applies to.
//
// # A leader and a read/write lock
//
// [Client.NewElection] names an election; [Election.Run] is the leader
// loop a service runs: it campaigns, runs the leader's work
// ([LeaderCallbacks]) while it leads, stops it the moment leadership ends,
// campaigns again, and resigns when its context ends ([Election.IsLeader],
// and [Election.Healthy] for a liveness probe). [Election.Campaign] waits
// until this client leads and returns the leadership as a held [Lock], whose
// [Lock.Done] closes when it ends. [Election.Leader] and [Election.Observe]
// read who leads; [Election.Resign] steps down. [Client.NewRWLock] names a
// read/write lock: never a writer with anyone else, and a waiting writer
// is not starved by readers that come after it; [RWLock.Unlock] and
// [RWLock.RUnlock] release its locks.
//
// # Holding a lock yourself
//
//   - [Client.AcquireLockWithContext] acquires a key, waiting for a live
//     holder and taking over a dead one; [Lock.Release] (or
//     [Client.ReleaseLockWithContext]) releases it, and
//     [Client.CloseWithContext] releases all the client holds.
//   - [Lock.Done] and [Lock.Err] tell when and why a held lock was lost.
//   - [Lock.FencingToken] and [Lock.TransactionCondition] make writes safe
//     even after a loss the holder has not noticed yet.
//   - [Lock.ResumeToken] and [Client.ResumeLock] take a lock back after
//     the holder's process restarted, with one conditional write, when
//     nobody else took it meanwhile.
//   - [Semaphore.Holders] and [RWLock.Readers] say who holds a
//     semaphore's slots and a read/write lock's readers.
//   - [Client.AcquireLocks] takes several keys at once or none;
//     [Client.NewSemaphore] lets up to size holders in.
//
// # Kept for dynamolock v2 and v5
//
// Every call that sends a DynamoDB request takes a context, or has a form
// that does. The forms without one are dynamolock v2's, kept so that v2
// programs compile unchanged; each does what its form with a context (on
// the right) does with context.Background():
//
//	Client.AcquireLock    Client.AcquireLockWithContext
//	Client.ReleaseLock    Client.ReleaseLockWithContext, Lock.Release
//	Client.Get            Client.GetWithContext
//	Client.SendHeartbeat  Client.SendHeartbeatWithContext
//	Client.CreateTable    Client.CreateTableWithContext
//	Client.Close          Client.CloseWithContext
//	Lock.Close            Lock.Release
//
// Also v2's: the [Logger] and [ContextLogger] adapters,
// [Lock.IsAlmostExpired] and [WithSessionMonitor].
//
// dynamolock v5 (cirello.io/dynamolock/v5) has v2's protocol with other
// signatures (a context first in every call), which this package's names
// already use for v2's: its API is package
// github.com/arielsrv/dynamolock/v2/v5compat, on this package's engine. A
// v5 program switches by changing its import path to that one; that
// package's documentation says where it differs from v5, and why.
//
// # The rest of the API
//
//   - Amazon's Java client's options and calls: [WithReentrant],
//     [WithAcquireOnlyIfLockAlreadyExists], [WithBestEffort],
//     [WithHoldLockOnServiceUnavailable], [WithSortKeyValue],
//     [Client.GetWithSortKeyWithContext], [Client.HasLock],
//     [WithMaxLockObservationCacheSize], [WithLeaseDurationToEnsure],
//     [Lock.Ensure].
//   - Beyond both: guarded refreshes ([Lock.TransactionWithRefresh]), a
//     stored expiry for fast takeover ([WithClockSkewBound]), TTL
//     ([WithTTLAttribute]), listings ([Client.AllLocks],
//     [Client.LocksByPartitionKey]), per-lock leases ([WithLockLease]),
//     first-come-first-served waiting across processes ([WithFairness]),
//     and client figures ([Client.Stats], [WithMeterProvider]).
//
// # Options, by where they apply
//
// Each option type belongs to one call; an option is given where its
// effect is decided.
//
//   - Client, given to [New] ([ClientOption]): the table's key attributes
//     ([WithPartitionKeyName], [WithSortKey], [WithTTLAttribute]); who the
//     client is ([WithOwnerName]); the lease and its renewal for every lock
//     ([WithLeaseDuration], [WithHeartbeatPeriod], [DisableHeartbeat],
//     [WithHeartbeatConcurrency], [WithHeartbeatAdmission],
//     [WithHoldLockOnServiceUnavailable]), or one session for every lock
//     ([WithSession]); taking over dead holders
//     ([WithClockSkewBound], [WithMaxLockObservationCacheSize]); global
//     tables ([WithSingleWriterRegion]); logs, metrics and
//     traces ([WithSlog], [WithLogger], [WithContextLogger],
//     [WithMeterProvider], [WithTracerProvider]).
//   - Acquisition, given to [Client.AcquireLockWithContext], [Client.Do],
//     [Client.AcquireLocks], [Semaphore.Acquire], [Election.Campaign],
//     [RWLock.RLock] and [RWLock.Lock] ([AcquireLockOption]): how to wait
//     ([FailIfLocked], [WithRefreshPeriod], [WithRefreshJitter],
//     [WithAdditionalTimeToWaitForLock], [WithFairness]); which lock
//     ([WithSortKeyValue], [WithReentrant],
//     [WithAcquireOnlyIfLockAlreadyExists]); this lock's lease
//     ([WithLockLease], [WithSessionMonitor]); what the item holds and how
//     its release will treat it ([WithData], [ReplaceData],
//     [WithAdditionalAttributes], [WithDeleteLockOnRelease]).
//     [Client.ResumeLock] takes the lease, release and retry ones.
//   - Heartbeat, given to [Client.SendHeartbeatWithContext]
//     ([SendHeartbeatOption]): [WithLeaseDurationToEnsure],
//     [ReplaceHeartbeatData], [DeleteData], [HeartbeatRetries],
//     [UnsafeMatchOwnerOnly].
//   - Release, given to [Lock.Release], [Client.ReleaseLockWithContext]
//     and [RWLock.Unlock] ([ReleaseLockOption]): [WithDeleteLock], [WithDataAfterRelease],
//     [WithBestEffort].
//   - Table, given to [Client.CreateTableWithContext] and
//     [Client.CreateTableIfNotExists] ([CreateTableOption]):
//     [WithCustomPartitionKeyName], [WithSortKeyName],
//     [WithProvisionedThroughput], [WithTags], [WithTimeToLive].
//
// Options with similar names, side by side:
//
//	WithSortKey(name, value)   client       the table's sort key attribute, and the sort key value of the client's locks
//	WithSortKeyValue(value)    acquisition  the sort key value of this one lock (overrides the client's)
//	WithSortKeyName(name)      table        the sort key attribute of a table being created
//
//	WithLeaseDuration(d)          client       the lease of every lock of the client (default 20s)
//	WithLockLease(d)              acquisition  the lease of this one lock, kept by its heartbeats
//	WithLeaseDurationToEnsure(d)  heartbeat    the lease this manual heartbeat writes, kept by later ones
//
//	WithDeleteLockOnRelease()  acquisition  this lock's release will delete its item (default: keep it, marked released)
//	WithDeleteLock(bool)       release      this release deletes the item (true) or keeps it (false), whatever was chosen before
//
//	WithPartitionKeyName(name)        client  the partition key attribute the client reads and writes
//	WithCustomPartitionKeyName(name)  table   the partition key attribute of a table being created (default: the client's)
//
//	WithTTLAttribute(name)  client  the attribute the client writes each lock's expiry (plus TTLMargin) into, for DynamoDB TTL
//	WithTimeToLive(name)    table   turns DynamoDB TTL on for that attribute of a table being created
//
// # What a lock guarantees
//
// A lock is a lease. While the holder renews it at least once per lease
// duration, no other client of this package (nor Amazon's Java client or
// dynamolock v2, which use the same item format) can acquire it. When the
// holder stops renewing it (it crashed, or lost its network), another client
// may take it over once it has seen the item unchanged for a full lease.
//
// That judgement needs no synchronised clocks: a contender measures the
// lease on its own monotonic clock from the moment it first saw the item's
// record version number, and the holder counts its lease from the moment it
// sent the write that set that number. Both see the holder's lease end no
// later than the contender may take over, as long as the two clocks run at
// about the same rate over one lease.
//
// # What it does not guarantee
//
// A lease cannot stop a holder from acting after it has lost the lock. A
// process paused for longer than its lease (a long garbage collection, a
// frozen virtual machine, a laptop lid) wakes up still believing it holds
// the lock, while another host already does. Heartbeats cannot help: the
// paused process sends none. So:
//
//   - Watch [Lock.Done] (or use [Client.Do], whose context is cancelled on
//     loss) and stop work when it closes. This narrows the window; it does
//     not close it.
//   - Pass [Lock.FencingToken] to every store you write to, and have the
//     store reject tokens lower than the highest it has seen.
//   - For data in DynamoDB, put [Lock.TransactionCondition] in the same
//     TransactWriteItems call as your writes: the transaction fails if the
//     lock changed hands.
//
// Only the fencing token and guarded writes give correctness; the lease
// alone gives efficiency (work is rarely done twice).
//
// Mutual exclusion holds within one DynamoDB Region. A global table
// replicated with multi-Region eventual consistency lets two Regions grant
// one lock, so a client refuses such a table before its first write
// ([ErrEventualGlobalTable]) unless every client writes through one Region
// ([WithSingleWriterRegion]); tables with multi-Region strong consistency
// are accepted.
//
// # Assumptions
//
// The lease is safe under these assumptions:
//
//   - Clock rate. Any two hosts' clocks run at nearly the same rate over one
//     lease. The holder counts its lease from before the write that set the
//     item's record version number, a contender from when it first read that
//     number: between the two lie at least the holder's request on its way
//     to DynamoDB and the contender's answer on its way back. A contender
//     whose clock runs faster than the holder's by a fraction e gains e
//     times the lease on it; once that exceeds the slack, it can take the
//     lock over while the holder, paused or cut off, still believes it
//     holds it. Keep e times the lease below one round trip: with 10 ms
//     round trips and a 10 s lease, e below 0.1%. Clocks kept by NTP
//     differ in rate by parts per million.
//   - Wall-clock skew, only with [WithClockSkewBound]: every host's wall
//     clock stays within the bound of every other's. A host whose clock runs
//     ahead of the holder's by more than the bound plus the time left in
//     the holder's stored expiry can take the live lock over.
//   - Process pauses. Writes fenced by the lock
//     ([Lock.TransactionCondition], [Lock.TransactionWithRefresh], or a
//     store that checks [Lock.FencingToken]) are safe across pauses of any
//     length. A holder that checks its lock, pauses past its lease, then
//     writes without fencing overwrites the next holder's work.
//
// The package's deterministic simulation gives every simulated client its
// own clock and searches each assumption, within it and beyond it;
// docs/SIMULATION.md in the module's source has what it found.
//
// # Owner names
//
// Every lock item records its holder's owner name. The default is the host
// name and a random UUID, as host/UUID, unique per [Client] (Amazon's Java
// client runs the two together). To make items and logs easier to read, set one with
// [WithOwnerName]; keep it unique per client (two clients sharing an owner
// name can renew and release each other's locks). With one client per
// process, the program's name, the host and the process id will do:
//
//	host, _ := os.Hostname()
//	c, err := dynamolock.New(db, "locks",
//		dynamolock.WithOwnerName(fmt.Sprintf("billing-worker@%s/%d", host, os.Getpid())))
//
// A process restarted with the same id on the same host would then share an
// owner name with its previous run; add a random suffix where that matters.
//
// # Costs
//
// Acquiring a free or released lock: one UpdateItem. Waiting for a held
// lock: one UpdateItem to take a place in the key's queue (renewed every
// third of the lease) and consistent GetItems by rank in it (the head's
// up to 18 a second; see [WithRefreshPeriod]). A heartbeat: one
// UpdateItem per lock per heartbeat period. A release: one UpdateItem (or
// DeleteItem). Reading a lock not held by this client: one GetItem. Once
// per client, before its first write: one DescribeTable (the global-table
// check above).
package dynamolock
