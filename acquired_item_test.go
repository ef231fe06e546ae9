package dynamolock_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// An acquisition asks DynamoDB for the item as it was before its write
// (nothing, on a free key) and builds the new one itself. Whatever the item
// held before and whatever the options, the lock must describe the item
// exactly as DynamoDB stored it.
func TestAcquiredLockMatchesItem(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	clients := map[string]*dynamolock.Client{
		"plain":      newClient(t, db, table, dynamolock.WithOwnerName("plain")),
		"skew bound": newClient(t, db, table, dynamolock.WithOwnerName("skew"), dynamolock.WithClockSkewBound(time.Second)),
		"ttl":        newClient(t, db, table, dynamolock.WithOwnerName("ttl"), dynamolock.WithTTLAttribute("expiresAt")),
	}
	n := func(v uint64) *types.AttributeValueMemberN {
		return &types.AttributeValueMemberN{Value: strconv.FormatUint(v, 10)}
	}
	befores := map[string]map[string]types.AttributeValue{
		"no item":        nil,
		"released, bare": {"ownerName": s("old"), "leaseDuration": s("20s"), "recordVersionNumber": s("r1"), "isReleased": s("1")},
		"released, with everything": {"ownerName": s("old"), "leaseDuration": s("20000"), "recordVersionNumber": s("r2"), "isReleased": s("1"),
			"data": &types.AttributeValueMemberB{Value: []byte("old data")}, "fencingToken": n(41), "extra": s("kept"),
			"leaseExpiresAt": n(1), "leaseExpiresAtRVN": s("r2"), "expiresAt": n(2),
			"fairQueue": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"w1": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"t": n(1), "b": s("x"), "l": n(1000)}}}}},
	}
	optionSets := map[string][]dynamolock.AcquireLockOption{
		"none":               nil,
		"data":               {dynamolock.WithData([]byte("new data"))},
		"replace data":       {dynamolock.WithData([]byte("new data")), dynamolock.ReplaceData()},
		"replace data, none": {dynamolock.ReplaceData()},
		"additional":         {dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{"extra": s("new"), "more": n(7)})},
		"lease":              {dynamolock.WithLockLease(17 * time.Second)},
	}
	i := 0
	for cname, c := range clients {
		for bname, before := range befores {
			for oname, opts := range optionSets {
				i++
				key := fmt.Sprintf("k%d", i)
				t.Run(cname+"/"+bname+"/"+oname, func(t *testing.T) {
					if before != nil {
						item := map[string]types.AttributeValue{"key": s(key)}
						for k, v := range before {
							item[k] = v
						}
						putRaw(t, db, table, item)
					}
					l, err := c.AcquireLockWithContext(ctx, key, opts...)
					require.NoError(t, err)
					defer l.Close()
					item := rawItem(t, db, table, keyOf(key))
					var data []byte
					if b, ok := item["data"].(*types.AttributeValueMemberB); ok {
						data = b.Value
					}
					assert.Equal(t, data, l.Data(), "data")
					tok, err := strconv.ParseUint(item["fencingToken"].(*types.AttributeValueMemberN).Value, 10, 64)
					require.NoError(t, err)
					assert.Equal(t, tok, l.FencingToken(), "fencing token")
					assert.Equal(t, item["recordVersionNumber"].(*types.AttributeValueMemberS).Value, l.RecordVersionNumber())
					assert.Equal(t, item["ownerName"].(*types.AttributeValueMemberS).Value, l.OwnerName())
					want := map[string]types.AttributeValue{}
					for k, v := range item {
						switch k {
						case "key", "ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken",
							"leaseExpiresAt", "leaseExpiresAtRVN", "fairQueue":
						case "expiresAt":
							if cname != "ttl" {
								want[k] = v
							}
						default:
							want[k] = v
						}
					}
					if len(want) == 0 {
						want = nil
					}
					got := l.AdditionalAttributes()
					if len(got) == 0 {
						got = nil
					}
					assert.Equal(t, want, got, "additional attributes")
					_, released := item["isReleased"]
					assert.False(t, released)
				})
			}
		}
	}
}
