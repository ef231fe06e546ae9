package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// An acquisition is one dynamolock.acquire span, a child of the caller's
// span, and every DynamoDB call it makes (the table check's DescribeTable,
// the acquiring UpdateItem) runs with it in its context, so that the AWS
// SDK's own spans nest under it. A release is one dynamolock.release span.
func TestAcquireSpanIsTheParentOfItsDynamoDBCalls(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	db := &spyDB{Client: newDB(t)}
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))

	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")
	l, err := c.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	assert.Equal(t, parent.SpanContext().SpanID(), acq.Parent.SpanID(), "a child of the caller's span")
	assert.Equal(t, trace.SpanKindInternal, acq.SpanKind)
	calls := db.take()
	requireUnder(t, calls, acq.SpanContext, "the acquisition")
	assert.Equal(t, []string{"DescribeTable", "UpdateItem"}, ops(calls))
	a := attrs(acq.Attributes)
	assert.Equal(t, []string{table}, a["aws.dynamodb.table_names"].AsStringSlice())
	assert.Equal(t, "k", a["dynamolock.key"].AsString())
	assert.Equal(t, "lock", a["dynamolock.kind"].AsString())
	assert.Equal(t, c.OwnerName(), a["dynamolock.owner"].AsString())
	assert.Equal(t, "acquired", a["dynamolock.outcome"].AsString())
	assert.Equal(t, int64(1), a["dynamolock.attempts"].AsInt64())
	assert.False(t, a["dynamolock.contended"].AsBool())
	assert.Equal(t, int64(l.FencingToken()), a["dynamolock.fencing_token"].AsInt64())
	assert.Equal(t, codes.Unset, acq.Status.Code)
	assert.Empty(t, events(acq, "dynamolock.wait"), "an uncontended acquisition waits for nobody")

	require.NoError(t, l.Release(ctx))
	rel := only(t, exp, "dynamolock.release")
	assert.Equal(t, parent.SpanContext().SpanID(), rel.Parent.SpanID())
	requireUnder(t, db.take(), rel.SpanContext, "the release")
	r := attrs(rel.Attributes)
	assert.Equal(t, "released", r["dynamolock.outcome"].AsString())
	assert.Equal(t, "k", r["dynamolock.key"].AsString())

	// A release of a lock already released: a span that says so.
	require.ErrorIs(t, l.Release(ctx), dynamolock.ErrLockAlreadyReleased)
	rels := spans(exp, "dynamolock.release")
	require.Len(t, rels, 2)
	assert.Equal(t, "already_released", attrs(rels[1].Attributes)["dynamolock.outcome"].AsString())
	assert.Equal(t, codes.Error, rels[1].Status.Code)
	parent.End()
}

func ops(calls []call) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.op
	}
	return out
}

