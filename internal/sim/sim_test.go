package sim

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

var (
	flagSeed     = flag.Uint64("sim.seed", 0, "run only this seed, and print its trace with -v")
	flagSeeds    = flag.Int("sim.seeds", 0, "number of seeds to run (0: as many as -sim.budget allows)")
	flagBase     = flag.Uint64("sim.base", 0, "first seed (0: chosen from the clock and printed)")
	flagBudget   = flag.Duration("sim.budget", 3*time.Second, "wall time after which no new seed starts (0: no limit)")
	flagDuration = flag.Duration("sim.duration", time.Minute, "virtual time each seed runs its clients for")
	flagSummary  = flag.String("sim.summary", "", "also write the summary line to this file")
	flagAvoid    = flag.String("sim.avoid", "delete", "comma-separated operation mixes (or checks) to leave out, because they meet documented limits or defects of the library (docs/SIMULATION.md): delete, late-reader, late-transaction, renewal-orphans, refresh-burst, release-retry, reentrant-mix, undecodable, fair, recipes, rwlock, sessions, same-owner, forced-release, foreign-v2, leader, resume, targeted, crowd; empty for none")
	flagSerial   = flag.Bool("sim.serial", false, "run seeds one after another, in order")
	flagFailFast = flag.Bool("sim.failfast", false, "start no new seed after one found a violation")
	flagRepeat   = flag.Int("sim.repeat", 1, "with -sim.seed: run the seed up to this many times until it shows a violation (one seed gives one run: more is for library versions that draw randomness outside internal/entropy)")
	flagTrace    = flag.String("sim.trace", "", "with -sim.seed: write the seed's setup, violations and whole trace to this file")
	flagFaults   = flag.String("sim.faults", "call", "where faults are injected: call (whole calls fail, land twice, lose their answer), attempt (the SDK's own attempts, through the real SDK client), or mixed (the seed chooses per client)")
	flagHang     = flag.Duration("sim.hang", 2*time.Minute, "wall time after which a seed that has not finished is reported as hung")
)

// totals across seeds, for the summary line.
type totals struct {
	seeds, ops, violations, clientSeconds atomic.Int64
	met                                   conflictCounts // transaction conflicts the clients met (conflicts_test.go)
}

// TestSimulation runs seeds of the simulation: in each, inside a synctest
// bubble (virtual time), a few lock clients on the DynamoDB model, each
// through faults the seed chose, do random lock operations on a few keys;
// the invariants of issue 11 are checked after every model request.
func TestSimulation(t *testing.T) {
	var tot totals
	started := time.Now()
	first, n := *flagBase, *flagSeeds
	if *flagSeed != 0 {
		first, n = *flagSeed, 1
	} else if first == 0 {
		first = uint64(time.Now().UnixNano()%1_000_000_000) + 1
		t.Logf("seeds from %d (set -sim.base to repeat)", first)
	}
	t.Cleanup(func() {
		line := fmt.Sprintf("simulated %d seeds, %d operations: %d violations", tot.seeds.Load(), tot.ops.Load(), tot.violations.Load())
		t.Logf("%s (%.0f virtual client-seconds in %s of wall time; %s)", line, float64(tot.clientSeconds.Load()), time.Since(started).Round(time.Millisecond), &tot.met)
		if *flagSummary != "" {
			detail := fmt.Sprintf("%.0f virtual client-seconds in %s of wall time; %s\n", float64(tot.clientSeconds.Load()), time.Since(started).Round(time.Millisecond), &tot.met)
			_ = os.WriteFile(*flagSummary, []byte(detail+line+"\n"), 0o644)
		}
	})
	for i := uint64(0); n == 0 || i < uint64(n); i++ {
		if *flagBudget > 0 && time.Since(started) > *flagBudget && i > 0 {
			break
		}
		seed := first + i
		if *flagSeed != 0 {
			for range max(1, *flagRepeat) {
				if runSeed(t, seed, &tot) {
					break
				}
			}
			return
		}
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			if !*flagSerial {
				t.Parallel()
			}
			if *flagBudget > 0 && time.Since(started) > *flagBudget || *flagFailFast && tot.violations.Load() > 0 {
				t.SkipNow()
			}
			runSeed(t, seed, &tot)
		})
		if n == 0 && *flagBudget > 0 && i >= uint64(runtime.GOMAXPROCS(0))*200 {
			break // parallel subtests start only after this loop: bound what is queued
		}
	}
}

// runSeed runs one seed and reports whether it found a violation.
func runSeed(t *testing.T, seed uint64, tot *totals) bool {
	var w *world
	// A bubble whose goroutines block on something synctest cannot see
	// (a sync.Mutex held across a wait on the virtual clock) never advances
	// time and never ends: report it with the stacks instead of hanging.
	watchdog := time.AfterFunc(*flagHang, func() {
		buf := make([]byte, 1<<22)
		fmt.Fprintf(os.Stderr, "FAIL: seed %d hung for %s of wall time (replay: %s)\n%s\n",
			seed, *flagHang, replayCommand(seed), buf[:runtime.Stack(buf, true)])
		os.Exit(2)
	})
	defer watchdog.Stop()
	synctest.Test(t, func(t *testing.T) {
		w = simulate(seed, *flagDuration)
	})
	if *flagTrace != "" && *flagSeed != 0 {
		if err := os.WriteFile(*flagTrace, []byte(w.report()), 0o644); err != nil {
			t.Errorf("-sim.trace: %v", err)
		}
	}
	tot.seeds.Add(1)
	tot.ops.Add(int64(w.ops))
	tot.clientSeconds.Add(int64(w.clientSeconds))
	tot.met.add(&w.met)
	if len(w.violations) > 0 {
		tot.violations.Add(1)
		// The trace up to a little after the first violation.
		end := len(w.trace)
		for i, line := range w.trace {
			if strings.Contains(line, " VIOLATION ") {
				end = min(i+20, len(w.trace))
				break
			}
		}
		tail := w.trace[max(0, end-400):end]
		if *flagSeed != 0 {
			tail = w.trace // replaying one seed: all of it
		}
		t.Errorf("seed %d: %d violations; replay: %s\n%s\nsetup: %s\ntrace up to the first violation (%d lines):\n%s",
			seed, len(w.violations), replayCommand(seed), strings.Join(w.violations, "\n"), w.setup, len(tail), strings.Join(tail, "\n"))
		return true
	}
	if *flagSeed != 0 && testing.Verbose() {
		t.Logf("seed %d: %d operations, no violations\nsetup: %s\ntrace:\n%s", seed, w.ops, w.setup, strings.Join(w.trace, "\n"))
	}
	return false
}

