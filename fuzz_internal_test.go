package dynamolock

// White-box fuzz targets for the item decoder, which is unexported. Seed
// corpus: testdata/fuzz/FuzzDecodeItem and testdata/fuzz/FuzzParseLease.
// Run with e.g. go test -run '^$' -fuzz '^FuzzDecodeItem$' -fuzztime 1m .

import (
	"context"
	"errors"
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// fuzzAttr stores v as typ selects; 0 leaves it out.
func fuzzAttr(v string, typ uint8) types.AttributeValue {
	switch typ % 10 {
	case 0:
		return nil
	case 1:
		return &types.AttributeValueMemberS{Value: v}
	case 2:
		return &types.AttributeValueMemberN{Value: v}
	case 3:
		return &types.AttributeValueMemberB{Value: []byte(v)}
	case 4:
		return &types.AttributeValueMemberBOOL{Value: len(v)%2 == 1}
	case 5:
		return &types.AttributeValueMemberNULL{Value: true}
	case 6:
		return &types.AttributeValueMemberSS{Value: []string{v, v + v}}
	case 7:
		return &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberS{Value: v}, nil}}
	case 8:
		return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{v: nil, "n": &types.AttributeValueMemberN{Value: v}}}
	default:
		return &types.AttributeValueMemberNS{Value: []string{v}}
	}
}

// fuzzExtra turns bytes into extra attributes, nested up to depth levels,
// including nil values and empty containers.
func fuzzExtra(b []byte, depth int) (map[string]types.AttributeValue, []byte) {
	m := map[string]types.AttributeValue{}
	for len(b) >= 2 && len(m) < 16 {
		nameLen := int(b[0] % 8)
		typ := b[1]
		b = b[2:]
		nameLen = min(nameLen, len(b))
		name := string(b[:nameLen])
		b = b[nameLen:]
		switch {
		case typ == 0xff:
			return m, b // end of this map
		case typ%11 == 10 && depth > 0:
			var sub map[string]types.AttributeValue
			sub, b = fuzzExtra(b, depth-1)
			if typ&0x80 != 0 {
				l := make([]types.AttributeValue, 0, len(sub))
				for _, v := range sub {
					l = append(l, v)
				}
				m[name] = &types.AttributeValueMemberL{Value: l}
			} else {
				m[name] = &types.AttributeValueMemberM{Value: sub}
			}
		default:
			m[name] = fuzzAttr(name, typ)
		}
	}
	return m, b
}