// A contended acquisition: its span has a wait event naming the holder
// (owner, fencing token, lease, how long at most the wait can last if the
// holder stops renewing), then a hand-over event when the holder's release
// lets it write; it is counted as a waiter while it waits and as a
// contended acquisition when it ends; and the holds and the capacity its
// calls consumed are in the metrics and Stats.
func TestContendedAcquisitionIsTracedAndCounted(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	reader, mp := newMeter(t)
	db := &spyDB{Client: newDB(t)}
	holder := newClient(t, newDB(t), table, dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithMeterProvider(mp),
		dynamolock.WithLeaseDuration(3*time.Second), dynamolock.WithHeartbeatPeriod(time.Second))
	ctx := context.Background()

	held, err := holder.AcquireLockWithContext(ctx, "k")
	require.NoError(t, err)
	type result struct {
		l   *dynamolock.Lock
		err error
	}
	done := make(chan result, 1)
	go func() {
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond))
		done <- result{l, err}
	}()
	waitFor(t, 10*time.Second, "the acquisition to wait", func() bool { return c.Stats().Waiters == 1 })
	assert.Equal(t, int64(1), sumOf(t, reader, "dynamolock.waiters", "kind", "lock"), "one waiter of kind lock")
	require.NoError(t, held.Release(ctx))
	var r result
	select {
	case r = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the released lock")
	}
	require.NoError(t, r.err)

	acq := only(t, exp, "dynamolock.acquire")
	a := attrs(acq.Attributes)
	assert.True(t, a["dynamolock.contended"].AsBool())
	assert.Equal(t, "acquired", a["dynamolock.outcome"].AsString())
	assert.GreaterOrEqual(t, a["dynamolock.attempts"].AsInt64(), int64(2), "the write that found it held, and the one that took it")
	assert.Equal(t, int64(r.l.FencingToken()), a["dynamolock.fencing_token"].AsInt64())
	waits := events(acq, "dynamolock.wait")
	require.Len(t, waits, 1, "one holder, one wait event")
	w := waits[0]
	assert.Equal(t, "holder", w["dynamolock.wait.reason"].AsString())
	assert.Equal(t, holder.OwnerName(), w["dynamolock.holder.owner"].AsString())
	assert.Equal(t, int64(held.FencingToken()), w["dynamolock.holder.fencing_token"].AsInt64())
	assert.InDelta(t, 3.0, w["dynamolock.holder.lease"].AsFloat64(), 1e-9)
	assert.Greater(t, w["dynamolock.wait.expected"].AsFloat64(), 0.0)
	assert.LessOrEqual(t, w["dynamolock.wait.expected"].AsFloat64(), 3.0, "at most the holder's lease")
	hand := events(acq, "dynamolock.handover")
	require.Len(t, hand, 1)
	assert.Equal(t, holder.OwnerName(), hand[0]["dynamolock.holder.owner"].AsString())
	assert.False(t, hand[0]["dynamolock.holder.same_process"].AsBool())
	// Every call of the wait (the failed write, the queue's place, the
	// polls, the winning write) ran under the span.
	requireUnder(t, db.take(), acq.SpanContext, "the contended acquisition")

	require.NoError(t, r.l.Release(ctx))
	st := c.Stats()
	assert.Equal(t, 0, st.Waiters)
	assert.Equal(t, uint64(1), st.ContendedAcquisitions)
	assert.Equal(t, uint64(1), st.HoldsEnded)
	assert.Greater(t, st.HoldTime, time.Duration(0))
	assert.Greater(t, st.ConsumedCapacity, 0.0)
	assert.GreaterOrEqual(t, st.UnreportedCapacity, 1.0, "the write that found the lock held: one write unit")

	assert.Equal(t, int64(0), sumOf(t, reader, "dynamolock.waiters", "kind", "lock"))
	assert.Equal(t, int64(1), sumOf(t, reader, "dynamolock.acquire.contended", "outcome", "acquired"))
	hist := histogramOf(t, reader, "dynamolock.hold.duration", "outcome", "released")
	assert.Equal(t, uint64(1), hist.Count)
	assert.InDelta(t, st.HoldTime.Seconds(), hist.Sum, 1e-6)
	reported := floatSumOf(t, reader, "dynamolock.dynamodb.consumed_capacity", "source", "reported")
	estimated := floatSumOf(t, reader, "dynamolock.dynamodb.consumed_capacity", "source", "estimated")
	assert.InDelta(t, st.ConsumedCapacity, reported, 1e-9)
	assert.InDelta(t, st.UnreportedCapacity, estimated, 1e-9)
	assertNoKeyAttributes(t, reader, "k")
}

