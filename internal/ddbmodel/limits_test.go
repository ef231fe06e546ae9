package ddbmodel_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// TestLimits sends, through the tee, requests at and just past each
// DynamoDB limit that the library's requests can reach (limitShapes), and
// fails on any difference between the model and DynamoDB Local.
func TestLimits(t *testing.T) {
	d := newTee(t)
	suffix := fmt.Sprintf("%d", rand.Uint32())
	plain, sorted := "lim_plain_"+suffix, "lim_sorted_"+suffix
	admin, err := dynamolock.New(d, plain)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := admin.CreateTableWithContext(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateTableWithContext(ctx, sorted, dynamolock.WithSortKeyName(attrSK)); err != nil {
		t.Fatal(err)
	}
	_ = admin.Close()
	n := limitShapes(ctx, d, plain, sorted)
	d.check(t)
	d.compareTables(t, plain, sorted)
	t.Logf("%d requests at and past the limits; calls by operation and outcome: %v", n, d.calls)
}

// limitShapes sends requests at and one past each limit: operands of IN
// (100), expression strings (4 KB), key values (partition 2048 bytes, sort
// 1024), attribute names (64 KB), item size (400 KB), transaction members
// (100) and size (4 MB), and plain attribute names that are reserved
// words. It returns how many it sent.
func limitShapes(ctx context.Context, d *tee, plain, sorted string) int {
	s := func(v string) *types.AttributeValueMemberS { return &types.AttributeValueMemberS{Value: v} }
	key := func(k string) map[string]types.AttributeValue { return map[string]types.AttributeValue{attrKey: s(k)} }
	sent := 0

	// IN with 100 and 101 operands, in UpdateItem and in a transaction's
	// Update (a heartbeat's and a guarded refresh's condition).
	inCond := func(n int) (string, map[string]types.AttributeValue) {
		vals := map[string]types.AttributeValue{":a": s("x")}
		var ops []string
		for i := range n {
			ops = append(ops, fmt.Sprintf(":v%d", i))
			vals[fmt.Sprintf(":v%d", i)] = s(fmt.Sprintf("rvn-%d", i))
		}
		return "attribute_not_exists(#r) OR #r IN (" + strings.Join(ops, ", ") + ")", vals
	}
	for _, n := range []int{1, 100, 101, 150} {
		cond, vals := inCond(n)
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key("lim-in"),
			UpdateExpression: aws.String("SET #a = :a"), ConditionExpression: aws.String(cond),
			ExpressionAttributeNames: map[string]string{"#a": "a", "#r": "recordVersionNumber"}, ExpressionAttributeValues: vals})
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Update: &types.Update{TableName: aws.String(plain), Key: key("lim-in-tx"),
				UpdateExpression: aws.String("SET #a = :a"), ConditionExpression: aws.String(cond),
				ExpressionAttributeNames: map[string]string{"#a": "a", "#r": "recordVersionNumber"}, ExpressionAttributeValues: vals}},
		}})
		sent += 2
	}

	// Expression strings of 4096 and 4097 bytes (condition, update).
	pad := func(expr string, size int) string { return expr + strings.Repeat(" ", size-len(expr)) }
	for _, size := range []int{4096, 4097} {
		cond := "attribute_not_exists(#k)"
		for len(cond)+len(" OR attribute_not_exists(#k)") < size-8 {
			cond += " OR attribute_not_exists(#k)"
		}
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key("lim-expr"),
			UpdateExpression: aws.String("SET #a = :a"), ConditionExpression: aws.String(pad(cond, size)),
			ExpressionAttributeNames:  map[string]string{"#a": "a", "#k": attrKey},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key("lim-expr"),
			UpdateExpression:          aws.String(pad("SET #a = :a", size)),
			ExpressionAttributeNames:  map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("y")}})
		_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(plain), Item: key("lim-expr-put"),
			ConditionExpression: aws.String(pad("attribute_not_exists(#k)", size)), ExpressionAttributeNames: map[string]string{"#k": attrKey}})
		sent += 3
	}

	// Key values: partition key 2048 bytes, sort key 1024 (bytes of UTF-8:
	// "é" is two).
	for _, pk := range []string{strings.Repeat("p", 2048), strings.Repeat("p", 2049), strings.Repeat("é", 1024), strings.Repeat("é", 1024) + "p"} {
		_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(plain), Item: key(pk)})
		_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(plain), Key: key(pk), ConsistentRead: aws.Bool(true)})
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key(pk),
			UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
		_, _ = d.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(plain), Key: key(pk)})
		sent += 4
	}
	for _, sk := range []string{strings.Repeat("s", 1024), strings.Repeat("s", 1025), strings.Repeat("é", 512) + "s"} {
		k := map[string]types.AttributeValue{attrKey: s("lim-sk"), attrSK: s(sk)}
		_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(sorted), Item: k})
		_, _ = d.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(sorted), Key: k, ConsistentRead: aws.Bool(true)})
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(sorted), Key: k,
			UpdateExpression: aws.String("SET #a = :a"), ExpressionAttributeNames: map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
		sent += 3
	}

	// Attribute names of 255 and 256 bytes in an item, and of 255, 256,
	// 65,535 and 65,536 bytes behind a name placeholder. (DynamoDB Local
	// 3.3.1 answers a PutItem with an attribute name of 65,535 bytes with a
	// 500, and a table holding such a name can no longer be scanned.)
	for _, n := range []int{255, 256, 65535, 65536} {
		name := strings.Repeat("n", n)
		if n < 1000 {
			it := key(fmt.Sprintf("lim-name-%d", n))
			it[name] = s("v")
			_, _ = d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(plain), Item: it})
			sent++
		}
		// In a condition only: stored, such a name breaks DynamoDB Local's Scan.
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key(fmt.Sprintf("lim-name-u%d", n)),
			UpdateExpression: aws.String("SET #b = :a"), ConditionExpression: aws.String("attribute_not_exists(#a)"),
			ExpressionAttributeNames:  map[string]string{"#a": name, "#b": "b"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
		sent++
	}

	// Transactions of 100 and 101 members, and of about 3.9 and 4.3 MB.
	for _, n := range []int{100, 101} {
		var items []types.TransactWriteItem
		for i := range n {
			items = append(items, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(plain),
				Key: key(fmt.Sprintf("lim-tx-%d", i)), ConditionExpression: aws.String("attribute_not_exists(#k)"),
				ExpressionAttributeNames: map[string]string{"#k": attrKey}}})
		}
		items[0] = types.TransactWriteItem{Put: &types.Put{TableName: aws.String(plain), Item: key(fmt.Sprintf("lim-tx-%d-put", n))}}
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		sent++
	}
	big := strings.Repeat("b", 390*1024)
	for _, n := range []int{10, 11} {
		var items []types.TransactWriteItem
		for i := range n {
			it := key(fmt.Sprintf("lim-txsize-%d-%d", n, i))
			it["d"] = s(big)
			items = append(items, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(plain), Item: it}})
		}
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		sent++
	}

	for _, n := range []int{10, 11} {
		var upd, chk []types.TransactWriteItem
		for i := range n {
			upd = append(upd, types.TransactWriteItem{Update: &types.Update{TableName: aws.String(plain),
				Key: key(fmt.Sprintf("lim-txupd-%d-%d", n, i)), UpdateExpression: aws.String("SET #d = :d"),
				ExpressionAttributeNames: map[string]string{"#d": "d"}, ExpressionAttributeValues: map[string]types.AttributeValue{":d": s(big)}}})
			chk = append(chk, types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(plain),
				Key: key(fmt.Sprintf("lim-txchk-%d-%d", n, i)), ConditionExpression: aws.String("attribute_not_exists(#d) OR #d <> :d"),
				ExpressionAttributeNames: map[string]string{"#d": "d"}, ExpressionAttributeValues: map[string]types.AttributeValue{":d": s(big)}}})
		}
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: upd})
		_, _ = d.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: chk})
		sent += 2
	}

	// Plain attribute names that are reserved words, and ones that are not.
	for _, name := range []string{"key", "owner", "data", "ttl", "recordVersionNumber", "fencingToken", "leaseDuration", "isReleased"} {
		_, _ = d.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(plain), Key: key("lim-word"),
			UpdateExpression: aws.String("SET #a = :a"), ConditionExpression: aws.String("attribute_not_exists(" + name + ")"),
			ExpressionAttributeNames:  map[string]string{"#a": "a"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":a": s("x")}})
		sent++
	}
	return sent
}