// FuzzDecodeItem: any attribute map decodes to a lock record or an
// *ItemFormatError, never a panic; a decoded record is usable.
func FuzzDecodeItem(f *testing.F) {
	// Seeds: this client's item, Amazon's Java client's, dynamolock v2's,
	// and a few malformed ones (the committed corpus has more).
	f.Add("host-1", uint8(1), "rvn", uint8(1), "20s", uint8(1), []byte("d"), uint8(3), "3", uint8(2), "", uint8(0), uint8(0), []byte{})
	f.Add("java", uint8(1), "rvn", uint8(1), "20000", uint8(1), []byte{}, uint8(0), "", uint8(0), "", uint8(0), uint8(1), []byte{})
	f.Add("v2", uint8(1), "rvn", uint8(1), "10s", uint8(1), []byte("x"), uint8(3), "", uint8(0), "1700000000000", uint8(2), uint8(0), []byte{3, 1, 'a', 'b', 'c'})
	f.Add("", uint8(1), "rvn", uint8(2), "forever", uint8(1), []byte("x"), uint8(1), "-1", uint8(2), "x", uint8(1), uint8(4), []byte{2, 10, 'm', 'n', 1, 7, 'x', 0xff, 0xff})
	conn := dynamolocktest.New().Conn() // decoding makes no call: checked below
	client, err := New(conn, "fuzz_table", WithSortKey("sk", "v"), WithTTLAttribute("ttl"))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, owner string, ownerT uint8, rvn string, rvnT uint8, lease string, leaseT uint8,
		data []byte, dataT uint8, token string, tokenT uint8, expiry string, expiryT uint8, releasedT uint8, extra []byte) {
		defer func() {
			if calls := conn.Calls(); len(calls) != 0 {
				t.Fatalf("decoding made DynamoDB calls: %v", calls)
			}
		}()
		item, _ := fuzzExtra(extra, 3)
		set := func(name string, v types.AttributeValue) {
			if v != nil {
				item[name] = v
			} else {
				delete(item, name)
			}
		}
		set(lockitem.OwnerName, fuzzAttr(owner, ownerT))
		set(lockitem.RVN, fuzzAttr(rvn, rvnT))
		set(lockitem.LeaseDuration, fuzzAttr(lease, leaseT))
		if dataT%10 == 3 {
			set(lockitem.Data, &types.AttributeValueMemberB{Value: data})
		} else {
			set(lockitem.Data, fuzzAttr(string(data), dataT))
		}
		set(lockitem.FencingToken, fuzzAttr(token, tokenT))
		set(lockitem.LeaseExpiresAt, fuzzAttr(expiry, expiryT))
		set(lockitem.IsReleased, fuzzAttr("1", releasedT))

		rec, err := client.cfg.schema.decodeItem(item)
		if err != nil {
			var fe *ItemFormatError
			if !errors.As(err, &fe) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if rec != nil {
				t.Fatal("a record and an error")
			}
			if fe.Attribute == "" || fe.Error() == "" {
				t.Fatalf("format error without attribute: %v", fe)
			}
			// A listing of the item reports the same error, with the key.
			item[client.cfg.partitionKeyName] = &types.AttributeValueMemberS{Value: "k"}
			item[client.cfg.sortKeyName] = &types.AttributeValueMemberS{Value: "v"}
			if _, err := client.viewOf(context.Background(), item, time.Now()); !errors.As(err, &fe) {
				t.Fatalf("viewOf: %v", err)
			}
			return
		}
		if rec.Owner == "" || rec.RVN == "" || rec.Lease < 0 {
			t.Fatalf("decoded an unusable record: %+v", rec)
		}
		if _, present := item[lockitem.IsReleased]; present != rec.Released {
			t.Fatalf("released = %v, isReleased present = %v", rec.Released, present)
		}
		if s, ok := item[lockitem.OwnerName].(*types.AttributeValueMemberS); !ok || s.Value != rec.Owner {
			t.Fatalf("owner %q from %#v", rec.Owner, item[lockitem.OwnerName])
		}
		for name := range rec.Additional {
			if client.cfg.schema.reserved(name) {
				t.Fatalf("reserved attribute %q returned as additional", name)
			}
		}
		// The record makes a usable read-only view.
		l := newReadOnlyLock(client, "k", nil, rec, time.Now())
		_ = l.IsExpired()
		_ = l.TransactionCondition()
		_ = l.AdditionalAttributes()
		if l.Err() == nil {
			t.Fatal("a read-only view reports itself held")
		}
		_ = lockitem.Size(item)
	})
}

// FuzzParseLease: a lease string parses to a non-negative duration that
// formats and parses back to itself, or to an *ItemFormatError.
func FuzzParseLease(f *testing.F) {
	for _, s := range []string{"20s", "20000", "1h2m3.5s", "-1s", "0", "9223372036854", "9223372036855", "1e3", " 20s", "+5s", "µs", "",
		"+20000", "-5", "007", "+", "-", "0x10", "1_000"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := parseLease(s)
		// The same outcome as ParseInt tried first on every string (before
		// parseLease skipped it for strings it cannot accept).
		if rd, rerr := parseLeaseParseIntFirst(s); rd != d || (rerr == nil) != (err == nil) || rerr != nil && rerr.Error() != err.Error() {
			t.Fatalf("parseLease(%q) = %v, %v; ParseInt first: %v, %v", s, d, err, rd, rerr)
		}
		if err != nil {
			var fe *ItemFormatError
			if !errors.As(err, &fe) || fe.Attribute != lockitem.LeaseDuration {
				t.Fatalf("parseLease(%q): %v", s, err)
			}
			return
		}
		if d < 0 {
			t.Fatalf("parseLease(%q) = %v", s, d)
		}
		back, err := parseLease(lockitem.FormatLease(d))
		if err != nil || back != d {
			t.Fatalf("parseLease(lockitem.FormatLease(%v)) = %v, %v", d, back, err)
		}
	})
}

// parseLease is the item decoder's lease parser, its error the public one.
func parseLease(s string) (time.Duration, error) {
	d, err := lockitem.ParseLease(s)
	return d, formatErr(err)
}

func parseLeaseParseIntFirst(s string) (time.Duration, error) {
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil {
		if ms < 0 || ms > math.MaxInt64/int64(time.Millisecond) {
			return 0, &ItemFormatError{Attribute: lockitem.LeaseDuration, Reason: "milliseconds out of range: " + s}
		}
		return time.Duration(ms) * time.Millisecond, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, &ItemFormatError{Attribute: lockitem.LeaseDuration, Reason: "neither a Go duration nor milliseconds: " + strconv.Quote(s)}
	}
	return d, nil
}
