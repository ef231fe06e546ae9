package dynamolock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// rawTable creates a table keyed as given (name → type; the first is the
// partition key, an optional second the sort key), bypassing the library.
func rawTable(t *testing.T, db *dynamodb.Client, keys ...[2]string) string {
	t.Helper()
	name := strings.ReplaceAll(newTableName(t), "/", "_")
	in := &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: types.BillingModePayPerRequest}
	for i, k := range keys {
		kt := types.KeyTypeHash
		if i == 1 {
			kt = types.KeyTypeRange
		}
		in.KeySchema = append(in.KeySchema, types.KeySchemaElement{AttributeName: aws.String(k[0]), KeyType: kt})
		in.AttributeDefinitions = append(in.AttributeDefinitions,
			types.AttributeDefinition{AttributeName: aws.String(k[0]), AttributeType: types.ScalarAttributeType(k[1])})
	}
	_, err := db.CreateTable(context.Background(), in)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = db.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

func newTableName(t *testing.T) string {
	name := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(name) > 200 {
		name = name[:200]
	}
	return name + "_" + time.Now().Format("150405.000000")
}

// closedEndpoint returns a loopback URL on which nothing listens.
func closedEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())
	return "http://" + addr
}

// defaultSDKClient is a DynamoDB client as a user builds one: the SDK's
// default retryer (3 attempts, with its retry quota), no tuning.
func defaultSDKClient(endpoint string) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          ddblocal.Region,
		Credentials:                     credentials.NewStaticCredentialsProvider(ddblocal.AccessKey, ddblocal.SecretKey, ""),
		BaseEndpoint:                    aws.String(endpoint),
		DisableValidateResponseChecksum: true,
	})
}

