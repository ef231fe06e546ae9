package ddbmodel

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
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

func (m *Model) prepare(tableName *string, key Item, condExpr *string, p exprParams) (*write, error) {
	if err := checkTableName(tableName); err != nil {
		return nil, err
	}
	values, err := p.check()
	if err != nil {
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
	w := &write{t: t, key: k, keyAttr: kattr, ph: newPlaceholders(p.names, values), tooLarge: msgTooLarge}
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
	n, tooLarge, err := normalizeItem(n, true)
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
	if err := checkTableName(in.TableName); err != nil {
		return nil, err
	}
	if in.ProjectionExpression != nil {
		return nil, errUnsupported("projections")
	}
	if err := checkReturnCapacity(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	if err := legacy(map[string]bool{"AttributesToGet": in.AttributesToGet != nil}); err != nil {
		return nil, err
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
	it := t.items[k]
	units := readUnits(itemBytes(it), aws.ToBool(in.ConsistentRead))
	m.charge(t.name, units, 0)
	return &dynamodb.GetItemOutput{Item: cloneItem(it), ConsumedCapacity: consumed(in.ReturnConsumedCapacity, t.name, units)}, nil
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
	if err := checkTableName(tableName); err != nil {
		return nil, err
	}
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
	w, err := m.prepare(tableName, key, condExpr, exprParams{names: names, values: values, hasExpr: condExpr != nil, absent: "ConditionExpression is null"})
	if err != nil {
		return nil, err
	}
	w.next = func(Item) (Item, bool, error) { return cloneItem(checked), true, nil }
	return w, w.ph.checkAllUsed()
}

func (m *Model) putItem(in *dynamodb.PutItemInput, ch *[]Change) (*dynamodb.PutItemOutput, error) {
	if err := checkWrite("PutItem", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity, map[string]bool{
		"Expected": in.Expected != nil, "ConditionalOperator": in.ConditionalOperator != ""}); err != nil {
		return nil, err
	}
	w, err := m.prepPut(in.TableName, in.Item, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	old, next, err := m.runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.PutItemOutput{ConsumedCapacity: consumed(in.ReturnConsumedCapacity, w.t.name, writeCost(w, old, next, false))}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = cloneItem(old)
	}
	return out, nil
}

// checkWrite validates what a single-item write has besides its item and
// expressions: its return values, and no legacy parameters.
func checkWrite(op string, rv types.ReturnValue, rvf types.ReturnValuesOnConditionCheckFailure, rc types.ReturnConsumedCapacity, legacyParams map[string]bool) error {
	if err := legacy(legacyParams); err != nil {
		return err
	}
	if err := checkReturnValues(op, rv); err != nil {
		return err
	}
	if err := checkReturnCapacity(rc); err != nil {
		return err
	}
	return checkReturnOnFailure("returnValuesOnConditionCheckFailure", rvf)
}

// runWrite applies a single-item write: refused while a transaction holds
// the item, else conditioned. A write whose condition fails is charged
// (capacity.go), one that applied too.
func (m *Model) runWrite(w *write, ch *[]Change, rv types.ReturnValuesOnConditionCheckFailure) (old, next Item, err error) {
	if m.inTx[heldKey(w)] != nil {
		return nil, nil, TransactionConflict()
	}
	old = w.t.items[w.key]
	ok, err := w.check()
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		m.charge(w.t.name, 0, writeCost(w, old, nil, true))
		*ch = append(*ch, Change{Table: w.t.name, Key: w.key, Before: old, After: old})
		return nil, nil, conditionFailed(old, rv)
	}
	next, err = w.commit(old)
	if err != nil {
		return nil, nil, err
	}
	m.charge(w.t.name, 0, writeCost(w, old, next, false))
	*ch = append(*ch, Change{Table: w.t.name, Key: w.key, Before: old, After: next})
	return old, next, nil
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
	w, err := m.prepare(tableName, key, condExpr, exprParams{names: names, values: values, hasExpr: condExpr != nil || updExpr != nil,
		absent: "UpdateExpression and ConditionExpression are null"})
	if err != nil {
		return nil, err
	}
	// Without an update expression the item is created with its key alone
	// if it is missing, and left as it is otherwise.
	u := &update{}
	if updExpr != nil {
		if u, err = parseUpdate(*updExpr, w.ph); err != nil {
			return nil, err
		}
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
	if err := checkWrite("UpdateItem", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity, map[string]bool{
		"Expected": in.Expected != nil, "AttributeUpdates": in.AttributeUpdates != nil, "ConditionalOperator": in.ConditionalOperator != ""}); err != nil {
		return nil, err
	}
	w, err := m.prepUpdate(in.TableName, in.Key, in.UpdateExpression, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	old, next, err := m.runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.UpdateItemOutput{ConsumedCapacity: consumed(in.ReturnConsumedCapacity, w.t.name, writeCost(w, old, next, false))}
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
	return out, nil
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
	w, err := m.prepare(tableName, key, condExpr, exprParams{names: names, values: values, hasExpr: condExpr != nil, absent: "ConditionExpression is null"})
	if err != nil {
		return nil, err
	}
	w.next = func(Item) (Item, bool, error) { return nil, false, nil }
	return w, w.ph.checkAllUsed()
}

func (m *Model) deleteItem(in *dynamodb.DeleteItemInput, ch *[]Change) (*dynamodb.DeleteItemOutput, error) {
	if err := checkWrite("DeleteItem", in.ReturnValues, in.ReturnValuesOnConditionCheckFailure, in.ReturnConsumedCapacity, map[string]bool{
		"Expected": in.Expected != nil, "ConditionalOperator": in.ConditionalOperator != ""}); err != nil {
		return nil, err
	}
	w, err := m.prepDelete(in.TableName, in.Key, in.ConditionExpression, in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	if err != nil {
		return nil, err
	}
	old, next, err := m.runWrite(w, ch, in.ReturnValuesOnConditionCheckFailure)
	if err != nil {
		return nil, err
	}
	out := &dynamodb.DeleteItemOutput{ConsumedCapacity: consumed(in.ReturnConsumedCapacity, w.t.name, writeCost(w, old, next, false))}
	if in.ReturnValues == types.ReturnValueAllOld {
		out.Attributes = cloneItem(old)
	}
	return out, nil
}

// ---- transactions ----