// replayCommand is the command that runs seed again, alone, with every
// flag that changes what a seed does, and writes its whole trace.
func replayCommand(seed uint64) string {
	args := []string{"go test ./internal/sim -run '^TestSimulation$'", fmt.Sprintf("-sim.seed=%d", seed)}
	for _, name := range []string{"sim.duration", "sim.avoid", "sim.delayall", "sim.faults", "sim.clocks", "sim.clockrate", "sim.clockbreak", "sim.conflicts"} {
		if f := flag.Lookup(name); f.Value.String() != f.DefValue {
			args = append(args, fmt.Sprintf("-%s=%q", name, f.Value.String()))
		}
	}
	args = append(args, fmt.Sprintf("-sim.trace=sim-%d.trace", seed), "-v")
	return strings.Join(args, " ")
}

// report is a seed's setup, violations and whole trace: what -sim.trace
// writes.
func (w *world) report() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d operations, %d violations\nsetup: %s\n", w.seed, w.ops, len(w.violations), w.setup)
	for _, v := range w.violations {
		b.WriteString(v + "\n")
	}
	b.WriteString("trace:\n")
	for _, line := range w.trace {
		b.WriteString(line + "\n")
	}
	return b.String()
}

// world is one seed's simulation.
type world struct {
	seed      uint64
	model     *ddbmodel.Model
	lockTable string
	dataTable string
	pkName    string
	sortKey   string // "" without a sort key
	keys      []string
	start     time.Time
	healed    atomic.Bool
	ghosts    sync.WaitGroup
	setup     string

	mu            sync.Mutex // guards everything below; taken inside the model's mutex
	trace         []string
	violations    []string
	ops           int
	seq           uint64
	clientSeconds float64
	met           conflictCounts
	current       map[string]ddbmodel.Item
	maxToken      map[string]uint64
	dataMax       map[string]uint64
	releasedBy    map[relKey]uint64
	tracked       map[*dynamolock.Lock]*tracked
	releasing     map[*dynamolock.Lock]int
	closing       map[string]bool
	acquireRVNs   map[int][]string
	undoSent      map[int]bool
	undoFaulted   map[int]bool // a fault met by a request of the call sent once its undo began
	callGhost     map[int]bool // a request of the call may land late (a ghost)
	calls         int
	slots         []*simClient
	dataSeen      map[string]map[string]bool     // key → every data value its item held (recordData)
	foreignSeq    map[string]uint64              // key → the last request of the foreign writer that changed it
	rwLog         []rwRec                        // granted RWLock calls (invariant 12)
	rwCalls       map[*int]time.Time             // RWLock calls in flight, by when they started
	rwBeats       map[string]rwBeat              // the RWLock queue's beats (rwHook)
	clocks        clockPlan                      // -sim.clocks (clock_test.go)
	adv           adversaryPlan                  // issue 46's adversaries (adversaries_test.go)
	forced        map[relKey]bool                // locks a forced release of a view ended
	conflictAt    map[string]time.Time           // a caller's last write refused by another's transaction in progress
	adopted       map[relKey]string              // an acquisition (key, owner, token) another client adopted under its owner name: that client
	v2            v2State                        // the v2 writer's lock
	byName        map[string]*simClient          // every client that ran, by name
	entryCall     map[string]map[string]*simCall // key → queue entry id → the call that wrote it (calls_test.go)
	sessions      map[string]*sessionInfo        // session item's key → what is known of it (orphans_test.go)
	sessionNamed  map[string]bool                // items that may name a session (orphans_test.go)
	itemWriter    map[string]*simCall            // item (or reader entry) → the call that last wrote it, nil: none
	orphans       map[string]*orphan             // invariant 21
	keyReads      map[string]*keyReads           // invariant 22 (budget_test.go)
	deadHolders   map[string]string              // invariant 23: the record version number reported, by key
	firstFair     map[string]fairHead            // invariant 23: each key's first fair entry, and since when
	keyFault      map[string]time.Time           // client name, NUL, key → when a request of it on that item last met a fault
	lead          leaderState                    // Runs' terms and resumes (leaders_test.go)

	// Exact replay (replay_test.go).
	randMu  sync.Mutex
	draws   map[drawKey]int // draws of the library's randomness at drawNow
	drawNow int64
	disp    *dispatcher
}