// Issue 17, section 1: every mistake of a user's first hour gets an error
// that matches a sentinel or type and whose message names the table,
// attribute, endpoint or option to fix.
func TestFirstHourErrors(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()

	type row struct {
		name     string
		run      func(t *testing.T) error
		sentinel error                   // errors.Is target, or nil
		as       func(error) bool        // errors.As check, or nil
		contains []string                // substrings of the message
		within   time.Duration           // upper bound on run's duration, or 0
		extra    func(*testing.T, error) // further checks, or nil
	}
	asKeySchema := func(err error) bool { var e *dynamolock.KeySchemaError; return errors.As(err, &e) }
	asConn := func(err error) bool { var e *dynamolock.ConnectionError; return errors.As(err, &e) }
	asTimeout := func(err error) bool { var e *dynamolock.TimeoutError; return errors.As(err, &e) }
	asLost := func(err error) bool { var e *dynamolock.LockLostError; return errors.As(err, &e) }

	// A table that does not exist, through every call. The held lock was
	// acquired before its table was deleted.
	gone := newTable(t, "")
	goneClient := newClient(t, db, gone, dynamolock.DisableHeartbeat())
	heldOnGone, err := goneClient.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	_, err = db.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: aws.String(gone)})
	require.NoError(t, err)
	notFound := func(call string, f func() error) row {
		return row{name: "table does not exist: " + call, run: func(*testing.T) error { return f() },
			sentinel: dynamolock.ErrTableNotFound, contains: []string{gone, endpoint}}
	}
	first := func(seq func(func(*dynamolock.Lock, error) bool)) error {
		for _, err := range seq {
			return err
		}
		return nil
	}
	rows := []row{
		notFound("AcquireLock", func() error { _, err := goneClient.AcquireLockWithContext(ctx, "k"); return err }),
		notFound("Get", func() error { _, err := goneClient.GetWithContext(ctx, "k"); return err }),
		notFound("SendHeartbeat", func() error { return goneClient.SendHeartbeatWithContext(ctx, heldOnGone) }),
		notFound("ReleaseLock", func() error { _, err := goneClient.ReleaseLockWithContext(ctx, heldOnGone); return err }),
		notFound("AllLocks", func() error { return first(goneClient.AllLocks(ctx)) }),
		notFound("LocksByPartitionKey", func() error { return first(goneClient.LocksByPartitionKey(ctx, "k")) }),
		notFound("AssertTableExists", func() error { return goneClient.AssertTableExists(ctx) }),
		notFound("Do", func() error {
			return goneClient.Do(ctx, "k", func(context.Context, *dynamolock.Lock) error { return nil })
		}),
	}

	// Tables keyed otherwise than the client expects.
	byID := rawTable(t, db, [2]string{"id", "S"})
	numeric := rawTable(t, db, [2]string{"key", "N"})
	noSort := rawTable(t, db, [2]string{"key", "S"})
	withSort := rawTable(t, db, [2]string{"key", "S"}, [2]string{"sk", "S"})
	schemaRow := func(name, table string, opts []dynamolock.ClientOption, contains ...string) row {
		c := newClient(t, db, table, opts...)
		return row{name: name, run: func(*testing.T) error { _, err := c.AcquireLockWithContext(ctx, "k"); return err },
			sentinel: dynamolock.ErrKeySchemaMismatch, as: asKeySchema,
			contains: append([]string{table, "dynamolock.New(client, "}, contains...)}
	}
	rows = append(rows,
		schemaRow("table keyed on another attribute", byID, nil, `this client uses partition key "key"`, `partition key "id" of type S`,
			`dynamolock.WithPartitionKeyName("id")`),
		schemaRow("client with a sort key, table without one", noSort, []dynamolock.ClientOption{dynamolock.WithSortKey("sk", "v")},
			`this client uses partition key "key" and sort key "sk"`, `has partition key "key" of type S and no sort key`, "without WithSortKey"),
		schemaRow("client without a sort key, table with one", withSort, nil,
			`this client uses partition key "key" and no sort key`, `sort key "sk" of type S`, `dynamolock.WithSortKey("sk", "")`),
	)
	// A key of another type: no option fixes it, and the message names
	// the types instead of advising WithPartitionKeyName (issue 22).
	typeRow := func(name, table string, contains []string, extra func(*testing.T, error)) row {
		c := newClient(t, db, table)
		return row{name: name, run: func(*testing.T) error { _, err := c.AcquireLockWithContext(ctx, "k"); return err },
			sentinel: dynamolock.ErrKeySchemaMismatch, as: asKeySchema, contains: append([]string{table}, contains...), extra: extra}
	}
	numericID := rawTable(t, db, [2]string{"id", "N"})
	rows = append(rows,
		typeRow("partition key of type N", numeric, []string{`this client uses partition key "key"`, `partition key "key" of type N`,
			`partition key "key" is of type N, expected S`, "no option changes that", "of type S"},
			func(t *testing.T, err error) {
				assert.NotContains(t, err.Error(), "WithPartitionKeyName", "no option can fix a key type")
				assert.NotContains(t, err.Error(), "WithSortKey")
			}),
		typeRow("partition key of another name and type N", numericID, []string{`partition key "id" of type N`,
			`partition key "id" is of type N, expected S`, "no option changes that"}, nil),
	)
	getOnByID := newClient(t, db, byID)
	rows = append(rows, row{name: "table keyed on another attribute: Get", run: func(*testing.T) error {
		_, err := getOnByID.GetWithContext(ctx, "k")
		return err
	}, sentinel: dynamolock.ErrKeySchemaMismatch, contains: []string{byID, `"id"`, `dynamolock.WithPartitionKeyName("id")`}})

	// Nothing listens at the endpoint: a connection error naming it, in a
	// time that does not depend on the lease (20 s by default).
	down := closedEndpoint(t)
	downClient := newClient(t, defaultSDKClient(down), "locks")
	rows = append(rows,
		row{name: "endpoint down: AcquireLock", run: func(*testing.T) error {
			_, err := downClient.AcquireLockWithContext(ctx, "k")
			return err
		}, as: asConn, contains: []string{"could not reach DynamoDB at " + down}, within: 15 * time.Second,
			extra: func(t *testing.T, err error) {
				var lng *dynamolock.LockNotGrantedError
				assert.ErrorAs(t, err, &lng, "still a *LockNotGrantedError")
			}},
		row{name: "endpoint down: Get", run: func(*testing.T) error {
			_, err := downClient.GetWithContext(ctx, "k")
			return err
		}, as: asConn, contains: []string{down}, within: 15 * time.Second},
	)

	// Acquiring a key this same client holds, without WithReentrant: the
	// wait stays (another goroutine may release it), the message says why.
	table := newTable(t, "")
	self := newClient(t, db, table, fast...)
	_, err = self.AcquireLockWithContext(ctx, "mine")
	require.NoError(t, err)
	other := newClient(t, db, table, fast...)
	theirs, err := other.AcquireLockWithContext(ctx, "theirs")
	require.NoError(t, err)
	rows = append(rows,
		row{name: "acquiring a key this client holds", run: func(*testing.T) error {
			_, err := self.AcquireLockWithContext(ctx, "mine", dynamolock.WithRefreshPeriod(100*time.Millisecond))
			return err
		}, as: asTimeout, contains: []string{`"mine"`, self.OwnerName(), "this client's own owner name", "WithReentrant"}},
		row{name: "acquiring a key this client holds, FailIfLocked", run: func(*testing.T) error {
			_, err := self.AcquireLockWithContext(ctx, "mine", dynamolock.FailIfLocked())
			return err
		}, contains: []string{`"mine"`, self.OwnerName(), "this client's own owner name", "held by this client", "WithReentrant"},
			extra: func(t *testing.T, err error) {
				var held *dynamolock.LockHeldError
				require.ErrorAs(t, err, &held)
				assert.Equal(t, self.OwnerName(), held.Owner)
			}},
		row{name: "acquiring a key another client holds, FailIfLocked", run: func(*testing.T) error {
			_, err := self.AcquireLockWithContext(ctx, "theirs", dynamolock.FailIfLocked())
			return err
		}, contains: []string{`"theirs"`, theirs.OwnerName()},
			extra: func(t *testing.T, err error) { assert.NotContains(t, err.Error(), "WithReentrant") }},
		row{name: "acquiring a key another client holds", run: func(*testing.T) error {
			_, err := self.AcquireLockWithContext(ctx, "theirs", dynamolock.WithRefreshPeriod(100*time.Millisecond))
			return err
		}, as: asTimeout, contains: []string{`"theirs"`, theirs.OwnerName()},
			extra: func(t *testing.T, err error) { assert.NotContains(t, err.Error(), "WithReentrant") }},
		// Do on a held key, given an additional wait (1 s), gives up
		// after the holder's lease plus that wait, as its documentation
		// says (without it, Do waits as long as ctx allows).
		row{name: "Do on a held key", run: func(*testing.T) error {
			return self.Do(ctx, "theirs", func(context.Context, *dynamolock.Lock) error { return nil },
				dynamolock.WithRefreshPeriod(100*time.Millisecond), dynamolock.WithAdditionalTimeToWaitForLock(dynamolock.DefaultAdditionalTimeToWaitForLock))
		}, as: asTimeout, contains: []string{`"theirs"`, theirs.OwnerName()}, within: time.Second + dynamolock.DefaultAdditionalTimeToWaitForLock + 2*time.Second},
	)

	// A paused process (here: one that sent no heartbeat for a lease) finds
	// its lease over; the reason covers "this process did not run".
	paused := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(300*time.Millisecond))
	pausedLock, err := paused.AcquireLockWithContext(ctx, "paused")
	require.NoError(t, err)
	rows = append(rows, row{name: "a paused process finds its lease over", run: func(t *testing.T) error {
		waitFor(t, 2*time.Second, "the lease to run out", pausedLock.IsExpired)
		return paused.SendHeartbeatWithContext(ctx, pausedLock)
	}, sentinel: dynamolock.ErrLeaseExpired, as: asLost,
		contains: []string{`"paused"`, "this process did not run", "could not reach DynamoDB"}})

	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			start := time.Now()
			err := r.run(t)
			took := time.Since(start)
			require.Error(t, err)
			t.Logf("after %s: %v", took.Round(time.Millisecond), err)
			if r.sentinel != nil {
				assert.ErrorIs(t, err, r.sentinel)
			}
			if r.as != nil {
				assert.True(t, r.as(err), "error type: %T %v", err, err)
			}
			for _, s := range r.contains {
				assert.Contains(t, err.Error(), s)
			}
			assert.True(t, strings.HasPrefix(err.Error(), "dynamolock: "), "message prefix: %q", err.Error())
			if r.within > 0 {
				assert.Less(t, took, r.within)
			}
			if r.extra != nil {
				r.extra(t, err)
			}
		})
	}
}

