package dynamolocktest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"

	"github.com/arielsrv/dynamolock/v2"
)

// The faults of issue 37, items 8 and 9: what DynamoDB answers and the
// other faults never showed (a transaction in progress on the item, and
// the SDK's retry of a write whose answer was lost).

func reasons(err error) []string {
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		return nil
	}
	var codes []string
	for _, r := range tce.CancellationReasons {
		codes = append(codes, aws.ToString(r.Code))
	}
	return codes
}

func putIn(table, k string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(table), Item: key(k)}}
}

// TransactionConflicts: the next writes fail as DynamoDB answers a write of
// an item in a transaction in progress (HTTP 400, the SDK's typed errors),
// nothing is applied, and reads do not use the fault up.
func TestTransactionConflicts(t *testing.T) {
	ctx := context.Background()
	db, conn, _ := setUp(t)
	conn.TransactionConflicts(2)
	_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("a")})
	var tce *types.TransactionConflictException
	var oe *smithy.OperationError
	var re *awshttp.ResponseError
	if !errors.As(err, &tce) || !errors.As(err, &oe) || oe.OperationName != "PutItem" || !errors.As(err, &re) || re.HTTPStatusCode() != 400 {
		t.Fatalf("PutItem: %v; want a TransactionConflictException in an *smithy.OperationError, HTTP 400", err)
	}
	if _, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("a")}); err != nil {
		t.Fatalf("a read between: %v", err)
	}
	_, err = conn.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putIn("locks", "b"), putIn("locks", "c")}})
	if got := fmt.Sprint(reasons(err)); got != "[TransactionConflict None]" {
		t.Fatalf("TransactWriteItems: %v; want cancelled with [TransactionConflict None]", err)
	}
	if n := len(db.Items("locks")); n != 0 {
		t.Fatalf("%d items: a write that met a conflict was applied", n)
	}
	if _, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("a")}); err != nil {
		t.Fatalf("the write after the conflicts: %v", err)
	}
}

// HoldTransactions: while one connection's transaction is between its two
// steps, another connection's writes of its items fail with a
// TransactionConflictException, its transactions including one are
// cancelled, and reads see the items as they were; then the transaction
// lands.
func TestHoldTransactions(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn1, _ := setUp(t)
		conn2 := db.Conn()
		conn1.HoldTransactions(time.Second)
		var wg sync.WaitGroup
		var txErr error
		wg.Go(func() {
			_, txErr = conn1.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putIn("locks", "a")}})
		})
		synctest.Wait()
		_, err := conn2.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("a")})
		var tce *types.TransactionConflictException
		if !errors.As(err, &tce) {
			t.Errorf("a write of the item meanwhile: %v; want a TransactionConflictException", err)
		}
		_, err = conn2.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putIn("locks", "b"), putIn("locks", "a")}})
		if got := fmt.Sprint(reasons(err)); got != "[None TransactionConflict]" {
			t.Errorf("a transaction including the item meanwhile: %v; want cancelled with [None TransactionConflict]", err)
		}
		if out, err := conn2.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("a")}); err != nil || out.Item != nil {
			t.Errorf("a read meanwhile: %v, %v; want no item yet", out, err)
		}
		start := time.Now()
		wg.Wait()
		if txErr != nil || time.Since(start) != time.Second {
			t.Fatalf("the held transaction: %v after %s; want success after the hold", txErr, time.Since(start))
		}
		if n := len(db.Items("locks")); n != 1 {
			t.Fatalf("%d items after the commit; want the transaction's one", n)
		}
		if _, err := conn2.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("a")}); err != nil {
			t.Errorf("a write after the commit: %v", err)
		}
	})
}

// LoseAnswersAndRetry: the first attempt lands, its answer is lost, the
// retry meets what it did. A conditional write fails with the item the
// first attempt wrote; an unconditional update applies twice; a
// transaction (one token for both attempts) applies once and succeeds.
// The call is counted once.
func TestLoseAnswersAndRetry(t *testing.T) {
	ctx := context.Background()
	db, conn, _ := setUp(t)
	conn.LoseAnswersAndRetry(3)
	mine := key("order")
	mine["by"] = &types.AttributeValueMemberS{Value: "me"}
	_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: mine,
		ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: map[string]string{"#k": "key"},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) || ccf.Item["by"].(*types.AttributeValueMemberS).Value != "me" {
		t.Fatalf("the retried conditional PutItem: %v; want a ConditionalCheckFailedException carrying its own first write", err)
	}
	if conn.Calls()["PutItem"] != 1 {
		t.Errorf("PutItem counted %d times; want once", conn.Calls()["PutItem"])
	}
	add := &dynamodb.UpdateItemInput{TableName: aws.String("locks"), Key: key("counter"), UpdateExpression: aws.String("ADD #n :one"),
		ExpressionAttributeNames: map[string]string{"#n": "n"}, ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}}}
	if _, err := conn.UpdateItem(ctx, add); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String("locks"), Key: key("tx-counter"), UpdateExpression: add.UpdateExpression,
			ExpressionAttributeNames: add.ExpressionAttributeNames, ExpressionAttributeValues: add.ExpressionAttributeValues}}}}); err != nil {
		t.Fatalf("the retried transaction: %v; want success (its token makes the retry a replay)", err)
	}
	counts := map[string]string{}
	for _, it := range db.Items("locks") {
		if n, ok := it["n"].(*types.AttributeValueMemberN); ok {
			counts[it["key"].(*types.AttributeValueMemberS).Value] = n.Value
		}
	}
	if counts["counter"] != "2" || counts["tx-counter"] != "1" {
		t.Errorf("counters %v; want counter 2 (an UpdateItem retried applies twice) and tx-counter 1", counts)
	}
}

// An acquisition whose first attempt landed and whose retry found the key
// held, by its own first attempt, gets the lock: the retry's
// ConditionalCheckFailedException carries the acquisition's own item.
func TestAcquireSurvivesItsOwnRetry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, c := setUp(t, dynamolock.WithOwnerName("me"))
		conn.LoseAnswersAndRetry(1)
		l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked())
		if err != nil {
			t.Fatalf("an acquisition whose retry met its own first write: %v", err)
		}
		items := db.Items("locks")
		if len(items) != 1 || items[0]["recordVersionNumber"].(*types.AttributeValueMemberS).Value != l.RecordVersionNumber() {
			t.Fatalf("the lock's RVN %s is not its item's: %v", l.RecordVersionNumber(), items)
		}
		if ok, err := c.ReleaseLockWithContext(ctx, l); !ok || err != nil {
			t.Fatalf("release: %v, %v", ok, err)
		}
	})
}
