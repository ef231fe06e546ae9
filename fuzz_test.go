package dynamolock_test

// Black-box fuzz targets for option validation, on an in-memory DynamoDB
// (dynamolocktest) that counts calls: invalid input must fail with an *InvalidArgumentError and
// make no call; valid input must get past validation. Seed corpus:
// testdata/fuzz/<FuzzName>. Run with e.g.
// go test -run '^$' -fuzz '^FuzzAcquireOptions$' -fuzztime 1m .

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2"
	"github.com/arielsrv/dynamolock/v2/dynamolocktest"
)

// The targets run on dynamolocktest, an in-memory DynamoDB. A DB without
// the table answers every call with a ResourceNotFoundException (not
// retried), so a valid call returns at once; calls counts a connection's
// calls of every operation.

func callCount(c *dynamolocktest.Conn) int {
	n := 0
	for _, v := range c.Calls() {
		n += v
	}
	return n
}

// checkInvalid fails t unless err is an *InvalidArgumentError that names
// its option in the message.
func checkInvalid(t *testing.T, err error, what string) {
	t.Helper()
	var ie *dynamolock.InvalidArgumentError
	if !errors.As(err, &ie) || !errors.Is(err, dynamolock.ErrInvalidArgument) {
		t.Fatalf("%s: got %v (%T), want an *InvalidArgumentError", what, err, err)
	}
	if ie.Name == "" || !strings.Contains(err.Error(), ie.Name) || !strings.HasPrefix(err.Error(), "dynamolock: ") {
		t.Fatalf("%s: error %q does not name its option", what, err)
	}
}

var fuzzTableName = regexp.MustCompile(`^[a-zA-Z0-9_.-]{3,255}$`)

var lockAttributes = []string{"ownerName", "leaseDuration", "recordVersionNumber", "data", "isReleased", "fencingToken", "leaseExpiresAt"}

func isLockAttribute(name string) bool {
	for _, a := range lockAttributes {
		if a == name {
			return true
		}
	}
	return false
}

