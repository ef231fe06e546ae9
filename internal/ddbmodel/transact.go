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
// when the member asked for ALL_OLD). A ClientRequestToken already
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
	if n := len(in.TransactItems); n == 0 || n > 100 {
		return nil, validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
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
		if set != 1 {
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
	reasons := make([]types.CancellationReason, len(ws))
	failed := false
	for i, w := range ws {
		ok, err := w.check()
		if err != nil {
			return nil, err
		}
		reasons[i].Code = aws.String("None")
		if !ok {
			failed = true
			reasons[i].Code = aws.String("ConditionalCheckFailed")
			reasons[i].Message = aws.String("The conditional request failed")
			if rvs[i] == types.ReturnValuesOnConditionCheckFailureAllOld {
				reasons[i].Item = cloneItem(w.t.items[w.key])
			}
		}
	}
	if failed {
		codes := make([]string, len(reasons))
		for i, r := range reasons {
			codes[i] = aws.ToString(r.Code)
		}
		for _, w := range ws {
			old := w.t.items[w.key]
			*ch = append(*ch, Change{Table: w.t.name, Key: w.key, Before: old, After: old})
		}
		return nil, &types.TransactionCanceledException{
			Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
			CancellationReasons: reasons,
		}
	}
	// Compute every new item before changing any, so that a member that
	// fails validation leaves nothing applied.
	type staged struct {
		w    *write
		old  Item
		next Item
		keep bool
	}
	st := make([]staged, len(ws))
	for i, w := range ws {
		old := w.t.items[w.key]
		st[i] = staged{w: w, old: old, next: old, keep: old != nil}
		if w.next == nil {
			continue
		}
		n, keep, err := w.next(old)
		if err != nil {
			return nil, err
		}
		if keep {
			if n, err = checkItem(n); err != nil {
				return nil, err
			}
		}
		st[i].next, st[i].keep = n, keep
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
