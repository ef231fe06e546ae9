package ddbmodel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The fair mode's request shapes: a map attribute fairQueue (through #q)
// of waiter id → {"t": N ticket, "b": S beat nonce}, written member by
// member through document paths (#q.#w), replaced whole, removed, and
// tested in conditions with attribute_exists, attribute_not_exists and
// size. fairActor sends them at random beside the lock workers; fairShapes
// sends the cases whose answers had to be established against DynamoDB
// Local (see model's path.go and update.go).

const attrQueue = "fairQueue"

// waiters are waiter ids as the fair mode may make them: any string.
var waiters = []string{"w-1", "host/7", "a.b", "#h", "plain"}

// fairKeys are the fair actor's items; it leaves the lock workers' alone.
var fairKeys = []string{"q0", "q1"}

// expr builds an expression's placeholders as they are used, so that none
// is left unused (DynamoDB rejects those).
type expr struct {
	names  map[string]string
	values map[string]types.AttributeValue
}

func newExpr() *expr {
	return &expr{names: map[string]string{}, values: map[string]types.AttributeValue{}}
}

func (e *expr) n(ph, name string) string { e.names[ph] = name; return ph }

func (e *expr) v(ph string, v types.AttributeValue) string { e.values[ph] = v; return ph }

func (e *expr) q() string { return e.n("#q", attrQueue) }

// w is the path of waiter i's member of the queue.
func (e *expr) w(i int) string { return e.q() + "." + e.n(fmt.Sprintf("#w%d", i), waiters[i]) }

func (e *expr) valuesOrNil() map[string]types.AttributeValue {
	if len(e.values) == 0 {
		return nil
	}
	return e.values
}

func (e *expr) namesOrNil() map[string]string {
	if len(e.names) == 0 {
		return nil
	}
	return e.names
}

func sv(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func nv(n int) types.AttributeValue    { return &types.AttributeValueMemberN{Value: fmt.Sprint(n)} }

func entry(r *rand.Rand) types.AttributeValue {
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"t": nv(r.IntN(50)), "b": sv(fmt.Sprintf("n%d", r.IntN(1000)))}}
}

// queue is a map of a random subset of the waiters.
func queue(r *rand.Rand) types.AttributeValue {
	m := map[string]types.AttributeValue{}
	for _, w := range waiters {
		if r.IntN(3) == 0 {
			m[w] = entry(r)
		}
	}
	return &types.AttributeValueMemberM{Value: m}
}

type fairActor struct {
	r     *rand.Rand
	d     *tee
	table string
	sent  int // requests sent
}

// cond is a random condition of the fair mode's kind, or "".
func (a *fairActor) cond(e *expr) string {
	r := a.r
	atom := func() string {
		switch r.IntN(12) {
		case 0:
			return "attribute_exists(" + e.q() + ")"
		case 1:
			return "attribute_not_exists(" + e.q() + ")"
		case 2:
			return "attribute_exists(" + e.w(r.IntN(len(waiters))) + ")"
		case 3:
			return "attribute_not_exists(" + e.w(r.IntN(len(waiters))) + ")"
		case 4:
			return "size(" + e.q() + ") = " + e.v(":zero", nv(0))
		case 5:
			return "size(" + e.q() + ") " + []string{">", "<", "<>", ">=", "<="}[r.IntN(5)] + " " + e.v(":n", nv(r.IntN(4)))
		case 6:
			return "attribute_not_exists(" + e.n("#pk", attrKey) + ")"
		case 7:
			return "attribute_exists(" + e.n("#r", "isReleased") + ")"
		case 8:
			return e.n("#o", "ownerName") + " = " + e.v(":o", sv(fmt.Sprintf("owner%d", r.IntN(2))))
		case 9:
			return e.n("#o", "ownerName") + " <> " + e.v(":o", sv(fmt.Sprintf("owner%d", r.IntN(2))))
		case 10:
			return e.w(r.IntN(len(waiters))) + ".#t < " + e.v(":t", nv(r.IntN(50))) + e.nt()
		default:
			return "size(" + e.w(r.IntN(len(waiters))) + ") = " + e.v(":two", nv(2))
		}
	}
	switch r.IntN(6) {
	case 0:
		return ""
	case 1:
		return atom()
	case 2:
		return "NOT " + atom()
	case 3:
		return atom() + " AND " + atom()
	case 4:
		return "(" + atom() + " OR " + atom() + ") AND (" + atom() + " OR " + atom() + ")"
	default:
		return "(attribute_not_exists(" + e.n("#pk", attrKey) + ") OR attribute_exists(" + e.n("#r", "isReleased") +
			")) AND (attribute_not_exists(" + e.q() + ") OR size(" + e.q() + ") = " + e.v(":zero", nv(0)) + ")"
	}
}

