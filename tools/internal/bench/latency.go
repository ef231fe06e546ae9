package bench

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/gofrs/uuid/v5"

	"github.com/arielsrv/dynamolock/v2"
)

// OpLatency is the latency sample of one operation.
type OpLatency struct {
	Name  string
	Floor string // the raw call this operation is compared with
	Raw   bool   // a raw SDK call, not a lock operation
	D     Dist
	// Outside is, for a lock operation, its time minus that of the one
	// SDK call it made: the library's own work outside the SDK (building
	// the request, reading the answer, its bookkeeping). Empty for raw
	// calls and for get, whose answer may come from the client itself.
	Outside Dist
}

// timedDB is the SDK client with the duration of its newest UpdateItem
// kept, so that a lock operation's time splits into the SDK call and the
// rest. The SDK client is embedded, not an interface, so that every other
// method the library looks for is still there.
type timedDB struct {
	*dynamodb.Client
	last atomic.Int64
}

func (d *timedDB) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	t := time.Now()
	out, err := d.Client.UpdateItem(ctx, in, optFns...)
	d.last.Store(int64(time.Since(t)))
	return out, err
}

// LatencyResult is section 2.
type LatencyResult struct {
	Samples int
	Ops     []OpLatency
}

// Op returns the sample named name.
func (r *LatencyResult) Op(name string) *OpLatency {
	for i := range r.Ops {
		if r.Ops[i].Name == name {
			return &r.Ops[i]
		}
	}
	return nil
}

// Names of the measured operations.
const (
	OpRawUpdate = "raw conditional UpdateItem"
	OpRawGet    = "raw consistent GetItem"
	// OpRawAcquireShape is the library's acquiring write sent by hand
	// (fencing token, REMOVE of isReleased and the stored expiry, the
	// condition, ReturnValues ALL_OLD): the part of acquire's time that
	// DynamoDB spends on the richer write rather than the client on itself.
	OpRawAcquireShape = "raw acquire-shaped UpdateItem"
	// OpRawReleaseShape is the library's releasing write sent by hand, on
	// the item the acquire-shaped write created earlier in the round: what DynamoDB is
	// asked to do beyond the raw write, apart from the client's own work.
	OpRawReleaseShape = "raw release-shaped UpdateItem"
	OpAcquire         = "acquire (free)"
	OpHeartbeat       = "heartbeat"
	OpRelease         = "release"
	OpGet             = "get (other owner)"
)

