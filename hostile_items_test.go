package dynamolock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/arielsrv/dynamolock/v2"
)

func n(v string) *types.AttributeValueMemberN { return &types.AttributeValueMemberN{Value: v} }
func b(v []byte) *types.AttributeValueMemberB { return &types.AttributeValueMemberB{Value: v} }

// outcome is how the lock client must treat a hostile item.
type outcome int

const (
	// malformed: a *ItemFormatError naming the attribute; the item is
	// treated as held (never free).
	malformed outcome = iota
	// held: a well-formed item of a live owner.
	held
	// acquired: a released item whose odd attributes the acquisition
	// overwrites.
	acquired
	// rejected: DynamoDB refuses the acquiring write (a ValidationException
	// wrapped in a *LockNotGrantedError); nobody gets the lock.
	rejected
)

// hostileItem is a lock item another tool wrote.
type hostileItem struct {
	name string
	// attrs are the item's attributes besides the key.
	attrs map[string]types.AttributeValue
	want  outcome
	// attribute named by the *ItemFormatError (malformed only).
	attribute string
}

func validLock(extra map[string]types.AttributeValue, drop ...string) map[string]types.AttributeValue {
	item := map[string]types.AttributeValue{
		"ownerName": s("tool"), "leaseDuration": s("20s"), "recordVersionNumber": s("rvn-1"), "fencingToken": n("7"),
	}
	for _, d := range drop {
		delete(item, d)
	}
	for k, v := range extra {
		item[k] = v
	}
	return item
}

var released = map[string]types.AttributeValue{"isReleased": s("1")}

func with(a, b map[string]types.AttributeValue) map[string]types.AttributeValue {
	out := make(map[string]types.AttributeValue, len(a)+len(b))
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func hostileItems() []hostileItem {
	huge := make([]byte, 380*1024)
	// Fits in an item with its key, but not with the lock's attributes added.
	tooHugeKey := "hostile/released, data too big to add the lock's attributes"
	tooHuge := make([]byte, 409600-len("key")-len(tooHugeKey)-len("data")-len("isReleased")-1-8)
	return []hostileItem{
		{"only the key", map[string]types.AttributeValue{}, malformed, "ownerName"},
		{"missing owner", validLock(nil, "ownerName"), malformed, "ownerName"},
		{"owner of type N", validLock(map[string]types.AttributeValue{"ownerName": n("42")}), malformed, "ownerName"},
		{"empty owner", validLock(map[string]types.AttributeValue{"ownerName": s("")}), malformed, "ownerName"},
		{"owner of type NULL", validLock(map[string]types.AttributeValue{"ownerName": &types.AttributeValueMemberNULL{Value: true}}), malformed, "ownerName"},
		{"missing RVN", validLock(nil, "recordVersionNumber"), malformed, "recordVersionNumber"},
		{"RVN of type B", validLock(map[string]types.AttributeValue{"recordVersionNumber": b([]byte("x"))}), malformed, "recordVersionNumber"},
		{"missing lease", validLock(nil, "leaseDuration"), malformed, "leaseDuration"},
		{"unparseable lease", validLock(map[string]types.AttributeValue{"leaseDuration": s("forever")}), malformed, "leaseDuration"},
		{"negative lease", validLock(map[string]types.AttributeValue{"leaseDuration": s("-5s")}), malformed, "leaseDuration"},
		{"negative lease in milliseconds", validLock(map[string]types.AttributeValue{"leaseDuration": s("-5000")}), malformed, "leaseDuration"},
		{"lease in milliseconds out of range", validLock(map[string]types.AttributeValue{"leaseDuration": s("99999999999999999")}), malformed, "leaseDuration"},
		{"lease of type N", validLock(map[string]types.AttributeValue{"leaseDuration": n("20000")}), malformed, "leaseDuration"},
		{"data of type S", validLock(map[string]types.AttributeValue{"data": s("text")}), malformed, "data"},
		{"fencing token of type S", validLock(map[string]types.AttributeValue{"fencingToken": s("7")}), malformed, "fencingToken"},
		{"negative fencing token", validLock(map[string]types.AttributeValue{"fencingToken": n("-3")}), malformed, "fencingToken"},
		{"fractional fencing token", validLock(map[string]types.AttributeValue{"fencingToken": n("1.5")}), malformed, "fencingToken"},
		{"fencing token over uint64", validLock(map[string]types.AttributeValue{"fencingToken": n("184467440737095516160")}), malformed, "fencingToken"},
		{"expiry of type S", validLock(map[string]types.AttributeValue{"leaseExpiresAt": s("soon")}), malformed, "leaseExpiresAt"},
		{"huge data", validLock(map[string]types.AttributeValue{"data": b(huge)}), held, ""},
		{"huge lease", validLock(map[string]types.AttributeValue{"leaseDuration": s("2540000h")}), held, ""},
		{"odd extra attributes", validLock(map[string]types.AttributeValue{
			"x": &types.AttributeValueMemberL{Value: []types.AttributeValue{&types.AttributeValueMemberNULL{Value: true}}},
			"y": &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{"z": s("")}},
		}), held, ""},

		// Released items: presence of isReleased is what counts.
		{"released, missing owner", with(validLock(nil, "ownerName"), released), acquired, ""},
		{"released, unparseable lease", with(validLock(map[string]types.AttributeValue{"leaseDuration": s("forever")}), released), acquired, ""},
		{"released, isReleased of type BOOL false", validLock(map[string]types.AttributeValue{"isReleased": &types.AttributeValueMemberBOOL{Value: false}}), acquired, ""},
		{"released, huge data", with(validLock(map[string]types.AttributeValue{"data": b(huge)}), released), acquired, ""},
		{tooHugeKey[len("hostile/"):], with(map[string]types.AttributeValue{"data": b(tooHuge)}, released), rejected, ""},
		{"released, fencing token of type S", with(validLock(map[string]types.AttributeValue{"fencingToken": s("7")}), released), rejected, ""},
	}
}

