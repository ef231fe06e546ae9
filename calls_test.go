package dynamolock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// attemptScript is SDK middleware below the SDK's retries: it plays one
// scripted outcome per HTTP attempt of an operation, in order, then lets
// every later attempt through.
type attemptScript struct {
	op    string
	mu    sync.Mutex // guards steps when play sets them while calls run
	steps []func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error)
	n     atomic.Int32
}

// play replaces the script's steps and restarts its count, while calls
// (background heartbeats) may be running.
func (s *attemptScript) play(steps ...attemptStep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n.Store(0)
	s.steps = steps
}

func (s *attemptScript) register(stack *middleware.Stack) error {
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("attemptScript",
		func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			if awsmiddleware.GetOperationName(ctx) != s.op {
				return next.HandleDeserialize(ctx, in)
			}
			s.mu.Lock()
			i := int(s.n.Add(1)) - 1
			var step attemptStep
			if i < len(s.steps) {
				step = s.steps[i]
			}
			s.mu.Unlock()
			if step == nil {
				return next.HandleDeserialize(ctx, in)
			}
			return step(ctx, in, next)
		}), middleware.After)
}

// landThenReset sends the attempt to DynamoDB and loses its answer, as a
// connection reset after the request was written does.
func landThenReset(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	out, md, err := next.HandleDeserialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	return middleware.DeserializeOutput{}, md, &smithyhttp.RequestSendError{Err: syscall.ECONNRESET}
}

// throttled rejects the attempt without sending it.
func throttled(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	return middleware.DeserializeOutput{}, middleware.Metadata{}, &types.ProvisionedThroughputExceededException{Message: aws.String("injected")}
}

// Issue 21, finding 1: the acquiring write's first HTTP attempt lands and its
// answer is lost; the SDK retries, and every retry is throttled. The call
// ends with a throttling error, but the write is in the item: an
// acquisition that gives up must undo it, or the key stays taken by nobody
// for a lease. Before the fix the throttling error counted as "surely not
// applied", nothing was undone, and the second client was told the key was
// held by the first.
func TestAcquireUndoesAWriteThatLandedBeforeThrottledRetries(t *testing.T) {
	table := newTable(t, "")
	ctx := context.Background()
	for _, failIfLocked := range []bool{true, false} {
		name := map[bool]string{true: "FailIfLocked", false: "context ends"}[failIfLocked]
		t.Run(name, func(t *testing.T) {
			key := "k-" + strings.ReplaceAll(name, " ", "-")
			actx, cancel := context.WithCancel(ctx)
			defer cancel()
			last := throttled
			var opts []dynamolock.AcquireLockOption
			if failIfLocked {
				opts = append(opts, dynamolock.FailIfLocked())
			} else {
				// The waiting acquisition's context ends during its last
				// throttled attempt.
				last = func(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
					cancel()
					return throttled(ctx, in, next)
				}
			}
			script := &attemptScript{op: "UpdateItem", steps: []func(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error){
				landThenReset, throttled, last,
			}}
			db, _ := newDB(t, func(o *dynamodb.Options) {
				o.RetryMaxAttempts = 3
				o.APIOptions = append(o.APIOptions, script.register)
			})
			c := newClient(t, db, table, fast...)
			_, err := c.AcquireLockWithContext(actx, key, opts...)
			require.Error(t, err)
			require.GreaterOrEqual(t, int(script.n.Load()), 3, "the script ran")

			other, _ := newDB(t)
			c2 := newClient(t, other, table, fast...)
			l, err := c2.AcquireLockWithContext(ctx, key, dynamolock.FailIfLocked())
			require.NoError(t, err, "the landed write was undone: the key is free")
			assert.NoError(t, l.Close())
		})
	}
}

