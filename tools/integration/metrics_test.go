package integration_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/arielsrv/dynamolock/v2"
)

func TestMetricsAndLogs(t *testing.T) {
	table := newTable(t, "")
	db := newDB(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })
	var buf syncBuffer
	logger := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, db, table, append(fast, dynamolock.WithMeterProvider(mp), dynamolock.WithSlog(logger))...)

	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	_, err = c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked(), dynamolock.WithReentrant())
	require.NoError(t, err)
	waitFor(t, 20*time.Second, "a heartbeat", func() bool { return c.Stats().HeartbeatsSent >= 1 }) // a poll: 250 ms apart when idle; DynamoDB Local beside three other test processes once took more than 5 s
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
	})
	require.True(t, closedWithin(l.Done(), 3*time.Second))
	l2, err := c.AcquireLockWithContext(ctx, "k2")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l2)
	require.NoError(t, err)

	collect := func() map[string]int64 {
		var rm metricdata.ResourceMetrics
		require.NoError(t, reader.Collect(ctx, &rm))
		sums := map[string]int64{}
		for _, sm := range rm.ScopeMetrics {
			for _, m := range sm.Metrics {
				switch d := m.Data.(type) {
				case metricdata.Sum[int64]:
					for _, p := range d.DataPoints {
						key := m.Name
						for _, kv := range p.Attributes.ToSlice() {
							key += "|" + string(kv.Key) + "=" + kv.Value.String()
						}
						sums[key] += p.Value
					}
				case metricdata.Gauge[int64]:
					sums[m.Name] = d.DataPoints[0].Value
				case metricdata.Histogram[float64]:
					for _, p := range d.DataPoints {
						sums[m.Name] += int64(p.Count)
					}
				}
			}
		}
		return sums
	}
	// Done closes as the lock ends; its loss is logged and counted just
	// after (Lock.lose): wait for them rather than race them.
	waitFor(t, 5*time.Second, "the loss logged and counted", func() bool {
		sums := collect()
		return sums["dynamolock.locks.lost|cause=taken_over"] == 1 && sums["dynamolock.heartbeats|outcome=lost"] == 1 &&
			strings.Contains(buf.String(), `"msg":"lock lost"`)
	})
	sums := collect()
	assert.Equal(t, int64(3), sums["dynamolock.acquisitions|outcome=acquired"])
	assert.Equal(t, int64(3), sums["dynamolock.acquire.duration"])
	assert.GreaterOrEqual(t, sums["dynamolock.heartbeats|outcome=ok"], int64(1))
	assert.Equal(t, int64(1), sums["dynamolock.heartbeats|outcome=lost"])
	assert.Equal(t, int64(1), sums["dynamolock.locks.lost|cause=taken_over"])
	assert.Equal(t, int64(0), sums["dynamolock.locks.held"])
	assert.GreaterOrEqual(t, sums["dynamolock.dynamodb.calls|operation=UpdateItem"], int64(4))

	logs := buf.String()
	for _, msg := range []string{"lock acquired", "lock lost", "lock released"} {
		assert.Contains(t, logs, `"msg":"`+msg+`"`)
	}
	assert.Contains(t, logs, `"key":"k"`)
	assert.Contains(t, logs, `"owner":"`+c.OwnerName()+`"`)
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// collect reads every metric of the reader by name.
func collect(t *testing.T, reader *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

// Names, units, kinds and histogram buckets follow the OpenTelemetry
// conventions: seconds with buckets that tell a millisecond acquisition
// from a second-long one, counts annotated with what they count, and locks
// held as an additive (up-down) sum.
func TestMetricsFollowTheConventions(t *testing.T) {
	table := newTable(t, "")
	db := newDB(t)
	ctx := context.Background()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(ctx) })
	// A lease long enough not to be lost on a loaded machine.
	c := newClient(t, db, table, dynamolock.WithLeaseDuration(5*time.Second), dynamolock.WithHeartbeatPeriod(250*time.Millisecond),
		dynamolock.WithMeterProvider(mp))
	other := newClient(t, db, table, dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(500*time.Millisecond))

	// One quick acquisition (on a warm connection), and one that waits for a
	// live holder until it gives up (lease 3 s + additional 1 s).
	_, err := other.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	l, err := c.AcquireLockWithContext(ctx, "quick")
	require.NoError(t, err)
	_, err = c.AcquireLockWithContext(ctx, "held", dynamolock.WithRefreshPeriod(100*time.Millisecond))
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te)
	waitFor(t, 20*time.Second, "a heartbeat", func() bool { return c.Stats().HeartbeatsSent >= 1 }) // a poll: 250 ms apart when idle; DynamoDB Local beside three other test processes once took more than 5 s

	m := collect(t, reader)
	for name, unit := range map[string]string{
		"dynamolock.acquisitions":     "{acquisition}",
		"dynamolock.acquire.duration": "s",
		"dynamolock.heartbeats":       "{heartbeat}",
		"dynamolock.locks.held":       "{lock}",
		"dynamolock.dynamodb.calls":   "{call}",
	} {
		require.Contains(t, m, name)
		assert.Equal(t, unit, m[name].Unit, name)
		assert.NotEmpty(t, m[name].Description, name)
	}

	hist, ok := m["dynamolock.acquire.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok, "acquire.duration is a float64 histogram: %T", m["dynamolock.acquire.duration"].Data)
	bounds := []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120}
	buckets := map[string]int{} // outcome → index of the bucket holding its one value
	for _, p := range hist.DataPoints {
		assert.Equal(t, bounds, p.Bounds)
		require.Equal(t, uint64(1), p.Count)
		outcome, _ := p.Attributes.Value("outcome")
		for i, n := range p.BucketCounts {
			if n == 1 {
				buckets[outcome.AsString()] = i
				// Bucket i holds (bounds[i-1], bounds[i]].
				if i > 0 {
					assert.Greater(t, p.Sum, bounds[i-1])
				}
				if i < len(bounds) {
					assert.LessOrEqual(t, p.Sum, bounds[i])
				}
			}
		}
		if outcome.AsString() == "timeout" {
			assert.GreaterOrEqual(t, p.Sum, 4.0, "seconds: the wait lasted the holder's lease + 1 s")
		}
	}
	require.Contains(t, buckets, "acquired")
	require.Contains(t, buckets, "timeout")
	// The SDK's default buckets (0, 5, 10, ...) would put both in one.
	assert.Less(t, buckets["acquired"], buckets["timeout"], "a quick acquisition and a 4 s wait fall in different buckets")

	for _, name := range []string{"dynamolock.acquisitions", "dynamolock.heartbeats", "dynamolock.dynamodb.calls"} {
		sum, ok := m[name].Data.(metricdata.Sum[int64])
		require.True(t, ok, "%s is an int64 sum: %T", name, m[name].Data)
		assert.True(t, sum.IsMonotonic, "%s is a counter", name)
	}
	held := func() metricdata.Sum[int64] {
		sum, ok := collect(t, reader)["dynamolock.locks.held"].Data.(metricdata.Sum[int64])
		require.True(t, ok, "locks.held is an int64 sum")
		return sum
	}
	h := held()
	assert.False(t, h.IsMonotonic, "locks.held is an up-down counter")
	require.Len(t, h.DataPoints, 1)
	assert.Equal(t, int64(1), h.DataPoints[0].Value)

	_, err = c.ReleaseLockWithContext(ctx, l)
	require.NoError(t, err)
	assert.Equal(t, int64(0), held().DataPoints[0].Value)

	// A lost lock: counted in {lock}.
	thief := newClient(t, db, table, fast...)
	lost, err := c.AcquireLockWithContext(ctx, "lost")
	require.NoError(t, err)
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("lost"), "ownerName": s(thief.OwnerName()), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
	})
	require.True(t, closedWithin(lost.Done(), 3*time.Second))
	// The loss is counted just after Done closes.
	var ll metricdata.Metrics
	// Wait for the count itself, not only the instrument: the SDK may show
	// a data point whose value is still being added while Collect runs.
	waitFor(t, 3*time.Second, "the loss to be counted", func() bool {
		var ok bool
		ll, ok = collect(t, reader)["dynamolock.locks.lost"]
		if !ok {
			return false
		}
		sum, ok := ll.Data.(metricdata.Sum[int64])
		return ok && len(sum.DataPoints) == 1 && sum.DataPoints[0].Value >= 1
	})
	assert.Equal(t, "{lock}", ll.Unit)
	lostSum, ok := ll.Data.(metricdata.Sum[int64])
	require.True(t, ok, "locks.lost is an int64 sum")
	assert.True(t, lostSum.IsMonotonic)
	require.Len(t, lostSum.DataPoints, 1)
	assert.Equal(t, int64(1), lostSum.DataPoints[0].Value)
	cause, _ := lostSum.DataPoints[0].Attributes.Value("cause")
	assert.Equal(t, "taken_over", cause.AsString())
}
