package dynamolock

// The writes of a read/write lock's acquisition (granting, joining and
// leaving the queue, undoing) and of a held reader (its renewal and
// release, which heartbeat.go and release.go send).

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// grant builds the granting write of d: a reader's entry (the answer is
// the new item), or the writer's slot (a holder's write).
func (k *rwHolder) grant(a *acquisition, w *watch, d decision, beat string, sent time.Time, sess *Session) grantWrite {
	if k.writer {
		in, wrote := k.writerGrant(a, w, d, beat, sent, sess)
		return grantWrite{in: in, wrote: wrote, shape: holderShape{}}
	}
	// A blind write that fails finds no item (DynamoDB returns the item a
	// condition failed on): the reader creates it.
	return grantWrite{in: k.readerGrant(a, w, d, beat, sent, sess), absentIfRefused: !w.v.known, shape: readerShape{k.id}}
}

// isReader reports whether l is an RWLock reader's lock.
func isReader(l *Lock) bool {
	_, ok := l.shapeOf().(readerShape)
	return ok
}

// readerShape is the shape of a reader's lock: its entry id in the item's
// readers map. The item and its data are the writer's.
type readerShape struct{ id string }

func (r readerShape) regKey(key string, sortKey *string) string {
	return readerRegKey(key, sortKey, r.id)
}

func (r readerShape) carries(item map[string]types.AttributeValue, beat string) bool {
	m, _ := item[lockitem.Readers].(*types.AttributeValueMemberM)
	if m == nil {
		return false
	}
	return lockitem.DecodeReader(r.id, m.Value[r.id]).Beat == beat
}

func (r readerShape) hold(ctx context.Context, a *acquisition, w *watch, item map[string]types.AttributeValue, beat string, at attempt) (*Lock, error) {
	return a.holdRecord(ctx, w, a.readerRecord(item, beat, at), at)
}

// undoInput removes the entry if it carries one of beats (a reader's undo
// names no token: its beats are its own).
func (r readerShape) undoInput(c *Client, key map[string]types.AttributeValue, beats []string, _ uint64) *dynamodb.UpdateItemInput {
	return c.readerUndoInput(key, r.id, beats)
}

func (r readerShape) mark(l *Lock) {
	l.shaped = true
	l.rareLocked().shape = r
}

func (r readerShape) renewal(c *Client, l *Lock, w *renewal) *dynamodb.UpdateItemInput {
	b := lockitem.NewExpr()
	return c.guardedUpdate(l.itemKey(), b, readerRenewal(b, r.id, w), l.conditionLocked(b, w.rvn))
}

func (r readerShape) beatCondition(b *lockitem.Expr, _ *Lock, in string) string {
	return readerBeatPath(b, r.id) + " IN (" + in + ")"
}

func (r readerShape) guard(b *lockitem.Expr, _ *Lock) string {
	return "attribute_exists(" + readerPath(b, r.id) + ")" // entry ids are never reused
}

// release removes the reader's own entry, whatever deleteLock and data
// say: the item and its data are the writer's.
func (r readerShape) release(ctx context.Context, c *Client, l *Lock, b *lockitem.Expr, cond string, _ bool, _ []byte) error {
	_, err := c.updateItem(ctx, c.guardedUpdate(l.itemKey(), b, readerRelease(b, r.id), cond))
	return err
}

// releasedBefore: within the lease only its own release removes its entry.
func (r readerShape) releasedBefore(_ *Lock, item map[string]types.AttributeValue) bool {
	return !readerHasEntry(item, r.id)
}

func (readerShape) own(*Lock, map[string]types.AttributeValue) (*lockRecord, bool) { return nil, false }

func (readerShape) ownsData() bool { return false }

func (readerShape) takenHow(*Lock, map[string]types.AttributeValue) string { return "" }

func (readerShape) refreshable() bool { return false }