// lockDB is what a simulated lock client sends its requests to.
type lockDB interface {
	dynamolock.DynamoDBClient
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// simClient is one lock client and its configuration.
type simClient struct {
	name string
	// owner: the owner name its library client runs under, when another
	// client's (the same-owner mix, adversaries_test.go); "": its name.
	owner string
	c     *dynamolock.Client
	db    *faultyDB
	api   lockDB // what c sends its requests to: db, or the SDK client over db's transport
	lease time.Duration
	hb    time.Duration
	opts  []dynamolock.ClientOption
	desc  string
	// session: the client holds its locks through a session
	// (WithSession); the others, beside it, renew each lock.
	session bool
	born    time.Time
	closed  bool
	// reentrantOnly: with -sim.avoid=reentrant-mix, this client's
	// acquisitions are all reentrant or (false) none.
	reentrantOnly bool
	// reentrant serialises this client's reentrant acquisitions (unless
	// -sim.delayall): the library holds a sync.Mutex across their wait.
	reentrant chan struct{}
	// clock: the host's own clock (-sim.clocks; nil: the bubble's), kept
	// by the client that replaces this one after a Close.
	clock     *simClock
	skewBound time.Duration // WithClockSkewBound, 0: none
	// workers: WithHeartbeatConcurrency (0: the default); such a client's
	// heartbeat round trips are timed (beats) and its refusals checked
	// against invariant 14 (admission_test.go). asking: locks its calls
	// are asking for now; guarded by world.mu.
	workers int
	beats   *beatLog
	asking  int
	stalled bool // a stall met it once (invariant 20); guarded by world.mu
	// The last stall and pause of its process (invariants 21 and 23);
	// guarded by world.mu.
	stallFrom, stallUntil   time.Time
	pausedFrom, pausedUntil time.Time
}

func simulate(seed uint64, dur time.Duration) *world {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	w := &world{
		seed: seed, model: ddbmodel.New(), lockTable: "locks", dataTable: "guarded", pkName: "key",
		start: time.Now(), current: map[string]ddbmodel.Item{}, maxToken: map[string]uint64{}, dataMax: map[string]uint64{},
		releasedBy: map[relKey]uint64{}, tracked: map[*dynamolock.Lock]*tracked{}, releasing: map[*dynamolock.Lock]int{},
		closing: map[string]bool{}, acquireRVNs: map[int][]string{}, undoSent: map[int]bool{},
		undoFaulted: map[int]bool{}, callGhost: map[int]bool{}, forced: map[relKey]bool{}, adopted: map[relKey]string{}, conflictAt: map[string]time.Time{},
		byName: map[string]*simClient{}, entryCall: map[string]map[string]*simCall{}, sessions: map[string]*sessionInfo{},
		sessionNamed: map[string]bool{}, itemWriter: map[string]*simCall{}, orphans: map[string]*orphan{}, keyReads: map[string]*keyReads{},
		deadHolders: map[string]string{}, firstFair: map[string]fairHead{}, keyFault: map[string]time.Time{},
	}
	w.enter()
	if r.IntN(4) == 0 {
		w.sortKey = "s"
	}
	for i := range 1 + r.IntN(3) {
		w.keys = append(w.keys, fmt.Sprintf("k%d", i))
	}
	ctx := context.Background()
	admin, err := dynamolock.New(w.model, w.lockTable, adminOpts(w)...)
	if err != nil {
		panic(err)
	}
	tableOpts := []dynamolock.CreateTableOption{}
	if w.sortKey != "" {
		tableOpts = append(tableOpts, dynamolock.WithSortKeyName("sk"))
	}
	if _, err := admin.CreateTableWithContext(ctx, w.lockTable, tableOpts...); err != nil {
		panic(err)
	}
	if _, err := w.model.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(w.dataTable),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		panic(err)
	}
	_ = admin.Close()
	w.model.SetHook(w.hook)

	skew := r.IntN(3) == 0
	stalls := r.IntN(2) == 0
	closes := r.IntN(2) == 0
	foreign := r.IntN(4) == 0 && !avoid("undecodable")
	nClients := 2 + r.IntN(3)
	var setup []string
	setup = append(setup, fmt.Sprintf("%d clients, keys %v, sort key %v, stalls %v, closes %v, foreign writer %v",
		nClients, w.keys, w.sortKey != "", stalls, closes, foreign))
	for i := range nClients {
		cl := newSimClient(w, r, fmt.Sprintf("c%d", i), skew)
		w.slots = append(w.slots, cl)
		setup = append(setup, cl.name+": "+cl.desc)
	}
	setup = append(setup, w.planClocks(dur)...)
	adv := w.planAdversaries()
	setup = append(setup, adv.String())
	if w.hasCrowd() {
		setup = append(setup, "a fair crowd on "+w.keys[0])
	}
	for i, cl := range w.slots {
		setup[1+i] = cl.name + ": " + cl.desc
	}
	for _, cl := range w.slots {
		cl.start(w, cl.name)
		w.mu.Lock()
		w.byName[cl.name] = cl
		w.mu.Unlock()
	}
	w.setup = strings.Join(setup, "\n  ")

	deadline := w.start.Add(dur)
	var actors sync.WaitGroup
	for i := range w.slots {
		for a := range 1 + r.IntN(2) {
			ar := rand.New(rand.NewPCG(seed, uint64(100*i+a+1)))
			actors.Go(func() { nest(2*i+a, func() { w.actor(i, a, ar, deadline) }) })
		}
	}
	w.rwActors(&actors, deadline)
	w.crowdActors(&actors, deadline)
	w.leaderActors(&actors, deadline)
	if adv.forcer {
		actors.Go(func() { w.forcer(rand.New(rand.NewPCG(seed, 0xf0)), deadline) })
	}
	if adv.v2 {
		actors.Go(func() { w.v2Writer(rand.New(rand.NewPCG(seed, 0x7f2)), deadline) })
	}
	actors.Go(func() { w.chaos(rand.New(rand.NewPCG(seed, 7)), deadline, stalls, closes, foreign) })
	if w.clocks.pauses {
		actors.Go(func() { w.pauser(rand.New(rand.NewPCG(seed, 0xc10c01)), deadline) })
	}
	actors.Wait()

	// Heal the network, close every client, and check liveness.
	w.healed.Store(true)
	var closers sync.WaitGroup
	for i := range w.slots {
		closers.Go(func() { nest(i, func() { w.closeSlot(i, false) }) })
	}
	closers.Wait()
	w.ghosts.Wait()
	w.liveness()
	w.mu.Lock()
	w.checkLocked("at the end")
	for _, tr := range w.sortedTracked() {
		if l := tr.l; !closed(l.Done()) {
			w.violate(5, "at the end: %s's lock on %s (token %d) never closed Done (Err: %v)", tr.owner, tr.pk, tr.token, l.Err())
		}
	}
	w.mu.Unlock()
	w.leave()
	synctest.Wait()
	if leaked := bubbleLeaks(); leaked != "" {
		w.mu.Lock()
		w.violate(7, "goroutines of the library still running after every client closed:\n%s", leaked)
		w.mu.Unlock()
	}
	return w
}

// ownRelease reports whether item is still what this acquisition's release
// left (released, or gone): a retried release that meets it must report
// success. (A retry that meets the next holder's item cannot tell.)
func ownRelease(item ddbmodel.Item, rk relKey) bool {
	return item == nil || itemS(item, "ownerName") == rk.owner && itemN(item, "fencingToken") == rk.token
}

func avoid(mix string) bool {
	for _, m := range strings.Split(*flagAvoid, ",") {
		if strings.TrimSpace(m) == mix {
			return true
		}
	}
	return false
}

func adminOpts(w *world) []dynamolock.ClientOption {
	if w.sortKey != "" {
		return []dynamolock.ClientOption{dynamolock.WithSortKey("sk", w.sortKey)}
	}
	return nil
}

