package faults_test

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
	"github.com/arielsrv/dynamolock/v2/internal/faults"
)

// TestWrap checks the SDK-client wrapper against DynamoDB Local, started
// once for its subtests.
func TestWrap(t *testing.T) {
	ctx := context.Background()
	endpoint, stop, err := ddblocal.Endpoint(ctx)
	if err != nil {
		t.Fatalf("DynamoDB Local: %v", err)
	}
	t.Cleanup(stop)
	db, err := ddblocal.NewClient(ctx, endpoint)
	if err != nil {
		t.Fatal(err)
	}
	// A fresh name: a DynamoDB Local kept running between runs has the last one.
	table := "wrap_" + strconv.FormatUint(uint64(time.Now().UnixNano()), 36)
	_, err = db.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("key"), AttributeType: types.ScalarAttributeTypeS}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("key"), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		t.Fatal(err)
	}
	// add increments counter n of item key: a write whose every landing shows.
	add := func(key string) *dynamodb.UpdateItemInput {
		return &dynamodb.UpdateItemInput{
			TableName:                 aws.String(table),
			Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
			UpdateExpression:          aws.String("SET #t = :t ADD #n :one"),
			ExpressionAttributeNames:  map[string]string{"#n": "n", "#t": "tag"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":one": &types.AttributeValueMemberN{Value: "1"}, ":t": &types.AttributeValueMemberS{Value: key}},
			ReturnValues:              types.ReturnValueAllNew,
		}
	}
	count := func(t *testing.T, key string) int {
		t.Helper()
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := out.Item["n"].(*types.AttributeValueMemberN)
		if n == nil {
			return 0
		}
		v, _ := strconv.Atoi(n.Value)
		return v
	}

	t.Run("LoseAnswerLandsAndLooksLikeAResetConnection", func(t *testing.T) {
		r := &faults.Rule{Op: "UpdateItem", Match: faults.Sets("tag"), LoseAnswer: true, Times: 1}
		w := faults.Wrap(db, r)
		_, err := w.UpdateItem(ctx, add("lose"))
		if err == nil {
			t.Fatal("a call whose answer was lost succeeded")
		}
		if n := count(t, "lose"); n != 1 {
			t.Fatalf("the write landed %d times, want 1", n)
		}
		// The same shape as the SDK's error for a refused connection.
		real := refusedError(t)
		for _, e := range []error{real, err} {
			var rse *smithyhttp.RequestSendError
			var re *awshttp.ResponseError
			var oe *smithy.OperationError
			var ae smithy.APIError
			if !errors.As(e, &rse) || !errors.As(e, &re) || !errors.As(e, &oe) || errors.As(e, &ae) {
				t.Fatalf("%v (%T): want an OperationError around a ResponseError around a RequestSendError, and no API error", e, e)
			}
			if re.HTTPStatusCode() != 0 {
				t.Fatalf("%v: HTTP status %d, want 0", e, re.HTTPStatusCode())
			}
		}
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%v does not match ECONNRESET", err)
		}
		if w.Hits(r) != 1 {
			t.Fatalf("Hits = %d, want 1", w.Hits(r))
		}
		// Times: 1 — the next call goes through.
		if _, err := w.UpdateItem(ctx, add("lose")); err != nil || count(t, "lose") != 2 {
			t.Fatalf("second call: %v, count %d", err, count(t, "lose"))
		}
	})

	t.Run("DropNeverSends", func(t *testing.T) {
		w := faults.Wrap(db, &faults.Rule{Op: "UpdateItem", Drop: true})
		if _, err := w.UpdateItem(ctx, add("drop")); !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("got %v, want a lost connection", err)
		}
		if n := count(t, "drop"); n != 0 {
			t.Fatalf("a dropped write landed %d times", n)
		}
	})

	t.Run("ReplaySendsTwiceAndReturnsTheSecondAnswer", func(t *testing.T) {
		w := faults.Wrap(db, &faults.Rule{Op: "UpdateItem", Replay: true})
		out, err := w.UpdateItem(ctx, add("replay"))
		if err != nil {
			t.Fatal(err)
		}
		if n := out.Attributes["n"].(*types.AttributeValueMemberN).Value; n != "2" {
			t.Fatalf("the answer shows n = %s, want the second answer (2)", n)
		}
		if n := count(t, "replay"); n != 2 {
			t.Fatalf("the write landed %d times, want 2", n)
		}
		// A conditional write replayed: the second answer is the failure.
		put := &dynamodb.PutItemInput{
			TableName:                aws.String(table),
			Item:                     map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "replay-put"}},
			ConditionExpression:      aws.String("attribute_not_exists(#k)"),
			ExpressionAttributeNames: map[string]string{"#k": "key"},
		}
		w = faults.Wrap(db, &faults.Rule{Op: "PutItem", Replay: true})
		var ccf *types.ConditionalCheckFailedException
		if _, err := w.PutItem(ctx, put); !errors.As(err, &ccf) {
			t.Fatalf("got %v, want the second send's condition failure", err)
		}
	})

	t.Run("MatchPicksOnlyTheChosenCalls", func(t *testing.T) {
		r := &faults.Rule{Op: "UpdateItem", Match: faults.SetsS("tag", "picked"), Drop: true}
		w := faults.Wrap(db, r)
		if _, err := w.UpdateItem(ctx, add("other")); err != nil {
			t.Fatalf("a call the rule does not pick failed: %v", err)
		}
		if _, err := w.UpdateItem(ctx, add("picked")); err == nil {
			t.Fatal("the picked call went through")
		}
		if _, err := w.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "picked"}}}); err != nil {
			t.Fatalf("another operation failed: %v", err)
		}
		if w.Hits(r) != 1 {
			t.Fatalf("Hits = %d, want 1", w.Hits(r))
		}
	})

	t.Run("GateHoldsAWriteWhileAnotherLands", func(t *testing.T) {
		g := faults.NewGate()
		t.Cleanup(g.Open)
		landed := make(chan struct{})
		w := faults.Wrap(db, &faults.Rule{Op: "UpdateItem", Before: g.Wait, After: func(context.Context) { close(landed) }})
		// The held write sets tag "gate"; the other one, sent while it is
		// held, sets "other". The held one lands last.
		held := make(chan error, 1)
		go func() {
			in := add("gate")
			_, err := w.UpdateItem(ctx, in)
			held <- err
		}()
		select {
		case <-g.Arrived():
		case <-time.After(5 * time.Second):
			t.Fatal("the request never reached the gate")
		}
		other := add("gate")
		other.ExpressionAttributeValues[":t"] = &types.AttributeValueMemberS{Value: "other"}
		if _, err := db.UpdateItem(ctx, other); err != nil {
			t.Fatal(err)
		}
		select {
		case <-landed:
			t.Fatal("the held write landed before the gate opened")
		default:
		}
		g.Open()
		if err := <-held; err != nil {
			t.Fatal(err)
		}
		<-landed
		out, err := db.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "gate"}}})
		if err != nil {
			t.Fatal(err)
		}
		if tag := out.Item["tag"].(*types.AttributeValueMemberS).Value; tag != "gate" {
			t.Fatalf("tag %q: the held write did not land last", tag)
		}
	})

	t.Run("GateHonoursTheCallersContext", func(t *testing.T) {
		g := faults.NewGate()
		t.Cleanup(g.Open)
		w := faults.Wrap(db, &faults.Rule{Op: "UpdateItem", Before: g.Wait})
		cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err := w.UpdateItem(cctx, add("gate-ctx"))
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("got %v, want the context's error", err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("returned after %s", d)
		}
		if n := count(t, "gate-ctx"); n != 0 {
			t.Fatalf("a write held past its context landed %d times", n)
		}
	})

	t.Run("SleepDelaysTheRequest", func(t *testing.T) {
		w := faults.Wrap(db, &faults.Rule{Op: "GetItem", Before: faults.Sleep(150 * time.Millisecond)})
		start := time.Now()
		if _, err := w.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(table),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "x"}}}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < 150*time.Millisecond {
			t.Fatalf("a request delayed 150 ms took %s", d)
		}
	})

	t.Run("TransactWriteItemsGoThroughTheRules", func(t *testing.T) {
		r := &faults.Rule{Op: "TransactWriteItems", LoseAnswer: true}
		w := faults.Wrap(db, r)
		_, err := w.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			{Put: &types.Put{TableName: aws.String(table), Item: map[string]types.AttributeValue{
				"key": &types.AttributeValueMemberS{Value: "tx"}, "n": &types.AttributeValueMemberN{Value: "7"},
			}}},
		}})
		if !errors.Is(err, syscall.ECONNRESET) || count(t, "tx") != 7 {
			t.Fatalf("got %v and n = %d: want a lost answer after the write landed", err, count(t, "tx"))
		}
		if _, err := w.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)}); err != nil {
			t.Fatalf("DescribeTable: %v", err)
		}
		if _, err := w.Scan(ctx, &dynamodb.ScanInput{TableName: aws.String(table)}); err != nil {
			t.Fatalf("Scan: %v", err)
		}
		if w.Hits(r) != 1 {
			t.Fatalf("Hits = %d, want 1", w.Hits(r))
		}
	})
}