// nt registers #t, the ticket's name inside an entry.
func (e *expr) nt() string { e.n("#t", "t"); return "" }

// update is a random update expression of the fair mode's kind.
func (a *fairActor) update(e *expr) string {
	r := a.r
	var set, remove []string
	w := func() int { return r.IntN(len(waiters)) }
	switch r.IntN(8) {
	case 0, 1: // enqueue or re-beat one waiter
		i := w()
		if r.IntN(4) == 0 {
			set = append(set, e.w(i)+" = if_not_exists("+e.w(i)+", "+e.v(":e", entry(r))+")")
		} else {
			set = append(set, e.w(i)+" = "+e.v(":e", entry(r)))
		}
	case 2: // two waiters at once
		i, j := w(), w()
		set = append(set, e.w(i)+" = "+e.v(":e", entry(r)), e.w(j)+" = "+e.v(":f", entry(r)))
	case 3: // the whole queue
		set = append(set, e.q()+" = "+e.v(":m", queue(r)))
	case 4, 5: // dequeue some (the same one twice now and then)
		for range 1 + r.IntN(3) {
			remove = append(remove, e.w(w()))
		}
	case 6: // the queue goes
		remove = append(remove, e.q())
	default: // a write that overlaps (rejected) or a member of a member
		if r.IntN(2) == 0 {
			set = append(set, e.q()+" = "+e.v(":m", queue(r)))
			remove = append(remove, e.w(w()))
		} else {
			set = append(set, e.w(w())+".#t = "+e.v(":t", nv(r.IntN(50)))+e.nt())
		}
	}
	// The lock's own attributes beside it.
	if r.IntN(2) == 0 {
		set = append(set, e.n("#o", "ownerName")+" = "+e.v(":o", sv(fmt.Sprintf("owner%d", r.IntN(2)))))
	}
	if r.IntN(3) == 0 {
		set = append(set, e.n("#c", "ticket")+" = if_not_exists("+e.n("#c", "ticket")+", "+e.v(":zero", nv(0))+") + "+e.v(":one", nv(1)))
	}
	if r.IntN(4) == 0 {
		remove = append(remove, e.n("#r", "isReleased"))
	} else if r.IntN(4) == 0 {
		set = append(set, e.n("#r", "isReleased")+" = "+e.v(":true", sv("1")))
	}
	r.Shuffle(len(set), func(i, j int) { set[i], set[j] = set[j], set[i] })
	var parts []string
	if len(set) > 0 {
		parts = append(parts, "SET "+strings.Join(set, ", "))
	}
	if len(remove) > 0 {
		parts = append(parts, "REMOVE "+strings.Join(remove, ", "))
	}
	if r.IntN(2) == 0 {
		parts[0], parts[len(parts)-1] = parts[len(parts)-1], parts[0]
	}
	return strings.Join(parts, " ")
}

