package dynamolock_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// Issue 40, item 5: every error is one line, and names what to do.

// attemptCounter counts the HTTP attempts of an SDK client's calls (after
// its retry step: each retry counts).
type attemptCounter struct{ n atomic.Int32 }

func (a *attemptCounter) register(stack *middleware.Stack) error {
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("attemptCounter",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			a.n.Add(1)
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// userSDKClient is an SDK client as a user builds one (the SDK's default
// retryer, with its retry quota) for endpoint, counting its attempts.
func userSDKClient(endpoint string, attempts *attemptCounter) *dynamodb.Client {
	return dynamodb.New(dynamodb.Options{
		Region:                          ddblocal.Region,
		Credentials:                     credentials.NewStaticCredentialsProvider(ddblocal.AccessKey, ddblocal.SecretKey, ""),
		BaseEndpoint:                    aws.String(endpoint),
		DisableValidateResponseChecksum: true,
		APIOptions:                      []func(*middleware.Stack) error{attempts.register},
	})
}

// A context cancelled while the acquiring write is on its way: the error
// matches ctx.Err(), *LockNotGrantedError and the SDK's own error, on one
// line (it was two: errors.Join's newline).
func TestCancelledContextErrorIsOneLine(t *testing.T) {
	table := newTable(t, "")
	upstream, err := url.Parse(endpoint)
	require.NoError(t, err)
	arrived := make(chan struct{})
	var held atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(upstream)
	// DynamoDB Local behind a proxy that holds the first UpdateItem until
	// its caller gives up.
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".UpdateItem") && held.CompareAndSwap(false, true) {
			// Read the request first: the server notices the caller
			// hanging up only once it has.
			_, _ = io.Copy(io.Discard, r.Body)
			close(arrived)
			select {
			case <-r.Context().Done():
			case <-time.After(30 * time.Second):
			}
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	c := newClient(t, userSDKClient(server.URL, &attemptCounter{}), table)

	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err = c.AcquireLockWithContext(ctx, "k")
	t.Log(err)
	assertOneLine(t, err)
	assert.ErrorIs(t, err, context.Canceled)
	var lng *dynamolock.LockNotGrantedError
	assert.ErrorAs(t, err, &lng)
	var oe *smithy.OperationError
	assert.ErrorAs(t, err, &oe, "the SDK's error stays wrapped")
	assert.Contains(t, err.Error(), `key "k": context done: context canceled; operation error DynamoDB: UpdateItem`)
}

// An endpoint that is not DynamoDB (a web server answering HTML): the
// error says so and where to point the client, at once, on one line.
func TestEndpointThatIsNotDynamoDB(t *testing.T) {
	for _, status := range []int{http.StatusNotImplemented, http.StatusNotFound, http.StatusOK} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				w.WriteHeader(status)
				_, _ = w.Write([]byte("<!DOCTYPE html><html><body><h1>It works</h1></body></html>"))
			}))
			t.Cleanup(server.Close)
			c := newClient(t, userSDKClient(server.URL, &attemptCounter{}), "locks")
			ctx := context.Background()
			for name, call := range firstCalls(ctx, c) {
				begin := time.Now()
				err := call()
				took := time.Since(begin)
				t.Logf("%s after %s: %v", name, took.Round(time.Millisecond), err)
				var ce *dynamolock.ConnectionError
				require.ErrorAs(t, err, &ce, name)
				assertOneLine(t, err)
				assert.Contains(t, err.Error(), "did not answer as DynamoDB does: it answered HTTP "+strconv.Itoa(status), name)
				assert.Contains(t, err.Error(), "point BaseEndpoint at DynamoDB", name)
				assert.Contains(t, err.Error(), server.URL, name)
				assert.Less(t, took, 3*time.Second, "%s: a configuration mistake is not retried", name)
			}
		})
	}
}

// Nothing listens at the endpoint, and the SDK's client-side retry quota
// was spent by the application's own failed requests: the library's calls
// still make every attempt of the SDK's retryer (the quota had left them
// one each, failing in a millisecond), and the error is one line without
// the SDK's second line ("retry quota exceeded").
func TestRefusedEndpointWithTheRetryQuotaSpent(t *testing.T) {
	down := closedEndpoint(t)
	attempts := &attemptCounter{}
	sdk := userSDKClient(down, attempts)
	ctx := context.Background()

	// The application's own requests spend the quota.
	var last error
	for range 40 {
		_, last = sdk.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("app"), Key: keyOf("k")})
		if strings.Contains(fmtErr(last), "retry quota exceeded") {
			break
		}
	}
	require.Contains(t, fmtErr(last), "retry quota exceeded", "the quota is spent")
	assert.Contains(t, fmtErr(last), "\n", "the SDK's error is two lines")
	attempts.n.Store(0)
	_, err := sdk.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("app"), Key: keyOf("k")})
	require.Error(t, err)
	assert.EqualValues(t, 1, attempts.n.Load(), "the application's request: one attempt, no retry")

	c := newClient(t, sdk, "locks")
	attempts.n.Store(0)
	_, err = c.CreateTableIfNotExists(ctx)
	t.Log(err)
	var ce *dynamolock.ConnectionError
	require.ErrorAs(t, err, &ce)
	assertOneLine(t, err)
	assert.NotContains(t, err.Error(), "quota")
	assert.Contains(t, err.Error(), "connection refused; nothing at this endpoint has answered this client yet: check the endpoint")
	assert.EqualValues(t, 4, attempts.n.Load(), "the library's request: every attempt of DynamoDB's default retryer")

	begin := time.Now()
	_, err = c.AcquireLockWithContext(ctx, "k")
	took := time.Since(begin)
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	require.ErrorAs(t, err, &ce)
	assertOneLine(t, err)
	assert.GreaterOrEqual(t, took, 5*time.Second, "a first call is retried for a few seconds")
	assert.Less(t, took, 10*time.Second)
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// firstCalls are the calls a new user's program makes first, by name.
func firstCalls(ctx context.Context, c *dynamolock.Client) map[string]func() error {
	return map[string]func() error{
		"CreateTableIfNotExists": func() error { _, err := c.CreateTableIfNotExists(ctx); return err },
		"AcquireLockWithContext": func() error { _, err := c.AcquireLockWithContext(ctx, "k"); return err },
		"GetWithContext":         func() error { _, err := c.GetWithContext(ctx, "k"); return err },
	}
}
