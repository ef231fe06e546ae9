package sim

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// Transaction conflicts (issue 37, item 8): DynamoDB answers a write of an
// item that a transaction in progress includes with a
// TransactionConflictException (HTTP 400, which the SDK does not retry),
// and cancels a transaction that meets another with the reason
// TransactionConflict; DynamoDB Local never does. The model takes a
// transaction in two steps (ddbmodel.PrepareTransactWriteItems, Commit);
// here a client's transaction is held open between them for a while of
// virtual time, so that the other clients' writes (heartbeats, releases,
// acquisitions, their own transactions) meet it; and a write now and then
// meets a transaction the simulation does not run (another application's,
// on the same item: a "phantom" the model prepares just before the write
// and commits just after, so that the model itself gives the answer, in
// the request's own terms). Both come before the network heals, and only
// for clients with faults (invariant 12 counts on the others' writes
// landing at once).

var flagConflicts = flag.Bool("sim.conflicts", true, "transaction conflicts in the fault mix: transactions held open between their two steps, and writes "+
	"that meet another transaction in progress (docs/SIMULATION.md); false plays every seed as without them")

// conflictProfile is how one client's requests meet transactions.
type conflictProfile struct {
	hold     float64       // a transaction of this client is held open between its two steps
	maxHold  time.Duration // for at most this long
	conflict float64       // a write meets a transaction in progress on one of its items
}

func (p conflictProfile) String() string {
	if p == (conflictProfile{}) {
		return "none"
	}
	return fmt.Sprintf("hold=%.2f<=%s meet=%.3f", p.hold, p.maxHold, p.conflict)
}

// conflictsOf draws a client's conflict profile from a stream of its own,
// so that the seed's other draws stay where they were without conflicts.
func conflictsOf(seed uint64, name string, lease time.Duration, faulty bool) conflictProfile {
	if !*flagConflicts || !faulty {
		return conflictProfile{}
	}
	h := fnv.New64a()
	h.Write([]byte("conflicts " + name))
	r := rand.New(rand.NewPCG(seed, h.Sum64()))
	if r.IntN(4) == 0 {
		return conflictProfile{}
	}
	return conflictProfile{
		hold:     r.Float64() * 0.5,
		maxHold:  time.Duration(1+r.Int64N(int64(min(lease/4, 300*time.Millisecond)/time.Millisecond))) * time.Millisecond,
		conflict: r.Float64() * 0.05,
	}
}

// transact applies a transaction: at once, or, as the profile draws it,
// in two steps with virtual time between them, during which its items are
// in the transaction. The commit does not wait for the caller: DynamoDB
// completes a transaction it prepared whatever its client does. For an
// SDK attempt (attempt), a held transaction's attempt may time out while
// it is held, one time in two: the SDK then retries with the same
// ClientRequestToken, and meets a TransactionInProgressException (which it
// retries) until the commit, then the transaction's success.
func (f *faultyDB) transact(mctx context.Context, in *dynamodb.TransactWriteItemsInput, key string, attempt bool) (*dynamodb.TransactWriteItemsOutput, error) {
	if f.w.healed.Load() || !f.roll(f.conf.hold) {
		return f.model.TransactWriteItems(mctx, in)
	}
	tx, err := f.model.PrepareTransactWriteItems(mctx, in)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	d := time.Millisecond + time.Duration(f.r.Int64N(int64(f.conf.maxHold)))
	f.mu.Unlock()
	if attempt && f.roll(0.5) {
		f.w.log("%s TransactWriteItems: held open for %s; the attempt times out meanwhile", f.name, d)
		f.w.faulted(mctx, true)
		f.w.ghosts.Go(func() {
			time.Sleep(d)
			f.w.step("commit " + key)
			_, _ = tx.Commit()
		})
		return nil, &simNetError{msg: "sim: read tcp: i/o timeout (the transaction is held)", timeout: true}
	}
	f.w.log("%s TransactWriteItems: held open for %s", f.name, d)
	_ = wait(context.Background(), d, func() time.Time { return time.Time{} })
	f.w.step("commit " + key)
	return tx.Commit()
}

