// Package ddbmodel is an in-memory, linearizable model of the part of
// Amazon DynamoDB that the lock library uses: CreateTable, DescribeTable,
// GetItem, PutItem, UpdateItem, DeleteItem, TransactWriteItems, Query and
// Scan, with the condition and update expressions the library sends. Every
// request takes effect at one instant, under one mutex, and a hook sees
// each one (with the items before and after) while that mutex is held, so a
// checker can compare the model with what clients believe at that instant.
//
// It is a test double for the deterministic simulation (internal/sim) and
// is checked against DynamoDB Local by a differential test in this package.
// It does not model capacity, item-size accounting beyond the 400 KB limit,
// TTL deletion, secondary indexes, streams, or nested attribute paths.
package ddbmodel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Item is a DynamoDB item.
type Item = map[string]types.AttributeValue

// Change is one item as an operation found it and left it; a nil Before or
// After means the item did not exist. A ConditionCheck, or a write whose
// condition failed, has Before equal to After.
type Change struct {
	Table  string
	Key    string // the item's primary key, encoded (see KeyString)
	Before Item
	After  Item
}

// Event is one request as the model executed it.
type Event struct {
	Ctx     context.Context // the request's context: callers can tag it
	Seq     uint64          // 1, 2, ... in the order the requests took effect
	Op      string          // "UpdateItem", "TransactWriteItems", ...
	Input   any             // the request as given
	Err     error           // the error returned, nil on success
	Changes []Change
}

// Model is an in-memory DynamoDB. The zero value is not usable; call New.
type Model struct {
	mu     sync.Mutex
	tables map[string]*table
	seq    uint64
	hook   func(Event)
	// idempotency remembers the ClientRequestTokens of committed
	// transactions: a retry with the same token succeeds without applying
	// again, as DynamoDB does within its ten-minute window.
	idempotency map[string]bool
}

type table struct {
	name     string
	pk, sk   string // sk "" without a sort key
	pkType   types.ScalarAttributeType
	skType   types.ScalarAttributeType
	items    map[string]Item
	keySchem []types.KeySchemaElement
	attrDefs []types.AttributeDefinition
}

// New returns an empty model.
func New() *Model {
	return &Model{tables: map[string]*table{}, idempotency: map[string]bool{}}
}

// SetHook installs f, called after every request while the model's mutex is
// held: f must not call the model.
func (m *Model) SetHook(f func(Event)) {
	m.mu.Lock()
	m.hook = f
	m.mu.Unlock()
}

// Items returns a copy of every item of tableName, in key order.
func (m *Model) Items(tableName string) []Item {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[tableName]
	if t == nil {
		return nil
	}
	var out []Item
	for _, k := range slices.Sorted(maps.Keys(t.items)) {
		out = append(out, cloneItem(t.items[k]))
	}
	return out
}

// Item returns a copy of the item of tableName under key (as encoded by
// KeyString), or nil.
func (m *Model) Item(tableName, key string) Item {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tables[tableName]; t != nil {
		return cloneItem(t.items[key])
	}
	return nil
}

// KeyString encodes a primary key value (partition key, and sort key or "")
// the way Change.Key does, for string keys.
func KeyString(pk, sk string) string { return fmt.Sprintf("%d:%s|%s", len(pk), pk, sk) }

func (m *Model) done(ctx context.Context, op string, in any, err error, changes []Change) {
	m.seq++
	if m.hook != nil {
		m.hook(Event{Ctx: ctx, Seq: m.seq, Op: op, Input: in, Err: err, Changes: changes})
	}
}

// ---- errors ----

func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func asValidation(prefix string, err error) error {
	if _, ok := err.(*smithy.GenericAPIError); ok {
		return err
	}
	return validation("%s: Syntax error; %v", prefix, err)
}

// errUnsupported marks a request shape this model does not implement; it is
// a ValidationException so that it never passes for success.
func errUnsupported(what string) error {
	return validation("ddbmodel: unsupported: %s", what)
}

func notFound() error {
	return &types.ResourceNotFoundException{Message: aws.String("Cannot do operations on a non-existent table")}
}

func conditionFailed(item Item, rv types.ReturnValuesOnConditionCheckFailure) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld && item != nil {
		e.Item = cloneItem(item)
	}
	return e
}

// ---- tables ----