// refusedError is what the SDK returns when nothing listens on the port.
func refusedError(t *testing.T) error {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	db := client("http://"+addr, faults.Timeouts(time.Second, 1, time.Millisecond))
	err = getItem(context.Background(), db)
	if err == nil {
		t.Fatal("a call to a closed port succeeded")
	}
	return err
}

// narrow has only the methods dynamolock requires.
type narrow struct{ faults.API }

func TestWrapOptionalMethodsOfANarrowClient(t *testing.T) {
	w := faults.Wrap(narrow{})
	if _, err := w.TransactWriteItems(context.Background(), &dynamodb.TransactWriteItemsInput{}); !errors.Is(err, faults.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
	if _, err := w.Query(context.Background(), &dynamodb.QueryInput{}); !errors.Is(err, faults.ErrUnsupported) {
		t.Fatalf("got %v, want ErrUnsupported", err)
	}
}

func TestMatchReadsExpressionsByAttribute(t *testing.T) {
	in := &dynamodb.UpdateItemInput{
		UpdateExpression:    aws.String("SET #o = :o, #l = :l, #f = if_not_exists(#f, :base) + :one REMOVE #r, #x"),
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR attribute_exists(#r) OR #v2 = :stale"),
		ExpressionAttributeNames: map[string]string{
			"#o": "ownerName", "#l": "leaseDuration", "#f": "fencingToken", "#r": "isReleased",
			"#x": "leaseExpiresAt", "#pk": "key", "#v": "recordVersionNumber", "#v2": "other",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: "me"}, ":l": &types.AttributeValueMemberS{Value: "1s"},
		},
	}
	for _, tc := range []struct {
		name string
		m    func(any) bool
		want bool
	}{
		{"sets owner", faults.Sets("ownerName"), true},
		{"sets computed token", faults.Sets("fencingToken"), true},
		{"does not set isReleased", faults.Sets("isReleased"), false},
		{"lease is 1s", faults.SetsS("leaseDuration", "1s"), true},
		{"lease is not 4s", faults.SetsS("leaseDuration", "4s"), false},
		{"removes isReleased", faults.Removes("isReleased"), true},
		{"removes expiry", faults.Removes("leaseExpiresAt"), true},
		{"does not remove owner", faults.Removes("ownerName"), false},
		{"condition on key", faults.ConditionOn("key"), true},
		{"#v2 is not #v", faults.ConditionOn("recordVersionNumber"), false},
		{"all", faults.All(faults.Sets("ownerName"), faults.ConditionOn("isReleased")), true},
		{"not", faults.Not(faults.Sets("ownerName")), false},
		{"other input types", func(any) bool { return faults.Sets("ownerName")(&dynamodb.GetItemInput{}) }, false},
	} {
		if got := tc.m(in); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
	v, ok := faults.Assigned(in, "leaseDuration")
	if s, _ := v.(*types.AttributeValueMemberS); !ok || s == nil || s.Value != "1s" {
		t.Errorf("Assigned(leaseDuration) = %v, %v", v, ok)
	}
	if v, ok := faults.Assigned(in, "fencingToken"); !ok || v != nil {
		t.Errorf("Assigned(fencingToken) = %v, %v: want a computed value (nil, true)", v, ok)
	}
}
