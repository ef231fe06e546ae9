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
)

// TestRefusals sends, through the tee, requests that DynamoDB refuses
// (issue 37, item 6: the fake must not say yes where DynamoDB says no), a
// few it accepts beside them, and the request shapes the model does not
// implement. Each answer is compared with DynamoDB Local's as in the
// differential test, and must be the one the case names: so a request both
// would wrongly accept fails here too. Where DynamoDB Local differs from
// the service's documentation the case names the known difference
// (known_test.go) it must show; the shapes the model does not implement
// must fail with its "ddbmodel: unsupported" ValidationException, whatever
// DynamoDB Local answers.
func TestRefusals(t *testing.T) {
	d := newTee(t)
	ctx := context.Background()
	r := newRefusalTables(t, d, fmt.Sprintf("%d", rand.Uint32()))
	var ran, unsupported int
	for _, c := range refusalCases(r) {
		if c.unsupported {
			unsupported++
			mErr := c.send(ctx, d.model)
			lErr := c.send(ctx, d.local)
			if errClass(mErr) != "ValidationException" || !strings.Contains(errMessage(mErr), "ddbmodel: unsupported") {
				t.Errorf("%s: the model answered %v; want its unsupported ValidationException", c.name, mErr)
			}
			t.Logf("unsupported %s: DynamoDB Local answers %s %q", c.name, errClass(lErr), errMessage(lErr))
			continue
		}
		ran++
		before := d.known[c.known]
		lErr := c.send(ctx, d)
		d.mu.Lock()
		mErr := d.lastModel
		d.mu.Unlock()
		if got := errClass(mErr); got != c.want {
			t.Errorf("%s: the model answered %s (%v); want %s", c.name, got, mErr, c.want)
		}
		if c.known != "" {
			if d.known[c.known] == before {
				t.Errorf("%s: not the known difference %s: model %v, DynamoDB Local %v", c.name, c.known, mErr, lErr)
			}
		} else if errClass(lErr) != c.want {
			t.Errorf("%s: DynamoDB Local answered %s (%v); the case says %s", c.name, errClass(lErr), lErr, c.want)
		}
	}
	// The AttributeUpdates case wrote this item in DynamoDB Local only.
	if _, err := d.local.DeleteItem(ctx, &dynamodb.DeleteItemInput{TableName: aws.String(r.plain), Key: r.key("legacy")}); err != nil {
		t.Fatal(err)
	}
	numbersAsStored(ctx, t, d, r)
	queryAnswers(ctx, t, d, r)
	d.check(t)
	d.compareTables(t, r.plain, r.sorted)
	for _, k := range knownDifferences {
		if d.known[k.name] == 0 {
			t.Errorf("known difference %s was not met", k.name)
		}
		t.Logf("known difference %s (met %d times): the model follows %s; DynamoDB Local %s", k.name, d.known[k.name], k.doc, k.local)
	}
	t.Logf("%d refusals and acceptances compared, %d unsupported shapes; calls by operation and outcome: %v", ran, unsupported, d.calls)
}

// refusal is one request of TestRefusals.
type refusal struct {
	name string
	send func(context.Context, api) error
	want string // the model's outcome class (errClass)
	// known: the known difference its answers must show (want is then
	// the model's); unsupported: a shape the model does not implement.
	known       string
	unsupported bool
}

// api is what TestRefusals sends requests to: the tee, or one side of it.
type api interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// refusalTables are the tables of TestRefusals: string keys, string keys
// with a sort key, number keys; suffix keeps runs apart.
type refusalTables struct {
	plain, sorted, numeric, suffix string
}

