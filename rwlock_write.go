package dynamolock

// The writes of a read/write lock's acquisition (granting, joining and
// leaving the queue, undoing) and of a held reader (its renewal and
// release, which heartbeat.go and release.go send).

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// grant sends the granting write of w.next: a reader's entry, or the
// writer's slot. It returns the lock, or updates w with what the answer
// showed, or returns the error that ends the call (acquisition.write for
// an RWLock's key).
func (a *acquisition) grant(ctx context.Context, w *watch) ([]*Lock, error) {
	c, d := a.c, w.next
	if done, err := a.endSessions(ctx, w, d); !done || err != nil {
		return nil, err
	}
	beat := newRVN() // the writer's RVN, or the reader's beat
	sent := c.now()
	sess, lease, err := a.session(ctx, sent)
	if err != nil {
		w.forget()
		return nil, a.failed(ctx, w, err) // no session could start: as a failed write
	}
	var in *dynamodb.UpdateItemInput
	var wrote *acquiredItem
	if a.rw.writer {
		in, wrote = a.writerGrant(w, d, beat, sent, sess)
	} else {
		in = a.readerGrant(w, d, beat, sent, sess)
	}
	at := attempt{sent: sent, lease: lease, unsure: true, on: []*watch{w}, reader: !a.rw.writer, sess: sess}
	a.attempts[beat] = at
	c.here.sending(beat)
	c.here.noteCall(w)
	blind := !w.v.known
	out, err := a.updateItem(ctx, in)
	if err == nil {
		item := out.Attributes
		if a.rw.writer {
			item = wrote.after(in.Key, out.Attributes)
		}
		if !c.now().Before(sent.Add(at.lease)) {
			// The answer came after the lease it granted ran out (a pause):
			// take the lock anew rather than return one already lost.
			return nil, a.learn(ctx, w, item, nil)
		}
		var l *Lock
		if a.rw.writer {
			l, err = a.holdItem(ctx, w, item, at)
		} else if err = a.learn(ctx, w, item, nil); err == nil {
			l, err = a.holdRecord(ctx, w, a.readerRecord(item, beat, at), at)
		}
		if l == nil || err != nil {
			return nil, err // no lock: lost before it could be returned; decided anew
		}
		return []*Lock{l}, nil
	}
	var ccf *types.ConditionalCheckFailedException
	isCCF := errors.As(err, &ccf)
	if isCCF && !mayHaveLanded(err) && !a.carries(ccf.Item, beat) || !isCCF && surelyNotApplied(err) {
		at.unsure = false
		a.attempts[beat] = at
	}
	switch {
	case isCCF && len(ccf.Item) > 0:
		return nil, a.learn(ctx, w, ccf.Item, nil)
	case isCCF && blind && !at.unsure:
		// The blind write found no item (DynamoDB returns the item a
		// condition failed on): create it.
		w.v = view{known: true, absent: true}
		w.dirty = true
		return nil, nil
	case isCCF:
		w.forget() // no item came back (an emulator): read it
		return nil, nil
	}
	w.forget()
	return nil, a.failed(ctx, w, err)
}

// carries reports whether item shows the granting write that wrote beat.
func (a *acquisition) carries(item map[string]types.AttributeValue, beat string) bool {
	if a.rw.writer {
		return carriesRVN(item, beat)
	}
	m, _ := item[attrReaders].(*types.AttributeValueMemberM)
	if m == nil {
		return false
	}
	return decodeReader(a.rw.id, m.Value[a.rw.id]).beat == beat
}

