package dynamolock

// The writes of a read/write lock's acquisition (granting, joining and
// leaving the queue, undoing) and of a held reader (its renewal and
// release, which heartbeat.go and release.go send).

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// readerGrant builds a reader's granting write: its entry in readers, the
// writer's slot marked free, and its queue entry and the dead ones
// removed.
func (a *rwAcquisition) readerGrant(d rwDecision, v *rwView, beat string, sent time.Time) *dynamodb.UpdateItemInput {
	c := a.rw.c
	b := newExprBuilder()
	pk, rel, rs, rver := b.name("#pk", c.cfg.partitionKeyName), b.name("#r", attrIsReleased), b.name("#R", attrReaders), b.name("#rv", attrReadersVersion)
	entry := readerEntry(beat, a.o.lease)
	// The writer's attributes are kept (a released item), or written for a
	// new item, so that every client reads the item as a released lock.
	set := "SET " + rel + " = " + b.value(":r", attrS("1")) +
		", " + b.name("#o", attrOwnerName) + " = if_not_exists(#o, " + b.value(":o", attrS(c.cfg.ownerName)) + ")" +
		", " + b.name("#v", attrRVN) + " = if_not_exists(#v, " + b.value(":v", attrS(newRVN())) + ")" +
		", " + b.name("#l", attrLeaseDuration) + " = if_not_exists(#l, " + b.value(":l", attrS(formatLease(a.o.lease))) + ")" +
		", " + b.name("#f", attrFencingToken) + " = if_not_exists(#f, " + b.value(":base", attrN(uint64(sent.UnixMicro()))) + ")"
	cond := "(attribute_not_exists(" + pk + ") OR attribute_exists(" + rel + ")"
	if d.takeover != "" {
		cond += " OR #v = " + b.value(":stale", attrS(d.takeover))
	}
	cond += ")"
	remove := ""
	if !v.known {
		// Blind: the usual case of a lock in use, where the readers map
		// exists and nobody waits (so no writer waits: one that arrives
		// later is behind this reader).
		q := b.name("#q", attrFairQueue)
		set += ", " + rs + "." + b.name("#me", a.id) + " = " + b.value(":e", entry)
		cond += " AND size(" + rs + ") < " + b.value(":max", attrN(MaxReaders)) +
			" AND (attribute_not_exists(" + q + ") OR size(" + q + ") = " + b.value(":zero", attrN(0)) + ")"
	} else if v.readersPresent {
		set += ", " + rs + "." + b.name("#me", a.id) + " = " + b.value(":e", entry)
		if len(d.removeReaders) > 0 {
			cond += " AND " + versionCond(b, v)
			for i, id := range d.removeReaders {
				remove += ", " + rs + "." + b.name("#d"+strconv.Itoa(i), id)
			}
		} else {
			cond += " AND size(" + rs + ") < " + b.value(":max", attrN(MaxReaders))
		}
	} else {
		set += ", " + rs + " = " + b.value(":e", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{a.id: entry}})
		cond += " AND attribute_not_exists(" + rs + ")"
	}
	switch {
	case !v.known: // the queue's condition above
	case v.arrivedPresent:
		cond += " AND " + b.name("#wa", attrWritersArrived) + " = " + b.value(":wa", attrN(v.writersArrived))
	default:
		cond += " AND attribute_not_exists(" + b.name("#wa", attrWritersArrived) + ")"
	}
	if len(d.removeQueue) > 0 {
		q := b.name("#q", attrFairQueue)
		cond += " AND attribute_exists(" + q + ")"
		for i, id := range d.removeQueue {
			remove += ", " + q + "." + b.name("#w"+strconv.Itoa(i), id)
		}
		cond += queueBeatConds(b, d)
	}
	// No TTL may delete an item readers hold; no stored expiry outlives the
	// writer that wrote it.
	remove += ", " + expiryAttrs(b)
	if c.cfg.ttlAttribute != "" {
		remove += ", " + b.name("#ttl", c.cfg.ttlAttribute)
	}
	update := set + " REMOVE " + remove[2:] + " ADD " + rver + " " + b.value(":one", attrN(1))
	in := c.guardedUpdate(c.itemKeyOf(a.rw.name, a.o.sortKey), b, update, cond)
	in.ReturnValues = types.ReturnValueAllNew
	return in
}

