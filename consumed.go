package dynamolock

import (
	"context"
	"errors"
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// What the client's calls cost in capacity units: every request that can
// say what it consumed asks for it, and the call layer (calls.go) counts
// what DynamoDB reports, and estimates what it does not (a conditional
// write that failed).

// askCapacity makes a request ask for the capacity it consumes, in total
// (TOTAL: the table has no index to break it down by), unless its builder
// chose otherwise. Only the request's sender sets it, before its first
// send.
func askCapacity(rc *types.ReturnConsumedCapacity) {
	if *rc == "" {
		*rc = types.ReturnConsumedCapacityTotal
	}
}

// consumed counts the capacity a call of op consumed, as DynamoDB reported
// it (nothing when the DynamoDBClient answered without it).
func (c *Client) consumed(ctx context.Context, op string, cc *types.ConsumedCapacity) {
	if cc != nil {
		c.metrics.Consumed(ctx, op, aws.ToFloat64(cc.CapacityUnits), false)
	}
}

// consumedTx counts the capacity a transaction consumed, one entry per
// table.
func (c *Client) consumedTx(ctx context.Context, cc []types.ConsumedCapacity) {
	units := 0.0
	for _, x := range cc {
		units += aws.ToFloat64(x.CapacityUnits)
	}
	c.metrics.Consumed(ctx, "TransactWriteItems", units, false)
}

// failedWriteCost counts the write units of a conditional write of op that
// err says failed its condition. DynamoDB charges such a write (the larger
// of the item's size before and after it would have applied, in 1 KB
// units, at least one) but its error does not say how much. The estimate
// is the size of the item the failure returned (the library's writes ask
// for it with ReturnValuesOnConditionCheckFailure ALL_OLD; none when there
// is no item), at least one unit: a lower bound when the write would have
// made the item larger. A cancelled transaction is not counted: what
// DynamoDB charges for one is not documented.
func (c *Client) failedWriteCost(ctx context.Context, op string, err error) {
	var ccf *types.ConditionalCheckFailedException
	if !errors.As(err, &ccf) {
		return
	}
	units := max(1, math.Ceil(float64(lockitem.Size(ccf.Item))/1024))
	c.metrics.Consumed(ctx, op, units, true)
}
