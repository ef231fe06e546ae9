package sim

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// The adversaries of issue 46: what the simulation lacked to find the six
// seams where sessions broke older promises. Each is drawn from a stream
// of its own (so that every other draw of a seed stays what it was) and
// each can be left out with -sim.avoid:
//
//   - same-owner: client c1 runs under c0's owner name (two processes of
//     one host, or one restarted beside its old self), so that c1's
//     WithReentrant acquisitions adopt c0's locks;
//   - forced-release: a tool reads a lock with Get and releases the view,
//     as lock-example force-release does;
//   - foreign-v2: a writer that acquires, renews and releases as
//     dynamolock v2 does, copying into the item it writes every attribute
//     it does not know (a session's name, a fair queue, a fencing token);
//   - the checks below.
//
// Invariants:
//
//	18. a live v2 lock is never taken: while the v2 writer's last renewal
//	    is less than its lease old, no client of this library changes
//	    that item's record version number (a session's name that v2
//	    copied must not make its lock judged by that session);
//	19. a live session's lock is not adopted: a same-owner reentrant
//	    acquisition by another client does not take an item whose session
//	    is live (its holder renews no lease of its own and would never
//	    learn of it);
//	20. an admitted lock at a steady backend is not lost: a lock of a
//	    client that meets no fault (no call faults, no stall, no pause, no
//	    clock error, no write refused by another client's transaction in
//	    progress), with heartbeats, never ends with ErrLeaseExpired.
//
// A lock taken from under its holder by a forced release or a same-owner
// adoption is no longer the holder's: invariants 1, 2, 5 and 16 leave it out
// (superseded) until the holder learns of it.

// adversaryPlan is what a seed draws of the adversaries.
type adversaryPlan struct {
	sameOwner bool
	forcer    bool
	v2        bool
}

func (p adversaryPlan) String() string {
	var on []string
	if p.sameOwner {
		on = append(on, "same-owner (c1 runs as c0)")
	}
	if p.forcer {
		on = append(on, "forced releases")
	}
	if p.v2 {
		on = append(on, "a v2 writer")
	}
	if len(on) == 0 {
		return "adversaries: none"
	}
	return "adversaries: " + strings.Join(on, ", ")
}

// planAdversaries draws the seed's adversaries and gives c1 c0's owner
// name for the same-owner mix (before the clients start).
func (w *world) planAdversaries() adversaryPlan {
	r := rand.New(rand.NewPCG(w.seed, 0xad7e))
	p := adversaryPlan{
		sameOwner: r.IntN(3) == 0 && len(w.slots) >= 2 && !avoid("same-owner"),
		forcer:    r.IntN(3) == 0 && !avoid("forced-release"),
		// A v2 holder is safe only while no client's clock runs fast
		// beyond the assumptions: it has no skew bound to lean on.
		v2: r.IntN(3) == 0 && !avoid("foreign-v2") && w.clocks.mode != "beyond",
	}
	if p.sameOwner {
		w.slots[1].owner = w.slots[0].name
		w.slots[1].desc += ", owner name " + w.slots[0].name
	}
	w.adv = p
	return p
}

func (cl *simClient) ownerName() string {
	if cl.owner != "" {
		return cl.owner
	}
	return cl.name
}

// superseded reports whether tr's lock was taken from under its holder
// without a stale lease: a forced release, or an adoption by another
// client under the same owner name (w.mu held).
func (w *world) superseded(tr *tracked) bool {
	rk := relKey{tr.key, tr.owner, tr.token}
	if tr.reader {
		// A reader's entry is not the item's holder: a writer's
		// acquisition under the reader's owner name adopts nothing of it;
		// a resume replaces it (leaders_test.go).
		return w.forced[rk] || tr.readerID != "" && w.lead.resumed[tr.readerID]
	}
	return w.supersededRel(rk, tr.client.name)
}