// meeting runs apply, a write, as DynamoDB answers it while another
// transaction is in progress on one of its items, when the profile draws
// it so (met reports it): the model answers a TransactionConflictException,
// or cancels a transaction with the reason TransactionConflict for that
// item. Otherwise it just runs apply.
func meeting[O any](f *faultyDB, in any, apply func() (O, error)) (out O, err error, met bool) {
	switch in.(type) {
	case *dynamodb.PutItemInput, *dynamodb.UpdateItemInput, *dynamodb.DeleteItemInput, *dynamodb.TransactWriteItemsInput:
	default:
		out, err = apply()
		return out, err, false
	}
	if f.w.healed.Load() || !f.roll(f.conf.conflict) {
		out, err = apply()
		return out, err, false
	}
	tx := f.phantom(in)
	if tx == nil {
		out, err = apply()
		return out, err, false
	}
	out, err = apply()
	if _, cerr := tx.Commit(); cerr != nil {
		panic(cerr)
	}
	return out, err, true
}

// phantom prepares a transaction of another application on one of the
// items in writes (for a transaction, a member drawn at random): a
// ConditionCheck that always holds. It returns nil when the item is in a
// transaction already.
func (f *faultyDB) phantom(in any) *ddbmodel.Transaction {
	var table *string
	var key map[string]types.AttributeValue
	keyOf := func(t *string, it map[string]types.AttributeValue) map[string]types.AttributeValue {
		k := map[string]types.AttributeValue{f.w.pkName: it[f.w.pkName]}
		if aws.ToString(t) == f.w.lockTable && f.w.sortKey != "" {
			k["sk"] = it["sk"]
		}
		return k
	}
	switch in := in.(type) {
	case *dynamodb.PutItemInput:
		table, key = in.TableName, keyOf(in.TableName, in.Item)
	case *dynamodb.UpdateItemInput:
		table, key = in.TableName, in.Key
	case *dynamodb.DeleteItemInput:
		table, key = in.TableName, in.Key
	case *dynamodb.TransactWriteItemsInput:
		if len(in.TransactItems) == 0 {
			return nil
		}
		f.mu.Lock()
		m := in.TransactItems[f.r.IntN(len(in.TransactItems))]
		f.mu.Unlock()
		switch {
		case m.Put != nil:
			table, key = m.Put.TableName, keyOf(m.Put.TableName, m.Put.Item)
		case m.Update != nil:
			table, key = m.Update.TableName, m.Update.Key
		case m.Delete != nil:
			table, key = m.Delete.TableName, m.Delete.Key
		case m.ConditionCheck != nil:
			table, key = m.ConditionCheck.TableName, m.ConditionCheck.Key
		}
	}
	ctx := context.WithValue(context.Background(), callerKey{}, phantomCaller)
	tx, err := f.model.PrepareTransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{{
		ConditionCheck: &types.ConditionCheck{TableName: table, Key: key,
			ConditionExpression:      aws.String("attribute_exists(#k) OR attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": f.w.pkName}},
	}}})
	if err != nil {
		return nil // already in a transaction (or a request the model refuses: it answers that itself)
	}
	f.w.log("%s: another application's transaction is in progress on %s", f.name, itemS(key, f.w.pkName))
	return tx
}

// phantomCaller names the transactions of another application in the
// trace; the checker leaves them out of its invariants.
const phantomCaller = "phantom"

// conflictCounts counts what the clients met: writes answered with a
// TransactionConflictException, transactions cancelled for a conflict,
// answers of TransactionInProgressException (a retry of a transaction
// still held), and transactions held open.
type conflictCounts struct {
	writes, transactions, inProgress, held atomic.Int64
}

func (c *conflictCounts) add(o *conflictCounts) {
	c.writes.Add(o.writes.Load())
	c.transactions.Add(o.transactions.Load())
	c.inProgress.Add(o.inProgress.Load())
	c.held.Add(o.held.Load())
}

func (c *conflictCounts) String() string {
	return fmt.Sprintf("transaction conflicts met: %d writes, %d transactions, %d retries in progress; %d transactions held open",
		c.writes.Load(), c.transactions.Load(), c.inProgress.Load(), c.held.Load())
}

