package ddbmodel_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// What DynamoDB answers and DynamoDB Local never does (issue 37, item 8):
// transactions in progress, and the windows of time of tokens and TTL.
// These run on the model alone.

const txTable = "txns"

func newModelTable(t *testing.T) *ddbmodel.Model {
	t.Helper()
	m := ddbmodel.New()
	if _, err := m.CreateTable(context.Background(), &dynamodb.CreateTableInput{TableName: aws.String(txTable), BillingMode: types.BillingModePayPerRequest,
		KeySchema: []types.KeySchemaElement{hash(attrKey)}, AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}}); err != nil {
		t.Fatal(err)
	}
	return m
}

func putTx(k, v string) types.TransactWriteItem {
	return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(txTable), Item: item{attrKey: sv(k), "v": sv(v)}}}
}

func value(m *ddbmodel.Model, k string) string {
	it := m.Item(txTable, ddbmodel.KeyString(k, ""))
	if v, ok := it["v"].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return "<none>"
}

// TestTransactionInProgressMeetsWrites: between a transaction's two steps
// its items are in it. A PutItem, UpdateItem or DeleteItem on one fails
// with a TransactionConflictException and changes nothing; a transaction
// that includes one is cancelled with TransactionConflict for that member
// (None for the others); a GetItem sees the item as it was; writes of
// other items go on. After the commit the item takes writes again.
func TestTransactionInProgressMeetsWrites(t *testing.T) {
	ctx := context.Background()
	m := newModelTable(t)
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(txTable), Item: item{attrKey: sv("a"), "v": sv("0")}}); err != nil {
		t.Fatal(err)
	}
	held, err := m.PrepareTransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putTx("a", "tx"), putTx("b", "tx")}})
	if err != nil {
		t.Fatal(err)
	}
	conflict := func(what string, err error) {
		t.Helper()
		var tce *types.TransactionConflictException
		if !errors.As(err, &tce) || tce.ErrorMessage() != "Transaction is ongoing for the item" {
			t.Errorf("%s on an item in a transaction: %v; want a TransactionConflictException", what, err)
		}
	}
	_, err = m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(txTable), Item: item{attrKey: sv("a"), "v": sv("put")}})
	conflict("PutItem", err)
	_, err = m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(txTable), Key: item{attrKey: sv("b")},
		UpdateExpression: aws.String("SET #v = :v"), ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv("upd")}})
	conflict("UpdateItem", err)
	_, err = m.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(txTable), Key: item{attrKey: sv("a")}})
	conflict("DeleteItem", err)
	if got := value(m, "a"); got != "0" {
		t.Errorf("item a is %q while the transaction is in progress; want the value before it, 0", got)
	}
	out, err := m.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(txTable), Key: item{attrKey: sv("a")}})
	if err != nil || out.Item["v"].(*types.AttributeValueMemberS).Value != "0" {
		t.Errorf("GetItem during the transaction: %v %v; want the item before it", out, err)
	}
	_, err = m.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{putTx("c", "other"), putTx("b", "other")}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) || len(tce.CancellationReasons) != 2 ||
		aws.ToString(tce.CancellationReasons[0].Code) != "None" || aws.ToString(tce.CancellationReasons[1].Code) != "TransactionConflict" ||
		aws.ToString(tce.CancellationReasons[1].Message) != "Transaction is ongoing for the item" {
		t.Errorf("a transaction meeting another: %v; want cancelled with [None, TransactionConflict]", err)
	}
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(txTable), Item: item{attrKey: sv("d"), "v": sv("1")}}); err != nil {
		t.Errorf("a write of an item outside the transaction: %v", err)
	}
	if _, err := held.Commit(); err != nil {
		t.Fatal(err)
	}
	if got, gotC := value(m, "a"), value(m, "c"); got != "tx" || gotC != "<none>" {
		t.Errorf("after the commit a=%q c=%q; want a=tx and no c (its transaction was cancelled)", got, gotC)
	}
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(txTable), Item: item{attrKey: sv("a"), "v": sv("after")}}); err != nil {
		t.Errorf("a write after the commit: %v", err)
	}
}

