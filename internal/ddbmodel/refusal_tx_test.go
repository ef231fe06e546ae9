package ddbmodel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// transactionCases: tokens (length, reuse within the idempotency window)
// and what a transaction's members may hold.
func transactionCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	known := func(name, want, diff string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, known: diff, send: send})
	}
	put := func(k, v string) types.TransactWriteItem {
		return types.TransactWriteItem{Put: &types.Put{TableName: aws.String(r.plain), Item: item{attrKey: sv(k), "v": sv(v)}}}
	}
	holds := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(r.plain), Key: r.key("tx-none"),
		ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey}}}
	fails := types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(r.plain), Key: r.key("tx-none"),
		ConditionExpression: aws.String("attribute_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey}}}
	tok := func(s string) string { return "ref-" + r.suffix + "-" + s }

	add("a token of 37 characters", invalid, tx(strings.Repeat("t", 37), put("tx0", "1")))
	known("an empty token", invalid, "empty-client-request-token", tx("", holds))
	add("token A commits", ok, tx(tok("A"), put("txA", "1")))
	add("the item of token A rewritten", ok, r.put("txA", item{"v": sv("2")}))
	add("token A again: nothing applied", ok, tx(tok("A"), put("txA", "1")))
	add("token A with another item", "IdempotentParameterMismatchException", tx(tok("A"), put("txA2", "1")))
	add("token A with another condition", "IdempotentParameterMismatchException", tx(tok("A"), put("txA", "1"), holds))
	add("token B cancelled", canceled, tx(tok("B"), put("txB", "1"), fails))
	add("token B the same again", canceled, tx(tok("B"), put("txB", "1"), fails))
	add("token B for another request", ok, tx(tok("B"), put("txB2", "1")))
	add("token B for a third", "IdempotentParameterMismatchException", tx(tok("B"), put("txB3", "1")))
	known("ReturnValuesOnConditionCheckFailure FOO in a transaction", invalid, "transaction-return-values-enum", tx("-",
		types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(r.plain), Key: r.key("tx-none"),
			ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey},
			ReturnValuesOnConditionCheckFailure: "FOO"}}))
	missing := types.TransactWriteItem{Update: &types.Update{TableName: aws.String(r.plain), Key: r.key("tx-upd"),
		UpdateExpression: aws.String("SET #a = #m + :one"), ExpressionAttributeNames: names{"#a": "a", "#m": "missing"},
		ExpressionAttributeValues: values{":one": nn("1")}}}
	known("an update of a missing attribute in a transaction", canceled, "transaction-update-cannot-apply", tx("-", missing, holds))
	known("an update of a missing attribute beside a failed condition", canceled, "transaction-update-cannot-apply", tx("-", missing, fails))
	known("ReturnConsumedCapacity SOME", invalid, "return-consumed-capacity-enum", func(ctx context.Context, db api) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.plain), Key: r.key("tx-none"), ReturnConsumedCapacity: "SOME"})
		return err
	})
	known("a transaction naming its table by ARN", ok, "transaction-table-arn", tx("-",
		types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{TableName: aws.String(localARN(r.plain)), Key: r.key("tx-none"),
			ConditionExpression: aws.String("attribute_not_exists(#k)"), ExpressionAttributeNames: names{"#k": attrKey}}}))
	known("an invalid document path in a transaction", canceled, "transaction-update-cannot-apply", tx("-",
		types.TransactWriteItem{Update: &types.Update{TableName: aws.String(r.plain), Key: r.key("tx-upd"),
			UpdateExpression: aws.String("SET #q.#w = :one"), ExpressionAttributeNames: names{"#q": "q", "#w": "w"},
			ExpressionAttributeValues: values{":one": nn("1")}}}))
	return cs
}

