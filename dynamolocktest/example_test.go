package dynamolocktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// The lock library on the in-memory DB: create the table, take a lock,
// read its item and count the calls.
func Example() {
	ctx := context.Background()
	db := dynamolocktest.New()
	conn := db.Conn()
	c, err := dynamolock.New(conn, "locks", dynamolock.WithOwnerName("host-a"))
	if err != nil {
		panic(err)
	}
	defer c.Close()
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		panic(err)
	}

	lock, err := c.AcquireLockWithContext(ctx, "customer-42")
	if err != nil {
		panic(err)
	}
	for _, item := range db.Items("locks") {
		fmt.Println(item["key"].(*types.AttributeValueMemberS).Value, "held by", item["ownerName"].(*types.AttributeValueMemberS).Value)
	}
	fmt.Println("fencing token > 0:", lock.FencingToken() > 0)
	fmt.Println("UpdateItem calls:", conn.Calls()["UpdateItem"])
	// Output:
	// customer-42 held by host-a
	// fencing token > 0: true
	// UpdateItem calls: 1
}

// A leader that is cut off from DynamoDB steps down when its lease runs
// out (Done closes), and a standby takes over after one lease, with a
// higher fencing token. Examples run in real time, so the lease here is
// short; in a test, run the same code inside testing/synctest.Test with
// production leases (see the package documentation).
func Example_failover() {
	ctx := context.Background()
	db := dynamolocktest.New()
	hostA, hostB := db.Conn(), db.Conn()
	opts := []dynamolock.ClientOption{
		dynamolock.WithLeaseDuration(300 * time.Millisecond),
		dynamolock.WithHeartbeatPeriod(50 * time.Millisecond),
	}
	a, _ := dynamolock.New(hostA, "locks", opts...)
	defer a.Close()
	b, _ := dynamolock.New(hostB, "locks", opts...)
	defer b.Close()
	if _, err := a.CreateTableIfNotExists(ctx); err != nil {
		panic(err)
	}

	leader, err := a.AcquireLockWithContext(ctx, "leader")
	if err != nil {
		panic(err)
	}
	standby := make(chan *dynamolock.Lock)
	go func() {
		l, err := b.AcquireLockWithContext(ctx, "leader",
			dynamolock.WithRefreshPeriod(20*time.Millisecond),
			dynamolock.WithAdditionalTimeToWaitForLock(time.Minute))
		if err != nil {
			panic(err)
		}
		standby <- l
	}()

	hostA.Partition()
	<-leader.Done()
	fmt.Println("leader stepped down:", errors.Is(leader.Err(), dynamolock.ErrLockLost))
	next := <-standby
	fmt.Println("standby leads with a higher fencing token:", next.FencingToken() > leader.FencingToken())
	// Output:
	// leader stepped down: true
	// standby leads with a higher fencing token: true
}

// A worker fences its writes with Lock.TransactionCondition in its own
// TransactWriteItems. After it was cut off long enough for another worker
// to take its lock over, its write is refused, even though it still holds
// its *Lock value and has not yet noticed the loss.
func Example_guardedWrite() {
	ctx := context.Background()
	db := dynamolocktest.New()
	conn1, conn2 := db.Conn(), db.Conn()
	opts := []dynamolock.ClientOption{
		dynamolock.WithLeaseDuration(200 * time.Millisecond),
		dynamolock.WithHeartbeatPeriod(50 * time.Millisecond),
	}
	w1, _ := dynamolock.New(conn1, "locks", opts...)
	defer w1.Close()
	w2, _ := dynamolock.New(conn2, "locks", opts...)
	defer w2.Close()
	if _, err := w1.CreateTableIfNotExists(ctx); err != nil {
		panic(err)
	}
	// The worker's own table.
	if _, err := conn1.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("orders"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		panic(err)
	}
	write := func(conn *dynamolocktest.Conn, l *dynamolock.Lock, status string) error {
		_, err := conn.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			l.TransactionCondition(),
			{Put: &types.Put{TableName: aws.String("orders"), Item: map[string]types.AttributeValue{
				"id":     &types.AttributeValueMemberS{Value: "order-7"},
				"status": &types.AttributeValueMemberS{Value: status},
			}}},
		}})
		return err
	}

	l1, err := w1.AcquireLockWithContext(ctx, "order-7")
	if err != nil {
		panic(err)
	}
	conn1.Partition() // worker 1 is cut off (or paused)
	l2, err := w2.AcquireLockWithContext(ctx, "order-7", dynamolock.WithRefreshPeriod(20*time.Millisecond))
	if err != nil {
		panic(err)
	}
	conn1.Heal() // worker 1 is back, and writes with its old lock

	err = write(conn1, l1, "shipped by worker 1")
	var tce *types.TransactionCanceledException
	fmt.Println("worker 1's write refused:", errors.As(err, &tce))
	fmt.Println("worker 2's write:", write(conn2, l2, "shipped by worker 2"))
	fmt.Println("order-7:", db.Items("orders")[0]["status"].(*types.AttributeValueMemberS).Value)
	// Output:
	// worker 1's write refused: true
	// worker 2's write: <nil>
	// order-7: shipped by worker 2
}

// In production a write can land while its answer is lost; the SDK then
// sends it again, and the retry meets what the first attempt did. Code
// that creates an item "if absent" must read the condition failure's item
// to tell its own first attempt from another writer.
func ExampleConn_LoseAnswersAndRetry() {
	ctx := context.Background()
	db := dynamolocktest.New()
	conn := db.Conn()
	if _, err := conn.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String("orders"),
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeS}},
		BillingMode:          types.BillingModePayPerRequest,
	}); err != nil {
		panic(err)
	}
	createOrder := func(id, requestID string) error {
		_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String("orders"),
			Item: map[string]types.AttributeValue{
				"id":      &types.AttributeValueMemberS{Value: id},
				"request": &types.AttributeValueMemberS{Value: requestID},
			},
			ConditionExpression:                 aws.String("attribute_not_exists(id)"),
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		})
		var ccf *types.ConditionalCheckFailedException
		if errors.As(err, &ccf) && ccf.Item["request"].(*types.AttributeValueMemberS).Value == requestID {
			return nil // the item is this request's own first attempt
		}
		return err
	}

	conn.LoseAnswersAndRetry(1)
	fmt.Println("first request:", createOrder("order-7", "req-1"))
	fmt.Println("another request:", createOrder("order-7", "req-2") != nil)
	fmt.Println("items:", len(db.Items("orders")))
	// Output:
	// first request: <nil>
	// another request: true
	// items: 1
}
