package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// md accumulates Markdown.
type md struct{ strings.Builder }

func (b *md) w(format string, args ...any) { fmt.Fprintf(b, format+"\n", args...) }

func yes(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// Markdown renders section 1.
func (r *CallsResult) Markdown(cmd string) string {
	var b md
	b.w("Command: `%s`. Counted by SDK middleware at the Initialize step (once per operation, retries not counted again), on an SDK client used by that one lock client only. Clients here use lease %s, heartbeat 1 s, refresh %s.", cmd, r.Lease, r.Refresh)
	b.w("")
	b.w("| operation | goal | measured | DynamoDB calls | met | notes |")
	b.w("|---|---|---|---|---|---|")
	for _, row := range r.Rows {
		b.w("| %s | %s | %s | %s | %s | %s |", row.Op, row.Target, row.Shape, row.Calls, yes(row.Met), row.Note)
	}
	return b.String()
}

// Markdown renders section 2.
func (r *LatencyResult) Markdown(cmd string) string {
	var b md
	b.w("Command: `%s`. %d rounds after 50 warm-up rounds; each round runs every operation once, interleaved, on the same SDK client, so the raw calls and the lock operations see the same load. "+
		"The raw conditional UpdateItem is the least a lock write needs: `SET ownerName, leaseDuration, recordVersionNumber` with condition `attribute_not_exists(key) OR ownerName = :o`, on a fresh key.", cmd, r.Samples)
	b.w("")
	b.w("| operation | p50 ms | p95 ms | p99 ms | p50 ÷ raw p50 | p50 − raw p50 | outside the SDK call, p50 |")
	b.w("|---|---|---|---|---|---|---|")
	for _, op := range r.Ops {
		rel, diff, out := "(floor)", "", ""
		if f := r.Op(op.Floor); f != nil {
			rel = ratio(op.D.Q(0.5), f.D.Q(0.5)) + " of " + f.Name
			diff = fmt.Sprintf("%+.0f µs", float64(op.D.Q(0.5)-f.D.Q(0.5))/1e3)
		}
		if len(op.Outside) > 0 {
			out = fmt.Sprintf("%.0f µs", float64(op.Outside.Q(0.5))/1e3)
		}
		b.w("| %s | %s | %s | %s | %s | %s | %s |", op.Name, ms(op.D.Q(0.5)), ms(op.D.Q(0.95)), ms(op.D.Q(0.99)), rel, diff, out)
	}
	b.w("")
	b.w("Outside the SDK call: the operation's time minus that of the one UpdateItem it sent, measured by a wrapper around the SDK client (the library's own work: building the request, reading the answer, its bookkeeping); the rest of p50 − raw p50 is inside the SDK call (serialising the richer request and DynamoDB's work on it: compare the raw acquire- and release-shaped rows).")
	return b.String()
}

// latencyRatio returns op's p50 over its floor's p50.
func (r *LatencyResult) latencyRatio(name string) float64 {
	op := r.Op(name)
	if op == nil {
		return 0
	}
	f := r.Op(op.Floor)
	if f == nil || f.D.Q(0.5) == 0 {
		return 0
	}
	return float64(op.D.Q(0.5)) / float64(f.D.Q(0.5))
}

// Markdown renders section 3.
func (r *CapacityResult) Markdown(cmd string) string {
	var b md
	b.w("Command: `%s`. One client, lease 3 s, heartbeat 1 s, heartbeat concurrency 32 (the default); N locks acquired with bounded parallelism, then held for the hold time, then released by Close. "+
		"Losses count from the first acquisition. A renewal gap is the time between the sends of two successful writes of one lock (the lock is safe while every gap stays under the 3 s lease); the largest includes each lock's open gap at the end. "+
		"Late beats: beats started more than one period after they were due. CPU is user+system time during the hold.", cmd)
	b.w("")
	if c := r.Ceiling; c != nil {
		b.w("**Backend ceiling, same run:** %d writers doing raw conditional UpdateItems (heartbeat-shaped) for %s after a warm-up as long: **%s writes/s** (%d errors; the warm-up ran %s/s).",
			c.Writers, c.Duration.Round(100*time.Millisecond), commas(int64(c.OwnPerSec())), c.Errors, commas(int64(c.WarmupPerSec)))
		if c.CPUServer > 0 {
			b.w("DynamoDB Local used %.2f cores doing it, this process %.2f.", c.CPUServer.Seconds()/c.Duration.Seconds(), c.CPUClient.Seconds()/c.Duration.Seconds())
		}
		if a := c.After; a != nil {
			b.w("The same measure after the runs: **%s writes/s** (%d errors; its warm-up ran %s/s). The bound below uses the higher, %s writes/s.",
				commas(int64(a.OwnPerSec())), a.Errors, commas(int64(a.WarmupPerSec)), commas(int64(c.BoundPerSec())))
		}
		b.w("")
	}
	if unpaced := r.unpacedRuns(); len(unpaced) > 0 && r.Ceiling != nil {
		b.w("**Refuse, never lose**: each N asked unpaced (%d acquisitions in flight, `FailIfLocked`, no pause for the heartbeat backlog: admission control alone decides), held for the hold time. "+
			"Longest pause: the longest delay of a 10 ms ticker in this process, from the first acquisition to the end of the hold (the process went without the CPU, or its goroutines waited on the Go scheduler: a pause longer than a lease's slack delays every heartbeat by as much). "+
			"CPU steal: the machine's CPU time that the hypervisor gave another guest while this one had work, in percent of all its cores, from /proc/stat every 250 ms (on a shared VM, a stretch of steal slows DynamoDB Local and the client together, and the run is not a quiet one). "+
			"Refused: acquisitions that failed with `ErrHeartbeatCapacity`. Bound: min(N, raw ceiling × lease) with the ceiling measured above%s, in the same run. Goal: 0 lost and held at end ≥ %.0f%% of the bound.",
			unpaced[0].AcquireWorkers, r.Ceiling.BoundWhich(), 100*NeverLoseTarget)
		b.w("")
		b.w("| N asked | lost | refused (rate / slack / slots) | other errors | held at end | bound | held ÷ bound | asking took | max renewal gap | longest pause |")
		b.w("|---|---|---|---|---|---|---|---|---|---|")
		for _, x := range unpaced {
			bound := r.RunBound(x)
			f := float64(x.HeldAtEnd) / bound
			why := fmt.Sprintf("%s (%s / %s / %s)", commas(int64(x.Refused)), commas(int64(x.RefusedWhy["rate"])),
				commas(int64(x.RefusedWhy["slack"])), commas(int64(x.RefusedWhy["slots"])))
			if n := x.RefusedWhy["other"]; n > 0 {
				why += fmt.Sprintf(", %s other", commas(int64(n)))
			}
			pause := x.LongestPause.Round(time.Millisecond).String()
			if x.FirstLoss > 0 {
				pause += fmt.Sprintf("; first loss at %s, after pauses of at most %s", x.FirstLoss.Round(100*time.Millisecond), x.PauseBeforeLoss.Round(time.Millisecond))
			}
			if x.StealMax >= 0 && x.StealAll >= 0 {
				pause += fmt.Sprintf("; CPU steal %d%% of the run, at most %d%% in 250 ms", x.StealAll, x.StealMax)
				if x.FirstLoss > 0 && x.StealBeforeLoss >= 0 {
					pause += fmt.Sprintf(", %d%% in the 5 s before the first loss", x.StealBeforeLoss)
				}
			}
			b.w("| %s | %s | %s | %s | %s | %s | %.0f%% (%s) | %s | %s s | %s |",
				commas(int64(x.N)), boldIf(x.Lost > 0, commas(int64(x.Lost))), why, commas(int64(x.AcquireErrors-x.Refused)),
				commas(int64(x.HeldAtEnd)), commas(int64(bound)), 100*f, metWord(x.Lost == 0 && f >= NeverLoseTarget),
				x.AcquireTime.Round(100*time.Millisecond), secs(x.GapMax), pause)
		}
		b.w("")
	}
	b.w("| N | acquired in | lost | held at end | heartbeats sent: total, per s (%% of nominal N / 1 s) | late beats | max backlog | renewal gap p50 / p99 / max | goroutines (before → max) | heap / lock | client CPU per lock-second | DynamoDB Local CPU | Close |")
	b.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, x := range r.Runs {
		srv := "n/a"
		if x.CPUServer > 0 {
			srv = fmt.Sprintf("%.2f cores", x.CPUServer.Seconds()/x.Hold.Seconds())
		}
		closeCell := x.CloseTime.Round(10 * time.Millisecond).String()
		if x.LostInClose > 0 {
			closeCell += fmt.Sprintf(", **%s lost in it**", commas(int64(x.LostInClose)))
		}
		if x.CloseErr != "" {
			closeCell += " (" + x.CloseErr + ")"
		}
		lost := fmt.Sprint(x.Lost)
		if x.Lost > 0 {
			lost = fmt.Sprintf("**%d** (%d while acquiring; %s failed beats)", x.Lost, x.LostAcquiring, commas(int64(x.FailedBeats)))
		}
		if x.Acquired < x.N {
			lost += fmt.Sprintf(" (only %s acquired)", commas(int64(x.Acquired)))
		}
		b.w("| %s | %s | %s | %d | %s, %s/s (%.0f%%) | %s | %d | %s / %s / %s s | %d → %d | %s | %.1f µs (%.2f cores) | %s | %s |",
			commas(int64(x.N)), x.AcquireTime.Round(10*time.Millisecond), lost, x.HeldAtEnd,
			commas(int64(x.BeatsSent)), commas(int64(x.BeatsPerSec())), 100*x.BeatsPerSec()*x.Heartbeat.Seconds()/float64(x.N), commas(int64(x.LateBeats)), x.MaxBacklog,
			secs(x.GapP50), secs(x.GapP99), secs(x.GapMax), x.GoroutinesBase, x.GoroutinesMax,
			heapCell(x),
			float64(x.CPUClient.Microseconds())/float64(x.N)/x.Hold.Seconds(), x.CPUClient.Seconds()/x.Hold.Seconds(), srv, closeCell)
	}
	b.w("")
	b.w("Heap per lock: the live heap (after a full collection) with the N locks held, minus the same once Close released them and the client was dropped, divided by the locks held; idle HTTP connections are closed before each measure (the pool's size follows how many calls ran at once, not the locks), the benchmark's own bookkeeping is in both and cancels, and the held heap is the smallest of 10 samples. It still includes the buffers of the beats in flight at that instant, so it is noisy at small N; the in-process figure (BenchmarkHeapPerHeldLock, a stub DynamoDB, in the Go benchmarks below) has no such noise.")
	var heap []string
	for _, n := range heapNs(r) {
		x := r.HeapRun(n)
		heap = append(heap, fmt.Sprintf("%s B at N = %s (%s)", commas(x.HeapPerLock()), commas(int64(n)), metWord(x.HeapPerLock() <= HeapPerLockTarget)))
	}
	if len(heap) > 0 {
		b.w("Goal, at most %d B of heap per held lock: %s. "+
			"dynamolock v2 is not measured beside it (it is not a dependency of the tools module); its author measured 334–389 B per lock.",
			HeapPerLockTarget, strings.Join(heap, "; "))
	}
	if f, ok := r.BoundFraction(); ok {
		b.w("Goal, locks held with zero losses ÷ backend bound (ceiling × lease = %s × %s%s) ≥ %.0f%%: held %s = **%.0f%%** (%s). "+
			"Held: the most locks one run held through the whole hold with zero losses, counting a run in which admission control refused some of its N (refusing rather than losing held locks is what it is for; the table's \"held at end\" column shows how many it held).",
			commas(int64(r.Ceiling.BoundPerSec())), r.Runs[0].Lease, r.Ceiling.BoundWhich(), 100*BoundTarget, commas(int64(r.Held)), 100*f, metWord(f >= BoundTarget))
	}
	if len(r.Runs) > 0 {
		var beats, calls uint64
		for _, x := range r.Runs {
			beats += x.BeatsSent
			calls += x.Calls
		}
		if beats > 0 {
			b.w("DynamoDB calls per successful heartbeat over all runs: %.3f (retries of failed beats included).", float64(calls)/float64(beats))
		}
	}
	return b.String()
}

// unpacedRuns are the runs that asked unpaced.
func (r *CapacityResult) unpacedRuns() []*CapacityRun {
	var out []*CapacityRun
	for _, x := range r.Runs {
		if x.Unpaced {
			out = append(out, x)
		}
	}
	return out
}

func boldIf(b bool, s string) string {
	if b {
		return "**" + s + "**"
	}
	return s
}

// heapCell is the heap per held lock; meaningless when most were lost.
func heapCell(x *CapacityRun) string {
	if !x.OK() {
		return "—"
	}
	return commas(x.HeapBytes/int64(x.N)) + " B"
}

func metWord(ok bool) string {
	if ok {
		return "met"
	}
	return "**not met**"
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }

// Markdown renders section 4.
func (r *FailoverResult) Markdown(cmd string) string {
	var b md
	b.w("Command: `%s`. Lease %s, heartbeat %s, refresh %s (the default), skew bound %s where used. "+
		"A holder renews its lock while a contender waits for it (AcquireLock with a long WithAdditionalTimeToWaitForLock); the holder is then killed at a random moment "+
		"(its DynamoDB client stops sending anything; writes already in flight land). Times are to the moment the contender's AcquireLock returns. "+
		"The floor is 1.0 lease after the holder's last accepted write: before that the holder may still be alive. Goal: at most 1.0 + refresh/lease = %.2f.",
		cmd, r.Lease, r.Heartbeat, r.Refresh, r.Skew, 1+r.Refresh.Seconds()/r.Lease.Seconds())
	b.w("")
	b.w("| scenario | trials | from last write, ÷ lease: p50 / max | from kill, ÷ lease: p50 / max | holder noticed its loss before the takeover, by at least | met |")
	b.w("|---|---|---|---|---|---|")
	target := 1 + r.Refresh.Seconds()/r.Lease.Seconds()
	for _, s := range []struct {
		name string
		ts   []KillTrial
	}{{"waiting contender", r.Waiting}, {"waiting contender, WithClockSkewBound", r.WaitingSkew}} {
		lw, k := killDist(s.ts, false), killDist(s.ts, true)
		b.w("| %s | %d | %s / %s | %s / %s | %s ms | %s |", s.name, len(s.ts),
			leaseRatio(lw.Q(0.5), r.Lease), leaseRatio(lw.Max(), r.Lease), leaseRatio(k.Q(0.5), r.Lease), leaseRatio(k.Max(), r.Lease),
			ms(minMargin(s.ts)), yes(lw.Max().Seconds()/r.Lease.Seconds() <= target))
	}
	b.w("")
	b.w("A contender that arrives after the holder died (more than a lease plus the skew bound earlier), time from its first call:")
	b.w("")
	b.w("| scenario | trials | p50 | max | ÷ lease (p50) |")
	b.w("|---|---|---|---|---|")
	for _, s := range []struct {
		name string
		d    []time.Duration
	}{{"late contender", r.Late}, {"late contender, WithClockSkewBound", r.LateSkew}} {
		d := NewDist(s.d)
		b.w("| %s | %d | %s ms | %s ms | %s |", s.name, len(d), ms(d.Q(0.5)), ms(d.Max()), leaseRatio(d.Q(0.5), r.Lease))
	}
	b.w("")
	w, ws := killDist(r.Waiting, false), killDist(r.WaitingSkew, false)
	l, ls := NewDist(r.Late), NewDist(r.LateSkew)
	b.w("Reading: a waiting contender takes over at its first poll after it has seen the holder's last record version number unchanged for a full lease, "+
		"so the time from the last write is 1.0 lease plus the phase of its polling (up to one refresh period plus jitter): p50 %s, max %s. "+
		"WithClockSkewBound does not speed up a contender that is already waiting (p50 %s): it still notices at its next poll. "+
		"It removes the lease-long watch for a contender that arrives after the holder died: %s ms instead of %s ms (p50). "+
		"In every trial the killed holder had already declared the lock lost (Lock.Done closed) before the contender got it.",
		leaseRatio(w.Q(0.5), r.Lease), leaseRatio(w.Max(), r.Lease), leaseRatio(ws.Q(0.5), r.Lease), ms(ls.Q(0.5)), ms(l.Q(0.5)))
	if minMargin(r.Waiting) < 0 || minMargin(r.WaitingSkew) < 0 {
		b.w("**Except in at least one trial: the holder still believed it held the lock when the contender got it — a safety bug.**")
	}
	b.w("")
	b.w("Clean handoff: the holder releases while a contender in another client waits (the head of the key's queue, polling by rank); time from the start of the release call to the contender holding the lock:")
	b.w("")
	b.w("| refresh period | trials | p50 | p95 | max | p50 ÷ refresh |")
	b.w("|---|---|---|---|---|---|")
	for _, s := range []struct {
		refresh time.Duration
		d       []time.Duration
	}{{r.Refresh, r.Handoff}, {fastRefresh, r.HandoffFast}} {
		d := NewDist(s.d)
		b.w("| %s | %d | %s ms | %s ms | %s ms | %.2f |", s.refresh, len(d), ms(d.Q(0.5)), ms(d.Q(0.95)), ms(d.Max()), d.Q(0.5).Seconds()/s.refresh.Seconds())
	}
	return b.String()
}

func killDist(ts []KillTrial, fromKill bool) Dist {
	ds := make([]time.Duration, len(ts))
	for i, t := range ts {
		ds[i] = t.FromLastWrite
		if fromKill {
			ds[i] = t.FromKill
		}
	}
	return NewDist(ds)
}

// ContentionMarkdown renders section 5.
func ContentionMarkdown(cmd string, runs []*ContentionRun) string {
	var b md
	b.w("Command: `%s`. N clients (one owner each, lease 3 s, heartbeat 1 s; \"2 × 8\": 2 clients of 8 goroutines each, each goroutine a contender) loop on one key: acquire, hold, release, pause. "+
		"Wait is from wanting the lock to holding it, across acquisition timeouts (lease + 1 s); contenders still waiting at the end count with their wait so far. "+
		"Spread: acquisitions per contender (min / max), the largest share one contender got, and Jain's fairness index (1 = equal, 1/N = one contender got all). "+
		"Mode: the AcquireLock options of the run (%s); the runs of one setting in every mode are next to each other, and a mode's acquisitions/s are also given ÷ the default mode's. "+
		"Goal, for a fair mode with no pause only: Jain ≥ %.2f for 2, 8 and 32 contenders and no timeouts; the default mode has none.", cmd, modeList(runs), FairJainTarget)
	b.w("")
	b.w("| mode | contenders | refresh | hold / pause | acquisitions/s | ÷ default | wait p50 | wait p99 | per contender min / max | top share | Jain | never acquired | timeouts | goal | met |")
	b.w("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range runs {
		lo, hi := r.PerContender[0], r.PerContender[0]
		for _, v := range r.PerContender {
			lo, hi = min(lo, v), max(hi, v)
		}
		rel := "—"
		if d := defaultTwin(runs, r); d != nil && d != r && d.PerSec() > 0 {
			rel = fmt.Sprintf("%.2f×", r.PerSec()/d.PerSec())
		}
		target, met := fairCells(r)
		b.w("| %s | %s | %s | %s / %s | %.1f | %s | %s ms | %s ms | %d / %d | %.0f%% | %.2f | %d | %d | %s | %s |",
			r.Mode.Name, r.Who(), r.Refresh, r.Hold, r.Pause, r.PerSec(), rel, ms(r.Waits.Q(0.5)), ms(r.Waits.Q(0.99)), lo, hi, 100*r.MaxShare(), r.Jain(), r.Starved(), r.Timeouts, target, met)
	}
	b.w("")
	var tight, paused []*ContentionRun
	for _, r := range runs {
		if r.Mode.Name != DefaultMode.Name {
			continue
		}
		if r.Pause == 0 {
			tight = append(tight, r)
		} else {
			paused = append(paused, r)
		}
	}
	if len(tight)+len(paused) > 0 {
		b.w("Reading (default mode): the lock keeps no queue, so it is not fair. A waiter in another process notices a release at its next poll; the head of the key's queue polls up to 18 times a second (every 55.6 ms for a lone waiter) at any refresh period up to 1 s (docs/ENGINE.md, polling by rank), so hand-over across processes is tens of milliseconds (§4c), and within a process a release wakes the longest waiter at once (§6: one key could take ~500 acquire + release cycles per second).")
	}
	if len(tight) > 0 {
		share := 0.0
		for _, r := range tight {
			share = max(share, r.MaxShare())
		}
		b.w("With no pause between release and the next attempt, the releasing client re-acquires at once, before any waiter polls again: one contender took up to %.0f%% of all acquisitions, "+
			"and the others waited out their acquisition timeouts (lease + 1 s) and retried. An application that loops on a lock must pause after releasing it, or it starves every other host.", 100*share)
	}
	if len(paused) > 0 {
		lo := 1.0
		for _, r := range paused {
			lo = min(lo, r.Jain())
		}
		b.w("With a pause after each release and a %s refresh, contenders share the lock (Jain's index ≥ %.2f in these runs).", paused[0].Refresh, lo)
	}
	if !slices.ContainsFunc(runs, func(r *ContentionRun) bool { return r.Mode.Fair }) {
		b.w("No fair mode in this build (bench.ContentionModes lists only %s): the fairness goal is not measured.", modeList(runs))
	}
	return b.String()
}

// modeList names the modes of runs, in order of appearance.
func modeList(runs []*ContentionRun) string {
	var names []string
	for _, r := range runs {
		if !slices.Contains(names, r.Mode.Name) {
			names = append(names, r.Mode.Name)
		}
	}
	return strings.Join(names, ", ")
}

// defaultTwin returns the default-mode run with r's setting, if any.
func defaultTwin(runs []*ContentionRun, r *ContentionRun) *ContentionRun {
	for _, d := range runs {
		c := d.ContentionConfig
		if d.Mode.Name == DefaultMode.Name && c.Contenders == r.Contenders && c.Goroutines == r.Goroutines && c.Refresh == r.Refresh && c.Hold == r.Hold && c.Pause == r.Pause && c.Duration == r.Duration {
			return d
		}
	}
	return nil
}

// fairCells is the target and met cells of a contention run.
func fairCells(r *ContentionRun) (target, met string) {
	held, ok := r.MeetsFairTarget()
	if !held {
		return "—", "—"
	}
	return fmt.Sprintf("Jain ≥ %.2f, no timeouts", FairJainTarget), yes(ok)
}

// firstLine is err's message, or its first line and how many more errors
// it joins.
func firstLine(err error) string {
	msg := err.Error()
	if n := strings.Count(msg, "\n") + 1; n > 1 {
		return fmt.Sprintf("%d errors, first: %s", n, msg[:strings.IndexByte(msg, '\n')])
	}
	return msg
}
