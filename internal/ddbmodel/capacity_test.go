package ddbmodel_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// localARN is the ARN DynamoDB Local gives table name.
func localARN(name string) string { return "arn:aws:dynamodb:ddblocal:000000000000:table/" + name }

// blob is an item attribute of n bytes.
func blob(n int) types.AttributeValue { return &types.AttributeValueMemberB{Value: make([]byte, n)} }

// The capacity a request consumes, as the model answers when asked
// (ReturnConsumedCapacity TOTAL or INDEXES), checked against the
// Developer Guide's rules here and against DynamoDB Local through the tee
// (which compares every answer's consumed capacity): reads per 4 KB (half
// for an eventually consistent read, one for an item that does not
// exist), writes per 1 KB of the larger of the item before and after, a
// transaction twice its members. The known differences of DynamoDB Local
// (known_test.go) are each met once.
func TestConsumedCapacity(t *testing.T) {
	d := newTee(t)
	ctx := context.Background()
	table := fmt.Sprintf("cap_%d", rand.Uint32())
	if _, err := d.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(table), KeySchema: []types.KeySchemaElement{hash(attrKey)},
		AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}, BillingMode: types.BillingModePayPerRequest}); err != nil {
		t.Fatal(err)
	}
	arn := localARN(table)
	key := func(k string) item { return item{attrKey: sv(k)} }
	total := types.ReturnConsumedCapacityTotal
	units := func(what string, cc *types.ConsumedCapacity, want float64) {
		t.Helper()
		if cc == nil {
			t.Errorf("%s: no consumed capacity", what)
			return
		}
		if got := aws.ToFloat64(cc.CapacityUnits); got != want || aws.ToString(cc.TableName) != table {
			t.Errorf("%s: %v units of %q, want %v of %q", what, got, aws.ToString(cc.TableName), want, table)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// The tee returns DynamoDB Local's answer (and compares the model's
	// with it): the checks below read the model's.
	model := func() any {
		d.mu.Lock()
		defer d.mu.Unlock()
		return d.lastOut
	}

	// Writes: 1 KB units of the larger of before and after.
	_, err := d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: item{attrKey: sv("a"), "d": blob(1500)}, ReturnConsumedCapacity: total})
	must(err)
	units("PutItem of 1.5 KB", model().(*dynamodb.PutItemOutput).ConsumedCapacity, 2)
	_, err = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: key("a"), ReturnConsumedCapacity: total})
	must(err)
	units("PutItem replacing 1.5 KB with a key", model().(*dynamodb.PutItemOutput).ConsumedCapacity, 2)
	_, err = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(arn), Key: key("b"), UpdateExpression: aws.String("SET #d = :d"),
		ExpressionAttributeNames: names{"#d": "d"}, ExpressionAttributeValues: values{":d": blob(5000)}, ReturnConsumedCapacity: total})
	must(err)
	units("UpdateItem to 5 KB, by ARN", model().(*dynamodb.UpdateItemOutput).ConsumedCapacity, 5)
	_, err = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a"), UpdateExpression: aws.String("SET #v = :v"),
		ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv("x")}, ReturnConsumedCapacity: types.ReturnConsumedCapacityIndexes})
	must(err)
	u := model().(*dynamodb.UpdateItemOutput)
	units("UpdateItem of a small item, INDEXES", u.ConsumedCapacity, 1)
	if u.ConsumedCapacity.Table == nil || aws.ToFloat64(u.ConsumedCapacity.Table.CapacityUnits) != 1 {
		t.Errorf("INDEXES: the table's share is missing: %+v", u.ConsumedCapacity.Table)
	}
	_, err = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(table), Key: key("a"), UpdateExpression: aws.String("SET #v = :v"),
		ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv("y")}})
	must(err)
	if u := model().(*dynamodb.UpdateItemOutput); u.ConsumedCapacity != nil {
		t.Errorf("an UpdateItem that did not ask got %+v", u.ConsumedCapacity)
	}

	// Reads: 4 KB units, strongly consistent or not; an item that is not
	// there costs one.
	_, err = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("b"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
	must(err)
	units("a consistent GetItem of 5 KB", model().(*dynamodb.GetItemOutput).ConsumedCapacity, 2)
	_, err = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(arn), Key: key("b"), ReturnConsumedCapacity: total})
	must(err)
	units("an eventually consistent GetItem of 5 KB, by ARN", model().(*dynamodb.GetItemOutput).ConsumedCapacity, 1)
	_, err = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("none"), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
	must(err)
	units("a GetItem of no item", model().(*dynamodb.GetItemOutput).ConsumedCapacity, 1)
	_, err = d.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(arn), KeyConditionExpression: aws.String("#k = :k"),
		ExpressionAttributeNames: names{"#k": attrKey}, ExpressionAttributeValues: values{":k": sv("b")}, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
	must(err)
	units("a Query of 5 KB, by ARN", model().(*dynamodb.QueryOutput).ConsumedCapacity, 2)
	_, err = d.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(table), KeyConditionExpression: aws.String("#k = :k"),
		ExpressionAttributeNames: names{"#k": attrKey}, ExpressionAttributeValues: values{":k": sv("none")}, ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
	must(err)
	units("a Query of no item", model().(*dynamodb.QueryOutput).ConsumedCapacity, 1) // read-of-no-items
	_, err = d.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true), ReturnConsumedCapacity: total})
	must(err)
	units("a Scan of 5 KB and a small item", model().(*dynamodb.ScanOutput).ConsumedCapacity, 2)

	// A transaction: twice each member.
	_, err = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: total, TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(table), Key: key("t1"), UpdateExpression: aws.String("SET #v = :v"),
			ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv("1")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("b"), ConditionExpression: aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames: names{"#k": attrKey}}},
	}})
	must(err)
	tw := model().(*dynamodb.TransactWriteItemsOutput)
	if len(tw.ConsumedCapacity) != 1 {
		t.Fatalf("a transaction on one table: %d entries", len(tw.ConsumedCapacity))
	}
	units("a transaction of a small update and a check of 5 KB", &tw.ConsumedCapacity[0], 2*1+2*2)
	_, err = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{ReturnConsumedCapacity: total, TransactItems: []types.TransactWriteItem{
		{Update: &types.Update{TableName: aws.String(table), Key: key("t2"), UpdateExpression: aws.String("SET #v = :v"),
			ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv("1")}}},
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(table), Key: key("none"), ConditionExpression: aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: names{"#k": attrKey}}},
	}})
	must(err)
	units("a transaction of a small update and a check of no item", &model().(*dynamodb.TransactWriteItemsOutput).ConsumedCapacity[0], 2+2) // transaction-condition-check-of-no-item

	// A delete: the item it deleted; no item costs one.
	_, err = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("b"), ReturnConsumedCapacity: total})
	must(err)
	units("a DeleteItem of 5 KB", model().(*dynamodb.DeleteItemOutput).ConsumedCapacity, 5)
	_, err = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(table), Key: key("none")})
	must(err)
	if dl := model().(*dynamodb.DeleteItemOutput); dl.ConsumedCapacity != nil { // capacity-unasked
		t.Errorf("a DeleteItem that did not ask got %+v", dl.ConsumedCapacity)
	}

	// A value outside the enumeration is refused (DynamoDB Local accepts
	// it: return-consumed-capacity-enum, which TestRefusals meets).
	_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), Key: key("a"), ReturnConsumedCapacity: "SOME"})
	d.mu.Lock()
	if errClass(d.lastModel) != "ValidationException" {
		t.Errorf("ReturnConsumedCapacity SOME: %v", d.lastModel)
	}
	d.mu.Unlock()

	d.check(t)
	d.compareTables(t, table)
	for _, k := range knownCapacityDifferences {
		if d.known[k.name] == 0 {
			t.Errorf("known difference %s was not met", k.name)
		}
		t.Logf("known difference %s (met %d times): the model follows %s; DynamoDB Local %s", k.name, d.known[k.name], k.doc, k.local)
	}
}

