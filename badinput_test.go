package dynamolock_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// badInput is one bad input to the public API and the error it must get:
// an error matching want with errors.Is and, for an *InvalidArgumentError,
// naming the option or argument (names) in its message. None of them may
// reach DynamoDB.
type badInput struct {
	name  string
	call  func() error
	want  error
	names string // substring of the error naming the bad option, argument or value
}

// narrowDB has only the methods of dynamolock.DynamoDBClient: no Scan,
// Query, DescribeTable, TransactWriteItems or UpdateTimeToLive.
type narrowDB struct{ dynamolock.DynamoDBClient }

// TestBadInput is the table of every bad input the API can receive. Each
// one fails fast with a typed error that names the bad value, and no
// DynamoDB call is made.
//
// It needs no DynamoDB Local: none of these calls may reach DynamoDB, and
// the few the setup makes run on an in-memory DynamoDB (dynamolocktest)
// whose connection counts them.
func TestBadInput(t *testing.T) {
	ctx := context.Background()
	table := "bad_input"
	db := dynamolocktest.New().Conn()
	admin := newClient(t, db, table)
	_, err := admin.CreateTableWithContext(ctx, table)
	require.NoError(t, err)
	// A lease far longer than the run, so that no heartbeat of the held
	// locks falls among the calls counted below.
	quiet := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(20 * time.Second)}
	c := newClient(t, db, table, quiet...)
	other := newClient(t, db, table, quiet...)

	held, err := c.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	othersLock, err := other.AcquireLockWithContext(ctx, "others")
	require.NoError(t, err)
	released, err := c.AcquireLockWithContext(ctx, "released")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, released)
	require.NoError(t, err)
	view, err := c.GetWithContext(ctx, "others")
	require.NoError(t, err)
	releasedView, err := other.GetWithContext(ctx, "released") // c's released item seen by other
	require.NoError(t, err)
	ownReleasedView, err := c.GetWithContext(ctx, "released")
	require.NoError(t, err)
	expiring := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(200*time.Millisecond))
	lost, err := expiring.AcquireLockWithContext(ctx, "lost")
	require.NoError(t, err)
	require.True(t, closedWithin(lost.Done(), 3*time.Second))
	closed, err := dynamolock.New(db, table)
	require.NoError(t, err)
	require.NoError(t, closed.Close())
	narrow := newClient(t, narrowDB{db}, table)
	noDefaultSortKey := newClient(t, db, table, dynamolock.WithSortKey("sk", ""))
	fresh := table + "_fresh" // CreateTable must not create it
	big := make([]byte, 400*1024)
	bigS := strings.Repeat("x", 400*1024)

	newErr := func(db dynamolock.DynamoDBClient, table string, opts ...dynamolock.ClientOption) func() error {
		return func() error {
			cl, err := dynamolock.New(db, table, opts...)
			if err == nil {
				_ = cl.Close()
			}
			return err
		}
	}
	acquire := func(key string, opts ...dynamolock.AcquireLockOption) func() error {
		return func() error {
			l, err := c.AcquireLockWithContext(ctx, key, opts...)
			if err == nil {
				_, _ = c.ReleaseLockWithContext(ctx, l)
			}
			return err
		}
	}
	beat := func(l *dynamolock.Lock, opts ...dynamolock.SendHeartbeatOption) func() error {
		return func() error { return c.SendHeartbeatWithContext(ctx, l, opts...) }
	}
	release := func(cl *dynamolock.Client, l *dynamolock.Lock, opts ...dynamolock.ReleaseLockOption) func() error {
		return func() error {
			ok, err := cl.ReleaseLockWithContext(ctx, l, opts...)
			if ok {
				return errors.New("release reported success")
			}
			return err
		}
	}
	createTable := func(cl *dynamolock.Client, name string, opts ...dynamolock.CreateTableOption) func() error {
		return func() error { _, err := cl.CreateTableWithContext(ctx, name, opts...); return err }
	}
	createIfNotExists := func(cl *dynamolock.Client, opts ...dynamolock.CreateTableOption) func() error {
		return func() error { _, err := cl.CreateTableIfNotExists(ctx, opts...); return err }
	}
	listed := func(seq func(func(*dynamolock.Lock, error) bool)) func() error {
		return func() error {
			for _, err := range seq {
				return err
			}
			return nil
		}
	}
	attr := func(name string, v types.AttributeValue) dynamolock.AcquireLockOption {
		return dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{name: v})
	}
	inv := dynamolock.ErrInvalidArgument

	inputs := []badInput{
		// New.
		{"New: nil DynamoDBClient", newErr(nil, table), inv, "DynamoDBClient"},
		{"New: empty table name", newErr(db, ""), inv, "table name"},
		{"New: table name of 2 characters", newErr(db, "ab"), inv, `"ab"`},
		{"New: table name with a space", newErr(db, "lock table"), inv, `"lock table"`},
		{"New: table name of 256 characters", newErr(db, strings.Repeat("t", 256)), inv, "table name"},
		{"New: the ARN of an S3 bucket", newErr(db, "arn:aws:s3:::bucket"), inv, "or a table ARN"},
		{"New: the ARN of a table's index", newErr(db, "arn:aws:dynamodb:us-east-1:123456789012:table/locks/index/i"), inv, "or a table ARN"},
		{"New: a table ARN with an account of 11 digits", newErr(db, "arn:aws:dynamodb:us-east-1:12345678901:table/locks"), inv, "or a table ARN"},
		{"New: a table ARN with a name of 2 characters", newErr(db, "arn:aws:dynamodb:us-east-1:123456789012:table/ab"), inv, "or a table ARN"},
		{"New: empty partition key name", newErr(db, table, dynamolock.WithPartitionKeyName("")), inv, "WithPartitionKeyName"},
		{"New: empty sort key name", newErr(db, table, dynamolock.WithSortKey("", "v")), inv, "WithSortKey"},
		{"New: sort key named like the partition key", newErr(db, table, dynamolock.WithSortKey("key", "v")), inv, "WithSortKey"},
		{"AcquireLock: no sort key value where the client has no default", func() error {
			_, err := noDefaultSortKey.AcquireLockWithContext(ctx, "k")
			return err
		}, inv, `invalid WithSortKey value "": gives the client's sort key "sk" no default value: every acquisition must give one with WithSortKeyValue`},
		{"AcquireLock: empty sort key value", acquire("k", dynamolock.WithSortKeyValue("")), inv, "WithSortKeyValue"},
		{"AcquireLock: sort key value on a client without a sort key", acquire("k", dynamolock.WithSortKeyValue("v")), inv, "WithSortKeyValue"},
		{"AcquireLock: lease under twice the heartbeat period", acquire("k", dynamolock.WithLockLease(time.Millisecond)), inv, "WithLockLease"},
		// Issue 49, item 5: a duration the caller wrote is used or refused,
		// never read as "unset".
		{"AcquireLock: zero lock lease", acquire("k", dynamolock.WithLockLease(0)), inv, "invalid WithLockLease 0s: must be positive"},
		{"AcquireLock: negative lock lease", acquire("k", dynamolock.WithLockLease(-time.Second)), inv, "invalid WithLockLease -1s: must be positive"},
		{"AcquireLock: refresh jitter of -1ns", acquire("k", dynamolock.WithRefreshJitter(-1)), inv, "invalid WithRefreshJitter -1ns: must lie between 0 and the refresh period"},
		{"New: sort key value over 1024 bytes", newErr(db, table, dynamolock.WithSortKey("sk", strings.Repeat("v", 1025))), inv, "WithSortKey"},
		{"New: zero lease", newErr(db, table, dynamolock.WithLeaseDuration(0)), inv, "WithLeaseDuration"},
		{"New: negative lease", newErr(db, table, dynamolock.WithLeaseDuration(-time.Second)), inv, "WithLeaseDuration"},
		{"New: negative heartbeat period", newErr(db, table, dynamolock.WithHeartbeatPeriod(-time.Second)), inv, "WithHeartbeatPeriod"},
		{"New: lease under twice the heartbeat period", newErr(db, table, dynamolock.WithLeaseDuration(9*time.Second)), inv, "WithLeaseDuration"},
		{"New: zero heartbeat concurrency", newErr(db, table, dynamolock.WithHeartbeatConcurrency(0)), inv, "WithHeartbeatConcurrency"},
		{"New: heartbeat concurrency over 1024", newErr(db, table, dynamolock.WithHeartbeatConcurrency(1025)), inv, "WithHeartbeatConcurrency"},
		{"New: negative heartbeat admission", newErr(db, table, dynamolock.WithHeartbeatAdmission(-0.1)), inv, "WithHeartbeatAdmission"},
		{"New: heartbeat admission over 1", newErr(db, table, dynamolock.WithHeartbeatAdmission(1.5)), inv, "WithHeartbeatAdmission"},
		{"New: heartbeat admission NaN", newErr(db, table, dynamolock.WithHeartbeatAdmission(math.NaN())), inv, "WithHeartbeatAdmission"},
		{"New: negative clock skew bound", newErr(db, table, dynamolock.WithClockSkewBound(-time.Millisecond)), inv, "WithClockSkewBound"},
		{"New: TTL attribute named like the partition key", newErr(db, table, dynamolock.WithTTLAttribute("key")), inv, "WithTTLAttribute"},
		{"New: TTL attribute named like the sort key", newErr(db, table, dynamolock.WithSortKey("sk", "v"), dynamolock.WithTTLAttribute("sk")), inv, "WithTTLAttribute"},
	}
	for _, name := range []string{"ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken", "leaseExpiresAt"} {
		inputs = append(inputs, badInput{"New: TTL attribute " + name, newErr(db, table, dynamolock.WithTTLAttribute(name)), inv, name})
	}
	inputs = append(inputs, []badInput{
		// AcquireLock.
		{"AcquireLock: empty key", acquire(""), inv, "key"},
		{"AcquireLock: key over 2048 bytes", acquire(strings.Repeat("k", 2049)), inv, "2049 bytes"},
		{"AcquireLock: zero refresh period", acquire("k", dynamolock.WithRefreshPeriod(0)), inv, "WithRefreshPeriod"},
		{"AcquireLock: negative refresh period", acquire("k", dynamolock.WithRefreshPeriod(-time.Second)), inv, "WithRefreshPeriod"},
		{"AcquireLock: negative additional wait", acquire("k", dynamolock.WithAdditionalTimeToWaitForLock(-time.Second)), inv, "WithAdditionalTimeToWaitForLock"},
		{"AcquireLock: data over 400 KB", acquire("k", dynamolock.WithData(big)), inv, "WithData"},
		{"AcquireLock: additional attribute with an empty name", acquire("k", attr("", s("x"))), inv, "WithAdditionalAttributes"},
		{"AcquireLock: additional attribute with a nil value", acquire("k", attr("a", nil)), inv, `"a"`},
		{"AcquireLock: session monitor safe time zero", acquire("k", dynamolock.WithSessionMonitor(0, nil)), inv, "WithSessionMonitor"},
		{"AcquireLock: session monitor safe time negative", acquire("k", dynamolock.WithSessionMonitor(-time.Second, nil)), inv, "WithSessionMonitor"},
		{"AcquireLock: closed client", func() error { _, err := closed.AcquireLockWithContext(ctx, "k"); return err }, dynamolock.ErrClientClosed, ""},
	}...)
	for _, name := range []string{"key", "ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken", "leaseExpiresAt"} {
		inputs = append(inputs, badInput{"AcquireLock: additional attribute " + name, acquire("k", attr(name, s("x"))), inv, name})
	}
	inputs = append(inputs, []badInput{
		// ReleaseLock.
		{"ReleaseLock: nil lock", release(c, nil), dynamolock.ErrCannotReleaseNullLock, ""},
		{"ReleaseLock: data over 400 KB", release(c, held, dynamolock.WithDataAfterRelease(big)), inv, "WithDataAfterRelease"},
		{"ReleaseLock: a released lock", release(c, released), dynamolock.ErrLockAlreadyReleased, ""},
		{"ReleaseLock: a lost lock", release(expiring, lost), dynamolock.ErrLeaseExpired, ""},
		{"ReleaseLock: another owner's lock", release(c, othersLock), dynamolock.ErrOwnerMismatched, "is held by"},
		{"ReleaseLock: a read-only view of another owner's lock", release(c, view), dynamolock.ErrOwnerMismatched, "is held by"},
		{"ReleaseLock: a read-only view of our own released item", release(c, ownReleasedView), dynamolock.ErrLockAlreadyReleased, ""},
		{"ReleaseLock: a lock by another client that holds it", release(other, held), dynamolock.ErrOwnerMismatched, "is held by"},
		{"ReleaseLock: closed client", release(closed, held), dynamolock.ErrClientClosed, ""},
		{"Lock.Close: nil lock", func() error { var l *dynamolock.Lock; return l.Close() }, dynamolock.ErrCannotReleaseNullLock, ""},

		// SendHeartbeat.
		{"SendHeartbeat: nil lock", beat(nil), inv, "lock"},
		{"SendHeartbeat: negative retries", beat(held, dynamolock.HeartbeatRetries(-1, 0)), inv, "HeartbeatRetries"},
		{"SendHeartbeat: negative retry wait", beat(held, dynamolock.HeartbeatRetries(1, -time.Second)), inv, "HeartbeatRetries"},
		{"SendHeartbeat: negative lease to ensure", beat(held, dynamolock.WithLeaseDurationToEnsure(-time.Second)), inv, "WithLeaseDurationToEnsure"},
		{"SendHeartbeat: zero lease to ensure", beat(held, dynamolock.WithLeaseDurationToEnsure(0)), inv, "invalid WithLeaseDurationToEnsure 0s: must be positive"},
		{"SendHeartbeat: DeleteData with ReplaceHeartbeatData", beat(held, dynamolock.DeleteData(), dynamolock.ReplaceHeartbeatData([]byte("x"))), inv, "ReplaceHeartbeatData"},
		{"SendHeartbeat: data over 400 KB", beat(held, dynamolock.ReplaceHeartbeatData(big)), inv, "ReplaceHeartbeatData"},
		{"SendHeartbeat: a read-only view", beat(view), dynamolock.ErrReadOnlyLockHeartbeat, ""},
		{"SendHeartbeat: a released lock", beat(released), dynamolock.ErrLockAlreadyReleased, ""},
		{"SendHeartbeat: another client's lock", beat(othersLock), dynamolock.ErrOwnerMismatched, "is held by"},
		{"SendHeartbeat: a lost lock", func() error { return expiring.SendHeartbeatWithContext(ctx, lost) }, dynamolock.ErrLeaseExpired, ""},
		{"SendHeartbeat: closed client", func() error { return closed.SendHeartbeatWithContext(ctx, held) }, dynamolock.ErrClientClosed, ""},
		{"Lock.Ensure: nil lock", func() error { var l *dynamolock.Lock; return l.Ensure(ctx, time.Second) }, inv, "lock"},
		{"Lock.Ensure: a read-only view", func() error { return releasedView.Ensure(ctx, time.Hour) }, dynamolock.ErrReadOnlyLockHeartbeat, ""},

		// Get, Do, listings.
		{"Get: empty key", func() error { _, err := c.GetWithContext(ctx, ""); return err }, inv, "key"},
		{"Get: key over 2048 bytes", func() error { _, err := c.GetWithContext(ctx, strings.Repeat("k", 2049)); return err }, inv, "2049 bytes"},
		{"Get: closed client", func() error { _, err := closed.GetWithContext(ctx, "k"); return err }, dynamolock.ErrClientClosed, ""},
		{"Do: nil fn", func() error { return c.Do(ctx, "k", nil) }, inv, "fn"},
		{"Do: empty key", func() error { return c.Do(ctx, "", func(context.Context, *dynamolock.Lock) error { return nil }) }, inv, "key"},
		{"Do: bad option", func() error {
			return c.Do(ctx, "k", func(context.Context, *dynamolock.Lock) error { return nil }, dynamolock.WithRefreshPeriod(0))
		}, inv, "WithRefreshPeriod"},
		{"LocksByPartitionKey: empty key", listed(c.LocksByPartitionKey(ctx, "")), inv, "key"},
		{"LocksByPartitionKey: key over 2048 bytes", listed(c.LocksByPartitionKey(ctx, strings.Repeat("k", 2049))), inv, "2049 bytes"},
		{"LocksByPartitionKey: client without Query", listed(narrow.LocksByPartitionKey(ctx, "k")), dynamolock.ErrUnsupportedOperation, "Query"},
		{"LocksByPartitionKey: closed client", listed(closed.LocksByPartitionKey(ctx, "k")), dynamolock.ErrClientClosed, ""},
		{"AllLocks: client without Scan", listed(narrow.AllLocks(ctx)), dynamolock.ErrUnsupportedOperation, "Scan"},
		{"AllLocks: closed client", listed(closed.AllLocks(ctx)), dynamolock.ErrClientClosed, ""},
		{"TableExists: client without DescribeTable", func() error { _, err := narrow.TableExists(ctx); return err }, dynamolock.ErrUnsupportedOperation, "DescribeTable"},
		{"TableExists: closed client", func() error { _, err := closed.TableExists(ctx); return err }, dynamolock.ErrClientClosed, ""},
		{"AssertTableExists: closed client", func() error { return closed.AssertTableExists(ctx) }, dynamolock.ErrClientClosed, ""},
		{"Close: twice", func() error { return closed.Close() }, dynamolock.ErrClientClosed, ""},

		// CreateTable.
		{"CreateTable: empty table name", createTable(c, ""), inv, "table name"},
		{"CreateTable: bad table name", createTable(c, "no/slashes"), inv, `"no/slashes"`},
		{"CreateTable: a table ARN", createTable(c, "arn:aws:dynamodb:us-east-1:123456789012:table/locks"), inv, `is a table ARN: DynamoDB creates a table by its name`},
		{"CreateTable: empty partition key name", createTable(c, fresh, dynamolock.WithCustomPartitionKeyName("")), inv, "WithCustomPartitionKeyName"},
		{"CreateTable: sort key named like the partition key", createTable(c, fresh, dynamolock.WithSortKeyName("key")), inv, "WithSortKeyName"},
		{"CreateTable: nil provisioned throughput", createTable(c, fresh, dynamolock.WithProvisionedThroughput(nil)), inv, "WithProvisionedThroughput"},
		{"CreateTable: TTL with a client without UpdateTimeToLive", createTable(narrow, fresh, dynamolock.WithTimeToLive("ttl")), dynamolock.ErrUnsupportedOperation, "UpdateTimeToLive"},
		{"CreateTable: closed client", createTable(closed, fresh), dynamolock.ErrClientClosed, ""},
		{"CreateTableIfNotExists: sort key named like the partition key", createIfNotExists(c, dynamolock.WithSortKeyName("key")), inv, "WithSortKeyName"},
		{"CreateTableIfNotExists: client without DescribeTable", createIfNotExists(narrow), dynamolock.ErrUnsupportedOperation, "DescribeTable"},
		{"CreateTableIfNotExists: TTL with a client without UpdateTimeToLive", createIfNotExists(narrow, dynamolock.WithTimeToLive("ttl")), dynamolock.ErrUnsupportedOperation, "UpdateTimeToLive"},
		{"CreateTableIfNotExists: closed client", createIfNotExists(closed), dynamolock.ErrClientClosed, ""},
		{"CreateTable: TTL on the partition key", createTable(c, fresh, dynamolock.WithTimeToLive("key")), inv, "WithTimeToLive"},
		{"CreateTable: TTL on the sort key", createTable(c, fresh, dynamolock.WithSortKeyName("sk"), dynamolock.WithTimeToLive("sk")), inv, `"sk"`},
		{"CreateTableIfNotExists: TTL on ownerName", createIfNotExists(c, dynamolock.WithTimeToLive("ownerName")), inv, "WithTimeToLive"},
	}...)

	// Gaps this table found: bad input that is accepted, reaches DynamoDB,
	// or gets an error that names the wrong option. Each is a library bug
	// (see the report in docs/RELIABILITY.md).
	var typedNil *dynamodb.Client
	inputs = append(inputs, []badInput{
		{"New: typed nil *dynamodb.Client", newErr(typedNil, table), inv, "DynamoDBClient"},
		{"New: owner name not valid UTF-8", newErr(db, table, dynamolock.WithOwnerName("worker\xff")), inv, "WithOwnerName"},
		{"New: sort key value not valid UTF-8", newErr(db, table, dynamolock.WithSortKey("sk", "v\xff")), inv, "WithSortKey"},
		{"AcquireLock: key not valid UTF-8", acquire("k\xff"), inv, "key"},
		{"Get: key not valid UTF-8", func() error { _, err := c.GetWithContext(ctx, "k\xff"); return err }, inv, "key"},
		{"LocksByPartitionKey: key not valid UTF-8", listed(c.LocksByPartitionKey(ctx, "k\xff")), inv, "key"},
		{"AcquireLock: additional attributes over 400 KB", acquire("k", attr("big", s(bigS))), inv, "WithAdditionalAttributes \"409603 bytes of additional attributes\""},
		{"New: heartbeat period whose double overflows", newErr(db, table, dynamolock.WithLeaseDuration(time.Second),
			dynamolock.WithHeartbeatPeriod(math.MaxInt64/2+1)), inv, "WithLeaseDuration"},
		{"SendHeartbeat: lease to ensure under twice the heartbeat period", beat(held, dynamolock.WithLeaseDurationToEnsure(100*time.Millisecond)), inv, "WithLeaseDurationToEnsure"},
	}...)
	for _, name := range []string{"ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken", "leaseExpiresAt"} {
		inputs = append(inputs,
			badInput{"New: partition key named " + name, newErr(db, table, dynamolock.WithPartitionKeyName(name)), inv, name},
			badInput{"New: sort key named " + name, newErr(db, table, dynamolock.WithSortKey(name, "v")), inv, name},
			badInput{"CreateTable: partition key named " + name, createTable(c, fresh, dynamolock.WithCustomPartitionKeyName(name)), inv, name},
			badInput{"CreateTable: TTL attribute " + name, createTable(c, fresh, dynamolock.WithTimeToLive(name)), inv, "WithTimeToLive"},
		)
	}

	for _, in := range inputs {
		t.Run(in.name, func(t *testing.T) {
			before := db.Calls()
			err := in.call()
			require.Error(t, err, "bad input accepted")
			assert.ErrorIs(t, err, in.want)
			if in.want == inv {
				var ie *dynamolock.InvalidArgumentError
				if assert.ErrorAs(t, err, &ie) {
					assert.Contains(t, err.Error(), ie.Name)
				}
			}
			if in.names != "" {
				assert.Contains(t, err.Error(), in.names, "the error names the bad input")
			}
			assert.True(t, strings.HasPrefix(err.Error(), "dynamolock: "), "message prefix: %q", err.Error())
			assert.Equal(t, before, db.Calls(), "bad input reached DynamoDB")
		})
	}
	// Nothing above disturbed the locks that were held.
	assert.NoError(t, held.Err())
	assert.NoError(t, othersLock.Err())
}

