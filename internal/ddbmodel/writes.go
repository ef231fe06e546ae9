package ddbmodel

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// write is one conditional single-item write, shared by the four item
// operations and the transaction members.
type write struct {
	t       *table
	key     string
	keyAttr Item
	cond    cond
	ph      *placeholders
	// next computes the new item from the old one (nil: absent); nil next
	// is a ConditionCheck.
	next func(old Item) (Item, bool, error)
	// upd is an UpdateItem's update expression, for its ReturnValues.
	upd *update
	// tooLarge is the message for an item next makes larger than 400 KB.
	tooLarge string
}

func (m *Model) prepare(tableName *string, key Item, condExpr *string, names map[string]string,
	values map[string]types.AttributeValue) (*write, error) {
	if err := checkNames(names); err != nil {
		return nil, err
	}
	t, err := m.table(tableName)
	if err != nil {
		return nil, err
	}
	k, kattr, err := t.key(key)
	if err != nil {
		return nil, err
	}
	if len(values) > 0 {
		if values, err = checkItem(values); err != nil {
			return nil, err
		}
	}
	w := &write{t: t, key: k, keyAttr: kattr, ph: newPlaceholders(names, values), tooLarge: msgTooLarge}
	if condExpr != nil {
		if w.cond, err = parseCondition(*condExpr, w.ph); err != nil {
			return nil, err
		}
	}
	return w, nil
}

// check evaluates the condition against the stored item.
func (w *write) check() (bool, error) {
	if w.cond == nil {
		return true, nil
	}
	return w.cond.eval(w.t.items[w.key])
}

func (w *write) commit(old Item) (Item, error) {
	if w.next == nil {
		return old, nil
	}
	n, keep, err := w.next(old)
	if err != nil {
		return nil, err
	}
	if !keep {
		delete(w.t.items, w.key)
		return nil, nil
	}
	n, tooLarge, err := normalizeItem(n)
	if err != nil {
		return nil, err
	}
	if tooLarge {
		return nil, validation("%s", w.tooLarge)
	}
	w.t.items[w.key] = n
	return n, nil
}

// GetItem reads one item; every read is strongly consistent.
func (m *Model) GetItem(ctx context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.getItem(in)
	m.done(ctx, "GetItem", in, err, nil)
	return out, err
}

func (m *Model) getItem(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
	if in.ProjectionExpression != nil || len(in.AttributesToGet) > 0 {
		return nil, errUnsupported("projections")
	}
	if len(in.ExpressionAttributeNames) > 0 {
		return nil, validation("ExpressionAttributeNames can only be specified when using expressions")
	}
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	k, _, err := t.key(in.Key)
	if err != nil {
		return nil, err
	}
	return &dynamodb.GetItemOutput{Item: cloneItem(t.items[k])}, nil
}

// PutItem writes a whole item, optionally conditioned.
func (m *Model) PutItem(ctx context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ch []Change
	out, err := m.putItem(in, &ch)
	m.done(ctx, "PutItem", in, err, ch)
	return out, err
}

func (m *Model) prepPut(tableName *string, item Item, condExpr *string, names map[string]string, values map[string]types.AttributeValue) (*write, error) {
	t, err := m.table(tableName)
	if err != nil {
		return nil, err
	}
	key := Item{t.pk: item[t.pk]}
	if t.sk != "" {
		key[t.sk] = item[t.sk]
	}
	if item[t.pk] == nil || (t.sk != "" && item[t.sk] == nil) {
		return nil, validation("One or more parameter values were invalid: Missing the key %s in the item", t.pk)
	}
	checked, err := checkItem(item)
	if err != nil {
		return nil, err
	}
	w, err := m.prepare(tableName, key, condExpr, names, values)
	if err != nil {
		return nil, err
	}
	w.next = func(Item) (Item, bool, error) { return cloneItem(checked), true, nil }
	return w, w.ph.checkAllUsed()
}

func (m *Model) putItem(in *dynamodb.PutItemInput, ch *[]Change) (*dynamodb.PutItemOutput, error) {
	if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
		return nil, validation("ReturnValues can only be ALL_OLD or NONE")
	}
	w, err := m.prepPut(in.TableName, in.Item, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	return runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure, func(old, _ Item) *dynamodb.PutItemOutput {
		out := &dynamodb.PutItemOutput{}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
		}
		return out
	})
}

