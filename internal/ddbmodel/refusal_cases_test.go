package ddbmodel_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

const (
	invalid  = "ValidationException"
	ok       = "ok"
	canceled = "TransactionCanceled"
)

// refusalCases lists TestRefusals' requests, by kind of refusal.
func refusalCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	unsupported := func(name string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, unsupported: true, send: send})
	}
	one := values{":v": nn("1")}

	// Reserved words as plain names, anywhere in a path; words that are
	// not reserved.
	add("reserved word in a condition", invalid, r.cond("rw", "attribute_not_exists(Zone)", nil, nil))
	add("reserved word in an update", invalid, r.upd("rw", "SET counter = :v", nil, one))
	add("reserved word as a map member", invalid, r.upd("rw", "SET #a.zone = :v", names{"#a": "a"}, one))
	add("released is not reserved", ok, r.cond("rw1", "attribute_not_exists(released)", nil, nil))
	add("version is not reserved", ok, r.cond("rw2", "attribute_not_exists(version)", nil, nil))

	// Placeholder maps: empty, without an expression, with bad keys.
	add("empty ExpressionAttributeValues", invalid, r.cond("ph", "attribute_not_exists(#k)", names{"#k": attrKey}, values{}))
	add("empty ExpressionAttributeNames", invalid, r.cond("ph", "attribute_not_exists(k)", names{}, nil))
	add("both maps empty", invalid, r.cond("ph", "attribute_not_exists(k)", names{}, values{}))
	add("an empty map without an expression", ok, func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key("ph0"), ExpressionAttributeNames: names{}})
		return err
	})
	add("values without an expression", invalid, func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key("ph"), ExpressionAttributeValues: values{":v": sv("x")}})
		return err
	})
	add("names without an expression", invalid, func(ctx context.Context, db api) error {
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.plain), Key: r.key("ph"), ExpressionAttributeNames: names{"#v": "x"}})
		return err
	})
	add("a names key without #", invalid, r.cond("ph", "attribute_not_exists(#a)", names{"#a": "a", "b": "b"}, nil))
	add("a values key without :", invalid, r.cond("ph", "#a <> :v", names{"#a": "a"}, values{":v": sv("x"), "w": sv("y")}))
	add("a name placeholder of 255 bytes", ok, r.cond("ph1", "attribute_not_exists(#"+strings.Repeat("a", 254)+")", names{"#" + strings.Repeat("a", 254): "a"}, nil))
	add("a name placeholder of 256 bytes", invalid, r.cond("ph", "attribute_not_exists(#"+strings.Repeat("a", 255)+")", names{"#" + strings.Repeat("a", 255): "a"}, nil))
	add("a value placeholder of 256 bytes", invalid, r.cond("ph", "#a <> :"+strings.Repeat("a", 255), names{"#a": "a"}, values{":" + strings.Repeat("a", 255): sv("x")}))
	add("two unused names", invalid, r.cond("ph", "attribute_not_exists(#a)", names{"#a": "a", "#c": "c", "#b": "b"}, nil))

	// Sizes of what the placeholders stand for: 1 MB per expression, 2 MB
	// of values, 2 MB of names and values.
	add("an expression of 1 MB with its values", ok, r.substitutions(1048553))
	add("an expression past 1 MB with its values", invalid, r.substitutions(1048554))
	add("one value used three times", invalid, r.cond("subst", "#a <> :v AND #a <> :v AND #a <> :v", names{"#a": "a"}, values{":v": sv(strings.Repeat("x", 400000))}))
	add("values past 2 MB with names", invalid, r.twoExpressions(2097146))
	add("values past 2 MB", invalid, r.twoExpressions(2097149))

	cs = append(cs, numberCases(r)...)
	cs = append(cs, operandCases(r)...)
	cs = append(cs, queryCases(r)...)

	// Attribute values: sets, NULL, names, nesting.
	add("a string set with a duplicate", invalid, r.put("v", item{"ss": &types.AttributeValueMemberSS{Value: []string{"a", "a"}}}))
	add("a number set with a duplicate", invalid, r.put("v", item{"ns": &types.AttributeValueMemberNS{Value: []string{"1", "1.0"}}}))
	add("a binary set with a duplicate", invalid, r.put("v", item{"bs": &types.AttributeValueMemberBS{Value: [][]byte{{1}, {1}}}}))
	add("NULL false", invalid, r.put("v", item{"nl": &types.AttributeValueMemberNULL{Value: false}}))
	add("an empty attribute name", invalid, r.put("v", item{"": sv("x")}))
	add("maps 32 levels deep", ok, r.put("v1", item{"m": nested(31, false)}))
	add("maps 33 levels deep", invalid, r.put("v", item{"m": nested(32, false)}))
	add("lists 33 levels deep", invalid, r.put("v", item{"m": nested(32, true)}))
	add("an update nesting 33 levels deep", invalid, r.upd("v1", "SET #m.#n = :v", names{"#m": "m", "#n": "n"}, values{":v": nested(31, false)}))
	add("values: NULL false", invalid, r.cond("v", "#a <> :v", names{"#a": "a"}, values{":v": &types.AttributeValueMemberNULL{}}))
	add("values: a duplicate", invalid, r.cond("v", "#a <> :v", names{"#a": "a"}, values{":v": &types.AttributeValueMemberSS{Value: []string{"a", "a"}}}))
	add("values: an empty set", invalid, r.cond("v", "#a <> :v", names{"#a": "a"}, values{":v": &types.AttributeValueMemberSS{}}))
	add("values: nested 33 levels", ok, r.cond("v2", "#a <> :v", names{"#a": "a"}, values{":v": nested(32, false)}))

	// Return values.
	add("PutItem ReturnValues ALL_NEW", invalid, func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key("rv"), ReturnValues: types.ReturnValueAllNew})
		return err
	})
	add("DeleteItem ReturnValues UPDATED_NEW", invalid, func(ctx context.Context, db api) error {
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.plain), Key: r.key("rv"), ReturnValues: types.ReturnValueUpdatedNew})
		return err
	})
	add("UpdateItem ReturnValues FOO", invalid, func(ctx context.Context, db api) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.plain), Key: r.key("rv"), ReturnValues: "FOO"})
		return err
	})
	add("PutItem ReturnValuesOnConditionCheckFailure FOO", invalid, func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key("rv"), ReturnValuesOnConditionCheckFailure: "FOO"})
		return err
	})
	add("DeleteItem ReturnValuesOnConditionCheckFailure FOO", invalid, func(ctx context.Context, db api) error {
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.plain), Key: r.key("rv"), ReturnValuesOnConditionCheckFailure: "FOO"})
		return err
	})
	add("UpdateItem without an update expression", ok, func(ctx context.Context, db api) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.plain), Key: r.key("noexpr")})
		return err
	})

	cs = append(cs, tableCases(r)...)
	cs = append(cs, transactionCases(r)...)

	// The legacy parameters, which the model does not implement.
	unsupported("Expected", func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key("legacy"),
			Expected: map[string]types.ExpectedAttributeValue{attrKey: {Exists: aws.Bool(false)}}})
		return err
	})
	unsupported("AttributeUpdates", func(ctx context.Context, db api) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.plain), Key: r.key("legacy"),
			AttributeUpdates: map[string]types.AttributeValueUpdate{"a": {Value: sv("x"), Action: types.AttributeActionPut}}})
		return err
	})
	unsupported("AttributesToGet", func(ctx context.Context, db api) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.plain), Key: r.key("legacy"), AttributesToGet: []string{"a"}})
		return err
	})
	unsupported("KeyConditions", func(ctx context.Context, db api) error {
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(r.sorted), KeyConditions: map[string]types.Condition{
			attrKey: {ComparisonOperator: types.ComparisonOperatorEq, AttributeValueList: []types.AttributeValue{sv("p")}}}})
		return err
	})
	unsupported("ScanFilter", func(ctx context.Context, db api) error {
		_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.sorted), ScanFilter: map[string]types.Condition{
			attrKey: {ComparisonOperator: types.ComparisonOperatorNotNull}}})
		return err
	})
	unsupported("ConditionalOperator", func(ctx context.Context, db api) error {
		_, err := db.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.plain), Key: r.key("legacy"), ConditionalOperator: types.ConditionalOperatorAnd})
		return err
	})
	unsupported("a global secondary index", func(ctx context.Context, db api) error {
		_, err := db.CreateTable(ctx, &dynamodb.CreateTableInput{TableName: aws.String("ref_gsi_" + r.suffix), BillingMode: types.BillingModePayPerRequest,
			KeySchema: []types.KeySchemaElement{hash(attrKey)}, AttributeDefinitions: []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)},
			GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{IndexName: aws.String("g"), KeySchema: []types.KeySchemaElement{hash(attrKey)},
				Projection: &types.Projection{ProjectionType: types.ProjectionTypeAll}}}})
		return err
	})
	return cs
}

