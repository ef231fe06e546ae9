package dynamolock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// Sentinel errors. Compare with [errors.Is]: most errors returned by this
// package wrap one of these with more context.
var (
	// ErrClientClosed is returned by every method of a [Client] after Close.
	// An acquisition that Close interrupts returns a *[LockNotGrantedError]
	// wrapping it; match it with [errors.Is] either way.
	ErrClientClosed = errors.New("dynamolock: client already closed")

	// ErrLockAlreadyReleased is returned when an operation needs a held lock
	// but the lock was already released by this process.
	ErrLockAlreadyReleased = errors.New("dynamolock: lock is already released")

	// ErrCannotReleaseNullLock is returned when releasing a nil *Lock.
	ErrCannotReleaseNullLock = errors.New("dynamolock: cannot release null lock item")

	// ErrOwnerMismatched is returned when a client tries to release or
	// heartbeat a lock that another owner name holds.
	ErrOwnerMismatched = errors.New("dynamolock: lock owner mismatched")

	// ErrSessionMonitorNotSet is returned by [Lock.IsAlmostExpired] when the
	// lock was acquired without [WithSessionMonitor].
	ErrSessionMonitorNotSet = errors.New("dynamolock: session monitor is not set")

	// ErrReadOnlyLockHeartbeat is returned when sending a heartbeat for a
	// lock obtained with [Client.Get] that this client does not hold.
	ErrReadOnlyLockHeartbeat = errors.New("dynamolock: cannot send heartbeats to a read-only lock")

	// ErrLockLost is matched by every error that reports the loss of a held
	// lock: the lock was taken over or deleted by someone else
	// ([ErrLockTakenOver]), or its lease ran out before a heartbeat could
	// renew it ([ErrLeaseExpired]).
	ErrLockLost = errors.New("dynamolock: lock lost")

	// ErrLockTakenOver is the cause of a loss when DynamoDB rejected this
	// owner's write because the item now has another owner or record
	// version number, or was deleted.
	ErrLockTakenOver = errors.New("taken by another owner or deleted")

	// ErrLeaseExpired is the cause of a loss when no heartbeat succeeded
	// before the lease ran out: DynamoDB was unreachable or throttling, or
	// this process did not run for that long (paused by SIGSTOP or a
	// debugger, a frozen virtual machine, a long garbage collection, a
	// starved CPU), so no heartbeat was even sent.
	ErrLeaseExpired = errors.New("could not reach DynamoDB before the lease ran out, or this process did not run (paused, stopped or starved of CPU) for that long")

	// ErrHeartbeatRefused is the cause of a loss when DynamoDB refused a
	// background heartbeat as invalid (a ValidationException, such as an
	// item grown past DynamoDB's size limit by writes of other tools):
	// sending the same renewal again cannot succeed, so the lock ends at
	// once rather than when its lease runs out.
	ErrHeartbeatRefused = errors.New("DynamoDB refused the heartbeat as invalid; sending it again cannot succeed")

	// ErrLockNotHeld is returned by [Lock.Err] for a read-only view of a
	// lock (from [Client.Get]) or a nil lock: this client does not hold it.
	ErrLockNotHeld = errors.New("dynamolock: lock not held by this client")

	// ErrReleaseOutcomeUnknown is matched by the error of a release whose
	// outcome is unknown: the request failed in a way that leaves open
	// whether it landed (a network or server error). The lock is no longer
	// held by this client either way; if the release did not land, the item
	// stays held, unrenewed, until its lease runs out.
	ErrReleaseOutcomeUnknown = errors.New("release outcome unknown")

	// ErrTableNotFound is matched by the error of every call that found no
	// lock table (DynamoDB's ResourceNotFoundException), and returned by
	// [Client.AssertTableExists]. The message names the table and the
	// endpoint or region the client used.
	ErrTableNotFound = errors.New("dynamolock: table not found")

	// ErrTableExists is matched by the error of [Client.CreateTable] when
	// the table already exists (DynamoDB's ResourceInUseException).
	// [Client.CreateTableIfNotExists] treats that case as success.
	ErrTableExists = errors.New("dynamolock: table already exists")

	// ErrKeySchemaMismatch is matched by every *[KeySchemaError].
	ErrKeySchemaMismatch = errors.New("dynamolock: key schema mismatch")

	// ErrHeartbeatCapacity is matched by the error of an acquisition that
	// waited for heartbeat capacity until its deadline: the client's held
	// locks already need as many renewals as its heartbeat workers can send
	// in time (see [WithHeartbeatAdmission]).
	ErrHeartbeatCapacity = errors.New("dynamolock: no heartbeat capacity for another lock")

	// ErrWritesInDoubt is matched by the error that the function returned
	// by [Lock.TransactionWithRefresh] returns when it refused to build a
	// refresh: too many of the lock's earlier writes have no answer yet.
	ErrWritesInDoubt = errors.New("dynamolock: too many writes of the lock without an answer")

	// ErrInvalidArgument is matched by every *[InvalidArgumentError].
	ErrInvalidArgument = errors.New("dynamolock: invalid argument")

	// ErrUnsupportedOperation is returned when a feature needs a DynamoDB API
	// method that the [DynamoDBClient] given to [New] does not implement.
	ErrUnsupportedOperation = errors.New("dynamolock: operation not supported by the DynamoDB client")
)