// supersededRel is superseded for the holder's acquisition rk of client
// holder (w.mu held).
func (w *world) supersededRel(rk relKey, holder string) bool {
	by := w.adopted[rk]
	return w.forced[rk] || by != "" && by != holder
}

// adversaryHook keeps what the adversaries' checks need from one change of
// the lock table, before the mirror takes it in (w.mu held).
func (w *world) adversaryHook(caller string, ch ddbmodel.Change) {
	b, a := ch.Before, ch.After
	if caller == v2Caller {
		if a != nil && itemS(a, "ownerName") == v2Owner && !released(a) {
			w.v2.key, w.v2.rvn, w.v2.renewed = ch.Key, itemS(a, "recordVersionNumber"), time.Now()
		} else if ch.Key == w.v2.key {
			w.v2.rvn = ""
		}
		return
	}
	if b == nil || released(b) {
		return
	}
	if caller == forcerCaller && (a == nil || released(a)) {
		w.forced[relKey{ch.Key, itemS(b, "ownerName"), itemN(b, "fencingToken")}] = true
		return
	}
	// 18. A live v2 lock is never taken.
	if ch.Key == w.v2.key && w.v2.rvn != "" && itemS(b, "recordVersionNumber") == w.v2.rvn &&
		(a == nil || itemS(a, "recordVersionNumber") != w.v2.rvn) && time.Now().Before(w.v2.renewed.Add(w.v2.lease)) {
		w.violate(18, "%s took v2's live lock on %s (renewed %s ago, lease %s): %s -> %s", caller, w.pkOf(ch.Key),
			time.Since(w.v2.renewed).Round(time.Millisecond), w.v2.lease, showItem(b), showItem(a))
	}
	// A same-owner adoption: another client's write of a held item under
	// the item's owner name, with a new record version number.
	if a == nil || released(a) || itemS(a, "ownerName") != itemS(b, "ownerName") ||
		itemS(a, "recordVersionNumber") == itemS(b, "recordVersionNumber") {
		return
	}
	if itemN(a, "fencingToken") != itemN(b, "fencingToken") {
		// Kept by acquisition, not by handle: the adopted acquisition's
		// answer may still be on its way (a slow write that landed
		// before the adoption), and its lock is not yet tracked.
		w.adopted[relKey{ch.Key, itemS(b, "ownerName"), itemN(b, "fencingToken")}] = caller
	}
	for _, tr := range w.tracked {
		if tr.key != ch.Key || tr.reader || tr.owner != itemS(b, "ownerName") || tr.token != itemN(b, "fencingToken") ||
			tr.client.name == caller {
			continue
		}
		// 19. A live session's lock is not adopted.
		if s := itemS(b, "dynamolockSession"); s != "" && itemN(a, "fencingToken") != itemN(b, "fencingToken") {
			sk := ""
			if w.sortKey != "" {
				sk = sessionSortKey
			}
			if it := w.current[ddbmodel.KeyString(s, sk)]; it != nil && !released(it) {
				w.violate(19, "%s adopted %s's lock on %s (token %d) of live session %s: %s", caller, tr.client.name, tr.pk, tr.token, s, showItem(a))
			}
		}
	}
}

// checkSteadyLoss is invariant 20, for a lock that has ended (w.mu held).
func (w *world) checkSteadyLoss(tr *tracked, err error) {
	cl := tr.client
	if !errors.Is(err, dynamolock.ErrLeaseExpired) || cl.hb == 0 || cl.stalled || w.clocks.mode != "" && w.clocks.mode != "off" ||
		cl.db.prof != (faultProfile{}) || cl.db.conf != (conflictProfile{}) || cl.db.attempt != (attemptProfile{attempts: cl.db.attempt.attempts}) || cl.closed {
		return
	}
	// Another client's transaction in progress on the item refuses this
	// client's renewals (TransactionConflictException) for as long as it
	// is held open, up to about 300 ms: not a steady backend for a lease
	// that SendHeartbeat's WithLeaseDurationToEnsure shortened to twice
	// the heartbeat period. Every lease here is under two of the client's.
	if at, ok := w.conflictAt[cl.name]; ok && time.Since(at) < 2*cl.lease {
		return
	}
	w.violate(20, "%s's lock on %s (token %d, rvn %s) was lost to its lease at a steady backend (no fault on its client): %v",
		cl.name, tr.pk, tr.token, tr.l.RecordVersionNumber(), err)
}

