package dynamolocktest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"go.uber.org/goleak"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Conn has every method the library looks for: the narrow client
// interface and each optional one it type-asserts.
var _ interface {
	dynamolock.DynamoDBClient
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	Scan(context.Context, *dynamodb.ScanInput, ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
} = (*dynamolocktest.Conn)(nil)

func key(k string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: k}}
}

func total(c *dynamolocktest.Conn) int {
	n := 0
	for _, v := range c.Calls() {
		n += v
	}
	return n
}

func setUp(t *testing.T, opts ...dynamolock.ClientOption) (*dynamolocktest.DB, *dynamolocktest.Conn, *dynamolock.Client) {
	t.Helper()
	db := dynamolocktest.New()
	conn := db.Conn()
	c := newClient(t, conn, opts...)
	if _, err := c.CreateTableIfNotExists(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, conn, c
}

// A partitioned Conn fails every request at once with the SDK's error for
// a refused connection: the library reports a *ConnectionError naming the
// connection, and nothing reaches the DB. Heal restores it.
func TestPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, c := setUp(t)
		conn.Partition()
		_, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("k")})
		var oe *smithy.OperationError
		if !errors.Is(err, syscall.ECONNREFUSED) || !errors.As(err, &oe) || oe.OperationName != "GetItem" {
			t.Fatalf("GetItem: %v, want an *smithy.OperationError matching ECONNREFUSED", err)
		}
		start := time.Now()
		_, err = c.AcquireLockWithContext(ctx, "k")
		var ce *dynamolock.ConnectionError
		if !errors.As(err, &ce) {
			t.Fatalf("AcquireLock: %v (%T), want a *dynamolock.ConnectionError", err, err)
		}
		t.Logf("after %s of virtual time: %v", time.Since(start), err)
		if len(db.Items("locks")) != 0 {
			t.Fatal("a request of a partitioned Conn reached the DB")
		}
		conn.Heal()
		if _, err := c.AcquireLockWithContext(ctx, "k"); err != nil {
			t.Fatalf("after Heal: %v", err)
		}
	})
}

// LoseAnswers: the write lands, the caller gets a connection reset. The
// library's acquisition survives it (its retry finds its own write).
func TestLoseAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, c := setUp(t)
		conn.LoseAnswers(1)
		_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("raw")})
		if !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("PutItem: %v, want a connection reset", err)
		}
		if len(db.Items("locks")) != 1 {
			t.Fatal("the write whose answer was lost did not land")
		}
		// Reads are not affected.
		conn.LoseAnswers(1)
		if _, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("raw")}); err != nil {
			t.Fatal(err)
		}
		before := total(conn)
		l, err := c.AcquireLockWithContext(ctx, "k")
		if err != nil {
			t.Fatalf("an acquisition whose answer was lost: %v", err)
		}
		if n := total(conn) - before; n < 2 {
			t.Fatalf("%d calls: the library did not learn the fate of the write whose answer was lost", n)
		}
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			t.Fatal(err)
		}
	})
}

// Throttle: the next n requests fail with
// ProvisionedThroughputExceededException and are not applied.
func TestThrottle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, c := setUp(t)
		conn.Throttle(1)
		_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("raw")})
		var pte *types.ProvisionedThroughputExceededException
		if !errors.As(err, &pte) {
			t.Fatalf("PutItem: %v, want a ProvisionedThroughputExceededException", err)
		}
		if len(db.Items("locks")) != 0 {
			t.Fatal("a throttled write was applied")
		}
		conn.Throttle(2)
		before := total(conn)
		if _, err := c.AcquireLockWithContext(ctx, "k"); err != nil {
			t.Fatalf("an acquisition throttled twice: %v", err)
		}
		if n := total(conn) - before; n < 3 {
			t.Fatalf("%d calls, want the two throttled and one more", n)
		}
		if _, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("raw")}); err != nil {
			t.Fatalf("a third request after Throttle(2): %v", err)
		}
	})
}

// Delay holds every request on the caller's clock; a request whose context
// ends first is not applied.
func TestDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, _ := setUp(t)
		conn.Delay(3 * time.Second)
		start := time.Now()
		if _, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("k")}); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != 3*time.Second {
			t.Fatalf("a request delayed 3s took %s", d)
		}
		tctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		_, err := conn.PutItem(tctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("late")})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("PutItem past its deadline: %v", err)
		}
		// A partition that starts while a request waits: it does not land.
		done := make(chan error)
		go func() {
			_, err := conn.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String("locks"), Item: key("cut")})
			done <- err
		}()
		time.Sleep(time.Second)
		conn.Partition()
		if err := <-done; !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("a request in flight at the partition: %v, want a connection reset", err)
		}
		if n := len(db.Items("locks")); n != 0 {
			t.Fatalf("%d items: a request cut off or past its deadline landed", n)
		}
		conn.Heal()
		start = time.Now()
		if _, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("locks"), Key: key("k")}); err != nil || time.Since(start) != 0 {
			t.Fatalf("after Heal: %v after %s", err, time.Since(start))
		}
	})
}

// Calls counts every request per operation, failed ones too.
func TestCalls(t *testing.T) {
	ctx := context.Background()
	_, conn, c := setUp(t, dynamolock.DisableHeartbeat())
	if got := conn.Calls(); got["DescribeTable"] != 2 || got["CreateTable"] != 1 || len(got) != 2 {
		t.Fatalf("CreateTableIfNotExists: calls %v", got)
	}
	l, err := c.AcquireLockWithContext(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
		t.Fatal(err)
	}
	got := conn.Calls()
	got["CreateTable"], got["DescribeTable"] = 0, 0
	if got["UpdateItem"] != 2 || got["GetItem"] != 0 {
		t.Fatalf("acquire + release of a free lock: calls %v, want 2 UpdateItems", got)
	}
	got["UpdateItem"] = 99 // a copy
	if conn.Calls()["UpdateItem"] != 2 {
		t.Fatal("Calls returned the Conn's own map")
	}
}