// InvalidArgumentError reports bad input, detected before any DynamoDB call.
// It matches [ErrInvalidArgument] with [errors.Is].
type InvalidArgumentError struct {
	Name   string // the option or argument, e.g. "WithLeaseDuration"
	Value  any    // the rejected value
	Reason string // why it was rejected
}

func (e *InvalidArgumentError) Error() string {
	return fmt.Sprintf("dynamolock: invalid %s %s: %s", e.Name, formatValue(e.Value), e.Reason)
}

// Is reports whether target is [ErrInvalidArgument].
func (e *InvalidArgumentError) Is(target error) bool { return target == ErrInvalidArgument }

func formatValue(v any) string {
	switch v := v.(type) {
	case string:
		if len(v) > 64 {
			return fmt.Sprintf("%q… (%d bytes)", v[:64], len(v))
		}
		return fmt.Sprintf("%q", v)
	case nil:
		return "<nil>"
	default:
		return fmt.Sprintf("%v", v)
	}
}

// oneLine puts a message on one line: errors.Join (the SDK's too, as in
// its "retry quota exceeded") puts each error on a line of its own, and a
// log line or a terminal shows the first only.
func oneLine(s string) string {
	if !strings.Contains(s, "\n") {
		return s
	}
	return strings.ReplaceAll(s, "\n", "; ")
}

// flat returns err, rendered on one line when its message has several;
// errors.Is and errors.As see through it.
func flat(err error) error {
	if err == nil || !strings.Contains(err.Error(), "\n") {
		return err
	}
	return &flatError{err: err}
}

type flatError struct{ err error }

func (e *flatError) Error() string { return oneLine(e.err.Error()) }
func (e *flatError) Unwrap() error { return e.err }

// joinErrors is errors.Join on one line: the messages are separated by
// "; ". It returns nil when every err is nil.
func joinErrors(errs ...error) error {
	var j joinedError
	for _, err := range errs {
		if err != nil {
			j.errs = append(j.errs, err)
		}
	}
	if len(j.errs) == 0 {
		return nil
	}
	return &j
}

type joinedError struct{ errs []error }

func (e *joinedError) Error() string {
	parts := make([]string, len(e.errs))
	for i, err := range e.errs {
		parts[i] = oneLine(err.Error())
	}
	return strings.Join(parts, "; ")
}

func (e *joinedError) Unwrap() []error { return e.errs }

// checkContext refuses a nil ctx, which would otherwise panic deep in a
// call (the table check, the SDK), with an *InvalidArgumentError.
func checkContext(ctx context.Context) error {
	if ctx == nil {
		return invalid("ctx", nil, "must not be nil: pass context.Background() for a call that no deadline or cancellation ends")
	}
	return nil
}

func invalid(name string, value any, format string, args ...any) error {
	return &InvalidArgumentError{Name: name, Value: value, Reason: fmt.Sprintf(format, args...)}
}

// LockNotGrantedError is returned when a lock could not be acquired. It wraps
// the cause: a *[TimeoutError] when the wait ran out, the context's error when
// the context ended, a *[LockHeldError] when [FailIfLocked] found a live
// owner, or the DynamoDB error.
type LockNotGrantedError struct {
	msg   string
	cause error
}

func (e *LockNotGrantedError) Error() string {
	if e.cause == nil {
		return "dynamolock: lock not granted: " + e.msg
	}
	return "dynamolock: lock not granted: " + e.msg + ": " + oneLine(e.cause.Error())
}

// Unwrap returns the cause.
func (e *LockNotGrantedError) Unwrap() error { return e.cause }

func notGranted(cause error, format string, args ...any) error {
	return &LockNotGrantedError{msg: fmt.Sprintf(format, args...), cause: cause}
}

// TimeoutError is the cause of a [LockNotGrantedError] when the lock stayed
// held by a live owner for the whole wait.
type TimeoutError struct {
	Age time.Duration // how long the acquisition waited
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("gave up after waiting %s", e.Age)
}

// LockHeldError tells who holds a lock that could not be acquired. When
// Owner is the acquiring client's own owner name, the message says which
// of two cases it is: the key is held by this very client (release it
// first, or get the held lock with [WithReentrant]), or by another client
// configured with the same owner name, a replica in another process say
// (give each process its own owner name with [WithOwnerName]:
// WithReentrant would take the lock from that holder while it holds it).
type LockHeldError struct {
	Key           string
	Owner         string
	LeaseDuration time.Duration

	ownOwner bool // Owner is the acquiring client's own owner name
	heldHere bool // with ownOwner: this client holds the key (or is writing it)
	// sessionHeld: the key is held by another client's session, which no
	// other client adopts, WithReentrant or not.
	sessionHeld bool
}