// Every acquiring call is exactly one dynamolock.acquire span, whatever
// the recipe, and the DynamoDB calls made during it run under it.
func TestEveryAcquiringCallIsOneSpan(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	db := &spyDB{Client: newDB(t)}
	// No heartbeats: every call recorded is the call's own.
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	other := newClient(t, newDB(t), table)
	ctx := context.Background()
	_, err := other.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	sem, err := c.NewSemaphore("sem", 3)
	require.NoError(t, err)
	rw, err := c.NewRWLock("rw")
	require.NoError(t, err)
	rw2, err := c.NewRWLock("rw2")
	require.NoError(t, err)

	for _, tc := range []struct {
		name, kind, outcome string
		call                func() error
	}{
		{"AcquireLock", "lock", "acquired", func() error { _, err := c.AcquireLock("a1"); return err }},
		{"AcquireLockWithContext", "lock", "acquired", func() error { _, err := c.AcquireLockWithContext(ctx, "a2"); return err }},
		{"try-lock on a free key", "lock", "acquired", func() error {
			_, err := c.AcquireLockWithContext(ctx, "a3", dynamolock.FailIfLocked())
			return err
		}},
		{"try-lock on a held key", "lock", "not_granted", func() error {
			_, err := c.AcquireLockWithContext(ctx, "held", dynamolock.FailIfLocked())
			if err == nil {
				return errors.New("acquired a held key")
			}
			return nil
		}},
		{"Do", "lock", "acquired", func() error {
			return c.Do(ctx, "d1", func(context.Context, *dynamolock.Lock) error { return nil })
		}},
		{"AcquireLocks", "locks", "acquired", func() error { _, err := c.AcquireLocks(ctx, []string{"m1", "m2"}); return err }},
		{"Semaphore.Acquire", "semaphore", "acquired", func() error { _, err := sem.Acquire(ctx); return err }},
		{"Election.Campaign", "election", "acquired", func() error {
			_, err := c.NewElection("e1").Campaign(ctx, []byte("v"))
			return err
		}},
		{"RWLock.RLock", "rwlock.read", "acquired", func() error { _, err := rw.RLock(ctx); return err }},
		{"RWLock.Lock", "rwlock.write", "acquired", func() error { _, err := rw2.Lock(ctx); return err }},
	} {
		exp.Reset()
		db.take()
		require.NoError(t, tc.call(), tc.name)
		acq := spans(exp, "dynamolock.acquire")
		require.Len(t, acq, 1, "%s: one acquire span", tc.name)
		a := attrs(acq[0].Attributes)
		assert.Equal(t, tc.kind, a["dynamolock.kind"].AsString(), tc.name)
		assert.Equal(t, tc.outcome, a["dynamolock.outcome"].AsString(), tc.name)
		calls := db.take()
		if tc.name == "Do" {
			// Do's release follows, in a span of its own.
			rel := only(t, exp, "dynamolock.release")
			n := len(calls) - 1
			assert.Equal(t, "UpdateItem", calls[n].op)
			requireUnder(t, calls[n:], rel.SpanContext, "Do's release")
			calls = calls[:n]
		}
		requireUnder(t, calls, acq[0].SpanContext, tc.name)
	}
}

