package dynamolock

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/lockitem"
)

// lockRecord is a decoded lock item (lockitem.Record).
type lockRecord = lockitem.Record

// schema is the layout of one client's items: its keys and TTL attribute.
type schema struct{ lockitem.Layout }

func (s schema) reserved(name string) bool { return s.Reserved(name) }

// decodeItem reads a lock item as written by this client, Amazon's Java
// client or dynamolock v2. It never panics: anything it cannot interpret is
// an *ItemFormatError.
func (s schema) decodeItem(item map[string]types.AttributeValue) (*lockRecord, error) {
	r, err := s.Decode(item)
	return r, formatErr(err)
}

// uintAttr reads an optional non-negative N attribute; absent is 0.
func uintAttr(item map[string]types.AttributeValue, name string) (uint64, error) {
	u, err := lockitem.Uint(item, name)
	return u, formatErr(err)
}

// othersReserve is the room every lock item keeps for what the other kinds
// of holders and waiters add to it at their largest: an RWLock's
// MaxReaders reader entries and its two counters at 20 digits, and a fair
// queue of lockitem.MaxWaiters entries (an RWLock's carry their kind). Any key may
// get them (a fair waiter joins the queue of any lock; an RWLock's writer
// is the item's holder), and a write that pushed the item past DynamoDB's
// limit would be refused: a reader refused its place, a holder's renewal
// refused until the lock is lost.
var othersReserve = func() int {
	readers := make(map[string]types.AttributeValue, MaxReaders)
	queue := make(map[string]types.AttributeValue, lockitem.MaxWaiters)
	beat, big := strings.Repeat("b", 36), lockitem.N(math.MaxUint64) // a beat is a UUID, as newRVN writes it
	for i := range max(MaxReaders, lockitem.MaxWaiters) {
		id := fmt.Sprintf("%016x", i) // randomID's length
		if i < MaxReaders {
			readers[id] = readerEntry(beat, maxLease, sessionKeyPrefix+beat)
		}
		if i < lockitem.MaxWaiters {
			queue[id] = &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
				"t": lockitem.N(maxTicket), "b": lockitem.S(id), "l": lockitem.N(uint64(maxWaiterLease / time.Millisecond)), "k": lockitem.S("w"),
			}}
		}
	}
	return lockitem.Size(map[string]types.AttributeValue{
		lockitem.Readers:        &types.AttributeValueMemberM{Value: readers},
		lockitem.FairQueue:      &types.AttributeValueMemberM{Value: queue},
		lockitem.ReadersVersion: big,
		lockitem.WritersArrived: big,
	})
}()

// validateItemSize rejects data that would make the item larger than
// DynamoDB's 400 KB limit, counting every attribute the lock writes and
// the room kept for other holders and waiters (othersReserve).
func (c *Client) validateItemSize(option, key string, sortKey *string, data []byte, additional map[string]types.AttributeValue) error {
	// The key's attributes and the additional ones (whose names never
	// collide with the key's: see acquireOptions), counted as lockitem.Size
	// counts them, without building the item.
	keySize := len(c.cfg.partitionKeyName) + len(key)
	if sortKey != nil {
		keySize += len(c.cfg.sortKeyName) + len(*sortKey)
	}
	size := keySize + lockitem.Size(additional) + len(data) + len(lockitem.Data) +
		len(lockitem.OwnerName) + len(c.cfg.ownerName) +
		len(lockitem.LeaseDuration) + 24 + len(lockitem.RVN) + 36 +
		len(lockitem.IsReleased) + 1 + len(lockitem.FencingToken) + 12 +
		len(lockitem.LeaseExpiresAt) + 12 + len(lockitem.LeaseExpiresRVN) + 36 + len(c.cfg.ttlAttribute) + 12 +
		len(lockitem.Session) + len(sessionKeyPrefix) + 36 + othersReserve
	if size > lockitem.MaxItemBytes {
		value := strconv.Itoa(len(data)) + " bytes of data"
		if len(data) < size/2 {
			// The additional attributes make most of the item: name them.
			option = "WithAdditionalAttributes"
			value = strconv.Itoa(lockitem.Size(additional)) + " bytes of additional attributes"
		}
		return invalid(option, value, "the lock item would be about %d bytes (with %d kept for RWLock readers and fair-queue waiters), over DynamoDB's %d-byte item limit",
			size, othersReserve, lockitem.MaxItemBytes)
	}
	return nil
}

// guardedUpdate is a conditional UpdateItem of a held lock's item that, on
// failure, returns the item (so the caller can tell whether it is still this
// acquisition's).
func (c *Client) guardedUpdate(key map[string]types.AttributeValue, b *lockitem.Expr, update, cond string) *dynamodb.UpdateItemInput {
	return &dynamodb.UpdateItemInput{
		TableName:                           aws.String(c.cfg.tableName),
		Key:                                 key,
		UpdateExpression:                    aws.String(update),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            b.Names,
		ExpressionAttributeValues:           b.Values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}
}
