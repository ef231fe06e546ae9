package dynamolock

import (
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// The common acquiring write is built from the client's shared names and
// expressions (plainAcquireWrite); it must be exactly the request, and the
// record of what it writes, that the general builder makes, for every
// client configuration that changes the request's shape.
func TestPlainAcquireWriteIsTheBuiltOne(t *testing.T) {
	configs := map[string][]ClientOption{
		"default":       nil,
		"skew bound":    {WithClockSkewBound(time.Second)},
		"ttl":           {WithTTLAttribute("expires")},
		"skew and ttl":  {WithClockSkewBound(250 * time.Millisecond), WithTTLAttribute("ttl")},
		"partition key": {WithPartitionKeyName("pk")},
		"sort key":      {WithSortKey("sk", "default-sort")},
	}
	for name, opts := range configs {
		t.Run(name, func(t *testing.T) {
			c, err := New(dynamolocktest.New().Conn(), "lock_table", append([]ClientOption{DisableHeartbeat()}, opts...)...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			sent := time.Unix(1_700_000_000, 123_456_789)
			for _, lease := range []time.Duration{time.Second, 20 * time.Second, 1500 * time.Millisecond} {
				o := &acquireLockOptions{lease: lease}
				if !plainShape(o, "", nil) {
					t.Fatal("plain options are not the plain shape")
				}
				gotIn, gotW := c.acquireWrite("customer-42", c.cfg.sortKey, o, "rvn-1", "", nil, sent, nil)
				wantIn, wantW := c.builtAcquireWrite("customer-42", c.cfg.sortKey, o, "rvn-1", "", nil, sent, nil)
				if !reflect.DeepEqual(gotIn, wantIn) {
					t.Fatalf("lease %v: request\n got %#v\nwant %#v", lease, gotIn, wantIn)
				}
				gotW.remove, wantW.remove = append([]string(nil), gotW.remove...), append([]string(nil), wantW.remove...)
				gotW.removeArray, wantW.removeArray = [5]string{}, [5]string{}
				// Where there was no item, the record is the one the new
				// item decodes to.
				rec, err := c.cfg.schema.decodeItem(wantW.after(wantIn.Key, nil))
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(gotW.fresh, rec) {
					t.Fatalf("lease %v: fresh record\n got %#v\nwant %#v", lease, gotW.fresh, rec)
				}
				gotW.fresh = nil
				if !reflect.DeepEqual(gotW, wantW) {
					t.Fatalf("lease %v: record\n got %#v\nwant %#v", lease, gotW, wantW)
				}
				// Each request has its own names: a wrapper that changes
				// one changes no other.
				gotIn.ExpressionAttributeNames["#extra"] = "x"
				if _, ok := c.plain.names["#extra"]; ok {
					t.Fatal("the request shares the client's names map")
				}
			}
		})
	}
	o := &acquireLockOptions{lease: time.Second}
	for what, plain := range map[string]bool{
		"data":          plainShape(&acquireLockOptions{data: []byte("d")}, "", nil),
		"replace data":  plainShape(&acquireLockOptions{replaceData: true}, "", nil),
		"attributes":    plainShape(&acquireLockOptions{additionalAttributes: map[string]types.AttributeValue{"a": lockitem.S("b")}}, "", nil),
		"takeover":      plainShape(o, "stale-rvn", nil),
		"queue":         plainShape(o, "", &queueWrite{}),
		"only if there": plainShape(&acquireLockOptions{onlyIfLockAlreadyExist: true}, "", nil),
	} {
		if plain {
			t.Errorf("%s: taken for the plain shape", what)
		}
	}
}
