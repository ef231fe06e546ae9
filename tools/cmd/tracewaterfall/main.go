// Command tracewaterfall draws the README's picture of a trace: a
// contended acquisition on DynamoDB Local, traced by the OpenTelemetry SDK
// into memory, rendered as a waterfall PNG.
//
// A request span ("POST /invoices/42/settle") acquires "invoice-42" with
// Do while another client holds it, works under the lock, and releases it.
// Each DynamoDB call gets a client span from a DynamoDBClient wrapper of
// this program, named as the AWS SDK's instrumentation names its spans
// (DynamoDB.UpdateItem, ...), parented by the span in the context the
// library passes: what a program with the SDK's instrumentation sees.
//
// Usage:
//
//	go -C tools run ./cmd/tracewaterfall [-out ../docs/trace-waterfall.png] [-hold 400ms]
//
// It uses the DynamoDB Local at $DYNAMODB_ENDPOINT, or starts a private one.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/tools/internal/bench"
)

func main() {
	out := flag.String("out", "../docs/trace-waterfall.png", "the PNG to write")
	hold := flag.Duration("hold", 400*time.Millisecond, "how long the other client holds the lock after the request starts waiting")
	flag.Parse()
	if err := run(context.Background(), *out, *hold); err != nil {
		fmt.Fprintln(os.Stderr, "tracewaterfall:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, out string, hold time.Duration) error {
	e, err := bench.Open(ctx, os.Stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	table, drop, err := e.NewTable(ctx, "waterfall")
	if err != nil {
		return err
	}
	defer drop()
	sdk, err := e.NewDB(ctx)
	if err != nil {
		return err
	}
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.WithoutCancel(ctx)) }()

	holder, err := dynamolock.New(sdk, table, dynamolock.WithOwnerName("worker-b"), dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second))
	if err != nil {
		return err
	}
	defer holder.Close()
	c, err := dynamolock.New(&tracedDB{Client: sdk, tracer: tp.Tracer("dynamodb")}, table, dynamolock.WithOwnerName("worker-a"),
		dynamolock.WithTracerProvider(tp), dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	if err != nil {
		return err
	}
	defer c.Close()
	// The table check runs before a client's first write: out of the
	// picture.
	if _, err := c.AcquireLockWithContext(ctx, "warm-up"); err != nil {
		return err
	}
	exp.Reset()

	held, err := holder.AcquireLockWithContext(ctx, "invoice-42")
	if err != nil {
		return err
	}
	app := tp.Tracer("app")
	rctx, request := app.Start(ctx, "POST /invoices/42/settle", trace.WithSpanKind(trace.SpanKindServer))
	released := make(chan error, 1)
	go func() {
		time.Sleep(hold)
		_, err := holder.ReleaseLockWithContext(ctx, held)
		released <- err
	}()
	err = c.Do(rctx, "invoice-42", func(ctx context.Context, l *dynamolock.Lock) error {
		_, work := app.Start(ctx, "settle invoice (fencing token in the ledger write)")
		work.SetAttributes(attribute.Int64("dynamolock.fencing_token", int64(l.FencingToken())))
		time.Sleep(60 * time.Millisecond)
		work.End()
		return nil
	}, dynamolock.WithAdditionalTimeToWaitForLock(10*time.Second))
	request.End()
	if err != nil {
		return err
	}
	if err := <-released; err != nil {
		return err
	}
	spans := exp.GetSpans().Snapshots()
	if err := render(out, spans); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "tracewaterfall: %d spans drawn into %s\n", len(spans), out)
	return nil
}

// tracedDB makes a client span for every DynamoDB call, as the AWS SDK's
// instrumentation does, under the span of the call's context.
type tracedDB struct {
	*dynamodb.Client
	tracer trace.Tracer
}

func (d *tracedDB) span(ctx context.Context, op string) (context.Context, trace.Span) {
	return d.tracer.Start(ctx, "DynamoDB."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("rpc.system", "aws-api"), attribute.String("rpc.service", "DynamoDB"), attribute.String("rpc.method", op)))
}

func end(span trace.Span, err error) {
	if err != nil {
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (d *tracedDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	ctx, s := d.span(ctx, "GetItem")
	out, err := d.Client.GetItem(ctx, in, o...)
	end(s, err)
	return out, err
}

func (d *tracedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	ctx, s := d.span(ctx, "UpdateItem")
	out, err := d.Client.UpdateItem(ctx, in, o...)
	end(s, err)
	return out, err
}

func (d *tracedDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	ctx, s := d.span(ctx, "DescribeTable")
	out, err := d.Client.DescribeTable(ctx, in, o...)
	end(s, err)
	return out, err
}
