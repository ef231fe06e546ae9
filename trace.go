package dynamolock

import (
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// Tracing (docs/OBSERVABILITY.md): one span per acquiring call and per
// release, events for its waits, hand-overs and takeovers, and spans of
// their own for what happens in the background (a failed heartbeat, a
// loss). The engine calls the few functions of this file at clear points
// (the wait, the acquiring write, the end); nothing else of it knows of
// spans.

// WithTracerProvider traces the client's calls through OpenTelemetry:
//
//   - dynamolock.acquire: one span around every acquiring call
//     (AcquireLock and AcquireLockWithContext, Do, AcquireLocks,
//     Semaphore.Acquire, Election.Campaign, RWLock.Lock and RLock, with or
//     without FailIfLocked), a child of the span in the caller's context
//     and the parent of every DynamoDB call it makes (the context the
//     DynamoDBClient receives carries it, so the AWS SDK's own spans nest
//     under it). Attributes: aws.dynamodb.table_names, dynamolock.kind,
//     dynamolock.key (or dynamolock.keys), dynamolock.owner,
//     dynamolock.outcome (as dynamolock.acquisitions' outcome),
//     dynamolock.attempts (acquiring writes sent), dynamolock.contended,
//     dynamolock.fencing_token of the lock granted; on failure the status
//     Error and error.type. Events: dynamolock.wait each time the call
//     starts waiting behind a holder (its owner, fencing token and lease,
//     and dynamolock.wait.expected: how long at most, if the holder stops
//     renewing, before it can be taken over), dynamolock.handover when it
//     writes to take a key its holder freed, dynamolock.takeover when it
//     writes to take over a holder it saw unchanged for a lease.
//   - dynamolock.release: one span around every release (ReleaseLock, a
//     Lock's Close and Release, RWLock.Unlock and RUnlock, the release of
//     Do and of Close), with dynamolock.outcome released, already_released,
//     lost, unknown or error.
//   - dynamolock.heartbeat: only for a heartbeat that failed (a healthy
//     one makes no span): a span of its own, started when the heartbeat
//     was sent, linked to the acquisition that granted the lock.
//   - dynamolock.lock.lost: a span of its own at every loss of a held
//     lock, linked to its acquisition; a loss while [Client.Do] runs fn is
//     also an event dynamolock.lock.lost on the span of Do's caller.
//
// Default: the global tracer provider (otel.GetTracerProvider), as
// OpenTelemetry's instrumentation libraries do, which makes no span until
// the program installs one. Keys are span attributes, never metric
// attributes. nil is the default.
func WithTracerProvider(tp trace.TracerProvider) ClientOption {
	return func(c *Client) { c.cfg.tracerProvider = tp }
}

// Span and event names.
const (
	spanAcquire   = "dynamolock.acquire"
	spanRelease   = "dynamolock.release"
	spanHeartbeat = "dynamolock.heartbeat"
	spanLost      = "dynamolock.lock.lost"
	eventWait     = "dynamolock.wait"
	eventHandover = "dynamolock.handover"
	eventTakeover = "dynamolock.takeover"
	eventLost     = "dynamolock.lock.lost"
)

// The kinds of acquiring calls: the span's dynamolock.kind and the
// dynamolock.waiters metric's kind.
const (
	kindLock      = "lock"
	kindLocks     = "locks"
	kindSemaphore = "semaphore"
	kindElection  = "election"
	kindRead      = "rwlock.read"
	kindWrite     = "rwlock.write"
	kindResume    = "resume" // ResumeLock: one conditional write, no wait
)

// Attribute keys.
const (
	attrTables        = attribute.Key("aws.dynamodb.table_names") // OpenTelemetry's semantic conventions
	attrErrorType     = attribute.Key("error.type")
	attrKind          = attribute.Key("dynamolock.kind")
	attrKey           = attribute.Key("dynamolock.key")
	attrKeys          = attribute.Key("dynamolock.keys")
	attrSortKey       = attribute.Key("dynamolock.sort_key")
	attrSlotKey       = attribute.Key("dynamolock.slot_key")
	attrOwner         = attribute.Key("dynamolock.owner")
	attrOutcome       = attribute.Key("dynamolock.outcome")
	attrAttempts      = attribute.Key("dynamolock.attempts")
	attrContended     = attribute.Key("dynamolock.contended")
	attrToken         = attribute.Key("dynamolock.fencing_token")
	attrTokens        = attribute.Key("dynamolock.fencing_tokens")
	attrCause         = attribute.Key("dynamolock.lost.cause")
	attrHeld          = attribute.Key("dynamolock.hold.duration")
	attrWaitReason    = attribute.Key("dynamolock.wait.reason")
	attrWaitExpected  = attribute.Key("dynamolock.wait.expected")
	attrWaitLeft      = attribute.Key("dynamolock.wait.remaining")
	attrHolder        = attribute.Key("dynamolock.holder.owner")
	attrHolderToken   = attribute.Key("dynamolock.holder.fencing_token")
	attrHolderLease   = attribute.Key("dynamolock.holder.lease")
	attrHolderHere    = attribute.Key("dynamolock.holder.same_process")
	attrHolderReaders = attribute.Key("dynamolock.holder.readers")
	attrUnchanged     = attribute.Key("dynamolock.holder.unchanged_for")
)

// tracing is a client's tracer, and the span of the acquisition of each
// lock it holds (sampled ones only), which the spans of its background
// events link to.
type tracing struct {
	tracer trace.Tracer
	table  attribute.KeyValue
	owner  attribute.KeyValue
	grants sync.Map // *Lock → trace.SpanContext
}

func newTracing(tp trace.TracerProvider, table, owner string) *tracing {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return &tracing{
		tracer: tp.Tracer(meterName), // one instrumentation scope for metrics and traces
		table:  attrTables.StringSlice([]string{table}),
		owner:  attrOwner.String(owner),
	}
}

// ---- acquisitions ----

// acqTrace is the telemetry of one acquiring call: its span, what it saw
// while it waited (for the events), and whether it waited behind a holder
// (dynamolock.acquire.contended, dynamolock.waiters). A nil *acqTrace does
// nothing: acquisitions that are not a caller's (a session's own item).
type acqTrace struct {
	c      *Client
	ctx    context.Context
	span   trace.Span
	rec    bool // span.IsRecording(): attributes and events are built only then
	kind   string
	writes int  // acquiring writes sent
	waited bool // waited behind a holder at least once: counted in waiters until the end
	// behind is, per key, the holder of the last wait event (recording
	// only): a new event comes when the holder changes.
	behind map[string]holderSig
	// pending are the takeover and hand-over events of the last acquiring
	// write: added to the span when the call holds its keys by it (see
	// wrote), dropped with the next write or the call's end.
	pending []pendingEvent
}

// pendingEvent is an event of an acquiring write not yet known to have won.
type pendingEvent struct {
	name   string
	regKey string
	attrs  []attribute.KeyValue
}

// holderSig is what a call waits behind on a key.
type holderSig struct {
	reason string // "holder", "readers" or "queue"
	owner  string
	token  uint64
}

// startAcquire starts the span of an acquiring call of kind on keys (the
// semaphore's, election's or read/write lock's name, or the keys of
// AcquireLocks); its kind is Internal (the default), the parent of the
// DynamoDB calls' Client spans. A nil ctx (bad input, refused by the call)
// starts nothing.
func (c *Client) startAcquire(ctx context.Context, kind string, keys ...string) (context.Context, *acqTrace) {
	if ctx == nil {
		return ctx, nil
	}
	t := &acqTrace{c: c, kind: kind}
	ctx, t.span = c.tele.tracer.Start(ctx, spanAcquire)
	if t.rec = t.span.IsRecording(); t.rec {
		attrs := []attribute.KeyValue{c.tele.table, c.tele.owner, attrKind.String(kind)}
		if len(keys) == 1 {
			attrs = append(attrs, attrKey.String(keys[0]))
		} else {
			attrs = append(attrs, attrKeys.StringSlice(keys))
		}
		t.span.SetAttributes(attrs...)
	}
	t.ctx = ctx
	return ctx, t
}

// attach makes t the telemetry of a, the call's acquisition (once its
// options are known: the sort key value they give).
func (t *acqTrace) attach(a *acquisition) {
	a.tr = t
	if t == nil || !t.rec {
		return
	}
	if sk := a.o.sortKey; sk != nil {
		t.span.SetAttributes(attrSortKey.String(*sk))
	}
}

// end ends the call with err and the locks it returns: its span, the
// waiters gauge, the count of contended acquisitions.
func (t *acqTrace) end(err error, locks ...*Lock) {
	if t == nil {
		return
	}
	outcome := acquireOutcome(err)
	if t.waited {
		t.c.metrics.WaitEnded(t.ctx, t.kind, outcome)
	}
	for _, l := range locks {
		if l != nil && t.span.SpanContext().IsSampled() {
			t.c.tele.grants.Store(l, t.span.SpanContext())
			if l.Err() != nil {
				// It ended already (lost as it was returned): Lock.end
				// forgot it before it was stored.
				t.c.tele.ended(l)
			}
		}
	}
	if t.rec {
		attrs := []attribute.KeyValue{attrOutcome.String(outcome), attrAttempts.Int(t.writes), attrContended.Bool(t.waited)}
		switch {
		case len(locks) == 1 && locks[0] != nil:
			attrs = append(attrs, attrToken.Int64(int64(locks[0].FencingToken())))
			if t.kind == kindSemaphore {
				attrs = append(attrs, attrSlotKey.String(locks[0].partitionKey))
			}
		case len(locks) > 1:
			tokens := make([]int64, len(locks))
			for i, l := range locks {
				tokens[i] = int64(l.FencingToken())
			}
			attrs = append(attrs, attrTokens.Int64Slice(tokens))
		}
		t.span.SetAttributes(attrs...)
		if err != nil {
			t.span.SetAttributes(attrErrorType.String(outcome))
			t.span.SetStatus(codes.Error, err.Error())
		}
	}
	t.span.End()
}

// waiting records that a is about to wait: each key whose decision is a
// read and whose item is held (by a live holder, by readers, or free with
// waiters before this one in its queue) counts the call as contended, and
// a holder not seen in a wait event before gets one.
func (t *acqTrace) waiting(a *acquisition) {
	if t == nil {
		return
	}
	now := a.c.now()
	for _, w := range a.watches {
		if w.out || w.next.step != stepRead || !w.v.known || w.v.bad != nil {
			continue
		}
		sig := holderSig{reason: "queue"}
		if rec := w.v.rec; rec != nil && !rec.Released {
			sig = holderSig{reason: "holder", owner: rec.Owner, token: rec.FencingToken}
		} else if w.v.readersHolding() > 0 {
			sig.reason = "readers"
		} else if w.v.absent || rec == nil {
			continue // nothing holds it: a read after a write's doubt
		}
		t.waits(a, w, sig, now, false)
	}
}

// waitingHere records that a waits for w's key, which a lock of this
// client holds (the same-process hand-over: here.busy).
func (t *acqTrace) waitingHere(a *acquisition, w *watch) {
	if t == nil {
		return
	}
	sig := holderSig{reason: "holder", owner: a.c.cfg.ownerName}
	if l := a.c.here.held(w.regKey); l != nil {
		sig.token = l.FencingToken()
	}
	t.waits(a, w, sig, a.c.now(), true)
}

func (t *acqTrace) waits(a *acquisition, w *watch, sig holderSig, now time.Time, here bool) {
	if !t.waited {
		t.waited = true
		t.c.metrics.WaitStarted(t.ctx, t.kind)
	}
	if !t.rec {
		return
	}
	if t.behind == nil {
		t.behind = make(map[string]holderSig, 1)
	}
	if last, ok := t.behind[w.regKey]; ok && last == sig {
		return
	}
	t.behind[w.regKey] = sig
	attrs := []attribute.KeyValue{attrKey.String(w.key), attrWaitReason.String(sig.reason)}
	switch sig.reason {
	case "holder":
		attrs = append(attrs, attrHolder.String(sig.owner), attrHolderToken.Int64(int64(sig.token)),
			attrHolderHere.Bool(here || a.c.here.held(w.regKey) != nil))
		if rec := w.v.rec; rec != nil && !rec.Released && !here {
			attrs = append(attrs, attrHolderLease.Float64(rec.Lease.Seconds()))
		}
	case "readers":
		attrs = append(attrs, attrHolderReaders.Int(w.v.readersHolding()))
	}
	if due := w.next.due; !due.IsZero() && !here {
		attrs = append(attrs, attrWaitExpected.Float64(max(due.Sub(now), 0).Seconds()))
	}
	if end := a.deadline; !end.IsZero() && a.o.additionalTimeToWait != forever {
		attrs = append(attrs, attrWaitLeft.Float64(max(end.Sub(now), 0).Seconds()))
	}
	t.span.AddEvent(eventWait, trace.WithAttributes(attrs...), trace.WithTimestamp(now))
}

// writing records an acquiring write of a: of w, or of every key (nil, a
// transaction). A write that takes over a holder (stale, or dead by the
// kind's own rule: a read/write lock's) is a takeover; one that takes a
// key this call waited behind is a hand-over. Both are events of the span
// once the call holds the key by that write: when it wins (wrote), or when
// the call claims it after its answer was lost. A rewrite of the call's
// own write (its answer came after its lease: rewriteOwn) carries over the
// events of the write it rewrites.
func (t *acqTrace) writing(a *acquisition, w *watch) {
	if t == nil {
		return
	}
	t.writes++
	if !t.rec {
		t.pending = t.pending[:0]
		return
	}
	ws := a.watches
	if w != nil {
		ws = []*watch{w}
	}
	var next []pendingEvent
	for _, w := range ws {
		if tk := w.next.takeover; tk != "" {
			if _, own := a.attempts[tk]; own {
				for _, e := range t.pending {
					if e.regKey == w.regKey {
						next = append(next, e)
					}
				}
				continue
			}
		}
		switch last, waited := t.behind[w.regKey]; {
		case (w.next.stale || w.next.takeover != "") && w.v.rec != nil:
			rec := w.v.rec
			attrs := []attribute.KeyValue{attrKey.String(w.key), attrHolder.String(rec.Owner), attrHolderToken.Int64(int64(rec.FencingToken)),
				attrHolderLease.Float64(rec.Lease.Seconds())}
			if !w.v.seen.IsZero() {
				attrs = append(attrs, attrUnchanged.Float64(a.c.since(w.v.seen).Seconds()))
			}
			next = append(next, pendingEvent{eventTakeover, w.regKey, attrs})
		case waited:
			// A write that wins a key this call waited behind found it
			// free: released, gone or ended here. So is the first write of
			// a campaign's next acquisition, sent before it read the key.
			next = append(next, pendingEvent{eventHandover, w.regKey, []attribute.KeyValue{attrKey.String(w.key),
				attrWaitReason.String(last.reason), attrHolder.String(last.owner), attrHolderToken.Int64(int64(last.token)),
				attrHolderHere.Bool(w.woken)}})
		}
	}
	t.pending = next
}

// wrote records that the call holds its keys by its last acquiring write
// (won: it won, or the call claimed a write whose answer was lost): the
// write's events are added to the span. A write that lost keeps them until
// the next one, for a claim of it may follow (its answer lost, it landed).
func (t *acqTrace) wrote(won bool) {
	if t == nil || !won {
		return
	}
	for _, e := range t.pending {
		t.span.AddEvent(e.name, trace.WithAttributes(e.attrs...))
		delete(t.behind, e.regKey)
	}
	t.pending = t.pending[:0]
}

// sortKey records the sort key value of a call that has no acquisition
// (ResumeLock: its token's).
func (t *acqTrace) sortKey(sk *string) {
	if t != nil && t.rec && sk != nil {
		t.span.SetAttributes(attrSortKey.String(*sk))
	}
}

// sentWrite counts an acquiring write of a call that has no acquisition
// (ResumeLock's, each send of it).
func (t *acqTrace) sentWrite() {
	if t != nil {
		t.writes++
	}
}

// detached returns f, run in the background after the call returned (a
// clean-up), with the call's span as the parent of its DynamoDB calls.
func (t *acqTrace) detached(f func(context.Context)) func(context.Context) {
	if t == nil || !t.span.SpanContext().IsValid() {
		return f
	}
	sc := t.span.SpanContext()
	return func(ctx context.Context) { f(trace.ContextWithSpanContext(ctx, sc)) }
}

// withSpanOf returns ctx, a context of background work started on behalf
// of the call whose context is from (a session's start), carrying from's
// span as the parent of its DynamoDB calls.
func withSpanOf(from context.Context) func(context.Context) context.Context {
	sc := trace.SpanContextFromContext(from)
	return func(ctx context.Context) context.Context {
		if !sc.IsValid() {
			return ctx
		}
		return trace.ContextWithSpanContext(ctx, sc)
	}
}

// ---- releases ----

// releaseLock releases a lock this client acquired (see releaseHeld), in
// a dynamolock.release span.
func (c *Client) releaseLock(ctx context.Context, l *Lock, o *releaseLockOptions) (bool, error) {
	ctx, span := c.startRelease(ctx, l)
	ok, err := c.releaseHeld(ctx, l, o)
	endRelease(span, ok, err)
	return ok, err
}

// forceRelease releases the item of a read-only view (see
// forceReleaseView), in a dynamolock.release span.
func (c *Client) forceRelease(ctx context.Context, l *Lock, o *releaseLockOptions) (bool, error) {
	ctx, span := c.startRelease(ctx, l)
	ok, err := c.forceReleaseView(ctx, l, o)
	endRelease(span, ok, err)
	return ok, err
}

func (c *Client) startRelease(ctx context.Context, l *Lock) (context.Context, trace.Span) {
	ctx, span := c.tele.tracer.Start(ctx, spanRelease)
	if span.IsRecording() {
		attrs := []attribute.KeyValue{c.tele.table, c.tele.owner, attrKey.String(l.partitionKey), attrToken.Int64(int64(l.FencingToken()))}
		if l.sortKey != nil {
			attrs = append(attrs, attrSortKey.String(*l.sortKey))
		}
		span.SetAttributes(attrs...)
	}
	return ctx, span
}

func endRelease(span trace.Span, ok bool, err error) {
	if span.IsRecording() {
		outcome := releaseOutcome(ok, err)
		span.SetAttributes(attrOutcome.String(outcome))
		if err != nil {
			span.SetAttributes(attrErrorType.String(outcome))
			span.SetStatus(codes.Error, err.Error())
		}
	}
	span.End()
}

// releaseOutcome names how a release ended.
func releaseOutcome(ok bool, err error) string {
	switch {
	case ok && err == nil:
		return "released"
	case errors.Is(err, ErrLockAlreadyReleased):
		return "already_released"
	case errors.Is(err, ErrReleaseOutcomeUnknown):
		return "unknown"
	case errors.Is(err, ErrLockLost):
		return "lost"
	}
	return "error"
}

// ---- the background: failed heartbeats, losses ----

// grantOf is the span of the acquisition that granted l, if it was
// sampled: what the spans of its background events link to.
func (t *tracing) grantOf(l *Lock) trace.SpanContext {
	sc, _ := t.grants.Load(l)
	s, _ := sc.(trace.SpanContext)
	return s
}

// heartbeatFailed records a heartbeat of l sent at start that failed with
// err: a dynamolock.heartbeat span, of the caller's span (SendHeartbeat)
// or, for a background heartbeat, of its own, linked to grant (l's
// acquisition, taken before the heartbeat: a loss forgets it). A healthy
// heartbeat records nothing.
func (c *Client) heartbeatFailed(ctx context.Context, l *Lock, grant trace.SpanContext, start time.Time, background bool, err error) {
	opts := []trace.SpanStartOption{trace.WithTimestamp(start)}
	if background {
		opts = append(opts, trace.WithNewRoot())
		if grant.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: grant}))
		}
	}
	_, span := c.tele.tracer.Start(ctx, spanHeartbeat, opts...)
	if span.IsRecording() {
		outcome := "error"
		if errors.Is(err, ErrLockLost) {
			outcome = "lost"
		}
		span.SetAttributes(c.tele.table, c.tele.owner, attrKey.String(l.partitionKey), attrToken.Int64(int64(l.FencingToken())),
			attrOutcome.String(outcome), attrErrorType.String(outcome))
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// lost records the loss of l, held for held: a dynamolock.lock.lost span of
// its own, linked to the acquisition that granted it.
func (c *Client) lostSpan(l *Lock, lost *LockLostError, held time.Duration) {
	opts := []trace.SpanStartOption{trace.WithNewRoot()}
	if sc := c.tele.grantOf(l); sc.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc}))
	}
	_, span := c.tele.tracer.Start(context.Background(), spanLost, opts...)
	if span.IsRecording() {
		span.SetAttributes(lostAttrs(c, l, lost, held)...)
		span.SetStatus(codes.Error, lost.Error())
	}
	span.End()
}

// lostInDo adds the loss of l (cause, as Do's context saw it) to the span
// of Do's caller, if it records.
func (c *Client) lostInDo(ctx context.Context, l *Lock, cause error) {
	var lost *LockLostError
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() || !errors.As(cause, &lost) {
		return
	}
	span.AddEvent(eventLost, trace.WithAttributes(lostAttrs(c, l, lost, -1)...))
}

func lostAttrs(c *Client, l *Lock, lost *LockLostError, held time.Duration) []attribute.KeyValue {
	attrs := []attribute.KeyValue{c.tele.table, c.tele.owner, attrKey.String(l.partitionKey), attrToken.Int64(int64(l.FencingToken())),
		attrCause.String(lossCause(lost.Cause))}
	if held >= 0 {
		attrs = append(attrs, attrHeld.Float64(held.Seconds()))
	}
	return attrs
}

// ended forgets l's acquisition span: l ended.
func (t *tracing) ended(l *Lock) { t.grants.Delete(l) }