func newSimClient(w *world, r *rand.Rand, name string, skew bool) *simClient {
	cl := &simClient{name: name, born: time.Now()}
	cl.lease = []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 5 * time.Second}[r.IntN(4)]
	cl.hb = cl.lease / time.Duration(3+r.IntN(3))
	if r.IntN(7) == 0 {
		cl.hb = 0
	}
	cl.opts = append(adminOpts(w), dynamolock.WithLeaseDuration(cl.lease))
	if cl.hb == 0 {
		cl.opts = append(cl.opts, dynamolock.DisableHeartbeat())
	} else {
		cl.opts = append(cl.opts, dynamolock.WithHeartbeatPeriod(cl.hb))
		if cl.workers = heartbeatWorkers(w.seed, name); cl.workers > 0 {
			cl.opts = append(cl.opts, dynamolock.WithHeartbeatConcurrency(cl.workers))
		}
	}
	if skew && r.IntN(3) > 0 {
		cl.skewBound = time.Duration(r.IntN(200))*time.Millisecond + time.Millisecond
		cl.opts = append(cl.opts, dynamolock.WithClockSkewBound(cl.skewBound))
	}
	var p faultProfile
	if r.IntN(4) > 0 {
		p = faultProfile{
			lost: r.Float64() * 0.1, dup: r.Float64() * 0.1, errs: r.Float64() * 0.1,
			slow: r.Float64() * 0.3, maxDelay: time.Duration(1+r.IntN(int(cl.lease/time.Millisecond))) * time.Millisecond,
			ghost: r.Float64() * 0.5,
		}
		p.late, p.lateMax = lateOf(w.seed, name, cl.lease)
	}
	// Faults at the level of whole calls (faultyDB) or of the SDK's
	// attempts (the real SDK client over simTransport): the seed chooses.
	var ap attemptProfile
	if attempts := r.IntN(2) == 0; *flagFaults == "attempt" || *flagFaults == "mixed" && attempts {
		ap = randomAttemptProfile(r, cl.lease)
		ap.late, ap.lateMax = lateOf(w.seed, name, cl.lease)
		if p == (faultProfile{}) {
			ap = attemptProfile{attempts: ap.attempts}
		}
		p = faultProfile{}
	}
	cl.reentrantOnly = r.IntN(4) == 0
	if ap.attempts > 0 {
		cl.desc = fmt.Sprintf("lease %s, heartbeat %s, faults: %s", cl.lease, cl.hb, ap)
	} else {
		cl.desc = fmt.Sprintf("lease %s, heartbeat %s, faults: %s", cl.lease, cl.hb, p)
	}
	conf := conflictsOf(w.seed, name, cl.lease, p != (faultProfile{}) || ap != (attemptProfile{attempts: ap.attempts}))
	if conf != (conflictProfile{}) {
		cl.desc += ", transactions: " + conf.String()
	}
	cl.db = &faultyDB{w: w, model: w.model, prof: p, attempt: ap, conf: conf, r: rand.New(rand.NewPCG(r.Uint64(), 1))}
	// Sessions beside per-lock leases, in one seed: a third of the
	// clients with heartbeats (drawn last, so that every other draw of a
	// seed stays what it was).
	if cl.hb > 0 && r.IntN(3) == 0 && !avoid("sessions") {
		cl.session = true
		cl.opts = append(cl.opts, dynamolock.WithSession())
		cl.desc += ", session"
	}
	return cl
}

// start creates the client's dynamolock.Client.
func (cl *simClient) start(w *world, name string) {
	cl.name = name
	cl.db.name = name
	cl.db.clock = cl.clock
	cl.api = cl.db
	if cl.db.attempt.attempts > 0 {
		cl.api = cl.db.sdkClient()
	}
	if cl.workers > 0 {
		w.timeBeats(cl)
	}
	opts := append(slices.Clone(cl.opts), dynamolock.WithOwnerName(cl.ownerName()))
	if cl.clock != nil {
		opts = append(opts, clockOption(cl.clock))
	}
	c, err := dynamolock.New(cl.api, w.lockTable, opts...)
	if err != nil {
		panic(err)
	}
	cl.c = c
	cl.born = time.Now()
	cl.reentrant = make(chan struct{}, 1)
}

func (w *world) client(slot int) *simClient {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.slots[slot]
}

// closeSlot closes a slot's client and, when restart is set, puts a new
// client with a new owner name in its place.
func (w *world) closeSlot(slot int, restart bool) {
	w.step(fmt.Sprintf("close %d", slot))
	w.mu.Lock()
	cl := w.slots[slot]
	if cl.closed {
		w.mu.Unlock()
		return
	}
	cl.closed = true
	w.closing[cl.name] = true
	w.tracef("%s: Close starts", cl.name)
	w.mu.Unlock()
	err := cl.c.Close()
	w.step(fmt.Sprintf("closed %d", slot))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clientSeconds += time.Since(cl.born).Seconds()
	w.tracef("%s: Close returned %v", cl.name, err)
	for _, tr := range w.sortedTracked() {
		if l := tr.l; tr.client == cl && w.releasing[l] == 0 && l.Err() == nil && !l.IsExpired() {
			w.violate(7, "%s's lock on %s (token %d) is still valid after Close returned", cl.name, tr.pk, tr.token)
		}
	}
	if restart {
		next := &simClient{lease: cl.lease, hb: cl.hb, opts: cl.opts, desc: cl.desc, reentrantOnly: cl.reentrantOnly,
			clock: cl.clock, skewBound: cl.skewBound, session: cl.session, // its opts carry WithSession
			db: &faultyDB{w: w, model: w.model, prof: cl.db.prof, attempt: cl.db.attempt, conf: cl.db.conf}}
		cl.db.mu.Lock()
		next.db.r = rand.New(rand.NewPCG(cl.db.r.Uint64(), 2))
		cl.db.mu.Unlock()
		gen := 1
		if i := strings.IndexByte(cl.name, '.'); i > 0 {
			fmt.Sscanf(cl.name[i+1:], "%d", &gen)
			gen++
		}
		next.start(w, fmt.Sprintf("c%d.%d", slot, gen))
		w.slots[slot] = next
		w.byName[next.name] = next
		w.tracef("%s replaces %s", next.name, cl.name)
	}
}

func (w *world) track(cl *simClient, l *dynamolock.Lock, how string) {
	w.step(fmt.Sprintf("track %s %s %s %d %s", cl.name, how, l.PartitionKey(), l.FencingToken(), l.RecordVersionNumber()))
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.tracked[l]; ok {
		w.tracef("%s %s %s: the same lock again (token %d)", cl.name, how, l.PartitionKey(), l.FencingToken())
		return
	}
	// Invariant 13: an acquisition never returns a lock already lost. The
	// call returns at the instant checked here (virtual time stands still
	// while this goroutine runs), so a lost lock was lost before the
	// caller got it: it must have kept trying or failed instead.
	if err := l.Err(); err != nil && !errors.Is(err, dynamolock.ErrLockAlreadyReleased) {
		w.violate(13, "%s %s %s returned a lock already lost (token %d, lease %s, lease end %s): %v", cl.name, how, l.PartitionKey(), l.FencingToken(), l.LeaseDuration(), l.Expiration().Sub(w.start).Round(time.Millisecond), err)
	}
	tr := &tracked{l: l, key: ddbmodel.KeyString(l.PartitionKey(), l.SortKey()), pk: l.PartitionKey(), owner: l.OwnerName(), token: l.FencingToken(), rvn: l.RecordVersionNumber(), client: cl}
	w.tracked[l] = tr
	w.tracef("%s %s %s: granted, token %d rvn %.8s lease %s", cl.name, how, tr.pk, tr.token, l.RecordVersionNumber(), l.LeaseDuration())
	w.checkLocked(cl.name + " " + how + " returned")
}

