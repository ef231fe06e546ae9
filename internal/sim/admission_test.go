package sim

import (
	"context"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// Admission control in the simulation (issue 21, items 4 and 6): some
// clients get one or two heartbeat workers, so that the seed's slow
// answers can saturate them and admission control refuses acquisitions
// (ErrHeartbeatCapacity). Invariant 14, no refusal without cause: a client
// refuses only while its renewals could not keep up. The check is from
// outside the library: the round trips of the client's heartbeats over
// the meter's memory (a minute) and the locks it holds and asks for. A refusal
// is without cause when, even at the slowest of those round trips, the
// client's workers could renew twice what the held locks, the acquisitions
// in flight and the refused one need (one renewal per lease each) at the
// admission fraction. Finding 3 of issue 21 (a rate measured in one slow
// window kept admission shut while every later beat was fast) is such a
// refusal.

// admissionMemory is how far back the check looks at heartbeat round
// trips: the capacity meter's memory of saturated windows (rateMemory).
const admissionMemory = time.Minute

// beatLog is one client's heartbeat round trips, as the library sees them.
type beatLog struct {
	mu      sync.Mutex
	started map[context.Context]time.Time // beats in flight
	done    []beatDone
}

type beatDone struct {
	at, rtt time.Duration // since the world's start; round trip
}

// heartbeatWorkers draws, from a stream of its own (so that the seed's
// other draws do not move), whether the client named name gets one or two
// heartbeat workers (0: the default).
func heartbeatWorkers(seed uint64, name string) int {
	h := fnv.New64a()
	h.Write([]byte(name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	if r.IntN(3) == 0 {
		return 1 + r.IntN(2)
	}
	return 0
}

// timeBeats wraps what cl's library client sends to, recording the round
// trip of every request: heartbeats of every kind (a lock's, a read
// lock's reader entry) and the other requests of its locks, which a
// heartbeat worker may wait behind (a lock's writes take turns), so that
// the check errs toward finding a cause.
func (w *world) timeBeats(cl *simClient) {
	cl.beats = &beatLog{started: map[context.Context]time.Time{}}
	b := cl.beats
	var rules []*faults.Rule
	for _, op := range []string{"UpdateItem", "TransactWriteItems", "DeleteItem", "PutItem", "GetItem"} {
		rules = append(rules, &faults.Rule{Op: op,
			Before: func(ctx context.Context) error {
				b.mu.Lock()
				b.started[ctx] = time.Now()
				b.mu.Unlock()
				return nil
			},
			After: func(ctx context.Context) {
				b.mu.Lock()
				if s, ok := b.started[ctx]; ok {
					delete(b.started, ctx)
					b.done = append(b.done, beatDone{at: time.Since(w.start), rtt: time.Since(s)})
				}
				b.mu.Unlock()
			}})
	}
	cl.api = faults.Wrap(cl.api, rules...)
}

// slowest is the longest round trip of cl's UpdateItems that ended in
// the last admissionMemory, or are still in flight (their time so far),
// and how many there were.
func (b *beatLog) slowest(now time.Duration) (time.Duration, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	var worst time.Duration
	n := 0
	for _, d := range b.done {
		if d.at >= now-admissionMemory {
			worst = max(worst, d.rtt)
			n++
		}
	}
	for _, s := range b.started {
		worst = max(worst, time.Since(s))
	}
	return worst, n
}

// asking counts n locks cl is asking for until the returned function is
// called with the call's error; a refusal is checked against invariant 14
// before the call's locks leave the count.
func (w *world) asking(cl *simClient, n int) func(error) {
	w.mu.Lock()
	cl.asking += n
	w.mu.Unlock()
	return func(err error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		if errors.Is(err, dynamolock.ErrHeartbeatCapacity) {
			w.checkRefusal(cl, err)
		}
		cl.asking -= n
	}
}

// checkRefusal is invariant 14; w.mu is held.
func (w *world) checkRefusal(cl *simClient, err error) {
	if cl.beats == nil || cl.workers == 0 || cl.lease <= 0 {
		return
	}
	slowest, n := cl.beats.slowest(time.Since(w.start))
	if n == 0 || slowest <= 0 {
		return // nothing measured recently: the library's meter keeps older windows; no judgement
	}
	held := 0
	for _, tr := range w.tracked {
		if tr.client == cl && tr.l.Err() == nil {
			held++
		}
	}
	// The library's rule (renewalNeed in scheduler.go): a lock needs one
	// renewal per lease less two round trips, the lease a beat must keep
	// when a worker takes it; at the slowest round trip, here.
	usable := cl.lease - 2*slowest
	if usable < slowest {
		usable = slowest
	}
	need := float64(held+cl.asking) / usable.Seconds()
	could := float64(cl.workers) / slowest.Seconds()
	if need*2 <= dynamolock.DefaultHeartbeatAdmission*could {
		w.violate(14, "%s refused an acquisition without cause: %v; it holds %d and asks for %d (need %.1f renewals/s), and its %d heartbeat workers at the slowest round trip of the last %s (%s, %d beats) renew %.1f/s",
			cl.name, err, held, cl.asking, need, cl.workers, admissionMemory, slowest, n, could)
	}
}