// readerGrant builds a reader's granting write: its entry in readers, the
// writer's slot marked free, and its queue entry and the dead ones
// removed.
func (k *rwHolder) readerGrant(a *acquisition, w *watch, d decision, beat string, sent time.Time, sess *Session) *dynamodb.UpdateItemInput {
	c, v, g := a.c, &w.v, grantOf(d)
	b := lockitem.NewExpr()
	pk, rel, rs, rver := b.Name("#pk", c.cfg.partitionKeyName), b.Name("#r", lockitem.IsReleased), b.Name("#R", lockitem.Readers), b.Name("#rv", lockitem.ReadersVersion)
	entry := readerEntry(beat, a.o.lease, "")
	if sess != nil {
		entry = readerEntry(beat, sess.Lease(), sess.key)
	}
	// The writer's attributes are kept (a released item), or written for a
	// new item, so that every client reads the item as a released lock.
	set := "SET " + rel + " = " + b.Value(":r", lockitem.S("1")) +
		", " + b.Name("#o", lockitem.OwnerName) + " = if_not_exists(#o, " + b.Value(":o", lockitem.S(c.cfg.ownerName)) + ")" +
		", " + b.Name("#v", lockitem.RVN) + " = if_not_exists(#v, " + b.Value(":v", lockitem.S(newRVN())) + ")" +
		", " + b.Name("#l", lockitem.LeaseDuration) + " = if_not_exists(#l, " + b.Value(":l", lockitem.S(lockitem.FormatLease(a.o.lease))) + ")" +
		", " + b.Name("#f", lockitem.FencingToken) + " = if_not_exists(#f, " + b.Value(":base", lockitem.N(uint64(sent.UnixMicro()))) + ")"
	cond := "(attribute_not_exists(" + pk + ") OR attribute_exists(" + rel + ")"
	if d.takeover != "" {
		cond += " OR #v = " + b.Value(":stale", lockitem.S(d.takeover))
	}
	cond += ")"
	remove := ""
	// The entry is this call's only if no write of it is there yet, or the
	// one this call found, whose lease is over (rwOwnGrant): a write held
	// up in the network that lands after a later grant of the same call
	// must not overwrite the beat the reader now holds by (docs/SIMULATION.md,
	// F16). Entry ids are never reused.
	own := func() string {
		me := rs + "." + b.Name("#me", k.id)
		if v.known && v.rw != nil {
			if i := slices.IndexFunc(v.rw.readers, func(r rwEntry) bool { return r.ID == k.id }); i >= 0 {
				return me + "." + b.Name("#b", "b") + " = " + b.Value(":ownb", lockitem.S(v.rw.readers[i].Beat))
			}
		}
		return "attribute_not_exists(" + me + ")"
	}
	switch {
	case !v.known:
		// Blind: the usual case of a lock in use, where the readers map
		// exists and nobody waits (so no writer waits: one that arrives
		// later is behind this reader).
		q := b.Name("#q", lockitem.FairQueue)
		set += ", " + rs + "." + b.Name("#me", k.id) + " = " + b.Value(":e", entry)
		cond += " AND " + own() + " AND size(" + rs + ") < " + b.Value(":max", lockitem.N(MaxReaders)) +
			" AND (attribute_not_exists(" + q + ") OR size(" + q + ") = " + b.Value(":zero", lockitem.N(0)) + ")"
	case v.rw != nil && v.rw.readersPresent:
		set += ", " + rs + "." + b.Name("#me", k.id) + " = " + b.Value(":e", entry)
		cond += " AND " + own()
		if len(g.removeReaders) > 0 {
			cond += " AND " + versionCond(b, v.rw)
			for i, id := range g.removeReaders {
				remove += ", " + rs + "." + b.Name("#d"+strconv.Itoa(i), id)
			}
		} else {
			cond += " AND size(" + rs + ") < " + b.Value(":max", lockitem.N(MaxReaders))
		}
	default:
		set += ", " + rs + " = " + b.Value(":e", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{k.id: entry}})
		cond += " AND attribute_not_exists(" + rs + ")"
	}
	switch {
	case !v.known: // the queue's condition above
	case v.rw != nil && v.rw.arrivedPresent:
		cond += " AND " + b.Name("#wa", lockitem.WritersArrived) + " = " + b.Value(":wa", lockitem.N(v.rw.writersArrived))
	default:
		cond += " AND attribute_not_exists(" + b.Name("#wa", lockitem.WritersArrived) + ")"
	}
	if len(g.removeQueue) > 0 {
		q := b.Name("#q", lockitem.FairQueue)
		cond += " AND attribute_exists(" + q + ")"
		for i, id := range g.removeQueue {
			remove += ", " + q + "." + b.Name("#w"+strconv.Itoa(i), id)
		}
		cond += queueBeatConds(b, g)
	}
	// No TTL may delete an item readers hold; no stored expiry outlives the
	// writer that wrote it; a released writer's slot names no session.
	remove += ", " + expiryAttrs(b) + ", " + b.Name("#s", lockitem.Session)
	if c.cfg.ttlAttribute != "" {
		remove += ", " + b.Name("#ttl", c.cfg.ttlAttribute)
	}
	update := set + " REMOVE " + remove[2:] + " ADD " + rver + " " + b.Value(":one", lockitem.N(1))
	in := c.guardedUpdate(c.itemKeyOf(w.key, w.sortKey), b, update, cond)
	in.ReturnValues = types.ReturnValueAllNew
	return in
}