func (a *fairActor) step(ctx context.Context) {
	r := a.r
	key := map[string]types.AttributeValue{attrKey: sv(fairKeys[r.IntN(len(fairKeys))])}
	rvOnFail := types.ReturnValuesOnConditionCheckFailure("")
	if r.IntN(2) == 0 {
		rvOnFail = types.ReturnValuesOnConditionCheckFailureAllOld
	}
	switch n := r.IntN(20); {
	case n < 11:
		e := newExpr()
		ue := a.update(e)
		ce := a.cond(e)
		in := &dynamodb.UpdateItemInput{TableName: aws.String(a.table), Key: key, UpdateExpression: aws.String(ue),
			ReturnValues:                        []types.ReturnValue{"", types.ReturnValueNone, types.ReturnValueAllOld, types.ReturnValueAllNew, types.ReturnValueUpdatedOld, types.ReturnValueUpdatedNew}[r.IntN(6)],
			ReturnValuesOnConditionCheckFailure: rvOnFail}
		if ce != "" {
			in.ConditionExpression = aws.String(ce)
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		_, _ = a.d.UpdateItem(ctx, in)
	case n < 13: // a whole item: with a queue, without, or with a queue that is no map
		it := map[string]types.AttributeValue{attrKey: key[attrKey], "ownerName": sv(fmt.Sprintf("owner%d", r.IntN(2)))}
		switch r.IntN(4) {
		case 0, 1:
			it[attrQueue] = queue(r)
		case 2:
			it[attrQueue] = sv("not a map")
		}
		e := newExpr()
		in := &dynamodb.PutItemInput{TableName: aws.String(a.table), Item: it, ReturnValues: []types.ReturnValue{types.ReturnValueNone, types.ReturnValueAllOld}[r.IntN(2)],
			ReturnValuesOnConditionCheckFailure: rvOnFail}
		if ce := a.cond(e); ce != "" {
			in.ConditionExpression = aws.String(ce)
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		_, _ = a.d.PutItem(ctx, in)
	case n < 14:
		e := newExpr()
		in := &dynamodb.DeleteItemInput{TableName: aws.String(a.table), Key: key, ReturnValues: types.ReturnValueAllOld, ReturnValuesOnConditionCheckFailure: rvOnFail}
		if ce := a.cond(e); ce != "" {
			in.ConditionExpression = aws.String(ce)
		}
		in.ExpressionAttributeNames, in.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
		_, _ = a.d.DeleteItem(ctx, in)
	case n < 17: // a transaction: an update of each fair item, or one and a check
		var items []types.TransactWriteItem
		for i, k := range fairKeys {
			e := newExpr()
			key := map[string]types.AttributeValue{attrKey: sv(k)}
			if i == 1 && r.IntN(2) == 0 {
				ce := a.cond(e)
				if ce == "" {
					ce = "attribute_exists(" + e.q() + ")"
				}
				items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(a.table), Key: key,
					ConditionExpression: aws.String(ce), ExpressionAttributeNames: e.namesOrNil(), ExpressionAttributeValues: e.valuesOrNil(),
					ReturnValuesOnConditionCheckFailure: rvOnFail}})
				continue
			}
			u := &types.Update{TableName: aws.String(a.table), Key: key, UpdateExpression: aws.String(a.update(e)), ReturnValuesOnConditionCheckFailure: rvOnFail}
			if ce := a.cond(e); ce != "" {
				u.ConditionExpression = aws.String(ce)
			}
			u.ExpressionAttributeNames, u.ExpressionAttributeValues = e.namesOrNil(), e.valuesOrNil()
			items = append(items, types.TransactWriteItem{Update: u})
		}
		r.Shuffle(len(items), func(i, j int) { items[i], items[j] = items[j], items[i] })
		_, _ = a.d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	default:
		_, _ = a.d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.table), Key: key, ConsistentRead: aws.Bool(true)})
	}
}