// Items that another tool corrupted give a clear error or are treated as
// held; none panics, and two contenders never both get one.
func TestHostileItems(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c1 := newClient(t, db, table, fast...)
	c2 := newClient(t, db, table, fast...)

	for _, hi := range hostileItems() {
		t.Run(hi.name, func(t *testing.T) {
			key := "hostile/" + hi.name
			putRaw(t, db, table, with(hi.attrs, map[string]types.AttributeValue{"key": s(key)}))

			view, err := c1.GetWithContext(ctx, key)
			switch hi.want {
			case malformed:
				var fe *dynamolock.ItemFormatError
				require.ErrorAs(t, err, &fe, "Get")
				assert.Equal(t, hi.attribute, fe.Attribute)
				assert.Contains(t, err.Error(), key)
			case held:
				require.NoError(t, err)
				assert.Equal(t, "tool", view.OwnerName())
			}

			// Two contenders at once: at most one wins.
			locks := make([]*dynamolock.Lock, 2)
			errs := make([]error, 2)
			var wg sync.WaitGroup
			for i, c := range []*dynamolock.Client{c1, c2} {
				wg.Go(func() {
					locks[i], errs[i] = c.AcquireLockWithContext(ctx, key, dynamolock.FailIfLocked())
				})
			}
			wg.Wait()
			won, winner := 0, -1
			for i := range locks {
				if errs[i] == nil {
					won++
					winner = i
					assert.NoError(t, locks[i].Err())
					continue
				}
				var lng *dynamolock.LockNotGrantedError
				require.ErrorAs(t, errs[i], &lng, "contender %d", i)
				switch hi.want {
				case malformed:
					var fe *dynamolock.ItemFormatError
					require.ErrorAs(t, errs[i], &fe)
					assert.Equal(t, hi.attribute, fe.Attribute)
				case held, acquired:
					var lh *dynamolock.LockHeldError
					require.ErrorAs(t, errs[i], &lh, "the loser sees the lock held")
				case rejected:
					var ae smithy.APIError
					require.ErrorAs(t, errs[i], &ae)
					assert.Equal(t, "ValidationException", ae.ErrorCode())
				}
			}
			if hi.want == acquired {
				require.Equal(t, 1, won, "one contender acquires a released item: %v", errs)
				// The acquisition replaced the odd attributes: the item is a
				// well-formed lock of the winner now.
				w := locks[winner]
				got, err := c1.GetWithContext(ctx, key)
				require.NoError(t, err)
				assert.Equal(t, w.OwnerName(), got.OwnerName())
				assert.Equal(t, w.FencingToken(), got.FencingToken()) // not the RVN: heartbeats change it
				assert.Positive(t, w.FencingToken())
				_, err = []*dynamolock.Client{c1, c2}[winner].ReleaseLockWithContext(ctx, w)
				require.NoError(t, err)
			} else {
				require.Zero(t, won, "nobody may acquire it: %v", errs)
			}
		})
	}

	// A listing yields an error for each malformed item and goes on.
	var good, bad int
	for l, err := range c1.AllLocks(ctx) {
		if err != nil {
			var fe *dynamolock.ItemFormatError
			require.ErrorAs(t, err, &fe)
			bad++
			continue
		}
		require.NotNil(t, l)
		good++
	}
	assert.Positive(t, bad)
	assert.Positive(t, good)
}