// writerGrant builds a writer's granting write: a plain acquiring write
// (acquireWrite: the writer's slot, the fencing token, the queue) plus the
// readers' condition, and the dead readers dropped.
func (a *rwAcquisition) writerGrant(d rwDecision, v *rwView, rvn string, sent time.Time) (*dynamodb.UpdateItemInput, *acquiredItem) {
	c := a.rw.c
	q := &queueWrite{empty: true}
	if v.queuePresent && len(v.queue) > 0 {
		q = &queueWrite{remove: d.removeQueue}
	}
	in, wrote := c.acquireWrite(a.rw.name, a.o.sortKey, a.o, rvn, d.takeover, q, sent)
	names, values := in.ExpressionAttributeNames, in.ExpressionAttributeValues
	if values == nil {
		values = make(map[string]types.AttributeValue)
	}
	b := &exprBuilder{names: names, values: values}
	rs := b.name("#rwR", attrReaders)
	cond := aws.ToString(in.ConditionExpression)
	if len(q.remove) > 0 {
		cond += queueBeatConds(b, d) // acquireWrite named the queue #q and its removed entries #w0, #w1, ...
	}
	update := aws.ToString(in.UpdateExpression)
	// The readers map is left empty rather than removed, so that the
	// readers' blind first write (readerGrant) finds it.
	update = strings.Replace(update, " REMOVE ", ", "+rs+" = "+b.value(":rwEmpty", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})+" REMOVE ", 1)
	if len(v.readers) == 0 {
		cond = "(" + cond + ") AND (attribute_not_exists(" + rs + ") OR size(" + rs + ") = " + b.value(":rwZero", attrN(0)) + ")"
	} else {
		// Exactly the readers map seen, every entry of it dead: drop them.
		cond = "(" + cond + ") AND " + versionCondAs(b, v, "#rwRV", ":rwRV")
		update += " ADD #rwRV " + b.value(":rwOne", attrN(1))
	}
	in.ConditionExpression = aws.String(cond)
	in.UpdateExpression = aws.String(update)
	in.ExpressionAttributeValues = b.values
	return in, wrote
}

// queueBeatConds requires every waiter d drops as dead to carry the beat it
// was judged dead with, and this waiter's own entry, if it decided from its
// place in the queue, to be still there. The queue and the entries are named #q and #w<i>,
// as the REMOVE clause names them.
func queueBeatConds(b *exprBuilder, d rwDecision) string {
	cond := ""
	if d.mineAt > 0 {
		cond += " AND attribute_exists(#q.#w" + strconv.Itoa(d.mineAt-1) + ")"
	}
	for i, beat := range d.removeBeats {
		if beat != "" {
			n := strconv.Itoa(i)
			cond += " AND #q.#w" + n + "." + b.name("#qb", "b") + " = " + b.value(":qb"+n, attrS(beat))
		}
	}
	return cond
}

// versionCond requires the readers map to be exactly as v showed it.
func versionCond(b *exprBuilder, v *rwView) string { return versionCondAs(b, v, "#rv", ":rver") }

func versionCondAs(b *exprBuilder, v *rwView, nameAlias, valueAlias string) string {
	n := b.name(nameAlias, attrReadersVersion)
	if !v.versionPresent {
		return "attribute_not_exists(" + n + ")"
	}
	return n + " = " + b.value(valueAlias, attrN(v.readersVersion))
}

func readerEntry(beat string, lease time.Duration) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"b": attrS(beat), "l": attrN(uint64(max(lease/time.Millisecond, 1))),
	}}
}