// MeasureLatency times n rounds of: a raw conditional UpdateItem on a fresh
// key, the acquisition of a free lock, a heartbeat of it, a raw consistent
// GetItem of it, a Get of it by another client, and its release. The rounds
// interleave the raw calls with the lock operations so that both see the
// same load on the shared machine.
func MeasureLatency(ctx context.Context, e *Env, n int) (*LatencyResult, error) {
	table, drop, err := e.NewTable(ctx, "latency")
	if err != nil {
		return nil, err
	}
	defer drop()
	db, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	// a's one lock is renewed by hand, and within the round: its
	// scheduler (heartbeat period 5 s) sends no beat of its own.
	timed := &timedDB{Client: db}
	a, err := dynamolock.New(timed, table)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := dynamolock.New(db, table)
	if err != nil {
		return nil, err
	}
	defer b.Close()

	names := []string{OpRawUpdate, OpRawAcquireShape, OpRawReleaseShape, OpAcquire, OpHeartbeat, OpRelease, OpRawGet, OpGet}
	samples := make(map[string][]time.Duration, len(names))
	outside := make(map[string][]time.Duration, 3)
	const warmup = 50
	owner := a.OwnerName()
	for i := range warmup + n {
		record := func(name string, d time.Duration) {
			if i >= warmup {
				samples[name] = append(samples[name], d)
			}
		}
		// recordSplit records a lock operation of client a, whose one
		// UpdateItem took timed.last.
		recordSplit := func(name string, d time.Duration) {
			record(name, d)
			if i >= warmup {
				outside[name] = append(outside[name], d-time.Duration(timed.last.Load()))
			}
		}
		key := "lat-" + strconv.Itoa(i)

		raw := rawWrite(table, "raw-"+strconv.Itoa(i), owner)
		t := time.Now()
		if _, err := db.UpdateItem(ctx, raw); err != nil {
			return nil, fmt.Errorf("raw UpdateItem: %w", err)
		}
		record(OpRawUpdate, time.Since(t))

		shaped := rawAcquireShape(table, "shape-"+strconv.Itoa(i), owner)
		t = time.Now()
		if _, err := db.UpdateItem(ctx, shaped); err != nil {
			return nil, fmt.Errorf("raw acquire-shaped UpdateItem: %w", err)
		}
		record(OpRawAcquireShape, time.Since(t))

		t = time.Now()
		l, err := a.AcquireLockWithContext(ctx, key)
		if err != nil {
			return nil, fmt.Errorf("acquire: %w", err)
		}
		recordSplit(OpAcquire, time.Since(t))

		t = time.Now()
		if err := a.SendHeartbeatWithContext(ctx, l); err != nil {
			return nil, fmt.Errorf("heartbeat: %w", err)
		}
		recordSplit(OpHeartbeat, time.Since(t))

		t = time.Now()
		if _, err := db.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		}); err != nil {
			return nil, fmt.Errorf("raw GetItem: %w", err)
		}
		record(OpRawGet, time.Since(t))

		t = time.Now()
		if _, err := b.GetWithContext(ctx, key); err != nil {
			return nil, fmt.Errorf("get: %w", err)
		}
		record(OpGet, time.Since(t))

		// The raw release-shaped write, like the release, updates an item
		// written earlier in the round; the two go in turn (which comes
		// first after the reads alternates by round), because DynamoDB
		// Local's time for an update depends on what was sent just before
		// (sent right after the acquire-shaped write, this one measured
		// about 150 µs less).
		rawRelease := func() error {
			released := rawReleaseShape(table, "shape-"+strconv.Itoa(i), owner, shaped.ExpressionAttributeValues[":v"])
			t := time.Now()
			if _, err := db.UpdateItem(ctx, released); err != nil {
				return fmt.Errorf("raw release-shaped UpdateItem: %w", err)
			}
			record(OpRawReleaseShape, time.Since(t))
			return nil
		}
		release := func() error {
			t := time.Now()
			if _, err := a.ReleaseLockWithContext(ctx, l); err != nil {
				return fmt.Errorf("release: %w", err)
			}
			recordSplit(OpRelease, time.Since(t))
			return nil
		}
		first, second := rawRelease, release
		if i%2 == 1 {
			first, second = release, rawRelease
		}
		if err := first(); err != nil {
			return nil, err
		}
		if err := second(); err != nil {
			return nil, err
		}
	}
	res := &LatencyResult{Samples: n}
	for _, name := range names {
		floor, raw := OpRawUpdate, false
		switch name {
		case OpRawUpdate, OpRawGet:
			floor, raw = "", true
		case OpGet:
			floor = OpRawGet
		}
		op := OpLatency{Name: name, Floor: floor, Raw: raw, D: NewDist(samples[name])}
		if o := outside[name]; len(o) > 0 {
			op.Outside = NewDist(o)
		}
		res.Ops = append(res.Ops, op)
	}
	return res, nil
}

// rawWrite is the hand-written conditional write a lock needs at the
// least: create the item with owner, lease and version unless it exists.
func rawWrite(table, key, owner string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:    aws.String("SET #o = :o, #l = :l, #v = :v"),
		ConditionExpression: aws.String("attribute_not_exists(#k) OR #o = :o"),
		ExpressionAttributeNames: map[string]string{
			"#k": "key", "#o": "ownerName", "#l": "leaseDuration", "#v": "recordVersionNumber",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: owner},
			":l": &types.AttributeValueMemberS{Value: "20s"},
			":v": &types.AttributeValueMemberS{Value: uuid.Must(uuid.NewV4()).String()},
		},
	}
}

// rawAcquireShape is the acquiring UpdateItem as the library sends it on a
// free key with default options, written by hand: rawWrite plus the
// fencing token, the REMOVE of isReleased and of the stored expiry, the
// library's condition and its return values.
func rawAcquireShape(table, key, owner string) *dynamodb.UpdateItemInput {
	in := rawWrite(table, key, owner)
	for _, p := range writeParts {
		if p.inAcquire {
			p.add(in)
		}
	}
	return in
}

// rawReleaseShape is the releasing UpdateItem as the library sends it for a
// lock with no write in doubt, written by hand: mark the item released and
// remove the stored expiry, conditioned on the owner, not released, and the
// lock's RVN.
func rawReleaseShape(table, key, owner string, rvn types.AttributeValue) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:           aws.String(table),
		Key:                 map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: key}},
		UpdateExpression:    aws.String("SET #r = :r REMOVE #x, #xr"),
		ConditionExpression: aws.String("#o = :o AND attribute_not_exists(#r) AND #v IN (:cur)"),
		ExpressionAttributeNames: map[string]string{
			"#o": "ownerName", "#r": "isReleased", "#v": "recordVersionNumber", "#x": "leaseExpiresAt", "#xr": "leaseExpiresAtRVN",
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":o": &types.AttributeValueMemberS{Value: owner}, ":r": &types.AttributeValueMemberS{Value: "1"}, ":cur": rvn,
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
