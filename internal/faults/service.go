package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Kind is a DynamoDB service error that [ServiceErrors] injects.
type Kind int

const (
	// Throttle is HTTP 400 ThrottlingException.
	Throttle Kind = iota
	// ProvisionedThroughputExceeded is HTTP 400
	// ProvisionedThroughputExceededException.
	ProvisionedThroughputExceeded
	// InternalServerError is HTTP 500 InternalServerError.
	InternalServerError
	// ServiceUnavailable is HTTP 503 ServiceUnavailable.
	ServiceUnavailable
	// TransactionConflict is DynamoDB's answer to a write of an item that a
	// transaction in progress includes (which DynamoDB Local never gives):
	// HTTP 400 TransactionConflictException for PutItem, UpdateItem and
	// DeleteItem, which the SDK does not retry; for TransactWriteItems, HTTP
	// 400 TransactionCanceledException with the reason TransactionConflict
	// for its first member and None for the others. Nothing is applied.
	TransactionConflict
	numKinds
)

// msgConflict is DynamoDB's message for an item in a transaction.
const msgConflict = "Transaction is ongoing for the item"

func (k Kind) String() string {
	switch k {
	case Throttle:
		return "throttling"
	case ProvisionedThroughputExceeded:
		return "throughput-exceeded"
	case InternalServerError:
		return "500"
	case ServiceUnavailable:
		return "503"
	case TransactionConflict:
		return "transaction-conflict"
	}
	return "kind" + strconv.Itoa(int(k))
}

// ParseKind reads the names String returns ("throttling",
// "throughput-exceeded", "500", "503", "transaction-conflict").
func ParseKind(s string) (Kind, error) {
	for k := range numKinds {
		if k.String() == s {
			return k, nil
		}
	}
	return 0, fmt.Errorf("faults: unknown service error kind %q", s)
}

func (k Kind) response() (status int, code string) {
	switch k {
	case Throttle:
		return 400, "ThrottlingException"
	case ProvisionedThroughputExceeded:
		return 400, "ProvisionedThroughputExceededException"
	case InternalServerError:
		return 500, "InternalServerError"
	case TransactionConflict:
		return 400, "TransactionConflictException"
	default:
		return 503, "ServiceUnavailable"
	}
}

// ServiceErrors is SDK middleware that makes DynamoDB calls fail with
// service errors at a set rate. Register it through dynamodb.Options.APIOptions:
//
//	se := &faults.ServiceErrors{Rate: 0.3, Kinds: []faults.Kind{faults.InternalServerError}}
//	db := dynamodb.New(opts, func(o *dynamodb.Options) { o.APIOptions = append(o.APIOptions, se.Register) })
//
// It acts on each HTTP attempt, below the SDK's retries, so the SDK retries
// an injected error as it would a real one (configure the SDK with one
// attempt to hand every error to the caller). An injected error is a real
// HTTP response (status and DynamoDB's JSON error body) that the SDK decodes
// into its usual error types. Safe for concurrent use; the fields must not
// change after the first call (use SetRate).
type ServiceErrors struct {
	// Rate is the probability, from 0 to 1, that an attempt fails.
	Rate float64
	// Every, when not zero, replaces Rate with a fixed pattern: the
	// Every-th attempt of the operations it applies to fails, and every
	// Every-th after it. A test that must see errors then sees them.
	Every uint64
	// Kinds are the errors to inject, chosen uniformly; empty means
	// InternalServerError.
	Kinds []Kind
	// Operations limits injection to these operation names ("UpdateItem",
	// "GetItem", ...); empty means every operation.
	Operations []string
	// AfterSend sends the request to DynamoDB first and replaces its answer
	// with the error: the write lands, the client sees it fail.
	AfterSend bool
	// ThrottlingReason, when not empty, is the reason a throttling error
	// (Throttle, ProvisionedThroughputExceeded) gives in its
	// ThrottlingReasons, as DynamoDB has since 2025 (for example
	// "TableWriteKeyRangeThroughputExceeded"); empty gives none, as
	// DynamoDB did before and DynamoDB Local does.
	ThrottlingReason string

	once     sync.Once
	rate     atomic.Uint64 // math.Float64bits of the current rate
	attempts atomic.Uint64
	matched  atomic.Uint64 // attempts of the operations it applies to
	injected [numKinds]atomic.Uint64
}

func (s *ServiceErrors) init() {
	s.once.Do(func() { s.rate.Store(math.Float64bits(s.Rate)) })
}

// SetRate changes the injection rate from now on.
func (s *ServiceErrors) SetRate(rate float64) {
	s.init()
	s.rate.Store(math.Float64bits(rate))
}

// Counts reports how many attempts passed through and how many errors of
// each kind were injected.
func (s *ServiceErrors) Counts() (attempts uint64, injected map[Kind]uint64) {
	injected = make(map[Kind]uint64)
	for k := range numKinds {
		if n := s.injected[k].Load(); n > 0 {
			injected[k] = n
		}
	}
	return s.attempts.Load(), injected
}

