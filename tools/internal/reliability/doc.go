// Package reliability is dynamolock's reliability suite: several worker
// processes, each with several goroutines, contend for a few locks in
// DynamoDB Local while a driver injects faults (network faults through a
// toxiproxy per process, service errors through SDK middleware, process
// pauses with SIGSTOP/SIGCONT, and DynamoDB Local restarts). Every critical
// section and every write is logged; a checker then proves:
//
//   - on each key, no two critical sections that both held a valid lease
//     overlap, and their fencing tokens strictly increase in time order;
//   - every guarded write (one TransactWriteItems with
//     [dynamolock.Lock.TransactionCondition]) attempted after another
//     client took the lock over failed;
//   - a counter updated only by guarded writes is linearizable (checked
//     with porcupine) and lost or duplicated no increment;
//   - no process panicked.
//
// It also counts what guarded writes protect against: unguarded writes
// made after a takeover, and the updates of an unguarded counter they lost.
//
// The workers are the test binary itself, re-executed with [EnvWorker] set
// (see [MaybeRunWorker]). `go test ./internal/reliability` runs the short
// suite; `-reliability.full` the long one, and `-reliability.report=FILE`
// writes the markdown report (make reliability writes docs/RELIABILITY.md).
package reliability
