package reliability

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"

	"github.com/anishathalye/porcupine"
)

// FinalState is what the data table holds after a run.
type FinalState struct {
	Counter map[string]int64    // key → value of its guarded counter
	Ops     map[string][]string // key → ids of the guarded increments applied, in order
	Shadow  map[string]int64    // key → value of its unguarded shadow counter
}

// Result is the checker's account of one run.
type Result struct {
	Sections      int            // critical sections (acquisitions) logged
	ValidSections int            // of which held a valid lease to their end
	AcquireErrors map[string]int // failed acquisitions by cause
	LostByCause   map[string]int // sections whose lock was lost during them, by cause
	LocksLost     uint64         // locks the clients declared lost (all causes)
	Takeovers     int            // acquisitions of a key whose previous holder had not released it

	OverlapsValid       int // overlapping sections that both held a valid lease (must be 0)
	OverlapsExpired     int // overlapping sections where at least one holder's lease had run out
	TokenOrderErrors    int // valid sections whose fencing token did not exceed the previous one's (must be 0)
	DuplicateTokens     int // two acquisitions with the same token (must be 0)
	StaleDoneChecks     int // loss checks that found the lease run out but Done open: guarded work went on (must be 0)
	GuardedWrites       int
	GuardedOK           int
	GuardedFailed       int
	GuardedUnknown      int
	GuardedAfterTO      int // guarded writes attempted after a takeover
	GuardedAfterTOFail  int // of which failed (must be all)
	UnguardedWrites     int
	UnguardedAfterTO    int // unguarded writes that finished after a takeover (may have landed after it): what guarded writes prevent
	LostIncrements      int // acknowledged guarded increments missing from the counter (must be 0)
	DuplicatedIncrement int // increments applied twice (must be 0)
	FailedButApplied    int // increments reported failed that were applied (must be 0)
	CounterMismatch     int // keys whose value differs from the number of increments applied (must be 0)
	ShadowLost          int // acknowledged unguarded increments lost (overwritten)
	Linearizable        porcupine.CheckResult
	LinearizableOps     int

	HeartbeatsSent  uint64
	HeartbeatErrors uint64
	DynamoDBCalls   uint64
	Injected        map[string]uint64 // service errors injected, by kind
	Panics          int               // worker processes that panicked, raced or failed

	Violations []string
}

func (r *Result) violate(format string, args ...any) {
	if len(r.Violations) < 50 {
		r.Violations = append(r.Violations, fmt.Sprintf(format, args...))
	} else if len(r.Violations) == 50 {
		r.Violations = append(r.Violations, "... (more)")
	}
}

// Check verifies a run's events against its final state.
func Check(events []Event, final FinalState, linearizabilityTimeout time.Duration) *Result {
	r := &Result{AcquireErrors: map[string]int{}, LostByCause: map[string]int{}, Injected: map[string]uint64{}}
	sections := map[string][]Event{}
	var guarded, unguarded []Event
	for _, e := range events {
		switch e.Type {
		case EvSection:
			sections[e.Key] = append(sections[e.Key], e)
			r.Sections++
			if e.Valid {
				r.ValidSections++
			}
			if e.Lost != "" {
				r.LostByCause[e.Lost]++
			}
		case EvGuarded:
			guarded = append(guarded, e)
		case EvUnguarded:
			unguarded = append(unguarded, e)
		case EvAcquireErr:
			r.AcquireErrors[e.Err]++
		case EvStaleDone:
			r.StaleDoneChecks++
			r.violate("proc %d worker %d, key %q, token %d: the lease had run out at %s but Done was still open, so guarded work went on",
				e.Proc, e.Worker, e.Key, e.Token, ts(e.At))
		case EvStats:
			if s := e.Stats; s != nil {
				r.HeartbeatsSent += s.HeartbeatsSent
				r.HeartbeatErrors += s.HeartbeatErrors
				r.LocksLost += s.LocksLost
				r.DynamoDBCalls += s.DynamoDBCalls
				for k, n := range s.Injected {
					r.Injected[k] += n
				}
			}
		}
	}

	takeoverAt := map[string]map[uint64]int64{} // key → token → first acquisition of a higher token
	for key, secs := range sections {
		checkSections(r, key, secs)
		takeoverAt[key] = takeovers(r, secs)
	}
	after := func(e Event) bool {
		t, ok := takeoverAt[e.Key][e.Token]
		return ok && e.Call > t
	}

	applied := map[string]map[string]int{} // key → op → times applied
	for key, ops := range final.Ops {
		applied[key] = map[string]int{}
		for _, op := range ops {
			applied[key][op]++
		}
		for op, n := range applied[key] {
			if n > 1 {
				r.DuplicatedIncrement += n - 1
				r.violate("key %q: increment %s applied %d times", key, op, n)
			}
		}
		if v := final.Counter[key]; v != int64(len(ops)) {
			r.CounterMismatch++
			r.violate("key %q: counter is %d but %d increments were applied", key, v, len(ops))
		}
	}
	for _, e := range guarded {
		r.GuardedWrites++
		wasApplied := applied[e.Key][e.Op] > 0
		switch e.Result {
		case ResultOK:
			r.GuardedOK++
			if !wasApplied {
				r.LostIncrements++
				r.violate("key %q: acknowledged increment %s (%d→%d) is missing from the counter", e.Key, e.Op, e.From, e.To)
			}
		case ResultFailed:
			r.GuardedFailed++
			if wasApplied {
				r.FailedButApplied++
				r.violate("key %q: increment %s was reported failed but applied", e.Key, e.Op)
			}
		default:
			r.GuardedUnknown++
		}
		if after(e) {
			r.GuardedAfterTO++
			if wasApplied {
				r.violate("key %q: guarded write %s of token %d sent at %s, after a higher token was acquired at %s, was applied",
					e.Key, e.Op, e.Token, ts(e.Call), ts(takeoverAt[e.Key][e.Token]))
			} else {
				r.GuardedAfterTOFail++
			}
		}
	}
	shadowOK := map[string]int64{}
	for _, e := range unguarded {
		r.UnguardedWrites++
		if e.Result == ResultOK {
			shadowOK[e.Key]++
		}
		// A write in flight when its process was stopped lands after the
		// takeover although it was sent before: count by when it finished.
		if t, ok := takeoverAt[e.Key][e.Token]; ok && e.Return > t {
			r.UnguardedAfterTO++
		}
	}
	for key, n := range shadowOK {
		if lost := n - final.Shadow[key]; lost > 0 {
			r.ShadowLost += int(lost)
		}
	}

	checkLinearizable(r, guarded, applied, final, linearizabilityTimeout)
	return r
}