// A release whose first attempt lands (answer lost) and whose retries are
// throttled may have released the lock: it must say so, not "nothing
// changed".
func TestReleaseAfterLostThenThrottledAttemptsIsUnknown(t *testing.T) {
	table := newTable(t, "")
	script := &attemptScript{op: "UpdateItem"}
	db, _ := newDB(t, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 3
		o.APIOptions = append(o.APIOptions, script.register)
	})
	c := newClient(t, db, table, dynamolock.DisableHeartbeat())
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	script.n.Store(0)
	script.steps = []func(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error){
		landThenReset, throttled, throttled,
	}
	ok, err := c.ReleaseLockWithContext(ctx, l)
	assert.False(t, ok)
	require.ErrorIs(t, err, dynamolock.ErrReleaseOutcomeUnknown)
	assert.Error(t, l.Err(), "the lock no longer looks held")
}

// A configuration mistake is not a transient fault: an https:// endpoint
// that speaks plain HTTP, a certificate nobody trusts, a host that does not
// exist and a client with no Region all end the acquisition with a
// *ConnectionError naming the endpoint within seconds, not after the SDK's
// and the library's retries (21 s before the fix for the first).
func TestConfigurationMistakesAreConnectionErrors(t *testing.T) {
	tlsServer := httptest.NewTLSServer(nil) // a certificate this client does not trust
	t.Cleanup(tlsServer.Close)
	httpsToHTTP := strings.Replace(endpoint, "http://", "https://", 1)
	for _, tc := range []struct {
		name, endpoint, region, want, reason string
	}{
		{"https to an http endpoint", httpsToHTTP, "us-east-1", httpsToHTTP, "plain HTTP"},
		{"untrusted certificate", tlsServer.URL, "us-east-1", tlsServer.URL, "certificate"},
		{"unknown host", "http://no-such-host.invalid:8000", "us-east-1", "http://no-such-host.invalid:8000", "host name not found"},
		{"no region, no endpoint", "", "", "", "no endpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := dynamodb.Options{Region: tc.region, Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
			if tc.endpoint != "" {
				o.BaseEndpoint = aws.String(tc.endpoint)
			}
			c := newClient(t, dynamodb.New(o), "locks")
			start := time.Now()
			_, err := c.AcquireLockWithContext(context.Background(), "k")
			elapsed := time.Since(start)
			var ce *dynamolock.ConnectionError
			require.ErrorAs(t, err, &ce, "%v", err)
			assert.Less(t, elapsed, 10*time.Second)
			assert.Contains(t, ce.Reason, tc.reason)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotEmpty(t, ce.Op)
			t.Logf("%s after %s", err, elapsed.Round(time.Millisecond))
		})
	}
}

// replicatedDB shows the table as a global table: DescribeTable answers
// with replicas in two Regions and the given consistency, or with err.
type replicatedDB struct {
	*dynamodb.Client
	consistency types.MultiRegionConsistency
	err         error
	described   atomic.Int32
}

func (r *replicatedDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	r.described.Add(1)
	if r.err != nil {
		return nil, r.err
	}
	out, err := r.Client.DescribeTable(ctx, in, optFns...)
	if err != nil || r.consistency == "" {
		return out, err
	}
	t := *out.Table
	t.Replicas = []types.ReplicaDescription{{RegionName: aws.String("us-east-1")}, {RegionName: aws.String("eu-west-1")}}
	t.MultiRegionConsistency = r.consistency
	return &dynamodb.DescribeTableOutput{Table: &t}, nil
}

// Issue 22, item 5: a global table replicated with multi-Region eventual
// consistency could let two Regions grant one lock; it is refused before
// any write, unless every client writes through one Region. One
// DescribeTable per client, before its first write.
func TestEventualGlobalTableRefusedBeforeAnyWrite(t *testing.T) {
	table := newTable(t, "")
	ctx := context.Background()
	sdk, calls := newDB(t)

	db := &replicatedDB{Client: sdk, consistency: types.MultiRegionConsistencyEventual}
	c := newClient(t, db, table)
	calls.reset()
	start := time.Now()
	_, err := c.AcquireLockWithContext(ctx, "k")
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
	assert.Less(t, time.Since(start), time.Second, "refused at once, not retried")
	var gte *dynamolock.GlobalTableError
	require.ErrorAs(t, err, &gte)
	assert.Equal(t, []string{"eu-west-1", "us-east-1"}, gte.Regions)
	assert.Contains(t, err.Error(), table)
	assert.Contains(t, err.Error(), "WithSingleWriterRegion")
	_, err = c.AcquireLocks(ctx, []string{"a", "b"})
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)
	assert.Zero(t, calls.get("UpdateItem")+calls.get("TransactWriteItems"), "nothing was written")
	assert.EqualValues(t, 1, db.described.Load(), "the table is described once per client")

	require.ErrorIs(t, c.AssertTableExists(ctx), dynamolock.ErrEventualGlobalTable)
	_, err = c.CreateTableIfNotExists(ctx, dynamolock.WithCustomPartitionKeyName("key"))
	require.ErrorIs(t, err, dynamolock.ErrEventualGlobalTable)

	single := newClient(t, db, table, dynamolock.WithSingleWriterRegion())
	l, err := single.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	require.NoError(t, l.Close())
	require.NoError(t, single.AssertTableExists(ctx))
}

