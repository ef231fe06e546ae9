package dynamolock

import (
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// White-box benchmarks of the in-process hot paths that cannot be reached
// alone from outside: item decoding and expression building. Run with
// `go test -run '^$' -bench . -benchmem .` (make bench does).

func benchInternalClient(b *testing.B, opts ...ClientOption) *Client {
	b.Helper()
	// The benchmarks here make no call: any DynamoDBClient does.
	c, err := New(dynamolocktest.New().Conn(), "bench_table", append([]ClientOption{DisableHeartbeat()}, opts...)...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	return c
}

func BenchmarkDecodeItem(b *testing.B) {
	s := schema{lockitem.Layout{PartitionKey: "key"}}
	items := []struct {
		name string
		item map[string]types.AttributeValue
	}{
		{"ours", map[string]types.AttributeValue{
			"key":                   lockitem.S("customer-42"),
			lockitem.OwnerName:      lockitem.S("host-1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
			lockitem.LeaseDuration:  lockitem.S("20s"),
			lockitem.RVN:            lockitem.S("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
			lockitem.FencingToken:   lockitem.N(1234),
			lockitem.LeaseExpiresAt: lockitem.N(1767225600000),
			lockitem.Data:           &types.AttributeValueMemberB{Value: []byte("payload")},
			"additionalAttribute":   lockitem.S("x"),
		}},
		{"java", map[string]types.AttributeValue{
			"key":                  lockitem.S("customer-42"),
			lockitem.OwnerName:     lockitem.S("host-1b4e28ba-2fa1-11d2-883f-0016d3cca427"),
			lockitem.LeaseDuration: lockitem.S("20000"),
			lockitem.RVN:           lockitem.S("6ba7b810-9dad-11d1-80b4-00c04fd430c8"),
			lockitem.IsReleased:    lockitem.S("1"),
		}},
	}
	for _, tc := range items {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.decodeItem(tc.item); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkAcquireInput(b *testing.B) {
	cases := []struct {
		name     string
		opts     []ClientOption
		o        acquireLockOptions
		takeover string
	}{
		{name: "free"},
		{name: "takeover", takeover: "6ba7b810-9dad-11d1-80b4-00c04fd430c8"},
		{name: "data+skew+ttl", opts: []ClientOption{WithClockSkewBound(time.Second), WithTTLAttribute("ttl")},
			o: acquireLockOptions{data: []byte("payload")}},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			c := benchInternalClient(b, tc.opts...)
			rvn := newRVN()
			b.ReportAllocs()
			for b.Loop() {
				_ = c.acquireInput("customer-42", nil, &tc.o, rvn, tc.takeover, nil, time.Now(), nil)
			}
		})
	}
}

func BenchmarkHeartbeatInput(b *testing.B) {
	c := benchInternalClient(b)
	l := &Lock{client: c, partitionKey: "customer-42", ownerName: c.cfg.ownerName, rvn: newRVN()}
	w := &renewal{rvn: newRVN(), sent: time.Now(), lease: 20 * time.Second}
	b.ReportAllocs()
	for b.Loop() {
		_ = c.heartbeatInput(l, w)
	}
}

func BenchmarkNewRVN(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		_ = newRVN()
	}
}