// CreateTable creates an ACTIVE table at once.
func (m *Model) CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := newTable(in)
	if err == nil && m.tables[t.name] != nil {
		err = &types.ResourceInUseException{Message: aws.String("Cannot create preexisting table")}
	}
	if err != nil {
		m.done(ctx, "CreateTable", in, err, nil)
		return nil, err
	}
	m.tables[t.name] = t
	m.done(ctx, "CreateTable", in, nil, nil)
	return &dynamodb.CreateTableOutput{TableDescription: t.describe()}, nil
}

func newTable(in *dynamodb.CreateTableInput) (*table, error) {
	name := aws.ToString(in.TableName)
	if len(name) < 3 || len(name) > 255 {
		return nil, validation("TableName must be at least 3 characters long and at most 255 characters long")
	}
	t := &table{name: name, items: map[string]Item{}, keySchem: slices.Clone(in.KeySchema), attrDefs: slices.Clone(in.AttributeDefinitions)}
	attrTypes := map[string]types.ScalarAttributeType{}
	for _, d := range in.AttributeDefinitions {
		attrTypes[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	for _, k := range in.KeySchema {
		n := aws.ToString(k.AttributeName)
		typ, ok := attrTypes[n]
		if !ok {
			return nil, validation("One or more parameter values were invalid: Some index key attributes are not defined in AttributeDefinitions")
		}
		switch k.KeyType {
		case types.KeyTypeHash:
			if t.pk != "" {
				return nil, validation("Too many hash keys")
			}
			t.pk, t.pkType = n, typ
		case types.KeyTypeRange:
			if t.sk != "" {
				return nil, validation("Too many range keys")
			}
			t.sk, t.skType = n, typ
		default:
			return nil, validation("Invalid KeyType")
		}
	}
	if t.pk == "" {
		return nil, validation("No Hash Key specified in schema.  All Dynamo DB tables must have exactly one hash key")
	}
	if len(in.AttributeDefinitions) != len(in.KeySchema) {
		return nil, validation("One or more parameter values were invalid: Number of attributes in KeySchema does not exactly match number of attributes defined in AttributeDefinitions")
	}
	return t, nil
}

func (t *table) describe() *types.TableDescription {
	return &types.TableDescription{
		TableName:            aws.String(t.name),
		TableStatus:          types.TableStatusActive,
		KeySchema:            slices.Clone(t.keySchem),
		AttributeDefinitions: slices.Clone(t.attrDefs),
		ItemCount:            aws.Int64(int64(len(t.items))),
	}
}

// DescribeTable describes a table; every table is ACTIVE.
func (m *Model) DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, _ ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[aws.ToString(in.TableName)]
	if t == nil {
		err := &types.ResourceNotFoundException{Message: aws.String("Cannot do operations on a non-existent table")}
		m.done(ctx, "DescribeTable", in, err, nil)
		return nil, err
	}
	m.done(ctx, "DescribeTable", in, nil, nil)
	return &dynamodb.DescribeTableOutput{Table: t.describe()}, nil
}

func (m *Model) table(name *string) (*table, error) {
	if t := m.tables[aws.ToString(name)]; t != nil {
		return t, nil
	}
	return nil, notFound()
}

// key validates a primary key and returns its encoding and the key
// attributes.
func (t *table) key(k Item) (string, Item, error) {
	want := 1
	if t.sk != "" {
		want = 2
	}
	if len(k) != want {
		return "", nil, validation("The provided key element does not match the schema")
	}
	pk, err := keyPart(k, t.pk, t.pkType)
	if err != nil {
		return "", nil, err
	}
	sk := ""
	if t.sk != "" {
		if sk, err = keyPart(k, t.sk, t.skType); err != nil {
			return "", nil, err
		}
	}
	return KeyString(pk, sk), cloneItem(k), nil
}

func keyPart(k Item, name string, typ types.ScalarAttributeType) (string, error) {
	v, ok := k[name]
	if !ok {
		return "", validation("The provided key element does not match the schema")
	}
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		if typ != types.ScalarAttributeTypeS {
			break
		}
		if v.Value == "" {
			return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty string value. Key: %s", name)
		}
		return v.Value, nil
	case *types.AttributeValueMemberN:
		if typ != types.ScalarAttributeTypeN {
			break
		}
		n, ok := canonicalN(v.Value)
		if !ok {
			return "", validation("The parameter cannot be converted to a numeric value")
		}
		return n, nil
	case *types.AttributeValueMemberB:
		if typ != types.ScalarAttributeTypeB {
			break
		}
		if len(v.Value) == 0 {
			return "", validation("One or more parameter values are not valid. The AttributeValue for a key attribute cannot contain an empty binary value. Key: %s", name)
		}
		return string(v.Value), nil
	}
	return "", validation("The provided key element does not match the schema")
}

