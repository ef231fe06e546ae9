package lockitem

import (
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

var layout = Layout{PartitionKey: "key", SortKey: "sk", TTL: "ttl"}

// The three writers' items decode alike: this library's and dynamolock v2's
// lease as a Go duration, Amazon's Java client's as milliseconds; what is
// not the lock's own (keys and TTL aside) is kept as additional.
func TestDecodeReadsEveryWritersItem(t *testing.T) {
	for _, tc := range []struct {
		name, lease string
		want        time.Duration
	}{{"go duration", "20s", 20 * time.Second}, {"java milliseconds", "20000", 20 * time.Second}} {
		item := map[string]types.AttributeValue{
			"key": S("k"), "sk": S("s"), "ttl": N(1), "extra": S("x"),
			OwnerName: S("o"), RVN: S("v"), LeaseDuration: S(tc.lease), FencingToken: N(7), Data: &types.AttributeValueMemberB{Value: []byte("d")},
		}
		r, err := layout.Decode(item)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if r.Owner != "o" || r.RVN != "v" || r.Lease != tc.want || r.FencingToken != 7 || string(r.Data) != "d" || r.Released {
			t.Fatalf("%s: %+v", tc.name, r)
		}
		if len(r.Additional) != 1 || r.Additional["extra"] == nil {
			t.Fatalf("%s: additional %v, want only extra", tc.name, r.Additional)
		}
	}
}

// A session is read only with the lease a session's lock carries: another
// writer that copied the attribute in wrote its own lease.
func TestDecodeSessionOnlyWithTheSessionsLease(t *testing.T) {
	item := map[string]types.AttributeValue{OwnerName: S("o"), RVN: S("v"), LeaseDuration: S(FormatLease(MaxLease)), Session: S("s1")}
	if r, err := layout.Decode(item); err != nil || r.Session != "s1" {
		t.Fatalf("session lock: %+v, %v", r, err)
	}
	item[LeaseDuration] = S("20s")
	if r, err := layout.Decode(item); err != nil || r.Session != "" {
		t.Fatalf("a copied session attribute: %+v, %v", r, err)
	}
}

// What the decoder cannot interpret is a *FormatError naming the attribute.
func TestDecodeRefusesWithTheAttribute(t *testing.T) {
	base := func() map[string]types.AttributeValue {
		return map[string]types.AttributeValue{OwnerName: S("o"), RVN: S("v"), LeaseDuration: S("1s")}
	}
	for _, tc := range []struct {
		attr string
		v    types.AttributeValue
	}{
		{OwnerName, N(1)}, {RVN, S("")}, {LeaseDuration, S("soon")}, {LeaseDuration, S("-5")},
		{Data, S("not bytes")}, {FencingToken, &types.AttributeValueMemberN{Value: "-1"}}, {LeaseExpiresAt, S("x")},
	} {
		item := base()
		item[tc.attr] = tc.v
		_, err := layout.Decode(item)
		var fe *FormatError
		if !errors.As(err, &fe) || fe.Attribute != tc.attr {
			t.Errorf("%s = %v: err %v, want a FormatError naming it", tc.attr, tc.v, err)
		}
	}
	if _, err := layout.Decode(map[string]types.AttributeValue{RVN: S("v"), LeaseDuration: S("1s")}); err == nil {
		t.Error("an item without an owner decoded")
	}
}

// The queue comes back in id order, whatever the map's; entries that
// cannot be read are Bad (ordering nobody) and keep their kind.
func TestQueueInIDOrder(t *testing.T) {
	entry := func(ticket uint64, kind string) types.AttributeValue {
		m := map[string]types.AttributeValue{"t": N(ticket), "b": S("beat"), "l": N(1000)}
		if kind != "" {
			m["k"] = S(kind)
		}
		return &types.AttributeValueMemberM{Value: m}
	}
	bad := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"t": N(0), "k": S("w")}}
	item := map[string]types.AttributeValue{FairQueue: &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"c": entry(1, ""), "a": entry(2, "w"), "b": bad, "d": S("not a map"),
	}}}
	ws, present, ok := Queue(item)
	if !present || !ok || len(ws) != 4 {
		t.Fatalf("%v %v %v", ws, present, ok)
	}
	for i, id := range []string{"a", "b", "c", "d"} {
		if ws[i].ID != id {
			t.Fatalf("entry %d is %q, want %q: %+v", i, ws[i].ID, id, ws)
		}
	}
	if !ws[0].Writer || ws[0].Bad || ws[0].Ticket != 2 || ws[0].Lease != time.Second {
		t.Errorf("a: %+v", ws[0])
	}
	if !ws[1].Bad || !ws[1].Writer {
		t.Errorf("b (unreadable, a writer's): %+v", ws[1])
	}
	if !ws[3].Bad {
		t.Errorf("d: %+v", ws[3])
	}
	if !ws[2].Before(2, "a") || ws[0].Before(1, "c") {
		t.Error("Before does not order by ticket first")
	}
	if _, present, ok := Queue(map[string]types.AttributeValue{FairQueue: S("x")}); !present || ok {
		t.Error("a queue that is not a map is usable")
	}
}

// A reader's entry: a beat and a positive lease in ms, and a session only
// as a non-empty string.
func TestDecodeReader(t *testing.T) {
	good := &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"b": S("beat"), "l": N(2000), "s": S("sess")}}
	if r := DecodeReader("r", good); r.Bad || r.Beat != "beat" || r.Lease != 2*time.Second || r.Session != "sess" {
		t.Errorf("%+v", r)
	}
	for _, ev := range []types.AttributeValue{
		S("x"),
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"b": S("beat"), "l": N(0)}},
		&types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"b": S("beat"), "l": N(1), "s": S("")}},
	} {
		if r := DecodeReader("r", ev); !r.Bad || r.ID != "r" {
			t.Errorf("%v: %+v, want Bad", ev, r)
		}
	}
}
