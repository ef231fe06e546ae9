package bench

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// WritePart is one variant of the raw conditional UpdateItem: one part of
// the library's acquiring write added to it alone.
type WritePart struct {
	Name string
	D    Dist
}

// WritePartsResult is what the acquiring write's parts each cost DynamoDB.
type WritePartsResult struct {
	Samples int
	Parts   []WritePart // Parts[0] is the raw write itself
}

// writeParts are the parts of the library's acquiring write, each to be
// applied to rawWrite alone; inAcquire marks those rawAcquireShape is made
// of, in the order it applies them (the others are steps toward the
// fencing token's expression).
var writeParts = []struct {
	name      string
	add       func(in *dynamodb.UpdateItemInput)
	inAcquire bool
}{
	{"raw conditional UpdateItem", func(*dynamodb.UpdateItemInput) {}, false},
	{"+ a number attribute (`SET #f = :base`)", func(in *dynamodb.UpdateItemInput) { fencingPart(in, ":base") }, false},
	{"+ `SET #f = if_not_exists(#f, :base)`", func(in *dynamodb.UpdateItemInput) { fencingPart(in, "if_not_exists(#f, :base)") }, false},
	{"+ the fencing token (`SET #f = if_not_exists(#f, :base) + :one`)", func(in *dynamodb.UpdateItemInput) {
		fencingPart(in, "if_not_exists(#f, :base) + :one")
	}, true},
	{"+ `REMOVE #r, #x, #xr` (the released mark, the stored expiry)", removePart, true},
	{"the acquire condition (`attribute_not_exists(#k) OR attribute_exists(#r)`)", conditionPart, true},
	{"+ ReturnValues ALL_OLD", func(in *dynamodb.UpdateItemInput) { in.ReturnValues = types.ReturnValueAllOld }, true},
	{"+ ReturnValuesOnConditionCheckFailure ALL_OLD", func(in *dynamodb.UpdateItemInput) {
		in.ReturnValuesOnConditionCheckFailure = types.ReturnValuesOnConditionCheckFailureAllOld
	}, true},
}

func fencingPart(in *dynamodb.UpdateItemInput, expr string) {
	in.UpdateExpression = aws.String(*in.UpdateExpression + ", #f = " + expr)
	in.ExpressionAttributeNames["#f"] = "fencingToken"
	in.ExpressionAttributeValues[":base"] = &types.AttributeValueMemberN{Value: strconv.FormatInt(time.Now().UnixMicro(), 10)}
	if strings.Contains(expr, ":one") { // an unused value is a ValidationException
		in.ExpressionAttributeValues[":one"] = &types.AttributeValueMemberN{Value: "1"}
	}
}

func removePart(in *dynamodb.UpdateItemInput) {
	in.UpdateExpression = aws.String(*in.UpdateExpression + " REMOVE #r, #x, #xr")
	maps.Copy(in.ExpressionAttributeNames, map[string]string{"#r": "isReleased", "#x": "leaseExpiresAt", "#xr": "leaseExpiresAtRVN"})
}

func conditionPart(in *dynamodb.UpdateItemInput) {
	in.ConditionExpression = aws.String("attribute_not_exists(#k) OR attribute_exists(#r)")
	in.ExpressionAttributeNames["#r"] = "isReleased"
}

// MeasureWriteParts sends, n times each after 50 warm-up rounds, the raw
// conditional UpdateItem, each part of the acquiring write added to it
// alone, and the whole acquire-shaped write, each on a fresh key, in an
// order shuffled for every round.
func MeasureWriteParts(ctx context.Context, e *Env, n int) (*WritePartsResult, error) {
	table, drop, err := e.NewTable(ctx, "writeparts")
	if err != nil {
		return nil, err
	}
	defer drop()
	db, err := e.NewDB(ctx)
	if err != nil {
		return nil, err
	}
	const owner, warmup = "writeparts", 50
	type variant struct {
		name string
		in   func(key string) *dynamodb.UpdateItemInput
	}
	var vs []variant
	for _, p := range writeParts {
		vs = append(vs, variant{p.name, func(key string) *dynamodb.UpdateItemInput {
			in := rawWrite(table, key, owner)
			p.add(in)
			return in
		}})
	}
	vs = append(vs, variant{OpRawAcquireShape + " (all of them)", func(key string) *dynamodb.UpdateItemInput {
		return rawAcquireShape(table, key, owner)
	}})
	samples := make([][]time.Duration, len(vs))
	// DynamoDB Local's time for a write depends on the one sent before it
	// (see MeasureLatency), so every round sends the variants in an order
	// of its own: each follows every other about equally often.
	order := rand.New(rand.NewPCG(1, 2))
	for i := range warmup + n {
		for _, k := range order.Perm(len(vs)) {
			in := vs[k].in("p" + strconv.Itoa(k) + "-" + strconv.Itoa(i))
			t := time.Now()
			if _, err := db.UpdateItem(ctx, in); err != nil {
				return nil, fmt.Errorf("%s: %w", vs[k].name, err)
			}
			if i >= warmup {
				samples[k] = append(samples[k], time.Since(t))
			}
		}
	}
	r := &WritePartsResult{Samples: n}
	for k, v := range vs {
		r.Parts = append(r.Parts, WritePart{Name: v.name, D: NewDist(samples[k])})
	}
	return r, nil
}

// Markdown renders the parts as a table.
func (r *WritePartsResult) Markdown(cmd string) string {
	var b md
	b.w("Command: `%s`. %d rounds after 50 warm-up rounds; each round sends every variant once on a fresh key, in an order shuffled for every round. Each row but the last adds one part of the library's acquiring write to the raw conditional UpdateItem; the last is the whole acquire-shaped write.", cmd, r.Samples)
	b.w("")
	b.w("| write | p50 ms | p95 ms | p50 − raw p50 |")
	b.w("|---|---|---|---|")
	raw := r.Parts[0].D.Q(0.5)
	for i, p := range r.Parts {
		diff := "(floor)"
		if i > 0 {
			diff = fmt.Sprintf("%+.0f µs", float64(p.D.Q(0.5)-raw)/1e3)
		}
		b.w("| %s | %s | %s | %s |", p.Name, ms(p.D.Q(0.5)), ms(p.D.Q(0.95)), diff)
	}
	return b.String()
}
