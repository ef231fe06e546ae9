package reliability

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
)

// Summary is a one-line account of an outcome.
func Summary(o *Outcome) string {
	r := o.Result
	return fmt.Sprintf("%s: %d sections (%d valid), %d guarded writes (%d ok, %d failed, %d unknown), %d unguarded; "+
		"faults %d; locks lost %d; takeovers %d; overlaps valid/expired %d/%d; guarded after takeover %d/%d failed; "+
		"unguarded after takeover %d; lost/duplicated increments %d/%d; shadow lost %d; stale Done %d; linearizable %s (%d ops); panics %d; %s",
		o.Scenario.Name, r.Sections, r.ValidSections, r.GuardedWrites, r.GuardedOK, r.GuardedFailed, r.GuardedUnknown, r.UnguardedWrites,
		len(o.Faults), r.LocksLost, r.Takeovers, r.OverlapsValid, r.OverlapsExpired, r.GuardedAfterTOFail, r.GuardedAfterTO,
		r.UnguardedAfterTO, r.LostIncrements, r.DuplicatedIncrement, r.ShadowLost, r.StaleDoneChecks, r.Linearizable, r.LinearizableOps,
		r.Panics, o.Elapsed.Round(100*time.Millisecond))
}

// Command is the command that reproduces a scenario.
func Command(sc Scenario, full bool) string {
	cmd := "bash scripts/ddblocal.sh run go -C tools test -race -count=1 -v ./internal/reliability -run 'TestReliability/^" + sc.Name + "$'"
	if full {
		cmd += " -reliability.full"
	}
	return cmd
}