// TestClientRequestTokens: within ten minutes of its commit a token makes
// the same request succeed without applying it again, and another request
// fail with IdempotentParameterMismatchException; while its transaction is
// in progress the same request fails with TransactionInProgressException;
// a cancelled transaction leaves its token free; ten minutes after the
// commit the token is new again.
func TestClientRequestTokens(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		m := newModelTable(t)
		req := func(tok string, items ...types.TransactWriteItem) *dynamodb.TransactWriteItemsInput {
			return &dynamodb.TransactWriteItemsInput{ClientRequestToken: aws.String(tok), TransactItems: items}
		}
		code := func(err error) string {
			if err == nil {
				return "ok"
			}
			return errClass(err)
		}
		step := func(what, want string, err error) {
			t.Helper()
			if got := code(err); got != want {
				t.Errorf("%s: %s (%v); want %s", what, got, err, want)
			}
		}
		_, err := m.TransactWriteItems(ctx, req("T", putTx("a", "1")))
		step("first use of T", "ok", err)
		if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(txTable), Item: item{attrKey: sv("a"), "v": sv("2")}}); err != nil {
			t.Fatal(err)
		}
		_, err = m.TransactWriteItems(ctx, req("T", putTx("a", "1")))
		step("T again", "ok", err)
		if got := value(m, "a"); got != "2" {
			t.Errorf("T again applied its write: a=%q, want 2", got)
		}
		_, err = m.TransactWriteItems(ctx, req("T", putTx("a", "3")))
		step("T with another item", "IdempotentParameterMismatchException", err)

		held, err := m.PrepareTransactWriteItems(ctx, req("U", putTx("b", "1")))
		step("U prepared", "ok", err)
		_, err = m.TransactWriteItems(ctx, req("U", putTx("b", "1")))
		step("U again while in progress", "TransactionInProgressException", err)
		_, err = m.TransactWriteItems(ctx, req("U", putTx("b", "9")))
		step("U with another item while in progress", "IdempotentParameterMismatchException", err)
		if _, err := held.Commit(); err != nil {
			t.Fatal(err)
		}
		_, err = m.TransactWriteItems(ctx, req("U", putTx("b", "1")))
		step("U again after its commit", "ok", err)

		fails := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(txTable), Key: item{attrKey: sv("none")},
			ConditionExpression: aws.String("attribute_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey}}}
		_, err = m.TransactWriteItems(ctx, req("V", putTx("c", "1"), fails))
		step("V cancelled", "TransactionCanceled", err)
		_, err = m.TransactWriteItems(ctx, req("V", putTx("c", "2")))
		step("V for another request after its cancellation", "ok", err)

		time.Sleep(10*time.Minute - time.Second)
		_, err = m.TransactWriteItems(ctx, req("T", putTx("a", "3")))
		step("T with another item just inside the window", "IdempotentParameterMismatchException", err)
		time.Sleep(time.Second)
		_, err = m.TransactWriteItems(ctx, req("T", putTx("a", "3")))
		step("T with another item once the window passed", "ok", err)
		if got := value(m, "a"); got != "3" {
			t.Errorf("T after its window: a=%q, want 3 (a new request)", got)
		}
	})
}

// TestTimeToLiveOnceAnHour: a table's TTL setting changes at most once an
// hour.
func TestTimeToLiveOnceAnHour(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := newModelTable(t)
		set := func(on bool) error {
			_, err := m.UpdateTimeToLive(context.Background(), &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(txTable),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(on)}})
			return err
		}
		if err := set(true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour - time.Second)
		if err := set(false); errClass(err) != "ValidationException" {
			t.Errorf("a second change within the hour: %v; want a ValidationException", err)
		}
		time.Sleep(time.Second)
		if err := set(false); err != nil {
			t.Errorf("a change an hour later: %v", err)
		}
	})
}
