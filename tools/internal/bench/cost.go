package bench

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/arielsrv/dynamolock/v2"
)

// Prices assumed for the cost model: DynamoDB on-demand and provisioned
// capacity, us-east-1, standard table class, as published by AWS at the
// time of writing. They are assumptions, not measurements.
const (
	PricePerMillionWRU = 0.625   // USD, on-demand write request units
	PricePerMillionRRU = 0.125   // USD, on-demand read request units
	PricePerWCUHour    = 0.00065 // USD, provisioned write capacity unit-hour
	HoursPerMonth      = 730
)

// KeyReadsPerSec is the most a key's placed waiters read together per
// second while a holder keeps it, at the default refresh period (keyReads
// in the library's pace.go): a lone waiter reads that often.
const KeyReadsPerSec = 18

// CostModel turns measured calls per operation into request units and money.
type CostModel struct {
	ItemBytes int           // a lock item without data, as measured
	Heartbeat time.Duration // heartbeat period
	Refresh   time.Duration // polling period of a waiting acquisition
	Lease     time.Duration
}

// DefaultCostModel is the model at the library's default settings.
func DefaultCostModel(itemBytes int) CostModel {
	return CostModel{ItemBytes: itemBytes, Heartbeat: dynamolock.DefaultHeartbeatPeriod,
		Refresh: dynamolock.DefaultRefreshPeriod, Lease: dynamolock.DefaultLeaseDuration}
}

// WRU is the write request units of one write of the item (1 KB units).
func (m CostModel) WRU() int { return (m.ItemBytes + 1023) / 1024 }

// RRU is the read request units of one consistent read (4 KB units).
func (m CostModel) RRU() int { return (m.ItemBytes + 4095) / 4096 }

// WRUPerLockHour is what holding one lock for an hour costs in heartbeats.
func (m CostModel) WRUPerLockHour() float64 {
	return float64(time.Hour/m.Heartbeat) * float64(m.WRU())
}

// MonthlyHeld is the on-demand cost per month of n locks held all month.
func (m CostModel) MonthlyHeld(n int) float64 {
	return float64(n) * m.WRUPerLockHour() * HoursPerMonth * PricePerMillionWRU / 1e6
}

// MonthlyHeldProvisioned is the same at provisioned capacity sized for the
// steady heartbeat rate, for comparison.
func (m CostModel) MonthlyHeldProvisioned(n int) float64 {
	return float64(n) / m.Heartbeat.Seconds() * float64(m.WRU()) * PricePerWCUHour * HoursPerMonth
}

// WritesPerSec is the heartbeat write rate of n held locks.
func (m CostModel) WritesPerSec(n int) float64 { return float64(n) / m.Heartbeat.Seconds() }

func usd(v float64) string {
	switch {
	case v >= 100:
		return "$" + commas(int64(v+0.5))
	case v >= 0.01:
		return fmt.Sprintf("$%.2f", v)
	}
	return fmt.Sprintf("$%.6f", v)
}