// The SDK's own error types stay reachable through the classified errors.
func TestClassifiedErrorsKeepTheSDKError(t *testing.T) {
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, "no-such-table-"+time.Now().Format("150405.000000"))
	_, err := c.AcquireLockWithContext(ctx, "k")
	var rnf *types.ResourceNotFoundException
	assert.ErrorAs(t, err, &rnf)
	assert.ErrorIs(t, err, dynamolock.ErrTableNotFound)

	down := closedEndpoint(t)
	dc := newClient(t, defaultSDKClient(down), "locks")
	_, err = dc.GetWithContext(ctx, "k")
	var ne net.Error
	assert.ErrorAs(t, err, &ne)
}

// A heartbeat on a lock that another owner took returns a *LockLostError
// that v2 code can also handle as a *LockNotGrantedError.
func TestLockLostIsAlsoNotGranted(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	holder := newClient(t, db, table, dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(500*time.Millisecond))
	thief := newClient(t, db, table, fast...)
	l, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = thief.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)

	err = holder.SendHeartbeatWithContext(ctx, l)
	var lost *dynamolock.LockLostError
	var lng *dynamolock.LockNotGrantedError
	require.ErrorAs(t, err, &lost)
	require.ErrorAs(t, err, &lng, "v2 returned *LockNotGrantedError here")
	assert.ErrorIs(t, err, dynamolock.ErrLockLost)
	assert.ErrorIs(t, lng, dynamolock.ErrLockLost, "the *LockNotGrantedError wraps the loss")
	assert.Contains(t, lng.Error(), `"k"`)
	var te *dynamolock.TimeoutError
	assert.False(t, errors.As(err, &te))
}

