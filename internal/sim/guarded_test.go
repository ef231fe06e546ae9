package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Invariant 16 (issue 37, item 10): a guarded write of a holder whose
// lease runs commits, as far as the lock is concerned. When DynamoDB
// evaluates a transaction that carries a lock's guard
// (Lock.TransactionCondition, or the item of Lock.TransactionWithRefresh)
// and cancels it because that member's condition failed, it is a
// violation if, at that instant, the holder believes it holds the lock
// (Err() nil, lease not run out) and the lock item is still that
// acquisition's: the same owner and fencing token, not released (for a
// read/write lock's reader, the item still has the reader's entry); and,
// for TransactionWithRefresh, no write of the lock item landed since the
// guard was built (the documented case where it fails: a renewal in
// between). The guard's condition names what does not change while the
// acquisition holds the lock, so a heartbeat landing between
// TransactionCondition and the transaction must not make it fail. The
// other members' outcome (the simulation's own data conditions, which fail
// now and then) does not count, nor a TransactionConflict (another
// transaction on the item: the service's answer, retrying may succeed).

// guardKey tags a guarded write's context with what the checker needs.
type guardKey struct{}

type guardRec struct {
	tr       *tracked
	refresh  bool   // TransactionWithRefresh
	builtRVN string // the lock item's RVN when the refresh was built
}

// guarded tags ctx with l's guard, when l is tracked (nil-safe: an ended
// lock's write is not checked). Call it right after building the guard.
func (w *world) guarded(ctx context.Context, lock *dynamolock.Lock, refresh bool) context.Context {
	w.mu.Lock()
	defer w.mu.Unlock()
	tr := w.tracked[lock]
	if tr == nil {
		return ctx
	}
	return context.WithValue(ctx, guardKey{}, &guardRec{tr: tr, refresh: refresh, builtRVN: itemS(w.current[tr.key], "recordVersionNumber")})
}

// checkGuarded is invariant 16 for one request, from the hook (w.mu held).
func (w *world) checkGuarded(e ddbmodel.Event) {
	g, ok := e.Ctx.Value(guardKey{}).(*guardRec)
	in, isTx := e.Input.(*dynamodb.TransactWriteItemsInput)
	var tce *types.TransactionCanceledException
	if !ok || !isTx || e.Op != "TransactWriteItems" || !errors.As(e.Err, &tce) {
		return
	}
	tr, l := g.tr, g.tr.l
	for i, m := range in.TransactItems {
		table := ""
		switch {
		case m.ConditionCheck != nil:
			table = aws.ToString(m.ConditionCheck.TableName)
		case m.Update != nil:
			table = aws.ToString(m.Update.TableName)
		}
		if table != w.lockTable || i >= len(tce.CancellationReasons) || aws.ToString(tce.CancellationReasons[i].Code) != "ConditionalCheckFailed" {
			continue
		}
		if l.Err() != nil || l.IsExpired() || w.releasing[l] > 0 || tr.client.closed || w.superseded(tr) {
			return // the holder no longer believes it holds the lock
		}
		it := w.current[tr.key]
		if !w.stillHeld(tr, it) {
			return
		}
		kind, what := "TransactionCondition", "lock"
		if g.refresh {
			kind = "TransactionWithRefresh"
			if itemS(it, "recordVersionNumber") != g.builtRVN {
				return // a write of the lock landed after the guard was built
			}
		}
		if tr.reader {
			what = "read lock"
		}
		w.violate(16, "%s's guarded write (%s) on %s was cancelled by its %s's condition while the %s is held (token %d) and the item is still its: %s",
			tr.owner, kind, tr.pk, what, what, tr.token, showItem(it))
		return
	}
}

// stillHeld reports whether the model's item is still tr's acquisition.
func (w *world) stillHeld(tr *tracked, it ddbmodel.Item) bool {
	if it == nil {
		return false
	}
	if tr.reader {
		readers, _ := it["readers"].(*types.AttributeValueMemberM)
		if readers == nil || tr.readerID == "" {
			return false
		}
		_, has := readers.Value[tr.readerID]
		return has
	}
	return itemS(it, "ownerName") == tr.owner && itemN(it, "fencingToken") == tr.token && !released(it)
}

// readerEntry is the id of the reader entry whose beat is rvn in the
// read/write lock's item, or "" (w.mu held).
func (w *world) readerEntry(key, rvn string) string {
	readers, _ := w.current[key]["readers"].(*types.AttributeValueMemberM)
	if readers == nil {
		return ""
	}
	for id, e := range readers.Value {
		if m, ok := e.(*types.AttributeValueMemberM); ok && itemS(m.Value, "b") == rvn {
			return id
		}
	}
	return ""
}

// readerGuardedWrite puts a data item of the reader's own (a key of its
// own, which invariant 3 leaves alone: it fences writers) in a transaction
// guarded by the read lock's TransactionCondition.
func (w *world) readerGuardedWrite(cl *simClient, r *rand.Rand, l *dynamolock.Lock) {
	in := &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{l.TransactionCondition(), {Put: &types.Put{
		TableName: aws.String(w.dataTable),
		Item: map[string]types.AttributeValue{
			"key":    &types.AttributeValueMemberS{Value: readerDataPrefix + cl.name},
			"reader": &types.AttributeValueMemberS{Value: l.RecordVersionNumber()},
		},
	}}}}
	if r.IntN(2) == 0 {
		in.TransactItems[0], in.TransactItems[1] = in.TransactItems[1], in.TransactItems[0]
	}
	ctx := w.guarded(context.Background(), l, false)
	w.maybePause(cl, r)
	_, err := cl.api.TransactWriteItems(ctx, in)
	w.note("%s guarded write as a reader: %v", cl.name, errOrOK(err))
}

// readerDataPrefix starts the keys of the data items readers write.
const readerDataPrefix = "reader/"

// readerData reports whether a data item is a reader's (invariant 3 does
// not apply to it).
func readerData(key string) bool { return strings.HasPrefix(key, readerDataPrefix) }