func (t *table) keyNames() []string {
	if t.sk == "" {
		return []string{t.pk}
	}
	return []string{t.pk, t.sk}
}

// checkItem validates attribute values (numbers, empty sets) and the size
// limit, and normalises numbers.
func checkItem(it Item) (Item, error) {
	out := make(Item, len(it))
	size := 0
	for k, v := range it {
		nv, err := checkValue(v)
		if err != nil {
			return nil, err
		}
		out[k] = nv
		size += len(k) + valueSize(nv)
	}
	if size > 400*1024 {
		return nil, validation("Item size has exceeded the maximum allowed size")
	}
	return out, nil
}

func checkValue(v types.AttributeValue) (types.AttributeValue, error) {
	switch v := v.(type) {
	case nil:
		return nil, validation("Supplied AttributeValue is empty, must contain exactly one of the supported datatypes")
	case *types.AttributeValueMemberN:
		n, ok := canonicalN(v.Value)
		if !ok {
			return nil, validation("The parameter cannot be converted to a numeric value: %s", v.Value)
		}
		return &types.AttributeValueMemberN{Value: n}, nil
	case *types.AttributeValueMemberSS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An string set  may not be empty")
		}
	case *types.AttributeValueMemberNS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: An number set  may not be empty")
		}
	case *types.AttributeValueMemberBS:
		if len(v.Value) == 0 {
			return nil, validation("One or more parameter values were invalid: Binary sets should not be empty")
		}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			var err error
			if l[i], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberL{Value: l}, nil
	case *types.AttributeValueMemberM:
		mm := make(Item, len(v.Value))
		for k, e := range v.Value {
			var err error
			if mm[k], err = checkValue(e); err != nil {
				return nil, err
			}
		}
		return &types.AttributeValueMemberM{Value: mm}, nil
	}
	return v, nil
}

func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return (len(v.Value)+1)/2 + 1
	case *types.AttributeValueMemberSS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberBS:
		n := 0
		for _, s := range v.Value {
			n += len(s)
		}
		return n
	case *types.AttributeValueMemberNS:
		n := 0
		for _, s := range v.Value {
			n += (len(s)+1)/2 + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += 1 + valueSize(e)
		}
		return n
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += 1 + len(k) + valueSize(e)
		}
		return n
	}
	return 1
}

// ---- single-item operations ----

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
}