// WriteReport writes the markdown report of a run of the suite.
func WriteReport(w io.Writer, outcomes []*Outcome, full bool, when time.Time) error {
	var b strings.Builder
	mode := "short"
	if full {
		mode = "full"
	}
	fmt.Fprintf(&b, "# Reliability report\n\n")
	fmt.Fprintf(&b, "Produced by `make reliability` (the %s suite) on %s. "+
		"`make test` runs the short suite (about a minute) and fails on any violation.\n\n", mode, when.UTC().Format("2006-01-02 15:04 UTC"))
	b.WriteString(`Each scenario starts several worker processes (the test binary re-executed), each with several
goroutines sharing one dynamolock client, contending for a few keys in DynamoDB Local. A critical
section is one acquisition: the holder, before each step of work, checks ` + "`Lock.Done()`" + `; a step
reads the key's counter and writes it plus one in a ` + "`TransactWriteItems`" + ` with
` + "`Lock.TransactionCondition()`" + ` (a *guarded write*), then does the same to a shadow counter with a
plain ` + "`UpdateItem`" + ` (an *unguarded write*). Every section and write is logged with wall-clock times
(one host, so comparable across processes) and checked afterwards:

- **overlapping sections, valid**: two sections on one key that overlap in time although both holders
  still had a valid lease at the end of their section (lease not run out by the holder's clock, Done
  open). Must be 0. Overlaps where one holder's lease had run out are counted separately.
- **fencing tokens**: valid sections of a key, in time order, carry strictly increasing tokens, and no
  token is handed out twice.
- **guarded writes after takeover**: writes sent after a higher token of the key was acquired. All must
  fail (DynamoDB cancels the transaction); an unacknowledged one must not show up in the counter.
- **stale Done**: checks where the lease had run out by the lock's clock but ` + "`Done()`" + ` was still open, so
  the holder went on with guarded work without having observed the loss. Must be 0.
- **lost / duplicated increments**: acknowledged guarded increments missing from the counter, increments
  applied twice, or a counter that differs from the number of increments applied. Must be 0; the
  counter's history (reads and increments, unacknowledged ones resolved from the list of applied
  increments) must be linearizable (porcupine).
- **unguarded writes after takeover** and **shadow updates lost**: what happens without guarded writes;
  reported, not a failure.

`)
	b.WriteString(`How to run:

- ` + "`make reliability`" + `: the full suite (about ten minutes), rewriting this file.
- ` + "`make test`" + ` runs the short suite as part of ` + "`tools/internal/reliability`" + `'s tests.
- One scenario: the command under its section. Add ` + "`-reliability.keep`" + ` to keep the workers' configs and
  event logs (JSON lines, one per process) for inspection; ` + "`RELIABILITY=full`" + ` in the environment is the same as
  ` + "`-reliability.full`" + `.

`)
	b.WriteString(foundAndFixed)
	b.WriteString(otherTests)
	b.WriteString("## Summary\n\n")
	b.WriteString("| scenario | operations (sections / guarded / unguarded writes) | faults injected | locks lost | takeovers | overlapping sections: valid (must be 0) / with an expired holder | guarded writes after takeover: failed / attempted (must be all) | unguarded writes after takeover | lost + duplicated increments (must be 0) | linearizable | stale Done (must be 0) | panics | result |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, o := range outcomes {
		r := o.Result
		verdict := "**pass**"
		if len(r.Violations) > 0 {
			verdict = fmt.Sprintf("**FAIL** (%d violations)", len(r.Violations))
		}
		fmt.Fprintf(&b, "| %s | %d / %d / %d | %s | %d | %d | %d / %d | %d / %d | %d | %d + %d | %s | %d | %d | %s |\n",
			o.Scenario.Name, r.Sections, r.GuardedWrites, r.UnguardedWrites, faultCounts(o), r.LocksLost, r.Takeovers,
			r.OverlapsValid, r.OverlapsExpired, r.GuardedAfterTOFail, r.GuardedAfterTO, r.UnguardedAfterTO,
			r.LostIncrements, r.DuplicatedIncrement, r.Linearizable, r.StaleDoneChecks, r.Panics, verdict)
	}
	b.WriteString("\n")
	for _, o := range outcomes {
		sc, r := o.Scenario, o.Result
		fmt.Fprintf(&b, "## %s\n\n%s\n\n", sc.Name, sc.Description)
		fmt.Fprintf(&b, "- Setup: %d processes × %d goroutines, %d keys, %s; lease %s, heartbeat %s, HTTP attempt timeout %s, %d SDK attempts per call; sections of %s with %d steps.\n",
			sc.Procs, sc.Goroutines, sc.Keys, sc.Duration, sc.Lease, sc.Heartbeat, sc.HTTPTimeout, sc.SDKAttempts, sc.Hold, sc.Steps)
		if sc.ErrorRate > 0 {
			fmt.Fprintf(&b, "- Service errors: %.0f%% of HTTP attempts (%s); injected: %s.\n", 100*sc.ErrorRate,
				strings.Join(sc.ErrorKinds, ", "), injected(r.Injected))
		}
		if len(o.Faults) > 0 {
			b.WriteString("- Faults:\n")
			for _, f := range o.Faults {
				fmt.Fprintf(&b, "  - %s at +%s", f.Fault, f.At)
				if f.Note != "" {
					fmt.Fprintf(&b, " (%s)", f.Note)
				}
				b.WriteString("\n")
			}
		}
		fmt.Fprintf(&b, "- Operations: %d sections (%d with a valid lease to the end), %d guarded writes (%d acknowledged, %d refused, %d without answer), %d unguarded writes; %d DynamoDB calls by the lock clients, %d heartbeats (%d failed attempts).\n",
			r.Sections, r.ValidSections, r.GuardedWrites, r.GuardedOK, r.GuardedFailed, r.GuardedUnknown, r.UnguardedWrites,
			r.DynamoDBCalls, r.HeartbeatsSent, r.HeartbeatErrors)
		fmt.Fprintf(&b, "- Acquisitions that failed: %s. Locks lost: %d (during sections: %s). Takeovers: %d.\n",
			counts(r.AcquireErrors), r.LocksLost, counts(r.LostByCause), r.Takeovers)
		fmt.Fprintf(&b, "- Overlapping sections: %d with valid leases, %d with an expired holder. Token order errors: %d; duplicate tokens: %d.\n",
			r.OverlapsValid, r.OverlapsExpired, r.TokenOrderErrors, r.DuplicateTokens)
		fmt.Fprintf(&b, "- After a takeover: %d of %d guarded writes failed; %d unguarded writes went through; %d shadow-counter updates were lost.\n",
			r.GuardedAfterTOFail, r.GuardedAfterTO, r.UnguardedAfterTO, r.ShadowLost)
		fmt.Fprintf(&b, "- Counters: %d lost, %d duplicated, %d reported failed but applied, %d mismatched; linearizable: %s (%d operations). Stale Done checks: %d. Panics: %d.\n",
			r.LostIncrements, r.DuplicatedIncrement, r.FailedButApplied, r.CounterMismatch, r.Linearizable, r.LinearizableOps, r.StaleDoneChecks, r.Panics)
		if len(r.Violations) > 0 {
			b.WriteString("- **Violations**:\n")
			for _, v := range r.Violations {
				fmt.Fprintf(&b, "  - %s\n", v)
			}
		}
		fmt.Fprintf(&b, "- Took %s. Reproduce: `%s`\n\n", o.Elapsed.Round(100*time.Millisecond), Command(sc, full))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func faultCounts(o *Outcome) string {
	if len(o.Faults) == 0 && o.Scenario.ErrorRate == 0 {
		return "none"
	}
	n := map[string]int{}
	for _, f := range o.Faults {
		n[f.Kind]++
	}
	var parts []string
	for _, k := range sortedKeys(n) {
		parts = append(parts, fmt.Sprintf("%d %s", n[k], k))
	}
	if o.Scenario.ErrorRate > 0 {
		var total uint64
		for _, v := range o.Result.Injected {
			total += v
		}
		parts = append(parts, fmt.Sprintf("%d service errors", total))
	}
	return strings.Join(parts, ", ")
}

func injected(m map[string]uint64) string {
	if len(m) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := sortedKeys(m)
	sort.SliceStable(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%d %s", m[k], k))
	}
	return strings.Join(parts, ", ")
}

// otherTests describes the reliability tests outside this suite.
const otherTests = `Beside this suite, these tests cover faults (all run by ` + "`make test`" + `):

- ` + "`tools/integration/netfaults_test.go`" + `: toxiproxy in process between one client and DynamoDB Local: a
  cut shorter than the lease keeps the lock; a longer one closes Done with ` + "`ErrLeaseExpired`" + ` and lets a
  direct client take over; a heartbeat whose write landed but whose answer was lost (dropped, reset, or
  replaced by a 500) is retried with the same record version number and keeps the lock; latency spikes.
- the root package's ` + "`faults_test.go`" + `: heartbeats through 30% of 500 errors;
  ` + "`WithHoldLockOnServiceUnavailable`" + ` through 503s, and its hazard; Done closed as soon as the lease has
  run out.
- ` + "`badinput_test.go`" + `: every bad input the API can receive, the typed error it gets, and proof that
  no DynamoDB call was made; extreme durations.
- ` + "`hostile_items_test.go`" + `: lock items corrupted by another tool give a clear error or are treated as
  held, never panic, and never let two contenders in.
- ` + "`fuzz_internal_test.go`" + ` (item decoding, lease parsing) and ` + "`fuzz_test.go`" + ` (option validation), with
  their seed corpus in ` + "`testdata/fuzz`" + `; fuzz with e.g.
  ` + "`go test -run '^$' -fuzz '^FuzzDecodeItem$' -fuzztime 5m .`" + ` (DynamoDB Local must be reachable, as for
  every test of the package).

`

// foundAndFixed lists the interleavings found by review (issue "never held
// twice" and the review of its fixes), each with the test that guards it.
const foundAndFixed = `## Found and fixed

Interleavings in which a lock looked held twice, or lost when it was not, found by adversarial reviews
with SDK wrappers that lose an answer after the write landed, replay a request or delay one (in
` + "`internal/faults`" + `). Each test is in the root package, runs against DynamoDB Local in ` + "`make test`" + `,
and failed before its fix.

| defect | fix | test |
|---|---|---|
| a retried heartbeat carried a longer lease than observers saw with its RVN | a resend is exactly the first send; a different write gets a new RVN, and every write that may land bounds the holder's lease at once | ` + "`TestRetriedHeartbeatCarriesItsFirstLease`" + ` |
| a release whose answer was lost and that the SDK retried reported "taken over" | an item released with our owner and token, or (within our lease) gone or acquired since by another client (a higher fencing token), is our own release | ` + "`TestReleaseRetriedAfterLostAnswerSucceeds`" + `, ` + "`TestReleaseRetriedAfterAContenderAcquiredSucceeds`" + ` |
| a release with an unknown outcome left the lock held while another client took the item | an unknown outcome ends the lock (` + "`ErrReleaseOutcomeUnknown`" + `); a rejection counts as "not applied" only after one attempt | ` + "`TestReleaseWithLostAnswerDoesNotLeaveTheLockHeld`" + `, ` + "`TestReleaseThrottledAfterLandingDoesNotLeaveTheLockHeld`" + ` |
| reentrant acquisitions held 64 striped mutexes through their wait, ignoring contexts | turns per key only, every wait honours its context | ` + "`TestReentrantAcquisitionsDoNotBlockOtherKeys`" + `, ` + "`TestConcurrentReentrantAcquisitionsReturnOneLock`" + ` |
| a reentrant acquisition took over the item of a concurrent acquisition of the same client | it returns the lock registered meanwhile and never takes an item whose write is in flight here | ` + "`TestReentrantDoesNotTakeAConcurrentAcquisition`" + ` |
| a cancelled transaction's reason was matched to the lock by key value only | a loss is declared only after one consistent read of the lock's own item | ` + "`TestRefreshTransactionIgnoresAnotherTablesItemWithTheSameKey`" + ` |
| Close, Release and beats waited behind a stuck write, past their contexts; Close reported phantom callbacks | a lock's writes take turns on a channel that honours contexts; beats end with the scheduler; callbacks counted | ` + "`TestContextsAreHonouredBehindAStuckWrite`" + ` |
| an acquired item that could not be decoded was retried as transient and left owned by nobody | local errors are not transient; the write is released again | ` + "`TestUndecodableItemIsNotLeftOwned`" + ` |
| ` + "`WithClockSkewBound`" + ` trusted an expiry written for another RVN | the expiry is stored with its RVN and removed on release | ` + "`TestClockSkewBoundTrustsOnlyTheExpiryOfItsRVN`" + ` |
| the holder's lease could end later than the expiry it wrote | one instant for both, the expiry rounded up | ` + "`TestHolderLeaseEndsNoLaterThanTheExpiryItWrote`" + ` |
| an acquisition that gave up after a write that may have landed left the item owned for a lease | writes whose answer was lost are released before it returns | ` + "`TestCancelledAcquireDoesNotLeaveTheItemOwned`" + ` |
| a lock lost during Close had a cause the documentation did not name | the causes are documented, ` + "`ErrClientClosed`" + ` and ` + "`ErrReleaseOutcomeUnknown`" + ` included | ` + "`TestLockLostDuringCloseHasADocumentedCause`" + ` |
| a refresh transaction was not counted as a write that may land; a late success forgot later writes | refreshes join the writes that may land; renewals are ordered by build number | ` + "`TestLateRefreshCallbackKeepsALaterShorterHeartbeat`" + `, ` + "`TestRefreshThatMayLandBoundsTheLease`" + ` |
| with ` + "`WithHoldLockOnServiceUnavailable`" + `, one 503 made every later success be ignored | ordering by build number, and a stale pending write is written anew | ` + "`TestHoldLockOn503ThenHealthyKeepsTheLock`" + ` |
| a heartbeat that shortened the lease closed Done only when its answer came | the scheduler is told before the write is sent | ` + "`TestShorterHeartbeatClosesDoneInTime`" + ` |
| Ensure reported success on a released lock | it reports the lock's end | ` + "`TestEnsureOnAReleasedLock`" + ` |

`

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