func newRefusalTables(t *testing.T, d *tee, suffix string) refusalTables {
	r := refusalTables{plain: "ref_plain_" + suffix, sorted: "ref_sorted_" + suffix, numeric: "ref_num_" + suffix, suffix: suffix}
	for _, tc := range []struct {
		name string
		keys []types.KeySchemaElement
		defs []types.AttributeDefinition
	}{
		{r.plain, []types.KeySchemaElement{hash(attrKey)}, []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS)}},
		{r.sorted, []types.KeySchemaElement{hash(attrKey), {AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange}},
			[]types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeS), def(attrSK, types.ScalarAttributeTypeS)}},
		{r.numeric, []types.KeySchemaElement{hash(attrKey)}, []types.AttributeDefinition{def(attrKey, types.ScalarAttributeTypeN)}},
	} {
		if _, err := d.CreateTable(context.Background(), &dynamodb.CreateTableInput{TableName: aws.String(tc.name), KeySchema: tc.keys,
			AttributeDefinitions: tc.defs, BillingMode: types.BillingModePayPerRequest}); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

func hash(name string) types.KeySchemaElement {
	return types.KeySchemaElement{AttributeName: aws.String(name), KeyType: types.KeyTypeHash}
}

func def(name string, typ types.ScalarAttributeType) types.AttributeDefinition {
	return types.AttributeDefinition{AttributeName: aws.String(name), AttributeType: typ}
}

// Shorthands for attribute values and request shapes.
func nn(n string) types.AttributeValue { return &types.AttributeValueMemberN{Value: n} }

type (
	names  = map[string]string
	values = map[string]types.AttributeValue
	item   = map[string]types.AttributeValue
)

func (r refusalTables) key(k string) item { return item{attrKey: sv(k)} }

// put writes it (given its key k) into the plain table.
func (r refusalTables) put(k string, it item) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		it[attrKey] = sv(k)
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: it})
		return err
	}
}

// cond is a conditional PutItem of an item of key k.
func (r refusalTables) cond(k, c string, n names, v values) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: r.key(k),
			ConditionExpression: aws.String(c), ExpressionAttributeNames: n, ExpressionAttributeValues: v})
		return err
	}
}

// upd is an UpdateItem of the item of key k.
func (r refusalTables) upd(k, u string, n names, v values) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.plain), Key: r.key(k),
			UpdateExpression: aws.String(u), ExpressionAttributeNames: n, ExpressionAttributeValues: v})
		return err
	}
}

// query is a Query of the sorted table.
func (r refusalTables) query(kc string, v values, mod func(*dynamodb.QueryInput)) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		in := &dynamodb.QueryInput{TableName: aws.String(r.sorted), KeyConditionExpression: aws.String(kc),
			ExpressionAttributeNames: names{"#k": attrKey}, ExpressionAttributeValues: v}
		if strings.Contains(kc, "#s") {
			in.ExpressionAttributeNames["#s"] = attrSK
		}
		if mod != nil {
			mod(in)
		}
		_, err := db.Query(ctx, in)
		return err
	}
}

// tx is a TransactWriteItems with token tok ("": none).
func tx(tok string, items ...types.TransactWriteItem) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		in := &dynamodb.TransactWriteItemsInput{TransactItems: items}
		if tok != "-" {
			in.ClientRequestToken = aws.String(tok)
		}
		_, err := db.TransactWriteItems(ctx, in)
		return err
	}
}

func nested(depth int, list bool) types.AttributeValue {
	var v types.AttributeValue = sv("x")
	for range depth {
		if list {
			v = &types.AttributeValueMemberL{Value: []types.AttributeValue{v}}
		} else {
			v = &types.AttributeValueMemberM{Value: item{"m": v}}
		}
	}
	return v
}

// substitutions is a conditional PutItem whose two values add up to total
// bytes: the condition expression counts 23 bytes besides them.
func (r refusalTables) substitutions(total int) func(context.Context, api) error {
	half := total / 2
	return r.cond("subst", "#a <> :v AND #a <> :w", names{"#a": "a"},
		values{":v": sv(strings.Repeat("x", half)), ":w": sv(strings.Repeat("y", total-half))})
}

// twoExpressions is an UpdateItem whose condition uses a value of 1,048,000
// bytes and whose update (an if_not_exists that keeps the item's value)
// uses one of total - 1,048,000: each expression stays under 1 MB.
func (r refusalTables) twoExpressions(total int) func(context.Context, api) error {
	return func(ctx context.Context, db api) error {
		const half = 1048000
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(r.plain), Item: item{attrKey: sv("two"), "a": sv("x")}}); err != nil {
			return err
		}
		_, err := db.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(r.plain), Key: r.key("two"),
			UpdateExpression: aws.String("SET #a = if_not_exists(#a, :w)"), ConditionExpression: aws.String("#a <> :v"),
			ExpressionAttributeNames:  names{"#a": "a"},
			ExpressionAttributeValues: values{":v": sv(strings.Repeat("x", half)), ":w": sv(strings.Repeat("y", total-half))}})
		return err
	}
}
