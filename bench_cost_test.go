package dynamolock_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/internal/ddblocal"
)

// The client's own cost per call (issue 24, item 2): acquire, release and
// one heartbeat each alone, against an in-process fake of DynamoDB (the
// library alone), and through the real SDK against an HTTP stub that
// answers at once (the library, the SDK and what the library asks of the
// SDK, beside the raw conditional UpdateItem through the same stub). No
// network in either. allocs/op and B/op are the figures to compare: ns/op
// moves with the machine's load.

// One acquisition of a free lock; the release after it is not timed.
func BenchmarkFakeAcquire(b *testing.B) {
	c := benchClient(b, newBenchFakeDB(), "bench_table", dynamolock.DisableHeartbeat())
	benchAcquire(b, c)
}

// One release of a held lock; the acquisition before it is not timed.
func BenchmarkFakeRelease(b *testing.B) {
	c := benchClient(b, newBenchFakeDB(), "bench_table", dynamolock.DisableHeartbeat())
	benchRelease(b, c)
}

func benchAcquire(b *testing.B, c *dynamolock.Client) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.AcquireLockWithContext(ctx, "customer-42")
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func benchRelease(b *testing.B, c *dynamolock.Client) {
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		l, err := c.AcquireLockWithContext(ctx, "customer-42")
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		if _, err := c.ReleaseLockWithContext(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
}

// stubHTTP answers every DynamoDB request at once, as DynamoDB would
// answer a write that applied: DescribeTable with an active table without
// replicas, UpdateItem and DeleteItem with no attributes (ALL_OLD of a free
// key), GetItem with no item.
type stubHTTP struct{}

var (
	stubTable = []byte(`{"Table":{"TableName":"bench_table","TableStatus":"ACTIVE"}}`)
	stubEmpty = []byte(`{}`)
)

func (stubHTTP) Do(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_, _ = io.Copy(io.Discard, req.Body)
		_ = req.Body.Close()
	}
	body := stubEmpty
	if req.Header.Get("X-Amz-Target") == "DynamoDB_20120810.DescribeTable" {
		body = stubTable
	}
	return &http.Response{
		StatusCode:    http.StatusOK,
		Header:        http.Header{"Content-Type": []string{"application/x-amz-json-1.0"}},
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       req,
	}, nil
}

func stubSDK(b *testing.B) *dynamodb.Client {
	b.Helper()
	db, err := ddblocal.NewClient(context.Background(), "http://stub.invalid", func(o *dynamodb.Options) {
		o.HTTPClient = stubHTTP{}
	})
	if err != nil {
		b.Fatal(err)
	}
	return db
}

// The same operations through the SDK against stubHTTP, beside the raw
// conditional UpdateItem (as in BenchmarkDynamoDBLocal and lockbench
// latency): what each costs beyond it is the library's and what it asks
// of the SDK (a bigger request, the per-write middleware).
func BenchmarkStubSDK(b *testing.B) {
	ctx := context.Background()
	b.Run("RawConditionalUpdateItem", func(b *testing.B) {
		db := stubSDK(b)
		b.ReportAllocs()
		for b.Loop() {
			_, err := db.UpdateItem(ctx, rawConditionalUpdate("bench_table"))
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Acquire", func(b *testing.B) {
		benchAcquire(b, benchClient(b, stubSDK(b), "bench_table", dynamolock.DisableHeartbeat()))
	})
	b.Run("Release", func(b *testing.B) {
		benchRelease(b, benchClient(b, stubSDK(b), "bench_table", dynamolock.DisableHeartbeat()))
	})
	b.Run("SendHeartbeat", func(b *testing.B) {
		benchSendHeartbeat(b, benchClient(b, stubSDK(b), "bench_table", dynamolock.DisableHeartbeat()))
	})
}