// checkSections checks one key's sections: valid ones never overlap and
// their tokens increase in time order; no token is handed out twice.
func checkSections(r *Result, key string, secs []Event) {
	sort.Slice(secs, func(i, j int) bool { return secs[i].Start < secs[j].Start })
	for i, a := range secs {
		for _, b := range secs[i+1:] {
			if b.Start >= a.End {
				break
			}
			if a.Valid && b.Valid {
				r.OverlapsValid++
				r.violate("key %q: sections of tokens %d (proc %d, %s–%s) and %d (proc %d, %s–%s) overlap, both with a valid lease",
					key, a.Token, a.Proc, ts(a.Start), ts(a.End), b.Token, b.Proc, ts(b.Start), ts(b.End))
			} else {
				r.OverlapsExpired++
			}
		}
	}
	var last *Event
	for i := range secs {
		s := &secs[i]
		if !s.Valid {
			continue
		}
		if last != nil && s.Token <= last.Token {
			r.TokenOrderErrors++
			r.violate("key %q: token %d (proc %d, from %s) follows token %d (proc %d, from %s)",
				key, s.Token, s.Proc, ts(s.Start), last.Token, last.Proc, ts(last.Start))
		}
		last = s
	}
	seen := map[uint64]Event{}
	for _, s := range secs {
		if p, dup := seen[s.Token]; dup {
			r.DuplicateTokens++
			r.violate("key %q: token %d handed to proc %d worker %d and proc %d worker %d", key, s.Token, p.Proc, p.Worker, s.Proc, s.Worker)
		}
		seen[s.Token] = s
	}
}

// takeovers returns, for each token of a key, when a higher token was
// first acquired, and counts acquisitions whose predecessor (by token) had
// not released the lock.
func takeovers(r *Result, secs []Event) map[uint64]int64 {
	byToken := slices.Clone(secs)
	sort.Slice(byToken, func(i, j int) bool { return byToken[i].Token < byToken[j].Token })
	for i := 1; i < len(byToken); i++ {
		if !byToken[i-1].Released {
			r.Takeovers++
		}
	}
	at := make(map[uint64]int64, len(byToken))
	first := int64(math.MaxInt64)
	for i := len(byToken) - 1; i >= 0; i-- {
		s := byToken[i]
		if first != math.MaxInt64 {
			at[s.Token] = first
		}
		first = min(first, s.Acquired)
	}
	return at
}

// The porcupine model of one key's counter: reads return its value; an
// increment from v to v+1 applies only to value v (if the lock let a stale
// holder write, its increment would apply to a newer value and the history
// would not be linearizable).
type counterInput struct {
	Read     bool
	From, To int64
}

var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Metadata.(string)
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		sort.Strings(keys)
		out := make([][]porcupine.Operation, 0, len(keys))
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		s, in := state.(int64), input.(counterInput)
		if in.Read {
			return output.(int64) == s, s
		}
		return s == in.From, in.To
	},
	DescribeOperation: func(input, output any) string {
		in := input.(counterInput)
		if in.Read {
			return fmt.Sprintf("read() → %d", output)
		}
		return fmt.Sprintf("inc(%d→%d)", in.From, in.To)
	},
}

func checkLinearizable(r *Result, guarded []Event, applied map[string]map[string]int, final FinalState, timeout time.Duration) {
	var history []porcupine.Operation
	end := int64(0)
	for _, e := range guarded {
		end = max(end, e.Return, e.ReadReturn)
	}
	for _, e := range guarded {
		history = append(history, porcupine.Operation{
			ClientId: e.Proc*1000 + e.Worker, Input: counterInput{Read: true}, Output: e.From,
			Call: e.ReadCall, Return: e.ReadReturn, Metadata: e.Key,
		})
		if applied[e.Key][e.Op] == 0 {
			continue // not applied: no effect on the counter
		}
		ret := e.Return
		if e.Result != ResultOK {
			ret = end + 1 // applied, but when is unknown: pending to the end
		}
		history = append(history, porcupine.Operation{
			ClientId: e.Proc*1000 + e.Worker, Input: counterInput{From: e.From, To: e.To}, Output: nil,
			Call: e.Call, Return: ret, Metadata: e.Key,
		})
	}
	for key, v := range final.Counter {
		history = append(history, porcupine.Operation{
			ClientId: 999999, Input: counterInput{Read: true}, Output: v, Call: end + 2, Return: end + 3, Metadata: key,
		})
	}
	r.LinearizableOps = len(history)
	if len(history) == 0 {
		r.Linearizable = porcupine.Ok
		return
	}
	r.Linearizable = porcupine.CheckOperationsTimeout(counterModel, history, timeout)
	if r.Linearizable == porcupine.Illegal {
		r.violate("the guarded counters' history is not linearizable")
	}
}

func ts(ns int64) string { return time.Unix(0, ns).Format("15:04:05.000000") }
