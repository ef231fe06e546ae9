package sim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"reflect"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Faults at the level of the SDK's attempts (issue 21, item 3). A client
// with an attemptProfile talks to the model through the real SDK client
// (dynamodb.New: its serializers, retryer, backoff and attempt loop) over
// simTransport, an http.RoundTripper that decodes each attempt's JSON
// request, runs it on the model, and answers as DynamoDB's JSON protocol
// does. Each attempt meets its own faults; what the caller sees is what
// the SDK's retry decisions make of them.

// attemptProfile is how one client's attempts misbehave; the seed chooses.
type attemptProfile struct {
	refused  float64       // connection refused: nothing sent (the SDK retries)
	dns      float64       // a DNS failure: temporary (retried) or not found (not retried)
	tls      float64       // a TLS handshake timeout: nothing sent (retried)
	throttle float64       // ProvisionedThroughputExceededException, not applied (retried, 1 s base backoff)
	e500     float64       // InternalServerError, not applied (retried)
	lost     float64       // applied, then the connection resets before the answer (retried)
	timeout  float64       // applied or not, then the attempt times out (retried)
	slow     float64       // the request or its answer is delayed up to maxDelay
	maxDelay time.Duration //
	ghost    float64       // an attempt whose caller gave up lands anyway, later
	late     float64       // of an acquiring call's ghosts, the share that land up to lateMax later (faultProfile.late)
	lateMax  time.Duration //
	attempts int           // the SDK's MaxAttempts
}

func (p attemptProfile) String() string {
	return fmt.Sprintf("SDK attempts (max %d): refused=%.2f dns=%.2f tls=%.2f throttle=%.2f 500=%.2f lost=%.2f timeout=%.2f slow=%.2f<=%s ghost=%.2f late=%.2f<=%s",
		p.attempts, p.refused, p.dns, p.tls, p.throttle, p.e500, p.lost, p.timeout, p.slow, p.maxDelay, p.ghost, p.late, p.lateMax)
}

func randomAttemptProfile(r *rand.Rand, lease time.Duration) attemptProfile {
	return attemptProfile{
		refused: r.Float64() * 0.05, dns: r.Float64() * 0.02, tls: r.Float64() * 0.02,
		throttle: r.Float64() * 0.15, e500: r.Float64() * 0.05, lost: r.Float64() * 0.1, timeout: r.Float64() * 0.05,
		slow: r.Float64() * 0.3, maxDelay: time.Duration(1+r.IntN(int(lease/time.Millisecond))) * time.Millisecond,
		ghost: r.Float64() * 0.5, attempts: []int{1, 2, 3, 3, 5}[r.IntN(5)],
	}
}

// sdkClient is the real DynamoDB client over f's simulated transport.
func (f *faultyDB) sdkClient() *dynamodb.Client {
	w := f.w
	return dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://dynamodb.sim"),
		Credentials:  aws.AnonymousCredentials{},
		HTTPClient:   &http.Client{Transport: &simTransport{f: f}},
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = f.attempt.attempts
			o.Backoff = retry.BackoffDelayerFunc(func(attempt int, err error) (time.Duration, error) {
				return backoff(w.draw("", "").Float64(), attempt, err), nil
			})
		}),
		IdempotencyTokenProvider: tokenProvider{w},
	})
}

// backoff is the standard retryer's delay (aws/retry, the 2026 formula:
// b * min(x * 2^(attempt-1), 20 s), x = 1 s after throttling and 50 ms
// otherwise), with b drawn from the seed instead of crypto/rand.
func backoff(b float64, attempt int, err error) time.Duration {
	x := 50 * time.Millisecond
	if retry.IsErrorThrottles(retry.DefaultThrottles).IsErrorThrottle(err) == aws.TrueTernary {
		x = time.Second
	}
	d := math.Min(float64(x)*math.Pow(2, float64(max(attempt-1, 0))), float64(retry.DefaultMaxBackoff))
	return time.Duration(b * d)
}

// tokenProvider makes the ClientRequestTokens the SDK fills into
// transactions from the seed.
type tokenProvider struct{ w *world }

func (p tokenProvider) GetIdempotencyToken() (string, error) {
	r := p.w.draw("", "")
	return fmt.Sprintf("%016x%016x", r.Uint64(), r.Uint64()), nil
}

type simTransport struct{ f *faultyDB }

// simNetError is a network error of the kinds the transport injects.
type simNetError struct {
	msg     string
	timeout bool
}

func (e *simNetError) Error() string   { return e.msg }
func (e *simNetError) Timeout() bool   { return e.timeout }
func (e *simNetError) Temporary() bool { return e.timeout }