// actor does random operations through the client in slot until deadline.
func (w *world) actor(slot, a int, r *rand.Rand, deadline time.Time) {
	// Start at a random nanosecond: requests sent at one instant make
	// leases and heartbeats of different clients fall due at one instant,
	// and goroutines woken together draw the library's randomness in an
	// order the seed does not fix (replay_test.go).
	time.Sleep(time.Duration(r.Int64N(int64(10 * time.Millisecond))))
	for time.Now().Before(deadline) {
		w.client(slot).clock.resume() // a paused process calls nothing
		w.step(fmt.Sprintf("actor %d.%d", slot, a))
		cl := w.client(slot)
		key := w.keys[r.IntN(len(w.keys))]
		n := r.IntN(100)
		if avoid("recipes") && n >= 70 && n < 90 {
			n = 0
		}
		switch {
		case n < 50:
			w.acquireAndHold(cl, r, key)
		case n < 65:
			w.do(cl, r, key)
		case n < 70:
			l, err := cl.c.Get(key)
			if err == nil {
				w.note("%s Get %s: owner %s token %d expired %v", cl.name, key, l.OwnerName(), l.FencingToken(), l.IsExpired())
			}
		case n < 75:
			w.multi(cl, r)
		case n < 80:
			w.semaphore(cl, r)
		case n < 90:
			w.elect(cl, r)
		default:
			w.sleep(time.Duration(r.Int64N(int64(cl.lease))))
		}
		w.sleep(time.Millisecond + time.Duration(r.IntN(20))*time.Millisecond)
	}
}

func (w *world) acquireOpts(cl *simClient, r *rand.Rand) ([]dynamolock.AcquireLockOption, string, waitPlan) {
	var opts []dynamolock.AcquireLockOption
	var desc []string
	var plan waitPlan
	if r.IntN(4) == 0 {
		opts = append(opts, dynamolock.FailIfLocked())
		desc = append(desc, "FailIfLocked")
		plan.try = true
	} else {
		rp := time.Duration(1+r.Int64N(int64(cl.lease/2))) + 10*time.Millisecond
		wait := additionalWait(r, cl.lease)
		opts = append(opts, dynamolock.WithRefreshPeriod(rp), dynamolock.WithAdditionalTimeToWaitForLock(wait))
		desc = append(desc, fmt.Sprintf("refresh %s wait %s", rp.Round(time.Millisecond), wait.Round(time.Millisecond)))
		plan.refresh, plan.wait = rp, wait
		if r.IntN(3) == 0 && !avoid("fair") {
			opts = append(opts, dynamolock.WithFairness())
			desc = append(desc, "fair")
			plan.fair = true
		}
	}
	if reentrant := r.IntN(5) == 0; reentrant && !avoid("reentrant-mix") || avoid("reentrant-mix") && cl.reentrantOnly {
		opts = append(opts, dynamolock.WithReentrant())
		desc = append(desc, "reentrant")
	}
	if r.IntN(3) == 0 {
		opts = append(opts, dynamolock.WithData([]byte(cl.name)))
		desc = append(desc, "data")
	}
	if r.IntN(5) == 0 {
		opts = append(opts, dynamolock.ReplaceData())
		desc = append(desc, "replace data")
	}
	if r.IntN(5) == 0 && !avoid("delete") {
		opts = append(opts, dynamolock.WithDeleteLockOnRelease())
		desc = append(desc, "delete on release")
	}
	return opts, strings.Join(desc, ", "), plan
}

func (w *world) acquireAndHold(cl *simClient, r *rand.Rand, key string) {
	opts, desc, plan := w.acquireOpts(cl, r)
	ctx := context.Background()
	if r.IntN(4) == 0 {
		var cancel context.CancelFunc
		d := time.Duration(r.Int64N(int64(2 * cl.lease)))
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
		desc += fmt.Sprintf(", ctx %s", d.Round(time.Millisecond))
	}
	ctx, returned := w.begin(ctx, cl, "acquire", plan)
	call := callOf(ctx).id
	ctx = context.WithValue(ctx, acquireCallKey{}, call)
	w.note("%s acquire %s (%s)", cl.name, key, desc)
	if strings.Contains(desc, "reentrant") && !*delayAll {
		cl.reentrant <- struct{}{}
		defer func() { <-cl.reentrant }()
	}
	done := w.asking(cl, 1)
	l, err := cl.c.AcquireLockWithContext(ctx, key, opts...)
	returned()
	done(err)
	if err != nil {
		w.acquireFailed(cl, key, call, err)
		return
	}
	w.track(cl, l, "acquire")
	w.hold(cl, r, l)
	if r.IntN(7) == 0 {
		w.note("%s abandons %s (token %d) to its heartbeats and Close", cl.name, key, l.FencingToken())
		return
	}
	w.release(cl, r, l)
}

// acquireFailed checks that an acquisition that failed left no write of its
// own behind (issue 21, item 6): when it returns, an item holding one of
// the RVNs it wrote, unreleased, means the key is held by nobody for a
// lease. The call must have sent its undo; and an undo that met no fault
// (and no request of the call that may still land late) must have taken the
// write off by the time the call returns: one round trip, once faults heal.
func (w *world) acquireFailed(cl *simClient, key string, call int, err error) {
	w.step(fmt.Sprintf("acquire failed %s %s %d", cl.name, key, call))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tracef("%s acquire %s failed: %v", cl.name, key, err)
	if w.undoSent[call] && (w.undoFaulted[call] || w.callGhost[call]) {
		return // its undo, or a late request of it, met a fault
	}
	it := w.current[ddbmodel.KeyString(key, w.sortKey)]
	for _, rvn := range w.acquireRVNs[call] {
		if it != nil && !released(it) && itemS(it, "ownerName") == cl.ownerName() && itemS(it, "recordVersionNumber") == rvn {
			if w.undoSent[call] {
				w.violate(6, "%s's acquisition of %s failed (%v); its undo met no fault, yet its write stays on the item: %s", cl.name, key, err, showItem(it))
			} else {
				w.violate(6, "%s's acquisition of %s failed (%v) but left its write on the item, unheartbeated, and sent no undo: %s", cl.name, key, err, showItem(it))
			}
		}
	}
}