// Two owner names that are different Go strings but not valid UTF-8 reach
// DynamoDB as the same string (the SDK writes U+FFFD for each bad byte), so
// WithReentrant lets the second client take a lock the first one holds: two
// owners at once.
func TestInvalidUTF8OwnerNamesLetTwoOwnersIn(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	a, errA := dynamolock.New(db, table, append(fast, dynamolock.WithOwnerName("worker\xff"))...)
	b, errB := dynamolock.New(db, table, append(fast, dynamolock.WithOwnerName("worker\xfe"))...)
	if errA != nil || errB != nil {
		// The fix: New rejects them.
		assert.ErrorIs(t, errA, dynamolock.ErrInvalidArgument)
		assert.ErrorIs(t, errB, dynamolock.ErrInvalidArgument)
		return
	}
	t.Cleanup(func() { _ = a.Close(); _ = b.Close() })
	la, err := a.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	lb, err := b.AcquireLockWithContext(ctx, "k", dynamolock.WithReentrant(), dynamolock.FailIfLocked())
	if err == nil {
		t.Errorf("two owners hold %q: %q (token %d) and %q (token %d)", "k",
			a.OwnerName(), la.FencingToken(), b.OwnerName(), lb.FencingToken())
	}
}

// ReleaseLock through a client other than the one holding the lock, but
// with the same owner name (WithOwnerName(hostname) is common) and another
// table, must be refused without a call, as SendHeartbeat refuses it. It
// writes to the other client's table instead, and the condition failure
// there marks the holder's lock lost although it is still held.
func TestReleaseThroughAnotherClientWithTheSameOwnerName(t *testing.T) {
	ctx := context.Background()
	db := dynamolocktest.New().Conn()
	holder := newClient(t, db, "table1", append(fast, dynamolock.WithOwnerName("host-1"))...)
	stranger := newClient(t, db, "table2", append(fast, dynamolock.WithOwnerName("host-1"))...)
	for _, name := range []string{"table1", "table2"} {
		_, err := holder.CreateTableWithContext(ctx, name)
		require.NoError(t, err)
	}
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	before := db.Calls()
	ok, err := stranger.ReleaseLockWithContext(ctx, l)
	assert.False(t, ok)
	assert.ErrorIs(t, err, dynamolock.ErrOwnerMismatched, "a lock is released by the client that holds it")
	assert.Equal(t, before, db.Calls(), "no call is made")
	assert.NoError(t, l.Err(), "the holder's lock is still held")
	assert.ErrorIs(t, stranger.SendHeartbeatWithContext(ctx, l), dynamolock.ErrOwnerMismatched, "as SendHeartbeat already refuses it")
}