// numberCases: precision, range and syntax of numbers, where they are
// given and where an update computes them.
func numberCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	for _, c := range []struct{ n, want string }{
		{"123456789012345678901234567890123456789", invalid}, {"12345678901234567890123456789012345678", ok},
		{"123456789012345678901234567890123456780000", ok}, {"0.00012345678901234567890123456789012345678", ok},
		{"0.000123456789012345678901234567890123456789", invalid}, {"1E126", invalid}, {"-1E126", invalid},
		{"9.9999999999999999999999999999999999999E+125", ok}, {"1E-130", ok}, {"1E-131", invalid}, {"0E200", ok},
		{"+1", ok}, {" 1", invalid}, {"0x10", invalid}, {".5", ok}, {"5.", ok}, {"1_0", invalid}, {"", invalid}, {"1/2", invalid},
	} {
		add(fmt.Sprintf("the number %q", c.n), c.want, r.put("num", item{"n": nn(c.n)}))
	}
	add("a number set with 39 digits", invalid, r.put("num", item{"n": &types.AttributeValueMemberNS{Value: []string{"1", "123456789012345678901234567890123456789"}}}))
	add("a key of 39 digits", invalid, func(ctx context.Context, db api) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.numeric), Key: item{attrKey: nn("123456789012345678901234567890123456789")}})
		return err
	})
	add("a key that is not a number", invalid, func(ctx context.Context, db api) error {
		_, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.numeric), Key: item{attrKey: nn("abc")}})
		return err
	})
	add("a value of 39 digits", invalid, r.cond("num", "#a = :v", names{"#a": "a"}, values{":v": nn("123456789012345678901234567890123456789")}))
	add("a value past the range", invalid, r.cond("num", "#a = :v", names{"#a": "a"}, values{":v": nn("1E126")}))
	add("a value that is not a number", invalid, r.cond("num", "#a = :v", names{"#a": "a"}, values{":v": nn("abc")}))
	add("a sum of 39 digits", invalid, r.upd("num", "SET #a = :v + :v", names{"#a": "a"}, values{":v": nn("9.9999999999999999999999999999999999999E+125")}))
	add("a sum past the range", invalid, r.upd("num", "SET #a = :v + :v", names{"#a": "a"}, values{":v": nn("9E125")}))
	add("a sum of 40 digits", invalid, r.upd("num", "SET #a = :v + :w", names{"#a": "a"}, values{":v": nn("1E+30"), ":w": nn("0.000000001")}))
	add("a difference under the range", invalid, r.upd("num", "SET #a = :v - :w", names{"#a": "a"}, values{":v": nn("1E-130"), ":w": nn("1.5E-130")}))
	add("SET a large number", ok, r.upd("num", "SET #z = :v", names{"#z": "z"}, values{":v": nn("9E125")}))
	add("ADD past the range", invalid, r.upd("num", "ADD #z :v", names{"#z": "z"}, values{":v": nn("9E125")}))
	return cs
}

