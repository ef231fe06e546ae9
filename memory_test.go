package dynamolock_test

import (
	"context"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
)

// Heap per held lock, measured as `lockbench capacity` measures it: the live
// heap after a full collection with n locks held, minus the same once Close
// released them and the client was dropped, divided by n. The DynamoDB here
// is in process and answers like the real one over the wire: every string of
// an answer is a fresh copy, as the SDK's JSON decoding makes it.

// wireFakeDB acknowledges every write at once. An acquiring UpdateItem
// (ReturnValues ALL_NEW) gets back the item it would have written, its
// strings copied; a heartbeat or release gets an empty answer.
type wireFakeDB struct {
	benchFakeDB
	token atomic.Uint64
}

func (f *wireFakeDB) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	if in.ReturnValues != types.ReturnValueAllNew {
		return &dynamodb.UpdateItemOutput{}, nil
	}
	v := in.ExpressionAttributeValues
	str := func(a types.AttributeValue) types.AttributeValue {
		return &types.AttributeValueMemberS{Value: strings.Clone(a.(*types.AttributeValueMemberS).Value)}
	}
	return &dynamodb.UpdateItemOutput{Attributes: map[string]types.AttributeValue{
		"key":                 str(in.Key["key"]),
		"ownerName":           str(v[":o"]),
		"leaseDuration":       str(v[":l"]),
		"recordVersionNumber": str(v[":v"]),
		"fencingToken":        &types.AttributeValueMemberN{Value: strconv.FormatUint(f.token.Add(1), 10)},
	}}, nil
}

// liveHeap returns the live heap after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// heapPerHeldLock holds n locks in one client with background heartbeats on
// (none due while measuring) and returns the heap each costs, in bytes.
func heapPerHeldLock(tb testing.TB, n int) float64 {
	tb.Helper()
	ctx := context.Background()
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "cap-" + strconv.Itoa(i)
	}
	locks := make([]*dynamolock.Lock, n)
	c, err := dynamolock.New(&wireFakeDB{}, "mem_table",
		dynamolock.WithLeaseDuration(time.Hour), dynamolock.WithHeartbeatPeriod(30*time.Minute))
	if err != nil {
		tb.Fatal(err)
	}
	for i, k := range keys {
		if locks[i], err = c.AcquireLockWithContext(ctx, k, dynamolock.FailIfLocked()); err != nil {
			tb.Fatal(err)
		}
	}
	held := liveHeap()
	if err := c.Close(); err != nil {
		tb.Fatal(err)
	}
	clear(locks)
	c = nil //nolint:ineffassign,wastedassign // dropped before measuring
	after := liveHeap()
	runtime.KeepAlive(keys)
	runtime.KeepAlive(locks)
	return (float64(held) - float64(after)) / float64(n)
}

// BenchmarkHeapPerHeldLock reports the heap one held lock costs (B/lock).
// Run with `go test -run '^$' -bench HeapPerHeldLock -benchtime 1x .`.
func BenchmarkHeapPerHeldLock(b *testing.B) {
	for _, n := range []int{1000, 20000} {
		b.Run("locks="+strconv.Itoa(n), func(b *testing.B) {
			var per float64
			for b.Loop() {
				per = heapPerHeldLock(b, n)
			}
			b.ReportMetric(per, "B/lock")
		})
	}
}

// TestHeapPerHeldLock checks the heap per held lock against a generous
// bound (the target is 500 B measured by lockbench, which adds a share of
// the heartbeats in flight; this measures the locks alone).
func TestHeapPerHeldLock(t *testing.T) {
	per := heapPerHeldLock(t, 5000)
	t.Logf("%.0f B of heap per held lock", per)
	if per > 600 {
		t.Errorf("%.0f B of heap per held lock, want at most 600", per)
	}
}