// A conditional write whose condition fails consumes write capacity as if
// it had applied (the larger of the item and what it would have made), and
// its error cannot say so: the model counts it in ConsumedCapacity. So do
// the writes and reads that succeed; a cancelled transaction is not
// charged.
func TestFailedConditionalWritesAreCharged(t *testing.T) {
	m := ddbmodel.New()
	ctx := context.Background()
	if _, err := m.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("cap"), KeySchema: []types.KeySchemaElement{hash(attrKey)},
		AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}, BillingMode: types.BillingModePayPerRequest}); err != nil {
		t.Fatal(err)
	}
	charged := func(what string, wantRead, wantWrite float64) {
		t.Helper()
		if r, w := m.ConsumedCapacity("cap"); r != wantRead || w != wantWrite {
			t.Errorf("%s: %v read and %v write units consumed, want %v and %v", what, r, w, wantRead, wantWrite)
		}
	}
	if _, err := m.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("cap"), Item: item{attrKey: sv("k"), "d": blob(2500)}}); err != nil {
		t.Fatal(err)
	}
	charged("a 2.5 KB put", 0, 3)
	_, err := m.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String("cap"), Key: item{attrKey: sv("k")},
		UpdateExpression: aws.String("SET #v = :v"), ConditionExpression: aws.String("attribute_not_exists(#k)"),
		ExpressionAttributeNames: names{"#v": "v", "#k": attrKey}, ExpressionAttributeValues: values{":v": blob(2000)},
		ReturnConsumedCapacity: types.ReturnConsumedCapacityTotal})
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		t.Fatalf("the condition held: %v", err)
	}
	charged("a failed update that would have made 4.5 KB", 0, 3+5)
	_, err = m.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String("cap"), Key: item{attrKey: sv("none")},
		ConditionExpression: aws.String("attribute_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey}})
	if !errors.As(err, &ccf) {
		t.Fatalf("the condition held: %v", err)
	}
	charged("a failed delete of no item", 0, 3+5+1)
	_, err = m.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String("cap"), Key: item{attrKey: sv("k")}, ConditionExpression: aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: names{"#k": attrKey}}},
	}})
	var tce *types.TransactionCanceledException
	if !errors.As(err, &tce) {
		t.Fatalf("the transaction applied: %v", err)
	}
	charged("a cancelled transaction", 0, 9)
	if _, err := m.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("cap"), Key: item{attrKey: sv("k")}}); err != nil {
		t.Fatal(err)
	}
	charged("an eventually consistent read of 2.5 KB", 0.5, 9)
}

