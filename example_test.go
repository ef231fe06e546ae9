package dynamolock_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"math/rand/v2"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/logging"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// exampleDB stands for dynamodb.NewFromConfig(cfg) in the examples: here it
// points at the DynamoDB Local the tests run against.
func exampleDB() *dynamodb.Client {
	db, err := ddblocal.NewClient(context.Background(), endpoint)
	if err != nil {
		log.Fatal(err)
	}
	return db
}

// exampleConfig stands for the aws.Config a program loads with
// config.LoadDefaultConfig: here it points at the DynamoDB Local the tests
// run against.
func exampleConfig() aws.Config {
	return aws.Config{
		Region:       ddblocal.Region,
		Credentials:  credentials.NewStaticCredentialsProvider(ddblocal.AccessKey, ddblocal.SecretKey, ""),
		BaseEndpoint: aws.String(endpoint),
		Logger:       logging.Nop{},
	}
}

// exampleTable returns a table name not used before on this endpoint.
func exampleTable(name string) string { return name + "-" + strconv.Itoa(int(rand.Uint32())) }

// The quick start: make sure the table exists, acquire a lock with data,
// release it. It runs unchanged any number of times against the same
// table (TestQuickStartRunsTwice).
func Example() {
	ctx := context.Background()
	cfg := exampleConfig()

	// snippet:quick-start-client
	c, err := dynamolock.New(dynamodb.NewFromConfig(cfg), "locks",
		dynamolock.WithLeaseDuration(3*time.Second),
		dynamolock.WithHeartbeatPeriod(1*time.Second),
	)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	// Create the table unless it exists; if it does, check its key schema.
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		log.Fatal(err)
	}
	// snippet:end

	// snippet:quick-start-lock
	lock, err := c.AcquireLockWithContext(ctx, "spock",
		dynamolock.WithData([]byte("some content a")),
		dynamolock.ReplaceData(),
	)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("lock content:", string(lock.Data()))

	// ... do work while holding the lock ...

	ok, err := c.ReleaseLockWithContext(ctx, lock)
	if err != nil {
		log.Fatal("error releasing lock: ", err)
	}
	if !ok {
		log.Fatal("lost lock before release")
	}
	// snippet:end
	fmt.Println("released:", ok)
	// Output:
	// lock content: some content a
	// released: true
}

// Against DynamoDB Local (or any endpoint of your own), set the endpoint,
// and turn off the SDK's response checksum validation: DynamoDB Local sends
// no checksum with error answers, and the SDK would log a warning for each
// failed conditional write (every contended acquisition makes some).
func Example_dynamoDBLocal() {
	ctx := context.Background()
	cfg := exampleConfig()
	cfg.BaseEndpoint = nil

	// snippet:local-endpoint
	db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) {
		o.BaseEndpoint = aws.String(endpoint) // e.g. "http://localhost:8000"
		o.DisableValidateResponseChecksum = true
	})
	// snippet:end

	c, err := dynamolock.New(db, "locks")
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.AssertTableExists(ctx))
	// Output: <nil>
}

// Do runs a function under a lock, with a context that is cancelled if the
// lock is lost, and releases the lock afterwards.
func ExampleClient_Do() {
	ctx := context.Background()
	table := exampleTable("jobs")
	c, err := dynamolock.New(exampleDB(), table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		log.Fatal(err)
	}

	// snippet:do
	err = c.Do(ctx, "customer-42", func(ctx context.Context, lock *dynamolock.Lock) error {
		// Long work checks ctx: it is cancelled, with the reason as its
		// cause, the moment the lock is lost.
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		default:
		}
		fmt.Println("working on customer-42; fencing token issued:", lock.FencingToken() > 0)
		return nil
	}, dynamolock.FailIfLocked()) // held by a live owner: return at once instead of waiting
	// snippet:end
	fmt.Println("err:", err)
	// Output:
	// working on customer-42; fencing token issued: true
	// err: <nil>
}