// fairShapes sends, in order, the cases of the fair mode whose answers
// DynamoDB Local had to settle: a member written under a missing parent,
// a parent that is no map, an item that does not exist, with a condition
// that fails as well (the condition is evaluated first); removals of
// missing members and under missing parents; overlapping paths in every
// order; size() of missing, non-map and unsizable attributes and of
// values; <> with missing sides; ReturnValues UPDATED_* on members;
// transactions whose members fail in different ways; items over 400 KB.
// The tee compares every answer and message.
func fairShapes(ctx context.Context, d *tee, table string) {
	key := func(k string) map[string]types.AttributeValue { return map[string]types.AttributeValue{attrKey: sv(k)} }
	vals := func(kv ...any) map[string]types.AttributeValue {
		out := map[string]types.AttributeValue{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1].(types.AttributeValue)
		}
		return out
	}
	m := func(kv ...any) types.AttributeValue { return &types.AttributeValueMemberM{Value: vals(kv...)} }
	ent := func(t int, b string) types.AttributeValue { return m("t", nv(t), "b", sv(b)) }
	put := func(k string, attrs ...any) {
		it := key(k)
		for i := 0; i < len(attrs); i += 2 {
			it[attrs[i].(string)] = attrs[i+1].(types.AttributeValue)
		}
		_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: it})
	}
	names := map[string]string{"#q": attrQueue, "#w": "a-b/c.d#e", "#w1": "w1", "#x": "x", "#o": "ownerName", "#o2": "other",
		"#pk": attrKey, "#r": "isReleased", "#t": "t", "#a": "a"}
	// upd sends an update; the names it uses are picked from names by the
	// placeholders that occur in the expressions.
	upd := func(k, ue, ce string, vals map[string]types.AttributeValue, rv types.ReturnValue) {
		in := &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key(k), UpdateExpression: aws.String(ue),
			ExpressionAttributeNames: usedNames(names, ue+" "+ce), ExpressionAttributeValues: vals, ReturnValues: rv,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld}
		if ce != "" {
			in.ConditionExpression = aws.String(ce)
		}
		_, _ = d.UpdateItem(ctx, in)
	}
	e := vals(":e", ent(1, "n1"))
	z := vals(":zero", nv(0))

	put("f1", attrQueue, m())
	upd("f1", "SET #q.#w = :e", "", e, types.ReturnValueAllNew)
	put("f2", "x", sv("1"))
	upd("f2", "SET #q.#w = :e", "", e, "")                         // parent missing: invalid path
	upd("f3", "SET #q.#w = :e", "", e, "")                         // no item: invalid path
	upd("f2", "SET #q.#w = :e", "attribute_not_exists(#x)", e, "") // condition false first: condition failure
	upd("f3", "SET #q.#w = :e", "attribute_exists(#pk)", e, "")
	upd("f3", "SET #q.#w = :e", "attribute_not_exists(#pk)", e, "") // condition true: invalid path
	put("f6", attrQueue, sv("str"))
	upd("f6", "SET #q.#w = :e", "", e, "") // parent not a map
	put("f7", attrQueue, m("w1", ent(1, "n1")))
	upd("f7", "REMOVE #q.#w", "", nil, types.ReturnValueUpdatedOld) // missing member: nothing
	upd("f7", "REMOVE #q.#w1", "", nil, types.ReturnValueUpdatedOld)
	put("f7", attrQueue, m("w1", ent(1, "n1")))
	upd("f7", "REMOVE #q.#w1", "", nil, types.ReturnValueUpdatedNew)
	upd("f2", "REMOVE #q.#w1", "", nil, types.ReturnValueAllNew) // parent missing: invalid path
	upd("f3", "REMOVE #q.#w1", "", nil, types.ReturnValueAllNew)
	upd("f6", "REMOVE #q.#w1", "", nil, types.ReturnValueAllNew)
	upd("f7", "ADD #q.#w1 :one", "", vals(":one", nv(1)), "")
	upd("f2", "ADD #q.#w1 :one", "", vals(":one", nv(1)), "")
	// Overlapping paths, in every order; before the condition and unused values.
	upd("f7", "REMOVE #q.#w1, #q.#w1", "", nil, "")
	upd("f7", "SET #q = :m REMOVE #q.#w1", "", vals(":m", m()), "")
	upd("f7", "REMOVE #q.#w1 SET #q = :m", "", vals(":m", m()), "")
	upd("f7", "SET #q.#w = :e, #q = :m", "", vals(":m", m(), ":e", ent(1, "n1")), "")
	upd("f7", "REMOVE #q.#w1, #q", "", nil, "")
	upd("f7", "REMOVE #q SET #q.#w = :e", "", vals(":e", ent(1, "n1"), ":unused", nv(1)), "")
	upd("f7", "REMOVE #q, #q", "attribute_not_exists(#x)", nil, "")
	upd("f7", "SET #x = :a, #x = :b", "", vals(":a", nv(0), ":b", nv(1)), "")
	upd("f2", "SET #q.#w = :e", "", vals(":e", ent(1, "n1"), ":unused", nv(1)), "") // unused before invalid path
	// ReturnValues UPDATED_*: whole top-level attributes, for paths that resolve.
	put("f9", attrQueue, m("w1", ent(1, "n1")), "x", sv("1"))
	upd("f9", "SET #q.#w1 = :e", "", vals(":e", ent(2, "n2")), types.ReturnValueUpdatedOld)
	upd("f9", "SET #q.#w = :e", "", e, types.ReturnValueUpdatedNew)
	upd("f9", "SET #x = :v", "", vals(":v", sv("1")), types.ReturnValueUpdatedNew) // unchanged, still returned
	upd("f9", "SET #q.#w = :e", "", e, types.ReturnValueUpdatedOld)
	upd("f9", "REMOVE #o", "", nil, types.ReturnValueUpdatedOld)
	upd("f9", "SET #x = :v REMOVE #q.#w1, #o", "", vals(":v", sv("2")), types.ReturnValueUpdatedOld)
	upd("f9", "SET #q.#w1 = :e REMOVE #q.#w", "", e, types.ReturnValueUpdatedOld)
	upd("f9", "SET #q.#w1.#t = :zero", "", z, types.ReturnValueUpdatedNew)
	upd("f9", "SET #q.#w.#t = :zero", "", z, types.ReturnValueUpdatedNew) // into a missing member: invalid
	upd("f9", "SET #x = #q.#w", "", nil, types.ReturnValueUpdatedNew)     // a missing member on the right
	upd("f9", "SET #q.#w = if_not_exists(#q.#w, :e)", "", e, types.ReturnValueUpdatedNew)
	upd("f2", "SET #q = :m, #x = :zero REMOVE #o", "", vals(":m", m("w1", ent(1, "n1")), ":zero", nv(0)), types.ReturnValueUpdatedNew)
	upd("f2", "SET #x = :zero REMOVE #q", "", z, types.ReturnValueUpdatedNew)
	upd("f9", "SET #pk.#w = :e", "", e, "") // a member of the key
	// size() and <>.
	put("f2", "x", sv("1"))
	for _, c := range []string{"size(#q) = :zero", "NOT size(#q) = :zero", "size(#q) <> :zero", "size(#q) < :zero", "size(#q) >= :zero",
		"NOT (size(#q) > :zero)", "size(#q) IN (:zero)", "size(#q) BETWEEN :zero AND :zero", "#o <> :zero", "#o < :zero", "#o <> #o2",
		":zero <> #o", "NOT #o = :zero", "size(#o) <> size(#o2)", "#o IN (#o2, :zero)", "attribute_not_exists(#q.#w)", "attribute_exists(#q.#w)",
		"(attribute_not_exists(#pk) OR attribute_exists(#r)) AND (attribute_not_exists(#q) OR size(#q) = :zero)"} {
		upd("f2", "SET #a = :zero", c, z, "")
		upd("f9", "SET #a = :zero", c, z, "")
		upd("f6", "SET #a = :zero", c, z, "")
		upd("f0", "REMOVE #a", strings.ReplaceAll(c, ":zero", "#x"), nil, "")
	}
	put("s1", "x", sv("\U0001F600é"), "b", &types.AttributeValueMemberB{Value: []byte{1, 2, 3}},
		"l", &types.AttributeValueMemberL{Value: []types.AttributeValue{nv(1), nv(2)}}, "ss", &types.AttributeValueMemberSS{Value: []string{"a", "b", "c", "d"}},
		"bo", &types.AttributeValueMemberBOOL{Value: true}, "nu", &types.AttributeValueMemberNULL{Value: true}, "n", nv(12), attrQueue, m("w1", ent(1, "n1")))
	for _, a := range []string{"x", "b", "l", "ss", "bo", "nu", "n", attrQueue} {
		for n := range 5 {
			_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("s1"), UpdateExpression: aws.String("SET #a = #a"),
				ConditionExpression: aws.String("size(#a) = :n"), ExpressionAttributeNames: map[string]string{"#a": a}, ExpressionAttributeValues: vals(":n", nv(n))})
		}
	}
	upd("f9", "SET #a = :zero", "size(:zero) = :zero", z, "")
	upd("f9", "SET #a = :s", "size(:s) = :three", vals(":s", sv("abc"), ":three", nv(3)), "")
	upd("f9", "SET #a = :zero", "size(#q)", z, "")
	upd("f9", "SET #a = :zero", "size(#q) = :s", vals(":zero", nv(0), ":s", sv("1")), "")
	// Transactions: an update that cannot be applied fails the request even
	// when another member's condition fails; a failing condition of its own
	// comes first; an item over 400 KB is a cancellation reason.
	bad := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(table), Key: key("f2"), UpdateExpression: aws.String("SET #q.#w = :e"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueue, "#w": "w"}, ExpressionAttributeValues: e}}
	badCondFalse := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(table), Key: key("f2"), UpdateExpression: aws.String("SET #q.#w = :e"),
		ConditionExpression: aws.String("attribute_not_exists(#x)"), ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		ExpressionAttributeNames: map[string]string{"#q": attrQueue, "#w": "w", "#x": "x"}, ExpressionAttributeValues: e}}
	ccFail := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("f9"),
		ConditionExpression: aws.String("attribute_not_exists(#x)"), ExpressionAttributeNames: map[string]string{"#x": "x"}}}
	ccOK := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("f9"),
		ConditionExpression: aws.String("attribute_exists(#x)"), ExpressionAttributeNames: map[string]string{"#x": "x"}}}
	arith := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(table), Key: key("f6"), UpdateExpression: aws.String("SET #c = #c + :one"),
		ExpressionAttributeNames: map[string]string{"#c": "counter"}, ExpressionAttributeValues: vals(":one", nv(1))}}
	big := strings.Repeat("a", 409000)
	put("z", attrQueue, m("w", ent(1, big)))
	bigUp := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(table), Key: key("z"), UpdateExpression: aws.String("SET #q.#w = :e"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueue, "#w": "w1"}, ExpressionAttributeValues: vals(":e", ent(1, strings.Repeat("b", 5000)))}}
	for _, items := range [][]types.TransactWriteItem{{bad}, {ccOK, bad}, {bad, ccFail}, {ccFail, bad}, {badCondFalse}, {badCondFalse, ccOK},
		{ccFail, arith}, {arith, ccFail}, {ccFail, bigUp}, {bigUp}, {bigUp, bad}, {bad, arith}} {
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
	}
	// Item size: a map's overhead, counted to the byte at the limit.
	for _, n := range []int{409572, 409573, 409574} {
		put("z", attrQueue, m("w", m("t", nv(1), "b", sv(strings.Repeat("a", n)))))
	}
	for _, n := range []int{409547, 409548, 409549} {
		put("z", attrQueue, m("w", m("t", nv(1), "b", sv(strings.Repeat("a", n))), "w2", m("t", nv(12345), "b", sv("nonce")), "w3", m()))
	}
	put("z", attrQueue, m("w", ent(1, big)))
	upd("z", "SET #q.#w1 = :e", "", vals(":e", ent(1, strings.Repeat("b", 5000))), "")
	// An empty waiter id cannot be named.
	_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("f1"), UpdateExpression: aws.String("SET #q.#e = :e"),
		ExpressionAttributeNames: map[string]string{"#q": attrQueue, "#e": ""}, ExpressionAttributeValues: e})
	// GetItem, PutItem replacing the map, DeleteItem returning it.
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("f9"), ConsistentRead: aws.Bool(true)})
	_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{attrKey: sv("f9"), attrQueue: m("x", ent(3, "n3"))},
		ReturnValues: types.ReturnValueAllOld})
	_, _ = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("f7"), ReturnValues: types.ReturnValueAllOld,
		ConditionExpression: aws.String("size(#q) > :zero"), ExpressionAttributeNames: map[string]string{"#q": attrQueue}, ExpressionAttributeValues: z,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	_, _ = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("f1"), ReturnValues: types.ReturnValueAllOld,
		ConditionExpression: aws.String("attribute_exists(#q.#w)"), ExpressionAttributeNames: map[string]string{"#q": attrQueue, "#w": "a-b/c.d#e"}})
	// The item left over 400 KB would make the final comparison print it whole.
	_, _ = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("z")})
}

// usedNames picks from names the placeholders that occur in s.
func usedNames(names map[string]string, s string) map[string]string {
	out := map[string]string{}
	for ph, n := range names {
		for i := 0; ; {
			j := strings.Index(s[i:], ph)
			if j < 0 {
				break
			}
			end := i + j + len(ph)
			if end == len(s) || !isNameChar(s[end]) {
				out[ph] = n
				break
			}
			i = end
		}
	}
	return out
}

func isNameChar(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