// Table ARNs: accepted wherever DynamoDB takes a table name but CreateTable
// (by the model and DynamoDB Local alike, which resolve one by its name),
// refused when malformed with the service's messages; a transaction naming
// its table by ARN is the known difference transaction-table-arn.
func TestTableARNs(t *testing.T) {
	d := newTee(t)
	ctx := context.Background()
	table := fmt.Sprintf("arn_%d", rand.Uint32())
	arn := localARN(table)
	create := func(name string) error {
		_, err := d.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), KeySchema: []types.KeySchemaElement{hash(attrKey)},
			AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}, BillingMode: types.BillingModePayPerRequest})
		return err
	}
	if err := create(arn); errClass(err) != "ValidationException" {
		t.Errorf("CreateTable by ARN: %v", err)
	}
	if err := create(table); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{arn, "arn:aws:dynamodb:us-west-2:123456789012:table/" + table} {
		dt, err := d.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil || aws.ToString(dt.Table.TableName) != table {
			t.Errorf("DescribeTable %s: %v", name, err)
		}
		if _, err := d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(name), Key: item{attrKey: sv("k")},
			UpdateExpression: aws.String("SET #v = :v"), ExpressionAttributeNames: names{"#v": "v"}, ExpressionAttributeValues: values{":v": sv(name)}}); err != nil {
			t.Errorf("UpdateItem %s: %v", name, err)
		}
	}
	for _, bad := range []string{
		"arn:aws:dynamodb:us-east-1:123456789012:tablex/" + table,
		"arn:aws-cn:dynamodb:cn-north-1:123456789012:table/" + table,
		"arn:aws:s3:::bucket",
		"arn:aws:dynamodb:us-east-1:123456789012:table/" + table + "/index/i",
		"arn:aws:dynamodb:us-east-1:123456789012:table/ab",
		"ARN:aws:dynamodb:us-east-1:123456789012:table/" + table,
	} {
		if _, err := d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(bad), Key: item{attrKey: sv("k")}}); errClass(err) != "ValidationException" {
			t.Errorf("GetItem %s: %v, want a ValidationException", bad, err)
		}
	}
	before := d.known["transaction-table-arn"]
	_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
		{ConditionCheck: &types.ConditionCheck{TableName: aws.String(arn), Key: item{attrKey: sv("k")}, ConditionExpression: aws.String("attribute_exists(#k)"),
			ExpressionAttributeNames: names{"#k": attrKey}}},
	}})
	if d.known["transaction-table-arn"] != before+1 {
		t.Errorf("a transaction by ARN: model %v; not the known difference", d.lastModel)
	}
	d.check(t)
	d.compareTables(t, table)
	if it := d.db.Items(table); len(it) != 1 || !strings.HasPrefix(it[0]["v"].(*types.AttributeValueMemberS).Value, "arn:aws:dynamodb:us-west-2") {
		t.Errorf("the item written by both ARNs: %v", it)
	}
}