// A contender that waits on a malformed item gives up at once with the
// format error instead of waiting, and never takes it over.
func TestMalformedItemIsNeverTakenOver(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	c := newClient(t, db, table, fast...)
	putRaw(t, db, table, validLock(map[string]types.AttributeValue{"key": s("k"), "leaseDuration": s("1 fortnight")}))
	start := time.Now()
	_, err := c.AcquireLockWithContext(ctx, "k", dynamolock.WithRefreshPeriod(50*time.Millisecond))
	var fe *dynamolock.ItemFormatError
	require.ErrorAs(t, err, &fe)
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, s("tool"), rawItem(t, db, table, keyOf("k"))["ownerName"], "the item was not touched")
}

// A held lock whose item another tool corrupts: a corruption that makes the
// item another owner's, released or unrecognisable loses the lock at the
// next heartbeat (Done closes, cause "taken over"); one that leaves this
// acquisition recognisable keeps it. Nothing panics, and after a loss
// another client can take the item only if it is released or well formed.
func TestHeldLockCorruptedBehindTheHoldersBack(t *testing.T) {
	table := newTable(t, "")
	db, _ := newDB(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		corrupt func(item map[string]types.AttributeValue)
		lost    bool
	}{
		{"owner of type N", func(item map[string]types.AttributeValue) { item["ownerName"] = n("1") }, true},
		{"owner removed", func(item map[string]types.AttributeValue) { delete(item, "ownerName") }, true},
		{"isReleased added", func(item map[string]types.AttributeValue) {
			item["isReleased"] = &types.AttributeValueMemberBOOL{Value: false}
		}, true},
		{"RVN and fencing token replaced", func(item map[string]types.AttributeValue) {
			item["recordVersionNumber"] = s("other")
			item["fencingToken"] = n("1000")
		}, true},
		{"lease unparseable", func(item map[string]types.AttributeValue) { item["leaseDuration"] = s("forever") }, false},
		{"data of type S", func(item map[string]types.AttributeValue) { item["data"] = s("text") }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, db, table, fast...)
			key := "corrupt/" + tc.name
			l, err := c.AcquireLockWithContext(ctx, key)
			require.NoError(t, err)
			item := rawItem(t, db, table, keyOf(key))
			tc.corrupt(item)
			putRaw(t, db, table, item)
			if tc.lost {
				require.True(t, closedWithin(l.Done(), 2*time.Second), "the next heartbeat notices")
				assert.ErrorIs(t, l.Err(), dynamolock.ErrLockTakenOver)
				return
			}
			sent := c.Stats().HeartbeatsSent
			waitFor(t, 2*time.Second, "two heartbeats", func() bool { return c.Stats().HeartbeatsSent >= sent+2 })
			require.NoError(t, l.Err())
			got, err := c.GetWithContext(ctx, key)
			require.NoError(t, err)
			assert.Same(t, l, got)
		})
	}
}
