package dynamolock

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

// TestDecide covers every branch of the acquisition's decision, without
// DynamoDB.
func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const lease = 10 * time.Second
	opts := &acquireLockOptions{refreshPeriod: time.Second, additionalTimeToWait: time.Second}
	holder := func(owner, rvn string) *view {
		return &view{known: true, rec: &lockRecord{Owner: owner, RVN: rvn, Lease: lease}, seen: t0}
	}
	netErr := errors.New("connection reset")
	cases := []struct {
		name     string
		v        *view
		now      time.Time
		o        *acquireLockOptions
		attempts map[string]attempt
		clock    time.Time // stored expiry + bound, when set
		hands    int       // times the key changed hands during the wait
		here     bool      // heldHere
		want     decision
		wantErr  string // substring of the error of a stepFail
	}{
		{name: "unknown item: read after a refresh period", v: &view{}, now: t0,
			want: decision{step: stepRead, at: t0.Add(time.Second - 100*time.Millisecond)}},
		{name: "unknown item after a transient failure, past the deadline: give up", v: &view{failed: netErr}, now: t0.Add(time.Minute),
			want: decision{step: stepFail}, wantErr: "connection reset"},
		{name: "no item: write", v: &view{known: true, absent: true}, now: t0, want: decision{step: stepWrite}},
		{name: "no item, only if it exists: give up", v: &view{known: true, absent: true}, now: t0,
			o:    &acquireLockOptions{refreshPeriod: time.Second, onlyIfLockAlreadyExist: true},
			want: decision{step: stepFail}, wantErr: "WithAcquireOnlyIfLockAlreadyExists"},
		{name: "undecodable item: treated as held, give up", v: &view{known: true, bad: &ItemFormatError{Attribute: "data", Reason: "not of type B"}}, now: t0,
			want: decision{step: stepFail}, wantErr: `attribute "data"`},
		{name: "released item: write", v: &view{known: true, rec: &lockRecord{Owner: "other", RVN: "r1", Released: true, Lease: lease}}, now: t0,
			want: decision{step: stepWrite}},
		{name: "our own write landed, within its lease: claim", v: holder("me", "mine"), now: t0.Add(time.Second),
			attempts: map[string]attempt{"mine": {sent: t0, lease: lease}}, want: decision{step: stepClaim, claim: "mine"}},
		{name: "our own write landed, its lease over: take it anew", v: holder("me", "mine"), now: t0.Add(lease),
			attempts: map[string]attempt{"mine": {sent: t0, lease: lease}}, want: decision{step: stepWrite, takeover: "mine"}},
		{name: "our own write landed, its lease over within a refresh period of it: wait, then read", v: holder("me", "mine"), now: t0.Add(300 * time.Millisecond),
			attempts: map[string]attempt{"mine": {sent: t0, lease: 200 * time.Millisecond}}, want: decision{step: stepRead, at: t0.Add(time.Second), rewrite: true}},
		{name: "our own rewrite landed after its lease too, past the deadline: give up, naming the lease", v: holder("me", "mine2"), now: t0.Add(4 * time.Second),
			attempts: map[string]attempt{"mine": {sent: t0, lease: 200 * time.Millisecond}, "mine2": {sent: t0.Add(2 * time.Second), lease: 200 * time.Millisecond}},
			want:     decision{step: stepFail}, wantErr: "came after the lease it granted (200ms) had run out"},
		{name: "our owner name, reentrant: take it", v: holder("me", "old"), now: t0,
			o: &acquireLockOptions{refreshPeriod: time.Second, reentrant: true}, want: decision{step: stepWrite, takeover: "old", reentrant: true}},
		{name: "our owner name, not reentrant: waits like for anyone", v: holder("me", "old"), now: t0,
			want: decision{step: stepRead, at: t0.Add(900 * time.Millisecond), due: t0.Add(3 * time.Second), end: t0.Add(3 * time.Second)}},
		{name: "our owner name, held by this client, deadline: names WithReentrant", v: holder("me", "old"), now: t0.Add(5 * time.Second), here: true,
			o:    &acquireLockOptions{refreshPeriod: time.Second, additionalTimeToWait: 0},
			want: decision{step: stepFail}, wantErr: "held by this client; release it first, or use WithReentrant to get the held lock"},
		{name: "our owner name, held by another client, deadline: names distinct owner names", v: holder("me", "old"), now: t0.Add(5 * time.Second),
			o:    &acquireLockOptions{refreshPeriod: time.Second, additionalTimeToWait: 0},
			want: decision{step: stepFail}, wantErr: "but not by this client: another client (a replica in another process, or another Client here) uses the same owner name; " +
				"give each process its own owner name (WithOwnerName), and use WithReentrant only for a lock this very process holds"},
		{name: "holder unchanged for its lease: take over", v: holder("other", "r1"), now: t0.Add(lease),
			want: decision{step: stepWrite, takeover: "r1", stale: true}},
		{name: "stored expiry plus bound passed: take over", v: holder("other", "r1"), now: t0.Add(2 * time.Second), clock: t0.Add(time.Second),
			want: decision{step: stepWrite, takeover: "r1", stale: true}},
		{name: "live holder, FailIfLocked: give up", v: holder("other", "r1"), now: t0,
			o:    &acquireLockOptions{refreshPeriod: time.Second, failIfLocked: true},
			want: decision{step: stepFail}, wantErr: `held by owner "other"`},
		{name: "live holder past the deadline: time out", v: holder("other", "r1"), now: t0.Add(5 * time.Second),
			o:    &acquireLockOptions{refreshPeriod: time.Second},
			want: decision{step: stepFail}, wantErr: "gave up after waiting"},
		{name: "live holder past the deadline, one holder throughout: stayed held", v: holder("other", "r1"), now: t0.Add(5 * time.Second),
			o:    &acquireLockOptions{refreshPeriod: time.Second},
			want: decision{step: stepFail}, wantErr: `stayed held by owner "other"`},
		{name: "live holder past the deadline, after changes of hands: says how many", v: holder("other", "r1"), now: t0.Add(5 * time.Second),
			o: &acquireLockOptions{refreshPeriod: time.Second}, hands: 3,
			want: decision{step: stepFail}, wantErr: `changed hands 3 times while this call waited; held by owner "other" at the end`},
		{name: "live holder: poll after a refresh period less jitter", v: holder("other", "r1"), now: t0,
			want: decision{step: stepRead, at: t0.Add(900 * time.Millisecond), due: t0.Add(3 * time.Second), end: t0.Add(3 * time.Second)}},
		{name: "live holder about to be stale: wake when it is", v: holder("other", "r1"), now: t0.Add(lease - 200*time.Millisecond),
			o:    &acquireLockOptions{refreshPeriod: time.Second, additionalTimeToWait: time.Minute},
			want: decision{step: stepRead, at: t0.Add(lease), due: t0.Add(lease), end: t0.Add(62 * time.Second)}},
		{name: "live holder, deadline near: wake at the deadline", v: holder("other", "r1"), now: t0.Add(time.Second),
			o:    &acquireLockOptions{refreshPeriod: 5 * time.Second, additionalTimeToWait: time.Second},
			want: decision{step: stepRead, at: t0.Add(3 * time.Second), due: t0.Add(3 * time.Second), end: t0.Add(3 * time.Second)}},
		{name: "poll failed but the last item is stale: take over", v: &view{known: true, rec: &lockRecord{Owner: "other", RVN: "r1", Lease: lease}, seen: t0, failed: netErr},
			now: t0.Add(lease), want: decision{step: stepWrite, takeover: "r1", stale: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			o := tc.o
			if o == nil {
				o = opts
			}
			in := decideInput{view: tc.v, now: tc.now, start: t0, key: "k", owner: "me", attempts: tc.attempts, o: o,
				deadline: t0.Add(o.additionalTimeToWait + 2*time.Second), jitter: 100 * time.Millisecond,
				staleByClock: tc.clock, hasClockExpiry: !tc.clock.IsZero(), handsChanged: tc.hands, heldHere: tc.here}
			got := decide(in)
			if tc.wantErr != "" {
				if got.step != stepFail || got.err == nil || !strings.Contains(got.err.Error(), tc.wantErr) {
					t.Fatalf("got %+v, want a failure containing %q", got, tc.wantErr)
				}
				var lng *LockNotGrantedError
				if !errors.As(got.err, &lng) {
					t.Fatalf("error %v is not a *LockNotGrantedError", got.err)
				}
				return
			}
			got.err = nil
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}
