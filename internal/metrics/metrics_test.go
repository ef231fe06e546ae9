package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/embedded"
	"go.opentelemetry.io/otel/metric/noop"
)

// The counters behind Stats count the same with instruments or without.
func TestSnapshotCounts(t *testing.T) {
	ctx := context.Background()
	for _, mp := range []metric.MeterProvider{nil, noop.NewMeterProvider()} {
		s, errs := New(mp, "test", func() int64 { return 0 })
		if len(errs) > 0 {
			t.Fatal(errs)
		}
		s.Call(ctx, "GetItem")
		s.Call(ctx, "UpdateItem")
		s.Heartbeat(ctx, "ok")
		s.Heartbeat(ctx, "error")
		s.Heartbeat(ctx, "lost") // counted by Lost, not here
		s.Lost("lease_expired")
		s.Throttled(ctx, "GetItem", 1, "key_range")
		s.Throttled(ctx, "GetItem", Limits, "other") // counted in all only
		s.LateBeat()
		s.AdmissionWait()
		s.SetBacklog(7)
		s.WaitStarted(ctx, "lock")
		s.WaitStarted(ctx, "lock")
		s.WaitEnded(ctx, "lock", "acquired")
		s.Held(2*time.Second, false)
		s.Held(time.Second, true)
		s.Consumed(ctx, "UpdateItem", 1.5, false)
		s.Consumed(ctx, "UpdateItem", 2, true)
		s.Consumed(ctx, "UpdateItem", 0, false) // nothing
		s.Acquired(ctx, "acquired", time.Millisecond)
		got := s.Snapshot()
		want := Snapshot{
			Backlog: 7, BeatsOK: 1, BeatsErr: 1, Late: 1, Lost: 1, Calls: 2, AdmissionWaits: 1,
			Throttled: 2, ThrottledBy: [Limits]uint64{0, 1, 0, 0, 0},
			Waiters: 1, Contended: 1, Holds: 2, HoldTime: 3 * time.Second, Reported: 1.5, Estimated: 2,
		}
		if got != want {
			t.Errorf("with provider %T:\n got %+v\nwant %+v", mp, got, want)
		}
	}
}

// A provider whose instruments cannot be made: New says which, in the
// order they are made, and returns no Set.
func TestNewReportsEveryInstrumentItCannotMake(t *testing.T) {
	s, errs := New(failingProvider{}, "test", func() int64 { return 0 })
	if s != nil {
		t.Fatal("a Set despite the errors")
	}
	// 6 Int64Counters and 1 up-down counter; the histograms and the
	// others are made.
	if len(errs) != 7 {
		t.Fatalf("%d errors, want 7: %v", len(errs), errs)
	}
	for _, err := range errs {
		if !errors.Is(err, errNoInstrument) {
			t.Errorf("error %v", err)
		}
	}
}

var errNoInstrument = errors.New("no instrument")

type failingProvider struct{ embedded.MeterProvider }

func (failingProvider) Meter(string, ...metric.MeterOption) metric.Meter { return failingMeter{} }

// failingMeter makes every instrument but the integer counters and
// up-down counters.
type failingMeter struct{ noop.Meter }

func (failingMeter) Int64Counter(string, ...metric.Int64CounterOption) (metric.Int64Counter, error) {
	return nil, errNoInstrument
}

func (failingMeter) Int64UpDownCounter(string, ...metric.Int64UpDownCounterOption) (metric.Int64UpDownCounter, error) {
	return nil, errNoInstrument
}
