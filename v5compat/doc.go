// Package dynamolock has the API of dynamolock v5 (cirello.io/dynamolock/v5)
// on the engine of github.com/arielsrv/dynamolock/v2: a program written
// against v5 switches by changing its import path to
// github.com/arielsrv/dynamolock/v2/v5compat, and nothing else. The package
// name is v5's, dynamolock.
//
// Every name, signature and option of v5 is here, with v5's defaults (a
// 20s lease, a 5s heartbeat, partition key "key", a random owner name,
// acquisitions that wait for the holder's lease plus 1s and poll every
// second, tables created keyed on "key" alone), read from the same zeros
// (WithRefreshPeriod(0) and WithAdditionalTimeToWaitForLock(0) are the
// default 1s, WithHeartbeatPeriod(0) disables heartbeats), and its item
// format (ownerName, leaseDuration, recordVersionNumber, data,
// isReleased), which the root package, v2 and Amazon's Java client read
// and write too. Its errors are the root package's values and types, so
// errors.Is and errors.As match them as they match v5's:
// [ErrClientClosed], [ErrLockAlreadyReleased], a *[LockNotGrantedError]
// wrapping a *[TimeoutError], and the rest.
//
// The protocol is the root package's (see its documentation for what a
// lock guarantees), which gives v5 programs what v5 lacks:
//
//   - A lost lock is marked lost. A heartbeat that finds the lock taken
//     over ends it: [Lock.IsExpired] is true, [Lock.Done] closes and
//     [Lock.Err] says why, and a lock whose lease ran out without a
//     heartbeat ends the same way. v5 keeps reporting it live until its
//     lease runs out on a timer, and signals nothing.
//   - A try-lock takes over a dead holder. [FailIfLocked] returns at once
//     while a live owner holds the lock; tried again once this client has
//     seen the item unchanged for a lease, it takes the lock over. v5's
//     FailIfLocked never acquires a lock whose holder died without
//     releasing it.
//   - Fencing tokens. Every acquisition writes a fencingToken attribute,
//     greater than every earlier holder's; [Lock.FencingToken] returns it.
//     v5 ignores the attribute (it reads it as an additional attribute of
//     the item: [Lock.AdditionalAttributes] of a v5 client shows it).
//
// # Where it deliberately differs from v5
//
// Each difference below is what v5compat does on purpose; everything else
// behaves as v5 does.
//
//   - A heartbeat that finds the lock lost also matches the root
//     package's ErrLockLost, beside the *LockNotGrantedError v5 returns.
//     ReleaseLock of a lock taken over returns false with such an error
//     (v5 returns DynamoDB's ConditionalCheckFailedException itself).
//   - When ctx ends, [Client.AcquireLock] returns a *LockNotGrantedError
//     wrapping ctx.Err(): errors.Is(err, context.DeadlineExceeded) matches
//     it, err == context.DeadlineExceeded does not (v5 returns ctx.Err()
//     itself).
//   - Bad input is refused before any DynamoDB call with an error matching
//     the root package's ErrInvalidArgument that says which value was
//     wrong, where v5 accepts it or fails at DynamoDB: a reserved
//     attribute name in [WithAdditionalAttributes], a heartbeat period
//     longer than half the lease (v5 returns untyped errors for those
//     two), a negative duration (v5 reads a negative refresh period or
//     additional wait as its default), a zero lease (v5 accepts one
//     without heartbeats) or a zero safeTime for [WithSessionMonitor], an
//     empty key or partition key name, a [WithSortKey] without a value
//     (v5 writes an empty sort key, which DynamoDB refuses; the engine's
//     WithSortKeyValue can give one per acquisition), a nil context (which
//     v5 passes on to the SDK), and a duration no one could have meant:
//     a lease under 100ms, a heartbeat period under 50ms but 0, a refresh
//     period or an additional wait under 1ms but 0. Go reads a bare
//     number as nanoseconds: WithLeaseDuration(10) is 10ns, whose
//     acquisitions v5 grants already expired, and WithHeartbeatPeriod(5)
//     renews every lock back to back; the error asks whether
//     10*time.Second was meant. (v5's own TestSessionMonitorRaceCondition
//     gives a 1ns heartbeat period, which New refuses.)
//   - Releasing a lock twice returns false and [ErrLockAlreadyReleased]
//     the second time, without a call (v5 sends the release again, which
//     succeeds while the item is kept and fails when it was deleted).
//     Releasing a stale *Lock of a key (one released before) leaves the
//     lock this client now holds on that key renewed (v5 stops its
//     renewals).
//   - [Client.Close] releases every lock, going on past a failed release,
//     and returns the failures joined (v5 stops at the first failure);
//     after it, every method returns [ErrClientClosed], ReleaseLock
//     whatever its lock as in v5, and [Client.CreateTable] too (v5's still
//     creates the table).
//   - [Client.CreateTable] waits until the table is ACTIVE when the
//     DynamoDB client can DescribeTable (v5 returns as soon as DynamoDB
//     accepted the request).
//   - A retried heartbeat ([HeartbeatRetries]) sends its write again (v5
//     reads the item with GetItem before each retry), and acquiring a free
//     key is one UpdateItem (v5 reads it with GetItem, then writes it with
//     PutItem): a DynamoDB double that implements only some of
//     [DynamoDBClient]'s methods sees other calls.
//   - [WithOwnerName]("") keeps the default, a random owner name (v5
//     writes an empty owner name, shared by every client given one).
//   - An error whose message names a fix in the root package's terms says
//     it in this package's (CreateTable for CreateTableIfNotExists, the
//     held lock that Get returns for the root package's WithReentrant,
//     WithNativeOptions for an option v5 does not have): it is then an
//     error of this package wrapping the root package's, which
//     errors.Is and errors.As see through, but a type assertion such as
//     err.(*LockNotGrantedError) does not. Such errors name the root
//     package native, as this documentation does.
//   - [Client.Get] returns a new *Lock value each call, for the same lock:
//     the lock's state is shared, the pointers differ (v5 returns its held
//     *Lock itself). A view of another's lock reads as expired, as in v5;
//     its Native().IsExpired tells whether its holder is within its lease.
//   - Log lines are the root package's, not v5's.
//   - An item written by the root package carries a fencingToken
//     attribute, and expiry attributes when [WithNativeOptions] asks for
//     them; v5 clients sharing the table keep them as additional
//     attributes.
//
// # Beyond v5
//
// [Lock.Done], [Lock.Err] and [Lock.FencingToken] are not in v5.
// [Client.Native] and [Lock.Native] reach the engine's client and lock,
// for elections, read/write locks, semaphores, the root Client.Do and the
// rest; [WithNativeOptions] gives the engine's client options, and the
// engine's acquisition, release, heartbeat and table options are accepted
// where v5's are (the option types are the same).
//
// In this package's documentation, native names the root package,
// github.com/arielsrv/dynamolock/v2 (native.ErrLockLost is its ErrLockLost).
//
// v5 needs Go 1.27; this package needs the Go of the module (1.26).
package dynamolock