// faulted records a fault met by a request of an acquisition call (ctx
// names it): whether the request may land later (a ghost), and whether the
// call's undo had begun (acquireFailed).
func (w *world) faulted(ctx context.Context, ghost bool) {
	id, ok := ctx.Value(acquireCallKey{}).(int)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if ghost {
		w.callGhost[id] = true
	}
	if w.undoSent[id] {
		w.undoFaulted[id] = true
	}
}

// hold uses a held lock for a while: heartbeats, guarded writes, Get.
func (w *world) hold(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	for range r.IntN(4) {
		w.sleep(time.Duration(r.Int64N(int64(cl.lease + cl.lease/2))))
		switch r.IntN(3) {
		case 0:
			var opts []dynamolock.SendHeartbeatOption
			var desc []string
			switch r.IntN(4) {
			case 0:
				opts = append(opts, dynamolock.DeleteData())
				desc = append(desc, "delete data")
			case 1:
				opts = append(opts, dynamolock.ReplaceHeartbeatData([]byte("beat")))
				desc = append(desc, "replace data")
			}
			if r.IntN(2) == 0 {
				// Half the time shorter than the lease: a renewal that
				// shortens the lease is what observers must not misjudge.
				d := 2*cl.hb + time.Duration(r.Int64N(int64(2*cl.lease)))
				if r.IntN(2) == 0 && cl.lease > 2*cl.hb {
					d = 2*cl.hb + time.Duration(r.Int64N(int64(cl.lease-2*cl.hb)))
				}
				d = max(d, minLease) // without heartbeats (hb 0) a draw may fall under the client's floor
				opts = append(opts, dynamolock.WithLeaseDurationToEnsure(d))
				desc = append(desc, "ensure "+d.Round(time.Millisecond).String())
			}
			if r.IntN(3) == 0 {
				opts = append(opts, dynamolock.HeartbeatRetries(1+r.IntN(2), 50*time.Millisecond))
				desc = append(desc, "retries")
			}
			if r.IntN(6) == 0 {
				// Safe here: every client's owner name is its own.
				opts = append(opts, dynamolock.UnsafeMatchOwnerOnly())
				desc = append(desc, "owner only")
			}
			err := cl.c.SendHeartbeat(l, opts...)
			w.note("%s SendHeartbeat %s (%s): %v", cl.name, l.PartitionKey(), strings.Join(desc, ", "), err)
			if err == nil {
				w.checkData(cl, l)
			}
		case 1:
			if w.clocks.unfenced && r.IntN(2) == 0 {
				w.unfencedWrite(cl, r, l)
				break
			}
			if r.IntN(6) == 0 && !avoid("refresh-burst") {
				w.refreshBurst(cl, r, l)
				break
			}
			w.guardedWrite(cl, r, l)
		default:
			got, err := cl.c.Get(l.PartitionKey())
			w.note("%s Get %s while holding: same lock %v, err %v", cl.name, l.PartitionKey(), got == l, err)
		}
	}
}

// checkData is invariant 15: once a heartbeat of l landed, l.Data() is the
// data its item holds, while the item is still l's (same owner and fencing
// token, not released): an earlier write of the data whose answer was lost
// must not leave Data() reporting a value the item no longer holds.
func (w *world) checkData(cl *simClient, l *dynamolock.Lock) {
	w.step(fmt.Sprintf("check data %s %s %d", cl.name, l.PartitionKey(), l.FencingToken()))
	w.mu.Lock()
	defer w.mu.Unlock()
	it := w.current[ddbmodel.KeyString(l.PartitionKey(), w.sortKey)]
	if it == nil || released(it) || itemS(it, "ownerName") != cl.ownerName() || itemN(it, "fencingToken") != l.FencingToken() {
		return
	}
	var want []byte
	if b, ok := it["data"].(*types.AttributeValueMemberB); ok {
		want = b.Value
	}
	if got := l.Data(); !bytes.Equal(got, want) {
		w.violate(15, "%s's lock on %s (token %d) reports data %q after a heartbeat landed, while its item holds %q", cl.name, l.PartitionKey(), l.FencingToken(), got, want)
	}
}

// guardedWrite updates the data item of the lock's key inside a
// transaction guarded by the lock, with the downstream fencing check and an
// application condition that fails now and then.
func (w *world) guardedWrite(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	modes := []string{"x", "y", "z"}
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	data := types.TransactWriteItem{Update: &types.Update{
		TableName:        aws.String(w.dataTable),
		Key:              map[string]types.AttributeValue{"key": s(l.PartitionKey())},
		UpdateExpression: aws.String("SET #t = :t, #w = :w, #m = :m"),
		ConditionExpression: aws.String("(attribute_not_exists(#t) OR #t <= :t) AND " +
			"(attribute_not_exists(#m) OR #m <> :bad)"),
		ExpressionAttributeNames: map[string]string{"#t": "token", "#w": "writer", "#m": "mode"},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": &types.AttributeValueMemberN{Value: fmt.Sprint(l.FencingToken())}, ":w": s(cl.ownerName()),
			":m": s(modes[r.IntN(3)]), ":bad": s(modes[r.IntN(3)]),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}}
	ctx := context.Background()
	if r.IntN(2) == 0 {
		items := []types.TransactWriteItem{l.TransactionCondition(), data}
		if r.IntN(2) == 0 {
			items[0], items[1] = items[1], items[0]
		}
		ctx = w.guarded(ctx, l, false)
		w.maybePause(cl, r)
		_, err := cl.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		w.note("%s guarded write on %s (token %d): %v", cl.name, l.PartitionKey(), l.FencingToken(), errOrOK(err))
		return
	}
	item, record := l.TransactionWithRefresh()
	ctx = w.guarded(ctx, l, true)
	items := []types.TransactWriteItem{item, data}
	if r.IntN(2) == 0 {
		items[0], items[1] = items[1], items[0]
	}
	w.maybePause(cl, r)
	_, err := record(cl.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}))
	w.note("%s guarded write with refresh on %s (token %d): %v; lock err now %v", cl.name, l.PartitionKey(), l.FencingToken(), errOrOK(err), l.Err())
}

