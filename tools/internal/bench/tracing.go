package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/arielsrv/dynamolock/v2"
)

// TracingResult is what tracing costs an acquisition and its release: one
// sample per configuration, the rounds interleaved so that each sees the
// same load on the shared machine.
type TracingResult struct {
	Samples int
	Configs []TracingConfig
}

// TracingConfig is one configuration's sample of acquire+release.
type TracingConfig struct {
	Name string
	D    Dist
}

// tracingSetup is a configuration measured: the client's option, and what
// to shut down after.
type tracingSetup struct {
	name string
	opts []dynamolock.ClientOption
	stop func()
}

// discardExporter takes spans and keeps none: the cost of the library and
// the SDK's batching, without a collector's.
type discardExporter struct{}

func (discardExporter) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardExporter) Shutdown(context.Context) error                             { return nil }

// MeasureTracing times n rounds of one free lock's acquisition and release
// (a fresh key each), by a client with no tracer provider (the global one,
// which makes no span: "off"), and by clients with the OpenTelemetry SDK's
// provider batching to an exporter that discards: sampling one trace in
// ten (ParentBased(TraceIDRatioBased(0.1)), a production setting) and
// every trace. Each round runs the configurations in turn, in an order that
// rotates from round to round.
func MeasureTracing(ctx context.Context, e *Env, n int) (*TracingResult, error) {
	table, drop, err := e.NewTable(ctx, "tracing")
	if err != nil {
		return nil, err
	}
	defer drop()
	db, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	provider := func(s sdktrace.Sampler) *sdktrace.TracerProvider {
		return sdktrace.NewTracerProvider(sdktrace.WithSampler(s), sdktrace.WithBatcher(discardExporter{}))
	}
	sampled := provider(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1)))
	all := provider(sdktrace.AlwaysSample())
	setups := []tracingSetup{
		{name: "tracing off (no provider)"},
		{name: "tracing on, 1 trace in 10 sampled", opts: []dynamolock.ClientOption{dynamolock.WithTracerProvider(sampled)},
			stop: func() { _ = sampled.Shutdown(context.WithoutCancel(ctx)) }},
		{name: "tracing on, every trace sampled", opts: []dynamolock.ClientOption{dynamolock.WithTracerProvider(all)},
			stop: func() { _ = all.Shutdown(context.WithoutCancel(ctx)) }},
	}
	clients := make([]*dynamolock.Client, len(setups))
	for i, s := range setups {
		if s.stop != nil {
			defer s.stop()
		}
		c, err := dynamolock.New(db, table, append(s.opts, dynamolock.DisableHeartbeat())...)
		if err != nil {
			return nil, err
		}
		defer c.Close()
		clients[i] = c
	}
	samples := make([][]time.Duration, len(setups))
	const warmup = 50
	for r := range warmup + n {
		for j := range setups {
			i := (r + j) % len(setups)
			key := "tr-" + strconv.Itoa(i) + "-" + strconv.Itoa(r)
			t := time.Now()
			l, err := clients[i].AcquireLockWithContext(ctx, key)
			if err != nil {
				return nil, fmt.Errorf("%s: acquire: %w", setups[i].name, err)
			}
			if _, err := clients[i].ReleaseLockWithContext(ctx, l); err != nil {
				return nil, fmt.Errorf("%s: release: %w", setups[i].name, err)
			}
			if r >= warmup {
				samples[i] = append(samples[i], time.Since(t))
			}
		}
	}
	res := &TracingResult{Samples: n}
	for i, s := range setups {
		res.Configs = append(res.Configs, TracingConfig{Name: s.name, D: NewDist(samples[i])})
	}
	return res, nil
}

// Markdown is the result as a table, p50 to p99 of acquire+release and the
// p50's difference with tracing off.
func (r *TracingResult) Markdown(cmd string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Acquire and release of a free lock, %d rounds on DynamoDB Local (`%s`):\n\n", r.Samples, cmd)
	b.WriteString("| configuration | p50 ms | p90 ms | p99 ms | p50 vs off |\n|---|---|---|---|---|\n")
	off := r.Configs[0].D.Q(0.5)
	for _, c := range r.Configs {
		p50 := c.D.Q(0.5)
		diff := "—"
		if c.Name != r.Configs[0].Name && off > 0 {
			diff = fmt.Sprintf("%+.1f %%", 100*(float64(p50)-float64(off))/float64(off))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", c.Name, ms(p50), ms(c.D.Q(0.9)), ms(c.D.Q(0.99)), diff)
	}
	return b.String()
}