func (t *simTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	f := t.f
	ctx := req.Context()
	op := strings.TrimPrefix(req.Header.Get("X-Amz-Target"), "DynamoDB_20120810.")
	body, err := io.ReadAll(req.Body)
	_ = req.Body.Close()
	if err != nil {
		return nil, err
	}
	run, ok := modelOps[op]
	if !ok {
		return jsonResponse(400, map[string]any{"__type": "com.amazonaws.dynamodb.v20120810#UnknownOperationException", "message": op})
	}
	in, err := run.decode(body)
	if err != nil {
		return nil, fmt.Errorf("sim transport: decoding %s: %w", op, err)
	}
	attempt, _, _ := strings.Cut(strings.TrimPrefix(req.Header.Get("Amz-Sdk-Request"), "attempt="), ";")
	key := f.name + " " + op + " " + reqKey(in) + " attempt " + attempt
	f.w.step("send " + key)
	f.clock.resume() // a paused process neither sends nor hears an answer
	defer f.clock.resume()
	f.noteUndo(ctx, in)
	healed := f.w.healed.Load()
	p := f.attempt
	mctx := context.WithValue(context.WithoutCancel(ctx), callerKey{}, f.name)
	apply := func() (any, error) { return run.apply(f.model, mctx, in) }
	if tx, ok := in.(*dynamodb.TransactWriteItemsInput); ok {
		apply = func() (any, error) { return f.transact(mctx, tx, key, true) }
	}
	// Every fault this attempt meets is noted on its keys as it is drawn
	// (invariant 23).
	fault := func() {
		f.noteFault(in)
		f.w.faulted(ctx, false)
	}
	fail := func(why string, err error) (*http.Response, error) {
		fault()
		f.w.log("%s %s attempt %s: %s", f.name, op, attempt, why)
		return nil, err
	}
	if !healed {
		switch {
		case f.roll(p.refused):
			return fail("connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})
		case f.roll(p.dns):
			notFound := f.roll(0.25)
			return fail(fmt.Sprintf("DNS failure (not found %v)", notFound), &net.DNSError{Err: "server misbehaving", Name: "dynamodb.sim", IsTemporary: !notFound, IsNotFound: notFound})
		case f.roll(p.tls):
			return fail("TLS handshake timeout", &simNetError{msg: "net/http: TLS handshake timeout", timeout: true})
		}
	}
	d := f.attemptDelay()
	if d > 2500*time.Microsecond {
		f.noteFault(in)
	}
	if !wait(ctx, d, f.stalledUntil) {
		f.w.step("gave up " + key)
		fault()
		if !healed && f.roll(p.ghost) {
			f.w.faulted(ctx, true)
			d := f.attemptDelay() + time.Millisecond
			why := "abandoned attempt lands late"
			if ld, ok := f.lateGhost(ctx, in, p.late, p.lateMax); ok {
				d, why = ld, fmt.Sprintf("abandoned attempt of an acquiring call lands %s late", ld.Round(time.Millisecond))
			}
			f.w.ghosts.Go(func() {
				time.Sleep(d)
				f.w.step("ghost " + key)
				f.w.log("%s %s attempt %s: %s", f.name, op, attempt, why)
				_, _ = apply()
			})
		}
		return nil, ctx.Err()
	}
	f.w.step("apply " + key)
	if !healed {
		switch {
		case f.roll(p.throttle):
			fault()
			f.w.log("%s %s attempt %s: throttled", f.name, op, attempt)
			return errorResponse(&types.ProvisionedThroughputExceededException{Message: aws.String("sim: throttled")})
		case f.roll(p.e500):
			fault()
			f.w.log("%s %s attempt %s: 500", f.name, op, attempt)
			return errorResponse(&smithy.GenericAPIError{Code: "InternalServerError", Message: "sim: 500", Fault: smithy.FaultServer})
		case f.roll(p.timeout):
			applied := f.roll(0.5)
			if applied {
				_, _ = apply()
			} else if d, late := f.lateGhost(ctx, in, p.late, p.lateMax); late && isWrite(in) {
				// Held up in the network: it lands after the call's
				// take-back (issue 60, item 1).
				f.w.faulted(ctx, true)
				f.w.ghosts.Go(func() {
					time.Sleep(d)
					f.w.step("ghost " + key)
					f.w.log("%s %s attempt %s: a timed-out write of an acquiring call lands %s late", f.name, op, attempt, d.Round(time.Millisecond))
					_, _ = apply()
				})
			}
			return fail(fmt.Sprintf("timed out (applied %v)", applied), &simNetError{msg: "sim: read tcp: i/o timeout", timeout: true})
		}
	}
	out, aerr, met := meeting(f, in, apply)
	if met {
		fault()
	}
	lost := !healed && f.roll(p.lost)
	d = f.attemptDelay()
	if d > 2500*time.Microsecond || lost {
		f.noteFault(in)
	}
	okWait := wait(ctx, d, f.stalledUntil)
	f.w.step("answer " + key)
	if !okWait {
		fault()
		return nil, ctx.Err()
	}
	if lost {
		return fail("applied, answer lost (connection reset)", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)})
	}
	if aerr != nil {
		return errorResponse(aerr)
	}
	return jsonResponse(200, toJSON(reflect.ValueOf(out)))
}