// refreshBurst sends many guarded refreshes in a row whose own condition
// (on the data item) fails: each is a write of the lock that may have
// landed, until the lock's next renewal (issue 21, finding 4: more than
// 100 of them made every renewal's RVN IN (...) too long for DynamoDB).
func (w *world) refreshBurst(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	n := 20 + r.IntN(130)
	failed := 0
	var last error
	for i := range n {
		if l.Err() != nil {
			n = i
			break
		}
		item, record := l.TransactionWithRefresh()
		ctx := w.guarded(context.Background(), l, true)
		check := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
			TableName:                aws.String(w.dataTable),
			Key:                      map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: l.PartitionKey()}},
			ConditionExpression:      aws.String("attribute_exists(#never)"),
			ExpressionAttributeNames: map[string]string{"#never": "never"},
		}}
		_, err := record(cl.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{item, check}}))
		if err != nil {
			failed++
			last = err
		}
	}
	w.note("%s burst of %d guarded refreshes on %s (token %d) that fail their own condition: %d failed (last: %v); lock err now %v",
		cl.name, n, l.PartitionKey(), l.FencingToken(), failed, errOrOK(last), l.Err())
}

func errOrOK(err error) string {
	if err == nil {
		return "ok"
	}
	return errName(err)
}

func (w *world) release(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	var opts []dynamolock.ReleaseLockOption
	var desc []string
	bestEffort := false
	if r.IntN(3) == 0 {
		del := r.IntN(2) == 0 && !avoid("delete")
		opts = append(opts, dynamolock.WithDeleteLock(del))
		desc = append(desc, fmt.Sprintf("delete %v", del))
	}
	if r.IntN(5) == 0 {
		opts = append(opts, dynamolock.WithDataAfterRelease([]byte("after")))
		desc = append(desc, "data after")
	}
	if r.IntN(6) == 0 {
		opts = append(opts, dynamolock.WithBestEffort())
		desc = append(desc, "best effort")
		bestEffort = true
	}
	w.step(fmt.Sprintf("release %s %s %d", cl.name, l.PartitionKey(), l.FencingToken()))
	w.mu.Lock()
	w.releasing[l]++
	startSeq := w.seq
	w.tracef("%s release %s token %d (%s)", cl.name, l.PartitionKey(), l.FencingToken(), strings.Join(desc, ", "))
	w.mu.Unlock()
	ok, err := cl.c.ReleaseLock(l, opts...)
	w.step(fmt.Sprintf("released %s %s %d", cl.name, l.PartitionKey(), l.FencingToken()))
	w.mu.Lock()
	defer w.mu.Unlock()
	w.releasing[l]--
	if w.releasing[l] == 0 {
		delete(w.releasing, l)
	}
	w.tracef("%s release %s token %d returned %v, %v", cl.name, l.PartitionKey(), l.FencingToken(), ok, err)
	rk := relKey{ddbmodel.KeyString(l.PartitionKey(), l.SortKey()), cl.ownerName(), l.FencingToken()}
	seq, took := w.releasedBy[rk]
	// 5. Release returns true exactly when this lock's release took effect.
	switch {
	case ok && !bestEffort && !took && !w.supersededRel(rk, cl.name):
		// A lock taken from under its holder (superseded) leaves what a
		// lost answer of this release followed by a new acquisition
		// leaves too: its release may answer true (Known limits in
		// docs/SIMULATION.md).
		w.violate(5, "%s's release of %s (token %d) returned true, but the model never released it", cl.name, l.PartitionKey(), l.FencingToken())
	case !ok && errors.Is(err, dynamolock.ErrLockTakenOver) && took && seq > startSeq &&
		(!avoid("release-retry") || ownRelease(w.current[rk.key], rk)) &&
		// An item another tool rewrote after the release landed, with no
		// higher token, is reported as a loss: the documented limit
		// (F10 in docs/SIMULATION.md), not a violation.
		w.foreignSeq[rk.key] < seq:
		w.violate(5, "%s's release of %s (token %d) reported the lock lost (%v), but its own release took effect at #%d",
			cl.name, l.PartitionKey(), l.FencingToken(), err, seq)
	}
	if ok && !closed(l.Done()) {
		w.violate(5, "%s's release of %s returned true but Done is open", cl.name, l.PartitionKey())
	}
	w.checkLocked(cl.name + " release returned")
}

// do runs Client.Do: the function holds the lock for a while.
func (w *world) do(cl *simClient, r *rand.Rand, key string) {
	opts, desc, plan := w.acquireOpts(cl, r)
	ctx, returned := w.begin(context.Background(), cl, "Do", plan)
	w.note("%s Do %s (%s)", cl.name, key, desc)
	if strings.Contains(desc, "reentrant") && !*delayAll {
		cl.reentrant <- struct{}{}
		defer func() { <-cl.reentrant }()
	}
	var held *dynamolock.Lock
	var asked sync.Once
	done := w.asking(cl, 1)
	err := cl.c.Do(ctx, key, func(ctx context.Context, l *dynamolock.Lock) error {
		asked.Do(func() { done(nil) })
		returned() // the acquisition has returned the lock
		w.track(cl, l, "Do")
		w.hold(cl, r, l)
		held = l
		w.step(fmt.Sprintf("do returns %s %s %d", cl.name, l.PartitionKey(), l.FencingToken()))
		w.mu.Lock()
		w.releasing[l]++
		w.mu.Unlock()
		return nil
	}, opts...)
	asked.Do(func() { done(err) })
	returned()
	w.step(fmt.Sprintf("do returned %s %s", cl.name, key))
	w.mu.Lock()
	defer w.mu.Unlock()
	if held != nil {
		w.releasing[held]--
		if w.releasing[held] == 0 {
			delete(w.releasing, held)
		}
	}
	w.tracef("%s Do %s returned %v", cl.name, key, err)
	w.checkLocked(cl.name + " Do returned")
}