// Extreme but valid durations: "wait forever" and "poll rarely" must mean
// that, not overflow into "give up at once" or "poll without pause".
func TestExtremeDurations(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	holder := newClient(t, db, table, fast...)
	waiter := newClient(t, db, table, fast...)
	_, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)

	t.Run("additional wait of math.MaxInt64 waits until the context ends", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, 1500*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := waiter.AcquireLockWithContext(wctx, "k", dynamolock.WithAdditionalTimeToWaitForLock(math.MaxInt64),
			dynamolock.WithRefreshPeriod(100*time.Millisecond))
		assert.ErrorIs(t, err, context.DeadlineExceeded, "gave up before the context ended: %v", err)
		assert.GreaterOrEqual(t, time.Since(start), 1400*time.Millisecond)
	})
	t.Run("refresh period of math.MaxInt64 does not poll in a loop", func(t *testing.T) {
		wctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		calls.reset()
		_, err := waiter.AcquireLockWithContext(wctx, "k", dynamolock.WithRefreshPeriod(math.MaxInt64))
		assert.Error(t, err)
		// The wait is bounded by the holder's lease (1 s) plus the default
		// additional second; the waiter may read at the points where the
		// item could turn stale, a handful of times, not hundreds.
		assert.LessOrEqual(t, calls.reset()["GetItem"], 5, "GetItem calls in one second")
	})
}