func runWrite[O any](w *write, ch *[]Change, rv types.ReturnValuesOnConditionCheckFailure, out func(old, next Item) *O) (*O, error) {
	old := w.t.items[w.key]
	ok, err := w.check()
	if err != nil {
		return nil, err
	}
	if !ok {
		*ch = append(*ch, Change{Table: w.t.name, Key: w.key, Before: old, After: old})
		return nil, conditionFailed(old, rv)
	}
	next, err := w.commit(old)
	if err != nil {
		return nil, err
	}
	*ch = append(*ch, Change{Table: w.t.name, Key: w.key, Before: old, After: next})
	return out(old, next), nil
}

// UpdateItem updates (or creates) one item, optionally conditioned.
func (m *Model) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ch []Change
	out, err := m.updateItem(in, &ch)
	m.done(ctx, "UpdateItem", in, err, ch)
	return out, err
}

func (m *Model) prepUpdate(tableName *string, key Item, updExpr, condExpr *string, names map[string]string, values map[string]types.AttributeValue) (*write, error) {
	w, err := m.prepare(tableName, key, condExpr, names, values)
	if err != nil {
		return nil, err
	}
	if updExpr == nil {
		return nil, errUnsupported("UpdateItem without an UpdateExpression")
	}
	u, err := parseUpdate(*updExpr, w.ph)
	if err != nil {
		return nil, err
	}
	if err := w.ph.checkAllUsed(); err != nil {
		return nil, err
	}
	keyNames := w.t.keyNames()
	w.upd, w.tooLarge = u, msgUpdateTooLarge
	w.next = func(old Item) (Item, bool, error) {
		base := old
		if base == nil {
			base = w.keyAttr
		}
		n, err := u.apply(base, keyNames)
		return n, err == nil, err
	}
	return w, nil
}

func (m *Model) updateItem(in *dynamodb.UpdateItemInput, ch *[]Change) (*dynamodb.UpdateItemOutput, error) {
	w, err := m.prepUpdate(in.TableName, in.Key, in.UpdateExpression, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	return runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure, func(old, next Item) *dynamodb.UpdateItemOutput {
		out := &dynamodb.UpdateItemOutput{}
		switch in.ReturnValues {
		case types.ReturnValueAllNew:
			out.Attributes = cloneItem(next)
		case types.ReturnValueAllOld:
			out.Attributes = cloneItem(old)
		case types.ReturnValueUpdatedNew:
			out.Attributes = w.upd.updated(next)
		case types.ReturnValueUpdatedOld:
			out.Attributes = w.upd.updated(old)
		}
		return out
	})
}

// DeleteItem deletes one item, optionally conditioned.
func (m *Model) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var ch []Change
	out, err := m.deleteItem(in, &ch)
	m.done(ctx, "DeleteItem", in, err, ch)
	return out, err
}

func (m *Model) prepDelete(tableName *string, key Item, condExpr *string, names map[string]string, values map[string]types.AttributeValue) (*write, error) {
	w, err := m.prepare(tableName, key, condExpr, names, values)
	if err != nil {
		return nil, err
	}
	w.next = func(Item) (Item, bool, error) { return nil, false, nil }
	return w, w.ph.checkAllUsed()
}

func (m *Model) deleteItem(in *dynamodb.DeleteItemInput, ch *[]Change) (*dynamodb.DeleteItemOutput, error) {
	if in.ReturnValues != "" && in.ReturnValues != types.ReturnValueNone && in.ReturnValues != types.ReturnValueAllOld {
		return nil, validation("ReturnValues can only be ALL_OLD or NONE")
	}
	w, err := m.prepDelete(in.TableName, in.Key, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	return runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure, func(old, _ Item) *dynamodb.DeleteItemOutput {
		out := &dynamodb.DeleteItemOutput{}
		if in.ReturnValues == types.ReturnValueAllOld {
			out.Attributes = cloneItem(old)
		}
		return out
	})
}

// ---- transactions ----