// operandCases: the operand types of ADD, +, comparisons, BETWEEN and
// begins_with.
func operandCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	for _, v := range []types.AttributeValue{sv("x"), &types.AttributeValueMemberBOOL{Value: true}, &types.AttributeValueMemberL{},
		&types.AttributeValueMemberB{Value: []byte{1}}, &types.AttributeValueMemberNULL{Value: true}, &types.AttributeValueMemberM{}} {
		add(fmt.Sprintf("ADD of %T to a missing attribute", v), invalid, r.upd("add", "ADD #s :v", names{"#s": "s"}, values{":v": v}))
	}
	add("ADD of a string set", ok, r.upd("add", "ADD #ss :v", names{"#ss": "ss"}, values{":v": &types.AttributeValueMemberSS{Value: []string{"a", "b"}}}))
	add("ADD to a string set", ok, r.upd("add", "ADD #ss :v", names{"#ss": "ss"}, values{":v": &types.AttributeValueMemberSS{Value: []string{"b", "c"}}}))
	add("ADD of a number set to a string set", invalid, r.upd("add", "ADD #ss :v", names{"#ss": "ss"}, values{":v": &types.AttributeValueMemberNS{Value: []string{"1"}}}))
	add("SET a number", ok, r.upd("add", "SET #n = :v, #s2 = :s", names{"#n": "num", "#s2": "str"}, values{":v": nn("1"), ":s": sv("x")}))
	add("ADD of a string to a number", invalid, r.upd("add", "ADD #n :v", names{"#n": "num"}, values{":v": sv("x")}))
	add("ADD of a number to a string", invalid, r.upd("add", "ADD #n :v", names{"#n": "str"}, values{":v": nn("1")}))
	add("ADD of a number to a number", ok, r.upd("add", "ADD #n :v", names{"#n": "num"}, values{":v": nn("2")}))
	add("a string plus a number", invalid, r.upd("add", "SET #a = :s + :n", names{"#a": "a"}, values{":s": sv("x"), ":n": nn("1")}))
	add("< on a boolean", invalid, r.cond("op", "#a < :b", names{"#a": "a"}, values{":b": &types.AttributeValueMemberBOOL{Value: true}}))
	add("begins_with of a number", invalid, r.cond("op", "begins_with(#a, :v)", names{"#a": "a"}, values{":v": nn("1")}))
	add("BETWEEN with bounds reversed", invalid, r.cond("op", "#a BETWEEN :hi AND :lo", names{"#a": "a"}, values{":lo": nn("1"), ":hi": nn("5")}))
	add("BETWEEN with bounds of two types", invalid, r.cond("op", "#a BETWEEN :lo AND :hi", names{"#a": "a"}, values{":lo": nn("1"), ":hi": sv("5")}))
	add("BETWEEN of strings", ok, r.cond("op", "attribute_not_exists(#a) OR #a BETWEEN :lo AND :hi", names{"#a": "a"}, values{":lo": sv("a"), ":hi": sv("b")}))
	add("two values compared", ok, r.cond("op1", ":a = :b", nil, values{":a": nn("1"), ":b": nn("1")}))
	parts := make([]string, 301)
	for i := range parts {
		parts[i] = fmt.Sprintf("x%d=:v+:v", i)
	}
	add("301 operators in an update", invalid, r.upd("op", "SET "+strings.Join(parts, ","), nil, values{":v": nn("1")}))
	add("300 operators in an update", ok, r.upd("op", "SET "+strings.Join(parts[:300], ","), nil, values{":v": nn("1")}))
	return cs
}