// FuzzNewOptions: New accepts exactly the client options its documentation
// allows, rejects the others with an *InvalidArgumentError, and never calls
// DynamoDB.
func FuzzNewOptions(f *testing.F) {
	f.Add("locks", "key", false, "", "", "", int64(20*time.Second), int64(5*time.Second), 32, int64(0), "")
	f.Add("locks", "key", true, "sk", "v", "me", int64(time.Second), int64(250*time.Millisecond), 1, int64(time.Second), "ttl")
	f.Add("lo", "", true, "key", "", "", int64(0), int64(-1), 0, int64(-1), "key")
	f.Fuzz(func(t *testing.T, table, pk string, useSortKey bool, skName, skValue, owner string,
		lease, heartbeat int64, concurrency int, skew int64, ttl string) {
		db := dynamolocktest.New().Conn()
		opts := []dynamolock.ClientOption{
			dynamolock.WithPartitionKeyName(pk),
			dynamolock.WithOwnerName(owner),
			dynamolock.WithLeaseDuration(time.Duration(lease)),
			dynamolock.WithHeartbeatPeriod(time.Duration(heartbeat)),
			dynamolock.WithHeartbeatConcurrency(concurrency),
			dynamolock.WithClockSkewBound(time.Duration(skew)),
			dynamolock.WithTTLAttribute(ttl),
		}
		if useSortKey {
			opts = append(opts, dynamolock.WithSortKey(skName, skValue))
		} else {
			skName = ""
		}
		c, err := dynamolock.New(db, table, opts...)
		if callCount(db) != 0 {
			t.Fatal("New called DynamoDB")
		}
		// The documented rules.
		invalid := !fuzzTableName.MatchString(table) || pk == "" ||
			(useSortKey && (skName == "" || skName == pk || len(skValue) > 1024)) ||
			lease < int64(100*time.Millisecond) || heartbeat < 0 || (heartbeat > 0 && (heartbeat < int64(50*time.Millisecond) || heartbeat > lease/2)) ||
			concurrency < 1 || concurrency > 1024 || skew < 0 ||
			(ttl != "" && (ttl == pk || ttl == skName || isLockAttribute(ttl)))
		if err != nil {
			checkInvalid(t, err, "New")
			return
		}
		if invalid {
			t.Fatalf("New accepted invalid options: table %q pk %q sort key %v %q=%q lease %v heartbeat %v concurrency %d skew %v ttl %q",
				table, pk, useSortKey, skName, skValue, time.Duration(lease), time.Duration(heartbeat), concurrency, time.Duration(skew), ttl)
		}
		if owner != "" && c.OwnerName() != owner {
			t.Fatalf("owner %q, want %q", c.OwnerName(), owner)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzAcquireOptions: AcquireLock rejects bad keys and options with an
// *InvalidArgumentError before any call, and sends valid ones to DynamoDB.
func FuzzAcquireOptions(f *testing.F) {
	f.Add("k", int64(time.Second), int64(time.Second), uint8(0), "", int64(0), false, false)
	f.Add("", int64(0), int64(-1), uint8(255), "ownerName", int64(300*time.Millisecond), true, true)
	f.Add(strings.Repeat("k", 2049), int64(1), int64(0), uint8(199), "extra", int64(900*time.Millisecond), true, false)
	db := dynamolocktest.New().Conn() // no table
	c, err := dynamolock.New(db, "fuzz_table", dynamolock.WithLeaseDuration(time.Second), dynamolock.WithHeartbeatPeriod(250*time.Millisecond))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	f.Fuzz(func(t *testing.T, key string, refresh, additionalWait int64, dataKB uint8, attrName string,
		safeTime int64, useMonitor, failIfLocked bool) {
		data := make([]byte, int(dataKB)*2048)
		opts := []dynamolock.AcquireLockOption{
			dynamolock.WithRefreshPeriod(time.Duration(refresh)),
			dynamolock.WithAdditionalTimeToWaitForLock(time.Duration(additionalWait)),
			dynamolock.WithData(data),
		}
		if attrName != "" {
			opts = append(opts, dynamolock.WithAdditionalAttributes(map[string]types.AttributeValue{attrName: s("v")}))
		}
		if useMonitor {
			opts = append(opts, dynamolock.WithSessionMonitor(time.Duration(safeTime), nil))
		}
		if failIfLocked {
			opts = append(opts, dynamolock.FailIfLocked())
		}
		before := callCount(db)
		_, err := c.AcquireLockWithContext(context.Background(), key, opts...)
		calls := callCount(db) - before
		invalid := key == "" || len(key) > 2048 || refresh < int64(time.Millisecond) || additionalWait < 0 ||
			(additionalWait > 0 && additionalWait < int64(time.Millisecond)) ||
			attrName == "key" || isLockAttribute(attrName) ||
			(useMonitor && safeTime <= 0) ||
			len(data) > 400*1024
		// Near the 400 KB limit the size of the other attributes decides.
		borderline := len(data) > 400*1024-len(key)-len(attrName)-4096 && len(data) <= 400*1024
		var ie *dynamolock.InvalidArgumentError
		switch {
		case errors.As(err, &ie):
			checkInvalid(t, err, "AcquireLock")
			if calls != 0 {
				t.Fatalf("rejected input reached DynamoDB (%d calls): %v", calls, err)
			}
			if !invalid && !borderline {
				t.Fatalf("valid input rejected: %v", err)
			}
		case err == nil:
			t.Fatal("a lock granted without a table")
		default:
			if invalid {
				t.Fatalf("invalid input reached DynamoDB: %v", err)
			}
			if calls == 0 || !errors.Is(err, dynamolock.ErrTableNotFound) {
				t.Fatalf("valid input: %d calls, error %v", calls, err)
			}
		}
	})
}

// FuzzHeartbeatOptions: SendHeartbeat rejects bad options before any call
// and sends valid ones.
func FuzzHeartbeatOptions(f *testing.F) {
	f.Add(0, int64(0), int64(0), false, uint8(0), false)
	f.Add(-1, int64(-1), int64(-1), true, uint8(1), true)
	f.Add(3, int64(time.Millisecond), int64(time.Hour), false, uint8(201), true)
	f.Add(0, int64(0), int64(time.Hour), false, uint8(0), false)
	f.Add(2, int64(time.Millisecond), int64(2*time.Hour), true, uint8(0), false)
	f.Add(1, int64(0), int64(time.Hour), false, uint8(3), true)
	db := dynamolocktest.New().Conn()
	c, err := dynamolock.New(db, "fuzz_table", dynamolock.DisableHeartbeat(), dynamolock.WithLeaseDuration(time.Hour))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = c.Close() })
	if _, err := c.CreateTableWithContext(context.Background(), "fuzz_table"); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, retries int, retryWait, leaseToEnsure int64, deleteData bool, dataKB uint8, replaceData bool) {
		l, err := c.AcquireLockWithContext(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _, _ = c.ReleaseLockWithContext(context.Background(), l) }()
		opts := []dynamolock.SendHeartbeatOption{
			dynamolock.HeartbeatRetries(retries, time.Duration(retryWait)),
			dynamolock.WithLeaseDurationToEnsure(time.Duration(leaseToEnsure)),
		}
		var data []byte
		if replaceData {
			data = make([]byte, int(dataKB)*2048)
			opts = append(opts, dynamolock.ReplaceHeartbeatData(data))
		}
		if deleteData {
			opts = append(opts, dynamolock.DeleteData())
		}
		before := callCount(db)
		err = c.SendHeartbeatWithContext(context.Background(), l, opts...)
		calls := callCount(db) - before
		invalid := retries < 0 || retryWait < 0 || leaseToEnsure < int64(100*time.Millisecond) || (deleteData && replaceData) || len(data) > 400*1024
		borderline := len(data) > 400*1024-4096 && len(data) <= 400*1024
		if err != nil {
			checkInvalid(t, err, "SendHeartbeat")
			if calls != 0 {
				t.Fatalf("rejected input reached DynamoDB: %v", err)
			}
			if !invalid && !borderline {
				t.Fatalf("valid input rejected: %v", err)
			}
			return
		}
		if invalid {
			t.Fatal("invalid heartbeat options accepted")
		}
		if calls != 1 {
			t.Fatalf("a heartbeat made %d calls", calls)
		}
		if lease := l.LeaseDuration(); lease != time.Duration(leaseToEnsure) {
			t.Fatalf("lease %v after WithLeaseDurationToEnsure(%v)", lease, time.Duration(leaseToEnsure))
		}
	})
}
