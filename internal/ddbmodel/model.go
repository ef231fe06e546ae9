// Package ddbmodel is an in-memory, linearizable model of the part of
// Amazon DynamoDB that the lock library uses: CreateTable, DescribeTable,
// GetItem, PutItem, UpdateItem, DeleteItem, TransactWriteItems, Query,
// Scan, UpdateTimeToLive and DescribeTimeToLive, with the condition and
// update expressions the library sends. Every request takes effect at one
// instant, under one mutex, and a hook sees each one (with the items before
// and after) while that mutex is held, so a checker can compare the model
// with what clients believe at that instant.
//
// It answers as the DynamoDB service does, its documentation being the
// contract: what the service refuses it refuses (reserved words, numbers
// past 38 digits or DynamoDB's range, empty or oversized placeholder maps,
// the operand types of ADD and of comparisons, DynamoDB's quotas), and it
// gives the answers DynamoDB Local never gives: a transaction takes effect
// in two steps, between which a write of one of its items fails with a
// TransactionConflictException and another transaction including one is
// cancelled (transact.go); a ClientRequestToken is remembered for ten
// minutes (idempotency.go); TTL's setting changes once an hour.
//
// It is the test double of the deterministic simulation (internal/sim) and
// of the public package dynamolocktest, and is checked against DynamoDB
// Local by a differential test in this package, which lists where DynamoDB
// Local departs from the documentation (known_test.go).
// Attribute paths may name members of maps (#q.#w: the fair mode's queue),
// in conditions (attribute_exists, attribute_not_exists, size, comparisons)
// and updates (SET, REMOVE, ADD, if_not_exists); list elements ([n]) are not
// modelled. It counts the capacity units each request consumes and
// returns them when asked (capacity.go), but does not throttle; it does not
// model TTL deletion (the TTL setting is kept and described; no
// item is deleted for it), secondary indexes or streams; a request that
// needs them, or a legacy (pre-expression) parameter, fails with a
// ValidationException that says "ddbmodel: unsupported".
package ddbmodel

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Item is a DynamoDB item.
type Item = map[string]types.AttributeValue

// Change is one item as an operation found it and left it; a nil Before or
// After means the item did not exist. A ConditionCheck, or a write whose
// condition failed, has Before equal to After.
type Change struct {
	Table  string
	Key    string // the item's primary key, encoded (see KeyString)
	Before Item
	After  Item
}

// Event is one request as the model executed it.
type Event struct {
	Ctx     context.Context // the request's context: callers can tag it
	Seq     uint64          // 1, 2, ... in the order the requests took effect
	Op      string          // "UpdateItem", "TransactWriteItems", ...
	Input   any             // the request as given
	Err     error           // the error returned, nil on success
	Changes []Change
}

// Model is an in-memory DynamoDB. The zero value is not usable; call New.
type Model struct {
	mu     sync.Mutex
	tables map[string]*table
	seq    uint64
	hook   func(Event)
	// tokens: the ClientRequestTokens of transactions in progress and of
	// those committed within the idempotency window (idempotency.go).
	tokens tokenLog
	// inTx: the items of prepared transactions not yet committed, by
	// heldKey (transact.go).
	inTx map[string]*Transaction
	// now reads the clock: time.Now, virtual inside a testing/synctest
	// bubble. Windows of time (a token's, TTL's hour) are measured on it.
	now func() time.Time
	// capacity: the read and write units consumed per table (capacity.go).
	capacity map[string][2]float64
}

type table struct {
	name     string
	pk, sk   string // sk "" without a sort key
	pkType   types.ScalarAttributeType
	skType   types.ScalarAttributeType
	items    map[string]Item
	keySchem []types.KeySchemaElement
	attrDefs []types.AttributeDefinition
	ttl      string // the TTL attribute; "" while TTL is disabled
	// ttlChanged: when TTL was last enabled or disabled (zero: never).
	ttlChanged time.Time
}

// New returns an empty model.
func New() *Model {
	return &Model{tables: map[string]*table{}, inTx: map[string]*Transaction{}, now: time.Now}
}

// SetHook installs f, called after every request while the model's mutex is
// held: f must not call the model.
func (m *Model) SetHook(f func(Event)) {
	m.mu.Lock()
	m.hook = f
	m.mu.Unlock()
}

// Items returns a copy of every item of tableName, in key order.
func (m *Model) Items(tableName string) []Item {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.tables[tableName]
	if t == nil {
		return nil
	}
	var out []Item
	for _, k := range slices.Sorted(maps.Keys(t.items)) {
		out = append(out, cloneItem(t.items[k]))
	}
	return out
}

// Item returns a copy of the item of tableName under key (as encoded by
// KeyString), or nil.
func (m *Model) Item(tableName, key string) Item {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t := m.tables[tableName]; t != nil {
		return cloneItem(t.items[key])
	}
	return nil
}

// KeyString encodes a primary key value (partition key, and sort key or "")
// the way Change.Key does, for string keys.
func KeyString(pk, sk string) string { return fmt.Sprintf("%d:%s|%s", len(pk), pk, sk) }

func (m *Model) done(ctx context.Context, op string, in any, err error, changes []Change) {
	m.seq++
	if m.hook != nil {
		m.hook(Event{Ctx: ctx, Seq: m.seq, Op: op, Input: in, Err: err, Changes: changes})
	}
}

// ---- errors ----

func validation(format string, args ...any) error {
	return &smithy.GenericAPIError{Code: "ValidationException", Message: fmt.Sprintf(format, args...), Fault: smithy.FaultClient}
}

func asValidation(prefix string, err error) error {
	if _, ok := err.(*smithy.GenericAPIError); ok {
		return err
	}
	if e, ok := err.(exprError); ok {
		return validation("%s: %s", prefix, string(e))
	}
	return validation("%s: Syntax error; %v", prefix, err)
}

// errorMessage is the message of a model error (a ValidationException's
// text), or the error's text.
func errorMessage(err error) string {
	if e, ok := err.(*smithy.GenericAPIError); ok {
		return e.Message
	}
	return err.Error()
}

// exprError is an error in an expression that DynamoDB reports in its own
// words after the expression's kind ("Invalid ConditionExpression: ..."),
// where the model's parse errors are only "Syntax error; ...".
type exprError string

func (e exprError) Error() string { return string(e) }

func exprErrorf(format string, args ...any) error { return exprError(fmt.Sprintf(format, args...)) }

// errUnsupported marks a request shape this model does not implement; it is
// a ValidationException so that it never passes for success.
func errUnsupported(what string) error {
	return validation("ddbmodel: unsupported: %s", what)
}

func notFound() error {
	return &types.ResourceNotFoundException{Message: aws.String("Cannot do operations on a non-existent table")}
}

func conditionFailed(item Item, rv types.ReturnValuesOnConditionCheckFailure) error {
	e := &types.ConditionalCheckFailedException{Message: aws.String("The conditional request failed")}
	if rv == types.ReturnValuesOnConditionCheckFailureAllOld && item != nil {
		e.Item = cloneItem(item)
	}
	return e
}

// ---- tables ----