// grantOf is d's grant (nothing to remove for a blind write).
func grantOf(d decision) *rwGrant {
	if d.grant == nil {
		return &rwGrant{}
	}
	return d.grant
}

// writerGrant builds a writer's granting write: a plain acquiring write
// (acquireWrite: the writer's slot, the fencing token, the queue) plus the
// readers' condition, and the dead readers dropped.
func (k *rwHolder) writerGrant(a *acquisition, w *watch, d decision, rvn string, sent time.Time, sess *Session) (*dynamodb.UpdateItemInput, *acquiredItem) {
	c, v, g := a.c, &w.v, grantOf(d)
	q := &queueWrite{empty: true}
	if v.rw != nil && v.rw.queuePresent && len(v.rw.queue) > 0 {
		q = &queueWrite{remove: g.removeQueue}
	}
	in, wrote := c.acquireWrite(w.key, w.sortKey, a.o, rvn, d.takeover, q, sent, sess)
	names, values := in.ExpressionAttributeNames, in.ExpressionAttributeValues
	if values == nil {
		values = make(map[string]types.AttributeValue)
	}
	b := &lockitem.Expr{Names: names, Values: values}
	rs := b.Name("#rwR", lockitem.Readers)
	cond := aws.ToString(in.ConditionExpression)
	if len(q.remove) > 0 {
		cond += queueBeatConds(b, g) // acquireWrite named the queue #q and its removed entries #w0, #w1, ...
	}
	update := aws.ToString(in.UpdateExpression)
	// The readers map is left empty rather than removed, so that the
	// readers' blind first write (readerGrant) finds it.
	update = strings.Replace(update, " REMOVE ", ", "+rs+" = "+b.Value(":rwEmpty", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})+" REMOVE ", 1)
	if v.rw == nil || len(v.rw.readers) == 0 {
		cond = "(" + cond + ") AND (attribute_not_exists(" + rs + ") OR size(" + rs + ") = " + b.Value(":rwZero", lockitem.N(0)) + ")"
	} else {
		// Exactly the readers map seen, every entry of it dead: drop them.
		cond = "(" + cond + ") AND " + versionCondAs(b, v.rw, "#rwRV", ":rwRV")
		update += " ADD #rwRV " + b.Value(":rwOne", lockitem.N(1))
	}
	in.ConditionExpression = aws.String(cond)
	in.UpdateExpression = aws.String(update)
	in.ExpressionAttributeValues = b.Values
	return in, wrote
}

// queueBeatConds requires every waiter d drops as dead to carry the beat it
// was judged dead with, and this waiter's own entry, if it decided from its
// place in the queue, to be still there. The queue and the entries are named #q and #w<i>,
// as the REMOVE clause names them.
func queueBeatConds(b *lockitem.Expr, g *rwGrant) string {
	cond := ""
	if g.mineAt > 0 {
		cond += " AND attribute_exists(#q.#w" + strconv.Itoa(g.mineAt-1) + ")"
	}
	for i, beat := range g.removeBeats {
		if beat != "" {
			n := strconv.Itoa(i)
			cond += " AND #q.#w" + n + "." + b.Name("#qb", "b") + " = " + b.Value(":qb"+n, lockitem.S(beat))
		}
	}
	return cond
}