func (e *LockHeldError) Error() string {
	s := fmt.Sprintf("key %q is held by owner %q (lease %s)", e.Key, e.Owner, e.LeaseDuration)
	switch {
	case e.ownOwner && e.sessionHeld:
		s += ", this client's own owner name, through another client's live session: a session's lock is not adopted by another client, even WithReentrant; it is free once that session ends"
	case e.ownOwner && e.heldHere:
		s += ", this client's own owner name: " + heldHereAdvice
	case e.ownOwner:
		s += ", this client's own owner name, " + sameOwnerAdvice
	}
	return s
}

// The advice for a key held under the acquiring client's own owner name:
// by this very client, or by another client with the same owner name
// (where WithReentrant would break mutual exclusion).
const (
	heldHereAdvice  = "the key is held by this client; release it first, or use WithReentrant to get the held lock"
	sameOwnerAdvice = "but not by this client: another client (a replica in another process, or another Client here) uses the same owner name; " +
		"give each process its own owner name (WithOwnerName), and use WithReentrant only for a lock this very process holds through this client " +
		"(here it would take the lock from a holder that still holds it)"
)

// LockLostError reports that a held lock was lost. It matches [ErrLockLost]
// and its Cause with [errors.Is]. The Cause is one of:
//   - [ErrLockTakenOver]: DynamoDB showed the item in another owner's hands,
//     released or deleted;
//   - [ErrLeaseExpired]: the lease ran out by this host's clock before a
//     heartbeat renewed it;
//   - [ErrReleaseOutcomeUnknown]: a release (by [Client.ReleaseLock] or
//     [Client.Close]) failed in a way that leaves open whether it landed;
//   - [ErrClientClosed]: [Client.Close] could not send the release (Err says
//     why); the item stays held, unrenewed, until its lease runs out.
//
// With ErrLockTakenOver, the message says what the item showed, where it
// came back with the failed write: released by a client with this owner
// name (a force release), deleted, or taken by another owner.
type LockLostError struct {
	Key   string
	Owner string
	Cause error // ErrLockTakenOver, ErrLeaseExpired, ErrHeartbeatRefused, ErrReleaseOutcomeUnknown or ErrClientClosed
	Err   error // the DynamoDB error that revealed it, if any

	how string // what the item showed, said instead of Cause's text; "" for Cause's
}

func (e *LockLostError) Error() string {
	cause := fmt.Sprint(e.Cause)
	if e.how != "" {
		cause = e.how
	}
	s := fmt.Sprintf("dynamolock: lock lost: key %q of owner %q: %s", e.Key, e.Owner, cause)
	if e.Err != nil {
		s += ": " + oneLine(e.Err.Error())
	}
	return s
}

// As makes a *LockLostError also match a *[LockNotGrantedError] target, as
// dynamolock v2's heartbeat on a lock another owner took did, so that v2
// error handling keeps working. The *LockNotGrantedError it sets wraps e.
func (e *LockLostError) As(target any) bool {
	t, ok := target.(**LockNotGrantedError)
	if !ok {
		return false
	}
	*t = &LockNotGrantedError{msg: fmt.Sprintf("key %q", e.Key), cause: e}
	return true
}

// Unwrap returns ErrLockLost, the cause and the underlying error.
func (e *LockLostError) Unwrap() []error {
	errs := []error{ErrLockLost, e.Cause}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// takenHow says what item, returned by the failed condition of a write of
// l, shows of the lock's end, or "" when it shows nothing more than
// ErrLockTakenOver says. The one who released or deleted the item cannot
// have been another owner: those writes are conditioned on the owner, so
// it was a client with this owner name (a force release, as lock-example
// force-release makes), or the table's TTL, or someone by hand.
func (l *Lock) takenHow(item map[string]types.AttributeValue) string {
	return l.shapeOf().takenHow(l, item)
}

// holderTakenHow is takenHow for the item's holder.
func (l *Lock) holderTakenHow(item map[string]types.AttributeValue) string {
	if len(item) == 0 {
		return "the item was deleted, by a client with this owner name (a release with WithDeleteLock), by the table's TTL or by hand"
	}
	rec, err := l.client.cfg.schema.decodeItem(item)
	if err != nil {
		return ""
	}
	owner, token := l.OwnerName(), l.FencingToken()
	switch {
	case rec.Owner != owner:
		return fmt.Sprintf("taken by owner %q", rec.Owner)
	case rec.Released:
		return "released by another client with this owner name (a force release, as lock-example force-release makes)"
	case rec.FencingToken != token:
		return "taken by another acquisition with this owner name"
	}
	return ""
}

// ItemFormatError reports a lock item that this client cannot interpret
// (missing owner, wrong attribute types, unparseable lease). Such an item is
// never treated as free.
type ItemFormatError struct {
	Attribute string
	Reason    string
}

func (e *ItemFormatError) Error() string {
	return fmt.Sprintf("dynamolock: malformed lock item: attribute %q: %s", e.Attribute, e.Reason)
}

// formatErr is err with a *lockitem.FormatError (the item decoder's) made
// the public *ItemFormatError.
func formatErr(err error) error {
	if fe, ok := err.(*lockitem.FormatError); ok {
		return &ItemFormatError{Attribute: fe.Attribute, Reason: fe.Reason}
	}
	return err
}