// queryCases: key conditions, Limit, Select.
func queryCases(r refusalTables) []refusal {
	var cs []refusal
	add := func(name, want string, send func(context.Context, api) error) {
		cs = append(cs, refusal{name: name, want: want, send: send})
	}
	pa := values{":k": sv("p"), ":a": sv("a")}
	for _, c := range []struct{ name, kc, want string }{
		{"a sort key <>", "#k = :k AND #s <> :a", invalid}, {"NOT", "#k = :k AND NOT #s = :a", invalid},
		{"OR", "#k = :k OR #s = :a", invalid}, {"IN", "#k = :k AND #s IN (:a)", invalid},
		{"begins_with", "#k = :k AND begins_with(#s, :a)", ok}, {"size", "#k = :k AND size(#s) > :a", invalid},
		{"the sort key first", "#s = :a AND #k = :k", ok}, {"parentheses", "(#k = :k) AND (#s > :a)", ok},
		{"the value first", ":k = #k AND #s > :a", ok}, {"the partition key with <", "#k < :k AND #s > :a", invalid},
		{"two sort key conditions", "#k = :k AND #s > :a AND #s < :a", invalid},
	} {
		add("Query: "+c.name, c.want, r.query(c.kc, pa, nil))
	}
	add("Query: the sort key alone", invalid, r.query("#s = :a", values{":a": sv("a")}, nil))
	add("Query: the partition key with < alone", invalid, r.query("#k < :k", values{":k": sv("p")}, nil))
	add("Query: two conditions on the sort key alone", invalid, r.query("#s > :a AND #s < :b", values{":a": sv("a"), ":b": sv("b")}, nil))
	add("Query: attribute_exists", invalid, r.query("#k = :k AND attribute_exists(#s)", values{":k": sv("p")}, nil))
	add("Query: a non-key attribute", invalid, func(ctx context.Context, db api) error {
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(r.sorted), KeyConditionExpression: aws.String("#k = :k AND #a = :a"),
			ExpressionAttributeNames: names{"#k": attrKey, "#a": "a"}, ExpressionAttributeValues: pa})
		return err
	})
	add("Query: a non-key attribute, no sort key", invalid, func(ctx context.Context, db api) error {
		_, err := db.Query(ctx, &dynamodb.QueryInput{TableName: aws.String(r.plain), KeyConditionExpression: aws.String("#k = :k AND #a = :a"),
			ExpressionAttributeNames: names{"#k": attrKey, "#a": "a"}, ExpressionAttributeValues: pa})
		return err
	})
	add("Query: a sort key value of another type", invalid, r.query("#k = :k AND #s > :a", values{":k": sv("p"), ":a": nn("1")}, nil))
	add("Query: a partition key value of another type", invalid, r.query("#k = :k", values{":k": nn("1")}, nil))
	add("Query: Limit 0", invalid, r.query("#k = :k", values{":k": sv("p")}, func(in *dynamodb.QueryInput) { in.Limit = aws.Int32(0) }))
	for _, sel := range []types.Select{types.SelectSpecificAttributes, types.SelectAllProjectedAttributes, "BOGUS"} {
		add("Query: Select "+string(sel), invalid, r.query("#k = :k", values{":k": sv("p")}, func(in *dynamodb.QueryInput) { in.Select = sel }))
	}
	add("Scan: Limit 0", invalid, func(ctx context.Context, db api) error {
		_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.sorted), Limit: aws.Int32(0)})
		return err
	})
	add("Scan: names without a filter", invalid, func(ctx context.Context, db api) error {
		_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.sorted), ExpressionAttributeNames: names{"#a": "a"}})
		return err
	})
	add("Scan: values without a filter", invalid, func(ctx context.Context, db api) error {
		_, err := db.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(r.sorted), ExpressionAttributeValues: values{":a": sv("a")}})
		return err
	})
	return cs
}