// Issue 22: an option combination that does not fit is blamed on the
// option the caller set, not on one left at its default. Before,
// WithHeartbeatPeriod(15s) alone read `invalid WithLeaseDuration 20s`.
func TestInvalidCombinationNamesTheOptionSet(t *testing.T) {
	db, calls := newDB(t)
	for _, tc := range []struct {
		name     string
		opts     []dynamolock.ClientOption
		option   string // InvalidArgumentError.Name
		contains []string
	}{
		{"heartbeat period over half the default lease", []dynamolock.ClientOption{dynamolock.WithHeartbeatPeriod(15 * time.Second)},
			"WithHeartbeatPeriod", []string{"invalid WithHeartbeatPeriod 15s", "lease duration 20s (the default", "WithLeaseDuration"}},
		{"lease under twice the default heartbeat period", []dynamolock.ClientOption{dynamolock.WithLeaseDuration(9 * time.Second)},
			"WithLeaseDuration", []string{"invalid WithLeaseDuration 9s", "heartbeat period 5s (the default", "WithHeartbeatPeriod"}},
		{"both set", []dynamolock.ClientOption{dynamolock.WithLeaseDuration(3 * time.Second), dynamolock.WithHeartbeatPeriod(2 * time.Second)},
			"WithLeaseDuration", []string{"invalid WithLeaseDuration 3s", "WithHeartbeatPeriod 2s"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := dynamolock.New(db, "locks", tc.opts...)
			var ie *dynamolock.InvalidArgumentError
			require.ErrorAs(t, err, &ie)
			assert.Equal(t, tc.option, ie.Name, "%v", err)
			for _, s := range tc.contains {
				assert.Contains(t, err.Error(), s)
			}
		})
	}

	// Per-lock leases are checked against a heartbeat period the caller may
	// not have set: the message says where it comes from.
	c := newClient(t, db, "locks")
	_, err := c.AcquireLockWithContext(context.Background(), "k", dynamolock.WithLockLease(3*time.Second))
	require.ErrorIs(t, err, dynamolock.ErrInvalidArgument)
	assert.Contains(t, err.Error(), "invalid WithLockLease 3s: must be at least twice the heartbeat period 5s (the default")
	c = newClient(t, db, "locks", dynamolock.WithLeaseDuration(10*time.Second), dynamolock.WithHeartbeatPeriod(2*time.Second))
	_, err = c.AcquireLockWithContext(context.Background(), "k", dynamolock.WithLockLease(3*time.Second))
	assert.ErrorContains(t, err, "at least twice the WithHeartbeatPeriod 2s")
	assert.Zero(t, calls.total())
}
