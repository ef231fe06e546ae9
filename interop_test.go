package dynamolock_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

// foreignItems loads testdata/foreign-items.json: lock items exactly as
// Amazon's Java client and dynamolock v2 write them, in DynamoDB JSON.
func foreignItems(t *testing.T) map[string]map[string]types.AttributeValue {
	t.Helper()
	raw, err := os.ReadFile("testdata/foreign-items.json")
	require.NoError(t, err)
	var doc struct {
		Items []struct {
			Writer string                       `json:"writer"`
			Item   map[string]map[string]string `json:"item"`
		} `json:"items"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	out := map[string]map[string]types.AttributeValue{}
	for _, it := range doc.Items {
		item := map[string]types.AttributeValue{}
		for name, v := range it.Item {
			switch {
			case v["S"] != "":
				item[name] = s(v["S"])
			case v["B"] != "":
				b, err := base64.StdEncoding.DecodeString(v["B"])
				require.NoError(t, err)
				item[name] = &types.AttributeValueMemberB{Value: b}
			default:
				t.Fatalf("fixture %q: unsupported attribute %q", it.Writer, name)
			}
		}
		out[it.Writer] = item
	}
	require.Len(t, out, 5)
	return out
}

func TestForeignItems(t *testing.T) {
	items := foreignItems(t)
	ctx := context.Background()
	table := newTable(t, "")
	db, calls := newDB(t)
	for _, it := range items {
		if _, ok := it["sortKey"]; !ok {
			putRaw(t, db, table, it)
		}
	}
	c := newClient(t, db, table, fast...)

	t.Run("java held is read and respected", func(t *testing.T) {
		v, err := c.GetWithContext(ctx, "java-held")
		require.NoError(t, err)
		assert.Equal(t, "ip-10-0-1-17.ec2.internal7c1e9f52-3d4b-4a8e-9f61-2b5d7e0c4a13", v.OwnerName())
		assert.Equal(t, 20*time.Second, v.LeaseDuration(), "decimal milliseconds")
		assert.Equal(t, "hello from java", string(v.Data()))
		assert.False(t, v.IsReleased())
		_, err = c.AcquireLockWithContext(ctx, "java-held", dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held)
		assert.Equal(t, 20*time.Second, held.LeaseDuration)
	})
	t.Run("v2 held is read and respected", func(t *testing.T) {
		v, err := c.GetWithContext(ctx, "v2-held")
		require.NoError(t, err)
		assert.Equal(t, 20*time.Second, v.LeaseDuration(), "Go duration")
		assert.Equal(t, "payload", string(v.Data()))
		assert.Equal(t, map[string]types.AttributeValue{"team": s("payments")}, v.AdditionalAttributes())
		_, err = c.AcquireLockWithContext(ctx, "v2-held", dynamolock.FailIfLocked())
		var held *dynamolock.LockHeldError
		require.ErrorAs(t, err, &held)
	})
	for _, key := range []string{"java-released", "v2-released"} {
		t.Run(key+" is acquired with one call", func(t *testing.T) {
			calls.reset()
			l, err := c.AcquireLockWithContext(ctx, key)
			require.NoError(t, err)
			assert.Equal(t, map[string]int{"UpdateItem": 1}, calls.reset())
			assert.NotZero(t, l.FencingToken())
			assert.False(t, l.IsReleased())
			_, err = c.ReleaseLockWithContext(ctx, l)
			require.NoError(t, err)
		})
	}
	t.Run("java-released keeps its data", func(t *testing.T) {
		v, err := c.GetWithContext(ctx, "java-released")
		require.NoError(t, err)
		assert.Equal(t, "done", string(v.Data()))
	})
}

// A stale item in the Java client's format (lease in milliseconds, on a
// sort-key table) is taken over after one lease.
func TestForeignItemTakenOverWhenStale(t *testing.T) {
	items := foreignItems(t)
	ctx := context.Background()
	table := newTable(t, "sortKey")
	db, _ := newDB(t)
	putRaw(t, db, table, items["Java client on a table with a sort key named 'sortKey', held"])
	c := newClient(t, db, table, append(fast, dynamolock.WithSortKey("sortKey", "job-42"))...)
	start := time.Now()
	l, err := c.AcquireLockWithContext(ctx, "tenant-jobs", dynamolock.WithRefreshPeriod(200*time.Millisecond))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, time.Since(start), 3*time.Second, "its 3000 ms lease")
	assert.Equal(t, c.OwnerName(), l.OwnerName())
	assert.Equal(t, "job-42", l.SortKey())
}
