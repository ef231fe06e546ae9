package ddbmodel

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// A transaction takes effect in two steps, as DynamoDB's do (the Developer
// Guide, "Amazon DynamoDB Transactions: How it works": one underlying
// write to prepare each item, one to commit it). Prepare checks the
// request, evaluates every member's condition and computes every new item;
// from then until Commit the items are in the transaction: a PutItem,
// UpdateItem or DeleteItem on one of them fails with a
// *types.TransactionConflictException, and another transaction that
// includes one is cancelled with the reason TransactionConflict for it
// ("Transaction conflict handling in DynamoDB"). A GetItem, Query or Scan
// meanwhile sees the items as they were before the transaction.
// TransactWriteItems takes both steps at once; the simulation calls them
// apart, with time between them, so that other requests meet the
// transaction.

// Transaction is a TransactWriteItems between its two steps. Commit must
// be called, once: until then its items stay in the transaction (DynamoDB
// completes a transaction it prepared whatever its client does).
type Transaction struct {
	m      *Model
	ctx    context.Context
	in     *dynamodb.TransactWriteItemsInput
	staged []staged
	held   []string // the items it holds, as heldKey
	token  string
	// replay: the token's transaction already committed; Commit succeeds
	// and applies nothing.
	replay    bool
	committed bool
}

type staged struct {
	w    *write
	old  Item
	next Item
	keep bool
}

// PrepareTransactWriteItems takes the first step of in: it returns the
// error TransactWriteItems would return (a ValidationException, a
// *types.TransactionCanceledException, ...), or a prepared transaction
// whose items are now in it.
func (m *Model) PrepareTransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*Transaction, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.prepareTx(ctx, in)
	if err != nil {
		return nil, err
	}
	if !t.replay {
		ch := make([]Change, len(t.staged))
		for i, s := range t.staged {
			ch[i] = Change{Table: s.w.t.name, Key: s.w.key, Before: s.old, After: s.old}
		}
		m.done(ctx, OpPrepare, in, nil, ch)
	}
	return t, nil
}

// OpPrepare is the Event.Op of a transaction's first step when it is
// taken apart from the second (PrepareTransactWriteItems): its Changes
// name the items it holds, unchanged. The second step is an Event of Op
// "TransactWriteItems", as a whole TransactWriteItems is.
const OpPrepare = "TransactWriteItems (prepared)"

// Commit takes the second step: every member's new item is written at
// once and the items leave the transaction. It returns what
// TransactWriteItems returns on success.
func (t *Transaction) Commit() (*dynamodb.TransactWriteItemsOutput, error) {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.commitLocked()
}

// TransactWriteItems applies all its members or none: when a condition
// fails it returns a *types.TransactionCanceledException with one reason
// per member, in order ("None"; "ConditionalCheckFailed", with the item
// when the member asked for ALL_OLD; "TransactionConflict" for an item in
// another transaction; or "ValidationError" for an update that cannot be
// applied to its item, one over 400 KB included). A ClientRequestToken already committed within
// the last ten minutes makes the call succeed without applying anything
// again, or fail with an IdempotentParameterMismatchException when the
// rest of the request differs; one whose transaction is still in progress
// fails with a TransactionInProgressException (which the SDK retries).
// Both steps are taken at once: nothing runs between them.
func (m *Model) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, err := m.prepareTx(ctx, in)
	if err != nil {
		return nil, err
	}
	return t.commitLocked()
}

// prepareTx is the first step, under m.mu; a failure is reported to the
// hook here.
func (m *Model) prepareTx(ctx context.Context, in *dynamodb.TransactWriteItemsInput) (*Transaction, error) {
	var ch []Change
	t, err := m.prepareLocked(ctx, in, &ch)
	if err != nil {
		m.done(ctx, "TransactWriteItems", in, err, ch)
		return nil, err
	}
	return t, nil
}

