package ddbmodel

import (
	"math"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// Capacity. Every request consumes capacity units as the Developer Guide
// counts them ("DynamoDB read and write operations", "Capacity management
// for transactions"), and a request that asks (ReturnConsumedCapacity
// TOTAL or INDEXES) gets them in its answer, as DynamoDB and DynamoDB
// Local give them: the table's name and its CapacityUnits (with INDEXES,
// the same again as the table's share: the model has no index).
//
//   - A read: one unit per 4 KB of the item (rounded up), at least one,
//     also for an item that does not exist; half for an eventually
//     consistent read (every read of the model is strongly consistent, but
//     it charges what the request asked for). A Query or Scan: the items it
//     returns together, rounded up to 4 KB, at least one unit.
//   - A write (PutItem, UpdateItem): one unit per 1 KB of the larger of the
//     item before and after (rounded up), at least one; a DeleteItem: of
//     the item it deleted, at least one.
//   - A conditional write whose condition fails is charged as if it had
//     applied (the larger of the item and what it would have been), and
//     its error, which has no field for it, does not say so: only
//     ConsumedCapacity of the model counts it.
//   - A transaction: twice each member's units (a write as above; a
//     ConditionCheck, a strongly consistent read); a ClientRequestToken
//     whose transaction already committed: the reads of its items, once.
//     A cancelled transaction is charged nothing (what DynamoDB charges for
//     one is not documented).
//
// Sizes are as the 400 KB limit counts them (valueSize).

const (
	readUnitBytes  = 4096
	writeUnitBytes = 1024
)

// itemBytes is an item's size: its attribute names and values.
func itemBytes(it Item) int {
	n := 0
	for k, v := range it {
		n += len(k) + valueSize(v)
	}
	return n
}

// readUnits is what reading bytes costs.
func readUnits(bytes int, consistent bool) float64 {
	u := max(1, math.Ceil(float64(bytes)/readUnitBytes))
	if !consistent {
		u /= 2
	}
	return u
}

// writeUnits is what writing an item of bytes costs.
func writeUnits(bytes int) float64 {
	return max(1, math.Ceil(float64(bytes)/writeUnitBytes))
}

// checkReturnCapacity validates ReturnConsumedCapacity.
func checkReturnCapacity(rc types.ReturnConsumedCapacity) error {
	switch rc {
	case "", types.ReturnConsumedCapacityNone, types.ReturnConsumedCapacityTotal, types.ReturnConsumedCapacityIndexes:
		return nil
	}
	return validation("1 validation error detected: Value '%s' at 'returnConsumedCapacity' failed to satisfy constraint: Member must satisfy enum value set: [INDEXES, TOTAL, NONE]", rc)
}

// consumed is the answer's ConsumedCapacity for units of table, or nil
// when the request did not ask.
func consumed(rc types.ReturnConsumedCapacity, table string, units float64) *types.ConsumedCapacity {
	switch rc {
	case types.ReturnConsumedCapacityTotal:
		return &types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(units)}
	case types.ReturnConsumedCapacityIndexes:
		return &types.ConsumedCapacity{TableName: aws.String(table), CapacityUnits: aws.Float64(units),
			Table: &types.Capacity{CapacityUnits: aws.Float64(units)}}
	}
	return nil
}

// charge adds units to what table consumed.
func (m *Model) charge(table string, read, write float64) {
	if m.capacity == nil {
		m.capacity = map[string][2]float64{}
	}
	c := m.capacity[table]
	c[0] += read
	c[1] += write
	m.capacity[table] = c
}

// ConsumedCapacity returns the read and write units every request on
// tableName has consumed so far, conditional writes that failed included.
func (m *Model) ConsumedCapacity(tableName string) (read, write float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.capacity[tableName]
	return c[0], c[1]
}

// writeCost is what the write w costs on an item that was old: the larger
// of old and what w makes of it (next, or, when its condition failed and
// next is nil, what it would have made).
func writeCost(w *write, old, next Item, failed bool) float64 {
	size := itemBytes(old)
	if failed && w.next != nil {
		if n, keep, err := w.next(cloneItem(old)); err == nil && keep {
			next = n
		}
	}
	return writeUnits(max(size, itemBytes(next)))
}