// chaos stalls clients, closes and restarts them, and writes foreign items.
func (w *world) chaos(r *rand.Rand, deadline time.Time, stalls, closes, foreign bool) {
	targeted := rand.New(rand.NewPCG(w.seed, 0x57a11)) // targets_test.go
	for {
		time.Sleep(time.Duration(r.Int64N(int64(8 * time.Second))))
		if !time.Now().Before(deadline) {
			return
		}
		w.step("chaos")
		slot := r.IntN(len(w.slots))
		cl := w.client(slot)
		switch r.IntN(3) {
		case 0:
			if stalls {
				d := cl.lease + time.Duration(r.Int64N(int64(2*cl.lease)))
				targets, why := []*simClient{cl}, ""
				if targeted.IntN(2) == 0 && !avoid("targeted") {
					w.mu.Lock()
					if t, how := w.stallTargets(); len(t) > 0 {
						targets, why = t, " (targeted: "+how+")"
					}
					w.mu.Unlock()
				}
				for _, t := range targets {
					if t != cl {
						w.stall(t, max(d, 2*t.lease), why)
					} else {
						w.stall(t, d, why)
					}
				}
			}
		case 1:
			if closes {
				w.closeSlot(slot, true)
			}
		default:
			if foreign {
				w.foreignWrite(r)
			}
		}
	}
}

// stall stalls every call of cl for d.
func (w *world) stall(cl *simClient, d time.Duration, why string) {
	now := time.Now()
	cl.db.mu.Lock()
	cl.db.stall = now.Add(d)
	cl.db.mu.Unlock()
	w.mu.Lock()
	cl.stalled = true
	if !cl.stallUntil.After(now) {
		cl.stallFrom = now
	}
	cl.stallUntil = now.Add(d)
	w.mu.Unlock()
	w.note("%s stalls for %s%s", cl.name, d.Round(time.Millisecond), why)
}

// foreignWrite puts a released item another writer left, with data that is
// not binary, where the key is free or released.
func (w *world) foreignWrite(r *rand.Rand) {
	key := w.keys[r.IntN(len(w.keys))]
	it := map[string]types.AttributeValue{
		w.pkName:              &types.AttributeValueMemberS{Value: key},
		"ownerName":           &types.AttributeValueMemberS{Value: "foreign"},
		"recordVersionNumber": &types.AttributeValueMemberS{Value: fmt.Sprintf("foreign-%d", r.Uint32())},
		"leaseDuration":       &types.AttributeValueMemberS{Value: "1000"},
		"isReleased":          &types.AttributeValueMemberS{Value: "1"},
		"data":                &types.AttributeValueMemberS{Value: "not binary"},
	}
	if w.sortKey != "" {
		it["sk"] = &types.AttributeValueMemberS{Value: w.sortKey}
	}
	if avoid("delete") {
		// Replacing the item without its fencing token is a deletion for
		// the token (F3 in docs/SIMULATION.md): keep it.
		if cur := w.model.Item(w.lockTable, ddbmodel.KeyString(key, w.sortKey)); cur != nil {
			if tok, ok := cur["fencingToken"]; ok {
				it["fencingToken"] = tok
			}
		}
	}
	ctx := context.WithValue(context.Background(), callerKey{}, "foreign")
	_, err := w.model.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(w.lockTable), Item: it,
		ConditionExpression:      aws.String("attribute_not_exists(#k) OR attribute_exists(#r)"),
		ExpressionAttributeNames: map[string]string{"#k": w.pkName, "#r": "isReleased"},
	})
	w.note("foreign writer puts a released item with string data on %s: %v", key, errOrOK(err))
}

// liveness: with every client closed and the network healed, a new client
// must get every key within the lease left in its item plus one refresh
// period (and a little latency).
func (w *world) liveness() {
	const refresh = 100 * time.Millisecond
	db := &faultyDB{w: w, name: "prober", model: w.model, r: rand.New(rand.NewPCG(w.seed, 99))}
	prober, err := dynamolock.New(db, w.lockTable, append(adminOpts(w), dynamolock.WithOwnerName("prober"),
		dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(250*time.Millisecond))...)
	if err != nil {
		panic(err)
	}
	start := time.Now()
	var wg sync.WaitGroup
	for ki, key := range w.keys {
		it := w.model.Item(w.lockTable, ddbmodel.KeyString(key, w.sortKey))
		bound := 50 * time.Millisecond
		if it != nil && !released(it) {
			if d, ok := it["data"]; ok {
				if _, isB := d.(*types.AttributeValueMemberB); !isB {
					w.note("liveness: %s skipped: held item with undecodable data (%s)", key, showItem(it))
					continue
				}
			}
			lease, err := time.ParseDuration(itemS(it, "leaseDuration"))
			if err != nil {
				lease = 10 * time.Second
			}
			if s := itemS(it, "dynamolockSession"); s != "" {
				lease = w.sessionLeaseLeft(s) // held by a session: as long as it lives
			}
			bound += lease + refresh
		}
		wg.Go(func() { nest(ki, func() { w.probe(prober, key, start, bound) }) })
	}
	wg.Wait()
	if err := prober.Close(); err != nil {
		w.note("prober Close: %v", err)
	}
}

// probe is the liveness check of one key.
func (w *world) probe(prober *dynamolock.Client, key string, start time.Time, bound time.Duration) {
	const refresh = 100 * time.Millisecond
	// Keys acquired at one instant would be renewed at one instant, by
	// goroutines with one call stack (replay_test.go): start apart.
	time.Sleep(time.Duration(len(key)*7919+int(key[len(key)-1])*104729) * time.Nanosecond)
	_, err := prober.AcquireLock(key, dynamolock.ReplaceData(), dynamolock.WithRefreshPeriod(refresh),
		dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
	took := time.Since(start)
	w.step("prober " + key)
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case err != nil:
		w.violate(6, "liveness: with every client closed, the prober could not acquire %s: %v", key, err)
	case took > bound:
		w.violate(6, "liveness: with every client closed, the prober got %s after %s (bound %s)", key, took, bound)
	default:
		w.tracef("prober got %s after %s (bound %s)", key, took, bound)
	}
}

// bubbleLeaks lists goroutines of this synctest bubble that run library
// code: after every client closed, there must be none.
func bubbleLeaks() string {
	buf := make([]byte, 1<<20)
	self := string(buf[:runtime.Stack(buf, false)])
	mark := ""
	if i := strings.Index(self, "synctest bubble "); i >= 0 {
		j := strings.IndexByte(self[i:], ']')
		mark = self[i : i+j]
	}
	if mark == "" {
		return ""
	}
	all := string(buf[:runtime.Stack(buf, true)])
	var leaks []string
	for _, g := range strings.Split(all, "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if !strings.Contains(header, mark+"]") || strings.Contains(header, "running") {
			continue
		}
		if strings.Contains(g, "dynamolock/v2.") && !strings.Contains(g, "internal/sim.") {
			leaks = append(leaks, g)
		}
	}
	return strings.Join(leaks, "\n\n")
}