func (t *Transaction) commitLocked() (*dynamodb.TransactWriteItemsOutput, error) {
	m := t.m
	if t.committed {
		panic("ddbmodel: a transaction committed twice")
	}
	t.committed = true
	var ch []Change
	if !t.replay {
		for _, s := range t.staged {
			if s.keep {
				s.w.t.items[s.w.key] = s.next
			} else {
				delete(s.w.t.items, s.w.key)
				s.next = nil
			}
			ch = append(ch, Change{Table: s.w.t.name, Key: s.w.key, Before: s.old, After: s.next})
		}
		for _, id := range t.held {
			delete(m.inTx, id)
		}
		m.tokens.finish(t.token, m.now())
	}
	out := &dynamodb.TransactWriteItemsOutput{ConsumedCapacity: t.charge()}
	m.done(t.ctx, "TransactWriteItems", t.in, nil, ch)
	return out, nil
}

// charge charges a committed transaction (capacity.go) and returns its
// answer's ConsumedCapacity, one entry per table in the order the members
// name them (nil when the request did not ask).
func (t *Transaction) charge() []types.ConsumedCapacity {
	m := t.m
	var tables []string
	units := map[string][2]float64{}
	add := func(table string, read, write float64) {
		if _, ok := units[table]; !ok {
			tables = append(tables, table)
		}
		u := units[table]
		u[0] += read
		u[1] += write
		units[table] = u
	}
	if t.replay {
		// A token already committed: DynamoDB reads the items to answer.
		if ws, _, err := m.members(t.in); err == nil {
			for _, w := range ws {
				add(w.t.name, readUnits(itemBytes(w.t.items[w.key]), true), 0)
			}
		}
	}
	for _, s := range t.staged {
		if s.w.next == nil {
			add(s.w.t.name, 2*readUnits(itemBytes(s.old), true), 0) // a ConditionCheck: a transactional read
			continue
		}
		add(s.w.t.name, 0, 2*writeCost(s.w, s.old, s.next, false))
	}
	var out []types.ConsumedCapacity
	for _, table := range tables {
		u := units[table]
		m.charge(table, u[0], u[1])
		if c := consumed(t.in.ReturnConsumedCapacity, table, u[0]+u[1]); c != nil {
			out = append(out, *c)
		}
	}
	return out
}

// heldKey names an item for the transactions that hold it.
func heldKey(w *write) string { return w.t.name + "\x00" + w.key }

const msgConflict = "Transaction is ongoing for the item"

// TransactionConflict returns DynamoDB's answer to a PutItem, UpdateItem or
// DeleteItem on an item that a transaction in progress includes.
func TransactionConflict() error {
	return &types.TransactionConflictException{Message: aws.String(msgConflict)}
}

// Cancelled returns a *types.TransactionCanceledException with these
// reasons, and DynamoDB's message listing their codes.
func Cancelled(reasons []types.CancellationReason) error {
	codes := make([]string, len(reasons))
	for i, r := range reasons {
		codes[i] = aws.ToString(r.Code)
	}
	return &types.TransactionCanceledException{
		Message:             aws.String("Transaction cancelled, please refer cancellation reasons for specific reasons [" + strings.Join(codes, ", ") + "]"),
		CancellationReasons: reasons,
	}
}

// CancelledByConflict returns DynamoDB's answer to a transaction of n
// members whose member i meets another transaction in progress on its
// item: cancelled, with the reason TransactionConflict for that member and
// None for the others.
func CancelledByConflict(n, i int) error {
	reasons := make([]types.CancellationReason, n)
	for j := range reasons {
		reasons[j].Code = aws.String("None")
	}
	reasons[i] = types.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String(msgConflict)}
	return Cancelled(reasons)
}

