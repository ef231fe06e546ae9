package reliability

import (
	"strings"
	"testing"
	"time"
)

// The checker must catch what it claims to: each history below breaks one
// property, and a clean one breaks none.

const ms = int64(time.Millisecond)

func sec(proc int, key string, token uint64, acquired, end int64, valid, released bool) Event {
	return Event{Type: EvSection, Proc: proc, Key: key, Token: token, AcquireStart: acquired - ms, Acquired: acquired,
		Start: acquired, End: end, Valid: valid, Released: released}
}

func inc(proc int, key string, token uint64, op string, from int64, call int64, result string) Event {
	return Event{Type: EvGuarded, Proc: proc, Key: key, Token: token, Op: op, From: from, To: from + 1,
		ReadCall: call - 2*ms, ReadReturn: call - ms, Call: call, Return: call + ms, Result: result}
}

func shadow(proc int, key string, token uint64, from int64, call int64) Event {
	return Event{Type: EvUnguarded, Proc: proc, Key: key, Token: token, From: from, To: from + 1,
		ReadCall: call - 2*ms, ReadReturn: call - ms, Call: call, Return: call + ms, Result: ResultOK}
}

func cleanHistory() ([]Event, FinalState) {
	evs := []Event{
		sec(0, "k", 1, 10*ms, 20*ms, true, true),
		inc(0, "k", 1, "a", 0, 15*ms, ResultOK),
		shadow(0, "k", 1, 0, 17*ms),
		sec(1, "k", 2, 30*ms, 40*ms, true, true),
		inc(1, "k", 2, "b", 1, 35*ms, ResultOK),
		shadow(1, "k", 2, 1, 37*ms),
	}
	return evs, FinalState{
		Counter: map[string]int64{"k": 2}, Ops: map[string][]string{"k": {"a", "b"}}, Shadow: map[string]int64{"k": 2},
	}
}

func TestCheckerPassesACleanHistory(t *testing.T) {
	evs, final := cleanHistory()
	r := Check(evs, final, time.Minute)
	if len(r.Violations) > 0 || r.Linearizable != "Ok" {
		t.Fatalf("violations in a clean history: %v (linearizable %s)", r.Violations, r.Linearizable)
	}
	if r.Sections != 2 || r.GuardedOK != 2 || r.Takeovers != 0 {
		t.Fatalf("counts: %+v", r)
	}
}

func TestCheckerCatches(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(evs []Event, f *FinalState) []Event
		want   string
		count  func(r *Result) int
	}{
		{"overlapping valid sections", func(evs []Event, f *FinalState) []Event {
			evs[3].Start, evs[3].Acquired = 19*ms, 19*ms
			return evs
		}, "overlap, both with a valid lease", func(r *Result) int { return r.OverlapsValid }},
		{"tokens out of order", func(evs []Event, f *FinalState) []Event {
			evs[3].Token = 1
			return evs
		}, "follows token", func(r *Result) int { return r.TokenOrderErrors }},
		{"a guarded write applied after a takeover", func(evs []Event, f *FinalState) []Event {
			// The first holder, paused, writes after token 2 was acquired.
			evs[0].End, evs[0].Valid, evs[0].Released = 50*ms, false, false
			late := inc(0, "k", 1, "late", 2, 45*ms, ResultOK)
			f.Counter["k"], f.Ops["k"] = 3, append(f.Ops["k"], "late")
			return append(evs, late)
		}, "was applied", func(r *Result) int { return r.GuardedAfterTO - r.GuardedAfterTOFail }},
		{"a lost increment", func(evs []Event, f *FinalState) []Event {
			f.Counter["k"], f.Ops["k"] = 1, []string{"a"}
			return evs
		}, "missing from the counter", func(r *Result) int { return r.LostIncrements }},
		{"a duplicated increment", func(evs []Event, f *FinalState) []Event {
			f.Counter["k"], f.Ops["k"] = 3, []string{"a", "b", "b"}
			return evs
		}, "applied 2 times", func(r *Result) int { return r.DuplicatedIncrement }},
		{"a failed increment that applied", func(evs []Event, f *FinalState) []Event {
			evs[4].Result = ResultFailed
			return evs
		}, "reported failed but applied", func(r *Result) int { return r.FailedButApplied }},
		{"a lost update (not linearizable)", func(evs []Event, f *FinalState) []Event {
			// Both holders read 0 and wrote 1; the counter list has both.
			evs[4].From, evs[4].To = 0, 1
			f.Counter["k"] = 2
			return evs
		}, "not linearizable", func(r *Result) int {
			if r.Linearizable == "Illegal" {
				return 1
			}
			return 0
		}},
		{"a stale Done", func(evs []Event, f *FinalState) []Event {
			return append(evs, Event{Type: EvStaleDone, Key: "k", Token: 1, At: 19 * ms})
		}, "Done was still open", func(r *Result) int { return r.StaleDoneChecks }},
		{"a duplicate token", func(evs []Event, f *FinalState) []Event {
			return append(evs, sec(2, "k", 2, 60*ms, 70*ms, false, true))
		}, "handed to", func(r *Result) int { return r.DuplicateTokens }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			evs, final := cleanHistory()
			evs = tc.mutate(evs, &final)
			r := Check(evs, final, time.Minute)
			if tc.count(r) == 0 {
				t.Errorf("not counted: %+v", r)
			}
			found := false
			for _, v := range r.Violations {
				found = found || strings.Contains(v, tc.want)
			}
			if !found {
				t.Errorf("no violation mentioning %q: %v", tc.want, r.Violations)
			}
		})
	}
}

// Unguarded writes after a takeover are counted, and the updates they
// overwrote are reported as lost, without failing the run.
func TestCheckerCountsUnguardedOverlap(t *testing.T) {
	evs, final := cleanHistory()
	evs[0].End, evs[0].Valid, evs[0].Released = 50*ms, false, false
	evs = append(evs, shadow(0, "k", 1, 1, 45*ms)) // stale: read 1 before the pause, wrote 2 after
	final.Shadow["k"] = 2                          // three acknowledged increments, value 2
	r := Check(evs, final, time.Minute)
	if r.UnguardedAfterTO != 1 || r.ShadowLost != 1 || r.OverlapsExpired == 0 {
		t.Fatalf("unguarded after takeover %d, shadow lost %d, overlaps with an expired holder %d",
			r.UnguardedAfterTO, r.ShadowLost, r.OverlapsExpired)
	}
	if len(r.Violations) > 0 {
		t.Fatalf("violations: %v", r.Violations)
	}
}