// forcer releases views of held locks, as an operator's tool does.
func (w *world) forcer(r *rand.Rand, deadline time.Time) {
	db := &faultyDB{w: w, model: w.model, r: rand.New(rand.NewPCG(w.seed, 0xf0ce)), name: forcerCaller}
	c, err := dynamolock.New(db, w.lockTable, append(adminOpts(w), dynamolock.WithOwnerName(forcerCaller), dynamolock.DisableHeartbeat())...)
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Close() }()
	for {
		time.Sleep(2*time.Second + time.Duration(r.Int64N(int64(8*time.Second))))
		if !time.Now().Before(deadline) {
			return
		}
		w.step("forcer")
		key := w.keys[r.IntN(len(w.keys))]
		view, err := c.Get(key)
		if err != nil || view.IsReleased() {
			w.note("forcer: Get %s: %v", key, errOrOK(err))
			continue
		}
		ok, err := c.ReleaseLockWithContext(context.Background(), view)
		w.note("forcer releases the view of %s (owner %s, token %d): %v, %v", key, view.OwnerName(), view.FencingToken(), ok, errOrOK(err))
	}
}

const (
	forcerCaller = "forcer"
	v2Caller     = "v2"
	v2Owner      = "v2-owner"
)

// v2State is the v2 writer's lock as the hook saw it land (w.mu).
type v2State struct {
	key     string
	rvn     string // "" when it holds nothing
	renewed time.Time
	lease   time.Duration
}

// v2Known are the attributes dynamolock v2 writes itself; it copies every
// other attribute of the item it replaces.
var v2Known = map[string]bool{"ownerName": true, "leaseDuration": true, "recordVersionNumber": true, "isReleased": true, "data": true}