// A campaign that waits across several timeouts of its acquisitions (the
// leader keeps renewing) is still one span, with one wait event for the
// one leader it waited behind.
func TestCampaignAcrossTimeoutsIsOneSpan(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	reader, mp := newMeter(t)
	leader := newClient(t, newDB(t), table, fast...)
	c := newClient(t, newDB(t), table, dynamolock.WithTracerProvider(tp), dynamolock.WithMeterProvider(mp), dynamolock.WithHeartbeatPeriod(0))
	ctx := context.Background()
	lead, err := leader.NewElection("e").Campaign(ctx, []byte("1"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.NewElection("e").Campaign(ctx, []byte("2"), dynamolock.WithAdditionalTimeToWaitForLock(100*time.Millisecond),
			dynamolock.WithRefreshPeriod(100*time.Millisecond))
		done <- err
	}()
	// The candidate's acquisitions time out after the leader's lease (1 s)
	// plus 100 ms: wait for two of them.
	waitFor(t, 15*time.Second, "two acquisitions of the campaign to time out", func() bool {
		m, ok := collect(t, reader)["dynamolock.acquisitions"]
		return ok && m.Data != nil && sumOf(t, reader, "dynamolock.acquisitions", "outcome", "timeout") >= 2
	})
	require.Empty(t, spans(exp, "dynamolock.acquire"), "the campaign is still on")
	require.NoError(t, lead.Release(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the candidate did not win")
	}
	acq := only(t, exp, "dynamolock.acquire")
	a := attrs(acq.Attributes)
	assert.Equal(t, "election", a["dynamolock.kind"].AsString())
	assert.True(t, a["dynamolock.contended"].AsBool())
	assert.Len(t, events(acq, "dynamolock.wait"), 1, "one leader waited behind")
	assert.Len(t, events(acq, "dynamolock.handover"), 1)
}

// The ordering behind a flaky run: the leader's release lands just as the
// candidate's campaign starts its next acquisition, whose first write (sent
// before it read the key) wins. That is a hand-over of the key the campaign
// waited behind, as much as one seen by a read.
func TestCampaignWonByANewAcquisitionsFirstWriteIsAHandover(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	reader, mp := newMeter(t)
	leader := newClient(t, newDB(t), table, fast...)
	gate := &gateDB{Client: newDB(t), caught: make(chan struct{}), open: make(chan struct{})}
	c := newClient(t, gate, table, dynamolock.WithTracerProvider(tp), dynamolock.WithMeterProvider(mp), dynamolock.WithHeartbeatPeriod(0))
	ctx := context.Background()
	lead, err := leader.NewElection("e").Campaign(ctx, []byte("1"))
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		_, err := c.NewElection("e").Campaign(ctx, []byte("2"), dynamolock.WithAdditionalTimeToWaitForLock(100*time.Millisecond),
			dynamolock.WithRefreshPeriod(100*time.Millisecond))
		done <- err
	}()
	waitFor(t, 15*time.Second, "an acquisition of the campaign to time out", func() bool {
		m, ok := collect(t, reader)["dynamolock.acquisitions"]
		return ok && m.Data != nil && sumOf(t, reader, "dynamolock.acquisitions", "outcome", "timeout") >= 1
	})
	// While the leader holds, the candidate only reads: the next write it
	// sends is the first of a new acquisition. Hold it, release the leader,
	// then let it go.
	gate.arm.Store(true)
	select {
	case <-gate.caught:
	case <-time.After(15 * time.Second):
		t.Fatal("the campaign sent no write")
	}
	require.NoError(t, lead.Release(ctx))
	close(gate.open)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the candidate did not win")
	}
	acq := only(t, exp, "dynamolock.acquire")
	hand := events(acq, "dynamolock.handover")
	require.Len(t, hand, 1)
	assert.Equal(t, "holder", hand[0]["dynamolock.wait.reason"].AsString())
	assert.Empty(t, events(acq, "dynamolock.takeover"))
}

// ResumeLock is an acquiring call: one span of kind resume, its one
// conditional write under it, the new fencing token on it.
func TestResumeLockIsOneSpan(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	old := newClient(t, newDB(t), table, dynamolock.WithHeartbeatPeriod(0))
	l, err := old.AcquireLockWithContext(context.Background(), "r")
	require.NoError(t, err)
	token := l.ResumeToken()
	db := &spyDB{Client: newDB(t)}
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	resumed, err := c.ResumeLock(context.Background(), token)
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	a := attrs(acq.Attributes)
	assert.Equal(t, "resume", a["dynamolock.kind"].AsString())
	assert.Equal(t, "r", a["dynamolock.key"].AsString())
	assert.Equal(t, "acquired", a["dynamolock.outcome"].AsString())
	assert.Equal(t, int64(resumed.FencingToken()), a["dynamolock.fencing_token"].AsInt64())
	assert.Equal(t, int64(1), a["dynamolock.attempts"].AsInt64(), "one conditional write")
	calls := db.take()
	require.NotEmpty(t, calls)
	requireUnder(t, calls, acq.SpanContext, "the resume")
	require.NoError(t, resumed.Close())
}

