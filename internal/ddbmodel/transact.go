package ddbmodel

import (
	"context"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TransactWriteItems applies all its members or none: when a condition
// fails it returns a *types.TransactionCanceledException with one reason
// per member, in order ("None" or "ConditionalCheckFailed", with the item
// when the member asked for ALL_OLD, or "ValidationError" for an item an
// update would make larger than 400 KB). A ClientRequestToken already
// committed makes the call succeed without applying anything again.
func (m *Model) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ch []Change
	out, err := m.transact(in, &ch)
	m.done(ctx, "TransactWriteItems", in, err, ch)
	return out, err
}

func (m *Model) transact(in *dynamodb.TransactWriteItemsInput, ch *[]Change) (*dynamodb.TransactWriteItemsOutput, error) {
	tok := aws.ToString(in.ClientRequestToken)
	if tok != "" && m.idempotency[tok] {
		return &dynamodb.TransactWriteItemsOutput{}, nil
	}
	if n := len(in.TransactItems); n > maxTransactItems {
		return nil, validation("Member must have length less than or equal to %d", maxTransactItems)
	}
	if n := len(in.TransactItems); n == 0 {
		return nil, validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	if n := payloadSize(in.TransactItems); n > maxTransactSize {
		return nil, validation("Transaction payload size cannot exceed 4MB. Payload Size: %d", n)
	}
	ws := make([]*write, len(in.TransactItems))
	rvs := make([]types.ReturnValuesOnConditionCheckFailure, len(in.TransactItems))
	seen := map[string]bool{}
	for i, ti := range in.TransactItems {
		var w *write
		var err error
		set := 0
		if c := ti.ConditionCheck; c != nil {
			set++
			if c.ConditionExpression == nil {
				return nil, validation("ConditionExpression must be specified for a ConditionCheck")
			}
			w, err = m.prepare(c.TableName, c.Key, c.ConditionExpression, c.ExpressionAttributeNames, c.ExpressionAttributeValues)
			if err == nil {
				err = w.ph.checkAllUsed()
			}
			rvs[i] = c.ReturnValuesOnConditionCheckFailure
		}
		if p := ti.Put; p != nil {
			set++
			w, err = m.prepPut(p.TableName, p.Item, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues)
			rvs[i] = p.ReturnValuesOnConditionCheckFailure
		}
		if u := ti.Update; u != nil {
			set++
			w, err = m.prepUpdate(u.TableName, u.Key, u.UpdateExpression, u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
			rvs[i] = u.ReturnValuesOnConditionCheckFailure
		}
		if d := ti.Delete; d != nil {
			set++
			w, err = m.prepDelete(d.TableName, d.Key, d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues)
			rvs[i] = d.ReturnValuesOnConditionCheckFailure
		}
		if set == 0 {
			return nil, validation("Invalid Request: TransactWriteRequest should contain Delete or Put or Update request")
		}
		if set > 1 {
			return nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err != nil {
			return nil, err
		}
		id := w.t.name + "\x00" + w.key
		if seen[id] {
			return nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		ws[i] = w
	}
	// Every member's condition is evaluated, and the new item of each member
	// whose condition holds is computed, before anything changes. As in
	// DynamoDB Local, an update that cannot be applied (an invalid document
	// path, arithmetic on a missing attribute) fails the whole request with
	// its ValidationException even when another member's condition fails;
	// an item over 400 KB is a cancellation reason ("ValidationError").
	type staged struct {
		w    *write
		old  Item
		next Item
		keep bool
	}
	st := make([]staged, len(ws))
	reasons := make([]types.CancellationReason, len(ws))
	failed := false
	for i, w := range ws {
		old := w.t.items[w.key]
		st[i] = staged{w: w, old: old, next: old, keep: old != nil}
		reasons[i].Code = aws.String("None")
		ok, err := w.check()
		if err != nil {
			return nil, err
		}
		if !ok {
			failed = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
			reasons[i].Message = aws.String("The conditional request failed")
			if rvs[i] == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = cloneItem(old)
			}
			continue
		}
		if w.next == nil {
			continue
		}
		n, keep, err := w.next(old)
		if err != nil {
			return nil, err
		}
		if keep {
			var tooLarge bool
			if n, tooLarge, err = normalizeItem(n); err != nil {
				return nil, err
			}
			if tooLarge {
				failed = true
				reasons[i].Code = aws.String("ValidationError")
				reasons[i].Message = aws.String(w.tooLarge)
				continue
			}
		}
		st[i].next, st[i].keep = n, keep
	}
	if failed {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		for _, s := range st {
			*ch = append(*ch, Change{Table: s.w.t.name, Key: s.w.key, Before: s.old, After: s.old})
		}
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	for _, s := range st {
		if s.keep {
			s.w.t.items[s.w.key] = s.next
		} else {
			delete(s.w.t.items, s.w.key)
			s.next = nil
		}
		*ch = append(*ch, Change{Table: s.w.t.name, Key: s.w.key, Before: s.old, After: s.next})
	}
	if tok != "" {
		m.idempotency[tok] = true
	}
	return &dynamodb.TransactWriteItemsOutput{}, nil
}

// ---- listing ----

// payloadSize is a transaction's size as DynamoDB Local 3.3.1 counts it
// against the 4 MB limit (TestLimits checks it to the byte): for each
// member, its item (Put) or key (the others) sized as an item, plus every
// expression's length, plus, for each placeholder an expression uses, the
// attribute name it stands for or the size of its value.
func payloadSize(items []types.TransactWriteItem) int {
	n := 0
	expr := func(e *string, names map[string]string, values map[string]types.AttributeValue) {
		if e == nil {
			return
		}
		n += len(*e)
		toks, err := lex(*e)
		if err != nil {
			return
		}
		for _, t := range toks {
			switch t.kind {
			case tName:
				n += len(names[t.text])
			case tValue:
				if v, ok := values[t.text]; ok {
					n += valueSize(v)
				}
			}
		}
	}
	item := func(it Item) {
		for k, v := range it {
			n += len(k) + valueSize(v)
		}
	}
	for _, ti := range items {
		switch {
		case ti.Put != nil:
			item(ti.Put.Item)
			expr(ti.Put.ConditionExpression, ti.Put.ExpressionAttributeNames, ti.Put.ExpressionAttributeValues)
		case ti.Update != nil:
			item(ti.Update.Key)
			expr(ti.Update.UpdateExpression, ti.Update.ExpressionAttributeNames, ti.Update.ExpressionAttributeValues)
			expr(ti.Update.ConditionExpression, ti.Update.ExpressionAttributeNames, ti.Update.ExpressionAttributeValues)
		case ti.Delete != nil:
			item(ti.Delete.Key)
			expr(ti.Delete.ConditionExpression, ti.Delete.ExpressionAttributeNames, ti.Delete.ExpressionAttributeValues)
		case ti.ConditionCheck != nil:
			item(ti.ConditionCheck.Key)
			expr(ti.ConditionCheck.ConditionExpression, ti.ConditionCheck.ExpressionAttributeNames, ti.ConditionCheck.ExpressionAttributeValues)
		}
	}
	return n
}