func (m *Model) prepareLocked(ctx context.Context, in *dynamodb.TransactWriteItemsInput, ch *[]Change) (*Transaction, error) {
	if err := checkReturnCapacity(in.ReturnConsumedCapacity); err != nil {
		return nil, err
	}
	tok := aws.ToString(in.ClientRequestToken)
	if in.ClientRequestToken != nil {
		if err := checkToken(tok); err != nil {
			return nil, err
		}
	}
	t := &Transaction{m: m, ctx: ctx, in: in, token: tok}
	if tok != "" {
		replay, err := m.tokens.begin(tok, fingerprint(in), m.now())
		if err != nil {
			return nil, err
		}
		if replay {
			t.replay = true
			return t, nil
		}
	}
	st, err := m.stage(in, ch)
	if err != nil {
		m.tokens.drop(tok)
		return nil, err
	}
	t.staged = st
	for _, s := range st {
		id := heldKey(s.w)
		m.inTx[id] = t
		t.held = append(t.held, id)
	}
	return t, nil
}

// checkToken validates a ClientRequestToken: 1 to 36 characters.
func checkToken(tok string) error {
	switch {
	case tok == "":
		// DynamoDB Local accepts an empty token; the API's constraint
		// (minimum length 1) is the service's (TestRefusals lists it).
		return validation("1 validation error detected: Value '' at 'clientRequestToken' failed to satisfy constraint: Member must have length greater than or equal to 1")
	case len(tok) > maxTokenLen:
		return validation("Value %s at 'clientRequestToken' failed to satisfy constraint: Member must have length less than or equal to %d", tok, maxTokenLen)
	}
	return nil
}

// stage validates a transaction and evaluates it: every member's condition
// is evaluated, and the new item of each member whose condition holds is
// computed, before anything changes. It returns the cancellation when a
// member's item is in another transaction, a condition fails, or an
// update cannot be applied to its item.
func (m *Model) stage(in *dynamodb.TransactWriteItemsInput, ch *[]Change) ([]staged, error) {
	ws, rvs, err := m.members(in)
	if err != nil {
		return nil, err
	}
	st := make([]staged, len(ws))
	reasons := make([]types.CancellationReason, len(ws))
	failed := false
	for i, w := range ws {
		old := w.t.items[w.key]
		st[i] = staged{w: w, old: old, next: old, keep: old != nil}
		reasons[i].Code = aws.String("None")
		if m.inTx[heldKey(w)] != nil {
			failed = true
			reasons[i] = types.CancellationReason{Code: aws.String("TransactionConflict"), Message: aws.String(msgConflict)}
			continue
		}
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
		if keep && err == nil {
			var tooLarge bool
			if n, tooLarge, err = normalizeItem(n, true); err == nil && tooLarge {
				err = validation("%s", w.tooLarge)
			}
		}
		if err != nil {
			// An update that cannot be applied to its item cancels the
			// transaction with a ValidationError reason, as the API
			// reference of TransactionCanceledException lists them.
			// DynamoDB Local fails the whole request with the
			// ValidationException instead, but for an item over 400 KB
			// (TestRefusals lists the difference).
			msg, ok := applyError(err)
			if !ok {
				return nil, err
			}
			failed = true
			reasons[i].Code = aws.String("ValidationError")
			reasons[i].Message = aws.String(msg)
			continue
		}
		st[i].next, st[i].keep = n, keep
	}
	if failed {
		for _, s := range st {
			*ch = append(*ch, Change{Table: s.w.t.name, Key: s.w.key, Before: s.old, After: s.old})
		}
		return nil, Cancelled(reasons)
	}
	return st, nil
}

// applyError returns the message of an error that an update of one item
// met while it was applied (not one of the request as a whole, such as an
// update of a key attribute), and whether it is one.
func applyError(err error) (string, bool) {
	msg := errorMessage(err)
	switch msg {
	case msgTooLarge, msgUpdateTooLarge, msgNesting, msgUpdateNesting, msgPrecision, msgOverflow, msgUnderflow,
		msgOperandType, msgMissingAttribute, msgInvalidPath:
		return msg, true
	}
	return "", false
}