func commas(n int64) string {
	if n < 0 {
		return "−" + commas(-n)
	}
	s := fmt.Sprint(n)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CostMarkdown renders section 6 from the measured calls.
func CostMarkdown(calls *CallsResult, capRes *CapacityResult) string {
	m := DefaultCostModel(calls.ItemBytes)
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	w("Computed by `go -C tools run ./cmd/lockbench all` from the calls measured in §1 and the item size measured there; nothing here is a measurement of AWS.")
	w("")
	w("**Price assumed** (on-demand, us-east-1, standard table class, AWS's published prices as of %s — check before you rely on them): "+
		"$%.3f per million write request units (WRU), $%.3f per million read request units (RRU); a month is %d hours. "+
		"For comparison only: provisioned capacity at $%.5f per WCU-hour.", time.Now().Format("2006-01-02"),
		PricePerMillionWRU, PricePerMillionRRU, HoursPerMonth, PricePerWCUHour)
	w("")
	w("**Units per call.** A lock item as this client writes it (partition key, owner, lease, record version number, fencing token; no data) measured **%d bytes**, "+
		"so every write is %d WRU (1 KB units; an UpdateItem is billed on the larger of the item before and after, and a write whose condition fails is billed too) "+
		"and every consistent read %d RRU (4 KB units).", calls.ItemBytes, m.WRU(), m.RRU())
	w("")
	w("| operation (default settings: lease %s, heartbeat %s, refresh %s) | calls | units | on-demand cost |", m.Lease, m.Heartbeat, m.Refresh)
	w("|---|---|---|---|")
	w("| acquire a free or released lock | 1 write | %d WRU | %s per million |", m.WRU(), usd(float64(m.WRU())*PricePerMillionWRU))
	w("| release | 1 write | %d WRU | %s per million |", m.WRU(), usd(float64(m.WRU())*PricePerMillionWRU))
	w("| one acquisition + release cycle | 2 writes | %d WRU | %s per million cycles |", 2*m.WRU(), usd(float64(2*m.WRU())*PricePerMillionWRU))
	// A waiter holds a place in the key's queue and polls by rank
	// (pace.go, docs/ENGINE.md "Polling by rank"): the key's placed
	// waiters read at most KeyReadsPerSec together while a holder holds (a
	// lone waiter that often); every waiter renews its place every third
	// of its lease.
	loneReadsPerHour := float64(KeyReadsPerSec * 3600)
	renewals := float64(time.Hour / (m.Lease / 3))
	w("| wait for a held lock, alone on its key | 1 failed write + 1 write to join the key's queue + ≤ %d consistent reads a second + 1 write per third of the lease waited + 1 acquiring write | %d WRU, plus ≤ %d RRU/s and %.2f WRU/s waited | %s per waiter-hour |",
		KeyReadsPerSec, 3*m.WRU(), KeyReadsPerSec*m.RRU(), renewals/3600*float64(m.WRU()),
		usd(loneReadsPerHour*float64(m.RRU())*PricePerMillionRRU/1e6+renewals*float64(m.WRU())*PricePerMillionWRU/1e6))
	w("| each further waiter on that key | the same writes; its reads come out of the key's %d a second (the head reads less) | %d WRU, plus %.2f WRU/s waited | %s per waiter-hour |",
		KeyReadsPerSec, 3*m.WRU(), renewals/3600*float64(m.WRU()), usd(renewals*float64(m.WRU())*PricePerMillionWRU/1e6))
	w("| a hand-over to a waiter in another process | the head's read that sees the release + its acquiring write (its place removed in it) | %d RRU + %d WRU | %s per million |",
		m.RRU(), m.WRU(), usd(float64(m.RRU())*PricePerMillionRRU+float64(m.WRU())*PricePerMillionWRU))
	polls := int(math.Ceil(m.Lease.Seconds() * KeyReadsPerSec))
	kept := int(m.Lease/(m.Lease/3)) - 1
	w("| take over a dead owner's lock (a lone waiter waits out its lease) | 1 failed write + 1 join + ⌈lease × %d/s⌉ = %d reads + %d renewals of its place + 1 write | %d WRU + %d RRU | %s per million takeovers |",
		KeyReadsPerSec, polls, kept, (3+kept)*m.WRU(), polls*m.RRU(),
		usd(float64((3+kept)*m.WRU())*PricePerMillionWRU+float64(polls*m.RRU())*PricePerMillionRRU))
	w("| hold a lock for an hour | %d heartbeats | %.0f WRU | %s per lock-hour |", int(time.Hour/m.Heartbeat), m.WRUPerLockHour(),
		usd(m.WRUPerLockHour()*PricePerMillionWRU/1e6))
	w("")
	fast := m
	fast.Heartbeat = time.Second
	w("| locks held all month | heartbeat writes/s | on-demand per month | at heartbeat 1 s | provisioned (for comparison) |")
	w("|---|---|---|---|---|")
	for _, n := range []int{10_000, 1_000_000} {
		w("| %s | %s | **%s** | %s | %s |", commas(int64(n)), commas(int64(m.WritesPerSec(n))), usd(m.MonthlyHeld(n)),
			usd(fast.MonthlyHeld(n)), usd(m.MonthlyHeldProvisioned(n)))
	}
	w("")
	w("Heartbeats dominate: the bill is proportional to locks held × (1 / heartbeat period) and independent of how often locks change hands. " +
		"Doubling the heartbeat period halves it; the lease must stay at least twice the heartbeat period.")
	w("")
	w("**Where DynamoDB's own limits bite** (documented limits, not measured here):")
	w("")
	w("- **One hot key.** An item lives in one partition, and a partition serves at most 1,000 WRU/s and 3,000 RRU/s. " +
		"One key therefore supports at most ~500 acquire + release cycles per second across all clients (failed conditional writes of contenders count against the same 1,000). " +
		"Waiters do not multiply the reads: a key's placed waiters read it at most 18 times a second together (the head of its queue every 55.6 ms when alone, every 77 ms at the head of 100, the others by rank). " +
		"Places cost writes instead: each is renewed every third of its lease (0.15 writes/s at lease 20 s) " +
		"and adds about 70 bytes to the item, so 100 waiters make every write of the item about 8 WRU (heartbeats included) and every read 2 RRU, and write about 120 WRU/s in renewals. " +
		"A waiter beyond the 100th has no place and polls once a refresh period, as every waiter did before waiters polled by rank (3,000 of those at the default 1 s refresh fill the partition's reads). " +
		"§4c: a hand-over across processes takes about one poll of the head, not a refresh period.")
	w("- **Table throughput.** A new on-demand table serves up to 4,000 WRU/s at once and then up to double its previous peak; "+
		"the default per-table quota is 40,000 WRU/s. At the default 5 s heartbeat that is %s held locks per table at once and %s at the quota; "+
		"1,000,000 held locks need %s WRU/s, so a quota increase (or several tables), and a ramp or pre-warming.",
		commas(int64(4000*m.Heartbeat.Seconds())), commas(int64(40000*m.Heartbeat.Seconds())), commas(int64(m.WritesPerSec(1_000_000))))
	w("- **Item size.** Items are limited to 400 KB (the client rejects larger data before any call). But every acquire, heartbeat and release rewrites the whole item: "+
		"data that makes the item exceed 1 KB multiplies the cost of every heartbeat (a 10 KB payload makes each heartbeat 11 WRU). Keep lock data under ~%d bytes, or store it elsewhere.",
		1024-calls.ItemBytes)
	w("- **Transactions.** TransactWriteItems takes at most 100 actions and 4 MB, and transactional writes cost 2 WRU per KB. A guarded write " +
		"(`Lock.TransactionCondition`: a ConditionCheck on the lock item inside the caller's transaction) therefore uses one of the 100 actions and adds 2 WRU to that transaction.")
	if capRes != nil && capRes.Ceiling != nil {
		w("- **One client process.** §3: one client held %s locks at lease 3 s / heartbeat 1 s here; the limit was DynamoDB Local's write rate (%s writes/s%s), not the client. "+
			"Against DynamoDB the per-client limit is the heartbeat concurrency divided by the round trip (32 beats in flight at ~5 ms is ~6,400 beats/s).",
			commas(int64(capRes.MaxHeld)), commas(int64(capRes.Ceiling.BoundPerSec())), capRes.Ceiling.BoundWhich())
	}
	return b.String()
}
