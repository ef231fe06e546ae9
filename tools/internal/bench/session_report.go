package bench

import (
	"fmt"
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// SessionResult is the sessions section: for each N a run under one
// session and, when compared, a run of the same client without one; and
// the takeover of a dead session's locks.
type SessionResult struct {
	// Machine and Date say where and when it was measured ("": not said).
	Machine, Date string
	// Ceiling is the backend's raw write rate measured before the runs
	// (nil: not measured).
	Ceiling  *CeilingResult
	Runs     []*SessionRun
	Takeover *TakeoverRun
}

// SessionRuns returns the runs under a session, in order.
func (r *SessionResult) SessionRuns() []*SessionRun {
	var out []*SessionRun
	for _, x := range r.Runs {
		if !x.Plain {
			out = append(out, x)
		}
	}
	return out
}

// Met reports whether a run under a session met its goals: every key
// acquired and held to the end, none lost, about one write per heartbeat
// period during the hold, and Close one write.
func (r *SessionRun) Met() bool {
	return !r.Plain && r.Acquired == r.N && r.HeldAtEnd == r.N && r.Lost == 0 && r.WritesMet() && r.CloseCalls.Total() == 1
}

// TakeoverLeases is the most leases, from the cut, in which a takeover of
// a dead session's locks counts as "about one lease": the lease the
// session may still have had, one poll of the waiting acquisitions, and
// the writes of the takeover.
const TakeoverLeases = 2.0

// AllTook is when B held the last of A's locks, from the cut (0: not all).
func (r *TakeoverRun) AllTook() time.Duration {
	if len(r.BTook) < r.N {
		return 0
	}
	return r.BTook.Max()
}

// Met reports whether the takeover met its goals: every lock taken over,
// with a higher fencing token, never while A counted it held, all within
// TakeoverLeases leases of the cut, and every lock of A lost by then.
func (r *TakeoverRun) Met() bool {
	all := r.AllTook()
	return all > 0 && r.Higher == r.N && r.MinMargin >= 0 && r.ALost == r.N &&
		all.Seconds() <= TakeoverLeases*r.Lease.Seconds()
}

// Markdown renders the sessions section; cmd is the command that measures
// it alone.
func (r *SessionResult) Markdown(cmd string) string {
	var b md
	if len(r.Runs) > 0 {
		x := r.Runs[0]
		plain := ""
		for _, y := range r.Runs {
			if y.Plain {
				plain = fmt.Sprintf(" Without one (\"per-lock\"), every lock renews its own item and admission control (its default fraction, %g) decides what the client takes; "+
					"the asking stops once %s acquisitions were refused with `ErrHeartbeatCapacity` (each refusal first waits out its lease) or after %s of asking, and the keys not asked by then are counted as such.",
					dynamolock.DefaultHeartbeatAdmission, commas(int64(y.MaxRefused)), y.AskBudget)
				break
			}
		}
		b.w("Command: `%s`. Each row is one run, one after the other, each on a fresh table: one client (lease %s, heartbeat %s) asks for N free keys with %d goroutines at once "+
			"(`AcquireLockWithContext` with `FailIfLocked`, each goroutine taking the next key), holds what it got for %s, then closes. "+
			"Under a session, the client is made with `WithSession()`.%s "+
			"DynamoDB calls are counted by SDK middleware on the client's own SDK client (once per operation, retries not counted again).",
			cmd, x.Lease, x.Heartbeat, x.Workers, x.Hold, plain)
		b.w("")
		if r.Machine != "" {
			b.w("Measured on %s. Machine: %s; the load column is its 1-minute load average (as `uptime` prints it) at each run's start and end.", r.Date, r.Machine)
			b.w("")
		}
		if c := r.Ceiling; c != nil {
			b.w("**Backend, before the runs:** %d writers doing raw conditional UpdateItems (heartbeat-shaped) for %s after a warm-up as long (which also warms DynamoDB Local's JVM for the first run): **%s writes/s** (%d errors; the warm-up ran %s/s).",
				c.Writers, c.Duration.Round(100*time.Millisecond), commas(int64(c.OwnPerSec())), c.Errors, commas(int64(c.WarmupPerSec)))
			b.w("")
		}
		b.w("| N | client | acquired (refused; not asked) | to acquire | calls to acquire | lost | held at end | writes (reads) during the hold | writes ÷ heartbeat periods | heap per held lock | CPU during the hold: client / DynamoDB Local | Close: time, calls | free after Close | load (1 min), start → end | met |")
		b.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
		for _, x := range r.Runs {
			b.w("%s", x.row())
		}
		b.w("")
		b.w("What each column is:")
		b.w("")
		b.w("- **to acquire**: from the first ask to the last answer, and the keys acquired per second. **calls to acquire**: every DynamoDB call in that time (under a session, one `UpdateItem` per key, one to start the session and its renewals meanwhile, once per heartbeat period; without one, also the heartbeats of the locks already held; `DescribeTable` is the client's check of the table before its first write).")
		b.w("- **lost**: acquired locks that ended before Close (`Err` not nil), from the first acquisition to the start of Close; when the client first counted one lost, from the first ask, and the longest this process went without running a 10 ms ticker until then (a pause longer than the lease's slack would be this process's doing, not DynamoDB's). **held at end**: those still held then.")
		b.w("- **writes (reads) during the hold**: `UpdateItem` (`GetItem`) calls during the %s hold. Goal under a session: one per heartbeat period, within %.0f %% (%s ± %s in this hold); without one, every held lock is renewed at most once per period.",
			r.Runs[0].Hold, 100*SessionWritesTolerance, fmt.Sprintf("%.0f", r.Runs[0].Hold.Seconds()/r.Runs[0].Heartbeat.Seconds()), fmt.Sprintf("%.0f", SessionWritesTolerance*r.Runs[0].Hold.Seconds()/r.Runs[0].Heartbeat.Seconds()))
		b.w("- **heap per held lock**: `runtime.MemStats.HeapAlloc` after two full collections, with the locks held (at the end of the hold, the smallest of 5 samples) minus the same with the client made and nothing acquired, divided by the locks held; the run's own key and lock tables exist in both, and idle HTTP connections are closed before each measure. " +
			"What is in flight at the instant (up to 32 heartbeats without a session) moves the heap by up to about a megabyte, a few hundred bytes per lock over a few thousand locks; under a session only its renewal can be.")
		b.w("- **CPU during the hold**: user + system time of this process and of DynamoDB Local over the hold, in cores.")
		b.w("- **Close**: the time `Close` took and the DynamoDB calls it made (goal under a session: 1, the session's end, whatever it held); **free after Close**: keys, spread over those held, that a client without a session took with `FailIfLocked` right after Close (no lease waited), and how long the %d acquisitions at once took.", freeSample)
		b.w("- **met** (under a session): every key acquired and held to the end, 0 lost, writes within the goal, Close one call.")
		if rd := r.reading(); rd != "" {
			b.w("")
			b.w("%s", rd)
		}
	}
	if t := r.Takeover; t != nil {
		if len(r.Runs) > 0 {
			b.w("")
		}
		b.WriteString(t.Markdown())
	}
	return b.String()
}

// reading sums up what the runs show.
func (r *SessionResult) reading() string {
	var ns, writes, plainNs, plainHeld, plainLost []string
	var lost int
	for _, x := range r.Runs {
		if x.Plain {
			plainNs = append(plainNs, commas(int64(x.N)))
			plainHeld = append(plainHeld, commas(int64(x.HeldAtEnd)))
			plainLost = append(plainLost, commas(int64(x.Lost)))
			lost += x.Lost
			continue
		}
		ns = append(ns, commas(int64(x.N)))
		writes = append(writes, commas(int64(x.HoldWrites())))
	}
	var b strings.Builder
	if len(ns) > 0 {
		fmt.Fprintf(&b, "Reading: under a session, the hold cost %s writes at N = %s: the session's renewals, one per heartbeat period whatever the number of locks held. ",
			strings.Join(writes, " / "), strings.Join(ns, " / "))
	}
	if len(plainNs) > 0 {
		fmt.Fprintf(&b, "Without one, every held lock is renewed by a write of its own, so what the client can take is bounded by the renewals it sustains against this backend, and admission control refuses (or makes wait) what would go past it: at N = %s it held %s at the end of the hold",
			strings.Join(plainNs, " / "), strings.Join(plainHeld, " / "))
		if lost > 0 {
			fmt.Fprintf(&b, ", and lost %s (as in section 3b, where the backend's rate fell below what admission had measured when it let the locks go)", strings.Join(plainLost, " / "))
		}
		b.WriteString(".")
	}
	return strings.TrimSpace(b.String())
}

// row is the run's line of the table.
func (x *SessionRun) row() string {
	mode := "session"
	if x.Plain {
		mode = "per-lock"
	}
	acq := commas(int64(x.Acquired))
	if x.Refused > 0 || x.NotAsked() > 0 || x.OtherErrors > 0 {
		acq += fmt.Sprintf(" (%s refused; %s not asked", commas(int64(x.Refused)), commas(int64(x.NotAsked())))
		switch x.StoppedBy {
		case "refusals":
			acq += fmt.Sprintf(", the asking stopped at %s refusals", commas(int64(x.MaxRefused)))
		case "time":
			acq += fmt.Sprintf(", the asking stopped after %s", x.AskBudget)
		}
		if x.OtherErrors > 0 {
			acq += fmt.Sprintf("; %s other errors", commas(int64(x.OtherErrors)))
		}
		acq += ")"
	}
	lost := commas(int64(x.Lost))
	if x.Lost > 0 {
		lost = "**" + lost + "**"
		if x.FirstLoss > 0 {
			lost += fmt.Sprintf(" (first at %s; longest pause of this process before it %s)", x.FirstLoss.Round(100*time.Millisecond), x.PauseBeforeLoss.Round(time.Millisecond))
		}
	}
	if x.SessionEnd != "" {
		lost += "; session ended: " + x.SessionEnd
	}
	writes := fmt.Sprintf("%s (%s)", commas(int64(x.HoldWrites())), commas(int64(x.HoldCalls["GetItem"])))
	per := fmt.Sprintf("%.2f", x.WritesPerPeriod())
	if x.WritesPerPeriod() >= 100 {
		per = commas(int64(x.WritesPerPeriod() + 0.5))
	}
	if !x.Plain {
		per += " (" + metWord(x.WritesMet()) + ")"
	}
	heap := "—"
	if x.HeldAtEnd > 0 {
		heap = commas(x.HeapPerLock()) + " B"
	}
	srv := "n/a"
	if x.CPUServer > 0 {
		srv = fmt.Sprintf("%.2f", x.CPUServer.Seconds()/x.HoldTime.Seconds())
	}
	cpu := fmt.Sprintf("%.2f / %s", x.CPUClient.Seconds()/x.HoldTime.Seconds(), srv)
	closeCell := fmt.Sprintf("%s, %s", x.CloseTime.Round(time.Millisecond), x.CloseCalls)
	if x.CloseErr != "" {
		closeCell += " (" + x.CloseErr + ")"
	}
	free := "—"
	if x.FreeTried > 0 {
		free = fmt.Sprintf("%d of %d in %s", x.FreeTaken, x.FreeTried, x.FreeTime.Round(time.Millisecond))
	}
	met := "—"
	if !x.Plain {
		met = yes(x.Met())
	}
	return fmt.Sprintf("| %s | %s | %s | %s (%s/s) | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |",
		commas(int64(x.N)), mode, acq, x.AcquireTime.Round(10*time.Millisecond), commas(int64(x.perSec())), x.AcquireCalls,
		lost, commas(int64(x.HeldAtEnd)), writes, per, heap, cpu, closeCell, free, loadCell(x.LoadStart, x.LoadEnd), met)
}

// perSec is the keys acquired per second of asking.
func (x *SessionRun) perSec() float64 {
	if x.AcquireTime <= 0 {
		return 0
	}
	return float64(x.Acquired) / x.AcquireTime.Seconds()
}

func loadCell(start, end float64) string {
	if start == 0 && end == 0 {
		return "n/a"
	}
	return fmt.Sprintf("%.1f → %.1f", start, end)
}

// Markdown renders the takeover.
func (t *TakeoverRun) Markdown() string {
	var b md
	b.w("**Takeover of a dead session's locks.** Command: `%s`. Client A, under a session (lease %s, heartbeat %s), holds %s locks (acquired by %d goroutines); "+
		"2 to 3 heartbeat periods later, at a random phase of its session's renewals, its network is cut: a wrapper around its SDK client fails every call from then on "+
		"(calls already sent complete). At the cut, client B, under a session of its own, asks for all %s keys with %d goroutines at once "+
		"(`AcquireLockWithContext` with `WithAdditionalTimeToWaitForLock(%s)`, refresh %s, the default). Times are from the cut, on this process's clock (both clients are in it).",
		TakeoverCommand(t.TakeoverConfig), t.Lease, t.Heartbeat, commas(int64(t.N)), t.Workers, commas(int64(t.N)), t.Workers, takeoverWait, t.Refresh)
	b.w("")
	b.w("| locks | A's last write sent | A's session lease ends | A's locks ended (Done closed): first / last | of them lost (`ErrLockLost`) | B held: first / all | all ÷ lease | fencing token higher under B | B took a key after A's lock of it ended, by at least | B's calls from the cut | load (1 min), start → end | met |")
	b.w("|---|---|---|---|---|---|---|---|---|---|---|---|")
	all := "not all"
	ratio := "—"
	if a := t.AllTook(); a > 0 {
		all = secsCell(a)
		ratio = fmt.Sprintf("%.2f", a.Seconds()/t.Lease.Seconds())
	}
	took := fmt.Sprintf("%s / %s", secsCell(t.BTook.Q(0)), all)
	if t.BErrors > 0 {
		took += fmt.Sprintf("; **%d failed** (first: %s)", t.BErrors, t.FirstError)
	}
	b.w("| %s | %s | %s | %s / %s | %s | %s | %s | %s of %s | %s ms | %s | %s | %s |",
		commas(int64(t.N)), secsCell(t.LastWrite), secsCell(t.LeaseEnd), secsCell(t.AEnded.Q(0)), secsCell(t.AEnded.Max()),
		commas(int64(t.ALost)), took, ratio, commas(int64(t.Higher)), commas(int64(t.N)), ms(t.MinMargin), t.BCalls,
		loadCell(t.LoadStart, t.LoadEnd), yes(t.Met()))
	if len(t.BItems) > 0 {
		b.w("")
		b.w("%s", t.callsByItem())
	}
	b.w("")
	b.w("A's session lease ends one lease after A sent its last write that landed (its last renewal): A's locks end then, by A's clock, without a DynamoDB call. "+
		"B judges A's session dead once it has seen the session item unchanged for a full lease on its own clock, writes the session's end mark, and then takes each lock; "+
		"an acquisition that asks once the end mark is written takes its key without waiting. Goal: every lock taken, each with a higher fencing token, never while A counted it held, "+
		"in about one lease (not one lease per lock), read as within %.0f leases of the cut; every lock of A lost.", TakeoverLeases)
	return b.String()
}

// callsByItem says what B's calls from the cut were for.
func (t *TakeoverRun) callsByItem() string {
	n := func(k string) int { return t.BItems[k] }
	s := fmt.Sprintf("B's calls from the cut, by the item they addressed: the lock items, %s `UpdateItem` (%.2f per lock: each acquisition's first write fails on the item the dead session holds, and a second takes it) and %s `GetItem` (the polls of acquisitions that waited); "+
		"A's session item, %s `UpdateItem` (its end mark: more than one when several acquisitions judged it dead at once and each sent it, all but one finding it ended) and %s `GetItem` (B's reads of it); "+
		"B's own session item, %s `UpdateItem` (its start and its renewals).",
		commas(int64(n("UpdateItem lock"))), float64(n("UpdateItem lock"))/float64(max(t.N, 1)), commas(int64(n("GetItem lock"))),
		commas(int64(n("UpdateItem dead session"))), commas(int64(n("GetItem dead session"))), commas(int64(n("UpdateItem own session"))))
	if o := n("UpdateItem other") + n("GetItem other") + n("GetItem own session"); o > 0 {
		s += fmt.Sprintf(" Other items: %s calls.", commas(int64(o)))
	}
	return s
}

// secsCell formats a time from the cut in seconds, signed.
func secsCell(d time.Duration) string { return fmt.Sprintf("%+.2f s", d.Seconds()) }

// TakeoverCommand is the command that reproduces a takeover alone.
func TakeoverCommand(cfg TakeoverConfig) string {
	return fmt.Sprintf("go -C tools run ./cmd/lockbench session -n 0 -takeover %d -lease %s -heartbeat %s -acquire-workers %d",
		cfg.N, cfg.Lease, cfg.Heartbeat, cfg.Workers)
}

// sessionSummary is the Summary's rows for the sessions section.
func sessionSummary(r *SessionResult) string {
	var b md
	runs := r.SessionRuns()
	if len(runs) > 0 {
		var ns, lost, per []string
		okLost, okPer := true, true
		for _, x := range runs {
			ns = append(ns, commas(int64(x.N)))
			l := commas(int64(x.Lost))
			if x.Acquired < x.N {
				l += fmt.Sprintf(" (%s acquired)", commas(int64(x.Acquired)))
			}
			lost = append(lost, l)
			per = append(per, fmt.Sprintf("%.2f", x.WritesPerPeriod()))
			okLost = okLost && x.Lost == 0 && x.HeldAtEnd == x.N
			okPer = okPer && x.WritesMet()
		}
		hold := runs[0].Hold.Round(time.Second)
		b.w("| locks lost by one client holding N = %s locks %s under one session (§7) | 0 | %s | %s |", strings.Join(ns, " / "), hold, strings.Join(lost, " / "), yes(okLost))
		b.w("| writes during that hold ÷ heartbeat periods (§7) | 1.00 ± %.2f | %s | %s |", SessionWritesTolerance, strings.Join(per, " / "), yes(okPer))
	}
	if t := r.Takeover; t != nil {
		v := "not all taken"
		if a := t.AllTook(); a > 0 {
			v = fmt.Sprintf("%.2f leases (%s); %s of %s tokens higher", a.Seconds()/t.Lease.Seconds(), a.Round(10*time.Millisecond), commas(int64(t.Higher)), commas(int64(t.N)))
		}
		b.w("| another client holds all %s locks of a dead session, from its network's cut (§7) | about one lease (≤ %.0f) | %s | %s |", commas(int64(t.N)), TakeoverLeases, v, yes(t.Met()))
	}
	return b.String()
}