// attemptDelay is one leg of an attempt: 0.5–2.5 ms, or up to maxDelay.
func (f *faultyDB) attemptDelay() time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	d := time.Millisecond/2 + time.Duration(f.r.Int64N(int64(2*time.Millisecond)))
	if f.attempt.slow > 0 && f.r.Float64() < f.attempt.slow && !f.w.healed.Load() {
		d += time.Duration(f.r.Int64N(int64(f.attempt.maxDelay)))
	}
	return d
}

// noteUndo records that an acquisition is releasing what it wrote.
func (f *faultyDB) noteUndo(ctx context.Context, in any) {
	if id, ok := ctx.Value(acquireCallKey{}).(int); ok {
		if u, ok := in.(*dynamodb.UpdateItemInput); ok && strings.HasPrefix(aws.ToString(u.UpdateExpression), "SET #r =") {
			f.w.mu.Lock()
			f.w.undoSent[id] = true
			f.w.mu.Unlock()
		}
	}
}

func jsonResponse(status int, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Content-Type", "application/x-amz-json-1.0")
	h.Set("X-Amzn-Requestid", "sim")
	return &http.Response{StatusCode: status, Status: http.StatusText(status), Header: h, Body: io.NopCloser(bytes.NewReader(b)),
		ContentLength: int64(len(b)), ProtoMajor: 1, ProtoMinor: 1}, nil
}

// errorResponse encodes a model error as DynamoDB does: the code in
// __type, the message, and the error's own fields (a condition failure's
// Item, a cancelled transaction's CancellationReasons).
func errorResponse(err error) (*http.Response, error) {
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		return nil, err
	}
	body := map[string]any{}
	v := reflect.ValueOf(ae)
	if v.Kind() == reflect.Pointer && v.Elem().Kind() == reflect.Struct {
		if m, ok := toJSON(v).(map[string]any); ok {
			body = m
		}
	}
	delete(body, "Message")
	delete(body, "ErrorCodeOverride")
	delete(body, "Code")
	delete(body, "Fault")
	body["__type"] = "com.amazonaws.dynamodb.v20120810#" + ae.ErrorCode()
	body["message"] = ae.ErrorMessage()
	status := 400
	if ae.ErrorFault() == smithy.FaultServer {
		status = 500
	}
	return jsonResponse(status, body)
}

// modelOp decodes one operation's request and runs it on the model.
type modelOp struct {
	decode func([]byte) (any, error)
	apply  func(m *ddbmodel.Model, ctx context.Context, in any) (any, error)
}

func opOf[I, O any](call func(*ddbmodel.Model, context.Context, *I) (*O, error)) modelOp {
	return modelOp{
		decode: func(b []byte) (any, error) {
			var j any
			d := json.NewDecoder(bytes.NewReader(b))
			d.UseNumber()
			if err := d.Decode(&j); err != nil {
				return nil, err
			}
			in := new(I)
			if err := fromJSON(reflect.ValueOf(in).Elem(), j); err != nil {
				return nil, err
			}
			return in, nil
		},
		apply: func(m *ddbmodel.Model, ctx context.Context, in any) (any, error) {
			return call(m, ctx, in.(*I))
		},
	}
}

var modelOps = map[string]modelOp{
	"GetItem": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
		return m.GetItem(c, in)
	}),
	"PutItem": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
		return m.PutItem(c, in)
	}),
	"UpdateItem": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
		return m.UpdateItem(c, in)
	}),
	"DeleteItem": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.DeleteItemInput) (*dynamodb.DeleteItemOutput, error) {
		return m.DeleteItem(c, in)
	}),
	"TransactWriteItems": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return m.TransactWriteItems(c, in)
	}),
	"DescribeTable": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.DescribeTableInput) (*dynamodb.DescribeTableOutput, error) {
		return m.DescribeTable(c, in)
	}),
	"CreateTable": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.CreateTableInput) (*dynamodb.CreateTableOutput, error) {
		return m.CreateTable(c, in)
	}),
	"Query": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
		return m.Query(c, in)
	}),
	"Scan": opOf(func(m *ddbmodel.Model, c context.Context, in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
		return m.Scan(c, in)
	}),
}
