package integration_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// Helpers of the tracing tests: an SDK tracer provider exporting to memory,
// and a DynamoDBClient that records the span each call's context carries.

// newTracer returns a tracer provider that samples every span and keeps
// the ended ones in the exporter returned.
func newTracer(t *testing.T) (*sdktrace.TracerProvider, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return tp, exp
}

// call is one DynamoDB call as spyDB saw it.
type call struct {
	op   string
	span trace.SpanContext // the span in the call's context
}

// spyDB is the SDK's client, recording every call and the span in its
// context.
type spyDB struct {
	*dynamodb.Client
	mu    sync.Mutex
	calls []call
}

func (s *spyDB) record(ctx context.Context, op string) {
	s.mu.Lock()
	s.calls = append(s.calls, call{op: op, span: trace.SpanContextFromContext(ctx)})
	s.mu.Unlock()
}

// take returns the calls recorded since the last take.
func (s *spyDB) take() []call {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

func (s *spyDB) GetItem(ctx context.Context, in *dynamodb.GetItemInput, o ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	s.record(ctx, "GetItem")
	return s.Client.GetItem(ctx, in, o...)
}

func (s *spyDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	s.record(ctx, "UpdateItem")
	return s.Client.UpdateItem(ctx, in, o...)
}

func (s *spyDB) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, o ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	s.record(ctx, "DeleteItem")
	return s.Client.DeleteItem(ctx, in, o...)
}

func (s *spyDB) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, o ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	s.record(ctx, "TransactWriteItems")
	return s.Client.TransactWriteItems(ctx, in, o...)
}

func (s *spyDB) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, o ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	s.record(ctx, "DescribeTable")
	return s.Client.DescribeTable(ctx, in, o...)
}

// gateDB is the SDK's client whose first UpdateItem after arm is set is
// held: caught is closed when it arrives, and it is sent when open is.
type gateDB struct {
	*dynamodb.Client
	arm    atomic.Bool
	once   sync.Once
	caught chan struct{}
	open   chan struct{}
}

func (g *gateDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, o ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if g.arm.Load() {
		held := false
		g.once.Do(func() { held = true })
		if held {
			close(g.caught)
			<-g.open
		}
	}
	return g.Client.UpdateItem(ctx, in, o...)
}

// spans returns the ended spans named name.
func spans(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// only returns the one ended span named name.
func only(t *testing.T, exp *tracetest.InMemoryExporter, name string) tracetest.SpanStub {
	t.Helper()
	s := spans(exp, name)
	require.Len(t, s, 1, "spans named %s", name)
	return s[0]
}

// attrs returns a span's or an event's attributes by key.
func attrs(kvs []attribute.KeyValue) map[string]attribute.Value {
	m := make(map[string]attribute.Value, len(kvs))
	for _, kv := range kvs {
		m[string(kv.Key)] = kv.Value
	}
	return m
}

// events returns the span's events named name, as attribute maps.
func events(s tracetest.SpanStub, name string) []map[string]attribute.Value {
	var out []map[string]attribute.Value
	for _, e := range s.Events {
		if e.Name == name {
			out = append(out, attrs(e.Attributes))
		}
	}
	return out
}

// requireUnder checks that every call ran with span as the span of its
// context.
func requireUnder(t *testing.T, calls []call, span trace.SpanContext, what string) {
	t.Helper()
	require.NotEmpty(t, calls, "%s made no DynamoDB call", what)
	for _, c := range calls {
		require.Truef(t, c.span.TraceID() == span.TraceID() && c.span.SpanID() == span.SpanID(),
			"%s: %s ran under span %s, not %s", what, c.op, c.span.SpanID(), span.SpanID())
	}
}

// newMeter returns a meter provider read by the manual reader returned.
func newMeter(t *testing.T) (*sdkmetric.ManualReader, *sdkmetric.MeterProvider) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return reader, mp
}

// sumOf returns the values of the int64 sum name whose attribute key is
// value, summed (floatSumOf: a float64 sum).
func sumOf(t *testing.T, reader *sdkmetric.ManualReader, name, key, value string) int64 {
	t.Helper()
	m, ok := collect(t, reader)[name]
	require.True(t, ok, "metric %s", name)
	sum, ok := m.Data.(metricdata.Sum[int64])
	require.True(t, ok, "%s is an int64 sum: %T", name, m.Data)
	var n int64
	for _, p := range sum.DataPoints {
		if v, ok := p.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			n += p.Value
		}
	}
	return n
}

func floatSumOf(t *testing.T, reader *sdkmetric.ManualReader, name, key, value string) float64 {
	t.Helper()
	m, ok := collect(t, reader)[name]
	require.True(t, ok, "metric %s", name)
	sum, ok := m.Data.(metricdata.Sum[float64])
	require.True(t, ok, "%s is a float64 sum: %T", name, m.Data)
	var n float64
	for _, p := range sum.DataPoints {
		if v, ok := p.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			n += p.Value
		}
	}
	return n
}

func histogramOf(t *testing.T, reader *sdkmetric.ManualReader, name, key, value string) metricdata.HistogramDataPoint[float64] {
	t.Helper()
	m, ok := collect(t, reader)[name]
	require.True(t, ok, "metric %s", name)
	h, ok := m.Data.(metricdata.Histogram[float64])
	require.True(t, ok, "%s is a float64 histogram: %T", name, m.Data)
	for _, p := range h.DataPoints {
		if v, ok := p.Attributes.Value(attribute.Key(key)); ok && v.AsString() == value {
			return p
		}
	}
	t.Fatalf("%s has no data point with %s=%s", name, key, value)
	return metricdata.HistogramDataPoint[float64]{}
}

// assertNoKeyAttributes checks that no data point of any metric has a
// lock's key among its attributes, by name or by value.
func assertNoKeyAttributes(t *testing.T, reader *sdkmetric.ManualReader, keys ...string) {
	t.Helper()
	check := func(name string, set attribute.Set) {
		for _, kv := range set.ToSlice() {
			assert.NotContains(t, []string{"key", "dynamolock.key"}, string(kv.Key), "%s has a key attribute", name)
			for _, k := range keys {
				assert.NotEqual(t, k, kv.Value.String(), "%s has the key %q as the value of %s", name, k, kv.Key)
			}
		}
	}
	for name, m := range collect(t, reader) {
		switch d := m.Data.(type) {
		case metricdata.Sum[int64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes)
			}
		case metricdata.Sum[float64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes)
			}
		case metricdata.Gauge[int64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes)
			}
		case metricdata.Histogram[float64]:
			for _, p := range d.DataPoints {
				check(name, p.Attributes)
			}
		}
	}
}