// members checks a transaction's shape and prepares each member's write.
func (m *Model) members(in *dynamodb.TransactWriteItemsInput) ([]*write, []types.ReturnValuesOnConditionCheckFailure, error) {
	if n := len(in.TransactItems); n > maxTransactItems {
		return nil, nil, validation("Member must have length less than or equal to %d", maxTransactItems)
	}
	if n := len(in.TransactItems); n == 0 {
		return nil, nil, validation("1 validation error detected: Value at 'transactItems' failed to satisfy constraint: Member must have length less than or equal to 100 and greater than or equal to 1")
	}
	if n := payloadSize(in.TransactItems); n > maxTransactSize {
		return nil, nil, validation("Transaction payload size cannot exceed 4MB. Payload Size: %d", n)
	}
	ws := make([]*write, len(in.TransactItems))
	rvs := make([]types.ReturnValuesOnConditionCheckFailure, len(in.TransactItems))
	seen := map[string]bool{}
	for i, ti := range in.TransactItems {
		var w *write
		var err error
		set, kind := 0, ""
		if c := ti.ConditionCheck; c != nil {
			set, kind = set+1, "conditionCheck"
			if c.ConditionExpression == nil {
				return nil, nil, validation("ConditionExpression must be specified for a ConditionCheck")
			}
			w, err = m.prepare(c.TableName, c.Key, c.ConditionExpression, exprParams{names: c.ExpressionAttributeNames, values: c.ExpressionAttributeValues, hasExpr: true})
			if err == nil {
				err = w.ph.checkAllUsed()
			}
			rvs[i] = c.ReturnValuesOnConditionCheckFailure
		}
		if p := ti.Put; p != nil {
			set, kind = set+1, "put"
			w, err = m.prepPut(p.TableName, p.Item, p.ConditionExpression, p.ExpressionAttributeNames, p.ExpressionAttributeValues)
			rvs[i] = p.ReturnValuesOnConditionCheckFailure
		}
		if u := ti.Update; u != nil {
			set, kind = set+1, "update"
			w, err = m.prepUpdate(u.TableName, u.Key, u.UpdateExpression, u.ConditionExpression, u.ExpressionAttributeNames, u.ExpressionAttributeValues)
			rvs[i] = u.ReturnValuesOnConditionCheckFailure
		}
		if d := ti.Delete; d != nil {
			set, kind = set+1, "delete"
			w, err = m.prepDelete(d.TableName, d.Key, d.ConditionExpression, d.ExpressionAttributeNames, d.ExpressionAttributeValues)
			rvs[i] = d.ReturnValuesOnConditionCheckFailure
		}
		if set == 0 {
			return nil, nil, validation("Invalid Request: TransactWriteRequest should contain Delete or Put or Update request")
		}
		if set > 1 {
			return nil, nil, validation("TransactItems can only contain one of Check, Put, Update or Delete")
		}
		if err != nil {
			return nil, nil, err
		}
		// DynamoDB Local accepts any value here; the API's enumeration is
		// the service's (TestRefusals lists the difference).
		if err := checkReturnOnFailure(fmt.Sprintf("transactItems.%d.member.%s.returnValuesOnConditionCheckFailure", i+1, kind), rvs[i]); err != nil {
			return nil, nil, err
		}
		id := heldKey(w)
		if seen[id] {
			return nil, nil, validation("Transaction request cannot include multiple operations on one item")
		}
		seen[id] = true
		ws[i] = w
	}
	return ws, rvs, nil
}

// payloadSize is a transaction's size as DynamoDB Local 3.3.1 counts it
// against the 4 MB limit (TestLimits checks it to the byte): for each
// member, its item (Put) or key (the others) sized as an item, plus every
// expression's length, plus, for each placeholder an expression uses, the
// attribute name it stands for or the size of its value.
func payloadSize(items []types.TransactWriteItem) int {
	n := 0
	expr := func(e *string, names map[string]string, values map[string]types.AttributeValue) {
		if e != nil {
			n += substitutedSize(*e, names, values)
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