// A malformed token is bad input: still one span, its outcome invalid.
func TestResumeLockRefusedIsOneSpan(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	c := newClient(t, newDB(t), table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	_, err := c.ResumeLock(context.Background(), "not a token")
	require.Error(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	a := attrs(acq.Attributes)
	assert.Equal(t, "resume", a["dynamolock.kind"].AsString())
	assert.NotEqual(t, "acquired", a["dynamolock.outcome"].AsString())
	assert.Equal(t, int64(0), a["dynamolock.attempts"].AsInt64())
}

// A takeover whose answer was lost, claimed by the call's next read (the
// item carries its write): still a takeover event. The event used to be
// dropped with the lost answer.
func TestTakeoverWhoseAnswerWasLostIsAnEvent(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	db := faults.Wrap(newDB(t))
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	putRaw(t, newDB(t), table, map[string]types.AttributeValue{
		"key": s("dead"), "ownerName": s("crashed"), "leaseDuration": s("300ms"), "recordVersionNumber": s("r1"),
	})
	takesOver := func(in any) bool { // the write conditioned on the dead holder's RVN
		for _, v := range in.(*dynamodb.UpdateItemInput).ExpressionAttributeValues {
			if sv, ok := v.(*types.AttributeValueMemberS); ok && sv.Value == "r1" {
				return true
			}
		}
		return false
	}
	db.Add(&faults.Rule{Op: "UpdateItem", Match: takesOver, Times: 1, LoseAnswer: true})
	_, err := c.AcquireLockWithContext(context.Background(), "dead", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	over := events(acq, "dynamolock.takeover")
	require.Len(t, over, 1, "the takeover the call claimed")
	assert.Equal(t, "crashed", over[0]["dynamolock.holder.owner"].AsString())
	assert.Empty(t, events(acq, "dynamolock.handover"))
}

// A reader that takes a read/write lock from a dead writer takes it over:
// a takeover event, not a hand-over (the kind's own rule says the writer is
// dead, not the stale flag).
func TestReaderTakingADeadWritersLockIsATakeover(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	c := newClient(t, newDB(t), table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	putRaw(t, newDB(t), table, map[string]types.AttributeValue{
		"key": s("rw"), "ownerName": s("crashed"), "leaseDuration": s("300ms"), "recordVersionNumber": s("r1"),
	})
	rw, err := c.NewRWLock("rw")
	require.NoError(t, err)
	r, err := rw.RLock(context.Background(), dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	over := events(acq, "dynamolock.takeover")
	require.Len(t, over, 1)
	assert.Equal(t, "crashed", over[0]["dynamolock.holder.owner"].AsString())
	assert.Empty(t, events(acq, "dynamolock.handover"), "a takeover is not a hand-over")
	require.NoError(t, r.Close())
}

// A holder seen unchanged for its lease is taken over: the span says so.
func TestTakeoverOfADeadHolderIsAnEvent(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	db := newDB(t)
	c := newClient(t, db, table, dynamolock.WithTracerProvider(tp), dynamolock.WithHeartbeatPeriod(0))
	putRaw(t, db, table, map[string]types.AttributeValue{
		"key": s("dead"), "ownerName": s("crashed"), "leaseDuration": s("300ms"), "recordVersionNumber": s("r1"),
	})
	_, err := c.AcquireLockWithContext(context.Background(), "dead", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	over := events(acq, "dynamolock.takeover")
	require.Len(t, over, 1)
	assert.Equal(t, "crashed", over[0]["dynamolock.holder.owner"].AsString())
	assert.GreaterOrEqual(t, over[0]["dynamolock.holder.unchanged_for"].AsFloat64(), 0.3)
	assert.Empty(t, events(acq, "dynamolock.handover"), "a takeover is not a hand-over")
}

// No span per healthy heartbeat; a heartbeat that failed is a span of its
// own, linked to the acquisition, and so is the loss. A loss while Do runs
// is an event on the span of Do's caller.
func TestLossAndFailedHeartbeatAreSpans(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	db := newDB(t)
	c := newClient(t, db, table, append(fast, dynamolock.WithTracerProvider(tp))...)
	ctx, parent := tp.Tracer("test").Start(context.Background(), "request")

	err := c.Do(ctx, "k", func(ctx context.Context, l *dynamolock.Lock) error {
		waitFor(t, 5*time.Second, "two healthy heartbeats", func() bool { return c.Stats().HeartbeatsSent >= 2 })
		require.Empty(t, spans(exp, "dynamolock.heartbeat"), "no span for a healthy heartbeat")
		putRaw(t, db, table, map[string]types.AttributeValue{
			"key": s("k"), "ownerName": s("thief"), "leaseDuration": s("20s"), "recordVersionNumber": s("x"),
		})
		<-ctx.Done()
		return context.Cause(ctx)
	})
	require.ErrorIs(t, err, dynamolock.ErrLockLost)
	parent.End()

	acq := only(t, exp, "dynamolock.acquire")
	beat := only(t, exp, "dynamolock.heartbeat")
	assert.Equal(t, codes.Error, beat.Status.Code)
	assert.Equal(t, "lost", attrs(beat.Attributes)["dynamolock.outcome"].AsString())
	assert.False(t, beat.Parent.IsValid(), "a background heartbeat's span is a root")
	requireLinked(t, beat, acq)
	lost := only(t, exp, "dynamolock.lock.lost")
	la := attrs(lost.Attributes)
	assert.Equal(t, "taken_over", la["dynamolock.lost.cause"].AsString())
	assert.Equal(t, "k", la["dynamolock.key"].AsString())
	assert.Greater(t, la["dynamolock.hold.duration"].AsFloat64(), 0.0)
	requireLinked(t, lost, acq)

	req := only(t, exp, "request")
	lostEvents := events(req, "dynamolock.lock.lost")
	require.Len(t, lostEvents, 1, "the loss on the span of Do's caller")
	assert.Equal(t, "taken_over", lostEvents[0]["dynamolock.lost.cause"].AsString())
	// Do's release found the loss: its span says lost.
	assert.Equal(t, "lost", attrs(only(t, exp, "dynamolock.release").Attributes)["dynamolock.outcome"].AsString())
}

func requireLinked(t *testing.T, s, to tracetest.SpanStub) {
	t.Helper()
	require.Len(t, s.Links, 1, "%s links to the acquisition", s.Name)
	assert.Equal(t, to.SpanContext.SpanID(), s.Links[0].SpanContext.SpanID())
}

// A waiter of the same client as the holder: its wait event says the
// holder is in this process, and the release here hands the key over to it
// (same_process true). A writer behind a read/write lock's readers waits
// behind "readers".
func TestWaitsInProcessAndBehindReaders(t *testing.T) {
	table := newTable(t, "")
	tp, exp := newTracer(t)
	c := newClient(t, newDB(t), table, dynamolock.WithTracerProvider(tp), dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second))
	ctx := context.Background()

	held, err := c.AcquireLockWithContext(ctx, "here")
	require.NoError(t, err)
	exp.Reset()
	done := make(chan error, 1)
	go func() {
		_, err := c.AcquireLockWithContext(ctx, "here")
		done <- err
	}()
	waitFor(t, 10*time.Second, "the waiter", func() bool { return c.Stats().Waiters == 1 })
	require.NoError(t, held.Release(ctx))
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock")
	}
	acqs := spans(exp, "dynamolock.acquire")
	require.Len(t, acqs, 1)
	waits := events(acqs[0], "dynamolock.wait")
	require.NotEmpty(t, waits)
	assert.Equal(t, c.OwnerName(), waits[0]["dynamolock.holder.owner"].AsString())
	assert.True(t, waits[0]["dynamolock.holder.same_process"].AsBool())
	hand := events(acqs[0], "dynamolock.handover")
	require.Len(t, hand, 1)
	assert.True(t, hand[0]["dynamolock.holder.same_process"].AsBool(), "handed over in this process")

	other := newClient(t, newDB(t), table)
	rwOther, err := other.NewRWLock("rw")
	require.NoError(t, err)
	reader, err := rwOther.RLock(ctx)
	require.NoError(t, err)
	rw, err := c.NewRWLock("rw")
	require.NoError(t, err)
	exp.Reset()
	wrote := make(chan error, 1)
	go func() {
		_, err := rw.Lock(ctx, dynamolock.WithRefreshPeriod(50*time.Millisecond))
		wrote <- err
	}()
	waitFor(t, 10*time.Second, "the writer to wait", func() bool { return c.Stats().Waiters == 1 })
	require.NoError(t, rwOther.RUnlock(ctx, reader))
	select {
	case err := <-wrote:
		require.NoError(t, err)
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not get the lock")
	}
	acq := only(t, exp, "dynamolock.acquire")
	assert.Equal(t, "rwlock.write", attrs(acq.Attributes)["dynamolock.kind"].AsString())
	waits = events(acq, "dynamolock.wait")
	require.NotEmpty(t, waits)
	assert.Equal(t, "readers", waits[0]["dynamolock.wait.reason"].AsString())
	assert.Equal(t, int64(1), waits[0]["dynamolock.holder.readers"].AsInt64())
}

// The new metrics are named, typed and described as the others are.
func TestContentionMetricsFollowTheConventions(t *testing.T) {
	table := newTable(t, "")
	reader, mp := newMeter(t)
	c := newClient(t, newDB(t), table, dynamolock.WithMeterProvider(mp), dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(time.Second))
	other := newClient(t, newDB(t), table, dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(250*time.Millisecond))
	ctx := context.Background()
	_, err := other.AcquireLockWithContext(ctx, "held")
	require.NoError(t, err)
	_, err = c.AcquireLockWithContext(ctx, "held", dynamolock.WithAdditionalTimeToWaitForLock(100*time.Millisecond))
	var te *dynamolock.TimeoutError
	require.ErrorAs(t, err, &te)
	l, err := c.AcquireLockWithContext(ctx, "free")
	require.NoError(t, err)
	require.NoError(t, l.Release(ctx))

	m := collect(t, reader)
	for name, unit := range map[string]string{
		"dynamolock.waiters":                    "{call}",
		"dynamolock.acquire.contended":          "{acquisition}",
		"dynamolock.hold.duration":              "s",
		"dynamolock.dynamodb.consumed_capacity": "{capacity_unit}",
	} {
		require.Contains(t, m, name)
		assert.Equal(t, unit, m[name].Unit, name)
		assert.NotEmpty(t, m[name].Description, name)
	}
	w, ok := m["dynamolock.waiters"].Data.(metricdata.Sum[int64])
	require.True(t, ok)
	assert.False(t, w.IsMonotonic, "waiters go up and down")
	assert.Equal(t, int64(1), sumOf(t, reader, "dynamolock.acquire.contended", "outcome", "timeout"))
	h, ok := m["dynamolock.hold.duration"].Data.(metricdata.Histogram[float64])
	require.True(t, ok)
	require.Len(t, h.DataPoints, 1)
	assert.Equal(t, []float64{0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 1800, 3600, 7200, 21600, 86400}, h.DataPoints[0].Bounds)
	capacity, ok := m["dynamolock.dynamodb.consumed_capacity"].Data.(metricdata.Sum[float64])
	require.True(t, ok)
	assert.True(t, capacity.IsMonotonic)
	assert.Positive(t, floatSumOf(t, reader, "dynamolock.dynamodb.consumed_capacity", "operation", "GetItem"), "the polls' reads")
	assert.Positive(t, floatSumOf(t, reader, "dynamolock.dynamodb.consumed_capacity", "operation", "UpdateItem"))
	assertNoKeyAttributes(t, reader, "held", "free")
}

// Without WithTracerProvider, the client traces through the global
// provider, as OpenTelemetry's instrumentation libraries do, also one
// installed after New.
func TestGlobalTracerProviderIsTheDefault(t *testing.T) {
	table := newTable(t, "")
	c := newClient(t, newDB(t), table, dynamolock.WithHeartbeatPeriod(0))
	tp, exp := newTracer(t)
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() { otel.SetTracerProvider(prev) })
	_, err := c.AcquireLockWithContext(context.Background(), "k")
	require.NoError(t, err)
	acq := only(t, exp, "dynamolock.acquire")
	assert.Equal(t, "k", attrs(acq.Attributes)["dynamolock.key"].AsString())
}