// versionCond requires the readers map to be exactly as v showed it.
func versionCond(b *lockitem.Expr, v *rwParts) string { return versionCondAs(b, v, "#rv", ":rver") }

func versionCondAs(b *lockitem.Expr, v *rwParts, nameAlias, valueAlias string) string {
	n := b.Name(nameAlias, lockitem.ReadersVersion)
	if !v.versionPresent {
		return "attribute_not_exists(" + n + ")"
	}
	return n + " = " + b.Value(valueAlias, lockitem.N(v.readersVersion))
}

// readerEntry is a reader's entry: its beat and lease, and the key of the
// session that holds it ("s", absent without one; docs/SESSIONS.md).
func readerEntry(beat string, lease time.Duration, session string) types.AttributeValue {
	e := map[string]types.AttributeValue{"b": lockitem.S(beat), "l": lockitem.N(uint64(max(lease/time.Millisecond, 1)))}
	if session != "" {
		e["s"] = lockitem.S(session)
	}
	return &types.AttributeValueMemberM{Value: e}
}

// readerUndoInput removes reader id's entry if it still carries one of
// beats: a write of this client that nobody holds any more (a grant whose
// answer was lost, a renewal that landed after the lease ran out).
func (c *Client) readerUndoInput(key map[string]types.AttributeValue, id string, beats []string) *dynamodb.UpdateItemInput {
	b := lockitem.NewExpr()
	return c.guardedUpdate(key, b, readerRelease(b, id), readerBeatIn(b, id, beats))
}

// readerBeatIn is the condition that reader id's entry carries one of
// beats.
func readerBeatIn(b *lockitem.Expr, id string, beats []string) string {
	list := ""
	for i, beat := range beats {
		if i > 0 {
			list += ", "
		}
		list += b.Value(":rb"+strconv.Itoa(i), lockitem.S(beat))
	}
	return readerBeatPath(b, id) + " IN (" + list + ")"
}

// readerRegKey is a reader lock's key in its client's registry: a form no
// plain lock's registry key has (valid UTF-8 never starts with 0xfe), with
// the reader's id, so that one client can hold many readers of one key.
func readerRegKey(key string, sortKey *string, id string) string {
	return "\xfe" + id + registryKey(key, sortKey)
}

// readerPath is the path of reader id's entry.
func readerPath(b *lockitem.Expr, id string) string {
	return b.Name("#R", lockitem.Readers) + "." + b.Name("#me", id)
}

// readerBeatPath is the path of reader id's beat.
func readerBeatPath(b *lockitem.Expr, id string) string {
	return readerPath(b, id) + "." + b.Name("#b", "b")
}

// readerRenewal is a reader's heartbeat: a new beat and the lease in its
// own entry, nothing else (heartbeatInput adds the condition: its beat is
// one this holder wrote).
func readerRenewal(b *lockitem.Expr, id string, w *renewal) string {
	e := readerPath(b, id)
	return "SET " + e + "." + b.Name("#b", "b") + " = " + b.Value(":v", lockitem.S(w.rvn)) +
		", " + e + "." + b.Name("#lm", "l") + " = " + b.Value(":lm", lockitem.N(uint64(max(w.lease/time.Millisecond, 1)))) +
		" ADD " + b.Name("#rv", lockitem.ReadersVersion) + " " + b.Value(":one", lockitem.N(1))
}

// readerRelease removes a reader's entry.
func readerRelease(b *lockitem.Expr, id string) string {
	return "REMOVE " + readerPath(b, id) + " ADD " + b.Name("#rv", lockitem.ReadersVersion) + " " + b.Value(":one", lockitem.N(1))
}

// readerHasEntry reports whether item holds reader id's entry.
func readerHasEntry(item map[string]types.AttributeValue, id string) bool {
	m, _ := item[lockitem.Readers].(*types.AttributeValueMemberM)
	if m == nil {
		return false
	}
	_, ok := m.Value[id]
	return ok
}
