package bench

import (
	"context"
	"fmt"
	"maps"
	"strconv"
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
	a, err := dynamolock.New(db, table)
	if err != nil {
		return nil, err
	}
	defer a.Close()
	b, err := dynamolock.New(db, table)
	if err != nil {
		return nil, err
	}
	defer b.Close()

	names := []string{OpRawUpdate, OpRawAcquireShape, OpAcquire, OpHeartbeat, OpRelease, OpRawGet, OpGet}
	samples := make(map[string][]time.Duration, len(names))
	const warmup = 50
	owner := a.OwnerName()
	for i := range warmup + n {
		record := func(name string, d time.Duration) {
			if i >= warmup {
				samples[name] = append(samples[name], d)
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
		record(OpAcquire, time.Since(t))

		t = time.Now()
		if err := a.SendHeartbeatWithContext(ctx, l); err != nil {
			return nil, fmt.Errorf("heartbeat: %w", err)
		}
		record(OpHeartbeat, time.Since(t))

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

		t = time.Now()
		if _, err := a.ReleaseLockWithContext(ctx, l); err != nil {
			return nil, fmt.Errorf("release: %w", err)
		}
		record(OpRelease, time.Since(t))
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
		res.Ops = append(res.Ops, OpLatency{Name: name, Floor: floor, Raw: raw, D: NewDist(samples[name])})
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
	in.UpdateExpression = aws.String(*in.UpdateExpression + ", #f = if_not_exists(#f, :base) + :one REMOVE #r, #x, #xr")
	in.ConditionExpression = aws.String("attribute_not_exists(#k) OR attribute_exists(#r)")
	maps.Copy(in.ExpressionAttributeNames, map[string]string{
		"#f": "fencingToken", "#r": "isReleased", "#x": "leaseExpiresAt", "#xr": "leaseExpiresAtRVN",
	})
	in.ExpressionAttributeValues[":base"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMicro(), 10)}
	in.ExpressionAttributeValues[":one"] = &types.AttributeValueMemberN{Value: "1"}
	in.ReturnValues = types.ReturnValueAllOld
	in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	return in
}
