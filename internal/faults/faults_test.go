package faults_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}

// fakeDynamoDB answers every request with an empty JSON object and counts
// the requests it got.
func fakeDynamoDB(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		n.Add(1)
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = w.Write([]byte(`{}`))
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func client(endpoint string, optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("a", "b", "")}
	return dynamodb.NewFromConfig(cfg, append([]func(*dynamodb.Options){faults.Endpoint(endpoint)}, optFns...)...)
}

func getItem(ctx context.Context, db *dynamodb.Client) error {
	_, err := db.GetItem(ctx, &dynamodb.GetItemInput{
		TableName: aws.String("t"),
		Key:       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}},
	})
	return err
}

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func TestServiceErrorsAreTypedSDKErrors(t *testing.T) {
	srv, requests := fakeDynamoDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		kind   faults.Kind
		status int
		check  func(error) bool
	}{
		{faults.InternalServerError, 500, func(err error) bool { var e *types.InternalServerError; return errors.As(err, &e) }},
		{faults.Throttle, 400, func(err error) bool { var e *types.ThrottlingException; return errors.As(err, &e) }},
		{faults.ProvisionedThroughputExceeded, 400, func(err error) bool {
			var e *types.ProvisionedThroughputExceededException
			return errors.As(err, &e)
		}},
		{faults.ServiceUnavailable, 503, func(err error) bool {
			var ae smithy.APIError
			return errors.As(err, &ae) && ae.ErrorCode() == "ServiceUnavailable"
		}},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			se := &faults.ServiceErrors{Rate: 1, Kinds: []faults.Kind{tc.kind}}
			db := client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 3, time.Millisecond))
			before := requests.Load()
			err := getItem(ctx, db)
			if err == nil || !tc.check(err) {
				t.Fatalf("got %v (%T), want a %s error", err, err, tc.kind)
			}
			if got := httpStatus(err); got != tc.status {
				t.Errorf("HTTP status %d, want %d", got, tc.status)
			}
			if attempts, inj := se.Counts(); attempts != 3 || inj[tc.kind] != 3 {
				t.Errorf("attempts %d, injected %v: want 3 attempts, each injected (the SDK retries them)", attempts, inj)
			}
			if n := requests.Load() - before; n != 0 {
				t.Errorf("%d requests reached the server; want none", n)
			}
		})
	}
}

func TestServiceErrorsAfterSendReachTheServer(t *testing.T) {
	srv, requests := fakeDynamoDB(t)
	se := &faults.ServiceErrors{Rate: 1, AfterSend: true, Operations: []string{"GetItem"}}
	db := client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 1, time.Millisecond))
	err := getItem(context.Background(), db)
	if httpStatus(err) != 500 {
		t.Fatalf("got %v, want an injected 500", err)
	}
	if requests.Load() != 1 {
		t.Fatalf("the request did not reach the server")
	}
	se.SetRate(0)
	if err := getItem(context.Background(), db); err != nil {
		t.Fatalf("rate 0: %v", err)
	}
}

func TestServiceErrorsRate(t *testing.T) {
	srv, _ := fakeDynamoDB(t)
	se := &faults.ServiceErrors{Rate: 0.3}
	db := client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 1, time.Millisecond))
	failed := 0
	for range 400 {
		if getItem(context.Background(), db) != nil {
			failed++
		}
	}
	if failed < 80 || failed > 160 {
		t.Fatalf("%d of 400 calls failed at a 30%% rate", failed)
	}
	if se.Injected() != uint64(failed) {
		t.Fatalf("Injected %d, %d calls failed", se.Injected(), failed)
	}
}

// shape describes what callers can learn from an SDK error: the wrapper
// types it carries and what it matches.
func shape(err error) string {
	var oe *smithy.OperationError
	var re *awshttp.ResponseError
	var se *smithyhttp.RequestSendError
	var op *net.OpError
	var ae smithy.APIError
	s := fmt.Sprintf("operation=%v response=%v send=%v status=%d refused=%v reset=%v",
		errors.As(err, &oe), errors.As(err, &re), errors.As(err, &se), httpStatus(err),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET))
	if errors.As(err, &op) {
		s += " netop=" + op.Op
	}
	if errors.As(err, &ae) {
		s += fmt.Sprintf(" code=%s fault=%v", ae.ErrorCode(), ae.ErrorFault())
	}
	return s
}