// v2Writer acquires, renews and releases as dynamolock v2 does, with no
// faults: GetItem; a free key is put, a released one replaced on its
// record version number, a held one replaced once its record version
// number stayed the same for its lease; renewals every third of the
// lease; a release sets isReleased.
func (w *world) v2Writer(r *rand.Rand, deadline time.Time) {
	lease := []time.Duration{time.Second, 2 * time.Second, 3 * time.Second}[r.IntN(3)]
	w.mu.Lock()
	w.v2.lease = lease
	w.mu.Unlock()
	ctx := context.WithValue(context.Background(), callerKey{}, v2Caller)
	keyOf := func(key string) map[string]types.AttributeValue {
		k := map[string]types.AttributeValue{w.pkName: &types.AttributeValueMemberS{Value: key}}
		if w.sortKey != "" {
			k["sk"] = &types.AttributeValueMemberS{Value: w.sortKey}
		}
		return k
	}
	get := func(key string) map[string]types.AttributeValue {
		out, err := w.model.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.lockTable), Key: keyOf(key), ConsistentRead: aws.Bool(true)})
		if err != nil {
			return nil
		}
		return out.Item
	}
	newRVN := func() string { return fmt.Sprintf("v2-%016x", r.Uint64()) }
	for {
		time.Sleep(time.Duration(r.Int64N(int64(5 * time.Second))))
		if !time.Now().Before(deadline) {
			return
		}
		w.step("v2")
		key := w.keys[r.IntN(len(w.keys))]
		old := get(key)
		if old != nil && !released(old) {
			// Held: wait its lease, watching its record version number.
			seen := itemS(old, "recordVersionNumber")
			wait := v2Lease(itemS(old, "leaseDuration"))
			if left := time.Until(deadline); wait >= left {
				// A session's lock (its lease: 292 years), or one past the
				// run: v2 would wait all along.
				w.note("v2: %s held by %s for %s: waits to the end", key, itemS(old, "ownerName"), wait)
				time.Sleep(left)
				return
			}
			w.note("v2: %s held by %s, waits %s", key, itemS(old, "ownerName"), wait)
			time.Sleep(wait)
			w.step("v2 looks again")
			old = get(key)
			if old == nil || released(old) || itemS(old, "recordVersionNumber") != seen {
				continue // it moved: try another time
			}
		}
		item := keyOf(key)
		cond, vals := "attribute_not_exists(#k)", map[string]types.AttributeValue{}
		names := map[string]string{"#k": w.pkName}
		if old != nil {
			for name, v := range old {
				if _, isKey := item[name]; !isKey && !v2Known[name] {
					item[name] = v
				}
			}
			cond, names["#v"] = "attribute_exists(#k) AND #v = :v", "recordVersionNumber"
			vals[":v"] = old["recordVersionNumber"]
		}
		rvn := newRVN()
		item["ownerName"] = &types.AttributeValueMemberS{Value: v2Owner}
		item["recordVersionNumber"] = &types.AttributeValueMemberS{Value: rvn}
		item["leaseDuration"] = &types.AttributeValueMemberS{Value: lease.String()}
		in := &dynamodb.PutItemInput{TableName: aws.String(w.lockTable), Item: item, ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: names}
		if len(vals) > 0 {
			in.ExpressionAttributeValues = vals
		}
		if _, err := w.model.PutItem(ctx, in); err != nil {
			w.note("v2: acquire %s: %v", key, errOrOK(err))
			continue
		}
		w.note("v2: acquired %s (rvn %.8s, lease %s)", key, rvn, lease)
		hold := time.Now().Add(lease/2 + time.Duration(r.Int64N(int64(3*lease))))
		lost := false
		for time.Now().Before(hold) && !lost {
			time.Sleep(lease / 3)
			w.step("v2 beat")
			next := newRVN()
			_, err := w.model.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.lockTable), Key: keyOf(key),
				UpdateExpression:         aws.String("SET #v = :n, #l = :l"),
				ConditionExpression:      aws.String("attribute_exists(#k) AND #o = :o AND #v = :v"),
				ExpressionAttributeNames: map[string]string{"#k": w.pkName, "#o": "ownerName", "#v": "recordVersionNumber", "#l": "leaseDuration"},
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": &types.AttributeValueMemberS{Value: next},
					":o": &types.AttributeValueMemberS{Value: v2Owner}, ":v": &types.AttributeValueMemberS{Value: rvn},
					":l": &types.AttributeValueMemberS{Value: lease.String()}},
			})
			if err != nil {
				w.note("v2: heartbeat of %s failed: %v", key, errOrOK(err))
				lost = true
				break
			}
			rvn = next
		}
		if lost {
			continue
		}
		w.step("v2 release")
		_, err := w.model.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(w.lockTable), Key: keyOf(key),
			UpdateExpression:         aws.String("SET #r = :r"),
			ConditionExpression:      aws.String("attribute_exists(#k) AND #o = :o AND #v = :v"),
			ExpressionAttributeNames: map[string]string{"#k": w.pkName, "#o": "ownerName", "#v": "recordVersionNumber", "#r": "isReleased"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":r": &types.AttributeValueMemberS{Value: "1"},
				":o": &types.AttributeValueMemberS{Value: v2Owner}, ":v": &types.AttributeValueMemberS{Value: rvn}},
		})
		w.note("v2: released %s: %v", key, errOrOK(err))
	}
}

// v2Lease reads a lease as v2 does: a duration ("20s") or milliseconds.
func v2Lease(s string) time.Duration {
	if d, err := time.ParseDuration(s); err == nil {
		return d
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		return time.Duration(ms) * time.Millisecond
	}
	return 20 * time.Second
}