// Sort keys per lock: one client locks several jobs of one tenant, each
// under its own sort key value, as Amazon's Java client's withSortKey does.
func ExampleWithSortKeyValue() {
	ctx := context.Background()
	table := exampleTable("tenants")
	// snippet:sort-keys
	// The client names the table's sort key; "" gives no default value, so
	// every acquisition says which one it locks.
	c, err := dynamolock.New(exampleDB(), table, dynamolock.WithSortKey("job", ""))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableIfNotExists(ctx, dynamolock.WithSortKeyName("job")); err != nil {
		log.Fatal(err)
	}
	nightly, err := c.AcquireLockWithContext(ctx, "tenant-7", dynamolock.WithSortKeyValue("nightly-export"))
	if err != nil {
		log.Fatal(err)
	}
	reindex, err := c.AcquireLockWithContext(ctx, "tenant-7", dynamolock.WithSortKeyValue("reindex"),
		dynamolock.WithLockLease(time.Minute)) // this lock's own lease
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(nightly.SortKey(), reindex.SortKey(), reindex.LeaseDuration())
	fmt.Println("holds tenant-7/reindex:", c.HasLock("tenant-7", "reindex"))
	// snippet:end
	// Output:
	// nightly-export reindex 1m0s
	// holds tenant-7/reindex: true
}

// Guarded writes: move money between two accounts only while the lock is
// still held by this acquisition. If the lock changed hands (this process
// was paused past its lease, say), the transaction is cancelled instead of
// racing the new holder.
func ExampleLock_TransactionCondition() {
	ctx := context.Background()
	db := exampleDB()
	table := exampleTable("bank")
	c, err := dynamolock.New(db, table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}
	for _, acct := range []string{"alice", "bob"} {
		if _, err := db.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(table), Item: map[string]types.AttributeValue{
			"key": &types.AttributeValueMemberS{Value: "account#" + acct}, "balance": &types.AttributeValueMemberN{Value: "100"},
		}}); err != nil {
			log.Fatal(err)
		}
	}

	lock, err := c.AcquireLockWithContext(ctx, "accounts")
	if err != nil {
		log.Fatal(err)
	}
	move := func(from, to string, amount int) error {
		n := &types.AttributeValueMemberN{Value: strconv.Itoa(amount)}
		_, err := db.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: []types.TransactWriteItem{
			lock.TransactionCondition(),
			{Update: &types.Update{TableName: aws.String(table),
				Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "account#" + from}},
				UpdateExpression:          aws.String("SET balance = balance - :n"),
				ConditionExpression:       aws.String("balance >= :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": n}}},
			{Update: &types.Update{TableName: aws.String(table),
				Key:                       map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: "account#" + to}},
				UpdateExpression:          aws.String("SET balance = balance + :n"),
				ExpressionAttributeValues: map[string]types.AttributeValue{":n": n}}},
		}})
		return err
	}
	fmt.Println("transfer while held:", move("alice", "bob", 30))

	if _, err := c.ReleaseLockWithContext(ctx, lock); err != nil {
		log.Fatal(err)
	}
	var tce *types.TransactionCanceledException
	fmt.Println("transfer after release cancelled:", errors.As(move("alice", "bob", 30), &tce))
	// Output:
	// transfer while held: <nil>
	// transfer after release cancelled: true
}

// Fencing: a downstream store keeps the highest token it has seen and
// rejects writes that carry a lower one, so a holder that lost its lock
// without noticing cannot overwrite the new holder's work.
func ExampleLock_FencingToken() {
	ctx := context.Background()
	db := exampleDB()
	table := exampleTable("fenced")
	c, err := dynamolock.New(db, table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	// The store: one item whose write is conditioned on the token.
	write := func(token uint64, value string) error {
		_, err := db.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(table),
			Item: map[string]types.AttributeValue{
				"key":   &types.AttributeValueMemberS{Value: "report"},
				"token": &types.AttributeValueMemberN{Value: strconv.FormatUint(token, 10)},
				"value": &types.AttributeValueMemberS{Value: value},
			},
			ConditionExpression:       aws.String("attribute_not_exists(#t) OR #t < :t"),
			ExpressionAttributeNames:  map[string]string{"#t": "token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":t": &types.AttributeValueMemberN{Value: strconv.FormatUint(token, 10)}},
		})
		return err
	}

	first, err := c.AcquireLockWithContext(ctx, "report-writer")
	if err != nil {
		log.Fatal(err)
	}
	staleToken := first.FencingToken()
	if _, err := c.ReleaseLockWithContext(ctx, first); err != nil {
		log.Fatal(err)
	}
	second, err := c.AcquireLockWithContext(ctx, "report-writer")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("new holder writes:", write(second.FencingToken(), "fresh"))
	var ccf *types.ConditionalCheckFailedException
	fmt.Println("stale holder rejected:", errors.As(write(staleToken, "stale"), &ccf))
	// Output:
	// new holder writes: <nil>
	// stale holder rejected: true
}