// Items returns the items ordered by key, nil for a table that does not
// exist; model errors come wrapped as the SDK wraps them.
func TestItemsAndErrors(t *testing.T) {
	ctx := context.Background()
	db, conn, c := setUp(t, dynamolock.DisableHeartbeat())
	for _, k := range []string{"b", "c", "a", "10", "9"} {
		if _, err := c.AcquireLockWithContext(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	var keys []string
	for _, it := range db.Items("locks") {
		keys = append(keys, it["key"].(*types.AttributeValueMemberS).Value)
	}
	if fmt.Sprint(keys) != "[10 9 a b c]" {
		t.Fatalf("Items in the order %v", keys)
	}
	if db.Items("nope") != nil {
		t.Fatal("Items of a missing table is not nil")
	}
	_, err := conn.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String("nope"), Key: key("k")})
	var rnf *types.ResourceNotFoundException
	var oe *smithy.OperationError
	if !errors.As(err, &rnf) || !errors.As(err, &oe) {
		t.Fatalf("GetItem on a missing table: %v (%T)", err, err)
	}
	t.Log(err)
}

// Many hosts, one key, exactly one winner at a time: the DB is safe for
// concurrent use (run with -race).
func TestOneWinner(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db := dynamolocktest.New()
		var wins sync.Map
		var wg sync.WaitGroup
		admin := newClient(t, db.Conn())
		if _, err := admin.CreateTableIfNotExists(ctx); err != nil {
			t.Fatal(err)
		}
		for i := range 50 {
			c := newClient(t, db.Conn(), dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(10*time.Second))
			wg.Go(func() {
				if l, err := c.AcquireLockWithContext(ctx, "k", dynamolock.FailIfLocked()); err == nil {
					wins.Store(i, l.FencingToken())
				}
			})
		}
		wg.Wait()
		n := 0
		wins.Range(func(any, any) bool { n++; return true })
		if n != 1 {
			t.Fatalf("%d winners", n)
		}
	})
}

// TTL: the table is created with it, and it is described.
func TestTimeToLive(t *testing.T) {
	ctx := context.Background()
	db := dynamolocktest.New()
	conn := db.Conn()
	c := newClient(t, conn)
	if _, err := c.CreateTableIfNotExists(ctx, dynamolock.WithTimeToLive("ttl")); err != nil {
		t.Fatal(err)
	}
	out, err := conn.DescribeTimeToLive(ctx, &dynamodb.DescribeTimeToLiveInput{TableName: aws.String("locks")})
	if err != nil || out.TimeToLiveDescription.TimeToLiveStatus != types.TimeToLiveStatusEnabled || aws.ToString(out.TimeToLiveDescription.AttributeName) != "ttl" {
		t.Fatalf("DescribeTimeToLive: %+v, %v", out, err)
	}
}

// Misuse says what is wrong.
func TestZeroValuesPanicWithAMessage(t *testing.T) {
	for name, f := range map[string]func(){
		"zero DB":   func() { new(dynamolocktest.DB).Conn() },
		"zero Conn": func() { _, _ = new(dynamolocktest.Conn).GetItem(context.Background(), &dynamodb.GetItemInput{}) },
	} {
		func() {
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "dynamolocktest: ") {
					t.Errorf("%s: recovered %v, want a dynamolocktest message", name, r)
				}
			}()
			f()
		}()
	}
}

// A slow connection under the library's concurrent use of one lock
// (heartbeats from the scheduler and by hand, a read, a release) still
// runs in virtual time: no request is waited for under a lock that would
// keep the bubble from advancing its clock.
func TestDelayUnderConcurrentUse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		_, conn, c := setUp(t, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second))
		conn.Delay(2 * time.Second)
		l, err := c.AcquireLockWithContext(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { _ = c.SendHeartbeatWithContext(ctx, l) })
		}
		wg.Go(func() { _, _ = c.GetWithContext(ctx, "k") })
		time.Sleep(time.Minute) // scheduled heartbeats
		if l.Err() != nil {
			t.Fatalf("the lock was lost on a slow connection: %v", l.Err())
		}
		wg.Go(func() { _, _ = c.ReleaseLockWithContext(ctx, l) })
		wg.Go(func() { _ = c.SendHeartbeatWithContext(ctx, l) })
		wg.Wait()
		if !l.IsReleased() {
			t.Fatal("not released")
		}
	})
}

// Heartbeats whose answers are lost, or that are throttled, do not lose
// the lock: the library retries them within the lease, and a retry of a
// heartbeat that landed succeeds.
func TestHeartbeatsSurviveLostAnswersAndThrottling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		db, conn, c := setUp(t, dynamolock.WithLeaseDuration(20*time.Second), dynamolock.WithHeartbeatPeriod(5*time.Second))
		l, err := c.AcquireLockWithContext(ctx, "k")
		if err != nil {
			t.Fatal(err)
		}
		rvn := func() string { return db.Items("locks")[0]["recordVersionNumber"].(*types.AttributeValueMemberS).Value }
		first := rvn()
		conn.LoseAnswers(3)
		time.Sleep(time.Minute)
		conn.Throttle(3)
		time.Sleep(time.Minute)
		if l.Err() != nil {
			t.Fatalf("lost: %v", l.Err())
		}
		if rvn() == first {
			t.Fatal("no heartbeat landed")
		}
		if n := conn.Calls()["UpdateItem"]; n < 24 {
			t.Fatalf("%d UpdateItems in two minutes of 5 s heartbeats", n)
		}
	})
}