// countConflict counts a model answer of a conflict, from the hook.
func (w *world) countConflict(e ddbmodel.Event) {
	var tce *types.TransactionConflictException
	var cancelled *types.TransactionCanceledException
	var inProgress *types.TransactionInProgressException
	switch {
	case errors.As(e.Err, &tce):
		w.met.writes.Add(1)
	case errors.As(e.Err, &inProgress):
		w.met.inProgress.Add(1)
	case errors.As(e.Err, &cancelled):
		for _, r := range cancelled.CancellationReasons {
			if aws.ToString(r.Code) == "TransactionConflict" {
				w.met.transactions.Add(1)
				break
			}
		}
	case e.Op == ddbmodel.OpPrepare:
		w.met.held.Add(1)
	}
}

// TestConflictsAsTheSDKSurfacesThem: through the real SDK client over the
// simulated transport, a write that meets a transaction in progress fails
// after one attempt of the five allowed, with the SDK's typed errors and
// HTTP 400: a *types.TransactionConflictException for an UpdateItem, a
// *types.TransactionCanceledException with TransactionConflict for the
// member on that item; and a write of another item goes on.
func TestConflictsAsTheSDKSurfacesThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		w := &world{model: ddbmodel.New(), lockTable: "locks", dataTable: "guarded", pkName: "key", draws: map[drawKey]int{}}
		for _, table := range []string{w.lockTable, w.dataTable} {
			if _, err := w.model.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), BillingMode: types.BillingModePayPerRequest,
				KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
				AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}}}); err != nil {
				t.Fatal(err)
			}
		}
		var attempts atomic.Int64
		w.model.SetHook(func(e ddbmodel.Event) {
			if e.Op == "UpdateItem" || e.Op == "TransactWriteItems" {
				attempts.Add(1)
			}
		})
		f := &faultyDB{w: w, name: "c0", model: w.model, attempt: attemptProfile{attempts: 5}, r: rand.New(rand.NewPCG(1, 1))}
		db := f.sdkClient()
		key := func(k string) map[string]types.AttributeValue {
			return map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: k}}
		}
		held, err := w.model.PrepareTransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("locks"), Item: key("k")}}}})
		if err != nil {
			t.Fatal(err)
		}
		update := &dynamodb.UpdateItemInput{TableName: aws.String("locks"), Key: key("k"), UpdateExpression: aws.String("SET #a = :a"),
			ExpressionAttributeNames:  map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": &types.AttributeValueMemberS{Value: "x"}}}
		_, err = db.UpdateItem(ctx, update)
		var tce *types.TransactionConflictException
		var re *awshttp.ResponseError
		if !errors.As(err, &tce) || !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
			t.Fatalf("UpdateItem of an item in a transaction: %v; want a TransactionConflictException, HTTP 400", err)
		}
		if n := attempts.Swap(0); n != 1 {
			t.Errorf("%d attempts; the SDK must not retry a TransactionConflictException", n)
		}
		_, err = db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String("guarded"), Item: key("d")}},
			{Update: &types.Update{TableName: aws.String("locks"), Key: key("k"), UpdateExpression: update.UpdateExpression,
				ExpressionAttributeNames: update.ExpressionAttributeNames, ExpressionAttributeValues: update.ExpressionAttributeValues}}}})
		var cancelled *types.TransactionCanceledException
		if !errors.As(err, &cancelled) || len(cancelled.CancellationReasons) != 2 ||
			aws.ToString(cancelled.CancellationReasons[0].Code) != "None" || aws.ToString(cancelled.CancellationReasons[1].Code) != "TransactionConflict" {
			t.Fatalf("a transaction including the item: %v; want cancelled with [None TransactionConflict]", err)
		}
		if n := attempts.Swap(0); n != 1 {
			t.Errorf("%d attempts of the transaction; want one", n)
		}
		if _, err := held.Commit(); err != nil {
			t.Fatal(err)
		}
		if _, err := db.UpdateItem(ctx, update); err != nil {
			t.Fatalf("UpdateItem after the commit: %v", err)
		}
	})
}
