package bench

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// summary is the Summary's table: each figure of the run beside its goal.
func summary(r *Results) string {
	var b md
	b.w("| figure | goal | measured | met |")
	b.w("|---|---|---|---|")
	if r.Calls != nil {
		met := 0
		for _, row := range r.Calls.Rows {
			if row.Met {
				met++
			}
		}
		b.w("| DynamoDB calls per operation (§1) | the documented count | %d of %d operations as documented | %s |", met, len(r.Calls.Rows), yes(met == len(r.Calls.Rows)))
	}
	if l := r.Latency; l != nil {
		for _, x := range []struct {
			name string
			goal float64
		}{{OpAcquire, AcquireLatencyGoal}, {OpRelease, ReleaseLatencyGoal}, {OpHeartbeat, 0}} {
			v := l.latencyRatio(x.name)
			goal, met := fmt.Sprintf("≤ %.2f×", x.goal), yes(v <= x.goal)
			if x.goal == 0 {
				goal, met = "—", "—"
			}
			b.w("| %s p50 ÷ raw conditional UpdateItem p50 (§2) | %s | %.2f× (%s ms vs %s ms) | %s |", x.name, goal, v,
				ms(l.Op(x.name).D.Q(0.5)), ms(l.Op(OpRawUpdate).D.Q(0.5)), met)
		}
	}
	if c := r.Capacity; c != nil {
		ceil := ""
		if c.Ceiling != nil {
			ceil = fmt.Sprintf("; backend ceiling %s raw writes/s%s", commas(int64(c.Ceiling.BoundPerSec())), c.Ceiling.BoundWhich())
		}
		hold := "30 s"
		if len(c.Runs) > 0 {
			hold = c.Runs[0].Hold.Round(time.Second).String()
		}
		b.w("| locks one client held %s with zero losses, lease 3 s / heartbeat 1 s (§3) | ≥ %s | %s%s | %s |", hold, commas(HeldGoal), commas(int64(c.MaxHeld)), ceil, yes(c.MaxHeld >= HeldGoal))
		if f, ok := c.BoundFraction(); ok {
			b.w("| locks held with zero losses ÷ backend bound (ceiling × lease) | ≥ %.0f%% | %.0f%% (%s of %s) | %s |",
				100*BoundTarget, 100*f, commas(int64(c.Held)), commas(int64(c.Bound())), yes(f >= BoundTarget))
		}
		for _, n := range heapNs(c) {
			x := c.HeapRun(n)
			label := fmt.Sprintf("N = %s", commas(int64(n)))
			if n == c.MaxHeld {
				label += " (largest held without loss)"
			}
			b.w("| heap per held lock, %s | ≤ %d B | %s B | %s |", label, HeapPerLockTarget, commas(x.HeapPerLock()), yes(x.HeapPerLock() <= HeapPerLockTarget))
		}
	}
	if f := r.Failover; f != nil {
		target := 1 + f.Refresh.Seconds()/f.Lease.Seconds()
		for _, s := range []struct {
			name string
			ts   []KillTrial
		}{{"failover ÷ lease (from the holder's last write), p50 / max (§4)", f.Waiting}, {"same, WithClockSkewBound", f.WaitingSkew}} {
			d := killDist(s.ts, false)
			b.w("| %s | ≤ %.2f (1 + refresh/lease) | %s / %s | %s |", s.name, target, leaseRatio(d.Q(0.5), f.Lease), leaseRatio(d.Max(), f.Lease),
				yes(d.Max().Seconds()/f.Lease.Seconds() <= target))
		}
		h := NewDist(f.Handoff)
		b.w("| clean handoff to another client (the head of the queue polls by rank), refresh %s: p50 / max | p50 ≤ 50 ms | %s / %s ms | %s |", f.Refresh, ms(h.Q(0.5)), ms(h.Max()), yes(h.Q(0.5) <= 50*time.Millisecond))
	}
	if h := r.Handover; h != nil {
		for _, run := range h.Runs {
			b.w("| same-process hand-over, refresh %s: p50 ÷ raw UpdateItem p50 (p50 / p95 / max) | ≤ %.0f× | %.1f× (%s / %s / %s ms; raw %s ms)%s | %s |",
				run.Refresh, HandoverTarget, h.Ratio(run), ms(run.D.Q(0.5)), ms(run.D.Q(0.95)), ms(run.D.Max()), ms(h.Floor.Q(0.5)), missingNote(run.Missing), yes(h.Met(run)))
		}
	}
	b.WriteString(fairSummary(r.Contention))
	if r.Session != nil {
		b.WriteString(sessionSummary(r.Session))
	}
	return b.String()
}

// fairSummary is the Summary's fairness rows: for each refresh period of
// the fair mode's runs with no pause, Jain's index and the timeouts for
// each number of contenders (§5 has every run).
func fairSummary(runs []*ContentionRun) string {
	var b md
	if len(runs) > 0 && !slices.ContainsFunc(runs, func(c *ContentionRun) bool { return c.Mode.Fair }) {
		b.w("| fair mode, no pause: Jain's index, timeouts | Jain ≥ %.2f, no timeouts | not run: no fair mode in this build | **no** |", FairJainTarget)
		return b.String()
	}
	var refreshes []time.Duration
	for _, c := range runs {
		if _, held := c.MeetsFairTarget(); held && !slices.Contains(refreshes, c.Refresh) {
			refreshes = append(refreshes, c.Refresh)
		}
	}
	for _, refresh := range refreshes {
		var who, jain, timeouts []string
		all := true
		for _, c := range runs {
			if held, ok := c.MeetsFairTarget(); held && c.Refresh == refresh {
				who = append(who, c.Who())
				jain = append(jain, fmt.Sprintf("%.2f", c.Jain()))
				timeouts = append(timeouts, fmt.Sprint(c.Timeouts))
				all = all && ok
			}
		}
		b.w("| fair mode, no pause, refresh %s: Jain's index and timeouts with %s contenders (§5) | Jain ≥ %.2f, no timeouts | %s; %s | %s |",
			refresh, strings.Join(who, " / "), FairJainTarget, strings.Join(jain, " / "), strings.Join(timeouts, " / "), yes(all))
	}
	return b.String()
}

// heapNs are the N whose heap per lock the Summary reports: HeapAtN and
// the largest N held without loss, when the run held them.
func heapNs(c *CapacityResult) []int {
	var ns []int
	for _, n := range []int{HeapAtN, c.MaxHeld} {
		if n > 0 && c.HeapRun(n) != nil && !slices.Contains(ns, n) {
			ns = append(ns, n)
		}
	}
	return ns
}

func missingNote(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; **%d not handed over**", n)
}
