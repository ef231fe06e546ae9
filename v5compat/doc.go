// Package dynamolock has the API of dynamolock v5 (cirello.io/dynamolock/v5)
// on the engine of github.com/arielsrv/dynamolock/v2: a program written
// against v5 switches by changing its import path to
// github.com/arielsrv/dynamolock/v2/v5compat, and nothing else. The package
// name is v5's, dynamolock.
//
// Every name, signature and option of v5 is here, with v5's defaults (a
// 20s lease, a 5s heartbeat, partition key "key", a random owner name,
// acquisitions that wait for the holder's lease plus 1s and poll every
// second) and its item format (ownerName, leaseDuration,
// recordVersionNumber, data, isReleased), which the root package, v2 and
// Amazon's Java client read and write too. Its errors are the root
// package's values and types, so errors.Is and errors.As match them as
// they match v5's: [ErrClientClosed], [ErrLockAlreadyReleased], a
// *[LockNotGrantedError] wrapping a *[TimeoutError], and the rest.
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
//   - A heartbeat that finds the lock lost also matches the root
//     package's ErrLockLost, beside the *LockNotGrantedError v5 returns.
//     ReleaseLock of a lock taken over returns false with such an error
//     (v5 returns DynamoDB's ConditionalCheckFailedException itself).
//   - Bad input is refused before any DynamoDB call with an error matching
//     the root package's ErrInvalidArgument that says which value was
//     wrong: a reserved attribute name in [WithAdditionalAttributes], a
//     heartbeat period longer than half the lease (v5 returns untyped
//     errors for those two), a negative duration, an empty key, a nil
//     context (which v5 passes on to the SDK).
//   - [Client.CreateTable] of the client's own table keys it, by default,
//     on the client's partition key name ([WithPartitionKeyName]); v5
//     keys it on "key" whatever the client uses, making a table its own
//     client cannot use. Other tables default to "key", as in v5.
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
