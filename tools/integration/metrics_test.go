package integration_test

import (
	"bytes"
	"context"
	"log/slog"
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
	waitFor(t, 5*time.Second, "a heartbeat", func() bool { return c.Stats().HeartbeatsSent >= 1 })
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
	})
	require.True(t, closedWithin(l.Done(), 3*time.Second))
	l2, err := c.AcquireLockWithContext(ctx, "k2")
	require.NoError(t, err)
	_, err = c.ReleaseLockWithContext(ctx, l2)
	require.NoError(t, err)

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