// A table with multi-Region strong consistency is accepted; DynamoDB does
// not run transactions on it, so AcquireLocks says so before sending one.
// ReplicatedWriteConflictException (another Region was writing the item)
// is a write that did not apply: retried, never a loss.
func TestStrongGlobalTable(t *testing.T) {
	table := newTable(t, "")
	ctx := context.Background()
	script := &attemptScript{op: "UpdateItem", steps: []func(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error){
		func(context.Context, middleware.DeserializeInput, middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
			return middleware.DeserializeOutput{}, middleware.Metadata{}, &types.ReplicatedWriteConflictException{Message: aws.String("injected")}
		},
	}}
	sdk, calls := newDB(t, func(o *dynamodb.Options) {
		o.RetryMaxAttempts = 1
		o.APIOptions = append(o.APIOptions, script.register)
	})
	db := &replicatedDB{Client: sdk, consistency: types.MultiRegionConsistencyStrong}
	c := newClient(t, db, table)
	l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err, "a replicated write conflict is retried")
	assert.EqualValues(t, 2, script.n.Load(), "the conflict was seen once, then the write went through")
	require.NoError(t, l.Close())

	calls.reset()
	_, err = c.AcquireLocks(ctx, []string{"a", "b"})
	require.ErrorIs(t, err, dynamolock.ErrUnsupportedOperation)
	assert.Contains(t, err.Error(), "strong consistency")
	assert.Zero(t, calls.get("TransactWriteItems"))
	require.NoError(t, c.AssertTableExists(ctx))
}

// Where DescribeTable is denied (an IAM policy written for v2, which never
// called it), the check is skipped with one warning and locks work.
func TestTableCheckDeniedIsSkippedWithOneWarning(t *testing.T) {
	table := newTable(t, "")
	ctx := context.Background()
	sdk, _ := newDB(t)
	db := &replicatedDB{Client: sdk, err: &smithy.GenericAPIError{Code: "AccessDeniedException", Message: "not authorized to perform: dynamodb:DescribeTable"}}
	var logs bytes.Buffer
	c := newClient(t, db, table, dynamolock.WithSlog(slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	for _, key := range []string{"a", "b"} {
		l, err := c.AcquireLockWithContext(ctx, key)
		require.NoError(t, err)
		require.NoError(t, l.Close())
	}
	assert.EqualValues(t, 1, db.described.Load())
	assert.Equal(t, 1, strings.Count(logs.String(), `"level":"WARN"`), logs.String())
	assert.Contains(t, logs.String(), "dynamodb:DescribeTable")

	// A check that fails for another reason is retried by the next write,
	// and the write it stopped was never sent.
	db2 := &replicatedDB{Client: sdk, err: errors.New("injected network failure")}
	c2 := newClient(t, db2, table)
	_, err := c2.AcquireLockWithContext(ctx, "c", dynamolock.FailIfLocked())
	require.Error(t, err)
	db2.err = nil
	db2.consistency = ""
	l, err := c2.AcquireLockWithContext(ctx, "c", dynamolock.FailIfLocked())
	require.NoError(t, err, "nothing of the first call was left in the item")
	require.NoError(t, l.Close())
	assert.EqualValues(t, 2, db2.described.Load())
}
