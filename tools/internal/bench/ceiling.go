package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gofrs/uuid/v5"
)

// CeilingResult is the backend's own ceiling: raw conditional writes per
// second from Writers concurrent writers.
type CeilingResult struct {
	Writers   int
	Duration  time.Duration
	Writes    int
	Errors    int
	CPUClient time.Duration
	CPUServer time.Duration
	// WarmupPerSec is the rate of the warm-up that ran just before, as
	// long as the measure and not counted in it: a cold DynamoDB Local (a
	// JVM that has not compiled its hot paths yet) writes at about half its
	// warm rate, and a bound measured on it would be half the real one.
	WarmupPerSec float64
	// After is the same measure taken again after the runs (nil: not
	// taken). The bound uses the higher of the two, so that a backend that
	// warmed up or sped up during the runs does not flatter them.
	After *CeilingResult
}

// BoundPerSec is the write rate the bound uses: the higher of this measure
// and the one after the runs, once that was taken.
func (c *CeilingResult) BoundPerSec() float64 {
	r := c.OwnPerSec()
	if c.After != nil {
		r = max(r, c.After.OwnPerSec())
	}
	return r
}

// BoundWhich says which measure BoundPerSec is, for the texts that print
// it: "" with only the one before the runs.
func (c *CeilingResult) BoundWhich() string {
	if c.After == nil {
		return ""
	}
	return " (the higher of the measures before and after the runs)"
}

// OwnPerSec is this measure's write rate alone.
func (c *CeilingResult) OwnPerSec() float64 { return float64(c.Writes) / c.Duration.Seconds() }

// MeasureCeiling runs writers goroutines that each renew 64 items of their
// own with conditional UpdateItems, as heartbeats do, for d after a
// warm-up of d.
func MeasureCeiling(ctx context.Context, e *Env, writers int, d time.Duration) (*CeilingResult, error) {
	db, table, drop, err := rawItems(ctx, e, "ceiling", writers)
	if err != nil {
		return nil, err
	}
	defer drop()
	warm, err := ceilingWrites(ctx, e, db, table, writers, d)
	if err != nil {
		return nil, err
	}
	r, err := ceilingWrites(ctx, e, db, table, writers, d)
	if err != nil {
		return nil, err
	}
	r.WarmupPerSec = warm.OwnPerSec()
	return r, nil
}

// rawOwner owns the items of the raw writers (MeasureCeiling,
// MeasureSteadiness).
const rawOwner = "lockbench-raw"

// rawItems creates a fresh table with 64 items for each of writers raw
// writers (see startRawWriters), and returns a client for it and a
// function that deletes it.
func rawItems(ctx context.Context, e *Env, prefix string, writers int) (*dynamodb.Client, string, func(), error) {
	table, drop, err := e.NewTable(ctx, prefix)
	if err != nil {
		return nil, "", nil, err
	}
	db, err := e.NewDB(ctx)
	if err != nil {
		drop()
		return nil, "", nil, err
	}
	for w := range writers {
		for j := range 64 {
			if _, err := db.UpdateItem(ctx, rawWrite(table, rawKey(w, j), rawOwner)); err != nil {
				drop()
				return nil, "", nil, err
			}
		}
	}
	return db, table, drop, nil
}

func rawKey(w, j int) string { return fmt.Sprintf("c-%d-%d", w, j%64) }

// rawWriters are goroutines renewing rawItems' items with heartbeat-shaped
// conditional UpdateItems as fast as DynamoDB answers, counting the writes
// that succeeded and failed, until stop.
type rawWriters struct {
	writes, errs atomic.Int64
	done         chan struct{}
	wg           sync.WaitGroup
}

func startRawWriters(ctx context.Context, db *dynamodb.Client, table string, writers int) *rawWriters {
	r := &rawWriters{done: make(chan struct{})}
	for w := range writers {
		r.wg.Go(func() {
			for j := 0; ; j++ {
				select {
				case <-r.done:
					return
				default:
				}
				if _, err := db.UpdateItem(ctx, heartbeatLikeWrite(table, rawKey(w, j), rawOwner)); err != nil {
					if ctx.Err() != nil {
						return
					}
					r.errs.Add(1)
					continue
				}
				r.writes.Add(1)
			}
		})
	}
	return r
}

// stop ends the writers and waits for them.
func (r *rawWriters) stop() {
	close(r.done)
	r.wg.Wait()
}

// ceilingWrites is one run of MeasureCeiling's writers for d.
func ceilingWrites(ctx context.Context, e *Env, db *dynamodb.Client, table string, writers int, d time.Duration) (*CeilingResult, error) {
	cpu0, srv0 := cpuTime(), procCPU(e.ServerPID)
	start := time.Now()
	rw := startRawWriters(ctx, db, table, writers)
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
	rw.stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := &CeilingResult{Writers: writers, Duration: time.Since(start), Writes: int(rw.writes.Load()), Errors: int(rw.errs.Load())}
	r.CPUClient = cpuTime() - cpu0
	if e.ServerPID > 0 {
		r.CPUServer = procCPU(e.ServerPID) - srv0
	}
	if r.Writes == 0 {
		return nil, errors.New("ceiling: no write succeeded")
	}
	return r, nil
}

// heartbeatLikeWrite renews an existing item the way a heartbeat does: a
// new version number, conditioned on the owner.
func heartbeatLikeWrite(table, key, owner string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:    aws.String("SET #v = :v, #l = :l"),
		ConditionExpression: aws.String("#o = :o"),
		ExpressionAttributeNames: map[string]string{
			"#o": "ownerName", "#l": "leaseDuration", "#v": "recordVersionNumber",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: owner},
			":l": &types.AttributeValueMemberS{Value: "3s"},
			":v": &types.AttributeValueMemberS{Value: uuid.Must(uuid.NewV4()).String()},
		},
	}
}