// tableCases: table names, capacity modes, and TTL's one change an hour.
func tableCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	known := func(name, want, diff string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, known: diff, send: send})
	}
	create := func(name string, mode types.BillingMode, pt *types.ProvisionedThroughput) func(context.Context, api) error {
		return func(ctx context.Context, db api) error {
			_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String(name), BillingMode: mode, ProvisionedThroughput: pt,
				KeySchema: []types.KeySchemaElement{hash(attrKey)}, AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}})
			return err
		}
	}
	bad := aws.String("bad name!")
	add("CreateTable of a name with a space", invalid, create("bad name!", types.BillingModePayPerRequest, nil))
	add("CreateTable of a name of 2 characters", invalid, create("ab", types.BillingModePayPerRequest, nil))
	add("GetItem of a table name with a space", invalid, func(ctx context.Context, db api) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: bad, Key: r.key("x")})
		return err
	})
	add("DescribeTable of a table name with a space", invalid, func(ctx context.Context, db api) error {
		_, err := db.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: bad})
		return err
	})
	add("UpdateItem of a table name with a space", invalid, func(ctx context.Context, db api) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: bad, Key: r.key("x")})
		return err
	})
	add("a transaction on a table name with a space", invalid, tx("-", types.TransactWriteItem{Put: &types.Put{TableName: bad, Item: r.key("x")}}))
	add("provisioned without a throughput", invalid, create("ref_prov_"+r.suffix, types.BillingModeProvisioned, nil))
	add("no capacity mode and no throughput", invalid, create("ref_prov_"+r.suffix, "", nil))
	add("a throughput of 0", invalid, create("ref_prov_"+r.suffix, types.BillingModeProvisioned,
		&types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(0), WriteCapacityUnits: aws.Int64(1)}))
	known("on-demand with a throughput", invalid, "pay-per-request-with-throughput", create("ref_ppr_"+r.suffix, types.BillingModePayPerRequest,
		&types.ProvisionedThroughput{ReadCapacityUnits: aws.Int64(1), WriteCapacityUnits: aws.Int64(1)}))
	ttl := func(on bool) func(context.Context, api) error {
		return func(ctx context.Context, db api) error {
			_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(r.numeric),
				TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String("ttl"), Enabled: aws.Bool(on)}})
			return err
		}
	}
	add("TTL enabled", ok, ttl(true))
	known("TTL disabled within the hour", invalid, "ttl-once-an-hour", ttl(false))
	return cs
}

// numbersAsStored checks the text of numbers as both stores return them:
// DynamoDB's plain decimal form.
func numbersAsStored(ctx context.Context, t *testing.T, d *tee, r refusalTables) {
	for _, n := range []string{"1E-130", "-1E-130", "1E125", "9.9999999999999999999999999999999999999E+125", "0.00012", "1.50",
		"-0", "-0.000", "1e2", "+5", ".5", "5.", "00012.3400", "1.234E-5", "123456789012345678901234567890123456780000", "12345E-10"} {
		if _, err := d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: item{attrKey: sv("stored"), "n": nn(n)}}); err != nil {
			t.Errorf("number %q: %v", n, err)
			continue
		}
		text := func(db api) string {
			out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.plain), Key: r.key("stored")})
			if err != nil {
				return err.Error()
			}
			if v, ok := out.Item["n"].(*types.AttributeValueMemberN); ok {
				return v.Value
			}
			return "?"
		}
		if m, l := text(d.model), text(d.local); m != l {
			t.Errorf("number %q is stored as %q by the model, %q by DynamoDB Local", n, m, l)
		}
	}
}

// queryAnswers compares what the tee does not: the order of a Query read
// backwards, and the counts of Select COUNT.
func queryAnswers(ctx context.Context, t *testing.T, d *tee, r refusalTables) {
	for _, s := range []string{"b", "c", "a"} {
		if _, err := d.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.sorted), Item: item{attrKey: sv("q"), attrSK: sv(s)}}); err != nil {
			t.Fatal(err)
		}
	}
	answer := func(db api, mod func(*dynamodb.QueryInput)) string {
		in := &dynamodb.QueryInput{TableName: aws.String(r.sorted), KeyConditionExpression: aws.String("#k = :k"),
			ExpressionAttributeNames: names{"#k": attrKey}, ExpressionAttributeValues: values{":k": sv("q")}}
		mod(in)
		out, err := db.Query(ctx, in)
		if err != nil {
			return err.Error()
		}
		var sks []string
		for _, it := range out.Items {
			sks = append(sks, it[attrSK].(*types.AttributeValueMemberS).Value)
		}
		return strings.Join(sks, ",") + " count " + string(rune('0'+out.Count)) + " more " + show(out.LastEvaluatedKey)
	}
	for name, mod := range map[string]func(*dynamodb.QueryInput){
		"backwards":          func(in *dynamodb.QueryInput) { in.ScanIndexForward = aws.Bool(false) },
		"backwards, limit 2": func(in *dynamodb.QueryInput) { in.ScanIndexForward, in.Limit = aws.Bool(false), aws.Int32(2) },
		"count":              func(in *dynamodb.QueryInput) { in.Select = types.SelectCount },
		"count, limit 2":     func(in *dynamodb.QueryInput) { in.Select, in.Limit = types.SelectCount, aws.Int32(2) },
	} {
		if m, l := answer(d.model, mod), answer(d.local, mod); m != l {
			t.Errorf("Query %s: the model answers %s, DynamoDB Local %s", name, m, l)
		}
	}
}