// The errors made without HTTP look like the SDK's for the same failure:
// RefusedConnection like a call to a port nobody listens on, ServiceError
// like the response ServiceErrors injects.
func TestErrorsLookLikeTheSDKs(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String()
	_ = l.Close()
	sdkErr := getItem(context.Background(), client(closed, faults.Timeouts(time.Second, 1, time.Millisecond)))
	if got, want := shape(faults.RefusedConnection("GetItem", "")), shape(sdkErr); got != want {
		t.Errorf("RefusedConnection: %s\nthe SDK's error (%v): %s", got, sdkErr, want)
	}
	srv, _ := fakeDynamoDB(t)
	for _, k := range []faults.Kind{faults.Throttle, faults.ProvisionedThroughputExceeded, faults.InternalServerError, faults.ServiceUnavailable, faults.TransactionConflict} {
		se := &faults.ServiceErrors{Rate: 1, Kinds: []faults.Kind{k}}
		sdkErr := getItem(context.Background(), client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 1, time.Millisecond)))
		if got, want := shape(faults.ServiceError("GetItem", k)), shape(sdkErr); got != want {
			t.Errorf("ServiceError(%s): %s\nthe SDK's error (%v): %s", k, got, sdkErr, want)
		}
		if got, want := typed(faults.ServiceError("GetItem", k)), typed(sdkErr); got != want {
			t.Errorf("ServiceError(%s): typed error %s, the SDK's %s", k, got, want)
		}
	}
}

// typed names the SDK's typed error in err.
func typed(err error) string {
	var te *types.ThrottlingException
	var pe *types.ProvisionedThroughputExceededException
	var ie *types.InternalServerError
	var tc *types.TransactionConflictException
	var ge *smithy.GenericAPIError
	switch {
	case errors.As(err, &tc):
		return "TransactionConflictException"
	case errors.As(err, &te):
		return "ThrottlingException"
	case errors.As(err, &pe):
		return "ProvisionedThroughputExceededException"
	case errors.As(err, &ie):
		return "InternalServerError"
	case errors.As(err, &ge):
		return "GenericAPIError " + ge.Code
	}
	return fmt.Sprintf("%T", err)
}

// TransactionConflict is answered as DynamoDB answers a write of an item in
// a transaction in progress, and the SDK does not retry it: a plain write
// gets a *types.TransactionConflictException, a transaction a
// *types.TransactionCanceledException whose first member's reason is
// TransactionConflict; both HTTP 400, after one attempt of the three the
// client allows.
func TestTransactionConflictIsNotRetried(t *testing.T) {
	srv, requests := fakeDynamoDB(t)
	ctx := context.Background()
	se := &faults.ServiceErrors{Rate: 1, Kinds: []faults.Kind{faults.TransactionConflict}}
	db := client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 3, time.Millisecond))
	key := map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "k"}}
	_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("t"), Item: key})
	var tce *types.TransactionConflictException
	if !errors.As(err, &tce) || httpStatus(err) != 400 || tce.ErrorMessage() != "Transaction is ongoing for the item" {
		t.Fatalf("PutItem: %v (status %d); want a TransactionConflictException, HTTP 400", err, httpStatus(err))
	}
	if attempts, _ := se.Counts(); attempts != 1 {
		t.Errorf("PutItem: %d attempts; the SDK must not retry a TransactionConflictException", attempts)
	}
	cc := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String("t"), Key: key, ConditionExpression: aws.String("attribute_exists(#k)"),
		ExpressionAttributeNames: map[string]string{"#k": "key"}}}
	put := types.TransactWriteItem{Put: &types.Put{TableName: aws.String("t"), Item: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "j"}}}}
	_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{cc, put, put}})
	var cancelled *types.TransactionCanceledException
	if !errors.As(err, &cancelled) || httpStatus(err) != 400 {
		t.Fatalf("TransactWriteItems: %v; want a TransactionCanceledException, HTTP 400", err)
	}
	var codes []string
	for _, r := range cancelled.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	if !slices.Equal(codes, []string{"TransactionConflict", "None", "None"}) ||
		aws.ToString(cancelled.CancellationReasons[0].Message) != "Transaction is ongoing for the item" {
		t.Errorf("reasons %v; want [TransactionConflict None None], the first with DynamoDB's message", codes)
	}
	if attempts, _ := se.Counts(); attempts != 2 {
		t.Errorf("%d attempts in all; want one per call", attempts)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server; want none", n)
	}
	if k, err := faults.ParseKind("transaction-conflict"); err != nil || k != faults.TransactionConflict {
		t.Errorf("ParseKind(transaction-conflict) = %v, %v", k, err)
	}
}

func TestServiceErrorsEvery(t *testing.T) {
	srv, _ := fakeDynamoDB(t)
	se := &faults.ServiceErrors{Every: 3, Operations: []string{"GetItem"}}
	db := client(srv.URL, faults.Inject(se), faults.Timeouts(time.Second, 1, time.Millisecond))
	var failed []int
	for i := range 9 {
		if getItem(context.Background(), db) != nil {
			failed = append(failed, i)
		}
	}
	if !slices.Equal(failed, []int{2, 5, 8}) {
		t.Fatalf("calls %v failed; want every third: [2 5 8]", failed)
	}
	if se.Injected() != 3 {
		t.Fatalf("Injected %d, want 3", se.Injected())
	}
}
