package dynamolocktest

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/arielsrv/dynamolock/v2/internal/ddbmodel"
)

// DB is an in-memory DynamoDB: its tables and their items. Hosts reach it
// through connections ([DB.Conn]); a test reads it with [DB.Items]. It is
// safe for concurrent use. The zero value is not usable; call [New].
type DB struct {
	model *ddbmodel.Model

	mu     sync.Mutex
	conns  int    // connections made so far, to name the next one
	tokens uint64 // ClientRequestTokens filled in so far
}

// New returns an empty DB: no tables. Create the lock table with the
// lock client, as a program does at start-up:
//
//	c, _ := dynamolock.New(db.Conn(), "locks")
//	_, err := c.CreateTableIfNotExists(ctx)
func New() *DB {
	return &DB{model: ddbmodel.New()}
}

// Conn returns a new connection to db: one host's view of it, with faults
// of its own (see [Conn.Partition]) and its own call counts. Give each
// simulated host its own Conn, so that a test can cut one off while the
// others go on.
func (db *DB) Conn() *Conn {
	db.check()
	db.mu.Lock()
	db.conns++
	n := db.conns
	db.mu.Unlock()
	return &Conn{db: db, name: fmt.Sprintf("conn-%d", n), calls: map[string]int{}}
}

// Items returns a copy of every item of the table named table, ordered by
// partition key, then sort key (string keys byte by byte), or nil when
// there is no such table. Each item maps attribute names to the SDK's
// attribute values, as GetItem would return it: a lock item has its
// partition key, "ownerName", "recordVersionNumber", "leaseDuration",
// "fencingToken" and, once released, "isReleased" (see the lock library's
// README for the whole item format).
//
// Items reads the DB directly: no connection's faults apply and no call
// is counted.
func (db *DB) Items(table string) []map[string]types.AttributeValue {
	db.check()
	desc, err := db.model.DescribeTable(context.Background(), &dynamodb.DescribeTableInput{TableName: aws.String(table)})
	if err != nil {
		return nil
	}
	var keys []string // partition key first
	for _, k := range desc.Table.KeySchema {
		if k.KeyType == types.KeyTypeHash {
			keys = append([]string{aws.ToString(k.AttributeName)}, keys...)
		} else {
			keys = append(keys, aws.ToString(k.AttributeName))
		}
	}
	items := db.model.Items(table)
	slices.SortStableFunc(items, func(a, b map[string]types.AttributeValue) int {
		for _, k := range keys {
			if c := cmp.Compare(keyText(a[k]), keyText(b[k])); c != 0 {
				return c
			}
		}
		return 0
	})
	return items
}

// keyText is a key attribute's value as text, for ordering: strings and
// binaries byte by byte; numbers as their text, which orders numbers of one
// length only (lock tables have string keys).
func keyText(v types.AttributeValue) string {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return v.Value
	case *types.AttributeValueMemberN:
		return v.Value
	case *types.AttributeValueMemberB:
		return string(v.Value)
	}
	return ""
}

func (db *DB) check() {
	if db == nil || db.model == nil {
		panic("dynamolocktest: a DB not made by New (a nil or zero DB)")
	}
}

// nextToken returns a fresh ClientRequestToken, as the SDK fills one into
// every TransactWriteItems call that has none.
func (db *DB) nextToken() string {
	db.mu.Lock()
	defer db.mu.Unlock()
	db.tokens++
	return fmt.Sprintf("dynamolocktest-%d", db.tokens)
}
