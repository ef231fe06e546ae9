package ddbmodel_test

import (
	"context"
	"testing"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// resumeShapes sends the resume's requests (issue 61) to both stores: a
// holder's and an RWLock reader's resuming write, granted and refused
// (resumed already, released, the reader's entry gone), with and without
// a stored expiry and a TTL attribute, and the heartbeats and releases of
// the resumed locks; the tee compares every answer.
func resumeShapes(ctx context.Context, t *testing.T, d *tee, table string) {
	for i, extra := range [][]dynamolock.ClientOption{nil, {dynamolock.WithClockSkewBound(50 * time.Millisecond), dynamolock.WithTTLAttribute("ttl")}} {
		opts := append([]dynamolock.ClientOption{dynamolock.WithLeaseDuration(2 * time.Second), dynamolock.WithHeartbeatPeriod(0)}, extra...)
		old, err := dynamolock.New(d, table, append(opts, dynamolock.WithOwnerName("before"))...)
		if err != nil {
			t.Fatal(err)
		}
		restarted, err := dynamolock.New(d, table, append(opts, dynamolock.WithOwnerName("after"))...)
		if err != nil {
			t.Fatal(err)
		}
		key := []string{"resume-a", "resume-b"}[i]
		l, err := old.AcquireLockWithContext(ctx, key, dynamolock.WithData([]byte("d")))
		if err != nil {
			t.Fatal(err)
		}
		rw, err := old.NewRWLock(key + "-rw")
		if err != nil {
			t.Fatal(err)
		}
		reader, err := rw.RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		resumed, err := restarted.ResumeLock(ctx, l.ResumeToken())
		if err != nil {
			t.Fatalf("resume: %v", err)
		}
		resumedReader, err := restarted.ResumeLock(ctx, reader.ResumeToken())
		if err != nil {
			t.Fatalf("resume of a reader: %v", err)
		}
		if _, err := restarted.ResumeLock(ctx, l.ResumeToken()); err == nil {
			t.Fatal("a token resumed twice")
		}
		if _, err := restarted.ResumeLock(ctx, reader.ResumeToken()); err == nil {
			t.Fatal("a reader's token resumed twice")
		}
		_ = restarted.SendHeartbeatWithContext(ctx, resumed)
		_ = restarted.SendHeartbeatWithContext(ctx, resumedReader)
		_, _ = restarted.ReleaseLockWithContext(ctx, resumed)
		_, _ = restarted.ReleaseLockWithContext(ctx, resumedReader)
		if _, err := restarted.ResumeLock(ctx, resumed.ResumeToken()); err == nil {
			t.Fatal("a released lock resumed")
		}
		_ = old.Close()
		_ = restarted.Close()
	}
}