// readerGrant builds a reader's granting write: its entry in readers, the
// writer's slot marked free, and its queue entry and the dead ones
// removed.
func (a *acquisition) readerGrant(w *watch, d decision, beat string, sent time.Time, sess *Session) *dynamodb.UpdateItemInput {
	c, v, g := a.c, &w.v, grantOf(d)
	b := newExprBuilder()
	pk, rel, rs, rver := b.name("#pk", c.cfg.partitionKeyName), b.name("#r", attrIsReleased), b.name("#R", attrReaders), b.name("#rv", attrReadersVersion)
	entry := readerEntry(beat, a.o.lease, "")
	if sess != nil {
		entry = readerEntry(beat, sess.Lease(), sess.key)
	}
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
	switch {
	case !v.known:
		// Blind: the usual case of a lock in use, where the readers map
		// exists and nobody waits (so no writer waits: one that arrives
		// later is behind this reader).
		q := b.name("#q", attrFairQueue)
		set += ", " + rs + "." + b.name("#me", a.rw.id) + " = " + b.value(":e", entry)
		cond += " AND size(" + rs + ") < " + b.value(":max", attrN(MaxReaders)) +
			" AND (attribute_not_exists(" + q + ") OR size(" + q + ") = " + b.value(":zero", attrN(0)) + ")"
	case v.rw != nil && v.rw.readersPresent:
		set += ", " + rs + "." + b.name("#me", a.rw.id) + " = " + b.value(":e", entry)
		if len(g.removeReaders) > 0 {
			cond += " AND " + versionCond(b, v.rw)
			for i, id := range g.removeReaders {
				remove += ", " + rs + "." + b.name("#d"+strconv.Itoa(i), id)
			}
		} else {
			cond += " AND size(" + rs + ") < " + b.value(":max", attrN(MaxReaders))
		}
	default:
		set += ", " + rs + " = " + b.value(":e", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{a.rw.id: entry}})
		cond += " AND attribute_not_exists(" + rs + ")"
	}
	switch {
	case !v.known: // the queue's condition above
	case v.rw != nil && v.rw.arrivedPresent:
		cond += " AND " + b.name("#wa", attrWritersArrived) + " = " + b.value(":wa", attrN(v.rw.writersArrived))
	default:
		cond += " AND attribute_not_exists(" + b.name("#wa", attrWritersArrived) + ")"
	}
	if len(g.removeQueue) > 0 {
		q := b.name("#q", attrFairQueue)
		cond += " AND attribute_exists(" + q + ")"
		for i, id := range g.removeQueue {
			remove += ", " + q + "." + b.name("#w"+strconv.Itoa(i), id)
		}
		cond += queueBeatConds(b, g)
	}
	// No TTL may delete an item readers hold; no stored expiry outlives the
	// writer that wrote it; a released writer's slot names no session.
	remove += ", " + expiryAttrs(b) + ", " + b.name("#s", attrSession)
	if c.cfg.ttlAttribute != "" {
		remove += ", " + b.name("#ttl", c.cfg.ttlAttribute)
	}
	update := set + " REMOVE " + remove[2:] + " ADD " + rver + " " + b.value(":one", attrN(1))
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
func (a *acquisition) writerGrant(w *watch, d decision, rvn string, sent time.Time, sess *Session) (*dynamodb.UpdateItemInput, *acquiredItem) {
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
	b := &exprBuilder{names: names, values: values}
	rs := b.name("#rwR", attrReaders)
	cond := aws.ToString(in.ConditionExpression)
	if len(q.remove) > 0 {
		cond += queueBeatConds(b, g) // acquireWrite named the queue #q and its removed entries #w0, #w1, ...
	}
	update := aws.ToString(in.UpdateExpression)
	// The readers map is left empty rather than removed, so that the
	// readers' blind first write (readerGrant) finds it.
	update = strings.Replace(update, " REMOVE ", ", "+rs+" = "+b.value(":rwEmpty", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{}})+" REMOVE ", 1)
	if v.rw == nil || len(v.rw.readers) == 0 {
		cond = "(" + cond + ") AND (attribute_not_exists(" + rs + ") OR size(" + rs + ") = " + b.value(":rwZero", attrN(0)) + ")"
	} else {
		// Exactly the readers map seen, every entry of it dead: drop them.
		cond = "(" + cond + ") AND " + versionCondAs(b, v.rw, "#rwRV", ":rwRV")
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
func queueBeatConds(b *exprBuilder, g *rwGrant) string {
	cond := ""
	if g.mineAt > 0 {
		cond += " AND attribute_exists(#q.#w" + strconv.Itoa(g.mineAt-1) + ")"
	}
	for i, beat := range g.removeBeats {
		if beat != "" {
			n := strconv.Itoa(i)
			cond += " AND #q.#w" + n + "." + b.name("#qb", "b") + " = " + b.value(":qb"+n, attrS(beat))
		}
	}
	return cond
}

// versionCond requires the readers map to be exactly as v showed it.
func versionCond(b *exprBuilder, v *rwParts) string { return versionCondAs(b, v, "#rv", ":rver") }

func versionCondAs(b *exprBuilder, v *rwParts, nameAlias, valueAlias string) string {
	n := b.name(nameAlias, attrReadersVersion)
	if !v.versionPresent {
		return "attribute_not_exists(" + n + ")"
	}
	return n + " = " + b.value(valueAlias, attrN(v.readersVersion))
}

// readerEntry is a reader's entry: its beat and lease, and the key of the
// session that holds it ("s", absent without one; docs/SESSIONS.md).
func readerEntry(beat string, lease time.Duration, session string) types.AttributeValue {
	e := map[string]types.AttributeValue{"b": attrS(beat), "l": attrN(uint64(max(lease/time.Millisecond, 1)))}
	if session != "" {
		e["s"] = attrS(session)
	}
	return &types.AttributeValueMemberM{Value: e}
}

// rwJoin adds this waiter's entry to the queue, or renews its beat, and
// learns the item from the answer (acquisition.join for an RWLock's key).
// A writer's join that adds its entry also counts it in writersArrived:
// that fails every reader's write based on a look from before the writer
// was in the queue. A new entry needs a place in the queue (maxWaiters).
func (a *acquisition) rwJoin(ctx context.Context, w *watch) error {
	c, st, v := a.c, a.rw, &w.v
	if st.ticket == 0 {
		// Drawn once: a join whose answer was lost may have put this
		// ticket in the queue, and the next join must keep it.
		for _, q := range v.rw.queue {
			if !q.bad {
				st.ticket = max(st.ticket, q.ticket)
			}
		}
		st.ticket++ // below maxTicket: valid tickets are
	}
	st.beatAt = c.now()
	entry := map[string]types.AttributeValue{
		"t": attrN(st.ticket), "b": attrS(randomID()), "l": attrN(uint64(st.lease / time.Millisecond)),
	}
	if st.writer {
		entry["k"] = attrS("w")
	} else {
		entry["k"] = attrS("r")
	}
	b := newExprBuilder()
	q := b.name("#q", attrFairQueue)
	cond := "attribute_exists(" + b.name("#pk", c.cfg.partitionKeyName) + ") AND "
	var update string
	present := slices.ContainsFunc(v.rw.queue, func(q rwWaiter) bool { return q.id == st.id })
	switch {
	case present:
		// A renewal: only of an entry still there. One that others dropped
		// as dead is added again by a join that counts (below), and a
		// renewal that arrives late never brings a dropped entry back.
		update = "SET " + q + "." + b.name("#w", st.id) + " = " + b.value(":e", &types.AttributeValueMemberM{Value: entry})
		cond += "attribute_exists(" + q + "." + "#w)"
	case v.rw.queuePresent:
		update = "SET " + q + "." + b.name("#w", st.id) + " = " + b.value(":e", &types.AttributeValueMemberM{Value: entry})
		cond += "size(" + q + ") < " + b.value(":maxq", attrN(maxWaiters))
	default:
		update = "SET " + q + " = " + b.value(":m", &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
			st.id: &types.AttributeValueMemberM{Value: entry}}})
		cond += "attribute_not_exists(" + q + ")"
	}
	// Every join that adds a writer's entry (first, or again after others
	// dropped it as dead) counts it: a reader that looked before it was
	// there must look again.
	if st.writer && (!st.counted || !present) {
		update += " ADD " + b.name("#wa", attrWritersArrived) + " " + b.value(":one", attrN(1))
	}
	landed, err := a.sendJoin(ctx, w, c.guardedUpdate(c.itemKeyOf(w.key, w.sortKey), b, update, cond))
	st.counted = st.counted || landed && st.writer
	return err
}

// readerUndoInput removes reader id's entry if it still carries one of
// beats: a write of this client that nobody holds any more (a grant whose
// answer was lost, a renewal that landed after the lease ran out).
func (c *Client) readerUndoInput(key map[string]types.AttributeValue, id string, beats []string) *dynamodb.UpdateItemInput {
	b := newExprBuilder()
	return c.guardedUpdate(key, b, readerRelease(b, id), readerBeatIn(b, id, beats))
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