// Injected returns the total number of injected errors.
func (s *ServiceErrors) Injected() uint64 {
	var n uint64
	for k := range numKinds {
		n += s.injected[k].Load()
	}
	return n
}

// Register adds the middleware to an operation's stack; its signature fits
// dynamodb.Options.APIOptions.
func (s *ServiceErrors) Register(stack *middleware.Stack) error {
	s.init()
	// Added last in the deserialize step, it sits right above the HTTP
	// transport: the SDK's deserializer turns its fake responses into typed
	// errors, and the retry middleware (finalize step) sees each one.
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("faults.ServiceErrors", s.handle), middleware.After)
}

func (s *ServiceErrors) handle(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	s.attempts.Add(1)
	if !s.applies(awsmiddleware.GetOperationName(ctx)) || !s.fails() {
		return next.HandleDeserialize(ctx, in)
	}
	kind := InternalServerError
	if len(s.Kinds) > 0 {
		kind = s.Kinds[rand.N(len(s.Kinds))]
	}
	var md middleware.Metadata
	if s.AfterSend {
		out, m, err := next.HandleDeserialize(ctx, in)
		if err != nil {
			return out, m, err
		}
		if r, ok := out.RawResponse.(*smithyhttp.Response); ok && r.Body != nil {
			_, _ = io.Copy(io.Discard, r.Body)
			_ = r.Body.Close()
		}
		md = m
	}
	s.injected[kind].Add(1)
	if kind == TransactionConflict && awsmiddleware.GetOperationName(ctx) == "TransactWriteItems" {
		return middleware.DeserializeOutput{RawResponse: cancelledResponse(members(in.Request))}, md, nil
	}
	if s.ThrottlingReason != "" && (kind == Throttle || kind == ProvisionedThroughputExceeded) {
		return middleware.DeserializeOutput{RawResponse: throttledResponse(kind, s.ThrottlingReason)}, md, nil
	}
	return middleware.DeserializeOutput{RawResponse: errorResponse(kind)}, md, nil
}

// throttledResponse is DynamoDB's answer of kind (a throttling error) with
// the reason it gives, on a table of the faults package's.
func throttledResponse(k Kind, reason string) *smithyhttp.Response {
	status, code := k.response()
	body, _ := json.Marshal(map[string]any{
		"__type":            "com.amazonaws.dynamodb.v20120810#" + code,
		"message":           "injected by faults.ServiceErrors",
		"ThrottlingReasons": []map[string]string{{"reason": reason, "resource": FaultsTableARN}},
	})
	return jsonResponse(status, string(body))
}

// FaultsTableARN is the resource a throttling reason the faults package
// injects names.
const FaultsTableARN = "arn:aws:dynamodb:us-east-1:000000000000:table/faults"

// members counts the members of a TransactWriteItems request (1 when the
// body cannot be read), leaving the body to be sent.
func members(req any) int {
	r, ok := req.(*smithyhttp.Request)
	if !ok {
		return 1
	}
	body := r.GetStream()
	if body == nil {
		return 1
	}
	var in struct{ TransactItems []json.RawMessage }
	err := json.NewDecoder(body).Decode(&in)
	if rerr := r.RewindStream(); rerr != nil || err != nil || len(in.TransactItems) == 0 {
		return 1
	}
	return len(in.TransactItems)
}

// cancelledResponse is DynamoDB's answer to a transaction of n members
// whose first one meets another transaction in progress.
func cancelledResponse(n int) *smithyhttp.Response {
	codes := make([]string, n)
	reasons := make([]map[string]string, n)
	for i := range reasons {
		codes[i], reasons[i] = "None", map[string]string{"Code": "None"}
	}
	codes[0], reasons[0] = "TransactionConflict", map[string]string{"Code": "TransactionConflict", "Message": msgConflict}
	body, _ := json.Marshal(map[string]any{
		"__type":              "com.amazonaws.dynamodb.v20120810#TransactionCanceledException",
		"message":             "Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]",
		"CancellationReasons": reasons,
	})
	return jsonResponse(400, string(body))
}

// fails decides whether this attempt of an operation it applies to fails.
func (s *ServiceErrors) fails() bool {
	n := s.matched.Add(1)
	if s.Every > 0 {
		return n%s.Every == 0
	}
	return rand.Float64() < math.Float64frombits(s.rate.Load())
}

func (s *ServiceErrors) applies(op string) bool {
	if len(s.Operations) == 0 {
		return true
	}
	for _, o := range s.Operations {
		if o == op {
			return true
		}
	}
	return false
}

func errorResponse(k Kind) *smithyhttp.Response {
	status, code := k.response()
	msg := "injected by faults.ServiceErrors"
	if k == TransactionConflict {
		msg = msgConflict
	}
	return jsonResponse(status, `{"__type":"com.amazonaws.dynamodb.v20120810#`+code+`","message":"`+msg+`"}`)
}

func jsonResponse(status int, body string) *smithyhttp.Response {
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "faults-injected")
	return &smithyhttp.Response{Response: &http.Response{
		Status:        strconv.Itoa(status) + " " + http.StatusText(status),
		StatusCode:    status,
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
	}}
}