func (m *Model) prepare(tableName *string, key Item, condExpr *string, names map[string]string,
	values map[string]types.AttributeValue) (*write, error) {
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
	w := &write{t: t, key: k, keyAttr: kattr, ph: newPlaceholders(names, values)}
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
	if n, err = checkItem(n); err != nil {
		return nil, err
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
		case types.ReturnValueUpdatedNew, types.ReturnValueUpdatedOld:
			src := next
			if in.ReturnValues == types.ReturnValueUpdatedOld {
				src = old
			}
			out.Attributes = Item{}
			for k, v := range src {
				if o, ok := old[k]; !ok || !equal(o, next[k]) || next[k] == nil {
					if _, isKey := w.keyAttr[k]; !isKey {
						out.Attributes[k] = v
					}
				}
			}
			if len(out.Attributes) == 0 {
				out.Attributes = nil
			}
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

// Query returns the items of one partition key (KeyConditionExpression
// "pk = :v", optionally AND a sort key comparison), in sort key order,
// paginated by Limit and ExclusiveStartKey.
func (m *Model) Query(ctx context.Context, in *dynamodb.QueryInput, _ ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.query(in)
	m.done(ctx, "Query", in, err, nil)
	return out, err
}

func (m *Model) query(in *dynamodb.QueryInput) (*dynamodb.QueryOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.KeyConditionExpression == nil {
		return nil, errUnsupported("Query without KeyConditionExpression")
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil {
		return nil, errUnsupported("Query filters, indexes and projections")
	}
	ph := newPlaceholders(in.ExpressionAttributeNames, in.ExpressionAttributeValues)
	c, err := parseCondition(*in.KeyConditionExpression, ph)
	if err != nil {
		return nil, err
	}
	if err := ph.checkAllUsed(); err != nil {
		return nil, err
	}
	eq, ok := partitionEquality(c, t.pk)
	if !ok {
		return nil, validation("Query condition missed key schema element: %s", t.pk)
	}
	var keys []string
	for k, it := range t.items {
		if equal(it[t.pk], eq) {
			if ok, _ := c.eval(it); ok {
				keys = append(keys, k)
			}
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if t.sk == "" {
			return keys[i] < keys[j]
		}
		n, _ := compare(t.items[keys[i]][t.sk], t.items[keys[j]][t.sk])
		return n < 0
	})
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.QueryOutput {
		return &dynamodb.QueryOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last}
	})
}

// partitionEquality finds "pk = :v" at the top of a key condition.
func partitionEquality(c cond, pk string) (types.AttributeValue, bool) {
	switch c := c.(type) {
	case cmpCond:
		if c.op == "=" && c.l.path == pk && c.r.val != nil {
			return c.r.val, true
		}
	case andCond:
		if v, ok := partitionEquality(c.l, pk); ok {
			return v, true
		}
		return partitionEquality(c.r, pk)
	}
	return nil, false
}

// Scan returns every item of a table in key order, paginated by Limit and
// ExclusiveStartKey.
func (m *Model) Scan(ctx context.Context, in *dynamodb.ScanInput, _ ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, err := m.scan(in)
	m.done(ctx, "Scan", in, err, nil)
	return out, err
}

func (m *Model) scan(in *dynamodb.ScanInput) (*dynamodb.ScanOutput, error) {
	t, err := m.table(in.TableName)
	if err != nil {
		return nil, err
	}
	if in.FilterExpression != nil || in.IndexName != nil || in.ProjectionExpression != nil || in.Segment != nil {
		return nil, errUnsupported("Scan filters, indexes, projections and segments")
	}
	keys := slices.Sorted(maps.Keys(t.items))
	return paginate(t, keys, in.ExclusiveStartKey, in.Limit, func(items []Item, last Item) *dynamodb.ScanOutput {
		return &dynamodb.ScanOutput{Items: items, Count: int32(len(items)), ScannedCount: int32(len(items)), LastEvaluatedKey: last}
	})
}

func paginate[O any](t *table, keys []string, start Item, limit *int32, out func([]Item, Item) *O) (*O, error) {
	if len(start) > 0 {
		sk, _, err := t.key(start)
		if err != nil {
			return nil, err
		}
		i := slices.Index(keys, sk)
		if i < 0 {
			// The start item is gone: resume after where it would sort.
			i = sort.SearchStrings(keys, sk) - 1
		}
		keys = keys[i+1:]
	}
	var last Item
	if n := int(aws.ToInt32(limit)); n > 0 && len(keys) > n {
		keys = keys[:n]
		it := t.items[keys[n-1]]
		last = Item{t.pk: it[t.pk]}
		if t.sk != "" {
			last[t.sk] = it[t.sk]
		}
	}
	items := make([]Item, len(keys))
	for i, k := range keys {
		items[i] = cloneItem(t.items[k])
	}
	return out(items, cloneItem(last)), nil
}

// ---- copies ----

func cloneItem(it Item) Item {
	if it == nil {
		return nil
	}
	out := make(Item, len(it))
	for k, v := range it {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v types.AttributeValue) types.AttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return &types.AttributeValueMemberS{Value: v.Value}
	case *types.AttributeValueMemberN:
		return &types.AttributeValueMemberN{Value: v.Value}
	case *types.AttributeValueMemberB:
		return &types.AttributeValueMemberB{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBOOL:
		return &types.AttributeValueMemberBOOL{Value: v.Value}
	case *types.AttributeValueMemberNULL:
		return &types.AttributeValueMemberNULL{Value: v.Value}
	case *types.AttributeValueMemberSS:
		return &types.AttributeValueMemberSS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberNS:
		return &types.AttributeValueMemberNS{Value: slices.Clone(v.Value)}
	case *types.AttributeValueMemberBS:
		bs := make([][]byte, len(v.Value))
		for i, b := range v.Value {
			bs[i] = slices.Clone(b)
		}
		return &types.AttributeValueMemberBS{Value: bs}
	case *types.AttributeValueMemberL:
		l := make([]types.AttributeValue, len(v.Value))
		for i, e := range v.Value {
			l[i] = cloneValue(e)
		}
		return &types.AttributeValueMemberL{Value: l}
	case *types.AttributeValueMemberM:
		return &types.AttributeValueMemberM{Value: cloneItem(v.Value)}
	}
	return v
}
