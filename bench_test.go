package dynamolock_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gofrs/uuid/v5"

	"github.com/arielsrv/dynamolock/v2"
)

// Benchmarks of the lock operations. Those named Fake run against an
// in-process fake of DynamoDB, so ns/op and allocs/op are this library's own;
// the others go through the SDK to DynamoDB Local (started by TestMain) and
// include a real round trip. Run with `go test -run '^$' -bench . -benchmem .`
// (make bench does). cmd/lockbench measures the same operations against the
// raw DynamoDB call, and capacity, failover and contention.

// benchFakeDB acknowledges every write at once. An acquiring UpdateItem
// (ReturnValues ALL_OLD) finds no item before it; every other UpdateItem
// counts as a heartbeat, and the one that reaches target signals reached.
type benchFakeDB struct {
	beats   atomic.Int64
	target  atomic.Int64
	reached chan struct{}
}

func newBenchFakeDB() *benchFakeDB {
	f := &benchFakeDB{reached: make(chan struct{}, 1)}
	f.target.Store(math.MaxInt64)
	return f
}

func (f *benchFakeDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.ReturnValues != types.ReturnValueAllOld {
		if n := f.beats.Add(1); n >= f.target.Load() {
			select {
			case f.reached <- struct{}{}:
			default:
			}
		}
	}
	return &dynamodb.UpdateItemOutput{}, nil
}

func (f *benchFakeDB) GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return &dynamodb.GetItemOutput{}, nil
}

func (f *benchFakeDB) PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return &dynamodb.PutItemOutput{}, nil
}

func (f *benchFakeDB) DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error) {
	return &dynamodb.DeleteItemOutput{}, nil
}

func (f *benchFakeDB) CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error) {
	return &dynamodb.CreateTableOutput{}, nil
}

func benchClient(b *testing.B, db dynamolock.DynamoDBClient, table string, opts ...dynamolock.ClientOption) *dynamolock.Client {
	b.Helper()
	c, err := dynamolock.New(db, table, opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

// One acquisition of a free lock and its release, in process.
func BenchmarkFakeAcquireRelease(b *testing.B) {
	c := benchClient(b, newBenchFakeDB(), "bench_table")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.AcquireLockWithContext(ctx, "customer-42")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

// One manual heartbeat, in process.
func BenchmarkFakeSendHeartbeat(b *testing.B) {
	benchSendHeartbeat(b, benchClient(b, newBenchFakeDB(), "bench_table", dynamolock.DisableHeartbeat()))
}

// benchSendHeartbeat times manual heartbeats of one lock held by c.
func benchSendHeartbeat(b *testing.B, c *dynamolock.Client) {
	ctx := context.Background()
	l, err := c.AcquireLockWithContext(ctx, "customer-42")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := c.SendHeartbeatWithContext(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

// The background heartbeat scheduler renewing many locks at the shortest
// heartbeat period the client accepts (50 ms: 200,000 beats a second due
// at 10,000 locks, more than it sends here, so every lock is always due),
// against a DynamoDB that answers at once: allocs/op are per heartbeat,
// scheduling included; ns/op too at 10,000 locks (at 1,000, 20,000 beats a
// second are due: ns/op there is the period's pace, not the cost).
func BenchmarkFakeHeartbeatScheduler(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("locks=%d", n), func(b *testing.B) {
			db := newBenchFakeDB()
			c := benchClient(b, db, "bench_table",
				dynamolock.WithLeaseDuration(time.Minute), dynamolock.WithHeartbeatPeriod(50*time.Millisecond))
			ctx := context.Background()
			for i := range n {
				if _, err := c.AcquireLockWithContext(ctx, "k"+strconv.Itoa(i)); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportAllocs()
			b.ResetTimer()
			db.target.Store(db.beats.Load() + int64(b.N))
			<-db.reached
			b.StopTimer()
			if lost := c.Stats().LocksLost; lost > 0 {
				b.Fatalf("%d locks lost", lost)
			}
		})
	}
}

// rawConditionalUpdate is the least a lock write needs, sent by hand: the
// floor the lock operations are measured against (a fresh RVN each time).
func rawConditionalUpdate(table string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 keyOf("raw"),
		UpdateExpression:    aws.String("SET #o = :o, #l = :l, #v = :v"),
		ConditionExpression: aws.String("attribute_not_exists(#k) OR #o = :o"),
		ExpressionAttributeNames: map[string]string{
			"#k": "key", "#o": "ownerName", "#l": "leaseDuration", "#v": "recordVersionNumber",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": s("bench"), ":l": s("20s"), ":v": s(uuid.Must(uuid.NewV4()).String()),
		},
	}
}

// The same operations through the SDK against DynamoDB Local, next to the
// raw conditional UpdateItem they are built on (here updating one existing
// item, like a heartbeat).
func BenchmarkDynamoDBLocal(b *testing.B) {
	db, _ := newDB(b)
	table := newTable(b, "")
	ctx := context.Background()
	raw := func() error {
		_, err := db.UpdateItem(ctx, rawConditionalUpdate(table))
		return err
	}
	c := benchClient(b, db, table)
	// Warm up DynamoDB Local (its JIT) and the connections, so that the
	// first sub-benchmark is not the slow one.
	for range 300 {
		if err := raw(); err != nil {
			b.Fatal(err)
		}
		l, err := c.AcquireLockWithContext(ctx, "warm-up")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("RawConditionalUpdateItem", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := raw(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("AcquireRelease", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			l, err := c.AcquireLockWithContext(ctx, "acquire-release")
			if err != nil {
				b.Fatal(err)
			}
			if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SendHeartbeat", func(b *testing.B) {
		l, err := c.AcquireLockWithContext(ctx, "heartbeat")
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := c.SendHeartbeatWithContext(ctx, l); err != nil {
				b.Fatal(err)
			}
		}
	})
}