// join adds this waiter's entry to the queue, or renews its beat, and
// learns the item from the answer. A writer's join that adds its entry
// also counts it in writersArrived: that fails every reader's write based
// on a look from before the writer was in the queue.
func (a *rwAcquisition) join(ctx context.Context, v *rwView) error {
	c := a.rw.c
	if !a.joined {
		// A ticket is this waiter's once a join carrying it landed; until
		// then it follows the highest in the latest view.
		a.ticket = 0
		for _, w := range v.queue {
			if !w.bad {
				a.ticket = max(a.ticket, w.ticket)
			}
		}
		a.ticket++
	}
	a.beatAt = a.rw.c.now()
	entry := map[string]types.AttributeValue{
		"t": attrN(a.ticket), "b": attrS(randomID()), "l": attrN(uint64(a.lease / time.Millisecond)),
	}
	if a.writer {
		entry["k"] = attrS("w")
	} else {
		entry["k"] = attrS("r")
	}
	b := newExprBuilder()
	q := b.name("#q", attrFairQueue)
	cond := "attribute_exists(" + b.name("#pk", c.cfg.partitionKeyName) + ") AND "
	var update string
	present := slices.ContainsFunc(v.queue, func(w rwWaiter) bool { return w.id == a.id })
	switch {
	case present:
		// A renewal: only of an entry still there. One that others dropped
		// as dead is added again by a join that counts (below), and a
		// renewal that arrives late never brings a dropped entry back.
		update = "SET " + q + "." + b.name("#w", a.id) + " = " + b.value(":e", &types.AttributeValueMemberM{Value: entry})
		cond += "attribute_exists(" + q + "." + "#w)"
	case v.queuePresent:
		update = "SET " + q + "." + b.name("#w", a.id) + " = " + b.value(":e", &types.AttributeValueMemberM{Value: entry})
		cond += "attribute_exists(" + q + ")"
	default:
		update = "SET " + q + " = " + b.value(":m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			a.id: &types.AttributeValueMemberM{Value: entry}}})
		cond += "attribute_not_exists(" + q + ")"
	}
	// Every join that adds a writer's entry (first, or again after others
	// dropped it as dead) counts it: a reader that looked before it was
	// there must look again.
	if a.writer && (!a.counted || !present) {
		update += " ADD " + b.name("#wa", attrWritersArrived) + " " + b.value(":one", attrN(1))
	}
	in := c.guardedUpdate(c.itemKeyOf(a.rw.name, a.o.sortKey), b, update, cond)
	in.ReturnValues = types.ReturnValueAllNew
	out, err := c.updateItem(ctx, in)
	if err == nil {
		a.joined = true
		a.counted = a.counted || a.writer
		return a.learn(ctx, v, out.Attributes, nil)
	}
	return a.answer(ctx, v, err)
}

// leave removes this waiter's queue entry when the call gives up: best
// effort, within ctx. An entry left behind is dropped after its lease.
func (a *rwAcquisition) leave(ctx context.Context) {
	if a.ticket == 0 {
		return
	}
	c := a.rw.c
	b := newExprBuilder()
	q := b.name("#q", attrFairQueue)
	_, err := c.updateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                aws.String(c.cfg.tableName),
		Key:                      c.itemKeyOf(a.rw.name, a.o.sortKey),
		UpdateExpression:         aws.String("REMOVE " + q + "." + b.name("#w", a.id)),
		ConditionExpression:      aws.String("attribute_exists(" + q + ")"),
		ExpressionAttributeNames: b.names,
	})
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "could not leave the rwlock queue; the entry is dropped after its lease",
			slogKey(a.rw.name), slogErr(err))
	}
}

// undo takes back every granting write of this call that may have landed:
// a writer's as a plain acquisition's (released), a reader's entry
// removed if it still carries one of those beats. Best effort, within ctx.
func (a *rwAcquisition) undo(ctx context.Context) {
	if a.writer {
		a.engine.undo(ctx)
		return
	}
	var beats []string
	for beat, at := range a.attempts {
		if at.unsure {
			beats = append(beats, beat)
		}
	}
	if len(beats) == 0 {
		return
	}
	c := a.rw.c
	b := newExprBuilder()
	cond := readerBeatIn(b, a.id, beats)
	update := "REMOVE " + b.name("#R", attrReaders) + "." + b.name("#me", a.id) + " ADD " + b.name("#rv", attrReadersVersion) + " " + b.value(":one", attrN(1))
	_, err := c.updateItem(ctx, c.guardedUpdate(c.itemKeyOf(a.rw.name, a.o.sortKey), b, update, cond))
	var ccf *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &ccf) {
		c.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "could not undo a reader's write whose answer was lost; the entry is dropped after its lease",
			slogKey(a.rw.name), slogErr(err))
	}
}

// readerBeatIn is the condition that reader id's entry carries one of
// beats.
func readerBeatIn(b *exprBuilder, id string, beats []string) string {
	list := ""
	for i, beat := range beats {
		if i > 0 {
			list += ", "
		}
		list += b.value(":rb"+strconv.Itoa(i), attrS(beat))
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
func readerPath(b *exprBuilder, id string) string {
	return b.name("#R", attrReaders) + "." + b.name("#me", id)
}

// readerBeatPath is the path of reader id's beat.
func readerBeatPath(b *exprBuilder, id string) string {
	return readerPath(b, id) + "." + b.name("#b", "b")
}

// readerRenewal is a reader's heartbeat: a new beat and the lease in its
// own entry, nothing else (heartbeatInput adds the condition: its beat is
// one this holder wrote).
func readerRenewal(b *exprBuilder, id string, w *renewal) string {
	e := readerPath(b, id)
	return "SET " + e + "." + b.name("#b", "b") + " = " + b.value(":v", attrS(w.rvn)) +
		", " + e + "." + b.name("#lm", "l") + " = " + b.value(":lm", attrN(uint64(max(w.lease/time.Millisecond, 1)))) +
		" ADD " + b.name("#rv", attrReadersVersion) + " " + b.value(":one", attrN(1))
}

// readerRelease removes a reader's entry.
func readerRelease(b *exprBuilder, id string) string {
	return "REMOVE " + readerPath(b, id) + " ADD " + b.name("#rv", attrReadersVersion) + " " + b.value(":one", attrN(1))
}

// readerHasEntry reports whether item holds reader id's entry.
func readerHasEntry(item map[string]types.AttributeValue, id string) bool {
	m, _ := item[attrReaders].(*types.AttributeValueMemberM)
	if m == nil {
		return false
	}
	_, ok := m.Value[id]
	return ok
}