func TestIsAlmostExpiredOnZeroAndNilLock(t *testing.T) {
	_, err := (&dynamolock.Lock{}).IsAlmostExpired()
	assert.ErrorIs(t, err, dynamolock.ErrSessionMonitorNotSet, "v2: a zero Lock has no monitor")
	var nilLock *dynamolock.Lock
	_, err = nilLock.IsAlmostExpired()
	assert.ErrorIs(t, err, dynamolock.ErrLockAlreadyReleased)
}

// v2 accepts any positive safeTime; ours does too, and warns when the value
// cannot mean "renewals are late".
func TestSessionMonitorAcceptsWhatV2Accepts(t *testing.T) {
	table := newTable(t, "")
	db, calls := newDB(t)
	ctx := context.Background()
	var logs bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))

	for _, tc := range []struct {
		name        string
		lease, beat time.Duration
		safeTime    time.Duration
		warn        string
	}{
		{"v2 README: 500ms with a 1s heartbeat and a 3s lease", 3 * time.Second, time.Second, 500 * time.Millisecond, "between two healthy heartbeats"},
		{"lease - 3*heartbeat, equal to the heartbeat", 20 * time.Second, 5 * time.Second, 5 * time.Second, "between two healthy heartbeats"},
		{"at the lease", 3 * time.Second, time.Second, 3 * time.Second, "never fires"},
		{"between heartbeat and lease", 3 * time.Second, time.Second, 2 * time.Second, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			c := newClient(t, db, table, dynamolock.WithLeaseDuration(tc.lease), dynamolock.WithHeartbeatPeriod(tc.beat), dynamolock.WithSlog(logger))
			l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithSessionMonitor(tc.safeTime, func() {}))
			require.NoError(t, err)
			almost, err := l.IsAlmostExpired()
			require.NoError(t, err)
			assert.False(t, almost)
			ok, err := c.ReleaseLockWithContext(ctx, l)
			require.NoError(t, err)
			assert.True(t, ok)
			if tc.warn == "" {
				assert.Empty(t, logs.String())
				return
			}
			assert.Contains(t, logs.String(), `"level":"WARN"`)
			assert.Contains(t, logs.String(), tc.warn)
			assert.Contains(t, logs.String(), `"safeTime"`)
		})
	}
	c := newClient(t, db, table)
	calls.reset()
	for _, bad := range []time.Duration{0, -time.Second} {
		_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithSessionMonitor(bad, nil))
		var ie *dynamolock.InvalidArgumentError
		require.ErrorAs(t, err, &ie)
		assert.Contains(t, err.Error(), "WithSessionMonitor")
	}
	assert.Zero(t, calls.total())
}

// Issue 22: v2's TestInvalidReleases and TestSortKeyInvalidReleases, as
// their behaviour is described: releasing a zero Lock returns
// ErrOwnerMismatched itself (v2 code compares it with ==), makes no
// DynamoDB call, and leaves held locks alone; a nil lock is an error; a
// second Close of a lock fails; Close of a nil lock is
// ErrCannotReleaseNullLock.
func TestInvalidReleasesAsV2(t *testing.T) {
	ctx := context.Background()
	for _, sortKey := range []string{"", "sortkey"} {
		t.Run("sort key "+sortKey, func(t *testing.T) {
			table := newTable(t, sortKey)
			db, calls := newDB(t)
			opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(3 * time.Second), dynamolock.WithHeartbeatPeriod(time.Second)}
			if sortKey != "" {
				opts = append(opts, dynamolock.WithSortKey(sortKey, "sortvalue"))
			}
			c := newClient(t, db, table, opts...)
			held, err := c.AcquireLockWithContext(ctx, "held")
			require.NoError(t, err)

			calls.reset()
			released, err := c.ReleaseLock(&dynamolock.Lock{})
			assert.False(t, released)
			assert.True(t, err == dynamolock.ErrOwnerMismatched, "v2 compares with ==: %v", err) //nolint:errorlint // as v2's test does
			assert.Zero(t, calls.total(), "no DynamoDB call")
			assert.NoError(t, held.Err())

			var nilLock *dynamolock.Lock
			_, err = c.ReleaseLock(nilLock)
			assert.ErrorIs(t, err, dynamolock.ErrCannotReleaseNullLock)
			assert.ErrorIs(t, nilLock.Close(), dynamolock.ErrCannotReleaseNullLock)

			l, err := c.AcquireLockWithContext(ctx, "duplicatedLockRelease")
			require.NoError(t, err)
			require.NoError(t, l.Close())
			assert.Error(t, l.Close(), "a second close fails")
		})
	}
}