// Leader election: one client campaigns, leads, changes its value in
// place and resigns. Leadership is a lock: watch lock.Done() and fence the
// leader's writes with lock.FencingToken() or lock.TransactionCondition().
func ExampleElection() {
	ctx := context.Background()
	table := exampleTable("election")
	c, err := dynamolock.New(exampleDB(), table, dynamolock.WithOwnerName("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	e := c.NewElection("scheduler")
	lock, err := e.Campaign(ctx, []byte("10.0.0.1:8080")) // blocks until this client leads
	if err != nil {
		log.Fatal(err)
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("leader:", leader.Owner, string(leader.Value))

	if err := e.Proclaim(ctx, []byte("10.0.0.1:9090")); err != nil {
		log.Fatal(err)
	}
	leader, _ = e.Leader(ctx)
	fmt.Println("same term, new value:", leader.FencingToken == lock.FencingToken(), string(leader.Value))

	if err := e.Resign(ctx); err != nil {
		log.Fatal(err)
	}
	_, err = e.Leader(ctx)
	fmt.Println("no leader after resigning:", errors.Is(err, dynamolock.ErrNoLeader))
	fmt.Println("leadership lock released:", errors.Is(lock.Err(), dynamolock.ErrLockAlreadyReleased))
	// Output:
	// leader: node-1 10.0.0.1:8080
	// same term, new value: true 10.0.0.1:9090
	// no leader after resigning: true
	// leadership lock released: true
}

// Observe follows an election from any client: the current leader first,
// then every change of leader or value, polled once a second.
func ExampleElection_Observe() {
	ctx := context.Background()
	db := exampleDB()
	table := exampleTable("observed")
	node, err := dynamolock.New(db, table, dynamolock.WithOwnerName("node-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer node.Close()
	watcher, err := dynamolock.New(db, table)
	if err != nil {
		log.Fatal(err)
	}
	defer watcher.Close()
	if _, err := node.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	e := node.NewElection("scheduler")
	if _, err := e.Campaign(ctx, []byte("v1")); err != nil {
		log.Fatal(err)
	}
	octx, stop := context.WithCancel(ctx)
	leaders := watcher.NewElection("scheduler").Observe(octx)
	ld := <-leaders
	fmt.Println(ld.Owner, string(ld.Value))

	if err := e.Proclaim(ctx, []byte("v2")); err != nil {
		log.Fatal(err)
	}
	ld = <-leaders
	fmt.Println(ld.Owner, string(ld.Value))
	stop()
	for range leaders { // closed once octx ends
	}
	// Output:
	// node-1 v1
	// node-1 v2
}

// All-or-nothing: take both accounts' locks in one transaction, or wait
// without holding either. Another client asking for them in the other
// order cannot deadlock with this one.
func ExampleClient_AcquireLocks() {
	ctx := context.Background()
	table := exampleTable("accounts")
	c, err := dynamolock.New(exampleDB(), table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	locks, err := c.AcquireLocks(ctx, []string{"account#bob", "account#alice"})
	if err != nil {
		log.Fatal(err)
	}
	for _, l := range locks { // in the order asked for
		fmt.Println("holding", l.PartitionKey())
	}
	// ... move money, putting every lock's TransactionCondition() in the
	// same TransactWriteItems as the transfer ...
	for _, l := range locks {
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			log.Fatal(err)
		}
	}
	// Output:
	// holding account#bob
	// holding account#alice
}

// A semaphore of size 2: at most two holders at once, across every client
// of the table. FailIfLocked returns at once when every slot is taken.
func ExampleSemaphore() {
	ctx := context.Background()
	table := exampleTable("encoders")
	c, err := dynamolock.New(exampleDB(), table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	sem, err := c.NewSemaphore("video-encoders", 2)
	if err != nil {
		log.Fatal(err)
	}
	first, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	second, err := sem.Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("two slots:", first.PartitionKey() != second.PartitionKey())

	_, err = sem.Acquire(ctx, dynamolock.FailIfLocked())
	var lng *dynamolock.LockNotGrantedError
	fmt.Println("third refused:", errors.As(err, &lng))

	if err := first.Close(); err != nil { // frees the slot
		log.Fatal(err)
	}
	third, err := sem.Acquire(ctx, dynamolock.FailIfLocked())
	fmt.Println("third after a release:", err == nil, third.PartitionKey() == first.PartitionKey())
	// Output:
	// two slots: true
	// third refused: true
	// third after a release: true true
}

func ExampleRWLock() {
	ctx := context.Background()
	table := exampleTable("shards")
	c, err := dynamolock.New(exampleDB(), table)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := c.CreateTableWithContext(ctx, table); err != nil {
		log.Fatal(err)
	}

	rw, err := c.NewRWLock("shard-map")
	if err != nil {
		log.Fatal(err)
	}
	r1, err := rw.RLock(ctx)
	if err != nil {
		log.Fatal(err)
	}
	r2, err := rw.RLock(ctx) // readers share the lock
	if err != nil {
		log.Fatal(err)
	}
	_, err = rw.Lock(ctx, dynamolock.FailIfLocked())
	var held *dynamolock.LockHeldError
	fmt.Println("writer refused while reading:", errors.As(err, &held))

	for _, r := range []*dynamolock.Lock{r1, r2} {
		if err := r.Close(); err != nil {
			log.Fatal(err)
		}
	}
	w, err := rw.Lock(ctx, dynamolock.FailIfLocked())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("writer's token above the readers':", w.FencingToken() > r1.FencingToken())
	if err := w.Close(); err != nil {
		log.Fatal(err)
	}
	// Output:
	// writer refused while reading: true
	// writer's token above the readers': true
}

// README's "Testing your code": a user's failover test on dynamolocktest,
// in virtual time (the leases add up to two minutes; it runs in
// milliseconds).
// snippet:testing-your-code
func TestLeaderFailover(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		hostA, hostB := db.Conn(), db.Conn() // one connection per host
		opts := []dynamolock.ClientOption{dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(10 * time.Second)}
		a, _ := dynamolock.New(hostA, "locks", opts...)
		defer a.Close()
		b, _ := dynamolock.New(hostB, "locks", opts...)
		defer b.Close()
		if _, err := a.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}
		leader, err := a.NewElection("leader").Campaign(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}

		hostA.Partition() // host A loses its network
		<-leader.Done()   // within a minute (virtual): its lease ran out, it steps down
		next, err := b.NewElection("leader").Campaign(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if next.FencingToken() <= leader.FencingToken() {
			t.Fatal("the new leader's fencing token is not higher")
		}
	})
}

// snippet:end

// A client with WithSession holds every lock through one session: one
// renewal per heartbeat period, whatever the number of locks; when the
// session ends, every lock of it ends.
func ExampleWithSession() {
	ctx := context.Background()
	table := exampleTable("sessions")
	// snippet:session
	c, err := dynamolock.New(exampleDB(), table, dynamolock.WithSession())
	if err != nil {
		log.Fatal(err)
	}
	// snippet:end
	if _, err := c.CreateTableIfNotExists(ctx); err != nil {
		log.Fatal(err)
	}

	// snippet:session-locks
	var locks []*dynamolock.Lock
	for _, key := range []string{"customer-1", "customer-2", "customer-3"} {
		l, err := c.AcquireLockWithContext(ctx, key) // held by the session: no heartbeat of its own
		if err != nil {
			log.Fatal(err)
		}
		locks = append(locks, l)
	}
	s, err := c.Session(ctx) // started by the first acquisition
	if err != nil {
		log.Fatal(err)
	}
	go func() {
		<-s.Done() // the session ended: every lock of it has ended
		log.Print("session ended: ", s.Err())
	}()
	// snippet:end
	fmt.Println("held:", len(locks), "session lease:", s.Lease())
	// Close ends the session with one write: every lock of it is free to
	// other clients at once.
	if err := c.Close(); err != nil {
		log.Fatal(err)
	}
	<-s.Done()
	fmt.Println("first lock:", locks[0].Err())
	// Output:
	// held: 3 session lease: 20s
	// first lock: dynamolock: lock is already released
}
